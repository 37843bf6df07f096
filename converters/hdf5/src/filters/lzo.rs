//! LZO (filter 305, PyTables'): one LZO1X stream, with PyTables' optional Adler-32.

use super::{derr, DecodeError};

/// Decodes PyTables' LZO filter (id 305, `H5Zlzo.c`): the chunk is one LZO1X stream (what
/// `lzo1x_1_compress` or `lzo1x_999_compress` write, ending with the end-of-stream marker),
/// decoded by `lzokay` into at most `max` bytes. PyTables built with its `CHECKSUM` option
/// appends the Adler-32 of the decoded bytes (4 bytes, the writer's byte order: little-endian
/// on every platform PyTables ships for) after the stream: 4 bytes left after the end marker
/// are taken as that checksum and verified. (The filter stores a chunk it cannot shrink
/// uncompressed, with the filter's bit set in the chunk's filter mask: handled by the caller.)
pub fn lzo_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    use lzokay::decompress::decompress;
    // An LZO1X match of length L costs at least about L / 255 bytes: no stream of `n` bytes
    // decodes to more than 256 n (plus slack for tiny ones).
    let cap = max.min(input.len().saturating_mul(256).saturating_add(64));
    let mut out = vec![0u8; cap];
    let fail = |e: lzokay::Error| match e {
        lzokay::Error::OutputOverrun => {
            DecodeError::refused("lzo", format!("chunk decompresses past {max} bytes"), e)
        }
        e => DecodeError::refused("lzo", format!("corrupt or truncated LZO1X stream ({e})"), e),
    };
    match decompress(input, &mut out) {
        Ok(n) => {
            out.truncate(n);
            Ok(out)
        }
        Err(lzokay::Error::InputNotConsumed) if input.len() > 4 => {
            let (stream, sum) = input.split_at(input.len() - 4);
            let n = decompress(stream, &mut out).map_err(fail)?;
            out.truncate(n);
            let want = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
            let got = libdeflater::adler32(&out);
            if got != want {
                return derr(
                    "lzo",
                    format!("Adler-32 mismatch (stored {want:#010x}, computed {got:#010x})"),
                );
            }
            Ok(out)
        }
        Err(e) => Err(fail(e)),
    }
}
