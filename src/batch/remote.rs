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
//!   changed stamp rebuilds (object inputs are never hashed just to decide). A combined job
//!   (`--concat`) with an object among its inputs or as its output: the stamp of the
//!   combination (the inputs' stamps, in any order, hashed: `input_object` of the history
//!   row, or the upload's `tet-input-stamp`); `--rehash` compares the inputs' digests.
//! - The conversion itself is the job's request ([`tet::request::run`]: objects read by
//!   ranges, in place or spooled, an object output staged, checked and uploaded); this module
//!   gives it the stamp its check saw and the metadata the upload carries.
//! - Listing a prefix for a batch (`walk`): objects matching the selection, and `*.zarr`
//!   prefixes taken whole as one input each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::fresh::{recorded, Freshness, Recorded};
use super::inputs::{Input, Selection};
use super::ledger::Status;
use super::outcome::{failed_row, record_converted, Outcome, StageHook};
use super::wire::{Recheck, WireJob};
use tet::control::Cancel;
use tet::meta;
use tet::registry;
use tet::request::{Context, Request};
use tet::storage::{self, Object, Spool, StorageError};

/// Object metadata keys of an uploaded output (S3 lower-cases them).
const META_DIGEST: &str = "tet-input-digest";
const META_STAMP: &str = "tet-input-stamp";
const META_PARAMS: &str = "tet-params";
/// The input an uploaded output was converted from (its URL or path, when it is printable
/// ASCII, which object metadata takes).
const META_INPUT: &str = "tet-input";

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
        let Some(digest) = rec.parents.first().cloned() else {
            return Fresh::Rebuild(Rebuild::Input);
        };
        let unchanged = if self.recheck.rehash {
            match self.input_digest() {
                Ok((d, _)) => d == digest,
                Err(e) => return Fresh::Rebuild(Rebuild::Unreadable(e)),
            }
        } else {
            rec.object_stamp.as_deref() == Some(self.stamp.0.as_str())
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

    /// What the output records (`None`: there is none); `Err` when it is rebuilt anyway. Its
    /// one parent is the digest compared: an object output's metadata, a combination's
    /// parents combined ([`combined_digest`]).
    fn recorded(&self) -> Result<Option<Recorded>, Rebuild> {
        if let Some(o) = self.dst {
            let Some((_, meta)) = o.metadata().map_err(Rebuild::Unreadable)? else {
                return Ok(None);
            };
            if meta.get(META_PARAMS) != Some(&params_digest(self.params)) {
                return Err(Rebuild::Options);
            }
            return Ok(Some(Recorded {
                parents: meta.get(META_DIGEST).cloned().into_iter().collect(),
                object_stamp: meta.get(META_STAMP).cloned(),
                input: meta.get(META_INPUT).cloned(),
            }));
        }
        if std::fs::symlink_metadata(self.output).is_err() {
            return Ok(None);
        }
        let mut rec =
            recorded(self.output, self.params).map_err(|e| Rebuild::Recorded(e.to_string()))?;
        rec.parents = match self.all.is_empty() {
            true => rec.parents.into_iter().take(1).collect(),
            false => vec![combined_digest(&rec.parents)],
        };
        Ok(Some(rec))
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
    req: &Request,
    cx: Context,
    stage: StageHook<'_>,
    out: Outcome,
) -> Outcome {
    let root = job.storage.spool_root();
    storage::clean_stale_spools(&root);
    let (src, dst) = match (object_of(input, job), object_of(output, job)) {
        (Ok(s), Ok(d)) => (s, d),
        (Err(e), _) | (_, Err(e)) => return failed(out, input, &e),
    };
    let objects = Objects {
        job,
        input,
        output,
        src,
        dst,
        root,
        all: Vec::new(),
    };
    objects.run_checked(req, cx, stage, out)
}

/// Runs a combined job with an object input or output (see the module docs): `inputs` are the
/// request's, the row already names them.
pub fn execute_combined(
    job: &WireJob,
    inputs: &[PathBuf],
    output: &Path,
    req: &Request,
    cx: Context,
    stage: StageHook<'_>,
    out: Outcome,
) -> Outcome {
    let Some(first) = inputs.first() else {
        return failed_row(out, "--concat needs at least two inputs".into());
    };
    let root = job.storage.spool_root();
    storage::clean_stale_spools(&root);
    let mut all = Vec::with_capacity(inputs.len());
    for p in inputs {
        match object_of(p, job) {
            Ok(o) => all.push((p.clone(), o)),
            Err(e) => return failed(out, p, &e),
        }
    }
    let dst = match object_of(output, job) {
        Ok(d) => d,
        Err(e) => return failed(out, first, &e),
    };
    let objects = Objects {
        job,
        input: first,
        output,
        src: all[0].1.clone(),
        dst,
        root,
        all,
    };
    objects.run_checked(req, cx, stage, out)
}

/// A job's objects: its input (the first of a combination), output and their objects, the
/// spool folder, and every input of a combined job (empty for one input).
struct Objects<'a> {
    job: &'a WireJob,
    input: &'a Path,
    output: &'a Path,
    src: Option<Object>,
    dst: Option<Object>,
    root: PathBuf,
    all: Vec<(PathBuf, Option<Object>)>,
}

