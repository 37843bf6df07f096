//! `tet generate man DIR` and `tet generate completions SHELL DIR`: the manual pages and the shell
//! completion scripts of `tet` and `tet-convert`, made from the clap definitions that parse their
//! command lines, so that they never drift from `--help` (`clap_mangen`, `clap_complete`).
//!
//! `generate` is no part of `tet`'s own definition: [`entry`] recognises it before clap parses
//! the command line (as a conversion worker's flag is), so that neither the pages nor the
//! completions offer it. `.ci/install-docs` runs it after the build and installs what it writes
//! (man pages under `/usr/local/share/man/man1`, bash completions where bash-completion loads
//! them).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};

use super::{errln, outln, ConvertCli, TetCli, EXIT_FAILED, EXIT_OK};

#[derive(Parser, Debug)]
#[command(
    name = "tet generate",
    version,
    about = "Write the manual pages or shell completions of tet and tet-convert",
    after_long_help = "Examples:\n  tet generate man /usr/local/share/man/man1\n  \
                       tet generate completions bash ~/.local/share/bash-completion/completions"
)]
struct GenerateCli {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand, Debug)]
enum What {
    /// Write tet.1, one page per tet subcommand (tet-info.1, tet-verify.1, …) and
    /// tet-convert.1 into DIR.
    Man {
        /// The folder (created if missing).
        dir: PathBuf,
    },
    /// Write the completion scripts of tet and tet-convert for SHELL into DIR, under the names
    /// clap_complete gives them (bash: tet.bash and tet-convert.bash; zsh: _tet; fish:
    /// tet.fish).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
        /// The folder (created if missing).
        dir: PathBuf,
    },
}

/// `tet generate …`: its exit code; `None` for every other command line.
pub(crate) fn entry() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != "generate" {
        return None;
    }
    let cli = match GenerateCli::try_parse_from(std::iter::once("tet generate".into()).chain(args))
    {
        Ok(cli) => cli,
        Err(e) => return Some(super::output::clap_exit(&e)),
    };
    let (dir, written) = match &cli.what {
        What::Man { dir } => (dir, man_pages(dir)),
        What::Completions { shell, dir } => (dir, completions(*shell, dir)),
    };
    Some(match written {
        Ok(files) => {
            for f in files {
                outln!("{}", f.display());
            }
            super::output::exit_code(ExitCode::from(EXIT_OK))
        }
        Err(e) => {
            errln!("{}: {}: {e}", super::program(), dir.display());
            ExitCode::from(EXIT_FAILED)
        }
    })
}

/// The manual pages of `tet` (one per subcommand) and of `tet-convert`; the paths written.
/// `tet convert`'s own page would be named `tet-convert.1` as well: the binary's page, written
/// last, is the one kept (the options are the same).
fn man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    clap_mangen::generate_to(TetCli::command(), dir)?;
    let mut files: Vec<PathBuf> = TetCli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "convert")
        .map(|s| dir.join(format!("tet-{}.1", s.get_name())))
        .collect();
    files.insert(0, dir.join("tet.1"));
    files.push(clap_mangen::Man::new(ConvertCli::command()).generate_to(dir)?);
    Ok(files)
}

/// The completion scripts of both programs for `shell`; the paths written.
fn completions(shell: clap_complete::Shell, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    Ok(vec![
        clap_complete::generate_to(shell, &mut TetCli::command(), "tet", dir)?,
        clap_complete::generate_to(shell, &mut ConvertCli::command(), "tet-convert", dir)?,
    ])
}
