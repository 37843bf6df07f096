//! The footer's extension facts in a person's words, for `tet info --metadata`: `role
//! "coordinate"` reads "coordinate variable", `source_facts [["unlimited_dims", {"text_list":
//! ["time"]}]]` reads "unlimited dimension: time". `tet info --json` keeps the machine form.
//!
//! Known keys get their own phrase; any other key is spelled with spaces for underscores and its
//! value in plain text (a typed value `{"text_list": [...]}`, `{"f64": [...]}` as its items,
//! a list as its items joined), so a fact added later still reads as words.

use serde_json::Value;

/// The lines (`label: text`) that tell the fact `key` = `value`.
pub(super) fn describe(key: &str, value: &Value) -> Vec<String> {
    match (key, value) {
        ("role", Value::String(r)) => vec![format!("role: {r} variable")],
        ("source_facts", Value::Array(facts)) => facts.iter().map(source_fact).collect(),
        ("source_chunks", Value::Array(extents)) => {
            vec![format!("source chunks: {}", joined(extents, " × "))]
        }
        _ => vec![format!("{}: {}", label(key), plain(value))],
    }
}

/// One recorded source fact, `[name, typed value]`.
fn source_fact(fact: &Value) -> String {
    let Some([Value::String(name), v]) = fact.as_array().map(Vec::as_slice) else {
        return plain(fact);
    };
    match (name.as_str(), items(v)) {
        ("unlimited_dims", Some(dims)) if dims.len() == 1 => {
            format!("unlimited dimension: {}", joined(dims, ", "))
        }
        ("unlimited_dims", Some(dims)) => {
            format!("unlimited dimensions: {}", joined(dims, ", "))
        }
        _ => format!("{}: {}", label(name), plain(v)),
    }
}

/// A key as words: `source_filters` → `source filters`.
fn label(key: &str) -> String {
    key.replace('_', " ")
}

/// The tags of a typed attribute value as the footer spells them (`{"f64": [1.5]}`).
const TYPE_TAGS: &[&str] = &[
    "text",
    "text_list",
    "i8",
    "u8",
    "i16",
    "u16",
    "i32",
    "u32",
    "i64",
    "u64",
    "f32",
    "f64",
];

/// The value inside a typed value (`{"text": "big"}` → `"big"`), `None` for anything else.
fn untagged(v: &Value) -> Option<&Value> {
    let o = v.as_object()?;
    let (tag, inner) = o.iter().next()?;
    (o.len() == 1 && TYPE_TAGS.contains(&tag.as_str())).then_some(inner)
}

/// The items of a list, or of a typed value holding one (`{"text_list": [...]}`).
fn items(v: &Value) -> Option<&[Value]> {
    untagged(v).unwrap_or(v).as_array().map(Vec::as_slice)
}

/// `values` in plain text, separated by `sep`.
fn joined(values: &[Value], sep: &str) -> String {
    values.iter().map(plain).collect::<Vec<_>>().join(sep)
}

/// A value in plain text: text without quotes, a list or a typed value as its items, any
/// other object as compact JSON.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".into(),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
        Value::Array(a) => joined(a, ", "),
        Value::Object(_) => match untagged(v) {
            Some(inner) => plain(inner),
            None => v.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::describe;
    use serde_json::json;

    #[test]
    fn facts_read_as_words() {
        assert_eq!(
            describe("role", &json!("coordinate")),
            ["role: coordinate variable"]
        );
        assert_eq!(
            describe(
                "source_facts",
                &json!([["unlimited_dims", {"text_list": ["time"]}], ["endian", {"text": "big"}]])
            ),
            ["unlimited dimension: time", "endian: big"]
        );
        assert_eq!(
            describe("source_chunks", &json!([1, 90, 180])),
            ["source chunks: 1 × 90 × 180"]
        );
        assert_eq!(
            describe("source_filters", &json!(["shuffle", "deflate(4)"])),
            ["source filters: shuffle, deflate(4)"]
        );
        assert_eq!(
            describe("source_dtype", &json!({"f64": [1.5, 2.0]})),
            ["source dtype: 1.5, 2.0"]
        );
    }
}
