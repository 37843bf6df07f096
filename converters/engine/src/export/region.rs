//! Reading selections of a raised array, in the element type the source held (the lowering
//! undone as `tet export` undoes it): for library callers that want values, not a file — the
//! Python package (`python/`).
//!
//! [`Plan::for_reading`] is a reader's way in: before it plans, it refuses what would make a
//! reader return damaged values without an error — an unreadable footer (unless the caller
//! opts in with [`DamagedFooter::ReadStored`]), a footer digest that does not match, checksum
//! records that contradict each other, a chunk index that does not cover a dataset's shape.
//!
//! A selection is an *outer* selection: per axis, the positions wanted, strictly increasing.
//! Only the `.tet` chunks that hold at least one selected element are read; they are decoded
//! (and their digests checked) on the rayon pool, one chunk per thread at a time, and their
//! selected elements copied straight into the caller's buffer. Errors name the dataset, the chunk coordinates
//! and the byte range of a damaged chunk.

use rayon::prelude::*;
use tet_source::export::{Capabilities, ChunkSource};

use super::chunks::TetChunks;
use super::raise::Restore;
use super::{ChunkReadError, ExportError, Plan, Result};
use crate::format::open_checks::{check_index_covers, check_integrity};
use crate::format::TetFile;

/// What an in-memory reader can hold: every element type of the model (bool, i8 and complex
/// numbers come back as such).
pub const EVERY_TYPE: Capabilities = Capabilities {
    has_bool: true,
    has_complex: true,
};

/// What [`Plan::for_reading`] does with a file whose footer is present but unreadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DamagedFooter {
    /// Refuse the file: without its footer a reader would see values without their
    /// attributes and history, and without the checksums that vouch for them.
    #[default]
    Refuse,
    /// Read the datasets as stored, without metadata (the caller asked for it explicitly, as
    /// for the reference implementation's deliberately corrupt `plan.tet`).
    ReadStored,
}

/// A reader's plan of a file and what the file lets the reader check.
pub struct Reading {
    /// Every array with every element type ([`EVERY_TYPE`]).
    pub plan: Plan,
    /// Why the footer could not be read (only with [`DamagedFooter::ReadStored`]).
    pub footer_error: Option<String>,
    /// Whether the file records checksums and they held at open: the footer digest over the
    /// superblock, directory, chunk index and footer matched, and every chunk read is checked
    /// against its digest (or its zstd content checksum). `false` for the files of the
    /// reference tools and of older tet-convert versions, which record none: their structure
    /// is checked, their values cannot be.
    pub verified: bool,
}

