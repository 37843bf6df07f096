//! `tet verify`: every structural rule of the format, the footer schema and the reference
//! reader's limits, the decoded size of compressed chunks, and the checksums
//! ([`super::integrity`]): the footer digest always (it is cheap), the chunk checksums of the
//! sampled chunks, or of every chunk with [`Depth::Deep`].
//!
//! Findings are *failures* (the file breaks a rule, or a reader would get wrong data) or
//! *warnings* (legal but unusual: payload gaps or out-of-order payloads, raw payloads not at a
//! multiple of their element size, non-zero alignment padding, non-zero reserved
//! fields). Verification never panics and never allocates in proportion to sizes claimed by the
//! file: zstd frames are decoded in a streaming fashion into a fixed scratch buffer.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::footer::{fits, limits};
use super::integrity::{self, ChunkCheck, FooterDigest};
use super::reader::{ChunkEntry, DatasetInfo, TetFile};
use super::schema::{CoordAxis, DatasetEntry, Metadata, Row, RowObject, Scalar};
use super::{align8, payload_alignment, Codec, TetError, FLAG_FOOTER, SUPERBLOCK_LEN};

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable machine-readable code, e.g. `chunk-missing`.
    pub code: &'static str,
    pub message: String,
}

/// The outcome of a verification.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub failures: Vec<Finding>,
    pub warnings: Vec<Finding>,
    /// Index rows in the file.
    pub chunks: u64,
    /// Compressed chunks that were fully decoded.
    pub decoded: u64,
    /// Chunks that have a checksum (a recorded digest or a zstd content checksum).
    pub checksummed: u64,
    /// Chunks whose stored bytes were checked against their checksum in this run.
    pub checked: u64,
    /// `ok`, `absent`, `mismatch` or `malformed`.
    pub footer_digest: &'static str,
    /// What the run could not do, without being a fault of the file (`no-checksums`).
    pub notes: Vec<Finding>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }
    fn fail(&mut self, code: &'static str, message: impl Into<String>) {
        self.failures.push(Finding {
            code,
            message: message.into(),
        });
    }
    fn warn(&mut self, code: &'static str, message: impl Into<String>) {
        self.warnings.push(Finding {
            code,
            message: message.into(),
        });
    }
    fn note(&mut self, code: &'static str, message: impl Into<String>) {
        self.notes.push(Finding {
            code,
            message: message.into(),
        });
    }
}

/// How much to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Decode a sample of compressed chunks per dataset (first, last and a few between).
    Sample,
    /// Decode every compressed chunk.
    Deep,
}

/// Chunks per dataset decoded by [`Depth::Sample`].
const SAMPLE_PER_DATASET: u64 = 8;

/// Verifies bytes that may not even parse.
pub fn verify_bytes(bytes: Vec<u8>, depth: Depth) -> Report {
    match TetFile::from_bytes(bytes) {
        Ok(f) => verify(&f, depth),
        Err(e) => {
            let mut r = Report::default();
            r.fail("structure", e.to_string());
            r
        }
    }
}

/// Verifies an opened file.
pub fn verify(f: &TetFile, depth: Depth) -> Report {
    let mut r = Report {
        chunks: f.entries.len() as u64,
        footer_digest: "absent",
        ..Report::default()
    };
    check_integrity_records(f, &mut r);
    let header_end = check_layout(f, &mut r);
    check_dataset_names(f, &mut r);

    // Where payloads may lie: after the index, before the footer.
    let footer_start = f.footer_layout().map(|l| l.start).unwrap_or(f.file_len());
    check_footer(f, &mut r);

    let mut rows = RowChecker::new(f, depth, header_end, footer_start);
    for (i, e) in f.entries.iter().enumerate() {
        rows.check(i, e, &mut r);
    }
    check_grid_coverage(f, &rows.seen, &mut r);
    check_payload_spans(f, rows.spans, header_end, footer_start, &mut r);
    note_missing_checksums(f, &mut r);
    warn_extension_codecs(f, &mut r);
    r
}

