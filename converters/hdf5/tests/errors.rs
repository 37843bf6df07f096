//! Errors of libhdf5 stay errors (issue 21): an importer error that libhdf5 reported carries
//! libhdf5's own error as its `source()`, classified by variant and library, not by text.

use std::error::Error as _;
use std::path::PathBuf;

use tet_hdf5::chunks::ChunkedVar;
use tet_source::{Importer, Lib, OpenOptions, SourceError};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn a_missing_dataset_keeps_libhdf5s_error_as_the_source() {
    let err = match ChunkedVar::open(&fixture("types.h5"), "/no/such/dataset") {
        Ok(_) => panic!("a missing dataset opened"),
        Err(e) => e,
    };
    let SourceError::Library { lib, context, .. } = &err else {
        panic!("not a library error: {err:?}");
    };
    assert_eq!(*lib, Lib::Hdf5);
    assert_eq!(context, "dataset '/no/such/dataset'");
    let source = err.source().expect("the library error is kept");
    let h5 = source
        .downcast_ref::<hdf5::Error>()
        .unwrap_or_else(|| panic!("source is not an hdf5::Error: {source:?}"));
    // The one-line message still ends with libhdf5's own text.
    let text = h5.to_string();
    assert!(!text.is_empty());
    assert!(err.to_string().ends_with(&text), "{err}");
    assert!(
        err.to_string().starts_with("dataset '/no/such/dataset': "),
        "{err}"
    );
}

#[test]
fn a_file_libhdf5_cannot_open_keeps_its_error() {
    // An HDF5 signature followed by garbage: our sniffing says HDF5, libhdf5 refuses it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.h5");
    let mut bytes = b"\x89HDF\r\n\x1a\n".to_vec();
    bytes.extend(std::iter::repeat_n(0xA5u8, 4096));
    std::fs::write(&path, &bytes).unwrap();
    let err = match tet_hdf5::H5Importer.open(&path, &OpenOptions::default()) {
        Ok(_) => panic!("a broken file opened"),
        Err(e) => e,
    };
    // Our superblock check cannot tell (the version bytes are unknown): libhdf5 is asked, and
    // its refusal is the error's cause, not text folded into a message.
    let SourceError::Library { lib, context, .. } = &err else {
        panic!("not a library error: {err:?}");
    };
    assert_eq!(*lib, Lib::Hdf5);
    assert_eq!(context, "not a readable HDF5 file");
    // Walk the chain: libhdf5's error (hdf5-metno's type) is there, with libhdf5's own text.
    let mut chain = std::iter::successors(err.source(), |&e| e.source());
    let h5 = chain
        .find_map(|e| e.downcast_ref::<hdf5::Error>())
        .unwrap_or_else(|| panic!("no hdf5::Error among the causes of {err:?}"));
    let text = h5.to_string();
    assert!(text.contains("unable to"), "not libhdf5's text: {text}");
    assert_eq!(err.to_string(), format!("not a readable HDF5 file: {text}"));
}
