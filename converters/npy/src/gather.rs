//! Strided gather: copies a hyper-rectangle out of a strided byte layout into C-order,
//! little-endian output. Every source layout this crate meets (C or Fortran order, record
//! fields, sub-array axes) is a base offset plus one byte stride per axis.

use tet_source::byte_source::ByteSource;
use tet_source::{Part, Result};

/// Element handling after the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fix {
    None,
    /// Reverse the bytes of each element (big-endian source).
    Swap,
    /// Reverse the bytes of each half of each element (big-endian complex source: the real
    /// and the imaginary part are swapped separately).
    SwapParts,
    /// Map any non-zero byte to 1 (numpy bool).
    Bool,
}

/// Where the elements of one variable sit in its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Byte offset of element `[0, 0, …]`.
    pub base: u64,
    /// Byte stride of each axis.
    pub strides: Vec<u64>,
    /// Bytes per element.
    pub esize: usize,
    /// Per-element fix-up.
    pub fix: Fix,
}

/// Copies elements `start .. start + count` of `layout` over `data` into `out` (C order).
/// `out.len()` must be `product(count) * esize` (checked by the caller); bounds against `data`
/// are checked here once, up front.
pub(crate) fn gather(
    data: &[u8],
    layout: &Layout,
    start: &[u64],
    count: &[u64],
    out: &mut [u8],
) -> Result<()> {
    let Layout {
        base,
        ref strides,
        esize,
        fix,
    } = *layout;
    if out.is_empty() || count.contains(&0) {
        return Ok(());
    }
    let oob = || Part::Shape.malformed("region lies outside the stored data");
    // First and one-past-last byte touched, with checked arithmetic.
    let mut first = base;
    let mut last = base;
    for ((&s, &c), &st) in start.iter().zip(count).zip(strides) {
        first = s
            .checked_mul(st)
            .and_then(|x| first.checked_add(x))
            .ok_or_else(oob)?;
        last = (s + c - 1)
            .checked_mul(st)
            .and_then(|x| last.checked_add(x))
            .ok_or_else(oob)?;
    }
    let end = last.checked_add(esize as u64).ok_or_else(oob)?;
    if end > data.len() as u64 {
        return Err(oob());
    }
    let first = first as usize;

    // Coalesce axes: drop length-1 axes, merge an axis into the next when stepping it is the
    // same as running through the whole next axis.
    let mut axes: Vec<(usize, usize)> = Vec::with_capacity(count.len() + 1);
    for (&c, &st) in count.iter().zip(strides) {
        if c == 1 {
            continue;
        }
        let (c, st) = (c as usize, st as usize);
        if let Some(prev) = axes.last_mut() {
            // `prev` is the outer axis; it merges when its stride equals c * st.
            if prev.1 == c * st {
                *prev = (prev.0 * c, st);
                continue;
            }
        }
        axes.push((c, st));
    }
    if axes.is_empty() {
        axes.push((1, esize));
    }
    let (inner_n, inner_st) = *axes.last().unwrap_or(&(1, esize));
    let outer = &axes[..axes.len() - 1];
    let run = inner_n * esize;

    let mut idx = vec![0usize; outer.len()];
    let mut off = first;
    let mut o = 0usize;
    loop {
        let dst = &mut out[o..o + run];
        if inner_st == esize {
            dst.copy_from_slice(&data[off..off + run]);
        } else {
            match esize {
                1 => copy_strided::<1>(dst, data, off, inner_st),
                2 => copy_strided::<2>(dst, data, off, inner_st),
                4 => copy_strided::<4>(dst, data, off, inner_st),
                8 => copy_strided::<8>(dst, data, off, inner_st),
                16 => copy_strided::<16>(dst, data, off, inner_st),
                _ => {
                    let mut src = off;
                    for d in dst.chunks_exact_mut(esize) {
                        d.copy_from_slice(&data[src..src + esize]);
                        src += inner_st;
                    }
                }
            }
        }
        o += run;
        // Advance the outer odometer.
        let mut k = outer.len();
        loop {
            if k == 0 {
                finish(out, esize, fix);
                return Ok(());
            }
            k -= 1;
            idx[k] += 1;
            off += outer[k].1;
            if idx[k] < outer[k].0 {
                break;
            }
            off -= outer[k].1 * outer[k].0;
            idx[k] = 0;
        }
    }
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
    layout: &Layout,
    start: &[u64],
    count: &[u64],
    out: &mut [u8],
) -> Result<()> {
    if out.is_empty() || count.contains(&0) {
        return Ok(());
    }
    let oob = || Part::Shape.malformed("region lies outside the stored data");
    let (first, end) = span(layout, start, count).ok_or_else(oob)?;
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
            let here = Layout {
                base: 0,
                ..layout.clone()
            };
            gather(&bytes, &here, &vec![0; count.len()], count, out)
        }
    }
}

