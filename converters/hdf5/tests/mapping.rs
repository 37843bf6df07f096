//! Mapping cases the corpus does not cover, on a file written here (hdf5-metno plus raw calls
//! for the types it has no builder for): scalars, null dataspaces, complex compounds, nested
//! compounds with array members, array types, signed enums, bitfields, opaque and
//! variable-length sequences, padded strings, attribute kinds, links of every sort, named
//! datatypes and dimension labels without scales.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use hdf5::types::VarLenUnicode;
use hdf5_sys::h5d::{H5Dclose, H5Dcreate2, H5Dwrite};
use hdf5_sys::h5p::H5P_DEFAULT;
use hdf5_sys::h5s::{H5S_class_t, H5Sclose, H5Screate, H5Screate_simple, H5S_ALL};
use hdf5_sys::h5t::*;
use tet_hdf5::open_path;
use tet_source::{AttrValue, ElementType, OpenOptions, Role, Source, SourceError};

/// Creates `name` in `loc` with a raw type and writes `bytes` (in that type) to it.
fn raw_dataset(loc: &hdf5::Location, name: &str, tid: i64, dims: Option<&[u64]>, bytes: &[u8]) {
    let c = CString::new(name).unwrap();
    hdf5::sync::sync(|| unsafe {
        let space = match dims {
            Some(d) => H5Screate_simple(d.len() as i32, d.as_ptr(), std::ptr::null()),
            None => H5Screate(H5S_class_t::H5S_SCALAR),
        };
        let ds = H5Dcreate2(
            loc.id(),
            c.as_ptr(),
            tid,
            space,
            H5P_DEFAULT,
            H5P_DEFAULT,
            H5P_DEFAULT,
        );
        assert!(ds >= 0, "create {name}");
        if !bytes.is_empty() {
            assert!(
                H5Dwrite(
                    ds,
                    tid,
                    H5S_ALL,
                    H5S_ALL,
                    H5P_DEFAULT,
                    bytes.as_ptr().cast()
                ) >= 0
            );
        }
        H5Dclose(ds);
        H5Sclose(space);
    });
}

fn tcopy(t: &hdf5::globals::H5GlobalConstant) -> i64 {
    hdf5::sync::sync(|| unsafe { H5Tcopy(**t) })
}

fn compound(size: usize, members: &[(&str, usize, i64)]) -> i64 {
    hdf5::sync::sync(|| unsafe {
        let t = H5Tcreate(H5T_class_t::H5T_COMPOUND, size);
        for (n, off, mt) in members {
            let c = CString::new(*n).unwrap();
            assert!(H5Tinsert(t, c.as_ptr(), *off, *mt) >= 0);
        }
        t
    })
}

