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
//! A ragged array whose count array carries [`Fact::Ragged`] itself (a vlen of vlens, see
//! `crate::ragged`) is one variable of a vlen of a vlen type (the count array's recorded type
//! name, else `<short>_vlen_vlen_t`) with the dims of the count array's count array; ragged
//! text (a string variable with [`Fact::Ragged`]) is one variable of a vlen of `string`.
//!
//! A `u8` array with [`Fact::Opaque`] is a variable of that opaque type (its recorded name,
//! else `<short>_opaque_t`; the size its trailing axis) without the trailing axis.

use std::collections::HashSet;
use std::ffi::{c_int, CString};

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
    /// A vlen of vlens: the count array's own count array (one count of inner sequences per
    /// element) and the outer type's name; the variable takes its dims.
    pub outer: Option<(usize, String)>,
}

/// A vlen-of-strings variable to rebuild from ragged text: the string variable (its index in
/// the model's text variables), the count array, the type's name.
#[derive(Debug, Clone)]
pub(crate) struct TextVlen {
    pub text: usize,
    pub count: usize,
    pub type_name: String,
}

/// The count array and type name of a ragged array's facts.
fn ragged_fact(facts: &[Fact]) -> Option<(&String, &String)> {
    facts.iter().find_map(|f| match f {
        Fact::Ragged { count, type_name } => Some((count, type_name)),
        _ => None,
    })
}

/// Why the count array `count` (found at `found`) cannot rebuild a vlen of `values_bytes`
/// bytes of values; `None` when it can.
fn count_problem(
    model: &Model,
    count: &str,
    found: Option<usize>,
    values_bytes: Option<usize>,
) -> Option<String> {
    match found.map(|c| &model.arrays[c]) {
        None => Some(format!("its count array `{count}` is not exported")),
        Some(c) if c.dtype != ElementType::I64 => {
            Some(format!("its count array `{count}` is no i64 array"))
        }
        Some(c)
            if bytes(&c.shape, 8)
                .zip(values_bytes)
                .is_none_or(|(x, y)| x.checked_add(y).is_none_or(|t| t > MAX_BYTES)) =>
        {
            Some(format!("larger than {} MiB", MAX_BYTES >> 20))
        }
        Some(_) => None,
    }
}

/// The ragged text variables of `model` that become vlen-of-string variables; `warnings` gets
/// why others stay a string variable and a count array.
pub(crate) fn plan_text(model: &Model, warnings: &mut Vec<String>) -> Vec<TextVlen> {
    let mut out = Vec::new();
    for (i, t) in model.text_variables.iter().enumerate() {
        let tet_source::export::TextEntry::Variable(t) = t else {
            continue;
        };
        let Some((count, type_name)) = ragged_fact(&t.facts) else {
            continue;
        };
        let found = model.arrays.iter().position(|c| &c.name == count);
        let text_bytes = t
            .values
            .iter()
            .try_fold(0usize, |a, v| a.checked_add(v.len()));
        let nested = found.is_some_and(|c| ragged_fact(&model.arrays[c].facts).is_some());
        let why = if nested {
            Some(format!("its count array `{count}` is ragged itself"))
        } else if t.shape.len() != 1 {
            Some("it is not 1-D".to_string())
        } else {
            count_problem(model, count, found, text_bytes)
        };
        match (why, found) {
            (None, Some(c)) => out.push(TextVlen {
                text: i,
                count: c,
                type_name: type_name.clone(),
            }),
            (why, _) => warnings.push(format!(
                "ragged text `{}` exported as its strings and counts: {}",
                t.name,
                why.unwrap_or_default()
            )),
        }
    }
    out
}

