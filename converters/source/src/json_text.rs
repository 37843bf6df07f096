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

/// A float as JSON: the shortest decimal that reads back to `v`; NaN and the infinities,
/// which JSON lacks, as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.
pub fn float(v: f64) -> String {
    if v.is_nan() {
        "\"NaN\"".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        }
        .into()
    } else {
        format!("{v:?}")
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
}
