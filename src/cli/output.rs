//! Standard output of the commands: every line a command prints goes through [`write`] (the
//! `outln!` and `out!` macros, `println!` and `print!` for the commands), the one place that
//! decides what a failed write means (`println!` would panic: "failed printing to stdout").
//!
//! - The reader went away (`tet audit f.tet | head -1`, EPIPE): the rest of the output is
//!   dropped without a word, commands that go through several files stop before the next one
//!   ([`super::interrupted`]), and the exit code is 141 (128 + SIGPIPE, what a shell reports for
//!   a program killed by SIGPIPE, as `yes | head -1` is) unless the command failed (its own
//!   code is kept). A conversion goes on to its end: its output files are its product, stdout
//!   only reports them. SIGPIPE itself stays ignored (Rust's default), so that a socket write
//!   (an object store upload) is an error the caller handles, never a killed process.
//! - Any other write error (`> /dev/full`: no space left): one line on stderr, the rest of the
//!   output dropped, exit 1.
//!
//! Standard error goes through [`write_err`] (`errln!`): a closed stderr (`2>&1 | head -1`)
//! counts as a closed stdout does; any other failure to write there is ignored (there is no one
//! left to tell). `clippy::print_stdout` and `clippy::print_stderr` are denied in the command
//! lines, so that no `println!` or `eprintln!` comes back.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};

/// `println!` for the commands: a line on standard output through [`write`].
macro_rules! outln {
    () => {
        $crate::cli::output::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for the commands: text on standard output through [`write`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::write(format_args!($($arg)*))
    };
}

/// `eprintln!` for the commands: a line on standard error through [`write_err`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::output::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// The exit code of a command whose standard output was closed early: 128 + SIGPIPE (13).
pub const EXIT_PIPE_CLOSED: u8 = 141;

/// What became of standard output.
const OPEN: u8 = 0;
const CLOSED: u8 = 1;
const FAILED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(OPEN);

/// Writes `args` to standard output; after a failed write, nothing (see the module docs).
pub fn write(args: std::fmt::Arguments<'_>) {
    if STATE.load(Ordering::Relaxed) != OPEN {
        return;
    }
    let mut lock = std::io::stdout().lock();
    if let Err(e) = lock.write_fmt(args) {
        broken(&e);
    }
}

/// Flushes standard output (what is buffered without a final newline), with [`write`]'s
/// handling of a failure.
pub fn flush() {
    if STATE.load(Ordering::Relaxed) != OPEN {
        return;
    }
    if let Err(e) = std::io::stdout().lock().flush() {
        broken(&e);
    }
}

/// Writes `args` to standard error (see the module docs).
pub fn write_err(args: std::fmt::Arguments<'_>) {
    if let Err(e) = std::io::stderr().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            STATE.store(CLOSED, Ordering::Relaxed);
        }
    }
}

/// Records a failed write: EPIPE quietly, anything else with one line on stderr.
fn broken(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        STATE.store(CLOSED, Ordering::Relaxed);
    } else if STATE.swap(FAILED, Ordering::Relaxed) != FAILED {
        errln!("{}: cannot write to standard output: {e}", super::program());
    }
}

/// Whether standard output can no longer be written (its reader went away, or a write failed):
/// a command printing file after file stops.
pub fn closed() -> bool {
    STATE.load(Ordering::Relaxed) != OPEN
}

/// The exit code of a command that returned `code`, given what became of standard output.
pub fn exit_code(code: ExitCode) -> ExitCode {
    flush();
    match STATE.load(Ordering::Relaxed) {
        OPEN => code,
        _ if code != ExitCode::SUCCESS => code,
        CLOSED => ExitCode::from(EXIT_PIPE_CLOSED),
        _ => ExitCode::from(super::EXIT_FAILED),
    }
}

/// Prints clap's answer to a command line it did not run (`--help`, `--version`, a usage
/// error) and returns its exit code; 141 when standard output was closed before the help was
/// all written.
pub fn clap_exit(e: &clap::Error) -> ExitCode {
    match e.print() {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::from(EXIT_PIPE_CLOSED)
        }
        Err(err) => {
            errln!(
                "{}: cannot write to standard output: {err}",
                super::program()
            );
            ExitCode::from(super::EXIT_FAILED)
        }
        // clap's codes: 0 for --help and --version, 2 for a usage error.
        Ok(()) => ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(super::EXIT_USAGE)),
    }
}

pub(crate) use {errln, out, outln};
