//! An object read by ranges ([`RangedObject`]): the [`ByteSource`] the importers of the formats
//! the engine decodes itself (NPY/NPZ, TeaFile, Tensogram) read an object input through,
//! instead of a spool file.
//!
//! - Every request is a ranged GET conditional on the ETag the object had when it was opened,
//!   so an object replaced during the conversion is an error ("the object changed"), never a
//!   mix of two versions.
//! - A read of at least [`BLOCK`] bytes that does not continue the previous one (a selection,
//!   a jump) is fetched as it is, in requests of at most [`PIECE`] bytes streamed straight into
//!   the caller's buffer. One that continues it (a scan in order, as the engine reads chunk
//!   after chunk) fetches a window of [`WINDOW`] bytes from there, which the next reads are
//!   served from; [`WINDOWS`] windows are kept (threads reading neighbouring chunks at once
//!   share them). Fewer, larger requests: a server whose cost is per request (moto copies the
//!   whole object for each ranged GET) is not asked 256 times per GiB.
//! - Smaller reads (headers, zip directories, frame headers) go through a cache of
//!   [`CACHE_BLOCKS`] blocks of [`BLOCK`] bytes; a miss right after the previous block fetches
//!   [`READ_AHEAD`] blocks at once.
//! - At most [`IN_FLIGHT`] requests are in flight for the object, over all the threads that
//!   read it. Memory is therefore bounded by the windows (16 MiB), the cache (8 MiB) and the
//!   caller's buffers, whatever the object's size; [`RangedObject::with_memory`] bounds windows
//!   and cache together by a smaller amount (a combination of many objects shares the memory
//!   budget's reserve among them), at the cost of smaller requests.
//! - The input digest of the history row ([`RangedObject::digest`]) is fed by the reads
//!   themselves: a digest cursor starts at byte 0, every fetch that reaches it is hashed as it
//!   arrives and moves it on; a window or cache block fetched ahead of it is remembered weakly
//!   (hashed when the cursor gets there, if it is still kept; memory is never held for the
//!   digest alone). At the end `digest` fetches, by ranges conditional on the same ETag and in
//!   order, only what the cursor has not passed: nothing after a scan in order, the rest of the
//!   object after a selection. The object is fetched once, not twice.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};

use futures_util::StreamExt as _;
use object_store::{GetOptions, GetRange, ObjectStore as _};
use sha2::{Digest as _, Sha256};
use tet_source::byte_source::{check_range, ByteSource};

use super::{Object, ObjectInfo};
use crate::control::Cancel;
use crate::storage::{Cause, StorageError};

/// Bytes of a cache block; reads at least this long bypass the cache.
pub const BLOCK: u64 = 256 << 10;
/// Blocks the cache keeps (8 MiB).
pub const CACHE_BLOCKS: usize = 32;
/// Blocks fetched at once when small reads walk the object in order (2 MiB).
pub const READ_AHEAD: u64 = 8;
/// Most bytes of one request.
pub const PIECE: u64 = 8 << 20;
/// Bytes fetched at once for a read that continues the previous one.
pub const WINDOW: u64 = 8 << 20;
/// Windows kept.
pub const WINDOWS: usize = 2;
/// Most requests in flight for one object.
pub const IN_FLIGHT: usize = 4;
/// Fetched pieces ahead of the digest cursor remembered (weakly) for it.
const AHEAD: usize = 64;

/// How much of the object a [`RangedObject`] keeps: its windows and its cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Limits {
    /// Bytes of a window (a multiple of [`BLOCK`], at least one block).
    window: u64,
    /// Windows kept (1 or 2).
    windows: usize,
    /// Cache blocks kept (at least 2).
    cache_blocks: usize,
    /// Blocks fetched at once by small reads in order (at most `cache_blocks`).
    read_ahead: u64,
}

