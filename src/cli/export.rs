//! `tet export FILE.tet OUT [--to netcdf|zarr|npy|npz] [--dataset NAME]… [--compress …]`.
//!
//! `FILE.tet` may be an object URL (read by ranges). `OUT` may be an object URL too
//! (`s3://`, `gs://`, `az://`) naming one file (`.nc`, `.npz`, one `.npy`): the export is written
//! to a staged file in a spool folder under `--spool-dir` (default `$TMPDIR`; the free space
//! checked first against an estimate), made durable, then published with the same multipart
//! upload a conversion's object output gets ([`tet::storage::Object::upload`]: completed only
//! after the last part; a failure or SIGINT/SIGTERM aborts it; a killed run's upload is aborted
//! by the next run to the same key). The spool folder is removed whatever happens. A Zarr store
//! or a directory of `.npy` files (many objects, which cannot appear at once) is refused.

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr as _;

use clap::Args;
use serde_json::json;

use super::{errln, fail, one_line, outln, FetchError, OpenTetError, EXIT_OK, EXIT_USAGE};
use crate::batch::signals;
use tet::export::{
    estimated_size, export, export_file, named_as_output, target_for, Compression, ExportError,
    ExportOptions, ExportReport, Target,
};
use tet::storage::{self, Cause, Object, Spool, StorageError};

/// The end of `tet export --help`.
const EXAMPLES: &str = "\
Examples:
  tet export out.tet back.nc                    NetCDF-4 (zlib:4 with shuffle)
  tet export out.tet out.zarr --dataset temp    one variable, as a Zarr v3 store
  tet export out.tet arrays.npz --compress none
  tet export s3://bucket/out.tet s3://bucket/back.nc

Exit status: 0 written, 1 failed (nothing is left at OUT), 2 usage error.";

#[derive(Args, Debug)]
#[command(after_long_help = EXAMPLES)]
pub struct ExportArgs {
    /// The .tet file (a path or an object URL).
    file: PathBuf,
    /// The output: a .nc file, a .zarr directory, a directory of .npy files (or one .npy for
    /// one array), or a .npz archive; or an object URL (s3://, gs://, az://) of a .nc, .npz or
    /// one .npy, staged locally and uploaded once complete.
    out: PathBuf,
    /// The output format, as `tet-convert --formats` lists them (default: from OUT's extension).
    #[arg(long, value_name = "FORMAT", value_parser = parse_target)]
    to: Option<Target>,
    /// Export only this dataset, complex array or group (repeatable).
    #[arg(long = "dataset", value_name = "NAME")]
    datasets: Vec<String>,
    /// zlib[:1-9] (NetCDF default zlib:4 with shuffle; NPZ deflate), zstd[:1-22] (Zarr
    /// default zstd:3; NetCDF only with the HDF5 zstd plugin) or none.
    #[arg(long, value_name = "CODEC", value_parser = Compression::from_str)]
    compress: Option<Compression>,
    /// Replace OUT when it exists.
    #[arg(long)]
    force: bool,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
    /// Print nothing on success.
    #[arg(short, long)]
    quiet: bool,
    /// Where an export to an object URL is staged before its upload (default: $TMPDIR).
    #[arg(long, value_name = "DIR")]
    spool_dir: Option<PathBuf>,
    #[command(flatten)]
    storage: super::StorageArgs,
}

/// Room wanted on the spool's file system beyond the export's estimated size.
const SPOOL_MARGIN: u64 = 64 << 20;

/// Why an export to an object URL failed, and so which name its line starts with.
#[derive(Debug)]
enum ToObjectError {
    /// The `.tet` input cannot be opened (the line names the input).
    Input(OpenTetError),
    /// The export failed (the line names the input, as for a local output).
    Export(ExportError),
    /// The output object is refused or cannot be written (the line names the output URL).
    Output(OutputError),
    /// SIGINT or SIGTERM came: the upload, if any, was aborted.
    Interrupted(i32),
}

