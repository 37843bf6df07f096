//! `.npy` / `.npz` read by ranges (as from an object in a store: bytes that lend nothing) give
//! what the same file gives: the same variables, texts, skipped items and values; and a region
//! of a C-order array fetches the bytes it spans, no more.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{importer_for, npy_bytes};
use tet_npy::open_npy_ranged;
use tet_source::byte_source::{ByteSource, CountingSource};
use tet_source::{OpenOptions, Source};
use tet_testkit::corpus_files;
use tet_testkit::ranged::{same_by_ranges, ByRanges};

/// The public corpus and this crate's fixtures (`.npy` and `.npz`).
fn inputs() -> Vec<PathBuf> {
    let mut all = corpus_files("npy", &["npy", "npz"]);
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "npy" || x == "npz") {
                all.push(p);
            }
        }
    }
    all
}

fn ranged(path: &Path, options: &OpenOptions) -> tet_source::Result<Box<dyn Source>> {
    let src: Arc<dyn ByteSource> = Arc::new(CountingSource::new(std::fs::read(path).unwrap()));
    importer_for(path).open_bytes(path, src, options)
}

#[test]
fn every_input_reads_the_same_by_ranges() {
    let files = inputs();
    assert!(files.len() > 30, "{files:?}");
    let how = ByRanges {
        file: |p, o| importer_for(p).open(p, o),
        ranged,
        view_file: |f| f.as_ref(),
        view_ranged: |r| r.as_ref(),
        // The same refusal, in words of its own by ranges.
        same_error: |a, b| std::mem::discriminant(a) == std::mem::discriminant(b),
        // Nothing of the object is lent (a deflated member's inflated copy may be).
        more: |p, _, r| {
            if p.extension().is_some_and(|x| x == "npy") {
                assert!(r.contiguous_bytes(0).is_none() && r.file_extent(0).is_none());
            }
        },
    };
    assert!(same_by_ranges(&files, &how) > 30);
}

#[test]
fn a_region_fetches_the_bytes_it_spans() {
    // 256 rows of 4096 f64 (8 MiB), C order: value = row * 4096 + column.
    let (rows, cols) = (256u64, 4096u64);
    let data: Vec<u8> = (0..rows * cols)
        .flat_map(|v| (v as f64).to_le_bytes())
        .collect();
    let src = Arc::new(CountingSource::new(npy_bytes(
        1,
        "'<f8'",
        false,
        &[rows, cols],
        &data,
    )));
    let s = open_npy_ranged("a", src.clone(), &OpenOptions::default()).unwrap();
    let (_, at_open) = src.counts();
    assert!(at_open <= 256, "the header took {at_open} bytes");
    let mut out = vec![0u8; (10 * cols * 8) as usize];
    s.read_region(0, &[100, 0], &[10, cols], &mut out).unwrap();
    let (_, after) = src.counts();
    assert_eq!(after - at_open, 10 * cols * 8);
    assert_eq!(
        out[..],
        data[(100 * cols * 8) as usize..(110 * cols * 8) as usize]
    );
    // A block inside rows: the rows it spans at most.
    let mut block = vec![0u8; 4 * 16 * 8];
    s.read_region(0, &[3, 5], &[4, 16], &mut block).unwrap();
    let (_, last) = src.counts();
    assert!(last - after <= 4 * cols * 8, "{}", last - after);
    for (i, v) in block.chunks_exact(8).enumerate() {
        let (r, c) = (3 + i as u64 / 16, 5 + i as u64 % 16);
        assert_eq!(v, ((r * cols + c) as f64).to_le_bytes());
    }
    // Outside the data: refused, nothing read.
    let mut one = [0u8; 8];
    assert!(s.read_region(0, &[rows, 0], &[1, 1], &mut one).is_err());
}
