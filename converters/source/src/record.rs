//! Record (compound, structured) types flattened into *leaves*, and the reading of one leaf's
//! values out of records: one copy for every importer whose format has records (HDF5 and
//! netCDF-4 compounds, Zarr structured data types, NumPy record dtypes).
//!
//! A record type becomes one variable per leaf: a numeric (or text, or opaque…) part of the
//! record, nested records joined into a path below the variable's name, the sub-array fields on
//! the way to it adding trailing axes. What a leaf *is* differs per format (netCDF has vlen and
//! `char` leaves, NPY opaque blobs, HDF5 enum mappings…), so [`Leaf`] is generic over the
//! format's own kind; *where* its elements lie is the same everywhere, a [`Place`]: the byte
//! offset of the first element in the record and a `(length, byte stride)` per trailing axis.
//!
//! Reading a leaf is a gather: for every record of a buffer, the elements of a box of the
//! leaf's trailing axes, in C order, copied out and fixed to little-endian ([`Fix`]). The
//! general form, [`gather_strided`], copies a box out of any layout that is a base offset plus
//! one byte stride per axis (records are the outermost axis of stride the record size; NumPy's
//! Fortran order is another such layout); [`gather`] is that over a buffer of whole records,
//! and also takes complex numbers whose parts lie anywhere in the element ([`Parts`]).
//!
//! Nothing here panics on hostile sizes: offsets are computed with checked arithmetic, every
//! element is checked to lie inside the data before it is copied, and the output's length is
//! checked against the box.

use crate::ElementType;

/// Why one leaf's values cannot be gathered from the bytes given. The importers wrap it into
/// their own errors (a malformed file, most often: a field outside its record).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatherError {
    /// The buffer is not a whole number of records (or the record size is 0).
    #[error("{len} bytes are not whole records of {record} bytes")]
    NotRecords {
        /// Bytes in the buffer.
        len: usize,
        /// Bytes of one record.
        record: usize,
    },
    /// The box has another rank than the layout.
    #[error("a region of rank {got} for {want} axes")]
    Rank {
        /// Axes of the region asked for.
        got: usize,
        /// Axes of the layout (the leaf's trailing axes, for [`Place::for_each`] and [`gather`]).
        want: usize,
    },
    /// The output does not hold exactly the box's elements.
    #[error("output of {got} bytes, {want} expected")]
    Output {
        /// Bytes of the output given.
        got: usize,
        /// Bytes the box's elements take.
        want: usize,
    },
    /// An element of the box lies outside the data (or outside its record).
    #[error("region lies outside the stored data")]
    Outside,
    /// A size or an offset does not fit the integers of this machine.
    #[error("region too large")]
    TooLarge,
}

/// Where the elements of one leaf lie in a record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Place {
    /// Byte offset of the leaf's first element in the record.
    pub offset: u64,
    /// Trailing axes (from sub-array fields), outermost first: length and byte stride of each.
    pub inner: Vec<(u64, u64)>,
}

impl Place {
    /// The place of a whole record: offset 0, no trailing axes.
    pub fn whole() -> Self {
        Place::default()
    }

    /// Whether this is the whole record's place (offset 0, no trailing axes).
    pub fn is_whole(&self) -> bool {
        self.offset == 0 && self.inner.is_empty()
    }

    /// The lengths of the trailing axes.
    pub fn inner_shape(&self) -> Vec<u64> {
        self.inner.iter().map(|&(n, _)| n).collect()
    }

    /// This place moved `by` bytes further into the record (saturating: a place past any
    /// record's end is refused when it is read).
    pub fn shifted(&self, by: u64) -> Place {
        Place {
            offset: self.offset.saturating_add(by),
            inner: self.inner.clone(),
        }
    }

    /// This place with the axes of a sub-array of extents `dims` whose elements take `elem`
    /// bytes appended (C order: the last axis has stride `elem`; saturating, as above).
    pub fn with_array(&self, dims: &[u64], elem: u64) -> Place {
        let mut axes = vec![(0u64, 0u64); dims.len()];
        let mut stride = elem;
        for (axis, &d) in axes.iter_mut().zip(dims).rev() {
            *axis = (d, stride);
            stride = stride.saturating_mul(d);
        }
        let mut inner = self.inner.clone();
        inner.extend(axes);
        Place {
            offset: self.offset,
            inner,
        }
    }