/// What is wrong with an object output.
#[derive(Debug, thiserror::Error)]
enum OutputError {
    #[error(transparent)]
    Store(#[from] FetchError),
    #[error(
        "a {0} export is a directory of files, which cannot be published to an object URL as \
         one object; export to a local path, or to one .nc, .npz or single-array .npy object"
    )]
    NotOneFile(&'static str),
    #[error("exists (use --force to replace it)")]
    Exists,
    #[error("the output is the input")]
    IsInput,
    #[error("cannot stage the export: {0}")]
    Stage(#[source] StorageError),
    #[error(
        "the spool folder {} has {free} bytes free, the export needs about {need} (+64 MiB); \
         use --spool-dir",
        dir.display()
    )]
    NoRoom { dir: PathBuf, free: u64, need: u64 },
}

impl From<StorageError> for ToObjectError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::Interrupted { signal, .. } => ToObjectError::Interrupted(signal),
            e => ToObjectError::Output(FetchError(e).into()),
        }
    }
}

/// A `--to` value that names no export format.
#[derive(Debug, thiserror::Error)]
#[error("unknown format `{0}` ({names})", names = Target::names())]
struct UnknownTarget(String);

fn parse_target(s: &str) -> Result<Target, UnknownTarget> {
    Target::from_name(s).ok_or_else(|| UnknownTarget(s.into()))
}

pub fn run(a: &ExportArgs) -> ExitCode {
    let url = tet::storage::is_url(&a.file);
    if !url && !a.file.is_file() {
        errln!(
            "{}: {}: no such .tet file",
            super::program(),
            a.file.display()
        );
        return ExitCode::from(EXIT_USAGE);
    }
    if let Some(name) = (!url).then(|| super::other_format(&a.file)).flatten() {
        return fail(&a.file, OpenTetError::OtherFormat(name));
    }
    // SIGINT/SIGTERM stop the export between two chunks (and an upload, a ranged read): the
    // staged output is removed and the exit code names the signal.
    signals::install();
    let opts = ExportOptions {
        target: a.to,
        datasets: a.datasets.clone(),
        compression: a.compress.unwrap_or_default(),
        force: a.force,
        // SIGINT/SIGTERM stop the export between two chunks; its staged output is removed.
        cancel: tet::control::Cancel::from_fn(signals::pending),
    };
    let exported = if tet::storage::is_url(&a.out) {
        match to_object(a, &opts) {
            Ok(r) => Ok(r),
            Err(ToObjectError::Input(e)) => return fail(&a.file, e),
            Err(ToObjectError::Export(e)) => Err(e),
            Err(ToObjectError::Output(e)) => return fail(&a.out, e),
            Err(ToObjectError::Interrupted(sig)) => {
                fail(&a.out, "interrupted");
                return ExitCode::from(signals::exit_code(sig));
            }
        }
    } else if url {
        // An object is read by ranges, one chunk at a time as the writer asks for it.
        match super::OpenedTet::open(&a.file, &a.storage.storage_option) {
            Ok(tet) => export_file(&tet, &a.file, &a.out, &opts),
            Err(e) => return fail(&a.file, e),
        }
    } else {
        export(&a.file, &a.out, &opts)
    };
    let report = match exported {
        Ok(r) => r,
        Err(ExportError::Interrupted(sig)) => {
            fail(&a.out, "interrupted");
            return ExitCode::from(signals::exit_code(sig));
        }
        Err(e) => return fail(&a.file, reason(&e, &a.out)),
    };
    for w in &report.warnings {
        errln!(
            "{}: {}: warning: {}",
            super::program(),
            a.file.display(),
            one_line(w)
        );
    }
    if a.json {
        let v = json!({
            "input": a.file.display().to_string(),
            "output": report.output.display().to_string(),
            "format": report.target.name(),
            "arrays": report.arrays.iter().map(|(n, t, s)| json!({"name": n, "dtype": t, "shape": s})).collect::<Vec<_>>(),
            "reused_chunks": report.reused_chunks,
            "warnings": report.warnings,
        });
        outln!("{v}");
    } else if !a.quiet {
        outln!(
            "{} -> {} ({}, {} arrays)",
            a.file.display(),
            report.output.display(),
            report.target.name(),
            report.arrays.len()
        );
    }
    ExitCode::from(EXIT_OK)
}