impl Plan {
    /// The plan of a reader that wants every array with every element type, after the checks
    /// a reader needs before it returns any value: the footer readable (unless `damaged` says
    /// to read the stored datasets without it), the checksums it records consistent and the
    /// footer digest equal to the bytes ([`check_integrity`]), and the chunk index covering
    /// every dataset's grid with sizes its chunks can hold ([`check_index_covers`]). A file
    /// that fails is an error ([`TetError::Footer`](crate::format::TetError::Footer) for the footer, [`TetError::Corrupt`](crate::format::TetError::Corrupt)
    /// otherwise), never a plan with less in it.
    pub fn for_reading(tet: &TetFile, damaged: DamagedFooter) -> Result<Reading> {
        check_index_covers(tet)?;
        match tet.footer() {
            Ok(_) => {
                let verified = check_integrity(tet)?;
                Ok(Reading {
                    plan: Plan::new(tet, EVERY_TYPE, &[])?,
                    footer_error: None,
                    verified,
                })
            }
            Err(e) if damaged == DamagedFooter::ReadStored => {
                let empty = crate::format::Footer::default();
                Ok(Reading {
                    plan: Plan::from_footer(tet, &empty, EVERY_TYPE, &[])?,
                    footer_error: Some(e.to_string()),
                    verified: false,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The `.tet` datasets array `array` is stored in: its dataset id and, for a complex array,
    /// the id of its imaginary part; `None` for an array the plan does not have.
    pub fn stored_datasets(&self, array: usize) -> Option<(usize, Option<usize>)> {
        self.stored.get(array).map(|s| (s.ds, s.imag))
    }
}

/// One axis of a selection, grouped by chunk: the chunk's position along the axis, and the
/// selected positions inside it as `(position in the output, offset in the chunk)`.
type AxisGroups = Vec<(u64, Vec<(usize, usize)>)>;

/// Groups the selected positions of one axis by the chunk (of extent `chunk`) they fall in.
fn group_axis(sel: &[u64], chunk: u64) -> AxisGroups {
    let mut groups: AxisGroups = Vec::new();
    for (out, &i) in sel.iter().enumerate() {
        let c = i / chunk;
        let off = (i % chunk) as usize;
        match groups.last_mut() {
            Some((last, v)) if *last == c => v.push((out, off)),
            _ => groups.push((c, vec![(out, off)])),
        }
    }
    groups
}

/// Checks a selection against the array's shape: one list per axis, each strictly increasing
/// and inside the axis.
fn check_selection(name: &str, shape: &[u64], sel: &[Vec<u64>]) -> Result<()> {
    if sel.len() != shape.len() {
        return Err(ExportError::Invalid(format!(
            "`{name}` has {} axes, the selection {}",
            shape.len(),
            sel.len()
        )));
    }
    for (a, (s, &n)) in sel.iter().zip(shape).enumerate() {
        if s.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ExportError::Invalid(format!(
                "`{name}` axis {a}: selected positions must be strictly increasing"
            )));
        }
        if let Some(&last) = s.last() {
            if last >= n {
                return Err(ExportError::Invalid(format!(
                    "`{name}` axis {a}: position {last} is outside the axis of length {n}"
                )));
            }
        }
    }
    Ok(())
}

/// Where one decoded chunk's selected elements go.
struct Scatter<'s> {
    groups: Vec<&'s [(usize, usize)]>,
    /// Extent of the chunk per axis.
    count: Vec<u64>,
}

/// The output buffer of a read, shared by the workers that fill it. Each worker writes only
/// the output positions of its own chunk; the chunks of a selection own disjoint sets of
/// positions (per axis, each selected position falls in exactly one chunk), so no two
/// workers ever write the same byte and nobody reads the buffer until all are done.
struct Sink {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: `Sink` is a pointer into a buffer that outlives every worker (the workers run inside
// `read_selection`, which holds the `&mut [u8]` for their whole life); the workers write
// disjoint ranges of it (see the type's docs), and `put` checks every range against `len`.
unsafe impl Send for Sink {}
// SAFETY: as for `Send`: shared use only ever writes disjoint, bounds-checked ranges.
unsafe impl Sync for Sink {}

impl Sink {
    /// Copies `src` to the output at byte offset `at`.
    fn put(&self, at: usize, src: &[u8]) {
        let end = at.checked_add(src.len()).expect("output offset overflows");
        assert!(end <= self.len, "write past the end of the output buffer");
        // SAFETY: `at..end` lies inside the buffer (checked above), which is valid for writes
        // for the sink's whole life; no other worker writes these bytes (disjoint chunks), and
        // `src` (a chunk's bytes) cannot overlap the caller's output buffer.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(at), src.len()) }
    }
}

impl Sink {
    /// Runs `f` on the output bytes `at .. at + len` (one worker's own range, see the type's
    /// docs).
    fn with_region<R>(&self, at: usize, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let end = at.checked_add(len).expect("output offset overflows");
        assert!(end <= self.len, "region past the end of the output buffer");
        // SAFETY: `at..end` lies inside the buffer (checked above), valid for reads and writes
        // for the sink's whole life; no other worker touches these bytes (disjoint chunks), so
        // this is the only reference to them while `f` runs.
        let region = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), len) };
        f(region)
    }
}

/// The byte offset in the output (C order, extents `out_shape`) at which a chunk of extents
/// `count` lands as one contiguous run, when every element of the chunk is selected in order
/// and those elements are contiguous there (all axes before the first longer than 1 of
/// extent 1, all after it whole); `None` otherwise.
fn contiguous_target(
    groups: &[&[(usize, usize)]],
    count: &[u64],
    out_shape: &[usize],
    elem: usize,
) -> Option<usize> {
    let rank = out_shape.len();
    for a in 0..rank {
        let g = groups[a];
        if g.len() as u64 != count[a] {
            return None;
        }
        if g.iter()
            .enumerate()
            .any(|(k, &(o, i))| i != k || o != g[0].0 + k)
        {
            return None;
        }
    }
    let j = (0..rank).find(|&a| count[a] != 1).unwrap_or(rank);
    if (j + 1..rank).any(|a| count[a] as usize != out_shape[a]) {
        return None;
    }
    let mut stride = elem;
    let mut off = 0;
    for a in (0..rank).rev() {
        off += groups[a][0].0 * stride;
        stride *= out_shape[a];
    }
    Some(off)
}

/// Copies the selected elements of a chunk (`bytes`, C order, extents `sc.count`) into the
/// output (C order, extents `out_shape`), element size `elem`.
fn scatter(sc: &Scatter<'_>, bytes: &[u8], out: &Sink, out_shape: &[usize], elem: usize) {
    let rank = out_shape.len();
    if rank == 0 {
        out.put(0, &bytes[..elem]);
        return;
    }
    let mut out_strides = vec![elem; rank];
    let mut in_strides = vec![elem; rank];
    for a in (0..rank - 1).rev() {
        out_strides[a] = out_strides[a + 1] * out_shape[a + 1];
        in_strides[a] = in_strides[a + 1] * sc.count[a + 1] as usize;
    }
    // Runs along the last axis: consecutive both in the output and in the chunk.
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    for &(o, i) in sc.groups[rank - 1] {
        match runs.last_mut() {
            Some((ro, ri, n)) if *ro + *n == o && *ri + *n == i => *n += 1,
            _ => runs.push((o, i, 1)),
        }
    }
    let mut pos = vec![0usize; rank - 1];
    loop {
        let mut ob = 0;
        let mut ib = 0;
        for a in 0..rank - 1 {
            let (o, i) = sc.groups[a][pos[a]];
            ob += o * out_strides[a];
            ib += i * in_strides[a];
        }
        for &(o, i, n) in &runs {
            let d = ob + o * elem;
            let s = ib + i * elem;
            out.put(d, &bytes[s..s + n * elem]);
        }
        // Next position of the outer axes (the last one fastest).
        let mut a = rank - 1;
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            pos[a] += 1;
            if pos[a] < sc.groups[a].len() {
                break;
            }
            pos[a] = 0;
        }
    }
}

