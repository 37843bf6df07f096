//! A combined job (`tet-convert --concat DIM IN… OUT`, a manifest job with `inputs` and
//! `concat`) as a batch job like the others: run by [`super::job::execute`] in a supervised
//! worker (a C library crashing on one input costs that job's row, not the run), one ledger row
//! naming the output and every input, and the up-to-date check.
//!
//! Up to date means: the output's last history row is a conversion under the same byte-affecting
//! options (`concat` among them) whose parents — all of them, the footer's history extension
//! included — are exactly the inputs' current digests. As for one input ([`super::fresh`]), the
//! digests come from stamps kept in an extended attribute of the output
//! (`user.tet-convert.sources`: for each parent, a short hash of the size, mtime, inode and
//! device of the input it was — short so that a month of inputs fits ext4's 4 KiB per
//! attribute); an input whose `stat` still matches a parent's stamp stands for that parent and is
//! not read, any other one is hashed. The check stops at the first input that changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fresh::{CannotRead, Freshness, Stamp};
use super::ledger::{RecordedPath, Status};
use super::outcome::{failed_row, record_converted, Outcome, StageHook};
use super::wire::{Recheck, WireJob};
use tet::request::{Context, Request};

/// The extended attribute that holds the inputs' stamps.
pub const XATTR: &str = "user.tet-convert.sources";

/// The `inputs` of a combined job's ledger row (empty for a job of one input).
pub fn row_inputs(job: &WireJob) -> Vec<String> {
    job.inputs
        .iter()
        .map(|p| {
            p.path()
                .map_or_else(|_| "?".into(), |p| RecordedPath::of(&p).text)
        })
        .collect()
}

/// What the extended attribute holds: for each parent of the output's history row, in its
/// order, the first 8 bytes (hex) of the SHA-256 of the `stat` stamp of the input it was. Short,
/// so a month of inputs fits the 4 KiB an ext4 attribute may hold; a stamp of this input that
/// matches stands for the parent's digest.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Stamps {
    stats: Vec<String>,
}

