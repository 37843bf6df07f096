//! Direct chunk access: reading an HDF5 dataset's stored chunks from the file ourselves and
//! decoding the filter pipeline in Rust, outside the HDF5 library and its global lock.
//!
//! libhdf5 (as linked here) is not thread-safe: every call goes through one process-wide lock
//! (`hdf5_sys::LOCK`, shared by hdf5-metno and netcdf). A `H5Dread` of a deflated dataset
//! decompresses under that lock, so several engine workers would queue behind each other. For
//! the common pipelines this module removes the library from the read path:
//!
//! 1. At open, under the lock, [`ChunkedVar::from_dataset`] records the dataset's shape, chunk
//!    shape, element size, filter pipeline, fill value and the *chunk table*: for every allocated
//!    chunk its grid position, file address, stored size and filter mask (bit `i` set = filter
//!    `i` of the pipeline was skipped for that chunk, as h5py's optional LZF does for chunks that
//!    do not shrink). Addresses and sizes are checked against the file length.
//! 2. [`ChunkedVar::read_region`] then needs no HDF5 call at all: for every chunk intersecting
//!    the region it reads the stored bytes with a positioned read (`pread`, so any number of
//!    threads may read at once), undoes the filter pipeline in reverse order
//!    ([`decode_filters_into`]) and copies the intersecting part into the output. Chunks are
//!    stored full-size even at the edges of the dataset. A chunk that was never written yields
//!    the dataset's fill value.
//!
//!    No buffer is allocated per chunk: each thread keeps its stored-bytes, intermediate-stage
//!    and whole-chunk buffers from one chunk to the next (up to 64 MiB; a read that needed more
//!    frees them when it ends). When the region holds a chunk whole and the chunk's rows are
//!    adjacent in the output (a region of whole chunks, as the engine plans for chunked
//!    sources), the last filter stage writes straight into the output: deflate alone inflates
//!    into it, shuffle + deflate inflates into a reused buffer and unshuffles into it. Only a
//!    chunk the region cuts is decoded into the thread's chunk buffer and copied from there.
//!
//! HDF5 1.10 can only list chunks in O(n²) (`H5Dget_chunk_info(i)` walks the index from its start
//! on every call, and `H5Dget_chunk_info_by_coord` scans every chunk: 48 s for 40 000 chunks
//! here), and `H5Dchunk_iter` only exists from 1.14. So the table is built only for datasets of
//! up to 4096 allocated chunks (≈0.1 s). Larger datasets are read *lazily*: per chunk, one
//! O(log n) lookup (`H5Dget_chunk_storage_size`) and `H5Dread_chunk` fetch the still-filtered
//! bytes under the lock, and the decoding — the expensive part — runs outside it as before.
//!
//! Decodable filters: deflate (1, a zlib stream, decoded with libdeflate: see [`inflate`]),
//! shuffle (2), fletcher32 (3, verified then stripped) and LZF (32000, h5py's filter, decoded by
//! [`lzf_decompress`]; libhdf5 itself cannot read it), and the common plugin filters, which
//! libhdf5 reads only with a plugin: Blosc (32001, PyTables' default; one Blosc 1.x buffer,
//! decoded by c-blosc from `blosc-src`, the build Zarr uses), Zstandard (32015, hdf5plugin's;
//! plain frames, `zstd`), bzip2 (307, one stream, `bzip2`), LZO (305, PyTables'; one LZO1X
//! stream, `lzokay`, see [`lzo_decompress`]), LZ4 (32004, the HDF Group
//! filter's block framing, see [`lz4_decompress`]; blocks decoded by `lz4_flex`) and Blosc2
//! (32026, hdf5plugin's and PyTables'; one Blosc2 frame per chunk, parsed by [`crate::blosc2`],
//! its chunks decoded by `blosc2-pure-rs`). A dataset with any other filter (szip,
//! scale-offset, n-bit, …), a Blosc2 codec or filter that decoder lacks (see
//! [`crate::blosc2::unsupported_variant`]), a non-chunked layout, or a datatype
//! with variable-length parts is reported as [`ChunkAccess::Library`] with the reason: read it
//! with `H5Dread` (libhdf5 loads filter plugins from `HDF5_PLUGIN_PATH`).
//!
//! # Use from another importer (NetCDF-4 files are HDF5 files)
//!
//! ```no_run
//! use std::fs::File;
//! use tet_hdf5::chunks::{ChunkAccess, ChunkedVar};
//!
//! # fn main() -> tet_source::Result<()> {
//! let path = std::path::Path::new("data.nc");
//! match ChunkedVar::open(path, "/group/temperature")? {
//!     ChunkAccess::Direct(var) => {
//!         let file = File::open(path)?;
//!         let mut out = vec![0u8; 10 * 20 * var.elem_size()];
//!         // Little-endian C-order bytes; safe to call from many threads at once.
//!         var.read_region(&file, &[0, 0], &[10, 20], &mut out)?;
//!     }
//!     ChunkAccess::Library(why) => eprintln!("use H5Dread: {why}"),
//! }
//! # Ok(()) }
//! ```
//!
//! [`ChunkedVar::open`] (and [`ChunkedVar::open_many`]) open their own HDF5 handle on the file;
//! a variable with a chunk table keeps nothing open, one without (more than 4096 chunks, see
//! [`ChunkedVar::has_chunk_table`]) keeps its dataset (and so the file) open until it is dropped.
//! If the caller holds the same file open through netCDF-C at that moment, HDF5 may refuse the
//! second open when the two file-close degrees differ; open sequentially, or build the variables
//! with [`ChunkedVar::from_dataset`] from a `hdf5::Dataset` you opened yourself (`tet_hdf5::hdf5`
//! re-exports hdf5-metno). All library calls take hdf5-metno's lock, which is the one netCDF
//! uses too (`hdf5_sys::LOCK`).
//!
//! All numbers from the file are checked before they size an allocation: a stored chunk cannot be
//! larger than the file, and a decoded chunk cannot exceed the dataset's chunk size (plus 4 bytes
//! per fletcher32 filter).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use hdf5_sys::h5::{hsize_t, HADDR_UNDEF};
use hdf5_sys::h5d::{
    H5D_fill_time_t, H5D_fill_value_t, H5D_layout_t, H5Dget_chunk_info, H5Dget_num_chunks,
    H5Dget_space,
};
use hdf5_sys::h5i::hid_t;
use hdf5_sys::h5p::{
    H5Pfill_value_defined, H5Pget_chunk, H5Pget_fill_time, H5Pget_fill_value, H5Pget_filter2,
    H5Pget_layout, H5Pget_nfilters,
};
use hdf5_sys::h5s::H5Sclose;
use hdf5_sys::h5t::{H5T_class_t, H5T_order_t, H5Tget_class, H5Tget_order, H5Tget_size};
use tet_source::{check_region, Lib, Part, Request, Result, SourceError};

use crate::types::OwnedType;

/// HDF5 filter id of deflate (zlib).
pub const FILTER_DEFLATE: i32 = 1;
/// HDF5 filter id of the byte shuffle.
pub const FILTER_SHUFFLE: i32 = 2;
/// HDF5 filter id of the fletcher32 checksum.
pub const FILTER_FLETCHER32: i32 = 3;
/// HDF5 filter id of szip.
pub const FILTER_SZIP: i32 = 4;
/// HDF5 filter id of n-bit packing.
pub const FILTER_NBIT: i32 = 5;
/// HDF5 filter id of scale-offset.
pub const FILTER_SCALEOFFSET: i32 = 6;
/// Registered id of PyTables' LZO filter.
pub const FILTER_LZO: i32 = 305;
/// Registered id of the bzip2 filter (PyTables, hdf5plugin).
pub const FILTER_BZIP2: i32 = 307;
/// Registered id of h5py's LZF filter.
pub const FILTER_LZF: i32 = 32000;
/// Registered id of the Blosc filter (PyTables' default, hdf5plugin).
pub const FILTER_BLOSC: i32 = 32001;
/// Registered id of the LZ4 filter (HDF Group's, as hdf5plugin ships it).
pub const FILTER_LZ4: i32 = 32004;
/// Registered id of the Zstandard filter (hdf5plugin's).
pub const FILTER_ZSTD: i32 = 32015;
/// Registered id of the Blosc2 filter (PyTables, hdf5plugin; see [`crate::blosc2`]).
pub const FILTER_BLOSC2: i32 = 32026;

/// Datasets with up to this many allocated chunks get a chunk table at open. Listing the chunks
/// costs O(n²) in HDF5 1.10 (every `H5Dget_chunk_info` call walks the index from the start;
/// `H5Dget_chunk_info_by_coord` scans all chunks): about 0.1 s for 4096 chunks. Larger datasets
/// are read with one O(log n) library lookup per chunk instead.
const MAX_TABLE_CHUNKS: u64 = 1 << 12;

/// One entry of a dataset's filter pipeline, as stored in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterSpec {
    /// The registered filter id (1 = deflate, 2 = shuffle, 32000 = LZF, …).
    pub id: i32,
    /// `H5Z_FLAG_*` bits (bit 0: optional).
    pub flags: u32,
    /// The filter's client data values.
    pub cd_values: Vec<u32>,
    /// The name stored with the filter (may be empty).
    pub name: String,
}

