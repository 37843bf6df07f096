//! The zstd contexts chunks are compressed with (level parameters tuned for independent chunk
//! frames, content checksums), their memory, and the allocator setting that keeps resident
//! memory within the budget.

use super::report::ConvertError;

/// A zstd context for chunks: level `level`'s parameters with a hash table one step larger
/// (hashLog + 1, see `chunk_params`), and zstd's content checksum in every frame (`checksum`:
/// the low 32 bits of XXH64 of the decoded chunk, checked by every zstd decoder). Every chunk is
/// an independent frame, which loses the history a single stream would have at each chunk start;
/// the larger table finds more matches inside the chunk and more than makes up for it (measured
/// in BENCHMARKS.md). Decoding is unaffected: a reader sees an ordinary zstd frame.
pub fn chunk_compressor(
    level: i32,
    checksum: bool,
) -> Result<zstd::bulk::Compressor<'static>, ConvertError> {
    let err = |source: std::io::Error| ConvertError::Zstd { level, source };
    let mut c = zstd::bulk::Compressor::new(level).map_err(err)?;
    c.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(checksum))
        .map_err(err)?;
    let params = chunk_params(level);
    c.set_parameter(zstd::stream::raw::CParameter::HashLog(params.hashLog))
        .map_err(err)?;
    if params.chainLog < stock_params(level).chainLog {
        // Only where lowered: elsewhere zstd keeps choosing it by each chunk's size, as before.
        c.set_parameter(zstd::stream::raw::CParameter::ChainLog(params.chainLog))
            .map_err(err)?;
    }
    Ok(c)
}

/// The compression parameters of our chunk frames at `level`: zstd's own for a chunk of the
/// default size, with the hash table one step larger (hashLog + 1). Where that makes the
/// double-fast match finder's long table reach 1 MiB (level 3: hashLog 17 → 18), its second
/// table (chainLog) goes one step smaller (16 → 15): the two tables then stay close to a 1 MiB L2
/// cache. Measured with the zstd CLI on the 1 GiB input (`-T1 -3 --zstd=hlog=…,clog=…`, issue 25):
/// stock 17/16 8.2 s of CPU, 521.3 MB; 18/16 (what we used before) 10.6 s, 512.7 MB; 18/15
/// 8.4 s, 513.1 MB — nearly all of the size gain at the stock speed. callgrind's cache model
/// with a 1 MiB last level showed the cost: 1.9× the misses of the zstd CLI in the match finder.
fn chunk_params(level: i32) -> zstd::zstd_safe::zstd_sys::ZSTD_compressionParameters {
    let mut p = stock_params(level);
    p.hashLog = (p.hashLog + 1).min(p.windowLog + 1).min(30);
    if p.strategy == zstd::zstd_safe::zstd_sys::ZSTD_strategy::ZSTD_dfast && p.hashLog == 18 {
        p.chainLog -= 1;
    }
    p
}

/// zstd's own parameters of `level` for a chunk of the default size.
fn stock_params(level: i32) -> zstd::zstd_safe::zstd_sys::ZSTD_compressionParameters {
    // SAFETY: a pure function of its arguments (zstd's parameter table lookup).
    unsafe { zstd::zstd_safe::zstd_sys::ZSTD_getCParams(level, DEFAULT_CHUNK_HINT, 0) }
}

/// The chunk size zstd's parameters are looked up for (the planner's default target).
const DEFAULT_CHUNK_HINT: u64 = crate::planner::DEFAULT_CHUNK_BYTES;

/// Makes the C allocator hand large freed blocks back to the system at once (glibc: a fixed mmap
/// threshold of 1 MiB, which also stops glibc raising the threshold as it sees large blocks
/// freed). Chunk buffers the memory budget frees then leave the process instead of staying in one
/// of glibc's per-thread arenas, so resident memory follows the budget: measured on the 1 GiB
/// input at `--jobs 64`, 422 MiB peak RSS without, 229 MiB with (BENCHMARKS.md, issue 25).
/// Process-wide, so the command-line programs call it once at start; a library user decides for
/// their own process. A no-op elsewhere.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before any threads are started.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// The memory of a compression context of `level` as [`chunk_compressor`] sets it up (zstd's
/// own estimate for those parameters).
pub(super) fn compressor_bytes(level: i32) -> u64 {
    // SAFETY: a pure function of its argument (zstd's size estimate).
    unsafe {
        zstd::zstd_safe::zstd_sys::ZSTD_estimateCCtxSize_usingCParams(chunk_params(level)) as u64
    }
}
