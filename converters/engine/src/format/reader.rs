//! Reading `.tet` files: memory-mapped, zero-copy for raw payloads, every offset and size
//! checked before use.
//!
//! [`TetFile::open`] parses the superblock, the dataset directory and the chunk index; a file whose
//! structure cannot be followed is refused there. Problems confined to one chunk (a payload
//! outside the file, an unknown codec, a wrong decoded size) surface when that chunk is read,
//! and all of them at once from [`crate::format::verify`]. A broken footer does not stop the
//! datasets from being read: [`TetFile::footer`] reports it.
//!
//! The bytes are a local file's (mapped, or in memory: [`TetFile::open`], [`TetFile::from_bytes`])
//! or any [`ByteSource`] ([`TetFile::open_source`]: an object in a store, read by ranges). A
//! source read by ranges is opened with four reads (the superblock; the head up to the end of
//! the chunk index; the trailer; the footer JSON; and the spilled metadata when there is one),
//! each checked against the source's length before it is allocated, and each chunk is read when
//! it is asked for: the payload accessors return a [`Cow`], borrowed from a local file's bytes
//! (no copy, as before) and owned when read by range. A read the source fails is an I/O error
//! ([`TetError::Io`], [`ChunkReadFailed`] for a chunk), never a corrupt file.
//!
//! Checksums ([`super::integrity`]): when the footer records chunk digests, every read of a chunk
//! that has one checks the stored bytes against it first (once per chunk and open file: a
//! matching chunk is remembered), and zstd frames with a content checksum are checked by the
//! decoder. A chunk that fails is an error naming its byte range, never data.

use std::borrow::Cow;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::codec::ChunkCodec;
use super::footer::{Footer, FooterError};
use super::integrity::{self, ChunkCheck, DigestsError, FooterDigest};
use super::schema::{
    self, FooterDoc, FooterFrame, Lenient, Metadata, MetadataFrame, MetadataRef, Scalar,
};
use super::{
    copy_block, corrupt, gather_block, invalid, Codec, DType, Grid, Result, TetError, FLAG_FOOTER,
    FOOTER_MAGIC, FOOTER_TRAILER_LEN, FOOTER_VERSION, INDEX_HEADER_LEN, INDEX_MAGIC, INDEX_ROW_LEN,
    INDEX_VERSION, LAYOUT_VERSION, MAGIC, MAX_RANK, SUPERBLOCK_LEN,
};

use tet_source::byte_source::ByteSource;
use tet_source::mapped::FileBytes;

mod backing;
use backing::Backing;

/// Why the footer cannot be read (the datasets may still be).
#[derive(Debug, thiserror::Error)]
pub enum FooterReadError {
    #[error("file too short for the THST trailer")]
    TooShort,
    #[error("flag bit 0 is set but the file does not end with THST")]
    NoMagic,
    #[error("the THST trailer cannot be read")]
    Trailer(#[source] Box<TetError>),
    /// The source failed to give the footer's bytes (an object store's error).
    #[error("the footer's bytes cannot be read")]
    Read(#[source] std::io::Error),
    #[error("history JSON length {json_len} is larger than the file")]
    JsonTooLong { json_len: u64 },
    #[error("footer version {version} is not supported (only 1)")]
    Version { version: u32 },
    #[error("history JSON at {offset} is not valid JSON")]
    Json {
        offset: u64,
        #[source]
        source: serde_json::Error,
    },
    #[error("`metadata_ref` needs u64 `offset` and `len`")]
    MetadataRef,
    #[error("metadata spill {off}+{len} does not lie before the history JSON")]
    SpillPlace { off: u64, len: u64 },
    #[error("metadata spill is outside the file")]
    SpillOutside,
    #[error("spilled metadata is not valid JSON")]
    SpillJson(#[source] serde_json::Error),
    #[error(transparent)]
    Footer(FooterError),
    /// The superblock says the file has no footer, but the file ends with a footer trailer
    /// (the flag bit cleared by damage: read as footer-less, the file would lose its metadata
    /// and its checksums).
    #[error("superblock flag bit 0 is clear but the file ends with a THST footer trailer")]
    Unflagged,
}

/// A chunk whose bytes the source failed to give (an object store's error, not a fault of the
/// file): the chunk, with the read's error kept as the cause.
#[derive(Debug, thiserror::Error)]
#[error("dataset `{dataset}` chunk {coords:?}: {source}")]
pub struct ChunkReadFailed {
    pub dataset: String,
    pub coords: Vec<u64>,
    #[source]
    pub source: std::io::Error,
}

/// One dataset record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetInfo {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
    pub grid: Grid,
    /// Value of the record's reserved field (should be 0).
    pub reserved: u32,
}

impl DatasetInfo {
    /// Bytes of the whole dataset (checked at open to fit u64).
    pub fn byte_len(&self) -> u64 {
        self.grid.byte_len(self.dtype.size()).unwrap_or(u64::MAX)
    }
}

/// One chunk index row, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkEntry {
    pub dataset_id: u64,
    pub coords: [u64; 8],
    pub payload_offset: u64,
    pub raw_byte_len: u64,
    pub stored_byte_len: u64,
    pub codec_id: u32,
    pub reserved: u32,
}

impl ChunkEntry {
    pub fn codec(&self) -> Option<Codec> {
        Codec::from_id(self.codec_id)
    }
}

/// Where the footer lies, as far as the trailer could be followed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FooterLayout {
    /// Offset of the first footer byte (the spill when there is one, else the history JSON).
    pub start: u64,
    /// Offset and length of the history JSON.
    pub json_offset: u64,
    pub json_len: u64,
    /// `metadata_ref`, if any.
    pub spill: Option<(u64, u64)>,
    /// Footer version read from the trailer.
    pub version: u32,
}

/// Index header fields other than the entry count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexHeader {
    pub memory_budget_percent_bps: u16,
    pub reserved_a: u16,
    pub memory_budget_bytes: u32,
    pub reserved_b: u64,
}

