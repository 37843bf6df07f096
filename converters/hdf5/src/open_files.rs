//! One library handle per file per process, shared by every open of the same file (libhdf5 1.10
//! crashes when two handles of one file interleave): a registry keyed by device and inode
//! holding weak references. Generic, so the netCDF importer keeps its own.

use std::path::Path;

use tet_source::Result;

/// One shared handle per file per process, by (device, inode): a second open of a file gets the
/// first one's handle while it is alive. libhdf5 caches a variable-length datatype's file pointer
/// on the dataset state it shares between all handles of one file; with two handles, closing the
/// one the type points at leaves the other reading freed memory (seen with HDF5 1.10.8 as crashes
/// in the fill-value conversion of vlen-string datasets when threads opened one file
/// concurrently). Used for this crate's `hdf5::File`s and for tet-netcdf's netCDF handles.
pub struct OpenFiles<T>(std::sync::Mutex<Vec<OpenEntry<T>>>);

/// (device, inode) and the shared handle.
type OpenEntry<T> = ((u64, u64), std::sync::Weak<T>);

impl<T> OpenFiles<T> {
    pub const fn new() -> Self {
        OpenFiles(std::sync::Mutex::new(Vec::new()))
    }

    /// The live handle of the file at `path`, or the one `open` makes (then remembered).
    /// Callers hold the library lock, so no other thread opens or closes the file meanwhile.
    pub fn get_or_open(
        &self,
        path: &Path,
        open: impl FnOnce() -> Result<T>,
    ) -> Result<std::sync::Arc<T>> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        let key = (m.dev(), m.ino());
        let mut files = self.0.lock().unwrap_or_else(|e| e.into_inner());
        files.retain(|(_, h)| h.strong_count() > 0);
        if let Some(h) = files
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, h)| h.upgrade())
        {
            return Ok(h);
        }
        let h = std::sync::Arc::new(open()?);
        files.push((key, std::sync::Arc::downgrade(&h)));
        Ok(h)
    }
}

impl<T> Default for OpenFiles<T> {
    fn default() -> Self {
        Self::new()
    }
}
