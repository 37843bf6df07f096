//! Inputs read by ranges (as from an object in a store: a byte source that lends nothing)
//! compared with the same files read whole: the loop the importers that read bytes share.

use std::path::{Path, PathBuf};

use tet_source::{OpenOptions, Source, SourceError};

use crate::{read_all, read_all_in_pieces};

/// An opened input seen as a [`Source`].
pub type View<T> = fn(&T) -> &dyn Source;

/// How one input is opened both ways and what else is compared beside the common checks.
pub struct ByRanges<F, R> {
    /// Opens the file.
    pub file: fn(&Path, &OpenOptions) -> tet_source::Result<F>,
    /// Opens the same bytes read by ranges.
    pub ranged: fn(&Path, &OpenOptions) -> tet_source::Result<R>,
    /// The opened file as a source.
    pub view_file: View<F>,
    /// The source read by ranges as a source.
    pub view_ranged: View<R>,
    /// Whether two refusals to open are the same (their text, or their kind only).
    pub same_error: fn(&SourceError, &SourceError) -> bool,
    /// The checks proper to the format (headers, messages, nothing lent…).
    pub more: fn(&Path, &F, &R),
}

/// Opens every input from its file and by ranges, with `skip_unsupported` off then on: both
/// open with the same variables, texts and skipped items and every variable reads the same
/// values (whole and in pieces; a variable the file cannot read fails by ranges with the same
/// error), or both refuse alike. Returns how many inputs were compared (per setting).
pub fn same_by_ranges<F, R>(inputs: &[PathBuf], how: &ByRanges<F, R>) -> usize {
    let mut compared = 0;
    for skip in [false, true] {
        let options = OpenOptions {
            skip_unsupported: skip,
            ..OpenOptions::default()
        };
        for p in inputs {
            let name = p.display();
            match ((how.file)(p, &options), (how.ranged)(p, &options)) {
                (Ok(file), Ok(ranged)) => {
                    let (f, r) = ((how.view_file)(&file), (how.view_ranged)(&ranged));
                    assert_eq!(f.variables(), r.variables(), "{name}");
                    assert_eq!(f.text_variables(), r.text_variables(), "{name}");
                    assert_eq!(f.global_attrs(), r.global_attrs(), "{name}");
                    assert_eq!(f.skipped(), r.skipped(), "{name}");
                    (how.more)(p, &file, &ranged);
                    for v in 0..f.variables().len() {
                        same_values(f, r, v, &name.to_string());
                    }
                    compared += 1;
                }
                (Err(a), Err(b)) => assert!((how.same_error)(&a, &b), "{name}: {a} / {b}"),
                (a, b) => panic!(
                    "{name}: from the file {:?}, by ranges {:?}",
                    a.err().map(|e| e.to_string()),
                    b.err().map(|e| e.to_string())
                ),
            }
        }
    }
    compared
}

/// Variable `v` read from `r` gives what `f` gives: the same bytes, or the same error.
fn same_values(f: &dyn Source, r: &dyn Source, v: usize, name: &str) {
    let var = &f.variables()[v];
    let len = var.byte_len().expect("variable size") as usize;
    let start = vec![0; var.shape.len()];
    match f.read_region(v, &start, &var.shape, &mut vec![0u8; len]) {
        Ok(()) => {
            let want = read_all(f, v);
            assert_eq!(read_all(r, v), want, "{name} {v}");
            assert_eq!(read_all_in_pieces(r, v), want, "{name} {v}");
        }
        // A value the file cannot give (a corrupt frame): nor by ranges.
        Err(e) => {
            let got = r.read_region(v, &start, &var.shape, &mut vec![0u8; len]);
            assert_eq!(
                got.map_err(|e| e.to_string()),
                Err(e.to_string()),
                "{name} {v}"
            );
        }
    }
}

/// Two refusals with the same text.
pub fn same_text(a: &SourceError, b: &SourceError) -> bool {
    a.to_string() == b.to_string()
}
