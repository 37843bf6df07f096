//! A plain view of a netCDF file as netCDF-C reports it — every group's dimensions (length,
//! unlimited), variables (netCDF type, dimensions, raw values) and attributes (netCDF type, raw
//! values) — with no decoding at all: `char` values are their bytes, `string` values their
//! byte strings, numbers (and compound records without `string` or vlen parts) their native
//! bytes. What the importer maps (text decoded, types
//! recorded as facts) shows here as the file has it, so two files can be compared exactly (an
//! export with its source). Values of types with vlen or `string` parts are not read, except
//! vlens of numbers or enums (each element's values).

use std::collections::HashMap;
use std::ffi::c_int;
use std::path::Path;

use netcdf_sys as nc;
use tet_source::{Part, Result, SourceError};

use crate::user::{self, NcType};
use crate::values::join;
use crate::{ffi, is_hidden_attr, MAX_GROUPS};

/// Values as the file holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawValues {
    /// `char` bytes, or numbers (enum codes included) as native-endian bytes, in C order.
    Bytes(Vec<u8>),
    /// `string` values in C order (`None`: a null string).
    Strings(Vec<Option<Vec<u8>>>),
    /// Values of a vlen type of numbers or enums: each element's values as native-endian
    /// bytes, in C order; or of a compound type with `string` or vlen parts: each record's
    /// bytes with those parts' pointers zeroed, then each string's bytes followed by a NUL and
    /// each sequence's length (8 little-endian bytes) followed by its values.
    Ragged(Vec<Vec<u8>>),
    /// Values of another type with vlen or `string` parts: not read.
    NotRead,
}

/// One attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrDump {
    /// Its name.
    pub name: String,
    /// Its netCDF type: `char`, `string`, `i8` … `f64`, or a user type's JSON (its class, name
    /// and definition).
    pub xtype: String,
    /// Its values.
    pub values: RawValues,
}

/// One dimension of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DimDump {
    /// Its name.
    pub name: String,
    /// Its current length.
    pub len: u64,
    /// Whether it is unlimited.
    pub unlimited: bool,
}

/// One variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarDump {
    /// Its name.
    pub name: String,
    /// Its netCDF type (as [`AttrDump::xtype`]).
    pub xtype: String,
    /// Its dimensions' names; a dimension of another group (an ancestor's) as its full path
    /// (`/x`, `/g1/dim`), as `ncdump` writes it, so that which dimension is used shows.
    pub dims: Vec<String>,
    /// Its attributes, in file order (the library's hidden ones left out).
    pub attrs: Vec<AttrDump>,
    /// Its values.
    pub values: RawValues,
}

/// One group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDump {
    /// Its path: group names joined with `/`, empty for the root group.
    pub path: String,
    /// Its own dimensions, in id order.
    pub dims: Vec<DimDump>,
    /// Its variables, in file order.
    pub vars: Vec<VarDump>,
    /// Its attributes, in file order (the library's hidden ones left out).
    pub attrs: Vec<AttrDump>,
}

/// Every group of a file, the root first, then depth-first in the library's order.
pub fn dump(path: &Path) -> Result<Vec<GroupDump>> {
    ffi::locked(|| {
        let handle = ffi::Handle::open_path(path)?;
        let limit = std::fs::metadata(path)?.len().max(64);
        let mut out = Vec::new();
        let mut owners = HashMap::new();
        let mut stack = vec![(handle.ncid(), String::new())];
        while let Some((g, path)) = stack.pop() {
            if out.len() >= MAX_GROUPS {
                return Err(Part::Metadata.malformed(format!("more than {MAX_GROUPS} groups")));
            }
            for d in ffi::own_dimids(g)? {
                owners.insert(d, path.clone());
            }
            out.push(group(g, &path, &owners, limit)?);
            for &k in ffi::groups(g)?.iter().rev() {
                stack.push((k, join(&path, &ffi::group_name(k)?)));
            }
        }
        Ok(out)
    })
}

/// Group `g` at `path`; `owners`: the path of the group defining each dimension seen so far.
fn group(g: c_int, path: &str, owners: &HashMap<c_int, String>, limit: u64) -> Result<GroupDump> {
    let unlimited = ffi::unlimdims(g)?;
    let dims = ffi::own_dimids(g)?
        .into_iter()
        .map(|d| {
            let (name, len) = ffi::dim(g, d)?;
            Ok(DimDump {
                name,
                len,
                unlimited: unlimited.contains(&d),
            })
        })
        .collect::<Result<_>>()?;
    let vars = ffi::varids(g)?
        .into_iter()
        .map(|v| var(g, v, path, owners, limit))
        .collect::<Result<_>>()?;
    Ok(GroupDump {
        path: path.to_string(),
        dims,
        vars,
        attrs: attrs(g, nc::NC_GLOBAL, limit)?,
    })
}

