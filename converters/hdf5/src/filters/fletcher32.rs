//! Fletcher-32 (filter 3): the checksum HDF5 appends to a chunk, verified then stripped.

use super::{derr, DecodeError};

/// HDF5's Fletcher-32 (`H5_checksum_fletcher32`): 16-bit words read big-endian, a trailing odd
/// byte as the high byte of a last word.
pub fn fletcher32(data: &[u8]) -> u32 {
    let mut sum1: u32 = 0;
    let mut sum2: u32 = 0;
    let words = data.chunks_exact(2);
    let odd = words.remainder().first().copied();
    let mut left = data.len() / 2;
    let mut words = words;
    while left > 0 {
        let t = left.min(360);
        left -= t;
        for w in words.by_ref().take(t) {
            sum1 += ((w[0] as u32) << 8) | w[1] as u32;
            sum2 += sum1;
        }
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    if let Some(b) = odd {
        sum1 += (b as u32) << 8;
        sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    (sum2 << 16) | sum1
}

/// Verifies and removes the 4-byte little-endian Fletcher-32 trailer of a chunk. Like HDF5 it
/// also accepts the byte-swapped checksum written by HDF5 before 1.6.3.
pub fn fletcher32_strip(data: &mut Vec<u8>) -> std::result::Result<(), DecodeError> {
    let body = fletcher32_check(data)?;
    data.truncate(body);
    Ok(())
}

/// Verifies the Fletcher-32 trailer of a chunk (see [`fletcher32_strip`]) and returns the
/// length of the data before it.
pub(super) fn fletcher32_check(data: &[u8]) -> std::result::Result<usize, DecodeError> {
    if data.len() < 4 {
        return derr("fletcher32", "chunk shorter than its checksum");
    }
    let body = data.len() - 4;
    let stored = u32::from_le_bytes([data[body], data[body + 1], data[body + 2], data[body + 3]]);
    let sum = fletcher32(&data[..body]);
    let reversed = ((sum & 0x00ff_00ff) << 8) | ((sum >> 8) & 0x00ff_00ff);
    if stored != sum && stored != reversed {
        return Err(DecodeError::Fletcher32 {
            stored,
            computed: sum,
        });
    }
    Ok(body)
}