/// The superblock flags, where the chunk index lies and its header's fields. Returns where the
/// payload region starts: the end of the chunk index (of the superblock, without datasets).
fn check_layout(f: &TetFile, r: &mut Report) -> u64 {
    if f.flags & !FLAG_FOOTER != 0 {
        r.fail(
            "flags-unknown",
            format!("superblock flags {:#x} set unknown bits", f.flags),
        );
    }
    if f.datasets.is_empty() {
        if f.chunk_index_offset != SUPERBLOCK_LEN || f.chunk_index_length != 0 {
            r.fail(
                "index-position",
                format!(
                    "a file without datasets must have chunk index 32+0, not {}+{}",
                    f.chunk_index_offset, f.chunk_index_length
                ),
            );
        }
        return SUPERBLOCK_LEN;
    }
    let want = align8(40 + f.dataset_blob_len).unwrap_or(u64::MAX);
    if f.chunk_index_offset != want {
        r.fail(
            "index-position",
            format!(
                "chunk index at {} but it must be at align8(40 + {}) = {want}",
                f.chunk_index_offset, f.dataset_blob_len
            ),
        );
    }
    let ih = f.index_header;
    if ih.reserved_a != 0 || ih.reserved_b != 0 {
        r.warn("reserved", "chunk index header reserved fields are not 0");
    }
    if ih.memory_budget_percent_bps > 10000 {
        r.fail(
            "index-budget",
            format!(
                "memory_budget_percent_bps {} is over 10000 (100%)",
                ih.memory_budget_percent_bps
            ),
        );
    }
    f.chunk_index_offset + f.chunk_index_length
}

/// Dataset names (not empty, no two alike) and the directory's reserved fields.
fn check_dataset_names(f: &TetFile, r: &mut Report) {
    let mut names = HashSet::new();
    for d in &f.datasets {
        if !names.insert(d.name.as_str()) {
            r.fail(
                "dataset-duplicate",
                format!("dataset name `{}` appears twice", d.name),
            );
        }
        if d.name.is_empty() {
            r.fail("dataset-name", "a dataset has an empty name");
        }
        if d.reserved != 0 {
            r.warn(
                "reserved",
                format!("dataset `{}`: reserved field is {}", d.name, d.reserved),
            );
        }
    }
}

/// Checks the index rows one at a time, and gathers what the checks spanning all of them need.
struct RowChecker<'f> {
    f: &'f TetFile,
    depth: Depth,
    /// The file records chunk digests: every chunk then needs some checksum.
    with_digests: bool,
    file_len: u64,
    /// The payload region: after the chunk index, before the footer.
    header_end: u64,
    footer_start: u64,
    /// Per dataset, the linear grid positions of its rows.
    seen: Vec<HashSet<u64>>,
    /// `(start, end, row)` of the payloads inside the payload region, in index order.
    spans: Vec<(u64, u64, usize)>,
    /// Per dataset, the chunks picked for decoding so far.
    sample_budget: Vec<u64>,
    /// Where zstd frames are decoded to.
    scratch: Vec<u8>,
}

/// An index row that names a dataset and a cell of its grid not named before.
struct PlacedRow<'f> {
    ds: &'f DatasetInfo,
    /// The index of `ds`.
    did: usize,
    coords: &'f [u64],
    /// The cell's position in the grid.
    linear: u64,
    /// ``dataset `name` chunk [coords]``: what every finding about the row starts with.
    at: String,
    /// `bytes start..end`: the payload's byte range.
    range: String,
}

impl<'f> RowChecker<'f> {
    fn new(f: &'f TetFile, depth: Depth, header_end: u64, footer_start: u64) -> Self {
        RowChecker {
            f,
            depth,
            with_digests: matches!(f.chunk_digests(), Some(Ok(_))),
            file_len: f.file_len(),
            header_end,
            footer_start,
            seen: vec![HashSet::new(); f.datasets.len()],
            spans: Vec::new(),
            sample_budget: vec![0; f.datasets.len()],
            scratch: vec![0u8; 1 << 16],
        }
    }

    /// Checks index row `i`, stopping at the first failure the later checks depend on.
    fn check(&mut self, i: usize, e: &'f ChunkEntry, r: &mut Report) {
        let Some(row) = self.place(i, e, r) else {
            return;
        };
        if e.reserved != 0 {
            r.warn(
                "reserved",
                format!("{}: reserved field is {}", row.at, e.reserved),
            );
        }
        check_raw_len(&row, e, r);
        if !self.check_payload_bounds(i, e, &row.at, r) {
            return;
        }
        let pick = self.pick(&row);
        let check = self.f.chunk_check(i);
        let Some(payload) = self.payload(e, &row, pick, r) else {
            return;
        };
        if !self.check_checksum(&row, pick, check, &payload, r) {
            return;
        }
        self.check_codec(e, &row, pick, check, &payload, r);
    }