/// The type's name, and whether its values are plain bytes (`char`, numbers, enums, compounds
/// and opaque values without `string` or vlen parts) or strings.
fn type_of(g: c_int, xtype: c_int, limit: u64) -> Result<(String, Option<bool>)> {
    Ok(match user::analyze(g, xtype, limit)? {
        NcType::Char => ("char".into(), Some(true)),
        NcType::Str => ("string".into(), Some(false)),
        NcType::Atomic(t) => (t.name().into(), Some(true)),
        t @ NcType::Enum(_) => (t.json(), Some(true)),
        // Compound and opaque values without allocated parts are their bytes too.
        t => (t.json(), (!t.indirect()).then_some(true)),
    })
}

fn var(
    g: c_int,
    varid: c_int,
    path: &str,
    owners: &HashMap<c_int, String>,
    limit: u64,
) -> Result<VarDump> {
    let info = ffi::var_info(g, varid)?;
    let mut dims = Vec::with_capacity(info.dimids.len());
    let mut shape = Vec::with_capacity(info.dimids.len());
    for &d in &info.dimids {
        let (name, len) = ffi::dim(g, d)?;
        match owners.get(&d) {
            Some(owner) if owner != path => dims.push(format!("/{}", join(owner, &name))),
            _ => dims.push(name),
        }
        shape.push(usize::try_from(len).map_err(|_| too_large(&info.name))?);
    }
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| too_large(&info.name))?;
    let (xtype, plain) = type_of(g, info.xtype, limit)?;
    let values = match plain {
        Some(true) => {
            let size = ffi::type_size_of(g, info.xtype)?;
            let bytes = n.checked_mul(size).ok_or_else(|| too_large(&info.name))?;
            if bytes as u64 > limit.saturating_mul(1024) {
                return Err(too_large(&info.name));
            }
            let mut buf = vec![0u8; bytes];
            if bytes > 0 {
                ffi::get_vara(g, varid, &vec![0; shape.len()], &shape, &mut buf)?;
            }
            RawValues::Bytes(buf)
        }
        Some(false) => RawValues::Strings(ffi::get_var_strings(g, varid, &shape, n)?),
        None => ragged(g, varid, info.xtype, &shape, n, limit)?,
    };
    Ok(VarDump {
        attrs: attrs(g, varid, limit)?,
        name: info.name,
        xtype,
        dims,
        values,
    })
}

/// The values of a vlen variable of numbers or enums ([`RawValues::Ragged`]); others are
/// not read.
fn ragged(
    g: c_int,
    varid: c_int,
    xtype: c_int,
    shape: &[usize],
    n: usize,
    limit: u64,
) -> Result<RawValues> {
    let ty = user::analyze(g, xtype, limit)?;
    if let NcType::Compound { .. } = &ty {
        return records_with_strings(g, varid, &ty, shape, n);
    }
    let NcType::Vlen { base, .. } = &ty else {
        return Ok(RawValues::NotRead);
    };
    if !matches!(**base, NcType::Atomic(_) | NcType::Enum(_)) {
        return Ok(RawValues::NotRead);
    }
    let mut rec = user::Records::new(&ty, n)?;
    if n > 0 {
        ffi::get_vara(g, varid, &vec![0; shape.len()], shape, rec.fill())?;
        rec.arm();
    }
    let size = ty.size();
    // SAFETY: record k holds a vlen of `base` netCDF just read.
    let values = (0..n)
        .map(|k| unsafe { rec.vlen_values(k * size, base) }.to_vec())
        .collect();
    Ok(RawValues::Ragged(values))
}

/// The records of a compound variable with `string` or vlen-of-numbers parts (and no opaque
/// ones) as [`RawValues::Ragged`]: each record's bytes with those parts' pointers zeroed, then
/// each string (NUL-terminated) and each sequence (its length as 8 little-endian bytes, then
/// its values); others are not read.
fn records_with_strings(
    g: c_int,
    varid: c_int,
    ty: &NcType,
    shape: &[usize],
    n: usize,
) -> Result<RawValues> {
    let leaves = user::flatten(ty);
    if leaves
        .iter()
        .any(|l| matches!(l.kind, user::LeafKind::Unsupported(_)))
    {
        return Ok(RawValues::NotRead);
    }
    let mut rec = user::Records::new(ty, n)?;
    if n > 0 {
        ffi::get_vara(g, varid, &vec![0; shape.len()], shape, rec.fill())?;
        rec.arm();
    }
    let size = ty.size();
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let base = k * size;
        let mut bytes = rec.bytes()[base..base + size].to_vec();
        for l in leaves.iter().filter(|l| l.kind == user::LeafKind::Str) {
            let inner = l.place.inner_shape();
            let zeros = vec![0u64; inner.len()];
            let each = l.place.for_each(&zeros, &inner, |off| {
                // SAFETY: a `string` leaf's element of record k: a pointer netCDF wrote.
                let s = unsafe { rec.string_at(base + off) };
                let p = std::mem::size_of::<usize>();
                if let Some(slot) = bytes.get_mut(off..off + p) {
                    slot.fill(0);
                }
                bytes.extend_from_slice(&s);
                bytes.push(0);
            });
            each.map_err(user::malformed)?;
        }
        for l in &leaves {
            let user::LeafKind::Vlen { base: vb, .. } = &l.kind else {
                continue;
            };
            let inner = l.place.inner_shape();
            let zeros = vec![0u64; inner.len()];
            let each = l.place.for_each(&zeros, &inner, |off| {
                // SAFETY: a vlen leaf's element of record k: an `nc_vlen_t` of `vb` netCDF read.
                let seq = unsafe { rec.vlen_values(base + off, vb) };
                let n = std::mem::size_of::<nc::nc_vlen_t>();
                if let Some(slot) = bytes.get_mut(off..off + n) {
                    slot.fill(0);
                }
                let count = (seq.len() / vb.size().max(1)) as u64;
                bytes.extend_from_slice(&count.to_le_bytes());
                bytes.extend_from_slice(seq);
            });
            each.map_err(user::malformed)?;
        }
        out.push(bytes);
    }
    Ok(RawValues::Ragged(out))
}

