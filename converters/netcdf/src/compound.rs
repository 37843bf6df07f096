//! netCDF-4 compound variables: one variable per field, as the HDF5 importer splits HDF5
//! compounds (the type is flattened by module `user`). A field's values are read by region:
//! the records of the region's outer part come from `nc_get_vara` in the compound's own
//! (native, in-memory) layout, in batches of at most [`BATCH_BYTES`], and the field's
//! elements are copied out of them, little-endian.

use std::collections::HashSet;
use std::sync::Arc;

use tet_source::record::{self, Element, Fix, Parts};
use tet_source::{
    AttrValue, CharAxis, ElementType, Fact, Feature, Part, Request, Result, Role, SourceError,
    SourceLayout, TextVariable, Variable,
};

use crate::build::{Builder, VarParts};
use crate::user::{self, EnumInfo, Leaf, LeafKind, NcType, Records};
use crate::{ffi, ReadPlan, VarLoc};

/// Most record bytes one `nc_get_vara` of a field read asks for (a region whose records are
/// larger is read in several calls).
const BATCH_BYTES: usize = 16 << 20;

/// How one field of a compound variable is read.
#[derive(Debug, Clone)]
pub(crate) struct FieldRead {
    pub loc: VarLoc,
    /// The compound type (shared by the variable's fields).
    pub ty: Arc<NcType>,
    /// The variable's own rank (the field's array axes follow).
    pub outer_rank: usize,
    pub leaf: Leaf,
    /// Bytes of one delivered element.
    pub elem: usize,
}

/// What the variables of one compound variable share.
struct Shared<'a> {
    loc: VarLoc,
    p: &'a VarParts,
    ty: &'a Arc<NcType>,
    layout: &'a SourceLayout,
    split: bool,
}

