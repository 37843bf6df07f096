//! Reading an opened file's variables: regions of datasets through the direct chunk path, a
//! file extent, or libhdf5 (`H5Dread` with a hyperslab), records split into their leaves, strings
//! and variable-length data; the [`Source`] implementation.

use std::os::unix::fs::FileExt;

use hdf5_sys::h5d::{H5Dread, H5Dvlen_reclaim};
use hdf5_sys::h5p::H5P_DEFAULT;
use hdf5_sys::h5s::{
    H5S_class_t, H5S_seloper_t, H5Sclose, H5Screate, H5Screate_simple, H5Sselect_hyperslab, H5S_ALL,
};
use tet_source::{
    check_region, AttrValue, DimLabels, Fact, FileExtent, Lib, Part, Request, Result, Skipped,
    Source, SourceError, TextVariable, Variable,
};

use tet_source::record::{self, GatherError};
use tet_source::SourceError as Error;

use crate::chunks::ChunkedVar;
use crate::types::{Leaf, LeafKind};
use crate::{chunks, time, types, Access, Entry, H5Source};

/// A leaf of dataset `name` that its records do not hold (its type contradicts itself).
fn malformed(name: &str, e: GatherError) -> Error {
    Part::Type.malformed(format!("dataset '{name}': {e}"))
}

impl H5Source {
    /// Reads all records of a dataset whose type has string leaves and decodes every text leaf
    /// (index = leaf index; non-text leaves get an empty list).
    pub(crate) fn read_texts(&self, entry: usize, leaves: &[Leaf]) -> Result<Vec<Vec<String>>> {
        let e = &self.entries[entry];
        let start = vec![0u64; e.outer.len()];
        let count = e.outer.clone();
        self.with_records(e, &start, &count, |recs| {
            let mut lossy = false;
            leaves
                .iter()
                .map(|leaf| {
                    let LeafKind::Text(ty) = &leaf.kind else {
                        return Ok(Vec::new());
                    };
                    let dims = leaf.place.inner_shape();
                    let zeros = vec![0u64; dims.len()];
                    let mut vals = Vec::new();
                    for rec in recs.chunks_exact(e.record.max(1)) {
                        let each = leaf.place.for_each(&zeros, &dims, |off| {
                            // SAFETY: `recs` comes from a library read in the dataset's own type
                            // (vlen pointers live until `with_records` reclaims them).
                            vals.push(unsafe { types::string_at(ty, rec, off, &mut lossy) });
                        });
                        each.map_err(|err| malformed(&e.name, err))?;
                    }
                    Ok(vals)
                })
                .collect()
        })
    }

    /// Reads the records of `start..start+count` (dataset coordinates) and calls `f` on them
    /// while they are valid (variable-length parts are reclaimed afterwards).
    fn with_records<T>(
        &self,
        e: &Entry,
        start: &[u64],
        count: &[u64],
        f: impl FnOnce(&[u8]) -> Result<T>,
    ) -> Result<T> {
        let n = count.iter().try_fold(1u64, |a, &c| a.checked_mul(c));
        let bytes = n
            .and_then(|n| n.checked_mul(e.record as u64))
            .filter(|&b| b <= isize::MAX as u64)
            .ok_or(Request::TooLarge)?;
        let mut buf = vec![0u8; bytes as usize];
        if n == Some(0) {
            return f(&buf);
        }
        if e.indirect || matches!(e.access, Access::Library) {
            hdf5::sync::sync(|| {
                self.h5_read(e, start, count, &mut buf)?;
                let r = f(&buf);
                if e.indirect {
                    // SAFETY: `buf` holds the records of `count` that `h5_read` just read in
                    // `e.dtype` (it succeeded), not yet reclaimed; `f` is done with them and
                    // nothing reads them afterwards.
                    unsafe { Self::reclaim(e, count, &mut buf) };
                }
                r
            })
        } else {
            self.read_records_into(e, start, count, &mut buf)?;
            f(&buf)
        }
    }

