//! The streaming `.tet` writer.
//!
//! Datasets are declared up front, so the directory and the index size are known before the
//! first payload: the superblock, directory and a zeroed index are written at once and payloads
//! follow the index, back to back except for the zero bytes (fewer than 8) that put a raw
//! payload at a multiple of its element size ([`super::payload_alignment`]). Chunks may then be
//! submitted from any number of threads in any order; a bounded reorder window puts them back
//! into index order (dataset, then row-major grid) before they are written, so the output bytes
//! do not depend on thread timing and at most `window` chunks wait in memory.
//! [`TetWriter::finish`] writes the footer, fills in the index rows, fsyncs, and renames the
//! temporary file over the target: a crash never leaves a partial file at the target path.
//!
//! Checksums ([`super::integrity`]): a chunk submitted without a checksum of its own (raw, or a
//! zstd frame without the content checksum flag) is hashed (xxh3-64) by the submitting thread,
//! so the work is spread over the workers; `finish` records the digests in index order and ends
//! the footer with the footer digest. Both are functions of the bytes alone, so the output stays
//! the same whatever the thread count.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tempfile::NamedTempFile;

use super::budget::MemoryBudget;
use super::footer::{limits, Footer};
use super::integrity;
use super::{
    align8, invalid, payload_alignment, Codec, DType, Grid, Result, TetError, FLAG_FOOTER,
    FOOTER_MAGIC, FOOTER_VERSION, INDEX_HEADER_LEN, INDEX_MAGIC, INDEX_ROW_LEN, INDEX_VERSION,
    LAYOUT_VERSION, MAGIC, SUPERBLOCK_LEN,
};

/// A dataset to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetSpec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
}

/// The stored bytes of a chunk: in memory (owned, or borrowed for as long as the writer lives),
/// or a byte range of another file, copied file to file without passing through user space.
#[derive(Debug, Clone)]
pub enum PayloadBytes<'a> {
    Memory(Cow<'a, [u8]>),
    File {
        file: &'a File,
        offset: u64,
        len: u64,
    },
}

impl PayloadBytes<'_> {
    pub fn len(&self) -> u64 {
        match self {
            PayloadBytes::Memory(b) => b.len() as u64,
            PayloadBytes::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a> From<Vec<u8>> for PayloadBytes<'a> {
    fn from(v: Vec<u8>) -> Self {
        PayloadBytes::Memory(Cow::Owned(v))
    }
}

impl<'a> From<Cow<'a, [u8]>> for PayloadBytes<'a> {
    fn from(v: Cow<'a, [u8]>) -> Self {
        PayloadBytes::Memory(v)
    }
}

impl<'a> From<&'a [u8]> for PayloadBytes<'a> {
    fn from(v: &'a [u8]) -> Self {
        PayloadBytes::Memory(Cow::Borrowed(v))
    }
}

/// One encoded chunk, ready to be written.
#[derive(Debug, Clone)]
pub struct ChunkPayload<'a> {
    pub codec: Codec,
    /// Decoded size (the clipped chunk's bytes).
    pub raw_len: u64,
    /// Stored bytes (equal to the decoded bytes for raw).
    pub data: PayloadBytes<'a>,
}

/// Where the writer gets a chunk's digest (with checksums on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkDigest {
    /// Hashed by [`TetWriter::submit`] on the submitting thread.
    Compute,
    /// The caller hashed the stored bytes (xxh3-64, [`super::integrity::digest`]).
    Known(u64),
    /// The caller hands the digest in later, before [`TetWriter::finish`], through
    /// [`TetWriter::provide_digests`] (e.g. hashed in the same pass as the input's own digest).
    Later,
}

impl<'a> ChunkPayload<'a> {
    /// The heap bytes the payload holds (the capacity of an owned buffer; borrowed bytes and
    /// file ranges hold none): what a [`MemoryBudget`] counts for it until it is written.
    pub fn held_bytes(&self) -> u64 {
        match &self.data {
            PayloadBytes::Memory(Cow::Owned(v)) => v.capacity() as u64,
            _ => 0,
        }
    }

    /// An uncompressed chunk.
    pub fn raw(data: impl Into<PayloadBytes<'a>>) -> Self {
        let data = data.into();
        ChunkPayload {
            codec: Codec::Raw,
            raw_len: data.len(),
            data,
        }
    }
}

