//! `tet audit --reproduce FILE…`: each file re-made from its footer and compared
//! ([`tet::provenance::reproduce`], run in this process through the engine's conversion
//! entry, as Python's `tet.reproduce` runs it).
//!
//! One line per step (`FILE: reproduced: …`, `FILE: DIFFERS: …`, `FILE: cannot be
//! tried: …`), or with `--json` one `tet-reproduce/1` object per file
//! ([`reproduce::report`]). Exit 0 every file reproduced, 1 one differs, 2 one could not be
//! tried (1 before 2 before 0).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{one_line, outln};
use tet::provenance::reproduce::{self, InProcess, Options, StepOutcome, Verdict};

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
    // SIGINT/SIGTERM stop the step that runs (its temporary folder removed) and the run.
    crate::batch::signals::install();
    let conv = InProcess {
        storage: storage.clone(),
        cancel: tet::control::Cancel::from_fn(crate::batch::signals::pending),
    };
    let mut worst = Verdict::Reproduced;
    for file in files {
        if super::interrupted() {
            break;
        }
        let steps = reproduce::reproduce(file, &opts, &conv);
        let verdict = reproduce::verdict(&steps);
        worst = worst.max(verdict);
        if json {
            outln!("{}", reproduce::report(file, verdict, &steps));
        } else {
            for s in &steps {
                outln!("{}", step_line(s, file));
            }
        }
    }
    ExitCode::from(worst.exit_code())
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