    /// The payload bytes the checks of a row need: all of them for a picked chunk, a zstd
    /// frame's header otherwise, nothing for an unpicked raw chunk. Borrowed from a local
    /// file's bytes; read by range from a file read by ranges, where a read the source fails is
    /// a `chunk-read` failure (`None`).
    fn payload(
        &self,
        e: &ChunkEntry,
        row: &PlacedRow,
        pick: bool,
        r: &mut Report,
    ) -> Option<Cow<'f, [u8]>> {
        let len = if pick {
            e.stored_byte_len
        } else if e.codec().is_some_and(Codec::is_zstd_frame) {
            e.stored_byte_len.min(ZSTD_FRAME_HEADER_MAX)
        } else {
            return Some(Cow::Borrowed(&[]));
        };
        match self.f.read_bytes(e.payload_offset, len) {
            Ok(Some(b)) => Some(b),
            // Inside the file: checked before.
            Ok(None) => None,
            Err(err) => {
                r.fail(
                    "chunk-read",
                    format!("{}: {}: cannot be read: {err}", row.at, row.range),
                );
                None
            }
        }
    }

    /// The dataset and grid cell that row `i` names; `None` (after a failure) when it names no
    /// dataset, uses coordinate slots past the rank, lies outside the grid or repeats a cell.
    fn place(&mut self, i: usize, e: &'f ChunkEntry, r: &mut Report) -> Option<PlacedRow<'f>> {
        let f = self.f;
        let Some(ds) = usize::try_from(e.dataset_id)
            .ok()
            .and_then(|d| f.datasets.get(d))
        else {
            r.fail(
                "chunk-dataset",
                format!(
                    "index row {i}: dataset_id {} does not name a dataset",
                    e.dataset_id
                ),
            );
            return None;
        };
        let did = e.dataset_id as usize;
        let rank = ds.grid.rank();
        let coords = &e.coords[..rank];
        let at = format!("dataset `{}` chunk {coords:?}", ds.name);
        if e.coords[rank..].iter().any(|&c| c != 0) {
            r.fail(
                "chunk-coords",
                format!("{at}: unused coordinate slots are not 0 ({:?})", e.coords),
            );
            return None;
        }
        let Some(linear) = ds.grid.linear(coords) else {
            r.fail(
                "chunk-coords",
                format!("{at}: outside the chunk grid {:?}", ds.grid.counts),
            );
            return None;
        };
        if !self.seen[did].insert(linear) {
            r.fail(
                "chunk-duplicate",
                format!("{at}: appears twice in the index"),
            );
            return None;
        }
        let range = format!(
            "bytes {}..{}",
            e.payload_offset,
            e.payload_offset.saturating_add(e.stored_byte_len)
        );
        Some(PlacedRow {
            ds,
            did,
            coords,
            linear,
            at,
            range,
        })
    }

    /// The payload lies inside the file (`false` when not: nothing more can be checked) and
    /// inside the payload region (then its span is kept for the order, gap and overlap checks).
    fn check_payload_bounds(&mut self, i: usize, e: &ChunkEntry, at: &str, r: &mut Report) -> bool {
        let (header_end, footer_start, file_len) =
            (self.header_end, self.footer_start, self.file_len);
        match e.payload_offset.checked_add(e.stored_byte_len) {
            Some(end) if end <= file_len => {
                if e.payload_offset < header_end || end > footer_start {
                    r.fail(
                        "chunk-payload-region",
                        format!(
                            "{at}: payload {}+{} lies outside the payload region {header_end}..{footer_start}",
                            e.payload_offset, e.stored_byte_len
                        ),
                    );
                } else {
                    self.spans.push((e.payload_offset, end, i));
                }
                true
            }
            _ => {
                r.fail(
                    "chunk-payload-bounds",
                    format!(
                        "{at}: payload {}+{} lies past the end of the file ({file_len} bytes)",
                        e.payload_offset, e.stored_byte_len
                    ),
                );
                false
            }
        }
    }

    /// Whether to check the chunk's payload in full (its digest, its decoding): every chunk
    /// with [`Depth::Deep`]; otherwise the first and last of its dataset, and evenly spaced ones
    /// while fewer than [`SAMPLE_PER_DATASET`] are picked.
    fn pick(&mut self, row: &PlacedRow) -> bool {
        let n = row.ds.grid.total.max(1);
        let step = (n / SAMPLE_PER_DATASET).max(1);
        let budget = &mut self.sample_budget[row.did];
        let pick = self.depth == Depth::Deep
            || row.linear == 0
            || row.linear + 1 == n
            || (*budget < SAMPLE_PER_DATASET && row.linear.is_multiple_of(step));
        if pick {
            *budget += 1;
        }
        pick
    }

    /// The chunk has a checksum when the file records digests, and (when picked) its stored
    /// bytes match their digest. `false` on a mismatch: decoding would only say less.
    fn check_checksum(
        &self,
        row: &PlacedRow,
        pick: bool,
        check: ChunkCheck,
        payload: &[u8],
        r: &mut Report,
    ) -> bool {
        let (at, range) = (&row.at, &row.range);
        if check != ChunkCheck::None {
            r.checksummed += 1;
        } else if self.with_digests {
            r.fail(
                "chunk-checksum",
                format!(
                    "{at}: {range}: no digest is recorded and the payload is not a zstd frame \
                     with a content checksum"
                ),
            );
        }
        // The stored bytes against their digest (before decoding: a digest names damage
        // exactly, where a decoder may only say the frame is malformed).
        if let (true, ChunkCheck::Digest(want)) = (pick, check) {
            r.checked += 1;
            let got = integrity::digest(payload);
            if got != want {
                r.fail(
                    "chunk-checksum",
                    format!(
                        "{at}: {range}: the stored bytes do not match their recorded {} \
                         digest {} (computed {})",
                        integrity::ALGORITHM,
                        integrity::hex(want),
                        integrity::hex(got)
                    ),
                );
                return false;
            }
        }
        true
    }

    /// The codec is known; a raw chunk stores its raw bytes; a zstd frame's header fits the
    /// chunk and (when picked) the frame decodes to the chunk's size and content checksum.
    /// `payload` is the whole payload when picked, else (at least) the frame header.
    fn check_codec(
        &mut self,
        e: &ChunkEntry,
        row: &PlacedRow,
        pick: bool,
        check: ChunkCheck,
        payload: &[u8],
        r: &mut Report,
    ) {
        let (at, range) = (&row.at, &row.range);
        match e.codec() {
            None => r.fail("chunk-codec", format!("{at}: unknown codec {}", e.codec_id)),
            Some(Codec::Raw) => {
                if e.stored_byte_len != e.raw_byte_len {
                    r.fail(
                        "chunk-raw-len",
                        format!(
                            "{at}: raw chunk with stored_byte_len {} != raw_byte_len {}",
                            e.stored_byte_len, e.raw_byte_len
                        ),
                    );
                }
            }
            // zstd and the extension codecs: one zstd frame of `raw_byte_len` bytes (the
            // inverse transform of an extension cannot fail: any bytes are a valid input).
            Some(_) => {
                let src = payload;
                if let Err(msg) = check_zstd_header(src, e.stored_byte_len, e.raw_byte_len) {
                    r.fail("chunk-zstd", format!("{at}: {range}: {msg}"));
                    return;
                }
                if pick {
                    r.decoded += 1;
                    if check == ChunkCheck::ZstdChecksum {
                        r.checked += 1;
                    }
                    if let Err(err) =
                        integrity::decode_check(src, e.raw_byte_len, &mut self.scratch)
                    {
                        let msg = super::schema::error_chain(&err);
                        let code = if err.is_checksum() {
                            "chunk-checksum"
                        } else {
                            "chunk-zstd"
                        };
                        r.fail(code, format!("{at}: {range}: {msg}"));
                    }
                }
            }
        }
    }
}

