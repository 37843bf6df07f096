//! `tet._tet`: the Rust side of the Python package `tet` (see `python/README.md`).
//!
//! A thin layer over the engine crate: `Reader` opens a `.tet` file with the engine's reader
//! and raises its datasets to what the source held (`tet::export::Plan` with every element
//! type), and reads outer selections of them with `tet::export::read_selection` — the GIL
//! released, chunks decoded on the engine's rayon pool. Conversion and verification call
//! `tet::pipeline::convert` and `tet::format::verify`; `verify_json`/`audit_json` return the
//! engine's `tet verify --json`/`tet audit --json` reports (`tet::provenance::report`). A `.tet`
//! may be an object URL (`s3://`, `gs://`, `az://`, `https://`), read by ranges
//! (`tet::storage::open_tet`, the cargo feature `object-store`). Everything Pythonic (indexing, the
//! xarray backend, the supervised conversion worker) lives in `python/tet/`.

mod convert;
mod reproduce;
mod values;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyType};

use tet::control::Cancel;
use tet::export::{read_selection, DamagedFooter, ExportError, Plan};
use tet::format::verify::{verify, Depth, Finding};
use tet::format::{Footer, TetError, TetFile};
use tet::storage::{open_tet, Cause, OpenTetError, OpenedTet, StorageError};

use values::{attrs_to_py, facts_to_py};

/// Raises the Python exception class `name` of `tet.errors` with `msg`.
pub(crate) fn tet_error(py: Python<'_>, name: &str, msg: String) -> PyErr {
    let cls = py
        .import("tet.errors")
        .and_then(|m| m.getattr(name))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match cls {
        Ok(cls) => PyErr::from_type(cls, msg),
        Err(e) => e,
    }
}

/// The exception for an engine error of the reader.
fn from_tet(py: Python<'_>, what: &str, e: TetError) -> PyErr {
    match e {
        TetError::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
            tet_error(py, "NotFoundError", format!("{what}: {io}"))
        }
        TetError::Io(io) => tet_error(py, "TetError", format!("{what}: {io}")),
        TetError::Invalid(m) => PyValueError::new_err(format!("{what}: {m}")),
        e => tet_error(py, "CorruptError", format!("{what}: {e}")),
    }
}

/// The exception for a `.tet` (a path or an object URL) that cannot be opened: a missing file
/// or object `NotFoundError`, a storage setting the store does not take `ValueError` (naming
/// the closest), another storage failure `TetError`, bytes that are no `.tet` `CorruptError`.
fn from_open(py: Python<'_>, what: &str, e: OpenTetError) -> PyErr {
    match e {
        OpenTetError::Tet(t) => from_tet(py, what, t),
        OpenTetError::Fetch(f) => {
            let msg = format!("{what}: {f}");
            match &f.0 {
                s if s.is_not_found() => tet_error(py, "NotFoundError", msg),
                StorageError::Remote {
                    cause:
                        Cause::UnknownOption { .. } | Cause::NotANumber(_) | Cause::NotAnObjectUrl(_),
                    ..
                } => PyValueError::new_err(msg),
                _ => tet_error(py, "TetError", msg),
            }
        }
        e @ OpenTetError::OtherFormat(_) => tet_error(py, "CorruptError", format!("{what}: {e}")),
    }
}

/// `storage_options` as the engine takes them: keys lower-cased (as `--storage-option`).
fn storage_pairs(options: Option<Vec<(String, String)>>) -> tet::storage::Options {
    options
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v))
        .collect()
}

/// The exception for an error of a read.
fn from_export(py: Python<'_>, what: &str, e: ExportError) -> PyErr {
    match e {
        ExportError::Container(c) => match c.downcast::<TetError>() {
            Ok(t) => from_tet(py, what, *t),
            Err(c) => tet_error(py, "CorruptError", format!("{what}: {c}")),
        },
        ExportError::Invalid(m) => PyValueError::new_err(format!("{what}: {m}")),
        e => tet_error(py, "CorruptError", format!("{what}: {e}")),
    }
}

