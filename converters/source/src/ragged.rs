//! Ragged (variable-length) and opaque values in tensor form, shared by the importers that meet
//! them (netCDF-4 vlen and opaque types, HDF5 vlen sequences and opaque types, PyTables
//! VLArrays, NumPy/Zarr raw void).
//!
//! * A variable `v` whose elements are sequences of varying length becomes CF's *contiguous
//!   ragged array* (CF conventions, "Contiguous ragged array representation"): the values
//!   variable `v` (1-D, every element's sequence one after the other, in C order of the
//!   elements, along the sample dimension `<short>_sample`) and the count variable
//!   `<v>_count` (`i64`, one count per element, with `v`'s shape and dims and the CF attribute
//!   `sample_dimension = "<short>_sample"`). The values variable carries [`Fact::Ragged`]
//!   (the count variable and the source's type name), so an export to a format with
//!   variable-length types rebuilds `v`.
//! * An opaque value of `n` bytes (a blob) is `u8` with a trailing axis of length `n`, named
//!   `<short>_bytes`, with [`Fact::Opaque`] naming the source's type.
//!
//! [`Ragged`] gathers a ragged variable's values while the importer reads it (at open: the
//! counts must be known before any value can be placed); [`InMemory`] serves regions of what
//! it gathered.

use crate::{check_region, AttrValue, ElementType, Fact, Feature, Part, Result, Variable};

/// The suffix of a ragged variable's count variable.
pub const COUNT_SUFFIX: &str = "_count";

/// The suffix of the sample dimension of a ragged variable (after its short name).
pub const SAMPLE_SUFFIX: &str = "_sample";

/// The suffix of an opaque variable's trailing byte axis (after its short name).
pub const BYTES_SUFFIX: &str = "_bytes";

/// The largest ragged variable (values and counts) gathered in memory at open.
pub const MAX_BYTES: usize = 256 << 20;

/// A ragged variable's values and counts, gathered element by element in C order.
#[derive(Debug, Clone)]
pub struct Ragged {
    base: ElementType,
    values: Vec<u8>,
    counts: Vec<u8>,
}

impl Ragged {
    /// An empty gathering of sequences of `base` values.
    pub fn new(base: ElementType) -> Self {
        Ragged {
            base,
            values: Vec::new(),
            counts: Vec::new(),
        }
    }

    /// Appends one element's sequence: `bytes` are its values, little-endian, whole values.
    pub fn push(&mut self, bytes: &[u8]) -> Result<()> {
        let size = self.base.size();
        if size == 0 || !bytes.len().is_multiple_of(size) {
            return Err(Part::Values.malformed(format!(
                "a sequence of {} bytes is no whole number of {} values",
                bytes.len(),
                self.base
            )));
        }
        let fits = self
            .values
            .len()
            .checked_add(bytes.len())
            .and_then(|v| v.checked_add(self.counts.len() + 8))
            .is_some_and(|t| t <= MAX_BYTES);
        if !fits {
            return Err(Feature::Size.unsupported(format!(
                "ragged values larger than {} MiB are not gathered",
                MAX_BYTES >> 20
            )));
        }
        let n = i64::try_from(bytes.len() / size)
            .map_err(|_| Part::Values.malformed("sequence too long"))?;
        self.values.extend_from_slice(bytes);
        self.counts.extend_from_slice(&n.to_le_bytes());
        Ok(())
    }

    /// The number of values gathered (the sample dimension's length).
    pub fn len(&self) -> u64 {
        (self.values.len() / self.base.size().max(1)) as u64
    }

    /// Whether no value was gathered.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The values and count variables of the ragged variable `v` (its name, shape, dims,
    /// attributes and facts as the source has them; its `dtype` is ignored), and their data.
    /// `type_name` is the source's name of the variable-length type (empty when it has none).
    /// Errors when the gathered counts do not match `v`'s shape.
    pub fn into_variables(
        self,
        v: Variable,
        type_name: &str,
    ) -> Result<((Variable, InMemory), (Variable, InMemory))> {
        let elements = v
            .element_count()
            .ok_or_else(|| Part::Shape.malformed(format!("'{}': shape overflows", v.name)))?;
        if elements != (self.counts.len() / 8) as u64 {
            return Err(Part::Values.malformed(format!(
                "'{}': {} sequences read for {elements} elements",
                v.name,
                self.counts.len() / 8
            )));
        }
        let short = v.name.rsplit('/').next().unwrap_or(&v.name).to_string();
        let sample = format!("{short}{SAMPLE_SUFFIX}");
        let count_name = format!("{}{COUNT_SUFFIX}", v.name);
        let n = self.len();
        let mut count = Variable::new(count_name.clone(), ElementType::I64, v.shape.clone());
        count.dims = v.dims.clone();
        count.attrs = vec![
            (
                "long_name".into(),
                AttrValue::Text(format!("number of values of each element of {short}")),
            ),
            ("sample_dimension".into(), AttrValue::Text(sample.clone())),
        ];
        count.facts = v
            .facts
            .iter()
            .filter(|f| matches!(f, Fact::UnlimitedDims(_) | Fact::Private { .. }))
            .filter(|f| !matches!(f, Fact::Private { key, .. } if key.starts_with("nc_attr_type")))
            .cloned()
            .collect();
        count.notes.push(format!(
            "count variable of the contiguous ragged array '{}' (CF sample_dimension)",
            v.name
        ));
        let mut values = v;
        values.dtype = self.base;
        values.shape = vec![n];
        values.dims = Some(vec![sample]);
        values.layout = Default::default();
        values.role = crate::Role::Data;
        values
            .facts
            .retain(|f| !matches!(f, Fact::UnlimitedDims(_)));
        values.facts.push(Fact::Ragged {
            count: count_name,
            type_name: type_name.to_string(),
        });
        values.notes.push(format!(
            "variable-length values{} as a CF contiguous ragged array: each element's values \
             one after the other, their counts in '{}'",
            if type_name.is_empty() {
                String::new()
            } else {
                format!(" (type '{type_name}')")
            },
            count.name
        ));
        let vdata = InMemory::new(vec![n], self.base.size(), self.values);
        let cdata = InMemory::new(count.shape.clone(), 8, self.counts);
        Ok(((values, vdata), (count, cdata)))
    }
}