/// The multiple that index row `i`'s payload offset should be ([`payload_alignment`]; 1 for a
/// row naming no dataset or an unknown codec).
fn row_alignment(f: &TetFile, i: usize) -> u64 {
    let Some(e) = f.entries.get(i) else {
        return 1;
    };
    let ds = usize::try_from(e.dataset_id)
        .ok()
        .and_then(|d| f.datasets.get(d));
    match (e.codec(), ds) {
        (Some(codec), Some(ds)) => payload_alignment(codec, ds.dtype),
        _ => 1,
    }
}

/// `raw_byte_len` is the size of the clipped chunk (naming a padded edge chunk as such).
fn check_raw_len(row: &PlacedRow, e: &ChunkEntry, r: &mut Report) {
    let (ds, at) = (row.ds, &row.at);
    let want = ds.grid.chunk_elements(row.coords) * ds.dtype.size() as u64;
    if e.raw_byte_len != want {
        let full = ds
            .chunk_shape
            .iter()
            .try_fold(ds.dtype.size() as u64, |a, &c| a.checked_mul(c));
        let kind = if full == Some(e.raw_byte_len) {
            " (a padded edge chunk: edge chunks must be clipped)"
        } else {
            ""
        };
        r.fail(
            "chunk-raw-len",
            format!(
                "{at}: raw_byte_len {} but the clipped chunk holds {want} bytes{kind}",
                e.raw_byte_len
            ),
        );
    }
}

