//! The bytes of a `.tgm` (a buffer, or a read-only memory map of the file) and the walk that
//! finds its messages.
//!
//! `tensogram`'s own file scanner skips anything it cannot parse one byte at a time, so a
//! truncated last message (or trailing garbage) silently disappears. This walk is strict
//! instead: messages must tile the file exactly, from byte 0 to the last byte.
//!
//! * A message with a `total_length` T > 0 must fit in the file, end with the postamble magic
//!   `39277777` at T − 8, carry 0 or T as the postamble's mirrored length, and a first-footer
//!   offset inside the message. The next message starts at T.
//! * A streaming message (T = 0) is walked frame by frame: each frame header (`FR`, a known type,
//!   a length of at least 28 bytes — 36 for a data frame — that fits in the file) must end with
//!   `ENDF`, and the next frame starts at the following 8-byte boundary of the message (where
//!   tensogram's encoders put it). The first position that is not a frame must be the
//!   postamble. This never searches payload bytes for a magic, so a `39277777` inside data
//!   cannot cut a message short.
//!
//! Running out of bytes anywhere is `truncated Tensogram message at byte X (file is N bytes)`;
//! a structure that is wrong is `corrupt Tensogram message at byte X: …`.

use std::borrow::Cow;
use std::sync::Arc;

use tet_source::byte_source::ByteSource;
use tet_source::mapped::FileBytes;
use tet_source::{Feature, Part, Result, SourceError};

pub(crate) const MAGIC: &[u8; 8] = b"TENSOGRM";
const END_MAGIC: &[u8; 8] = b"39277777";
const PREAMBLE: u64 = 24;
const POSTAMBLE: u64 = 24;
const FRAME_HEADER: u64 = 16;
/// Preamble + postamble: the smallest possible message.
const MIN_MESSAGE: u64 = PREAMBLE + POSTAMBLE;

/// Where the bytes come from: a buffer or a read-only memory map of the file, or an object read
/// by ranges.
#[derive(Debug)]
pub(crate) enum Backing {
    Local(FileBytes),
    Ranged(Arc<dyn ByteSource>),
}

impl Backing {
    /// A local file: read when shorter than `map_from` bytes, else memory-mapped.
    pub(crate) fn open(file: &mut std::fs::File, map_from: u64) -> std::io::Result<Backing> {
        FileBytes::open(file, map_from).map(Backing::Local)
    }

    /// Drops the whole pages of `sub` (read from a local map) from the resident set once used;
    /// a no-op otherwise.
    pub(crate) fn release(&self, sub: &[u8]) {
        if let Backing::Local(b) = self {
            b.release(sub);
        }
    }

    /// The source read by ranges, when this is one (and it does not lend its bytes whole).
    pub(crate) fn ranged(&self) -> Option<&dyn ByteSource> {
        match self {
            Backing::Ranged(r) if r.as_slice().is_none() => Some(r.as_ref()),
            _ => None,
        }
    }
}

/// Bounds-checked reads of a file's bytes.
pub(crate) trait ReadAt {
    /// The file's length in bytes.
    fn len(&self) -> u64;
    /// The `len` bytes at `offset`, which must lie inside the file: borrowed from a local file,
    /// read for an object read by ranges.
    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>>;
}

impl ReadAt for Backing {
    fn len(&self) -> u64 {
        match self {
            Backing::Local(b) => b.bytes().len() as u64,
            Backing::Ranged(r) => r.len(),
        }
    }

    fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let total = self.len();
        let beyond = || {
            Part::Header.malformed(format!(
                "{len} bytes at byte {offset} lie beyond the end of the file ({total} bytes)"
            ))
        };
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= total)
            .ok_or_else(beyond)?;
        match self {
            Backing::Local(b) => Ok(Cow::Borrowed(&b.bytes()[offset as usize..end as usize])),
            Backing::Ranged(r) => Ok(Cow::Owned(r.read_vec(offset, len)?)),
        }
    }
}

/// One message of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub offset: u64,
    pub length: u64,
    /// `total_length` 0 in the preamble (written by a streaming encoder).
    pub streaming: bool,
    /// Preamble flags.
    pub flags: u16,
}

fn be16(b: &[u8]) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[..2]);
    u16::from_be_bytes(a)
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

fn truncated(pos: u64, n: u64, detail: impl std::fmt::Display) -> SourceError {
    Part::Header.malformed(format!(
        "truncated Tensogram message at byte {pos} (file is {n} bytes): {detail}"
    ))
}

fn corrupt(pos: u64, detail: impl std::fmt::Display) -> SourceError {
    Part::Header.malformed(format!("corrupt Tensogram message at byte {pos}: {detail}"))
}

/// Every message of the file, in order; they tile it exactly.
pub(crate) fn scan(b: &Backing) -> Result<Vec<Span>> {
    let n = b.len();
    if n == 0 {
        return Err(Part::Header.malformed("empty file: no Tensogram message"));
    }
    let mut spans = Vec::new();
    let mut pos = 0u64;
    while pos < n {
        let span = message_at(b, pos, n)?;
        // `length` ≥ 48 and `pos + length` ≤ `n` were checked: this advances and cannot wrap.
        pos += span.length;
        spans.push(span);
    }
    Ok(spans)
}

