//! Ragged and opaque variables written as netCDF-4 vlen and opaque variables again.
//!
//! An array with [`Fact::Ragged`] (a CF contiguous ragged array: the values, and the count
//! array it names, one count per element) is one variable of a vlen type again: the type
//! (its recorded name, else `<short>_vlen_t`; over the values' enum type when they carry one)
//! is defined in the variable's group, the variable takes the count array's dims and the
//! values array's attributes. Values and counts are gathered in memory (at most
//! [`MAX_BYTES`]), checked (counts not negative, summing to the values' length) and written
//! in one `nc_put_vara`. A ragged array whose count array is not exported, is no `i64` array,
//! or is larger stays two plain variables, with a warning.
//!
//! A `u8` array with [`Fact::Opaque`] is a variable of that opaque type (its recorded name,
//! else `<short>_opaque_t`; the size its trailing axis) without the trailing axis.

use std::ffi::c_int;

use tet_source::export::{ChunkSource, ExportError, Model, Result};
use tet_source::{ElementType, Fact};

use super::records::for_each_index;
use super::{cname, nc};
use crate::ffi;

/// Largest ragged variable (values and counts) rebuilt.
pub(crate) const MAX_BYTES: usize = 256 << 20;

/// A vlen variable to rebuild: the values array, the count array, the type's name.
#[derive(Debug, Clone)]
pub(crate) struct VlenVar {
    pub values: usize,
    pub count: usize,
    pub type_name: String,
}

/// The ragged arrays of `model` that become vlen variables; `warnings` gets why others stay
/// plain.
pub(crate) fn plan(model: &Model, warnings: &mut Vec<String>) -> Vec<VlenVar> {
    let mut out = Vec::new();
    for (i, a) in model.arrays.iter().enumerate() {
        let Some((count, type_name)) = a.facts.iter().find_map(|f| match f {
            Fact::Ragged { count, type_name } => Some((count, type_name)),
            _ => None,
        }) else {
            continue;
        };
        let found = model.arrays.iter().position(|c| &c.name == count);
        let why = match found.map(|c| &model.arrays[c]) {
            None => Some(format!("its count array `{count}` is not exported")),
            Some(c) if c.dtype != ElementType::I64 => {
                Some(format!("its count array `{count}` is no i64 array"))
            }
            Some(c)
                if bytes(&c.shape, 8)
                    .zip(bytes(&a.shape, a.dtype.size()))
                    .is_none_or(|(x, y)| x.checked_add(y).is_none_or(|t| t > MAX_BYTES)) =>
            {
                Some(format!("larger than {} MiB", MAX_BYTES >> 20))
            }
            Some(_) => None,
        };
        match (why, found) {
            (None, Some(c)) => out.push(VlenVar {
                values: i,
                count: c,
                type_name: type_name.clone(),
            }),
            (why, _) => warnings.push(format!(
                "ragged array `{}` exported as its values and counts: {}",
                a.name,
                why.unwrap_or_default()
            )),
        }
    }
    out
}

fn bytes(shape: &[u64], elem: usize) -> Option<usize> {
    let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
    usize::try_from(n).ok()?.checked_mul(elem)
}

/// The opaque type name of array `a` when it holds opaque values (`u8` with a trailing axis).
pub(crate) fn opaque_of(a: &tet_source::export::Array) -> Option<String> {
    let name = a.facts.iter().find_map(|f| match f {
        Fact::Opaque { type_name } => Some(type_name.clone()),
        _ => None,
    })?;
    let ok = a.dtype == ElementType::U8 && !a.shape.is_empty();
    ok.then(|| {
        if name.is_empty() {
            format!("{}_opaque_t", a.split_name().1)
        } else {
            name
        }
    })
}