impl Builder<'_> {
    /// The variables of a compound variable: one per leaf of its type.
    pub(crate) fn compound(&mut self, loc: VarLoc, p: VarParts, t: NcType) -> Result<()> {
        let leaves = user::flatten(&t);
        // Two leaves with one name (fields `a/b` and `a_b`: `/` becomes `_`) cannot both be
        // variables: this variable is an unsupported item, the rest of the file converts.
        let mut seen = HashSet::new();
        if let Some(dup) = leaves.iter().find(|l| !seen.insert(l.suffix())) {
            let reason = format!(
                "compound fields collide as '{}' once '/' in field names becomes '_'",
                dup.name_under(&p.full)
            );
            return self.unsupported(p.full, Feature::DataType, reason);
        }
        let layout = if loc.scalar {
            SourceLayout::default()
        } else {
            match self.layout(loc, p.shape.len())? {
                (l, None) => l,
                // Fields are read through netCDF-C, which cannot decode this filter.
                (_, Some(reason)) => return self.unsupported(p.full, Feature::Codec, reason),
            }
        };
        let ty = Arc::new(t);
        let s = Shared {
            loc,
            p: &p,
            ty: &ty,
            layout: &layout,
            split: leaves.len() > 1 || leaves.iter().any(|l| !l.path.is_empty()),
        };
        for leaf in &leaves {
            self.compound_leaf(&s, leaf)?;
        }
        Ok(())
    }

    /// The variable (numeric or text) of one leaf, or its unsupported item.
    fn compound_leaf(&mut self, s: &Shared<'_>, leaf: &Leaf) -> Result<()> {
        let p = s.p;
        let name = leaf.name_under(&p.full);
        let inner = leaf.place.inner_shape();
        let shape: Vec<u64> = p.shape.iter().chain(&inner).copied().collect();
        let short = name.rsplit('/').next().unwrap_or(&name).to_string();
        let mut dims = if s.loc.scalar {
            Vec::new()
        } else {
            p.dim_names.clone()
        };
        let outer = dims.len();
        dims.extend((0..inner.len()).map(|k| format!("{short}_dim{}", outer + k)));
        let mut notes = leaf.notes.clone();
        notes.extend(p.attr_notes.iter().cloned());
        let (dtype, enum_info, complex) = match &leaf.kind {
            LeafKind::Numeric {
                dtype,
                enum_info,
                complex,
            } => (*dtype, enum_info, complex),
            LeafKind::Char | LeafKind::Str => {
                return self.compound_text(s, leaf, name, shape, dims)
            }
            LeafKind::Unsupported(why) => {
                let reason = format!("{why} (field of netCDF {})", s.ty.describe());
                return self.unsupported(name, Feature::DataType, reason);
            }
            LeafKind::Vlen { name: tname, base } => {
                let v = Variable {
                    dims: (!shape.is_empty()).then_some(dims),
                    notes,
                    ..Variable::new(name, ElementType::U8, shape)
                };
                return self.compound_vlen(s, leaf, v, tname, base);
            }
        };
        let mut v = Variable::new(name, dtype, shape);
        v.attrs = p.attrs.clone();
        v.facts = s.field_facts(enum_info.as_ref());
        if !v.shape.is_empty() {
            v.dims = Some(dims);
        }
        if p.coordinate && !s.split && inner.is_empty() {
            v.role = Role::Coordinate;
        }
        if let Some(e) = enum_info {
            notes.push(format!(
                "netCDF enum '{}': stored as its underlying {} codes; names in enum_mapping",
                e.name, e.base
            ));
        }
        if complex.is_some() {
            notes.push(format!(
                "netCDF {} holding a complex number: read as (real, imaginary) pairs",
                s.ty.describe()
            ));
        }
        v.notes = notes;
        v.layout = SourceLayout {
            chunk_shape: s.layout.chunk_shape.as_ref().map(|c| {
                let mut c = c.clone();
                c.extend(&inner);
                c
            }),
            compressed: s.layout.compressed,
            filters: s.layout.filters.clone(),
        };
        let read = FieldRead {
            loc: s.loc,
            ty: Arc::clone(s.ty),
            outer_rank: p.shape.len(),
            leaf: leaf.clone(),
            elem: dtype.size(),
        };
        self.push(v, ReadPlan::Field(Box::new(read)));
        Ok(())
    }

    /// The text variable of a `char` field (strings along the field's last array axis, one
    /// character each when the field is a single `char`, trailing NULs removed) or of a
    /// `string` field (one string per element); decoded alike as the importer decodes text
    /// variables (UTF-8, or Latin-1 recorded with [`crate::TEXT_ENCODING`]).
    fn compound_text(
        &mut self,
        s: &Shared<'_>,
        leaf: &Leaf,
        name: String,
        mut shape: Vec<u64>,
        mut dims: Vec<String>,
    ) -> Result<()> {
        let p = s.p;
        let strings = matches!(leaf.kind, LeafKind::Str);
        let record = s.ty.size() as u64;
        let records = p.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let bytes = records.and_then(|n| n.checked_mul(record));
        let Some(bytes) = bytes.filter(|&b| b <= crate::TEXT_LIMIT) else {
            return self.unsupported(
                name,
                Feature::Size,
                "text field of a compound variable too large to keep in the metadata".into(),
            );
        };
        let inner = leaf.place.inner_shape();
        let strlen = if strings {
            1
        } else {
            inner.last().copied().unwrap_or(1)
        };
        let char_axis = match (strings, inner.last(), dims.last()) {
            (false, Some(&len), Some(dim)) => {
                let a = CharAxis {
                    dim: dim.clone(),
                    len,
                };
                shape.pop();
                dims.pop();
                Some(a)
            }
            _ => None,
        };
        let rows = if bytes > 0 {
            text_rows(s, leaf, &inner, strings, strlen).map_err(|e| crate::with_var(&p.full, e))?
        } else {
            Vec::new()
        };
        let (values, latin1) = crate::values::decode_all(&rows);
        let mut facts = p.attr_facts.clone();
        if s.split {
            facts.push(Fact::SourceDataset(p.full.clone()));
            facts.push(compound_type_fact(s.ty));
        }
        if !p.unlimited.is_empty() {
            facts.push(Fact::UnlimitedDims(p.unlimited.clone()));
        }
        if latin1 {
            facts.push(Fact::private(
                "nc",
                crate::TEXT_ENCODING,
                AttrValue::Text("latin1".into()),
            ));
        }
        self.texts.push(TextVariable {
            name,
            shape,
            dims: Some(dims),
            values,
            attrs: p.attrs.clone(),
            char_axis,
            facts,
        });
        Ok(())
    }
}