impl Limits {
    /// [`WINDOWS`] windows of [`WINDOW`], [`CACHE_BLOCKS`] blocks, [`READ_AHEAD`].
    const FULL: Limits = Limits {
        window: WINDOW,
        windows: WINDOWS,
        cache_blocks: CACHE_BLOCKS,
        read_ahead: READ_AHEAD,
    };
    /// The least kept: one window of one block and two cache blocks (768 KiB).
    const FLOOR: u64 = 3 * BLOCK;

    /// Limits whose windows and cache together hold at most `bytes` (at least
    /// [`Limits::FLOOR`]): a third for the cache, the rest for the windows.
    fn within(bytes: u64) -> Limits {
        let bytes = bytes.max(Limits::FLOOR);
        if bytes >= Limits::FULL.bytes() {
            return Limits::FULL;
        }
        let cache_blocks = (bytes / 3 / BLOCK).clamp(2, CACHE_BLOCKS as u64);
        let rest = bytes.saturating_sub(cache_blocks * BLOCK);
        let windows: u64 = if rest >= 4 * BLOCK { 2 } else { 1 };
        let window = (rest / windows / BLOCK * BLOCK).clamp(BLOCK, WINDOW);
        Limits {
            window,
            windows: windows as usize,
            cache_blocks: cache_blocks as usize,
            read_ahead: READ_AHEAD.min(cache_blocks),
        }
    }

    /// The most bytes the windows and the cache hold.
    fn bytes(&self) -> u64 {
        self.window * self.windows as u64 + self.cache_blocks as u64 * BLOCK
    }
}

/// An object opened for reading by ranges (see the module docs).
pub struct RangedObject {
    object: Object,
    info: ObjectInfo,
    cancel: Cancel,
    limits: Limits,
    cache: Mutex<Cache>,
    windows: Mutex<Windows>,
    /// Requests that may still start.
    permits: Mutex<usize>,
    freed: Condvar,
    requests: AtomicU64,
    fetched: AtomicU64,
    hashing: Mutex<Hashing>,
}

impl std::fmt::Debug for RangedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangedObject")
            .field("url", &self.object.url())
            .field("size", &self.info.size)
            .finish()
    }
}

/// The blocks kept, least recently used first out.
#[derive(Default)]
struct Cache {
    blocks: Vec<(u64, Arc<Vec<u8>>, u64)>,
    clock: u64,
    /// The block after the last one a small read missed.
    next: u64,
}

impl Cache {
    fn get(&mut self, block: u64) -> Option<Arc<Vec<u8>>> {
        self.clock += 1;
        let now = self.clock;
        let hit = self.blocks.iter_mut().find(|(b, _, _)| *b == block)?;
        hit.2 = now;
        Some(hit.1.clone())
    }

    fn put(&mut self, block: u64, bytes: Arc<Vec<u8>>, most: usize) {
        self.clock += 1;
        if self.blocks.iter().any(|(b, _, _)| *b == block) {
            return;
        }
        if self.blocks.len() >= most {
            if let Some(oldest) = (0..self.blocks.len()).min_by_key(|&i| self.blocks[i].2) {
                self.blocks.swap_remove(oldest);
            }
        }
        self.blocks.push((block, bytes, self.clock));
    }
}

/// The windows of a scan in order, oldest first.
#[derive(Default)]
struct Windows {
    list: Vec<Arc<Window>>,
    /// Where the last large read ended.
    last_end: u64,
}

/// `len` bytes of the object from `start`, fetched by one thread while the others wait.
struct Window {
    start: u64,
    len: u64,
    /// `None` while loading; `Some(None)` when the load failed.
    bytes: Mutex<Option<Option<Arc<Vec<u8>>>>>,
    loaded: Condvar,
}

