//! `tet verify FILE…`: every rule of the format and the checksums, per file.
//!
//! One file: its failures, warnings and notes, one per line, then a summary line. Several files:
//! exactly one line per file (`FILE: ok (…)` or `FILE: FAILED [code] first failure (+N more)`).
//! `--json`: one `tet-verify/1` object per file, one per line. Exit 0 when every file passes,
//! 1 when any fails.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{one_line, out, outln, EXIT_FAILED, EXIT_OK};
use tet::format::verify::{Depth, Report};
use tet::provenance::report::{verify_file, verify_json};

/// The end of `tet verify --help`.
const EXAMPLES: &str = "\
Examples:
  tet verify out.tet                  the format's rules, the footer digest, sampled chunks
  tet verify --deep tet/*.tet         every chunk decoded and checked, one line per file
  tet verify --json out.tet           one tet-verify/1 object

Exit status: 0 every file passed, 1 a file failed, 2 usage error.";

#[derive(Args, Debug)]
#[command(after_long_help = EXAMPLES)]
pub struct VerifyArgs {
    /// The .tet files.
    #[arg(required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// Decode every compressed chunk and check every chunk against its checksum (default: the
    /// footer digest and a sample of chunks per dataset).
    #[arg(long)]
    deep: bool,
    /// Print one JSON object per file, one per line.
    #[arg(long)]
    json: bool,
    /// Print nothing; only the exit code tells.
    #[arg(short, long)]
    quiet: bool,
    /// Also check the signatures against this `allowed_signers` file (ssh-keygen's format):
    /// every signature valid over the file's content, one by an allowed signer.
    #[arg(long, value_name = "ALLOWED_SIGNERS")]
    signers: Option<PathBuf>,
    #[command(flatten)]
    storage: super::StorageArgs,
}

/// `ok (12 chunks, 3 decoded, 12 checked against checksums, 0 failures, 0 warnings)`.
fn summary(r: &Report) -> String {
    let checked = if r.checksummed == 0 {
        "no checksums".to_string()
    } else {
        format!(
            "{} of {} checked against checksums",
            r.checked, r.checksummed
        )
    };
    format!(
        "{} ({} chunks, {} decoded, {checked}, {} failures, {} warnings)",
        if r.ok() { "ok" } else { "FAILED" },
        r.chunks,
        r.decoded,
        r.failures.len(),
        r.warnings.len()
    )
}

/// The text report of one file: one line when `one_line_only`, else every finding then the
/// summary.
fn text(file: &str, report: &Report, one_line_only: bool) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    if one_line_only {
        let _ = match report.failures.first() {
            None => writeln!(o, "{file}: {}", summary(report)),
            Some(f) => {
                let more = match report.failures.len() {
                    1 => String::new(),
                    n => format!(" (+{} more)", n - 1),
                };
                writeln!(
                    o,
                    "{file}: FAILED [{}] {}{more}",
                    f.code,
                    one_line(&f.message)
                )
            }
        };
        return o;
    }
    for (tag, list) in [
        ("FAIL", &report.failures),
        ("warn", &report.warnings),
        ("note", &report.notes),
    ] {
        for f in list {
            let _ = writeln!(o, "{tag} {file}: [{}] {}", f.code, one_line(&f.message));
        }
    }
    let _ = writeln!(o, "{file}: {}", summary(report));
    o
}

pub fn run(a: &VerifyArgs) -> ExitCode {
    let depth = if a.deep { Depth::Deep } else { Depth::Sample };
    let many = a.files.len() > 1;
    let signers = match a.signers.as_deref().map(super::sign::load_signers) {
        Some(Err(code)) => return code,
        loaded => loaded.and_then(Result::ok),
    };
    let mut all_ok = true;
    for path in &a.files {
        if super::interrupted() {
            break;
        }
        // The engine's report (what Python's tet.verify returns): an object is read by ranges,
        // each checked chunk once.
        let cancel = super::signal_cancel(path);
        let options = &a.storage.storage_option;
        let report = verify_file(path, depth, signers.as_ref(), options, &cancel);
        all_ok &= report.ok();
        let file = path.display().to_string();
        if a.json {
            outln!("{}", verify_json(&file, depth, &report));
        } else if !a.quiet {
            out!("{}", text(&file, &report, many));
        }
    }
    ExitCode::from(if all_ok { EXIT_OK } else { EXIT_FAILED })
}