fn attrs(g: c_int, varid: c_int, limit: u64) -> Result<Vec<AttrDump>> {
    let mut out = Vec::new();
    for i in 0..ffi::natts(g, varid)? {
        let (name, cname) = ffi::att_name(g, varid, i)?;
        if is_hidden_attr(&name) {
            continue;
        }
        let (xt, len) = ffi::att_info(g, varid, &cname)?;
        let (xtype, plain) = type_of(g, xt, limit)?;
        let values = match plain {
            Some(true) => {
                let size = ffi::type_size_of(g, xt)?;
                let bytes = len
                    .checked_mul(size)
                    .filter(|&b| b as u64 <= limit)
                    .ok_or_else(|| too_large(&name))?;
                let mut buf = vec![0u8; bytes];
                ffi::get_att_raw(g, varid, &cname, &mut buf)?;
                RawValues::Bytes(buf)
            }
            Some(false) => RawValues::Strings(ffi::get_att_strings(g, varid, &cname, len)?),
            None => RawValues::NotRead,
        };
        out.push(AttrDump {
            name,
            xtype,
            values,
        });
    }
    Ok(out)
}

fn too_large(what: &str) -> SourceError {
    Part::Shape.malformed(format!(
        "'{what}' claims more values than the file can hold"
    ))
}

/// The byte offsets a record type's values cover (not its padding), from a type's JSON as
/// the dump gives it; `None` when it is no compound.
fn covered(ty: &serde_json::Value, at: usize, mask: &mut Vec<bool>) -> Option<usize> {
    let size = match ty {
        serde_json::Value::String(s) => match s.as_str() {
            "char" | "i8" | "u8" => 1,
            "i16" | "u16" => 2,
            "i32" | "u32" | "f32" => 4,
            _ => 8,
        },
        t if t["class"] == "enum" => covered(&t["base"], at, mask)?,
        t if t["class"] == "vlen" => std::mem::size_of::<nc::nc_vlen_t>(),
        t if t["class"] == "compound" => {
            for f in t["fields"].as_array()? {
                let n: u64 = f["dims"]
                    .as_array()
                    .map_or(1, |d| d.iter().filter_map(|x| x.as_u64()).product());
                let mut off = at + f["offset"].as_u64()? as usize;
                for _ in 0..n {
                    off += covered(&f["type"], off, mask)?;
                }
            }
            return t["size"].as_u64().map(|s| s as usize);
        }
        _ => return None,
    };
    if mask.len() < at + size {
        mask.resize(at + size, false);
    }
    mask[at..at + size].fill(true);
    Some(size)
}

/// Zeroes the padding bytes of every compound value (variables and attributes) of `groups`, so
/// two dumps compare by what the records hold: netCDF4-python, for one, leaves whatever memory
/// held in the gaps between fields. The layout comes from each value's type JSON.
pub fn zero_compound_padding(groups: &mut [GroupDump]) {
    let fix = |xtype: &str, values: &mut RawValues| {
        let Ok(ty) = serde_json::from_str(xtype) else {
            return;
        };
        let mut mask = Vec::new();
        let Some(size) = covered(&ty, 0, &mut mask).filter(|&s| s > 0) else {
            return;
        };
        mask.resize(size, false);
        // Records with strings or sequences: each record's own bytes come first.
        let records: Vec<&mut [u8]> = match values {
            RawValues::Bytes(b) => b.chunks_mut(size).collect(),
            RawValues::Ragged(r) => r
                .iter_mut()
                .map(|x| {
                    let n = size.min(x.len());
                    &mut x[..n]
                })
                .collect(),
            _ => return,
        };
        for rec in records {
            for (x, keep) in rec.iter_mut().zip(&mask) {
                if !keep {
                    *x = 0;
                }
            }
        }
    };
    for g in groups {
        for v in &mut g.vars {
            fix(&v.xtype, &mut v.values);
            for a in &mut v.attrs {
                fix(&a.xtype, &mut a.values);
            }
        }
        for a in &mut g.attrs {
            fix(&a.xtype, &mut a.values);
        }
    }
}