/// Each grid cell exactly once: `seen` holds, per dataset, the cells its index rows name.
fn check_grid_coverage(f: &TetFile, seen: &[HashSet<u64>], r: &mut Report) {
    for (did, ds) in f.datasets.iter().enumerate() {
        let have = seen[did].len() as u64;
        if have != ds.grid.total {
            let missing = (0..ds.grid.total).find(|l| !seen[did].contains(l));
            let first = missing
                .map(|l| format!(", first missing {:?}", ds.grid.coords(l)))
                .unwrap_or_default();
            r.fail(
                "chunk-missing",
                format!(
                    "dataset `{}`: {} of {} chunks present in the index{first}",
                    ds.name, have, ds.grid.total
                ),
            );
        }
    }
}

/// Payload order, gaps, overlaps, alignment and unreferenced bytes before the footer, from the
/// `(start, end, row)` spans of the payloads inside the payload region (in index order).
///
/// Alignment padding ([`payload_alignment`]: fewer zero bytes before a raw payload than its
/// element size, reaching a multiple of it) is the layout our writer produces and no gap; padding
/// that holds non-zero bytes is reported (`payload-padding`: nothing covers those bytes with a
/// checksum, so it is the one sign of damage there), and so is a raw payload at an offset that
/// is no multiple of its element size (`payload-unaligned`: legal, but typed zero-copy readers —
/// the reference query engine among them — refuse it).
fn check_payload_spans(
    f: &TetFile,
    mut spans: Vec<(u64, u64, usize)>,
    header_end: u64,
    footer_start: u64,
    r: &mut Report,
) {
    let in_index_order = spans.windows(2).all(|w| w[0].0 <= w[1].0);
    if !in_index_order {
        r.warn(
            "payload-order",
            "payloads are not in index order (a full scan is not one sequential read)",
        );
    }
    spans.sort_unstable();
    let mut cursor = header_end;
    let mut gaps = 0u64;
    let mut unaligned: Option<(usize, u64, u64)> = None;
    let mut unaligned_count = 0u64;
    let mut dirty: Option<(usize, u64, u64)> = None;
    let mut dirty_count = 0u64;
    for &(s, e, i) in &spans {
        let align = row_alignment(f, i);
        if !s.is_multiple_of(align) {
            unaligned_count += 1;
            unaligned.get_or_insert((i, s, align));
        }
        if s < cursor && cursor > header_end {
            r.warn(
                "payload-overlap",
                format!("index row {i}: payload at {s} overlaps the previous payload"),
            );
        } else if s > cursor {
            let padding = s - cursor < align && s.is_multiple_of(align);
            if !padding {
                gaps += s - cursor;
            } else if f
                .read_bytes(cursor, s - cursor)
                .ok()
                .flatten()
                .is_some_and(|b| b.iter().any(|&x| x != 0))
            {
                dirty_count += 1;
                dirty.get_or_insert((i, cursor, s));
            }
        }
        cursor = cursor.max(e);
    }
    if let Some((i, s, align)) = unaligned {
        r.warn(
            "payload-unaligned",
            format!(
                "{unaligned_count} raw payloads start at an offset that is no multiple of their \
                 element size (first: index row {i} at {s}, element size {align}); typed \
                 zero-copy readers cannot use them in place"
            ),
        );
    }
    if let Some((i, from, to)) = dirty {
        r.warn(
            "payload-padding",
            format!(
                "{dirty_count} alignment paddings hold non-zero bytes (first: bytes {from}..{to} \
                 before index row {i})"
            ),
        );
    }
    if gaps > 0 {
        r.warn(
            "payload-gap",
            format!("{gaps} bytes between payloads are not referenced by any chunk"),
        );
    }
    if cursor < footer_start && !spans.is_empty() {
        r.warn(
            "trailing-bytes",
            format!(
                "{} bytes after the last payload are not referenced",
                footer_start - cursor
            ),
        );
    }
}

/// A warning per extension codec the file uses (`docs/FORMAT.md`, "Extension codecs"): this
/// program reads them, readers of `.tet` v1 (the reference tools) refuse such chunks as an
/// unsupported codec. `tet-convert in.tet out.tet --codec zstd` makes a v1 file of it.
fn warn_extension_codecs(f: &TetFile, r: &mut Report) {
    let mut counts: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    for e in &f.entries {
        if e.codec().is_some_and(|c| !c.is_v1()) {
            *counts.entry(e.codec_id).or_default() += 1;
        }
    }
    for (id, n) in counts {
        let name = Codec::from_id(id).map_or("?", Codec::name);
        r.warn(
            "chunk-codec-extension",
            format!(
                "{n} chunks use codec {id} ({name}), an extension of .tet v1: readers of v1 (the \
                 reference tools) refuse them as an unsupported codec; `tet-convert FILE OUT.tet \
                 --codec zstd` writes a v1 copy"
            ),
        );
    }
}

