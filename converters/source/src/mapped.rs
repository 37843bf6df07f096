//! An input file's bytes, read into memory or memory-mapped: the one place where the importers
//! and the engine map files and drop mapped pages they are done with, so that the `unsafe`
//! behind both is written (and argued) once.

use std::io::Read;
use std::ops::Deref;

/// A file's bytes: a buffer, or a read-only memory map of the file.
pub enum FileBytes {
    /// Read into memory (small files, or bytes that never were a file).
    Owned(Vec<u8>),
    /// A read-only, shared mapping of the whole file.
    Mapped(memmap2::Mmap),
}

impl FileBytes {
    /// The file's bytes: read into memory when it is shorter than `map_from` bytes, else
    /// memory-mapped.
    pub fn open(file: &mut std::fs::File, map_from: u64) -> std::io::Result<FileBytes> {
        let len = file.metadata()?.len();
        if len < map_from {
            let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
            file.read_to_end(&mut buf)?;
            return Ok(FileBytes::Owned(buf));
        }
        FileBytes::map(file)
    }

    /// A read-only memory map of the whole file.
    pub fn map(file: &std::fs::File) -> std::io::Result<FileBytes> {
        // SAFETY: `Mmap::map` is unsafe because the mapped bytes could change under the slices
        // borrowed from it if another process wrote to or truncated the file. The map is
        // read-only and owned by this value, which never writes through it; as with every
        // memory-mapped reader, the input must not be modified while it is open (every access
        // is bounds-checked against the length fixed here).
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(FileBytes::Mapped(map))
    }

    /// All the bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            FileBytes::Owned(v) => v,
            FileBytes::Mapped(m) => m,
        }
    }

    /// Drops the whole pages of `sub` (a slice borrowed from these bytes) from the process's
    /// resident set once they have been used, so that resident memory does not grow with the
    /// file; they stay in the page cache. A no-op for a buffer, or for a slice that is not
    /// inside the map or covers no whole page.
    pub fn release(&self, sub: &[u8]) {
        if let FileBytes::Mapped(m) = self {
            if let Some((offset, len)) = crate::whole_pages(m, sub) {
                release_pages(m, offset, len);
            }
        }
    }

    /// [`FileBytes::release`] of the bytes `offset .. offset + len` (clipped to whole pages).
    pub fn release_range(&self, offset: u64, len: u64) {
        let all = self.bytes();
        let (Ok(o), Ok(l)) = (usize::try_from(offset), usize::try_from(len)) else {
            return;
        };
        if let Some(sub) = o.checked_add(l).and_then(|end| all.get(o..end)) {
            self.release(sub);
        }
    }
}

/// Drops `len` bytes at `offset` of `map` from the resident set (`MADV_DONTNEED`).
fn release_pages(map: &memmap2::Mmap, offset: usize, len: usize) {
    // SAFETY: `map` is a read-only, file-backed (shared) mapping that is never written through,
    // so MADV_DONTNEED only drops pages from the resident set: the next access reads the same
    // bytes back from the file, and slices borrowed from the map stay valid. The caller
    // (`whole_pages`) keeps the range inside the map and on page boundaries.
    unsafe {
        let _ = map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len);
    }
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl crate::byte_source::ByteSource for FileBytes {
    fn len(&self) -> u64 {
        self.bytes().len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        crate::byte_source::copy_at(self.bytes(), offset, buf)
    }

    fn as_slice(&self) -> Option<&[u8]> {
        Some(self.bytes())
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            FileBytes::Owned(_) => "in memory",
            FileBytes::Mapped(_) => "memory-mapped",
        };
        write!(f, "{} bytes {kind}", self.bytes().len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_and_owned_hold_the_same_bytes() {
        let dir = std::env::temp_dir().join(format!("tet-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f");
        let data: Vec<u8> = (0..5 * 4096u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let mapped = FileBytes::open(&mut std::fs::File::open(&p).unwrap(), 0).unwrap();
        let owned = FileBytes::open(&mut std::fs::File::open(&p).unwrap(), u64::MAX).unwrap();
        assert!(matches!(mapped, FileBytes::Mapped(_)) && matches!(owned, FileBytes::Owned(_)));
        assert_eq!(mapped.bytes(), &data[..]);
        assert_eq!(owned.bytes(), &data[..]);
        // Released pages read back the same.
        mapped.release(&mapped[100..4 * 4096]);
        mapped.release_range(4096, 2 * 4096);
        mapped.release_range(u64::MAX, 1);
        assert_eq!(mapped.bytes(), &data[..]);
        // As a byte source: the same bytes, lent whole.
        use crate::byte_source::ByteSource as _;
        let mut four = [0u8; 4];
        mapped.read_at(4096, &mut four).unwrap();
        assert_eq!(four[..], data[4096..4100]);
        assert!(mapped.read_at(data.len() as u64 - 2, &mut four).is_err());
        assert_eq!(mapped.as_slice(), Some(&data[..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