/// An open `.tet` file.
pub struct TetFile {
    data: Backing,
    pub flags: u32,
    pub chunk_index_offset: u64,
    pub chunk_index_length: u64,
    pub dataset_blob_len: u64,
    pub index_header: IndexHeader,
    pub datasets: Vec<DatasetInfo>,
    pub entries: Vec<ChunkEntry>,
    /// (dataset_id, linear grid index, entry position), sorted; first occurrence of duplicates.
    lookup: Vec<(u64, u64, usize)>,
    footer_layout: Option<FooterLayout>,
    footer: std::result::Result<Option<Footer>, FooterReadError>,
    /// The footer JSON as parsed, and the spilled metadata JSON.
    footer_json: Option<Value>,
    spilled_metadata: Option<Value>,
    /// The footer document read through the schema (when it has the schema's form), with the
    /// spilled metadata: what `verify` checks the reference's limits on.
    footer_doc: Option<(FooterDoc, Option<Metadata>)>,
    /// `tet_footer_digest` as recorded.
    footer_digest_key: Option<Scalar>,
    /// `metadata.tet_ext.chunk_digests`: `None` when absent, `Err` when unusable.
    chunk_digests: Option<std::result::Result<Vec<Option<u64>>, DigestsError>>,
    /// Per index row: its stored bytes matched their digest already.
    verified: Vec<AtomicBool>,
    /// `(offset, bytes)` read at open that the footer digest hashes again (the head, the footer
    /// JSON, the spill), kept only when the backing lends nothing (read by ranges).
    kept: Vec<(u64, Vec<u8>)>,
}

fn u32_at(b: &[u8], off: u64) -> Result<u32> {
    let o = usize::try_from(off).map_err(|_| corrupt("offset overflows"))?;
    b.get(o..o.wrapping_add(4))
        .filter(|_| o.checked_add(4).is_some())
        .map(|s| u32::from_le_bytes(s.try_into().unwrap_or_default()))
        .ok_or_else(|| {
            corrupt(format!(
                "read of 4 bytes at {off} is past the end of the file"
            ))
        })
}

fn u64_at(b: &[u8], off: u64) -> Result<u64> {
    let o = usize::try_from(off).map_err(|_| corrupt("offset overflows"))?;
    b.get(o..o.wrapping_add(8))
        .filter(|_| o.checked_add(8).is_some())
        .map(|s| u64::from_le_bytes(s.try_into().unwrap_or_default()))
        .ok_or_else(|| {
            corrupt(format!(
                "read of 8 bytes at {off} is past the end of the file"
            ))
        })
}

fn u16_at(b: &[u8], off: u64) -> Result<u16> {
    let o = usize::try_from(off).map_err(|_| corrupt("offset overflows"))?;
    b.get(o..o.wrapping_add(2))
        .filter(|_| o.checked_add(2).is_some())
        .map(|s| u16::from_le_bytes(s.try_into().unwrap_or_default()))
        .ok_or_else(|| {
            corrupt(format!(
                "read of 2 bytes at {off} is past the end of the file"
            ))
        })
}

/// `b[off .. off + len]` with every bound checked.
pub(crate) fn slice_at(b: &[u8], off: u64, len: u64) -> Option<&[u8]> {
    let end = off.checked_add(len)?;
    b.get(usize::try_from(off).ok()?..usize::try_from(end).ok()?)
}

impl TetFile {
    /// Memory-maps and parses `path`.
    pub fn open(path: &Path) -> Result<TetFile> {
        let file = File::open(path)?;
        TetFile::parse(Backing::Local(FileBytes::map(&file)?))
    }