fn make(path: &Path, outside: &Path) {
    use hdf5::globals::*;
    let f = hdf5::File::create(path).unwrap();
    let root: &hdf5::Location = &f;
    // Scalar.
    let ds = f.new_dataset::<f64>().create("scalar").unwrap();
    ds.write_scalar(&3.5f64).unwrap();
    // Null dataspace.
    hdf5::sync::sync(|| unsafe {
        let space = H5Screate(H5S_class_t::H5S_NULL);
        let c = CString::new("nothing").unwrap();
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
    // Complex compound {r, i} of f64.
    let cplx = compound(
        16,
        &[("r", 0, *H5T_NATIVE_DOUBLE), ("i", 8, *H5T_NATIVE_DOUBLE)],
    );
    let bytes: Vec<u8> = [1.0f64, -1.0, 2.5, 0.5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    raw_dataset(root, "cplx", cplx, Some(&[2]), &bytes);
    // Nested compound with an array member: {a: i16, b: {x: f32, y: u8[3]}} (packed).
    let arr3 =
        hdf5::sync::sync(|| unsafe { H5Tarray_create2(*H5T_NATIVE_UCHAR, 1, [3u64].as_ptr()) });
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
    let a23 =
        hdf5::sync::sync(|| unsafe { H5Tarray_create2(*H5T_NATIVE_FLOAT, 2, [2u64, 3].as_ptr()) });
    let vals: Vec<u8> = (0..24).flat_map(|i| (i as f32).to_le_bytes()).collect();
    raw_dataset(root, "arrays", a23, Some(&[4]), &vals);
    // Signed enum over i16.
    let en = hdf5::sync::sync(|| unsafe {
        let t = H5Tenum_create(*H5T_NATIVE_SHORT);
        for (n, v) in [("LOW", -1i16), ("HIGH", 7)] {
            let c = CString::new(n).unwrap();
            H5Tenum_insert(t, c.as_ptr(), (&v as *const i16).cast());
        }
        t
    });
    let ev: Vec<u8> = [-1i16, 7, 7, -1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    raw_dataset(root, "levels", en, Some(&[4]), &ev);
    // Bitfield.
    raw_dataset(
        root,
        "bits",
        tcopy(&H5T_NATIVE_B16),
        Some(&[2]),
        &[1, 0, 0, 128],
    );
    // Opaque and vlen sequence: unsupported.
    let opq = hdf5::sync::sync(|| unsafe { H5Tcreate(H5T_class_t::H5T_OPAQUE, 4) });
    raw_dataset(root, "blob", opq, Some(&[2]), &[1, 2, 3, 4, 5, 6, 7, 8]);
    let vl = hdf5::sync::sync(|| unsafe { H5Tvlen_create(*H5T_NATIVE_INT) });
    raw_dataset(root, "ragged", vl, Some(&[2]), &[]);
    // Space-padded fixed strings (Fortran style) and a 2-D string array.
    let sp = hdf5::sync::sync(|| unsafe {
        let t = H5Tcopy(*H5T_C_S1);
        H5Tset_size(t, 6);
        H5Tset_strpad(t, H5T_str_t::H5T_STR_SPACEPAD);
        t
    });
    raw_dataset(
        root,
        "padded",
        sp,
        Some(&[2, 2]),
        b"ab    cdef  g     hijklm",
    );
    // A scalar string attribute, a string list, an enum attribute, a compound attribute, an
    // f16-free numeric matrix, an opaque attribute.
    f.new_attr::<VarLenUnicode>()
        .create("title")
        .unwrap()
        .write_scalar(&"hello".parse::<VarLenUnicode>().unwrap())
        .unwrap();
    let names: Vec<VarLenUnicode> = ["a", "bé"].iter().map(|s| s.parse().unwrap()).collect();
    f.new_attr::<VarLenUnicode>()
        .shape([2])
        .create("names")
        .unwrap()
        .write_raw(&names)
        .unwrap();
    hdf5::sync::sync(|| unsafe {
        let mk = |name: &str, t: i64, dims: &[u64], data: &[u8]| {
            let c = CString::new(name).unwrap();
            let space = H5Screate_simple(dims.len() as i32, dims.as_ptr(), std::ptr::null());
            let a =
                hdf5_sys::h5a::H5Acreate2(f.id(), c.as_ptr(), t, space, H5P_DEFAULT, H5P_DEFAULT);
            assert!(a >= 0);
            assert!(hdf5_sys::h5a::H5Awrite(a, t, data.as_ptr().cast()) >= 0);
            hdf5_sys::h5a::H5Aclose(a);
            H5Sclose(space);
        };
        mk("level", en, &[1], &7i16.to_le_bytes());
        mk("pair", cplx, &[1], &bytes[..16]);
        mk("opaque", opq, &[1], &[9, 9, 9, 9]);
    });
    // Links.
    f.create_group("grp").unwrap();
    f.link_soft("/nowhere", "dangling").unwrap();
    f.link_soft("/grp", "grp_alias").unwrap();
    f.link_hard("/scalar", "scalar_again").unwrap();
    f.link_external(outside.to_str().unwrap(), "/d", "outside")
        .unwrap();
    // A named datatype.
    hdf5::sync::sync(|| unsafe {
        let c = CString::new("mytype").unwrap();
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
    let labels: Vec<VarLenUnicode> = ["row", ""].iter().map(|s| s.parse().unwrap()).collect();
    ds.new_attr::<VarLenUnicode>()
        .shape([2])
        .create("DIMENSION_LABELS")
        .unwrap()
        .write_raw(&labels)
        .unwrap();
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

fn read_all(src: &dyn Source, name: &str) -> Vec<u8> {
    let i = src
        .variables()
        .iter()
        .position(|v| v.name == name)
        .unwrap_or_else(|| panic!("{name}"));
    let v = &src.variables()[i];
    let mut out = vec![0u8; v.byte_len().unwrap() as usize];
    src.read_region(i, &vec![0; v.shape.len()], &v.shape, &mut out)
        .unwrap();
    out
}

fn f64s(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn unsupported_types_fail_without_skip() {
    let (_d, p) = fixture();
    let e = open_path(&p, &OpenOptions::default()).unwrap_err();
    assert!(matches!(e, SourceError::Unsupported(_)), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("'blob'") || msg.contains("'ragged'"), "{msg}");
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
    let var = |n: &str| {
        src.variables()
            .iter()
            .find(|v| v.name == n)
            .unwrap_or_else(|| {
                panic!(
                    "no {n}: {:?}",
                    src.variables().iter().map(|v| &v.name).collect::<Vec<_>>()
                )
            })
    };
    let skipped = |n: &str| {
        src.skipped()
            .iter()
            .find(|s| s.name == n)
            .map(|s| s.reason.clone())
            .unwrap_or_else(|| panic!("{n} not skipped: {:?}", src.skipped()))
    };

    // Scalar → [1] with a note; the second hard link is an alias.
    let s = var("scalar");
    assert_eq!(s.shape, vec![1]);
    assert!(s.notes.iter().any(|n| n.contains("0-d")));
    assert_eq!(f64s(&read_all(&src, "scalar")), vec![3.5]);
    assert!(s
        .facts
        .iter()
        .any(|(k, v)| k == "aliases" && *v == AttrValue::TextList(vec!["scalar_again".into()])));
    assert!(src.variables().iter().all(|v| v.name != "scalar_again"));

    assert_eq!(skipped("nothing"), "null dataspace");

    // Complex compound.
    assert_eq!(f64s(&read_all(&src, "cplx/real")), vec![1.0, 2.5]);
    assert_eq!(f64s(&read_all(&src, "cplx/imag")), vec![-1.0, 0.5]);
    assert!(var("cplx/real").notes.iter().any(|n| n.contains("complex")));

    // Nested compound with an array member.
    assert_eq!(var("nested/a").dtype, ElementType::I16);
    assert_eq!(
        read_all(&src, "nested/a"),
        [(-1i16).to_le_bytes(), (-2i16).to_le_bytes()].concat()
    );
    assert_eq!(
        read_all(&src, "nested/b/x"),
        [0.25f32.to_le_bytes(), 1.25f32.to_le_bytes()].concat()
    );
    let y = var("nested/b/y");
    assert_eq!(y.shape, vec![2, 3]);
    assert_eq!(read_all(&src, "nested/b/y"), vec![10, 20, 30, 11, 21, 31]);
    // A sub-region of the array axes.
    let yi = src
        .variables()
        .iter()
        .position(|v| v.name == "nested/b/y")
        .unwrap();
    let mut b = [0u8; 2];
    src.read_region(yi, &[1, 1], &[1, 2], &mut b).unwrap();
    assert_eq!(b, [21, 31]);

    // Array type → trailing axes.
    let a = var("arrays");
    assert_eq!(a.shape, vec![4, 2, 3]);
    let ai = src
        .variables()
        .iter()
        .position(|v| v.name == "arrays")
        .unwrap();
    let mut b = [0u8; 8];
    src.read_region(ai, &[2, 1, 1], &[1, 1, 2], &mut b).unwrap();
    assert_eq!(
        b.to_vec(),
        [16f32.to_le_bytes(), 17f32.to_le_bytes()].concat()
    );

    // Signed enum.
    let l = var("levels");
    assert_eq!(l.dtype, ElementType::I16);
    let Some((_, AttrValue::TextList(m))) = l.facts.iter().find(|(k, _)| k == "enum_mapping")
    else {
        panic!("no mapping");
    };
    let mut m = m.clone();
    m.sort();
    assert_eq!(m, vec!["HIGH=7", "LOW=-1"]);

    // Bitfield → unsigned.
    assert_eq!(var("bits").dtype, ElementType::U16);
    assert_eq!(read_all(&src, "bits"), vec![1, 0, 0, 128]);

    // Unsupported, skipped.
    assert!(skipped("blob").contains("opaque"));
    assert!(skipped("ragged").contains("variable-length"));

    // Space-padded strings.
    let t = src
        .text_variables()
        .iter()
        .find(|t| t.name == "padded")
        .unwrap();
    assert_eq!(t.shape, vec![2, 2]);
    assert_eq!(t.values, vec!["ab", "cdef", "g", "hijklm"]);

    // Attributes.
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
    assert!(skipped("@opaque").contains("opaque"));

    // Links.
    assert!(skipped("dangling").contains("dangling soft link to '/nowhere'"));
    assert!(skipped("grp_alias").contains("soft link to group 'grp'"));
    assert!(skipped("outside").contains("outside the input's directory"));
    assert!(skipped("mytype").contains("named datatype"));

    // Dimension labels without scales: unnamed axes get a generated name.
    assert_eq!(
        var("labelled").dims,
        Some(vec!["row".to_string(), "labelled_dim1".to_string()])
    );
    assert!(src.variables().iter().all(|v| v.role == Role::Data));
    assert!(var("labelled").attrs.is_empty());
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
