//! `tet.reproduce`: a `.tet` file re-made from what its footer records and compared with it,
//! by the engine's [`tet::provenance::reproduce::reproduce_report`] — the function `tet audit
//! --reproduce` runs, so the value is the one `tet audit --reproduce --json` prints.
//!
//! The re-run sets the process's working directory and `SOURCE_DATE_EPOCH` to the recorded
//! ones for its duration (see [`tet::provenance::reproduce::InProcess`]): `tet/_reproduce.py`
//! calls this in a child process, never in the interpreter the user works in.

use std::path::PathBuf;

use pyo3::prelude::*;

/// Reproduces `path` and returns the `tet-reproduce/1` report as JSON text.
///
/// `allow_version_drift`: a file recorded by another version of tet-convert is re-made and
/// its values compared instead of its bytes. `storage_options`: `(key, value)` pairs for
/// object inputs, as `--storage-option` takes them.
#[pyfunction]
#[pyo3(signature = (path, allow_version_drift = false, storage_options = Vec::new()))]
pub(crate) fn reproduce(
    py: Python<'_>,
    path: PathBuf,
    allow_version_drift: bool,
    storage_options: Vec<(String, String)>,
) -> String {
    let opts = tet::provenance::reproduce::Options {
        allow_version_drift,
        storage: storage_options,
    };
    let (_, report) = py.detach(|| tet::provenance::reproduce::reproduce_report(&path, &opts));
    report.to_string()
}