    /// Parses a file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<TetFile> {
        TetFile::parse(Backing::Local(FileBytes::Owned(bytes)))
    }

    /// Parses the file whose bytes `source` gives. A source that lends its bytes whole
    /// ([`ByteSource::as_slice`]) is read as a local file is; one read by ranges (an object in a
    /// store) is opened with a few ranged reads (see the module docs) and each chunk is read
    /// when it is asked for. A read the source fails is [`TetError::Io`].
    pub fn open_source(source: Arc<dyn ByteSource>) -> Result<TetFile> {
        TetFile::parse(Backing::Source(source))
    }

    /// The whole file, when its bytes are at hand (a local file, a source that lends them);
    /// `None` for a source read by ranges.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.data.whole()
    }

    pub fn file_len(&self) -> u64 {
        self.data.len()
    }

    /// The `len` bytes at `offset`: borrowed from the file's bytes when they are at hand, read
    /// by range otherwise. `Ok(None)` when the range does not lie inside the file; `Err` when the
    /// source fails to give them.
    pub fn read_bytes(&self, offset: u64, len: u64) -> Result<Option<Cow<'_, [u8]>>> {
        Ok(self.data.read(offset, len)?)
    }

    /// Parses the superblock, the dataset directory and the chunk index, then the footer.
    fn parse(data: Backing) -> Result<TetFile> {
        let file_len = data.len();
        // The superblock and the directory length that follows it.
        let first = data
            .read(0, file_len.min(SUPERBLOCK_LEN + 8))?
            .unwrap_or_default();
        let sb = parse_superblock(&first, file_len)?;
        // Everything up to the end of the chunk index (and of the directory, should that run
        // past the index) in one read: borrowed from a local file, one ranged read otherwise.
        let mut head_end = sb.chunk_index_offset + sb.chunk_index_length;
        if sb.dataset_count > 0 {
            head_end = head_end.max(file_len.min(40));
            if let Some(blob_end) = u64_at(&first, 32)
                .ok()
                .and_then(|n| n.checked_add(40))
                .filter(|&e| e <= file_len)
            {
                head_end = head_end.max(blob_end);
            }
        }
        drop(first);
        let head = data.read(0, head_end)?.unwrap_or_default();
        let b: &[u8] = &head;
        let mut datasets = Vec::new();
        let mut dataset_blob_len = 0;
        let mut entries = Vec::new();
        let mut index_header = IndexHeader::default();
        if sb.dataset_count > 0 {
            dataset_blob_len = u64_at(b, 32)?;
            let blob = slice_at(b, 40, dataset_blob_len).ok_or_else(|| {
                corrupt(format!(
                    "file is truncated: it has {file_len} bytes where its list of datasets \
                     needs {} (the dataset directory of {dataset_blob_len} bytes runs past the end)",
                    dataset_blob_len.saturating_add(40)
                ))
            })?;
            datasets = parse_directory(blob, sb.dataset_count)?;
            (index_header, entries) =
                parse_chunk_index(b, sb.chunk_index_offset, sb.chunk_index_length)?;
        }
        let lookup = build_lookup(&datasets, &entries);
        let kept = match head {
            Cow::Owned(v) => vec![(0, v)],
            Cow::Borrowed(_) => Vec::new(),
        };

        let mut tet = TetFile {
            data,
            flags: sb.flags,
            chunk_index_offset: sb.chunk_index_offset,
            chunk_index_length: sb.chunk_index_length,
            dataset_blob_len,
            index_header,
            datasets,
            entries,
            lookup,
            footer_layout: None,
            footer: Ok(None),
            footer_json: None,
            spilled_metadata: None,
            footer_doc: None,
            footer_digest_key: None,
            chunk_digests: None,
            verified: Vec::new(),
            kept,
        };
        if sb.flags & FLAG_FOOTER != 0 {
            tet.load_footer();
        } else if ends_with_trailer(&tet.data)? {
            tet.footer = Err(FooterReadError::Unflagged);
        }
        if let Some(Ok(_)) = &tet.chunk_digests {
            tet.verified = (0..tet.entries.len())
                .map(|_| AtomicBool::new(false))
                .collect();
        }
        Ok(tet)
    }

    fn load_footer(&mut self) {
        let result = read_footer_json(&self.data, &mut self.footer_layout, &mut self.kept);
        let (v, frame, spilled) = match result {
            Err(e) => {
                self.footer = Err(e);
                return;
            }
            Ok(x) => x,
        };
        let spilled_md: Option<std::result::Result<Metadata, schema::SchemaError>> =
            spilled.as_ref().map(schema::from_value);
        let doc = schema::from_value::<FooterDoc>(&v).map_err(FooterError::from);
        let decoded = doc.and_then(|doc| {
            let md = spilled_md.transpose().map_err(FooterError::from)?;
            let footer = Footer::from_doc(&doc, md.as_ref())?;
            self.footer_doc = Some((doc, md));
            Ok(footer)
        });
        self.footer = decoded.map(Some).map_err(FooterReadError::Footer);
        // The digests are read from the frame, so that a footer whose metadata does not fit
        // the schema still has its chunks checked.
        let spilled_frame: Option<Lenient<MetadataFrame>> = spilled
            .as_ref()
            .map(|s| schema::from_value(s).unwrap_or(Lenient::Raw(Value::Null)));
        let md_frame = spilled_frame.as_ref().or(frame.metadata.as_ref());
        self.chunk_digests = md_frame
            .and_then(Lenient::typed)
            .and_then(MetadataFrame::chunk_digests)
            .map(|d| integrity::parse_chunk_digests(d, self.entries.len()));
        self.footer_digest_key = frame.tet_footer_digest;
        self.footer_json = Some(v);
        self.spilled_metadata = spilled;
    }

    /// The bytes `off .. off + len` as read at open: borrowed from the file's bytes when they
    /// are at hand, else from what [`TetFile::parse`] kept (`None` when not kept or outside).
    fn lent(&self, off: u64, len: u64) -> Option<&[u8]> {
        if let Some(all) = self.data.whole() {
            return slice_at(all, off, len);
        }
        self.kept
            .iter()
            .find_map(|(start, b)| slice_at(b, off.checked_sub(*start)?, len))
    }

    /// The footer: `Ok(None)` when the file has none, `Err` with the reason when it is present
    /// but unreadable.
    pub fn footer(&self) -> std::result::Result<Option<&Footer>, TetError> {
        match &self.footer {
            Ok(f) => Ok(f.as_ref()),
            Err(e) => Err(TetError::Footer(schema::error_chain(e))),
        }
    }

    /// The footer document as read through the schema, with the spilled metadata; `None` when
    /// the file has no footer or it does not have the schema's form ([`TetFile::footer`] says
    /// why).
    pub fn footer_doc(&self) -> Option<(&FooterDoc, Option<&Metadata>)> {
        self.footer_doc.as_ref().map(|(d, m)| (d, m.as_ref()))
    }

    /// Where the footer lies (when its trailer could be followed).
    pub fn footer_layout(&self) -> Option<&FooterLayout> {
        self.footer_layout.as_ref()
    }

    /// The footer JSON and the spilled metadata JSON, as parsed.
    pub fn footer_json(&self) -> (Option<&Value>, Option<&Value>) {
        (self.footer_json.as_ref(), self.spilled_metadata.as_ref())
    }

    /// Drops this process's mapping of the whole pages inside the file bytes
    /// `offset .. offset + len` (they stay in the page cache; a later read maps them again). A streaming reader calls it once it is
    /// done with a chunk, so that its resident set stays at a few chunks rather than growing to
    /// the whole file. Does nothing for an in-memory file, a file read by ranges or a range
    /// outside the file.
    pub fn release(&self, offset: u64, len: u64) {
        self.data.release(offset, len);
    }

    /// Whether the file records checksums (chunk digests or a footer digest).
    pub fn has_checksums(&self) -> bool {
        self.chunk_digests.is_some() || self.footer_digest_key.is_some()
    }

    /// The recorded chunk digests in index order (`None` for a chunk whose zstd frame carries
    /// its own checksum); `None` when the file records none, `Err` when they are unusable.
    pub fn chunk_digests(&self) -> Option<std::result::Result<&[Option<u64>], &DigestsError>> {
        self.chunk_digests.as_ref().map(|r| r.as_deref())
    }

    /// What index row `pos` is checked against. A file without (usable) chunk digests has
    /// [`ChunkCheck::None`] for raw chunks and for zstd frames without the checksum flag.
    pub fn chunk_check(&self, pos: usize) -> ChunkCheck {
        let Some(e) = self.entries.get(pos) else {
            return ChunkCheck::None;
        };
        if let Some(Ok(d)) = &self.chunk_digests {
            if let Some(Some(d)) = d.get(pos) {
                return ChunkCheck::Digest(*d);
            }
        }
        let zstd_flag =
            e.codec().is_some_and(Codec::is_zstd_frame) && self.frame_has_checksum(e) == Some(true);
        if zstd_flag {
            ChunkCheck::ZstdChecksum
        } else {
            ChunkCheck::None
        }
    }

    /// The position of an index row in [`TetFile::entries`].
    fn position(&self, e: &ChunkEntry) -> Option<usize> {
        let ds = self.datasets.get(usize::try_from(e.dataset_id).ok()?)?;
        let rank = ds.grid.rank();
        let linear = ds.grid.linear(&e.coords[..rank])?;
        let key = (e.dataset_id, linear);
        let at = self
            .lookup
            .binary_search_by(|&(d, l, _)| (d, l).cmp(&key))
            .ok()?;
        let pos = self.lookup[at].2;
        if self.entries.get(pos) == Some(e) {
            return Some(pos);
        }
        // A duplicate row (a `verify` failure): find this very row.
        self.entries.iter().position(|x| x == e)
    }

    /// Whether the zstd frame header of a chunk whose payload lies inside the file sets the
    /// content checksum flag (only the header's first bytes are read); `None` when the payload
    /// lies outside the file, is no zstd frame, or cannot be read (a later read of the chunk
    /// says why).
    fn frame_has_checksum(&self, e: &ChunkEntry) -> Option<bool> {
        e.payload_offset
            .checked_add(e.stored_byte_len)
            .filter(|&end| end <= self.file_len())?;
        let head = self
            .data
            .read(e.payload_offset, e.stored_byte_len.min(5))
            .ok()??;
        integrity::zstd_has_checksum(&head)
    }

    /// Checks a chunk's stored bytes against its recorded digest (once per open file), and
    /// that a chunk recorded as carrying a zstd checksum still has the flag. A zstd checksum
    /// itself is checked when the frame is decoded. Errors name the byte range; the caller
    /// names the dataset and chunk.
    pub fn check_stored(&self, e: &ChunkEntry) -> Result<ChunkCheck> {
        self.check_in(e, None)
    }

    /// [`TetFile::check_stored`] of the stored bytes `have` when the caller read them already
    /// (`None`: read them when the check needs them).
    fn check_in(&self, e: &ChunkEntry, have: Option<&[u8]>) -> Result<ChunkCheck> {
        let Some(Ok(digests)) = &self.chunk_digests else {
            return Ok(ChunkCheck::None);
        };
        let Some(pos) = self.position(e) else {
            return Ok(ChunkCheck::None);
        };
        let range = || {
            format!(
                "bytes {}..{}",
                e.payload_offset,
                e.payload_offset.saturating_add(e.stored_byte_len)
            )
        };
        let want = digests.get(pos).copied().flatten();
        if let Some(want) = want {
            if self
                .verified
                .get(pos)
                .is_some_and(|v| v.load(Ordering::Relaxed))
            {
                return Ok(ChunkCheck::Digest(want));
            }
        }
        let read;
        let stored: &[u8] = match have {
            Some(b) => b,
            None => {
                read = self.stored_bytes(e)?;
                &read
            }
        };
        match want {
            Some(want) => {
                let got = integrity::digest(stored);
                if got != want {
                    return Err(corrupt(format!(
                        "{}: the stored bytes do not match their recorded {} digest {} (computed {})",
                        range(),
                        integrity::ALGORITHM,
                        integrity::hex(want),
                        integrity::hex(got)
                    )));
                }
                if let Some(v) = self.verified.get(pos) {
                    v.store(true, Ordering::Relaxed);
                }
                Ok(ChunkCheck::Digest(want))
            }
            None => {
                if e.codec().is_some_and(Codec::is_zstd_frame)
                    && integrity::zstd_has_checksum(stored) == Some(true)
                {
                    Ok(ChunkCheck::ZstdChecksum)
                } else {
                    Err(corrupt(format!(
                        "{}: no digest is recorded and the payload is not a zstd frame with a \
                         content checksum (damaged frame header)",
                        range()
                    )))
                }
            }
        }
    }

    /// Checks a chunk completely, given its stored bytes `stored` ([`TetFile::stored_bytes`]):
    /// its digest, or (for a zstd frame with a content checksum) by decoding it through
    /// `scratch`. For callers that pass the stored bytes on without decoding them (the Zarr
    /// export's verbatim frames).
    pub fn verify_chunk(
        &self,
        e: &ChunkEntry,
        stored: &[u8],
        scratch: &mut [u8],
    ) -> Result<ChunkCheck> {
        let check = self.check_in(e, Some(stored))?;
        let check = match check {
            ChunkCheck::None
                if self.position(e).is_some()
                    && e.codec().is_some_and(Codec::is_zstd_frame)
                    && integrity::zstd_has_checksum(stored) == Some(true) =>
            {
                ChunkCheck::ZstdChecksum
            }
            c => c,
        };
        if check == ChunkCheck::ZstdChecksum {
            integrity::decode_check(stored, e.raw_byte_len, scratch).map_err(|err| {
                corrupt(format!(
                    "bytes {}..{}: {}",
                    e.payload_offset,
                    e.payload_offset.saturating_add(e.stored_byte_len),
                    schema::error_chain(&err)
                ))
            })?;
        }
        Ok(check)
    }

    /// Checks the footer digest (cheap: the superblock, directory, index and footer bytes).
    pub fn footer_digest(&self) -> FooterDigest {
        let Some(recorded) = &self.footer_digest_key else {
            return FooterDigest::Absent;
        };
        let malformed = |m: &str| FooterDigest::Malformed(m.to_string());
        let Some(layout) = &self.footer_layout else {
            return malformed("the footer's place in the file is unknown");
        };
        let Some(text) = self.lent(layout.json_offset, layout.json_len) else {
            return malformed("the footer JSON lies outside the file");
        };
        let tail = integrity::HEX_LEN + integrity::FOOTER_DIGEST_END.len();
        let Some(prefix_end) = text.len().checked_sub(tail) else {
            return malformed("the footer JSON is too short to end with its digest");
        };
        let hex = std::str::from_utf8(&text[prefix_end..text.len() - 2])
            .ok()
            .and_then(integrity::parse_hex);
        let ends_right = text[..prefix_end].ends_with(integrity::FOOTER_DIGEST_PREFIX.as_bytes())
            && text.ends_with(integrity::FOOTER_DIGEST_END.as_bytes());
        let (Some(stored), true) = (hex, ends_right) else {
            return malformed(
                "`tet_footer_digest` is not the footer's last key in the form \"xxh3-64:<16 hex>\"",
            );
        };
        let recorded = match recorded {
            Scalar::Text(s) => Some(s),
            Scalar::Other(_) => None,
        };
        if recorded
            != Some(&format!(
                "{}:{}",
                integrity::ALGORITHM,
                integrity::hex(stored)
            ))
        {
            return malformed("`tet_footer_digest` does not match the footer text");
        }
        let mut h = integrity::Hasher::default();
        let head_end = self
            .chunk_index_offset
            .saturating_add(self.chunk_index_length);
        let Some(head) = self.lent(0, head_end) else {
            return malformed("the chunk index lies outside the file");
        };
        h.update(head);
        if let Some((off, len)) = layout.spill {
            let Some(spill) = self.lent(off, len) else {
                return malformed("the metadata spill lies outside the file");
            };
            h.update(spill);
        }
        h.update(&text[..prefix_end]);
        let computed = h.finish();
        if computed == stored {
            FooterDigest::Ok(stored)
        } else {
            FooterDigest::Mismatch {
                recorded: stored,
                computed,
            }
        }
    }

    /// Dataset id by name.
    pub fn dataset_id(&self, name: &str) -> Option<usize> {
        self.datasets.iter().position(|d| d.name == name)
    }

    /// The index row of a chunk, by dataset id and grid coordinates.
    pub fn find_chunk(&self, dataset: usize, coords: &[u64]) -> Option<&ChunkEntry> {
        let ds = self.datasets.get(dataset)?;
        let linear = ds.grid.linear(coords)?;
        let key = (dataset as u64, linear);
        let pos = self
            .lookup
            .binary_search_by(|&(d, l, _)| (d, l).cmp(&key))
            .ok()?;
        self.entries.get(self.lookup[pos].2)
    }

    /// The raw byte length the chunk at `coords` must have (clipped at the edges).
    pub fn expected_raw_len(&self, dataset: usize, coords: &[u64]) -> Option<u64> {
        let ds = self.datasets.get(dataset)?;
        ds.grid.linear(coords)?;
        Some(ds.grid.chunk_elements(coords) * ds.dtype.size() as u64)
    }

    /// The stored bytes of a chunk: borrowed from the file's bytes (zero copy) when they are at
    /// hand, read by range otherwise.
    pub fn stored_bytes(&self, e: &ChunkEntry) -> Result<Cow<'_, [u8]>> {
        self.data
            .read(e.payload_offset, e.stored_byte_len)?
            .ok_or_else(|| {
                corrupt(format!(
                    "payload {}+{} lies past the end of the file",
                    e.payload_offset, e.stored_byte_len
                ))
            })
    }

    /// The decoded bytes of a raw chunk (checked against its digest): borrowed (zero copy) when
    /// the file's bytes are at hand, read by range otherwise; `None` for a compressed chunk.
    pub fn raw_payload(&self, e: &ChunkEntry) -> Result<Option<Cow<'_, [u8]>>> {
        match e.codec() {
            Some(Codec::Raw) => {
                if e.raw_byte_len != e.stored_byte_len {
                    return Err(corrupt(format!(
                        "raw chunk has stored_byte_len {} but raw_byte_len {}",
                        e.stored_byte_len, e.raw_byte_len
                    )));
                }
                let stored = self.stored_bytes(e)?;
                self.check_in(e, Some(&stored))?;
                Ok(Some(stored))
            }
            Some(_) => Ok(None),
            None => Err(corrupt(format!("unknown codec {}", e.codec_id))),
        }
    }

    /// Decodes a chunk into `out`, which must be exactly `raw_byte_len` long. A raw chunk read
    /// by range is read straight into `out` (then checked against its digest).
    pub fn read_chunk_into(&self, e: &ChunkEntry, out: &mut [u8]) -> Result<()> {
        if out.len() as u64 != e.raw_byte_len {
            return Err(invalid(format!(
                "buffer of {} bytes for a chunk of {} bytes",
                out.len(),
                e.raw_byte_len
            )));
        }
        if let (Some(Codec::Raw), None, Backing::Source(src)) =
            (e.codec(), self.data.whole(), &self.data)
        {
            if e.raw_byte_len == e.stored_byte_len {
                self.check_payload_inside(e)?;
                src.read_at(e.payload_offset, out)?;
                self.check_in(e, Some(out))?;
                return Ok(());
            }
        }
        if let Some(raw) = self.raw_payload(e)? {
            out.copy_from_slice(&raw);
            return Ok(());
        }
        self.decode_chunk(e, out)
    }

    /// The error of a chunk whose payload does not lie inside the file (`Ok` when it does).
    fn check_payload_inside(&self, e: &ChunkEntry) -> Result<()> {
        match e.payload_offset.checked_add(e.stored_byte_len) {
            Some(end) if end <= self.file_len() => Ok(()),
            _ => Err(corrupt(format!(
                "payload {}+{} lies past the end of the file",
                e.payload_offset, e.stored_byte_len
            ))),
        }
    }

    /// Checks and decodes a zstd chunk (of any zstd codec: [`Codec::is_zstd_frame`]) into `out`
    /// (exactly `raw_byte_len` long); a frame that does not decode (its content checksum
    /// included) is an error naming its byte range.
    fn decode_chunk(&self, e: &ChunkEntry, out: &mut [u8]) -> Result<()> {
        let codec = e
            .codec()
            .ok_or_else(|| corrupt(format!("unknown codec {}", e.codec_id)))?;
        let elem = usize::try_from(e.dataset_id)
            .ok()
            .and_then(|d| self.datasets.get(d))
            .map(|d| d.dtype.size())
            .ok_or_else(|| {
                corrupt(format!(
                    "chunk of dataset {} (no such dataset)",
                    e.dataset_id
                ))
            })?;
        let stored = self.stored_bytes(e)?;
        self.check_in(e, Some(&stored))?;
        ChunkCodec::new(codec, elem)
            .decode(&stored, out)
            .map_err(|err| {
                corrupt(format!(
                    "bytes {}..{}: {err}",
                    e.payload_offset,
                    e.payload_offset.saturating_add(e.stored_byte_len)
                ))
            })
    }

    fn checked_entry(&self, dataset: usize, coords: &[u64]) -> Result<&ChunkEntry> {
        let ds = &self.datasets[dataset];
        let e = self.find_chunk(dataset, coords).ok_or_else(|| {
            corrupt(format!(
                "dataset `{}`: chunk {:?} is missing from the index",
                ds.name, coords
            ))
        })?;
        let at = || format!("dataset `{}` chunk {:?}", ds.name, coords);
        let want = self.expected_raw_len(dataset, coords).unwrap_or(0);
        if e.raw_byte_len != want {
            return Err(corrupt(format!(
                "{}: raw_byte_len {} but the (clipped) chunk holds {} bytes",
                at(),
                e.raw_byte_len,
                want
            )));
        }
        self.check_payload_inside(e)
            .map_err(|err| corrupt(format!("{}: {err}", at())))?;
        match e.codec() {
            None => return Err(corrupt(format!("{}: unknown codec {}", at(), e.codec_id))),
            Some(Codec::Raw) if e.stored_byte_len != e.raw_byte_len => {
                return Err(corrupt(format!(
                    "{}: raw chunk with stored_byte_len {} != raw_byte_len {}",
                    at(),
                    e.stored_byte_len,
                    e.raw_byte_len
                )))
            }
            // A zstd frame cannot expand more than this: refusing larger claims keeps every
            // allocation proportional to the file.
            Some(c)
                if c.is_zstd_frame()
                    && e.raw_byte_len > super::zstd_max_raw_len(e.stored_byte_len) =>
            {
                return Err(corrupt(format!(
                    "{}: raw_byte_len {} is more than a {}-byte zstd frame can hold",
                    at(),
                    e.raw_byte_len,
                    e.stored_byte_len
                )))
            }
            _ => {}
        }
        Ok(e)
    }

    /// Checks that every chunk of a dataset is present and plausible, so that a buffer of the
    /// dataset's size is backed by the file before it is allocated.
    fn check_all_chunks(&self, dataset: usize) -> Result<()> {
        let ds = &self.datasets[dataset];
        if ds.grid.total > self.entries.len() as u64 {
            return Err(corrupt(format!(
                "dataset `{}` has {} chunks in its grid but the index holds only {} rows",
                ds.name,
                ds.grid.total,
                self.entries.len()
            )));
        }
        for l in 0..ds.grid.total {
            self.checked_entry(dataset, &ds.grid.coords(l))?;
        }
        Ok(())
    }

    /// Reads the whole dataset into a new buffer (C order, little-endian).
    pub fn read_dataset(&self, dataset: usize) -> Result<Vec<u8>> {
        let ds = self
            .datasets
            .get(dataset)
            .ok_or_else(|| invalid(format!("no dataset {dataset}")))?;
        self.check_all_chunks(dataset)?;
        let start = vec![0; ds.shape.len()];
        let len = usize::try_from(ds.byte_len())
            .map_err(|_| invalid("dataset larger than the address space"))?;
        let mut out = Vec::new();
        out.try_reserve_exact(len)
            .map_err(|_| invalid(format!("cannot allocate {len} bytes for `{}`", ds.name)))?;
        out.resize(len, 0);
        self.read_region(dataset, &start, &ds.shape.clone(), &mut out)?;
        Ok(out)
    }

    /// Reads the hyper-rectangle `start .. start + count` of a dataset into `out` (C order),
    /// decoding only the chunks that intersect it.
    pub fn read_region(
        &self,
        dataset: usize,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        let ds = self
            .datasets
            .get(dataset)
            .ok_or_else(|| invalid(format!("no dataset {dataset}")))?;
        let rank = ds.shape.len();
        if start.len() != rank || count.len() != rank {
            return Err(invalid("region rank does not match the dataset"));
        }
        let mut n = ds.dtype.size() as u64;
        for a in 0..rank {
            let end = start[a]
                .checked_add(count[a])
                .ok_or_else(|| invalid("region overflows"))?;
            if end > ds.shape[a] {
                return Err(invalid(format!(
                    "region {}+{} exceeds axis {a} of length {}",
                    start[a], count[a], ds.shape[a]
                )));
            }
            n = n
                .checked_mul(count[a])
                .ok_or_else(|| invalid("region overflows"))?;
        }
        if out.len() as u64 != n {
            return Err(invalid(format!(
                "buffer of {} bytes for a region of {n} bytes",
                out.len()
            )));
        }
        if n == 0 {
            return Ok(());
        }
        let elem = ds.dtype.size();
        let g = &ds.grid;
        // Range of chunk coordinates per axis.
        let lo: Vec<u64> = (0..rank).map(|a| start[a] / g.chunk_shape[a]).collect();
        let hi: Vec<u64> = (0..rank)
            .map(|a| (start[a] + count[a] - 1) / g.chunk_shape[a])
            .collect();
        let mut c = lo.clone();
        let mut scratch = Vec::new();
        loop {
            let e = self.checked_entry(dataset, &c)?;
            let (cstart, ccount) = g.chunk_region(&c);
            // Decoded chunk bytes: borrowed when raw (read when the file is read by ranges),
            // decoded into scratch otherwise.
            let raw;
            let bytes: &[u8] = match self
                .raw_payload(e)
                .map_err(|err| self.chunk_error(dataset, &c, err))?
            {
                Some(r) => {
                    raw = r;
                    &raw
                }
                None => {
                    scratch.resize(e.raw_byte_len as usize, 0);
                    self.decode_chunk(e, &mut scratch)
                        .map_err(|err| self.chunk_error(dataset, &c, err))?;
                    &scratch
                }
            };
            // Intersection of the chunk with the region.
            let mut istart = vec![0u64; rank];
            let mut icount = vec![0u64; rank];
            for a in 0..rank {
                let s = cstart[a].max(start[a]);
                let e2 = (cstart[a] + ccount[a]).min(start[a] + count[a]);
                istart[a] = s;
                icount[a] = e2 - s;
            }
            if istart == cstart && icount == ccount {
                let dst_off: Vec<u64> = (0..rank).map(|a| cstart[a] - start[a]).collect();
                copy_block(bytes, &ccount, out, count, &dst_off, elem);
            } else {
                // Gather the intersection out of the chunk first.
                let sub_off: Vec<u64> = (0..rank).map(|a| istart[a] - cstart[a]).collect();
                let sub = gather_block(bytes, &ccount, &sub_off, &icount, elem);
                let dst_off: Vec<u64> = (0..rank).map(|a| istart[a] - start[a]).collect();
                copy_block(&sub, &icount, out, count, &dst_off, elem);
            }
            // Next chunk coordinate in row-major order within [lo, hi].
            let mut a = rank;
            loop {
                if a == 0 {
                    return Ok(());
                }
                a -= 1;
                if c[a] < hi[a] {
                    c[a] += 1;
                    break;
                }
                c[a] = lo[a];
            }
        }
    }

    /// `err` of a chunk's read, naming the chunk: a fault of the file stays [`TetError::Corrupt`],
    /// a read the source failed stays [`TetError::Io`] (its kind kept, the cause its source).
    fn chunk_error(&self, dataset: usize, coords: &[u64], err: TetError) -> TetError {
        let name = &self.datasets[dataset].name;
        match err {
            TetError::Io(source) => TetError::Io(std::io::Error::new(
                source.kind(),
                ChunkReadFailed {
                    dataset: name.clone(),
                    coords: coords.to_vec(),
                    source,
                },
            )),
            err => corrupt(format!("dataset `{name}` chunk {coords:?}: {err}")),
        }
    }
}

