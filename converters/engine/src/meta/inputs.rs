//! The recorded inputs of a `.tet` file, checked again: what `tet audit` says about each
//! `convert` history row without `--source`.
//!
//! A conversion records the input as given (`params.input`), the working directory when that
//! path is relative (`params.cwd`), the input's size (`params.input_bytes`) and modification time
//! (`params.input_mtime`, decimal Unix seconds with nanoseconds) next to its digest (the row's
//! parent). [`recheck`] resolves each recorded path, re-hashes what is still there with
//! [`super::digest_input`] (the function that wrote the parent digest) and says per row:
//! unchanged, changed since conversion (with the old and new size and mtime), missing, or
//! unreadable.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::Serialize;

use super::digest_input;
use crate::format::footer::HistoryRow;

/// History `params` key: the working directory of a conversion whose input path is relative.
pub const CWD_KEY: &str = "cwd";
/// History `params` key: the input's modification time at conversion.
pub const MTIME_KEY: &str = "input_mtime";
/// History `params` key: the input's size at conversion (bytes hashed).
pub const BYTES_KEY: &str = "input_bytes";

/// A modification time as recorded: `secs.nanos` (9 digits) since the Unix epoch.
pub fn mtime_text(t: std::time::SystemTime) -> String {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => format!("{}.{:09}", d.as_secs(), d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            format!("-{}.{:09}", d.as_secs(), d.subsec_nanos())
        }
    }
}

/// Size and newest modification time of an input: a file's own, or for a directory store the
/// total size of the regular files below it and the newest mtime of any entry (a changed,
/// added or removed file moves it).
pub fn stat_input(path: &Path) -> std::io::Result<(u64, String)> {
    let md = std::fs::metadata(path)?;
    if !md.is_dir() {
        return Ok((md.len(), mtime_text(md.modified()?)));
    }
    let mut newest = md.modified()?;
    let mut size = 0u64;
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let m = e.metadata()?;
            newest = newest.max(m.modified()?);
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                size = size.saturating_add(m.len());
            }
        }
    }
    Ok((size, mtime_text(newest)))
}

/// The outcome for one recorded input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputStatus {
    /// Its digest is the recorded parent.
    Unchanged,
    /// Something is at the path but hashes differently.
    Changed,
    /// Nothing is at the path any more (moved away or deleted).
    Missing,
    /// Something is at the path but cannot be read.
    Unreadable,
    /// The row records no input path or no digest (the reference converter's rows, …).
    NotRecorded,
}

impl InputStatus {
    pub fn name(self) -> &'static str {
        match self {
            InputStatus::Unchanged => "unchanged",
            InputStatus::Changed => "changed",
            InputStatus::Missing => "missing",
            InputStatus::Unreadable => "unreadable",
            InputStatus::NotRecorded => "not-recorded",
        }
    }

    /// Whether an auditor should be told something is wrong.
    pub fn is_problem(self) -> bool {
        matches!(self, InputStatus::Changed | InputStatus::Unreadable)
    }
}

/// One `convert` history row's input, checked now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputCheck {
    /// History row index.
    pub row: usize,
    /// `params.input` as recorded.
    pub input: Option<String>,
    /// Where it was looked for.
    pub path: Option<PathBuf>,
    /// What the recorded relative path was resolved against: `recorded-cwd`, or
    /// `current-dir` for rows that recorded none (files of an older tet-convert).
    pub resolved_against: Option<&'static str>,
    pub status: InputStatus,
    /// The row's parent digest.
    pub recorded_digest: Option<String>,
    pub recorded_bytes: Option<u64>,
    pub recorded_mtime: Option<String>,
    /// Digest, size and mtime now (when the path could be read).
    pub digest: Option<String>,
    pub bytes: Option<u64>,
    pub mtime: Option<String>,
    /// Why the path could not be read.
    pub error: Option<String>,
}

/// The input a row records, resolved: relative paths against `params.cwd`, else (rows without
/// one) against the current directory.
pub fn resolve(row: &HistoryRow) -> Option<(PathBuf, &'static str)> {
    resolve_key(row, "input")
}

/// [`resolve`] for the input recorded under `key` (`input.1`, … of a combined conversion).
fn resolve_key(row: &HistoryRow, key: &str) -> Option<(PathBuf, &'static str)> {
    let input = row.params.get(key)?;
    let p = Path::new(input);
    if p.is_absolute() {
        return Some((p.to_path_buf(), "absolute"));
    }
    if crate::storage::is_url(p) {
        return Some((p.to_path_buf(), "url"));
    }
    match row.params.get(CWD_KEY) {
        Some(cwd) => Some((Path::new(cwd).join(p), "recorded-cwd")),
        None => Some((p.to_path_buf(), "current-dir")),
    }
}

/// Checks every `convert` row's recorded input (see the module docs); an object input is
/// fetched with the `--storage-option` pairs `options` over the environment's settings.
pub fn recheck(history: &[HistoryRow], options: &crate::storage::Options) -> Vec<InputCheck> {
    history
        .iter()
        .enumerate()
        .filter(|(_, h)| h.op == "convert")
        // A combined conversion (`--concat`) has a parent per input: `input`, `input.1`, ….
        .flat_map(|(i, h)| {
            let inputs = 0..h.parents.len().max(1);
            inputs.map(move |k| recheck_row(i, h, k, options))
        })
        .collect()
}

