//! "Up to date": an existing output whose last history row is a conversion of this input's
//! digest under the same byte-affecting options is not rebuilt.
//!
//! Re-runs must not re-read every input, so after a conversion (or a hash) we stamp the output
//! with the input's size, mtime (ns), inode and device, beside the digest, in an
//! extended attribute of the output (`user.tet-convert.source`) — outside the file's bytes, so
//! output stays byte-identical for identical input. When the stamp matches the input's current
//! `stat`, its digest stands for the input's; any difference (or no stamp: a copied output, a
//! file system without user xattrs) means hashing the input again, as does `--rehash`. A
//! directory store's stamp covers every file in it (path, size, mtime, inode), read by `stat`
//! alone. ctime is left out on purpose: reading a file's atime back (`touch -a`, backup tools)
//! changes it without changing a byte. A change that keeps size, mtime and inode (a rewrite in
//! place followed by `touch -r`) is only caught by `--rehash`, as with make and rsync.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::wire::Recheck;
use tet::format::deep_verify;
use tet::format::{TetError, TetFile};
use tet::meta;

/// The extended attribute that holds the stamp.
pub const XATTR: &str = "user.tet-convert.source";

/// What `stat` says of an input, as one comparable string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// `file:SIZE:MTIME_NS:INO:DEV` or `dir:FILES:SIZE:SHA256-OF-STATS`.
    pub stat: String,
    /// Bytes of the input.
    pub bytes: u64,
}

fn ns(sec: i64, nsec: i64) -> i128 {
    i128::from(sec) * 1_000_000_000 + i128::from(nsec)
}

impl Stamp {
    /// The stamp of `input` now.
    pub fn of(input: &Path) -> std::io::Result<Stamp> {
        let m = std::fs::metadata(input)?;
        if !m.is_dir() {
            return Ok(Stamp {
                stat: format!(
                    "file:{}:{}:{}:{}",
                    m.len(),
                    ns(m.mtime(), m.mtime_nsec()),
                    m.ino(),
                    m.dev()
                ),
                bytes: m.len(),
            });
        }
        let mut h = Sha256::new();
        let (mut files, mut bytes) = (0u64, 0u64);
        for e in walkdir::WalkDir::new(input).sort_by_file_name() {
            let e = e.map_err(std::io::Error::other)?;
            if !e.file_type().is_file() {
                continue;
            }
            let m = e.metadata().map_err(std::io::Error::other)?;
            let rel = e.path().strip_prefix(input).unwrap_or(e.path());
            h.update(rel.as_os_str().as_bytes());
            h.update(
                format!(
                    "\0{}:{}:{}\0",
                    m.len(),
                    ns(m.mtime(), m.mtime_nsec()),
                    m.ino()
                )
                .as_bytes(),
            );
            files += 1;
            bytes = bytes.saturating_add(m.len());
        }
        Ok(Stamp {
            stat: format!("dir:{files}:{bytes}:{:x}", h.finalize()),
            bytes,
        })
    }
}

/// What the extended attribute holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StampRecord {
    digest: String,
    #[serde(flatten)]
    stamp: Stamp,
}

/// Stamps `output` as the conversion of an input with `digest` whose stat was `stamp`. Best
/// effort: a file system without user xattrs only makes the next check hash again.
pub fn record(output: &Path, digest: &str, stamp: &Stamp) {
    let rec = StampRecord {
        digest: digest.to_owned(),
        stamp: stamp.clone(),
    };
    if let Ok(v) = serde_json::to_vec(&rec) {
        if let Err(e) = xattr::set(output, XATTR, &v) {
            log::debug!("{}: no stamp ({e}); re-runs will hash", output.display());
        }
    }
}

fn stamp_record(output: &Path) -> Option<StampRecord> {
    let v = xattr::get(output, XATTR).ok()??;
    serde_json::from_slice(&v).ok()
}

/// An input that cannot be read to decide whether its output is up to date (`path`: which
/// input, for a job of several).
#[derive(Debug, thiserror::Error)]
#[error("cannot read: {}{source}", path_prefix(.path))]
pub struct CannotRead {
    pub path: Option<PathBuf>,
    #[source]
    pub source: std::io::Error,
}

/// `PATH: ` for an error line (nothing for `None`).
fn path_prefix(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| format!("{}: ", p.display()))
        .unwrap_or_default()
}

/// The verdict on an existing output.
#[derive(Debug)]
pub enum Freshness {
    /// Nothing to do: the output holds this input's conversion under these options.
    UpToDate { digest: String, bytes: u64 },
    /// Convert; `Some(reason)` when an output existed and why it is rebuilt.
    Rebuild(Option<String>),
    /// The input could not be read to decide.
    Unreadable(CannotRead),
    /// The output holds another input's conversion (batch runs never replace it silently).
    Conflict(String),
}

