//! The object input of a job, as the conversion reads it: by ranges ([`RangedObject`]) when its
//! format is one the engine decodes itself (the importer reads a byte source: NPY/NPZ, TeaFile,
//! Tensogram); a prefix (a Zarr store) in place, each key an object read through
//! [`ObjectStorage`]; else downloaded into a spool folder (NetCDF and HDF5, whose C libraries
//! need a file; a server that ignores ranges).

use std::path::Path;
use std::sync::Arc;

use tet_source::byte_source::ByteSource;
use tet_source::Importer;

use tet::concat::OpenedInput;
use tet::control::Cancel;
use tet::pipeline::{ConvertError, ConvertOptions, ConvertReport, DigestOf, InputDigest};
use tet::registry;
use tet::storage::{Object, ObjectStorage, RangedObject, Spool, StorageError};

/// How an object input is read.
pub(super) enum ObjectInput {
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
    /// its first bytes), else downloads it into a spool folder under `root`.
    pub(super) fn open(o: &Object, root: &Path, cancel: &Cancel) -> Result<Self, StorageError> {
        Self::open_within(o, root, cancel, u64::MAX)
    }

    /// [`ObjectInput::open`], an object read by ranges keeping at most about `memory` bytes of
    /// it (windows and cache, [`RangedObject::with_memory`]): one of many inputs combined.
    pub(super) fn open_within(
        o: &Object,
        root: &Path,
        cancel: &Cancel,
        memory: u64,
    ) -> Result<Self, StorageError> {
        let info = match o.info() {
            Ok(i) => i,
            // A prefix: a Zarr store, read in place.
            Err(e) if e.is_not_found() => return Ok(Self::Store(o.clone())),
            Err(e) => return Err(e),
        };
        let ranged = RangedObject::new(o.clone(), info, cancel.clone()).with_memory(memory);
        let head = match ranged.head(registry::HEAD_BYTES) {
            Ok(h) => h,
            // Answered 200 with the whole object, not 206: a server without ranges.
            Err(_) if o.ignores_ranges() => {
                log::debug!("{}: the server ignores ranges, spooled", o.url());
                return o.download(root, cancel).map(Self::Spooled);
            }
            Err(e) => return Err(e),
        };
        match registry::identify_head(Path::new(o.url()), &head) {
            Ok(importer) if importer.opens_bytes() => Ok(Self::Ranged {
                bytes: Arc::new(ranged),
                importer,
            }),
            _ => o.download(root, cancel).map(Self::Spooled),
        }
    }

    /// The local copy, when the input was spooled.
    pub(super) fn spool(&self) -> Option<&Spool> {
        match self {
            Self::Spooled(s) => Some(s),
            Self::Ranged { .. } | Self::Store(_) => None,
        }
    }

    /// The importer, when the input is read by ranges.
    pub(super) fn importer(&self) -> Option<&'static dyn Importer> {
        match self {
            Self::Ranged { importer, .. } => Some(*importer),
            Self::Store(_) => Some(&tet_zarr::ZarrImporter),
            Self::Spooled(_) => None,
        }
    }

    /// Converts the input read by ranges or in place (`None` for a spooled one: it converts
    /// from its file).
    pub(super) fn convert(
        &self,
        url: &Path,
        output: &Path,
        opts: &ConvertOptions,
    ) -> Option<Result<ConvertReport, ConvertError>> {
        let (bytes, importer) = match self {
            Self::Ranged { bytes, importer } => (bytes, importer),
            Self::Store(prefix) => return Some(convert_store(prefix, url, output, opts)),
            Self::Spooled(_) => return None,
        };
        let hashed = bytes.clone();
        let digest: InputDigest = Box::new(move || hashed.digest().map_err(std::io::Error::other));
        let source: Arc<dyn ByteSource> = bytes.clone();
        Some(tet::pipeline::convert_bytes(
            url, *importer, source, digest, output, opts,
        ))
    }
}