/// Decodes chunk `coords` of dataset `ds` straight into its place in the output when the
/// chunk is one contiguous run of it (see [`contiguous_target`]); `Ok(false)` when it is not.
fn read_direct(
    tet: &TetFile,
    ds: usize,
    coords: &[u64],
    sel: &[&[(usize, usize)]],
    sink: &Sink,
    out_shape: &[usize],
    elem: usize,
) -> Result<bool> {
    let d = &tet.datasets[ds];
    let (_, count) = d.grid.chunk_region(coords);
    let Some(at) = contiguous_target(sel, &count, out_shape, elem) else {
        return Ok(false);
    };
    let len = count.iter().product::<u64>() as usize * elem;
    let at_chunk =
        |err: String| ExportError::Data(format!("dataset `{}` chunk {coords:?}: {err}", d.name));
    let read_failed = |source| ChunkReadError {
        dataset: d.name.clone(),
        coords: coords.to_vec(),
        source,
    };
    let e = tet
        .find_chunk(ds, coords)
        .ok_or_else(|| at_chunk("missing from the index".into()))?;
    if e.raw_byte_len != len as u64 {
        return Err(at_chunk(format!(
            "raw_byte_len {} but the chunk holds {len} bytes",
            e.raw_byte_len
        )));
    }
    sink.with_region(at, len, |region| tet.read_chunk_into(e, region))
        .map_err(read_failed)?;
    // Done with the stored bytes: unmap their pages, so that reading a whole file keeps a few
    // chunks of it resident, not all of it.
    tet.release(e.payload_offset, e.stored_byte_len);
    Ok(true)
}

