//! `tet audit --prov FILE…` (W3C PROV-JSON on standard output) and `tet audit --graph
//! PICTURE FILE…` (the lineage drawn by Graphviz): the lineage of several files at once
//! ([`tet::provenance::lineage`]), their recorded inputs checked again and their signatures
//! checked (against `--signers` when given).
//!
//! Exit codes as `tet audit`'s: 0 every recorded input unchanged, 1 an input changed (or a
//! signature is invalid), 2 an input missing or unreadable, or a file unreadable.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{errln, fail, one_line, outln, program};
use tet::meta::inputs::{recheck, InputStatus};
use tet::provenance::allowed::AllowedSigners;
use tet::provenance::graph::{self, Rendered};
use tet::provenance::lineage::{FileRecord, Lineage};
use tet::provenance::prov;

/// What `tet audit` asked for besides its report.
pub(crate) struct LineageOut<'a> {
    pub prov: bool,
    pub graph: Option<&'a Path>,
    pub signers: Option<&'a AllowedSigners>,
}

/// Reads one file's record; `Err` is its exit code (the reason printed).
fn record(
    file: &Path,
    options: &tet::storage::Options,
    signers: Option<&AllowedSigners>,
) -> Result<FileRecord, u8> {
    let f = super::OpenedTet::open(file, options).map_err(|e| {
        fail(file, e);
        2u8
    })?;
    let history = match f.footer() {
        Ok(Some(m)) => m.history.clone(),
        Ok(None) => Vec::new(),
        Err(e) => {
            fail(file, format!("footer unreadable, no history: {e}"));
            return Err(2);
        }
    };
    let digest = match super::digest_arg(file, options) {
        Ok((d, _)) => Some(d),
        Err(e) => {
            fail(file, format!("cannot hash: {e}"));
            return Err(2);
        }
    };
    Ok(FileRecord {
        path: file.display().to_string(),
        digest,
        inputs: recheck(&history, options),
        history,
        signatures: tet::provenance::check::check(&f, signers).ok(),
    })
}

/// `tet audit` with `--prov` or `--graph` (`None` without either): reads `--signers` (a bad
/// file is a usage error), then [`run`]. With `--signers` alone, reads it to say what is wrong
/// with it before the report (`Some` then only when it cannot be read).
pub(crate) fn from_audit(
    files: &[PathBuf],
    prov: bool,
    graph: Option<&Path>,
    signers: Option<&Path>,
    options: &tet::storage::Options,
) -> Option<ExitCode> {
    let allowed = match signers.map(super::sign::load_signers) {
        Some(Err(code)) => return Some(code),
        loaded => loaded.and_then(Result::ok),
    };
    if !prov && graph.is_none() {
        return None;
    }
    let out = LineageOut {
        prov,
        graph,
        signers: allowed.as_ref(),
    };
    Some(run(files, &out, options))
}

/// Builds the lineage of `files` and writes what `out` asks for.
pub(crate) fn run(
    files: &[PathBuf],
    out: &LineageOut<'_>,
    options: &tet::storage::Options,
) -> ExitCode {
    let mut records = Vec::new();
    let mut code = 0u8;
    for file in files {
        if super::interrupted() {
            break;
        }
        match record(file, options, out.signers) {
            Ok(r) => records.push(r),
            Err(c) => code = code.max(c),
        }
    }
    let lineage = Lineage::build(&records);
    let changed = lineage.count(InputStatus::Changed)
        + records
            .iter()
            .filter_map(|r| r.signatures.as_ref())
            .filter(|s| super::sign::any_invalid(s))
            .count();
    let unchecked = lineage.count(InputStatus::Missing) + lineage.count(InputStatus::Unreadable);
    if changed > 0 {
        code = 1;
    } else if unchecked > 0 {
        code = code.max(2);
    }
    if out.prov {
        let doc = prov::document(&lineage);
        match serde_json::to_string_pretty(&doc) {
            Ok(text) => outln!("{text}"),
            Err(e) => {
                errln!("{}: PROV-JSON: {e}", program());
                return ExitCode::from(1);
            }
        }
    }
    if let Some(path) = out.graph {
        let text = graph::dot(&lineage);
        let summary = format!(
            "{} files, {} nodes, {} edges; {} changed, {unchecked} missing or unreadable inputs",
            records.len(),
            lineage.entities.len() + lineage.activities.len(),
            lineage.used.len() + lineage.generated.len(),
            lineage.count(InputStatus::Changed),
        );
        match graph::render(&text, path) {
            Ok(Rendered::Written(p)) => errln!("{}: wrote {} ({summary})", program(), p.display()),
            Ok(Rendered::DotOnly(p)) => errln!(
                "{}: Graphviz's dot is not installed: wrote the DOT text to {} instead ({summary}); \
                 render it with `dot -Tsvg`",
                program(),
                p.display()
            ),
            Err(e) => {
                errln!("{}: {}", program(), one_line(&e.to_string()));
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::from(code)
}
