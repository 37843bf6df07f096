//! `tet-convert IN OUT` and `tet convert IN OUT`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{fail, human_bytes, EXIT_OK, EXIT_USAGE};
use crate::pipeline::{convert, CodecChoice, ConvertOptions};
use crate::planner::PlanOptions;
use crate::registry;

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// Input file (or directory store).
    #[arg(required_unless_present = "formats")]
    input: Option<PathBuf>,
    /// Output .tet file.
    #[arg(required_unless_present = "formats")]
    output: Option<PathBuf>,
    /// auto (mirror the source), raw, zstd or zstd:LEVEL.
    #[arg(long, default_value = "auto", value_parser = parse_codec)]
    codec: CodecChoice,
    /// Target raw bytes per chunk (e.g. 4MiB, 512KiB, 1000000).
    #[arg(long, value_parser = parse_size)]
    chunk_bytes: Option<u64>,
    /// Chunk extents: `dim=N[,dim=N…]` by dimension name, or `dataset:N,N,…` (repeatable).
    #[arg(long = "chunk", value_name = "SPEC")]
    chunk: Vec<String>,
    /// Worker threads (default: all cores). Never changes the output bytes.
    #[arg(short, long)]
    jobs: Option<usize>,
    /// Report and skip items that have no .tet form instead of failing.
    #[arg(long)]
    skip_unsupported: bool,
    /// Store CF-packed variables as physical values (scale_factor/add_offset applied, fill → NaN).
    #[arg(long)]
    unpack: bool,
    /// Follow external links that resolve inside the input's directory (HDF5).
    #[arg(long)]
    follow_external: bool,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
    /// Print a one-object JSON report on stdout.
    #[arg(long)]
    json: bool,
    /// List the input formats of this build and exit.
    #[arg(long)]
    formats: bool,
}

fn parse_codec(s: &str) -> Result<CodecChoice, String> {
    s.parse()
}

/// `4MiB`, `4M`, `512k`, `1000000`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a size"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("{s:?}: unknown unit (use KiB, MiB or GiB)")),
    };
    n.checked_mul(mult)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("{s:?} is not a positive size"))
}

fn print_formats() {
    println!(
        "{:<6} {:<14} {:<22} compiled in",
        "id", "format", "extensions"
    );
    for f in registry::formats() {
        let compiled = match (f.importer.is_some(), f.feature) {
            (true, _) => "yes".to_string(),
            (false, Some(feat)) => format!("no (feature `{feat}`)"),
            (false, None) => "no".to_string(),
        };
        println!(
            "{:<6} {:<14} {:<22} {compiled}",
            f.id,
            f.name,
            f.extensions.join(", ")
        );
    }
}

pub fn run(a: &ConvertArgs) -> ExitCode {
    if a.formats {
        print_formats();
        return ExitCode::from(EXIT_OK);
    }
    let (Some(input), Some(output)) = (&a.input, &a.output) else {
        eprintln!("tet-convert: an input and an output are required");
        return ExitCode::from(EXIT_USAGE);
    };
    let mut plan = PlanOptions::default();
    if let Some(b) = a.chunk_bytes {
        plan.target_bytes = b;
    }
    for spec in &a.chunk {
        if let Err(e) = plan.add_spec(spec) {
            eprintln!("tet-convert: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    let mut opts = ConvertOptions {
        codec: a.codec,
        plan,
        progress: !a.quiet && !a.json,
        ..ConvertOptions::default()
    };
    if let Some(j) = a.jobs {
        if j == 0 {
            eprintln!("tet-convert: --jobs must be at least 1");
            return ExitCode::from(EXIT_USAGE);
        }
        opts.jobs = j;
    }
    opts.open.skip_unsupported = a.skip_unsupported;
    opts.open.unpack = a.unpack;
    opts.open.follow_external = a.follow_external;
    match convert(input, output, &opts) {
        Err(e) => fail(input, e.to_string()),
        Ok(r) => {
            if a.json {
                println!("{}", serde_json::to_string(&r).unwrap_or_default());
            } else if !a.quiet {
                eprintln!(
                    "{} -> {}: {} datasets, {} in, {} out ({:.2}x), {:.2}s",
                    r.input,
                    r.output,
                    r.datasets.len(),
                    human_bytes(r.bytes_in),
                    human_bytes(r.bytes_out),
                    r.ratio,
                    r.elapsed_s
                );
                for w in &r.warnings {
                    eprintln!("  note: {w}");
                }
                for s in &r.skipped {
                    eprintln!("  skipped {}: {}", s.name, s.reason);
                }
            }
            ExitCode::from(EXIT_OK)
        }
    }
}
