//! The worker pool: threads claim chunks in index order from the [`MemoryBudget`], encode them
//! and hand them to the ordered writer, reporting progress and checking for cancellation between
//! chunks; the first error stops every worker and the writer.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use tet_source::Source;

use super::compressor::compressor_bytes;
use super::encode::{encode_chunk, file_range};
use super::options::{ConvertOptions, DEFAULT_ZSTD_LEVEL};
use super::plan::Planned;
use super::report::ConvertError;
use crate::control::{Progress, ProgressEvent};
use crate::format::budget::MemoryBudget;
use crate::format::{ChunkDigest, TetError, TetWriter};

/// The most memory the chunk at `coords` of `p` holds while it is encoded (read buffer, widened
/// copy, compressed output and a compression context, as far as each applies): what the worker
/// claims from the [`MemoryBudget`] before it touches the chunk. A chunk copied file to file
/// holds none.
fn chunk_cost(source: &dyn Source, p: &Planned, coords: &[u64]) -> u64 {
    if file_range(source, p, coords).is_some() {
        return 0;
    }
    let elems = p.grid.chunk_elements(coords);
    let read = elems.saturating_mul(source.variables()[p.var].dtype.size() as u64);
    let stored = elems.saturating_mul(p.spec.dtype.size() as u64);
    let mut cost = read;
    if source.contiguous_bytes(p.var).is_some() {
        // A memory-mapped input: the pages the read copies from are resident until the importer
        // drops them after the copy (issue 34: uncounted, they took --jobs 64 to 307 MiB under
        // the 256 MiB default).
        cost = cost.saturating_add(read);
    }
    if p.widen.converts() {
        cost = cost.saturating_add(stored);
    }
    if p.codec.is_zstd_frame() || p.constant_as_zstd || p.carry_frames {
        let bound = zstd::zstd_safe::compress_bound(stored as usize) as u64;
        if let Some(t) = p.codec.transform() {
            // The transformed copy the frame is compressed from, and the transform's scratch.
            cost = cost
                .saturating_add(stored)
                .saturating_add(t.scratch_bytes(stored));
        }
        let level = if p.codec.is_zstd_frame() {
            p.level
        } else {
            DEFAULT_ZSTD_LEVEL
        };
        cost = cost
            .saturating_add(bound)
            .saturating_add(compressor_bytes(level));
    }
    cost
}

