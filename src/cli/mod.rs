//! The command lines: `tet` (info, verify, convert, audit, export) and `tet-convert` (the converter alone).
//!
//! This layer only parses arguments, calls the library and prints; every error becomes one line
//! on stderr naming the file and the reason, with a non-zero exit code. Everything printed goes
//! through `output.rs` (`outln!`, `errln!`): a reader that goes away ends a command quietly.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod audit;
mod convert;
mod damage;
mod export;
mod facts_text;
mod generate;
mod info;
mod lineage;
mod output;
mod reproduce;
mod sign;
mod verify;

pub(crate) use output::{errln, out, outln};

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code for success.
pub const EXIT_OK: u8 = 0;
/// Exit code for a failed check or a failed conversion.
pub const EXIT_FAILED: u8 = 1;
/// Exit code for a usage error (clap uses 2 as well).
pub const EXIT_USAGE: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "tet",
    version,
    about = "Inspect, verify and convert .tet tensor files",
    propagate_version = true,
    after_long_help = TET_EXAMPLES
)]
struct TetCli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size difference of the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Show the datasets, metadata and history of a .tet file.
    Info(info::InfoArgs),
    /// Check .tet files against every rule of the format and their checksums (exit 0 ok, 1 failed, 2 usage).
    Verify(verify::VerifyArgs),
    /// Convert a NetCDF, HDF5, NPY/NPZ, TeaFile, Tensogram or Zarr input to .tet.
    #[command(after_long_help = CONVERT_EXAMPLES)]
    Convert(convert::ConvertArgs),
    /// Show the provenance trail and whether the recorded inputs (or --source paths) are unchanged.
    Audit(audit::AuditArgs),
    /// Export a .tet file to NetCDF-4, Zarr v3, NPY or NPZ (values, types, dims, attributes).
    Export(export::ExportArgs),
    /// Sign .tet files with an SSH key (OpenSSH SSHSIG over the content digest), or attach,
    /// show or extract signatures.
    Sign(sign::SignArgs),
}

/// The end of `tet --help`.
const TET_EXAMPLES: &str = "\
Examples:
  tet convert in.nc out.tet         convert (the same as tet-convert in.nc out.tet)
  tet info out.tet                  datasets, metadata, history
  tet verify --deep out.tet         every rule of the format and every checksum
  tet audit out.tet                 are the recorded inputs unchanged?
  tet export out.tet back.nc        back to NetCDF-4 (or .zarr, .npy, .npz)

Each command has its own --help (with its exit codes); man tet-info, tet-verify, … once
installed. A command whose output is cut short by its reader (`tet info f.tet | head -1`)
stops quietly with exit 141 (128 + SIGPIPE, as if killed by it).";

/// The end of `tet convert --help` and `tet-convert --help`.
const CONVERT_EXAMPLES: &str = "\
Examples:
  tet-convert in.nc out.tet                    one file (codec and chunks chosen per dataset)
  tet-convert in.h5 out.tet --codec zstd:3     one codec for every chunk
  tet-convert data/ --out-dir tet/             every input of a folder, skipping those done
  tet-convert --formats                        the formats this build reads

Exit status: 0 every input converted or up to date, 1 an input failed, 2 usage error,
130 / 143 stopped by SIGINT / SIGTERM, 141 its standard output closed early (`| head`; the
conversions still finish).";

/// Entry point of the `tet` binary.
pub fn main_tet() -> ExitCode {
    tet::pipeline::return_freed_memory();
    if let Some(code) = worker_entry() {
        return code;
    }
    if let Some(code) = generate::entry() {
        return code;
    }
    let cli = match TetCli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return output::clap_exit(&e),
    };
    if !matches!(cli.command, Command::Convert(_)) {
        init_logging(0);
    }
    let code = match cli.command {
        Command::Info(a) => info::run(&a),
        Command::Verify(a) => verify::run(&a),
        Command::Convert(a) => convert::run(&a),
        Command::Audit(a) => audit::run(&a),
        Command::Export(a) => export::run(&a),
        Command::Sign(a) => sign::run(&a),
    };
    // A command that read objects stopped at SIGINT/SIGTERM (its requests were cancelled and it
    // said so for the file at hand): the exit code names the signal, as a conversion's does.
    // Standard output closed early: 141 (see [`output`]).
    match crate::batch::signals::pending() {
        Some(sig) => ExitCode::from(crate::batch::signals::exit_code(sig)),
        None => output::exit_code(code),
    }
}

/// Whether a command working through several files stops before the next one: a SIGINT or
/// SIGTERM came while it read an object (see [`OpenedTet::open`]), or nobody reads its
/// standard output any more ([`output`]).
pub(crate) fn interrupted() -> bool {
    crate::batch::signals::pending().is_some() || output::closed()
}

/// `PROGRAM --tet-worker [VERBOSITY]`: a supervised conversion worker (see
/// [`crate::batch::supervise`]); `None` for every other command line.
fn worker_entry() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != crate::batch::supervise::WORKER_FLAG {
        return None;
    }
    let verbose = args
        .next()
        .and_then(|v| v.to_str().and_then(|v| v.parse().ok()))
        .unwrap_or(0);
    init_logging(verbose);
    Some(crate::batch::supervise::worker_main())
}

