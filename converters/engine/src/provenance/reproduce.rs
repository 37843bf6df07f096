//! Re-making a `.tet` file from what its footer records, and comparing (`tet audit
//! --reproduce`).
//!
//! The last history row is re-run: its inputs by their recorded paths or URLs (`input`,
//! `input.1`, … resolved against the recorded `cwd`, each checked against its recorded digest
//! first), its recorded byte-affecting params turned back into [`Settings`]
//! ([`Settings::from_recorded`]), under the recorded time (`SOURCE_DATE_EPOCH` = the row's
//! `at`) and in the recorded working directory, so that the facts of the run the footer holds
//! come out the same. When that row converted `.tet` files that are still there unchanged
//! (one, or the inputs of a combine), each is reproduced first the same way, once (a lineage,
//! step by step from its first parents).
//!
//! The conversion itself goes through the engine's one conversion entry
//! ([`crate::request::run`]) in this process ([`InProcess`], what `tet audit --reproduce` and
//! Python's `tet.reproduce` both use; [`Convert`] lets a test put another in its place), into a
//! temporary folder removed on every path. The result is compared with the file:
//!
//! - byte for byte first;
//! - else where it first differs: the datasets' records, then each chunk index row and its
//!   stored bytes (dataset and chunk named), then the footer JSON key by key;
//! - footer parts expected to differ and never counted: the last row's input stamp
//!   (`params.input_mtime`, `params.input_object`: the same bytes touched or copied since),
//!   the footer digest (`tet_footer_digest`, over the rest) and the signatures
//!   (`tet_signatures`: the re-made file is not signed). Everything else, the row's `at`
//!   and `metadata.file.created_at` included, must be equal.
//!
//! A row recorded by another version of tet-convert is not tried (both versions named) unless
//! the version drift is allowed; then the values are compared instead of the bytes (each
//! chunk decoded, and the footer without the tool version and the digests of stored bytes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::format::footer::HistoryRow;
use crate::format::TetFile;
use crate::meta::inputs::{recheck, InputStatus, CWD_KEY};
use crate::settings::Settings;

/// The version of tet-convert that re-makes files.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One history row to re-run: what the front end converts.
#[derive(Debug, Clone)]
pub struct Step {
    /// The inputs as recorded (`input`, `input.1`, …: paths as typed, or URLs).
    pub inputs: Vec<String>,
    /// The working directory to run in (the recorded `cwd`; `None`: the current one).
    pub cwd: Option<PathBuf>,
    /// The recorded time (decimal Unix seconds), given as `SOURCE_DATE_EPOCH`.
    pub at: String,
    /// The recorded settings.
    pub settings: Settings,
}

/// Runs one conversion of a [`Step`] into `output` (a fresh path in a temporary folder);
/// `Err`: why it failed, one line.
pub trait Convert {
    fn convert(&self, step: &Step, output: &Path) -> Result<(), String>;
}

/// What re-making a file gave, in the order of precedence over several files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// The re-made file is the file (byte for byte, or its values with version drift allowed).
    Reproduced,
    /// It could not be tried: an input missing or changed, another tool version, a row that
    /// records no input, a conversion that failed.
    NotTried,
    /// The re-made file differs.
    Differs,
}

impl Verdict {
    /// 0 reproduced, 1 differs, 2 could not be tried.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Reproduced => 0,
            Verdict::Differs => 1,
            Verdict::NotTried => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Differs => "differs",
            Verdict::NotTried => "not-tried",
        }
    }
}

/// The outcome of one step (one history row of one file).
#[derive(Debug, Clone)]
pub struct StepOutcome {
    /// The file this row made.
    pub file: PathBuf,
    /// Its history row index.
    pub row: usize,
    pub verdict: Verdict,
    /// One line: `byte for byte`, where it differs first, or why it could not be tried.
    pub detail: String,
}

/// How to reproduce.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Compare values instead of bytes when the recorded tool version is not this one.
    pub allow_version_drift: bool,
    /// `--storage-option` pairs for object inputs.
    pub storage: crate::storage::Options,
}

