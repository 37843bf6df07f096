//! Helpers shared by the integration tests (the corpus, reads and digests come from
//! `tet-testkit`; what is here is NetCDF's own).
#![allow(dead_code)]

use std::path::PathBuf;

use tet_source::{AttrValue, Fact, OpenOptions, Source};

/// The public NetCDF corpus files (`.nc`), sorted; there must be at least the four the tests
/// were written against.
pub fn corpus_files() -> Vec<PathBuf> {
    let files = tet_testkit::corpus_files("netcdf", &["nc"]);
    assert!(files.len() >= 4, "corpus .nc files missing: {files:?}");
    files
}

/// A whole variable as little-endian bytes, read whole and slab by slab along axis 0 (the two
/// must agree).
pub fn read_all(src: &dyn Source, var: usize) -> Vec<u8> {
    tet_testkit::read_all_in_slabs(src, var)
}

/// The options that open the CF-unpacked view of packed variables.
pub fn unpacking() -> OpenOptions {
    OpenOptions {
        unpack: true,
        ..OpenOptions::default()
    }
}

/// The packing attributes of a CF-unpacked variable (its [`Fact::Unpacked`]).
pub fn packing(facts: &[Fact]) -> Option<&[(String, AttrValue)]> {
    facts.iter().find_map(|f| match f {
        Fact::Unpacked { packing, .. } => Some(packing.as_slice()),
        _ => None,
    })
}

/// The type a CF-unpacked variable was packed in (its [`Fact::Unpacked`]).
pub fn packed_type(facts: &[Fact]) -> Option<&str> {
    facts.iter().find_map(|f| match f {
        Fact::Unpacked { packed_type, .. } => Some(packed_type.as_str()),
        _ => None,
    })
}