/// Reads the outer selection `sel` of the plan's array `array` (see the module docs) into
/// `out`: C order, little-endian, the array's element type ([`tet_source::ElementType::size`]
/// bytes each; a 0-d array takes an empty selection and one element). Returns the number of
/// chunks read. Chunks are decoded and copied out on the rayon pool (one chunk in flight per
/// thread), straight into `out`.
pub fn read_selection(
    tet: &TetFile,
    plan: &Plan,
    array: usize,
    sel: &[Vec<u64>],
    out: &mut [u8],
) -> Result<u64> {
    let a = plan
        .model
        .arrays
        .get(array)
        .ok_or_else(|| ExportError::Invalid(format!("no array {array}")))?;
    check_selection(&a.name, &a.shape, sel)?;
    let elem = a.dtype.size();
    let out_shape: Vec<usize> = sel.iter().map(Vec::len).collect();
    let n = out_shape.iter().product::<usize>() * elem;
    if out.len() != n {
        return Err(ExportError::Invalid(format!(
            "buffer of {} bytes for a selection of {n} bytes",
            out.len()
        )));
    }
    if n == 0 {
        return Ok(0);
    }
    let ds = &tet.datasets[plan.stored[array].ds];
    let groups: Vec<AxisGroups> = sel
        .iter()
        .zip(&ds.chunk_shape)
        .map(|(s, &c)| group_axis(s, c.max(1)))
        .collect();
    let total: usize = groups.iter().map(Vec::len).product();
    // Every touched chunk, as one group index per axis, in C order.
    let combo = |mut l: usize| -> Vec<usize> {
        let mut g = vec![0; groups.len()];
        for ax in (0..groups.len()).rev() {
            g[ax] = l % groups[ax].len();
            l /= groups[ax].len();
        }
        g
    };
    // Values stored as they are (no narrowing, no complex pairs, not 0-d) can be decoded
    // straight into the output where a chunk is one contiguous run of it.
    let st = plan.stored[array];
    let direct = st.restore == Restore::Same && !st.scalar;
    let sink = Sink {
        ptr: out.as_mut_ptr(),
        len: out.len(),
    };
    let sink = &sink;
    // A selection read for a caller (the Python reader) is not cancelled between chunks.
    let never = crate::control::Cancel::never();
    (0..total).into_par_iter().try_for_each_init(
        || TetChunks::new(tet, &plan.stored, &never),
        |src, l| -> Result<()> {
            let g = combo(l);
            let coords: Vec<u64> = g.iter().zip(&groups).map(|(&i, gr)| gr[i].0).collect();
            let sel: Vec<&[(usize, usize)]> = g
                .iter()
                .zip(&groups)
                .map(|(&i, gr)| gr[i].1.as_slice())
                .collect();
            if direct && read_direct(tet, st.ds, &coords, &sel, sink, &out_shape, elem)? {
                return Ok(());
            }
            let c = src.chunk(array, &coords)?;
            let sc = Scatter {
                groups: sel,
                count: c.count.clone(),
            };
            scatter(&sc, c.bytes, sink, &out_shape, elem);
            Ok(())
        },
    )?;
    Ok(total as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_groups_follow_the_chunks() {
        let g = group_axis(&[0, 3, 4, 9], 4);
        assert_eq!(
            g,
            vec![
                (0, vec![(0, 0), (1, 3)]),
                (1, vec![(2, 0)]),
                (2, vec![(3, 1)])
            ]
        );
    }

    #[test]
    fn scatter_copies_the_selected_elements() {
        // A 2×3 chunk of u8 values 0..6; select rows [1], columns [0, 2] into a 1×2 output.
        let bytes: Vec<u8> = (0..6).collect();
        let rows = [(0usize, 1usize)];
        let cols = [(0usize, 0usize), (1, 2)];
        let sc = Scatter {
            groups: vec![&rows, &cols],
            count: vec![2, 3],
        };
        let mut out = vec![0u8; 2];
        let sink = Sink {
            ptr: out.as_mut_ptr(),
            len: out.len(),
        };
        scatter(&sc, &bytes, &sink, &[1, 2], 1);
        assert_eq!(out, vec![3, 5]);
    }

    #[test]
    fn contiguous_targets() {
        // Output 4×6 (u8); a 2×6 chunk of rows 2..4, every element selected: offset 12.
        let rows = [(2usize, 0usize), (3, 1)];
        let cols: Vec<(usize, usize)> = (0..6).map(|k| (k, k)).collect();
        assert_eq!(
            contiguous_target(&[&rows, &cols], &[2, 6], &[4, 6], 1),
            Some(12)
        );
        // A 2×3 chunk of a 4×6 output is two runs.
        let half: Vec<(usize, usize)> = (0..3).map(|k| (k, k)).collect();
        assert_eq!(
            contiguous_target(&[&rows, &half], &[2, 3], &[4, 6], 1),
            None
        );
        // One row of it is one run (offset 2×6 + 0, element size 4).
        let row = [(2usize, 0usize)];
        assert_eq!(
            contiguous_target(&[&row, &half], &[1, 3], &[4, 6], 4),
            Some(48)
        );
        // Not every element of the chunk selected.
        let some = [(0usize, 1usize)];
        assert_eq!(contiguous_target(&[&some], &[2], &[1], 1), None);
    }

    #[test]
    fn selections_are_checked() {
        assert!(check_selection("x", &[4], &[vec![1, 1]]).is_err());
        assert!(check_selection("x", &[4], &[vec![4]]).is_err());
        assert!(check_selection("x", &[4, 2], &[vec![0]]).is_err());
        assert!(check_selection("x", &[4], &[vec![0, 3]]).is_ok());
    }
}
