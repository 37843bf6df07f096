//! Conversion from Python: a [`tet::Request`] (inputs, output, [`tet::settings::Settings`], the
//! settings type of every front end) run by [`tet::run`]. The Python side
//! (`tet/_worker.py`) calls it in a supervised child process, so that a crash of a C library
//! never takes the interpreter down.

use std::collections::BTreeMap;
use std::path::PathBuf;

use pyo3::prelude::*;

use tet::control::{Progress, ProgressEvent};
use tet::pipeline::ConvertError;
use tet::registry::IdentifyError;
use tet::settings::Settings;
use tet::{Context, Request};
use tet_source::SourceError;

use crate::tet_error;

/// Whether an object storage failure says that the object (or its bucket) is not there.
fn storage_not_found(e: &tet::storage::StorageError) -> bool {
    use tet::storage::{Cause, StorageError};
    matches!(
        e,
        StorageError::Remote {
            cause: Cause::NoSuchBucket | Cause::NoSuchKey,
            ..
        }
    )
}

/// The Python exception class (in `tet.errors`) for a conversion error.
fn error_class(e: &ConvertError) -> &'static str {
    let not_found = |io: &std::io::Error| io.kind() == std::io::ErrorKind::NotFound;
    match e {
        ConvertError::Identify(IdentifyError::Io(io)) if not_found(io) => "NotFoundError",
        ConvertError::Io(io) if not_found(io) => "NotFoundError",
        ConvertError::Source(SourceError::Io(io)) if not_found(io) => "NotFoundError",
        ConvertError::Identify(_) | ConvertError::Source(SourceError::Unsupported { .. }) => {
            "UnsupportedError"
        }
        ConvertError::Source(SourceError::Malformed { .. }) => "CorruptError",
        ConvertError::Storage(e) if storage_not_found(e) => "NotFoundError",
        _ => "ConversionError",
    }
}

/// Converts `src` into the `.tet` file `dst` and returns the report as JSON text (the CLI's
/// `--json` report of one conversion): one [`tet::Request`] run by [`tet::run`], as every
/// front end does.
///
/// `src`: a path or an object URL, or a list of them combined along `settings`' `concat`
/// dimension; `dst`: a path or an object URL (staged locally, checked, uploaded whole).
/// `settings`: the conversion's settings in their serde form (JSON text: the keys of a
/// manifest, [`tet::settings::Settings`]; `tet.convert`'s keyword arguments map onto them).
/// `storage_options`: credentials and options of the object stores (`--storage-option`
/// pairs: `endpoint`, `region`, `access_key_id`…); `spool_dir`: where object inputs are
/// downloaded and object outputs staged.
/// `progress`: called as `progress(event, bytes)` with `("start", total raw bytes)`,
/// `("advance", raw bytes of one more chunk)` (from worker threads) and `("finish", 0)`.
#[pyfunction]
#[pyo3(signature = (src, dst, settings = "{}", progress = None, storage_options = None, spool_dir = None))]
pub(crate) fn convert(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: PathBuf,
    settings: &str,
    progress: Option<Py<PyAny>>,
    storage_options: Option<BTreeMap<String, String>>,
    spool_dir: Option<PathBuf>,
) -> PyResult<String> {
    let value_error = |m: String| pyo3::exceptions::PyValueError::new_err(m);
    let settings: Settings =
        serde_json::from_str(settings).map_err(|e| value_error(format!("settings: {e}")))?;
    settings.check().map_err(|e| value_error(e.to_string()))?;
    let inputs: Vec<PathBuf> = match src.extract::<PathBuf>() {
        Ok(p) => vec![p],
        Err(_) => src.extract()?,
    };
    let combined = settings.concat.is_some();
    if combined != (inputs.len() > 1) {
        return Err(value_error(if combined {
            "concat: give a list of two or more inputs".into()
        } else {
            "a list of inputs is combined along a dimension: give concat=\"DIM\"".into()
        }));
    }
    let mut storage = Vec::new();
    for (k, v) in storage_options.unwrap_or_default() {
        // As `--storage-option KEY=VALUE` is read (the key lower-cased); never echoed.
        let (k, v) = tet::storage::parse_option(&format!("{k}={v}"))
            .map_err(|e| value_error(format!("storage_options: {e}")))?;
        storage.push((k, v));
    }
    let shown = inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let request = Request::new(inputs, &dst, settings);
    let context = Context {
        progress: progress.map(progress_of),
        storage,
        spool_dir,
        ..Context::default()
    };
    let report = py
        .detach(|| tet::run(&request, &context))
        .map_err(|e| match e {
            // A setting that does not fit the input (`chunk` naming no dimension, a cut past
            // the end): the caller's argument, as Python says of one.
            ConvertError::Plan(_) | ConvertError::Select(_) => value_error(format!("{shown}: {e}")),
            e => tet_error(py, error_class(&e), format!("{shown}: {e}")),
        })?;
    serde_json::to_string(&report).map_err(|e| value_error(e.to_string()))
}

/// The names of the settings `tet.convert` takes as keyword arguments (the fields of
/// [`tet::settings::Settings`], as the manifest and the worker protocol take them).
pub(crate) fn settings_fields() -> Vec<&'static str> {
    tet::settings::field_names().to_vec()
}

/// The engine's progress events passed to a Python callable (errors it raises are ignored:
/// progress never stops a conversion).
fn progress_of(cb: Py<PyAny>) -> Progress {
    Progress::new(move |event| {
        let (name, bytes) = match event {
            ProgressEvent::Start { total_bytes } => ("start", total_bytes),
            ProgressEvent::Advance { bytes } => ("advance", bytes),
            ProgressEvent::Finish => ("finish", 0),
        };
        Python::attach(|py| {
            let _ = cb.call1(py, (name, bytes));
        });
    })
}

/// The digest the history rows record for an input (`sha256:<hex>`) and its size in bytes.
#[pyfunction]
pub(crate) fn digest_file(py: Python<'_>, path: PathBuf) -> PyResult<(String, u64)> {
    py.detach(|| tet::meta::digest_input(&path))
        .map_err(|e| tet_error(py, "NotFoundError", format!("{}: {e}", path.display())))
}
