//! Random access to an input's bytes without a local file: what an importer reads when the
//! input is an object in a store (read with ranged requests) rather than a file on disk.
//!
//! [`ByteSource`] is a length and `read_at`. A local file's bytes ([`crate::mapped::FileBytes`])
//! are one, and lend themselves whole ([`ByteSource::as_slice`]); the object storage reader of
//! the `tet` crate is another, which fetches the ranges asked for (a bounded block cache, a
//! bounded number of requests in flight). This crate knows nothing of stores or runtimes.
//!
//! [`ByteReader`] turns a source into `Read + Seek`, for libraries that want a reader (the zip
//! crate, for `.npz` archives).

use std::io::{self, Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes read at any offset. Implementations are shared between the threads that read regions,
/// so `read_at` takes `&self`.
pub trait ByteSource: Send + Sync + std::fmt::Debug {
    /// The length in bytes.
    fn len(&self) -> u64;

    /// Whether there are no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` with the bytes at `offset .. offset + buf.len()`, which must lie inside the
    /// source (else an `UnexpectedEof` error).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// All the bytes at once, when they are already in memory or mapped (a local file): readers
    /// then borrow them instead of copying. `None` for a source read by ranges.
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }

    /// The bytes `offset .. offset + len` in a new buffer. The range is checked against
    /// [`ByteSource::len`] before anything is allocated, so a size read from the input cannot
    /// make this allocate more than the input holds.
    fn read_vec(&self, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        check_range(self.len(), offset, len)?;
        let n = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "range too large"))?;
        let mut buf = vec![0u8; n];
        self.read_at(offset, &mut buf)?;
        Ok(buf)
    }
}

/// Checks that `offset .. offset + len` lies inside `total` bytes.
pub fn check_range(total: u64, offset: u64, len: u64) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= total => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{len} bytes at byte {offset} lie beyond the end of the input ({total} bytes)"),
        )),
    }
}

/// Copies `buf.len()` bytes at `offset` out of `all`, checked.
pub fn copy_at(all: &[u8], offset: u64, buf: &mut [u8]) -> io::Result<()> {
    check_range(all.len() as u64, offset, buf.len() as u64)?;
    // Checked above: the range fits in the slice, hence in usize.
    let o = offset as usize;
    buf.copy_from_slice(&all[o..o + buf.len()]);
    Ok(())
}

impl ByteSource for Vec<u8> {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        copy_at(self, offset, buf)
    }

    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

/// Bytes in memory that lend nothing: read only through [`ByteSource::read_at`], as an object
/// in a store is, counting the reads and the bytes they asked for. For tests of the readers'
/// ranged paths, and for measuring what a reader fetches.
#[derive(Debug, Default)]
pub struct CountingSource {
    bytes: Vec<u8>,
    reads: AtomicU64,
    read_bytes: AtomicU64,
}

impl CountingSource {
    /// A source of `bytes`.
    pub fn new(bytes: Vec<u8>) -> CountingSource {
        CountingSource {
            bytes,
            ..CountingSource::default()
        }
    }

    /// Reads so far, and the bytes they asked for.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.reads.load(Ordering::Relaxed),
            self.read_bytes.load(Ordering::Relaxed),
        )
    }
}

impl ByteSource for CountingSource {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        copy_at(&self.bytes, offset, buf)?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// `Read + Seek` over a [`ByteSource`], from position 0. Wrap it in a `BufReader` for many small
/// reads from a source read by ranges.
#[derive(Debug, Clone)]
pub struct ByteReader {
    src: Arc<dyn ByteSource>,
    pos: u64,
}

impl ByteReader {
    /// A reader at the start of `src`.
    pub fn new(src: Arc<dyn ByteSource>) -> ByteReader {
        ByteReader { src, pos: 0 }
    }
}

impl Read for ByteReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.src.len().saturating_sub(self.pos);
        let n = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
        if n == 0 {
            return Ok(0);
        }
        self.src.read_at(self.pos, &mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for ByteReader {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let target = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.src.len().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        let Some(p) = target else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek before the start of the input",
            ));
        };
        self.pos = p;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_and_refuses_outside() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut buf = [0u8; 4];
        data.read_at(96, &mut buf).unwrap();
        assert_eq!(buf, [96, 97, 98, 99]);
        let e = data.read_at(97, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(data.read_vec(u64::MAX, 2).is_err());
        assert_eq!(data.read_vec(10, 3).unwrap(), vec![10, 11, 12]);
    }

    #[test]
    fn counting_source_lends_nothing_and_counts() {
        let src = CountingSource::new((0..10u8).collect());
        assert!(src.as_slice().is_none());
        let mut b = [0u8; 3];
        src.read_at(2, &mut b).unwrap();
        assert_eq!(b, [2, 3, 4]);
        assert!(src.read_at(9, &mut b).is_err());
        assert_eq!(src.counts(), (1, 3));
    }

    #[test]
    fn reader_reads_and_seeks() {
        let data: Vec<u8> = (0..50u8).collect();
        let mut r = ByteReader::new(Arc::new(data));
        let mut buf = [0u8; 8];
        assert_eq!(r.read(&mut buf).unwrap(), 8);
        assert_eq!(buf[7], 7);
        assert_eq!(r.seek(SeekFrom::End(-3)).unwrap(), 47);
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, vec![47, 48, 49]);
        assert_eq!(r.read(&mut buf).unwrap(), 0);
        assert_eq!(r.seek(SeekFrom::Current(-10)).unwrap(), 40);
        assert!(r.seek(SeekFrom::Current(-100)).is_err());
    }
}
