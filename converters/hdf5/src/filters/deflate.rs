//! Deflate (filter 1): a zlib stream, inflated by libdeflate with one decompressor per thread.

use super::DecodeError;

/// The most bytes a zlib stream of `n` bytes can inflate to: deflate expands at most 1032:1
/// (a 258-byte match coded in two bits), plus slack for the headers of tiny streams.
pub fn inflate_bound(n: usize) -> usize {
    n.saturating_mul(1032).saturating_add(1024)
}

/// Inflates a zlib stream (the deflate filter's format) into at most `max` bytes, with
/// libdeflate (one decompressor per thread, reused).
///
/// libdeflate writes into a buffer sized up front. `max` comes from the file, so the buffer is
/// never larger than what the stream can produce ([`inflate_bound`] of its length): a corrupt
/// chunk size costs no more memory than its stored bytes justify. A stream that needs more than
/// `max` bytes is an error; one that ends before `max` returns the shorter output (the caller
/// decides, as [`super::decode_filters`] does by requiring the exact chunk size). Bytes after the end
/// of the stream (after its Adler-32) are ignored, as zlib's `inflate` does.
pub fn inflate(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    let cap = max.min(inflate_bound(input.len()));
    let mut out = vec![0u8; cap];
    // `cap < max` only when `max` is more than the stream can produce, so running out of room
    // always means the stream is longer than `max`.
    let n = zlib_decompress(input, &mut out).map_err(|e| inflate_error(e, max))?;
    out.truncate(n);
    Ok(out)
}

/// Inflates a zlib stream into `out` with libdeflate (one decompressor per thread, reused) and
/// returns the number of bytes written. A stream that needs more room than `out` is an error;
/// one that ends early leaves the rest of `out` as it was. Bytes after the stream's end are
/// ignored, as by [`inflate`].
pub fn inflate_into(input: &[u8], out: &mut [u8]) -> std::result::Result<usize, DecodeError> {
    let max = out.len();
    zlib_decompress(input, out).map_err(|e| inflate_error(e, max))
}

/// libdeflate's refusal in words, its error kept as the source.
fn inflate_error(e: libdeflater::DecompressionError, max: usize) -> DecodeError {
    let detail = match e {
        libdeflater::DecompressionError::InsufficientSpace => {
            format!("chunk inflates past {max} bytes")
        }
        libdeflater::DecompressionError::BadData => {
            "invalid or truncated zlib stream (or wrong checksum)".to_string()
        }
    };
    DecodeError::refused("deflate", detail, e)
}

/// libdeflate's zlib decoder with this thread's decompressor (a fresh one when the thread's is
/// in use or already gone, as while a thread is torn down: never a panic).
fn zlib_decompress(
    input: &[u8],
    out: &mut [u8],
) -> std::result::Result<usize, libdeflater::DecompressionError> {
    use libdeflater::Decompressor;
    thread_local! {
        static DECOMPRESSOR: std::cell::RefCell<Option<Decompressor>> =
            const { std::cell::RefCell::new(None) };
    }
    let run = |d: &mut Option<Decompressor>, out: &mut [u8]| {
        d.get_or_insert_with(Decompressor::new)
            .zlib_decompress(input, out)
    };
    let shared =
        DECOMPRESSOR.try_with(|c| c.try_borrow_mut().ok().map(|mut d| run(&mut d, &mut *out)));
    match shared {
        Ok(Some(r)) => r,
        _ => run(&mut None, out),
    }
}
