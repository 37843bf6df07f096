//! Copying out of a decoded object: a strided (non C order) layout to C order, and a region
//! of a C-order array into the caller's buffer, run by run.

use tet_source::Result;

use crate::plan::Part;

/// The elements (`size` bytes each) of `data`, laid out with element `strides` for `shape`
/// (a dense layout, checked by [`check_shape`]), in C order.
pub(crate) fn to_c_order(data: &[u8], shape: &[u64], strides: &[u64], size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    if shape.contains(&0) || size == 0 {
        return out;
    }
    let rank = shape.len();
    let mut idx = vec![0u64; rank];
    let mut src = 0u64;
    loop {
        let at = src as usize * size;
        out.extend_from_slice(&data[at..at + size]);
        // Next index, last axis fastest; `src` follows the strides.
        let mut k = rank;
        loop {
            if k == 0 {
                return out;
            }
            k -= 1;
            idx[k] += 1;
            src += strides[k];
            if idx[k] < shape[k] {
                break;
            }
            src -= strides[k] * shape[k];
            idx[k] = 0;
        }
    }
}

/// Above this many element runs a region is read by decoding the whole object instead.
pub(crate) const MAX_RUNS: usize = 4096;

/// The region `start .. start + count` of a C-order array of `shape` as runs of consecutive
/// elements `(offset, count)`, in C order; `None` when there would be more than `max` runs.
/// The region is non-empty and inside the shape (checked by the caller).
pub(crate) fn region_runs(
    shape: &[u64],
    start: &[u64],
    count: &[u64],
    max: usize,
) -> Option<Vec<(u64, u64)>> {
    let rank = shape.len();
    if rank == 0 {
        return Some(vec![(0, 1)]);
    }
    let mut strides = vec![1u64; rank];
    for k in (0..rank - 1).rev() {
        strides[k] = strides[k + 1].checked_mul(shape[k + 1])?;
    }
    // The run: the innermost axes the region covers whole, plus the next one.
    let mut axis = rank - 1;
    let mut run = count[axis];
    while axis > 0 && count[axis] == shape[axis] {
        axis -= 1;
        run = run.checked_mul(count[axis])?;
    }
    let n_runs = count[..axis]
        .iter()
        .try_fold(1u64, |a, &c| a.checked_mul(c))?;
    if n_runs > max as u64 {
        return None;
    }
    let mut runs = Vec::with_capacity(n_runs as usize);
    let mut idx = vec![0u64; axis];
    loop {
        let mut off = start[axis] * strides[axis];
        for k in 0..axis {
            off += (start[k] + idx[k]) * strides[k];
        }
        for k in axis + 1..rank {
            off += start[k] * strides[k];
        }
        runs.push((off, run));
        // Next outer index (odometer over axes 0..axis, last fastest).
        let mut k = axis;
        loop {
            if k == 0 {
                return Some(runs);
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < count[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// Copies the region `start .. start + count` of a C-order array of `shape` out of `data`
/// (the decoded object) into `out` (`size` bytes per output element), by runs of consecutive
/// elements.
pub(crate) fn copy_region(
    data: &[u8],
    shape: &[u64],
    start: &[u64],
    count: &[u64],
    part: Part,
    size: usize,
    out: &mut [u8],
) -> Result<()> {
    let rank = shape.len();
    if rank == 0 {
        // A 0-d object: its one element.
        return copy_region(data, &[1], &[0], &[1], part, size, out);
    }
    if count.contains(&0) {
        return Ok(());
    }
    // Element strides of the whole array.
    let mut strides = vec![1u64; rank];
    for k in (0..rank - 1).rev() {
        strides[k] = strides[k + 1] * shape[k + 1];
    }
    // The run: the innermost axes the region covers whole, plus the next one.
    let mut axis = rank - 1;
    let mut run = count[axis];
    while axis > 0 && count[axis] == shape[axis] {
        axis -= 1;
        run *= count[axis];
    }
    let outside = || tet_source::Part::Chunk.malformed("decoded object is shorter than its shape");
    let mut idx = vec![0u64; axis];
    let mut dst = 0u64;
    loop {
        let mut src = start[axis] * strides[axis];
        for (k, &i) in idx.iter().enumerate() {
            src += (start[k] + i) * strides[k];
        }
        let d0 = dst as usize;
        match part {
            Part::Whole => {
                let a = src as usize * size;
                let len = run as usize * size;
                let from = data.get(a..a + len).ok_or_else(outside)?;
                out[d0 * size..d0 * size + len].copy_from_slice(from);
            }
            Part::Bits => {
                let last = (src + run - 1) as usize / 8;
                if last >= data.len() {
                    return Err(outside());
                }
                for (e, o) in out[d0..d0 + run as usize].iter_mut().enumerate() {
                    let i = src as usize + e;
                    *o = (data[i / 8] >> (7 - i % 8)) & 1;
                }
            }
        }
        dst += run;
        // Next position of the outer axes (odometer), last axis fastest.
        let mut k = axis;
        loop {
            if k == 0 {
                return Ok(());
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < count[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}
