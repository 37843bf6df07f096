//! A job whose input or output is an object URL ([`tet::storage`]).
//!
//! - An object input in a format the engine decodes itself (NPY/NPZ, TeaFile, Tensogram) is
//!   read with ranged requests, no spool (`input`). Any other (NetCDF, HDF5: their C libraries
//!   need a file) is downloaded into a spool folder under `--spool-dir` (free space checked
//!   first; removed on success, failure and signal, and by the next run when its owner was
//!   killed); a prefix (a Zarr store) is downloaded object by object. The history row names the
//!   URL and records the object's stamp (ETag, size, last-modified), never the spool path.
//! - An object output is written to a staged local file, its footer digest checked, then
//!   uploaded with a multipart upload completed only at the end; any failure or signal aborts
//!   the upload, so nothing ever appears at the output key but a whole, checked file. The upload
//!   carries the input's digest and stamp and a digest of the byte-affecting options as object
//!   metadata, which is what the next run's up-to-date check reads (one HEAD, no GET).
//! - Up to date: the output exists and records the same options and the same input stamp. A
//!   changed stamp rebuilds (object inputs are never hashed just to decide).
//! - Listing a prefix for a batch (`walk`): objects matching the selection, and `*.zarr`
//!   prefixes taken whole as one input each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::fresh::Freshness;
use super::inputs::{Input, Selection};
use super::job::{failed_row, record_converted, Outcome, Recheck, StageHook, WireJob, WirePath};
use super::ledger::Status;
use tet::control::Cancel;
use tet::format::integrity::FooterDigest;
use tet::format::TetFile;
use tet::meta;
use tet::pipeline::{convert, ConvertError, ConvertOptions};
use tet::registry;
use tet::storage::{self, Cause, Object, Origin, Spool, StorageError, OBJECT_STAMP_KEY};

mod combined;
mod input;
pub use combined::execute_combined;
use input::ObjectInput;

/// Object metadata keys of an uploaded output (S3 lower-cases them).
const META_DIGEST: &str = "tet-input-digest";
const META_STAMP: &str = "tet-input-stamp";
const META_PARAMS: &str = "tet-params";
/// The input an uploaded output was converted from (its URL or path, when it is printable
/// ASCII, which object metadata takes).
const META_INPUT: &str = "tet-input";

/// The storage settings of a job: `--storage-option` pairs and `--spool-dir`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireStorage {
    pub options: storage::Options,
    pub spool_dir: Option<WirePath>,
}

impl WireStorage {
    /// Where downloads and staged outputs go: `--spool-dir`, else `$TMPDIR`.
    fn spool_root(&self) -> PathBuf {
        self.spool_dir
            .as_ref()
            .and_then(|p| p.path().ok())
            .unwrap_or_else(std::env::temp_dir)
    }
}

/// A digest of the byte-affecting options, as stored with an uploaded output.
fn params_digest(params: &BTreeMap<String, String>) -> String {
    let text = serde_json::to_string(params).unwrap_or_default();
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

fn object_of(p: &Path, job: &WireJob) -> Result<Option<Object>, StorageError> {
    if !storage::is_url(p) {
        return Ok(None);
    }
    let url = p.to_string_lossy();
    Object::parse(&url, &job.storage.options).map(Some)
}

/// Every input of a combined job (`--concat`), in the given order, with its object when it is
/// a URL; empty for a job of one input.
type AllInputs = [(PathBuf, Option<Object>)];

/// The stamp of a combination of inputs from theirs (in any order: the combination puts the
/// inputs in the order of their coordinate), and their total size.
fn combined_stamp(stamps: &[(String, u64)]) -> (String, u64) {
    let mut sorted: Vec<&str> = stamps.iter().map(|s| s.0.as_str()).collect();
    sorted.sort_unstable();
    let h = Sha256::digest(sorted.join("\n").as_bytes());
    let bytes = stamps.iter().fold(0u64, |t, s| t.saturating_add(s.1));
    (format!("concat:{}:{h:x}", stamps.len()), bytes)
}

/// What an output of a combination of inputs records as its input digest: the inputs' digests
/// (the history row's parents) in any order, hashed.
fn combined_digest(parents: &[String]) -> String {
    let mut sorted: Vec<&str> = parents.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    format!("concat:{:x}", Sha256::digest(sorted.join("\n").as_bytes()))
}

/// The input's stamp and size: an object's (or a prefix's) stat, or a local file's.
fn input_stamp(input: &Path, src: Option<&Object>) -> Result<(String, u64), StorageError> {
    match src {
        Some(o) => o.stamp(),
        None => super::fresh::Stamp::of(input)
            .map(|s| (s.stat, s.bytes))
            .map_err(|source| StorageError::Local {
                path: input.to_path_buf(),
                source,
            }),
    }
}

/// Why an existing output is converted again.
#[derive(Debug, thiserror::Error)]
enum Rebuild {
    #[error("the options changed (or it was not written by tet-convert)")]
    Options,
    #[error("the input changed")]
    Input,
    /// The output object's metadata could not be read.
    #[error(transparent)]
    Unreadable(StorageError),
    /// What the local output's footer says ([`super::recorded`]).
    #[error("{0}")]
    Recorded(String),
    /// `--verify-existing` found the output damaged (what the deep verify said).
    #[error("{0}")]
    Damaged(String),
}

/// What an existing output records of the conversion that made it.
struct Recorded {
    digest: Option<String>,
    stamp: Option<String>,
    /// The input it was converted from, when recorded.
    input: Option<String>,
}

/// What is up to date when: the existing output, the input and the options of the job.
struct Check<'a> {
    input: &'a Path,
    output: &'a Path,
    src: Option<&'a Object>,
    dst: Option<&'a Object>,
    params: &'a BTreeMap<String, String>,
    stamp: &'a (String, u64),
    recheck: Recheck,
    root: &'a Path,
    cancel: &'a Cancel,
    /// Every input of a combined job (empty for one input): the recorded digest is then
    /// [`combined_digest`] of the parents.
    all: &'a AllInputs,
}

