//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tet_source::{AttrValue, ElementType, Source};

pub fn corpus_dir() -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/public/netcdf"
    ))
    .to_path_buf()
}

pub fn corpus_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("corpus directory shared/corpus/public/netcdf")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "nc"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "corpus .nc files missing: {files:?}");
    files
}

/// A whole variable as little-endian bytes, read slab by slab along axis 0 and checked against
/// one whole read.
pub fn read_all(src: &dyn Source, var: usize) -> Vec<u8> {
    let v = &src.variables()[var];
    let size = v.dtype.size();
    let n = v.element_count().unwrap() as usize;
    let mut whole = vec![0u8; n * size];
    let zeros = vec![0u64; v.shape.len()];
    src.read_region(var, &zeros, &v.shape, &mut whole)
        .unwrap_or_else(|e| panic!("{}: {e}", v.name));
    if v.shape[0] > 0 {
        let slab = n / v.shape[0] as usize * size;
        let mut pieces = Vec::with_capacity(whole.len());
        for i in 0..v.shape[0] {
            let mut start = zeros.clone();
            start[0] = i;
            let mut count = v.shape.clone();
            count[0] = 1;
            let mut buf = vec![0u8; slab];
            src.read_region(var, &start, &count, &mut buf).unwrap();
            pieces.extend_from_slice(&buf);
        }
        assert_eq!(
            pieces, whole,
            "{}: slab reads differ from a whole read",
            v.name
        );
    }
    whole
}

/// Bytes as stored in `.tet`: i8 widened to i16 (what the engine does).
pub fn widen(dtype: ElementType, bytes: Vec<u8>) -> Vec<u8> {
    match dtype {
        ElementType::I8 => bytes
            .iter()
            .flat_map(|&b| i16::from(b as i8).to_le_bytes())
            .collect(),
        _ => bytes,
    }
}

pub fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn find<'a>(attrs: &'a [(String, AttrValue)], key: &str) -> Option<&'a AttrValue> {
    attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}
