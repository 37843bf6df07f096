//! Fuzzes the `.tet` reader and verifier on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tet::format::verify::{verify_bytes, Depth};
use tet::format::TetFile;

/// Only decode chunks smaller than this with `read_chunk_into`.
const CHUNK_CAP: u64 = 1 << 20;
/// Edge length (per axis) of the region read at the origin of each dataset.
const REGION_EDGE: u64 = 2;

fuzz_target!(|data: &[u8]| {
    let _ = verify_bytes(data.to_vec(), Depth::Deep);

    let Ok(f) = TetFile::from_bytes(data.to_vec()) else {
        return;
    };
    let _ = f.footer();

    for i in 0..f.datasets.len() {
        let _ = f.read_dataset(i);

        let ds = &f.datasets[i];
        let start = vec![0u64; ds.shape.len()];
        let count: Vec<u64> = ds.shape.iter().map(|&d| d.min(REGION_EDGE)).collect();
        let n = count
            .iter()
            .try_fold(ds.dtype.size() as u64, |acc, &c| acc.checked_mul(c));
        if let Some(n) = n {
            let mut out = vec![0u8; n as usize];
            let _ = f.read_region(i, &start, &count, &mut out);
        }
    }

    for e in &f.entries {
        if e.raw_byte_len < CHUNK_CAP {
            let mut out = vec![0u8; e.raw_byte_len as usize];
            let _ = f.read_chunk_into(e, &mut out);
        }
    }
});