impl FilterSpec {
    /// A short label: `deflate(4)`, `shuffle`, `fletcher32`, `lzf`, `szip`, `nbit`,
    /// `scaleoffset`, `blosc`, `zstd`, … or `filter <id>`.
    pub fn label(&self) -> String {
        match self.id {
            FILTER_DEFLATE => match self.cd_values.first() {
                Some(l) => format!("deflate({l})"),
                None => "deflate".into(),
            },
            FILTER_SHUFFLE => "shuffle".into(),
            FILTER_FLETCHER32 => "fletcher32".into(),
            FILTER_SZIP => "szip".into(),
            FILTER_NBIT => "nbit".into(),
            FILTER_SCALEOFFSET => "scaleoffset".into(),
            FILTER_LZO => "lzo".into(),
            FILTER_BZIP2 => "bzip2".into(),
            FILTER_LZF => "lzf".into(),
            FILTER_BLOSC => "blosc".into(),
            FILTER_LZ4 => "lz4".into(),
            32008 => "bitshuffle".into(),
            32013 => "zfp".into(),
            FILTER_ZSTD => "zstd".into(),
            32017 => "sz".into(),
            FILTER_BLOSC2 => "blosc2".into(),
            id => {
                let name = self.name.trim();
                if name.is_empty() {
                    format!("filter {id}")
                } else {
                    format!("filter {id} ({name})")
                }
            }
        }
    }

    /// The filter for messages, said once: `blosc2 (id 32026)`, `lzo (id 305)` (the name
    /// stored with an unregistered id), `id 305` (no name).
    pub fn named(&self) -> String {
        let label = self.label();
        match label.strip_prefix("filter ") {
            Some(rest) => match rest.split_once(" (") {
                Some((_, n)) => format!("{} (id {})", n.strip_suffix(')').unwrap_or(n), self.id),
                None => format!("id {}", self.id),
            },
            None => match label.split_once('(') {
                // `deflate(4)`: the level is not part of the name.
                Some((n, _)) => format!("{n} (id {})", self.id),
                None => format!("{label} (id {})", self.id),
            },
        }
    }

    /// Whether the filter reduces size (everything but shuffle and fletcher32).
    pub fn is_compression(&self) -> bool {
        !matches!(self.id, FILTER_SHUFFLE | FILTER_FLETCHER32)
    }

    /// The Rust decoder for this filter, `None` when this module cannot decode it. `elem_size`
    /// is the datatype size, used by shuffle when the filter stored no element size.
    pub fn decoder(&self, elem_size: usize) -> Option<Filter> {
        match self.id {
            FILTER_DEFLATE => Some(Filter::Deflate),
            FILTER_SHUFFLE => {
                let s = self
                    .cd_values
                    .first()
                    .map(|&v| v as usize)
                    .filter(|&v| v > 0)
                    .unwrap_or(elem_size);
                Some(Filter::Shuffle { elem_size: s })
            }
            FILTER_FLETCHER32 => Some(Filter::Fletcher32),
            FILTER_LZF => Some(Filter::Lzf),
            FILTER_BLOSC => Some(Filter::Blosc),
            FILTER_ZSTD => Some(Filter::Zstd),
            FILTER_BZIP2 => Some(Filter::Bzip2),
            FILTER_LZO => Some(Filter::Lzo),
            FILTER_LZ4 => Some(Filter::Lz4),
            FILTER_BLOSC2 => crate::blosc2::unsupported_variant(&self.cd_values)
                .is_none()
                .then_some(Filter::Blosc2),
            _ => None,
        }
    }
}

/// A filter this module decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// zlib stream (RFC 1950).
    Deflate,
    /// Byte shuffle of elements of this size.
    Shuffle { elem_size: usize },
    /// Fletcher-32 checksum appended (little-endian) to the chunk.
    Fletcher32,
    /// LZF (liblzf format, no header).
    Lzf,
    /// One Blosc (1.x) buffer: 16-byte header, then the blocks (decoded by c-blosc).
    Blosc,
    /// Zstandard frames (hdf5plugin's filter stores the chunk as plain frames).
    Zstd,
    /// One bzip2 stream.
    Bzip2,
    /// One LZO1X stream, PyTables' LZO filter (see [`lzo_decompress`]).
    Lzo,
    /// The HDF5 LZ4 filter's framing of LZ4 blocks (see [`lz4_decompress`]).
    Lz4,
    /// One Blosc2 contiguous frame (see [`crate::blosc2`]).
    Blosc2,
}

/// A chunk that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}

fn derr<T>(msg: impl Into<String>) -> std::result::Result<T, DecodeError> {
    Err(DecodeError(msg.into()))
}

/// Decodes one stored chunk: the filters of `pipeline` (in encode order, as stored) are undone
/// in reverse order, skipping filter `i` when bit `i` of `filter_mask` is set. The result must
/// be exactly `chunk_bytes` long.
///
/// A convenience over [`decode_filters_into`], which decodes into a caller's buffer and reuses
/// the intermediate buffers; the output here is allocated only once the last stage is about to
/// write it (after the checks that a stream can reach `chunk_bytes` at all).
pub fn decode_filters(
    pipeline: &[Filter],
    filter_mask: u32,
    stored: Vec<u8>,
    chunk_bytes: usize,
) -> std::result::Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    decode_stages(
        pipeline,
        filter_mask,
        &stored,
        Sink::Vec(&mut out),
        chunk_bytes,
        &mut StageBuffers::default(),
    )?;
    out.truncate(chunk_bytes);
    Ok(out)
}

/// The buffers [`decode_filters_into`] keeps between calls for the stages before the last one
/// (the last stage writes into the caller's buffer). Reusing one value avoids allocating, and
/// the kernel zero-filling, a fresh chunk-sized buffer per stage and chunk.
#[derive(Debug, Default)]
pub struct StageBuffers {
    a: Vec<u8>,
    b: Vec<u8>,
}

impl StageBuffers {
    /// Bytes held.
    pub fn capacity(&self) -> usize {
        self.a.capacity() + self.b.capacity()
    }
}

/// Decodes one stored chunk, like [`decode_filters`], straight into `out`, which must be
/// exactly the chunk's decoded size. The last stage of the pipeline writes `out` directly: for
/// shuffle + deflate, the stream is inflated into `bufs` and unshuffled into `out`; for deflate
/// alone it is inflated into `out`. `out` may hold anything on entry; on error its contents are
/// unspecified.
pub fn decode_filters_into(
    pipeline: &[Filter],
    filter_mask: u32,
    stored: &[u8],
    out: &mut [u8],
    bufs: &mut StageBuffers,
) -> std::result::Result<(), DecodeError> {
    let chunk_bytes = out.len();
    decode_stages(
        pipeline,
        filter_mask,
        stored,
        Sink::Slice(out),
        chunk_bytes,
        bufs,
    )
}

/// Where the last decode stage writes: a caller's buffer of exactly the chunk size, or a vector
/// grown to that size only when the stage writes (so a corrupt chunk size costs no memory
/// before the stream has been checked against it).
enum Sink<'a> {
    Slice(&'a mut [u8]),
    Vec(&'a mut Vec<u8>),
}

impl Sink<'_> {
    /// The `n` bytes the last stage writes; `n` must be the chunk size.
    fn take(
        &mut self,
        n: usize,
        chunk_bytes: usize,
    ) -> std::result::Result<&mut [u8], DecodeError> {
        if n != chunk_bytes {
            return derr(format!(
                "chunk decodes to {n} bytes, expected {chunk_bytes}"
            ));
        }
        match self {
            Sink::Slice(s) => {
                let held = s.len();
                s.get_mut(..n).filter(|_| held == n).ok_or_else(|| {
                    DecodeError(format!(
                        "chunk decodes to {n} bytes, the output holds {held}"
                    ))
                })
            }
            Sink::Vec(v) => Ok(grow(v, n)),
        }
    }
}

/// The first `n` bytes of `buf`, lengthened with zeros if shorter (bytes already there are
/// kept, not cleared: every caller overwrites all `n`).
fn grow(buf: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if buf.len() < n {
        buf.resize(n, 0);
    }
    &mut buf[..n]
}