/// Logs to stderr as `PROGRAM: level: message` (stdout carries only requested output): warnings
/// by default, `-v` info, `-vv` debug, `-vvv` trace; `RUST_LOG` (env_logger syntax, e.g.
/// `debug` or `tet=trace`) overrides.
pub(crate) fn init_logging(verbose: u8) {
    use std::io::Write as _;
    let level = match verbose {
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        2 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    let prog = program();
    let mut b = env_logger::Builder::new();
    b.filter_level(level)
        .target(env_logger::Target::Stderr)
        .format(move |f, r| {
            let level = r.level().as_str().to_ascii_lowercase();
            writeln!(f, "{prog}: {level}: {}", r.args())
        });
    if let Ok(spec) = std::env::var("RUST_LOG") {
        b.parse_filters(&spec);
    }
    // A second initialisation (tests calling run twice) keeps the first logger.
    let _ = b.try_init();
}

/// The command line of `tet-convert`.
#[derive(Parser, Debug)]
#[command(
    name = "tet-convert",
    version,
    about = "Convert tensor files (NetCDF, HDF5, NPY/NPZ, TeaFile, Tensogram, Zarr) to .tet",
    after_long_help = CONVERT_EXAMPLES
)]
struct ConvertCli {
    #[command(flatten)]
    args: convert::ConvertArgs,
}

/// Entry point of the `tet-convert` binary.
pub fn main_convert() -> ExitCode {
    tet::pipeline::return_freed_memory();
    if let Some(code) = worker_entry() {
        return code;
    }
    let cli = match ConvertCli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return output::clap_exit(&e),
    };
    output::exit_code(convert::run(&cli.args))
}

pub(crate) use crate::batch::text::{human_bytes, one_line, program};

/// `--storage-option KEY=VALUE`, as `tet info`, `verify`, `audit` and `export` take it (the
/// same parser as `tet-convert`'s: keys lower-cased, values never echoed in an error).
#[derive(clap::Args, Debug, Default, Clone)]
pub(crate) struct StorageArgs {
    /// An object store setting for s3://, gs://, az://, https:// URLs (repeatable), e.g.
    /// `aws_endpoint_url=http://127.0.0.1:9000`; the environment's AWS_*, GOOGLE_*, AZURE_*
    /// variables are read first. Also `max_retries=N`, `retry_timeout=SECONDS`.
    #[arg(long = "storage-option", value_name = "KEY=VALUE", value_parser = StorageOptionParser)]
    pub storage_option: Vec<(String, String)>,
}

/// clap's parser of `--storage-option`: [`tet::storage::parse_option`], with an error that never
/// shows the argument (clap's own message for a bad value quotes it, and a mistyped option may
/// be a secret).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StorageOptionParser;

impl clap::builder::TypedValueParser for StorageOptionParser {
    type Value = (String, String);

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        let text = value.to_str().ok_or_else(|| {
            clap::Error::raw(
                clap::error::ErrorKind::InvalidUtf8,
                "--storage-option: not UTF-8\n",
            )
            .with_cmd(cmd)
        })?;
        tet::storage::parse_option(text).map_err(|e| {
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n"))
                .with_cmd(cmd)
        })
    }
}

pub(crate) use tet::storage::{other_format, FetchError, OpenTetError};

/// A `.tet` named on the command line, opened by the engine ([`tet::storage::open_tet`]: a
/// local file memory-mapped, an object read by ranges with the environment's settings and
/// `--storage-option`). Requests stop at the first SIGINT/SIGTERM, as a conversion's do: the
/// spool (if any) is removed, the command says `interrupted` for this file and exits 128 + the
/// signal.
pub(crate) struct OpenedTet;

impl OpenedTet {
    pub(crate) fn open(
        p: &std::path::Path,
        options: &tet::storage::Options,
    ) -> Result<tet::storage::OpenedTet, OpenTetError> {
        tet::storage::open_tet(p, options, &signal_cancel(p))
    }
}

/// The cancel token of a command that reads `p`: SIGINT/SIGTERM (the handlers installed when
/// `p` is an object URL).
pub(crate) fn signal_cancel(p: &std::path::Path) -> tet::control::Cancel {
    if tet::storage::is_url(p) {
        crate::batch::signals::install();
    }
    tet::control::Cancel::from_fn(crate::batch::signals::pending)
}

/// The input digest (`sha256:<hex>`) and size of a path or object URL named on the command
/// line (`tet audit --source`), as a conversion records it ([`tet::storage::digest_path`]).
pub(crate) fn digest_arg(
    p: &std::path::Path,
    options: &tet::storage::Options,
) -> std::io::Result<(String, u64)> {
    tet::storage::digest_path(p, options, &signal_cancel(p))
}

/// Prints `PROGRAM: FILE: reason` on one line and returns the failure exit code.
pub(crate) fn fail(path: &std::path::Path, reason: impl std::fmt::Display) -> ExitCode {
    errln!(
        "{}: {}: {}",
        program(),
        path.display(),
        one_line(&reason.to_string())
    );
    ExitCode::from(EXIT_FAILED)
}