/// Runs each step in this process through the engine's conversion entry
/// ([`crate::request::run`]). The recorded working directory and time are process globals that
/// the pipeline reads (`std::env::current_dir` for relative inputs and the `cwd` it records,
/// `SOURCE_DATE_EPOCH` for `at` and `created_at`): they are set for the conversion and put
/// back after it, under one lock, so reproductions in one process take turns. Another thread of
/// the process that reads them meanwhile sees the recorded ones: Python's `tet.reproduce` runs
/// this in a child process for that reason (and as `tet.convert` does, so that a C library's
/// crash does not take the interpreter down).
#[derive(Debug, Clone, Default)]
pub struct InProcess {
    /// `--storage-option` pairs for object inputs.
    pub storage: crate::storage::Options,
    /// Asked between chunks whether to stop (the command line's asks its signal handlers; the
    /// temporary folder is removed as the step returns).
    pub cancel: crate::control::Cancel,
}

/// Held while a step runs with the recorded working directory and time.
static GLOBALS: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Convert for InProcess {
    fn convert(&self, step: &Step, output: &Path) -> Result<(), String> {
        let _turn = GLOBALS.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::current_dir().ok();
        let at = std::env::var_os("SOURCE_DATE_EPOCH");
        if let Some(cwd) = &step.cwd {
            std::env::set_current_dir(cwd).map_err(|e| {
                format!(
                    "cannot enter the recorded working directory {}: {e}",
                    cwd.display()
                )
            })?;
        }
        std::env::set_var("SOURCE_DATE_EPOCH", &step.at);
        let req = crate::request::Request::new(&step.inputs, output, step.settings.clone());
        let cx = crate::request::Context {
            storage: self.storage.clone(),
            cancel: self.cancel.clone(),
            ..crate::request::Context::default()
        };
        let result = crate::request::run(&req, &cx);
        match at {
            Some(v) => std::env::set_var("SOURCE_DATE_EPOCH", v),
            None => std::env::remove_var("SOURCE_DATE_EPOCH"),
        }
        if let Some(d) = dir {
            // Where this process was: it was there a moment ago.
            let _ = std::env::set_current_dir(d);
        }
        result.map(|_| ()).map_err(|e| e.to_string())
    }
}

/// [`reproduce`] in this process ([`InProcess`]) and its report, the value `tet audit
/// --reproduce --json` prints for a file and Python's `tet.reproduce` returns: `schema`
/// `tet-reproduce/1`, `file`, `verdict` (the worst of its steps) and `steps`, each with the
/// `file` it made, its history `row`, its `verdict` and the one-line `detail`.
pub fn reproduce_report(file: &Path, opts: &Options) -> (Verdict, Value) {
    let conv = InProcess {
        storage: opts.storage.clone(),
        ..InProcess::default()
    };
    let steps = reproduce(file, opts, &conv);
    let verdict = verdict(&steps);
    (verdict, report(file, verdict, &steps))
}

/// The `tet-reproduce/1` report of `file`'s steps.
pub fn report(file: &Path, verdict: Verdict, steps: &[StepOutcome]) -> Value {
    let rows: Vec<Value> = steps
        .iter()
        .map(|s| {
            serde_json::json!({
                "file": s.file.display().to_string(),
                "row": s.row,
                "verdict": s.verdict.name(),
                "detail": s.detail,
            })
        })
        .collect();
    serde_json::json!({
        "schema": "tet-reproduce/1",
        "file": file.display().to_string(),
        "verdict": verdict.name(),
        "steps": rows,
    })
}

/// The most `.tet` parents followed back (a guard against a file that names itself).
const MAX_STEPS: usize = 64;

/// Reproduces `file`: its parents' steps first (where they are `.tet` files still there
/// unchanged), then its own last row. The last outcome is the file's own.
pub fn reproduce(file: &Path, opts: &Options, conv: &dyn Convert) -> Vec<StepOutcome> {
    let mut out = Vec::new();
    step(file, opts, conv, 0, &mut out);
    out
}

/// The worst verdict of a file's steps (what its exit code says).
pub fn verdict(steps: &[StepOutcome]) -> Verdict {
    steps
        .iter()
        .map(|s| s.verdict)
        .max()
        .unwrap_or(Verdict::NotTried)
}