    /// One past the last byte that elements of `esize` bytes at this place touch; `None` on
    /// overflow. An axis of length 0 counts as one of length 1 (the first element's bytes).
    pub fn end(&self, esize: u64) -> Option<u64> {
        self.inner
            .iter()
            .try_fold(self.offset, |a, &(n, st)| {
                a.checked_add(n.saturating_sub(1).checked_mul(st)?)
            })?
            .checked_add(esize)
    }

    /// Whether every element (of `esize` bytes) at this place lies inside a record of
    /// `record` bytes.
    pub fn fits(&self, record: u64, esize: u64) -> bool {
        self.end(esize).is_some_and(|e| e <= record)
    }

    /// Calls `f(byte offset in the record)` for every element of the box `start..start+count`
    /// of the trailing axes, in C order (once, for a place without trailing axes). Errors when
    /// the box's rank is not the place's or an offset overflows; the offsets are not checked
    /// against a record (the caller reads them with `get`, or checked them with [`Place::fits`]).
    pub fn for_each(
        &self,
        start: &[u64],
        count: &[u64],
        mut f: impl FnMut(usize),
    ) -> Result<(), GatherError> {
        let rank = self.inner.len();
        if start.len() != rank || count.len() != rank {
            return Err(GatherError::Rank {
                got: start.len().max(count.len()),
                want: rank,
            });
        }
        if count.contains(&0) {
            return Ok(());
        }
        let offset_of = |idx: &[u64]| -> Option<usize> {
            let off = idx
                .iter()
                .zip(&self.inner)
                .try_fold(self.offset, |a, (&i, &(_, st))| {
                    a.checked_add(i.checked_mul(st)?)
                })?;
            usize::try_from(off).ok()
        };
        // The end of every axis must not overflow (checked once, up front).
        let end = start
            .iter()
            .zip(count)
            .map(|(&s, &c)| s.checked_add(c))
            .collect::<Option<Vec<u64>>>()
            .ok_or(GatherError::TooLarge)?;
        let mut idx = start.to_vec();
        loop {
            f(offset_of(&idx).ok_or(GatherError::TooLarge)?);
            if !crate::next_index(&mut idx, start, &end) {
                return Ok(());
            }
        }
    }
}

/// One leaf of a flattened record type: its path below the variable, its [`Place`], what it
/// is (the format's own kind `K`) and notes for the variable it becomes.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf<K> {
    /// Field names from the record down to the leaf (`["pos", "x"]`); empty for the whole
    /// record (a plain type, or a complex number the record is).
    pub path: Vec<String>,
    /// Where its elements lie in a record.
    pub place: Place,
    /// What it is.
    pub kind: K,
    /// Notes for its variable (the field it comes from, a name it was given…).
    pub notes: Vec<String>,
}

impl<K> Leaf<K> {
    /// The part of the variable's name after the record's (`""`, `/pos/x`).
    pub fn suffix(&self) -> String {
        self.path.iter().fold(String::new(), |mut s, p| {
            s.push('/');
            s.push_str(p);
            s
        })
    }

    /// The name of this leaf's variable below the record variable `name`.
    pub fn name_under(&self, name: &str) -> String {
        format!("{name}{}", self.suffix())
    }
}

/// How the bytes of an element are fixed once copied, to be the little-endian value the
/// importer delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fix {
    /// Nothing: stored little-endian (or one byte).
    None,
    /// Reverse the element's bytes (stored big-endian).
    Swap,
    /// Reverse each half of the element (a complex number stored big-endian: real and
    /// imaginary part each).
    SwapParts,
    /// Map any non-zero byte to 1 (a boolean whose format allows any non-zero byte).
    Bool,
}

impl Fix {
    /// The byte-order fix of elements of `elem` stored big-endian when `big_endian`: complex
    /// numbers part by part; booleans are left as they are.
    pub fn order(elem: ElementType, big_endian: bool) -> Fix {
        match (big_endian, elem.complex_component()) {
            (false, _) => Fix::None,
            (true, Some(_)) => Fix::SwapParts,
            (true, None) if elem.size() > 1 => Fix::Swap,
            (true, None) => Fix::None,
        }
    }

    /// [`Fix::order`], with booleans normalised to 0/1 ([`Fix::Bool`]).
    pub fn numbers(elem: ElementType, big_endian: bool) -> Fix {
        match elem {
            ElementType::Bool => Fix::Bool,
            _ => Fix::order(elem, big_endian),
        }
    }

