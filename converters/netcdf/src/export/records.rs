//! Compound variables rebuilt: the importer splits a compound variable into one variable per
//! field (numeric arrays, text variables for `char` and `string` fields), each with the facts
//! [`Fact::SourceDataset`] (the compound variable) and [`crate::COMPOUND_TYPE`] (its type).
//! When every field of the recorded type is among the exported arrays and text variables, with
//! the shapes the split gives, the export defines the compound variable again and writes its
//! records, assembled from the fields; otherwise the fields stay separate variables (with a
//! warning saying why). Records are assembled in memory: a compound variable of more than
//! [`MAX_BYTES`] stays split. `string` fields are pointers to NUL-terminated copies of the
//! values in the records; such a variable gets no filter and keeps HDF5's fill (netCDF-C
//! refuses both for values with `string` parts).
//!
//! A vlen field of numbers or enums is a ragged array (its values `<var>/<field>`, with
//! [`Fact::Ragged`] naming its count array `<var>/<field>_count`, whose shape is the field's):
//! in the records each element is an `nc_vlen_t` (length, pointer) into those values, cut by
//! the counts; such variables, like those with `string` parts, get no filter and keep the fill.

use std::collections::BTreeMap;
use std::ffi::{c_int, CString};

use tet_source::export::{split_group, ChunkSource, ExportError, Model, Result, TextEntry};
use tet_source::{ElementType, Fact, TextVariable};

use super::compound::{RecordError, TypeDef};
use super::hints::{private_text, AttrHints, TextHints};
use super::{cname, nc};
use crate::ffi;

/// Largest compound variable (records × record size) rebuilt.
pub(crate) const MAX_BYTES: usize = 256 << 20;

/// What one leaf of a compound type holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum LeafKind {
    Numeric(ElementType),
    /// `char`: strings along the last inner axis (one character when there is none).
    Char,
    /// `string`: one string per element (a pointer in the record).
    Str,
    /// A vlen of numbers of this type: one sequence per element (an `nc_vlen_t` in the
    /// record), a ragged array's values and counts.
    Vlen(ElementType),
}

/// One field (leaf) of a compound type, as the importer splits it.
#[derive(Debug, Clone)]
pub(crate) struct LeafDef {
    /// Appended to the variable's name (`/field`, `/outer/inner`).
    pub suffix: String,
    /// Byte offset of the first element in the record.
    pub offset: usize,
    /// Trailing axes (array fields): extent and byte stride of each.
    pub inner: Vec<(u64, usize)>,
    pub kind: LeafKind,
}

/// The leaves of `t` in the importer's order and naming; `None` when it has a part that the
/// importer does not split into plain fields (a complex pair).
pub(crate) fn leaves(t: &TypeDef) -> Option<Vec<LeafDef>> {
    let mut out = Vec::new();
    flatten(t, 0, &[], String::new(), &mut out)?;
    Some(out)
}

fn flatten(
    t: &TypeDef,
    offset: usize,
    inner: &[(u64, usize)],
    suffix: String,
    out: &mut Vec<LeafDef>,
) -> Option<()> {
    let kind = match t {
        TypeDef::Atomic(e) => LeafKind::Numeric(*e),
        TypeDef::Enum(e) => LeafKind::Numeric(e.base),
        TypeDef::Char => LeafKind::Char,
        TypeDef::Str => LeafKind::Str,
        TypeDef::Vlen { base, .. } => match **base {
            TypeDef::Atomic(e) => LeafKind::Vlen(e),
            TypeDef::Enum(ref e) => LeafKind::Vlen(e.base),
            _ => return None,
        },
        TypeDef::Compound { fields, .. } => {
            let complex = |a: &str, b: &str| {
                matches!(
                    (a, b),
                    ("r", "i") | ("i", "r") | ("real", "imag") | ("imag", "real")
                )
            };
            if let [a, b] = fields.as_slice() {
                let floats = matches!(a.ty, TypeDef::Atomic(ElementType::F32 | ElementType::F64));
                if floats
                    && a.ty == b.ty
                    && a.dims.is_empty()
                    && b.dims.is_empty()
                    && complex(&a.name, &b.name)
                {
                    return None;
                }
            }
            for (i, f) in fields.iter().enumerate() {
                let mut notes = Vec::new();
                let short = tet_source::fields::compound_field_name(&f.name, i, &mut notes);
                let mut axes = inner.to_vec();
                let mut stride = f.ty.size();
                let mut own = vec![(0u64, 0usize); f.dims.len()];
                for (k, &d) in f.dims.iter().enumerate().rev() {
                    own[k] = (u64::try_from(d).ok()?, stride);
                    stride = stride.checked_mul(d)?;
                }
                axes.extend(own);
                let at = offset.checked_add(f.offset)?;
                flatten(&f.ty, at, &axes, format!("{suffix}/{short}"), out)?;
            }
            return Some(());
        }
    };
    out.push(LeafDef {
        suffix,
        offset,
        inner: inner.to_vec(),
        kind,
    });
    Some(())
}