/// The decode pipeline behind [`decode_filters`] and [`decode_filters_into`]. No stage may
/// produce more than the chunk plus 4 bytes per active fletcher32 filter before it in the
/// pipeline, and the last one must produce exactly the chunk.
fn decode_stages(
    pipeline: &[Filter],
    filter_mask: u32,
    stored: &[u8],
    mut sink: Sink<'_>,
    chunk_bytes: usize,
    bufs: &mut StageBuffers,
) -> std::result::Result<(), DecodeError> {
    let active = |i: usize| i >= 32 || filter_mask & (1u32 << i) == 0;
    // The last stage to decode is the first active filter of the pipeline.
    let Some(last) = (0..pipeline.len()).find(|&i| active(i)) else {
        // Every filter skipped: the stored bytes are the chunk.
        sink.take(stored.len(), chunk_bytes)?
            .copy_from_slice(stored);
        return Ok(());
    };
    /// Where the current stage's input is.
    #[derive(Clone, Copy)]
    enum At {
        Stored,
        A,
        B,
    }
    let mut at = At::Stored;
    let mut len = stored.len();
    let StageBuffers { a, b } = bufs;
    for (i, f) in pipeline.iter().enumerate().rev() {
        if !active(i) {
            continue;
        }
        let is_last = i == last;
        // The decoded size of stage i is the encoder input of stage i: the chunk plus the
        // checksums of the active fletcher32 filters before it.
        let fletchers = pipeline[..i]
            .iter()
            .enumerate()
            .filter(|&(j, g)| active(j) && *g == Filter::Fletcher32)
            .count();
        let bound = fletchers
            .checked_mul(4)
            .and_then(|x| chunk_bytes.checked_add(x))
            .ok_or_else(|| DecodeError("chunk size overflows".into()))?;
        // This stage's input, and the buffer it decodes into unless it is the last one.
        let (input, spare, next): (&[u8], &mut Vec<u8>, At) = match at {
            At::Stored => (&stored[..len], &mut *a, At::A),
            At::A => (&a[..len], &mut *b, At::B),
            At::B => (&b[..len], &mut *a, At::A),
        };
        match *f {
            Filter::Fletcher32 => {
                // Checked in place; the stage's output is its input without the trailer.
                len = fletcher32_check(input)?;
                if is_last {
                    let body = &input[..len];
                    sink.take(len, chunk_bytes)?.copy_from_slice(body);
                }
                continue;
            }
            Filter::Deflate => {
                // With no compression filter before it in the pipeline, the stage decodes to
                // exactly `bound` bytes: refuse a chunk size its stream cannot reach before
                // allocating for it. After one, `bound` is only the most it may produce. (The
                // last stage always has nothing before it.)
                let reach = inflate_bound(input.len());
                let exact = !pipeline[..i].iter().enumerate().any(|(j, g)| {
                    active(j) && !matches!(g, Filter::Shuffle { .. } | Filter::Fletcher32)
                });
                if exact && bound > reach {
                    return derr(format!(
                        "deflate: {} stored bytes cannot inflate to {bound} bytes",
                        input.len()
                    ));
                }
                let dst = if is_last {
                    sink.take(bound, chunk_bytes)?
                } else {
                    grow(spare, bound.min(reach))
                };
                let n = inflate_into(input, dst)?;
                if is_last && n != bound {
                    return derr(format!(
                        "chunk decodes to {n} bytes, expected {chunk_bytes}"
                    ));
                }
                len = n;
            }
            Filter::Shuffle { elem_size } => {
                // Same size out as in.
                let n = input.len();
                let dst = if is_last {
                    sink.take(n, chunk_bytes)?
                } else {
                    grow(spare, n)
                };
                unshuffle(input, elem_size, dst);
                len = n;
            }
            Filter::Lzf
            | Filter::Blosc
            | Filter::Zstd
            | Filter::Bzip2
            | Filter::Lzo
            | Filter::Lz4
            | Filter::Blosc2 => {
                // These decoders size their own output from the stream.
                let v = match *f {
                    Filter::Lzf => lzf_decompress(input, bound)?,
                    Filter::Blosc => blosc_decompress(input, bound)?,
                    Filter::Zstd => zstd_decompress(input, bound)?,
                    Filter::Bzip2 => bzip2_decompress(input, bound)?,
                    Filter::Lzo => lzo_decompress(input, bound)?,
                    Filter::Blosc2 => crate::blosc2::blosc2_decompress(input, bound)?,
                    _ => lz4_decompress(input, bound)?,
                };
                len = v.len();
                if is_last {
                    sink.take(len, chunk_bytes)?.copy_from_slice(&v);
                } else {
                    *spare = v;
                }
            }
        }
        at = next;
    }
    Ok(())
}

/// The most bytes a zlib stream of `n` bytes can inflate to: deflate expands at most 1032:1
/// (a 258-byte match coded in two bits), plus slack for the headers of tiny streams.
pub fn inflate_bound(n: usize) -> usize {
    n.saturating_mul(1032).saturating_add(1024)
}

/// Inflates a zlib stream (the deflate filter's format) into at most `max` bytes, with
/// libdeflate (one decompressor per thread, reused).
///
/// libdeflate writes into a buffer sized up front. `max` comes from the file, so the buffer is
/// never larger than what the stream can produce ([`inflate_bound`] of its length): a corrupt
/// chunk size costs no more memory than its stored bytes justify. A stream that needs more than
/// `max` bytes is an error; one that ends before `max` returns the shorter output (the caller
/// decides, as [`decode_filters`] does by requiring the exact chunk size). Bytes after the end
/// of the stream (after its Adler-32) are ignored, as zlib's `inflate` does.
pub fn inflate(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    let cap = max.min(inflate_bound(input.len()));
    let mut out = vec![0u8; cap];
    // `cap < max` only when `max` is more than the stream can produce, so running out of room
    // always means the stream is longer than `max`.
    let n = zlib_decompress(input, &mut out).map_err(|e| inflate_error(e, max))?;
    out.truncate(n);
    Ok(out)
}

/// Inflates a zlib stream into `out` with libdeflate (one decompressor per thread, reused) and
/// returns the number of bytes written. A stream that needs more room than `out` is an error;
/// one that ends early leaves the rest of `out` as it was. Bytes after the stream's end are
/// ignored, as by [`inflate`].
pub fn inflate_into(input: &[u8], out: &mut [u8]) -> std::result::Result<usize, DecodeError> {
    let max = out.len();
    zlib_decompress(input, out).map_err(|e| inflate_error(e, max))
}

fn inflate_error(e: libdeflater::DecompressionError, max: usize) -> DecodeError {
    DecodeError(match e {
        libdeflater::DecompressionError::InsufficientSpace => {
            format!("deflate: chunk inflates past {max} bytes")
        }
        libdeflater::DecompressionError::BadData => {
            "deflate: invalid or truncated zlib stream (or wrong checksum)".into()
        }
    })
}

/// libdeflate's zlib decoder with this thread's decompressor (a fresh one when the thread's is
/// in use or already gone, as while a thread is torn down: never a panic).
fn zlib_decompress(
    input: &[u8],
    out: &mut [u8],
) -> std::result::Result<usize, libdeflater::DecompressionError> {
    use libdeflater::Decompressor;
    thread_local! {
        static DECOMPRESSOR: std::cell::RefCell<Option<Decompressor>> =
            const { std::cell::RefCell::new(None) };
    }
    let run = |d: &mut Option<Decompressor>, out: &mut [u8]| {
        d.get_or_insert_with(Decompressor::new)
            .zlib_decompress(input, out)
    };
    let shared =
        DECOMPRESSOR.try_with(|c| c.try_borrow_mut().ok().map(|mut d| run(&mut d, &mut *out)));
    match shared {
        Ok(Some(r)) => r,
        _ => run(&mut None, out),
    }
}

/// Reads a decoder to its end into at most `max` bytes (growing with the data, so a stream
/// that claims a large size costs nothing until it delivers it).
fn read_bounded(
    what: &str,
    mut r: impl std::io::Read,
    max: usize,
) -> std::result::Result<Vec<u8>, DecodeError> {
    use std::io::Read;
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut out = Vec::new();
    r.by_ref()
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| DecodeError(format!("{what}: {e}")))?;
    if out.len() > max {
        return derr(format!("{what}: chunk decompresses past {max} bytes"));
    }
    Ok(out)
}

/// Decompresses Zstandard frames (hdf5plugin's zstd filter, id 32015, stores the chunk as a
/// plain frame) into at most `max` bytes.
pub fn zstd_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    let d = zstd::stream::read::Decoder::with_buffer(input)
        .map_err(|e| DecodeError(format!("zstd: {e}")))?;
    read_bounded("zstd", d, max)
}

/// Decompresses one bzip2 stream (the bzip2 filter, id 307) into at most `max` bytes.
pub fn bzip2_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    if input.get(..3) != Some(b"BZh") {
        return derr("bzip2: not a bzip2 stream");
    }
    read_bounded("bzip2", bzip2::read::BzDecoder::new(input), max)
}

/// Decodes PyTables' LZO filter (id 305, `H5Zlzo.c`): the chunk is one LZO1X stream (what
/// `lzo1x_1_compress` or `lzo1x_999_compress` write, ending with the end-of-stream marker),
/// decoded by `lzokay` into at most `max` bytes. PyTables built with its `CHECKSUM` option
/// appends the Adler-32 of the decoded bytes (4 bytes, the writer's byte order: little-endian
/// on every platform PyTables ships for) after the stream: 4 bytes left after the end marker
/// are taken as that checksum and verified. (The filter stores a chunk it cannot shrink
/// uncompressed, with the filter's bit set in the chunk's filter mask: handled by the caller.)
pub fn lzo_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    use lzokay::decompress::decompress;
    // An LZO1X match of length L costs at least about L / 255 bytes: no stream of `n` bytes
    // decodes to more than 256 n (plus slack for tiny ones).
    let cap = max.min(input.len().saturating_mul(256).saturating_add(64));
    let mut out = vec![0u8; cap];
    let fail = |e: lzokay::Error| match e {
        lzokay::Error::OutputOverrun => {
            DecodeError(format!("lzo: chunk decompresses past {max} bytes"))
        }
        e => DecodeError(format!("lzo: corrupt or truncated LZO1X stream ({e})")),
    };
    match decompress(input, &mut out) {
        Ok(n) => {
            out.truncate(n);
            Ok(out)
        }
        Err(lzokay::Error::InputNotConsumed) if input.len() > 4 => {
            let (stream, sum) = input.split_at(input.len() - 4);
            let n = decompress(stream, &mut out).map_err(fail)?;
            out.truncate(n);
            let want = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
            let got = libdeflater::adler32(&out);
            if got != want {
                return derr(format!(
                    "lzo: Adler-32 mismatch (stored {want:#010x}, computed {got:#010x})"
                ));
            }
            Ok(out)
        }
        Err(e) => Err(fail(e)),
    }
}

