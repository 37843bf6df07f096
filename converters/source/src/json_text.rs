//! Values written as JSON text: how importers spell a value that has no typed attribute form
//! (an HDF5 or netCDF compound, vlen or opaque attribute) inside an [`crate::AttrValue::Text`],
//! one spelling for every importer so the footer reads alike whatever the source.

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
