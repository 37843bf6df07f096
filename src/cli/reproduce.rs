//! `tet audit --reproduce FILE…`: each file re-made from its footer and compared
//! ([`tet::provenance::reproduce`]). The conversion runs in a worker process of this program
//! (`--tet-worker`, the batch runner's worker: one [`WireJob`] on its standard input, its
//! [`Outcome`] back), started in the recorded working directory with `SOURCE_DATE_EPOCH` set to
//! the recorded time — the process globals the pipeline reads — so that this process's own
//! stay untouched.
//!
//! One line per step (`FILE: reproduced: byte for byte`, `FILE: DIFFERS: …`, `FILE: cannot be
//! tried: …`), or with `--json` one `tet-reproduce/1` object per file. Exit 0 every file
//! reproduced, 1 one differs, 2 one could not be tried (1 before 2 before 0).

use std::io::{BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use serde_json::json;

use super::{one_line, outln};
use crate::batch::job::{Outcome, Recheck, WireJob, WirePath};
use crate::batch::ledger::Status;
use crate::batch::remote::WireStorage;
use tet::provenance::reproduce::{self, Convert, Options, Step, StepOutcome, Verdict};

/// Runs a step in a worker process of this program.
struct Worker {
    storage: tet::storage::Options,
}

impl Convert for Worker {
    fn convert(&self, step: &Step, output: &Path) -> Result<(), String> {
        let first = step.inputs.first().ok_or("no input")?;
        let job = WireJob {
            run: "reproduce".into(),
            input: WirePath::of(Path::new(first)),
            output: WirePath::of(output),
            settings: step.settings.clone(),
            inputs: match step.inputs.len() {
                1 => Vec::new(),
                _ => step
                    .inputs
                    .iter()
                    .map(|i| WirePath::of(Path::new(i)))
                    .collect(),
            },
            progress: false,
            recheck: Recheck {
                force: true,
                ..Recheck::default()
            },
            make_dirs: false,
            want_report: false,
            storage: WireStorage {
                options: self.storage.clone(),
                spool_dir: None,
            },
        };
        let line = serde_json::to_string(&job).map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.arg(crate::batch::supervise::WORKER_FLAG)
            .arg("0")
            .env("SOURCE_DATE_EPOCH", &step.at)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = &step.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start a worker: {e}"))?;
        let written = child
            .stdin
            .take()
            .map(|mut w| w.write_all(format!("{line}\n").as_bytes()));
        let mut stderr = child.stderr.take();
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(e) = stderr.as_mut() {
                let _ = e.read_to_string(&mut s);
            }
            s
        });
        let outcome = child.stdout.take().and_then(|o| done(BufReader::new(o)));
        let _ = child.wait();
        let stderr = err_reader.join().unwrap_or_default();
        if let Some(Err(e)) = written {
            return Err(format!("cannot talk to the worker: {e}"));
        }
        match outcome {
            Some(o) if o.row.status() == Status::Ok => Ok(()),
            Some(o) => Err(o.row.reason.unwrap_or_else(|| "failed".into())),
            None => Err(format!(
                "the worker ended without an answer: {}",
                one_line(stderr.lines().last().unwrap_or("no message"))
            )),
        }
    }
}

/// The outcome of the worker's `done` message.
fn done(r: impl std::io::BufRead) -> Option<Outcome> {
    r.lines().map_while(Result::ok).find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(&l).ok()?;
        (v["msg"] == "done")
            .then(|| serde_json::from_value(v["outcome"].clone()).ok())
            .flatten()
    })
}

/// `tet audit --reproduce FILE…`.
pub fn run(
    files: &[PathBuf],
    allow_version_drift: bool,
    json: bool,
    storage: &tet::storage::Options,
) -> ExitCode {
    let opts = Options {
        allow_version_drift,
        storage: storage.clone(),
    };
    let worker = Worker {
        storage: storage.clone(),
    };
    let mut worst = Verdict::Reproduced;
    for file in files {
        if super::interrupted() {
            break;
        }
        let steps = reproduce::reproduce(file, &opts, &worker);
        let verdict = reproduce::verdict(&steps);
        worst = worst.max(verdict);
        if json {
            let rows: Vec<serde_json::Value> = steps.iter().map(step_json).collect();
            outln!(
                "{}",
                json!({
                    "schema": "tet-reproduce/1",
                    "file": file.display().to_string(),
                    "verdict": verdict.name(),
                    "steps": rows,
                })
            );
        } else {
            for s in &steps {
                outln!("{}", step_line(s, file));
            }
        }
    }
    ExitCode::from(worst.exit_code())
}

fn step_json(s: &StepOutcome) -> serde_json::Value {
    json!({
        "file": s.file.display().to_string(),
        "row": s.row,
        "verdict": s.verdict.name(),
        "detail": s.detail,
    })
}

/// `FILE: reproduced: …`, `FILE: DIFFERS: …` or `FILE: cannot be tried: …`; a parent's step
/// names its file and the file it leads to.
fn step_line(s: &StepOutcome, named: &Path) -> String {
    let who = match s.file == named {
        true => s.file.display().to_string(),
        false => format!("{} (step of {})", s.file.display(), named.display()),
    };
    let detail = one_line(&s.detail);
    match s.verdict {
        Verdict::Reproduced => format!("{who}: {detail}"),
        Verdict::Differs => format!("{who}: DIFFERS: {detail}"),
        Verdict::NotTried => format!("{who}: cannot be tried: {detail}"),
    }
}