/// The [`crate::COMPOUND_TYPE`] fact of the fields of a variable of compound type `t`.
impl Shared<'_> {
    /// The facts of one field's variable: the compound variable's attribute facts and
    /// unlimited dims, where it came from when the compound is split, and its enum type.
    fn field_facts(&self, enum_info: Option<&EnumInfo>) -> Vec<Fact> {
        let p = self.p;
        let mut facts = p.attr_facts.clone();
        if !p.unlimited.is_empty() {
            facts.push(Fact::UnlimitedDims(p.unlimited.clone()));
        }
        if self.split {
            facts.push(Fact::SourceDataset(p.full.clone()));
            facts.push(compound_type_fact(self.ty));
        }
        if let Some(e) = enum_info {
            facts.push(Fact::EnumType(e.name.clone()));
            facts.push(Fact::EnumMapping(e.members.clone()));
        }
        facts
    }
}

impl Builder<'_> {
    /// A vlen field of numbers (`v`: its name, shape, dims and notes): a CF contiguous ragged
    /// array of every (record, inner element)'s sequence, gathered now; the values keep the
    /// compound facts, so the export knows where they came from.
    fn compound_vlen(
        &mut self,
        s: &Shared<'_>,
        leaf: &Leaf,
        mut v: Variable,
        tname: &str,
        base: &NcType,
    ) -> Result<()> {
        let p = s.p;
        let (dtype, enum_info) = match base {
            NcType::Enum(e) => (e.base, Some(e)),
            NcType::Atomic(t) => (*t, None),
            _ => {
                return self.unsupported(v.name, Feature::DataType, format!("vlen '{tname}' field"))
            }
        };
        let record = s.ty.size();
        let inner = leaf.place.inner_shape();
        let zeros = vec![0u64; inner.len()];
        let size = dtype.size();
        let mut gathered = tet_source::ragged::Ragged::new(dtype);
        let outer = p.shape.clone();
        let r = read_batches(
            &vec![0; outer.len()],
            &outer,
            record,
            BATCH_BYTES,
            |bs, bc, _, n| {
                let rec = read_records(s.loc, s.ty, bs, bc)?;
                let mut res = Ok(());
                for k in 0..n {
                    leaf.place
                        .for_each(&zeros, &inner, |off| {
                            if res.is_err() {
                                return;
                            }
                            // SAFETY: `off` is a vlen element of this leaf in record k, read by
                            // netCDF.
                            let mut le =
                                unsafe { rec.vlen_values(k * record + off, base) }.to_vec();
                            crate::values::native_to_le(&mut le, size);
                            res = gathered.push(&le);
                        })
                        .map_err(user::malformed)?;
                }
                res
            },
        );
        if let Err(e) = r {
            return match e {
                SourceError::Unsupported { feature, detail } => {
                    self.unsupported(v.name, feature, detail)
                }
                e => Err(crate::with_var(&v.name, e)),
            };
        }
        v.attrs = p.attrs.clone();
        v.facts = s.field_facts(enum_info);
        let ((values, vdata), (count, cdata)) = gathered.into_variables(v, tname)?;
        self.push(values, ReadPlan::Memory(Arc::new(vdata)));
        self.push(count, ReadPlan::Memory(Arc::new(cdata)));
        Ok(())
    }
}

