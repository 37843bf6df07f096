//! A `.tet` named by a local path or an object URL, opened for reading: what `tet info`,
//! `verify`, `audit` and `export` and the Python package's `tet.open(url, storage_options=…)`
//! share ([`open_tet`]).
//!
//! A local file is memory-mapped. An object is read by ranges ([`crate::storage::RangedObject`]:
//! a HEAD, then the head, the chunk index and the footer once, then only the chunks a reader
//! asks for); an object whose server ignores ranges is downloaded into the temporary folder
//! instead, the copy removed when the [`OpenedTet`] is dropped. Settings come from the
//! environment and the `--storage-option` pairs / `storage_options` ([`crate::storage::Options`]).

use std::path::Path;

use crate::control::Cancel;
use crate::format::{TetError, TetFile};

use super::{Options, StorageError};

/// An open `.tet` (see the module docs); dereferences to its [`TetFile`].
pub struct OpenedTet {
    file: TetFile,
    #[cfg(feature = "object-store")]
    _spool: Option<super::Spool>,
}

impl std::ops::Deref for OpenedTet {
    type Target = TetFile;
    fn deref(&self) -> &TetFile {
        &self.file
    }
}

impl std::fmt::Debug for OpenedTet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedTet").finish_non_exhaustive()
    }
}

/// An object that could not be fetched: shown as the cause alone (the lines that show it name
/// the URL already).
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.cause())]
pub struct FetchError(#[source] pub StorageError);

/// Why a `.tet` cannot be opened: the object cannot be fetched, or the bytes are no `.tet` file
/// the reader can follow (a ranged read that failed is the reader's I/O error).
#[derive(Debug, thiserror::Error)]
pub enum OpenTetError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Tet(#[from] TetError),
    /// A file of a format `tet-convert` reads, given where a `.tet` file was expected.
    #[error("not a .tet file but a {0} file (tet-convert FILE OUT.tet converts it)")]
    OtherFormat(&'static str),
}

impl OpenTetError {
    /// The storage error when the object could not be fetched.
    pub fn storage(&self) -> Option<&StorageError> {
        match self {
            OpenTetError::Fetch(FetchError(e)) => Some(e),
            _ => None,
        }
    }
}

/// Opens the `.tet` at `p` (a local path or an object URL, see the module docs). `cancel`
/// stops the requests of an object (a signal of the CLI); `options` are the storage settings.
pub fn open_tet(p: &Path, options: &Options, cancel: &Cancel) -> Result<OpenedTet, OpenTetError> {
    if !super::is_url(p) {
        // Not a .tet file: say what it is when an importer recognises it.
        let file = TetFile::open(p).map_err(|e| match e {
            TetError::Corrupt(_) => other_format(p).map_or(e.into(), OpenTetError::OtherFormat),
            e => e.into(),
        })?;
        return Ok(OpenedTet {
            file,
            #[cfg(feature = "object-store")]
            _spool: None,
        });
    }
    open_object(p, options, cancel)
}

#[cfg(feature = "object-store")]
fn open_object(p: &Path, options: &Options, cancel: &Cancel) -> Result<OpenedTet, OpenTetError> {
    let object = super::Object::parse(&p.to_string_lossy(), options).map_err(FetchError)?;
    let info = object.info().map_err(FetchError)?;
    let ranged = super::RangedObject::new(object.clone(), info, cancel.clone());
    match TetFile::open_source(std::sync::Arc::new(ranged)) {
        // Answered 200 with the whole object, not 206: a server without ranges.
        Err(TetError::Io(_)) if object.ignores_ranges() => {
            log::debug!("{}: the server ignores ranges, spooled", object.url());
            let spool = object
                .download(&std::env::temp_dir(), cancel)
                .map_err(FetchError)?;
            Ok(OpenedTet {
                file: TetFile::open(spool.path())?,
                _spool: Some(spool),
            })
        }
        opened => Ok(OpenedTet {
            file: opened?,
            _spool: None,
        }),
    }
}

#[cfg(not(feature = "object-store"))]
fn open_object(p: &Path, _options: &Options, _cancel: &Cancel) -> Result<OpenedTet, OpenTetError> {
    let url = p.to_string_lossy().into_owned();
    Err(FetchError(StorageError::NotBuilt { url }).into())
}

/// The name of the format of the local file `p` when it is no `.tet` file (it does not start
/// with the `.tet` magic bytes) but one an importer recognises: what a user gave `tet info` or
/// `tet export` by mistake (`ocean.nc`).
pub fn other_format(p: &Path) -> Option<&'static str> {
    use std::io::Read as _;
    let mut head = [0u8; 4];
    let tet = std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head == crate::format::MAGIC);
    if tet {
        return None;
    }
    crate::registry::identify(p).ok().map(|imp| imp.name())
}

/// The input digest (`sha256:<hex>`) and size of a path or object URL, as a conversion records
/// it (`tet audit --source`): an object is streamed once, not downloaded.
pub fn digest_path(p: &Path, options: &Options, cancel: &Cancel) -> std::io::Result<(String, u64)> {
    if !super::is_url(p) {
        return crate::meta::digest_input(p);
    }
    digest_object(p, options, cancel)
}

#[cfg(feature = "object-store")]
fn digest_object(p: &Path, options: &Options, cancel: &Cancel) -> std::io::Result<(String, u64)> {
    let object = super::Object::parse(&p.to_string_lossy(), options)
        .map_err(|e| std::io::Error::other(FetchError(e)))?;
    object
        .digest(cancel)
        .map_err(|e| std::io::Error::other(FetchError(e)))
}

#[cfg(not(feature = "object-store"))]
fn digest_object(p: &Path, _options: &Options, _cancel: &Cancel) -> std::io::Result<(String, u64)> {
    let url = p.to_string_lossy().into_owned();
    Err(std::io::Error::other(FetchError(StorageError::NotBuilt {
        url,
    })))
}