fn step(file: &Path, opts: &Options, conv: &dyn Convert, depth: usize, out: &mut Vec<StepOutcome>) {
    let mut done = |row: usize, verdict: Verdict, detail: String| {
        out.push(StepOutcome {
            file: file.to_path_buf(),
            row,
            verdict,
            detail,
        });
    };
    let history: Vec<HistoryRow> = match TetFile::open(file).map(|f| f.footer().map(|h| h.cloned()))
    {
        Ok(Ok(Some(f))) => f.history,
        Ok(Ok(None)) => return done(0, Verdict::NotTried, "no footer, no history row".into()),
        Ok(Err(e)) => return done(0, Verdict::NotTried, format!("footer unreadable: {e}")),
        Err(e) => return done(0, Verdict::NotTried, format!("cannot read: {e}")),
    };
    let Some(last) = history.len().checked_sub(1) else {
        return done(0, Verdict::NotTried, "no history row to re-run".into());
    };
    let row = &history[last];
    let planned = match plan(row, last, opts) {
        Ok(p) => p,
        Err(why) => return done(last, Verdict::NotTried, why),
    };
    // The `.tet` parents that are still there: their own steps first (each once).
    for parent in &planned.tet_parents {
        if depth < MAX_STEPS && !out.iter().any(|s| &s.file == parent) {
            step(parent, opts, conv, depth + 1, out);
        }
    }
    let (verdict, detail) = run_and_compare(file, &planned, conv);
    out.push(StepOutcome {
        file: file.to_path_buf(),
        row: last,
        verdict,
        detail,
    });
}

/// A row ready to re-run.
struct Planned {
    step: Step,
    /// The recorded tool version differs and that is allowed: compare values.
    drift: Option<String>,
    /// The row's inputs that are local `.tet` files (found unchanged): one, or those of a
    /// combine.
    tet_parents: Vec<PathBuf>,
}

/// Checks what re-running `row` needs: a conversion by this version (or drift allowed), its
/// inputs unchanged, its params readable as settings. `Err`: why it cannot be tried.
fn plan(row: &HistoryRow, index: usize, opts: &Options) -> Result<Planned, String> {
    if row.op != "convert" {
        return Err(format!("row {index} is a `{}`, not a conversion", row.op));
    }
    let tool = row.params.get("tool").map(String::as_str);
    if tool != Some("tet-convert") {
        return Err(format!(
            "row {index} was written by {}, not tet-convert",
            tool.unwrap_or("an unnamed tool")
        ));
    }
    let recorded = row.params.get("version").map_or("?", String::as_str);
    let drift = (recorded != VERSION).then(|| recorded.to_string());
    if let (Some(v), false) = (&drift, opts.allow_version_drift) {
        return Err(format!(
            "recorded by tet-convert {v}, this is tet-convert {VERSION} (--allow-version-drift \
             compares values instead of bytes)"
        ));
    }
    let checks = recheck(std::slice::from_ref(row), &opts.storage);
    let mut inputs = Vec::new();
    for c in &checks {
        let name = c.input.clone().unwrap_or_else(|| "-".into());
        let at = c
            .path
            .as_ref()
            .map_or(String::new(), |p| format!(" ({})", p.display()));
        match c.status {
            InputStatus::Unchanged => inputs.push(name),
            InputStatus::Changed => {
                return Err(format!(
                    "input {name}{at} changed since conversion ({} -> {})",
                    c.recorded_digest.as_deref().unwrap_or("?"),
                    c.digest.as_deref().unwrap_or("?")
                ))
            }
            InputStatus::Missing => return Err(format!("input {name}{at} is missing")),
            InputStatus::Unreadable => {
                return Err(format!(
                    "input {name}{at} cannot be read: {}",
                    c.error.as_deref().unwrap_or("?")
                ))
            }
            InputStatus::NotRecorded => {
                return Err(format!("row {index} records no input path or digest"))
            }
        }
    }
    if inputs.is_empty() {
        return Err(format!("row {index} records no input"));
    }
    let settings = Settings::from_recorded(&row.params).map_err(|e| e.to_string())?;
    let tet_parents = match row.source.as_str() {
        "tet" => checks
            .iter()
            .filter_map(|c| c.path.clone())
            .filter(|p| !crate::storage::is_url(p) && p.is_file())
            .collect(),
        _ => Vec::new(),
    };
    Ok(Planned {
        step: Step {
            inputs,
            cwd: row.params.get(CWD_KEY).map(PathBuf::from),
            at: row.at.clone(),
            settings,
        },
        drift,
        tet_parents,
    })
}

