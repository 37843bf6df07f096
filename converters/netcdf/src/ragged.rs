//! netCDF-4 vlen and opaque variables in tensor form (see `tet_source::ragged`): a vlen
//! variable of numbers (or enum codes) becomes a CF contiguous ragged array, gathered at open
//! (its records read in batches of at most [`BATCH_BYTES`], each element's values copied out
//! and the vlens freed); an opaque variable becomes `u8` with a trailing axis of the blob
//! size, read by region.
//!
//! Two more vlen forms (docs/FORMAT.md, "Ragged text and nested ragged arrays"):
//! * a vlen of strings is *ragged text*: a string variable `<name>` of every element's strings
//!   one after the other along `<short>_sample`, with [`Fact::Ragged`] naming the `i64` count
//!   variable `<name>_count` (the vlen variable's shape and dims), as for numbers;
//! * a vlen of vlens of numbers (or enum codes) is a ragged array one level deeper: the values
//!   `<name>` along `<short>_sample` name `<name>_count` (one count per inner sequence, along
//!   `<short>_count_sample`), which itself carries [`Fact::Ragged`] naming
//!   `<name>_count_count` (the number of inner sequences of each element, with the variable's
//!   shape and dims); the values' fact holds the inner type's name, the middle one the outer.
//!
//! Deeper nesting and vlens of compounds or opaque values stay unsupported items naming the
//! type.

use std::sync::Arc;

use tet_source::ragged::{opaque_variable, Ragged, COUNT_SUFFIX, MAX_BYTES};
use tet_source::{
    AttrValue, ElementType, Fact, Feature, Part, Request, Result, Role, SourceError, TextVariable,
    Variable,
};

use crate::build::{Builder, VarParts};
use crate::compound::{read_batches, read_records};
use crate::user::{usize_at, vlen_at, vlen_bytes, EnumInfo, NcType, Records};
use crate::values::{decode_all, native_to_le};
use crate::{ReadPlan, VarLoc, TEXT_ENCODING, TEXT_LIMIT};

/// Most record bytes one `nc_get_vara` of a vlen variable asks for.
const BATCH_BYTES: usize = 16 << 20;

/// How an opaque variable is read: its blobs region by region, the trailing byte axis cut.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpaqueRead {
    pub loc: VarLoc,
    /// Bytes per blob.
    pub size: usize,
}

impl OpaqueRead {
    /// Copies the region `start`/`count` (the variable's axes, then the byte axis) into `out`.
    pub fn read(
        &self,
        src: &crate::NcSource,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        let r = start.len().saturating_sub(1);
        let (bs, bc) = (
            start.get(r).copied().unwrap_or(0),
            count.get(r).copied().unwrap_or(0),
        );
        let n = count[..r].iter().try_fold(1usize, |a, &c| {
            usize::try_from(c).ok().and_then(|c| a.checked_mul(c))
        });
        let bytes = n
            .and_then(|n| n.checked_mul(self.size))
            .ok_or(Request::TooLarge)?;
        if bs == 0 && bc == self.size as u64 {
            return src.read_native(self.loc, "", self.size, &start[..r], &count[..r], out);
        }
        let mut tmp = vec![0u8; bytes];
        src.read_native(self.loc, "", self.size, &start[..r], &count[..r], &mut tmp)?;
        let (bs, bc) = (bs as usize, bc as usize);
        for (o, blob) in out.chunks_exact_mut(bc).zip(tmp.chunks_exact(self.size)) {
            o.copy_from_slice(&blob[bs..bs + bc]);
        }
        Ok(())
    }
}

