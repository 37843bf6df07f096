//! The reports of `tet verify` and `tet audit`, built once for every front end: the command
//! line prints them (`--json`: [`verify_json`], [`AuditReport::to_json`]) and chooses its exit
//! code from them; the Python package's `tet.verify` and `tet.audit` return the same JSON
//! values. A `.tet` is named by a local path or an object URL ([`crate::storage::open_tet`]: an
//! object is read by ranges, each checked chunk once).
//!
//! - [`verify_file`]: every rule of the format and the checksums ([`crate::format::verify`]), a
//!   file cut short said first in words ([`truncation`]), and with allowed signers the
//!   signatures (a `signature` failure unless one valid signature is by an allowed signer).
//! - [`audit_file`]: the history, each given source re-hashed and looked up among the recorded
//!   parents, or else every recorded input re-hashed ([`crate::meta::inputs::recheck`]), the
//!   signatures, and the [`Verdict`].

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::control::Cancel;
use crate::format::footer::HistoryRow;
use crate::format::verify::{verify, Depth, Finding, Report};
use crate::format::{TetFile, FLAG_FOOTER, FOOTER_MAGIC, FOOTER_TRAILER_LEN};
use crate::meta::inputs::{recheck, InputCheck, InputStatus};
use crate::meta::unix_iso as iso;
use crate::provenance::allowed::AllowedSigners;
use crate::provenance::check::{check, SigStatus, Signatures};
use crate::provenance::sign::NAMESPACE;
use crate::storage::{open_tet, OpenTetError, Options};

/// The schema name of a verify report.
pub const VERIFY_SCHEMA: &str = "tet-verify/1";
/// The schema name of an audit report.
pub const AUDIT_SCHEMA: &str = "tet-audit/1";

// ---------------------------------------------------------------------------------------------
// A file cut short

/// Where the file's bytes should end, as its chunk index says: the end of the index and of
/// the last chunk payload.
fn data_end(f: &TetFile) -> u64 {
    let index_end = f.chunk_index_offset.saturating_add(f.chunk_index_length);
    f.entries
        .iter()
        .map(|e| e.payload_offset.saturating_add(e.stored_byte_len))
        .fold(index_end, u64::max)
}

/// Whether the file's last bytes are the footer's end marker.
fn ends_with_marker(f: &TetFile) -> bool {
    let len = f.file_len();
    len >= FOOTER_TRAILER_LEN
        && matches!(f.read_bytes(len - 4, 4), Ok(Some(b)) if *b == FOOTER_MAGIC)
}

/// "1234 bytes (1.2 KiB)" above a few KiB, "12 bytes" below.
fn bytes(n: u64) -> String {
    if n < 10 << 10 {
        return format!("{n} bytes");
    }
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{n} bytes ({v:.1} {})", UNITS[u])
}

/// A file cut short (a copy or a download that stopped, a disk that filled): how many bytes it
/// has, how many its data needs and what is missing; `None` when every byte the index and the
/// footer flag promise is there.
pub fn truncation(f: &TetFile) -> Option<String> {
    let len = f.file_len();
    let end = data_end(f);
    let has_footer = f.flags & FLAG_FOOTER != 0;
    if end > len {
        let cut = f
            .entries
            .iter()
            .filter(|e| e.payload_offset.saturating_add(e.stored_byte_len) > len)
            .count();
        let footer = if has_footer {
            ", and the footer with the metadata and history"
        } else {
            ""
        };
        return Some(format!(
            "file is truncated: it has {} where its data needs {}; the last {} or more are \
             missing ({cut} of {} chunks cut off{footer}). The copy or download did not finish, \
             or the disk filled while it was written",
            bytes(len),
            bytes(end),
            bytes(end - len),
            f.entries.len()
        ));
    }
    if has_footer && f.footer_layout().is_none() && !ends_with_marker(f) {
        return Some(format!(
            "file is truncated: it ends inside its footer (the metadata and history): {} of the \
             footer are there, its end (at least the last {FOOTER_TRAILER_LEN} bytes) is \
             missing; the data of all {} chunks is complete. The copy or download did not \
             finish, or the disk filled while it was written",
            bytes(len - end),
            f.entries.len()
        ));
    }
    None
}

// ---------------------------------------------------------------------------------------------
// verify