/// Where a leaf's values are in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Member {
    /// Index into [`Model::arrays`].
    Array(usize),
    /// Index into [`Model::text_variables`].
    Text(usize),
    /// A ragged array (vlen field): its values and its count array, indices into
    /// [`Model::arrays`].
    Ragged { values: usize, count: usize },
}

/// A compound variable to rebuild.
#[derive(Debug, Clone)]
pub(crate) struct RecordVar {
    /// Its name (group path joined with `/`).
    pub name: String,
    pub ty: TypeDef,
    /// The shape of the compound variable.
    pub outer: Vec<u64>,
    /// Each leaf and where its values are.
    pub leaves: Vec<(LeafDef, Member)>,
}

impl RecordVar {
    /// The member whose dims, facts and attributes the variable takes (all share them).
    pub fn template(&self) -> Option<Member> {
        let mut members = self.leaves.iter().map(|(_, m)| *m);
        let first = members.clone().next();
        members.find(|m| matches!(m, Member::Array(_))).or(first)
    }

    /// Bytes of all its records (checked against [`MAX_BYTES`] when planned).
    pub fn bytes(&self) -> Option<usize> {
        let n = self.outer.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
        usize::try_from(n).ok()?.checked_mul(self.ty.size())
    }
}

fn source_of(facts: &[Fact]) -> Option<(&str, &str)> {
    let src = facts.iter().find_map(|f| match f {
        Fact::SourceDataset(s) => Some(s.as_str()),
        _ => None,
    })?;
    Some((src, private_text(facts, crate::COMPOUND_TYPE)?))
}