impl Builder<'_> {
    /// An opaque variable: `u8` with a trailing byte axis.
    pub(crate) fn opaque(
        &mut self,
        loc: VarLoc,
        p: VarParts,
        name: &str,
        size: usize,
    ) -> Result<()> {
        let v = opaque_variable(base_variable(&loc, p), name, size as u64);
        self.push(v, ReadPlan::Opaque(OpaqueRead { loc, size }));
        Ok(())
    }

    /// A vlen variable of `base`: its values and counts, gathered now (module docs).
    pub(crate) fn vlen(
        &mut self,
        loc: VarLoc,
        p: VarParts,
        name: &str,
        base: &NcType,
    ) -> Result<()> {
        match base {
            NcType::Atomic(_) | NcType::Enum(_) => self.vlen_numbers(loc, p, name, base),
            NcType::Str => self.vlen_strings(loc, p, name),
            NcType::Vlen {
                name: inner,
                base: values,
            } if matches!(**values, NcType::Atomic(_) | NcType::Enum(_)) => {
                self.vlen_nested(loc, p, name, inner, values)
            }
            other => {
                let reason = match other {
                    NcType::Vlen { .. } => format!(
                        "vlen type '{name}' of {}: vlens nested deeper than two levels, or \
                         of vlens of strings, compounds or opaque values, have no tensor form \
                         here (a vlen of a vlen of numbers becomes a ragged array with two \
                         count variables)",
                        other.describe()
                    ),
                    _ => format!(
                        "vlen type '{name}' of {} has no tensor form (vlens of numbers and \
                         enums become ragged arrays, vlens of strings ragged text, vlens of \
                         vlens of numbers ragged arrays with two count variables; of \
                         compounds or opaque values not)",
                        other.describe()
                    ),
                };
                self.unsupported(p.full, Feature::DataType, reason)
            }
        }
    }

    /// Reads every element of vlen variable `loc` (shape `shape`, type `ty`) in batches,
    /// calling `each(records, byte offset of the element)` in C order. `Ok(false)` when the
    /// variable was recorded as skipped instead (an unsupported size under
    /// `--skip-unsupported`).
    fn each_element(
        &mut self,
        loc: VarLoc,
        full: &str,
        shape: &[u64],
        ty: &NcType,
        mut each: impl FnMut(&Records<'_>, usize) -> Result<()>,
    ) -> Result<bool> {
        let zero = vec![0u64; shape.len()];
        let record = ty.size();
        let r = read_batches(&zero, shape, record, BATCH_BYTES, |s, c, _, n| {
            let rec = read_records(loc, ty, s, c)?;
            for k in 0..n {
                each(&rec, k * record)?;
            }
            Ok(())
        });
        match r {
            Ok(()) => Ok(true),
            Err(SourceError::Unsupported { feature, detail }) => {
                self.unsupported(full.to_string(), feature, detail)?;
                Ok(false)
            }
            Err(e) => Err(crate::with_var(full, e)),
        }
    }

    /// A vlen variable of numbers or enum codes: a CF contiguous ragged array.
    fn vlen_numbers(&mut self, loc: VarLoc, p: VarParts, name: &str, base: &NcType) -> Result<()> {
        let (dtype, enum_info): (_, Option<&EnumInfo>) = match base {
            NcType::Enum(e) => (e.base, Some(e)),
            NcType::Atomic(t) => (*t, None),
            _ => return Err(Part::Values.malformed("vlen of numbers expected")),
        };
        let ty = vlen_type(name, base);
        let mut gathered = Ragged::new(dtype);
        let size = dtype.size();
        let full = p.full.clone();
        let shape = p.shape.clone();
        let read = self.each_element(loc, &full, &shape, &ty, |rec, off| {
            // SAFETY: `off` is a record of the batch: a vlen of `base` that netCDF read.
            let mut le = unsafe { rec.vlen_values(off, base) }.to_vec();
            native_to_le(&mut le, size);
            gathered.push(&le)
        })?;
        if !read {
            return Ok(());
        }
        let mut v = base_variable(&loc, p);
        if let Some(e) = enum_info {
            v.facts.push(Fact::EnumType(e.name.clone()));
            v.facts.push(Fact::EnumMapping(e.members.clone()));
        }
        let ((values, vdata), (count, cdata)) = gathered.into_variables(v, name)?;
        self.push(values, ReadPlan::Memory(Arc::new(vdata)));
        self.push(count, ReadPlan::Memory(Arc::new(cdata)));
        Ok(())
    }

    /// A vlen variable of strings: ragged text (module docs): a string variable of every
    /// element's strings one after the other along `<short>_sample`, with
    /// [`Fact::Ragged`] naming the count variable `<name>_count`.
    fn vlen_strings(&mut self, loc: VarLoc, p: VarParts, name: &str) -> Result<()> {
        let ty = vlen_type(name, &NcType::Str);
        let mut raw: Vec<Vec<u8>> = Vec::new();
        let mut text_bytes = 0usize;
        // The counts, as a ragged array of one placeholder byte per string.
        let mut counts = Ragged::new(ElementType::U8);
        let full = p.full.clone();
        let shape = p.shape.clone();
        let read = self.each_element(loc, &full, &shape, &ty, |rec, off| {
            // SAFETY: `off` is a record of the batch: a vlen of `string` netCDF read, its
            // values `char *` pointers netCDF allocated, live while `rec` is.
            let ptrs = unsafe { rec.vlen_values(off, &NcType::Str) };
            let n = ptrs.len() / PTR;
            for i in 0..n {
                let at = usize_at(ptrs, i * PTR);
                let s = if at == 0 {
                    Vec::new()
                } else {
                    // SAFETY: a non-null NUL-terminated string netCDF allocated (above).
                    unsafe { std::ffi::CStr::from_ptr(at as *const std::ffi::c_char) }
                        .to_bytes()
                        .to_vec()
                };
                text_bytes = text_bytes.saturating_add(s.len());
                if text_bytes > MAX_BYTES || raw.len() as u64 >= TEXT_LIMIT {
                    return Err(Feature::Size.unsupported(format!(
                        "vlen of strings larger than {} MiB is not gathered",
                        MAX_BYTES >> 20
                    )));
                }
                raw.push(s);
            }
            counts.push(&vec![0u8; n])
        })?;
        if !read {
            return Ok(());
        }
        let v = base_variable(&loc, p);
        let ((values, _), (count, cdata)) = counts.into_variables(v, name)?;
        let (strings, latin1) = decode_all(&raw);
        let mut facts = values.facts;
        if latin1 {
            facts.push(Fact::private(
                "nc",
                TEXT_ENCODING,
                AttrValue::Text("latin1".into()),
            ));
        }
        self.texts.push(TextVariable {
            name: values.name,
            shape: values.shape,
            dims: values.dims,
            values: strings,
            attrs: values.attrs,
            char_axis: None,
            facts,
        });
        self.push(count, ReadPlan::Memory(Arc::new(cdata)));
        Ok(())
    }

    /// A vlen variable of vlens of numbers (type `name` of `inner`, a vlen of `base`): a CF
    /// contiguous ragged array one level deeper (module docs): the values along
    /// `<short>_sample` with [`Fact::Ragged`] naming `<name>_count` (one count per inner
    /// sequence, along `<short>_count_sample`), which itself carries [`Fact::Ragged`]
    /// naming `<name>_count_count` (one count of inner sequences per element, the variable's
    /// shape and dims).
    fn vlen_nested(
        &mut self,
        loc: VarLoc,
        p: VarParts,
        name: &str,
        inner: &str,
        base: &NcType,
    ) -> Result<()> {
        let (dtype, enum_info): (_, Option<&EnumInfo>) = match base {
            NcType::Enum(e) => (e.base, Some(e)),
            NcType::Atomic(t) => (*t, None),
            _ => return Err(Part::Values.malformed("vlen of numbers expected")),
        };
        let inner_ty = vlen_type(inner, base);
        let ty = vlen_type(name, &inner_ty);
        let size = dtype.size();
        let mut values = Ragged::new(dtype);
        let mut outer = Ragged::new(ElementType::I64);
        let full = p.full.clone();
        let shape = p.shape.clone();
        let read = self.each_element(loc, &full, &shape, &ty, |rec, off| {
            // SAFETY: `off` is a record of the batch: a vlen of vlens netCDF read, live while
            // `rec` is.
            let seqs = unsafe { rec.vlen_values(off, &inner_ty) };
            let step = inner_ty.size();
            let mut lens = Vec::with_capacity(seqs.len() / step.max(1) * 8);
            for j in 0..seqs.len() / step.max(1) {
                let vl = vlen_at(seqs, j * step);
                // SAFETY: an inner vlen of `base` of that read, live while `rec` is.
                let mut le = unsafe { vlen_bytes(&vl, base) }.to_vec();
                native_to_le(&mut le, size);
                values.push(&le)?;
                let n = i64::try_from(le.len() / size.max(1))
                    .map_err(|_| Part::Values.malformed("sequence too long"))?;
                lens.extend_from_slice(&n.to_le_bytes());
            }
            outer.push(&lens)
        })?;
        if !read {
            return Ok(());
        }
        let v = base_variable(&loc, p);
        let short = v.name.rsplit('/').next().unwrap_or(&v.name).to_string();
        // The counts of inner sequences, per element: a ragged array of i64 of its own.
        let mut per_element = Variable::new(
            format!("{}{COUNT_SUFFIX}", v.name),
            ElementType::I64,
            v.shape.clone(),
        );
        per_element.dims = v.dims.clone();
        per_element.facts = v
            .facts
            .iter()
            .filter(|f| matches!(f, Fact::UnlimitedDims(_)))
            .cloned()
            .collect();
        let ((mut counts, counts_data), (outer_count, outer_data)) =
            outer.into_variables(per_element, name)?;
        // The values: the inner sequences one after the other.
        let mut seqs = v;
        seqs.shape = counts.shape.clone();
        seqs.dims = counts.dims.clone();
        seqs.facts.retain(|f| !matches!(f, Fact::UnlimitedDims(_)));
        if let Some(e) = enum_info {
            seqs.facts.push(Fact::EnumType(e.name.clone()));
            seqs.facts.push(Fact::EnumMapping(e.members.clone()));
        }
        let ((vals, vdata), (inner_count, _)) = values.into_variables(seqs, inner)?;
        counts.attrs = inner_count.attrs;
        counts.notes.splice(0..0, inner_count.notes);
        counts.notes.push(format!(
            "'{short}' is a vlen of vlens: '{}' counts the values of each inner sequence, \
             '{}' the inner sequences of each element",
            counts.name, outer_count.name
        ));
        self.push(vals, ReadPlan::Memory(Arc::new(vdata)));
        self.push(counts, ReadPlan::Memory(Arc::new(counts_data)));
        self.push(outer_count, ReadPlan::Memory(Arc::new(outer_data)));
        Ok(())
    }
}

/// Bytes of a pointer (a `string` value in memory).
const PTR: usize = std::mem::size_of::<usize>();

/// The vlen type `name` of `base`.
fn vlen_type(name: &str, base: &NcType) -> NcType {
    NcType::Vlen {
        name: name.to_string(),
        base: Box::new(base.clone()),
    }
}

/// The variable as the file has it (before its type decides its form): name, shape, dims,
/// attributes, facts and role; its element type is left `U8` for the caller to set.
pub(crate) fn base_variable(loc: &VarLoc, p: VarParts) -> Variable {
    let mut v = Variable::new(p.full, tet_source::ElementType::U8, p.shape);
    v.attrs = p.attrs;
    v.facts = p.attr_facts;
    v.notes = p.attr_notes;
    if !loc.scalar {
        v.dims = Some(p.dim_names);
    }
    if p.coordinate {
        v.role = Role::Coordinate;
    }
    if !p.unlimited.is_empty() {
        v.facts.push(Fact::UnlimitedDims(p.unlimited));
    }
    v
}