/// A note (not a failure) when the file records no checksums and some chunks have none (not
/// when its footer cannot be read: a cut or damaged footer is the failure, and who wrote the
/// file is unknown).
fn note_missing_checksums(f: &TetFile, r: &mut Report) {
    if !f.has_checksums() && r.checksummed < r.chunks && f.footer().is_ok() {
        r.note(
            "no-checksums",
            format!(
                "the file records no checksums (written by the reference tools or by an older \
                 tet-convert): {} of {} chunk payloads could not be checked against digests",
                r.chunks - r.checksummed,
                r.chunks
            ),
        );
    }
}

/// The footer digest and the chunk digest list: present together, well-formed, and the footer
/// digest equal to the bytes.
fn check_integrity_records(f: &TetFile, r: &mut Report) {
    let digests = f.chunk_digests();
    match f.footer_digest() {
        FooterDigest::Absent => {
            if digests.is_some() {
                r.fail(
                    "footer-digest",
                    "chunk digests are recorded but the footer digest is missing",
                );
            }
        }
        FooterDigest::Ok(_) => r.footer_digest = "ok",
        FooterDigest::Mismatch { recorded, computed } => {
            r.footer_digest = "mismatch";
            r.fail(
                "footer-digest",
                format!(
                    "the superblock, directory, chunk index and footer hash to {} but the footer \
                     records {} (bytes 0..{} or the footer changed)",
                    integrity::hex(computed),
                    integrity::hex(recorded),
                    f.chunk_index_offset.saturating_add(f.chunk_index_length)
                ),
            );
        }
        FooterDigest::Malformed(m) => {
            r.footer_digest = "malformed";
            r.fail("footer-digest", m);
        }
    }
    match digests {
        Some(Err(m)) => r.fail("chunk-digests", m.to_string()),
        None if r.footer_digest != "absent" => r.fail(
            "chunk-digests",
            format!(
                "the footer digest is recorded but `tet_ext.{}` is missing",
                integrity::CHUNK_DIGESTS_KEY
            ),
        ),
        _ => {}
    }
}

/// What a successful [`deep_verify`] checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeepVerified {
    /// Index rows.
    pub chunks: u64,
    /// Chunks checked against a digest or a zstd content checksum (all of them when
    /// `has_checksums`).
    pub checked: u64,
    /// Whether the file records checksums. `false`: a file of the reference tools or of an
    /// older tet-convert, whose structure and decoding were checked but whose payloads could
    /// not be checked against digests.
    pub has_checksums: bool,
}

/// Why [`deep_verify`] failed. Displays as one line naming the file and the first failure.
#[derive(Debug, thiserror::Error)]
pub enum DeepVerifyError {
    /// The file cannot be opened or its structure cannot be followed.
    #[error("{}: {source}", path.display())]
    Open { path: PathBuf, source: TetError },
    /// The file opened but breaks a rule or fails a checksum (`failures` is never empty).
    #[error("{}: {}", path.display(), first_failure(failures))]
    Failed {
        path: PathBuf,
        failures: Vec<Finding>,
    },
}

fn first_failure(failures: &[Finding]) -> String {
    let Some(first) = failures.first() else {
        return "verify failed".into();
    };
    let more = match failures.len() {
        1 => String::new(),
        n => format!(" (and {} more failures)", n - 1),
    };
    format!("[{}] {}{more}", first.code, first.message)
}

/// `tet verify --deep` as a library call: every structural rule, every chunk decoded and
/// checked against its checksum. `Ok` says how much was covered by checksums; the batch
/// runner's `--verify-existing` treats anything but `Ok` as a damaged output.
pub fn deep_verify(path: &Path) -> Result<DeepVerified, DeepVerifyError> {
    let f = TetFile::open(path).map_err(|source| DeepVerifyError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let r = verify(&f, Depth::Deep);
    if !r.ok() {
        return Err(DeepVerifyError::Failed {
            path: path.to_path_buf(),
            failures: r.failures,
        });
    }
    Ok(DeepVerified {
        chunks: r.chunks,
        checked: r.checked,
        has_checksums: f.has_checksums(),
    })
}

/// What is wrong with a zstd frame's header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ZstdHeaderError {
    #[error("payload is not a zstd frame (bad magic)")]
    Magic,
    #[error("raw_byte_len {raw_len} is more than a {frame_len}-byte zstd frame can hold")]
    TooLarge { raw_len: u64, frame_len: usize },
    #[error("zstd frame declares {declared} bytes, raw_byte_len is {raw_len}")]
    Declared { declared: u64, raw_len: u64 },
    #[error("zstd frame header is invalid")]
    Invalid,
}