/// A compound variable's type JSON and its members by name.
type Found<'m> = (&'m str, Vec<(&'m str, Member)>);

/// The compound variables of `model` that can be rebuilt (see the module docs); `warnings`
/// gets why others stay split.
pub(crate) fn plan(model: &Model, warnings: &mut Vec<String>) -> Vec<RecordVar> {
    // Compound variable → (type JSON, its members by name).
    let mut found: BTreeMap<&str, Found> = BTreeMap::new();
    for (i, a) in model.arrays.iter().enumerate() {
        if let Some((src, ty)) = source_of(&a.facts) {
            let ragged = a.facts.iter().find_map(|f| match f {
                Fact::Ragged { count, .. } => Some(count),
                _ => None,
            });
            let m = match ragged {
                None => Member::Array(i),
                // Without its count array the field is missing (the compound stays split).
                Some(c) => match model.arrays.iter().position(|x| &x.name == c) {
                    Some(count) => Member::Ragged { values: i, count },
                    None => continue,
                },
            };
            let e = found.entry(src).or_insert((ty, Vec::new()));
            e.1.push((a.name.as_str(), m));
        }
    }
    for (i, t) in model.text_variables.iter().enumerate() {
        if let TextEntry::Variable(v) = t {
            if let Some((src, ty)) = source_of(&v.facts) {
                let e = found.entry(src).or_insert((ty, Vec::new()));
                e.1.push((v.name.as_str(), Member::Text(i)));
            }
        }
    }
    let mut out = Vec::new();
    for (src, (ty, members)) in found {
        match match_leaves(model, src, ty, &members) {
            Ok(r) => out.push(r),
            Err(why) => warnings.push(format!(
                "compound variable `{src}` exported as its fields, one variable each: {why}"
            )),
        }
    }
    out
}

/// The shape of a member and, for text, its string length (`None`: one character a value).
fn member_shape(model: &Model, m: Member) -> Option<(Vec<u64>, Option<u64>, Option<ElementType>)> {
    match m {
        Member::Array(i) => {
            let a = model.arrays.get(i)?;
            Some((a.shape.clone(), None, Some(a.dtype)))
        }
        // A ragged field's shape is its count array's; its type its values'.
        Member::Ragged { values, count } => {
            let (v, c) = (model.arrays.get(values)?, model.arrays.get(count)?);
            (c.dtype == ElementType::I64 && v.shape.len() == 1)
                .then(|| (c.shape.clone(), None, Some(v.dtype)))
        }
        Member::Text(i) => match model.text_variables.get(i)? {
            TextEntry::Variable(v) => {
                Some((v.shape.clone(), v.char_axis.as_ref().map(|c| c.len), None))
            }
            TextEntry::Malformed { .. } => None,
        },
    }
}

/// Why a compound variable is not rebuilt from its exported fields.
#[derive(Debug, thiserror::Error)]
enum NotRebuilt {
    /// Its recorded type has no netCDF form.
    #[error(transparent)]
    Type(#[from] RecordError),
    /// Its type holds a complex pair (split into two fields).
    #[error("its type holds a complex pair")]
    ComplexPair,
    /// Not every field was exported.
    #[error("{exported} of its {fields} fields exported")]
    Fields {
        /// Fields exported.
        exported: usize,
        /// Fields of the type.
        fields: usize,
    },
    /// A field of the type was not exported (its variable's name).
    #[error("no field `{0}`")]
    NoField(String),
    /// A field whose arrays do not form a field.
    #[error("a field malformed")]
    Malformed,
    /// A field of another type or shape than the type says.
    #[error("field `{0}` has another type or shape")]
    FieldType(String),
    /// A field whose outer shape differs from the others'.
    #[error("field `{0}` has another shape")]
    FieldShape(String),
    /// Records larger than [`MAX_BYTES`].
    #[error("larger than {} MiB", MAX_BYTES >> 20)]
    TooLarge,
}

fn match_leaves(
    model: &Model,
    src: &str,
    ty: &str,
    members: &[(&str, Member)],
) -> std::result::Result<RecordVar, NotRebuilt> {
    let t = TypeDef::of_type_json(ty)?;
    let leaves = leaves(&t).ok_or(NotRebuilt::ComplexPair)?;
    if leaves.len() != members.len() {
        return Err(NotRebuilt::Fields {
            exported: members.len(),
            fields: leaves.len(),
        });
    }
    let mut outer: Option<Vec<u64>> = None;
    let mut out = Vec::with_capacity(leaves.len());
    for leaf in leaves {
        let name = format!("{src}{}", leaf.suffix);
        let &(_, m) = members
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| NotRebuilt::NoField(name.clone()))?;
        let (shape, strlen, dtype) = member_shape(model, m).ok_or(NotRebuilt::Malformed)?;
        let inner: Vec<u64> = leaf.inner.iter().map(|(d, _)| *d).collect();
        // A `char` leaf's last inner axis is its text's string length.
        let (value_inner, want_strlen) = match (leaf.kind, inner.split_last()) {
            (LeafKind::Char, Some((&l, rest))) => (rest.to_vec(), Some(l)),
            (LeafKind::Char, None) => (Vec::new(), None),
            (LeafKind::Numeric(_) | LeafKind::Str | LeafKind::Vlen(_), _) => (inner.clone(), None),
        };
        let ragged = matches!(m, Member::Ragged { .. });
        let fits = match leaf.kind {
            LeafKind::Numeric(e) => dtype == Some(e) && strlen.is_none() && !ragged,
            LeafKind::Vlen(e) => dtype == Some(e) && ragged,
            LeafKind::Char => dtype.is_none() && strlen == want_strlen,
            LeafKind::Str => dtype.is_none() && strlen.is_none(),
        };
        let k = shape
            .len()
            .checked_sub(value_inner.len())
            .filter(|&k| fits && shape[k..] == value_inner[..])
            .ok_or_else(|| NotRebuilt::FieldType(name.clone()))?;
        let o = shape[..k].to_vec();
        if outer.get_or_insert_with(|| o.clone()) != &o {
            return Err(NotRebuilt::FieldShape(name));
        }
        out.push((leaf, m));
    }
    let r = RecordVar {
        name: src.to_string(),
        ty: t,
        outer: outer.unwrap_or_default(),
        leaves: out,
    };
    match r.bytes() {
        Some(b) if b <= MAX_BYTES => Ok(r),
        _ => Err(NotRebuilt::TooLarge),
    }
}

/// What a compound variable takes from one of its fields.
struct Template<'m> {
    /// Its dimension names (the field's, outer axes first).
    names: Option<&'m Vec<String>>,
    /// The facts saying where its dimensions live and which are unlimited.
    dim_facts: &'m [Fact],
    /// The facts about its attributes.
    facts: &'m [Fact],
    attrs: &'m [(String, tet_source::AttrValue)],
    chunk: &'m [u64],
}

