//! HDF5 variable-length sequences (`H5T_VLEN` of numbers: h5py's `vlen_dtype`, PyTables'
//! VLArray) as CF contiguous ragged arrays (see `tet_source::ragged`): the whole dataset is
//! read at open through `H5Dread` in its own type (each element an `hvl_t` pointing to its
//! values, which libhdf5 allocates and `H5Dvlen_reclaim` frees), its values byte-swapped to
//! little-endian and gathered with one count per element (at most
//! `tet_source::ragged::MAX_BYTES`).
//!
//! A sequence of arrays of numbers (PyTables' VLArray of an atom with a shape, e.g.
//! `Time32Atom(shape=(2, 1))`) is a ragged array whose values dataset has the array's axes
//! after the sample axis (`<short>_sample`, `<short>_dim1`, …); the counts count arrays. Time
//! values (`H5T_TIME`) get the units of `crate::time`, 64-bit ones decoded to microseconds.
//!
//! A sequence of strings (`H5T_VLEN` of fixed- or variable-length strings: PyTables'
//! VLArray of `StringAtom`) is *ragged text* (docs/FORMAT.md): a string variable of every
//! element's strings one after the other along `<short>_sample`, with `Fact::Ragged` naming
//! the count variable `<name>_count`, as for numbers.

use std::ffi::c_void;

use hdf5_sys::h5d::{H5Dget_space, H5Dread, H5Dvlen_reclaim};
use hdf5_sys::h5i::hid_t;
use hdf5_sys::h5p::H5P_DEFAULT;
use hdf5_sys::h5s::{H5Sclose, H5S_ALL};
use hdf5_sys::h5t::hvl_t;
use tet_source::ragged::Ragged;
use tet_source::{ElementType, Feature, Lib, Part, Result, SourceError};

use crate::types::{self, TypeInfo};

/// How the values of a sequence are numbers: their type, big-endian or not, and whether they
/// are PyTables' 64-bit times (decoded to microseconds, module `crate::time`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Values {
    pub et: ElementType,
    pub be: bool,
    pub time64: bool,
}

impl Values {
    /// `values` (whole numbers) as little-endian, decoded.
    fn to_le(self, values: &[u8], name: &str) -> Result<Vec<u8>> {
        let size = self.et.size();
        let mut values = values.to_vec();
        if self.be && size > 1 {
            for e in values.chunks_exact_mut(size) {
                e.reverse();
            }
        }
        if self.time64 {
            crate::time::decode_in_place(&mut values)
                .map_err(|t| t.error(&format!("dataset '{name}'")))?;
        }
        Ok(values)
    }
}

/// Reads the `n` sequences of the vlen dataset `ds` (type `dtype`) whose values are numbers
/// as `values` says.
pub(crate) fn read_sequences(
    ds: hid_t,
    dtype: hid_t,
    n: usize,
    values: Values,
    name: &str,
) -> Result<Ragged> {
    let mut gathered = Ragged::new(values.et);
    each_sequence(ds, dtype, n, values.et.size(), name, |v| {
        gathered.push(&values.to_le(v, name)?)
    })?;
    Ok(gathered)
}

/// Reads the `n` sequences of the vlen dataset `ds` (type `dtype`) whose elements are arrays
/// of `per` numbers (as `values` says): every array's numbers one after the other
/// (little-endian), and the counts of arrays (as a [`Ragged`] of one placeholder byte per
/// array).
pub(crate) fn read_array_sequences(
    ds: hid_t,
    dtype: hid_t,
    n: usize,
    values: Values,
    per: usize,
    name: &str,
) -> Result<(Vec<u8>, Ragged)> {
    let element = per
        .checked_mul(values.et.size())
        .ok_or_else(|| Part::Values.malformed(format!("'{name}': an array too large")))?;
    let mut all = Vec::new();
    let mut counts = Ragged::new(ElementType::U8);
    each_sequence(ds, dtype, n, element, name, |v| {
        let fits = all
            .len()
            .checked_add(v.len())
            .is_some_and(|t| t <= tet_source::ragged::MAX_BYTES);
        if !fits {
            return Err(Feature::Size.unsupported(format!(
                "'{name}': ragged values larger than {} MiB are not gathered",
                tet_source::ragged::MAX_BYTES >> 20
            )));
        }
        all.extend_from_slice(&values.to_le(v, name)?);
        counts.push(&vec![0u8; v.len() / element.max(1)])
    })?;
    Ok((all, counts))
}

/// The strings of the `n` sequences of the vlen dataset `ds` (type `dtype`) whose values are
/// strings of type `base` (fixed-length or variable-length), one after the other in C order,
/// and their counts (as a [`Ragged`] of one placeholder byte per string); whether some string
/// was not UTF-8 (decoded lossily).
pub(crate) fn read_string_sequences(
    ds: hid_t,
    dtype: hid_t,
    n: usize,
    base: &TypeInfo,
    name: &str,
) -> Result<(Vec<String>, Ragged, bool)> {
    let size = base.size;
    let mut strings = Vec::new();
    let mut counts = Ragged::new(ElementType::U8);
    let mut lossy = false;
    let mut text_bytes = 0usize;
    each_sequence(ds, dtype, n, size, name, |values| {
        let k = values.len() / size.max(1);
        for i in 0..k {
            // SAFETY: `values` are `k` strings of `base` libhdf5 read in this type and not
            // reclaimed yet (`each_sequence`'s contract).
            let s = unsafe { types::string_at(base, values, i * size, &mut lossy) };
            text_bytes = text_bytes.saturating_add(s.len());
            if text_bytes > tet_source::ragged::MAX_BYTES {
                return Err(Feature::Size.unsupported(format!(
                    "'{name}': sequences of strings larger than {} MiB are not gathered",
                    tet_source::ragged::MAX_BYTES >> 20
                )));
            }
            strings.push(s);
        }
        counts.push(&vec![0u8; k])
    })?;
    Ok((strings, counts, lossy))
}

/// Reads the `n` sequences of the vlen dataset `ds` (type `dtype`, values of `size` bytes)
/// and calls `each` with each sequence's values (memory libhdf5 allocated, valid during the
/// call: pointers in them, as of variable-length strings, too), in C order.
fn each_sequence(
    ds: hid_t,
    dtype: hid_t,
    n: usize,
    size: usize,
    name: &str,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
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
            let Some(bytes) = vl.len.checked_mul(size) else {
                result = Err(Part::Values.malformed(format!("'{name}': a sequence too long")));
                break;
            };
            let values: &[u8] = if vl.p.is_null() || vl.len == 0 {
                &[]
            } else {
                // SAFETY: libhdf5 allocated `len` values of `size` bytes at `p` in this read;
                // they live until the reclaim below.
                unsafe { std::slice::from_raw_parts(vl.p.cast::<u8>(), bytes) }
            };
            if let Err(e) = each(values) {
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
    })
}