/// The largest output one LZ4 block of `n` compressed bytes can have (a sequence's length
/// grows by at most 255 per byte of its encoding), with a little slack.
fn lz4_block_bound(n: usize) -> usize {
    n.saturating_mul(255).saturating_add(64)
}

/// Decodes the HDF5 LZ4 filter's format (id 32004; HDF Group's `H5Zlz4.c`, as hdf5plugin and
/// PyTables write it): an 8-byte big-endian decoded size, a 4-byte big-endian block size, then
/// per block (the last one may be shorter) a 4-byte big-endian stored size and the block, which
/// is an LZ4 block, or the raw bytes when the stored size equals the block's decoded size.
pub fn lz4_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    let be32 = |at: usize| -> Option<usize> {
        let b = input.get(at..at.checked_add(4)?)?;
        usize::try_from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])).ok()
    };
    let Some(head) = input.get(..8) else {
        return derr("lz4: chunk shorter than its 12-byte header");
    };
    let total = u64::from_be_bytes([
        head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7],
    ]);
    let total = match usize::try_from(total) {
        Ok(t) if t <= max => t,
        _ => return derr(format!("lz4: header claims {total} bytes, more than {max}")),
    };
    let Some(block) = be32(8) else {
        return derr("lz4: chunk shorter than its 12-byte header");
    };
    if block == 0 && total > 0 {
        return derr("lz4: block size 0");
    }
    let block = block.min(total);
    let mut out: Vec<u8> = Vec::with_capacity(total.min(input.len().saturating_mul(4)));
    let mut pos = 12usize;
    while out.len() < total {
        let n = block.min(total - out.len());
        let Some(stored) = be32(pos) else {
            return derr("lz4: truncated before a block's size");
        };
        pos += 4;
        let Some(data) = pos.checked_add(stored).and_then(|end| input.get(pos..end)) else {
            return derr(format!("lz4: block of {stored} bytes runs past the chunk"));
        };
        pos += stored;
        let at = out.len();
        if stored == n {
            out.extend_from_slice(data);
            continue;
        }
        if n > lz4_block_bound(stored) {
            return derr(format!(
                "lz4: a {stored}-byte block cannot decode to {n} bytes"
            ));
        }
        out.resize(at + n, 0);
        match lz4_flex::block::decompress_into(data, &mut out[at..]) {
            Ok(got) if got == n => {}
            Ok(got) => return derr(format!("lz4: block decodes to {got} bytes, expected {n}")),
            Err(e) => return derr(format!("lz4: {e}")),
        }
    }
    Ok(out)
}

/// Decodes one Blosc 1.x buffer (the Blosc filter, id 32001: PyTables' `hdf5-blosc` stores the
/// chunk as one `blosc_compress` result) into at most `max` bytes, with the c-blosc that is
/// already built for Zarr (`blosc-src`, every codec: blosclz, lz4, lz4hc, snappy, zlib, zstd;
/// byte and bit shuffle).
pub fn blosc_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    use std::ffi::c_void;
    let le32 = |at: usize| -> usize {
        let b = [input[at], input[at + 1], input[at + 2], input[at + 3]];
        u32::from_le_bytes(b) as usize
    };
    if input.len() < 16 {
        return derr("blosc: chunk shorter than the 16-byte Blosc header");
    }
    let (version, nbytes, cbytes) = (input[0], le32(4), le32(12));
    if version != blosc_src::BLOSC_VERSION_FORMAT as u8 {
        return derr(format!(
            "blosc: format version {version} (this c-blosc reads 2)"
        ));
    }
    if cbytes > input.len() {
        return derr(format!(
            "blosc: header claims {cbytes} bytes, the chunk holds {}",
            input.len()
        ));
    }
    let frame = &input[..cbytes];
    if nbytes > max {
        return derr(format!(
            "blosc: header claims {nbytes} bytes, more than {max}"
        ));
    }
    let mut checked = 0usize;
    // SAFETY: `frame` is a live slice of `frame.len()` bytes; c-blosc reads its 16-byte header
    // (the length was checked above, and again by the function) and writes one usize.
    let rc = unsafe {
        blosc_src::blosc_cbuffer_validate(
            frame.as_ptr().cast::<c_void>(),
            frame.len(),
            &mut checked,
        )
    };
    if rc < 0 || checked != nbytes {
        return derr("blosc: invalid Blosc header");
    }
    let mut out = vec![0u8; nbytes];
    if nbytes == 0 {
        return Ok(out);
    }
    // SAFETY: the source is the validated buffer (its header's compressed size equals the
    // slice length, and c-blosc bounds every block offset and size by that compressed size);
    // the destination is `out`, `nbytes` writable bytes, and c-blosc writes at most `destsize`
    // bytes. One internal thread: no shared state, so concurrent calls are safe.
    let got = unsafe {
        blosc_src::blosc_decompress_ctx(
            frame.as_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
            out.len(),
            1,
        )
    };
    if usize::try_from(got).ok() != Some(nbytes) {
        return derr(format!("blosc: corrupt data (c-blosc returned {got})"));
    }
    Ok(out)
}

/// Decompresses an LZF stream (liblzf's format, as h5py's filter 32000 stores it) into at
/// most `max` bytes. Every read and back-reference is bounds-checked.
pub fn lzf_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    let mut out: Vec<u8> = Vec::with_capacity(max.min(input.len().saturating_mul(4)).min(64 << 20));
    let mut i = 0usize;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            // Literal run of ctrl + 1 bytes.
            let n = ctrl + 1;
            let Some(lit) = input.get(i..i + n) else {
                return derr("lzf: literal run past the end of the input");
            };
            if out.len() + n > max {
                return derr(format!("lzf: output exceeds {max} bytes"));
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            // Back-reference: length (ctrl >> 5) + 2, with an extra length byte when 7.
            let mut len = ctrl >> 5;
            if len == 7 {
                let Some(&b) = input.get(i) else {
                    return derr("lzf: truncated back-reference");
                };
                len += b as usize;
                i += 1;
            }
            let Some(&lo) = input.get(i) else {
                return derr("lzf: truncated back-reference");
            };
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + lo as usize + 1;
            if back > out.len() {
                return derr("lzf: back-reference before the start of the output");
            }
            let n = len + 2;
            if out.len() + n > max {
                return derr(format!("lzf: output exceeds {max} bytes"));
            }
            let from = out.len() - back;
            if back >= n {
                out.extend_from_within(from..from + n);
            } else {
                // Overlapping copy (run-length style): byte by byte.
                for k in 0..n {
                    let b = out[from + k];
                    out.push(b);
                }
            }
        }
    }
    Ok(out)
}

/// Undoes HDF5's byte shuffle (the same transposition as Blosc2's; see [`tet_blosc2::unshuffle`]).
pub use tet_blosc2::unshuffle;