fn compound_type_fact(t: &NcType) -> Fact {
    Fact::private("nc", crate::COMPOUND_TYPE, AttrValue::Text(t.json()))
}

/// The raw values of a text leaf over every record: each `string` element, or each `char` row
/// of `strlen` characters with its trailing NULs removed.
fn text_rows(
    s: &Shared<'_>,
    leaf: &Leaf,
    inner: &[u64],
    strings: bool,
    strlen: u64,
) -> Result<Vec<Vec<u8>>> {
    let p = s.p;
    let zeros = vec![0u64; p.shape.len()];
    let start_in = vec![0u64; inner.len()];
    let size = s.ty.size();
    let mut rows = Vec::new();
    let mut chars = Vec::new();
    read_batches(&zeros, &p.shape, size, usize::MAX, |bs, bc, _, n| {
        let rec = read_records(s.loc, s.ty, bs, bc)?;
        for r in 0..n {
            let base = r * size;
            let each = leaf.place.for_each(&start_in, inner, |off| {
                if strings {
                    // SAFETY: `off` is an element offset of this `string` leaf in record `r`
                    // (`for_each` over the leaf's own axes), so a `char *` lies there.
                    rows.push(unsafe { rec.string_at(base + off) });
                } else {
                    chars.push(rec.bytes().get(base + off).copied().unwrap_or(0));
                }
            });
            each.map_err(user::malformed)?;
        }
        Ok(())
    })?;
    if !strings {
        let width = usize::try_from(strlen).unwrap_or(1).max(1);
        rows = chars
            .chunks(width)
            .map(|row| crate::values::trim_nuls(row).to_vec())
            .collect();
    }
    Ok(rows)
}

/// Reads the records `start`/`count` (the variable's own axes) of a compound variable.
pub(crate) fn read_records<'t>(
    loc: VarLoc,
    ty: &'t NcType,
    start: &[usize],
    count: &[usize],
) -> Result<Records<'t>> {
    let n = count
        .iter()
        .try_fold(1usize, |a, &c| a.checked_mul(c))
        .ok_or(Request::TooLarge)?;
    let mut rec = Records::new(ty, n)?;
    if n > 0 {
        ffi::get_vara(loc.ncid, loc.varid, start, count, rec.fill())?;
        rec.arm();
    }
    Ok(rec)
}

