//! HDF5 variable-length sequences (`H5T_VLEN` of numbers: h5py's `vlen_dtype`, PyTables'
//! VLArray) as CF contiguous ragged arrays (see `tet_source::ragged`): the whole dataset is
//! read at open through `H5Dread` in its own type (each element an `hvl_t` pointing to its
//! values, which libhdf5 allocates and `H5Dvlen_reclaim` frees), its values byte-swapped to
//! little-endian and gathered with one count per element (at most
//! `tet_source::ragged::MAX_BYTES`).

use std::ffi::c_void;

use hdf5_sys::h5d::{H5Dget_space, H5Dread, H5Dvlen_reclaim};
use hdf5_sys::h5i::hid_t;
use hdf5_sys::h5p::H5P_DEFAULT;
use hdf5_sys::h5s::{H5Sclose, H5S_ALL};
use hdf5_sys::h5t::hvl_t;
use tet_source::ragged::Ragged;
use tet_source::{ElementType, Feature, Lib, Part, Result, SourceError};

/// Reads the `n` sequences of the vlen dataset `ds` (type `dtype`) whose values are `base`
/// (big-endian when `be`).
pub(crate) fn read_sequences(
    ds: hid_t,
    dtype: hid_t,
    n: usize,
    base: ElementType,
    be: bool,
    name: &str,
) -> Result<Ragged> {
    let size = base.size();
    let fits = n
        .checked_mul(std::mem::size_of::<hvl_t>())
        .is_some_and(|b| b <= tet_source::ragged::MAX_BYTES);
    if !fits {
        return Err(Feature::Size.unsupported(format!(
            "'{name}': too many variable-length elements to gather ({n})"
        )));
    }
    let mut buf: Vec<hvl_t> = (0..n)
        .map(|_| hvl_t {
            len: 0,
            p: std::ptr::null_mut(),
        })
        .collect();
    let mut gathered = Ragged::new(base);
    hdf5::sync::sync(|| {
        if n == 0 {
            return Ok(());
        }
        let ptr = buf.as_mut_ptr().cast::<c_void>();
        // SAFETY: `buf` holds one `hvl_t` per element of the dataset (its whole selection), the
        // memory type is the dataset's own vlen type; under the library lock.
        let status = unsafe { H5Dread(ds, dtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptr) };
        if status < 0 {
            return Err(SourceError::library(
                Lib::Hdf5,
                format!("dataset '{name}': reading its sequences"),
                hdf5::Error::query().unwrap_or_else(|e| e),
            ));
        }
        let mut result = Ok(());
        for vl in &buf {
            let bytes = vl.len.saturating_mul(size);
            let values = if vl.p.is_null() || vl.len == 0 {
                Vec::new()
            } else if bytes == usize::MAX {
                result = Err(Part::Values.malformed(format!("'{name}': a sequence too long")));
                break;
            } else {
                // SAFETY: libhdf5 allocated `len` values of `base` at `p` in this read; they
                // live until the reclaim below.
                unsafe { std::slice::from_raw_parts(vl.p.cast::<u8>(), bytes) }.to_vec()
            };
            let mut values = values;
            if be && size > 1 {
                for e in values.chunks_exact_mut(size) {
                    e.reverse();
                }
            }
            if let Err(e) = gathered.push(&values) {
                result = Err(e);
                break;
            }
        }
        // SAFETY: the dataset's dataspace, closed after the reclaim.
        let space = unsafe { H5Dget_space(ds) };
        // SAFETY: `buf` holds what the successful H5Dread above wrote with memory type `dtype`
        // over `space`: each sequence is freed once, here, and `buf` is not read after.
        unsafe {
            H5Dvlen_reclaim(dtype, space, H5P_DEFAULT, ptr);
            H5Sclose(space);
        }
        result
    })?;
    Ok(gathered)
}
