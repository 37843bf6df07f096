//! `tet-convert IN OUT`, `tet-convert IN… --out-dir DIR` (batch: up-to-date skipping, sharding,
//! `--keep-going`, `--report`), and the same as `tet convert`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use serde_json::json;

use super::{fail, human_bytes, init_logging, one_line, EXIT_OK, EXIT_USAGE};
use crate::batch;
use crate::manifest::{self, Job};
use crate::meta;
use crate::pipeline::{convert, CodecChoice, ConvertOptions};
use crate::planner::PlanOptions;
use crate::registry;

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// `IN OUT`, or with --out-dir any number of inputs (files or directory stores).
    #[arg(required_unless_present_any = ["formats", "manifest"], value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Run the conversions listed in a TOML manifest (input, output and options per job).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["paths", "out_dir"])]
    manifest: Option<PathBuf>,
    /// Convert every input into this directory as `<name without extension>.tet`.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Rebuild outputs that are already up to date (same input digest and options).
    #[arg(long)]
    force: bool,
    /// Go on with the next input after a failure (default: stop at the first).
    #[arg(long)]
    keep_going: bool,
    /// Write one JSON line per input (status, digest, sizes, errors) to this file.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Convert only shard K of N of the sorted inputs (0-based K; with --out-dir). Default: from
    /// SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT or JOB_COMPLETION_INDEX when set.
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    /// The number of shards when it does not come from the scheduler (Kubernetes indexed Jobs).
    #[arg(long, value_name = "N")]
    shard_count: Option<u64>,
    /// auto (mirror the source), raw, zstd or zstd:LEVEL.
    #[arg(long, default_value = "auto", value_parser = parse_codec)]
    codec: CodecChoice,
    /// Target raw bytes per chunk (e.g. 4MiB, 512KiB, 1000000).
    #[arg(long, value_parser = crate::planner::parse_size)]
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
    /// When OUT is a symbolic link, write the file it points to (default: refuse such an OUT).
    #[arg(long)]
    write_through_symlink: bool,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
    /// Log more to stderr (-v: each step, -vv: plans and decisions); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
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

/// Exit code when some inputs of a batch failed (the others converted or were up to date).
pub const EXIT_SOME_FAILED: u8 = 1;

pub fn run(a: &ConvertArgs) -> ExitCode {
    init_logging(a.verbose);
    if a.formats {
        print_formats();
        return ExitCode::from(EXIT_OK);
    }
    let usage = |msg: String| {
        eprintln!("tet-convert: {msg}");
        ExitCode::from(EXIT_USAGE)
    };
    let mut plan = PlanOptions::default();
    if let Some(b) = a.chunk_bytes {
        plan.target_bytes = Some(b);
    }
    for spec in &a.chunk {
        if let Err(e) = plan.add_spec(spec) {
            return usage(e.to_string());
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
            return usage("--jobs must be at least 1".into());
        }
        opts.jobs = j;
    }
    opts.open.skip_unsupported = a.skip_unsupported;
    opts.open.unpack = a.unpack;
    opts.open.follow_external = a.follow_external;
    opts.write_through_symlink = a.write_through_symlink;

    let batch_mode = a.out_dir.is_some() || a.manifest.is_some();
    let job = |input: PathBuf, output: PathBuf| Job {
        input,
        output,
        opts: opts.clone(),
    };
    let mut work: Vec<Job> = match (&a.manifest, &a.out_dir) {
        (Some(m), _) => match manifest::load(m, &opts) {
            Ok(jobs) => jobs,
            Err(e) => {
                return usage(format!("{}: {e}", m.display()));
            }
        },
        (None, None) => match a.paths.as_slice() {
            [input, output] => vec![job(input.clone(), output.clone())],
            _ => return usage("give IN OUT, or inputs with --out-dir DIR".into()),
        },
        (None, Some(dir)) => {
            if !dir.is_dir() {
                return usage(format!("--out-dir {}: not a directory", dir.display()));
            }
            let mut inputs = a.paths.clone();
            inputs.sort();
            inputs.dedup();
            let mut work: Vec<Job> = Vec::with_capacity(inputs.len());
            for input in inputs {
                let Some(out) = batch::output_in(dir, &input) else {
                    return usage(format!(
                        "{}: no file name to name the output",
                        input.display()
                    ));
                };
                if let Some(other) = work.iter().find(|j| j.output == out) {
                    return usage(format!(
                        "{} and {} would both be written to {}",
                        other.input.display(),
                        input.display(),
                        out.display()
                    ));
                }
                work.push(job(input, out));
            }
            work
        }
    };
    let shard = match &a.shard {
        Some(s) => Some(batch::Shard::parse(s)),
        None if batch_mode => {
            batch::Shard::from_env(|k| std::env::var(k).ok(), a.shard_count).transpose()
        }
        None => None,
    };
    match shard {
        Some(Ok(s)) => {
            let total = work.len();
            work = s.select(work);
            log::info!(
                "shard {}/{}: {} of {total} inputs",
                s.index,
                s.count,
                work.len()
            );
        }
        Some(Err(e)) => return usage(e),
        None => {}
    }
    let mut report = match &a.report {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => Some((p, std::io::BufWriter::new(f))),
            Err(e) => return fail(p, format!("cannot write the report: {e}")),
        },
        None => None,
    };

    let mut failed = 0usize;
    for j in &work {
        let row = convert_one(&j.input, &j.output, &j.opts, a);
        let status = row["status"].as_str().unwrap_or_default().to_string();
        if let Some((path, w)) = report.as_mut() {
            use std::io::Write as _;
            if let Err(e) = writeln!(w, "{row}").and_then(|_| w.flush()) {
                return fail(path, format!("cannot write the report: {e}"));
            }
        }
        if a.json && (batch_mode || status != "ok") {
            println!("{row}");
        }
        if status == "failed" {
            failed += 1;
            if !a.keep_going {
                break;
            }
        }
    }
    ExitCode::from(if failed == 0 {
        EXIT_OK
    } else {
        EXIT_SOME_FAILED
    })
}