impl Window {
    /// The bytes once loaded, `None` when the load failed.
    fn wait(&self) -> Option<Arc<Vec<u8>>> {
        let mut b = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = b.as_ref() {
                return r.clone();
            }
            b = self.loaded.wait(b).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn set(&self, r: Option<Arc<Vec<u8>>>) {
        *self.bytes.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        self.loaded.notify_all();
    }
}

/// The input digest as the reads feed it: the SHA-256 of the object's bytes `0..at`, and the
/// pieces fetched beyond `at` that are still kept somewhere (a window, a cache block), by their
/// offset. Only weak references: a piece dropped by its owner is fetched again at the end.
#[derive(Default)]
struct Hashing {
    sha: Sha256,
    at: u64,
    ahead: BTreeMap<u64, Weak<Vec<u8>>>,
}

impl Hashing {
    /// Hashes the part of `bytes` (the object's bytes from `offset`) past the cursor, when the
    /// cursor lies within or at the start of it; then what was remembered ahead, as far as it
    /// goes. Whether the cursor moved.
    fn feed(&mut self, offset: u64, bytes: &[u8]) -> bool {
        let end = offset.saturating_add(bytes.len() as u64);
        if offset > self.at || end <= self.at {
            return false;
        }
        let from = usize::try_from(self.at - offset).unwrap_or(usize::MAX);
        let Some(tail) = bytes.get(from..) else {
            return false;
        };
        self.sha.update(tail);
        self.at = end;
        self.catch_up();
        true
    }

    /// Hashes the pieces remembered ahead that the cursor has reached; forgets those it passed
    /// and those no longer kept.
    fn catch_up(&mut self) {
        while let Some((&offset, _)) = self.ahead.first_key_value() {
            if offset > self.at {
                return;
            }
            let piece = self.ahead.remove(&offset).and_then(|w| w.upgrade());
            if let Some(bytes) = piece {
                let end = offset.saturating_add(bytes.len() as u64);
                if end > self.at {
                    let from = usize::try_from(self.at - offset).unwrap_or(usize::MAX);
                    if let Some(tail) = bytes.get(from..) {
                        self.sha.update(tail);
                        self.at = end;
                    }
                }
            }
        }
    }

    /// [`Hashing::feed`], else remembers `bytes` (weakly) when it lies ahead of the cursor.
    fn offer(&mut self, offset: u64, bytes: &Arc<Vec<u8>>) {
        if offset <= self.at {
            self.feed(offset, bytes);
            return;
        }
        self.ahead.retain(|_, w| w.strong_count() > 0);
        if self.ahead.len() >= AHEAD {
            // The farthest first out: the nearest are hashed soonest.
            if let Some((&last, _)) = self.ahead.last_key_value() {
                if last < offset {
                    return;
                }
                self.ahead.remove(&last);
            }
        }
        self.ahead.insert(offset, Arc::downgrade(bytes));
    }