/// Writer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// How many chunks may wait out of order before submitters block (`usize::MAX`: no limit,
    /// when a [`MemoryBudget`] bounds the bytes in flight instead).
    pub window: usize,
    /// Index header `memory_budget_percent_bps` (0 = reader default).
    pub memory_budget_percent_bps: u16,
    /// Index header `memory_budget_bytes` (0 = use the percentage).
    pub memory_budget_bytes: u32,
    /// Record chunk digests and the footer digest (see [`super::integrity`]). Off only to
    /// measure their cost or to write files as tet-convert did before they existed.
    pub checksums: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            window: 16,
            memory_budget_percent_bps: 0,
            memory_budget_bytes: 0,
            checksums: true,
        }
    }
}

/// One written index row, kept until `finish`.
#[derive(Debug, Clone, Copy)]
struct Row {
    offset: u64,
    raw_len: u64,
    stored_len: u64,
    codec: u32,
    /// xxh3-64 of the stored bytes; `None` only when checksums are off (or
    /// checksums are off).
    digest: Option<u64>,
}

struct Reorder<'a> {
    /// Sequence number of the next chunk to write.
    next: u64,
    /// Chunks waiting for their turn, with their digest.
    pending: BTreeMap<u64, (ChunkPayload<'a>, Option<u64>)>,
    /// A thread is writing chunks (others only queue theirs).
    writing: bool,
    /// A thread runs [`TetWriter::write_all`]: submitters only queue.
    dedicated: bool,
    failed: Option<Failure>,
}

/// Why the writer stopped: what every later call reports, with the I/O error kind kept (a
/// full disk stays `ErrorKind::StorageFull` for whoever asks).
struct Failure {
    reason: String,
    kind: Option<std::io::ErrorKind>,
}

impl Failure {
    fn of(e: &TetError) -> Failure {
        Failure {
            reason: e.to_string(),
            kind: match e {
                TetError::Io(io) => Some(io.kind()),
                _ => None,
            },
        }
    }

    /// The error a later call returns: `what` and the first failure's reason.
    fn error(&self, what: &str) -> TetError {
        let msg = format!("{what}: {}", self.reason);
        match self.kind {
            Some(kind) => TetError::Io(std::io::Error::new(kind, msg)),
            None => TetError::Invalid(msg),
        }
    }
}

struct Output {
    file: BufWriter<NamedTempFile>,
    pos: u64,
    rows: Vec<Row>,
    /// Bytes before this offset have been handed to the kernel for writeback.
    flushed: u64,
}

/// Start writing dirty pages back every this many bytes, so the final fsync has little left to
/// do (it would otherwise be a serial tail of the whole conversion).
const WRITEBACK_EVERY: u64 = 32 << 20;

/// A `.tet` file being written. `Sync`: share it by reference between worker threads.
pub struct TetWriter<'a> {
    target: PathBuf,
    specs: Vec<DatasetSpec>,
    grids: Vec<Grid>,
    /// First sequence number of each dataset.
    bases: Vec<u64>,
    total: u64,
    index_offset: u64,
    index_len: u64,
    /// The bytes before the index rows (superblock, directory, index header): the start of what
    /// the footer digest covers.
    head: Vec<u8>,
    options: WriterOptions,
    state: Mutex<Reorder<'a>>,
    ready: Condvar,
    out: Mutex<Option<Output>>,
    /// Buffers of written chunks, handed back to the producers by [`TetWriter::spare_buffer`]:
    /// a chunk buffer is then allocated (and its pages faulted in) once per producer, not once
    /// per chunk.
    spare: Mutex<Vec<Vec<u8>>>,
    /// The budget the producers claimed each chunk's memory from: a written chunk's bytes are
    /// released to it and its buffer goes to its idle pool (instead of `spare`).
    budget: Option<Arc<MemoryBudget>>,
    /// Digests handed in by [`TetWriter::provide_digests`] for chunks submitted with
    /// [`ChunkDigest::Later`], by sequence number.
    later: Mutex<BTreeMap<u64, u64>>,
}

/// How many written chunk buffers the writer keeps for reuse, and the largest it keeps.
const SPARE_BUFFERS: usize = 4;
const SPARE_MAX_BYTES: usize = 64 << 20;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Encodes the directory blob (records with the name padding rule).
fn directory_blob(specs: &[DatasetSpec]) -> Vec<u8> {
    let mut blob = Vec::new();
    for s in specs {
        let name = s.name.as_bytes();
        blob.extend_from_slice(&(name.len() as u32).to_le_bytes());
        blob.extend_from_slice(&s.dtype.tag().to_le_bytes());
        blob.extend_from_slice(&(s.shape.len() as u32).to_le_bytes());
        blob.extend_from_slice(&0u32.to_le_bytes());
        blob.extend_from_slice(name);
        let pad = (8 - (16 + name.len()) % 8) % 8;
        blob.extend(std::iter::repeat_n(0u8, pad));
        for v in s.shape.iter().chain(&s.chunk_shape) {
            blob.extend_from_slice(&v.to_le_bytes());
        }
    }
    blob
}

