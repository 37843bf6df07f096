//! `tet audit FILE…`: the provenance trail of a .tet file — every history row (operation, source
//! format, time, tool and version, byte-affecting options, parent digests) — and whether its
//! inputs are unchanged: with `--source PATH…` each given path is re-hashed and looked up among
//! the recorded parent digests (an object URL is streamed once); without, every `convert` row's recorded input that still exists
//! is re-hashed ([`crate::meta::inputs`]) and reported unchanged, changed since conversion (old
//! and new size and mtime) or missing.
//!
//! One file: the history table, then one line per source or input. Several files: one line per
//! file. `--json`: one `tet-audit/1` object per file, one per line. Exit 0 when every source
//! matches and no recorded input changed or became unreadable (a missing input is reported, not
//! a failure: the lineage may have been cleaned up), 1 otherwise or on an unreadable file, 2 on
//! usage errors.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde_json::{json, Value};

use super::{fail, one_line, EXIT_FAILED, EXIT_OK};
use crate::format::footer::HistoryRow;
use crate::meta::inputs::{recheck, InputCheck, InputStatus};
use crate::meta::unix_iso as iso;

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The .tet files.
    #[arg(required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// Inputs to check against the recorded parent digests (files, directory stores or object
    /// URLs).
    #[arg(long, num_args = 1..)]
    source: Vec<PathBuf>,
    /// Print one JSON object (`tet-audit/1`) per file, one per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    storage: super::StorageArgs,
}

/// One checked source: its digest and the history rows that name it as a parent.
struct Checked {
    path: PathBuf,
    /// Its digest, or why it could not be read.
    digest: Result<String, std::io::Error>,
    rows: Vec<usize>,
}

pub fn run(a: &AuditArgs) -> ExitCode {
    let many = a.files.len() > 1;
    let mut all_ok = true;
    for file in &a.files {
        if super::interrupted() {
            break;
        }
        all_ok &= audit_one(a, file, many);
    }
    ExitCode::from(if all_ok { EXIT_OK } else { EXIT_FAILED })
}

/// Audits one file and prints its report; returns whether it passed.
fn audit_one(a: &AuditArgs, file: &Path, many: bool) -> bool {
    // An object is read by ranges: its head and its footer.
    let history: Vec<HistoryRow> = match super::OpenedTet::open(file, &a.storage.storage_option) {
        Err(e) => {
            fail(file, e);
            return false;
        }
        Ok(f) => match f.footer() {
            Ok(Some(m)) => m.history.clone(),
            Ok(None) => Vec::new(),
            Err(e) => {
                fail(file, format!("footer unreadable, no history: {e}"));
                return false;
            }
        },
    };
    let checked: Vec<Checked> = a
        .source
        .iter()
        .map(|p| {
            let digest = super::digest_arg(p, &a.storage.storage_option).map(|(d, _)| d);
            let rows = match &digest {
                Ok(d) => (0..history.len())
                    .filter(|&i| history[i].parents.iter().any(|x| x == d))
                    .collect(),
                Err(_) => Vec::new(),
            };
            Checked {
                path: p.clone(),
                digest,
                rows,
            }
        })
        .collect();
    // Without --source: the recorded inputs.
    let inputs: Vec<InputCheck> = if a.source.is_empty() {
        recheck(&history, &a.storage.storage_option)
    } else {
        Vec::new()
    };
    let ok =
        checked.iter().all(|c| !c.rows.is_empty()) && inputs.iter().all(|c| !c.status.is_problem());

    if a.json {
        let rows: Vec<Value> = history
            .iter()
            .enumerate()
            .map(|(i, h)| {
                json!({
                    "index": i,
                    "op": h.op,
                    "source": h.source,
                    "at": h.at,
                    "at_iso": iso(&h.at),
                    "parents": h.parents,
                    "params": h.params,
                })
            })
            .collect();
        let sources: Vec<Value> = checked
            .iter()
            .map(|c| {
                json!({
                    "path": c.path.display().to_string(),
                    "digest": c.digest.as_ref().ok(),
                    "error": c.digest.as_ref().err().map(|e| format!("cannot read: {e}")),
                    "matches_rows": c.rows,
                    "ok": !c.rows.is_empty(),
                })
            })
            .collect();
        let inputs: Vec<Value> = inputs.iter().map(input_json).collect();
        let v = json!({
            "schema": "tet-audit/1",
            "file": file.display().to_string(),
            "history": rows,
            "sources": sources,
            "inputs": inputs,
            "ok": ok,
        });
        println!("{v}");
    } else if many {
        println!(
            "{}",
            one_line_summary(file, &history, &checked, &inputs, ok)
        );
    } else {
        print!("{}", table(file, &history, &checked));
        print!("{}", input_lines(&inputs));
    }
    ok
}

fn input_json(c: &InputCheck) -> Value {
    json!({
        "row": c.row,
        "input": c.input,
        "path": c.path.as_ref().map(|p| p.display().to_string()),
        "resolved_against": c.resolved_against,
        "status": c.status.name(),
        "recorded_digest": c.recorded_digest,
        "recorded_bytes": c.recorded_bytes,
        "recorded_mtime": c.recorded_mtime,
        "digest": c.digest,
        "bytes": c.bytes,
        "mtime": c.mtime,
        "error": c.error,
    })
}

