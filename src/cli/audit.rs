//! `tet audit FILE`: the provenance trail of a .tet file — every history row (operation, source
//! format, time, tool and version, byte-affecting options, parent digests) — and, with
//! `--source PATH…`, whether given inputs are unchanged: each is re-hashed and looked up among the
//! recorded parent digests. Exit 0 when every source matches, 1 on a mismatch or an unreadable
//! file, 2 on usage errors.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::{json, Value};

use super::{fail, one_line, EXIT_FAILED, EXIT_OK};
use crate::format::footer::HistoryRow;
use crate::format::TetFile;
use crate::meta::{digest_input, unix_iso as iso};

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The .tet file.
    file: PathBuf,
    /// Inputs to check against the recorded parent digests (files or directory stores).
    #[arg(long, num_args = 1..)]
    source: Vec<PathBuf>,
    /// Print one JSON object (`tet-audit/1`).
    #[arg(long)]
    json: bool,
}

/// One checked source: its digest and the history rows that name it as a parent.
struct Checked {
    path: PathBuf,
    digest: Result<String, String>,
    rows: Vec<usize>,
}

pub fn run(a: &AuditArgs) -> ExitCode {
    let f = match TetFile::open(&a.file) {
        Ok(f) => f,
        Err(e) => return fail(&a.file, e.to_string()),
    };
    let history: Vec<HistoryRow> = match f.footer() {
        Ok(Some(m)) => m.history.clone(),
        Ok(None) => Vec::new(),
        Err(e) => return fail(&a.file, format!("footer unreadable, no history: {e}")),
    };
    let checked: Vec<Checked> = a
        .source
        .iter()
        .map(|p| {
            let digest = digest_input(p)
                .map(|(d, _)| d)
                .map_err(|e| format!("cannot read: {e}"));
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
    let ok = checked.iter().all(|c| !c.rows.is_empty());

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
                    "error": c.digest.as_ref().err(),
                    "matches_rows": c.rows,
                    "ok": !c.rows.is_empty(),
                })
            })
            .collect();
        let v = json!({
            "schema": "tet-audit/1",
            "file": a.file.display().to_string(),
            "history": rows,
            "sources": sources,
            "ok": ok,
        });
        println!("{v}");
    } else {
        print!("{}", table(&a.file, &history, &checked));
    }
    ExitCode::from(if ok { EXIT_OK } else { EXIT_FAILED })
}

fn table(file: &std::path::Path, history: &[HistoryRow], checked: &[Checked]) -> String {
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
                let _ = writeln!(o, "MISMATCH {}: {e}", c.path.display());
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
