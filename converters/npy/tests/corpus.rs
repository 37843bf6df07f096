//! Every `.npy` / `.npz` of the public corpus against its `.expect.json` sidecar.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tet_npy::{NpyImporter, NpzImporter};
use tet_source::{Confidence, ElementType, Importer, OpenOptions, Source};

const CORPUS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/corpus/public/npy"
);

fn corpus_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(CORPUS)
        .expect("corpus directory")
        .map(|e| e.unwrap().path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("npy" | "npz")))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "corpus looks incomplete: {files:?}");
    files
}

fn importer_for(path: &Path) -> Box<dyn Importer> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("npz") => Box::new(NpzImporter),
        _ => Box::new(NpyImporter),
    }
}

/// Reads a whole variable with `read_region`.
fn read_all(src: &dyn Source, var: usize) -> Vec<u8> {
    let v = &src.variables()[var];
    let len = v.byte_len().unwrap() as usize;
    let mut out = vec![0u8; len];
    let start = vec![0; v.shape.len()];
    src.read_region(var, &start, &v.shape, &mut out).unwrap();
    out
}

/// Widens the importer's bytes as the engine would, to the sidecar's `stored_dtype`.
fn widen(dtype: ElementType, bytes: &[u8], stored: &str) -> Vec<u8> {
    match (dtype, stored) {
        (ElementType::I8, "i16") => bytes
            .iter()
            .flat_map(|&b| i16::from(b as i8).to_le_bytes())
            .collect(),
        (ElementType::Bool, "u8") => bytes.to_vec(),
        (d, s) => {
            assert_eq!(d.name(), s, "dtype mismatch");
            bytes.to_vec()
        }
    }
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn shape_of(a: &Value) -> Vec<u64> {
    let s: Vec<u64> = a["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .collect();
    if s.is_empty() {
        vec![1]
    } else {
        s
    }
}

/// `(dataset name, stored dtype, sha256, shape)` a sidecar array expands to.
fn expected_datasets(a: &Value) -> Vec<(String, String, String, Vec<u64>)> {
    let name = a["name"].as_str().unwrap();
    let shape = shape_of(a);
    if let Some(fields) = a.get("fields").and_then(Value::as_array) {
        return fields
            .iter()
            .map(|f| {
                (
                    format!("{name}/{}", f["name"].as_str().unwrap()),
                    f["stored_dtype"].as_str().unwrap().to_string(),
                    f["sha256"].as_str().unwrap().to_string(),
                    shape.clone(),
                )
            })
            .collect();
    }
    if let Some(c) = a.get("components") {
        let dtype = c["dtype"].as_str().unwrap();
        return ["real", "imag"]
            .iter()
            .map(|part| {
                (
                    format!("{name}/{part}"),
                    dtype.to_string(),
                    c[part].as_str().unwrap().to_string(),
                    shape.clone(),
                )
            })
            .collect();
    }
    vec![(
        name.to_string(),
        a["stored_dtype"].as_str().unwrap().to_string(),
        a["sha256"].as_str().unwrap().to_string(),
        shape,
    )]
}

#[test]
fn corpus_matches_sidecars() {
    let mut checked = 0;
    for path in corpus_files() {
        let sidecar = PathBuf::from(format!("{}.expect.json", path.display()));
        let expect: Value =
            serde_json::from_str(&std::fs::read_to_string(&sidecar).unwrap()).unwrap();
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
            want.extend(expected_datasets(a));
        }
        let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            want.iter().map(|w| w.0.as_str()).collect::<Vec<_>>(),
            "{}",
            path.display()
        );
        assert!(src.skipped().is_empty());
        for (i, (name, stored, hash, shape)) in want.iter().enumerate() {
            let v = &src.variables()[i];
            assert_eq!(&v.shape, shape, "{name}");
            let raw = read_all(src.as_ref(), i);
            if let Some(lent) = src.contiguous_bytes(i) {
                assert_eq!(lent, &raw[..], "{name}: contiguous_bytes differs");
            }
            let bytes = widen(v.dtype, &raw, stored);
            assert_eq!(&sha(&bytes), hash, "{}: {name}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} datasets checked");
}

#[test]
fn corpus_metadata() {
    let open = |f: &str| -> Box<dyn Source> {
        let p = Path::new(CORPUS).join(f);
        importer_for(&p).open(&p, &OpenOptions::default()).unwrap()
    };
    let s = open("scalar_0d.npy");
    assert_eq!(s.variables()[0].shape, vec![1]);
    assert!(s.variables()[0].notes.iter().any(|n| n.contains("0-d")));

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

    let s = open("dtype_c64.npy");
    let re = &s.variables()[0];
    assert_eq!(re.dtype, ElementType::F32);
    assert!(re
        .attrs
        .iter()
        .any(|(k, v)| k == "complex_part" && *v == tet_source::AttrValue::Text("real".into())));
    assert!(re
        .attrs
        .iter()
        .any(|(k, v)| k == "complex_dtype" && *v == tet_source::AttrValue::Text("c64".into())));

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