/// Whether an output is rebuilt.
enum Fresh {
    /// It records this input digest and the input is that many bytes.
    UpToDate(String, u64),
    /// There is none.
    Absent,
    Rebuild(Rebuild),
    /// It holds the conversion of another input (a batch run never replaces it silently).
    Conflict(String),
}

impl Check<'_> {
    /// As [`super::fresh::check`] decides for local files: the output records the same options
    /// and the input's stamp (`--rehash`: the input's digest, an object input streamed once,
    /// nothing spooled); `--verify-existing`: it also deep-verifies; in a batch run an output
    /// made from another input is a conflict.
    fn decide(&self) -> Fresh {
        let rec = match self.recorded() {
            Ok(Some(r)) => r,
            Ok(None) => return Fresh::Absent,
            Err(why) => return Fresh::Rebuild(why),
        };
        let Some(digest) = rec.digest else {
            return Fresh::Rebuild(Rebuild::Input);
        };
        let unchanged = if self.recheck.rehash {
            match self.input_digest() {
                Ok((d, _)) => d == digest,
                Err(e) => return Fresh::Rebuild(Rebuild::Unreadable(e)),
            }
        } else {
            rec.stamp.as_deref() == Some(self.stamp.0.as_str())
        };
        if !unchanged {
            let ours = self.input.display().to_string();
            return match rec.input {
                Some(theirs)
                    if self.recheck.guard_source && self.all.is_empty() && theirs != ours =>
                {
                    Fresh::Conflict(format!(
                        "{} holds the conversion of another input, {theirs} (mirror the \
                         folders with a directory argument or --base, or replace it with --force)",
                        self.output.display()
                    ))
                }
                _ => Fresh::Rebuild(Rebuild::Input),
            };
        }
        if self.recheck.verify_existing {
            if let Some(why) = self.fails_verify() {
                return Fresh::Rebuild(Rebuild::Damaged(why));
            }
        }
        Fresh::UpToDate(digest, self.stamp.1)
    }

    /// What the output records (`None`: there is none); `Err` when it is rebuilt anyway.
    fn recorded(&self) -> Result<Option<Recorded>, Rebuild> {
        if let Some(o) = self.dst {
            let Some((_, meta)) = o.metadata().map_err(Rebuild::Unreadable)? else {
                return Ok(None);
            };
            if meta.get(META_PARAMS) != Some(&params_digest(self.params)) {
                return Err(Rebuild::Options);
            }
            return Ok(Some(Recorded {
                digest: meta.get(META_DIGEST).cloned(),
                stamp: meta.get(META_STAMP).cloned(),
                input: meta.get(META_INPUT).cloned(),
            }));
        }
        if std::fs::symlink_metadata(self.output).is_err() {
            return Ok(None);
        }
        let rec = super::recorded(self.output, self.params)
            .map_err(|e| Rebuild::Recorded(e.to_string()))?;
        let digest = match self.all.is_empty() {
            true => rec.parents.first().cloned(),
            false => Some(combined_digest(&rec.parents)),
        };
        Ok(Some(Recorded {
            digest,
            stamp: rec.object_stamp,
            input: rec.input,
        }))
    }

    /// The input's digest and size, read now (`--rehash`); of a combination, every input's,
    /// combined.
    fn input_digest(&self) -> Result<(String, u64), StorageError> {
        let one = |input: &Path, src: Option<&Object>| match src {
            Some(o) => o.digest(self.cancel),
            None => meta::digest_input(input).map_err(|source| StorageError::Local {
                path: input.to_path_buf(),
                source,
            }),
        };
        if self.all.is_empty() {
            return one(self.input, self.src);
        }
        let mut digests = Vec::with_capacity(self.all.len());
        for (input, src) in self.all {
            digests.push(one(input, src.as_ref())?.0);
        }
        Ok((combined_digest(&digests), self.stamp.1))
    }

    /// Why the existing output fails a deep verify (`--verify-existing`), `None` when it
    /// passes; an object output is downloaded into a spool folder for it.
    fn fails_verify(&self) -> Option<String> {
        let spool = match self.dst.map(|o| o.download(self.root, self.cancel)) {
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => return Some(format!("existing output unreadable: {}", e.cause())),
            None => None,
        };
        let local = spool.as_ref().map_or(self.output, Spool::path);
        match super::fresh::existing_output_fails_verify(local)? {
            Freshness::Rebuild(Some(why)) => Some(why.to_string()),
            _ => Some("existing output failed verification".into()),
        }
    }
}