/// Follows the trailer: the footer JSON, its frame and the spilled metadata JSON (sets `layout`
/// as far as it gets). Keeps in `kept` the footer bytes the footer digest hashes when they were
/// read by range.
fn read_footer_json(
    data: &Backing,
    layout_out: &mut Option<FooterLayout>,
    kept: &mut Vec<(u64, Vec<u8>)>,
) -> std::result::Result<(Value, FooterFrame, Option<Value>), FooterReadError> {
    let file_len = data.len();
    if file_len < SUPERBLOCK_LEN + FOOTER_TRAILER_LEN {
        return Err(FooterReadError::TooShort);
    }
    let t = file_len - FOOTER_TRAILER_LEN;
    let read = |off: u64, len: u64| data.read(off, len).map_err(FooterReadError::Read);
    let trailer = read(t, FOOTER_TRAILER_LEN)?.ok_or(FooterReadError::TooShort)?;
    if trailer[(FOOTER_TRAILER_LEN - 4) as usize..] != FOOTER_MAGIC {
        return Err(FooterReadError::NoMagic);
    }
    let json_len = u64_at(&trailer, 0).map_err(|e| FooterReadError::Trailer(Box::new(e)))?;
    let version = u32_at(&trailer, 8).map_err(|e| FooterReadError::Trailer(Box::new(e)))?;
    let json_offset = t
        .checked_sub(json_len)
        .ok_or(FooterReadError::JsonTooLong { json_len })?;
    let mut layout = FooterLayout {
        start: json_offset,
        json_offset,
        json_len,
        spill: None,
        version,
    };
    if version != FOOTER_VERSION {
        return Err(FooterReadError::Version { version });
    }
    *layout_out = Some(layout.clone());
    let text = read(json_offset, json_len)?.ok_or(FooterReadError::JsonTooLong { json_len })?;
    let v: Value = serde_json::from_slice(&text).map_err(|source| FooterReadError::Json {
        offset: json_offset,
        source,
    })?;
    if let Cow::Owned(text) = text {
        kept.push((json_offset, text));
    }
    let frame: FooterFrame = schema::from_value(&v).unwrap_or_default();
    let mut spilled = None;
    if let Some(r) = &frame.metadata_ref {
        let MetadataRef { offset: off, len } =
            MetadataRef::deserialize(r).map_err(|_| FooterReadError::MetadataRef)?;
        off.checked_add(len)
            .filter(|&e| e <= json_offset)
            .ok_or(FooterReadError::SpillPlace { off, len })?;
        layout.spill = Some((off, len));
        layout.start = off;
        *layout_out = Some(layout.clone());
        let bytes = read(off, len)?.ok_or(FooterReadError::SpillOutside)?;
        spilled = Some(serde_json::from_slice(&bytes).map_err(FooterReadError::SpillJson)?);
        if let Cow::Owned(bytes) = bytes {
            kept.push((off, bytes));
        }
    }
    Ok((v, frame, spilled))
}