/// Converts into a temporary folder (removed when this returns) and compares. A recorded
/// `chunk` target equal to the default does not tell `--chunk-bytes 4MiB` from no
/// `--chunk-bytes` (which keep a source's preferred chunks otherwise): when the default
/// differs, the explicit target is tried too.
fn run_and_compare(file: &Path, planned: &Planned, conv: &dyn Convert) -> (Verdict, String) {
    let first = run_once(file, planned, &planned.step, conv);
    if first.0 != Verdict::Differs || planned.step.settings.chunk_bytes.is_some() {
        return first;
    }
    let mut step = planned.step.clone();
    step.settings.chunk_bytes = Some(crate::planner::DEFAULT_CHUNK_BYTES);
    match run_once(file, planned, &step, conv) {
        (Verdict::Reproduced, same) => (
            Verdict::Reproduced,
            format!(
                "{same} (with --chunk-bytes {} given: the history row does not tell it from \
                 the default)",
                crate::planner::DEFAULT_CHUNK_BYTES
            ),
        ),
        _ => first,
    }
}

/// One conversion of `step` into a temporary folder, compared with `file`.
fn run_once(file: &Path, planned: &Planned, step: &Step, conv: &dyn Convert) -> (Verdict, String) {
    let dir = match tempfile::Builder::new().prefix(".tet-reproduce").tempdir() {
        Ok(d) => d,
        Err(e) => {
            return (
                Verdict::NotTried,
                format!("cannot make a temporary folder: {e}"),
            )
        }
    };
    let made = dir.path().join("reproduced.tet");
    if let Err(e) = conv.convert(step, &made) {
        return (Verdict::NotTried, format!("the re-run failed: {e}"));
    }
    let result = match &planned.drift {
        None => compare_bytes(file, &made),
        Some(v) => compare_values(file, &made).map(|r| {
            r.map(|same| format!("{same} (recorded by tet-convert {v}, re-made by {VERSION})"))
        }),
    };
    match result {
        Ok(Ok(same)) => (Verdict::Reproduced, same),
        Ok(Err(diff)) => (Verdict::Differs, diff),
        Err(e) => (Verdict::NotTried, e),
    }
}
/// `Ok(Ok(what is the same))`, `Ok(Err(where it first differs))`, `Err(why not compared)`.
type Compared = Result<Result<String, String>, String>;

fn open_both(file: &Path, made: &Path) -> Result<(TetFile, TetFile), String> {
    let a = TetFile::open(file).map_err(|e| format!("cannot read the file: {e}"))?;
    let b = TetFile::open(made).map_err(|e| format!("cannot read the re-made file: {e}"))?;
    Ok((a, b))
}

/// Byte for byte, else where the first difference lies.
pub fn compare_bytes(file: &Path, made: &Path) -> Compared {
    if same_bytes(file, made).map_err(|e| format!("cannot compare: {e}"))? {
        return Ok(Ok("reproduced: byte for byte".into()));
    }
    let (a, b) = open_both(file, made)?;
    if let Some(d) = dataset_difference(&a, &b) {
        return Ok(Err(d));
    }
    for (ea, eb) in a.entries.iter().zip(&b.entries) {
        let name = dataset_name(&a, ea.dataset_id);
        let coords = chunk_coords(&a, ea);
        let (sa, sb) = (a.stored_bytes(ea), b.stored_bytes(eb));
        let same_entry = (ea.dataset_id, ea.coords, ea.codec_id, ea.raw_byte_len)
            == (eb.dataset_id, eb.coords, eb.codec_id, eb.raw_byte_len);
        let same_bytes = matches!((&sa, &sb), (Ok(x), Ok(y)) if x == y);
        if !same_entry || !same_bytes {
            return Ok(Err(format!(
                "differs first at dataset `{name}` chunk {coords:?}: {}",
                if same_entry {
                    "its stored bytes differ".to_string()
                } else {
                    format!(
                        "index row (codec {}, {} stored bytes) re-made as (codec {}, {} stored \
                         bytes)",
                        ea.codec_id, ea.stored_byte_len, eb.codec_id, eb.stored_byte_len
                    )
                }
            )));
        }
    }
    let footer = footer_difference(&a, &b, &[])?;
    Ok(match footer {
        Some(key) => Err(format!("differs first at footer key {key}")),
        None => Ok(format!(
            "reproduced: every chunk's stored bytes and the footer are the same, but for the \
             parts expected to differ ({})",
            expected_differences(&a, &b).join(", ")
        )),
    })
}

