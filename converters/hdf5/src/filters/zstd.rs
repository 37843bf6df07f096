//! Zstandard (filter 32015, hdf5plugin's): the chunk as plain frames.

use super::{read_bounded, DecodeError};

/// Decompresses Zstandard frames (hdf5plugin's zstd filter, id 32015, stores the chunk as a
/// plain frame) into at most `max` bytes.
pub fn zstd_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    let d = zstd::stream::read::Decoder::with_buffer(input)
        .map_err(|e| DecodeError::codec("zstd", e))?;
    read_bounded("zstd", d, max)
}