/// Defines vlen variable `r` (type, dims, attributes) in its group.
pub(super) fn define(
    r: &VlenVar,
    model: &Model,
    ctx: &mut super::Defining<'_>,
) -> Result<(c_int, c_int)> {
    let a = &model.arrays[r.values];
    let c = &model.arrays[r.count];
    let (g, short) = a.split_name();
    let gid = ctx.groups.ensure(g)?;
    let base = match super::enum_of(a, a.dtype) {
        Some(e) => ctx.enums.id(gid, &e)?,
        None => super::xtype(a.dtype).ok_or_else(|| {
            ExportError::Invalid(format!("`{}`: netCDF has no {} type", a.name, a.dtype))
        })?,
    };
    let type_name = if r.type_name.is_empty() {
        format!("{short}_vlen_t")
    } else {
        r.type_name.clone()
    };
    let tid = ctx.enums.vlen(gid, &type_name, base)?;
    let at = super::DimHomes::of(g, &c.facts);
    let dimids = super::dim_ids(
        ctx.groups,
        ctx.dims,
        &at,
        short,
        &c.shape,
        c.dims.as_ref(),
        &c.unlimited_dims,
    )?;
    let varid = nc(
        || format!("define vlen variable `{}`", a.name),
        ffi::def_var(gid, &cname(short)?, tid, &dimids),
    )?;
    let hints = super::AttrHints::of(&a.facts);
    let owner = super::Owner {
        gid,
        varid,
        what: format!("variable `{}`", a.name),
        hints: &hints,
    };
    for (k, v) in &a.attrs {
        if k == "_FillValue" {
            ctx.warnings.push(format!(
                "`{}`: the _FillValue of a vlen variable is not written",
                a.name
            ));
            continue;
        }
        ctx.var_attr(&owner, &a.name, k, v)?;
    }
    Ok((gid, varid))
}

/// The whole of array `i` in C order, little-endian.
pub(super) fn gather(model: &Model, chunks: &mut dyn ChunkSource, i: usize) -> Result<Vec<u8>> {
    let a = &model.arrays[i];
    let elem = a.dtype.size();
    let outside = || ExportError::Invalid(format!("`{}`: a chunk outside the array", a.name));
    let total = bytes(&a.shape, elem).ok_or_else(outside)?;
    let mut buf = vec![0u8; total];
    for coords in a.chunk_coords() {
        let c = chunks.chunk(i, &coords)?;
        for_each_index(&c.start, &c.count, |k, idx| {
            let at = idx
                .iter()
                .zip(&a.shape)
                .try_fold(0u64, |o, (&x, &d)| o.checked_mul(d)?.checked_add(x))
                .and_then(|o| usize::try_from(o).ok()?.checked_mul(elem));
            let src = k.checked_mul(elem).and_then(|s| c.bytes.get(s..s + elem));
            let dst = at.and_then(|d| buf.get_mut(d..d + elem));
            let (Some(s), Some(d)) = (src, dst) else {
                return Err(outside());
            };
            d.copy_from_slice(s);
            Ok(())
        })?;
    }
    Ok(buf)
}

/// Writes vlen variable `r` (defined as `gid`/`varid`) from its values and counts.
pub(super) fn write(
    r: &VlenVar,
    model: &Model,
    chunks: &mut dyn ChunkSource,
    (gid, varid): (c_int, c_int),
) -> Result<()> {
    let a = &model.arrays[r.values];
    let c = &model.arrays[r.count];
    let le = gather(model, chunks, r.values)?;
    let mut tmp = Vec::new();
    let values = super::native(a.dtype, &le, &mut tmp);
    let counts = gather(model, chunks, r.count)?;
    let size = a.dtype.size();
    let bad = |why: &str| ExportError::Data(format!("ragged array `{}`: {why}", a.name));
    let mut vl = Vec::with_capacity(counts.len() * 2);
    let mut at = 0usize;
    for e in counts.chunks_exact(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(e);
        let n = usize::try_from(i64::from_le_bytes(b)).map_err(|_| bad("a negative count"))?;
        let end = n
            .checked_mul(size)
            .and_then(|l| at.checked_add(l))
            .filter(|&end| end <= values.len())
            .ok_or_else(|| bad("its counts sum to more than its values"))?;
        let p = values[at..end].as_ptr() as usize;
        vl.extend_from_slice(&n.to_ne_bytes());
        vl.extend_from_slice(&p.to_ne_bytes());
        at = end;
    }
    if at != values.len() {
        return Err(bad("its counts sum to fewer than its values"));
    }
    let count: Vec<usize> = c
        .shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| bad("too large"))?;
    if count.contains(&0) {
        return Ok(());
    }
    nc(
        || format!("write vlen variable `{}`", a.name),
        ffi::put_vara(gid, varid, &vec![0; count.len()], &count, &vl),
    )
}