/// Verifies the `.tet` at `path` (a local path or an object URL): see the module docs. A file
/// that cannot be opened is one `structure` failure.
pub fn verify_file(
    path: &Path,
    depth: Depth,
    signers: Option<&AllowedSigners>,
    options: &Options,
    cancel: &Cancel,
) -> Report {
    let f = match open_tet(path, options, cancel) {
        Ok(f) => f,
        Err(e) => {
            let mut r = Report {
                footer_digest: "absent",
                ..Report::default()
            };
            r.failures.push(Finding {
                code: "structure",
                message: e.to_string(),
            });
            return r;
        }
    };
    let mut r = verify(&f, depth);
    // A file cut short: said first, in words (the findings it causes follow).
    if let Some(t) = truncation(&f) {
        r.failures.insert(
            0,
            Finding {
                code: "truncated",
                message: t,
            },
        );
    }
    if let Some(allowed) = signers {
        signatures_into(&f, allowed, &mut r);
    }
    r
}

/// The `tet-verify/1` object of a report of the file shown as `file`.
pub fn verify_json(file: &str, depth: Depth, r: &Report) -> Value {
    json!({
        "schema": VERIFY_SCHEMA,
        "file": file,
        "ok": r.ok(),
        "depth": if depth == Depth::Deep { "deep" } else { "sample" },
        "chunks": r.chunks,
        "decoded": r.decoded,
        "checksums": {
            "footer_digest": r.footer_digest,
            "chunks_with_checksum": r.checksummed,
            "chunks_checked": r.checked,
        },
        "failures": r.failures,
        "warnings": r.warnings,
        "notes": r.notes,
    })
}

/// `tet verify --signers`: a `signature` failure unless every signature is valid over the
/// file's content and one is by an allowed signer; a `signature-unknown` warning for a valid
/// signature by a key the allowed signers do not list.
pub fn signatures_into(f: &TetFile, allowed: &AllowedSigners, r: &mut Report) {
    let fail = |r: &mut Report, message: String| {
        r.failures.push(Finding {
            code: "signature",
            message,
        })
    };
    let sigs = match check(f, Some(allowed)) {
        Ok(s) => s,
        Err(e) => return fail(r, format!("signatures cannot be checked: {e}")),
    };
    if sigs.signatures.is_empty() {
        return fail(
            r,
            format!("the file is not signed (content {})", sigs.content_digest),
        );
    }
    for s in &sigs.signatures {
        let reason = s.reason.as_deref().unwrap_or("");
        match s.status {
            SigStatus::Invalid => fail(
                r,
                format!("signature #{} by {}: {reason}", s.index, s.signer()),
            ),
            SigStatus::Unknown if !sigs.trusted() => fail(
                r,
                format!("signature #{} by {}: {reason}", s.index, s.signer()),
            ),
            SigStatus::Unknown => r.warnings.push(Finding {
                code: "signature-unknown",
                message: format!("signature #{} by {}: {reason}", s.index, s.signer()),
            }),
            SigStatus::Trusted | SigStatus::Valid => r.notes.push(Finding {
                code: "signed",
                message: format!(
                    "signature #{} by {} over {} ({NAMESPACE})",
                    s.index,
                    s.signer(),
                    sigs.content_digest
                ),
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// audit

/// What the audit of one file found, in the order of precedence over several files (the CLI
/// exits with the worst's code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Every source matched a recorded parent, every recorded input re-hashed to its digest
    /// (or none was recorded).
    Unchanged,
    /// Nothing changed that could be checked, but a recorded input is missing or unreadable,
    /// a source cannot be read, or the `.tet` file itself cannot be read.
    Unchecked,
    /// A recorded input changed, a source is no recorded parent, or a signature is invalid.
    Changed,
}

impl Verdict {
    /// Exit 0 unchanged, 1 changed, 2 could not check.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Unchanged => 0,
            Verdict::Changed => 1,
            Verdict::Unchecked => 2,
        }
    }

    /// `unchanged`, `changed`, `unchecked`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Unchanged => "unchanged",
            Verdict::Changed => "changed",
            Verdict::Unchecked => "unchecked",
        }
    }

    /// The verdict of one file: the worst of its sources and recorded inputs.
    fn of(checked: &[Checked], inputs: &[InputCheck]) -> Verdict {
        let sources = checked
            .iter()
            .map(|c| match (&c.digest, c.rows.is_empty()) {
                (Err(_), _) => Verdict::Unchecked,
                (Ok(_), true) => Verdict::Changed,
                (Ok(_), false) => Verdict::Unchanged,
            });
        let inputs = inputs.iter().map(|c| match c.status {
            InputStatus::Changed => Verdict::Changed,
            InputStatus::Missing | InputStatus::Unreadable => Verdict::Unchecked,
            InputStatus::Unchanged | InputStatus::NotRecorded => Verdict::Unchanged,
        });
        sources.chain(inputs).max().unwrap_or(Verdict::Unchanged)
    }
}

