//! Fuzzes tet-hdf5's Blosc2 decoder (filter 32026: a Blosc2 frame per HDF5 chunk, parsed and
//! decoded in pure Rust). Input: the expected chunk size (4 bytes, little-endian, at most
//! 4 MiB), then the stored chunk. A success must be exactly the chunk size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tet_hdf5::blosc2::blosc2_decompress;

fuzz_target!(|data: &[u8]| {
    let Some((size, frame)) = data.split_first_chunk::<4>() else { return };
    let chunk_bytes = (u32::from_le_bytes(*size) as usize) % (4 << 20);
    if let Ok(out) = blosc2_decompress(frame, chunk_bytes) {
        assert_eq!(out.len(), chunk_bytes);
    }
});
