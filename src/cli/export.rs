//! `tet export FILE.tet OUT [--to netcdf|zarr|npy|npz] [--dataset NAME]… [--compress …]`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr as _;

use clap::Args;
use serde_json::json;

use super::{fail, one_line, EXIT_OK, EXIT_USAGE};
use crate::export::{export, export_file, Compression, ExportOptions, Target};

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The .tet file.
    file: PathBuf,
    /// The output: a .nc file, a .zarr directory, a directory of .npy files (or one .npy for
    /// one array), or a .npz archive.
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
}

/// A `--to` value that names no export format.
#[derive(Debug, thiserror::Error)]
#[error("unknown format `{0}` ({names})", names = Target::names())]
struct UnknownTarget(String);

fn parse_target(s: &str) -> Result<Target, UnknownTarget> {
    Target::from_name(s).ok_or_else(|| UnknownTarget(s.into()))
}

pub fn run(a: &ExportArgs) -> ExitCode {
    let url = crate::storage::is_url(&a.file);
    if !url && !a.file.is_file() {
        eprintln!(
            "{}: {}: no such .tet file",
            super::program(),
            a.file.display()
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let opts = ExportOptions {
        target: a.to,
        datasets: a.datasets.clone(),
        compression: a.compress.unwrap_or_default(),
        force: a.force,
    };
    let exported = if url {
        // An object is read by ranges, one chunk at a time as the writer asks for it.
        match super::OpenedTet::open(&a.file) {
            Ok(tet) => export_file(&tet, &a.file, &a.out, &opts),
            Err(e) => return fail(&a.file, e),
        }
    } else {
        export(&a.file, &a.out, &opts)
    };
    let report = match exported {
        Ok(r) => r,
        Err(e) => return fail(&a.file, e),
    };
    for w in &report.warnings {
        eprintln!(
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
        println!("{v}");
    } else if !a.quiet {
        println!(
            "{} -> {} ({}, {} arrays)",
            a.file.display(),
            report.output.display(),
            report.target.name(),
            report.arrays.len()
        );
    }
    ExitCode::from(EXIT_OK)
}
