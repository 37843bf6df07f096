//! Fuzzes the HDF5 chunk decoders of tet-hdf5 (pure Rust, run outside libhdf5): deflate, LZF,
//! shuffle and Fletcher-32, alone and as pipelines, on arbitrary stored bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tet_hdf5::filters::{
    decode_filters, fletcher32_strip, inflate, lzf_decompress, unshuffle, Filter,
};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Some((&size, stored)) = rest.split_first() else {
        return;
    };
    // Decoded size bound: up to 64 KiB, chosen by the second byte.
    let chunk_bytes = (size as usize + 1) * 256;
    let _ = inflate(stored, chunk_bytes);
    let _ = lzf_decompress(stored, chunk_bytes);
    let elem = (sel as usize % 9).max(1);
    let mut out = vec![0u8; stored.len()];
    unshuffle(stored, elem, &mut out);
    let mut v = stored.to_vec();
    let _ = fletcher32_strip(&mut v);
    let pipelines: [&[Filter]; 4] = [
        &[Filter::Shuffle { elem_size: elem }, Filter::Deflate],
        &[Filter::Shuffle { elem_size: elem }, Filter::Lzf],
        &[
            Filter::Shuffle { elem_size: elem },
            Filter::Deflate,
            Filter::Fletcher32,
        ],
        &[Filter::Fletcher32, Filter::Lzf],
    ];
    let p = pipelines[(sel as usize >> 4) % pipelines.len()];
    let mask = u32::from(sel & 0x7);
    let _ = decode_filters(p, mask, stored.to_vec(), chunk_bytes);
});
