//! The object input of a job, as the conversion reads it: by ranges ([`RangedObject`]) when its
//! format is one the engine decodes itself (the importer reads a byte source: NPY/NPZ, TeaFile,
//! Tensogram), else downloaded into a spool folder (NetCDF and HDF5, whose C libraries need a
//! file; a prefix such as a Zarr store; a server that ignores ranges).

use std::path::Path;
use std::sync::Arc;

use tet_source::byte_source::ByteSource;
use tet_source::Importer;

use crate::control::Cancel;
use crate::pipeline::{ConvertError, ConvertOptions, ConvertReport, InputDigest};
use crate::registry;
use crate::storage::{ignores_ranges, Object, RangedObject, Spool, StorageError};

/// How an object input is read.
pub(super) enum ObjectInput {
    /// By ranges, through `importer`.
    Ranged {
        bytes: Arc<RangedObject>,
        importer: &'static dyn Importer,
    },
    /// From a local copy.
    Spooled(Spool),
}

impl ObjectInput {
    /// Opens `o` for reading by ranges when its format allows (one HEAD and one ranged GET of
    /// its first bytes), else downloads it into a spool folder under `root`.
    pub(super) fn open(o: &Object, root: &Path, cancel: &Cancel) -> Result<Self, StorageError> {
        let info = match o.info() {
            Ok(i) => i,
            // A prefix (a Zarr store): downloaded object by object.
            Err(e) if e.is_not_found() => return o.download(root, cancel).map(Self::Spooled),
            Err(e) => return Err(e),
        };
        let ranged = RangedObject::new(o.clone(), info, cancel.clone());
        let head = match ranged.head(registry::HEAD_BYTES) {
            Ok(h) => h,
            Err(e) if ignores_ranges(&e) => {
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
            Self::Ranged { .. } => None,
        }
    }

    /// The importer, when the input is read by ranges.
    pub(super) fn importer(&self) -> Option<&'static dyn Importer> {
        match self {
            Self::Ranged { importer, .. } => Some(*importer),
            Self::Spooled(_) => None,
        }
    }

    /// Converts the input read by ranges (`None` for a spooled one: it converts from its file).
    pub(super) fn convert(
        &self,
        url: &Path,
        output: &Path,
        opts: &ConvertOptions,
    ) -> Option<Result<ConvertReport, ConvertError>> {
        let Self::Ranged { bytes, importer } = self else {
            return None;
        };
        let hashed = bytes.clone();
        let digest: InputDigest = Box::new(move || hashed.digest().map_err(std::io::Error::other));
        let source: Arc<dyn ByteSource> = bytes.clone();
        Some(crate::pipeline::convert_bytes(
            url, *importer, source, digest, output, opts,
        ))
    }
}