    /// Frees the variable-length parts (strings, sequences) of records read by libhdf5.
    ///
    /// # Safety
    /// `buf` must hold the records of the region `count` of `e` as [`H5Source::h5_read`] read
    /// them (in `e.dtype`), not yet reclaimed; nothing may read their variable-length parts
    /// afterwards.
    unsafe fn reclaim(e: &Entry, count: &[u64], buf: &mut [u8]) {
        hdf5::sync::sync(|| {
            // SAFETY: under the library lock; libhdf5 reads `count.len()` extents from `count`.
            // The new dataspace id is closed below.
            let space = unsafe {
                if e.outer.is_empty() {
                    H5Screate(H5S_class_t::H5S_SCALAR)
                } else {
                    H5Screate_simple(count.len() as i32, count.as_ptr(), std::ptr::null())
                }
            };
            if space >= 0 {
                // SAFETY: `buf` holds the records of `space` in `e.dtype` as libhdf5 read them
                // (this function's contract), whose variable-length parts libhdf5 frees once;
                // `space` was created above and is closed once. Under the library lock.
                unsafe {
                    H5Dvlen_reclaim(e.dtype.id(), space, H5P_DEFAULT, buf.as_mut_ptr().cast());
                    H5Sclose(space);
                }
            }
        })
    }

    /// `H5Dread` of a hyperslab in the dataset's own type (no conversion) into `buf`, which
    /// must hold exactly the region's records.
    fn h5_read(&self, e: &Entry, start: &[u64], count: &[u64], buf: &mut [u8]) -> Result<()> {
        let err = |what: String| {
            SourceError::library_status(Lib::Hdf5, format!("dataset '{}'", e.name), what)
        };
        let rank = e.outer.len();
        let bytes = count
            .iter()
            .try_fold(e.record as u64, |a, &c| a.checked_mul(c));
        let wrong = if start.len() != rank || count.len() != rank {
            Some(Request::Rank {
                start: start.len(),
                count: count.len(),
                rank,
            })
        } else if bytes != Some(buf.len() as u64) {
            Some(Request::BufferSize {
                expected: bytes.unwrap_or(u64::MAX),
                got: buf.len() as u64,
            })
        } else {
            None
        };
        if let Some(wrong) = wrong {
            return Err(SourceError::in_variable(&e.name, wrong.into()));
        }
        hdf5::sync::sync(|| {
            if rank == 0 {
                // SAFETY: under the library lock; the dataspace is scalar, so libhdf5 writes
                // one record of `e.dtype` (`e.record` bytes: `buf`'s length, checked above).
                let rc = unsafe {
                    H5Dread(
                        e.ds.id(),
                        e.dtype.id(),
                        H5S_ALL,
                        H5S_ALL,
                        H5P_DEFAULT,
                        buf.as_mut_ptr().cast(),
                    )
                };
                return hdf5::h5check(rc).map(|_| ()).map_err(|x| {
                    SourceError::library(Lib::Hdf5, format!("dataset '{}': read", e.name), x)
                });
            }
            // SAFETY: a by-value call on an open dataset under the library lock; the new
            // dataspace id is closed below.
            let fspace = unsafe { hdf5_sys::h5d::H5Dget_space(e.ds.id()) };
            if fspace < 0 {
                return Err(err("cannot get its dataspace".into()));
            }
            // SAFETY: under the library lock; libhdf5 reads `rank` extents from `count` (its
            // length, checked above). The new dataspace id is closed below.
            let mspace = unsafe { H5Screate_simple(rank as i32, count.as_ptr(), std::ptr::null()) };
            let mut rc = if mspace < 0 { -1 } else { 0 };
            if rc >= 0 {
                // SAFETY: under the library lock; libhdf5 reads one value per axis of `fspace`
                // (the dataset's rank) from `start` and `count`, both that long (checked
                // above); null stride and block mean 1.
                rc = unsafe {
                    H5Sselect_hyperslab(
                        fspace,
                        H5S_seloper_t::H5S_SELECT_SET,
                        start.as_ptr(),
                        std::ptr::null(),
                        count.as_ptr(),
                        std::ptr::null(),
                    )
                };
            }
            let result = if rc < 0 {
                Err(err("cannot select the region".into()))
            } else {
                // SAFETY: under the library lock; libhdf5 writes the selected records (those of
                // `count`, in `e.dtype`: `e.record` bytes each) into `buf`, which holds exactly
                // that many bytes (checked above).
                let rc = unsafe {
                    H5Dread(
                        e.ds.id(),
                        e.dtype.id(),
                        mspace,
                        fspace,
                        H5P_DEFAULT,
                        buf.as_mut_ptr().cast(),
                    )
                };
                hdf5::h5check(rc)
                    .map(|_| ())
                    .map_err(|x| err(format!("read failed: {x}")))
            };
            // SAFETY: the dataspaces opened above, each closed once, under the library lock.
            unsafe {
                if mspace >= 0 {
                    H5Sclose(mspace);
                }
                H5Sclose(fspace);
            }
            result
        })
    }

