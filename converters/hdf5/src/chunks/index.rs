//! The chunk index of a dataset: where each allocated chunk lies in the file, listed at open
//! (a table, for up to 4096 chunks) or looked up per chunk through libhdf5 (more: HDF5 1.10
//! lists chunks in O(n²)), and the userblock offset HDF5 leaves out of chunk addresses.

use hdf5_sys::h5::{hsize_t, HADDR_UNDEF};
use hdf5_sys::h5d::{H5Dget_chunk_info, H5Dget_num_chunks, H5Dget_space};
use hdf5_sys::h5s::H5Sclose;
use tet_source::{Lib, Part, Result, SourceError};

use super::ChunkLoc;

/// Datasets with up to this many allocated chunks get a chunk table at open. Listing the chunks
/// costs O(n²) in HDF5 1.10 (every `H5Dget_chunk_info` call walks the index from the start;
/// `H5Dget_chunk_info_by_coord` scans all chunks): about 0.1 s for 4096 chunks. Larger datasets
/// are read with one O(log n) library lookup per chunk instead.
const MAX_TABLE_CHUNKS: u64 = 1 << 12;

/// Where the stored chunks are found.
#[derive(Debug, Clone)]
pub(super) enum Index {
    /// Every chunk's location, built at open: reads need no library call.
    /// (linear grid position, location), sorted by position.
    Table(Vec<(u64, ChunkLoc)>),
    /// Too many chunks to list at open (HDF5 1.10 lists them in O(n²)): each chunk is looked up
    /// and its stored bytes fetched with `H5Dread_chunk` under the library lock when it is read
    /// (O(log n) each); decoding still runs outside the lock.
    Lazy(hdf5::Dataset),
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

/// The chunk index of a dataset, and its number of allocated chunks.
pub(super) fn build_index(
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