/// Outputs of at most this many bytes are left for a group commit instead of being synced and
/// renamed one by one (0: never). Set by a batch worker process ([`defer_commits`]).
static DEFER_UP_TO: AtomicU64 = AtomicU64::new(0);
/// Outputs finished but not committed, in the order they finished.
static DEFERRED: Mutex<Vec<Deferred>> = Mutex::new(Vec::new());

/// A finished output left under its temporary name for a group commit: every byte written, not
/// synced, not renamed; `file` still holds the exclusive `flock` that keeps cleaners away.
#[derive(Debug)]
pub struct Deferred {
    pub temp: PathBuf,
    pub target: PathBuf,
    pub file: File,
    pub len: u64,
}

/// Makes [`TetWriter::finish`] in this process leave outputs of at most `max_bytes` whole but
/// unsynced under their temporary name ([`take_deferred`] hands them over) instead of fsyncing
/// and renaming each; 0 turns it off. Only a batch worker turns it on: its supervisor syncs the
/// files as a group, renames them, syncs each folder once and only then records them as
/// converted, so the promises stay (a crash leaves an output path whole or absent; a
/// `converted` ledger row names a durable file) while a batch of small files costs one journal
/// commit per group instead of two per file.
pub fn defer_commits(max_bytes: u64) {
    DEFER_UP_TO.store(max_bytes, Ordering::Relaxed);
}

/// The outputs finished since the last call and not committed (see [`defer_commits`]).
pub fn take_deferred() -> Vec<Deferred> {
    std::mem::take(&mut *lock(&DEFERRED))
}

/// The temporary path of the last output finished and left for a group commit, not yet
/// handed over (see [`defer_commits`]): a batch worker runs one job at a time, so it is that
/// job's output (wherever `--write-through-symlink` sent it).
pub fn last_deferred_temp() -> Option<PathBuf> {
    lock(&DEFERRED).last().map(|d| d.temp.clone())
}

/// The suffix of our temporary files, `.<target name>.XXXXXX.tet-convert.tmp` beside the target:
/// hidden, and distinctive enough that a later run may remove those no live process owns.
pub const TEMP_SUFFIX: &str = ".tet-convert.tmp";

/// Creates the temporary file for `target_name` in `dir`, holding an exclusive advisory lock
/// (`flock`) on it for as long as the file is open: a cleaner (the batch runner of `tet-cli`)
/// removes only temp files whose lock it can take, so a file being written is never removed, and
/// one whose writer died (the lock goes with the process) always can be.
pub(crate) fn create_temp(dir: &Path, target_name: &str) -> std::io::Result<NamedTempFile> {
    for _ in 0..4 {
        // Created 0666 less the umask, like any output file (tempfile's default is 0600, which
        // would hide the result from the group that runs the next step of a pipeline).
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{target_name}."))
            .suffix(TEMP_SUFFIX)
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .tempfile_in(dir)?;
        tmp.as_file().lock()?;
        // A cleaner that took the lock in the instant between creation and our lock removed the
        // file (it unlinks only while holding the lock): make another.
        if std::os::unix::fs::MetadataExt::nlink(&tmp.as_file().metadata()?) > 0 {
            return Ok(tmp);
        }
    }
    Err(std::io::Error::other(
        "the temporary output file was removed while it was being created",
    ))
}

impl<'a> TetWriter<'a> {
    /// Creates the temporary output beside `target` and writes the header, directory and a
    /// placeholder index.
    pub fn create(
        target: &Path,
        specs: Vec<DatasetSpec>,
        options: WriterOptions,
    ) -> Result<TetWriter<'a>> {
        if specs.len() > u32::MAX as usize {
            return Err(invalid("too many datasets"));
        }
        let mut grids = Vec::with_capacity(specs.len());
        let mut bases = Vec::with_capacity(specs.len());
        let mut total = 0u64;
        let mut seen = std::collections::HashSet::new();
        for s in &specs {
            if s.name.len() > u32::MAX as usize {
                return Err(invalid("dataset name too long"));
            }
            if !seen.insert(s.name.as_str()) {
                return Err(invalid(format!("dataset `{}` is declared twice", s.name)));
            }
            let g = Grid::new(&s.shape, &s.chunk_shape)
                .map_err(|e| invalid(format!("dataset `{}`: {e}", s.name)))?;
            if g.byte_len(s.dtype.size()).is_none() {
                return Err(invalid(format!("dataset `{}` is too large", s.name)));
            }
            bases.push(total);
            total = total
                .checked_add(g.total)
                .ok_or_else(|| invalid("too many chunks"))?;
            grids.push(g);
        }
        let blob = directory_blob(&specs);
        let (index_offset, index_len) = if specs.is_empty() {
            (SUPERBLOCK_LEN, 0)
        } else {
            let off = align8(40 + blob.len() as u64).ok_or_else(|| invalid("overflow"))?;
            let len = total
                .checked_mul(INDEX_ROW_LEN)
                .and_then(|n| n.checked_add(INDEX_HEADER_LEN))
                .ok_or_else(|| invalid("chunk index too large"))?;
            (off, len)
        };

        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out.tet".into());
        let tmp = create_temp(&dir, &base)?;
        let mut file = BufWriter::with_capacity(1 << 20, tmp);

