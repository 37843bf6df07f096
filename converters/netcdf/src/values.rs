//! Small value helpers the reading and writing modules share: netCDF-C's atomic types as model
//! element types, native-endian integers and buffers to little-endian, text decoded from
//! `char` data (UTF-8, else Latin-1), and group paths joined.

use std::ffi::c_int;

use netcdf_sys as nc;
use tet_source::ElementType;

pub(crate) fn atomic(xtype: c_int) -> Option<ElementType> {
    Some(match xtype {
        nc::NC_BYTE => ElementType::I8,
        nc::NC_UBYTE => ElementType::U8,
        nc::NC_SHORT => ElementType::I16,
        nc::NC_USHORT => ElementType::U16,
        nc::NC_INT => ElementType::I32,
        nc::NC_UINT => ElementType::U32,
        nc::NC_INT64 => ElementType::I64,
        nc::NC_UINT64 => ElementType::U64,
        nc::NC_FLOAT => ElementType::F32,
        nc::NC_DOUBLE => ElementType::F64,
        _ => return None,
    })
}

/// An integer of type `t` from native-endian bytes.
pub(crate) fn int_from_ne(t: ElementType, b: &[u8]) -> i128 {
    let mut a = [0u8; 8];
    a[..t.size().min(8)].copy_from_slice(&b[..t.size().min(8)]);
    match t {
        ElementType::I8 => i128::from(a[0] as i8),
        ElementType::U8 => i128::from(a[0]),
        ElementType::I16 => i128::from(i16::from_ne_bytes([a[0], a[1]])),
        ElementType::U16 => i128::from(u16::from_ne_bytes([a[0], a[1]])),
        ElementType::I32 => i128::from(i32::from_ne_bytes([a[0], a[1], a[2], a[3]])),
        ElementType::U32 => i128::from(u32::from_ne_bytes([a[0], a[1], a[2], a[3]])),
        ElementType::I64 => i128::from(i64::from_ne_bytes(a)),
        _ => i128::from(u64::from_ne_bytes(a)),
    }
}

/// Text from bytes: UTF-8 when valid, else Latin-1 (every byte one character, nothing lost).
pub(crate) fn decode_text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => b.iter().map(|&c| char::from(c)).collect(),
    }
}

/// Decodes the byte strings of one variable or attribute alike: each as UTF-8 when every one is
/// valid UTF-8, else each as Latin-1, one character per byte (`true` then, recorded so that an
/// export gives back the very bytes: a mix of the two decodings could not be undone).
pub(crate) fn decode_all<B: AsRef<[u8]>>(rows: &[B]) -> (Vec<String>, bool) {
    let utf8 = rows.iter().all(|r| std::str::from_utf8(r.as_ref()).is_ok());
    let values = rows
        .iter()
        .map(|r| {
            if utf8 {
                String::from_utf8_lossy(r.as_ref()).into_owned()
            } else {
                r.as_ref().iter().map(|&c| char::from(c)).collect()
            }
        })
        .collect();
    (values, !utf8)
}

pub(crate) fn trim_nuls(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
    &b[..end]
}

pub(crate) fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}/{name}")
    }
}

/// A `u64` buffer viewed as bytes (an 8-aligned byte buffer).
pub(crate) fn as_bytes_mut(v: &mut [u64]) -> &mut [u8] {
    let len = std::mem::size_of_val(v);
    // SAFETY: any byte pattern is a valid u8; the slice covers exactly v's memory.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), len) }
}

/// Native-endian elements of `size` bytes to little-endian, in place.
pub(crate) fn native_to_le(buf: &mut [u8], size: usize) {
    if cfg!(target_endian = "big") && size > 1 {
        for e in buf.chunks_exact_mut(size) {
            e.reverse();
        }
    }
}