/// Decides whether `output` is up to date for `input` under byte-affecting `params`.
pub fn check(
    input: &Path,
    output: &Path,
    params: &BTreeMap<String, String>,
    recheck: Recheck,
) -> Freshness {
    if std::fs::symlink_metadata(output).is_err() {
        return Freshness::Rebuild(None);
    }
    let rec = match recorded(output, params) {
        Ok(r) => r,
        Err(why) => return Freshness::Rebuild(Some(why.to_string())),
    };
    let parents = &rec.parents;
    let unreadable = |source| Freshness::Unreadable(CannotRead { path: None, source });
    let now = match Stamp::of(input) {
        Ok(s) => s,
        Err(e) => return unreadable(e),
    };
    let cached = stamp_record(output)
        .filter(|r| !recheck.rehash && r.stamp == now && parents.contains(&r.digest));
    let (digest, bytes) = match cached {
        Some(r) => (r.digest, r.stamp.bytes),
        None => match meta::digest_input(input) {
            Ok((d, b)) if parents.contains(&d) => {
                record(output, &d, &now);
                (d, b)
            }
            Ok(_) => {
                let theirs = rec.input.as_deref().unwrap_or_default();
                let ours = input.display().to_string();
                if recheck.guard_source && !theirs.is_empty() && theirs != ours {
                    return Freshness::Conflict(format!(
                        "{} holds the conversion of another input, {theirs} (mirror the folders \
                         with a directory argument or --base, or replace it with --force)",
                        output.display()
                    ));
                }
                return Freshness::Rebuild(Some("the input changed".into()));
            }
            Err(e) => return unreadable(e),
        },
    };
    if recheck.verify_existing {
        if let Some(rebuild) = existing_output_fails_verify(output) {
            return rebuild;
        }
    }
    Freshness::UpToDate { digest, bytes }
}

/// `--verify-existing`: the rebuild an up-to-date output needs when its deep verify fails or it
/// has no checksums to verify; `None` when it verifies.
pub(super) fn existing_output_fails_verify(output: &Path) -> Option<Freshness> {
    match deep_verify(output) {
        Ok(v) if v.has_checksums => None,
        Ok(_) => Some(Freshness::Rebuild(Some(
            "existing output has no checksums to verify it against".into(),
        ))),
        Err(e) => Some(Freshness::Rebuild(Some(format!(
            "existing output failed verification: {}",
            super::text::one_line(&e.to_string())
        )))),
    }
}

/// What an existing output's last history row says of the conversion that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The input digests (parents).
    pub parents: Vec<String>,
    /// The input path as it was given then.
    pub input: Option<String>,
    /// An object input's stamp (ETag, size, last-modified) then.
    pub object_stamp: Option<String>,
}

/// Why an existing output does not hold the conversion asked for (so it is rebuilt).
#[derive(Debug, thiserror::Error)]
pub enum NotRecorded {
    /// The output cannot be opened as a `.tet` file.
    #[error("existing output unreadable: {0}")]
    Unreadable(#[source] TetError),
    /// The output has no footer, so no history.
    #[error("existing output has no footer")]
    NoFooter,
    /// The output's footer cannot be read.
    #[error("existing output's footer unreadable: {0}")]
    FooterUnreadable(#[source] TetError),
    /// The output was converted under other byte-affecting options.
    #[error("the options changed")]
    OptionsChanged,
    /// The output's last history row is not a conversion.
    #[error("existing output is not a conversion")]
    NotAConversion,
}

/// The last history row of `output` when it is a conversion under the same recorded settings
/// (`params`' keys that [`tet::settings::is_recorded_key`] names); otherwise why the output does not count (no file, unreadable footer, other options).
pub fn recorded(output: &Path, params: &BTreeMap<String, String>) -> Result<Recorded, NotRecorded> {
    let f = TetFile::open(output).map_err(NotRecorded::Unreadable)?;
    let footer = match f.footer() {
        Ok(Some(footer)) => footer,
        Ok(None) => return Err(NotRecorded::NoFooter),
        Err(e) => return Err(NotRecorded::FooterUnreadable(e)),
    };
    let pick = |p: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        p.iter()
            .filter(|(k, _)| tet::settings::is_recorded_key(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    // The last row made the file; earlier ones are the lineage a `.tet` input carried over.
    match footer.history.last() {
        Some(row) if row.op == "convert" && pick(&row.params) == pick(params) => Ok(Recorded {
            parents: row.parents.clone(),
            input: row.params.get("input").cloned(),
            object_stamp: row.params.get(tet::storage::OBJECT_STAMP_KEY).cloned(),
        }),
        Some(row) if row.op == "convert" => Err(NotRecorded::OptionsChanged),
        _ => Err(NotRecorded::NotAConversion),
    }
}

/// Whether `output` already holds the conversion of an input with `digest` under `params`.
pub fn up_to_date(output: &Path, digest: &str, params: &BTreeMap<String, String>) -> bool {
    recorded(output, params).is_ok_and(|r| r.parents.iter().any(|d| d == digest))
}