impl Objects<'_> {
    /// Requests to the stores of the job retried so far (clones share their store's count).
    fn retries(&self) -> u64 {
        let all = self.all.iter().filter_map(|(_, o)| o.as_ref());
        // A combination's first input is among `all`.
        let src = self.src.iter().filter(|_| self.all.is_empty());
        src.chain(self.dst.iter())
            .chain(all)
            .map(Object::retries)
            .sum()
    }

    /// The up-to-date check, then the conversion.
    fn run_checked(
        self,
        req: &Request,
        cx: Context,
        stage: StageHook<'_>,
        out: Outcome,
    ) -> Outcome {
        let mut out = self.checked(req, cx, stage, out);
        out.row.retries = Some(out.row.retries.unwrap_or(0) + self.retries());
        out
    }

    fn checked(&self, req: &Request, cx: Context, stage: StageHook<'_>, out: Outcome) -> Outcome {
        let (input, all) = (self.input, self.all.as_slice());
        let stamp = if all.is_empty() {
            input_stamp(input, self.src.as_ref())
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
        let params = req.settings.recorded_params();
        let mut rebuild = None;
        if !self.job.recheck.force {
            let check = Check {
                input,
                output: self.output,
                src: self.src.as_ref(),
                dst: self.dst.as_ref(),
                params: &params,
                stamp: &stamp,
                recheck: self.job.recheck,
                root: &self.root,
                cancel: &cx.cancel,
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
        let bytes = stamp.1;
        let cx = self.context(cx, stamp.0, params);
        let mut out = self.convert(req, cx, stage, out, rebuild);
        // A combination's bytes in: the inputs' total (their stamps').
        if !all.is_empty() && out.row.status == Some(Status::Ok) {
            out.row.bytes_in = Some(bytes);
        }
        out
    }

    /// The job's context for the request: the stamp its up-to-date check saw, recorded as
    /// the object inputs' (`input_object`), and the metadata an object output carries for
    /// the next run's check (one HEAD, no GET).
    fn context(&self, mut cx: Context, stamp: String, params: BTreeMap<String, String>) -> Context {
        let combined = !self.all.is_empty();
        if combined || self.src.is_some() {
            cx.input_stamp = Some(stamp.clone());
        }
        if self.dst.is_some() {
            let input = self.input.display().to_string();
            cx.upload_metadata = Some(std::sync::Arc::new(move |r, staged| {
                let digest = match combined {
                    // What the output records as its input digest: the parents', combined.
                    true => combined_digest(
                        &recorded(staged, &params)
                            .map(|r| r.parents)
                            .unwrap_or_default(),
                    ),
                    false => r.input_digest.clone(),
                };
                let mut meta = storage::UploadMetadata::new();
                meta.insert(META_DIGEST.into(), digest);
                meta.insert(META_STAMP.into(), stamp.clone());
                meta.insert(META_PARAMS.into(), params_digest(&params));
                if input.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
                    meta.insert(META_INPUT.into(), input.clone());
                }
                meta
            }));
        }
        cx
    }

    /// Converts past the up-to-date check: [`tet::request::run`], the output's folder made
    /// first (`--make-dirs`) when it is local.
    fn convert(
        &self,
        req: &Request,
        cx: Context,
        stage: StageHook<'_>,
        mut out: Outcome,
        rebuild: Option<Rebuild>,
    ) -> Outcome {
        let input = self.input;
        if self.src.is_none() {
            if let Ok(imp) = registry::identify(input) {
                out.row.format = Some(imp.id().to_owned());
                stage(imp.name());
            }
        }
        if let (None, Some(dir)) = (&self.dst, self.output.parent()) {
            if self.job.make_dirs && !dir.as_os_str().is_empty() {
                if let Err(e) = std::fs::create_dir_all(dir) {
                    return failed_text(
                        out,
                        input,
                        format!("cannot create {}: {e}", dir.display()),
                    );
                }
            }
        }
        log::info!(
            "{} -> {}: converting",
            input.display(),
            self.output.display()
        );
        let r = match tet::request::run(req, &cx) {
            Ok(r) => r,
            Err(e) => {
                return match e.interrupted_by() {
                    Some(sig) => interrupted(out, sig),
                    None => failed_text(out, input, e.to_string()),
                }
            }
        };
        out.row.retries = Some(r.retries);
        let rebuild = rebuild.map(|why| why.to_string());
        record_converted(&mut out, &r, rebuild, self.job.want_report);
        if let (Some(n), Some(dim), false) = (
            out.notes.first_mut(),
            &req.settings.concat,
            self.all.is_empty(),
        ) {
            *n = format!("combined along {dim}: {n}");
        }
        out
    }
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
    if names_a_zarr_store(base, &listed) {
        // The prefix is itself a Zarr store (`s3://b/x.zarr/`, as a local `x.zarr` folder is):
        // one input, keyed by its last segment, not the store's own keys (none is an input).
        let name = base.rsplit('/').next().unwrap_or("input").to_string();
        out.push(Input {
            key: PathBuf::from(name),
            path: PathBuf::from(format!("{base}/")),
        });
        return Ok(());
    }
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

/// Whether a listed prefix is one Zarr store: its name ends in `.zarr`, or its top level holds a
/// store's metadata (`zarr.json`, `.zgroup`, `.zarray`).
fn names_a_zarr_store(base: &str, listed: &[storage::Listed]) -> bool {
    base.rsplit('/')
        .next()
        .is_some_and(|n| n.ends_with(".zarr"))
        || listed
            .iter()
            .any(|l| matches!(l.relative.as_str(), "zarr.json" | ".zgroup" | ".zarray"))
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