/// Which of the parts expected to differ do (named as footer keys).
fn expected_differences(a: &TetFile, b: &TetFile) -> Vec<String> {
    let (ja, jb) = (a.footer_json().0, b.footer_json().0);
    let top = |j: Option<&Value>, k: &str| j.and_then(|v| v.get(k)).cloned();
    let params = |f: &TetFile| {
        f.footer().ok().flatten().and_then(|f| {
            f.history
                .last()
                .map(|r| (f.history.len() - 1, r.params.clone()))
        })
    };
    let (pa, pb) = (params(a), params(b));
    let mut out = Vec::new();
    for k in ["input_mtime", "input_object"] {
        let get = |p: &Option<(usize, BTreeMap<String, String>)>| {
            p.as_ref().and_then(|(_, m)| m.get(k).cloned())
        };
        if get(&pa) != get(&pb) {
            let row = pa.as_ref().map_or(0, |(i, _)| *i);
            out.push(format!("history[{row}].params.{k}"));
        }
    }
    for k in ["tet_signatures", "tet_footer_digest"] {
        if top(ja, k) != top(jb, k) {
            out.push(k.to_string());
        }
    }
    out
}

/// Keys also left out when values are compared across tool versions.
const DRIFT: &[&str] = &[
    "version",
    "library_version",
    "chunk_digests",
    "zstd_frames_kept",
];

/// The values (each chunk decoded) and the footer without the tool version and the digests
/// of stored bytes.
pub fn compare_values(file: &Path, made: &Path) -> Compared {
    let (a, b) = open_both(file, made)?;
    if let Some(d) = dataset_difference(&a, &b) {
        return Ok(Err(d));
    }
    let mut ba = Vec::new();
    let mut bb = Vec::new();
    for (ea, eb) in a.entries.iter().zip(&b.entries) {
        let name = dataset_name(&a, ea.dataset_id);
        let coords = chunk_coords(&a, ea);
        if (ea.dataset_id, ea.coords, ea.raw_byte_len)
            != (eb.dataset_id, eb.coords, eb.raw_byte_len)
        {
            return Ok(Err(format!(
                "differs first at dataset `{name}` chunk {coords:?}: another chunk grid"
            )));
        }
        let len = usize::try_from(ea.raw_byte_len).map_err(|e| e.to_string())?;
        ba.resize(len, 0);
        bb.resize(len, 0);
        a.read_chunk_into(ea, &mut ba)
            .map_err(|e| format!("the file's dataset `{name}` chunk {coords:?}: {e}"))?;
        b.read_chunk_into(eb, &mut bb)
            .map_err(|e| format!("the re-made dataset `{name}` chunk {coords:?}: {e}"))?;
        if ba != bb {
            return Ok(Err(format!(
                "differs first at dataset `{name}` chunk {coords:?}: other values"
            )));
        }
    }
    Ok(match footer_difference(&a, &b, DRIFT)? {
        Some(key) => Err(format!("differs first at footer key {key}")),
        None => Ok("reproduced: the same values and footer".into()),
    })
}

/// Whether two files hold the same bytes (read 1 MiB at a time).
fn same_bytes(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    let (mut fa, mut fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut xa, mut xb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = fa.read(&mut xa)?;
        if n == 0 {
            return Ok(true);
        }
        fb.read_exact(&mut xb[..n])?;
        if xa[..n] != xb[..n] {
            return Ok(false);
        }
    }
}

fn dataset_name(f: &TetFile, id: u64) -> String {
    usize::try_from(id)
        .ok()
        .and_then(|i| f.datasets.get(i))
        .map_or_else(|| format!("#{id}"), |d| d.name.clone())
}

fn chunk_coords(f: &TetFile, e: &crate::format::reader::ChunkEntry) -> Vec<u64> {
    let rank = usize::try_from(e.dataset_id)
        .ok()
        .and_then(|i| f.datasets.get(i))
        .map_or(0, |d| d.shape.len());
    e.coords[..rank.min(e.coords.len())].to_vec()
}