/// Runs one job with an object input or output (see the module docs).
pub fn execute(
    job: &WireJob,
    input: &Path,
    output: &Path,
    opts: ConvertOptions,
    stage: StageHook<'_>,
    out: Outcome,
) -> Outcome {
    let root = job.storage.spool_root();
    storage::clean_stale_spools(&root);
    let (src, dst) = match (object_of(input, job), object_of(output, job)) {
        (Ok(s), Ok(d)) => (s, d),
        (Err(e), _) | (_, Err(e)) => return failed(out, input, &e),
    };
    // Every store of the job (clones share their store's count of retried requests).
    let stores: Vec<Object> = src.iter().chain(dst.iter()).cloned().collect();
    let mut out = run_checked(job, input, output, opts, stage, out, src, dst, root, &[]);
    out.row.retries = Some(stores.iter().map(Object::retries).sum());
    out
}

/// [`execute`] once the URLs are parsed: the up-to-date check, then the conversion.
#[allow(clippy::too_many_arguments)]
fn run_checked(
    job: &WireJob,
    input: &Path,
    output: &Path,
    opts: ConvertOptions,
    stage: StageHook<'_>,
    out: Outcome,
    src: Option<Object>,
    dst: Option<Object>,
    root: PathBuf,
    all: &AllInputs,
) -> Outcome {
    let stamp = if all.is_empty() {
        input_stamp(input, src.as_ref())
    } else {
        all.iter()
            .map(|(p, o)| input_stamp(p, o.as_ref()))
            .collect::<Result<Vec<_>, _>>()
            .map(|s| combined_stamp(&s))
    };
    let stamp = match stamp {
        Ok(s) => s,
        Err(e) => return failed(out, input, &e),
    };
    let params = opts.settings.recorded_params();
    let mut rebuild = None;
    if !job.recheck.force {
        let check = Check {
            input,
            output,
            src: src.as_ref(),
            dst: dst.as_ref(),
            params: &params,
            stamp: &stamp,
            recheck: job.recheck,
            root: &root,
            cancel: &opts.cancel,
            all,
        };
        match check.decide() {
            Fresh::UpToDate(digest, bytes) => {
                let mut out = out;
                out.row.status = Some(Status::Skipped);
                out.row.reason = Some("up to date".into());
                out.row.input_digest = Some(digest);
                out.row.bytes_in = Some(bytes);
                return out;
            }
            Fresh::Absent => {}
            Fresh::Rebuild(why) => rebuild = Some(why),
            Fresh::Conflict(why) => return failed_row(out, why),
        }
    }
    let staged = Staged {
        job,
        input,
        output,
        src,
        dst,
        root,
        stamp,
        params,
    };
    if all.is_empty() {
        staged.run(opts, stage, out, rebuild)
    } else {
        staged.run_combined(all, opts, stage, out, rebuild)
    }
}

/// A job past its up-to-date check.
struct Staged<'a> {
    job: &'a WireJob,
    input: &'a Path,
    output: &'a Path,
    src: Option<Object>,
    dst: Option<Object>,
    root: PathBuf,
    stamp: (String, u64),
    params: BTreeMap<String, String>,
}