/// The exception for a file a reader refuses at open: always a `CorruptError` (the caller
/// gave nothing but the path), one that says how to read the datasets anyway when it is the
/// footer that is unreadable.
fn refused(py: Python<'_>, what: &str, e: ExportError) -> PyErr {
    let footer = matches!(&e, ExportError::Container(c)
        if matches!(c.downcast_ref::<TetError>(), Some(TetError::Footer(_))));
    let hint = if footer {
        "; tet.open(path, allow_damaged_footer=True) reads its datasets as stored, without \
         their attributes, history or checksums"
    } else {
        ""
    };
    match e {
        ExportError::Container(c) => match c.downcast::<TetError>() {
            Ok(t) if matches!(*t, TetError::Io(_)) => from_tet(py, what, *t),
            Ok(t) => tet_error(py, "CorruptError", format!("{what}: {t}{hint}")),
            Err(c) => tet_error(py, "CorruptError", format!("{what}: {c}")),
        },
        e => tet_error(py, "CorruptError", format!("{what}: {e}")),
    }
}

/// Chunks read by every reader of this process.
static TOTAL_CHUNKS_READ: AtomicU64 = AtomicU64::new(0);

/// Chunks read by every reader of this process so far (what laziness tests count through
/// xarray, whose readers are not at hand).
#[pyfunction]
fn chunks_read_total() -> u64 {
    TOTAL_CHUNKS_READ.load(Ordering::Relaxed)
}

/// An open file and its raised model.
struct Open {
    tet: OpenedTet,
    plan: Plan,
}

/// An open `.tet` file: metadata from the footer, values read by selection.
#[pyclass(frozen, module = "tet._tet")]
struct Reader {
    path: PathBuf,
    open: RwLock<Option<Arc<Open>>>,
    chunks_read: AtomicU64,
    /// Why the footer could not be read (the datasets are then read as stored: only when the
    /// caller allowed it).
    footer_error: Option<String>,
    /// Whether the file's checksums held at open and guard every chunk read.
    verified: bool,
}

impl Reader {
    fn get(&self, py: Python<'_>) -> PyResult<Arc<Open>> {
        let g = self
            .open
            .read()
            .map_err(|_| tet_error(py, "TetError", "reader lock poisoned".into()))?;
        g.clone().ok_or_else(|| {
            PyValueError::new_err(format!("{}: the file is closed", self.path.display()))
        })
    }
}

/// A buffer of `n` zero bytes from the allocator's zeroed memory (fresh pages from the
/// system for large sizes: no pass over them before the read fills them); `None` when the
/// allocation fails.
fn zeroed(n: usize) -> Option<Vec<u8>> {
    if n == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(n).ok()?;
    // SAFETY: the layout's size is n > 0, as `alloc_zeroed` requires.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` comes from the global allocator with the layout of `n` bytes (capacity `n`,
    // the allocated size), and all `n` bytes are initialised (zeroed).
    Some(unsafe { Vec::from_raw_parts(p, n, n) })
}

/// The file's footer, borrowed (an empty one when the file has none or it is unreadable).
fn footer_of(tet: &TetFile) -> &Footer {
    static EMPTY: std::sync::OnceLock<Footer> = std::sync::OnceLock::new();
    match tet.footer() {
        Ok(Some(f)) => f,
        _ => EMPTY.get_or_init(Footer::default),
    }
}

