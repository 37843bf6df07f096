//! Shared helper: read every variable of a `Source` in full.

use tet_source::Source;

/// Variables larger than this are not read (keeps allocations bounded).
pub const READ_CAP: u64 = 64 << 20;

pub fn read_all(src: &dyn Source) {
    for (i, v) in src.variables().iter().enumerate() {
        let Some(len) = v.byte_len() else { continue };
        if len > READ_CAP {
            continue;
        }
        let start = vec![0u64; v.shape.len()];
        let mut out = vec![0u8; len as usize];
        let _ = src.read_region(i, &start, &v.shape, &mut out);
    }
    let _ = src.global_attrs();
    let _ = src.skipped();
    let _ = src.dim_labels();
}