/// An opaque (blob) variable as `u8` with a trailing axis of `size` bytes: `v` is the variable
/// as the source has it (its dtype is ignored).
pub fn opaque_variable(mut v: Variable, type_name: &str, size: u64) -> Variable {
    let short = v.name.rsplit('/').next().unwrap_or(&v.name).to_string();
    v.dtype = ElementType::U8;
    v.shape.push(size);
    if let Some(d) = v.dims.as_mut() {
        d.push(format!("{short}{BYTES_SUFFIX}"));
    }
    if let Some(c) = v.layout.chunk_shape.as_mut() {
        c.push(size);
    }
    v.facts.push(Fact::Opaque {
        type_name: type_name.to_string(),
    });
    v.notes.push(format!(
        "opaque values{} of {size} bytes each: u8 along the trailing axis",
        if type_name.is_empty() {
            String::new()
        } else {
            format!(" (type '{type_name}')")
        }
    ));
    v
}

/// A whole array held in memory (C order, little-endian), serving regions.
#[derive(Debug, Clone)]
pub struct InMemory {
    shape: Vec<u64>,
    elem: usize,
    bytes: Vec<u8>,
}

impl InMemory {
    /// The array of `shape` and `elem` bytes per element held in `bytes`.
    pub fn new(shape: Vec<u64>, elem: usize, bytes: Vec<u8>) -> Self {
        InMemory { shape, elem, bytes }
    }

    /// Copies the region `start`/`count` into `out` (exactly its size).
    pub fn read_region(&self, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        copy_region(&self.shape, self.elem, &self.bytes, start, count, out)
    }
}

/// Copies the region `start`/`count` of the C-order array `data` (`shape`, `elem` bytes per
/// element) into `out`, which must be exactly the region's size.
pub fn copy_region(
    shape: &[u64],
    elem: usize,
    data: &[u8],
    start: &[u64],
    count: &[u64],
    out: &mut [u8],
) -> Result<()> {
    let n = check_region(shape, start, count, elem, out.len())?;
    let total = shape.iter().try_fold(elem as u64, |a, &d| a.checked_mul(d));
    if total != Some(data.len() as u64) {
        return Err(Part::Shape.malformed("in-memory array of the wrong size"));
    }
    if n == 0 {
        return Ok(());
    }
    let rank = shape.len();
    if rank == 0 {
        out.copy_from_slice(&data[..elem]);
        return Ok(());
    }
    // Byte stride of each axis.
    let mut stride = vec![elem; rank];
    for a in (0..rank - 1).rev() {
        stride[a] = stride[a + 1] * shape[a + 1] as usize;
    }
    let run = count[rank - 1] as usize * elem;
    let outer = &start[..rank - 1];
    let end: Vec<u64> = outer.iter().zip(count).map(|(&s, &c)| s + c).collect();
    let mut idx = outer.to_vec();
    let mut o = 0;
    loop {
        let off = idx
            .iter()
            .zip(&stride)
            .fold(start[rank - 1] as usize * elem, |a, (&i, &s)| {
                a + i as usize * s
            });
        out[o..o + run].copy_from_slice(&data[off..off + run]);
        o += run;
        if !crate::next_index(&mut idx, outer, &end) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_of_a_3d_array() {
        let shape = [2u64, 3, 4];
        let data: Vec<u8> = (0..24).collect();
        let mut out = vec![0u8; 4];
        copy_region(&shape, 1, &data, &[1, 1, 1], &[1, 2, 2], &mut out).unwrap();
        assert_eq!(out, [17, 18, 21, 22]);
        assert!(copy_region(&shape, 1, &data, &[1, 2, 1], &[1, 2, 2], &mut out).is_err());
    }

    #[test]
    fn ragged_values_and_counts() {
        let mut r = Ragged::new(ElementType::I16);
        r.push(&[1, 0, 2, 0]).unwrap();
        r.push(&[]).unwrap();
        r.push(&[3, 0]).unwrap();
        assert!(r.push(&[1]).is_err());
        let mut v = Variable::new("g/v", ElementType::U8, vec![3]);
        v.dims = Some(vec!["x".into()]);
        let ((vals, vd), (cnt, cd)) = r.into_variables(v, "v_t").unwrap();
        assert_eq!(vals.shape, [3]);
        assert_eq!(vals.dims.as_deref(), Some(&["v_sample".to_string()][..]));
        assert_eq!(cnt.name, "g/v_count");
        let mut out = vec![0u8; 24];
        cd.read_region(&[0], &[3], &mut out).unwrap();
        assert_eq!(&out[..8], &2i64.to_le_bytes());
        assert_eq!(&out[16..], &1i64.to_le_bytes());
        let mut o = vec![0u8; 4];
        vd.read_region(&[1], &[2], &mut o).unwrap();
        assert_eq!(o, [2, 0, 3, 0]);
    }
}