#[pymethods]
impl Reader {
    /// Opens `path` (a local path, or an object URL read by ranges with `storage_options`:
    /// `tet::storage::open_tet`): reads its directory, index and footer (no chunk data),
    /// checks the footer digest and that the index covers every dataset
    /// (`tet::export::Plan::for_reading`). A file whose footer is unreadable raises
    /// `CorruptError` unless `allow_damaged_footer` (its datasets are then read as stored).
    #[new]
    #[pyo3(signature = (path, allow_damaged_footer = false, storage_options = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        allow_damaged_footer: bool,
        storage_options: Option<Vec<(String, String)>>,
    ) -> PyResult<Self> {
        let shown = path.display().to_string();
        let options = storage_pairs(storage_options);
        let tet = py
            .detach(|| open_tet(&path, &options, &Cancel::never()))
            .map_err(|e| from_open(py, &shown, e))?;
        let damaged = if allow_damaged_footer {
            DamagedFooter::ReadStored
        } else {
            DamagedFooter::Refuse
        };
        let reading = py
            .detach(|| Plan::for_reading(&tet, damaged))
            .map_err(|e| refused(py, &shown, e))?;
        Ok(Reader {
            path,
            open: RwLock::new(Some(Arc::new(Open {
                tet,
                plan: reading.plan,
            }))),
            chunks_read: AtomicU64::new(0),
            footer_error: reading.footer_error,
            verified: reading.verified,
        })
    }

    /// The path the file was opened from.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Chunks read by this reader so far (a selection touching 3 chunks adds 3).
    #[getter]
    fn chunks_read(&self) -> u64 {
        self.chunks_read.load(Ordering::Relaxed)
    }

    /// Why the footer is unreadable (`None` when it was read or the file has none).
    #[getter]
    fn footer_error(&self) -> Option<String> {
        self.footer_error.clone()
    }

    /// Whether the file records checksums and they held at open (every chunk read is then
    /// checked); `false` for a file that records none (the reference tools') or whose footer
    /// is unreadable.
    #[getter]
    fn verified(&self) -> bool {
        self.verified
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.open.read().map(|g| g.is_none()).unwrap_or(true)
    }

    /// Unmaps the file; later reads raise.
    fn close(&self) {
        if let Ok(mut g) = self.open.write() {
            *g = None;
        }
    }

    /// The arrays as the source held them: a list of dicts (name, dtype, shape, chunk_shape,
    /// dims, attrs, role, facts, stored, coords, meta).
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let o = self.get(py)?;
        let footer = footer_of(&o.tet);
        let list = PyList::empty(py);
        for (i, a) in o.plan.model.arrays.iter().enumerate() {
            let d = PyDict::new(py);
            d.set_item("name", &a.name)?;
            d.set_item("dtype", a.dtype.name())?;
            d.set_item("shape", &a.shape)?;
            d.set_item("chunk_shape", &a.chunk_shape)?;
            d.set_item("dims", &a.dims)?;
            d.set_item("attrs", attrs_to_py(py, &a.attrs)?)?;
            let role = match a.role {
                tet_source::Role::Coordinate => "coordinate",
                _ => "data",
            };
            d.set_item("role", role)?;
            d.set_item("facts", facts_to_py(py, &a.facts)?)?;
            let (ds, imag) = o.plan.stored_datasets(i).unwrap_or((0, None));
            let names: Vec<&str> = std::iter::once(ds)
                .chain(imag)
                .filter_map(|k| o.tet.datasets.get(k).map(|x| x.name.as_str()))
                .collect();
            d.set_item("stored", &names)?;
            let meta = names.first().and_then(|n| footer.datasets.get(*n));
            let coords = PyDict::new(py);
            let extra = PyDict::new(py);
            if let Some(m) = meta {
                for (k, v) in &m.coords {
                    coords.set_item(k, v)?;
                }
                for (k, v) in &m.ext.to_json_map() {
                    extra.set_item(k, v.to_string())?;
                }
            }
            d.set_item("coords", coords)?;
            d.set_item("meta", extra)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// The file-level attributes, typed, in source order: a list of (name, value).
    fn global_attrs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let o = self.get(py)?;
        attrs_to_py(py, &o.plan.model.global_attrs)
    }

    /// The file's facts (`global_facts`): a list of (name, value).
    fn global_facts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let o = self.get(py)?;
        facts_to_py(py, &o.plan.model.global_facts)
    }

    /// The history rows: a list of dicts (op, source, at, parents, params).
    fn history<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let o = self.get(py)?;
        let list = PyList::empty(py);
        for r in &footer_of(&o.tet).history {
            let d = PyDict::new(py);
            d.set_item("op", &r.op)?;
            d.set_item("source", &r.source)?;
            d.set_item("at", &r.at)?;
            d.set_item("parents", &r.parents)?;
            d.set_item("params", &r.params)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// The history rows as CF `history` lines, oldest first.
    fn history_lines(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.get(py)?.plan.model.history.clone())
    }

    /// `metadata.file` of the footer (tool, library version, creation time…).
    fn file_info(&self, py: Python<'_>) -> PyResult<std::collections::BTreeMap<String, String>> {
        Ok(footer_of(&self.get(py)?.tet).file.clone())
    }

    /// Items of the source that have no `.tet` form: a list of (name, reason).
    fn skipped(&self, py: Python<'_>) -> PyResult<Vec<(String, String)>> {
        Ok(footer_of(&self.get(py)?.tet)
            .skipped
            .iter()
            .map(|s| (s.name.clone(), s.reason.clone()))
            .collect())
    }

    /// The string variables: a list of dicts (name, shape, dims, values, attrs, char_dim,
    /// facts); a malformed record is a dict with its name and `malformed: True`.
    fn text_variables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        values::text_variables(py, &self.get(py)?.plan.model.text_variables)
    }

    /// The footer JSON as the file holds it (`None` without a footer).
    fn footer_json(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let o = self.get(py)?;
        Ok(o.tet.footer_json().0.map(|v| v.to_string()))
    }

    /// Reads the outer selection `sel` (per axis, strictly increasing positions, uint64) of
    /// array number `array`: the values as little-endian bytes of the array's type (a uint8
    /// array, C order). Only the chunks holding selected elements are read, decoded in
    /// parallel without the GIL.
    fn read<'py>(
        &self,
        py: Python<'py>,
        array: usize,
        sel: Vec<PyReadonlyArray1<'py, u64>>,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let o = self.get(py)?;
        let sel: Vec<Vec<u64>> = sel
            .iter()
            .map(|s| s.as_slice().map(<[u64]>::to_vec))
            .collect::<Result<_, _>>()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let a = o
            .plan
            .model
            .arrays
            .get(array)
            .ok_or_else(|| PyValueError::new_err(format!("no array {array}")))?;
        let n = sel
            .iter()
            .try_fold(a.dtype.size(), |acc, s| acc.checked_mul(s.len()))
            .ok_or_else(|| PyValueError::new_err("selection too large"))?;
        let what = format!("{}: `{}`", self.path.display(), a.name);
        // The array's shape was checked against the chunk index at open: an allocation that
        // fails here is a selection too large for this machine, not a damaged file.
        let (res, buf) = py
            .detach(|| {
                let mut buf = zeroed(n)?;
                Some((read_selection(&o.tet, &o.plan, array, &sel, &mut buf), buf))
            })
            .ok_or_else(|| PyMemoryError::new_err(format!("{what}: cannot allocate {n} bytes")))?;
        let chunks = res.map_err(|e| from_export(py, &what, e))?;
        self.chunks_read.fetch_add(chunks, Ordering::Relaxed);
        TOTAL_CHUNKS_READ.fetch_add(chunks, Ordering::Relaxed);
        Ok(PyArray1::from_vec(py, buf))
    }

    /// Verifies the file (`deep`: every chunk decoded and checked, else a sample): see
    /// [`verify_report`].
    #[pyo3(signature = (deep = true))]
    fn verify<'py>(&self, py: Python<'py>, deep: bool) -> PyResult<Bound<'py, PyDict>> {
        let o = self.get(py)?;
        verify_report(py, &o.tet, deep)
    }
}