    /// Raw records of a fixed-size type into `out` (which holds exactly the region).
    fn read_records_into(
        &self,
        e: &Entry,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        match &e.access {
            Access::Direct(cv) => cv.read_region_raw(&self.files[e.file].os, start, count, out),
            Access::Contiguous(off) => {
                let rs = e.record as u64;
                let file = &self.files[e.file].os;
                let mut res = Ok(());
                chunks::for_each_run(
                    &e.outer,
                    &vec![0; e.outer.len()],
                    count,
                    start,
                    start,
                    &start
                        .iter()
                        .zip(count)
                        .map(|(s, c)| s + c)
                        .collect::<Vec<_>>(),
                    |s, d, n| {
                        if res.is_err() {
                            return;
                        }
                        let (d, n) = ((d * rs) as usize, (n * rs) as usize);
                        if let Err(x) = file.read_exact_at(&mut out[d..d + n], off + s * rs) {
                            res = Err(Part::Chunk.malformed_by(
                                format!(
                                    "dataset '{}': reading {n} bytes at byte {}",
                                    e.name,
                                    off + s * rs
                                ),
                                x,
                            ));
                        }
                    },
                );
                res
            }
            Access::Library => self.h5_read(e, start, count, out),
            Access::Memory(m) => m.read_region(start, count, out),
        }
    }
}

impl Source for H5Source {
    fn variables(&self) -> &[Variable] {
        &self.variables
    }

    fn global_attrs(&self) -> &[(String, AttrValue)] {
        &self.global_attrs
    }

    fn global_facts(&self) -> &[Fact] {
        &self.global_facts
    }

    fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    fn text_variables(&self) -> &[TextVariable] {
        &self.text_variables
    }

    fn dim_labels(&self) -> &[DimLabels] {
        &self.dim_labels
    }

    fn parallel_reads(&self) -> bool {
        self.parallel
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let (v, n) = self.region_of(var, start, count, out.len())?;
        if n == 0 {
            return Ok(());
        }
        let plan = &self.plans[var];
        let e = &self.entries[plan.entry];
        let leaf = &plan.leaf;
        let orank = e.outer.len();
        let (ostart, ocount, istart, icount): (&[u64], &[u64], &[u64], &[u64]) = if orank == 0 {
            if leaf.place.inner.is_empty() {
                (&[], &[], &[], &[])
            } else {
                (&[], &[], start, count)
            }
        } else {
            (
                &start[..orank],
                &count[..orank],
                &start[orank..],
                &count[orank..],
            )
        };
        let Some(elem) = leaf.kind.element() else {
            return Err(Request::NotReadable {
                name: v.name.clone(),
                why: "has no numeric values",
            }
            .into());
        };
        if types::is_whole(leaf, e.record) && !e.indirect {
            self.read_records_into(e, ostart, ocount, out)?;
            chunks::swap_in_place(out, leaf.kind.swap_width());
        } else {
            // Gathered out of the records: compound fields, array axes, complex parts out of
            // order.
            self.with_records(e, ostart, ocount, |recs| {
                record::gather(recs, e.record, &leaf.place, istart, icount, elem, out)
                    .map_err(|err| malformed(&e.name, err))
            })?;
        }
        if leaf.kind.is_time64() {
            time::decode_in_place(out).map_err(|t| t.error(&format!("dataset '{}'", e.name)))?;
        }
        Ok(())
    }