fn stat_key(s: &Stamp) -> String {
    use sha2::Digest as _;
    let h = sha2::Sha256::digest(s.stat.as_bytes());
    h.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Stamps `output` (best effort, as [`super::fresh::record`]: without it re-runs hash).
fn record(output: &Path, stamps: &Stamps) {
    if let Ok(v) = serde_json::to_vec(stamps) {
        if let Err(e) = xattr::set(output, XATTR, &v) {
            log::debug!("{}: no stamp ({e}); re-runs will hash", output.display());
        }
    }
}

fn stamps(output: &Path) -> Stamps {
    xattr::get(output, XATTR)
        .ok()
        .flatten()
        .and_then(|v| serde_json::from_slice(&v).ok())
        .unwrap_or_default()
}

/// Decides whether `output` is up to date for the combination of `inputs` under `params`.
pub fn check(
    inputs: &[PathBuf],
    output: &Path,
    params: &BTreeMap<String, String>,
    recheck: Recheck,
) -> Freshness {
    if std::fs::symlink_metadata(output).is_err() {
        return Freshness::Rebuild(None);
    }
    let parents = match super::fresh::recorded(output, params) {
        Ok(r) => r.parents,
        Err(why) => return Freshness::Rebuild(Some(why.to_string())),
    };
    if parents.len() != inputs.len() {
        return Freshness::Rebuild(Some("the inputs changed".into()));
    }
    let cached = match recheck.rehash {
        true => Stamps::default(),
        false => stamps(output),
    };
    // The stat key of the input matched to each parent, in the parents' order.
    let mut matched: Vec<Option<String>> = vec![None; parents.len()];
    let (mut bytes, mut first_digest) = (0u64, None);
    for input in inputs {
        let unreadable = |source| {
            Freshness::Unreadable(CannotRead {
                path: Some(input.clone()),
                source,
            })
        };
        let stamp = match Stamp::of(input) {
            Ok(s) => s,
            Err(e) => return unreadable(e),
        };
        let key = stat_key(&stamp);
        let free = |k: usize| matched.get(k).is_some_and(Option::is_none);
        let known = (0..parents.len()).find(|&k| free(k) && cached.stats.get(k) == Some(&key));
        let k = match known {
            Some(k) => Some(k),
            None => match tet::meta::digest_input(input) {
                Ok((d, _)) => (0..parents.len()).find(|&k| free(k) && parents[k] == d),
                Err(e) => return unreadable(e),
            },
        };
        if first_digest.is_none() {
            first_digest = k.and_then(|k| parents.get(k)).cloned();
        }
        match k.and_then(|k| matched.get_mut(k)) {
            Some(slot) => *slot = Some(key),
            None => return Freshness::Rebuild(Some(format!("{} changed", input.display()))),
        }
        bytes = bytes.saturating_add(stamp.bytes);
    }
    let now = Stamps {
        stats: matched.into_iter().flatten().collect(),
    };
    record(output, &now);
    if recheck.verify_existing {
        if let Some(rebuild) = super::fresh::existing_output_fails_verify(output) {
            return rebuild;
        }
    }
    Freshness::UpToDate {
        digest: first_digest.unwrap_or_default(),
        bytes,
    }
}

/// Runs a combined job: the up-to-date check, then the request ([`tet::request::run`]);
/// the row names the first input as `input` and every input in `inputs`.
pub fn execute(
    job: &WireJob,
    req: &Request,
    cx: Context,
    stage: StageHook<'_>,
    mut out: Outcome,
) -> Outcome {
    let Some(dim) = req.settings.concat.clone() else {
        return failed_row(out, "no dimension to combine along".into());
    };
    let inputs: Vec<PathBuf> = req.inputs.iter().map(|i| i.name().to_path_buf()).collect();
    let output = req.output.name();
    out.row.inputs = row_inputs(job);
    // An object URL among the inputs or as the output: opened, checked and published as a job
    // of one object input is.
    if req.inputs.iter().any(|i| i.url().is_some()) || tet::storage::is_url(output) {
        return super::remote::execute_combined(job, &inputs, output, req, cx, stage, out);
    }
    if let Some(imp) = inputs.first().and_then(|i| tet::registry::identify(i).ok()) {
        out.row.format = Some(imp.id().to_owned());
        stage(imp.name());
    }
    let params = req.settings.recorded_params();
    let mut rebuild_reason = None;
    if !job.recheck.force {
        match check(&inputs, output, &params, job.recheck) {
            Freshness::UpToDate { digest, bytes } => {
                out.row.status = Some(Status::Skipped);
                out.row.reason = Some("up to date".into());
                out.row.input_digest = Some(digest);
                out.row.bytes_in = Some(bytes);
                return out;
            }
            Freshness::Rebuild(why) => rebuild_reason = why,
            Freshness::Unreadable(e) => return failed_row(out, e.to_string()),
            Freshness::Conflict(e) => return failed_row(out, e),
        }
    }
    if job.make_dirs {
        if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Err(e) = std::fs::create_dir_all(dir) {
                return failed_row(out, format!("cannot create {}: {e}", dir.display()));
            }
        }
    }
    let before: Vec<Option<Stamp>> = inputs.iter().map(|i| Stamp::of(i).ok()).collect();
    log::info!(
        "{} inputs -> {}: combining along {}",
        inputs.len(),
        output.display(),
        dim
    );
    match tet::request::run(req, &cx).map_err(|e| (e.interrupted_by(), e)) {
        Err((Some(sig), _)) => {
            out.row.status = Some(Status::Interrupted);
            out.row.reason = Some(format!("stopped by {}", super::signals::name(sig)));
            out.interrupted_by = Some(sig);
        }
        Err((None, e)) => out = failed_row(out, e.to_string()),
        Ok(r) => {
            stamp_converted(output, &params, &r.order, &before);
            record_converted(&mut out, &r, rebuild_reason, job.want_report);
            if let Some(n) = out.notes.first_mut() {
                *n = format!("combined along {dim}: {n}");
            }
            out.row.bytes_in = Some(
                before
                    .iter()
                    .flatten()
                    .fold(0, |t, s| t.saturating_add(s.bytes)),
            );
        }
    }
    out
}

/// Stamps a fresh output: the history row's parents are the digests of the inputs in the
/// combined `order` (indices into the given inputs, whose stats were `before`).
fn stamp_converted(
    output: &Path,
    params: &BTreeMap<String, String>,
    order: &[usize],
    before: &[Option<Stamp>],
) {
    let Ok(rec) = super::fresh::recorded(output, params) else {
        return;
    };
    let stats: Option<Vec<String>> = order
        .iter()
        .map(|&i| before.get(i).cloned().flatten().map(|s| stat_key(&s)))
        .collect();
    if let Some(stats) = stats.filter(|s| s.len() == rec.parents.len()) {
        record(output, &Stamps { stats });
    }
}
