//! LZF (filter 32000, h5py's; libhdf5 itself cannot read it): liblzf's format, every read and
//! back-reference bounds-checked.

use super::{derr, DecodeError};

/// Decompresses an LZF stream (liblzf's format, as h5py's filter 32000 stores it) into at
/// most `max` bytes. Every read and back-reference is bounds-checked.
pub fn lzf_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    let mut out: Vec<u8> = Vec::with_capacity(max.min(input.len().saturating_mul(4)).min(64 << 20));
    let mut i = 0usize;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            // Literal run of ctrl + 1 bytes.
            let n = ctrl + 1;
            let Some(lit) = input.get(i..i + n) else {
                return derr("lzf", "literal run past the end of the input");
            };
            if out.len() + n > max {
                return derr("lzf", format!("output exceeds {max} bytes"));
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            // Back-reference: length (ctrl >> 5) + 2, with an extra length byte when 7.
            let mut len = ctrl >> 5;
            if len == 7 {
                let Some(&b) = input.get(i) else {
                    return derr("lzf", "truncated back-reference");
                };
                len += b as usize;
                i += 1;
            }
            let Some(&lo) = input.get(i) else {
                return derr("lzf", "truncated back-reference");
            };
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + lo as usize + 1;
            if back > out.len() {
                return derr("lzf", "back-reference before the start of the output");
            }
            let n = len + 2;
            if out.len() + n > max {
                return derr("lzf", format!("output exceeds {max} bytes"));
            }
            let from = out.len() - back;
            if back >= n {
                out.extend_from_within(from..from + n);
            } else {
                // Overlapping copy (run-length style): byte by byte.
                for k in 0..n {
                    let b = out[from + k];
                    out.push(b);
                }
            }
        }
    }
    Ok(out)
}