/// HDF5's Fletcher-32 (`H5_checksum_fletcher32`): 16-bit words read big-endian, a trailing odd
/// byte as the high byte of a last word.
pub fn fletcher32(data: &[u8]) -> u32 {
    let mut sum1: u32 = 0;
    let mut sum2: u32 = 0;
    let words = data.chunks_exact(2);
    let odd = words.remainder().first().copied();
    let mut left = data.len() / 2;
    let mut words = words;
    while left > 0 {
        let t = left.min(360);
        left -= t;
        for w in words.by_ref().take(t) {
            sum1 += ((w[0] as u32) << 8) | w[1] as u32;
            sum2 += sum1;
        }
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    if let Some(b) = odd {
        sum1 += (b as u32) << 8;
        sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    (sum2 << 16) | sum1
}

/// Verifies and removes the 4-byte little-endian Fletcher-32 trailer of a chunk. Like HDF5 it
/// also accepts the byte-swapped checksum written by HDF5 before 1.6.3.
pub fn fletcher32_strip(data: &mut Vec<u8>) -> std::result::Result<(), DecodeError> {
    let body = fletcher32_check(data)?;
    data.truncate(body);
    Ok(())
}

/// Verifies the Fletcher-32 trailer of a chunk (see [`fletcher32_strip`]) and returns the
/// length of the data before it.
fn fletcher32_check(data: &[u8]) -> std::result::Result<usize, DecodeError> {
    if data.len() < 4 {
        return derr("fletcher32: chunk shorter than its checksum");
    }
    let body = data.len() - 4;
    let stored = u32::from_le_bytes([data[body], data[body + 1], data[body + 2], data[body + 3]]);
    let sum = fletcher32(&data[..body]);
    let reversed = ((sum & 0x00ff_00ff) << 8) | ((sum >> 8) & 0x00ff_00ff);
    if stored != sum && stored != reversed {
        return derr(format!(
            "fletcher32 checksum mismatch (stored {stored:#010x}, computed {sum:#010x})"
        ));
    }
    Ok(body)
}

/// Reads a dataset creation property list's filter pipeline (takes the library lock).
pub fn read_pipeline(dcpl: hid_t) -> Result<Vec<FilterSpec>> {
    hdf5::sync::sync(|| {
        // SAFETY: a by-value query of the property list id under the library lock (libhdf5
        // checks the id and returns an error value for a wrong one).
        let n = unsafe { H5Pget_nfilters(dcpl) };
        if n < 0 {
            return Err(SourceError::library_status(
                Lib::Hdf5,
                "H5Pget_nfilters",
                "cannot read the filter pipeline",
            ));
        }
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n as u32 {
            let mut flags = 0u32;
            let mut cd = vec![0u32; 32];
            let mut nelmts: usize = cd.len();
            let mut name = vec![0u8; 257];
            let mut config = 0u32;
            // SAFETY: under the library lock; libhdf5 writes one value through each of `flags`,
            // `nelmts` and `config`, at most `nelmts` (= `cd.len()`) values into `cd`, and at
            // most `name.len()` bytes (NUL included) into `name`.
            let id = unsafe {
                H5Pget_filter2(
                    dcpl,
                    i,
                    &mut flags,
                    &mut nelmts,
                    cd.as_mut_ptr(),
                    name.len(),
                    name.as_mut_ptr().cast(),
                    &mut config,
                )
            };
            if id < 0 {
                return Err(SourceError::library_status(
                    Lib::Hdf5,
                    "H5Pget_filter2",
                    format!("cannot read filter {i} of the pipeline"),
                ));
            }
            cd.truncate(nelmts.min(32));
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            out.push(FilterSpec {
                id,
                flags,
                cd_values: cd,
                name: String::from_utf8_lossy(&name[..end]).into_owned(),
            });
        }
        Ok(out)
    })
}

/// Where one stored chunk lies in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkLoc {
    /// Absolute byte offset in the file (the userblock included).
    pub offset: u64,
    /// Stored (filtered) size in bytes.
    pub size: u64,
    /// Bit `i` set: filter `i` of the pipeline was not applied to this chunk.
    pub filter_mask: u32,
}

/// A chunk as stored: its filtered bytes, its filter mask, and its file offset when known.
type StoredChunk = (Vec<u8>, u32, Option<u64>);

/// How a dataset can be read.
#[derive(Debug)]
pub enum ChunkAccess {
    /// Chunked with a pipeline this module decodes: read it with [`ChunkedVar::read_region`].
    Direct(ChunkedVar),
    /// Use the library (`H5Dread`); the text says why.
    Library(String),
}

/// A chunked dataset whose chunks are read and decoded without the HDF5 library.
#[derive(Debug, Clone)]
pub struct ChunkedVar {
    shape: Vec<u64>,
    chunk: Vec<u64>,
    grid: Vec<u64>,
    elem_size: usize,
    chunk_bytes: usize,
    pipeline: Vec<Filter>,
    specs: Vec<FilterSpec>,
    /// One element of fill, in the file's byte order.
    fill: Vec<u8>,
    /// Element width to byte-swap to little-endian (0: none).
    swap: usize,
    index: Index,
    /// Allocated chunks when the index was built.
    n_stored: usize,
    file_len: u64,
}

/// Where the stored chunks are found.
#[derive(Debug, Clone)]
enum Index {
    /// Every chunk's location, built at open: reads need no library call.
    /// (linear grid position, location), sorted by position.
    Table(Vec<(u64, ChunkLoc)>),
    /// Too many chunks to list at open (HDF5 1.10 lists them in O(n²)): each chunk is looked up
    /// and its stored bytes fetched with `H5Dread_chunk` under the library lock when it is read
    /// (O(log n) each); decoding still runs outside the lock.
    Lazy(hdf5::Dataset),
}

// Not bound by hdf5-metno-sys; in libhdf5 since 1.10.2.
unsafe extern "C" {
    fn H5Dget_chunk_storage_size(
        dset_id: hid_t,
        offset: *const hsize_t,
        chunk_bytes: *mut hsize_t,
    ) -> i32;
}

/// The userblock offset that `H5Dget_chunk_info*` leaves out of chunk addresses: HDF5 before
/// 1.14.4 reports them relative to the superblock (HDFGroup/hdf5#3003).
pub fn chunk_address_base(userblock: u64) -> u64 {
    let (mut maj, mut min, mut rel) = (0u32, 0u32, 0u32);
    // SAFETY: libhdf5 writes one unsigned int through each pointer, all to locals; under the
    // library lock.
    let ok = hdf5::sync::sync(|| unsafe {
        hdf5_sys::h5::H5get_libversion(&mut maj, &mut min, &mut rel)
    }) >= 0;
    if ok && (maj, min, rel) >= (1, 14, 4) {
        0
    } else {
        userblock
    }
}

/// Whether a datatype has parts whose file form differs from their memory form
/// (variable-length sequences and strings, references).
pub fn type_has_indirection(tid: hid_t) -> bool {
    // Every call below passes datatype ids by value (libhdf5 checks them and returns an error
    // value for a wrong one) and runs under the library lock taken here; the ids it opens
    // (`H5Tget_super`, `H5Tget_member_type`) are owned, and closed, by an `OwnedType`.
    fn walk(tid: hid_t, depth: u32) -> bool {
        use hdf5_sys::h5t::*;
        if depth > 32 {
            return true;
        }
        // SAFETY: a by-value query under the lock (see above).
        let class = unsafe { H5Tget_class(tid) };
        match class {
            H5T_class_t::H5T_VLEN | H5T_class_t::H5T_REFERENCE | H5T_class_t::H5T_NO_CLASS => true,
            // SAFETY: a by-value query under the lock (see above).
            H5T_class_t::H5T_STRING => unsafe { H5Tis_variable_str(tid) != 0 },
            H5T_class_t::H5T_ARRAY | H5T_class_t::H5T_ENUM => {
                // SAFETY: a by-value query under the lock; the new id is owned by the
                // `OwnedType`.
                let sup = OwnedType(unsafe { H5Tget_super(tid) });
                sup.0 < 0 || walk(sup.0, depth + 1)
            }
            H5T_class_t::H5T_COMPOUND => {
                // SAFETY: a by-value query under the lock (see above).
                let n = unsafe { H5Tget_nmembers(tid) };
                if n < 0 {
                    return true;
                }
                (0..n as u32).any(|i| {
                    // SAFETY: a by-value query under the lock; the new id is owned by the
                    // `OwnedType`.
                    let m = OwnedType(unsafe { H5Tget_member_type(tid, i) });
                    m.0 < 0 || walk(m.0, depth + 1)
                })
            }
            _ => false,
        }
    }
    hdf5::sync::sync(|| walk(tid, 0))
}

/// The buffers one thread reuses for every chunk it reads: the stored bytes, the stages
/// before the last one, and a whole decoded chunk when a region needs only part of it. Reusing
/// them saves, per chunk, the allocation of each buffer, the kernel's zero-filled pages behind
/// it (page faults) and the memset of `vec![0; n]`.
#[derive(Default)]
struct Scratch {
    stored: Vec<u8>,
    stages: StageBuffers,
    chunk: Vec<u8>,
}

/// A thread keeps at most this many bytes of [`Scratch`] between reads; more (datasets with
/// huge chunks) is freed when the read ends.
const KEEP_SCRATCH: usize = 64 << 20;

impl Scratch {
    fn trim(&mut self) {
        let held = self.stored.capacity() + self.stages.capacity() + self.chunk.capacity();
        if held > KEEP_SCRATCH {
            *self = Scratch::default();
        }
    }
}

/// Runs `f` with this thread's [`Scratch`], taken out of the thread-local slot for the call
/// and put back after it (a nested call, or one while the thread is torn down, gets fresh
/// buffers: never a panic).
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    thread_local! {
        static SCRATCH: std::cell::Cell<Scratch> = std::cell::Cell::new(Scratch::default());
    }
    let mut s = SCRATCH.try_with(std::cell::Cell::take).unwrap_or_default();
    let r = f(&mut s);
    s.trim();
    // Fails only while the thread is torn down; the buffers are then simply dropped.
    let _ = SCRATCH.try_with(|c| c.set(s));
    r
}

fn product(v: &[u64]) -> Option<u64> {
    v.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
}

impl ChunkedVar {
    /// Opens `dataset` (an absolute HDF5 path such as `/grp/var`) in the file at `path` and
    /// builds its chunk index. The HDF5 file handle is released before this returns, unless the
    /// dataset has no chunk table (see [`ChunkedVar::has_chunk_table`]).
    pub fn open(path: &Path, dataset: &str) -> Result<ChunkAccess> {
        let file_len = std::fs::metadata(path)?.len();
        let f = hdf5::File::open(path)
            .map_err(|e| SourceError::library(Lib::Hdf5, "cannot open as HDF5", e))?;
        let ds = f
            .dataset(dataset)
            .map_err(|e| SourceError::library(Lib::Hdf5, format!("dataset '{dataset}'"), e))?;
        let base = chunk_address_base(f.userblock());
        Self::from_dataset(&ds, dataset, base, file_len)
    }

    /// Like [`ChunkedVar::open`] for several datasets of one file, with a single HDF5 open.
    /// A dataset that cannot be opened gives an `Err` in its slot.
    pub fn open_many(path: &Path, datasets: &[&str]) -> Result<Vec<Result<ChunkAccess>>> {
        let file_len = std::fs::metadata(path)?.len();
        let f = hdf5::File::open(path)
            .map_err(|e| SourceError::library(Lib::Hdf5, "cannot open as HDF5", e))?;
        let base = chunk_address_base(f.userblock());
        Ok(datasets
            .iter()
            .map(|&name| {
                let ds = f
                    .dataset(name)
                    .map_err(|e| SourceError::library(Lib::Hdf5, format!("dataset '{name}'"), e))?;
                Self::from_dataset(&ds, name, base, file_len)
            })
            .collect())
    }