    /// Where the next piece remembered ahead and still kept begins (the end of the gap the
    /// cursor is in).
    fn next_ahead(&mut self) -> Option<u64> {
        self.ahead.retain(|_, w| w.strong_count() > 0);
        self.ahead.keys().next().copied()
    }
}

/// A failed read: the cause on its own (the conversion's error line names the URL already),
/// with the storage error kept as the source.
#[derive(Debug, thiserror::Error)]
#[error("{cause}")]
pub struct ReadFailed {
    cause: String,
    #[source]
    source: StorageError,
}

fn to_io(e: StorageError) -> io::Error {
    let kind = match &e {
        StorageError::Interrupted { .. } => io::ErrorKind::Interrupted,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(
        kind,
        ReadFailed {
            cause: e.cause(),
            source: e,
        },
    )
}

impl RangedObject {
    /// Opens `object`, whose stat is `info` (its size, and the ETag every read is conditional
    /// on). Requests stop as soon as `cancel` asks.
    pub fn new(object: Object, info: ObjectInfo, cancel: Cancel) -> RangedObject {
        RangedObject {
            object,
            info,
            cancel,
            limits: Limits::FULL,
            cache: Mutex::new(Cache::default()),
            windows: Mutex::new(Windows::default()),
            permits: Mutex::new(IN_FLIGHT),
            freed: Condvar::new(),
            requests: AtomicU64::new(0),
            fetched: AtomicU64::new(0),
            hashing: Mutex::new(Hashing::default()),
        }
    }

    /// Keeps windows and cache within about `bytes` together (never less than 768 KiB: one
    /// window of one 256 KiB block and two cache blocks) instead of the full 24 MiB: what an object
    /// read beside many others gets. Smaller windows mean more, smaller requests.
    pub fn with_memory(mut self, bytes: u64) -> RangedObject {
        self.limits = Limits::within(bytes);
        self
    }

    /// The most bytes the windows and the cache hold (the caller's buffers aside).
    pub fn kept_bytes(&self) -> u64 {
        self.limits.bytes()
    }

    /// The object's URL.
    pub fn url(&self) -> &str {
        self.object.url()
    }

    /// Ranged requests made so far, and the bytes they fetched.
    pub fn fetched(&self) -> (u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.fetched.load(Ordering::Relaxed),
        )
    }

    /// The first `n` bytes (fewer for a shorter object), for identifying the format. Fails
    /// with the store's error, e.g. when the server ignores ranges ([`Object::ignores_ranges`]).
    pub fn head(&self, n: u64) -> Result<Vec<u8>, StorageError> {
        let n = n.min(self.info.size);
        let mut buf = vec![0u8; usize::try_from(n).unwrap_or(0)];
        if !buf.is_empty() {
            self.read_cached(0, &mut buf)?;
        }
        Ok(buf)
    }

    /// Waits for a request slot; takes up to `want` of those free (at least one).
    fn acquire(&self, want: usize) -> usize {
        let mut free = self.permits.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        let got = want.clamp(1, *free);
        *free -= got;
        got
    }

    fn release(&self, n: usize) {
        let mut free = self.permits.lock().unwrap_or_else(|e| e.into_inner());
        *free += n;
        drop(free);
        self.freed.notify_all();
    }

    /// Fills each `(offset, buffer)` of `parts` with one ranged GET, a few at a time; then hashes,
    /// in order, those the digest cursor reaches ([`Hashing::feed`]).
    fn fetch(&self, mut parts: Vec<(u64, &mut [u8])>) -> Result<(), StorageError> {
        if parts.is_empty() {
            return Ok(());
        }
        let slots = self.acquire(parts.len().min(IN_FLIGHT));
        let o = &self.object;
        let etag = self.info.etag.clone();
        let count = parts.len() as u64;
        let bytes: u64 = parts.iter().map(|(_, b)| b.len() as u64).sum();
        let requests = parts.iter_mut().map(|(offset, buf)| {
            let (offset, etag) = (*offset, etag.clone());
            async move {
                let end = offset + buf.len() as u64;
                let opts = GetOptions::new()
                    .with_range(Some(GetRange::Bounded(offset..end)))
                    .with_if_match(etag);
                let wrong = |got: usize| object_store::Error::Generic {
                    store: "ranged read",
                    source: format!("bytes {offset}..{end}: the answer holds {got} bytes").into(),
                };
                let mut s = o.store.get_opts(&o.key, opts).await?.into_stream();
                let mut at = 0usize;
                while let Some(piece) = s.next().await {
                    let piece = piece?;
                    let to = at + piece.len();
                    let Some(dst) = buf.get_mut(at..to) else {
                        return Err(wrong(to));
                    };
                    dst.copy_from_slice(&piece);
                    at = to;
                }
                if at != buf.len() {
                    return Err(wrong(at));
                }
                Ok(())
            }
        });
        let all = async {
            let mut s = futures_util::stream::iter(requests).buffer_unordered(slots);
            while let Some(r) = s.next().await {
                r?;
            }
            Ok::<(), object_store::Error>(())
        };
        let r = o.wait(all, &self.cancel);
        self.release(slots);
        self.requests.fetch_add(count, Ordering::Relaxed);
        self.fetched.fetch_add(bytes, Ordering::Relaxed);
        if r.is_ok() {
            parts.sort_by_key(|(offset, _)| *offset);
            let mut hashing = self.hashing.lock().unwrap_or_else(|e| e.into_inner());
            for (offset, buf) in &parts {
                hashing.feed(*offset, buf);
            }
        }
        r
    }

    /// A large read: from a window when it continues the previous read (or lies in a window),
    /// else straight into `buf`.
    fn read_large(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        let end = offset + buf.len() as u64;
        let (window, load) = {
            let mut ws = self.windows.lock().unwrap_or_else(|e| e.into_inner());
            let sequential = offset == ws.last_end;
            ws.last_end = end;
            let found = ws
                .list
                .iter()
                .find(|w| w.start <= offset && end <= w.start + w.len)
                .cloned();
            match found {
                Some(w) => (Some(w), false),
                None if sequential && end - offset < self.limits.window => {
                    let w = Arc::new(Window {
                        start: offset,
                        len: self.limits.window.min(self.info.size - offset),
                        bytes: Mutex::new(None),
                        loaded: Condvar::new(),
                    });
                    if ws.list.len() >= self.limits.windows {
                        ws.list.remove(0);
                    }
                    ws.list.push(w.clone());
                    (Some(w), true)
                }
                None => (None, false),
            }
        };
        let Some(w) = window else {
            return self.read_direct(offset, buf);
        };
        if load {
            let mut bytes = vec![0u8; usize::try_from(w.len).unwrap_or(0)];
            match self.read_direct(w.start, &mut bytes) {
                Ok(()) => {
                    let bytes = Arc::new(bytes);
                    self.offer(w.start, &bytes);
                    w.set(Some(bytes));
                }
                Err(e) => {
                    w.set(None);
                    return Err(e);
                }
            }
        }
        match w.wait() {
            Some(bytes) => {
                let from = (offset - w.start) as usize;
                buf.copy_from_slice(&bytes[from..from + buf.len()]);
                Ok(())
            }
            // Its loader got the error: this read asks for itself (and gets its own error).
            None => self.read_direct(offset, buf),
        }
    }

    /// A read straight into `buf`, in pieces of at most [`PIECE`] bytes.
    fn read_direct(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        let parts = buf
            .chunks_mut(PIECE as usize)
            .enumerate()
            .map(|(i, c)| (offset + i as u64 * PIECE, c))
            .collect();
        self.fetch(parts)
    }

    /// The length of block `b` (the last one may be short).
    fn block_len(&self, b: u64) -> usize {
        let start = b * BLOCK;
        usize::try_from(self.info.size.saturating_sub(start).min(BLOCK)).unwrap_or(0)
    }

    /// A small read, through the cache.
    fn read_cached(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        let end = offset + buf.len() as u64;
        let (first, last) = (offset / BLOCK, (end - 1) / BLOCK);
        let blocks_in_object = self.info.size.div_ceil(BLOCK);
        let mut have: Vec<(u64, Arc<Vec<u8>>)> = Vec::new();
        let mut missing = Vec::new();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for b in first..=last {
                match cache.get(b) {
                    Some(bytes) => have.push((b, bytes)),
                    None => missing.push(b),
                }
            }
            if let Some(&m) = missing.first() {
                // In order: read ahead.
                if m == cache.next && m > 0 {
                    let upto = (m + self.limits.read_ahead).min(blocks_in_object);
                    let more: Vec<u64> = (last + 1..upto)
                        .filter(|b| cache.blocks.iter().all(|(x, _, _)| x != b))
                        .collect();
                    missing.extend(more);
                }
                cache.next = missing.iter().max().map_or(m, |x| x + 1);
            }
        }
        if !missing.is_empty() {
            let mut fresh: Vec<(u64, Vec<u8>)> = missing
                .iter()
                .map(|&b| (b, vec![0u8; self.block_len(b)]))
                .collect();
            let parts = fresh
                .iter_mut()
                .map(|(b, v)| (*b * BLOCK, v.as_mut_slice()))
                .collect();
            self.fetch(parts)?;
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for (b, v) in fresh {
                let v = Arc::new(v);
                self.offer(b * BLOCK, &v);
                cache.put(b, v.clone(), self.limits.cache_blocks);
                if b <= last {
                    have.push((b, v));
                }
            }
        }
        for (b, bytes) in have {
            let block_start = b * BLOCK;
            let from = offset.max(block_start);
            let to = end.min(block_start + bytes.len() as u64);
            if from >= to {
                continue;
            }
            let src = &bytes[(from - block_start) as usize..(to - block_start) as usize];
            buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(src);
        }
        Ok(())
    }