/// Verifies `tet` (`deep`: every chunk decoded and checked, else a sample): a dict with `ok`,
/// `failures`, `warnings`, `notes` (lists of (code, message)), `chunks`, `decoded`,
/// `checksummed`, `checked`, `footer_digest`.
fn verify_report<'py>(py: Python<'py>, tet: &TetFile, deep: bool) -> PyResult<Bound<'py, PyDict>> {
    let depth = if deep { Depth::Deep } else { Depth::Sample };
    let r = py.detach(|| verify(tet, depth));
    let d = PyDict::new(py);
    let pairs = |f: &[Finding]| -> Vec<(String, String)> {
        f.iter()
            .map(|x| (x.code.to_string(), x.message.clone()))
            .collect()
    };
    d.set_item("ok", r.ok())?;
    d.set_item("failures", pairs(&r.failures))?;
    d.set_item("warnings", pairs(&r.warnings))?;
    d.set_item("notes", pairs(&r.notes))?;
    d.set_item("chunks", r.chunks)?;
    d.set_item("decoded", r.decoded)?;
    d.set_item("checksummed", r.checksummed)?;
    d.set_item("checked", r.checked)?;
    d.set_item("footer_digest", r.footer_digest)?;
    Ok(d)
}

/// Verifies the file at `path` without the checks of opening it for reading (a damaged footer
/// or digest is a finding here, not a refusal): the dict of `Reader.verify`. Raises only when
/// the file cannot be opened at all (missing, its structure cannot be followed).
#[pyfunction]
#[pyo3(signature = (path, deep = true))]
fn verify_file<'py>(py: Python<'py>, path: PathBuf, deep: bool) -> PyResult<Bound<'py, PyDict>> {
    let tet = py
        .detach(|| TetFile::open(&path))
        .map_err(|e| from_tet(py, &path.display().to_string(), e))?;
    verify_report(py, &tet, deep)
}