    fn zstd_frames(&self, var: usize) -> bool {
        self.direct_whole(var)
            .is_some_and(|(cv, _)| cv.zstd_frames())
    }

    fn zstd_frame(&self, var: usize, start: &[u64], count: &[u64]) -> Result<Option<Vec<u8>>> {
        let Some((cv, file)) = self.direct_whole(var) else {
            return Ok(None);
        };
        cv.zstd_frame_of_region(&self.files[file].os, start, count)
    }

    fn file_extent(&self, var: usize) -> Option<FileExtent<'_>> {
        let plan = self.plans.get(var)?;
        let e = &self.entries[plan.entry];
        let Access::Contiguous(off) = &e.access else {
            return None;
        };
        let off = *off;
        match plan.leaf.kind {
            LeafKind::Numeric { .. }
                if plan.leaf.kind.swap_width() == 0 && !plan.leaf.kind.is_time64() => {}
            _ => return None,
        }
        if !types::is_whole(&plan.leaf, e.record) || e.indirect {
            return None;
        }
        Some(FileExtent {
            file: &self.files[e.file].os,
            offset: off,
        })
    }
}

impl H5Source {
    /// The directly read chunked dataset behind variable `var` (and its file) when the
    /// variable is the whole plain numeric record of it, stored little-endian: what a stored
    /// chunk holds is exactly the variable's chunk.
    fn direct_whole(&self, var: usize) -> Option<(&ChunkedVar, usize)> {
        let plan = self.plans.get(var)?;
        let e = &self.entries[plan.entry];
        let Access::Direct(cv) = &e.access else {
            return None;
        };
        let LeafKind::Numeric { .. } = plan.leaf.kind else {
            return None;
        };
        let whole = types::is_whole(&plan.leaf, e.record)
            && plan.leaf.kind.swap_width() == 0
            && !plan.leaf.kind.is_time64();
        (whole && !e.indirect && e.outer == cv.shape()).then_some((cv, e.file))
    }

    /// The names of the variables read through the library (not by direct chunk or contiguous
    /// access) — for diagnostics and tests.
    pub fn library_read_variables(&self) -> Vec<&str> {
        self.plans
            .iter()
            .zip(&self.variables)
            .filter(|(p, _)| matches!(self.entries[p.entry].access, Access::Library))
            .map(|(_, v)| v.name.as_str())
            .collect()
    }

    /// The names of the variables read by direct chunk access.
    pub fn direct_chunk_variables(&self) -> Vec<&str> {
        self.plans
            .iter()
            .zip(&self.variables)
            .filter(|(p, _)| matches!(self.entries[p.entry].access, Access::Direct(_)))
            .map(|(_, v)| v.name.as_str())
            .collect()
    }

    /// Reads a region of a variable through `H5Dread` whatever its fast path (for comparisons).
    pub fn read_region_via_library(
        &self,
        var: usize,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        let v = self.variables.get(var).ok_or(Request::NoVariable {
            var,
            count: self.variables.len(),
        })?;
        check_region(&v.shape, start, count, v.dtype.size(), out.len())?;
        let plan = &self.plans[var];
        let e = &self.entries[plan.entry];
        if !types::is_whole(&plan.leaf, e.record) || e.outer.is_empty() {
            return Err(Request::NotReadable {
                name: v.name.clone(),
                why: "is not a whole record of a simple dataset",
            }
            .into());
        }
        if count.contains(&0) {
            return Ok(());
        }
        self.h5_read(e, start, count, out)?;
        chunks::swap_in_place(out, plan.leaf.kind.swap_width());
        if plan.leaf.kind.is_time64() {
            time::decode_in_place(out).map_err(|t| t.error(&format!("dataset '{}'", e.name)))?;
        }
        Ok(())
    }
}
