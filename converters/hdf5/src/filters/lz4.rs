//! LZ4 (filter 32004, the HDF Group's): its block framing; blocks decoded by `lz4_flex`.

use super::{derr, DecodeError};

/// The largest output one LZ4 block of `n` compressed bytes can have (a sequence's length
/// grows by at most 255 per byte of its encoding), with a little slack.
fn lz4_block_bound(n: usize) -> usize {
    n.saturating_mul(255).saturating_add(64)
}

/// Decodes the HDF5 LZ4 filter's format (id 32004; HDF Group's `H5Zlz4.c`, as hdf5plugin and
/// PyTables write it): an 8-byte big-endian decoded size, a 4-byte big-endian block size, then
/// per block (the last one may be shorter) a 4-byte big-endian stored size and the block, which
/// is an LZ4 block, or the raw bytes when the stored size equals the block's decoded size.
pub fn lz4_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    let be32 = |at: usize| -> Option<usize> {
        let b = input.get(at..at.checked_add(4)?)?;
        usize::try_from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])).ok()
    };
    let Some(head) = input.get(..8) else {
        return derr("lz4", "chunk shorter than its 12-byte header");
    };
    let total = u64::from_be_bytes([
        head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7],
    ]);
    let total = match usize::try_from(total) {
        Ok(t) if t <= max => t,
        _ => {
            return derr(
                "lz4",
                format!("header claims {total} bytes, more than {max}"),
            )
        }
    };
    let Some(block) = be32(8) else {
        return derr("lz4", "chunk shorter than its 12-byte header");
    };
    if block == 0 && total > 0 {
        return derr("lz4", "block size 0");
    }
    let block = block.min(total);
    let mut out: Vec<u8> = Vec::with_capacity(total.min(input.len().saturating_mul(4)));
    let mut pos = 12usize;
    while out.len() < total {
        let n = block.min(total - out.len());
        let Some(stored) = be32(pos) else {
            return derr("lz4", "truncated before a block's size");
        };
        pos += 4;
        let Some(data) = pos.checked_add(stored).and_then(|end| input.get(pos..end)) else {
            return derr(
                "lz4",
                format!("block of {stored} bytes runs past the chunk"),
            );
        };
        pos += stored;
        let at = out.len();
        if stored == n {
            out.extend_from_slice(data);
            continue;
        }
        if n > lz4_block_bound(stored) {
            return derr(
                "lz4",
                format!("a {stored}-byte block cannot decode to {n} bytes"),
            );
        }
        out.resize(at + n, 0);
        match lz4_flex::block::decompress_into(data, &mut out[at..]) {
            Ok(got) if got == n => {}
            Ok(got) => return derr("lz4", format!("block decodes to {got} bytes, expected {n}")),
            Err(e) => return Err(DecodeError::codec("lz4", e)),
        }
    }
    Ok(out)
}
