//! A request with an object URL among its inputs or as its output.
//!
//! - An object input in a format the engine decodes itself (NPY/NPZ, TeaFile, Tensogram) is
//!   read with ranged requests, no spool; a prefix (a Zarr store) in place, each key an object
//!   read through [`ObjectStorage`]; any other (NetCDF, HDF5: their C libraries need a file) is
//!   downloaded into a spool folder (free space checked first; removed on success, failure and
//!   signal, and by the next run when its owner was killed). The history row names the URL
//!   and records the object's stamp (ETag, size, last-modified), never the spool path.
//! - An object output is written to a staged local file, its footer digest checked, then
//!   uploaded with a multipart upload completed only at the end; any failure or signal aborts
//!   the upload, so nothing ever appears at the output key but a whole, checked file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use tet_source::byte_source::ByteSource;
use tet_source::Importer;

use super::{open_local, Context, Input, Output, Request};
use crate::concat::OpenedInput;
use crate::control::Cancel;
use crate::format::integrity::FooterDigest;
use crate::format::TetFile;
use crate::pipeline::{
    open_selected, ConvertError, ConvertOptions, ConvertReport, DigestOf, InputDigest, Opened,
    Parent,
};
use crate::registry;
use crate::storage::{
    self, Cause, Object, ObjectStorage, RangedObject, Spool, StorageError, OBJECT_STAMP_KEY,
};

/// Runs a request with an object input or output (see the module docs).
pub(super) fn run(
    req: &Request,
    cx: &Context,
    opts: &ConvertOptions,
    started: Instant,
) -> Result<ConvertReport, ConvertError> {
    let root = cx.spool_dir.clone().unwrap_or_else(std::env::temp_dir);
    storage::clean_stale_spools(&root);
    let dst = match &req.output {
        Output::Object(url) => Some(Object::parse(url, &cx.storage)?),
        Output::File(_) => None,
    };
    // Every store of the request (clones share their store's count of retried requests).
    let mut stores: Vec<Object> = dst.iter().cloned().collect();
    let staged = match &dst {
        Some(o) => Some(Spool::for_output(
            &root,
            o.file_name().unwrap_or("out.tet"),
        )?),
        None => None,
    };
    let local_out = staged.as_ref().map_or(req.output.name(), Spool::path);
    let mut objects = Vec::with_capacity(req.inputs.len());
    for i in &req.inputs {
        let o = i.url().map(|u| Object::parse(u, &cx.storage)).transpose()?;
        stores.extend(o.iter().cloned());
        objects.push((i, o));
    }
    let report = match objects.as_slice() {
        [(one, o)] => convert_one(one, o.as_ref(), local_out, &root, cx, opts, started),
        _ => combine(&objects, local_out, &root, cx, opts, started),
    };
    let mut report = report?;
    if let Some(o) = &dst {
        publish(o, local_out, &report, cx)?;
    }
    report.retries = stores.iter().map(Object::retries).sum();
    Ok(report)
}

/// The history params that describe object inputs: their stamp, as the caller saw it or as
/// `own` says.
fn stamp_params(cx: &Context, own: Option<String>) -> BTreeMap<String, String> {
    cx.input_stamp
        .clone()
        .or(own)
        .map(|s| BTreeMap::from([(OBJECT_STAMP_KEY.to_string(), s)]))
        .unwrap_or_default()
}

