//! `tet sign`: sign `.tet` files with an SSH key, attach a signature `ssh-keygen -Y sign` made,
//! print a file's message (what is signed) or its signatures (for `ssh-keygen -Y verify`); and
//! the signature checks `tet verify --signers` and `tet audit` add ([`tet::provenance`]).
//!
//! Exit 0 when every file was done, 1 when one failed (one line naming it and the reason), 2 on
//! a usage error.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::{errln, fail, one_line, out, program, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use tet::format::TetFile;
use tet::provenance::allowed::AllowedSigners;
use tet::provenance::check::{SigStatus, Signatures};
use tet::provenance::sign::{self, Signed};

#[derive(Args, Debug)]
#[command(after_long_help = AFTER_HELP)]
#[command(group(clap::ArgGroup::new("what").required(true)
    .args(["key", "signature", "message", "extract"])))]
pub struct SignArgs {
    /// The .tet files (local paths: signing rewrites the footer in place, atomically).
    #[arg(required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// Sign with this OpenSSH ed25519 private key (without a passphrase).
    #[arg(long, value_name = "KEY")]
    key: Option<PathBuf>,
    /// Attach this signature (made by `ssh-keygen -Y sign -n tet-convert@file-content` over
    /// the file's message), after checking it over the file's content.
    #[arg(long, value_name = "FILE.sig")]
    signature: Option<PathBuf>,
    /// Print the message a signature signs (`sha256:<hex>` of the content): for one file the
    /// message alone, without a newline (`> msg` for ssh-keygen); for several, `FILE: message`
    /// lines.
    #[arg(long)]
    message: bool,
    /// Print the file's stored signatures, armored as `ssh-keygen -Y sign` writes them (all, or
    /// the N-th from 1: `--extract=N`).
    #[arg(long, value_name = "N", num_args = 0..=1, require_equals = true, default_missing_value = "0")]
    extract: Option<usize>,
}

const AFTER_HELP: &str = "\
The content of a file is every byte before the footer's signatures (docs/FORMAT.md,
\"Signatures\"); the message signed is the text `sha256:<hex>` of its SHA-256, without a newline,
in the SSHSIG namespace tet-convert@file-content.

Examples:
  tet sign --key ~/.ssh/id_ed25519 out.tet
  tet sign --message out.tet > msg           the message, for ssh-keygen -Y sign/verify
  ssh-keygen -Y sign -f ~/.ssh/id_ed25519 -n tet-convert@file-content msg
  tet sign --signature msg.sig out.tet       attach that signature
  tet sign --extract=1 out.tet > out.sig
  ssh-keygen -Y verify -f allowed_signers -I alice@example.org \\
      -n tet-convert@file-content -s out.sig < msg
  tet verify --signers allowed_signers out.tet";

pub fn run(a: &SignArgs) -> ExitCode {
    let key = match a.key.as_deref().map(sign::load_key).transpose() {
        Ok(k) => k,
        Err(e) => {
            errln!("{}: {}", program(), one_line(&e.to_string()));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let armored = match &a.signature {
        Some(p) if a.files.len() > 1 => {
            errln!(
                "{}: {}: a signature signs one file's content; name one file",
                program(),
                p.display()
            );
            return ExitCode::from(EXIT_USAGE);
        }
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) => Some(t),
            Err(e) => return fail(p, format!("cannot read the signature: {e}")),
        },
        None => None,
    };
    let mut code = EXIT_OK;
    for file in &a.files {
        if super::interrupted() {
            break;
        }
        let done = if let Some(k) = &key {
            sign::sign(file, k).map(|r| added_line(file, &r))
        } else if let Some(t) = &armored {
            sign::attach(file, t).map(|r| added_line(file, &r))
        } else {
            show(file, a.message, a.extract).map(|t| match a.files.len() {
                1 => t,
                _ => format!("{}: {t}\n", file.display()),
            })
        };
        match done {
            Ok(text) => out!("{text}"),
            Err(e) => {
                fail(file, e);
                code = EXIT_FAILED;
            }
        }
    }
    ExitCode::from(code)
}

fn added_line(file: &Path, r: &sign::Added) -> String {
    format!(
        "{}: signed by {} over {}{}\n",
        file.display(),
        r.fingerprint,
        r.digest,
        if r.replaced {
            " (replaced this key's earlier signature)"
        } else {
            ""
        }
    )
}

/// `--message` or `--extract`.
fn show(file: &Path, message: bool, extract: Option<usize>) -> Result<String, sign::SignError> {
    let f = TetFile::open(file).map_err(sign::SignError::Read)?;
    let signed = Signed::read(&f)?;
    if message {
        return Ok(signed.digest);
    }
    let n = extract.unwrap_or(0);
    let picked: Vec<&str> = signed
        .signatures
        .iter()
        .enumerate()
        .filter(|(i, _)| n == 0 || *i + 1 == n)
        .map(|(_, s)| s.sshsig.as_str())
        .collect();
    if picked.is_empty() {
        return Err(sign::SignError::Block(match n {
            0 => "the file has no signatures".into(),
            n => format!(
                "the file has {} signature(s), no #{n}",
                signed.signatures.len()
            ),
        }));
    }
    Ok(picked.concat())
}

/// Reads `--signers FILE`, printing its left-out lines as warnings; `Err` is the exit code.
pub(crate) fn load_signers(path: &Path) -> Result<AllowedSigners, ExitCode> {
    match AllowedSigners::load(path) {
        Ok(a) => {
            for s in &a.skipped {
                errln!("{}: warning: {}: {s}", program(), path.display());
            }
            Ok(a)
        }
        Err(e) => {
            errln!("{}: {}", program(), one_line(&e.to_string()));
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

/// `tet audit`'s lines about signatures: who signed, and whether it holds.
pub(crate) fn audit_lines(s: &Signatures) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    for c in &s.signatures {
        let _ = match c.status {
            SigStatus::Trusted => writeln!(
                o,
                "signed by {} (allowed signer): valid over {}",
                c.signer(),
                s.content_digest
            ),
            SigStatus::Valid => writeln!(
                o,
                "signed by {}: valid over {} (check the key with tet verify --signers)",
                c.signer(),
                s.content_digest
            ),
            SigStatus::Unknown => writeln!(
                o,
                "signed by {}: valid, but {}",
                c.signer(),
                c.reason.as_deref().unwrap_or("")
            ),
            SigStatus::Invalid => writeln!(
                o,
                "INVALID signature #{} by {}: {}",
                c.index,
                c.signer(),
                one_line(c.reason.as_deref().unwrap_or(""))
            ),
        };
    }
    o
}

pub(crate) use tet::provenance::report::any_invalid;
