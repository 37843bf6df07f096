//! JSON as the product writes it: values that have no typed attribute form (an HDF5 or netCDF
//! compound, vlen or opaque attribute) spelled as JSON text inside an
//! [`crate::AttrValue::Text`], one spelling for every importer so the footer reads alike
//! whatever the source; and JSON documents with sorted keys (footer, Zarr metadata).

/// `s` as a JSON string literal: `"`, `\` and control characters escaped (`\n`, `\r`, `\t`,
/// others as `\u00XX`), everything else as it is.
pub fn string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The product's one spelling of the floats JSON lacks: `NaN`, `Infinity`, `-Infinity`
/// (`None` for a finite `v`). Footers, Zarr metadata, labels and attribute JSON all use it.
pub fn non_finite(v: f64) -> Option<&'static str> {
    if v.is_nan() {
        Some("NaN")
    } else if v.is_infinite() {
        Some(if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        None
    }
}

/// The float a [`non_finite`] spelling names.
pub fn parse_non_finite(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// A float as JSON text: the shortest decimal that reads back to `v`; NaN and the infinities
/// as the strings of [`non_finite`].
pub fn float(v: f64) -> String {
    match non_finite(v) {
        Some(name) => format!("\"{name}\""),
        None => format!("{v:?}"),
    }
}

/// A float as a JSON value: a number, or the [`non_finite`] spelling as a string.
pub fn float_value(v: f64) -> serde_json::Value {
    match non_finite(v) {
        Some(name) => serde_json::Value::String(name.into()),
        None => serde_json::Number::from_f64(v)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
    }
}

/// A float as label text: Rust's shortest form (`0.5`, `1e300`), or the [`non_finite`]
/// spelling.
pub fn float_label(v: f64) -> String {
    match non_finite(v) {
        Some(name) => name.into(),
        None => v.to_string(),
    }
}

/// `v` with the keys of every object in sorted order. serde_json keeps insertion order when any
/// crate in the build enables its `preserve_order` feature; sorting explicitly keeps output
/// bytes (the `.tet` footer, Zarr metadata) the same either way.
pub fn canonical(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_floats() {
        assert_eq!(string("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\u0001é\"");
        assert_eq!(float(0.1), "0.1");
        assert_eq!(float(-2.0), "-2.0");
        assert_eq!(float(f64::NAN), "\"NaN\"");
        assert_eq!(float(f64::NEG_INFINITY), "\"-Infinity\"");
    }

    #[test]
    fn one_spelling_of_non_finite_floats_in_every_form() {
        for (v, name) in [
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(non_finite(v), Some(name));
            assert_eq!(float(v), format!("\"{name}\""));
            assert_eq!(float_value(v), serde_json::Value::String(name.into()));
            assert_eq!(float_label(v), name);
            let back = parse_non_finite(name).unwrap();
            assert!(back == v || (back.is_nan() && v.is_nan()));
        }
        assert_eq!(non_finite(0.1), None);
        assert_eq!(float(1e300), "1e300");
        assert_eq!(float_value(-0.5), serde_json::json!(-0.5));
        assert_eq!(float_label(2.0), "2");
        assert_eq!(parse_non_finite("nan"), None);
    }
}