    /// Builds the chunk index of an open dataset. `base` is added to every chunk address (see
    /// [`chunk_address_base`]); `file_len` bounds every chunk. `name` is used in messages only.
    pub fn from_dataset(
        ds: &hdf5::Dataset,
        name: &str,
        base: u64,
        file_len: u64,
    ) -> Result<ChunkAccess> {
        let lib = |what: &str, e: hdf5::Error| {
            SourceError::library(Lib::Hdf5, format!("dataset '{name}': {what}"), e)
        };
        let dcpl = ds.dcpl().map_err(|e| lib("creation properties", e))?;
        let dtype = ds.dtype().map_err(|e| lib("datatype", e))?;
        let shape: Vec<u64> = ds
            .space()
            .map_err(|e| lib("dataspace", e))?
            .shape()
            .iter()
            .map(|&d| d as u64)
            .collect();
        hdf5::sync::sync(|| -> Result<ChunkAccess> {
            // SAFETY: a by-value query of an open property list under the library lock.
            let layout = unsafe { H5Pget_layout(dcpl.id()) };
            if layout != H5D_layout_t::H5D_CHUNKED {
                return Ok(ChunkAccess::Library("not chunked".into()));
            }
            let rank = shape.len();
            if rank == 0 {
                return Ok(ChunkAccess::Library("scalar dataspace".into()));
            }
            let mut chunk = vec![0 as hsize_t; rank];
            // SAFETY: under the library lock; libhdf5 writes at most `rank` extents (the
            // `max_ndims` passed) into `chunk`, which holds `rank` of them.
            let got = unsafe { H5Pget_chunk(dcpl.id(), rank as i32, chunk.as_mut_ptr()) };
            if got != rank as i32 || chunk.contains(&0) {
                return Err(Part::Shape.malformed(format!(
                    "dataset '{name}': chunk shape does not match its rank {rank}"
                )));
            }
            if type_has_indirection(dtype.id()) {
                return Ok(ChunkAccess::Library(
                    "datatype has variable-length parts".into(),
                ));
            }
            // SAFETY: a by-value query of an open datatype under the library lock.
            let elem_size = unsafe { H5Tget_size(dtype.id()) };
            if elem_size == 0 {
                return Err(Part::Type.malformed(format!("dataset '{name}': datatype of size 0")));
            }
            let specs = read_pipeline(dcpl.id())?;
            let mut pipeline = Vec::with_capacity(specs.len());
            for s in &specs {
                match s.decoder(elem_size) {
                    Some(f) => pipeline.push(f),
                    None => {
                        return Ok(ChunkAccess::Library(format!(
                            "filter {} is decoded by the library",
                            s.named()
                        )))
                    }
                }
            }
            let chunk_bytes = product(&chunk)
                .and_then(|n| n.checked_mul(elem_size as u64))
                .filter(|&n| n <= u32::MAX as u64)
                .ok_or_else(|| {
                    Part::Shape.malformed(format!(
                        "dataset '{name}': chunk {chunk:?} of {elem_size}-byte elements is too large"
                    ))
                })? as usize;
            let grid: Vec<u64> = shape
                .iter()
                .zip(&chunk)
                .map(|(&d, &c)| d.div_ceil(c))
                .collect();
            let fill = fill_bytes(dcpl.id(), dtype.id(), elem_size);
            let swap = swap_width(dtype.id(), elem_size);
            let (index, n_stored) = build_index(ds, name, &chunk, &grid, base, file_len)?;
            Ok(ChunkAccess::Direct(ChunkedVar {
                shape,
                chunk,
                grid,
                elem_size,
                chunk_bytes,
                pipeline,
                specs,
                fill,
                swap,
                index,
                n_stored,
                file_len,
            }))
        })
    }