/// The longest zstd frame header (magic, descriptor, window, dictionary id, content size):
/// what [`check_zstd_header`] needs of a frame.
const ZSTD_FRAME_HEADER_MAX: u64 = 18;

/// Checks the zstd frame header at the start of `src` (the frame, or at least its first
/// [`ZSTD_FRAME_HEADER_MAX`] bytes) of a `frame_len`-byte frame: a frame that declares its
/// content size must declare `raw_len`; and no frame can expand more than
/// [`super::ZSTD_MAX_RATIO`].
fn check_zstd_header(src: &[u8], frame_len: u64, raw_len: u64) -> Result<(), ZstdHeaderError> {
    if src.len() < 4 || src[..4] != integrity::ZSTD_MAGIC {
        return Err(ZstdHeaderError::Magic);
    }
    if raw_len > super::zstd_max_raw_len(frame_len) {
        return Err(ZstdHeaderError::TooLarge {
            raw_len,
            frame_len: usize::try_from(frame_len).unwrap_or(usize::MAX),
        });
    }
    match zstd::zstd_safe::get_frame_content_size(src) {
        Ok(Some(n)) if n != raw_len => Err(ZstdHeaderError::Declared {
            declared: n,
            raw_len,
        }),
        Ok(_) => Ok(()),
        Err(_) => Err(ZstdHeaderError::Invalid),
    }
}

/// The footer: readable through the schema (the reader says where it does not fit), and its
/// typed values within the reference reader's limits.
fn check_footer(f: &TetFile, r: &mut Report) {
    // A footer-less file has `Ok(None)`; one whose flag is clear but that ends with a footer
    // trailer is an error here too.
    if let Err(e) = f.footer() {
        r.fail("footer", e.to_string());
        return;
    }
    let Some((doc, spilled)) = f.footer_doc() else {
        return;
    };
    if let Some(l) = f.footer_layout() {
        if let Some((off, len)) = l.spill {
            if off + len != l.json_offset {
                r.warn(
                    "footer-spill",
                    "metadata spill does not end where the history JSON starts",
                );
            }
        }
    }
    if doc.metadata.is_some() && doc.metadata_ref.is_some() {
        r.fail(
            "footer-schema",
            "footer has both `metadata` and `metadata_ref`",
        );
    }
    if let Some(rows) = &doc.history {
        check_history(rows, r);
    }
    if let Some(md) = spilled.or(doc.metadata.as_ref()) {
        check_metadata(f, md, r);
    }
}

/// History rows: their number, exact keys and limits.
fn check_history(rows: &[Row], r: &mut Report) {
    if rows.len() > limits::HISTORY_ROWS {
        r.fail(
            "footer-limit",
            format!(
                "{} history rows (limit {})",
                rows.len(),
                limits::HISTORY_ROWS
            ),
        );
    }
    for (i, row) in rows.iter().enumerate() {
        match row {
            // The compact legacy form `["op", "source", "at"]`.
            Row::Legacy(a) => {
                if a.len() != 3 || a.iter().any(|x| !fits(x)) {
                    r.fail(
                        "footer-limit",
                        format!(
                            "history row {i}: a legacy row must be 3 strings of 1..=1024 bytes"
                        ),
                    );
                }
            }
            Row::Object(o) => check_history_row(i, o, r),
        }
    }
}

/// History row `i` in its object form.
fn check_history_row(i: usize, o: &RowObject, r: &mut Report) {
    for k in o.other.keys() {
        r.fail(
            "footer-schema",
            format!("history row {i}: unknown key `{k}`"),
        );
    }
    for (k, s) in [("op", &o.op), ("source", &o.source), ("at", &o.at)] {
        if !fits(s) {
            r.fail(
                "footer-limit",
                format!("history row {i}: `{k}` is {} bytes (1..=1024)", s.len()),
            );
        }
    }
    if o.at.parse::<u64>().is_err() {
        r.warn(
            "footer-history",
            format!(
                "history row {i}: `at` = {:?} is not decimal Unix seconds",
                o.at
            ),
        );
    }
    if let Some(p) = &o.parents {
        if p.len() > limits::PARENTS_PER_ROW {
            r.fail(
                "footer-limit",
                format!("history row {i}: {} parents (limit 16)", p.len()),
            );
        }
        if p.iter().any(|s| !fits(s)) {
            r.fail(
                "footer-limit",
                format!("history row {i}: a parent is not a 1..=1024-byte string"),
            );
        }
    }
    if let Some(p) = &o.params {
        if p.len() > limits::PARAMS_PER_ROW {
            r.fail(
                "footer-limit",
                format!("history row {i}: {} params (limit 32)", p.len()),
            );
        }
        if p.iter().any(|(k, v)| !fits(k) || !fits(v)) {
            r.fail(
                "footer-limit",
                format!("history row {i}: a param key or value is not a 1..=1024-byte string"),
            );
        }
    }
}

