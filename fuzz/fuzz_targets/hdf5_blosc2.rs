//! Fuzzes the Blosc2 frame decoder (tet-blosc2: what HDF5's filter 32026 stores per chunk and
//! Tensogram's blosc2 compressor per object, parsed and decoded in pure Rust). Input: the
//! expected decoded size (4 bytes, little-endian, at most 4 MiB), then the frame. A success
//! must be exactly that size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tet_blosc2::decode_frame;

fuzz_target!(|data: &[u8]| {
    let Some((size, frame)) = data.split_first_chunk::<4>() else { return };
    let chunk_bytes = (u32::from_le_bytes(*size) as usize) % (4 << 20);
    if let Ok(out) = decode_frame(frame, chunk_bytes) {
        assert_eq!(out.len(), chunk_bytes);
    }
});