/// Hands a worker's scratch buffers and compression context back to the budget's idle pool: a
/// worker holds nothing of its own while it waits for its next claim.
fn recycle(
    budget: &MemoryBudget,
    buf: &mut Vec<u8>,
    wide: &mut Vec<u8>,
    zctx: &mut Option<(i32, zstd::bulk::Compressor<'static>)>,
) {
    for b in [std::mem::take(buf), std::mem::take(wide)] {
        let n = b.capacity() as u64;
        budget.put(b, n);
    }
    if let Some(c) = zctx.take() {
        let n = compressor_bytes(c.0);
        budget.put(c, n);
    }
}

/// The raw chunks the workers copy file to file out of the input file itself, as (sequence
/// number, offset, length) sorted by offset: their digests come from the input digest's pass.
/// A chunk whose range overlaps an earlier one's is left out (its worker hashes it).
pub(super) fn input_ranges(
    source: &dyn Source,
    planned: &[Planned],
    input: &Path,
) -> Vec<(u64, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(input) else {
        return Vec::new();
    };
    if !meta.is_file() {
        return Vec::new();
    }
    let bases = chunk_bases(planned);
    let mut ranges = Vec::new();
    for (d, p) in planned.iter().enumerate() {
        let Some(ext) = source.file_extent(p.var) else {
            continue;
        };
        let same = ext
            .file
            .metadata()
            .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
        if !same {
            continue;
        }
        for i in 0..p.grid.total {
            if let Some((_, off, len)) = file_range(source, p, &p.grid.coords(i)) {
                ranges.push((bases[d] + i, off, len));
            }
        }
    }
    ranges.sort_by_key(|r| (r.1, r.2));
    let mut end = 0u64;
    ranges.retain(|r| {
        let keep = r.1 >= end;
        if keep {
            end = r.1 + r.2;
        }
        keep
    });
    ranges
}

/// Tells the progress observer the conversion starts, with the raw bytes it will read.
fn report_start(planned: &[Planned], progress: Option<&Progress>) {
    let raw_total: u64 = planned
        .iter()
        .map(|p| p.grid.byte_len(p.spec.dtype.size()).unwrap_or(0))
        .sum();
    if let Some(p) = progress {
        p.report(ProgressEvent::Start {
            total_bytes: raw_total,
        });
    }
}

/// Runs the workers; returns what they stored.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_workers<'s>(
    source: &'s dyn Source,
    planned: &[Planned],
    writer: &TetWriter<'s>,
    jobs: usize,
    opts: &ConvertOptions,
    checksums: bool,
    budget: &MemoryBudget,
    later: &[u64],
) -> Result<Stored, ConvertError> {
    let bases = chunk_bases(planned);
    let progress = opts.progress.as_ref();
    report_start(planned, progress);
    // What a chunk may hold in memory at most: claimed before a worker touches it.
    let cost = |seq: u64| {
        let d = bases.partition_point(|&b| b <= seq) - 1;
        chunk_cost(source, &planned[d], &planned[d].grid.coords(seq - bases[d]))
    };
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<ConvertError>> = Mutex::new(None);
    let sizes: Vec<(AtomicU64, AtomicU64)> = planned
        .iter()
        .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
        .collect();
    let carried = AtomicU64::new(0);
    // Sources whose library serialises every call anyway are read by one thread at a time.
    let read_lock = Mutex::new(());
    let serial_reads = !source.parallel_reads();
    // The first error stops every worker, the writer and whoever waits for room in the budget.
    let stop = |e: ConvertError, why: &str| {
        let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
        failed.store(true, Ordering::Relaxed);
        writer.abort(why);
        budget.close();
    };

    let worker = || {
        let mut buf: Vec<u8> = Vec::new();
        let mut wide: Vec<u8> = Vec::new();
        let mut zctx: Option<(i32, zstd::bulk::Compressor<'static>)> = None;
        loop {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            // Waits, allocating nothing, until the chunk's memory fits in the budget.
            let Some(mut claim) = budget.claim(cost) else {
                return;
            };
            let seq = claim.seq;
            if let Some(sig) = opts.cancel.requested() {
                stop(ConvertError::Interrupted(sig), "stopped by a signal");
                return;
            }
            let d = bases.partition_point(|&b| b <= seq) - 1;
            let p = &planned[d];
            let coords = p.grid.coords(seq - bases[d]);
            if buf.capacity() == 0 {
                // The last chunk's buffer went to the writer: take one it has written.
                buf = writer.spare_buffer().unwrap_or_default();
            }
            // A panic in an importer or a codec fails the conversion, naming the chunk; left to
            // unwind, it would leave the write stage waiting for a chunk that never comes.
            let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                encode_chunk(
                    source,
                    p,
                    &coords,
                    &mut buf,
                    &mut wide,
                    &mut zctx,
                    &read_lock,
                    serial_reads,
                    checksums,
                    &|| writer.spare_buffer(),
                    budget,
                )
                .and_then(|(payload, kept)| {
                    let (raw, stored) = (payload.raw_len, payload.data.len());
                    // The claim keeps what the payload holds until the writer has written it; the
                    // scratch buffers and the context go back to the budget's idle pool.
                    budget.settle(&mut claim, payload.held_bytes());
                    recycle(budget, &mut buf, &mut wide, &mut zctx);
                    let digest = if later.binary_search(&seq).is_ok() {
                        ChunkDigest::Later
                    } else {
                        ChunkDigest::Compute
                    };
                    writer.submit_digested(d, &coords, payload, digest)?;
                    if kept {
                        carried.fetch_add(1, Ordering::Relaxed);
                    }
                    sizes[d].0.fetch_add(raw, Ordering::Relaxed);
                    sizes[d].1.fetch_add(stored, Ordering::Relaxed);
                    if let Some(p) = progress {
                        p.report(ProgressEvent::Advance { bytes: raw });
                    }
                    Ok(())
                })
            }));
            let result = encoded.unwrap_or_else(|panic| {
                Err(ConvertError::ChunkPanicked {
                    dataset: p.spec.name.clone(),
                    coords: coords.clone(),
                    message: tet_source::panic_text(&*panic),
                })
            });
            if let Err(e) = result {
                stop(chunk_error(e, &p.spec.name, &coords), "conversion failed");
                return;
            }
        }
    };
    let threads = pool_threads(jobs, planned).min(threads_within(
        opts.settings.memory_budget_bytes(),
        budget.limit(),
        resident_bytes(),
    ));
    if threads < jobs {
        log::debug!("{threads} worker threads: what the memory budget leaves room for");
    }
    let written = run_pool(threads, writer, budget, &failed, &worker)?;
    if let Some(p) = progress {
        p.report(ProgressEvent::Finish);
    }
    let first_error = first_error.into_inner().unwrap_or_else(|p| p.into_inner());
    run_outcome(written, first_error)?;
    Ok(Stored {
        sizes: sizes
            .iter()
            .map(|(r, s)| (r.load(Ordering::Relaxed), s.load(Ordering::Relaxed)))
            .collect(),
        carried: carried.load(Ordering::Relaxed),
    })
}

