//! numpy's conventions that more than one importer reads (NPY/NPZ files, Zarr arrays written
//! from numpy dtypes): how `S` and `U` values become text, and the name of an unnamed record
//! field. One implementation, so the same bytes give the same strings whatever the container.

/// A numpy `S` value: trailing NULs removed (numpy's padding), UTF-8 when valid, else Latin-1
/// (one character per byte, nothing lost).
pub fn decode_bytes(b: &[u8]) -> String {
    let end = b.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
    let b = &b[..end];
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => b.iter().map(|&c| char::from(c)).collect(),
    }
}

/// A numpy `U` value (UCS-4 code points, little-endian unless `big`): trailing NULs removed.
/// A code point that is not a Unicode scalar value (numpy allows surrogates) has no exact UTF-8
/// form: `Err` naming it.
pub fn decode_ucs4(b: &[u8], big: bool) -> Result<String, NotScalarValue> {
    let cps: Vec<u32> = b
        .chunks_exact(4)
        .map(|c| {
            let a = [c[0], c[1], c[2], c[3]];
            if big {
                u32::from_be_bytes(a)
            } else {
                u32::from_le_bytes(a)
            }
        })
        .collect();
    let end = cps.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
    cps[..end]
        .iter()
        .map(|&c| char::from_u32(c).ok_or(NotScalarValue(c)))
        .collect()
}

/// A numpy `U` value holds this code point, which is not a Unicode scalar value (a surrogate or
/// beyond U+10FFFF): it has no exact UTF-8 form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "unicode string holds code point {0:#x}, which is not a Unicode scalar value \
     (no exact UTF-8 form)"
)]
pub struct NotScalarValue(pub u32);

/// The name of record field `i` when it has none: `f<i>`, as numpy names unnamed fields, with
/// `_` appended while another field (`taken`) already has that name.
pub fn unnamed_field(i: usize, taken: impl Fn(&str) -> bool) -> String {
    let mut n = format!("f{i}");
    while taken(&n) {
        n.push('_');
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_names() {
        assert_eq!(decode_bytes(b"caf\xc3\xa9\0\0"), "café");
        assert_eq!(decode_bytes(b"\xff\xfeA"), "\u{ff}\u{fe}A");
        assert_eq!(decode_bytes(b"a\0b\0"), "a\0b");
        let u: Vec<u8> = ['é', '中', '\0']
            .iter()
            .flat_map(|&c| (c as u32).to_le_bytes())
            .collect();
        assert_eq!(decode_ucs4(&u, false).as_deref(), Ok("é中"));
        let be: Vec<u8> = ['x']
            .iter()
            .flat_map(|&c| (c as u32).to_be_bytes())
            .collect();
        assert_eq!(decode_ucs4(&be, true).as_deref(), Ok("x"));
        assert_eq!(
            decode_ucs4(&0xd800u32.to_le_bytes(), false),
            Err(NotScalarValue(0xd800))
        );
        assert_eq!(unnamed_field(1, |n| n == "f1" || n == "f1_"), "f1__");
        assert_eq!(unnamed_field(0, |_| false), "f0");
    }
}
