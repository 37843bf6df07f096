//! Files written by numpy itself (see `tests/fixtures/make.py`) for layouts the shared corpus
//! does not cover: aligned records with padding, titled fields, big-endian datetime64 and
//! complex128, Fortran-order records with sub-arrays, a latin-1 field name, a version-2.0 header,
//! a 0-d record, a sub-array of records, and a compressed `.npz` with a folder in a key.

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tet_npy::{NpyImporter, NpzImporter};
use tet_source::{Importer, OpenOptions};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

#[test]
fn numpy_written_files() {
    let expect: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/expect.json")).unwrap())
            .unwrap();
    let mut checked = 0;
    for (file, datasets) in expect.as_object().unwrap() {
        let path = Path::new(FIXTURES).join(file);
        let importer: Box<dyn Importer> = if file.ends_with(".npz") {
            Box::new(NpzImporter)
        } else {
            Box::new(NpyImporter)
        };
        let src = importer
            .open(&path, &OpenOptions::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(src.skipped().is_empty(), "{file}: {:?}", src.skipped());
        for (name, hash) in datasets.as_object().unwrap() {
            if name == "__count__" {
                assert_eq!(src.variables().len() as u64, hash.as_u64().unwrap());
                continue;
            }
            let i = src
                .variables()
                .iter()
                .position(|v| &v.name == name)
                .unwrap_or_else(|| panic!("{file}: no dataset {name}"));
            let v = &src.variables()[i];
            let mut out = vec![0u8; v.byte_len().unwrap() as usize];
            src.read_region(i, &vec![0; v.shape.len()], &v.shape, &mut out)
                .unwrap();
            let got: String = Sha256::digest(&out)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(got, hash.as_str().unwrap(), "{file}: {name}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} datasets checked");
}