/// The worker threads of a run: `jobs`, but no more than there are chunks. A file of one chunk
/// gets one thread, not a pool of `jobs` that would start and wait for nothing: the batch's
/// in-process mode converts thousands of small files one after another (issue 25).
fn pool_threads(jobs: usize, planned: &[Planned]) -> usize {
    let chunks: u64 = planned.iter().map(|p| p.grid.total).sum();
    jobs.min(usize::try_from(chunks).unwrap_or(usize::MAX))
        .max(1)
}

/// The resident memory a worker thread costs beyond its claims: the stack pages it touches, its
/// share of the allocator's per-thread arenas (glibc keeps up to 8 per core) and rayon's
/// bookkeeping: a generous bound (a worker's stack stays within a few pages, its small
/// allocations within an arena's first heap pages), checked by the peak RSS at `--jobs 64`
/// (tests/memory_budget.rs, BENCHMARKS.md issue 34).
const THREAD_BYTES: u64 = 256 << 10;

/// The most worker threads the memory budget leaves room for: chunk data gets `chunk_limit` of
/// the `budget` ([`crate::format::pool_limit`]); what the process already holds (`resident`: the
/// binary, the libraries, the importer, the writer) comes out of the rest, and each thread costs
/// [`THREAD_BYTES`] of what is left. At least one. The output does not depend on it: chunks are
/// written in index order whatever the number of threads.
///
/// A resident size larger than the whole rest is not the converter's own: it is a host process
/// (a Python session with its arrays, a test harness running many tests in one process) holding
/// memory for other work, which no budget of ours can shrink; counting it would leave every
/// conversion there one thread, so the converter's typical start stands for it. (The `tet`
/// binary starts at 25–40 MiB, within the rest of the default budget.)
fn threads_within(budget: u64, chunk_limit: u64, resident: Option<u64>) -> usize {
    let rest = budget.saturating_sub(chunk_limit);
    // Where the resident size cannot be read, a typical start (25 MiB) stands for it.
    let own = match resident {
        Some(r) if r <= rest => r,
        _ => TYPICAL_START,
    };
    let room = rest.saturating_sub(own);
    usize::try_from(room / THREAD_BYTES)
        .unwrap_or(usize::MAX)
        .max(1)
}

/// What the converter's own process holds when it starts (binary, libraries): the stand-in for a
/// resident size that cannot be read or is a host's.
const TYPICAL_START: u64 = 25 << 20;

/// This process's resident set size (`/proc/self/statm`), where the system tells it.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages.checked_mul(u64::try_from(page).ok()?)
}