impl Staged<'_> {
    fn run(
        self,
        mut opts: ConvertOptions,
        stage: StageHook<'_>,
        mut out: Outcome,
        rebuild: Option<Rebuild>,
    ) -> Outcome {
        let input = self.input;
        let object_in = match &self.src {
            Some(o) => match ObjectInput::open(o, &self.root, &opts.cancel) {
                Ok(i) => Some(i),
                Err(e) => return failed(out, input, &e),
            },
            None => None,
        };
        let spool = object_in.as_ref().and_then(ObjectInput::spool);
        let local_in = spool.map_or(input, Spool::path);
        let importer = object_in.as_ref().and_then(ObjectInput::importer);
        if let Some(imp) = importer.map_or_else(|| registry::identify(local_in).ok(), Some) {
            out.row.format = Some(imp.id().to_owned());
            stage(imp.name());
        }
        let staged_out = match self.staged_output() {
            Ok(s) => s,
            Err(NoStage::Storage(e)) => return failed(out, input, &e),
            Err(NoStage::Dir(why)) => return failed_text(out, input, why),
        };
        let local_out = staged_out.as_ref().map_or(self.output, Spool::path);
        if let Some(o) = &self.src {
            let mut params = BTreeMap::new();
            params.insert(OBJECT_STAMP_KEY.to_string(), self.stamp.0.clone());
            opts.input_origin = Some(Origin {
                name: o.url().to_string(),
                params,
            });
        }
        log::info!(
            "{} -> {}: converting",
            input.display(),
            self.output.display()
        );
        let converted = object_in
            .as_ref()
            .and_then(|i| i.convert(input, local_out, &opts));
        let r = match converted.unwrap_or_else(|| convert(local_in, local_out, &opts)) {
            Ok(r) => r,
            Err(ConvertError::Interrupted(sig)) => return interrupted(out, sig),
            Err(e) => return failed_text(out, input, e.to_string()),
        };
        drop(object_in);
        if let Some(o) = &self.dst {
            if let Err(e) = self.publish(o, local_out, &r.input_digest, &opts) {
                return match e {
                    StorageError::Interrupted { signal, .. } => interrupted(out, signal),
                    e => failed(out, input, &e),
                };
            }
        }
        let rebuild = rebuild.map(|why| why.to_string());
        record_converted(&mut out, &r, rebuild, self.job.want_report);
        out
    }

    /// Where the conversion writes: a staged file in a spool folder for an object output,
    /// else the output itself (its folder made with `--make-dirs`).
    fn staged_output(&self) -> Result<Option<Spool>, NoStage> {
        if let Some(o) = &self.dst {
            let name = o.file_name().unwrap_or("out.tet");
            return Spool::for_output(&self.root, name)
                .map(Some)
                .map_err(NoStage::Storage);
        }
        if let Some(dir) = self.output.parent().filter(|d| !d.as_os_str().is_empty()) {
            if self.job.make_dirs {
                if let Err(e) = std::fs::create_dir_all(dir) {
                    return Err(NoStage::Dir(format!(
                        "cannot create {}: {e}",
                        dir.display()
                    )));
                }
            }
        }
        Ok(None)
    }

    /// Checks the staged output's footer digest, then uploads it with the up-to-date metadata.
    fn publish(
        &self,
        o: &Object,
        staged: &Path,
        digest: &str,
        opts: &ConvertOptions,
    ) -> Result<(), StorageError> {
        let f = TetFile::open(staged).map_err(|e| StorageError::Remote {
            url: o.url().to_string(),
            cause: Cause::BadStagedOutput(format!("unreadable: {e}")),
            retries: 0,
            source: Some(Box::new(e)),
        })?;
        match f.footer_digest() {
            FooterDigest::Ok(_) | FooterDigest::Absent => {}
            other => {
                let cause = Cause::BadStagedOutput(format!("footer digest {other:?}"));
                return Err(StorageError::of_url(o.url(), cause));
            }
        }
        drop(f);
        // Uploads to this key that killed runs left behind are aborted first.
        match o.abort_stale_uploads() {
            Ok(0) => {}
            Ok(n) => log::info!("{}: aborted {n} stale upload(s)", o.url()),
            Err(e) => log::warn!("{e}"),
        }
        let mut meta = storage::UploadMetadata::new();
        meta.insert(META_DIGEST.into(), digest.to_string());
        meta.insert(META_STAMP.into(), self.stamp.0.clone());
        meta.insert(META_PARAMS.into(), params_digest(&self.params));
        let input = self.input.display().to_string();
        if input.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
            meta.insert(META_INPUT.into(), input);
        }
        o.upload(staged, &meta, &opts.cancel)
    }
}