impl ObjectInput {
    /// The input opened for a combined conversion (`--concat`), named `url`: read by ranges
    /// (its digest fed by the reads, asked for at the end), from its spooled copy (hashed
    /// beside the conversion, as a local file), or a Zarr store in place.
    pub(super) fn opened(
        &self,
        url: &Path,
        opts: &ConvertOptions,
    ) -> Result<OpenedInput, ConvertError> {
        let named =
            |e: &dyn std::fmt::Display| ConvertError::Refused(format!("{}: {e}", url.display()));
        match self {
            Self::Ranged { bytes, importer } => {
                let source: Arc<dyn ByteSource> = bytes.clone();
                // A `.tet` input hands its footer on, from the source opened here.
                let (source, footer) =
                    tet::tet_input::open_input(*importer, url, Some(source), &opts.settings.open())
                        .map_err(|e| named(&e))?;
                let hashed = bytes.clone();
                let digest: InputDigest =
                    Box::new(move || hashed.digest().map_err(std::io::Error::other));
                Ok(OpenedInput {
                    name: url.to_path_buf(),
                    importer: *importer,
                    source,
                    footer,
                    digest: DigestOf::After(digest),
                })
            }
            Self::Spooled(spool) => {
                let mut opened = open_local(spool.path(), opts)?;
                opened.name = url.to_path_buf();
                Ok(opened)
            }
            Self::Store(prefix) => {
                let name = prefix.file_name().unwrap_or("data.zarr");
                let storage = ObjectStorage::new(prefix.clone()).shared();
                let source = tet_zarr::open_storage(storage, name, &opts.settings.open())
                    .map_err(|e| named(&e))?;
                let (hashed, cancel) = (prefix.clone(), opts.cancel.clone());
                let digest: InputDigest =
                    Box::new(move || hashed.prefix_digest(&cancel).map_err(std::io::Error::other));
                Ok(OpenedInput {
                    name: url.to_path_buf(),
                    importer: &tet_zarr::ZarrImporter,
                    source: Box::new(source),
                    footer: None,
                    digest: DigestOf::Beside(digest),
                })
            }
        }
    }
}

/// A local file (or a spooled copy) opened for a combined conversion, hashed beside it.
pub(super) fn open_local(path: &Path, opts: &ConvertOptions) -> Result<OpenedInput, ConvertError> {
    let named =
        |e: &dyn std::fmt::Display| ConvertError::Refused(format!("{}: {e}", path.display()));
    let importer = registry::identify(path)?;
    let (source, footer) = tet::tet_input::open_input(importer, path, None, &opts.settings.open())
        .map_err(|e| named(&e))?;
    let hashed = path.to_path_buf();
    let digest: InputDigest = Box::new(move || tet::meta::digest_input(&hashed));
    Ok(OpenedInput {
        name: path.to_path_buf(),
        importer,
        source,
        footer,
        digest: DigestOf::Beside(digest),
    })
}

/// Converts the Zarr store under `prefix` read in place: its keys through [`ObjectStorage`], its
/// input digest streamed from its objects as a local copy's would be ([`Object::prefix_digest`]).
fn convert_store(
    prefix: &Object,
    url: &Path,
    output: &Path,
    opts: &ConvertOptions,
) -> Result<ConvertReport, ConvertError> {
    let importer = &tet_zarr::ZarrImporter;
    let name = prefix.file_name().unwrap_or("data.zarr");
    let storage = ObjectStorage::new(prefix.clone()).shared();
    let source = tet_zarr::open_storage(storage, name, &opts.settings.open())?;
    let (hashed, cancel) = (prefix.clone(), opts.cancel.clone());
    let digest: InputDigest =
        Box::new(move || hashed.prefix_digest(&cancel).map_err(std::io::Error::other));
    tet::pipeline::convert_opened(url, Box::new(source), importer.id(), digest, output, opts)
}
