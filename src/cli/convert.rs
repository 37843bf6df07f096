//! `tet-convert IN OUT`, `tet-convert IN… --out-dir DIR` (batch: walked folders, `--files-from`
//! lists, stable sharding, supervised workers, the `--report` ledger), `--manifest`, and the same
//! as `tet convert`. Parsing and printing only: the run itself is [`crate::batch::run`].

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr as _;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::{errln, init_logging, outln, EXIT_OK, EXIT_USAGE};
use crate::batch::inputs::{self, Input, InputsError, Selection};
use crate::batch::job::{Outcome, Recheck, WireJob, WirePath};
use crate::batch::ledger::{self, InputRow, Ledger, StartRow, Status};
use crate::batch::run::{self, Isolation, RunOptions};
use crate::batch::{self, signals, stale};
use crate::manifest::{self, Job};
use tet::pipeline::CodecChoice;
use tet::planner::PlanError;
use tet::provenance::sign;
use tet::registry;
use tet::select::{SelectError, SelectOptions};
use tet::settings::{ChunkExtents, Settings, SettingsError};

/// A command line that asks for something that cannot be done: printed as one line, exit 2.
#[derive(Debug, thiserror::Error)]
enum UsageError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Chunk(#[from] PlanError),
    #[error(transparent)]
    Select(#[from] SelectError),
    #[error(transparent)]
    Inputs(#[from] InputsError),
    #[error(transparent)]
    Shard(#[from] batch::shard::ShardError),
    #[error("--out-dir {}: not a directory", .0.display())]
    OutDir(PathBuf),
    #[error("--out-dir {}: cannot create it: {source}", .path.display())]
    OutDirCreate {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--files-from {}: {source}", .path.display())]
    FilesFrom {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--concat DIM takes two or more inputs and the output: IN… OUT")]
    ConcatPaths,
}

/// Where conversions run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum IsolationArg {
    /// Supervised worker processes: a crash or hang of a C library costs one input.
    Process,
    /// In this process (no protection; for measurements and debugging).
    None,
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// `IN OUT`, or with --out-dir any number of inputs: files, stores, or folders to walk.
    #[arg(required_unless_present_any = ["formats", "manifest", "files_from"], value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Run the conversions listed in a TOML manifest (input, output and options per job).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["paths", "out_dir", "files_from"])]
    manifest: Option<PathBuf>,
    /// Convert every input into this directory: `<path relative to its root, extension → .tet>`
    /// (created when missing).
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Read more inputs from FILE (`-`: standard input), one path a line (with --out-dir).
    #[arg(long, value_name = "FILE", requires = "out_dir")]
    files_from: Option<PathBuf>,
    /// --files-from entries are separated by NUL bytes (`find -print0`), not newlines.
    #[arg(short = '0', long = "null", requires = "files_from")]
    null: bool,
    /// Mirror listed files' paths relative to DIR under --out-dir (and shard by that path).
    #[arg(long, value_name = "DIR", requires = "out_dir")]
    base: Option<PathBuf>,
    /// Walked folders: take files matching GLOB (repeatable; default: the compiled formats'
    /// extensions). Matched against the path relative to the folder.
    #[arg(long, value_name = "GLOB")]
    include: Vec<String>,
    /// Rebuild outputs that are already up to date (same input digest and options).
    #[arg(long)]
    force: bool,
    /// Hash inputs even when size, times and inode match the output's stamp.
    #[arg(long)]
    rehash: bool,
    /// Deep-verify an up-to-date output before trusting it (damaged → rebuilt).
    #[arg(long)]
    verify_existing: bool,
    /// Go on with the next input after a failure (default: stop at the first).
    #[arg(long)]
    keep_going: bool,
    /// Append JSON lines to this ledger: a start row, one row per input, an end row.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Convert only shard K of N (0-based K; by a stable hash of each input's path, see README).
    /// Default: from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT or JOB_COMPLETION_INDEX.
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    /// The number of shards when it does not come from the scheduler (Kubernetes indexed Jobs).
    #[arg(long, value_name = "N")]
    shard_count: Option<u64>,
    /// Where conversions run.
    #[arg(long, value_enum, default_value = "process")]
    isolation: IsolationArg,
    /// Worker processes converting at once (each with --jobs threads).
    #[arg(long, default_value_t = 1, value_name = "N")]
    workers: usize,
    /// Give up on an input after SECONDS of wall time (its worker is killed; 0: no limit).
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    timeout: u64,
    /// auto (mirror the source; chunks of one repeated value → zstd), raw, zstd or zstd:LEVEL;
    /// smallest[:LEVEL] (per dataset, the smallest on a sample of chunks). Extensions of .tet v1
    /// that the reference reader refuses (docs/FORMAT.md): zstd-shuffle, zstd-bitshuffle,
    /// zstd-delta, zstd-delta-bitshuffle (each [:LEVEL]); auto+ext and smallest+ext may use them.
    #[arg(long, default_value = "auto", value_parser = CodecChoice::from_str)]
    codec: CodecChoice,
    /// Target raw bytes per chunk (e.g. 4MiB, 512KiB, 1000000).
    #[arg(long, value_parser = tet::planner::parse_size)]
    chunk_bytes: Option<u64>,
    /// Chunk extents: `dim=N[,dim=N…]` by dimension name, or `dataset:N,N,…` (repeatable).
    #[arg(long = "chunk", value_name = "SPEC")]
    chunk: Vec<String>,
    /// Worker threads (default: all cores). Never changes the output bytes.
    #[arg(short, long)]
    jobs: Option<usize>,
    /// Chunk data in flight at most, per conversion, whatever --jobs is (e.g. 64MiB, 1GiB;
    /// default 256MiB): threads wait rather than allocate. Never changes the output bytes.
    #[arg(long, value_name = "SIZE", value_parser = tet::planner::parse_size)]
    memory_budget: Option<u64>,
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
    /// Write OUT even when its extension belongs to another format (`out.nc`); the file is a
    /// .tet file all the same (`tet export` writes the other formats).
    #[arg(long)]
    force_extension: bool,
    /// Write no checksums (zstd content checksums, chunk and footer digests), as tet-convert
    /// did before they existed: only to measure their cost (recorded in the history row).
    #[arg(long, hide = true)]
    no_checksums: bool,
    /// Keep only these variables (names or globs, comma-separated, repeatable); their
    /// coordinate, bounds and ancillary variables come along unless --no-coords.
    #[arg(long, value_name = "NAME|GLOB,…")]
    variables: Vec<String>,
    /// Leave out these variables (names or globs, comma-separated, repeatable).
    #[arg(long, value_name = "NAME|GLOB,…")]
    exclude: Vec<String>,
    /// With --variables: do not add the coordinate and associated variables of the chosen ones.
    #[arg(long)]
    no_coords: bool,
    /// Cut a dimension by index, numpy slice semantics (negative: from the end; repeatable).
    #[arg(long, value_name = "DIM=START:STOP[:STEP]")]
    isel: Vec<String>,
    /// Cut a dimension by coordinate value, inclusive (ISO 8601 on CF time axes; repeatable).
    #[arg(long, value_name = "DIM=LOW:HIGH")]
    sel: Vec<String>,
    /// Combine `IN… OUT` into one .tet along DIM, in the order of its coordinate values.
    #[arg(long, value_name = "DIM", conflicts_with_all = ["manifest", "out_dir"])]
    concat: Option<String>,
    /// With --concat: take the variables without DIM from the first input, unchecked.
    #[arg(long, requires = "concat")]
    concat_take_first: bool,
    /// No progress bar, no per-input lines, no summary (failures are still printed).
    #[arg(short, long)]
    quiet: bool,
    /// Log more to stderr (-v: every input and step, -vv: plans and decisions); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Print JSON on stdout: the report (IN OUT), or one row per input (batch).
    #[arg(long)]
    json: bool,
    /// List the input formats of this build and exit.
    #[arg(long)]
    formats: bool,
    /// An object store setting for s3://, gs://, az://, https:// paths (repeatable), e.g.
    /// `aws_endpoint_url=http://127.0.0.1:9000`; the environment's AWS_*, GOOGLE_*, AZURE_*
    /// variables are read first. Also `max_retries=N`, `retry_timeout=SECONDS`.
    #[arg(long = "storage-option", value_name = "KEY=VALUE", value_parser = super::StorageOptionParser)]
    storage_option: Vec<(String, String)>,
    /// Where object inputs are downloaded and object outputs staged (default: $TMPDIR).
    #[arg(long, value_name = "DIR")]
    spool_dir: Option<PathBuf>,
    /// Sign each output once it is in place, as `tet sign --key KEY` does (an unencrypted
    /// OpenSSH ed25519 private key; an up-to-date output not yet signed by KEY is signed too).
    /// The key is read before any conversion and never recorded. Refused with an object URL
    /// output: sign the local file with `tet sign`, then upload it.
    #[arg(long, value_name = "KEY")]
    sign_key: Option<PathBuf>,
    #[command(flatten)]
    openlineage: crate::batch::openlineage::OpenLineageArgs,
}

/// The driver registry as a table, or (`json`) as one JSON array of objects with the keys `id`,
/// `name`, `extensions`, `export` (null when the product does not write the format) and
/// `compiled` (what `.ci/output-digests.sh` reads).
fn print_formats(json: bool) {
    if json {
        let rows: Vec<serde_json::Value> = registry::formats()
            .iter()
            .map(|f| {
                serde_json::json!({
                    "id": f.id,
                    "name": f.name,
                    "extensions": f.extensions,
                    "export": f.exporter.map(|e| e.name()),
                    "compiled": f.importer.is_some(),
                })
            })
            .collect();
        outln!("{}", serde_json::Value::Array(rows));
        return;
    }
    outln!(
        "{:<6} {:<14} {:<22} {:<10} compiled in",
        "id",
        "format",
        "extensions",
        "export"
    );
    for f in registry::formats() {
        let compiled = match (f.importer.is_some(), f.feature) {
            (true, _) => "yes".to_string(),
            (false, Some(feat)) => format!("no (feature `{feat}`)"),
            (false, None) => "no".to_string(),
        };
        outln!(
            "{:<6} {:<14} {:<22} {:<10} {compiled}",
            f.id,
            f.name,
            f.extensions.join(", "),
            f.exporter.map_or("-", |e| e.name()),
        );
    }
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    errln!("{}: {msg}", super::program());
    ExitCode::from(EXIT_USAGE)
}

/// The settings of the command line's flags.
fn settings(a: &ConvertArgs) -> Result<Settings, UsageError> {
    let mut chunk = ChunkExtents::default();
    for spec in &a.chunk {
        chunk.add_spec(spec)?;
    }
    let names = |args: &[String]| -> Result<Vec<String>, SelectError> {
        let mut list = Vec::new();
        for v in args {
            SelectOptions::add_names(&mut list, v)?;
        }
        Ok(list)
    };
    let s = Settings {
        codec: a.codec,
        chunk_bytes: a.chunk_bytes,
        chunk,
        jobs: a.jobs,
        memory_budget: a.memory_budget,
        skip_unsupported: a.skip_unsupported,
        unpack: a.unpack,
        follow_external: a.follow_external,
        write_through_symlink: a.write_through_symlink,
        force_extension: a.force_extension,
        variables: names(&a.variables)?,
        exclude: names(&a.exclude)?,
        no_coords: a.no_coords,
        isel: a.isel.clone(),
        sel: a.sel.clone(),
        concat: a.concat.clone(),
        concat_take_first: a.concat_take_first,
        checksums: !a.no_checksums,
    };
    s.check()?;
    Ok(s)
}

/// A planned input: its shard key and job, or why it cannot run.
struct Planned {
    key: PathBuf,
    input: PathBuf,
    output: PathBuf,
    /// Every input of a combined job, as given (empty for one input).
    inputs: Vec<PathBuf>,
    settings: Settings,
    refused: Option<String>,
}

/// The inputs of a `--out-dir` run, with their outputs; two inputs mapping to one output both
/// stay listed, the later one refused.
fn plan_out_dir(
    a: &ConvertArgs,
    dir: &Path,
    settings: &Settings,
) -> Result<Vec<Planned>, UsageError> {
    let local = !tet::storage::is_url(dir);
    if local && std::fs::symlink_metadata(dir).is_ok() && !dir.is_dir() {
        return Err(UsageError::OutDir(dir.to_path_buf()));
    }
    let sel = Selection::new(&a.include)?;
    let mut found: Vec<Input> = Vec::new();
    let mut listed = a.paths.clone();
    if let Some(list) = &a.files_from {
        listed.extend(inputs::read_list_arg(list, a.null).map_err(|source| {
            UsageError::FilesFrom {
                path: list.clone(),
                source,
            }
        })?);
    }
    let mut refused_early = Vec::new();
    for p in &listed {
        if tet::storage::is_url(p) {
            // An object or a prefix (listed, keyed by the keys under it); one that cannot be
            // listed is that input's failure.
            if let Err(e) = crate::batch::remote::walk(p, &sel, &a.storage_option, &mut found) {
                refused_early.push((p.clone(), e.cause()));
            }
            continue;
        }
        if let Err(e) = inputs::expand(p, a.base.as_deref(), &sel, &mut found) {
            let outside = matches!(e, InputsError::NotUnderBase { .. });
            if outside || std::fs::symlink_metadata(p).is_err() {
                // A listed input that is gone or outside --base is that input's failure.
                refused_early.push((p.clone(), e.to_string()));
            } else {
                return Err(e.into());
            }
        }
    }
    found.sort();
    found.dedup_by(|x, y| x.path == y.path);
    let mut seen: std::collections::HashMap<PathBuf, PathBuf> = std::collections::HashMap::new();
    let mut planned = Vec::with_capacity(found.len() + refused_early.len());
    for i in found {
        let Some(out) = i.output_in(dir) else {
            refused_early.push((i.path.clone(), "no file name to name the output".into()));
            continue;
        };
        let refused = match seen.get(&out) {
            Some(first) => Some(format!(
                "{} would also be written by {} (inputs with the same name but another \
                 extension in one folder)",
                out.display(),
                first.display()
            )),
            None => {
                seen.insert(out.clone(), i.path.clone());
                None
            }
        };
        planned.push(Planned {
            key: i.key,
            input: i.path,
            output: out,
            inputs: Vec::new(),
            settings: settings.clone(),
            refused,
        });
    }
    for (p, e) in refused_early {
        planned.push(Planned {
            key: p.clone(),
            input: p,
            output: PathBuf::new(),
            inputs: Vec::new(),
            settings: settings.clone(),
            refused: Some(e),
        });
    }
    // A missing --out-dir is made (as the folders under it are), once the inputs are known.
    if local && !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(|source| UsageError::OutDirCreate {
            path: dir.to_path_buf(),
            source,
        })?;
        log::info!("created --out-dir {}", dir.display());
    }
    Ok(planned)
}

pub fn run(a: &ConvertArgs) -> ExitCode {
    init_logging(a.verbose);
    signals::install();
    if a.formats {
        print_formats(a.json);
        return ExitCode::from(EXIT_OK);
    }
    let settings = match settings(a) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    // A bad key fails before any work.
    let key = match a.sign_key.as_deref().map(sign::load_key).transpose() {
        Ok(k) => k,
        Err(e) => return usage(format_args!("--sign-key: {e}")),
    };
    let batch_mode = a.out_dir.is_some() || a.manifest.is_some();
    let planned = match &a.concat {
        Some(_) => match plan_concat(a, &settings) {
            Ok(p) => p,
            Err(e) => return usage(e),
        },
        None => match plan(a, &settings) {
            Ok(p) => p,
            Err(code) => return code,
        },
    };
    let listed = planned.len();
    let shard = match choose_shard(a, batch_mode) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let planned: Vec<Planned> = match shard {
        Some(s) => planned.into_iter().filter(|p| s.takes(&p.key)).collect(),
        None => planned,
    };
    if let Some(s) = shard {
        log::info!("shard {s}: {} of {listed} inputs", planned.len());
    }
    if let Some(p) = planned.iter().find(|p| tet::storage::is_url(&p.output)) {
        if key.is_some() {
            return usage(format_args!(
                "--sign-key: {} is an object URL: convert to a local file, sign it (or use \
                 --sign-key there), then upload it",
                p.output.display()
            ));
        }
    }
    let (mut ledger, ledger_object) = match open_report(a) {
        Ok(l) => l,
        Err(code) => return code,
    };
    clean_stale(&planned);

    let run_id = ledger::run_id();
    let jobs = wire_jobs(a, &planned, &run_id, batch_mode);
    let start = StartRow {
        run: run_id.clone(),
        at: ledger::now(),
        host: ledger::host_name(),
        pid: std::process::id(),
        tool: "tet-convert".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        shard: shard.map(|s| s.to_string()),
        inputs: jobs.len(),
        listed,
        options: run_options_text(a, &settings),
    };
    let ropts = RunOptions {
        isolation: match a.isolation {
            IsolationArg::Process => Isolation::Process,
            IsolationArg::None => Isolation::None,
        },
        workers: a.workers.max(1),
        timeout: (a.timeout > 0).then(|| Duration::from_secs(a.timeout)),
        keep_going: a.keep_going,
        worker_args: vec![a.verbose.to_string()],
    };
    let chatty = !a.quiet && (a.verbose > 0 || !batch_mode || std::io::stderr().is_terminal());
    let mut sign_failed = false;
    let mut on_done = |o: &Outcome| {
        if let Some(k) = &key {
            if let Err(e) = sign_output(o, k) {
                errln!("{}: {}: cannot sign: {e}", super::program(), o.row.output);
                sign_failed = true;
            }
        }
        print_outcome(o, a, batch_mode, chatty);
    };
    let mut on_ledger_error = |e: std::io::Error| {
        if let Some(l) = &a.report {
            errln!(
                "{}: {}: cannot write the report: {e}",
                super::program(),
                l.display()
            );
        }
    };
    let summary = run::run(
        jobs,
        &ropts,
        ledger.as_mut(),
        start,
        &mut on_done,
        &mut on_ledger_error,
    );
    if batch_mode && !a.quiet {
        print_summary(&summary);
    }
    drop(ledger);
    if let Some(Err(e)) = ledger_object.map(|l| l.publish(&run_id)) {
        errln!("{}: cannot write the report: {e}", super::program());
        return ExitCode::from(super::EXIT_FAILED);
    }
    if sign_failed && summary.exit_code == EXIT_OK {
        return ExitCode::from(super::EXIT_FAILED);
    }
    ExitCode::from(summary.exit_code)
}

/// `--sign-key`: signs an output the run wrote, or an up-to-date one that `key` has not signed,
/// as a step of the front end after the worker's atomic write (the key is no conversion
/// setting: the signature adds a footer member after the content and changes nothing the
/// up-to-date check reads). The signed copy replaces the file by a rename, so a crash between
/// the two leaves the valid unsigned output; the output's extended attributes (the up-to-date
/// stamp) are carried over.
fn sign_output(o: &Outcome, key: &ssh_key::PrivateKey) -> Result<(), sign::SignError> {
    let path = ledger::RecordedPath {
        text: o.row.output.clone(),
        hex: o.row.output_hex.clone(),
    }
    .path();
    match o.row.status() {
        Status::Ok => {}
        Status::Skipped if !signed_by(&path, key) => {}
        _ => return Ok(()),
    }
    let attrs: Vec<_> = xattr::list(&path)
        .map(|names| {
            names
                .filter_map(|n| xattr::get(&path, &n).ok().flatten().map(|v| (n, v)))
                .collect()
        })
        .unwrap_or_default();
    let added = sign::sign(&path, key)?;
    for (name, value) in attrs {
        if let Err(e) = xattr::set(&path, &name, &value) {
            log::debug!("{}: {name:?} not carried over: {e}", path.display());
        }
    }
    log::info!("{}: signed by {}", path.display(), added.fingerprint);
    Ok(())
}

/// Whether `key` has signed the current content of the file at `path`.
fn signed_by(path: &Path, key: &ssh_key::PrivateKey) -> bool {
    let Ok(f) = tet::format::TetFile::open(path) else {
        return false;
    };
    let Ok(signed) = sign::Signed::read(&f) else {
        return false;
    };
    signed.signatures.iter().any(|s| {
        s.content == signed.digest
            && ssh_key::SshSig::from_pem(s.sshsig.trim())
                .is_ok_and(|g| g.public_key() == key.public_key().key_data())
    })
}

/// The `--report` ledger: a local file, or for an object URL a local file uploaded when the run
/// ends (one object per run). `Err`: the failure, already printed.
fn open_report(
    a: &ConvertArgs,
) -> Result<(Option<Ledger>, Option<crate::batch::remote::LedgerObject>), ExitCode> {
    let Some(p) = &a.report else {
        return Ok((None, None));
    };
    let object = match tet::storage::is_url(p) {
        true => Some(
            crate::batch::remote::LedgerObject::open(p, &a.storage_option, a.spool_dir.as_deref())
                .map_err(|e| super::fail(p, format!("cannot write the report: {e}")))?,
        ),
        false => None,
    };
    let local = object.as_ref().map_or(p.as_path(), |o| o.local());
    match Ledger::open(local) {
        Ok(l) => Ok((Some(l), object)),
        Err(e) => Err(super::fail(p, format!("cannot write the report: {e}"))),
    }
}

/// The inputs of the run, with their outputs and options: the manifest's jobs, `IN OUT`, or
/// the inputs of a `--out-dir` run. `Err`: the usage error, already printed.
fn plan(a: &ConvertArgs, settings: &Settings) -> Result<Vec<Planned>, ExitCode> {
    match (&a.manifest, &a.out_dir) {
        (Some(m), _) => match manifest::load(m, settings) {
            Ok(jobs) => Ok(jobs
                .into_iter()
                .map(
                    |Job {
                         input,
                         output,
                         inputs,
                         settings,
                     }| Planned {
                        key: input.clone(),
                        input,
                        output,
                        inputs,
                        settings,
                        refused: None,
                    },
                )
                .collect()),
            Err(e) => Err(usage(format!("{}: {e}", m.display()))),
        },
        (None, None) => match a.paths.as_slice() {
            [input, _] if is_plain_folder(input) => Err(usage(format!(
                "{}: a folder of no known format; to convert the files in it, add \
                 --out-dir DIR (tet-convert {} --out-dir DIR)",
                input.display(),
                input.display()
            ))),
            [input, output] => Ok(vec![Planned {
                key: input.clone(),
                input: input.clone(),
                output: output.clone(),
                inputs: Vec::new(),
                settings: settings.clone(),
                refused: None,
            }]),
            _ => Err(usage("give IN OUT, or inputs with --out-dir DIR")),
        },
        (None, Some(dir)) => plan_out_dir(a, dir, settings).map_err(usage),
    }
}

/// A local folder that is no store of a known format (a Zarr store is one input).
fn is_plain_folder(p: &Path) -> bool {
    !tet::storage::is_url(p) && p.is_dir() && registry::identify(p).is_err()
}

/// The shard this run converts: `--shard`, or in batch mode the scheduler's (with
/// `--shard-count`); `None`: every input.
fn choose_shard(
    a: &ConvertArgs,
    batch_mode: bool,
) -> Result<Option<batch::Shard>, batch::shard::ShardError> {
    match &a.shard {
        Some(s) => batch::Shard::parse(s).map(Some),
        None if batch_mode => batch::Shard::from_env(|k| std::env::var(k).ok(), a.shard_count),
        None => Ok(None),
    }
}

/// Removes temporary files of earlier runs whose writer is gone, in the folders this run
/// writes to.
fn clean_stale(planned: &[Planned]) {
    let mut dirs: Vec<&Path> = planned
        .iter()
        .filter_map(|p| p.output.parent())
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        stale::clean(d, None);
    }
}

/// The jobs of the run: what a worker gets for each planned input, or the failed outcome of
/// one refused before it started.
fn wire_jobs(
    a: &ConvertArgs,
    planned: &[Planned],
    run_id: &str,
    batch_mode: bool,
) -> Vec<Result<WireJob, Box<Outcome>>> {
    let recheck = Recheck {
        force: a.force,
        rehash: a.rehash,
        verify_existing: a.verify_existing,
        guard_source: batch_mode && a.manifest.is_none(),
    };
    planned
        .iter()
        .map(|p| match &p.refused {
            Some(reason) => {
                let mut row = InputRow::new(run_id, &p.input, &p.output);
                row.status = Some(Status::Failed);
                row.reason = Some(reason.clone());
                Err(Box::new(Outcome {
                    row,
                    ..Outcome::default()
                }))
            }
            None => Ok(WireJob {
                run: run_id.to_string(),
                input: WirePath::of(&p.input),
                output: WirePath::of(&p.output),
                settings: p.settings.clone(),
                inputs: p.inputs.iter().map(|i| WirePath::of(i)).collect(),
                // The bar itself is drawn where the conversion runs (`batch::job`), when stderr
                // is a terminal; here it only says that one is wanted.
                progress: !a.quiet && !a.json,
                recheck,
                make_dirs: batch_mode,
                want_report: a.json && !batch_mode,
                storage: crate::batch::wire::WireStorage {
                    options: a.storage_option.clone(),
                    spool_dir: a.spool_dir.as_deref().map(WirePath::of),
                },
            }),
        })
        .collect()
}

/// The closing line of a batch run: inputs, what became of them, and how long it took.
fn print_summary(summary: &run::Summary) {
    let c = summary.counts;
    let mut line = format!(
        "{}: {} inputs: {} converted, {} up to date, {} failed",
        super::program(),
        c.ok + c.skipped + c.failed + c.interrupted + c.not_started,
        c.ok,
        c.skipped,
        c.failed
    );
    if c.interrupted > 0 {
        line += &format!(", {} interrupted", c.interrupted);
    }
    if c.not_started > 0 {
        line += &format!(", {} not started", c.not_started);
    }
    if let Some(sig) = summary.signal {
        line += &format!("; stopped by {}", signals::name(sig));
    }
    line += &format!(" ({:.1} s)", summary.elapsed.as_secs_f64());
    errln!("{line}");
}

/// Every option of the run, as the ledger's start row records them.
fn run_options_text(
    a: &ConvertArgs,
    settings: &Settings,
) -> std::collections::BTreeMap<String, String> {
    let mut m = settings.recorded_params();
    m.insert("jobs".into(), settings.threads().to_string());
    m.insert("workers".into(), a.workers.to_string());
    m.insert("timeout_s".into(), a.timeout.to_string());
    m.insert(
        "isolation".into(),
        format!("{:?}", a.isolation).to_lowercase(),
    );
    for (k, v) in [
        ("force", a.force),
        ("rehash", a.rehash),
        ("verify_existing", a.verify_existing),
        ("keep_going", a.keep_going),
    ] {
        m.insert(k.into(), v.to_string());
    }
    if let Some(d) = &a.out_dir {
        m.insert("out_dir".into(), d.display().to_string());
    }
    if let Some(d) = &a.manifest {
        m.insert("manifest".into(), d.display().to_string());
    }
    if let Some(b) = &a.base {
        m.insert("base".into(), b.display().to_string());
    }
    if !a.include.is_empty() {
        m.insert("include".into(), a.include.join(" "));
    }
    m
}

/// What the terminal (and stdout, with --json) shows of one outcome.
fn print_outcome(o: &Outcome, a: &ConvertArgs, batch_mode: bool, chatty: bool) {
    let r = &o.row;
    // A combined job is named by its output on failure (the reason names the inputs), and by
    // its inputs' count otherwise.
    let input = match r.inputs.len() {
        0 => r.input.clone(),
        n => format!("{n} inputs"),
    };
    match r.status() {
        Status::Failed | Status::Interrupted => {
            let reason = r.reason.as_deref().unwrap_or("failed");
            match r.inputs.is_empty() {
                true => errln!("{}: {input}: {reason}", super::program()),
                false if reason.starts_with(&format!("{}:", r.output)) => {
                    errln!("{}: {reason}", super::program());
                }
                false => errln!("{}: {}: {reason}", super::program(), r.output),
            }
        }
        Status::Skipped if chatty && !a.json => {
            errln!("{input} -> {}: skipped: up to date", r.output);
        }
        Status::Ok if (chatty || !batch_mode) && !a.quiet && !a.json => {
            let mut notes = o.notes.iter();
            errln!(
                "{input} -> {}: {}",
                r.output,
                notes.next().map_or("converted", String::as_str)
            );
            for n in notes {
                errln!("  {n}");
            }
        }
        _ => {}
    }
    if a.json {
        if batch_mode {
            outln!("{}", serde_json::to_string(&r).unwrap_or_default());
        } else if let Some(rep) = &o.report {
            outln!("{}", serde_json::to_string(rep).unwrap_or_default());
        } else {
            outln!("{}", serde_json::to_string(&r).unwrap_or_default());
        }
    }
}

/// `tet-convert --concat DIM IN… OUT`: one combined job, run like any other (worker process,
/// up-to-date check, ledger row).
fn plan_concat(a: &ConvertArgs, settings: &Settings) -> Result<Vec<Planned>, UsageError> {
    let Some((output, inputs)) = a.paths.split_last().filter(|(_, i)| i.len() >= 2) else {
        return Err(UsageError::ConcatPaths);
    };
    Ok(vec![Planned {
        key: inputs[0].clone(),
        input: inputs[0].clone(),
        output: output.clone(),
        inputs: inputs.to_vec(),
        settings: settings.clone(),
        refused: None,
    }])
}