/// The [`Template`] of `r`: an array field's, else a text field's, else a ragged field's
/// (dims from its counts, attributes from its values).
fn template_of<'m>(r: &RecordVar, model: &'m Model, empty: &'m [Fact]) -> Result<Template<'m>> {
    let missing = || ExportError::Invalid(format!("`{}`: a field missing", r.name));
    Ok(match r.template().ok_or_else(missing)? {
        Member::Array(i) => {
            let a = model.arrays.get(i).ok_or_else(missing)?;
            Template {
                names: a.dims.as_ref(),
                dim_facts: &a.facts,
                facts: &a.facts,
                attrs: &a.attrs,
                chunk: &a.chunk_shape,
            }
        }
        Member::Ragged { values, count } => {
            let v = model.arrays.get(values).ok_or_else(missing)?;
            let c = model.arrays.get(count).ok_or_else(missing)?;
            Template {
                names: c.dims.as_ref(),
                dim_facts: &c.facts,
                facts: &v.facts,
                attrs: &v.attrs,
                chunk: &c.chunk_shape,
            }
        }
        Member::Text(i) => match model.text_variables.get(i).ok_or_else(missing)? {
            TextEntry::Variable(v) => Template {
                names: v.dims.as_ref(),
                dim_facts: &v.facts,
                facts: &v.facts,
                attrs: &v.attrs,
                chunk: &[],
            },
            TextEntry::Malformed { .. } => Template {
                names: None,
                dim_facts: empty,
                facts: empty,
                attrs: &[],
                chunk: &[],
            },
        },
    })
}

/// Defines compound variable `r` (dims, type, storage, attributes, fill mode) in its group.
pub(super) fn define(
    r: &RecordVar,
    model: &Model,
    ctx: &mut super::Defining<'_>,
) -> Result<(c_int, c_int)> {
    let (g, short) = split_group(&r.name);
    let gid = ctx.groups.ensure(g)?;
    let empty = Vec::new();
    let Template {
        names,
        dim_facts,
        facts,
        attrs,
        chunk,
    } = template_of(r, model, &empty)?;
    let rank = r.outer.len();
    let names: Option<Vec<String>> = names
        .and_then(|d| d.get(..rank))
        .map(<[String]>::to_vec)
        .filter(|_| rank > 0);
    let at = super::DimHomes::of(g, dim_facts);
    let unlimited = super::unlimited_of(dim_facts);
    let dimids = super::dim_ids(
        ctx.groups,
        ctx.dims,
        &at,
        short,
        &r.outer,
        names.as_ref(),
        unlimited,
    )?;
    let mut compounds = std::mem::take(&mut ctx.enums.compounds);
    let tid = compounds.id(compounds.root.unwrap_or(gid), &r.ty, ctx.enums);
    ctx.enums.compounds = compounds;
    let varid = nc(
        || format!("define compound variable `{}`", r.name),
        ffi::def_var(gid, &cname(short)?, tid?, &dimids),
    )?;
    let sized = !r.outer.is_empty() && !r.outer.contains(&0);
    if sized {
        let chunks = match chunk.get(..rank) {
            Some(c) => c.to_vec(),
            None => r.outer.clone(),
        };
        let at = super::StorageOf {
            name: &r.name,
            shape: &r.outer,
            chunk_shape: &chunks,
        };
        // No filters on values with `string` parts (netCDF-C refuses them).
        let compression = if r.ty.has_strings() {
            tet_source::export::Compression::None
        } else {
            ctx.compression
        };
        super::def_storage(&at, gid, varid, r.ty.size(), compression)?;
    }
    let hints = AttrHints::of(facts);
    let owner = super::Owner {
        gid,
        varid,
        what: format!("variable `{}`", r.name),
        hints: &hints,
    };
    let mut has_fill = false;
    for (k, v) in attrs {
        if k == "_FillValue" {
            if hints.record(k).is_none() {
                ctx.warnings.push(format!(
                    "`{}`: _FillValue {v:?} is not of its compound type; left out",
                    r.name
                ));
                continue;
            }
            has_fill = true;
        }
        ctx.var_attr(&owner, &r.name, k, v)?;
    }
    // (Values with `string` parts keep the fill: HDF5 cannot leave them unset.)
    if !has_fill && sized && !r.ty.has_strings() {
        nc(
            || format!("fill mode of variable `{}`", r.name),
            ffi::def_var_fill_off(gid, varid),
        )?;
    }
    Ok((gid, varid))
}