    /// Hands fetched bytes kept elsewhere (a window, a cache block) to the digest.
    fn offer(&self, offset: u64, bytes: &Arc<Vec<u8>>) {
        let mut hashing = self.hashing.lock().unwrap_or_else(|e| e.into_inner());
        hashing.offer(offset, bytes);
    }

    /// Where the digest cursor stands: the object's bytes before it are hashed already.
    pub fn hashed(&self) -> u64 {
        self.hashing.lock().unwrap_or_else(|e| e.into_inner()).at
    }

    /// The input digest of the object (`sha256:<hex>`, as [`crate::meta::digest_input`] gives
    /// for a file) and its size. What the reads fed it is not fetched again: only the gaps the
    /// digest cursor has not passed, in order, each with one ranged GET conditional on the ETag
    /// and streamed into the hash (see the module docs). The cursor starts over afterwards.
    pub fn digest(&self) -> Result<(String, u64), StorageError> {
        let mut hashing = self.hashing.lock().unwrap_or_else(|e| e.into_inner());
        let size = self.info.size;
        loop {
            hashing.catch_up();
            if hashing.at >= size {
                break;
            }
            let from = hashing.at;
            let to = hashing.next_ahead().unwrap_or(size).clamp(from + 1, size);
            let got = self.stream_range(from, to, |piece| hashing.sha.update(piece))?;
            if got != to - from {
                let cause = Cause::Truncated {
                    written: from + got,
                    size,
                };
                return Err(StorageError::of_url(self.object.url(), cause));
            }
            hashing.at = to;
        }
        let done = std::mem::take(&mut *hashing);
        Ok((format!("sha256:{:x}", done.sha.finalize()), size))
    }