/// The first dataset record (name, type, shape, chunk shape) or chunk count that differs.
fn dataset_difference(a: &TetFile, b: &TetFile) -> Option<String> {
    for (x, y) in a.datasets.iter().zip(&b.datasets) {
        if (&x.name, x.dtype, &x.shape, &x.chunk_shape)
            != (&y.name, y.dtype, &y.shape, &y.chunk_shape)
        {
            return Some(format!(
                "differs first at dataset `{}`: {:?} {:?} chunks {:?} re-made as `{}` {:?} {:?} \
                 chunks {:?}",
                x.name, x.dtype, x.shape, x.chunk_shape, y.name, y.dtype, y.shape, y.chunk_shape
            ));
        }
    }
    if a.datasets.len() != b.datasets.len() {
        return Some(format!(
            "differs first in the datasets: {} re-made as {}",
            a.datasets.len(),
            b.datasets.len()
        ));
    }
    (a.entries.len() != b.entries.len()).then(|| {
        format!(
            "differs first in the chunk index: {} rows re-made as {}",
            a.entries.len(),
            b.entries.len()
        )
    })
}

/// The first footer key (a path such as `history[1].params.codec`) whose value differs, the
/// parts [`expected`] to differ and `skip` left out.
fn footer_difference(a: &TetFile, b: &TetFile, skip: &[&str]) -> Result<Option<String>, String> {
    let (ja, sa) = a.footer_json();
    let (jb, sb) = b.footer_json();
    let last = a
        .footer()
        .ok()
        .flatten()
        .map_or(0, |f| f.history.len().saturating_sub(1));
    let mut diffs = BTreeMap::new();
    json_diff(
        "",
        ja.unwrap_or(&Value::Null),
        jb.unwrap_or(&Value::Null),
        last,
        skip,
        &mut diffs,
    );
    if diffs.is_empty() {
        json_diff(
            "metadata(spilled)",
            sa.unwrap_or(&Value::Null),
            sb.unwrap_or(&Value::Null),
            last,
            skip,
            &mut diffs,
        );
    }
    Ok(diffs.into_iter().next().map(|(_, v)| v))
}

/// Whether the footer part at `path` is one expected to differ.
fn expected(path: &str, key: &str, last: usize, skip: &[&str]) -> bool {
    let top = !path.contains('.') && !path.contains('[');
    let last_row = path.starts_with(&format!("history[{last}].params"));
    skip.contains(&key)
        || (top && matches!(key, "tet_footer_digest" | "tet_signatures"))
        || (last_row && matches!(key, "input_mtime" | "input_object"))
}

/// The differences of two JSON values, keyed by order of appearance (first found first).
fn json_diff(
    path: &str,
    a: &Value,
    b: &Value,
    last: usize,
    skip: &[&str],
    out: &mut BTreeMap<usize, String>,
) {
    if !out.is_empty() {
        return;
    }
    let join = |k: &str| match path {
        "" => k.to_string(),
        p => format!("{p}.{k}"),
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                if expected(path, k, last, skip) {
                    continue;
                }
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => json_diff(&join(k), u, v, last, skip, out),
                    (Some(_), None) => {
                        out.insert(out.len(), format!("{} (not in the re-made file)", join(k)));
                    }
                    (None, _) => {
                        out.insert(out.len(), format!("{} (only in the re-made file)", join(k)));
                    }
                }
                if !out.is_empty() {
                    return;
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                json_diff(&format!("{path}[{i}]"), u, v, last, skip, out);
                if !out.is_empty() {
                    return;
                }
            }
        }
        _ if a == b => {}
        _ => {
            out.insert(
                out.len(),
                format!("{path}: {} re-made as {}", short(a), short(b)),
            );
        }
    }
}

/// A JSON value on at most 80 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_diff_names_the_first_key_and_skips_the_expected_ones() {
        let a = serde_json::json!({
            "history": [{"at": "1", "params": {"codec": "auto", "input_mtime": "5.0"}}],
            "tet_footer_digest": "xxh3-64:aa",
        });
        let mut b = a.clone();
        b["history"][0]["params"]["input_mtime"] = "6.0".into();
        b["tet_footer_digest"] = "xxh3-64:bb".into();
        let mut out = BTreeMap::new();
        json_diff("", &a, &b, 0, &[], &mut out);
        assert!(out.is_empty(), "{out:?}");
        b["history"][0]["params"]["codec"] = "raw".into();
        json_diff("", &a, &b, 0, &[], &mut out);
        assert_eq!(
            out.into_values().collect::<Vec<_>>(),
            ["history[0].params.codec: \"auto\" re-made as \"raw\""]
        );
        // An earlier row's input stamp is compared (it was carried, not re-made).
        let mut out = BTreeMap::new();
        json_diff("", &a, &b, 1, &["codec"], &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
    }
}