    /// Fixes every element (of `esize` bytes) of `out`.
    pub fn apply(self, out: &mut [u8], esize: usize) {
        fn swap<const N: usize>(out: &mut [u8]) {
            for c in out.chunks_exact_mut(N) {
                c.reverse();
            }
        }
        match self {
            Fix::None => {}
            Fix::Swap => match esize {
                0 | 1 => {}
                2 => swap::<2>(out),
                4 => swap::<4>(out),
                8 => swap::<8>(out),
                n => out.chunks_exact_mut(n).for_each(<[u8]>::reverse),
            },
            Fix::SwapParts if esize.is_multiple_of(2) => Fix::Swap.apply(out, esize / 2),
            // An odd size has no halves: each part is `esize / 2` bytes, the middle one left.
            Fix::SwapParts => {
                let half = esize / 2;
                if half > 1 {
                    for e in out.chunks_exact_mut(esize) {
                        e[..half].reverse();
                        e[esize - half..].reverse();
                    }
                }
            }
            Fix::Bool => out.iter_mut().for_each(|b| *b = u8::from(*b != 0)),
        }
    }
}

/// A layout of elements: the byte offset of element `[0, 0, …]`, a byte stride per axis, the
/// bytes of one element and how they are fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strided {
    /// Byte offset of element `[0, 0, …]`.
    pub base: u64,
    /// Byte stride of each axis.
    pub strides: Vec<u64>,
    /// Bytes per element.
    pub esize: usize,
    /// Per-element fix-up.
    pub fix: Fix,
}

impl Strided {
    /// The first and one-past-the-last byte the box `start..start+count` touches; `None` on
    /// overflow or when the rank is not the layout's. `count` must hold no zero.
    pub fn span(&self, start: &[u64], count: &[u64]) -> Option<(u64, u64)> {
        if start.len() != self.strides.len() || count.len() != self.strides.len() {
            return None;
        }
        let mut first = self.base;
        let mut last = self.base;
        for ((&s, &c), &st) in start.iter().zip(count).zip(&self.strides) {
            first = first.checked_add(s.checked_mul(st)?)?;
            last = last.checked_add(s.checked_add(c.checked_sub(1)?)?.checked_mul(st)?)?;
        }
        Some((first, last.checked_add(self.esize as u64)?))
    }
}

/// Bytes of `count` elements of `esize` bytes; `None` on overflow.
fn box_bytes(count: &[u64], esize: usize) -> Option<usize> {
    count
        .iter()
        .try_fold(esize, |a, &c| a.checked_mul(usize::try_from(c).ok()?))
}

/// Copies the elements `start..start+count` of `layout` over `data` into `out`, in C order,
/// fixed as the layout says. `out` must hold exactly the box; the whole box must lie inside
/// `data` (checked once, up front).
pub fn gather_strided(
    data: &[u8],
    layout: &Strided,
    start: &[u64],
    count: &[u64],
    out: &mut [u8],
) -> Result<(), GatherError> {
    let esize = layout.esize;
    let rank = layout.strides.len();
    if start.len() != rank || count.len() != rank {
        return Err(GatherError::Rank {
            got: start.len().max(count.len()),
            want: rank,
        });
    }
    let want = box_bytes(count, esize).ok_or(GatherError::TooLarge)?;
    if out.len() != want {
        return Err(GatherError::Output {
            got: out.len(),
            want,
        });
    }
    if want == 0 {
        return Ok(());
    }
    let (first, end) = layout.span(start, count).ok_or(GatherError::Outside)?;
    if end > data.len() as u64 {
        return Err(GatherError::Outside);
    }
    // Both below `data.len()`: they fit.
    let first = first as usize;

    // Coalesce axes: drop length-1 axes, merge an axis into the next when stepping it is the
    // same as running through the whole next axis. A kept axis has a length of 2 or more and
    // the box lies inside `data`, so its stride (and length × stride) is below 2 × data.len().
    let mut axes: Vec<(usize, usize)> = Vec::with_capacity(count.len() + 1);
    for (&c, &st) in count.iter().zip(&layout.strides) {
        if c == 1 {
            continue;
        }
        let (c, st) = (c as usize, st as usize);
        if let Some(prev) = axes.last_mut() {
            // `prev` is the outer axis; it merges when its stride equals c * st.
            if Some(prev.1) == c.checked_mul(st) {
                *prev = (prev.0 * c, st);
                continue;
            }
        }
        axes.push((c, st));
    }
    let (inner_n, inner_st) = axes.pop().unwrap_or((1, esize));
    let outer = axes;
    let run = inner_n * esize;

    let mut idx = vec![0usize; outer.len()];
    let mut off = first;
    for dst in out.chunks_exact_mut(run) {
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
        // Advance the outer odometer (past the end after the last run: not used then).
        for k in (0..outer.len()).rev() {
            idx[k] += 1;
            off += outer[k].1;
            if idx[k] < outer[k].0 {
                break;
            }
            off -= outer[k].1 * outer[k].0;
            idx[k] = 0;
        }
    }
    layout.fix.apply(out, esize);
    Ok(())
}

