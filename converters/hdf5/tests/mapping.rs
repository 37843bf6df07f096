//! Mapping cases the corpus does not cover, on a file written here (hdf5-metno plus raw calls
//! for the types it has no builder for): scalars, null dataspaces, complex compounds, nested
//! compounds with array members, array types, signed enums, bitfields, opaque and
//! variable-length sequences, padded strings, attribute kinds, links of every sort, named
//! datatypes and dimension labels without scales.

use crate::common;

use std::ffi::CString;
use std::path::{Path, PathBuf};

use common::{array_type, attribute, compound, dataset, read_named as read_all, var};
use hdf5::types::VarLenUnicode;
use hdf5_sys::h5d::{H5Dclose, H5Dcreate2};
use hdf5_sys::h5p::H5P_DEFAULT;
use hdf5_sys::h5s::{H5S_class_t, H5Sclose, H5Screate};
use hdf5_sys::h5t::*;
use tet_hdf5::{open_path, H5Source};
use tet_source::{AttrValue, ElementType, Fact, Feature, OpenOptions, Role, Source};
use tet_testkit::{as_f64s, var_index};

/// Creates `name` in `loc` with a raw type and writes `bytes` (in that type) to it.
fn raw_dataset(loc: &hdf5::Location, name: &str, tid: i64, dims: Option<&[u64]>, bytes: &[u8]) {
    dataset(loc, name, tid, dims, None, bytes);
}

fn tcopy(t: &hdf5::globals::H5GlobalConstant) -> i64 {
    // SAFETY: a libhdf5 call under its lock, on a predefined type.
    hdf5::sync::sync(|| unsafe { H5Tcopy(**t) })
}

/// A string list attribute (variable-length UTF-8) of `loc`.
fn strings_attr(loc: &hdf5::Location, name: &str, values: &[&str]) {
    let v: Vec<VarLenUnicode> = values.iter().map(|s| s.parse().unwrap()).collect();
    loc.new_attr::<VarLenUnicode>()
        .shape([v.len()])
        .create(name)
        .unwrap()
        .write_raw(&v)
        .unwrap();
}

/// A dataset with a null dataspace (no elements, not even a scalar's one).
fn null_dataset(f: &hdf5::File, name: &str) {
    let c = CString::new(name).unwrap();
    // SAFETY: libhdf5 calls under its lock, on ids created here; the name outlives the calls.
    hdf5::sync::sync(|| unsafe {
        let space = H5Screate(H5S_class_t::H5S_NULL);
        let ds = H5Dcreate2(
            f.id(),
            c.as_ptr(),
            *H5T_NATIVE_INT,
            space,
            H5P_DEFAULT,
            H5P_DEFAULT,
            H5P_DEFAULT,
        );
        assert!(ds >= 0);
        H5Dclose(ds);
        H5Sclose(space);
    });
}

/// A signed enum over i16: `LOW` = -1, `HIGH` = 7.
fn signed_enum() -> i64 {
    // SAFETY: libhdf5 calls under its lock; the names and values outlive the calls, and each
    // value is an i16, the enum's base type.
    hdf5::sync::sync(|| unsafe {
        let t = H5Tenum_create(*H5T_NATIVE_SHORT);
        for (n, v) in [("LOW", -1i16), ("HIGH", 7)] {
            let c = CString::new(n).unwrap();
            H5Tenum_insert(t, c.as_ptr(), (&v as *const i16).cast());
        }
        t
    })
}

/// Space-padded fixed strings of 6 bytes (Fortran style).
fn space_padded_string() -> i64 {
    // SAFETY: libhdf5 calls under its lock, on a copy of a predefined type made here.
    hdf5::sync::sync(|| unsafe {
        let t = H5Tcopy(*H5T_C_S1);
        H5Tset_size(t, 6);
        H5Tset_strpad(t, H5T_str_t::H5T_STR_SPACEPAD);
        t
    })
}

/// The types a test file holds (see [`make`]): the complex compound, the enum and the opaque
/// type, for the attributes.
struct Types {
    cplx: i64,
    levels: i64,
    opaque: i64,
}