/// Runs `worker` on `jobs` threads beside the write stage (one thread writing chunks in index
/// order; the workers only read, widen and compress); returns how the write stage ended.
fn run_pool(
    jobs: usize,
    writer: &TetWriter<'_>,
    budget: &MemoryBudget,
    failed: &AtomicBool,
    worker: &(dyn Fn() + Sync),
) -> Result<std::thread::Result<Result<(), TetError>>, ConvertError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|source| ConvertError::Threads {
            threads: jobs,
            source,
        })?;
    std::thread::scope(|scope| {
        let stage = scope.spawn(|| {
            let written = writer.write_all();
            if written.is_err() {
                // Workers waiting for room would wait for writes that never come.
                budget.close();
            }
            written
        });
        // Whatever happens to the workers, the write stage is stopped before it is joined: a
        // worker that died (a panic outside a chunk) leaves a chunk the stage would wait for.
        let pooled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.scope(|s| {
                for _ in 0..jobs {
                    s.spawn(|_| worker());
                }
            })
        }));
        if failed.load(Ordering::Relaxed) || pooled.is_err() {
            writer.abort("conversion failed");
        }
        budget.close();
        let written = stage.join();
        match pooled {
            Ok(()) => Ok(written),
            Err(_) => Err(ConvertError::Panicked {
                what: "a conversion worker",
            }),
        }
    })
}

/// Where each planned dataset's chunks start in the sequence of all chunks the workers take.
fn chunk_bases(planned: &[Planned]) -> Vec<u64> {
    planned
        .iter()
        .scan(0u64, |acc, p| {
            let b = *acc;
            *acc += p.grid.total;
            Some(b)
        })
        .collect()
}

/// The error of the chunk at `coords` of dataset `dataset`: a source error names the chunk.
fn chunk_error(e: ConvertError, dataset: &str, coords: &[u64]) -> ConvertError {
    match e {
        ConvertError::Source(source) => ConvertError::Chunk {
            dataset: dataset.to_string(),
            coords: coords.to_vec(),
            source,
        },
        other => other,
    }
}

/// How the run ended, from the write stage's result (`written`) and the workers' first error.
fn run_outcome(
    written: std::thread::Result<Result<(), TetError>>,
    first_error: Option<ConvertError>,
) -> Result<(), ConvertError> {
    let written = written.map_err(|_| ConvertError::Panicked {
        what: "the write stage",
    })?;
    // The write stage's own failure (a full disk…) is the cause; the workers it stopped only
    // saw "writer failed earlier".
    if let Err(e @ TetError::Io(_)) = written {
        return Err(ConvertError::Tet(e));
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    written?;
    Ok(())
}

/// What the workers stored: (raw, stored) bytes per dataset, and how many chunks kept the
/// source's zstd frame.
pub(super) struct Stored {
    pub(super) sizes: Vec<(u64, u64)>,
    pub(super) carried: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The threads fit in what the budget leaves beside chunk data and the process's own memory;
    /// at least one whatever the budget.
    #[test]
    fn threads_fit_in_the_rest_of_the_budget() {
        let mib = 1u64 << 20;
        let b = 256 * mib;
        let limit = crate::format::pool_limit(b);
        // 256 MiB: a fifth (51.2 MiB) beside chunk data; 25 MiB resident leaves 26.2 MiB,
        // room for 104 threads of 256 KiB.
        assert_eq!(threads_within(b, limit, Some(25 * mib)), 104);
        assert_eq!(threads_within(b, limit, None), 104);
        assert_eq!(threads_within(b, limit, Some(51 * mib)), 1);
        // A host process far larger than the budget's rest (a Python session, a test harness)
        // is not counted as the converter's own: its typical start stands for it.
        assert_eq!(threads_within(b, limit, Some(2048 * mib)), 104);
        assert_eq!(
            threads_within(1, crate::format::pool_limit(1), Some(25 * mib)),
            1
        );
        let t = threads_within(b, limit, Some(30 * mib)) as u64;
        assert!(30 * mib + t * THREAD_BYTES + limit <= b);
    }
}
