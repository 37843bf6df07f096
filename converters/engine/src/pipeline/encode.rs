//! One chunk's work on a worker: read (or copy file to file, or keep the source's zstd frame),
//! widen, compress.

use std::borrow::Cow;
use std::sync::Mutex;

use tet_source::{Source, Variable};

use super::compressor::chunk_compressor;
use super::options::DEFAULT_ZSTD_LEVEL;
use super::plan::Planned;
use super::report::{refused, ConvertError};
use crate::format::budget::MemoryBudget;
use crate::format::codec::ChunkCodec;
use crate::format::{ChunkPayload, Codec, PayloadBytes};

/// zstd is kept for a chunk only when it saves at least 1/32 (~3 %) of the raw size: below
/// that, raw chunks read faster and mmap without decoding.
pub const ZSTD_MIN_SAVING_DIVISOR: usize = 32;

/// The byte range of a source file that the chunk at `coords` of `p` is copied from, file to
/// file: raw, not widened, and one contiguous run of a variable the source stores as one extent.
pub(super) fn file_range<'s>(
    source: &'s dyn Source,
    p: &Planned,
    coords: &[u64],
) -> Option<(&'s std::fs::File, u64, u64)> {
    if p.codec != Codec::Raw || p.widen.converts() {
        return None;
    }
    let var: &Variable = &source.variables()[p.var];
    let ext = source.file_extent(p.var)?;
    let (start, count) = p.grid.chunk_region(coords);
    let (off, len) = contiguous_offset(&var.shape, &start, &count, var.dtype.size() as u64)?;
    Some((ext.file, ext.offset.checked_add(off)?, len))
}

/// Byte offset and length of a region inside a C-order array, when the region is one
/// contiguous run there (every axis after the first one with more than one position is whole).
fn contiguous_offset(shape: &[u64], start: &[u64], count: &[u64], elem: u64) -> Option<(u64, u64)> {
    let first = count.iter().position(|&c| c > 1).unwrap_or(count.len());
    if (first + 1..shape.len()).any(|a| count[a] != shape[a]) {
        return None;
    }
    let mut off = 0u64;
    for a in 0..shape.len() {
        off = off.checked_mul(shape[a])?.checked_add(start[a])?;
    }
    let len = count.iter().try_fold(elem, |acc, &c| acc.checked_mul(c))?;
    Some((off.checked_mul(elem)?, len))
}

/// Whether `frame` is exactly one zstd frame whose header declares `raw_len` decoded bytes (read
/// from the frame and block headers only; the frame is not decoded).
fn is_frame_of(frame: &[u8], raw_len: u64) -> bool {
    matches!(zstd::zstd_safe::get_frame_content_size(frame), Ok(Some(n)) if n == raw_len)
        && zstd::zstd_safe::find_frame_compressed_size(frame).is_ok_and(|n| n == frame.len())
}

/// Whether `data` is one value of `elem` bytes repeated (an empty chunk is not). Stops at the
/// first element that differs, so real data costs a few comparisons.
fn is_constant(data: &[u8], elem: usize) -> bool {
    if elem == 0 || data.len() < elem || !data.len().is_multiple_of(elem) {
        return false;
    }
    // Every element equals the first exactly when the buffer equals itself shifted by one
    // element: one memcmp, which stops at the first difference.
    data[elem..] == data[..data.len() - elem]
}

