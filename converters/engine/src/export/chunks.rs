//! The [`ChunkSource`] over a `.tet` file: one stored chunk at a time, in the raised model's
//! element type.
//!
//! A chunk is borrowed from the memory map when it is stored raw (read into a reused buffer
//! when the file is read by ranges), zstd-decoded into a reused buffer otherwise; then narrowed
//! (i16 → i8, range-checked), checked (bool 0/1) or interleaved with its imaginary part
//! (complex) into a second reused buffer. The previous chunk's mapped pages are released at
//! the next call (`MADV_DONTNEED`), so resident memory stays at a few chunks whatever the
//! dataset size.

use std::borrow::Cow;

use tet_source::export::{Chunk, ChunkSource, ExportError, Result};

use super::raise::{Restore, Stored};
use super::ChunkReadError;
use crate::control::Cancel;
use crate::format::{ChunkEntry, Codec, TetError, TetFile};

/// The chunks of a plan's arrays, read from the `.tet` file.
pub(crate) struct TetChunks<'a> {
    tet: &'a TetFile,
    stored: &'a [Stored],
    raw: Vec<u8>,
    imag: Vec<u8>,
    out: Vec<u8>,
    scratch: Vec<u8>,
    /// A zstd frame read by range (a file read by ranges), passed on verbatim.
    frame: Vec<u8>,
    /// File ranges of the chunk delivered last, released at the next call.
    done: Vec<(u64, u64)>,
    /// Asked before each chunk (see [`super::ExportOptions::cancel`]).
    cancel: &'a Cancel,
}

impl<'a> TetChunks<'a> {
    pub fn new(tet: &'a TetFile, stored: &'a [Stored], cancel: &'a Cancel) -> Self {
        TetChunks {
            tet,
            stored,
            cancel,
            raw: Vec::new(),
            imag: Vec::new(),
            out: Vec::new(),
            scratch: Vec::new(),
            frame: Vec::new(),
            done: Vec::new(),
        }
    }

    /// Releases the pages of the chunk delivered last (no longer borrowed).
    fn release_done(&mut self) {
        for (off, len) in self.done.drain(..) {
            self.tet.release(off, len);
        }
    }

    /// Where array `array` is stored, and its chunk coordinates in the `.tet` grid (a 0-d
    /// array's one chunk is `[0]`).
    fn locate(&self, array: usize, coords: &[u64]) -> Result<(Stored, Vec<u64>)> {
        let st = *self
            .stored
            .get(array)
            .ok_or_else(|| ExportError::Invalid(format!("no array {array}")))?;
        let tcoords = if st.scalar { vec![0] } else { coords.to_vec() };
        Ok((st, tcoords))
    }

    /// The index entry of a chunk, checked against the dataset's grid and the file size.
    fn entry(&self, ds: usize, coords: &[u64]) -> Result<(&'a ChunkEntry, usize)> {
        let tet = self.tet;
        let d = &tet.datasets[ds];
        let e = tet.find_chunk(ds, coords).ok_or_else(|| {
            ExportError::Data(format!(
                "dataset `{}`: chunk {coords:?} is missing from the index",
                d.name
            ))
        })?;
        let want = tet.expected_raw_len(ds, coords).unwrap_or(u64::MAX);
        if e.raw_byte_len != want {
            return Err(ExportError::Data(format!(
                "dataset `{}` chunk {coords:?}: raw_byte_len {} but the chunk holds {want} bytes",
                d.name, e.raw_byte_len
            )));
        }
        let n = usize::try_from(want)
            .map_err(|_| ExportError::Invalid(format!("`{}`: chunk too large", d.name)))?;
        // Every buffer stays proportional to the file: a zstd frame cannot expand more than
        // this (the reader's own rule), a raw payload must lie inside the file (checked when
        // it is borrowed).
        let limit = crate::format::zstd_max_raw_len(e.stored_byte_len);
        if e.codec().is_some_and(Codec::is_zstd_frame) && want > limit {
            return Err(ExportError::Data(format!(
                "dataset `{}` chunk {coords:?}: raw_byte_len {want} is more than a {}-byte zstd frame can hold",
                d.name, e.stored_byte_len
            )));
        }
        Ok((e, n))
    }
}