        // Superblock.
        let mut head = Vec::with_capacity(index_offset as usize + 32);
        head.extend_from_slice(&MAGIC);
        head.extend_from_slice(&LAYOUT_VERSION.to_le_bytes());
        head.extend_from_slice(&(specs.len() as u32).to_le_bytes());
        head.extend_from_slice(&FLAG_FOOTER.to_le_bytes());
        head.extend_from_slice(&index_offset.to_le_bytes());
        head.extend_from_slice(&index_len.to_le_bytes());
        if !specs.is_empty() {
            head.extend_from_slice(&(blob.len() as u64).to_le_bytes());
            head.extend_from_slice(&blob);
            head.resize(index_offset as usize, 0);
            head.extend_from_slice(&INDEX_MAGIC);
            head.extend_from_slice(&INDEX_VERSION.to_le_bytes());
            head.extend_from_slice(&total.to_le_bytes());
            head.extend_from_slice(&options.memory_budget_percent_bps.to_le_bytes());
            head.extend_from_slice(&0u16.to_le_bytes());
            head.extend_from_slice(&options.memory_budget_bytes.to_le_bytes());
            head.extend_from_slice(&0u64.to_le_bytes());
        }
        file.write_all(&head)?;
        // Placeholder rows, filled in by `finish`.
        let zeros = vec![0u8; 1 << 16];
        let mut left = index_len.saturating_sub(INDEX_HEADER_LEN);
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            file.write_all(&zeros[..n])?;
            left -= n as u64;
        }
        let pos = index_offset + index_len;
        Ok(TetWriter {
            target: target.to_path_buf(),
            specs,
            grids,
            bases,
            total,
            index_offset,
            index_len,
            head,
            options: WriterOptions {
                window: options.window.max(1),
                ..options
            },
            state: Mutex::new(Reorder {
                next: 0,
                pending: BTreeMap::new(),
                writing: false,
                dedicated: false,
                failed: None,
            }),
            ready: Condvar::new(),
            spare: Mutex::new(Vec::new()),
            budget: None,
            later: Mutex::new(BTreeMap::new()),
            out: Mutex::new(Some(Output {
                file,
                pos,
                rows: Vec::with_capacity(total.min(1 << 20) as usize),
                flushed: 0,
            })),
        })
    }

    /// The declared datasets.
    pub fn datasets(&self) -> &[DatasetSpec] {
        &self.specs
    }

    /// The chunk grid of a declared dataset.
    pub fn grid(&self, dataset: usize) -> &Grid {
        &self.grids[dataset]
    }

    /// Total number of chunks the file will hold.
    pub fn chunk_count(&self) -> u64 {
        self.total
    }

    /// Accounts the memory of written chunks to `budget`: each chunk's [`ChunkPayload::held_bytes`]
    /// is released once it is written and its buffer is offered to the budget's idle pool, where
    /// [`TetWriter::spare_buffer`] takes buffers from.
    pub fn set_budget(&mut self, budget: Arc<MemoryBudget>) {
        self.budget = Some(budget);
    }

    /// The sequence number (index row) of a chunk: chunks of earlier datasets, then row-major.
    pub fn sequence(&self, dataset: usize, coords: &[u64]) -> Option<u64> {
        Some(self.bases.get(dataset)? + self.grids[dataset].linear(coords)?)
    }

    /// Hands in the digests of chunks submitted with [`ChunkDigest::Later`], as (sequence
    /// number, xxh3-64 of the stored bytes).
    pub fn provide_digests(&self, digests: impl IntoIterator<Item = (u64, u64)>) {
        lock(&self.later).extend(digests);
    }

    /// Hands in one chunk. Blocks while the chunk is more than `window` places ahead of the
    /// next one to be written. The thread that supplies the next chunk writes every chunk that
    /// is then in order.
    pub fn submit(&self, dataset: usize, coords: &[u64], payload: ChunkPayload<'a>) -> Result<()> {
        self.submit_digested(dataset, coords, payload, ChunkDigest::Compute)
    }

    /// [`TetWriter::submit`], with the chunk's digest from `digest`.
    pub fn submit_digested(
        &self,
        dataset: usize,
        coords: &[u64],
        payload: ChunkPayload<'a>,
        digest: ChunkDigest,
    ) -> Result<()> {
        let spec = self
            .specs
            .get(dataset)
            .ok_or_else(|| invalid(format!("no dataset {dataset}")))?;
        let grid = &self.grids[dataset];
        let linear = grid.linear(coords).ok_or_else(|| {
            invalid(format!(
                "dataset `{}`: chunk {coords:?} is outside the grid {:?}",
                spec.name, grid.counts
            ))
        })?;
        let want = grid.chunk_elements(coords) * spec.dtype.size() as u64;
        if payload.raw_len != want {
            return Err(invalid(format!(
                "dataset `{}` chunk {coords:?}: raw length {} but the clipped chunk holds {want} bytes",
                spec.name, payload.raw_len
            )));
        }
        if payload.codec == Codec::Raw && payload.data.len() != want {
            return Err(invalid(format!(
                "dataset `{}` chunk {coords:?}: raw payload of {} bytes, expected {want}",
                spec.name,
                payload.data.len()
            )));
        }
        let seq = self.bases[dataset] + linear;
        // Hashed here, on the submitting (worker) thread, not in the ordered write stage.
        let digest = match digest {
            _ if !self.options.checksums => None,
            ChunkDigest::Known(d) => Some(d),
            ChunkDigest::Later => None,
            ChunkDigest::Compute => chunk_digest(&payload).map_err(|e| {
                invalid(format!(
                    "dataset `{}` chunk {coords:?}: cannot read the payload to hash it: {e}",
                    spec.name
                ))
            })?,
        };

        let mut st = lock(&self.state);
        loop {
            if let Some(f) = &st.failed {
                return Err(f.error("writer failed earlier"));
            }
            if seq < st.next || st.pending.contains_key(&seq) {
                return Err(invalid(format!(
                    "dataset `{}`: chunk {coords:?} was submitted twice",
                    spec.name
                )));
            }
            if seq < st.next.saturating_add(self.options.window as u64) {
                break;
            }
            st = self.ready.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.pending.insert(seq, (payload, digest));
        if st.dedicated || st.writing {
            // A write stage is running: it takes this chunk when its turn comes.
            self.ready.notify_all();
            return Ok(());
        }
        self.write_ready(st).1
    }

    /// Writes every chunk that is now in order. Called with the state lock held and no other
    /// thread writing; returns the lock again.
    fn write_ready<'g>(
        &'g self,
        mut st: MutexGuard<'g, Reorder<'a>>,
    ) -> (MutexGuard<'g, Reorder<'a>>, Result<()>) {
        st.writing = true;
        loop {
            // Take the run of chunks that are now in order.
            let mut run = Vec::new();
            let mut n = st.next;
            while let Some(p) = st.pending.remove(&n) {
                run.push(p);
                n += 1;
            }
            if run.is_empty() {
                st.writing = false;
                return (st, Ok(()));
            }
            // Taken: later duplicates of these are refused, and the window moves on while the
            // run is written (in flight: at most the window plus this run).
            let first = st.next;
            st.next = n;
            drop(st);
            let result = self.write_run(first, &run);
            self.keep_spare(run);
            st = lock(&self.state);
            self.ready.notify_all();
            if let Err(e) = result {
                st.failed = Some(Failure::of(&e));
                st.writing = false;
                st.pending.clear();
                return (st, Err(e));
            }
        }
    }

    /// Runs the ordered write stage on the calling thread until every declared chunk is
    /// written (or the write fails or is aborted). While it runs, [`TetWriter::submit`] only
    /// queues chunks, so the threads that produce them never wait for I/O.
    pub fn write_all(&self) -> Result<()> {
        let mut st = lock(&self.state);
        st.dedicated = true;
        loop {
            if let Some(f) = &st.failed {
                return Err(f.error("writer failed"));
            }
            if !st.writing && st.next >= self.total {
                return Ok(());
            }
            if !st.writing && st.pending.contains_key(&st.next) {
                let (g, r) = self.write_ready(st);
                st = g;
                r?;
            } else {
                st = self.ready.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        }
    }

    /// An empty buffer of a chunk already written, if one is kept (its capacity is whatever that
    /// chunk needed). Producers use it instead of allocating a fresh one for every chunk.
    /// With a budget, the buffer comes from its idle pool (the caller's claim must cover it).
    pub fn spare_buffer(&self) -> Option<Vec<u8>> {
        if let Some(b) = &self.budget {
            return b.take::<Vec<u8>>(|_| true);
        }
        lock(&self.spare).pop()
    }

    /// Keeps the owned buffers of a written run for [`TetWriter::spare_buffer`], up to
    /// `SPARE_BUFFERS` of at most `SPARE_MAX_BYTES` each; the rest are freed. With a budget,
    /// each chunk's bytes are released to it and its buffer offered to its idle pool.
    fn keep_spare(&self, run: Vec<(ChunkPayload<'a>, Option<u64>)>) {
        if let Some(b) = &self.budget {
            for (p, _) in run {
                let held = p.held_bytes();
                let buffer = match p.data {
                    PayloadBytes::Memory(Cow::Owned(v)) => Some(v),
                    _ => None,
                };
                b.release_buffer(held, buffer);
            }
            return;
        }
        let mut spare = lock(&self.spare);
        for (p, _) in run {
            if spare.len() >= SPARE_BUFFERS {
                break;
            }
            if let PayloadBytes::Memory(Cow::Owned(mut v)) = p.data {
                if v.capacity() <= SPARE_MAX_BYTES {
                    v.clear();
                    spare.push(v);
                }
            }
        }
    }

    /// Fails the write: submitters blocked in the reorder window return an error, and
    /// [`TetWriter::finish`] refuses. Dropping the writer then removes the temporary file.
    pub fn abort(&self, reason: &str) {
        let mut st = lock(&self.state);
        if st.failed.is_none() {
            st.failed = Some(Failure {
                reason: reason.to_string(),
                kind: None,
            });
        }
        st.pending.clear();
        self.ready.notify_all();
    }

    /// Writes the chunks `first`, `first + 1`, … in this order, each raw one after the zero
    /// bytes (fewer than 8) that put it at a multiple of its element size
    /// ([`payload_alignment`]): a function of the bytes written before it, so the same whatever
    /// the thread timing.
    fn write_run(&self, first: u64, run: &[(ChunkPayload<'a>, Option<u64>)]) -> Result<()> {
        const ZEROS: [u8; 8] = [0; 8];
        let mut guard = lock(&self.out);
        let out = guard
            .as_mut()
            .ok_or_else(|| invalid("writer already finished"))?;
        for (seq, (p, digest)) in (first..).zip(run) {
            let align = payload_alignment(p.codec, self.specs[self.dataset_of(seq)].dtype);
            let pad = (align - out.pos % align) % align;
            let pad = ZEROS
                .get(..pad as usize)
                .ok_or_else(|| invalid(format!("payload alignment {align} is over 8 bytes")))?;
            out.file.write_all(pad)?;
            out.pos += pad.len() as u64;
            match &p.data {
                PayloadBytes::Memory(b) => out.file.write_all(b)?,
                PayloadBytes::File { file, offset, len } => {
                    out.file.flush()?;
                    copy_range(file, *offset, out.file.get_ref().as_file(), *len)?;
                }
            }
            out.rows.push(Row {
                offset: out.pos,
                raw_len: p.raw_len,
                stored_len: p.data.len(),
                codec: p.codec.id(),
                digest: *digest,
            });
            out.pos += p.data.len();
            // Within a run too: a run of chunks copied file to file can be the whole output,
            // and one request for all of it would leave the disk idle while the copy runs,
            // then block on the writeback of everything at once.
            if out.pos - out.flushed >= WRITEBACK_EVERY {
                out.file.flush()?;
                start_writeback(
                    out.file.get_ref().as_file(),
                    out.flushed,
                    out.pos - out.flushed,
                );
                out.flushed = out.pos;
            }
        }
        Ok(())
    }

    /// Writes the footer and the index, fsyncs and renames the file into place. Fails (and
    /// removes the temporary file) if any chunk is missing. Returns where the file now lies:
    /// the target, or, when this process defers commits ([`defer_commits`]) and the file is
    /// small enough, its temporary path (complete, not yet synced nor renamed).
    pub fn finish(self, footer: &Footer) -> Result<PathBuf> {
        {
            let st = lock(&self.state);
            if let Some(f) = &st.failed {
                return Err(f.error("writer failed earlier"));
            }
            if st.next != self.total {
                let missing = st.next;
                let (ds, first) = self.locate(missing);
                return Err(invalid(format!(
                    "dataset `{}`: chunk {:?} was never submitted ({} of {} chunks written)",
                    self.specs[ds].name, first, missing, self.total
                )));
            }
        }
        let mut out = lock(&self.out)
            .take()
            .ok_or_else(|| invalid("writer already finished"))?;

        let checksums = self.options.checksums;
        if checksums {
            // Digests handed in later (ChunkDigest::Later): every one must have arrived.
            let mut later = std::mem::take(&mut *lock(&self.later));
            for (seq, r) in out.rows.iter_mut().enumerate() {
                if r.digest.is_none() {
                    let d = later.remove(&(seq as u64)).ok_or_else(|| {
                        let (ds, coords) = self.locate(seq as u64);
                        invalid(format!(
                            "dataset `{}` chunk {coords:?}: its digest was never handed in",
                            self.specs[ds].name
                        ))
                    })?;
                    r.digest = Some(d);
                }
            }
        }
        let mut hasher = integrity::Hasher::default();
        hasher.update(&self.head);

        // Index rows (hashed for the footer digest), then back to the end of the payloads.
        if self.index_len > 0 {
            out.file
                .seek(SeekFrom::Start(self.index_offset + INDEX_HEADER_LEN))?;
            let mut rows = Vec::with_capacity(out.rows.len().min(1 << 16) * 104);
            for (seq, r) in out.rows.iter().enumerate() {
                let (ds, coords) = self.locate(seq as u64);
                rows.extend_from_slice(&(ds as u64).to_le_bytes());
                for k in 0..8 {
                    rows.extend_from_slice(&coords.get(k).copied().unwrap_or(0).to_le_bytes());
                }
                rows.extend_from_slice(&r.offset.to_le_bytes());
                rows.extend_from_slice(&r.raw_len.to_le_bytes());
                rows.extend_from_slice(&r.stored_len.to_le_bytes());
                rows.extend_from_slice(&r.codec.to_le_bytes());
                rows.extend_from_slice(&0u32.to_le_bytes());
                if rows.len() >= (1 << 16) * 104 {
                    hasher.update(&rows);
                    out.file.write_all(&rows)?;
                    rows.clear();
                }
            }
            hasher.update(&rows);
            out.file.write_all(&rows)?;
            out.file.seek(SeekFrom::Start(out.pos))?;
        }

        // Footer: metadata spill (when needed), history JSON, trailer.
        let mut enc = footer
            .encode()
            .map_err(|e| TetError::Invalid(e.to_string()))?;
        if checksums {
            enc.set_chunk_digests(integrity::chunk_digests(out.rows.iter().map(|r| r.digest)));
        }
        let inline = enc.inline_json();
        let json = if inline.len() > limits::INLINE_JSON {
            let spill = enc.metadata_json();
            let offset = out.pos;
            out.file.write_all(spill.as_bytes())?;
            hasher.update(spill.as_bytes());
            out.pos += spill.len() as u64;
            enc.spilled_json(offset, spill.len() as u64)
        } else {
            inline
        };
        let json = if checksums {
            // The canonical object ends with `}`: the digest key goes last, after everything
            // it covers.
            let mut text = json
                .strip_suffix('}')
                .ok_or_else(|| invalid("footer JSON is not an object"))?
                .to_string();
            text.push_str(integrity::FOOTER_DIGEST_PREFIX);
            hasher.update(text.as_bytes());
            text.push_str(&integrity::hex(hasher.finish()));
            text.push_str(integrity::FOOTER_DIGEST_END);
            text
        } else {
            json
        };
        out.file.write_all(json.as_bytes())?;
        out.file.write_all(&(json.len() as u64).to_le_bytes())?;
        out.file.write_all(&FOOTER_VERSION.to_le_bytes())?;
        out.file.write_all(&FOOTER_MAGIC)?;

        let tmp = out
            .file
            .into_inner()
            .map_err(|e| TetError::Io(e.into_error()))?;
        let defer_up_to = DEFER_UP_TO.load(Ordering::Relaxed);
        if defer_up_to > 0 {
            let len = tmp.as_file().metadata()?.len();
            if len <= defer_up_to {
                // Left whole but unsynced under its temporary name, its lock held, for the
                // batch supervisor's group commit (see [`defer_commits`]).
                start_writeback(tmp.as_file(), 0, len);
                let (file, temp) = tmp.keep().map_err(|e| TetError::Io(e.error))?;
                lock(&DEFERRED).push(Deferred {
                    temp: temp.clone(),
                    target: self.target.clone(),
                    file,
                    len,
                });
                return Ok(temp);
            }
        }
        tmp.as_file().sync_all()?;
        tmp.persist(&self.target)
            .map_err(|e| TetError::Io(e.error))?;
        sync_dir(&self.target);
        Ok(self.target.clone())
    }

    /// Dataset and grid coordinates of a sequence number.
    fn locate(&self, seq: u64) -> (usize, Vec<u64>) {
        let ds = self.dataset_of(seq);
        (ds, self.grids[ds].coords(seq - self.bases[ds]))
    }

    /// The dataset of a sequence number: the last dataset whose first sequence number is ≤ seq
    /// (datasets without chunks share their base with the next one and are passed over).
    fn dataset_of(&self, seq: u64) -> usize {
        self.bases.partition_point(|&b| b <= seq).saturating_sub(1)
    }
}

/// The xxh3-64 of a chunk's stored bytes (read from the other file for a file range). Every
/// chunk gets one, zstd frames with their own content checksum included: hashing the stored
/// bytes costs a fraction of compressing them, catches a change to any stored bit (even one
/// that decodes the same), and lets a reader check a frame it passes on without decoding it.
fn chunk_digest(p: &ChunkPayload<'_>) -> std::io::Result<Option<u64>> {
    match &p.data {
        PayloadBytes::Memory(b) => Ok(Some(integrity::digest(b))),
        PayloadBytes::File { file, offset, len } => {
            use std::os::unix::fs::FileExt;
            thread_local! {
                static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
            }
            BUF.with_borrow_mut(|buf| {
                // A piece that stays in the CPU cache between the read and the hash.
                buf.resize(HASH_PIECE, 0);
                let mut h = integrity::Hasher::default();
                let mut done = 0u64;
                while done < *len {
                    let n = (*len - done).min(HASH_PIECE as u64) as usize;
                    let at = offset
                        .checked_add(done)
                        .ok_or_else(|| std::io::Error::other("payload offset overflows"))?;
                    file.read_exact_at(&mut buf[..n], at)?;
                    h.update(&buf[..n]);
                    done += n as u64;
                }
                Ok(Some(h.finish()))
            })
        }
    }
}

/// Bytes read at a time to hash a file range.
const HASH_PIECE: usize = 256 << 10;

/// Appends `len` bytes of `src` from `offset` at the current position of `dst`: in the kernel
/// (`copy_file_range`) where it can, else through a buffer.
fn copy_range(src: &File, offset: u64, dst: &File, len: u64) -> std::io::Result<()> {
    let mut done = 0u64;
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        while done < len {
            let mut off_in = libc::loff_t::try_from(offset + done)
                .map_err(|_| std::io::Error::other("source offset too large"))?;
            let want = (len - done).min(1 << 30) as usize;
            // SAFETY: plain syscall on two open descriptors; `off_in` is a valid pointer and a
            // null `off_out` means "at dst's file position", which the call advances.
            let n = unsafe {
                libc::copy_file_range(
                    src.as_raw_fd(),
                    &mut off_in,
                    dst.as_raw_fd(),
                    std::ptr::null_mut(),
                    want,
                    0,
                )
            };
            if n > 0 {
                done += n as u64;
                continue;
            }
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the source file is shorter than its header says",
                ));
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                // Not supported between these files: fall back to copying through a buffer.
                Some(libc::EXDEV | libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP) => break,
                Some(libc::EINTR) => continue,
                _ => return Err(e),
            }
        }
    }
    copy_buffered(src, offset + done, dst, len - done)
}

