//! Complex numbers as h5py writes them (a compound of two f32 or two f64 named `r`/`i` or
//! `real`/`imag`) are delivered as one `C64` / `C128` variable of interleaved little-endian
//! (real, imaginary) pairs, whatever the members' order, byte order or padding, on every read
//! path (contiguous, direct chunks, the library, array types, compound fields, 0-d).

use crate::common;

use std::path::{Path, PathBuf};

use common::{array_type, assert_note, compound, dataset, read_named as read_all, var};
use hdf5::globals as g;
use tet_hdf5::{open_path, H5Source};
use tet_source::{ElementType, Fact, OpenOptions, Source};
use tet_testkit::var_index;

fn le32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn le64(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn be32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_be_bytes()).collect()
}

fn be64(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// `n` complex values (real k + 0.5, imaginary -k) as (real, imag) pairs.
fn pairs(n: usize) -> Vec<(f64, f64)> {
    (0..n).map(|k| (k as f64 + 0.5, -(k as f64))).collect()
}

/// The expected little-endian interleaved bytes of `pairs` as f32 or f64 parts.
fn interleaved(p: &[(f64, f64)], f64_parts: bool) -> Vec<u8> {
    let flat: Vec<f64> = p.iter().flat_map(|&(r, i)| [r, i]).collect();
    if f64_parts {
        le64(&flat)
    } else {
        le32(&flat.iter().map(|&x| x as f32).collect::<Vec<_>>())
    }
}

fn make(path: &Path) {
    let f = hdf5::File::create(path).unwrap();
    let f32le = *g::H5T_IEEE_F32LE;
    let f64le = *g::H5T_IEEE_F64LE;
    // {r, i} f32, contiguous, 3x2.
    let p = pairs(6);
    let t = compound(8, &[("r", 0, f32le), ("i", 4, f32le)]);
    dataset(
        &f,
        "c64_ri",
        t,
        Some(&[3, 2]),
        None,
        &interleaved(&p, false),
    );
    // {i, r} f32: the imaginary part first.
    let t = compound(8, &[("i", 0, f32le), ("r", 4, f32le)]);
    let b: Vec<f32> = p.iter().flat_map(|&(r, i)| [i as f32, r as f32]).collect();
    dataset(&f, "c64_ir", t, Some(&[6]), None, &le32(&b));
    // {real, imag} big-endian f64.
    let p4 = pairs(4);
    let t = compound(
        16,
        &[
            ("real", 0, *g::H5T_IEEE_F64BE),
            ("imag", 8, *g::H5T_IEEE_F64BE),
        ],
    );
    let b: Vec<f64> = p4.iter().flat_map(|&(r, i)| [r, i]).collect();
    dataset(&f, "c128_be", t, Some(&[4]), None, &be64(&b));
    // {r, i} f64 with padding: r at 0, i at 16 of a 24-byte record.
    let t = compound(24, &[("r", 0, f64le), ("i", 16, f64le)]);
    let mut b = Vec::new();
    for &(r, i) in &p4 {
        b.extend_from_slice(&r.to_le_bytes());
        b.extend_from_slice(&[0xee; 8]);
        b.extend_from_slice(&i.to_le_bytes());
    }
    dataset(&f, "c128_padded", t, Some(&[4]), None, &b);
    // A complex field of a bigger compound: {id: i32, z: {r, i} f32, w: u8}.
    let z = compound(8, &[("r", 0, f32le), ("i", 4, f32le)]);
    let t = compound(
        13,
        &[
            ("id", 0, *g::H5T_STD_I32LE),
            ("z", 4, z),
            ("w", 12, *g::H5T_STD_U8LE),
        ],
    );
    let mut b = Vec::new();
    for (k, &(r, i)) in pairs(3).iter().enumerate() {
        b.extend_from_slice(&(k as i32 * 10).to_le_bytes());
        b.extend_from_slice(&(r as f32).to_le_bytes());
        b.extend_from_slice(&(i as f32).to_le_bytes());
        b.push(k as u8 + 1);
    }
    dataset(&f, "table", t, Some(&[3]), None, &b);
    // Chunked with deflate (direct chunk reads), imaginary first, f64: chunks of 2 over 5.
    let p5 = pairs(5);
    let t = compound(16, &[("imag", 0, f64le), ("real", 8, f64le)]);
    let b: Vec<f64> = p5.iter().flat_map(|&(r, i)| [i, r]).collect();
    dataset(&f, "chunked_ir", t, Some(&[5]), Some(&[2]), &le64(&b));
    // Chunked, in order, big-endian f32 (whole records, swapped per part): 6 in chunks of 4.
    let p6 = pairs(6);
    let t = compound(
        8,
        &[("r", 0, *g::H5T_IEEE_F32BE), ("i", 4, *g::H5T_IEEE_F32BE)],
    );
    let b: Vec<f32> = p6.iter().flat_map(|&(r, i)| [r as f32, i as f32]).collect();
    dataset(&f, "chunked_be", t, Some(&[6]), Some(&[4]), &be32(&b));
    // A 0-d complex.
    let t = compound(16, &[("r", 0, f64le), ("i", 8, f64le)]);
    dataset(&f, "zscalar", t, None, None, &le64(&[2.25, -7.5]));
    // An array type of complex numbers: each element holds 2.
    let z = compound(8, &[("r", 0, f32le), ("i", 4, f32le)]);
    let arr = array_type(z, &[2]);
    dataset(&f, "zarray", arr, Some(&[3]), None, &interleaved(&p, false));
    // Not complex: two floats of different types, or other names.
    let t = compound(12, &[("r", 0, f32le), ("i", 4, f64le)]);
    dataset(
        &f,
        "mixed",
        t,
        Some(&[1]),
        None,
        &[le32(&[1.0]), le64(&[2.0])].concat(),
    );
    let t = compound(8, &[("x", 0, f32le), ("y", 4, f32le)]);
    dataset(&f, "xy", t, Some(&[1]), None, &le32(&[3.0, 4.0]));
}

fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("complex.h5");
    make(&p);
    (dir, p)
}

