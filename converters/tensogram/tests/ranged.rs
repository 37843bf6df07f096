//! Tensogram files read by ranges (as from an object in a store: bytes that lend nothing) give
//! what the same file gives: variables, attributes, skipped objects, values and errors.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tet_source::byte_source::CountingSource;
use tet_source::{OpenOptions, Source};
use tet_tensogram::{open_path, open_ranged};
use tet_testkit::{corpus_files, read_all, read_all_in_pieces};

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
    let mut compared = 0;
    for skip in [false, true] {
        let options = OpenOptions {
            skip_unsupported: skip,
            ..OpenOptions::default()
        };
        for p in inputs() {
            let name = p.display();
            let src = Arc::new(CountingSource::new(std::fs::read(&p).unwrap()));
            match (open_path(&p, &options), open_ranged(src, &options)) {
                (Ok(f), Ok(r)) => {
                    assert_eq!(f.variables(), r.variables(), "{name}");
                    assert_eq!(f.global_attrs(), r.global_attrs(), "{name}");
                    assert_eq!(f.skipped(), r.skipped(), "{name}");
                    assert_eq!(f.messages(), r.messages(), "{name}");
                    for v in 0..f.variables().len() {
                        match f.read_region(
                            v,
                            &vec![0; f.variables()[v].shape.len()],
                            &f.variables()[v].shape,
                            &mut vec![0u8; f.variables()[v].byte_len().unwrap() as usize],
                        ) {
                            Ok(()) => {
                                let want = read_all(&f, v);
                                assert_eq!(read_all(&r, v), want, "{name} {v}");
                                assert_eq!(read_all_in_pieces(&r, v), want, "{name} {v}");
                            }
                            // A value the file cannot give (a corrupt frame): nor by ranges.
                            Err(e) => {
                                let v_ = &r.variables()[v];
                                let mut out = vec![0u8; v_.byte_len().unwrap() as usize];
                                let got =
                                    r.read_region(v, &vec![0; v_.shape.len()], &v_.shape, &mut out);
                                assert_eq!(
                                    got.map_err(|e| e.to_string()),
                                    Err(e.to_string()),
                                    "{name} {v}"
                                );
                            }
                        }
                    }
                    compared += 1;
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name}"),
                (a, b) => panic!(
                    "{name}: from the file {:?}, by ranges {:?}",
                    a.err().map(|e| e.to_string()),
                    b.err().map(|e| e.to_string())
                ),
            }
        }
    }
    assert!(compared >= 10, "{compared}");
}