/// Why there is no place to write the output.
enum NoStage {
    Storage(StorageError),
    /// Its folder could not be made.
    Dir(String),
}

fn interrupted(mut out: Outcome, sig: i32) -> Outcome {
    out.row.status = Some(Status::Interrupted);
    out.row.reason = Some(format!("stopped by {}", super::signals::name(sig)));
    out.interrupted_by = Some(sig);
    out
}

/// A failed row; the reason drops a leading `INPUT: ` (the row and the printed line name it).
fn failed_text(out: Outcome, input: &Path, reason: String) -> Outcome {
    let prefix = format!("{}: ", input.display());
    let reason = reason
        .strip_prefix(&prefix)
        .map_or(reason.clone(), str::to_string);
    failed_row(out, reason)
}

fn failed(out: Outcome, input: &Path, e: &StorageError) -> Outcome {
    if let StorageError::Interrupted { signal, .. } = e {
        return interrupted(out, *signal);
    }
    failed_text(out, input, e.to_string())
}

/// The inputs under an object prefix `url` (a batch argument): objects whose key relative to
/// the prefix matches `sel`, and `*.zarr` prefixes as one input each; keyed by that relative key.
pub fn walk(
    url: &Path,
    sel: &Selection,
    options: &storage::Options,
    out: &mut Vec<Input>,
) -> Result<(), StorageError> {
    let text = url.to_string_lossy();
    let prefix = Object::parse(&text, options)?;
    let listed = prefix.list()?;
    if listed.is_empty() {
        // One object named directly: keyed by its name.
        prefix.info()?;
        let name = prefix.file_name().unwrap_or("input").to_string();
        out.push(Input {
            key: PathBuf::from(name),
            path: url.to_path_buf(),
        });
        return Ok(());
    }
    let base = text.trim_end_matches('/');
    let mut stores = std::collections::BTreeSet::new();
    for l in listed {
        let parts: Vec<&str> = l.relative.split('/').collect();
        if parts.iter().any(|p| p.starts_with('.') && !is_zarr_meta(p)) {
            continue;
        }
        if let Some(i) = parts.iter().position(|p| p.ends_with(".zarr")) {
            stores.insert(parts[..=i].join("/"));
            continue;
        }
        if sel.takes(Path::new(&l.relative)) {
            out.push(Input {
                key: PathBuf::from(&l.relative),
                path: PathBuf::from(format!("{base}/{}", l.relative)),
            });
        }
    }
    for s in stores {
        out.push(Input {
            key: PathBuf::from(&s),
            path: PathBuf::from(format!("{base}/{s}/")),
        });
    }
    Ok(())
}

fn is_zarr_meta(name: &str) -> bool {
    matches!(name, ".zarray" | ".zgroup" | ".zattrs" | ".zmetadata")
}

/// `--report URL`: the ledger is written to a local file in a spool folder and uploaded when the
/// run ends, as one object per run (appending to an object is not possible): `URL` itself, or
/// `URL<run id>.jsonl` when `URL` ends in `/`.
pub struct LedgerObject {
    url: String,
    options: storage::Options,
    spool: Spool,
}

impl LedgerObject {
    /// The local file the run's ledger goes to until [`LedgerObject::publish`].
    pub fn open(
        url: &Path,
        options: &storage::Options,
        spool_dir: Option<&Path>,
    ) -> Result<LedgerObject, StorageError> {
        let url = url.to_string_lossy().into_owned();
        // Parsed now, so that a wrong URL or option fails before the run.
        Object::parse(&url, options)?;
        let root = spool_dir.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let spool = Spool::for_output(&root, "ledger.jsonl")?;
        Ok(LedgerObject {
            url,
            options: options.clone(),
            spool,
        })
    }

    /// The local ledger file.
    pub fn local(&self) -> &Path {
        self.spool.path()
    }

    /// Uploads the ledger of run `run_id`; the object's URL.
    pub fn publish(&self, run_id: &str) -> Result<String, StorageError> {
        let url = if self.url.ends_with('/') {
            format!("{}{run_id}.jsonl", self.url)
        } else {
            self.url.clone()
        };
        let object = Object::parse(&url, &self.options)?;
        let cancel = tet::control::Cancel::never();
        object.upload(self.local(), &storage::UploadMetadata::new(), &cancel)?;
        Ok(url)
    }
}