/// Whether the file's last bytes are a footer trailer (the THST magic after the supported
/// footer version): what a file whose superblock's footer flag is clear must not end with.
fn ends_with_trailer(data: &Backing) -> Result<bool> {
    let file_len = data.len();
    let Some(t) = file_len
        .checked_sub(FOOTER_TRAILER_LEN)
        .filter(|&t| t >= SUPERBLOCK_LEN)
    else {
        return Ok(false);
    };
    let Some(trailer) = data.read(t, FOOTER_TRAILER_LEN)? else {
        return Ok(false);
    };
    Ok(trailer[(FOOTER_TRAILER_LEN - 4) as usize..] == FOOTER_MAGIC
        && u32_at(&trailer, 8).ok() == Some(FOOTER_VERSION))
}

/// Decodes one zstd frame into `out`, which must be filled exactly.
pub fn decode_zstd(src: &[u8], out: &mut [u8]) -> Result<()> {
    let n = zstd::bulk::decompress_to_buffer(src, out)
        .map_err(|e| corrupt(format!("zstd payload does not decode: {e}")))?;
    if n != out.len() {
        return Err(corrupt(format!(
            "zstd payload decodes to {n} bytes, raw_byte_len is {}",
            out.len()
        )));
    }
    Ok(())
}

/// The fields of the 32-byte superblock that [`TetFile::parse`] goes on with.
struct Superblock {
    dataset_count: u32,
    flags: u32,
    chunk_index_offset: u64,
    chunk_index_length: u64,
}