fn message_at(b: &Backing, pos: u64, n: u64) -> Result<Span> {
    let avail = n - pos;
    let head = b.read(pos, avail.min(PREAMBLE))?;
    let m = head.len().min(MAGIC.len());
    if head[..m] != MAGIC[..m] {
        return Err(if pos == 0 {
            Part::Header
                .malformed("not a Tensogram file: it does not start with the TENSOGRM magic")
        } else {
            Part::Header.malformed(format!(
                "the {avail} bytes after the last Tensogram message (from byte {pos}, file is {n} \
                 bytes) are not a Tensogram message"
            ))
        });
    }
    if avail < PREAMBLE {
        return Err(truncated(
            pos,
            n,
            format!("only {avail} bytes of the 24-byte preamble"),
        ));
    }
    let version = be16(&head[8..10]);
    if version != 3 {
        return Err(Feature::Version.unsupported(format!(
            "the message at byte {pos} has Tensogram wire version {version}; only version 3 \
             (tensogram 0.17 and later) is supported"
        )));
    }
    let flags = be16(&head[10..12]);
    let total = be64(&head[16..24]);
    if total > 0 {
        sized_message(b, pos, n, total, flags)
    } else {
        streamed_message(b, pos, n, flags)
    }
}

/// The message at `pos` whose preamble declares `total` (> 0) bytes.
fn sized_message(b: &Backing, pos: u64, n: u64, total: u64, flags: u16) -> Result<Span> {
    let avail = n - pos;
    if total < MIN_MESSAGE {
        return Err(corrupt(
            pos,
            format!("total length {total} is below the {MIN_MESSAGE}-byte minimum"),
        ));
    }
    if total > avail {
        return Err(truncated(
            pos,
            n,
            format!("the message declares {total} bytes, {avail} remain"),
        ));
    }
    let post_at = pos + total - POSTAMBLE;
    let post = b.read(post_at, POSTAMBLE)?;
    if post[16..24] != END_MAGIC[..] {
        return Err(corrupt(
            pos,
            format!(
                "no end magic \"39277777\" at byte {} where its {total}-byte length ends",
                post_at + 16
            ),
        ));
    }
    let mirror = be64(&post[8..16]);
    if mirror != 0 && mirror != total {
        return Err(corrupt(
            pos,
            format!("the postamble says {mirror} bytes, the preamble {total}"),
        ));
    }
    let first_footer = be64(&post[0..8]);
    if !(PREAMBLE..=total - POSTAMBLE).contains(&first_footer) {
        return Err(corrupt(
            pos,
            format!("first footer offset {first_footer} lies outside the message"),
        ));
    }
    Ok(Span {
        offset: pos,
        length: total,
        streaming: false,
        flags,
    })
}

/// The streamed message at `pos` (total length 0): its frames are walked up to the postamble.
fn streamed_message(b: &Backing, pos: u64, n: u64, flags: u16) -> Result<Span> {
    let mut p = pos + PREAMBLE;
    loop {
        let left = n.saturating_sub(p);
        if p > n || left < 2 {
            return Err(truncated(
                pos,
                n,
                "the streamed message ends before its postamble",
            ));
        }
        let tag = b.read(p, 2)?;
        if tag[..] != b"FR"[..] {
            return postamble_at(b, pos, n, p, flags);
        }
        let end = frame_end(b, pos, n, p)?;
        // Next frame: the next 8-byte boundary of the message. `end` ≤ n, no overflow.
        let rel = end - pos;
        p = pos + rel.div_ceil(8) * 8;
    }
}

/// The end of the frame at `p` (which starts with `FR`) of the streamed message at `pos`.
fn frame_end(b: &Backing, pos: u64, n: u64, p: u64) -> Result<u64> {
    let left = n.saturating_sub(p);
    if left < FRAME_HEADER {
        return Err(truncated(
            pos,
            n,
            format!("the frame at byte {p} is cut inside its header"),
        ));
    }
    let h = b.read(p, FRAME_HEADER)?;
    let frame_type = be16(&h[2..4]);
    let frame_len = be64(&h[8..16]);
    if !matches!(frame_type, 1..=3 | 5..=9) {
        return Err(corrupt(
            pos,
            format!("unknown frame type {frame_type} at byte {p}"),
        ));
    }
    let min = if frame_type == 9 { 36 } else { 28 };
    if frame_len < min {
        return Err(corrupt(
            pos,
            format!("the frame at byte {p} declares {frame_len} bytes, less than {min}"),
        ));
    }
    if frame_len > left {
        return Err(truncated(
            pos,
            n,
            format!("the frame at byte {p} declares {frame_len} bytes, {left} remain"),
        ));
    }
    let end = p + frame_len;
    if b.read(end - 4, 4)?[..] != b"ENDF"[..] {
        return Err(corrupt(
            pos,
            format!("the frame at byte {p} does not end with ENDF"),
        ));
    }
    Ok(end)
}

/// The streamed message at `pos` whose first position that is not a frame is `p`: there must
/// be its postamble.
fn postamble_at(b: &Backing, pos: u64, n: u64, p: u64, flags: u16) -> Result<Span> {
    let left = n.saturating_sub(p);
    if left < POSTAMBLE {
        return Err(truncated(
            pos,
            n,
            format!("the stream ends at byte {n}, inside its postamble at byte {p}"),
        ));
    }
    let post = b.read(p, POSTAMBLE)?;
    if post[16..24] != END_MAGIC[..] {
        return Err(corrupt(
            pos,
            format!("neither a frame nor the postamble at byte {p}"),
        ));
    }
    let length = p + POSTAMBLE - pos;
    let mirror = be64(&post[8..16]);
    if mirror != 0 && mirror != length {
        return Err(corrupt(
            pos,
            format!("the postamble says {mirror} bytes, the frames span {length}"),
        ));
    }
    Ok(Span {
        offset: pos,
        length,
        streaming: true,
        flags,
    })
}