/// Converts one input (an object, or a local file into an object output).
fn convert_one(
    input: &Input,
    object: Option<&Object>,
    output: &Path,
    root: &Path,
    cx: &Context,
    opts: &ConvertOptions,
    started: Instant,
) -> Result<ConvertReport, ConvertError> {
    let Some(o) = object else {
        return super::convert_local(std::slice::from_ref(input), output, opts, started);
    };
    let url = input.name();
    let (opened, stamp) = ObjectInput::open(o, root, &opts.cancel, u64::MAX)?;
    let stamp = match (&cx.input_stamp, stamp) {
        (None, None) => Some(o.stamp()?.0),
        (_, s) => s,
    };
    let input_params = stamp_params(cx, stamp);
    let (source, carried, parent, format) = match &opened {
        ObjectInput::Ranged { bytes, importer } => {
            log::debug!("{}: read by ranges as {}", url.display(), importer.name());
            let source: Arc<dyn ByteSource> = bytes.clone();
            let (source, carried) = open_selected(*importer, url, Some(source), opts)?;
            let parent = Parent {
                name: url.to_path_buf(),
                digest: DigestOf::After(ranged_digest(bytes)),
            };
            (source, carried, parent, importer.id())
        }
        ObjectInput::Store(prefix) => {
            let (source, digest) = open_store(prefix, opts)?;
            let (source, _cuts) = crate::select::apply(source, &opts.settings.select())?;
            let parent = Parent {
                name: url.to_path_buf(),
                digest: DigestOf::Beside(digest),
            };
            (source, None, parent, tet_zarr::ZarrImporter.id())
        }
        ObjectInput::Spooled(spool) => {
            let local = spool.path();
            super::check_paths(local, output, &opts.settings)?;
            let importer = registry::identify(local)?;
            let (source, carried) = open_selected(importer, local, None, opts)?;
            let parent = Parent {
                name: url.to_path_buf(),
                digest: DigestOf::File(local.to_path_buf()),
            };
            (source, carried, parent, importer.id())
        }
    };
    let opened_source = Opened {
        source: source.as_ref(),
        format,
        parents: vec![parent],
        input_params,
        carried,
        started,
    };
    let report = crate::pipeline::convert_source(opened_source, output, opts);
    drop(source);
    drop(opened);
    report
}

/// Combines inputs among which objects are (or into an object output): each object opened as
/// one input is, the spools kept until the conversion ends.
fn combine(
    inputs: &[(&Input, Option<Object>)],
    output: &Path,
    root: &Path,
    cx: &Context,
    opts: &ConvertOptions,
    started: Instant,
) -> Result<ConvertReport, ConvertError> {
    // Every input is open until the end: objects read by ranges share the part of the memory
    // budget that chunks do not take (each keeps its windows and cache within it).
    let count = inputs.iter().filter(|(_, o)| o.is_some()).count().max(1) as u64;
    let budget = opts.settings.memory_budget_bytes();
    let share = (budget - crate::format::pool_limit(budget)) / count;
    let mut held: Vec<ObjectInput> = Vec::with_capacity(inputs.len());
    let mut opened = Vec::with_capacity(inputs.len());
    for (input, o) in inputs {
        let one = match o {
            Some(o) => {
                let (i, _) = ObjectInput::open(o, root, &opts.cancel, share)?;
                let one = i.opened(input.name(), opts);
                held.push(i);
                one?
            }
            None => open_local(input.name(), opts)?,
        };
        opened.push(one);
    }
    let report = crate::concat::combine(opened, stamp_params(cx, None), output, opts, started);
    drop(held);
    report
}

/// Checks the staged output's footer digest, then uploads it with the context's metadata.
fn publish(
    o: &Object,
    staged: &Path,
    report: &ConvertReport,
    cx: &Context,
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
    let meta = cx
        .upload_metadata
        .as_ref()
        .map(|f| f(report, staged))
        .unwrap_or_default();
    o.upload(staged, &meta, &cx.cancel)
}

/// The digest of an object read by ranges: fed by the reads, the rest fetched at the end.
fn ranged_digest(bytes: &Arc<RangedObject>) -> InputDigest {
    let hashed = bytes.clone();
    Box::new(move || hashed.digest().map_err(std::io::Error::other))
}