/// Reads the superblock from `b` (the file's first bytes, at least the superblock's when the
/// file has them): magic, layout version, and a chunk index that lies inside the `file_len`
/// bytes of the file.
fn parse_superblock(b: &[u8], file_len: u64) -> Result<Superblock> {
    if file_len < SUPERBLOCK_LEN || (b.len() as u64) < SUPERBLOCK_LEN {
        return Err(corrupt(format!(
            "file is truncated or no .tet file: it has {file_len} bytes, fewer than the 32 of \
             a .tet file's header"
        )));
    }
    if b[0..4] != MAGIC {
        return Err(corrupt("not a .tet file (magic is not TETR)"));
    }
    let version = u32_at(b, 4)?;
    if version != LAYOUT_VERSION {
        return Err(corrupt(format!(
            "layout version {version} is not supported (only 1)"
        )));
    }
    let dataset_count = u32_at(b, 8)?;
    let flags = u32_at(b, 12)?;
    let chunk_index_offset = u64_at(b, 16)?;
    let chunk_index_length = u64_at(b, 24)?;
    let index_end = chunk_index_offset
        .checked_add(chunk_index_length)
        .filter(|&e| e <= file_len)
        .ok_or_else(|| {
            let need = chunk_index_offset.saturating_add(chunk_index_length);
            corrupt(format!(
                "file is truncated: it has {file_len} bytes where its index needs {need} (the \
                 index at {chunk_index_offset}+{chunk_index_length} runs past the end)"
            ))
        })?;
    let _ = index_end;
    Ok(Superblock {
        dataset_count,
        flags,
        chunk_index_offset,
        chunk_index_length,
    })
}

