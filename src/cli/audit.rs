//! `tet audit FILE…`: the provenance trail of a .tet file — every history row (operation, source
//! format, time, tool and version, byte-affecting options, parent digests) — and whether its
//! inputs are unchanged: with `--source PATH…` each given path is re-hashed and looked up among
//! the recorded parent digests (an object URL is streamed once); without, every `convert` row's recorded input that still exists
//! is re-hashed ([`tet::meta::inputs`]) and reported unchanged, changed since conversion (old
//! and new size and mtime) or missing.
//!
//! One file: the history table, then one line per source or input. Several files: one line per
//! file. `--json`: one `tet-audit/1` object per file, one per line.
//!
//! The exit code tells the three answers apart ([`Verdict`]): 0 every input confirmed
//! unchanged; 1 something changed (a recorded input, or a `--source` that is no recorded
//! parent); 2 nothing found changed but something could not be checked (a recorded input
//! missing or unreadable, a `--source` or a `.tet` file that cannot be read; clap's usage
//! errors are 2 as well). Over several files the worst answer counts, changed before
//! could-not-check.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::{fail, one_line, out, outln};
use tet::format::footer::HistoryRow;
use tet::meta::inputs::{InputCheck, InputStatus};
use tet::meta::unix_iso as iso;
use tet::provenance::allowed::AllowedSigners;
use tet::provenance::report::{audit_file, Checked, Verdict};

#[derive(Args, Debug)]
#[command(after_long_help = AFTER_HELP)]
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
    /// Write the lineage of all the files as W3C PROV-JSON to standard output (instead of the
    /// report).
    #[arg(long)]
    prov: bool,
    /// Draw the lineage of all the files into this picture (`.svg`, `.png`, `.pdf` by
    /// Graphviz's `dot`; `.dot` as DOT text, also when `dot` is not installed).
    #[arg(long, value_name = "PICTURE")]
    graph: Option<PathBuf>,
    /// Name signers from this `allowed_signers` file (ssh-keygen's format).
    #[arg(long, value_name = "ALLOWED_SIGNERS")]
    signers: Option<PathBuf>,
    /// Re-make each file from what its footer records (its last history row, a `.tet`
    /// parent's step first) in a temporary folder and compare: exit 0 reproduced, 1 differs,
    /// 2 could not be tried.
    #[arg(long, conflicts_with_all = ["source", "prov", "graph", "signers"])]
    reproduce: bool,
    /// With --reproduce: re-make a file recorded by another tet-convert version, and compare
    /// values instead of bytes.
    #[arg(long, requires = "reproduce")]
    allow_version_drift: bool,
    #[command(flatten)]
    storage: super::StorageArgs,
}

/// The end of `tet audit --help`: an example and the exit codes.
const AFTER_HELP: &str = "\
Examples:
  tet audit out.tet                  history, and every recorded input re-hashed
  tet audit out.tet --source in.nc   is in.nc (as it is now) an input of out.tet?
  tet audit tet/*.tet --json         one JSON object per file
  tet audit --prov tet/*.tet > lineage.json      W3C PROV-JSON of all their lineage
  tet audit --graph lineage.svg tet/*.tet        the lineage drawn (Graphviz's dot)
  tet audit --signers allowed_signers out.tet    … and who signed it (tet sign)
  tet audit --reproduce out.tet      re-make out.tet from its footer and compare

Exit status:
  0  unchanged: every recorded input (or --source) is the one recorded
  1  changed: an input changed since conversion, or a --source is no recorded input
  2  could not check: an input is missing or unreadable, a file cannot be read (or a usage
     error); nothing was found changed
  With several files the worst counts: 1 before 2 before 0.

Exit status with --reproduce:
  0  reproduced: byte for byte (values, with --allow-version-drift)
  1  differs: the first difference is named (dataset and chunk, or footer key)
  2  could not be tried: an input missing or changed, another tet-convert version, …";

pub fn run(a: &AuditArgs) -> ExitCode {
    if a.reproduce {
        let storage = &a.storage.storage_option;
        return super::reproduce::run(&a.files, a.allow_version_drift, a.json, storage);
    }
    if let Some(code) = super::lineage::from_audit(
        &a.files,
        a.prov,
        a.graph.as_deref(),
        a.signers.as_deref(),
        &a.storage.storage_option,
    ) {
        return code;
    }
    let many = a.files.len() > 1;
    let mut worst = Verdict::Unchanged;
    for file in &a.files {
        if super::interrupted() {
            break;
        }
        worst = worst.max(audit_one(a, file, many));
    }
    ExitCode::from(worst.exit_code())
}

/// Audits one file ([`tet::provenance::report::audit_file`], what Python's `tet.audit`
/// returns) and prints its report; returns its verdict.
fn audit_one(a: &AuditArgs, file: &Path, many: bool) -> Verdict {
    let options = &a.storage.storage_option;
    // Named signers: the file given was read (and its faults said) by `run` already.
    let allowed = a
        .signers
        .as_deref()
        .and_then(|p| AllowedSigners::load(p).ok());
    let cancel = super::signal_cancel(file);
    let r = match audit_file(file, &a.source, allowed.as_ref(), options, &cancel) {
        Ok(r) => r,
        Err(e) => {
            fail(file, e);
            return Verdict::Unchecked;
        }
    };
    if a.json {
        outln!("{}", r.to_json(&file.display().to_string()));
    } else if many {
        outln!(
            "{}",
            one_line_summary(file, &r.history, &r.checked, &r.inputs, r.verdict)
        );
    } else {
        out!("{}", table(file, &r.history, &r.checked));
        out!("{}", input_lines(&r.inputs));
        if let Some(s) = &r.signatures {
            out!("{}", super::sign::audit_lines(s));
        }
    }
    r.verdict
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
    verdict: Verdict,
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
        match verdict {
            Verdict::Unchanged => "ok",
            Verdict::Changed => "CHANGED",
            Verdict::Unchecked => "NOT CHECKED",
        },
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