/// An export error as the reason on the line that names the input: a failure to write names
/// the output as the user gave it when the message does not already (a library's error names
/// the array it wrote, `zarr `t``, not the store).
fn reason(e: &ExportError, out: &std::path::Path) -> String {
    let text = e.to_string();
    let writing = match e {
        ExportError::Io { path, .. } => path.starts_with(out),
        ExportError::Library { .. } | ExportError::Archive { .. } => true,
        _ => false,
    };
    if writing && !text.contains(out.to_string_lossy().as_ref()) {
        format!("writing {}: {text}", out.display())
    } else {
        text
    }
}

/// Exports to a staged file, then publishes it at the object URL `a.out` (see the module docs).
fn to_object(a: &ExportArgs, opts: &ExportOptions) -> Result<ExportReport, ToObjectError> {
    let options = &a.storage.storage_option;
    let target = target_for(&a.out, opts).map_err(ToObjectError::Export)?;
    let one_npy = a
        .out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    if target == Target::ZARR || (target == Target::NPY && !one_npy) {
        return Err(ToObjectError::Output(OutputError::NotOneFile(
            target.name(),
        )));
    }
    if a.out == a.file {
        return Err(ToObjectError::Output(OutputError::IsInput));
    }
    let url = a.out.to_string_lossy();
    if url.starts_with("http://") || url.starts_with("https://") {
        return Err(StorageError::of_url(&url, Cause::ReadOnly).into());
    }
    let dst = Object::parse(&url, options)?;
    match dst.info() {
        Ok(_) if !opts.force => return Err(ToObjectError::Output(OutputError::Exists)),
        Ok(_) => {}
        // No such key is the usual case; no such bucket fails now, before the export.
        Err(StorageError::Remote {
            cause: Cause::NoSuchKey,
            ..
        }) => {}
        Err(e) => return Err(e.into()),
    }
    // A signal stops the export between chunks, the reads of an object input and the upload
    // (the exit code says which signal; signals::install ran in `run`).
    let tet = super::OpenedTet::open(&a.file, options).map_err(ToObjectError::Input)?;
    let root = a.spool_dir.clone().unwrap_or_else(std::env::temp_dir);
    storage::clean_stale_spools(&root);
    let need = estimated_size(&tet, target, opts).map_err(ToObjectError::Export)?;
    let free = storage::free_space(&root).map_err(|source| {
        let path = root.clone();
        ToObjectError::Output(OutputError::Stage(StorageError::Local { path, source }))
    })?;
    if free < need.saturating_add(SPOOL_MARGIN) {
        let dir = root.clone();
        return Err(ToObjectError::Output(OutputError::NoRoom {
            dir,
            free,
            need,
        }));
    }
    let name = dst.file_name().unwrap_or("export").to_string();
    let staged = Spool::for_output(&root, &name)
        .map_err(|e| ToObjectError::Output(OutputError::Stage(e)))?;
    let staged_opts = ExportOptions {
        target: Some(target),
        force: false,
        ..opts.clone()
    };
    // Written beside the staged path and renamed onto it once complete and fsynced
    // (export's own commit), so what is uploaded is the whole, durable file.
    let exported = export_file(&tet, &a.file, staged.path(), &staged_opts);
    drop(tet);
    if let Some(sig) = signals::pending() {
        return Err(ToObjectError::Interrupted(sig));
    }
    // The spool file is named as the user named the output: the object URL.
    let mut report = exported.map_err(|e| match e {
        ExportError::Interrupted(sig) => ToObjectError::Interrupted(sig),
        e => ToObjectError::Export(named_as_output(e, staged.path(), staged.path(), &a.out)),
    })?;
    // Uploads to this key that killed runs left behind are aborted first.
    match dst.abort_stale_uploads() {
        Ok(0) => {}
        Ok(n) => log::info!("{}: aborted {n} stale upload(s)", dst.url()),
        Err(e) => log::warn!("{e}"),
    }
    let cancel = tet::control::Cancel::from_fn(signals::pending);
    dst.upload(staged.path(), &storage::UploadMetadata::new(), &cancel)?;
    // The staged copy goes now (the spool folder is removed on every path out).
    drop(staged);
    report.output = a.out.clone();
    Ok(report)
}