/// Converts one input (or finds its output up to date); prints the human lines and returns the
/// report row.
fn convert_one(
    input: &std::path::Path,
    output: &std::path::Path,
    opts: &ConvertOptions,
    a: &ConvertArgs,
) -> serde_json::Value {
    let started = std::time::Instant::now();
    let mut row = json!({
        "input": input.display().to_string(),
        "output": output.display().to_string(),
    });
    if output.exists() && !a.force {
        match meta::digest_input(input) {
            Ok((digest, bytes_in))
                if batch::up_to_date(output, &digest, &opts.byte_affecting_params()) =>
            {
                log::info!(
                    "{}: {} already records {digest} with the same options",
                    input.display(),
                    output.display()
                );
                if !a.quiet && !a.json {
                    eprintln!(
                        "{} -> {}: skipped: up to date",
                        input.display(),
                        output.display()
                    );
                }
                row["status"] = "skipped".into();
                row["reason"] = "up to date".into();
                row["input_digest"] = digest.into();
                row["bytes_in"] = bytes_in.into();
                row["elapsed_s"] = started.elapsed().as_secs_f64().into();
                return row;
            }
            Ok(_) => {}
            Err(e) => {
                fail(input, format!("cannot read: {e}"));
                row["status"] = "failed".into();
                row["error"] = format!("cannot read: {e}").into();
                return row;
            }
        }
    }
    log::info!("{} -> {}: converting", input.display(), output.display());
    log::debug!(
        "{}: options {:?}",
        input.display(),
        opts.byte_affecting_params()
    );
    match convert(input, output, opts) {
        Err(e) => {
            fail(input, e.to_string());
            row["status"] = "failed".into();
            row["error"] = one_line(&e.to_string()).into();
            row["elapsed_s"] = started.elapsed().as_secs_f64().into();
        }
        Ok(r) => {
            if a.json && a.out_dir.is_none() {
                println!("{}", serde_json::to_string(&r).unwrap_or_default());
            } else if !a.quiet && !a.json {
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
            row["status"] = "ok".into();
            row["input_digest"] = r.input_digest.clone().into();
            row["bytes_in"] = r.bytes_in.into();
            row["bytes_out"] = r.bytes_out.into();
            row["datasets"] = r.datasets.len().into();
            row["skipped_items"] = r.skipped.len().into();
            row["warnings"] = r.warnings.clone().into();
            row["elapsed_s"] = r.elapsed_s.into();
        }
    }
    row
}