/// `tet verify --json` of `path` (a local path or an object URL): the `tet-verify/1` object as
/// JSON text, built by the engine function the CLI prints
/// (`tet::provenance::report::verify_file`). `signers`: an `allowed_signers` file.
#[pyfunction]
#[pyo3(signature = (path, deep = false, signers = None, storage_options = None))]
fn verify_json(
    py: Python<'_>,
    path: PathBuf,
    deep: bool,
    signers: Option<PathBuf>,
    storage_options: Option<Vec<(String, String)>>,
) -> PyResult<String> {
    use tet::provenance::report;
    let options = storage_pairs(storage_options);
    let allowed = load_signers(py, signers)?;
    let depth = if deep { Depth::Deep } else { Depth::Sample };
    let r = py
        .detach(|| report::verify_file(&path, depth, allowed.as_ref(), &options, &Cancel::never()));
    Ok(report::verify_json(&path.display().to_string(), depth, &r).to_string())
}

/// `tet audit --json` of `path` (a local path or an object URL): the `tet-audit/1` object as
/// JSON text (`tet::provenance::report::audit_file`, what the CLI prints). `sources`: the
/// `--source` paths or URLs. Raises when the file or its history cannot be read (the CLI's
/// one-line failure).
#[pyfunction]
#[pyo3(signature = (path, sources = Vec::new(), signers = None, storage_options = None))]
fn audit_json(
    py: Python<'_>,
    path: PathBuf,
    sources: Vec<PathBuf>,
    signers: Option<PathBuf>,
    storage_options: Option<Vec<(String, String)>>,
) -> PyResult<String> {
    use tet::provenance::report::{audit_file, AuditError};
    let options = storage_pairs(storage_options);
    let allowed = load_signers(py, signers)?;
    let shown = path.display().to_string();
    let r = py.detach(|| {
        audit_file(
            &path,
            &sources,
            allowed.as_ref(),
            &options,
            &Cancel::never(),
        )
    });
    match r {
        Ok(r) => Ok(r.to_json(&shown).to_string()),
        Err(AuditError::Open(e)) => Err(from_open(py, &shown, e)),
        Err(e) => Err(tet_error(py, "CorruptError", format!("{shown}: {e}"))),
    }
}