/// One given source: its digest and the history rows that name it as a parent.
#[derive(Debug)]
pub struct Checked {
    pub path: PathBuf,
    /// Its digest, or why it could not be read.
    pub digest: Result<String, std::io::Error>,
    pub rows: Vec<usize>,
}

/// The audit of one file (see the module docs).
#[derive(Debug)]
pub struct AuditReport {
    pub history: Vec<HistoryRow>,
    /// The given sources (empty when none was given).
    pub checked: Vec<Checked>,
    /// The recorded inputs re-hashed (empty when sources were given).
    pub inputs: Vec<InputCheck>,
    /// The signatures, checked against the allowed signers when given (`None`: not signed).
    pub signatures: Option<Signatures>,
    pub verdict: Verdict,
}

/// Why a file could not be audited at all.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Open(#[from] OpenTetError),
    /// The footer (and with it the history) cannot be read: the words of [`truncation`], or
    /// the reader's.
    #[error("{0}")]
    Footer(String),
}

/// Audits the `.tet` at `path` (a local path or an object URL): with `sources`, each is
/// re-hashed and looked up among the recorded parents; without, every recorded input is.
pub fn audit_file(
    path: &Path,
    sources: &[PathBuf],
    signers: Option<&AllowedSigners>,
    options: &Options,
    cancel: &Cancel,
) -> Result<AuditReport, AuditError> {
    // An object is read by ranges: its head and its footer.
    let f = open_tet(path, options, cancel)?;
    let history: Vec<HistoryRow> = match f.footer() {
        Ok(Some(m)) => m.history.clone(),
        Ok(None) => Vec::new(),
        Err(e) => {
            let why =
                truncation(&f).unwrap_or_else(|| format!("footer unreadable, no history: {e}"));
            return Err(AuditError::Footer(why));
        }
    };
    let checked: Vec<Checked> = sources
        .iter()
        .map(|p| {
            let digest = crate::storage::digest_path(p, options, cancel).map(|(d, _)| d);
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
    let inputs = if sources.is_empty() {
        recheck(&history, options)
    } else {
        Vec::new()
    };
    let mut verdict = Verdict::of(&checked, &inputs);
    let signatures = check(&f, signers).ok().filter(|s| !s.signatures.is_empty());
    if signatures.as_ref().is_some_and(any_invalid) {
        verdict = verdict.max(Verdict::Changed);
    }
    Ok(AuditReport {
        history,
        checked,
        inputs,
        signatures,
        verdict,
    })
}

/// Whether any signature is invalid (the file changed since it was signed).
pub fn any_invalid(s: &Signatures) -> bool {
    s.signatures.iter().any(|c| c.status == SigStatus::Invalid)
}

impl AuditReport {
    /// The `tet-audit/1` object of the file shown as `file`.
    pub fn to_json(&self, file: &str) -> Value {
        let rows: Vec<Value> = self
            .history
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
        let sources: Vec<Value> = self
            .checked
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
        let inputs: Vec<Value> = self.inputs.iter().map(input_json).collect();
        json!({
            "schema": AUDIT_SCHEMA,
            "file": file,
            "history": rows,
            "sources": sources,
            "inputs": inputs,
            "verdict": self.verdict.name(),
            "signatures": self.signatures,
            "ok": self.verdict == Verdict::Unchanged,
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_words() {
        assert_eq!(bytes(12), "12 bytes");
        assert_eq!(bytes(3 << 20), "3145728 bytes (3.0 MiB)");
        assert_eq!(bytes(15 << 10), "15360 bytes (15.0 KiB)");
    }

    #[test]
    fn verdict_order_is_exit_precedence() {
        assert!(Verdict::Changed > Verdict::Unchecked);
        assert!(Verdict::Unchecked > Verdict::Unchanged);
        assert_eq!(Verdict::Unchecked.exit_code(), 2);
    }
}