/// `stored` restored to the output values (into `out` when they change).
fn restore<'b>(
    r: Restore,
    name: &str,
    stored: &'b [u8],
    imag: &'b [u8],
    half: usize,
    out: &'b mut Vec<u8>,
) -> Result<&'b [u8]> {
    match r {
        Restore::Same => Ok(stored),
        Restore::I16ToI8 => {
            out.clear();
            for c in stored.chunks_exact(2) {
                let v = i16::from_le_bytes([c[0], c[1]]);
                let b = i8::try_from(v).map_err(|_| {
                    ExportError::Data(format!(
                        "dataset `{name}`: value {v} does not fit i8, the recorded source type"
                    ))
                })?;
                out.push(b as u8);
            }
            Ok(out)
        }
        Restore::U8ToBool => match stored.iter().find(|&&v| v > 1) {
            Some(v) => Err(ExportError::Data(format!(
                "dataset `{name}`: value {v} is not a bool (0 or 1), the recorded source type"
            ))),
            None => Ok(stored),
        },
        Restore::Complex => {
            out.clear();
            out.reserve(stored.len().saturating_mul(2));
            for (re, im) in stored.chunks_exact(half).zip(imag.chunks_exact(half)) {
                out.extend_from_slice(re);
                out.extend_from_slice(im);
            }
            Ok(out)
        }
    }
}

impl ChunkSource for TetChunks<'_> {
    fn chunk(&mut self, array: usize, coords: &[u64]) -> Result<Chunk<'_>> {
        if let Some(code) = self.cancel.requested() {
            return Err(ExportError::Interrupted(code));
        }
        // The previous chunk's bytes are no longer borrowed: unmap them (bounded RSS).
        self.release_done();
        let (st, tcoords) = self.locate(array, coords)?;
        let tet = self.tet;
        let d = &tet.datasets[st.ds];
        let (start, count) = d.grid.chunk_region(&tcoords);
        let (e, n) = self.entry(st.ds, &tcoords)?;
        self.done.push((e.payload_offset, e.stored_byte_len));
        if let Some(ie) = st.imag.and_then(|i| tet.find_chunk(i, &tcoords)) {
            self.done.push((ie.payload_offset, ie.stored_byte_len));
        }
        let at = |source: TetError| {
            ExportError::from(ChunkReadError {
                dataset: d.name.clone(),
                coords: tcoords.to_vec(),
                source,
            })
        };
        // The stored bytes: borrowed when raw (read into `raw` when the file is read by ranges),
        // decoded into `raw` otherwise.
        let stored: &[u8] = match tet.raw_payload(e).map_err(at)? {
            Some(Cow::Borrowed(b)) => b,
            Some(Cow::Owned(b)) => {
                self.raw = b;
                &self.raw
            }
            None => {
                self.raw.resize(n, 0);
                tet.read_chunk_into(e, &mut self.raw).map_err(at)?;
                &self.raw
            }
        };
        if st.restore == Restore::Complex {
            let i = st.imag.unwrap_or(st.ds);
            self.imag.resize(n, 0);
            tet.read_region(i, &start, &count, &mut self.imag)
                .map_err(at)?;
        }
        let half = d.dtype.size();
        let bytes = restore(st.restore, &d.name, stored, &self.imag, half, &mut self.out)?;
        let (start, count) = if st.scalar {
            (Vec::new(), Vec::new())
        } else {
            (start, count)
        };
        Ok(Chunk {
            start,
            count,
            bytes,
        })
    }

    fn zstd_frame(&mut self, array: usize, coords: &[u64]) -> Result<Option<&[u8]>> {
        if let Some(code) = self.cancel.requested() {
            return Err(ExportError::Interrupted(code));
        }
        self.release_done();
        let (st, tcoords) = self.locate(array, coords)?;
        if st.restore != Restore::Same {
            return Ok(None);
        }
        let tet = self.tet;
        let Some(e) = tet.find_chunk(st.ds, &tcoords) else {
            return Ok(None);
        };
        if e.codec() != Some(Codec::Zstd)
            || tet.expected_raw_len(st.ds, &tcoords) != Some(e.raw_byte_len)
        {
            return Ok(None);
        }
        let at = |source: TetError| {
            ExportError::from(ChunkReadError {
                dataset: tet.datasets[st.ds].name.clone(),
                coords: tcoords.to_vec(),
                source,
            })
        };
        let frame: &[u8] = match tet.stored_bytes(e).map_err(at)? {
            Cow::Borrowed(b) => b,
            Cow::Owned(b) => {
                self.frame = b;
                &self.frame
            }
        };
        // Only a frame that declares its size: that is what the format requires and what a
        // reader of the copied frame can decode in one call.
        if !matches!(zstd::zstd_safe::get_frame_content_size(frame), Ok(Some(n)) if n == e.raw_byte_len)
        {
            return Ok(None);
        }
        // Never pass on a frame that fails its checksum.
        self.scratch.resize(64 << 10, 0);
        tet.verify_chunk(e, frame, &mut self.scratch).map_err(at)?;
        self.done.push((e.payload_offset, e.stored_byte_len));
        Ok(Some(frame))
    }
}
