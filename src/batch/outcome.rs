//! What a job gives back ([`Outcome`]: its ledger row, notes, report) and how the jobs fill
//! it: a finished conversion's row ([`record_converted`]), a failure's ([`failed_row`]).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ledger::{InputRow, Status};

/// What a job gives back.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Outcome {
    pub row: InputRow,
    /// The conversion report (when asked for and converted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<tet::pipeline::ConvertReport>,
    /// Human lines for the terminal (notes, skipped items).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The run was stopped by this signal while the job ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<i32>,
}

/// Called with the importer's name once the input is identified (the worker tells its
/// supervisor, so a crash can be blamed on the right library).
pub type StageHook<'a> = &'a mut dyn FnMut(&str);

/// Fills the row and notes of a finished conversion `r` (rebuilt for `rebuild_reason`).
pub fn record_converted(
    out: &mut Outcome,
    r: &tet::pipeline::ConvertReport,
    rebuild_reason: Option<String>,
    want_report: bool,
) {
    if let Some(why) = rebuild_reason {
        out.notes.push(format!("rebuilt: {why}"));
        out.row.reason = Some(format!("rebuilt: {why}"));
    }
    out.notes
        .extend(r.warnings.iter().map(|w| format!("note: {w}")));
    out.notes.extend(
        r.skipped
            .iter()
            .map(|s| format!("skipped {}: {}", s.name, s.reason)),
    );
    out.notes.insert(
        0,
        format!(
            "{} datasets, {} in, {} out ({:.2}x), {:.2}s",
            r.datasets.len(),
            super::text::human_bytes(r.bytes_in),
            super::text::human_bytes(r.bytes_out),
            r.ratio,
            r.elapsed_s
        ),
    );
    let row = &mut out.row;
    row.status = Some(Status::Ok);
    row.format = Some(r.format.clone());
    row.input_digest = Some(r.input_digest.clone());
    row.bytes_in = Some(r.bytes_in);
    row.bytes_out = Some(r.bytes_out);
    row.datasets = Some(r.datasets.len());
    row.skipped_items = Some(r.skipped.len());
    row.warnings = r.warnings.clone();
    if want_report {
        out.report = Some(r.clone());
    }
}

/// A failed outcome with a one-line reason.
pub fn failed_row(out: Outcome, reason: String) -> Outcome {
    failed(out, reason)
}

pub(super) fn failed(mut out: Outcome, reason: String) -> Outcome {
    out.row.status = Some(Status::Failed);
    out.row.reason = Some(super::text::one_line(&reason));
    out
}

/// Fills what can be known of a failed input: its size and digest (when it can be read).
pub fn fill_known(row: &mut InputRow, input: &Path) {
    if row.input_digest.is_none() {
        if let Ok((digest, bytes)) = tet::meta::digest_input(input) {
            row.input_digest = Some(digest);
            row.bytes_in = Some(bytes);
        }
    }
}