/// Reads the chunk index at `ix` (`len` bytes, inside the file): its header and its rows.
fn parse_chunk_index(b: &[u8], ix: u64, len: u64) -> Result<(IndexHeader, Vec<ChunkEntry>)> {
    if len < INDEX_HEADER_LEN {
        return Err(corrupt(format!(
            "chunk index length {len} is shorter than its 32-byte header"
        )));
    }
    if slice_at(b, ix, 4) != Some(&INDEX_MAGIC[..]) {
        return Err(corrupt(format!("no TIDX magic at chunk index offset {ix}")));
    }
    let iv = u32_at(b, ix + 4)?;
    if iv != INDEX_VERSION {
        return Err(corrupt(format!(
            "chunk index version {iv} is not supported (only 1)"
        )));
    }
    let entry_count = u64_at(b, ix + 8)?;
    let header = IndexHeader {
        memory_budget_percent_bps: u16_at(b, ix + 16)?,
        reserved_a: u16_at(b, ix + 18)?,
        memory_budget_bytes: u32_at(b, ix + 20)?,
        reserved_b: u64_at(b, ix + 24)?,
    };
    let expect_len = entry_count
        .checked_mul(INDEX_ROW_LEN)
        .and_then(|n| n.checked_add(INDEX_HEADER_LEN));
    if expect_len != Some(len) {
        return Err(corrupt(format!(
            "chunk index length {len} does not match 32 + {entry_count} × 104"
        )));
    }
    // entry_count is bounded by the file length now (the index fits the file).
    let mut entries = Vec::with_capacity(entry_count as usize);
    for i in 0..entry_count {
        entries.push(parse_index_row(
            b,
            ix + INDEX_HEADER_LEN + i * INDEX_ROW_LEN,
        )?);
    }
    Ok((header, entries))
}