/// The metadata (inline or spilled): file entries, and the entry of each dataset.
fn check_metadata(f: &TetFile, md: &Metadata, r: &mut Report) {
    for (k, v) in md.file.iter().flatten() {
        if let Scalar::Other(_) = v {
            r.fail(
                "footer-schema",
                format!("metadata.file.{k} is not a string"),
            );
        }
    }
    let Some(dsets) = &md.datasets else {
        return;
    };
    if dsets.len() > limits::DATASET_ENTRIES {
        r.fail(
            "footer-limit",
            format!(
                "{} entries in metadata.datasets (limit {})",
                dsets.len(),
                limits::DATASET_ENTRIES
            ),
        );
    }
    for (name, entry) in dsets {
        check_dataset_metadata(f, name, entry, r);
    }
}

/// `metadata.datasets.<name>`: it names a dataset; its attrs, dim_names and coords.
fn check_dataset_metadata(f: &TetFile, name: &str, e: &DatasetEntry, r: &mut Report) {
    let Some(id) = f.dataset_id(name) else {
        r.warn(
            "footer-dataset",
            format!("metadata.datasets names `{name}`, which is not a dataset"),
        );
        return;
    };
    let ds = &f.datasets[id];
    if let Some(a) = &e.attrs {
        check_attrs(name, a, r);
    }
    let dim_names = e
        .dim_names
        .as_ref()
        .map(|d| check_dim_names(name, ds, d, r))
        .unwrap_or_default();
    for (axis, v) in e.coords.iter().flatten() {
        check_coord_axis(name, ds, &dim_names, axis, v, r);
    }
}

/// A dataset's attrs: at most 64 strings within the limits.
fn check_attrs(name: &str, a: &BTreeMap<String, String>, r: &mut Report) {
    if a.len() > limits::ATTRS_PER_DATASET {
        r.fail(
            "footer-limit",
            format!("`{name}`: {} attrs (limit 64)", a.len()),
        );
    }
    for (k, s) in a {
        if !fits(s) || !fits(k) {
            r.fail(
                "footer-limit",
                format!("`{name}`: attr `{k}` key or value outside 1..=1024 bytes"),
            );
        }
    }
}

/// A dataset's dim_names: one string within the limits per dimension. Returns them when they
/// are all within the limits (whatever their number), else none.
fn check_dim_names(name: &str, ds: &DatasetInfo, d: &[String], r: &mut Report) -> Vec<String> {
    if !d.iter().all(|x| fits(x)) {
        r.fail(
            "footer-schema",
            format!("`{name}`: dim_names is not a list of 1..=1024-byte strings"),
        );
        return Vec::new();
    }
    if d.len() != ds.shape.len() {
        r.fail(
            "footer-schema",
            format!(
                "`{name}`: {} dim_names for rank {}",
                d.len(),
                ds.shape.len()
            ),
        );
    }
    d.to_vec()
}

/// One axis of a dataset's coords: a labels list within the limits, one label per position
/// of a named dimension.
fn check_coord_axis(
    name: &str,
    ds: &DatasetInfo,
    dim_names: &[String],
    axis: &str,
    v: &CoordAxis,
    r: &mut Report,
) {
    let labels = &v.labels;
    if labels.len() > limits::LABELS_PER_AXIS {
        r.fail(
            "footer-limit",
            format!(
                "`{name}`: coords `{axis}` has {} labels (limit 64)",
                labels.len()
            ),
        );
    }
    if labels.iter().any(|l| !fits(l)) {
        r.fail(
            "footer-limit",
            format!("`{name}`: a label of `{axis}` is not a 1..=1024-byte string"),
        );
    }
    match dim_names.iter().position(|d| d == axis) {
        Some(a) if ds.shape[a] != labels.len() as u64 => r.fail(
            "footer-schema",
            format!(
                "`{name}`: coords `{axis}` has {} labels for {} positions",
                labels.len(),
                ds.shape[a]
            ),
        ),
        Some(_) => {}
        None => r.warn(
            "footer-coords",
            format!("`{name}`: coords axis `{axis}` is not one of its dim_names"),
        ),
    }
}