    /// The dataset shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The chunk shape.
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk
    }

    /// Bytes per element (the whole record for compound types).
    pub fn elem_size(&self) -> usize {
        self.elem_size
    }

    /// The filter pipeline, in encode order.
    pub fn filters(&self) -> &[FilterSpec] {
        &self.specs
    }

    /// Number of allocated (stored) chunks.
    pub fn stored_chunks(&self) -> usize {
        self.n_stored
    }

    /// Whether the chunk locations were listed at open (reads need no library call at all);
    /// `false` for datasets with many chunks, whose stored bytes are fetched with
    /// `H5Dread_chunk` under the library lock (decoding still runs outside it).
    pub fn has_chunk_table(&self) -> bool {
        matches!(self.index, Index::Table(_))
    }

    /// One element of fill value, in the file's byte order.
    pub fn fill_value(&self) -> &[u8] {
        &self.fill
    }

    /// Where the chunk at grid position `grid_pos` (chunk coordinates, not element coordinates)
    /// is stored, `None` when it was never written or when there is no chunk table (see
    /// [`ChunkedVar::has_chunk_table`]).
    pub fn chunk_location(&self, grid_pos: &[u64]) -> Option<ChunkLoc> {
        let lin = self.linear(grid_pos)?;
        self.lookup(lin)
    }

    fn linear(&self, g: &[u64]) -> Option<u64> {
        if g.len() != self.grid.len() {
            return None;
        }
        let mut lin = 0u64;
        for (&p, &n) in g.iter().zip(&self.grid) {
            if p >= n {
                return None;
            }
            lin = lin * n + p;
        }
        Some(lin)
    }

    fn lookup(&self, lin: u64) -> Option<ChunkLoc> {
        let Index::Table(t) = &self.index else {
            return None;
        };
        t.binary_search_by_key(&lin, |e| e.0).ok().map(|i| t[i].1)
    }

    /// The stored bytes and filter mask of a chunk, through the library.
    /// The stored bytes go to `buf[..len]` (grown if needed); returns `(len, mask)`.
    fn fetch_lazy(
        &self,
        ds: &hdf5::Dataset,
        grid_pos: &[u64],
        buf: &mut Vec<u8>,
    ) -> Result<Option<(usize, u32)>> {
        let off: Vec<hsize_t> = grid_pos
            .iter()
            .zip(&self.chunk)
            .map(|(&g, &c)| g * c)
            .collect();
        hdf5::sync::sync(|| {
            let mut size: hsize_t = 0;
            // SAFETY: under the library lock; libhdf5 reads one offset per axis of the dataset
            // from `off` (`grid_pos` was checked against the grid's rank by every caller:
            // `read_chunk`, `zstd_frame`) and writes one `hsize_t` into `size`.
            let rc = unsafe { H5Dget_chunk_storage_size(ds.id(), off.as_ptr(), &mut size) };
            if rc < 0 {
                // HDF5 1.10 reports a chunk that was never written as an error ("chunk storage
                // is not allocated" or "chunk address isn't defined"), not as size 0: tell the
                // two apart by the error stack.
                let err = hdf5::h5check(rc).err();
                let missing = err.as_ref().and_then(hdf5::Error::stack).is_some_and(|st| {
                    st.iter().any(|f| {
                        f.desc().contains("not allocated")
                            || f.desc().contains("address isn't defined")
                    })
                });
                if missing {
                    return Ok(None);
                }
                let context = format!("cannot look up chunk {grid_pos:?}");
                return Err(match err {
                    Some(e) => SourceError::library(Lib::Hdf5, context, e),
                    None => SourceError::library_status(
                        Lib::Hdf5,
                        context,
                        "H5Dget_chunk_storage_size failed",
                    ),
                });
            }
            if size == 0 {
                return Ok(None);
            }
            if size > self.file_len {
                return Err(Part::Index.malformed(format!(
                    "chunk {grid_pos:?} claims {size} bytes, more than the file holds"
                )));
            }
            let len = usize::try_from(size).map_err(|_| {
                Part::Index.malformed(format!("chunk {grid_pos:?} claims {size} bytes"))
            })?;
            let buf = grow(buf, len);
            let mut mask = 0u32;
            // SAFETY: under the library lock, held since the size was looked up, so the chunk
            // cannot change in between: libhdf5 writes the chunk's `size` stored bytes into
            // `buf` (`size` bytes long: `grow` above) and one u32 into `mask`; `off` is as above.
            let rc = unsafe {
                hdf5_sys::h5d::H5Dread_chunk(
                    ds.id(),
                    hdf5_sys::h5p::H5P_DEFAULT,
                    off.as_ptr(),
                    &mut mask,
                    buf.as_mut_ptr().cast(),
                )
            };
            if rc < 0 {
                return Err(SourceError::library_status(
                    Lib::Hdf5,
                    "H5Dread_chunk",
                    format!("cannot read chunk {grid_pos:?}"),
                ));
            }
            Ok(Some((len, mask)))
        })
    }

    /// Reads and decodes the chunk at grid position `grid_pos`: `Ok(None)` when it was never
    /// written (its values are the fill value).
    pub fn read_chunk(&self, file: &File, grid_pos: &[u64]) -> Result<Option<Vec<u8>>> {
        self.check_grid_pos(grid_pos)?;
        with_scratch(|s| {
            let Some((len, mask, at)) = self.load_stored(file, grid_pos, &mut s.stored)? else {
                return Ok(None);
            };
            let mut out = Vec::new();
            decode_stages(
                &self.pipeline,
                mask,
                &s.stored[..len],
                Sink::Vec(&mut out),
                self.chunk_bytes,
                &mut s.stages,
            )
            .map_err(|e| self.decode_error(grid_pos, at, e))?;
            Ok(Some(out))
        })
    }

    fn check_grid_pos(&self, grid_pos: &[u64]) -> Result<()> {
        if self.linear(grid_pos).is_none() {
            return Err(Request::OutsideGrid {
                pos: grid_pos.to_vec(),
                grid: self.grid.clone(),
            }
            .into());
        }
        Ok(())
    }

    fn decode_error(&self, grid_pos: &[u64], at: Option<u64>, e: DecodeError) -> SourceError {
        let at = at.map(|o| format!(" at byte {o}")).unwrap_or_default();
        Part::Chunk.malformed_by(format!("chunk {grid_pos:?}{at}"), e)
    }

    /// Reads the stored (filtered) bytes of the chunk at `grid_pos` into `buf[..len]` (grown
    /// if needed, never shrunk, not cleared) and returns `len`, the filter mask and, when the
    /// chunk table gave it, the file offset; `None` for a chunk never written.
    fn load_stored(
        &self,
        file: &File,
        grid_pos: &[u64],
        buf: &mut Vec<u8>,
    ) -> Result<Option<(usize, u32, Option<u64>)>> {
        if let Index::Lazy(ds) = &self.index {
            return Ok(self
                .fetch_lazy(ds, grid_pos, buf)?
                .map(|(len, mask)| (len, mask, None)));
        }
        let Some(loc) = self.chunk_location(grid_pos) else {
            return Ok(None);
        };
        // The table's sizes were checked against the file length at open.
        let len = usize::try_from(loc.size).map_err(|_| {
            Part::Index.malformed(format!("chunk {grid_pos:?} of {} bytes", loc.size))
        })?;
        file.read_exact_at(grow(buf, len), loc.offset)
            .map_err(|e| {
                Part::Chunk.malformed_by(
                    format!(
                        "chunk {grid_pos:?} at byte {} ({} bytes)",
                        loc.offset, loc.size
                    ),
                    e,
                )
            })?;
        Ok(Some((len, loc.filter_mask, Some(loc.offset))))
    }

    /// The stored (filtered) bytes of the chunk at `grid_pos`, in a vector of their own, and
    /// its filter mask and file offset (see [`Self::load_stored`]).
    fn stored_chunk(&self, file: &File, grid_pos: &[u64]) -> Result<Option<StoredChunk>> {
        let mut buf = Vec::new();
        Ok(self
            .load_stored(file, grid_pos, &mut buf)?
            .map(|(len, mask, at)| {
                buf.truncate(len);
                (buf, mask, at)
            }))
    }

    /// Whether every stored chunk is one zstd frame of the chunk's little-endian bytes: the
    /// pipeline is the zstd filter alone and the elements need no byte swap.
    pub fn zstd_frames(&self) -> bool {
        self.pipeline == [Filter::Zstd] && self.swap == 0
    }

    /// The stored bytes of the chunk at `grid_pos` when [`Self::zstd_frames`] holds, the chunk
    /// lies wholly inside the dataset (edge chunks are stored padded) and its filter was
    /// applied; `None` otherwise (never written, unfiltered, an edge chunk).
    pub fn zstd_frame(&self, file: &File, grid_pos: &[u64]) -> Result<Option<Vec<u8>>> {
        if !self.zstd_frames() || self.linear(grid_pos).is_none() {
            return Ok(None);
        }
        let inside = grid_pos
            .iter()
            .zip(&self.chunk)
            .zip(&self.shape)
            .all(|((&g, &c), &n)| {
                g.checked_add(1)
                    .and_then(|e| e.checked_mul(c))
                    .is_some_and(|e| e <= n)
            });
        if !inside {
            return Ok(None);
        }
        Ok(self
            .stored_chunk(file, grid_pos)?
            .and_then(|(stored, mask, _)| (mask == 0).then_some(stored)))
    }

    /// [`Self::zstd_frame`] of the chunk whose region is exactly `start .. start + count` (one
    /// whole chunk of the grid); `None` for any other region.
    pub fn zstd_frame_of_region(
        &self,
        file: &File,
        start: &[u64],
        count: &[u64],
    ) -> Result<Option<Vec<u8>>> {
        if start.len() != self.chunk.len() || count != self.chunk.as_slice() {
            return Ok(None);
        }
        let mut grid_pos = Vec::with_capacity(start.len());
        for (&s, &c) in start.iter().zip(&self.chunk) {
            if c == 0 || s % c != 0 {
                return Ok(None);
            }
            grid_pos.push(s / c);
        }
        self.zstd_frame(file, &grid_pos)
    }

    /// Reads the region `start .. start + count` as little-endian C-order bytes (numeric
    /// big-endian datatypes are byte-swapped; compound records are left as stored).
    pub fn read_region(
        &self,
        file: &File,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        self.read_region_raw(file, start, count, out)?;
        swap_in_place(out, self.swap);
        Ok(())
    }

    /// Reads the region as C-order elements exactly as stored (the file's byte order).
    pub fn read_region_raw(
        &self,
        file: &File,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        check_region(&self.shape, start, count, self.elem_size, out.len())?;
        if count.contains(&0) {
            return Ok(());
        }
        let rank = self.shape.len();
        let es = self.elem_size;
        // Grid range touched by the region.
        let g_lo: Vec<u64> = (0..rank).map(|a| start[a] / self.chunk[a]).collect();
        let g_hi: Vec<u64> = (0..rank)
            .map(|a| (start[a] + count[a] - 1) / self.chunk[a])
            .collect();
        let mut g = g_lo.clone();
        loop {
            let origin: Vec<u64> = (0..rank).map(|a| g[a] * self.chunk[a]).collect();
            let lo: Vec<u64> = (0..rank).map(|a| start[a].max(origin[a])).collect();
            let hi: Vec<u64> = (0..rank)
                .map(|a| (start[a] + count[a]).min(origin[a] + self.chunk[a]))
                .collect();
            // The chunk lands in `out` as one run when the region holds it whole and its
            // rows are adjacent there: then it is decoded straight into that run.
            let mut runs = 0usize;
            let mut first = (0u64, 0u64, 0u64);
            for_each_run(&self.chunk, &origin, count, start, &lo, &hi, |s, d, n| {
                if runs == 0 {
                    first = (s, d, n);
                }
                runs += 1;
            });
            let whole = (runs == 1 && first.0 == 0)
                .then(|| {
                    let d = usize::try_from(first.1).ok()?.checked_mul(es)?;
                    let n = usize::try_from(first.2).ok()?.checked_mul(es)?;
                    (n == self.chunk_bytes).then_some(d..d.checked_add(n)?)
                })
                .flatten();
            let filled = with_scratch(|s| -> Result<bool> {
                let Some((len, mask, at)) = self.load_stored(file, &g, &mut s.stored)? else {
                    return Ok(false);
                };
                let stored = &s.stored[..len];
                match whole.clone().and_then(|r| out.get_mut(r)) {
                    Some(dst) => {
                        decode_filters_into(&self.pipeline, mask, stored, dst, &mut s.stages)
                            .map_err(|e| self.decode_error(&g, at, e))?
                    }
                    None => {
                        decode_stages(
                            &self.pipeline,
                            mask,
                            stored,
                            Sink::Vec(&mut s.chunk),
                            self.chunk_bytes,
                            &mut s.stages,
                        )
                        .map_err(|e| self.decode_error(&g, at, e))?;
                        let data = &s.chunk[..self.chunk_bytes];
                        copy_box(data, &self.chunk, &origin, out, count, start, &lo, &hi, es);
                    }
                }
                Ok(true)
            })?;
            if !filled {
                fill_box(&self.fill, out, count, start, &lo, &hi, es);
            }
            // Next grid position (odometer, last axis fastest).
            let mut a = rank;
            loop {
                if a == 0 {
                    return Ok(());
                }
                a -= 1;
                if g[a] < g_hi[a] {
                    g[a] += 1;
                    break;
                }
                g[a] = g_lo[a];
            }
        }
    }
}

/// The fill value of a dataset as one element in the file's byte order (zeros when undefined
/// or never written, as `H5Dread` leaves unallocated chunks then).
fn fill_bytes(dcpl: hid_t, dtype: hid_t, elem_size: usize) -> Vec<u8> {
    let mut fill = vec![0u8; elem_size];
    // SAFETY: under the library lock; libhdf5 writes one value through each of `status` and
    // `time`, and one element of `dtype` (`elem_size` bytes, the caller's `H5Tget_size` of it)
    // into `fill`, which is `elem_size` bytes long.
    hdf5::sync::sync(|| unsafe {
        let mut status = H5D_fill_value_t::H5D_FILL_VALUE_UNDEFINED;
        let mut time = H5D_fill_time_t::H5D_FILL_TIME_IFSET;
        if H5Pfill_value_defined(dcpl, &mut status) < 0
            || H5Pget_fill_time(dcpl, &mut time) < 0
            || status == H5D_fill_value_t::H5D_FILL_VALUE_UNDEFINED
            || time == H5D_fill_time_t::H5D_FILL_TIME_NEVER
        {
            return;
        }
        if H5Pget_fill_value(dcpl, dtype, fill.as_mut_ptr().cast()) < 0 {
            fill.iter_mut().for_each(|b| *b = 0);
        }
    });
    fill
}

/// The element width to swap for a big-endian numeric type (0 otherwise).
fn swap_width(dtype: hid_t, elem_size: usize) -> usize {
    // SAFETY: by-value queries of a datatype id under the library lock (libhdf5 checks the id).
    hdf5::sync::sync(|| unsafe {
        let class = H5Tget_class(dtype);
        let numeric = matches!(
            class,
            H5T_class_t::H5T_INTEGER
                | H5T_class_t::H5T_FLOAT
                | H5T_class_t::H5T_ENUM
                | H5T_class_t::H5T_BITFIELD
                | H5T_class_t::H5T_TIME
        );
        if numeric && elem_size > 1 && H5Tget_order(dtype) == H5T_order_t::H5T_ORDER_BE {
            elem_size
        } else {
            0
        }
    })
}