/// The ragged arrays of `model` that become vlen variables; `warnings` gets why others stay
/// plain. A ragged array whose count array is ragged itself (a vlen of vlens) is one variable
/// of a vlen of a vlen type; that count array is then no variable of its own.
pub(crate) fn plan(model: &Model, warnings: &mut Vec<String>) -> Vec<VlenVar> {
    let mut out = Vec::new();
    let position = |name: &str| model.arrays.iter().position(|c| c.name == name);
    // Count arrays of other ragged arrays (the middle level of a vlen of vlens).
    let counts: HashSet<&str> = model
        .arrays
        .iter()
        .filter_map(|a| ragged_fact(&a.facts).map(|(c, _)| c.as_str()))
        .collect();
    for (i, a) in model.arrays.iter().enumerate() {
        let Some((count, type_name)) = ragged_fact(&a.facts) else {
            continue;
        };
        if counts.contains(a.name.as_str()) {
            continue;
        }
        let found = position(count);
        let values_bytes = bytes(&a.shape, a.dtype.size());
        let outer = found.and_then(|c| ragged_fact(&model.arrays[c].facts));
        let mut why = if a.shape.len() == 1 {
            count_problem(model, count, found, values_bytes)
        } else {
            Some("its values are arrays (netCDF has no vlen of arrays)".to_string())
        };
        let mut nested = None;
        if let (None, Some((cc, outer_type))) = (&why, outer) {
            let at = position(cc);
            let middle = found.and_then(|c| bytes(&model.arrays[c].shape, 8));
            why = count_problem(
                model,
                cc,
                at,
                values_bytes.zip(middle).and_then(|(x, y)| x.checked_add(y)),
            );
            if let Some(at) = at {
                nested = Some((at, outer_type.clone()));
            }
        }
        match (why, found) {
            (None, Some(c)) => out.push(VlenVar {
                values: i,
                count: c,
                type_name: type_name.clone(),
                outer: nested,
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
    let mut tid = ctx.enums.vlen(gid, &type_name, base)?;
    let mut c = c;
    if let Some((cc, outer_name)) = &r.outer {
        c = &model.arrays[*cc];
        let outer_name = if outer_name.is_empty() {
            format!("{short}_vlen_vlen_t")
        } else {
            outer_name.clone()
        };
        tid = ctx.enums.vlen(gid, &outer_name, tid)?;
    }
    let var = VlenVarParts {
        name: &a.name,
        facts: &a.facts,
        attrs: &a.attrs,
    };
    define_var(ctx, (gid, g, short), c, tid, &var)
}

/// What a vlen variable takes from the dataset it is exported from: its name, facts and
/// attributes (its dims are the count array's).
struct VlenVarParts<'m> {
    name: &'m str,
    facts: &'m [Fact],
    attrs: &'m tet_source::Attrs,
}

/// Defines a vlen variable of type `tid` in group `gid` (path `g`, short name `short`) over the
/// dims of the count array `c`, with `var`'s attributes (its _FillValue left out, with a
/// warning: netCDF has none for vlens).
fn define_var(
    ctx: &mut super::Defining<'_>,
    (gid, g, short): (c_int, &str, &str),
    c: &tet_source::export::Array,
    tid: c_int,
    var: &VlenVarParts<'_>,
) -> Result<(c_int, c_int)> {
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
        || format!("define vlen variable `{}`", var.name),
        ffi::def_var(gid, &cname(short)?, tid, &dimids),
    )?;
    let hints = super::AttrHints::of(var.facts);
    let owner = super::Owner {
        gid,
        varid,
        what: format!("variable `{}`", var.name),
        hints: &hints,
    };
    for (k, v) in var.attrs {
        if k == "_FillValue" {
            ctx.warnings.push(format!(
                "`{}`: the _FillValue of a vlen variable is not written",
                var.name
            ));
            continue;
        }
        ctx.var_attr(&owner, var.name, k, v)?;
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
    let c = match &r.outer {
        Some((cc, _)) => &model.arrays[*cc],
        None => &model.arrays[r.count],
    };
    let le = gather(model, chunks, r.values)?;
    let mut tmp = Vec::new();
    let values = super::native(a.dtype, &le, &mut tmp);
    let counts = gather(model, chunks, r.count)?;
    let size = a.dtype.size();
    let bad = |why: &str| ExportError::Data(format!("ragged array `{}`: {why}", a.name));
    let inner = vlens(&counts, values, size, &bad)?;
    match &r.outer {
        None => put_vlens(c, (gid, varid), &inner, &bad, &a.name),
        Some((cc, _)) => {
            // A vlen of vlens: the outer vlens point into the inner ones.
            let outer_counts = gather(model, chunks, *cc)?;
            let outer = vlens(
                &outer_counts,
                vlen_bytes(&inner),
                std::mem::size_of::<nc::nc_vlen_t>(),
                &bad,
            )?;
            put_vlens(c, (gid, varid), &outer, &bad, &a.name)
        }
    }
}

/// The native bytes of `vl`.
fn vlen_bytes(vl: &[nc::nc_vlen_t]) -> &[u8] {
    // SAFETY: `nc_vlen_t` is a plain `repr(C)` pair of a length and a pointer without padding;
    // its bytes are read only.
    unsafe { std::slice::from_raw_parts(vl.as_ptr().cast::<u8>(), std::mem::size_of_val(vl)) }
}

/// The `nc_vlen_t` of each count of `counts` (`i64` little-endian) over `values` (whole
/// values of `size` bytes, one run per count, in order); the pointers point into `values`,
/// which must outlive the write.
fn vlens(
    counts: &[u8],
    values: &[u8],
    size: usize,
    bad: &dyn Fn(&str) -> ExportError,
) -> Result<Vec<nc::nc_vlen_t>> {
    let mut vl = Vec::with_capacity(counts.len() / 8);
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
        vl.push(nc::nc_vlen_t {
            len: n,
            p: values[at..end].as_ptr().cast_mut().cast(),
        });
        at = end;
    }
    if at != values.len() {
        return Err(bad("its counts sum to fewer than its values"));
    }
    Ok(vl)
}

/// Writes `vl` as the whole of vlen variable `gid`/`varid`, whose shape is count array `c`'s.
fn put_vlens(
    c: &tet_source::export::Array,
    (gid, varid): (c_int, c_int),
    vl: &[nc::nc_vlen_t],
    bad: &dyn Fn(&str) -> ExportError,
    name: &str,
) -> Result<()> {
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
        || format!("write vlen variable `{name}`"),
        ffi::put_vara(gid, varid, &vec![0; count.len()], &count, vlen_bytes(vl)),
    )
}

/// Defines the vlen-of-strings variable `r` (type, the count array's dims, the string
/// variable's attributes) in its group.
pub(super) fn define_text(
    r: &TextVlen,
    model: &Model,
    ctx: &mut super::Defining<'_>,
) -> Result<(c_int, c_int)> {
    let tet_source::export::TextEntry::Variable(t) = &model.text_variables[r.text] else {
        return Err(ExportError::Invalid("ragged text is malformed".into()));
    };
    let c = &model.arrays[r.count];
    let (g, short) = tet_source::export::split_group(&t.name);
    let gid = ctx.groups.ensure(g)?;
    let type_name = if r.type_name.is_empty() {
        format!("{short}_vlen_t")
    } else {
        r.type_name.clone()
    };
    let tid = ctx.enums.vlen(gid, &type_name, nc::NC_STRING)?;
    let var = VlenVarParts {
        name: &t.name,
        facts: &t.facts,
        attrs: &t.attrs,
    };
    define_var(ctx, (gid, g, short), c, tid, &var)
}

/// Writes the vlen-of-strings variable `r` (defined as `gid`/`varid`) from its strings and
/// counts.
pub(super) fn write_text(
    r: &TextVlen,
    model: &Model,
    chunks: &mut dyn ChunkSource,
    ids: (c_int, c_int),
) -> Result<()> {
    let tet_source::export::TextEntry::Variable(t) = &model.text_variables[r.text] else {
        return Err(ExportError::Invalid("ragged text is malformed".into()));
    };
    let what = || format!("ragged text `{}`", t.name);
    let strings: Vec<CString> = super::TextHints::of(&t.facts)
        .bytes(&t.values, &what)?
        .into_iter()
        .map(|b| super::c_bytes(b, &what))
        .collect::<Result<_>>()?;
    let ptrs: Vec<*const std::ffi::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
    // SAFETY: viewing the pointers (plain integers here) as their native bytes; `ptrs` and
    // `strings` outlive the write below, which only reads through them.
    let ptr_bytes = unsafe {
        std::slice::from_raw_parts(
            ptrs.as_ptr().cast::<u8>(),
            std::mem::size_of_val(ptrs.as_slice()),
        )
    };
    let counts = gather(model, chunks, r.count)?;
    let bad = |why: &str| ExportError::Data(format!("ragged text `{}`: {why}", t.name));
    let vl = vlens(&counts, ptr_bytes, std::mem::size_of::<usize>(), &bad)?;
    put_vlens(&model.arrays[r.count], ids, &vl, &bad, &t.name)
}
