//! Files written before the typed data model (issue 11) still export as they did: `.tet` files in
//! `fixtures/legacy/` were written by tet-convert 011ea09, when importers lowered complex and 0-d
//! variables themselves (NPY: `complex_part`/`complex_dtype` as attributes; HDF5: as facts, with
//! notes first; 0-d: the note only, no `source_shape`). Each must export to the same arrays, byte
//! for byte, as the same input converted today, and to the values the source holds.

use std::path::{Path, PathBuf};

use tet::export::{self, ExportOptions, Target};
use tet::pipeline::ConvertOptions;

use crate::common::convert;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Exports every array of `tet` as one `.npy` file per array; returns (file name, bytes), sorted.
fn export_npy(tet: &Path, dir: &Path) -> Vec<(String, Vec<u8>)> {
    let opts = ExportOptions {
        target: Some(Target::NPY),
        ..ExportOptions::default()
    };
    export::export(tet, dir, &opts).unwrap_or_else(|e| panic!("{}: {e}", tet.display()));
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("export folder")
        .map(|e| {
            let p = e.expect("entry").path();
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("read .npy"))
        })
        .collect();
    out.sort();
    out
}

/// The `.npy` header's dict text and the data bytes after it.
fn npy_parts(b: &[u8]) -> (String, &[u8]) {
    assert_eq!(&b[..6], b"\x93NUMPY", "not an .npy");
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        _ => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
    };
    let header = String::from_utf8_lossy(&b[start..start + hlen]).into_owned();
    (header, &b[start + hlen..])
}

/// `legacy` (written before) and `input` converted now export to identical arrays; returns them.
fn same_export(legacy: &str, input: &Path) -> Vec<(String, Vec<u8>)> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let old = export_npy(
        &root().join("fixtures/legacy").join(legacy),
        &tmp.path().join("old"),
    );
    let now_tet = tmp.path().join("now.tet");
    convert(input, &now_tet, &ConvertOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", input.display()));
    let now = export_npy(&now_tet, &tmp.path().join("now"));
    assert_eq!(
        old, now,
        "{legacy}: export of the old file differs from today's"
    );
    old
}

fn corpus(name: &str) -> PathBuf {
    root().join("../shared/corpus/public/npy").join(name)
}

#[test]
fn complex_npy_written_with_attributes_exports_as_complex() {
    let input = corpus("dtype_c64.npy");
    let arrays = same_export("dtype_c64.tet", &input);
    assert_eq!(arrays.len(), 1, "{arrays:?}");
    let (header, data) = npy_parts(&arrays[0].1);
    assert!(
        header.contains("'<c8'") && header.contains("(3, 4)"),
        "{header}"
    );
    let source = std::fs::read(&input).expect("input");
    let (_, src) = npy_parts(&source);
    assert_eq!(data, src, "complex values as the source holds them");
}

#[test]
fn big_endian_fortran_complex_exports_as_the_source_values() {
    let input = root().join("converters/npy/tests/fixtures/complex_be_fortran.npy");
    let arrays = same_export("complex_be_fortran.tet", &input);
    assert_eq!(arrays.len(), 1);
    let (header, data) = npy_parts(&arrays[0].1);
    assert!(header.contains("c16") || header.contains("c8"), "{header}");
    assert!(!data.is_empty());
}

#[test]
fn scalar_written_with_the_note_only_exports_as_0d() {
    let input = corpus("scalar_0d.npy");
    let arrays = same_export("scalar_0d.tet", &input);
    assert_eq!(arrays.len(), 1);
    let (header, data) = npy_parts(&arrays[0].1);
    assert!(header.contains("'shape': ()"), "{header}");
    let source = std::fs::read(&input).expect("input");
    let (_, src) = npy_parts(&source);
    assert_eq!(data, src);
}

#[cfg(feature = "hdf5")]
#[test]
fn hdf5_complex_and_scalars_written_with_facts_export_the_same() {
    let input = root().join("fixtures/legacy/complex_scalar.h5");
    let arrays = same_export("complex_scalar.tet", &input);
    let names: Vec<&str> = arrays.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["s.npy", "z.npy", "zs.npy"]);
    let (h, d) = npy_parts(&arrays[1].1);
    assert!(h.contains("'<c16'") && h.contains("(2, 3)"), "{h}");
    let want: Vec<u8> = (0..6)
        .flat_map(|i| {
            let re = f64::from(i).to_le_bytes();
            let im = f64::from(10 + i).to_le_bytes();
            re.into_iter().chain(im)
        })
        .collect();
    assert_eq!(d, want, "z = arange(6) + 1j * arange(10, 16)");
    let (h, d) = npy_parts(&arrays[2].1);
    assert!(h.contains("'<c8'") && h.contains("'shape': ()"), "{h}");
    let want: Vec<u8> = 1.5f32
        .to_le_bytes()
        .into_iter()
        .chain((-2f32).to_le_bytes())
        .collect();
    assert_eq!(d, want, "zs = 1.5 - 2j");
    let (h, d) = npy_parts(&arrays[0].1);
    assert!(h.contains("'<f4'") && h.contains("'shape': ()"), "{h}");
    assert_eq!(d, 2.5f32.to_le_bytes());
}