/// The portable half of [`copy_range`].
fn copy_buffered(src: &File, offset: u64, dst: &File, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len.min(1 << 20) as usize];
    let mut w = dst;
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(buf.len() as u64) as usize;
        src.read_exact_at(&mut buf[..n], offset + done)?;
        w.write_all(&buf[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// Asks the kernel to start writing `len` bytes at `offset` back to disk, without waiting.
/// Best effort: a failure only means the final fsync does the work.
fn start_writeback(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let (Ok(o), Ok(l)) = (
            libc::off64_t::try_from(offset),
            libc::off64_t::try_from(len),
        ) {
            // SAFETY: plain syscall on an open descriptor.
            unsafe {
                libc::sync_file_range(file.as_raw_fd(), o, l, libc::SYNC_FILE_RANGE_WRITE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// Makes the rename durable (best effort: not every filesystem supports syncing a directory).
fn sync_dir(target: &Path) {
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek};

    #[test]
    fn file_ranges_append_at_the_position() {
        let mut src = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        src.write_all(&data).unwrap();
        for copy in [copy_range, copy_buffered] {
            let mut dst = tempfile::tempfile().unwrap();
            dst.write_all(b"head").unwrap();
            copy(&src, 10, &dst, 2_000_000).unwrap();
            dst.write_all(b"tail").unwrap();
            let mut got = Vec::new();
            dst.seek(SeekFrom::Start(0)).unwrap();
            dst.read_to_end(&mut got).unwrap();
            assert_eq!(&got[..4], b"head");
            assert_eq!(&got[4..2_000_004], &data[10..2_000_010]);
            assert_eq!(&got[2_000_004..], b"tail");
            // Past the end of the source: an error, not a short file.
            assert!(copy(&src, 2_999_000, &dst, 5_000).is_err());
        }
    }
}
