//! netCDF-4 vlen and opaque variables in tensor form (see `tet_source::ragged`): a vlen
//! variable of numbers (or enum codes) becomes a CF contiguous ragged array, gathered at open
//! (its records read in batches of at most [`BATCH_BYTES`], each element's values copied out
//! and the vlens freed); an opaque variable becomes `u8` with a trailing axis of the blob
//! size, read by region. Nested vlens (vlen of vlen), and vlens of strings, compounds or
//! opaque values stay unsupported items naming the type.

use std::sync::Arc;

use tet_source::ragged::{opaque_variable, Ragged};
use tet_source::{Fact, Feature, Request, Result, Role, SourceError, Variable};

use crate::build::{Builder, VarParts};
use crate::compound::{read_batches, read_records};
use crate::user::{EnumInfo, NcType};
use crate::values::native_to_le;
use crate::{ReadPlan, VarLoc};

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

    /// A vlen variable of `base`: its values and counts, gathered now.
    pub(crate) fn vlen(
        &mut self,
        loc: VarLoc,
        p: VarParts,
        name: &str,
        base: &NcType,
    ) -> Result<()> {
        let (dtype, enum_info): (_, Option<&EnumInfo>) = match base {
            NcType::Atomic(t) => (*t, None),
            NcType::Enum(e) => (e.base, Some(e)),
            other => {
                let reason = match other {
                    NcType::Vlen { .. } => format!(
                        "vlen type '{name}' of {}: nested variable-length values have no \
                         tensor form here (a CF ragged array has one level of counts)",
                        other.describe()
                    ),
                    _ => format!(
                        "vlen type '{name}' of {} has no tensor form (vlens of numbers and \
                         enums become ragged arrays; of strings, compounds or opaque values \
                         not)",
                        other.describe()
                    ),
                };
                return self.unsupported(p.full, Feature::DataType, reason);
            }
        };
        let ty = NcType::Vlen {
            name: name.to_string(),
            base: Box::new(base.clone()),
        };
        let zero = vec![0u64; p.shape.len()];
        let mut gathered = Ragged::new(dtype);
        let size = dtype.size();
        let record = ty.size();
        let r = read_batches(&zero, &p.shape, record, BATCH_BYTES, |s, c, _, n| {
            let rec = read_records(loc, &ty, s, c)?;
            for k in 0..n {
                // SAFETY: record k of the batch holds a vlen of `base` that netCDF read.
                let vals = unsafe { rec.vlen_values(k * record, base) };
                let mut le = vals.to_vec();
                native_to_le(&mut le, size);
                gathered.push(&le)?;
            }
            Ok(())
        });
        if let Err(e) = r {
            return match e {
                SourceError::Unsupported { feature, detail } => {
                    self.unsupported(p.full, feature, detail)
                }
                e => Err(crate::with_var(&p.full, e)),
            };
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