fn read(src: &H5Source, name: &str, start: &[u64], count: &[u64]) -> Vec<u8> {
    let v = var(src, name);
    let n: u64 = count.iter().product();
    let mut out = vec![0u8; n as usize * v.dtype.size()];
    src.read_region(var_index(src, name), start, count, &mut out)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    out
}

#[test]
fn complex_compounds_are_one_complex_variable() {
    let (_d, p) = fixture();
    let src = open_path(&p, &OpenOptions::default()).unwrap();
    for (name, dtype, shape, n) in [
        ("c64_ri", ElementType::C64, &[3u64, 2][..], 6),
        ("c64_ir", ElementType::C64, &[6], 6),
        ("c128_be", ElementType::C128, &[4], 4),
        ("c128_padded", ElementType::C128, &[4], 4),
        ("chunked_ir", ElementType::C128, &[5], 5),
        ("chunked_be", ElementType::C64, &[6], 6),
        ("zarray", ElementType::C64, &[3, 2], 6),
    ] {
        let want = interleaved(&pairs(n), dtype == ElementType::C128);
        let v = var(&src, name);
        assert_eq!(v.dtype, dtype, "{name}");
        assert_eq!(v.shape, shape, "{name}");
        assert_eq!(read_all(&src, name), want, "{name}");
        // No importer-side split, note or fact of its own about complex numbers.
        assert!(
            !v.notes
                .iter()
                .any(|n| n.contains("complex") || n.contains("0-d")),
            "{name}: {:?}",
            v.notes
        );
        assert!(v.facts.is_empty(), "{name}: {:?}", v.facts);
    }
    assert_note(var(&src, "c128_be"), "big-endian");
    assert!(src
        .variables()
        .iter()
        .all(|v| !v.name.ends_with("/real") && !v.name.ends_with("/imag")));
    // The chunked ones are read by direct chunk access.
    let direct = src.direct_chunk_variables();
    assert!(
        direct.contains(&"chunked_ir") && direct.contains(&"chunked_be"),
        "{direct:?}"
    );
}

#[test]
fn regions_of_complex_variables() {
    let (_d, p) = fixture();
    let src = open_path(&p, &OpenOptions::default()).unwrap();
    let all = pairs(6);
    // Row 1, column 1 of the 3x2 {r, i}.
    assert_eq!(
        read(&src, "c64_ri", &[1, 1], &[1, 1]),
        interleaved(&all[3..4], false)
    );
    // Elements 1..5 of the chunked {imag, real} (three chunks, the last one partial).
    assert_eq!(
        read(&src, "chunked_ir", &[1], &[4]),
        interleaved(&pairs(5)[1..5], true)
    );
    // Elements 3..6 of the big-endian chunked one (across the chunk edge).
    assert_eq!(
        read(&src, "chunked_be", &[3], &[3]),
        interleaved(&all[3..6], false)
    );
    // The second complex of each array element, of records 1..3.
    assert_eq!(
        read(&src, "zarray", &[1, 1], &[2, 1]),
        interleaved(&[all[3], all[5]], false)
    );
    // The library agrees on the whole-record ones.
    for name in ["c64_ri", "chunked_be"] {
        let v = var(&src, name);
        let mut lib = vec![0u8; v.byte_len().unwrap() as usize];
        src.read_region_via_library(
            var_index(&src, name),
            &vec![0; v.shape.len()],
            &v.shape,
            &mut lib,
        )
        .unwrap();
        assert_eq!(lib, read_all(&src, name), "{name}");
    }
}

#[test]
fn complex_fields_scalars_and_extents() {
    let (_d, p) = fixture();
    let src = open_path(&p, &OpenOptions::default()).unwrap();
    // A complex field of a bigger compound is that field's variable.
    let z = var(&src, "table/z");
    assert_eq!(z.dtype, ElementType::C64);
    assert_eq!(z.shape, vec![3]);
    assert!(
        z.facts.contains(&Fact::SourceDataset("table".into())),
        "{:?}",
        z.facts
    );
    assert_note(z, "field 'z'");
    assert_eq!(read_all(&src, "table/z"), interleaved(&pairs(3), false));
    assert_eq!(read_all(&src, "table/w"), vec![1, 2, 3]);
    assert_eq!(
        read_all(&src, "table/id"),
        [0i32, 10, 20]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>()
    );
    // A 0-d complex: empty shape, no note.
    let s = var(&src, "zscalar");
    assert_eq!((s.dtype, s.shape.clone()), (ElementType::C128, vec![]));
    assert!(s.notes.is_empty(), "{:?}", s.notes);
    assert_eq!(read(&src, "zscalar", &[], &[]), le64(&[2.25, -7.5]));
    // Not complex: ordinary fields.
    assert_eq!(var(&src, "mixed/r").dtype, ElementType::F32);
    assert_eq!(var(&src, "mixed/i").dtype, ElementType::F64);
    assert_eq!(read_all(&src, "xy/y"), le32(&[4.0]));
    // Only the in-order little-endian contiguous one is a file extent.
    assert!(src.file_extent(var_index(&src, "c64_ri")).is_some());
    for name in ["c64_ir", "c128_be", "c128_padded", "table/z"] {
        assert!(src.file_extent(var_index(&src, name)).is_none(), "{name}");
    }
}
