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
//!    ([`crate::filters::decode_filters_into`]) and copies the intersecting part into the output. Chunks are
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
//!
//! The filter pipeline itself (the decoders, one module per filter) is [`crate::filters`]; the
//! chunk index built at open is the private module `index`.
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

use hdf5_sys::h5::hsize_t;
use hdf5_sys::h5d::{H5D_fill_time_t, H5D_fill_value_t, H5D_layout_t};
use hdf5_sys::h5i::hid_t;
use hdf5_sys::h5p::{
    H5Pfill_value_defined, H5Pget_chunk, H5Pget_fill_time, H5Pget_fill_value, H5Pget_layout,
};
use hdf5_sys::h5t::{H5T_class_t, H5T_order_t, H5Tget_class, H5Tget_order, H5Tget_size};
use tet_source::{check_region, Lib, Part, Request, Result, SourceError};

use crate::types::OwnedType;

use crate::filters::{
    decode_filters_into, decode_stages, grow, read_pipeline, DecodeError, Filter, FilterSpec, Sink,
    StageBuffers,
};

mod index;

pub use index::chunk_address_base;
use index::{build_index, Index};

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

// Not bound by hdf5-metno-sys; in libhdf5 since 1.10.2.
unsafe extern "C" {
    fn H5Dget_chunk_storage_size(
        dset_id: hid_t,
        offset: *const hsize_t,
        chunk_bytes: *mut hsize_t,
    ) -> i32;
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
            .map_err(|e| decode_error(grid_pos, at, e))?;
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
                            .map_err(|e| decode_error(&g, at, e))?
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
                        .map_err(|e| decode_error(&g, at, e))?;
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
        if !tet_source::next_index(&mut idx, &lo[..inner], &hi[..inner]) {
            return;
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

/// A chunk that could not be decoded, as the reader reports it: `chunk [i, j] at byte o: ` then
/// the [`DecodeError`]'s message; the `DecodeError` is kept as the cause (and a decoder
/// library's error as its source in turn).
fn decode_error(grid_pos: &[u64], at: Option<u64>, e: DecodeError) -> SourceError {
    let at = at.map(|o| format!(" at byte {o}")).unwrap_or_default();
    Part::Chunk.malformed_by(format!("chunk {grid_pos:?}{at}"), e)
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
    fn decode_errors_keep_the_decoders_error() {
        use std::error::Error;
        let e =
            crate::filters::decode_filters(&[Filter::Zstd], 0, b"not a zstd frame".to_vec(), 64)
                .unwrap_err();
        let text = e.to_string();
        let err = decode_error(&[1, 2], Some(4096), e);
        assert_eq!(
            err.to_string(),
            format!("chunk [1, 2] at byte 4096: {text}")
        );
        let decode = err
            .source()
            .and_then(|c| c.downcast_ref::<DecodeError>())
            .expect("the DecodeError as the cause");
        assert!(
            matches!(decode, DecodeError::Codec { filter: "zstd", .. }),
            "{decode:?}"
        );
        let lib = decode.source().expect("zstd's error as the source");
        assert!(lib.downcast_ref::<std::io::Error>().is_some(), "{lib:?}");
    }
}