    /// Streams bytes `from..to` of the object into `sink` (one ranged GET conditional on the
    /// ETag, counted with the other requests); how many bytes came.
    fn stream_range(
        &self,
        from: u64,
        to: u64,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<u64, StorageError> {
        let o = &self.object;
        let opts = GetOptions::new()
            .with_range(Some(GetRange::Bounded(from..to)))
            .with_if_match(self.info.etag.clone());
        let fetch = async {
            let mut n = 0u64;
            let mut s = o.store.get_opts(&o.key, opts).await?.into_stream();
            while let Some(piece) = s.next().await {
                let piece = piece?;
                n = n.saturating_add(piece.len() as u64);
                if n > to - from {
                    break;
                }
                sink(&piece);
            }
            Ok::<_, object_store::Error>(n)
        };
        let slots = self.acquire(1);
        let r = o.wait(fetch, &self.cancel);
        self.release(slots);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.fetched.fetch_add(to - from, Ordering::Relaxed);
        r
    }
}

impl ByteSource for RangedObject {
    fn len(&self) -> u64 {
        self.info.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.info.size, offset, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        let r = if buf.len() as u64 >= BLOCK {
            self.read_large(offset, buf)
        } else {
            self.read_cached(offset, buf)
        };
        r.map_err(to_io)
    }
}

impl Drop for RangedObject {
    fn drop(&mut self) {
        let (n, bytes) = self.fetched();
        log::debug!(
            "{}: {n} ranged requests, {bytes} bytes of {}",
            self.object.url(),
            self.info.size
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::path::Path as Key;
    use object_store::{ObjectStoreExt as _, PutPayload};
    use proptest::prelude::*;

    /// `size` bytes that differ from place to place (so a misplaced piece changes the digest).
    fn bytes(size: u64, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..size)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// `data` as the object `o.bin` of an in-memory store, opened by ranges.
    fn ranged(data: &[u8]) -> RangedObject {
        let store = Arc::new(InMemory::new());
        let o = Object::in_memory(store.clone(), "o.bin");
        let put = PutPayload::from(data.to_vec());
        o.run(store.put(&Key::from("o.bin"), put)).unwrap();
        let info = o.info().unwrap();
        assert!(info.etag.is_some());
        RangedObject::new(o, info, Cancel::never())
    }

    fn sha(data: &[u8]) -> String {
        format!("sha256:{:x}", Sha256::digest(data))
    }

    /// Reads `len` bytes at `offset` and checks them against `data`.
    fn read(r: &RangedObject, data: &[u8], offset: u64, len: u64) {
        let mut buf = vec![0u8; len as usize];
        r.read_at(offset, &mut buf).unwrap();
        assert!(buf == data[offset as usize..(offset + len) as usize]);
    }

    #[test]
    fn a_scan_in_order_feeds_the_whole_digest_and_the_end_fetches_nothing() {
        let size = 2 * WINDOW + 3 * BLOCK + 11;
        let data = bytes(size, 7);
        let r = ranged(&data);
        // A header read, then chunks of 1 MiB in order (as the engine reads an NPY file).
        read(&r, &data, 0, 128);
        let mut at = 128;
        while at < size {
            let len = (1 << 20).min(size - at);
            read(&r, &data, at, len);
            at += len;
        }
        assert_eq!(r.hashed(), size);
        let before = r.fetched();
        assert_eq!(r.digest().unwrap(), (sha(&data), size));
        assert_eq!(r.fetched(), before, "the digest fetched again");
        // Every byte was fetched about once (the header block overlaps the first chunk).
        assert!(before.1 < size + BLOCK, "{before:?}");
    }

    #[test]
    fn a_selection_leaves_gaps_that_the_digest_fetches_in_order() {
        let size = WINDOW + 5 * BLOCK;
        let data = bytes(size, 9);
        let r = ranged(&data);
        read(&r, &data, 0, 64);
        // Two rows far apart, read by jumps (not hashed: the cursor is at the first block).
        read(&r, &data, 4 * BLOCK, 2 * BLOCK);
        read(&r, &data, WINDOW, BLOCK + 3);
        assert_eq!(r.hashed(), BLOCK);
        let (n, bytes_before) = r.fetched();
        assert_eq!(r.digest().unwrap(), (sha(&data), size));
        let (m, bytes_after) = r.fetched();
        // One GET for the gap after the first block: nothing was kept ahead.
        assert_eq!((m - n, bytes_after - bytes_before), (1, size - BLOCK));
        // The cursor starts over: a second digest is the same.
        assert_eq!(r.digest().unwrap(), (sha(&data), size));
    }

    #[test]
    fn cache_blocks_read_ahead_of_the_cursor_are_hashed_when_it_gets_there() {
        let size = 40 * BLOCK;
        let data = bytes(size, 11);
        let r = ranged(&data);
        // Small reads: block 30 (ahead, kept in the cache), then block 0.
        read(&r, &data, 30 * BLOCK + 5, 100);
        read(&r, &data, 3, 100);
        assert_eq!(r.hashed(), BLOCK);
        let before = r.fetched();
        assert_eq!(r.digest().unwrap(), (sha(&data), size));
        let after = r.fetched();
        // Two gaps fetched (blocks 1..30 and 31..40), block 30 taken from the cache.
        assert_eq!((after.0 - before.0, after.1 - before.1), (2, 38 * BLOCK));
    }

    #[test]
    fn limits_within_a_memory_share_hold_at_most_it() {
        assert_eq!(Limits::within(24 << 20), Limits::FULL);
        assert_eq!(Limits::FULL.bytes(), 24 << 20);
        let mut bytes = 0u64;
        while bytes < 26 << 20 {
            let l = Limits::within(bytes);
            assert!(l.bytes() <= bytes.max(Limits::FLOOR), "{bytes}: {l:?}");
            assert!(
                l.window >= BLOCK && l.window <= WINDOW && l.window.is_multiple_of(BLOCK),
                "{l:?}"
            );
            assert!((1..=WINDOWS).contains(&l.windows), "{l:?}");
            assert!(
                l.cache_blocks >= 2 && l.read_ahead <= l.cache_blocks as u64,
                "{l:?}"
            );
            // Most of the share is used (within a block per window and the cache's third).
            assert!(
                bytes < Limits::FLOOR || l.bytes() + 3 * BLOCK >= bytes.min(24 << 20),
                "{bytes}: {l:?}"
            );
            bytes += 97 << 10;
        }
    }

    /// A scan in order within a 1 MiB share: right bytes, the whole digest fed by the reads,
    /// every byte fetched about once, in requests of at most the small window.
    #[test]
    fn a_scan_in_order_within_a_small_share_fetches_each_byte_once() {
        let size = 4 * WINDOW + 17;
        let data = bytes(size, 5);
        let r = ranged(&data).with_memory(1 << 20);
        assert!(r.kept_bytes() <= 1 << 20);
        read(&r, &data, 0, 128);
        let mut at = 128;
        while at < size {
            let len = (100 << 10).min(size - at);
            read(&r, &data, at, len);
            at += len;
        }
        assert_eq!(r.hashed(), size);
        let (n, fetched) = r.fetched();
        assert!(fetched < size + BLOCK, "{fetched}");
        // Windows of 512 KiB (the cache has two blocks): 64 of them, not 4 of 8 MiB.
        assert!(n >= size / (512 << 10), "{n} requests");
        assert_eq!(r.digest().unwrap(), (sha(&data), size));
    }

    /// A read of the property test: a continuation of the previous read, or a jump.
    #[derive(Debug, Clone)]
    enum Read {
        Next { len: u64 },
        Jump { at: u64, len: u64 },
    }

    fn reads() -> impl Strategy<Value = Vec<Read>> {
        let len = prop_oneof![1u64..BLOCK, BLOCK..3 * BLOCK, Just(WINDOW + 1)];
        let read = prop_oneof![
            len.clone().prop_map(|len| Read::Next { len }),
            (any::<u64>(), len).prop_map(|(at, len)| Read::Jump { at, len }),
        ];
        prop::collection::vec(read, 0..24)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Whatever the reads, on one thread or several, the digest is the SHA-256 of the
        /// object, and never fetches more than the bytes the cursor had not passed.
        #[test]
        fn the_digest_is_the_objects_whatever_the_read_order(
            size in prop_oneof![
                Just(0u64),
                1u64..3 * BLOCK,
                Just(WINDOW + 7),
                Just(2 * WINDOW + 3 * BLOCK + 1),
            ],
            seed in any::<u64>(),
            threads in 1usize..4,
            plan in reads(),
            memory in prop_oneof![Just(None), (0u64..30 << 20).prop_map(Some)],
        ) {
            let data = bytes(size, seed);
            let r = match memory {
                Some(m) => ranged(&data).with_memory(m),
                None => ranged(&data),
            };
            std::thread::scope(|s| {
                for t in 0..threads {
                    let (r, data, plan) = (&r, &data, &plan);
                    s.spawn(move || {
                        let mut end = 0u64;
                        for step in plan.iter().skip(t).step_by(threads) {
                            let (at, len) = match *step {
                                Read::Next { len } => (end, len),
                                Read::Jump { at, len } => (at % size.max(1), len),
                            };
                            let len = len.min(size.saturating_sub(at));
                            if len > 0 {
                                read(r, data, at, len);
                            }
                            end = (at + len) % size.max(1);
                        }
                    });
                }
            });
            let hashed = r.hashed();
            let before = r.fetched().1;
            prop_assert_eq!(r.digest().unwrap(), (sha(&data), size));
            prop_assert!(r.fetched().1 - before <= size - hashed);
        }
    }
}
