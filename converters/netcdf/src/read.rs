//! Reading an opened file's variables: classic files from their byte layout, netCDF-4
//! variables through their stored HDF5 chunks (tet-hdf5) or netCDF-C's `nc_get_vara`, records
//! and strings; the [`Source`] implementation.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use tet_source::{
    AttrValue, DimLabels, Fact, Feature, Lib, OpenOptions, Request, Result, Skipped, Source,
    SourceError, TextVariable, Variable,
};

use crate::build::Builder;
use crate::ffi;
use crate::values::{as_bytes_mut, native_to_le};
use crate::{with_var, DataModel, NcSource, ReadPlan, VarLoc};
use tet_hdf5::chunks::{ChunkAccess, ChunkedVar};

impl NcSource {
    /// Walks the open dataset. Callers hold the library lock for the whole open: libhdf5 caches
    /// a variable-length datatype's file pointer on the dataset it shares between handles of one
    /// file, and two opens of the same netCDF-4 file interleaved call by call from two threads
    /// can crash inside the library (vlen-string fill values, seen with HDF5 1.10.8).
    pub(crate) fn build(
        handle: std::sync::Arc<ffi::Handle>,
        file_len: u64,
        options: &OpenOptions,
    ) -> Result<NcSource> {
        let ncid = handle.ncid();
        let parts = catch_unwind(AssertUnwindSafe(|| {
            Builder::new(options, file_len).run(ncid)
        }))
        .unwrap_or_else(|panic| {
            Err(SourceError::library_status(
                Lib::NetCdf,
                "internal error while reading the NetCDF structure",
                tet_source::panic_text(&*panic),
            ))
        })?;
        Ok(NcSource {
            _handle: handle,
            file: None,
            model: parts.model,
            variables: parts.variables,
            plans: parts.plans,
            global_attrs: parts.globals,
            global_facts: parts.global_facts,
            texts: parts.texts,
            labels: parts.labels,
            skipped: parts.skipped,
        })
    }

    /// Switches the chunked variables of a netCDF-4 file whose chunks this crate can decode to
    /// direct reads: chunk addresses come from libhdf5 once, at open (tet-hdf5's chunk index),
    /// then reads and decompression run in parallel without the library. A variable qualifies
    /// when it is read natively (not CF-unpacked), every chunk is stored (so netCDF's fill
    /// semantics never come into play), the chunk index fits a table, and the HDF5 view agrees
    /// with netCDF's on shape and element size; anything else keeps reading through netCDF.
    /// Callers hold the library lock.
    pub(crate) fn attach_direct_chunks(&mut self, path: &Path) -> Result<()> {
        let mut picks: Vec<(usize, String)> = Vec::new();
        for (i, (v, plan)) in self.variables.iter().zip(&self.plans).enumerate() {
            let chunked = v.layout.chunk_shape.is_some();
            let candidate = match plan {
                ReadPlan::Native(loc) | ReadPlan::Undecodable(loc, _) => !loc.scalar,
                _ => false,
            };
            if candidate && chunked {
                picks.push((i, format!("/{}", v.name)));
            }
        }
        if picks.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = picks.iter().map(|(_, n)| n.as_str()).collect();
        // A file netCDF opened but HDF5 alone cannot is no reason to fail: keep netCDF reads.
        let Ok(found) = ChunkedVar::open_many(path, &names) else {
            return Ok(());
        };
        for ((i, _), access) in picks.into_iter().zip(found) {
            let v = &self.variables[i];
            if let Ok(ChunkAccess::Direct(cv)) = access {
                let all_stored = cv
                    .shape()
                    .iter()
                    .zip(cv.chunk_shape())
                    .try_fold(1u64, |n, (&d, &c)| n.checked_mul(d.div_ceil(c)))
                    == Some(cv.stored_chunks() as u64);
                // A chunk never written reads as the HDF5 fill value, which netCDF-C sets to
                // the variable's fill value: relied on only where netCDF-C cannot read at all.
                let undecodable = matches!(self.plans[i], ReadPlan::Undecodable(..));
                if cv.shape() == v.shape.as_slice()
                    && cv.elem_size() == v.dtype.size()
                    && cv.has_chunk_table()
                    && (all_stored || undecodable)
                {
                    self.plans[i] = ReadPlan::Direct(Box::new(cv));
                }
            }
        }
        if self.plans.iter().any(|p| matches!(p, ReadPlan::Direct(_))) {
            self.file = Some(std::fs::File::open(path)?);
        }
        Ok(())
    }

