//! The bytes behind a [`super::TetFile`]: a local file (read into memory or memory-mapped),
//! which lends slices of itself, or any [`ByteSource`] (an object in a store, read by ranges).
//!
//! Every read goes through [`Backing::read`]: a slice borrowed from the whole bytes when the
//! backing has them (no copy, the same cost as indexing the map), else a buffer read by range,
//! its length checked against the source's length before anything is allocated.

use std::borrow::Cow;
use std::io;
use std::sync::Arc;

use tet_source::byte_source::ByteSource;
use tet_source::mapped::FileBytes;

use super::slice_at;

/// Where a `.tet` file's bytes come from.
pub(super) enum Backing {
    /// A local file's bytes, in memory or mapped.
    Local(FileBytes),
    /// A byte source: read by ranges unless it lends its bytes whole ([`ByteSource::as_slice`]).
    Source(Arc<dyn ByteSource>),
}

impl Backing {
    /// All the bytes, when the backing has them at hand (a local file, a source that lends
    /// its bytes); `None` for a source read by ranges.
    pub(super) fn whole(&self) -> Option<&[u8]> {
        match self {
            Backing::Local(b) => Some(b.bytes()),
            Backing::Source(s) => s.as_slice(),
        }
    }

    /// The length in bytes.
    pub(super) fn len(&self) -> u64 {
        match self {
            Backing::Local(b) => b.bytes().len() as u64,
            Backing::Source(s) => s.len(),
        }
    }

    /// The `len` bytes at `off`: borrowed from the whole bytes, or read by range. `Ok(None)`
    /// when the range does not lie inside the file; `Err` when the source cannot be read (an
    /// object store's failure, not a fault of the file).
    pub(super) fn read(&self, off: u64, len: u64) -> io::Result<Option<Cow<'_, [u8]>>> {
        if let Some(all) = self.whole() {
            return Ok(slice_at(all, off, len).map(Cow::Borrowed));
        }
        let Backing::Source(s) = self else {
            return Ok(None);
        };
        match off.checked_add(len) {
            Some(end) if end <= s.len() => s.read_vec(off, len).map(|v| Some(Cow::Owned(v))),
            _ => Ok(None),
        }
    }

    /// Drops the mapped pages of `offset .. offset + len` from the resident set (a mapped local
    /// file); a no-op for bytes in memory and for a source read by ranges (nothing is mapped).
    pub(super) fn release(&self, offset: u64, len: u64) {
        if let Backing::Local(b) = self {
            b.release_range(offset, len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tet_source::byte_source::CountingSource;

    #[test]
    fn whole_bytes_are_lent_and_a_ranged_source_is_read() {
        let data: Vec<u8> = (0..64u8).collect();
        let local = Backing::Local(FileBytes::Owned(data.clone()));
        let lent = Backing::Source(Arc::new(data.clone()));
        let counting = Arc::new(CountingSource::new(data.clone()));
        let ranged = Backing::Source(counting.clone());
        for b in [&local, &lent, &ranged] {
            assert_eq!(b.len(), 64);
            assert_eq!(b.read(60, 4).unwrap().as_deref(), Some(&data[60..]));
            assert!(b.read(61, 4).unwrap().is_none());
            assert!(b.read(u64::MAX, 2).unwrap().is_none());
            assert_eq!(b.read(64, 0).unwrap().as_deref(), Some(&[][..]));
        }
        assert!(matches!(local.read(0, 8).unwrap(), Some(Cow::Borrowed(_))));
        assert!(matches!(lent.read(0, 8).unwrap(), Some(Cow::Borrowed(_))));
        assert!(matches!(ranged.read(0, 8).unwrap(), Some(Cow::Owned(_))));
        assert!(ranged.whole().is_none() && local.whole().is_some());
        // Reads outside the source never reach it.
        assert_eq!(counting.counts(), (3, 4 + 8));
    }
}