/// `tet export SRC DST --json`: exports the `.tet` `src` (a local path or an object URL, read
/// by ranges) to `dst` with the engine's export (`tet::export`: the same formats, checks and
/// errors as the CLI); returns the CLI's `--json` object as JSON text. `to`: the format name
/// (else from `dst`'s extension), `datasets`: names to export, `compress`: the codec spelling
/// of `--compress`.
#[pyfunction]
#[pyo3(signature = (src, dst, to = None, datasets = Vec::new(), compress = None, force = false, storage_options = None))]
#[allow(clippy::too_many_arguments)]
fn export(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    to: Option<String>,
    datasets: Vec<String>,
    compress: Option<String>,
    force: bool,
    storage_options: Option<Vec<(String, String)>>,
) -> PyResult<String> {
    use std::str::FromStr as _;
    use tet::export::{Compression, ExportOptions, Target};
    let shown = src.display().to_string();
    if tet::storage::is_url(&dst) {
        return Err(PyValueError::new_err(format!(
            "{}: an object URL as the output of tet.export is not supported yet; export to a \
             local path (or use `tet export`)",
            dst.display()
        )));
    }
    let target = match to.as_deref() {
        None => None,
        Some(n) => Some(Target::from_name(n).ok_or_else(|| {
            PyValueError::new_err(format!("unknown format `{n}` ({})", Target::names()))
        })?),
    };
    let compression = match compress.as_deref() {
        None => Compression::default(),
        Some(c) => Compression::from_str(c).map_err(|e| PyValueError::new_err(e.to_string()))?,
    };
    let opts = ExportOptions {
        target,
        datasets,
        compression,
        force,
        cancel: Cancel::never(),
    };
    let options = storage_pairs(storage_options);
    let report = if tet::storage::is_url(&src) {
        // An object is read by ranges, one chunk at a time as the writer asks for it.
        let opened = py
            .detach(|| open_tet(&src, &options, &Cancel::never()))
            .map_err(|e| from_open(py, &shown, e))?;
        py.detach(|| tet::export::export_file(&opened, &src, &dst, &opts))
    } else {
        if !src.is_file() {
            return Err(tet_error(
                py,
                "NotFoundError",
                format!("{shown}: no such .tet file"),
            ));
        }
        if let Some(name) = tet::storage::other_format(&src) {
            let e = OpenTetError::OtherFormat(name);
            return Err(tet_error(py, "CorruptError", format!("{shown}: {e}")));
        }
        py.detach(|| tet::export::export(&src, &dst, &opts))
    }
    .map_err(|e| from_export(py, &shown, e))?;
    let v = serde_json::json!({
        "input": shown,
        "output": report.output.display().to_string(),
        "format": report.target.name(),
        "arrays": report.arrays.iter().map(|(n, t, s)| serde_json::json!({"name": n, "dtype": t, "shape": s})).collect::<Vec<_>>(),
        "reused_chunks": report.reused_chunks,
        "warnings": report.warnings,
    });
    Ok(v.to_string())
}

/// The allowed signers file `path` (its left-out lines are ignored, as the CLI warns of them).
fn load_signers(
    py: Python<'_>,
    path: Option<PathBuf>,
) -> PyResult<Option<tet::provenance::allowed::AllowedSigners>> {
    path.map(|p| {
        tet::provenance::allowed::AllowedSigners::load(&p)
            .map_err(|e| tet_error(py, "TetError", e.to_string()))
    })
    .transpose()
}

/// The extension module.
#[pymodule]
fn _tet(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Reader>()?;
    m.add_function(wrap_pyfunction!(convert::convert, m)?)?;
    m.add_function(wrap_pyfunction!(convert::digest_file, m)?)?;
    m.add_function(wrap_pyfunction!(chunks_read_total, m)?)?;
    m.add_function(wrap_pyfunction!(verify_file, m)?)?;
    m.add_function(wrap_pyfunction!(verify_json, m)?)?;
    m.add_function(wrap_pyfunction!(audit_json, m)?)?;
    m.add_function(wrap_pyfunction!(export, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce::reproduce, m)?)?;
    m.add("ENGINE_VERSION", env!("CARGO_PKG_VERSION"))?;
    m.add("SETTINGS_FIELDS", convert::settings_fields())?;
    Ok(())
}
