//! Every `.npy` / `.npz` of the public corpus against its `.expect.json` sidecar.

use crate::common;

use serde_json::Value;
use tet_npy::{NpyImporter, NpzImporter};
use tet_source::{Confidence, ElementType, Importer, OpenOptions, Source};
use tet_testkit::{
    complex_part, corpus_dir, corpus_files, json_u64s, read_all, sha_hex, sidecar, widen,
};

use common::{importer_for, open_file};

/// The bytes `.tet` stores for `raw` of `dtype` (the engine's widening), which must be of the
/// sidecar's `stored_dtype`.
fn stored(dtype: ElementType, raw: &[u8], stored_dtype: &str) -> Vec<u8> {
    let (bytes, name) = widen(dtype, raw);
    assert_eq!(name, stored_dtype, "dtype mismatch");
    bytes
}

/// A variable a sidecar array expands to.
struct Want {
    name: String,
    shape: Vec<u64>,
    /// The complex type, when the sidecar gives the hashes of its real and imaginary parts.
    complex: Option<ElementType>,
    /// `(stored dtype, sha256)` of the whole variable, or of its real then imaginary part.
    parts: Vec<(String, String)>,
}

/// The variables a sidecar array expands to.
fn expected_variables(a: &Value) -> Vec<Want> {
    let name = a["name"].as_str().unwrap();
    // Empty for a 0-d array: the importer delivers it 0-d.
    let shape = json_u64s(&a["shape"]);
    let text = |v: &Value| v.as_str().unwrap().to_string();
    if let Some(fields) = a.get("fields").and_then(Value::as_array) {
        return fields
            .iter()
            .map(|f| Want {
                name: format!("{name}/{}", f["name"].as_str().unwrap()),
                shape: shape.clone(),
                complex: None,
                parts: vec![(text(&f["stored_dtype"]), text(&f["sha256"]))],
            })
            .collect();
    }
    if let Some(c) = a.get("components") {
        let dtype = c["dtype"].as_str().unwrap();
        let part_type = [ElementType::F32, ElementType::F64]
            .into_iter()
            .find(|t| t.name() == dtype)
            .unwrap();
        return vec![Want {
            name: name.to_string(),
            shape,
            complex: part_type.complex_of(),
            parts: ["real", "imag"]
                .iter()
                .map(|part| (dtype.to_string(), text(&c[part])))
                .collect(),
        }];
    }
    vec![Want {
        name: name.to_string(),
        shape,
        complex: None,
        parts: vec![(text(&a["stored_dtype"]), text(&a["sha256"]))],
    }]
}

#[test]
fn corpus_matches_sidecars() {
    let mut checked = 0;
    let files = corpus_files("npy", &["npy", "npz"]);
    assert!(files.len() >= 20, "corpus looks incomplete: {files:?}");
    for path in files {
        let expect = sidecar(&path);
        let importer = importer_for(&path);
        let head: Vec<u8> = std::fs::read(&path)
            .unwrap()
            .into_iter()
            .take(512)
            .collect();
        assert_eq!(
            importer.identify(&path, &head),
            Confidence::Magic,
            "{}",
            path.display()
        );
        let other: Box<dyn Importer> = if importer.id() == "npy" {
            Box::new(NpzImporter)
        } else {
            Box::new(NpyImporter)
        };
        assert_eq!(other.identify(&path, &head), Confidence::No);

        let opened = importer.open(&path, &OpenOptions::default());
        if let Some(err) = expect.get("expect_error") {
            let e = opened
                .err()
                .unwrap_or_else(|| panic!("{} must fail", path.display()));
            eprintln!("{}: refused: {e} (sidecar: {err})", path.display());
            if path.file_name().unwrap() == "truncated.npy" {
                assert_eq!(e.to_string(), err.as_str().unwrap());
            }
            continue;
        }
        let src = opened.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut want = Vec::new();
        for a in expect["arrays"].as_array().unwrap() {
            want.extend(expected_variables(a));
        }
        let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            want.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(),
            "{}",
            path.display()
        );
        assert!(src.skipped().is_empty());
        for (i, w) in want.iter().enumerate() {
            let name = &w.name;
            let v = &src.variables()[i];
            assert_eq!(v.shape, w.shape, "{name}");
            // (read_all also checks what contiguous_bytes lends.)
            let raw = read_all(src.as_ref(), i);
            match w.complex {
                Some(c) => {
                    assert_eq!(v.dtype, c, "{name}");
                    for (k, (dtype, hash)) in w.parts.iter().enumerate() {
                        let part = complex_part(&raw, c, k);
                        let bytes = stored(c.complex_component().unwrap(), &part, dtype);
                        assert_eq!(
                            &sha_hex(&bytes),
                            hash,
                            "{}: {name} part {k}",
                            path.display()
                        );
                        checked += 1;
                    }
                }
                None => {
                    let (dtype, hash) = &w.parts[0];
                    let bytes = stored(v.dtype, &raw, dtype);
                    assert_eq!(&sha_hex(&bytes), hash, "{}: {name}", path.display());
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} datasets checked");
}

#[test]
fn corpus_metadata() {
    let open = |f: &str| -> Box<dyn Source> { open_file(&corpus_dir("npy").join(f)) };
    // A 0-d array is a 0-d variable; the engine records how it stores it, not the importer.
    let s = open("scalar_0d.npy");
    assert_eq!(s.variables()[0].shape, Vec::<u64>::new());
    assert!(s.variables()[0].notes.is_empty());
    assert_eq!(read_all(s.as_ref(), 0), 3.25f64.to_le_bytes());

    let s = open("fortran_order_f64.npy");
    assert!(s.variables()[0].notes.iter().any(|n| n.contains("Fortran")));
    assert!(s.contiguous_bytes(0).is_none());

    let s = open("dtype_f64.npy");
    assert!(s.contiguous_bytes(0).is_some());
    assert!(s.variables()[0].notes.is_empty());
    assert!(s.variables()[0].attrs.is_empty());

    let s = open("big_endian_i32.npy");
    assert!(s.contiguous_bytes(0).is_none());

    let s = open("dtype_i8.npy");
    assert_eq!(s.variables()[0].dtype, ElementType::I8);
    let s = open("dtype_bool.npy");
    assert_eq!(s.variables()[0].dtype, ElementType::Bool);

    // A complex array is one complex variable: no split, no attributes, no notes.
    let s = open("dtype_c64.npy");
    assert_eq!(s.variables().len(), 1);
    let c = &s.variables()[0];
    assert_eq!(c.name, "dtype_c64");
    assert_eq!(c.dtype, ElementType::C64);
    assert!(c.attrs.is_empty());
    assert!(c.notes.is_empty());
    assert!(c.facts.is_empty());

    let s = open("arrays_compressed.npz");
    for v in s.variables() {
        assert!(v.layout.compressed);
        assert_eq!(v.layout.chunk_shape, None);
    }
    let s = open("arrays_savez.npz");
    for (i, v) in s.variables().iter().enumerate() {
        assert!(!v.layout.compressed);
        // Stored members are lent in place (the bool one too: its bytes are all 0/1).
        assert!(s.contiguous_bytes(i).is_some(), "{}", v.name);
    }
}