/// Reads, widens and encodes one chunk; `true` with a source's zstd frame kept as it is.
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_chunk<'s>(
    source: &'s dyn Source,
    p: &Planned,
    coords: &[u64],
    buf: &mut Vec<u8>,
    wide: &mut Vec<u8>,
    zctx: &mut Option<(i32, zstd::bulk::Compressor<'static>)>,
    read_lock: &Mutex<()>,
    serial_reads: bool,
    checksums: bool,
    spare: &dyn Fn() -> Option<Vec<u8>>,
    budget: &MemoryBudget,
) -> Result<(ChunkPayload<'s>, bool), ConvertError> {
    let var: &Variable = &source.variables()[p.var];
    let (start, count) = p.grid.chunk_region(coords);
    let elem = var.dtype.size() as u64;
    let n: u64 = count.iter().product::<u64>() * elem;
    let len = usize::try_from(n).map_err(|_| refused("chunk larger than the address space"))?;

    // A stored zstd frame of exactly this chunk is kept verbatim when its header says it holds
    // exactly the chunk's bytes in one frame (anything else is decoded and encoded below).
    if p.carry_frames {
        let frame = if serial_reads {
            let _g = read_lock.lock().unwrap_or_else(|p| p.into_inner());
            source.zstd_frame(p.var, &start, &count)?
        } else {
            source.zstd_frame(p.var, &start, &count)?
        };
        if let Some(frame) = frame.filter(|f| is_frame_of(f, n)) {
            let payload = ChunkPayload {
                codec: Codec::Zstd,
                raw_len: n,
                data: frame.into(),
            };
            return Ok((payload, true));
        }
    }

    // Uncompressed chunks of a variable stored as one run in a file are copied file to file.
    if let Some((file, offset, len)) = file_range(source, p, coords) {
        return Ok((
            ChunkPayload::raw(PayloadBytes::File { file, offset, len }),
            false,
        ));
    }
    // Source bytes. (`Source::contiguous_bytes` would allow a zero-copy borrow, but pages
    // touched through a borrow stay resident until the end; `read_region` lets a mapped
    // importer drop them after the copy, which keeps peak memory independent of the input.)
    buf.clear();
    buf.resize(len, 0);
    if serial_reads {
        let _g = read_lock.lock().unwrap_or_else(|p| p.into_inner());
        source.read_region(p.var, &start, &count, buf)?;
    } else {
        source.read_region(p.var, &start, &count, buf)?;
    }
    let src: Cow<'s, [u8]> = Cow::Owned(std::mem::take(buf));
    let data: Cow<'s, [u8]> = if p.widen.converts() {
        p.widen.apply(&src, wide);
        if let Cow::Owned(v) = src {
            *buf = v; // keep the read buffer for the next chunk
        }
        Cow::Owned(std::mem::take(wide))
    } else {
        src
    };
    let raw_len = data.len() as u64;
    let constant =
        p.codec == Codec::Raw && p.constant_as_zstd && is_constant(&data, p.spec.dtype.size());
    if p.codec == Codec::Raw && !constant {
        return Ok((ChunkPayload::raw(data), false));
    }
    let level = if constant {
        DEFAULT_ZSTD_LEVEL
    } else {
        p.level
    };
    if zctx.as_ref().is_none_or(|(l, _)| *l != level) {
        // A context of this level from the budget's idle pool, or a new one (the claim
        // covers one).
        let pooled = budget.take::<(i32, zstd::bulk::Compressor<'static>)>(|c| c.0 == level);
        *zctx = Some(match pooled {
            Some(c) => c,
            None => (level, chunk_compressor(level, checksums)?),
        });
    }
    let (_, comp) = zctx.as_mut().expect("set above");
    // Into a buffer the writer has finished with, when it has one (no fresh pages per chunk);
    // `encode` reserves exactly the bound the chunk's claim covers. An extension codec
    // transforms the elements into `wide` first (free here: widened data was taken from it).
    let mut packed = spare().unwrap_or_default();
    let codec = if constant { Codec::Zstd } else { p.codec };
    ChunkCodec::new(codec, p.spec.dtype.size()).encode(&data, comp, wide, &mut packed)?;
    if packed.len() > data.len() - data.len() / ZSTD_MIN_SAVING_DIVISOR {
        return Ok((ChunkPayload::raw(data), false));
    }
    if let Cow::Owned(v) = data {
        // Reuse the allocation for the next read.
        if buf.capacity() < v.capacity() {
            *buf = v;
        }
    }
    let payload = ChunkPayload {
        codec,
        raw_len,
        data: packed.into(),
    };
    Ok((payload, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_chunks_are_recognised() {
        let f = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        assert!(is_constant(&f(&[1.5; 100]), 4));
        assert!(is_constant(&f(&[7.0]), 4));
        assert!(!is_constant(&f(&[1.5, 1.5, 2.0]), 4));
        assert!(!is_constant(&f(&[]), 4));
        // Two-byte pattern repeated, but not as four-byte elements of one value.
        assert!(!is_constant(&[1, 2, 1, 2, 1, 3, 1, 2], 4));
        assert!(is_constant(&[1, 2, 1, 2, 1, 2, 1, 2], 2));
        assert!(!is_constant(&[0, 0, 0], 2));
    }

    #[test]
    fn contiguous_regions() {
        assert_eq!(
            contiguous_offset(&[4, 5], &[1, 0], &[2, 5], 4),
            Some((20, 40))
        );
        assert_eq!(
            contiguous_offset(&[4, 5], &[1, 1], &[1, 3], 4),
            Some((24, 12))
        );
        assert_eq!(contiguous_offset(&[4, 5], &[1, 1], &[2, 3], 4), None);
        assert_eq!(
            contiguous_offset(&[4, 5, 6], &[2, 0, 0], &[1, 5, 6], 1),
            Some((60, 30))
        );
        assert_eq!(
            contiguous_offset(&[4, 5, 6], &[2, 1, 0], &[1, 2, 6], 1),
            Some((66, 12))
        );
    }
}
