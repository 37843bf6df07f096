//! Files written by numpy itself (see `tests/fixtures/make.py`) for layouts the shared corpus
//! does not cover: aligned records with padding, titled fields, big-endian datetime64 and
//! complex128, Fortran-order records with sub-arrays, a latin-1 field name, a version-2.0 header,
//! a 0-d record, a sub-array of records, and a compressed `.npz` with a folder in a key.

use crate::common;

use std::path::Path;

use serde_json::Value;
use tet_source::Source;
use tet_testkit::{complex_part, read_all, sha_hex};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// The bytes of dataset `name` as `make.py` hashes them: a variable's, or the real or the
/// imaginary part (`<x>/real`, `<x>/imag`) of the complex variable `<x>`.
fn dataset_bytes(src: &dyn Source, name: &str) -> Option<Vec<u8>> {
    let vars = src.variables();
    if let Some(i) = vars.iter().position(|v| v.name == name) {
        return Some(read_all(src, i));
    }
    let (base, part) = name.rsplit_once('/')?;
    let k = ["real", "imag"].iter().position(|p| *p == part)?;
    let i = vars.iter().position(|v| v.name == base)?;
    let complex = vars[i].dtype;
    complex.complex_component()?;
    Some(complex_part(&read_all(src, i), complex, k))
}

#[test]
fn numpy_written_files() {
    let expect: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/expect.json")).unwrap())
            .unwrap();
    let mut checked = 0;
    for (file, datasets) in expect.as_object().unwrap() {
        let src = common::open_file(&Path::new(FIXTURES).join(file));
        assert!(src.skipped().is_empty(), "{file}: {:?}", src.skipped());
        for (name, hash) in datasets.as_object().unwrap() {
            if name == "__count__" {
                assert_eq!(src.variables().len() as u64, hash.as_u64().unwrap());
                continue;
            }
            let out = dataset_bytes(src.as_ref(), name)
                .unwrap_or_else(|| panic!("{file}: no dataset {name}"));
            assert_eq!(sha_hex(&out), hash.as_str().unwrap(), "{file}: {name}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} datasets checked");
}