/// A recorded mtime (`secs.nanos`) as UTC ISO 8601, or as recorded when it is not that form.
fn mtime_iso(m: &str) -> String {
    let (secs, frac) = m.split_once('.').unwrap_or((m, ""));
    match iso(secs) {
        Some(t) if !frac.is_empty() => format!("{}.{frac}Z", t.trim_end_matches('Z')),
        Some(t) => t,
        None => m.to_string(),
    }
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map_or("?".into(), T::to_string)
}

fn input_lines(inputs: &[InputCheck]) -> String {
    let mut o = String::new();
    for c in inputs {
        let path = c
            .path
            .as_ref()
            .map_or("-".into(), |p| p.display().to_string());
        let row = c.row;
        let _ = match c.status {
            InputStatus::Unchanged => writeln!(
                o,
                "ok row {row} input {path}: unchanged since conversion ({})",
                opt(&c.digest)
            ),
            InputStatus::Changed => writeln!(
                o,
                "CHANGED row {row} input {path}: changed since conversion (size {} -> {} bytes, \
                 mtime {} -> {})",
                opt(&c.recorded_bytes),
                opt(&c.bytes),
                c.recorded_mtime.as_deref().map_or("?".into(), mtime_iso),
                c.mtime.as_deref().map_or("?".into(), mtime_iso),
            ),
            InputStatus::Missing => writeln!(
                o,
                "missing row {row} input {path}: not found (moved away or deleted; recorded size \
                 {} bytes)",
                opt(&c.recorded_bytes)
            ),
            InputStatus::Unreadable => writeln!(
                o,
                "UNREADABLE row {row} input {path}: {}",
                one_line(c.error.as_deref().unwrap_or("cannot read"))
            ),
            InputStatus::NotRecorded => writeln!(
                o,
                "- row {row}: no input path or digest recorded (nothing to check)"
            ),
        };
    }
    o
}

fn one_line_summary(
    file: &Path,
    history: &[HistoryRow],
    checked: &[Checked],
    inputs: &[InputCheck],
    ok: bool,
) -> String {
    let what = if checked.is_empty() {
        let count = |s: InputStatus| inputs.iter().filter(|c| c.status == s).count();
        let mut parts = vec![
            format!("{} unchanged", count(InputStatus::Unchanged)),
            format!("{} changed", count(InputStatus::Changed)),
            format!("{} missing", count(InputStatus::Missing)),
        ];
        for (s, name) in [
            (InputStatus::Unreadable, "unreadable"),
            (InputStatus::NotRecorded, "not recorded"),
        ] {
            if count(s) > 0 {
                parts.push(format!("{} {name}", count(s)));
            }
        }
        format!("inputs: {}", parts.join(", "))
    } else {
        format!(
            "sources: {} of {} match a recorded parent",
            checked.iter().filter(|c| !c.rows.is_empty()).count(),
            checked.len()
        )
    };
    format!(
        "{}: {} ({} history rows; {what})",
        file.display(),
        if ok { "ok" } else { "FAILED" },
        history.len()
    )
}

fn table(file: &Path, history: &[HistoryRow], checked: &[Checked]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}: {} history rows", file.display(), history.len());
    if !history.is_empty() {
        let _ = writeln!(
            o,
            "  {:>3}  {:<10} {:<8} {:<21} {:<20} options",
            "#", "op", "source", "when (UTC)", "tool"
        );
    }
    for (i, h) in history.iter().enumerate() {
        let tool = match (h.params.get("tool"), h.params.get("version")) {
            (Some(t), Some(v)) => format!("{t} {v}"),
            (Some(t), None) => t.clone(),
            _ => "-".into(),
        };
        let options: Vec<String> = h
            .params
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "tool" | "version"))
            .map(|(k, v)| format!("{k}={}", one_line(v)))
            .collect();
        let _ = writeln!(
            o,
            "  {:>3}  {:<10} {:<8} {:<21} {:<20} {}",
            i,
            h.op,
            h.source,
            iso(&h.at).unwrap_or_else(|| h.at.clone()),
            tool,
            options.join(" ")
        );
        for p in &h.parents {
            let _ = writeln!(o, "       parent {p}");
        }
    }
    for c in checked {
        match (&c.digest, c.rows.as_slice()) {
            (Err(e), _) => {
                let _ = writeln!(o, "MISMATCH {}: cannot read: {e}", c.path.display());
            }
            (Ok(d), []) => {
                let _ = writeln!(
                    o,
                    "MISMATCH {}: {d} is not a recorded parent (changed, or not an input of this file)",
                    c.path.display()
                );
            }
            (Ok(_), rows) => {
                let rows: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
                let _ = writeln!(
                    o,
                    "ok {}: unchanged (parent of row {})",
                    c.path.display(),
                    rows.join(", ")
                );
            }
        }
    }
    o
}
