//! Helpers shared by the HDF5 integration tests (the corpus, whole reads and digests come from
//! `tet-testkit`): the fixture folder, datasets and attributes written with raw libhdf5 calls
//! for the types hdf5-metno has no builder for, reads and variables by name.
#![allow(dead_code)]

use std::ffi::CString;
use std::path::{Path, PathBuf};

use hdf5::globals as g;
use hdf5_sys::h5a::{H5Aclose, H5Acreate2, H5Awrite};
use hdf5_sys::h5d::{H5Dclose, H5Dcreate2, H5Dwrite};
use hdf5_sys::h5p::{H5Pclose, H5Pcreate, H5Pset_chunk, H5Pset_deflate, H5P_DEFAULT};
use hdf5_sys::h5s::{H5S_class_t, H5Sclose, H5Screate, H5Screate_simple, H5S_ALL};
use hdf5_sys::h5t::{H5T_class_t, H5Tarray_create2, H5Tcreate, H5Tinsert};
use serde_json::Value;
use tet_source::{Source, Variable};
use tet_testkit::{read_all, var_index};

/// A file of `tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The variable `name` of `src`; panics when there is none.
pub fn var<'a>(src: &'a dyn Source, name: &str) -> &'a Variable {
    &src.variables()[var_index(src, name)]
}

/// The whole variable `name` of `src` ([`read_all`]).
pub fn read_named(src: &dyn Source, name: &str) -> Vec<u8> {
    read_all(src, var_index(src, name))
}

/// One of `v`'s notes contains `needle`.
pub fn assert_note(v: &Variable, needle: &str) {
    assert!(
        v.notes.iter().any(|n| n.contains(needle)),
        "{}: no note with {needle:?} in {:?}",
        v.name,
        v.notes
    );
}

/// A JSON array of integers as little-endian i32 bytes.
pub fn json_i32s_le(v: &Value) -> Vec<u8> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .flat_map(|x| {
            let x = x.as_i64().unwrap_or_else(|| panic!("not an integer: {x}"));
            i32::try_from(x).expect("an i32").to_le_bytes()
        })
        .collect()
}

/// A compound type of `size` bytes with the given (name, offset, type) members.
pub fn compound(size: usize, members: &[(&str, usize, i64)]) -> i64 {
    let names: Vec<CString> = members
        .iter()
        .map(|(n, _, _)| CString::new(*n).unwrap())
        .collect();
    // SAFETY: libhdf5 calls under its lock; the member names are NUL-terminated strings that
    // outlive the calls, and the member types are valid type ids of the caller's.
    hdf5::sync::sync(|| unsafe {
        let t = H5Tcreate(H5T_class_t::H5T_COMPOUND, size);
        assert!(t >= 0, "compound type");
        for (c, (_, off, mt)) in names.iter().zip(members) {
            assert!(H5Tinsert(t, c.as_ptr(), *off, *mt) >= 0);
        }
        t
    })
}

/// An array type: each element holds `dims` values of `base`.
pub fn array_type(base: i64, dims: &[u64]) -> i64 {
    // SAFETY: a libhdf5 call under its lock; `dims` holds the `dims.len()` extents it reads.
    let t =
        hdf5::sync::sync(|| unsafe { H5Tarray_create2(base, dims.len() as u32, dims.as_ptr()) });
    assert!(t >= 0, "array type");
    t
}

/// Creates dataset `name` in `loc` of type `tid` (`dims` `None`: scalar), chunked by `chunk`
/// with deflate when given, and writes `bytes` (in that type; nothing when empty).
pub fn dataset(
    loc: &hdf5::Location,
    name: &str,
    tid: i64,
    dims: Option<&[u64]>,
    chunk: Option<&[u64]>,
    bytes: &[u8],
) {
    let c = CString::new(name).unwrap();
    // SAFETY: libhdf5 calls under its lock, on ids created here or valid ones of the caller's;
    // the extents and the name outlive the calls, and `bytes` holds the whole dataset in `tid`.
    hdf5::sync::sync(|| unsafe {
        let space = match dims {
            Some(d) => H5Screate_simple(d.len() as i32, d.as_ptr(), std::ptr::null()),
            None => H5Screate(H5S_class_t::H5S_SCALAR),
        };
        let dcpl = match chunk {
            Some(ch) => {
                let p = H5Pcreate(*g::H5P_DATASET_CREATE);
                assert!(H5Pset_chunk(p, ch.len() as i32, ch.as_ptr()) >= 0);
                assert!(H5Pset_deflate(p, 4) >= 0);
                p
            }
            None => H5P_DEFAULT,
        };
        let ds = H5Dcreate2(
            loc.id(),
            c.as_ptr(),
            tid,
            space,
            H5P_DEFAULT,
            dcpl,
            H5P_DEFAULT,
        );
        assert!(ds >= 0, "create {name}");
        if !bytes.is_empty() {
            let data = bytes.as_ptr().cast();
            assert!(H5Dwrite(ds, tid, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
        }
        H5Dclose(ds);
        H5Sclose(space);
        if chunk.is_some() {
            H5Pclose(dcpl);
        }
    });
}

/// Creates attribute `name` of `loc` of type `tid` and extents `dims`, and writes `data` (in
/// that type) to it.
pub fn attribute(loc: &hdf5::Location, name: &str, tid: i64, dims: &[u64], data: &[u8]) {
    let c = CString::new(name).unwrap();
    // SAFETY: libhdf5 calls under its lock, on ids created here or valid ones of the caller's;
    // the extents and the name outlive the calls, and `data` holds the whole attribute in `tid`.
    hdf5::sync::sync(|| unsafe {
        let space = H5Screate_simple(dims.len() as i32, dims.as_ptr(), std::ptr::null());
        let a = H5Acreate2(loc.id(), c.as_ptr(), tid, space, H5P_DEFAULT, H5P_DEFAULT);
        assert!(a >= 0, "attribute {name}");
        assert!(H5Awrite(a, tid, data.as_ptr().cast()) >= 0);
        H5Aclose(a);
        H5Sclose(space);
    });
}