/// Copies `dst.len() / N` elements of `N` bytes, `stride` bytes apart, from `src[off..]`.
fn copy_strided<const N: usize>(dst: &mut [u8], src: &[u8], mut off: usize, stride: usize) {
    for d in dst.chunks_exact_mut(N) {
        d.copy_from_slice(&src[off..off + N]);
        off += stride;
    }
}

/// Where the two parts of a complex element lie, in bytes from the element's start (a compound
/// of two floats may hold the imaginary part first, or padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Parts {
    /// Offset of the real part.
    pub real: u64,
    /// Offset of the imaginary part.
    pub imag: u64,
}

/// What one delivered element of a leaf is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Element {
    /// Bytes of one delivered element.
    pub size: usize,
    /// For a complex element whose parts are not simply (real, imaginary) one after the
    /// other: where they lie; each takes half of [`Element::size`].
    pub parts: Option<Parts>,
    /// How the copied bytes are fixed.
    pub fix: Fix,
}

impl Element {
    /// `size`-byte elements, stored as delivered up to `fix`.
    pub fn plain(size: usize, fix: Fix) -> Self {
        Element {
            size,
            parts: None,
            fix,
        }
    }
}

/// Copies one leaf's elements out of whole records: for every record of `records` (records of
/// `record` bytes, in C order), the box `start..start+count` of the leaf's trailing axes, in C
/// order, one [`Element`] each, into `out` (which must hold exactly these elements). Errors,
/// never panics, when `records` is not whole records, `out` has the wrong length or an element
/// lies outside its record.
pub fn gather(
    records: &[u8],
    record: usize,
    place: &Place,
    start: &[u64],
    count: &[u64],
    elem: Element,
    out: &mut [u8],
) -> Result<(), GatherError> {
    if record == 0 || !records.len().is_multiple_of(record) {
        return Err(GatherError::NotRecords {
            len: records.len(),
            record,
        });
    }
    let rank = place.inner.len();
    if start.len() != rank || count.len() != rank {
        return Err(GatherError::Rank {
            got: start.len().max(count.len()),
            want: rank,
        });
    }
    let n = records.len() / record;
    let per_record = box_bytes(count, elem.size).ok_or(GatherError::TooLarge)?;
    let want = per_record.checked_mul(n).ok_or(GatherError::TooLarge)?;
    if out.len() != want {
        return Err(GatherError::Output {
            got: out.len(),
            want,
        });
    }
    if want == 0 {
        return Ok(());
    }
    // Every element must lie inside its record (the strided gather only checks the buffer).
    let box_place = Place {
        offset: place.offset,
        inner: Vec::new(),
    };
    let parts = elem.parts;
    let (lo, hi) = match parts {
        Some(p) => {
            let half = elem.size as u64 / 2;
            (p.real.min(p.imag), p.real.max(p.imag).checked_add(half))
        }
        None => (0, Some(elem.size as u64)),
    };
    let mut corner = box_place;
    for ((&s, &c), &(_, st)) in start.iter().zip(count).zip(&place.inner) {
        let last = s.checked_add(c - 1).ok_or(GatherError::TooLarge)?;
        corner.offset = last
            .checked_mul(st)
            .and_then(|x| corner.offset.checked_add(x))
            .ok_or(GatherError::Outside)?;
    }
    let end = hi
        .and_then(|h| corner.offset.checked_add(h))
        .ok_or(GatherError::Outside)?;
    if end > record as u64 || place.offset.checked_add(lo).is_none() {
        return Err(GatherError::Outside);
    }
    let Some(parts) = parts else {
        let mut strides = Vec::with_capacity(rank + 1);
        strides.push(record as u64);
        strides.extend(place.inner.iter().map(|&(_, st)| st));
        let layout = Strided {
            base: place.offset,
            strides,
            esize: elem.size,
            fix: elem.fix,
        };
        let mut s = Vec::with_capacity(rank + 1);
        s.push(0);
        s.extend_from_slice(start);
        let mut c = Vec::with_capacity(rank + 1);
        c.push(n as u64);
        c.extend_from_slice(count);
        return gather_strided(records, &layout, &s, &c, out);
    };
    // A complex number with its parts anywhere: element by element (every offset is inside
    // the record: checked above).
    let half = elem.size / 2;
    let (re, im) = (parts.real as usize, parts.imag as usize);
    let mut dst = out.chunks_exact_mut(elem.size);
    for rec in records.chunks_exact(record) {
        place.for_each(start, count, |off| {
            if let Some(d) = dst.next() {
                let (a, b) = d.split_at_mut(half);
                a.copy_from_slice(&rec[off + re..off + re + half]);
                b.copy_from_slice(&rec[off + im..off + im + half]);
            }
        })?;
    }
    elem.fix.apply(out, elem.size);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn places_axes_and_names() {
        let p = Place::whole().shifted(8).with_array(&[2, 3], 4);
        assert_eq!(p.inner, vec![(2, 12), (3, 4)]);
        assert_eq!(p.inner_shape(), vec![2, 3]);
        assert_eq!(p.end(4), Some(8 + 12 + 8 + 4));
        assert!(p.fits(32, 4) && !p.fits(31, 4));
        assert!(Place::whole().is_whole() && !p.is_whole());
        let leaf = Leaf {
            path: vec!["pos".to_string(), "x".to_string()],
            place: p,
            kind: (),
            notes: Vec::new(),
        };
        assert_eq!(leaf.suffix(), "/pos/x");
        assert_eq!(leaf.name_under("v"), "v/pos/x");
        let mut offs = Vec::new();
        leaf.place
            .for_each(&[1, 1], &[1, 2], |o| offs.push(o))
            .unwrap();
        assert_eq!(offs, [8 + 12 + 4, 8 + 12 + 8]);
        let mut offs = Vec::new();
        Place::whole()
            .shifted(5)
            .for_each(&[], &[], |o| offs.push(o))
            .unwrap();
        assert_eq!(offs, [5]);
        assert!(leaf.place.for_each(&[0], &[1], |_| {}).is_err());
        assert!(Place::whole()
            .shifted(1)
            .with_array(&[2], u64::MAX)
            .for_each(&[1], &[1], |_| {})
            .is_err());
    }

    #[test]
    fn fixes() {
        assert_eq!(Fix::order(ElementType::U8, true), Fix::None);
        assert_eq!(Fix::order(ElementType::Bool, true), Fix::None);
        assert_eq!(Fix::numbers(ElementType::Bool, false), Fix::Bool);
        assert_eq!(Fix::order(ElementType::C64, true), Fix::SwapParts);
        assert_eq!(Fix::numbers(ElementType::I32, true), Fix::Swap);
        let mut b = [1, 2, 3, 4, 5, 6, 7, 8];
        Fix::SwapParts.apply(&mut b, 8);
        assert_eq!(b, [4, 3, 2, 1, 8, 7, 6, 5]);
        Fix::Swap.apply(&mut b, 4);
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
        let mut v = [0, 7, 1, 255];
        Fix::Bool.apply(&mut v, 1);
        assert_eq!(v, [0, 1, 1, 1]);
    }

    #[test]
    fn gathers_fields_sub_arrays_and_swaps() {
        // Records of 8 bytes: a big-endian u16 at 0, a bool at 2, u8[2][2] at 4.
        let recs: Vec<u8> = vec![1, 2, 7, 0, 10, 11, 12, 13, 3, 4, 0, 0, 20, 21, 22, 23];
        let whole = Place::whole();
        let mut out = [0u8; 4];
        gather(
            &recs,
            8,
            &whole,
            &[],
            &[],
            Element::plain(2, Fix::Swap),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [2, 1, 4, 3]);
        let mut out = [0u8; 2];
        let b = Place::whole().shifted(2);
        gather(
            &recs,
            8,
            &b,
            &[],
            &[],
            Element::plain(1, Fix::Bool),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [1, 0]);
        let s = Place::whole().shifted(4).with_array(&[2, 2], 1);
        let mut out = [0u8; 4];
        let e = Element::plain(1, Fix::None);
        gather(&recs, 8, &s, &[0, 1], &[2, 1], e, &mut out).unwrap();
        assert_eq!(out, [11, 13, 21, 23]);
        // Wrong sizes and places outside the record are errors.
        let e2 = Element::plain(2, Fix::None);
        let r = gather(&recs[..7], 8, &whole, &[], &[], e2, &mut [0u8; 4]);
        assert!(matches!(
            r,
            Err(GatherError::NotRecords { len: 7, record: 8 })
        ));
        let r = gather(&recs, 8, &whole, &[], &[], e2, &mut [0u8; 3]);
        assert!(matches!(r, Err(GatherError::Output { got: 3, want: 4 })));
        let r = gather(&recs, 8, &s, &[1, 1], &[2, 1], e, &mut [0u8; 4]);
        assert_eq!(r, Err(GatherError::Outside));
        let far = Place::whole().shifted(7);
        let r = gather(&recs, 8, &far, &[], &[], e2, &mut [0u8; 4]);
        assert_eq!(r, Err(GatherError::Outside));
        let r = gather(&recs, 0, &whole, &[], &[], e2, &mut []);
        assert!(matches!(r, Err(GatherError::NotRecords { .. })));
        let huge = Place::whole().shifted(u64::MAX - 1);
        let r = gather(&recs, 8, &huge, &[], &[], e2, &mut [0u8; 4]);
        assert_eq!(r, Err(GatherError::Outside));
    }

    #[test]
    fn gathers_complex_parts_in_any_order() {
        // Records of 20 bytes: 4 bytes of padding, then a complex f64 stored imaginary first,
        // big-endian.
        let mut recs = Vec::new();
        for (re, im) in [(1.5f64, -2.0f64), (3.0, 4.25)] {
            recs.extend([0xAA; 4]);
            recs.extend(im.to_be_bytes());
            recs.extend(re.to_be_bytes());
        }
        let e = Element {
            size: 16,
            parts: Some(Parts { real: 8, imag: 0 }),
            fix: Fix::SwapParts,
        };
        let mut out = [0u8; 32];
        gather(&recs, 20, &Place::whole().shifted(4), &[], &[], e, &mut out).unwrap();
        let want: Vec<u8> = [1.5f64, -2.0, 3.0, 4.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(out[..], want[..]);
        // The later part past the record's end.
        let r = gather(&recs, 20, &Place::whole().shifted(5), &[], &[], e, &mut out);
        assert_eq!(r, Err(GatherError::Outside));
    }

    #[test]
    fn strided_transposes_and_refuses_out_of_bounds() {
        // 2x3 Fortran-order u8: memory is column-major.
        let data = [0u8, 3, 1, 4, 2, 5]; // a[i][j] = 3i + j
        let l = Strided {
            base: 0,
            strides: vec![1, 2],
            esize: 1,
            fix: Fix::None,
        };
        let mut out = [0u8; 6];
        gather_strided(&data, &l, &[0, 0], &[2, 3], &mut out).unwrap();
        assert_eq!(out, [0, 1, 2, 3, 4, 5]);
        let mut out = [0u8; 2];
        gather_strided(&data, &l, &[1, 1], &[1, 2], &mut out).unwrap();
        assert_eq!(out, [4, 5]);
        let l = Strided {
            base: 0,
            strides: vec![4],
            esize: 4,
            fix: Fix::None,
        };
        let r = gather_strided(&[0u8; 4], &l, &[0], &[2], &mut [0u8; 8]);
        assert_eq!(r, Err(GatherError::Outside));
        let r = gather_strided(&[0u8; 4], &l, &[u64::MAX], &[2], &mut [0u8; 8]);
        assert_eq!(r, Err(GatherError::Outside));
        let r = gather_strided(&[0u8; 8], &l, &[0], &[2], &mut [0u8; 7]);
        assert!(matches!(r, Err(GatherError::Output { .. })));
        let r = gather_strided(&[0u8; 8], &l, &[0, 0], &[1, 1], &mut [0u8; 4]);
        assert!(matches!(r, Err(GatherError::Rank { got: 2, want: 1 })));
    }

    /// The gather done the plain way: every element's offset computed on its own.
    fn naive(
        records: &[u8],
        record: usize,
        place: &Place,
        start: &[u64],
        count: &[u64],
        elem: Element,
    ) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for rec in records.chunks_exact(record) {
            let mut ok = true;
            place
                .for_each(start, count, |off| {
                    let mut e = vec![0u8; elem.size];
                    let half = elem.size / 2;
                    let src = |at: usize, n: usize| rec.get(at..at.checked_add(n)?);
                    let got = match elem.parts {
                        None => src(off, elem.size).map(|s| e.copy_from_slice(s)),
                        Some(p) => src(off + p.real as usize, half)
                            .zip(src(off + p.imag as usize, half))
                            .map(|(a, b)| {
                                e[..half].copy_from_slice(a);
                                e[half..].copy_from_slice(b);
                            }),
                    };
                    ok &= got.is_some();
                    match elem.fix {
                        Fix::None => {}
                        Fix::Swap => e.reverse(),
                        Fix::SwapParts => {
                            let n = e.len();
                            e[..half].reverse();
                            e[n - half..].reverse();
                        }
                        Fix::Bool => e.iter_mut().for_each(|b| *b = u8::from(*b != 0)),
                    }
                    out.extend(e);
                })
                .ok()?;
            if !ok {
                return None;
            }
        }
        Some(out)
    }

    fn fix_strategy() -> impl Strategy<Value = Fix> {
        prop_oneof![
            Just(Fix::None),
            Just(Fix::Swap),
            Just(Fix::SwapParts),
            Just(Fix::Bool)
        ]
    }

    proptest! {
        #[test]
        fn gather_equals_the_naive_one(
            record in 1usize..48,
            n in 0usize..5,
            offset in 0u64..48,
            dims in proptest::collection::vec((1u64..4, 0u64..3), 0..3),
            size in prop_oneof![Just(1usize), Just(2), Just(4), Just(8), Just(3)],
            parts in proptest::option::of((0u64..12, 0u64..12)),
            fix in fix_strategy(),
            sel in proptest::collection::vec((0u64..4, 0u64..4), 3),
            seed in any::<u8>(),
        ) {
            let records: Vec<u8> = (0..record * n)
                .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
                .collect();
            // Axes: a length and a stride of 0..2 element sizes (overlaps included).
            let inner: Vec<(u64, u64)> =
                dims.iter().map(|&(len, k)| (len, k * size as u64)).collect();
            let place = Place { offset, inner };
            let (start, count): (Vec<u64>, Vec<u64>) = place
                .inner
                .iter()
                .zip(&sel)
                .map(|(&(len, _), &(s, c))| (s % len, c % (len - s % len + 1)))
                .unzip();
            let elem = Element {
                size: if parts.is_some() { 2 * size } else { size },
                parts: parts.map(|(real, imag)| Parts { real, imag }),
                fix,
            };
            let per: u64 = count.iter().product();
            let len = (n as u64 * per) as usize * elem.size;
            let mut out = vec![0xEEu8; len];
            let got = gather(&records, record, &place, &start, &count, elem, &mut out);
            if per == 0 || n == 0 {
                prop_assert_eq!(got, Ok(()));
            } else {
                match naive(&records, record, &place, &start, &count, elem) {
                    Some(want) => {
                        prop_assert_eq!(got, Ok(()));
                        prop_assert_eq!(out, want);
                    }
                    None => prop_assert_eq!(got, Err(GatherError::Outside)),
                }
            }
        }

        #[test]
        fn strided_gather_never_panics(
            len in 0usize..64,
            base in prop_oneof![0u64..64, Just(u64::MAX - 3)],
            axes in proptest::collection::vec((0u64..5, 0u64..5, prop_oneof![0u64..20, Just(u64::MAX / 2)]), 0..4),
            esize in 0usize..10,
            out_len in 0usize..200,
        ) {
            let data = vec![7u8; len];
            let layout = Strided {
                base,
                strides: axes.iter().map(|a| a.2).collect(),
                esize,
                fix: Fix::Swap,
            };
            let start: Vec<u64> = axes.iter().map(|a| a.0).collect();
            let count: Vec<u64> = axes.iter().map(|a| a.1).collect();
            let mut out = vec![0u8; out_len];
            let r = gather_strided(&data, &layout, &start, &count, &mut out);
            if r.is_ok() {
                prop_assert!(out.iter().all(|&b| b == 7 || out_len == 0));
            }
        }
    }
}