/// The datasets of [`make`]'s file.
fn make_datasets(f: &hdf5::File) -> Types {
    use hdf5::globals::*;
    let root: &hdf5::Location = f;
    // Scalar.
    let ds = f.new_dataset::<f64>().create("scalar").unwrap();
    ds.write_scalar(&3.5f64).unwrap();
    // Null dataspace.
    null_dataset(f, "nothing");
    // Complex compound {r, i} of f64.
    let cplx = compound(
        16,
        &[("r", 0, *H5T_NATIVE_DOUBLE), ("i", 8, *H5T_NATIVE_DOUBLE)],
    );
    raw_dataset(root, "cplx", cplx, Some(&[2]), &cplx_bytes());
    // Nested compound with an array member: {a: i16, b: {x: f32, y: u8[3]}} (packed).
    let arr3 = array_type(*H5T_NATIVE_UCHAR, &[3]);
    let inner = compound(7, &[("x", 0, *H5T_NATIVE_FLOAT), ("y", 4, arr3)]);
    let outer = compound(9, &[("a", 0, *H5T_NATIVE_SHORT), ("b", 2, inner)]);
    let mut rec = Vec::new();
    for k in 0..2u8 {
        rec.extend_from_slice(&(-(k as i16) - 1).to_le_bytes());
        rec.extend_from_slice(&(k as f32 + 0.25).to_le_bytes());
        rec.extend_from_slice(&[10 + k, 20 + k, 30 + k]);
    }
    raw_dataset(root, "nested", outer, Some(&[2]), &rec);
    // Array type: f32[2][3] per element.
    let a23 = array_type(*H5T_NATIVE_FLOAT, &[2, 3]);
    let vals: Vec<u8> = (0..24).flat_map(|i| (i as f32).to_le_bytes()).collect();
    raw_dataset(root, "arrays", a23, Some(&[4]), &vals);
    // Signed enum over i16.
    let levels = signed_enum();
    let ev: Vec<u8> = [-1i16, 7, 7, -1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    raw_dataset(root, "levels", levels, Some(&[4]), &ev);
    // Bitfield.
    raw_dataset(
        root,
        "bits",
        tcopy(&H5T_NATIVE_B16),
        Some(&[2]),
        &[1, 0, 0, 128],
    );
    // Opaque (u8 with a trailing byte axis) and a vlen of vlens (unsupported).
    // SAFETY: a libhdf5 call under its lock.
    let opaque = hdf5::sync::sync(|| unsafe { H5Tcreate(H5T_class_t::H5T_OPAQUE, 4) });
    raw_dataset(root, "blob", opaque, Some(&[2]), &[1, 2, 3, 4, 5, 6, 7, 8]);
    // A vlen of vlens has no tensor form (vlens of numbers are ragged arrays: tests/ragged_opaque.rs).
    // SAFETY: libhdf5 calls under its lock, on a predefined type and the vlen just made.
    let vl = hdf5::sync::sync(|| unsafe { H5Tvlen_create(H5Tvlen_create(*H5T_NATIVE_INT)) });
    raw_dataset(root, "ragged", vl, Some(&[2]), &[]);
    // Space-padded fixed strings (Fortran style) and a 2-D string array.
    raw_dataset(
        root,
        "padded",
        space_padded_string(),
        Some(&[2, 2]),
        b"ab    cdef  g     hijklm",
    );
    Types {
        cplx,
        levels,
        opaque,
    }
}

/// The values of the complex dataset `cplx`: (1, -1), (2.5, 0.5).
fn cplx_bytes() -> Vec<u8> {
    [1.0f64, -1.0, 2.5, 0.5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// The root attributes of [`make`]'s file: a scalar string, a string list, an enum, a compound
/// and an opaque attribute.
fn make_attrs(f: &hdf5::File, t: &Types) {
    f.new_attr::<VarLenUnicode>()
        .create("title")
        .unwrap()
        .write_scalar(&"hello".parse::<VarLenUnicode>().unwrap())
        .unwrap();
    strings_attr(f, "names", &["a", "bé"]);
    attribute(f, "level", t.levels, &[1], &7i16.to_le_bytes());
    attribute(f, "pair", t.cplx, &[1], &cplx_bytes()[..16]);
    attribute(f, "opaque", t.opaque, &[1], &[9, 9, 9, 9]);
}

/// The links, the named datatype and the dimension labels of [`make`]'s file.
fn make_links_and_labels(f: &hdf5::File, outside: &Path) {
    f.create_group("grp").unwrap();
    f.link_soft("/nowhere", "dangling").unwrap();
    f.link_soft("/grp", "grp_alias").unwrap();
    f.link_hard("/scalar", "scalar_again").unwrap();
    f.link_external(outside.to_str().unwrap(), "/d", "outside")
        .unwrap();
    // A named datatype.
    let c = CString::new("mytype").unwrap();
    // SAFETY: libhdf5 calls under its lock, on the open file and a copy of a predefined type;
    // the name outlives the calls.
    hdf5::sync::sync(|| unsafe {
        let t = H5Tcopy(*H5T_NATIVE_INT);
        assert!(H5Tcommit2(f.id(), c.as_ptr(), t, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) >= 0);
    });
    // Dimension labels without scales.
    let ds = f
        .new_dataset::<u8>()
        .shape([2, 3])
        .create("labelled")
        .unwrap();
    ds.write_raw(&[1u8, 2, 3, 4, 5, 6]).unwrap();
    strings_attr(&ds, "DIMENSION_LABELS", &["row", ""]);
}

fn make(path: &Path, outside: &Path) {
    let f = hdf5::File::create(path).unwrap();
    let types = make_datasets(&f);
    make_attrs(&f, &types);
    make_links_and_labels(&f, outside);
}

fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let outside_dir = tempfile::tempdir().unwrap();
    let outside = outside_dir.path().join("x.h5");
    {
        let g = hdf5::File::create(&outside).unwrap();
        g.new_dataset::<i32>().shape([2]).create("d").unwrap();
    }
    let p = dir.path().join("cases.h5");
    make(&p, &outside);
    // Keep the outside directory alive as long as the fixture.
    std::mem::forget(outside_dir);
    (dir, p)
}

fn f64s(b: &[u8]) -> Vec<f64> {
    as_f64s(ElementType::F64, b)
}

/// Why `name` was skipped; panics when it was not.
fn skipped(src: &H5Source, name: &str) -> String {
    src.skipped()
        .iter()
        .find(|s| s.name == name)
        .map(|s| s.reason.clone())
        .unwrap_or_else(|| panic!("{name} not skipped: {:?}", src.skipped()))
}

#[test]
fn unsupported_types_fail_without_skip() {
    let (_d, p) = fixture();
    let e = open_path(&p, &OpenOptions::default()).unwrap_err();
    assert_eq!(e.feature(), Some(Feature::DataType), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("'ragged'"), "{msg}");
}

/// Scalar → a 0-d variable (the engine stores it as [1] and says so); the second hard link is
/// an alias. A null dataspace is skipped. A complex compound is one complex variable of
/// (real, imag) pairs; the engine splits it.
fn check_scalar_null_and_complex(src: &H5Source) {
    let s = var(src, "scalar");
    assert_eq!(s.shape, Vec::<u64>::new());
    assert!(!s.notes.iter().any(|n| n.contains("0-d")), "{:?}", s.notes);
    assert_eq!(f64s(&read_all(src, "scalar")), vec![3.5]);
    assert!(s
        .facts
        .contains(&Fact::Aliases(vec!["scalar_again".into()])));
    assert!(src.variables().iter().all(|v| v.name != "scalar_again"));

    assert_eq!(skipped(src, "nothing"), "null dataspace");

    let c = var(src, "cplx");
    assert_eq!(c.dtype, ElementType::C128);
    assert_eq!(c.shape, vec![2]);
    assert_eq!(f64s(&read_all(src, "cplx")), vec![1.0, -1.0, 2.5, 0.5]);
    assert!(
        !c.notes.iter().any(|n| n.contains("complex")),
        "{:?}",
        c.notes
    );
    assert!(c.facts.is_empty(), "{:?}", c.facts);
    assert!(src
        .variables()
        .iter()
        .all(|v| !v.name.ends_with("/real") && !v.name.ends_with("/imag")));
}

/// A nested compound with an array member is one variable per leaf field, the array member's
/// axes trailing; an array type's axes trail too.
fn check_nested_and_arrays(src: &H5Source) {
    assert_eq!(var(src, "nested/a").dtype, ElementType::I16);
    assert_eq!(
        read_all(src, "nested/a"),
        [(-1i16).to_le_bytes(), (-2i16).to_le_bytes()].concat()
    );
    assert_eq!(
        read_all(src, "nested/b/x"),
        [0.25f32.to_le_bytes(), 1.25f32.to_le_bytes()].concat()
    );
    let y = var(src, "nested/b/y");
    assert_eq!(y.shape, vec![2, 3]);
    assert_eq!(read_all(src, "nested/b/y"), vec![10, 20, 30, 11, 21, 31]);
    // A sub-region of the array axes.
    let mut b = [0u8; 2];
    src.read_region(var_index(src, "nested/b/y"), &[1, 1], &[1, 2], &mut b)
        .unwrap();
    assert_eq!(b, [21, 31]);

    // Array type → trailing axes.
    let a = var(src, "arrays");
    assert_eq!(a.shape, vec![4, 2, 3]);
    let mut b = [0u8; 8];
    src.read_region(var_index(src, "arrays"), &[2, 1, 1], &[1, 1, 2], &mut b)
        .unwrap();
    assert_eq!(
        b.to_vec(),
        [16f32.to_le_bytes(), 17f32.to_le_bytes()].concat()
    );
}

/// A signed enum keeps its base type and mapping; a bitfield is unsigned; opaque values are u8
/// with a trailing byte axis; vlens of vlens are skipped; space-padded strings lose their
/// padding.
fn check_enum_bits_and_strings(src: &H5Source) {
    let l = var(src, "levels");
    assert_eq!(l.dtype, ElementType::I16);
    let Some(Fact::EnumMapping(m)) = l.facts.iter().find(|f| matches!(f, Fact::EnumMapping(_)))
    else {
        panic!("no mapping: {:?}", l.facts);
    };
    let mut m = m.clone();
    m.sort();
    assert_eq!(m, vec![("HIGH".to_string(), 7), ("LOW".to_string(), -1)]);

    assert_eq!(var(src, "bits").dtype, ElementType::U16);
    assert_eq!(read_all(src, "bits"), vec![1, 0, 0, 128]);

    // Opaque blobs: u8 with a trailing axis of the blob size (issue 23).
    let blob = var(src, "blob");
    assert_eq!(
        (blob.dtype, blob.shape.as_slice()),
        (ElementType::U8, &[2u64, 4][..])
    );
    assert_eq!(read_all(src, "blob"), vec![1, 2, 3, 4, 5, 6, 7, 8]);
    assert!(blob.facts.iter().any(|f| matches!(f, Fact::Opaque { .. })));
    assert!(skipped(src, "ragged").contains("variable-length"));

    let t = src
        .text_variables()
        .iter()
        .find(|t| t.name == "padded")
        .unwrap();
    assert_eq!(t.shape, vec![2, 2]);
    assert_eq!(t.values, vec!["ab", "cdef", "g", "hijklm"]);
}

/// Attributes of every kind, links of every sort, a named datatype, dimension labels without
/// scales.
fn check_attrs_links_and_labels(src: &H5Source) {
    let g: std::collections::HashMap<&str, &AttrValue> = src
        .global_attrs()
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    assert_eq!(g["title"], &AttrValue::Text("hello".into()));
    assert_eq!(
        g["names"],
        &AttrValue::TextList(vec!["a".into(), "bé".into()])
    );
    assert_eq!(g["level"], &AttrValue::I16(vec![7]));
    assert_eq!(
        g["pair"],
        &AttrValue::Text("[{\"r\":1.0,\"i\":-1.0}]".into())
    );
    assert!(!g.contains_key("opaque"));
    assert!(skipped(src, "@opaque").contains("opaque"));

    assert!(skipped(src, "dangling").contains("dangling soft link to '/nowhere'"));
    assert!(skipped(src, "grp_alias").contains("soft link to group 'grp'"));
    assert!(skipped(src, "outside").contains("outside the input's directory"));
    assert!(skipped(src, "mytype").contains("named datatype"));

    // Dimension labels without scales: unnamed axes get a generated name.
    assert_eq!(
        var(src, "labelled").dims,
        Some(vec!["row".to_string(), "labelled_dim1".to_string()])
    );
    assert!(src.variables().iter().all(|v| v.role == Role::Data));
    assert!(var(src, "labelled").attrs.is_empty());
}

#[test]
fn cases_map_as_documented() {
    let (_d, p) = fixture();
    let opts = OpenOptions {
        skip_unsupported: true,
        follow_external: true,
        ..OpenOptions::default()
    };
    let src = open_path(&p, &opts).unwrap();
    check_scalar_null_and_complex(&src);
    check_nested_and_arrays(&src);
    check_enum_bits_and_strings(&src);
    check_attrs_links_and_labels(&src);
}

#[test]
fn external_links_are_listed_when_not_followed() {
    let (_d, p) = fixture();
    let opts = OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    };
    let src = open_path(&p, &opts).unwrap();
    let s = src.skipped().iter().find(|s| s.name == "outside").unwrap();
    assert!(s.reason.starts_with("external link to /"), "{}", s.reason);
    assert!(
        s.reason
            .ends_with(":/d not followed (use --follow-external)"),
        "{}",
        s.reason
    );
}