/// Splits the region `start`/`count` of records of `record` bytes into boxes of at most
/// `limit` bytes (or single records, when one is larger), each covering consecutive records
/// in C order; calls `f(start, count, first record index, records)` for each, in order.
pub(crate) fn read_batches(
    start: &[u64],
    count: &[u64],
    record: usize,
    limit: usize,
    mut f: impl FnMut(&[usize], &[usize], usize, usize) -> Result<()>,
) -> Result<()> {
    let to_usize = |v: &[u64]| -> Result<Vec<usize>> {
        v.iter()
            .map(|&x| usize::try_from(x).map_err(|_| Request::TooLarge.into()))
            .collect()
    };
    let (st, cnt) = (to_usize(start)?, to_usize(count)?);
    let r = cnt.len();
    if r == 0 {
        return f(&[], &[], 0, 1);
    }
    if cnt.contains(&0) {
        return Ok(());
    }
    // tail[i]: records in one step of axis i-1 (the product of the counts from axis i on).
    let mut tail = vec![1usize; r + 1];
    for i in (0..r).rev() {
        tail[i] = tail[i + 1].saturating_mul(cnt[i]);
    }
    let mut k = 0;
    while k + 1 < r && tail[k + 1].saturating_mul(record) > limit {
        k += 1;
    }
    let step = (limit / tail[k + 1].saturating_mul(record).max(1)).max(1);
    let mut idx = vec![0usize; k];
    loop {
        let base: usize = idx.iter().zip(&tail[1..]).map(|(&i, &t)| i * t).sum();
        let mut j = 0;
        while j < cnt[k] {
            let n = step.min(cnt[k] - j);
            let mut bs = st.clone();
            let mut bc = cnt.clone();
            for a in 0..k {
                bs[a] = st[a] + idx[a];
                bc[a] = 1;
            }
            bs[k] = st[k] + j;
            bc[k] = n;
            f(&bs, &bc, base + j * tail[k + 1], n * tail[k + 1])?;
            j += n;
        }
        let mut a = k;
        loop {
            if a == 0 {
                return Ok(());
            }
            a -= 1;
            idx[a] += 1;
            if idx[a] < cnt[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}

impl FieldRead {
    /// Reads the region `start`/`count` (the variable's axes, then the field's array axes)
    /// into `out` as little-endian elements; `out` holds exactly the region (checked by the
    /// caller).
    pub(crate) fn read(&self, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let r = self.outer_rank;
        let (Some((os, is)), Some((oc, ic))) = (
            (start.len() >= r).then(|| start.split_at(r)),
            (count.len() >= r).then(|| count.split_at(r)),
        ) else {
            return Err(Request::Rank {
                start: start.len(),
                count: count.len(),
                rank: r,
            }
            .into());
        };
        let per_inner = ic
            .iter()
            .try_fold(1usize, |a, &c| a.checked_mul(usize::try_from(c).ok()?))
            .and_then(|n| n.checked_mul(self.elem))
            .ok_or(Request::TooLarge)?;
        let record = self.ty.size();
        // Values come in this machine's byte order: swapped on a big-endian one only.
        let fix = match &self.leaf.kind {
            LeafKind::Numeric { dtype, .. } if cfg!(target_endian = "big") => {
                Fix::order(*dtype, true)
            }
            _ => Fix::None,
        };
        let elem = Element {
            size: self.elem,
            parts: self.leaf.kind.complex(),
            fix,
        };
        let bad = || Part::Type.malformed("compound field outside its record or the region");
        read_batches(os, oc, record, BATCH_BYTES, |bs, bc, first, n| {
            let rec = read_records(self.loc, &self.ty, bs, bc)?;
            let at = first.checked_mul(per_inner).ok_or_else(bad)?;
            let len = n.checked_mul(per_inner).ok_or_else(bad)?;
            let dst = at
                .checked_add(len)
                .and_then(|end| out.get_mut(at..end))
                .ok_or_else(bad)?;
            record::gather(rec.bytes(), record, &self.leaf.place, is, ic, elem, dst)
                .map_err(|_| bad())
        })
    }
}

impl LeafKind {
    /// Where the parts of a complex leaf are.
    fn complex(&self) -> Option<Parts> {
        match self {
            LeafKind::Numeric { complex, .. } => *complex,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxes(start: &[u64], count: &[u64], record: usize, limit: usize) -> Vec<String> {
        let mut v = Vec::new();
        read_batches(start, count, record, limit, |s, c, first, n| {
            v.push(format!("{s:?}{c:?}@{first}+{n}"));
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn batches_cover_the_region_in_order() {
        assert_eq!(boxes(&[1, 2], &[2, 3], 8, 1 << 20), ["[1, 2][2, 3]@0+6"]);
        // rows of 3 records of 8 bytes = 24 bytes; 50 bytes: 2 rows per box
        assert_eq!(
            boxes(&[0, 0], &[5, 3], 8, 50),
            ["[0, 0][2, 3]@0+6", "[2, 0][2, 3]@6+6", "[4, 0][1, 3]@12+3"]
        );
        // one row is already too large: boxes along the last axis
        assert_eq!(
            boxes(&[0, 4], &[2, 3], 8, 16),
            [
                "[0, 4][1, 2]@0+2",
                "[0, 6][1, 1]@2+1",
                "[1, 4][1, 2]@3+2",
                "[1, 6][1, 1]@5+1"
            ]
        );
        assert_eq!(boxes(&[], &[], 8, 1), ["[][]@0+1"]);
        assert!(boxes(&[0], &[0], 8, 1).is_empty());
    }
}
