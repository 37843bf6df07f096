//! One job of a run — an input, its output and the settings — as it travels to a worker process
//! (serde: the settings in their own serde form, paths as exact bytes), and [`execute`]: the up-to-date check, then the conversion,
//! giving the ledger row. The same function runs in a worker and in-process (`--isolation none`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::fresh::{self, Freshness};
use super::ledger::{from_hex, to_hex, InputRow, Status};
use tet::control::Cancel;
use tet::registry;
use tet::request::{Context, Request};
use tet::settings::Settings;

/// A path as exact bytes, in hex (the worker protocol never loses a non-UTF-8 path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WirePath(String);

impl WirePath {
    pub fn of(p: &Path) -> WirePath {
        use std::os::unix::ffi::OsStrExt;
        WirePath(to_hex(p.as_os_str().as_bytes()))
    }

    pub fn path(&self) -> Result<PathBuf, WireError> {
        use std::os::unix::ffi::OsStringExt;
        from_hex(&self.0)
            .map(|b| PathBuf::from(std::ffi::OsString::from_vec(b)))
            .ok_or(WireError::NotHex)
    }
}

/// A job that does not decode into a conversion (a supervisor and worker of other versions).
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("a path in the job is not hex")]
    NotHex,
    #[error(transparent)]
    Settings(#[from] tet::settings::SettingsError),
}

/// How a job treats an existing output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recheck {
    /// Rebuild even when up to date.
    pub force: bool,
    /// Hash the input even when its size, times and inode match the stamp.
    pub rehash: bool,
    /// Deep-verify an up-to-date output before trusting it.
    pub verify_existing: bool,
    /// Refuse to replace an output made from another input path (batch runs).
    pub guard_source: bool,
}

impl WireJob {
    /// The conversion this job asks for: its inputs (every input of a combined job, else the
    /// one), its output and its settings (checked).
    pub fn request(&self) -> Result<Request, WireError> {
        self.settings.check()?;
        let inputs = match self.inputs.is_empty() {
            true => vec![self.input.path()?],
            false => self
                .inputs
                .iter()
                .map(WirePath::path)
                .collect::<Result<_, _>>()?,
        };
        Ok(Request::new(
            inputs,
            self.output.path()?,
            self.settings.clone(),
        ))
    }

    /// What the conversion runs with in this process: a progress bar, the signal handlers,
    /// the storage options and the spool folder.
    pub fn context(&self) -> Context {
        Context {
            progress: if self.progress {
                super::progress::terminal_bar()
            } else {
                None
            },
            cancel: Cancel::from_fn(super::signals::pending),
            storage: self.storage.options.clone(),
            spool_dir: self.storage.spool_dir.as_ref().and_then(|p| p.path().ok()),
            input_stamp: None,
            upload_metadata: None,
        }
    }
}

/// One job, as sent to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireJob {
    pub run: String,
    pub input: WirePath,
    pub output: WirePath,
    /// The conversion's settings, in their serde form (a manifest's keys).
    pub settings: Settings,
    /// Every input of a combined job (`settings.concat`), in the given order; empty for a job
    /// of one input.
    #[serde(default)]
    pub inputs: Vec<WirePath>,
    /// Draw a progress bar where the conversion runs (when its stderr is a terminal).
    pub progress: bool,
    pub recheck: Recheck,
    /// Create the output's folder when missing (batch outputs mirroring a tree).
    pub make_dirs: bool,
    /// Send the full conversion report back (single-file `--json`).
    pub want_report: bool,
    /// `--storage-option` pairs and `--spool-dir`, for object URLs.
    #[serde(default)]
    pub storage: super::remote::WireStorage,
}

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

/// Fills the row and notes of a finished conversion `r` (rebuilt for `rebuild_reason`).
pub(super) fn record_converted(
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
pub(super) fn failed_row(out: Outcome, reason: String) -> Outcome {
    failed(out, reason)
}

fn failed(mut out: Outcome, reason: String) -> Outcome {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The worker protocol carries the settings as their own serde form: every settings field
    /// and nothing else, and a job whose settings hold an unknown key is refused.
    #[test]
    fn the_wire_carries_exactly_the_settings_fields() {
        let settings: Settings = serde_json::from_value(serde_json::json!({
            "codec": "zstd:5", "chunk_bytes": 4096, "chunk": ["time=1"], "jobs": 2,
            "memory_budget": 1048576, "skip_unsupported": true, "unpack": true,
            "follow_external": true, "write_through_symlink": true, "force_extension": true,
            "variables": ["t"], "exclude": ["u"], "no_coords": true, "isel": ["time=0:1"],
            "sel": ["lat=0:1"], "concat": "time", "concat_take_first": true, "checksums": false,
        }))
        .unwrap();
        let job = WireJob {
            run: "r".into(),
            input: WirePath::of(Path::new("a.nc")),
            output: WirePath::of(Path::new("a.tet")),
            settings: settings.clone(),
            inputs: vec![
                WirePath::of(Path::new("a.nc")),
                WirePath::of(Path::new("b.nc")),
            ],
            progress: false,
            recheck: Recheck::default(),
            make_dirs: false,
            want_report: false,
            storage: Default::default(),
        };
        let wire = serde_json::to_value(&job).unwrap();
        let mut keys: Vec<&str> = wire["settings"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut fields = tet::settings::field_names().to_vec();
        keys.sort_unstable();
        fields.sort_unstable();
        assert_eq!(keys, fields);
        let back: WireJob = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(back.settings, settings);
        let req = back.request().unwrap();
        let names: Vec<&Path> = req.inputs.iter().map(|i| i.name()).collect();
        assert_eq!(names, [Path::new("a.nc"), Path::new("b.nc")]);
        assert_eq!(req.settings, settings);
        let mut bad = wire;
        bad["settings"]["threads"] = 2.into();
        let e = serde_json::from_value::<WireJob>(bad).unwrap_err();
        assert!(e.to_string().contains("unknown field `threads`"), "{e}");
    }
}
