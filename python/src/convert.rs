//! Conversion from Python: `tet::pipeline::convert` with the CLI's options. The Python side
//! (`tet/_worker.py`) calls it in a supervised child process, so that a crash of a C library
//! never takes the interpreter down.

use std::path::PathBuf;

use pyo3::prelude::*;

use tet::control::{Progress, ProgressEvent};
use tet::pipeline::{convert as run_convert, CodecChoice, ConvertError, ConvertOptions};
use tet::planner::parse_size;
use tet::registry::IdentifyError;
use tet_source::SourceError;

use crate::tet_error;

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
        _ => "ConversionError",
    }
}

/// Converts `src` into the `.tet` file `dst` and returns the report as JSON text (the CLI's
/// `--json` report of one conversion).
///
/// `codec`: `auto`, `raw`, `zstd` or `zstd:N`; `chunk`: the CLI's `--chunk` specs
/// (`4MiB`, `time=1`, `name:1,721,1440`); `jobs`: worker threads (0: one per core);
/// `progress`: called as `progress(event, bytes)` with `("start", total raw bytes)`,
/// `("advance", raw bytes of one more chunk)` (from worker threads) and `("finish", 0)`.
#[pyfunction]
#[pyo3(signature = (src, dst, codec = "auto", chunk = Vec::new(), jobs = 0,
    skip_unsupported = false, unpack = false, follow_external = false, progress = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn convert(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    codec: &str,
    chunk: Vec<String>,
    jobs: usize,
    skip_unsupported: bool,
    unpack: bool,
    follow_external: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let value_error = |m: String| pyo3::exceptions::PyValueError::new_err(m);
    let mut opts = ConvertOptions {
        codec: codec
            .parse::<CodecChoice>()
            .map_err(|e| value_error(e.to_string()))?,
        ..ConvertOptions::default()
    };
    for spec in &chunk {
        match parse_size(spec) {
            Ok(n) if !spec.contains(['=', ':']) => opts.plan.target_bytes = Some(n),
            _ => opts
                .plan
                .add_spec(spec)
                .map_err(|e| value_error(e.to_string()))?,
        }
    }
    if jobs > 0 {
        opts.jobs = jobs;
    }
    opts.open.skip_unsupported = skip_unsupported;
    opts.open.unpack = unpack;
    opts.open.follow_external = follow_external;
    opts.progress = progress.map(progress_of);
    let shown = src.display().to_string();
    let report = py
        .detach(|| run_convert(&src, &dst, &opts))
        .map_err(|e| tet_error(py, error_class(&e), format!("{shown}: {e}")))?;
    serde_json::to_string(&report).map_err(|e| value_error(e.to_string()))
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