/// First and one-past-last byte (in the payload) of the region, `None` on overflow. `count`
/// holds no zero.
fn span(layout: &Layout, start: &[u64], count: &[u64]) -> Option<(u64, u64)> {
    let mut first = layout.base;
    let mut last = layout.base;
    for ((&s, &c), &st) in start.iter().zip(count).zip(&layout.strides) {
        first = first.checked_add(s.checked_mul(st)?)?;
        last = last.checked_add(s.checked_add(c - 1)?.checked_mul(st)?)?;
    }
    Some((first, last.checked_add(layout.esize as u64)?))
}

/// Copies `dst.len() / N` elements of `N` bytes, `stride` bytes apart, from `src[off..]`.
fn copy_strided<const N: usize>(dst: &mut [u8], src: &[u8], mut off: usize, stride: usize) {
    for d in dst.chunks_exact_mut(N) {
        d.copy_from_slice(&src[off..off + N]);
        off += stride;
    }
}

fn swap<const N: usize>(out: &mut [u8]) {
    for c in out.chunks_exact_mut(N) {
        c.reverse();
    }
}

fn finish(out: &mut [u8], esize: usize, fix: Fix) {
    match fix {
        Fix::None => {}
        Fix::Swap => match esize {
            2 => swap::<2>(out),
            4 => swap::<4>(out),
            8 => swap::<8>(out),
            1 => {}
            n => out.chunks_exact_mut(n).for_each(|c| c.reverse()),
        },
        Fix::SwapParts => finish(out, esize / 2, Fix::Swap),
        Fix::Bool => out.iter_mut().for_each(|b| *b = u8::from(*b != 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_fortran() {
        // 2x3 Fortran-order u8: memory is column-major.
        let data = [0u8, 3, 1, 4, 2, 5]; // a[i][j] = 3i + j
        let mut out = [0u8; 6];
        let l = Layout {
            base: 0,
            strides: vec![1, 2],
            esize: 1,
            fix: Fix::None,
        };
        gather(&data, &l, &[0, 0], &[2, 3], &mut out).unwrap();
        assert_eq!(out, [0, 1, 2, 3, 4, 5]);
        let mut out = [0u8; 2];
        gather(&data, &l, &[1, 1], &[1, 2], &mut out).unwrap();
        assert_eq!(out, [4, 5]);
    }

    #[test]
    fn refuses_out_of_bounds() {
        let data = [0u8; 4];
        let mut out = [0u8; 8];
        let l = Layout {
            base: 0,
            strides: vec![4],
            esize: 4,
            fix: Fix::None,
        };
        assert!(gather(&data, &l, &[0], &[2], &mut out).is_err());
    }

    #[test]
    fn ranged_gather_equals_the_in_memory_one() {
        // A 64 x 4096 u16 array in C order after a 128-byte header, and its Fortran twin.
        let (rows, cols) = (64u64, 4096u64);
        let mut data = vec![0xEEu8; 128];
        data.extend((0..rows * cols).flat_map(|i| (i as u16).to_le_bytes()));
        let total = data.len() as u64;
        for strides in [vec![cols * 2, 2], vec![2, rows * 2]] {
            let l = Layout {
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
        let l = Layout {
            base: 0,
            strides: vec![2],
            esize: 2,
            fix: Fix::None,
        };
        let mut out = [0u8; 4];
        assert!(gather_ranged(&data, 0, 2, &l, &[0], &[2], &mut out).is_err());
    }

    #[test]
    fn swaps_each_half_of_a_complex_value() {
        // One big-endian c8 (1.5, -2.0), read as a 0-d value.
        let data: Vec<u8> = [1.5f32.to_be_bytes(), (-2.0f32).to_be_bytes()].concat();
        let l = Layout {
            base: 0,
            strides: Vec::new(),
            esize: 8,
            fix: Fix::SwapParts,
        };
        let mut out = [0u8; 8];
        gather(&data, &l, &[], &[], &mut out).unwrap();
        let want: Vec<u8> = [1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat();
        assert_eq!(out[..], want[..]);
    }
}