/// Reverses every `width`-byte element of `buf` in place (no-op for width 0 or 1).
pub fn swap_in_place(buf: &mut [u8], width: usize) {
    if width > 1 {
        for e in buf.chunks_exact_mut(width) {
            e.reverse();
        }
    }
}

/// The chunk index of a dataset, and its number of allocated chunks.
fn build_index(
    ds: &hdf5::Dataset,
    name: &str,
    chunk: &[u64],
    grid: &[u64],
    base: u64,
    file_len: u64,
) -> Result<(Index, usize)> {
    let rank = chunk.len();
    if grid.contains(&0) {
        return Ok((Index::Table(Vec::new()), 0));
    }
    // SAFETY: a by-value call on an open dataset under the library lock; the new dataspace id
    // is closed once, at the end of this function.
    let space = hdf5::sync::sync(|| unsafe { H5Dget_space(ds.id()) });
    if space < 0 {
        return Err(SourceError::library_status(
            Lib::Hdf5,
            format!("dataset '{name}'"),
            "cannot get its dataspace",
        ));
    }
    let result = (|| {
        let mut n_alloc: hsize_t = 0;
        // SAFETY: under the library lock; libhdf5 writes one `hsize_t` into `n_alloc`.
        let rc = hdf5::sync::sync(|| unsafe { H5Dget_num_chunks(ds.id(), space, &mut n_alloc) });
        if rc < 0 {
            return Err(SourceError::library_status(
                Lib::Hdf5,
                format!("dataset '{name}'"),
                "cannot count its chunks",
            ));
        }
        if n_alloc > MAX_TABLE_CHUNKS {
            return Ok((Index::Lazy(ds.clone()), n_alloc as usize));
        }
        let mut table = Vec::with_capacity(n_alloc as usize);
        let mut off = vec![0 as hsize_t; rank];
        for i in 0..n_alloc {
            let (mut mask, mut addr, mut size) = (0u32, HADDR_UNDEF, 0 as hsize_t);
            // SAFETY: under the library lock; libhdf5 writes one offset per axis of `space` (the
            // dataset's own dataspace, of rank `rank`) into `off`, which holds `rank`, and one
            // value into each of `mask`, `addr` and `size`.
            let rc = hdf5::sync::sync(|| unsafe {
                H5Dget_chunk_info(
                    ds.id(),
                    space,
                    i,
                    off.as_mut_ptr(),
                    &mut mask,
                    &mut addr,
                    &mut size,
                )
            });
            if rc < 0 {
                return Err(SourceError::library_status(
                    Lib::Hdf5,
                    format!("dataset '{name}'"),
                    format!("cannot read entry {i} of its chunk index"),
                ));
            }
            let g: Vec<u64> = (0..rank).map(|a| off[a] / chunk[a]).collect();
            if (0..rank).any(|a| !off[a].is_multiple_of(chunk[a]) || g[a] >= grid[a]) {
                return Err(Part::Index.malformed(format!(
                    "dataset '{name}': chunk at {off:?} is not on the chunk grid"
                )));
            }
            if addr == HADDR_UNDEF {
                continue;
            }
            let offset = addr.checked_add(base);
            match offset.and_then(|o| o.checked_add(size)) {
                Some(end) if end <= file_len && size > 0 => {}
                _ => {
                    return Err(Part::Index.malformed(format!(
                        "dataset '{name}': chunk {g:?} at byte {addr} ({size} bytes) lies outside the file ({file_len} bytes)"
                    )))
                }
            }
            let lin = g.iter().zip(grid).fold(0u64, |acc, (&p, &n)| acc * n + p);
            table.push((
                lin,
                ChunkLoc {
                    offset: addr + base,
                    size,
                    filter_mask: mask,
                },
            ));
        }
        table.sort_by_key(|e| e.0);
        table.dedup_by_key(|e| e.0);
        let n = table.len();
        Ok((Index::Table(table), n))
    })();
    // SAFETY: `space` was opened above and is closed once, under the library lock.
    hdf5::sync::sync(|| unsafe { H5Sclose(space) });
    result
}

/// Calls `f(src_elem_offset, dst_elem_offset, run_len)` for every contiguous run of the box
/// `lo..hi` (global coordinates) inside a C-order source block of shape `src_shape` at
/// `src_origin` and a destination block of shape `dst_shape` at `dst_origin`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn for_each_run(
    src_shape: &[u64],
    src_origin: &[u64],
    dst_shape: &[u64],
    dst_origin: &[u64],
    lo: &[u64],
    hi: &[u64],
    mut f: impl FnMut(u64, u64, u64),
) {
    let rank = lo.len();
    if rank == 0 {
        f(0, 0, 1);
        return;
    }
    if (0..rank).any(|a| hi[a] <= lo[a]) {
        return;
    }
    // Merge trailing axes the box covers whole in both blocks into one run.
    let mut run = hi[rank - 1] - lo[rank - 1];
    let mut inner = rank - 1;
    while inner > 0 {
        let a = inner;
        let whole_src = lo[a] == src_origin[a] && hi[a] - lo[a] == src_shape[a];
        let whole_dst = lo[a] == dst_origin[a] && hi[a] - lo[a] == dst_shape[a];
        if !(whole_src && whole_dst) {
            break;
        }
        inner -= 1;
        run *= hi[inner] - lo[inner];
    }
    // Strides (elements) of both blocks.
    let mut s_stride = vec![1u64; rank];
    let mut d_stride = vec![1u64; rank];
    for a in (0..rank - 1).rev() {
        s_stride[a] = s_stride[a + 1] * src_shape[a + 1];
        d_stride[a] = d_stride[a + 1] * dst_shape[a + 1];
    }
    let mut idx: Vec<u64> = lo[..inner].to_vec();
    loop {
        let mut s = 0u64;
        let mut d = 0u64;
        for a in 0..inner {
            s += (idx[a] - src_origin[a]) * s_stride[a];
            d += (idx[a] - dst_origin[a]) * d_stride[a];
        }
        s += (lo[inner] - src_origin[inner]) * s_stride[inner];
        d += (lo[inner] - dst_origin[inner]) * d_stride[inner];
        f(s, d, run);
        let mut a = inner;
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            idx[a] += 1;
            if idx[a] < hi[a] {
                break;
            }
            idx[a] = lo[a];
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn copy_box(
    src: &[u8],
    src_shape: &[u64],
    src_origin: &[u64],
    dst: &mut [u8],
    dst_shape: &[u64],
    dst_origin: &[u64],
    lo: &[u64],
    hi: &[u64],
    es: usize,
) {
    for_each_run(
        src_shape,
        src_origin,
        dst_shape,
        dst_origin,
        lo,
        hi,
        |s, d, n| {
            let (s, d, n) = (s as usize * es, d as usize * es, n as usize * es);
            dst[d..d + n].copy_from_slice(&src[s..s + n]);
        },
    );
}

fn fill_box(
    fill: &[u8],
    dst: &mut [u8],
    dst_shape: &[u64],
    dst_origin: &[u64],
    lo: &[u64],
    hi: &[u64],
    es: usize,
) {
    let zero = fill.iter().all(|&b| b == 0);
    for_each_run(
        dst_shape,
        dst_origin,
        dst_shape,
        dst_origin,
        lo,
        hi,
        |_, d, n| {
            let (d, n) = (d as usize * es, n as usize * es);
            let run = &mut dst[d..d + n];
            if zero {
                run.fill(0);
            } else {
                for e in run.chunks_exact_mut(es) {
                    e.copy_from_slice(fill);
                }
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_whole_axes() {
        let mut runs = Vec::new();
        // Whole 4x5 block copied into a 4x5 destination: one run.
        for_each_run(
            &[4, 5],
            &[0, 0],
            &[4, 5],
            &[0, 0],
            &[0, 0],
            &[4, 5],
            |s, d, n| runs.push((s, d, n)),
        );
        assert_eq!(runs, vec![(0, 0, 20)]);
        runs.clear();
        // Rows 1..3, columns 2..4 of a 4x5 block at origin (0, 0) into a 2x2 destination.
        for_each_run(
            &[4, 5],
            &[0, 0],
            &[2, 2],
            &[1, 2],
            &[1, 2],
            &[3, 4],
            |s, d, n| runs.push((s, d, n)),
        );
        assert_eq!(runs, vec![(7, 0, 2), (12, 2, 2)]);
    }

    #[test]
    fn filters_are_named_once() {
        let spec = |id: i32, name: &str, cd: Vec<u32>| FilterSpec {
            id,
            flags: 0,
            cd_values: cd,
            name: name.into(),
        };
        assert_eq!(spec(305, "lzo", vec![]).named(), "lzo (id 305)");
        assert_eq!(spec(305, "", vec![]).named(), "lzo (id 305)");
        assert_eq!(
            spec(32009, "fcidecomp", vec![]).named(),
            "fcidecomp (id 32009)"
        );
        assert_eq!(spec(32009, "", vec![]).named(), "id 32009");
        assert_eq!(
            spec(FILTER_BLOSC2, "blosc2", vec![]).named(),
            "blosc2 (id 32026)"
        );
        assert_eq!(spec(FILTER_DEFLATE, "", vec![4]).named(), "deflate (id 1)");
        assert_eq!(spec(FILTER_SZIP, "", vec![]).named(), "szip (id 4)");
    }
}
