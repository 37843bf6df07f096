//! `tet verify FILE`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use super::{one_line, EXIT_FAILED, EXIT_OK};
use crate::format::verify::{verify, Depth, Report};
use crate::format::TetFile;

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The .tet file.
    file: PathBuf,
    /// Decode every compressed chunk (default: a sample per dataset).
    #[arg(long)]
    deep: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Print nothing; only the exit code tells.
    #[arg(short, long)]
    quiet: bool,
}

pub fn run(a: &VerifyArgs) -> ExitCode {
    let depth = if a.deep { Depth::Deep } else { Depth::Sample };
    let report = match TetFile::open(&a.file) {
        Ok(f) => verify(&f, depth),
        Err(e) => {
            let mut r = Report::default();
            r.failures.push(crate::format::verify::Finding {
                code: "structure",
                message: e.to_string(),
            });
            r
        }
    };
    let file = a.file.display().to_string();
    if a.json {
        let v = json!({
            "schema": "tet-verify/1",
            "file": file,
            "ok": report.ok(),
            "depth": if a.deep { "deep" } else { "sample" },
            "chunks": report.chunks,
            "decoded": report.decoded,
            "failures": report.failures,
            "warnings": report.warnings,
        });
        println!("{v}");
    } else if !a.quiet {
        for f in &report.failures {
            println!("FAIL {file}: [{}] {}", f.code, one_line(&f.message));
        }
        for w in &report.warnings {
            println!("warn {file}: [{}] {}", w.code, one_line(&w.message));
        }
        println!(
            "{file}: {} ({} chunks, {} decoded, {} failures, {} warnings)",
            if report.ok() { "ok" } else { "FAILED" },
            report.chunks,
            report.decoded,
            report.failures.len(),
            report.warnings.len()
        );
    }
    ExitCode::from(if report.ok() { EXIT_OK } else { EXIT_FAILED })
}
