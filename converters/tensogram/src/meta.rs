//! Tensogram metadata (CBOR values) → typed attributes with dotted keys, and → JSON text.
//!
//! A nested map `{"mars": {"param": "2t"}}` becomes the attribute `mars.param` = `Text("2t")`.
//! Leaves are typed: integers → `I64` (`U64` above `i64::MAX`), floats → `F64`, booleans → `U8`
//! 0/1, text → `Text`, byte strings → `Text` when they are UTF-8 (else `U8`), arrays of integers /
//! floats / booleans → typed vectors, arrays of text → `TextList`. Whatever has no attribute form
//! (null, tags, empty maps, arrays of maps or of mixed kinds, non-text map keys, keys that contain
//! a dot or collide once flattened) makes the flattening *lossy*: the caller then also keeps the
//! whole structure as JSON text ([`json_entries`]) so that nothing is lost.

use std::collections::HashSet;

use ciborium::Value;
use tet_source::{AttrValue, Attrs};

/// Appends the flattened `entries` (keys prefixed with `prefix`, if not empty) to `out`.
/// Returns `true` when the attributes do not carry everything the values hold.
pub(crate) fn flatten_entries<'v, I>(prefix: &str, entries: I, out: &mut Attrs) -> bool
where
    I: IntoIterator<Item = (&'v str, &'v Value)>,
{
    let mut f = Flattener {
        seen: out.iter().map(|(k, _)| k.clone()).collect(),
        out,
        lossy: false,
    };
    for (k, v) in entries {
        if k.contains('.') || k.is_empty() {
            f.lossy = true;
        }
        f.value(join(prefix, k), v);
    }
    f.lossy
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

struct Flattener<'a> {
    out: &'a mut Attrs,
    seen: HashSet<String>,
    lossy: bool,
}

impl Flattener<'_> {
    fn value(&mut self, key: String, v: &Value) {
        match v {
            Value::Map(m) => {
                if m.is_empty() {
                    self.lossy = true;
                }
                for (k, v) in m {
                    let name = match k {
                        Value::Text(s) => s.clone(),
                        other => {
                            self.lossy = true;
                            key_text(other)
                        }
                    };
                    if name.contains('.') || name.is_empty() {
                        self.lossy = true;
                    }
                    self.value(join(&key, &name), v);
                }
            }
            Value::Tag(_, inner) => {
                self.lossy = true;
                self.value(key, inner);
            }
            Value::Null => self.lossy = true,
            leaf => {
                let (attr, exact) = leaf_attr(leaf);
                if !exact {
                    self.lossy = true;
                }
                if self.seen.insert(key.clone()) {
                    self.out.push((key, attr));
                } else {
                    self.lossy = true;
                }
            }
        }
    }
}

/// The attribute form of a non-map value, and whether it is exact.
fn leaf_attr(v: &Value) -> (AttrValue, bool) {
    match v {
        Value::Integer(i) => int_attr(i128::from(*i)),
        Value::Float(f) => (AttrValue::F64(vec![*f]), true),
        Value::Bool(b) => (AttrValue::U8(vec![u8::from(*b)]), true),
        Value::Text(s) => (AttrValue::Text(s.clone()), true),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => (AttrValue::Text(s.to_string()), false),
            Err(_) => (AttrValue::U8(b.clone()), false),
        },
        Value::Array(a) => array_attr(a),
        other => (AttrValue::Text(json(other)), false),
    }
}

fn int_attr(i: i128) -> (AttrValue, bool) {
    if let Ok(x) = i64::try_from(i) {
        (AttrValue::I64(vec![x]), true)
    } else if let Ok(x) = u64::try_from(i) {
        (AttrValue::U64(vec![x]), true)
    } else {
        (AttrValue::Text(i.to_string()), false)
    }
}

