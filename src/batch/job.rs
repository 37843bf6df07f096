//! One job of a run ([`WireJob`], `wire`), run by [`execute`]: the up-to-date check, then the
//! conversion ([`tet::request::run`] of the job's request), giving the ledger row
//! ([`Outcome`], `outcome`). The same function runs in a worker and in-process
//! (`--isolation none`).

use std::path::Path;
use std::time::Instant;

use super::fresh::{self, Freshness};
use super::ledger::{InputRow, Status};
use super::outcome::failed;
pub use super::outcome::{failed_row, fill_known, record_converted, Outcome, StageHook};
pub use super::wire::{Recheck, WireError, WireJob, WirePath, WireStorage};
use tet::registry;

/// Runs one job: the up-to-date check, then the conversion. Never panics on bad input; every
/// failure is a `failed` row with a one-line reason.
pub fn execute(job: &WireJob, stage: StageHook<'_>) -> Outcome {
    let started = Instant::now();
    let (input, output) = match (job.input.path(), job.output.path()) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => {
            let mut row = InputRow::new(&job.run, Path::new("?"), Path::new("?"));
            row.status = Some(Status::Failed);
            row.reason = Some(e.to_string());
            return Outcome {
                row,
                ..Outcome::default()
            };
        }
    };
    let mut out = Outcome {
        row: InputRow::new(&job.run, &input, &output),
        ..Outcome::default()
    };
    let finish = |mut out: Outcome| {
        out.row.elapsed_s = started.elapsed().as_secs_f64();
        out
    };
    let req = match job.request() {
        Ok(r) => r,
        Err(e) => return finish(failed(out, e.to_string())),
    };
    let cx = job.context();
    if req.settings.concat.is_some() {
        return finish(super::combined::execute(job, &req, cx, stage, out));
    }
    if tet::storage::is_url(&input) || tet::storage::is_url(&output) {
        return finish(super::remote::execute(
            job, &input, &output, &req, cx, stage, out,
        ));
    }
    if let Ok(imp) = registry::identify(&input) {
        out.row.format = Some(imp.id().to_owned());
        stage(imp.name());
    }
    let params = req.settings.recorded_params();
    let mut rebuild_reason = None;
    if !job.recheck.force {
        match fresh::check(&input, &output, &params, job.recheck) {
            Freshness::UpToDate { digest, bytes } => {
                out.row.status = Some(Status::Skipped);
                out.row.reason = Some("up to date".into());
                out.row.input_digest = Some(digest);
                out.row.bytes_in = Some(bytes);
                return finish(out);
            }
            Freshness::Rebuild(why) => rebuild_reason = why,
            Freshness::Unreadable(e) => return finish(failed(out, e.to_string())),
            Freshness::Conflict(e) => return finish(failed(out, e)),
        }
    }
    if job.make_dirs {
        if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Err(e) = std::fs::create_dir_all(dir) {
                return finish(failed(out, format!("cannot create {}: {e}", dir.display())));
            }
        }
    }
    let stamp = fresh::Stamp::of(&input).ok();
    log::info!("{} -> {}: converting", input.display(), output.display());
    log::debug!("{}: options {params:?}", input.display());
    match tet::request::run(&req, &cx).map_err(|e| (e.interrupted_by(), e)) {
        Err((Some(sig), _)) => {
            out.row.status = Some(Status::Interrupted);
            out.row.reason = Some(format!("stopped by {}", super::signals::name(sig)));
            out.interrupted_by = Some(sig);
        }
        Err((None, e)) => {
            out = failed(out, e.to_string());
            fill_known(&mut out.row, &input);
        }
        Ok(r) => {
            if let Some(s) = stamp {
                // On the temporary file when its commit is left to the supervisor: the
                // attribute goes with it through the rename.
                let at = tet::format::writer::last_deferred_temp();
                fresh::record(at.as_deref().unwrap_or(&output), &r.input_digest, &s);
            }
            record_converted(&mut out, &r, rebuild_reason, job.want_report);
        }
    }
    finish(out)
}