fn recheck_row(
    i: usize,
    h: &HistoryRow,
    k: usize,
    options: &crate::storage::Options,
) -> InputCheck {
    let recorded_digest = h.parents.get(k).cloned();
    let key = if k == 0 {
        "input".to_string()
    } else {
        format!("input.{k}")
    };
    let resolved = resolve_key(h, &key);
    // The mtime is recorded for the first input only; the size for each (`input_bytes`, then
    // `input_bytes.K` beside `input.K`).
    let first = |v: Option<&String>| v.filter(|_| k == 0).cloned();
    let bytes_key = match k {
        0 => BYTES_KEY.to_string(),
        k => format!("{BYTES_KEY}.{k}"),
    };
    let mut c = InputCheck {
        row: i,
        input: h.params.get(&key).cloned(),
        path: resolved.as_ref().map(|(p, _)| p.clone()),
        resolved_against: resolved.as_ref().map(|(_, r)| *r),
        status: InputStatus::NotRecorded,
        recorded_digest: recorded_digest.clone(),
        recorded_bytes: h.params.get(&bytes_key).and_then(|b| b.parse().ok()),
        recorded_mtime: first(h.params.get(MTIME_KEY)),
        digest: None,
        bytes: None,
        mtime: None,
        error: None,
    };
    let (Some((path, _)), Some(want)) = (resolved, recorded_digest) else {
        return c;
    };
    if crate::storage::is_url(&path) {
        return recheck_object(c, &path, &want, options);
    }
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            c.status = InputStatus::Missing;
            return c;
        }
        _ => {}
    }
    if let Ok((bytes, mtime)) = stat_input(&path) {
        c.bytes = Some(bytes);
        c.mtime = Some(mtime);
    }
    match digest_input(&path) {
        Ok((d, _)) => {
            c.status = if d == want {
                InputStatus::Unchanged
            } else {
                InputStatus::Changed
            };
            c.digest = Some(d);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => c.status = InputStatus::Missing,
        Err(e) => {
            c.status = InputStatus::Unreadable;
            c.error = Some(e.to_string());
        }
    }
    c
}

/// An object input: downloaded into `$TMPDIR` (settings from the environment and `options`)
/// and hashed.
#[cfg(feature = "object-store")]
fn recheck_object(
    mut c: InputCheck,
    url: &Path,
    want: &str,
    options: &crate::storage::Options,
) -> InputCheck {
    let fetched = crate::storage::Object::parse(&url.to_string_lossy(), options)
        .and_then(|o| o.download(&std::env::temp_dir(), &crate::control::Cancel::never()));
    let spool = match fetched {
        Ok(s) => s,
        Err(e) if e.is_not_found() => {
            c.status = InputStatus::Missing;
            return c;
        }
        Err(e) => {
            c.status = InputStatus::Unreadable;
            c.error = Some(e.to_string());
            return c;
        }
    };
    match digest_input(spool.path()) {
        Ok((d, bytes)) => {
            c.status = if d == want {
                InputStatus::Unchanged
            } else {
                InputStatus::Changed
            };
            c.digest = Some(d);
            c.bytes = Some(bytes);
        }
        Err(e) => {
            c.status = InputStatus::Unreadable;
            c.error = Some(e.to_string());
        }
    }
    c
}

/// Without the `object-store` feature an object input cannot be read.
#[cfg(not(feature = "object-store"))]
fn recheck_object(
    mut c: InputCheck,
    url: &Path,
    _want: &str,
    _options: &crate::storage::Options,
) -> InputCheck {
    c.status = InputStatus::Unreadable;
    c.error = Some(
        crate::storage::StorageError::NotBuilt {
            url: url.display().to_string(),
        }
        .to_string(),
    );
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(input: &str, cwd: Option<&str>, digest: &str) -> HistoryRow {
        let mut params = std::collections::BTreeMap::new();
        params.insert("input".to_string(), input.to_string());
        if let Some(c) = cwd {
            params.insert(CWD_KEY.to_string(), c.to_string());
        }
        HistoryRow {
            op: "convert".into(),
            source: "npy".into(),
            at: "1".into(),
            parents: vec![digest.into()],
            params,
        }
    }

    #[test]
    fn rows_resolve_and_report_each_state() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.bin");
        std::fs::write(&a, b"hello").unwrap();
        let (d, _) = digest_input(&a).unwrap();
        let cwd = dir.path().to_str().unwrap();
        let rows = vec![
            row("a.bin", Some(cwd), &d),
            row(a.to_str().unwrap(), None, "sha256:00"),
            row("gone.bin", Some(cwd), &d),
            HistoryRow {
                op: "convert".into(),
                source: "nc".into(),
                at: "1".into(),
                ..Default::default()
            },
            HistoryRow {
                op: "other".into(),
                ..Default::default()
            },
        ];
        let got = recheck(&rows, &Vec::new());
        let st: Vec<_> = got.iter().map(|c| c.status).collect();
        assert_eq!(
            st,
            [
                InputStatus::Unchanged,
                InputStatus::Changed,
                InputStatus::Missing,
                InputStatus::NotRecorded
            ]
        );
        assert_eq!(got[0].path.as_deref(), Some(a.as_path()));
        assert_eq!(got[0].resolved_against, Some("recorded-cwd"));
        assert_eq!(got[0].bytes, Some(5));
        assert_eq!(got[1].resolved_against, Some("absolute"));
        assert_eq!(got[2].row, 2);
    }

    #[test]
    fn mtimes_have_nanoseconds_and_directories_sum_their_files() {
        let t = UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 5);
        assert_eq!(mtime_text(t), "1700000000.000000005");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("x"), b"abc").unwrap();
        std::fs::write(dir.path().join("sub/y"), b"de").unwrap();
        assert_eq!(stat_input(dir.path()).unwrap().0, 5);
    }
}
