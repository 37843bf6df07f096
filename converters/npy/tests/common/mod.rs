//! Test helpers: writing `.npy` and `.npz` bytes, opening files by their extension.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;

use tet_npy::{NpyImporter, NpzImporter};
use tet_source::{Importer, OpenOptions, Source};

/// The importer of a file: NPZ for `.npz`, NPY otherwise.
pub fn importer_for(path: &Path) -> Box<dyn Importer> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("npz") => Box::new(NpzImporter),
        _ => Box::new(NpyImporter),
    }
}

/// Opens a `.npy` or `.npz` file with the default options; panics naming it when it fails.
pub fn open_file(path: &Path) -> Box<dyn Source> {
    importer_for(path)
        .open(path, &OpenOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Formats a Python shape tuple: `()`, `(3,)`, `(3, 4)`.
pub fn py_shape(shape: &[u64]) -> String {
    match shape {
        [] => "()".into(),
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A `.npy` file: header (version `major`.0, padded to 64 bytes as numpy does) + `data`.
pub fn npy_bytes(major: u8, descr: &str, fortran: bool, shape: &[u64], data: &[u8]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': {descr}, 'fortran_order': {}, 'shape': {}, }}",
        if fortran { "True" } else { "False" },
        py_shape(shape)
    );
    let pre = if major == 1 { 10 } else { 12 };
    let mut text = dict.into_bytes();
    while (pre + text.len() + 1) % 64 != 0 {
        text.push(b' ');
    }
    text.push(b'\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[major, 0]);
    if major == 1 {
        out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(&text);
    out.extend_from_slice(data);
    out
}

/// A `.npz` (zip) of `(member name, bytes, deflated?)`.
pub fn npz_bytes(members: &[(&str, &[u8], bool)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes, deflate) in members {
        let method = if *deflate {
            zip::CompressionMethod::Deflated
        } else {
            zip::CompressionMethod::Stored
        };
        let opts = zip::write::SimpleFileOptions::default().compression_method(method);
        w.start_file(*name, opts).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap().into_inner()
}