    /// Records every variable still [`ReadPlan::Undecodable`] (its filter has no decoder in
    /// netCDF-C, and tet-hdf5 could not take it over) as unsupported: an error, or with
    /// `skip_unsupported` a skipped item, and the variable is dropped.
    pub(crate) fn refuse_undecodable(&mut self, options: &OpenOptions) -> Result<()> {
        let mut keep_vars = Vec::with_capacity(self.variables.len());
        let mut keep_plans = Vec::with_capacity(self.plans.len());
        let vars = std::mem::take(&mut self.variables);
        let plans = std::mem::take(&mut self.plans);
        for (v, plan) in vars.into_iter().zip(plans) {
            if let ReadPlan::Undecodable(_, reason) = plan {
                if !options.skip_unsupported {
                    return Err(Feature::Codec.unsupported(format!("{}: {reason}", v.name)));
                }
                self.skipped.push(Skipped {
                    name: v.name,
                    reason,
                });
            } else {
                keep_vars.push(v);
                keep_plans.push(plan);
            }
        }
        self.variables = keep_vars;
        self.plans = keep_plans;
        Ok(())
    }

    /// How many variables are read directly from their stored chunks (see
    /// `NcSource::attach_direct_chunks`); the rest go through netCDF-C.
    pub fn direct_chunk_variables(&self) -> usize {
        self.plans
            .iter()
            .filter(|p| matches!(p, ReadPlan::Direct(_)))
            .count()
    }

    /// The file's data model.
    pub fn data_model(&self) -> DataModel {
        self.model
    }

    pub(crate) fn read_native(
        &self,
        loc: VarLoc,
        name: &str,
        elem: usize,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        let to_usize = |v: &[u64]| -> Result<Vec<usize>> {
            v.iter()
                .map(|&x| usize::try_from(x).map_err(|_| Request::TooLarge.into()))
                .collect()
        };
        let (s, c) = if loc.scalar {
            (Vec::new(), Vec::new())
        } else {
            (to_usize(start)?, to_usize(count)?)
        };
        let context = |e: SourceError| with_var(name, e);
        if (out.as_ptr() as usize).is_multiple_of(elem) {
            ffi::get_vara(loc.ncid, loc.varid, &s, &c, out).map_err(context)?;
        } else {
            let mut tmp = vec![0u64; out.len().div_ceil(8)];
            let bytes = as_bytes_mut(&mut tmp);
            ffi::get_vara(loc.ncid, loc.varid, &s, &c, &mut bytes[..out.len()]).map_err(context)?;
            out.copy_from_slice(&bytes[..out.len()]);
        }
        native_to_le(out, elem);
        Ok(())
    }
}

impl Source for NcSource {
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
        &self.texts
    }

    fn dim_labels(&self) -> &[DimLabels] {
        &self.labels
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let (v, n) = self.region_of(var, start, count, out.len())?;
        if n == 0 {
            return Ok(());
        }
        match &self.plans[var] {
            ReadPlan::Native(loc) => {
                self.read_native(*loc, &v.name, v.dtype.size(), start, count, out)
            }
            ReadPlan::Unpack(loc, u) => {
                let elem = u.stored.size();
                let bytes = usize::try_from(n)
                    .ok()
                    .and_then(|n| n.checked_mul(elem))
                    .ok_or(Request::TooLarge)?;
                let mut tmp = vec![0u64; bytes.div_ceil(8)];
                let packed = &mut as_bytes_mut(&mut tmp)[..bytes];
                self.read_native(*loc, &v.name, elem, start, count, packed)?;
                u.apply(packed, out);
                Ok(())
            }
            ReadPlan::Direct(cv) => {
                let file = self.file.as_ref().ok_or(Request::NotReadable {
                    name: v.name.clone(),
                    why: "is read chunk by chunk, but the file is not open",
                })?;
                cv.read_region(file, start, count, out)
                    .map_err(|e| with_var(&v.name, e))
            }
            ReadPlan::Field(f) => f.read(start, count, out).map_err(|e| with_var(&v.name, e)),
            ReadPlan::Memory(m) => m
                .read_region(start, count, out)
                .map_err(|e| with_var(&v.name, e)),
            ReadPlan::Opaque(o) => o
                .read(self, start, count, out)
                .map_err(|e| with_var(&v.name, e)),
            ReadPlan::Undecodable(_, reason) => {
                Err(Feature::Codec.unsupported(format!("{}: {reason}", v.name)))
            }
        }
    }

    /// Chunks of variables read from their stored chunks whose only filter is zstd are one
    /// frame each (see `tet_hdf5::chunks::ChunkedVar::zstd_frames`).
    fn zstd_frames(&self, var: usize) -> bool {
        matches!(self.plans.get(var), Some(ReadPlan::Direct(cv)) if cv.zstd_frames())
    }

    fn zstd_frame(&self, var: usize, start: &[u64], count: &[u64]) -> Result<Option<Vec<u8>>> {
        match (self.plans.get(var), &self.file) {
            (Some(ReadPlan::Direct(cv)), Some(file)) => cv.zstd_frame_of_region(file, start, count),
            _ => Ok(None),
        }
    }

    /// Workers may read concurrently when some variables are read from their stored chunks
    /// (decoding runs on the calling thread); netCDF-C calls serialise on the library lock.
    fn parallel_reads(&self) -> bool {
        self.file.is_some()
    }
}
