//! bzip2 (filter 307): one bzip2 stream.

use super::{derr, read_bounded, DecodeError};

/// Decompresses one bzip2 stream (the bzip2 filter, id 307) into at most `max` bytes.
pub fn bzip2_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    if input.get(..3) != Some(b"BZh") {
        return derr("bzip2", "not a bzip2 stream");
    }
    read_bounded("bzip2", bzip2::read::BzDecoder::new(input), max)
}
