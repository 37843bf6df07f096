//! Export failures keep their cause: an I/O error is an [`ExportError::Io`] whose `source()` is
//! the operating system's error, an unreadable footer a container error whose `source()` is the
//! reader's; classified by variant and error type, not by text.

use crate::common;

use std::error::Error as _;
use std::path::{Path, PathBuf};

use tet::export::{export, ExportError, ExportOptions, FooterUnreadable};
use tet::format::TetError;
use tet::pipeline::ConvertOptions;

use crate::common::convert;

/// A small `.tet` file in `dir` (one f32 array, converted from an `.npy`).
fn make_tet(dir: &Path) -> PathBuf {
    let npy = dir.join("m.npy");
    let mut bytes = tet::export::npy_header(tet_source::ElementType::F32, &[4, 3]).unwrap();
    bytes.extend((0..12u32).flat_map(|i| (i as f32).to_le_bytes()));
    std::fs::write(&npy, bytes).unwrap();
    let tet = dir.join("m.tet");
    let opts = ConvertOptions::from(tet::settings::Settings {
        jobs: Some(1),
        ..Default::default()
    });
    convert(&npy, &tet, &opts).unwrap();
    tet
}

#[test]
fn an_output_in_a_missing_directory_keeps_the_io_error_as_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let tet = make_tet(dir.path());
    let missing = dir.path().join("missing");
    for name in ["out.npz", "out.npy", "out.zarr", "out.nc"] {
        let output = missing.join(name);
        let err = export(&tet, &output, &ExportOptions::default())
            .expect_err("the output's directory does not exist");
        let ExportError::Io { path, source } = &err else {
            panic!("{name}: not an I/O error: {err:?}");
        };
        assert_eq!(path, &missing, "{name}");
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{name}");
        let cause = err
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the io::Error is the source");
        assert_eq!(cause.kind(), std::io::ErrorKind::NotFound);
        // The message is unchanged: one line, the path then the system's text.
        assert_eq!(err.to_string(), format!("{}: {source}", missing.display()));
        assert!(!missing.exists());
    }
}

#[test]
fn an_unreadable_footer_keeps_the_readers_error_as_the_source() {
    let dir = tempfile::tempdir().unwrap();
    // The reference implementation's plan.tet: its footer's history is not valid JSON.
    let input = common::reference("plan.tet");
    let output = dir.path().join("out.npz");
    let err = export(&input, &output, &ExportOptions::default())
        .expect_err("there is no metadata to export");
    let ExportError::Container(c) = &err else {
        panic!("not a container error: {err:?}");
    };
    let unreadable = c
        .downcast_ref::<FooterUnreadable>()
        .expect("the footer's error");
    assert!(matches!(unreadable.source, TetError::Footer(_)));
    // The container error is transparent: its cause is the reader's error.
    let cause = err
        .source()
        .and_then(|s| s.downcast_ref::<TetError>())
        .expect("the reader's error is the source");
    assert!(matches!(cause, TetError::Footer(_)));
    let line = err.to_string();
    assert!(
        line.ends_with(" (the metadata to export is unreadable)"),
        "{line}"
    );
    assert!(!line.contains('\n'), "{line}");
    assert!(!output.exists());
}