/// The Zarr store under `prefix`, read in place (its keys through [`ObjectStorage`]), and its
/// input digest streamed from its objects as a local copy's would be.
fn open_store(
    prefix: &Object,
    opts: &ConvertOptions,
) -> Result<(Box<dyn tet_source::Source>, InputDigest), ConvertError> {
    let name = prefix.file_name().unwrap_or("data.zarr");
    let storage = ObjectStorage::new(prefix.clone()).shared();
    let source = tet_zarr::open_storage(storage, name, &opts.settings.open())?;
    let (hashed, cancel) = (prefix.clone(), opts.cancel.clone());
    let digest: InputDigest =
        Box::new(move || hashed.prefix_digest(&cancel).map_err(std::io::Error::other));
    Ok((Box::new(source), digest))
}

/// How an object input is read.
enum ObjectInput {
    /// By ranges, through `importer`.
    Ranged {
        bytes: Arc<RangedObject>,
        importer: &'static dyn Importer,
    },
    /// From a local copy.
    Spooled(Spool),
    /// The objects under a prefix, as a Zarr store read in place.
    Store(Object),
}

impl ObjectInput {
    /// Opens `o` for reading by ranges when its format allows (one HEAD and one ranged GET of
    /// its first bytes), keeping at most about `memory` bytes of it (windows and cache,
    /// [`RangedObject::with_memory`]), else downloads it into a spool folder under `root`.
    /// With it, the object's stamp (`None` for a prefix, whose HEAD finds nothing).
    fn open(
        o: &Object,
        root: &Path,
        cancel: &Cancel,
        memory: u64,
    ) -> Result<(Self, Option<String>), StorageError> {
        let info = match o.info() {
            Ok(i) => i,
            // A prefix: a Zarr store, read in place.
            Err(e) if e.is_not_found() => return Ok((Self::Store(o.clone()), None)),
            Err(e) => return Err(e),
        };
        let stamp = Some(info.stamp());
        let ranged = RangedObject::new(o.clone(), info, cancel.clone()).with_memory(memory);
        let head = match ranged.head(registry::HEAD_BYTES) {
            Ok(h) => h,
            // Answered 200 with the whole object, not 206: a server without ranges.
            Err(_) if o.ignores_ranges() => {
                log::debug!("{}: the server ignores ranges, spooled", o.url());
                return Ok((Self::Spooled(o.download(root, cancel)?), stamp));
            }
            Err(e) => return Err(e),
        };
        let input = match registry::identify_head(Path::new(o.url()), &head) {
            Ok(importer) if importer.opens_bytes() => Self::Ranged {
                bytes: Arc::new(ranged),
                importer,
            },
            _ => Self::Spooled(o.download(root, cancel)?),
        };
        Ok((input, stamp))
    }

    /// The input opened for a combined conversion, named `url`: read by ranges (its digest fed
    /// by the reads, asked for at the end), from its spooled copy (hashed beside the
    /// conversion, as a local file), or a Zarr store in place.
    fn opened(&self, url: &Path, opts: &ConvertOptions) -> Result<OpenedInput, ConvertError> {
        let named =
            |e: &dyn std::fmt::Display| ConvertError::Refused(format!("{}: {e}", url.display()));
        let parent = |digest| Parent {
            name: url.to_path_buf(),
            digest,
        };
        match self {
            Self::Ranged { bytes, importer } => {
                let source: Arc<dyn ByteSource> = bytes.clone();
                // A `.tet` input hands its footer on, from the source opened here.
                let (source, footer) = crate::tet_input::open_input(
                    *importer,
                    url,
                    Some(source),
                    &opts.settings.open(),
                )
                .map_err(|e| named(&e))?;
                Ok(OpenedInput {
                    parent: parent(DigestOf::After(ranged_digest(bytes))),
                    importer: *importer,
                    source,
                    footer,
                })
            }
            Self::Spooled(spool) => {
                let mut opened = open_local(spool.path(), opts)?;
                opened.parent.name = url.to_path_buf();
                Ok(opened)
            }
            Self::Store(prefix) => {
                let (source, digest) = open_store(prefix, opts).map_err(|e| named(&e))?;
                Ok(OpenedInput {
                    parent: parent(DigestOf::Beside(digest)),
                    importer: &tet_zarr::ZarrImporter,
                    source,
                    footer: None,
                })
            }
        }
    }
}