fn array_attr(a: &[Value]) -> (AttrValue, bool) {
    if a.is_empty() {
        // An empty list has no element type: an empty text list, and the JSON keeps it exactly.
        return (AttrValue::TextList(Vec::new()), false);
    }
    let ints: Option<Vec<i128>> = a
        .iter()
        .map(|v| match v {
            Value::Integer(i) => Some(i128::from(*i)),
            _ => None,
        })
        .collect();
    if let Some(ints) = ints {
        if let Ok(v) = ints.iter().map(|&i| i64::try_from(i)).collect() {
            return (AttrValue::I64(v), true);
        }
        if let Ok(v) = ints.iter().map(|&i| u64::try_from(i)).collect() {
            return (AttrValue::U64(v), true);
        }
        return (AttrValue::Text(json_array(a)), false);
    }
    let floats: Option<Vec<f64>> = a
        .iter()
        .map(|v| match v {
            Value::Float(f) => Some(*f),
            Value::Integer(i) => Some(i128::from(*i) as f64),
            _ => None,
        })
        .collect();
    if let Some(floats) = floats {
        // Exact only when no integer had to become a float.
        let exact = a.iter().all(|v| matches!(v, Value::Float(_)));
        return (AttrValue::F64(floats), exact);
    }
    let texts: Option<Vec<String>> = a
        .iter()
        .map(|v| match v {
            Value::Text(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    if let Some(texts) = texts {
        return (AttrValue::TextList(texts), true);
    }
    let bools: Option<Vec<u8>> = a
        .iter()
        .map(|v| match v {
            Value::Bool(b) => Some(u8::from(*b)),
            _ => None,
        })
        .collect();
    if let Some(bools) = bools {
        return (AttrValue::U8(bools), true);
    }
    (AttrValue::Text(json_array(a)), false)
}

/// A map key that is not text, as text.
fn key_text(v: &Value) -> String {
    match v {
        Value::Text(s) => s.clone(),
        Value::Integer(i) => i128::from(*i).to_string(),
        other => json(other),
    }
}

/// JSON text of a map given as entries.
pub(crate) fn json_entries<'v, I>(entries: I) -> String
where
    I: IntoIterator<Item = (&'v str, &'v Value)>,
{
    let mut out = String::from("{");
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(k, &mut out);
        out.push(':');
        write_json(v, &mut out);
    }
    out.push('}');
    out
}

/// JSON text of one value. Non-finite floats are the strings `"NaN"`, `"Infinity"`,
/// `"-Infinity"`; tags are dropped (their content kept); byte strings are text when UTF-8, else
/// arrays of byte values; non-text map keys are written as text.
pub(crate) fn json(v: &Value) -> String {
    let mut out = String::new();
    write_json(v, &mut out);
    out
}

fn json_array(a: &[Value]) -> String {
    let mut out = String::new();
    write_array(a.iter(), &mut out);
    out
}

fn write_array<'v>(items: impl Iterator<Item = &'v Value>, out: &mut String) {
    out.push('[');
    for (i, v) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_json(v, out);
    }
    out.push(']');
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Integer(i) => out.push_str(&i128::from(*i).to_string()),
        // The shortest exact form (`1.0`, `1e300`), non-finite values spelled as the product
        // spells them everywhere.
        Value::Float(f) => out.push_str(&tet_source::json_text::float(*f)),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Null => out.push_str("null"),
        Value::Text(s) => json_string(s, out),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => json_string(s, out),
            Err(_) => {
                out.push('[');
                for (i, x) in b.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&x.to_string());
                }
                out.push(']');
            }
        },
        Value::Array(a) => write_array(a.iter(), out),
        Value::Map(m) => {
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_string(&key_text(k), out);
                out.push(':');
                write_json(v, out);
            }
            out.push('}');
        }
        Value::Tag(_, inner) => write_json(inner, out),
        // `ciborium::Value` is non-exhaustive.
        _ => out.push_str("null"),
    }
}

fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Value {
        Value::Text(s.to_string())
    }

    #[test]
    fn nested_maps_flatten_to_dotted_typed_keys() {
        let mars = Value::Map(vec![
            (text("date"), Value::Integer(20260101.into())),
            (text("param"), text("2t")),
            (text("levels"), Value::Array(vec![1000.into(), 850.into()])),
            (
                text("grid"),
                Value::Array(vec![Value::Float(0.25), 1.into()]),
            ),
            (text("ok"), Value::Bool(true)),
            (text("tags"), Value::Array(vec![text("a"), text("b")])),
        ]);
        let mut out = Attrs::new();
        let lossy = flatten_entries("", [("mars", &mars), ("units", &text("K"))], &mut out);
        assert_eq!(
            out,
            vec![
                ("mars.date".into(), AttrValue::I64(vec![20260101])),
                ("mars.param".into(), AttrValue::Text("2t".into())),
                ("mars.levels".into(), AttrValue::I64(vec![1000, 850])),
                ("mars.grid".into(), AttrValue::F64(vec![0.25, 1.0])),
                ("mars.ok".into(), AttrValue::U8(vec![1])),
                (
                    "mars.tags".into(),
                    AttrValue::TextList(vec!["a".into(), "b".into()])
                ),
                ("units".into(), AttrValue::Text("K".into())),
            ]
        );
        // The mixed int/float array lost its integer-ness.
        assert!(lossy);
    }

    #[test]
    fn structures_without_attribute_form_are_lossy_but_kept_as_json() {
        let steps = Value::Array(vec![
            Value::Map(vec![(text("a"), 1.into())]),
            Value::Map(vec![(text("b"), Value::Null)]),
        ]);
        let mut out = Attrs::new();
        let lossy = flatten_entries("", [("steps", &steps)], &mut out);
        assert!(lossy);
        assert_eq!(
            out,
            vec![(
                "steps".into(),
                AttrValue::Text(r#"[{"a":1},{"b":null}]"#.into())
            )]
        );
        assert_eq!(
            json_entries([("steps", &steps), ("x", &Value::Float(f64::NAN))]),
            r#"{"steps":[{"a":1},{"b":null}],"x":"NaN"}"#
        );
    }

    #[test]
    fn exact_values_are_not_lossy_and_collisions_are() {
        let mut out = Attrs::new();
        let big = Value::Integer(u64::MAX.into());
        assert!(!flatten_entries("p", [("big", &big)], &mut out));
        assert_eq!(out, vec![("p.big".into(), AttrValue::U64(vec![u64::MAX]))]);
        let inner = Value::Map(vec![(text("b"), 1.into())]);
        let mut out = Attrs::new();
        let lossy = flatten_entries("", [("a", &inner), ("a.b", &text("x"))], &mut out);
        assert!(lossy);
        assert_eq!(out, vec![("a.b".into(), AttrValue::I64(vec![1]))]);
    }

    #[test]
    fn json_escapes_and_numbers() {
        let v = Value::Map(vec![
            (text("q\"\n"), Value::Float(1e300)),
            (Value::Integer(7.into()), Value::Float(-0.5)),
            (text("i"), Value::Float(f64::NEG_INFINITY)),
        ]);
        assert_eq!(json(&v), r#"{"q\"\n":1e300,"7":-0.5,"i":"-Infinity"}"#);
    }
}