/// Where element `idx` (outer axes, then the leaf's inner axes; fewer inner ones: index 0)
/// of `leaf` is in the records of a variable of shape `outer` with records of `size` bytes.
fn place(outer: &[u64], size: usize, leaf: &LeafDef, idx: &[u64]) -> Option<usize> {
    let (o, inner) = idx.split_at(outer.len());
    let rec = o
        .iter()
        .zip(outer)
        .try_fold(0u64, |a, (&i, &d)| a.checked_mul(d)?.checked_add(i))?;
    let mut off = usize::try_from(rec).ok()?.checked_mul(size)?;
    off = off.checked_add(leaf.offset)?;
    for (&i, &(_, stride)) in inner.iter().zip(&leaf.inner) {
        off = off.checked_add(usize::try_from(i).ok()?.checked_mul(stride)?)?;
    }
    Some(off)
}

/// Calls `f(k, index)` for each element `k` of the box `start..start+count`, in C order.
pub(super) fn for_each_index(
    start: &[u64],
    count: &[u64],
    mut f: impl FnMut(usize, &[u64]) -> Result<()>,
) -> Result<()> {
    if count.contains(&0) {
        return Ok(());
    }
    let mut idx = start.to_vec();
    let mut k = 0usize;
    loop {
        f(k, &idx)?;
        k = k.saturating_add(1);
        // The next index, last axis fastest.
        let mut axis = idx.len();
        loop {
            if axis == 0 {
                return Ok(());
            }
            axis -= 1;
            idx[axis] = idx[axis].saturating_add(1);
            if idx[axis] < start[axis].saturating_add(count[axis]) {
                break;
            }
            idx[axis] = start[axis];
        }
    }
}

/// Places the values of `string` leaf `leaf` (text variable `v`, its values' bytes `values`) in
/// the records `buf` as pointers to NUL-terminated copies, kept in `strings`.
fn put_strings(
    r: &RecordVar,
    leaf: &LeafDef,
    v: &TextVariable,
    values: Vec<Vec<u8>>,
    buf: &mut [u8],
    strings: &mut Vec<CString>,
) -> Result<()> {
    const P: usize = std::mem::size_of::<usize>();
    let zeros = vec![0u64; v.shape.len()];
    let mut values = values.into_iter();
    for_each_index(&zeros, &v.shape, |_, idx| {
        let s = CString::new(values.next().unwrap_or_default())
            .map_err(|_| ExportError::Data(format!("`{}`: a string holds a NUL byte", v.name)))?;
        let dst = place(&r.outer, r.ty.size(), leaf, idx).and_then(|d| buf.get_mut(d..d + P));
        let d = dst.ok_or_else(|| {
            ExportError::Invalid(format!("`{}`: a field outside its records", r.name))
        })?;
        d.copy_from_slice(&(s.as_ptr() as usize).to_ne_bytes());
        strings.push(s);
        Ok(())
    })
}

/// A vlen field's ragged array: its values' name, its shape (the count array's) and the
/// bytes of one value.
struct Ragged<'a> {
    name: &'a str,
    shape: &'a [u64],
    size: usize,
}

/// Places the sequences of vlen leaf `leaf` (ragged array `f`: native-endian values `values`,
/// little-endian `i64` counts `counts`, one per element in C order) in the records `buf` as
/// `nc_vlen_t`s pointing into `values`, which the caller keeps alive until they are written.
fn put_vlens(
    r: &RecordVar,
    leaf: &LeafDef,
    f: &Ragged<'_>,
    values: &[u8],
    counts: &[u8],
    buf: &mut [u8],
) -> Result<()> {
    const P: usize = std::mem::size_of::<usize>();
    let bad = |why: &str| ExportError::Data(format!("ragged array `{}`: {why}", f.name));
    let zeros = vec![0u64; f.shape.len()];
    let mut at = 0usize;
    for_each_index(&zeros, f.shape, |k, idx| {
        let c = k
            .checked_mul(8)
            .and_then(|s| counts.get(s..s.checked_add(8)?))
            .ok_or_else(|| bad("fewer counts than elements"))?;
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        let n = usize::try_from(i64::from_le_bytes(b)).map_err(|_| bad("a negative count"))?;
        let end = n
            .checked_mul(f.size)
            .and_then(|l| at.checked_add(l))
            .filter(|&end| end <= values.len())
            .ok_or_else(|| bad("its counts sum to more than its values"))?;
        let p = values[at..end].as_ptr() as usize;
        at = end;
        let dst = place(&r.outer, r.ty.size(), leaf, idx).and_then(|d| buf.get_mut(d..d + 2 * P));
        let d = dst.ok_or_else(|| {
            ExportError::Invalid(format!("`{}`: a field outside its records", r.name))
        })?;
        // `nc_vlen_t`: the length (a `size_t`), then the pointer.
        d[..P].copy_from_slice(&n.to_ne_bytes());
        d[P..].copy_from_slice(&p.to_ne_bytes());
        Ok(())
    })?;
    if at != values.len() {
        return Err(bad("its counts sum to fewer than its values"));
    }
    Ok(())
}