/// Reads the 104-byte index row at `r`.
fn parse_index_row(b: &[u8], r: u64) -> Result<ChunkEntry> {
    let mut coords = [0u64; 8];
    for (k, c) in coords.iter_mut().enumerate() {
        *c = u64_at(b, r + 8 + 8 * k as u64)?;
    }
    Ok(ChunkEntry {
        dataset_id: u64_at(b, r)?,
        coords,
        payload_offset: u64_at(b, r + 72)?,
        raw_byte_len: u64_at(b, r + 80)?,
        stored_byte_len: u64_at(b, r + 88)?,
        codec_id: u32_at(b, r + 96)?,
        reserved: u32_at(b, r + 100)?,
    })
}

/// `(dataset_id, linear grid index, entry position)` of the rows that name a dataset and a
/// cell of its grid, sorted; of rows naming one cell, the first.
fn build_lookup(datasets: &[DatasetInfo], entries: &[ChunkEntry]) -> Vec<(u64, u64, usize)> {
    let mut lookup: Vec<(u64, u64, usize)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let ds = datasets.get(usize::try_from(e.dataset_id).ok()?)?;
            let rank = ds.grid.rank();
            if e.coords[rank..].iter().any(|&c| c != 0) {
                return None;
            }
            Some((e.dataset_id, ds.grid.linear(&e.coords[..rank])?, i))
        })
        .collect();
    lookup.sort_unstable();
    lookup.dedup_by_key(|&mut (d, l, _)| (d, l));
    lookup
}

fn parse_directory(blob: &[u8], count: u32) -> Result<Vec<DatasetInfo>> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    let blob_len = blob.len() as u64;
    for i in 0..count {
        let at = |what: &str| format!("dataset record {i}: {what}");
        let name_len =
            u32_at(blob, pos).map_err(|_| corrupt(at("header runs past the directory")))?;
        let dtype_tag = u32_at(blob, pos + 4).map_err(|_| corrupt(at("header truncated")))?;
        let ndim = u32_at(blob, pos + 8).map_err(|_| corrupt(at("header truncated")))?;
        let reserved = u32_at(blob, pos + 12).map_err(|_| corrupt(at("header truncated")))?;
        let name_bytes = slice_at(blob, pos + 16, name_len as u64).ok_or_else(|| {
            corrupt(at(&format!(
                "name of {name_len} bytes runs past the directory"
            )))
        })?;
        let name = std::str::from_utf8(name_bytes)
            .map_err(|_| corrupt(at("name is not UTF-8")))?
            .to_string();
        let dtype = DType::from_tag(dtype_tag)
            .ok_or_else(|| corrupt(format!("dataset `{name}`: unknown dtype tag {dtype_tag}")))?;
        if ndim == 0 || ndim as usize > MAX_RANK {
            return Err(corrupt(format!(
                "dataset `{name}`: rank {ndim} is outside 1..=8"
            )));
        }
        // Pad so the record length up to shape[0] is a multiple of 8.
        let head = 16 + name_len as u64;
        let mut p = pos + super::align8(head).ok_or_else(|| corrupt(at("overflow")))?;
        let mut shape = Vec::with_capacity(ndim as usize);
        let mut chunk_shape = Vec::with_capacity(ndim as usize);
        for _ in 0..ndim {
            shape.push(u64_at(blob, p).map_err(|_| corrupt(at("shape runs past the directory")))?);
            p += 8;
        }
        for _ in 0..ndim {
            chunk_shape.push(
                u64_at(blob, p).map_err(|_| corrupt(at("chunk_shape runs past the directory")))?,
            );
            p += 8;
        }
        let grid = Grid::new(&shape, &chunk_shape)
            .map_err(|e| corrupt(format!("dataset `{name}`: {e}")))?;
        if grid.byte_len(dtype.size()).is_none() {
            return Err(corrupt(format!(
                "dataset `{name}`: shape {shape:?} overflows u64 bytes"
            )));
        }
        out.push(DatasetInfo {
            name,
            dtype,
            shape,
            chunk_shape,
            grid,
            reserved,
        });
        pos = p;
    }
    if pos != blob_len {
        return Err(corrupt(format!(
            "dataset directory is {blob_len} bytes but its {count} records take {pos}"
        )));
    }
    Ok(out)
}
