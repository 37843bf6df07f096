//! Tensogram files read by ranges (as from an object in a store: bytes that lend nothing) give
//! what the same file gives: variables, attributes, skipped objects, values and errors.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tet_source::byte_source::CountingSource;
use tet_source::Source;
use tet_tensogram::{open_path, open_ranged};
use tet_testkit::corpus_files;
use tet_testkit::ranged::{same_by_ranges, same_text, ByRanges};

fn inputs() -> Vec<PathBuf> {
    let mut all = corpus_files("tensogram", &["tgm"]);
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "tgm") {
                all.push(p);
            }
        }
    }
    all
}

#[test]
fn every_input_reads_the_same_by_ranges() {
    let how = ByRanges {
        file: open_path,
        ranged: |p, o| {
            let src = Arc::new(CountingSource::new(std::fs::read(p).unwrap()));
            open_ranged(src, o)
        },
        view_file: |f| f as &dyn Source,
        view_ranged: |r| r as &dyn Source,
        same_error: same_text,
        more: |p, f, r| assert_eq!(f.messages(), r.messages(), "{}", p.display()),
    };
    let compared = same_by_ranges(&inputs(), &how);
    assert!(compared >= 10, "{compared}");
}