/// Writes the records of compound variable `r` (defined as `gid`/`varid`), assembled from its
/// fields' values.
pub(super) fn write(
    r: &RecordVar,
    model: &Model,
    chunks: &mut dyn ChunkSource,
    (gid, varid): (c_int, c_int),
) -> Result<()> {
    let size = r.ty.size();
    let total = r
        .bytes()
        .ok_or_else(|| ExportError::Invalid(format!("`{}`: too large", r.name)))?;
    if total == 0 {
        return Ok(());
    }
    let mut buf = vec![0u8; total];
    let mut tmp = Vec::new();
    // The `string` fields' values and the vlen fields' sequences, alive until the records
    // are written.
    let mut strings: Vec<CString> = Vec::new();
    let mut sequences: Vec<Vec<u8>> = Vec::new();
    let outside = || ExportError::Invalid(format!("`{}`: a field outside its records", r.name));
    for (leaf, m) in &r.leaves {
        match *m {
            Member::Array(i) => {
                let a = model.arrays.get(i).ok_or_else(outside)?;
                let elem = a.dtype.size();
                for coords in a.chunk_coords() {
                    let c = chunks.chunk(i, &coords)?;
                    let bytes = super::native(a.dtype, c.bytes, &mut tmp);
                    for_each_index(&c.start, &c.count, |k, idx| {
                        let src = k
                            .checked_mul(elem)
                            .and_then(|s| bytes.get(s..s.checked_add(elem)?));
                        let dst = place(&r.outer, size, leaf, idx)
                            .and_then(|d| buf.get_mut(d..d.checked_add(elem)?));
                        let (Some(s), Some(d)) = (src, dst) else {
                            return Err(outside());
                        };
                        d.copy_from_slice(s);
                        Ok(())
                    })?;
                }
            }
            Member::Ragged { values, count } => {
                let v = model.arrays.get(values).ok_or_else(outside)?;
                let c = model.arrays.get(count).ok_or_else(outside)?;
                let le = super::ragged::gather(model, chunks, values)?;
                let seq = super::native(v.dtype, &le, &mut tmp).to_vec();
                let counts = super::ragged::gather(model, chunks, count)?;
                let field = Ragged {
                    name: &v.name,
                    shape: &c.shape,
                    size: v.dtype.size(),
                };
                put_vlens(r, leaf, &field, &seq, &counts, &mut buf)?;
                sequences.push(seq);
            }
            Member::Text(i) => {
                let Some(TextEntry::Variable(v)) = model.text_variables.get(i) else {
                    continue;
                };
                let what = || format!("string variable `{}`", v.name);
                let values = TextHints::of(&v.facts).bytes(&v.values, &what)?;
                if leaf.kind == LeafKind::Str {
                    put_strings(r, leaf, v, values, &mut buf, &mut strings)?;
                    continue;
                }
                let strlen = leaf.inner.last().map_or(1, |&(l, _)| l);
                let strlen = usize::try_from(strlen).map_err(|_| outside())?;
                let zeros = vec![0u64; v.shape.len()];
                for_each_index(&zeros, &v.shape, |k, idx| {
                    let s = values.get(k).map_or(&[][..], Vec::as_slice);
                    let n = s.len().min(strlen);
                    let dst = place(&r.outer, size, leaf, idx)
                        .and_then(|d| buf.get_mut(d..d.checked_add(n)?));
                    let d = dst.ok_or_else(outside)?;
                    d.copy_from_slice(&s[..n]);
                    Ok(())
                })?;
            }
        }
    }
    let count: Vec<usize> = r
        .outer
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| outside())?;
    nc(
        || format!("write compound variable `{}`", r.name),
        ffi::put_vara(gid, varid, &vec![0; count.len()], &count, &buf),
    )
}
