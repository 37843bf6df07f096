//! TeaFiles read by ranges (as from an object in a store: bytes that lend nothing) give what the
//! same file gives, and a region reads only its items' strides.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tet_source::byte_source::CountingSource;
use tet_source::Source;
use tet_source::{OpenOptions, Result};
use tet_teafile::{open_path, open_ranged, TeaSource};
use tet_testkit::ranged::{same_by_ranges, same_text, ByRanges};
use tet_testkit::{corpus_files, read_all};

fn inputs() -> Vec<PathBuf> {
    let mut all = corpus_files("teafile", &["tea"]);
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/teafile");
    for e in std::fs::read_dir(seeds).unwrap() {
        all.push(e.unwrap().path());
    }
    all
}

fn ranged(path: &Path, options: &OpenOptions) -> (Arc<CountingSource>, Result<TeaSource>) {
    let src = Arc::new(CountingSource::new(std::fs::read(path).unwrap()));
    (src.clone(), open_ranged(src, options))
}

#[test]
fn every_input_reads_the_same_by_ranges() {
    let how = ByRanges {
        file: open_path,
        ranged: |p, o| ranged(p, o).1,
        view_file: |f| f as &dyn Source,
        view_ranged: |r| r as &dyn Source,
        same_error: same_text,
        more: |p, f: &TeaSource, r: &TeaSource| {
            assert_eq!(f.header(), r.header(), "{}", p.display());
            for v in 0..f.variables().len() {
                assert!(r.contiguous_bytes(v).is_none());
            }
        },
    };
    let compared = same_by_ranges(&inputs(), &how);
    assert!(compared >= 8, "{compared}");
}

#[test]
fn a_region_reads_its_items_only() {
    let p = corpus_files("teafile", &["tea"])
        .into_iter()
        .find(|p| p.ends_with("tick_full.tea"))
        .unwrap();
    let (src, r) = ranged(&p, &OpenOptions::default());
    let r = r.unwrap();
    let (_, at_open) = src.counts();
    assert_eq!(at_open, 32 + r.header().item_start);
    let n = r.item_count();
    assert!(n >= 2, "{n}");
    let v = &r.variables()[0];
    let size = v.dtype.size();
    let mut out = vec![0u8; size];
    r.read_region(0, &[n - 1], &[1], &mut out).unwrap();
    let (_, after) = src.counts();
    let stride = u64::from(r.header().item.as_ref().unwrap().size);
    assert_eq!(after - at_open, stride);
    let f = open_path(&p, &OpenOptions::default()).unwrap();
    assert_eq!(out[..], read_all(&f, 0)[(n as usize - 1) * size..]);
}
