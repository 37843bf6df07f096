//! Strided gather over an NPY payload: every source layout this crate meets (C or Fortran
//! order, record fields, sub-array axes) is a base offset plus one byte stride per axis, which
//! [`tet_source::record::gather_strided`] copies into C-order, little-endian output. What stays
//! here is NPY's own: the payload may be read by ranges ([`gather_ranged`]: a region is fetched
//! in one read or cut into denser parts), and its errors are a malformed shape.

use tet_source::byte_source::ByteSource;
use tet_source::record::{self, GatherError, Strided};
use tet_source::{Part, Result, SourceError};

/// A gather that failed: the region is not all in the payload (the header's shape, strides
/// or offsets contradict its length).
fn malformed(e: GatherError) -> SourceError {
    Part::Shape.malformed(e.to_string())
}

/// Copies elements `start .. start + count` of `layout` over `data` into `out` (C order):
/// [`record::gather_strided`], its error a malformed shape. `out.len()` must be
/// `product(count) * esize` (checked by the caller).
pub(crate) fn gather(
    data: &[u8],
    layout: &Strided,
    start: &[u64],
    count: &[u64],
    out: &mut [u8],
) -> Result<()> {
    record::gather_strided(data, layout, start, count, out).map_err(malformed)
}

/// Bytes a region may span beyond 4 times what it copies and still be fetched in one read.
const SMALL_SPAN: u64 = 64 << 10;

/// [`gather`] from a payload read by ranges: the payload is the `len` bytes at `at` of `src`.
/// A region whose bytes are dense enough (it copies at least a quarter of what it spans, or it
/// spans little) is fetched with one read; a sparser one is cut along its first axis of more
/// than one element (so that each part's output is a run of `out`) until its parts are.
pub(crate) fn gather_ranged(
    src: &dyn ByteSource,
    at: u64,
    len: u64,
    layout: &Strided,
    start: &[u64],
    count: &[u64],
    out: &mut [u8],
) -> Result<()> {
    if out.is_empty() || count.contains(&0) {
        return Ok(());
    }
    let oob = || malformed(GatherError::Outside);
    let (first, end) = layout.span(start, count).ok_or_else(oob)?;
    if end > len {
        return Err(oob());
    }
    let spanned = end - first;
    let split = count.iter().position(|&c| c > 1);
    match split {
        Some(axis) if spanned > SMALL_SPAN && spanned / 4 > out.len() as u64 => {
            let half = count[axis] / 2;
            let mut lo = count.to_vec();
            lo[axis] = half;
            let lo_bytes = lo.iter().product::<u64>() as usize * layout.esize;
            let mut hi_start = start.to_vec();
            hi_start[axis] += half;
            let mut hi = count.to_vec();
            hi[axis] -= half;
            let (a, b) = out.split_at_mut(lo_bytes);
            gather_ranged(src, at, len, layout, start, &lo, a)?;
            gather_ranged(src, at, len, layout, &hi_start, &hi, b)
        }
        _ => {
            let bytes = src.read_vec(at + first, spanned)?;
            let here = Strided {
                base: 0,
                ..layout.clone()
            };
            gather(&bytes, &here, &vec![0; count.len()], count, out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tet_source::record::Fix;

    #[test]
    fn ranged_gather_equals_the_in_memory_one() {
        // A 64 x 4096 u16 array in C order after a 128-byte header, and its Fortran twin.
        let (rows, cols) = (64u64, 4096u64);
        let mut data = vec![0xEEu8; 128];
        data.extend((0..rows * cols).flat_map(|i| (i as u16).to_le_bytes()));
        let total = data.len() as u64;
        for strides in [vec![cols * 2, 2], vec![2, rows * 2]] {
            let l = Strided {
                base: 128,
                strides,
                esize: 2,
                fix: Fix::None,
            };
            for (start, count) in [
                ([0, 0], [64, 4096]),
                ([3, 5], [60, 7]),
                ([10, 0], [1, 4096]),
                ([0, 100], [64, 1]),
            ] {
                let n = (count[0] * count[1] * 2) as usize;
                let (mut want, mut got) = (vec![0u8; n], vec![1u8; n]);
                gather(&data, &l, &start, &count, &mut want).unwrap();
                gather_ranged(&data, 0, total, &l, &start, &count, &mut got).unwrap();
                assert_eq!(got, want, "{:?} {start:?} {count:?}", l.strides);
            }
        }
        // Past the payload's end.
        let l = Strided {
            base: 0,
            strides: vec![2],
            esize: 2,
            fix: Fix::None,
        };
        let mut out = [0u8; 4];
        assert!(gather_ranged(&data, 0, 2, &l, &[0], &[2], &mut out).is_err());
    }
}
