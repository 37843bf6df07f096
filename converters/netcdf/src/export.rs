//! NetCDF-4 export (the other direction of this crate), through the same netCDF-C layer as the
//! importer (module `ffi`: one error type, one lock, files closed on drop).
//!
//! - Groups for every `/` level of the array names; a global attribute named `group/name` (the
//!   importer's record of a group attribute) goes back to that group
//!   ([`Model::attr_owner`]: the group a [`Fact::AttrGroup`] names, else the key up to its last
//!   `/`). An attribute whose own name holds a `/` (HDF5's `a/b`), which netCDF-C reads but
//!   cannot write, is written with libhdf5 once netCDF-C has closed the file, in netCDF-C's own
//!   form (module `h5attrs`).
//! - Every group the source listed ([`crate::GROUPS`]) is created first, in its order: also
//!   those holding only attributes, only groups or nothing (not when only some arrays are
//!   exported).
//! - Dimensions from the arrays' dims. A dimension the netCDF source defined in another group
//!   than the variable's ([`crate::DIM_GROUPS`]) is that group's; in a netCDF-4 source with
//!   groups ([`crate::GROUPS`]) any other is the variable's own group's. Otherwise (other
//!   sources) coordinate variables are defined first, so their dimension lives in their own
//!   group; any other variable reuses a dimension of the same name and length visible from its
//!   group (its own or an ancestor), else defines it in its own group. A name already taken in that group with another length becomes `<name>_<length>`.
//!   Arrays without dimension names get `<variable>_dim<k>`. A dimension the source had as
//!   unlimited ([`Array::unlimited_dims`]) is unlimited again.
//! - Element types ([`CAPABILITIES`]): netCDF has no bool (kept as `ubyte` 0/1 with the
//!   attribute `dtype = "bool"`, which xarray decodes to booleans), no complex (the engine
//!   leaves the `<x>/real` and `<x>/imag` variables, in group `<x>`), no f16 (exported as the
//!   exact f32, with a warning). i8 is `byte`. An array with `enum_type` + `enum_mapping`
//!   facts (a netCDF or HDF5 enum) is written as that enum type, defined in its group.
//! - Attributes with their recorded netCDF types (`Text` → `char`, `TextList` → `string`; the
//!   importer's private facts (module `hints`) make a `Text` a one-value `string`, text Latin-1
//!   bytes, and integers an enum attribute whose enum type is defined again in the group).
//!   A `_FillValue` whose type differs from the variable's is left out with a warning (so is
//!   the compound fill a `char` field of a split compound variable carries). A variable's
//!   attribute whose name holds a `/` (every kind of variable: arrays, string, compound and
//!   vlen variables) goes onto the variable's dataset with libhdf5 once the file is closed, as
//!   a group's does (module `h5attrs`).
//! - Compound variables, split per field by the importer, are one compound variable of their
//!   recorded type again (module `records`: every field present with the shape the split
//!   gives; records assembled in memory, at most 256 MiB a variable), their attributes and
//!   compound `_FillValue` with them; otherwise their fields stay variables (with a warning).
//!   Complex compounds (netCDF4-python's `r`/`i` pairs) come back as `<x>/real`, `<x>/imag`.
//! - Ragged arrays ([`Fact::Ragged`]: values + `<name>_count`, from a netCDF vlen variable or
//!   an HDF5 vlen sequence) are one variable of a vlen type again (a vlen of vlens when the
//!   count array is ragged itself; ragged text, a string variable with the fact, a vlen of
//!   `string`), opaque values
//!   ([`Fact::Opaque`]: `u8` with a trailing byte axis) one of an opaque type (module
//!   `ragged`).
//! - Attributes of compound types (JSON text in the `.tet`, their type recorded by the
//!   importer) are written as that compound type again, defined in the root group (module
//!   `compound`: fields of numbers, `char`, enums, nested compounds and arrays of these, at
//!   the recorded offsets; text as UTF-8 when it fits its field, else Latin-1; NaN payloads
//!   are not kept). One with a `string`, vlen or opaque part stays JSON text, with a warning.
//!   A type whose name netCDF-C refuses (HDF5 allows any: h5py commits complex types as
//!   `<c16`) is defined under another: a complex `{r, i}` under nc-complex's
//!   `_PFNC_DOUBLE_COMPLEX_TYPE` / `_PFNC_FLOAT_COMPLEX_TYPE`, others as `_` + its name's
//!   letters, digits and `_`.
//! - The global `history` attribute gets the model's history lines, after any existing text.
//! - Storage: chunked along the model's chunk shape, so each `nc_put_vara` fills whole HDF5
//!   chunks; zlib (`deflate`, default level 4, with the shuffle filter for multi-byte types),
//!   zstd (HDF5 filter 32015, only when this netCDF-C has the zstd plugin: Debian's 4.9.0 does
//!   not) or none.
//! - String variables become `string` variables; those that were `char` arrays (their
//!   [`tet_source::CharAxis`]) come back as `char` with their string-length dimension, a 0-d
//!   `char` (fact `nc_type`) as a 0-d `char`; values recorded as Latin-1 (`nc_text_encoding`)
//!   as those bytes; unlimited dimensions as they were. Malformed records are left out with a
//!   warning.
//! - Dimensions no variable used (the file facts `nc_unused_dim:`) are defined again, with
//!   their groups (not when only some arrays are exported).
//! - Data is written one chunk at a time with `nc_put_vara` at the chunk's region.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, CString};

mod compound;
mod h5attrs;
mod hints;
mod ragged;
mod records;

use netcdf_sys as nc;
use tet_source::export::{
    f16_to_f32, split_group, Array, Capabilities, ChunkSource, Compression, ExportError, Model,
    Output, Result, TextEntry, Written, WrittenArray,
};
use tet_source::{AttrValue, ElementType, Fact, Role, TextVariable};

use crate::ffi::{self, Handle, NcError};
use compound::TypeDef;
use hints::{AttrHints, EnumDef, EnumTypes, TextHints};

/// What netCDF-4 holds: no booleans, no complex numbers.
pub const CAPABILITIES: Capabilities = Capabilities {
    has_bool: false,
    has_complex: false,
};

/// HDF5's registered id of the zstd filter.
const H5Z_FILTER_ZSTD: u32 = 32015;

/// A netCDF-C error as an [`ExportError::Library`] naming what was being done, netCDF-C's
/// status and text kept as its source.
fn nc<T>(what: impl FnOnce() -> String, r: std::result::Result<T, NcError>) -> Result<T> {
    r.map_err(|e| ExportError::Library {
        lib: tet_source::Lib::NetCdf,
        context: format!("netCDF: {}", what()),
        source: Box::new(e.reported()),
    })
}

fn cname(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| ExportError::Invalid(format!("name {s:?} holds a NUL byte")))
}

/// A path as netCDF-C takes it (its bytes, NUL-terminated).
fn path_cstring(p: &std::path::Path) -> Result<CString> {
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()).to_vec();
    #[cfg(not(unix))]
    let bytes = p.to_string_lossy().into_owned().into_bytes();
    CString::new(bytes)
        .map_err(|_| ExportError::Invalid(format!("path {} holds a NUL byte", p.display())))
}

/// The type an array is written as: f16 becomes f32 (netCDF has no f16).
fn written_type(e: ElementType) -> ElementType {
    match e {
        ElementType::F16 => ElementType::F32,
        e => e,
    }
}

/// The netCDF type of a written element type (the inverse of the importer's `atomic`).
pub(crate) fn xtype(e: ElementType) -> Option<nc::nc_type> {
    Some(match e {
        ElementType::I8 => nc::NC_BYTE,
        ElementType::U8 | ElementType::Bool => nc::NC_UBYTE,
        ElementType::I16 => nc::NC_SHORT,
        ElementType::U16 => nc::NC_USHORT,
        ElementType::I32 => nc::NC_INT,
        ElementType::U32 => nc::NC_UINT,
        ElementType::I64 => nc::NC_INT64,
        ElementType::U64 => nc::NC_UINT64,
        ElementType::F32 => nc::NC_FLOAT,
        ElementType::F64 => nc::NC_DOUBLE,
        ElementType::F16 | ElementType::BF16 | ElementType::C64 | ElementType::C128 => return None,
    })
}

/// The netCDF type, count and native-endian bytes of a numeric attribute value.
fn att_bytes(v: &AttrValue) -> Option<(nc::nc_type, usize, Vec<u8>)> {
    macro_rules! ne {
        ($t:expr, $xs:expr) => {
            Some((
                $t,
                $xs.len(),
                $xs.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            ))
        };
    }
    match v {
        AttrValue::I8(x) => ne!(nc::NC_BYTE, x),
        AttrValue::U8(x) => ne!(nc::NC_UBYTE, x),
        AttrValue::I16(x) => ne!(nc::NC_SHORT, x),
        AttrValue::U16(x) => ne!(nc::NC_USHORT, x),
        AttrValue::I32(x) => ne!(nc::NC_INT, x),
        AttrValue::U32(x) => ne!(nc::NC_UINT, x),
        AttrValue::I64(x) => ne!(nc::NC_INT64, x),
        AttrValue::U64(x) => ne!(nc::NC_UINT64, x),
        AttrValue::F32(x) => ne!(nc::NC_FLOAT, x),
        AttrValue::F64(x) => ne!(nc::NC_DOUBLE, x),
        AttrValue::Text(_) | AttrValue::TextList(_) => None,
    }
}

/// The owner of attributes in the output: its group and variable (`NC_GLOBAL` for the group's
/// own), its name in messages, and what the importer recorded of its attributes.
struct Owner<'a> {
    gid: c_int,
    varid: c_int,
    what: String,
    hints: &'a AttrHints,
}

/// A string as a C string (`what` names it in the error when it holds a NUL byte).
fn c_bytes(b: Vec<u8>, what: &dyn Fn() -> String) -> Result<CString> {
    CString::new(b).map_err(|_| ExportError::Invalid(format!("{}: holds a NUL byte", what())))
}

/// Writes attribute `name` (recorded as `key`: `group/name` for a group's) of `o` with its
/// recorded netCDF type: an enum type, `string` for a single-valued string attribute that was
/// one, `char` for other text; text recorded as Latin-1 as those bytes.
/// Attribute names netCDF-C keeps for itself (its HDF5 bookkeeping and dimension scales):
/// writing one fails with `NC_ENAMEINUSE`. PyTables' node classes (`CLASS`, `NAME`), kept in
/// the `.tet`, are left out of a netCDF export with a warning.
const RESERVED_ATTRS: [&str; 10] = [
    "CLASS",
    "NAME",
    "REFERENCE_LIST",
    "DIMENSION_LIST",
    "_Netcdf4Coordinates",
    "_Netcdf4Dimid",
    "_NCProperties",
    "_SuperblockVersion",
    "_IsNetcdf4",
    "_nc3_strict",
];

/// Whether attribute `name` of `what` can be written; if not, the warning says why.
fn writable_attr(name: &str, what: &dyn Fn() -> String, warnings: &mut Vec<String>) -> bool {
    if RESERVED_ATTRS.contains(&name) {
        warnings.push(format!(
            "attribute `{name}` of {}: the name is reserved by netCDF-4; left out",
            what()
        ));
        return false;
    }
    true
}

fn put_att(o: &Owner, name: &str, key: &str, v: &AttrValue, enums: &mut EnumTypes) -> Result<()> {
    let cn = cname(name)?;
    let what = || format!("attribute `{name}` of {}", o.what);
    // A `_FillValue` takes its variable's own type: `define_array` writes an enum variable's
    // fill itself; any other variable's fill stays in the variable's (base) type.
    let enum_hint = if name == "_FillValue" {
        None
    } else {
        o.hints.enum_type(key)
    };
    if let Some(e) = enum_hint {
        if let Some((_, n, bytes)) = att_bytes(v).filter(|(t, ..)| Some(*t) == xtype(e.base)) {
            let id = enums.id(o.gid, e)?;
            return nc(what, ffi::put_att(o.gid, o.varid, &cn, id, n, &bytes));
        }
    }
    if let (Some(record), AttrValue::Text(json)) = (o.hints.record(key), v) {
        // A compound attribute (its values JSON text): written as its type again.
        let encoded = TypeDef::of_record(record)
            .and_then(|(n, t)| Ok((n, compound::encode(&t, n, json)?, t)));
        match encoded {
            Ok((n, bytes, t)) => {
                let mut compounds = std::mem::take(&mut enums.compounds);
                // Defined in the root group, where every group sees them.
                let gid = compounds.root.unwrap_or(o.gid);
                let id = compounds.id(gid, &t, enums);
                enums.compounds = compounds;
                return nc(what, ffi::put_att(o.gid, o.varid, &cn, id?, n, &bytes));
            }
            Err(why) => enums
                .warnings
                .push(format!("{}: {why}: kept as JSON text", what())),
        }
    }
    match v {
        AttrValue::Text(s) => {
            let b = o.hints.bytes(key, s, &what)?;
            if o.hints.is_string(key) {
                let c = c_bytes(b, &what)?;
                nc(what, ffi::put_att_strings(o.gid, o.varid, &cn, &[c]))
            } else {
                nc(what, ffi::put_att_text(o.gid, o.varid, &cn, &b))
            }
        }
        AttrValue::TextList(l) => {
            let cs: Vec<CString> = l
                .iter()
                .map(|s| c_bytes(o.hints.bytes(key, s, &what)?, &what))
                .collect::<Result<_>>()?;
            nc(what, ffi::put_att_strings(o.gid, o.varid, &cn, &cs))
        }
        v => match att_bytes(v) {
            Some((t, n, bytes)) => nc(what, ffi::put_att(o.gid, o.varid, &cn, t, n, &bytes)),
            None => Ok(()),
        },
    }
}

/// Groups by path (root = "").
struct Groups {
    ids: HashMap<String, c_int>,
}

impl Groups {
    fn id(&self, path: &str) -> Result<c_int> {
        self.ids
            .get(path)
            .copied()
            .ok_or_else(|| ExportError::Invalid(format!("no group `{path}`")))
    }

    fn ensure(&mut self, path: &str) -> Result<c_int> {
        if let Some(&id) = self.ids.get(path) {
            return Ok(id);
        }
        let (parent, short) = split_group(path);
        let pid = self.ensure(parent)?;
        let cn = cname(short)?;
        let id = nc(|| format!("define group `/{path}`"), ffi::def_grp(pid, &cn))?;
        self.ids.insert(path.to_string(), id);
        Ok(id)
    }
}

/// Dimensions defined so far: (group path, name) → (dimid, length).
#[derive(Default)]
struct Dims {
    by_group: HashMap<(String, String), (c_int, u64)>,
    /// The source recorded where its dimensions are (a netCDF-4 file with groups: the file
    /// fact [`crate::GROUPS`]): a dimension without a recorded home ([`crate::DIM_GROUPS`])
    /// is its variable's own group's.
    exact: bool,
}

impl Dims {
    /// The dimension `name` of length `len` seen from `group`, defined there when needed.
    fn get(
        &mut self,
        groups: &Groups,
        group: &str,
        name: &str,
        len: u64,
        unlimited: bool,
    ) -> Result<c_int> {
        match self.visible(group, name) {
            Some((id, l)) if l == len => Ok(id),
            _ => self.define_here(groups, group, name, len, unlimited),
        }
    }

    /// The dimension `name` visible from `group` (its id and length): the nearest definition,
    /// in the group or the closest group above it.
    fn visible(&self, group: &str, name: &str) -> Option<(c_int, u64)> {
        let mut g = group;
        loop {
            if let Some(&d) = self.by_group.get(&(g.to_string(), name.to_string())) {
                return Some(d);
            }
            if g.is_empty() {
                return None;
            }
            g = split_group(g).0;
        }
    }

    /// The dimension `name` of length `len` of `group` itself: defined there (under
    /// `<name>_<len>` when the name is taken there with another length).
    fn define_here(
        &mut self,
        groups: &Groups,
        group: &str,
        name: &str,
        len: u64,
        unlimited: bool,
    ) -> Result<c_int> {
        let mut n = name.to_string();
        loop {
            match self.by_group.get(&(group.to_string(), n.clone())) {
                Some(&(id, l)) if l == len => return Ok(id),
                Some(_) => n = format!("{n}_{len}"),
                None => break,
            }
        }
        let gid = groups.id(group)?;
        let cn = cname(&n)?;
        let size = if unlimited {
            0 // NC_UNLIMITED: grows with the writes
        } else {
            usize::try_from(len)
                .map_err(|_| ExportError::Invalid(format!("dimension `{n}` too long")))?
        };
        let id = nc(
            || format!("define dimension `{n}` ({len}) in group `/{group}`"),
            ffi::def_dim(gid, &cn, size),
        )?;
        self.by_group.insert((group.to_string(), n), (id, len));
        Ok(id)
    }
}

impl Dims {
    /// The dimension `name` of length `len` that the source had in group `home` (an ancestor
    /// of the variable's group, recorded as [`crate::DIM_GROUPS`]): defined there when it is
    /// not yet; `None` when `home` holds `name` with another length already.
    fn get_in(
        &mut self,
        groups: &mut Groups,
        home: &str,
        name: &str,
        len: u64,
        unlimited: bool,
    ) -> Result<Option<c_int>> {
        match self.by_group.get(&(home.to_string(), name.to_string())) {
            Some(&(id, l)) => return Ok((l == len).then_some(id)),
            None => groups.ensure(home)?,
        };
        self.define_here(groups, home, name, len, unlimited)
            .map(Some)
    }
}

/// Where a variable's dimensions are: its group, and the groups the source defined each in
/// (the [`crate::DIM_GROUPS`] fact; empty when all were its own group's).
struct DimHomes<'a> {
    group: &'a str,
    homes: &'a [String],
}

impl<'a> DimHomes<'a> {
    fn of(group: &'a str, facts: &'a [Fact]) -> Self {
        DimHomes {
            group,
            homes: hints::text_list(facts, crate::DIM_GROUPS),
        }
    }

    /// The id of dimension `k` (named `name`, of `len`): in the group the source defined it
    /// in where that is known (and `named`: the name is the source's), else resolved by name
    /// from the variable's group.
    fn id(
        &self,
        groups: &mut Groups,
        dims: &mut Dims,
        k: usize,
        (name, len, unlimited): (&str, u64, bool),
        named: bool,
    ) -> Result<c_int> {
        let home = match self.homes.get(k) {
            Some(h) => Some(h.as_str()),
            None => dims.exact.then_some(self.group),
        };
        let found = match home {
            Some(h) if named => dims.get_in(groups, h, name, len, unlimited)?,
            _ => None,
        };
        match found {
            Some(id) => Ok(id),
            None => dims.get(groups, self.group, name, len, unlimited),
        }
    }
}

impl DimHomes<'_> {
    /// The group in which [`DimHomes::id`] would define dimension `k` (named `name`, of `len`)
    /// under that name now; `None` when it would find one already defined (or define it under
    /// another name, `<name>_<len>`).
    fn defines_in(&self, dims: &Dims, k: usize, name: &str, len: u64, named: bool) -> Option<&str> {
        let home = match self.homes.get(k) {
            Some(h) => Some(h.as_str()),
            None => dims.exact.then_some(self.group),
        };
        if let (Some(h), true) = (home, named) {
            match dims.by_group.get(&(h.to_string(), name.to_string())) {
                Some(&(_, l)) if l == len => return None,
                Some(_) => {}
                None => return Some(h),
            }
        }
        // As [`Dims::get`]: the nearest definition visible from the group, else its own.
        if dims
            .visible(self.group, name)
            .is_some_and(|(_, l)| l == len)
        {
            return None;
        }
        let taken = dims
            .by_group
            .contains_key(&(self.group.to_string(), name.to_string()));
        (!taken).then_some(self.group)
    }
}

/// Before array `a` is defined: when another array to define (`others`) uses a dimension
/// named like `a` that would be defined in `a`'s group, and `a` does not use it itself (`a` is
/// no coordinate variable of it), that dimension is defined now, as that array has it.
/// netCDF-C cannot define a dimension after a variable of its name in the same group (it fails
/// at the end of definitions); defined first, the variable is kept apart from it.
fn define_dim_named_like<'m>(
    a: &Array,
    others: impl Iterator<Item = &'m Array>,
    ctx: &mut Defining,
) -> Result<()> {
    let (g, short) = a.split_name();
    if a.dims
        .as_ref()
        .is_some_and(|d| d.iter().any(|n| n == short))
    {
        return Ok(());
    }
    for b in others {
        let (bg, bshort) = b.split_name();
        // The axes `define_array` gives dimensions (an opaque array's last is its type's).
        let axes = match ragged::opaque_of(b) {
            Some(_) => b.shape.len().saturating_sub(1),
            None => b.shape.len(),
        };
        let at = DimHomes::of(bg, &b.facts);
        let named = b.dims.is_some();
        for (k, &len) in b.shape.iter().take(axes).enumerate() {
            let name = match b.dims.as_ref().and_then(|d| d.get(k)) {
                Some(d) => d.clone(),
                None => format!("{bshort}_dim{k}"),
            };
            if name != short || at.defines_in(ctx.dims, k, &name, len, named) != Some(g) {
                continue;
            }
            let unlimited = b.unlimited_dims.contains(&name);
            at.id(ctx.groups, ctx.dims, k, (&name, len, unlimited), named)?;
            return Ok(());
        }
    }
    Ok(())
}

/// The dimension ids of a variable of `shape` in group `at.group` (names from `dims`, else
/// `<short>_dim<k>`), defined as needed (see [`DimHomes::id`]).
fn dim_ids(
    groups: &mut Groups,
    dims: &mut Dims,
    at: &DimHomes,
    short: &str,
    shape: &[u64],
    names: Option<&Vec<String>>,
    unlimited: &[String],
) -> Result<Vec<c_int>> {
    let mut ids = Vec::with_capacity(shape.len());
    for (k, &len) in shape.iter().enumerate() {
        let name = match names.and_then(|d| d.get(k)) {
            Some(d) => d.clone(),
            None => format!("{short}_dim{k}"),
        };
        let unlimited = unlimited.contains(&name);
        let named = names.is_some();
        ids.push(at.id(groups, dims, k, (&name, len, unlimited), named)?);
    }
    Ok(ids)
}

/// A string variable defined, waiting for its values.
struct TextVar<'m> {
    t: &'m TextVariable,
    gid: c_int,
    varid: c_int,
    /// The values' bytes (Latin-1 when recorded so, else UTF-8).
    bytes: Vec<Vec<u8>>,
    /// Characters per string when the variable is a `char` array (its last axis; 1 for a 0-d
    /// `char` variable, which has no such axis).
    char_len: Option<usize>,
    /// The `char` variable has that string-length axis (all but a 0-d `char` variable).
    char_axis: bool,
}

/// The unlimited dimensions among `facts`.
fn unlimited_of(facts: &[Fact]) -> &[String] {
    facts
        .iter()
        .find_map(|f| match f {
            Fact::UnlimitedDims(d) => Some(d.as_slice()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Defines a string variable as a netCDF `string` variable, or, when it was a `char` array
/// (its `char_axis`), as a `char` variable with that string-length dimension last, or as a 0-d
/// `char` variable when it was one; its dimensions unlimited as they were.
fn define_text<'m>(t: &'m TextVariable, ctx: &mut Defining) -> Result<TextVar<'m>> {
    let hints = TextHints::of(&t.facts);
    let bytes = hints.bytes(&t.values, &|| format!("string variable `{}`", t.name))?;
    // A `char` array's string-length axis, when every value fits it (otherwise the values,
    // exact either way, come back as `string`).
    let char_dim = t.char_axis.as_ref().and_then(|c| {
        let len = usize::try_from(c.len).ok()?;
        bytes
            .iter()
            .all(|v| v.len() <= len)
            .then_some((c.dim.clone(), len))
    });
    let scalar_char =
        hints.scalar_char && t.char_axis.is_none() && bytes.iter().all(|b| b.len() <= 1);
    let unlimited = unlimited_of(&t.facts);
    let (g, short) = split_group(&t.name);
    // A `string` value cannot hold NUL (netCDF-C takes C strings), a `char` array can: values
    // with an inner NUL go to a `char` variable with a string-length axis of their own (exact
    // as long as no value ends with NUL, which the padding would swallow).
    let char_dim = char_dim.or_else(|| {
        let inner_nul = bytes.iter().any(|b| b.contains(&0));
        let trailing_nul = bytes.iter().any(|b| b.last() == Some(&0));
        (inner_nul && !trailing_nul && !scalar_char && !t.shape.is_empty()).then(|| {
            let len = bytes.iter().map(Vec::len).max().unwrap_or(1).max(1);
            (format!("{short}_strlen"), len)
        })
    });
    let gid = ctx.groups.ensure(g)?;
    let at = DimHomes::of(g, &t.facts);
    let mut dimids = dim_ids(
        ctx.groups,
        ctx.dims,
        &at,
        short,
        &t.shape,
        t.dims.as_ref(),
        unlimited,
    )?;
    if let Some((d, len)) = &char_dim {
        let unl = unlimited.contains(d);
        // The source's string-length dimension (not one made up for inner NULs).
        let named = t.char_axis.as_ref().is_some_and(|c| &c.dim == d);
        let k = t.shape.len();
        dimids.push(at.id(ctx.groups, ctx.dims, k, (d, *len as u64, unl), named)?);
    }
    let xtype = if char_dim.is_some() || scalar_char {
        nc::NC_CHAR
    } else {
        nc::NC_STRING
    };
    let cn = cname(short)?;
    let varid = nc(
        || format!("define string variable `{}`", t.name),
        ffi::def_var(gid, &cn, xtype, &dimids),
    )?;
    let attr_hints = AttrHints::of(&t.facts);
    let owner = Owner {
        gid,
        varid,
        what: format!("variable `{}`", t.name),
        hints: &attr_hints,
    };
    for (k, v) in &t.attrs {
        if k == "_FillValue" && !text_fill_fits(&attr_hints, v, xtype) {
            // netCDF takes one value of the variable's own type (a `char` field of a compound
            // variable has the compound's fill: no `char`).
            ctx.warnings.push(format!(
                "`{}`: _FillValue {v:?} is not one value of its type; left out",
                t.name
            ));
            continue;
        }
        ctx.var_attr(&owner, &t.name, k, v)?;
    }
    Ok(TextVar {
        t,
        gid,
        varid,
        bytes,
        char_axis: char_dim.is_some(),
        char_len: char_dim.map(|(_, len)| len).or(scalar_char.then_some(1)),
    })
}

/// Whether `_FillValue` `v` is one value of a text variable of netCDF type `xtype`: one
/// character of a `char` variable, one `string` of a `string` variable (not the JSON text of
/// a compound's fill).
fn text_fill_fits(hints: &AttrHints, v: &AttrValue, xtype: nc::nc_type) -> bool {
    let AttrValue::Text(s) = v else {
        return false;
    };
    if hints.record("_FillValue").is_some() || hints.enum_type("_FillValue").is_some() {
        return false;
    }
    if xtype == nc::NC_STRING {
        return hints.is_string("_FillValue");
    }
    let one = hints
        .bytes("_FillValue", s, &String::new)
        .is_ok_and(|b| b.len() == 1);
    one && !hints.is_string("_FillValue")
}

/// Writes the values of a defined string variable.
fn write_text(v: &TextVar<'_>) -> Result<()> {
    let mut count: Vec<usize> =
        v.t.shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| ExportError::Invalid(format!("`{}`: too large", v.t.name)))?;
    if let Some(len) = v.char_len {
        // Each string NUL-padded to the string length, in C order (as netCDF-C writes them).
        let mut text = vec![0u8; v.bytes.len().saturating_mul(len)];
        for (row, s) in text.chunks_mut(len.max(1)).zip(&v.bytes) {
            row[..s.len()].copy_from_slice(s);
        }
        if v.char_axis {
            count.push(len);
        }
        let start = vec![0usize; count.len()];
        return nc(
            || format!("write char variable `{}`", v.t.name),
            ffi::put_vara_text(v.gid, v.varid, &start, &count, &text),
        );
    }
    let what = || format!("string variable `{}`", v.t.name);
    let cs: Vec<CString> = v
        .bytes
        .iter()
        .map(|b| c_bytes(b.clone(), &what))
        .collect::<Result<_>>()?;
    let start = vec![0usize; count.len()];
    nc(
        || format!("write string variable `{}`", v.t.name),
        ffi::put_vara_strings(v.gid, v.varid, &start, &count, &cs),
    )
}

/// What a variable's storage is defined from: its name (in messages), shape and chunk shape.
struct StorageOf<'a> {
    name: &'a str,
    shape: &'a [u64],
    chunk_shape: &'a [u64],
}

/// What defining variables works on.
struct Defining<'a> {
    groups: &'a mut Groups,
    dims: &'a mut Dims,
    enums: &'a mut EnumTypes,
    warnings: &'a mut Vec<String>,
    compression: Compression,
    /// Attributes netCDF-C cannot write (names holding a `/`), for libhdf5 once the file is
    /// closed (module `h5attrs`).
    slashed: Vec<h5attrs::SlashedAttr>,
}

impl Defining<'_> {
    /// Attribute `k` = `v` of the variable `o` (`var`, its path, in messages): left out with a
    /// warning when netCDF-4 reserves the name; one whose name holds a `/` (netCDF-C's
    /// `NC_EBADNAME`) kept for libhdf5 on the variable's dataset, under the variable's name as
    /// netCDF-C gave it; any other written now.
    fn var_attr(&mut self, o: &Owner, var: &str, k: &str, v: &AttrValue) -> Result<()> {
        if !writable_attr(k, &|| o.what.clone(), self.warnings) {
            return Ok(());
        }
        if !k.contains('/') {
            return put_att(o, k, k, v, self.enums);
        }
        let name = ffi::var_info(o.gid, o.varid)
            .map_err(|e| ExportError::Library {
                lib: tet_source::Lib::NetCdf,
                context: format!("netCDF: name of {}", o.what),
                source: Box::new(e),
            })?
            .name;
        let place = h5attrs::Place {
            group: split_group(var).0.to_string(),
            var: Some(name),
        };
        if self.slashed.iter().any(|a| a.is(&place, k)) {
            self.warnings.push(format!(
                "attribute `{k}` of {}: recorded twice; the second is left out",
                o.what
            ));
            return Ok(());
        }
        let planned = h5attrs::plan((&place, k, k), v, o.hints, self.warnings)?;
        self.slashed.extend(planned);
        Ok(())
    }
}

/// Chunking and compression of a defined variable with elements of `size` bytes.
fn def_storage(
    a: &StorageOf,
    gid: c_int,
    varid: c_int,
    size: usize,
    compression: Compression,
) -> Result<()> {
    let chunks: Vec<usize> = a
        .chunk_shape
        .iter()
        .zip(a.shape)
        .map(|(&c, &s)| usize::try_from(c.min(s)))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| ExportError::Invalid(format!("`{}`: chunk too large", a.name)))?;
    nc(
        || format!("chunk variable `{}`", a.name),
        ffi::def_var_chunking(gid, varid, &chunks),
    )?;
    match compression {
        Compression::None => Ok(()),
        Compression::Default | Compression::Zlib(_) => {
            let level = match compression {
                Compression::Zlib(l) => c_int::try_from(l).unwrap_or(9),
                _ => 4,
            };
            nc(
                || format!("deflate variable `{}`", a.name),
                ffi::def_var_deflate(gid, varid, size > 1, level),
            )
        }
        Compression::Zstd(l) => {
            let params = [l as u32];
            nc(
                || format!("zstd filter on variable `{}`", a.name),
                ffi::def_var_filter(gid, varid, H5Z_FILTER_ZSTD, &params),
            )
        }
    }
}

/// The enum type of array `a` when its facts record one (`enum_type` and `enum_mapping`, as
/// the netCDF and HDF5 importers write them) over an integer type `written`.
fn enum_of(a: &Array, written: ElementType) -> Option<EnumDef> {
    let name = a.facts.iter().find_map(|f| match f {
        Fact::EnumType(n) => Some(n.clone()),
        _ => None,
    })?;
    let members = a.facts.iter().find_map(|f| match f {
        Fact::EnumMapping(m) => Some(m.clone()),
        _ => None,
    })?;
    let integer = matches!(
        written,
        ElementType::I8
            | ElementType::U8
            | ElementType::I16
            | ElementType::U16
            | ElementType::I32
            | ElementType::U32
            | ElementType::I64
            | ElementType::U64
    );
    integer.then_some(EnumDef {
        name,
        base: written,
        members,
    })
}

/// Defines array `a` (dims, variable, storage, attributes, fill mode) in its group.
fn define_array(a: &Array, ctx: &mut Defining) -> Result<(c_int, c_int)> {
    let (g, short) = a.split_name();
    let gid = ctx.groups.id(g)?;
    let written = written_type(a.dtype);
    let base = xtype(written).ok_or_else(|| {
        ExportError::Invalid(format!("`{}`: netCDF has no {} type", a.name, a.dtype))
    })?;
    // An enum variable (netCDF or HDF5 source) is written as that enum type again, opaque
    // values as their opaque type (without the trailing byte axis).
    let opaque = ragged::opaque_of(a);
    let (t, shape, names) = match (enum_of(a, written), &opaque, a.shape.split_last()) {
        (_, Some(o), Some((&size, outer))) => {
            let size = usize::try_from(size)
                .map_err(|_| ExportError::Invalid(format!("`{}`: too large", a.name)))?;
            let names = a
                .dims
                .as_ref()
                .map(|d| d[..d.len().min(outer.len())].to_vec());
            (ctx.enums.opaque(gid, o, size)?, outer, names)
        }
        (Some(e), _, _) => (ctx.enums.id(gid, &e)?, &a.shape[..], a.dims.clone()),
        (None, _, _) => (base, &a.shape[..], a.dims.clone()),
    };
    let at = DimHomes::of(g, &a.facts);
    let dimids = dim_ids(
        ctx.groups,
        ctx.dims,
        &at,
        short,
        shape,
        names.as_ref(),
        &a.unlimited_dims,
    )?;
    let cn = cname(short)?;
    let varid = nc(
        || format!("define variable `{}`", a.name),
        ffi::def_var(gid, &cn, t, &dimids),
    )?;
    let sized = !shape.is_empty() && !shape.contains(&0);
    if sized {
        let at = StorageOf {
            name: &a.name,
            shape,
            chunk_shape: a.chunk_shape.get(..shape.len()).unwrap_or(&a.chunk_shape),
        };
        let size = a.shape[shape.len()..].iter().product::<u64>() as usize;
        def_storage(&at, gid, varid, written.size() * size, ctx.compression)?;
    }
    // xarray reads a `dtype = "bool"` attribute back as booleans.
    let bool_attr = [("dtype".to_string(), AttrValue::Text("bool".into()))];
    let extra: &[(String, AttrValue)] = if a.bool_as_u8 { &bool_attr } else { &[] };
    let mut has_fill = false;
    let hints = AttrHints::of(&a.facts);
    let owner = Owner {
        gid,
        varid,
        what: format!("variable `{}`", a.name),
        hints: &hints,
    };
    for (k, v) in a.attrs.iter().chain(extra) {
        if k == "_FillValue" {
            let Some((_, _, bytes)) = att_bytes(v).filter(|(ty, n, _)| (*ty, *n) == (base, 1))
            else {
                ctx.warnings.push(format!(
                    "`{}`: _FillValue {v:?} is not one {} value; left out",
                    a.name, written
                ));
                continue;
            };
            has_fill = true;
            if t != base {
                // The fill of an enum variable is of its enum type.
                nc(
                    || format!("attribute `_FillValue` of variable `{}`", a.name),
                    ffi::put_att(gid, varid, &cname(k)?, t, 1, &bytes),
                )?;
                continue;
            }
        }
        ctx.var_attr(&owner, &a.name, k, v)?;
    }
    if !has_fill && sized {
        // Every element is written: no need for HDF5 to pre-fill the chunks.
        nc(
            || format!("fill mode of variable `{}`", a.name),
            ffi::def_var_fill_off(gid, varid),
        )?;
    }
    Ok((gid, varid))
}

/// The global attributes (`group/name` back to its group, [`Model::attr_owner`]) and the
/// history; the attributes whose own names hold a `/` go to `ctx.slashed`, for libhdf5 to
/// write once the file is closed (module `h5attrs`).
fn write_globals(model: &Model, root: c_int, ctx: &mut Defining) -> Result<()> {
    let hints = AttrHints::of(&model.global_facts);
    let owner = |gid: c_int, what: String| Owner {
        gid,
        varid: nc::NC_GLOBAL,
        what,
        hints: &hints,
    };
    let mut history = None;
    for (k, v) in &model.global_attrs {
        if k == "history" {
            history = Some(v.clone());
            continue;
        }
        // `group/name`: an attribute of that group. A group with attributes but no variables
        // is created, unless only some arrays are exported.
        let (g, short) = model.attr_owner(k);
        if short.contains('/') {
            // A name netCDF-C cannot write (an HDF5 source's): libhdf5 writes it later.
            if g.is_empty() || ctx.groups.ids.contains_key(g) || !model.subset {
                ctx.groups.ensure(g)?;
                let place = h5attrs::Place::group(g);
                if ctx.slashed.iter().any(|a| a.is(&place, short)) {
                    // Two attributes flattened to one key (HDF5's root `a/b` and `b` of a
                    // group `a`): the record cannot tell them apart.
                    ctx.warnings.push(format!(
                        "global attribute `{k}`: recorded twice under this key; the second \
                         is left out"
                    ));
                    continue;
                }
                let planned = h5attrs::plan((&place, short, k), v, &hints, ctx.warnings)?;
                ctx.slashed.extend(planned);
            }
        } else if g.is_empty() {
            if writable_attr(short, &|| "the file".into(), ctx.warnings) {
                put_att(&owner(root, "the file".into()), k, k, v, ctx.enums)?;
            }
        } else if (ctx.groups.ids.contains_key(g) || !model.subset)
            && writable_attr(short, &|| format!("group `/{g}`"), ctx.warnings)
        {
            let gid = ctx.groups.ensure(g)?;
            put_att(&owner(gid, format!("group `/{g}`")), short, k, v, ctx.enums)?;
        }
    }
    let lines = &model.history;
    let history = match (history, lines.is_empty()) {
        (Some(AttrValue::Text(old)), false) => {
            let sep = if old.is_empty() || old.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            Some(AttrValue::Text(format!("{old}{sep}{}", lines.join("\n"))))
        }
        (None, false) => Some(AttrValue::Text(lines.join("\n"))),
        (h, _) => h,
    };
    if let Some(h) = history {
        put_att(
            &owner(root, "the file".into()),
            "history",
            "history",
            &h,
            ctx.enums,
        )?;
    }
    Ok(())
}

/// Defines the dimensions the source had but no variable used (the importer's
/// [`crate::UNUSED_DIM`] facts), with their groups; a name already defined in its group with
/// another length is left out with a warning.
fn define_unused_dims(
    model: &Model,
    groups: &mut Groups,
    dims: &mut Dims,
    warnings: &mut Vec<String>,
) -> Result<()> {
    for f in &model.global_facts {
        let Fact::Private {
            key,
            value: AttrValue::U64(v),
            ..
        } = f
        else {
            continue;
        };
        let (Some(path), [len, unlimited]) = (key.strip_prefix(crate::UNUSED_DIM), v.as_slice())
        else {
            continue;
        };
        let (g, name) = split_group(path);
        let unlimited = *unlimited == 1;
        // Defined before any variable: netCDF-4 then keeps a variable named like it (and not
        // using it) apart from it, as it did in the source.
        if let Some(&(_, l)) = dims.by_group.get(&(g.to_string(), name.to_string())) {
            if l != *len {
                warnings.push(format!(
                    "dimension `{path}` ({len}) left out: the name is taken in its group"
                ));
            }
            continue;
        }
        let gid = groups.ensure(g)?;
        let cn = cname(name)?;
        let size = if unlimited {
            0
        } else {
            usize::try_from(*len)
                .map_err(|_| ExportError::Invalid(format!("dimension `{path}` too long")))?
        };
        let id = nc(
            || format!("define dimension `{name}` ({len}) in group `/{g}`"),
            ffi::def_dim(gid, &cn, size),
        )?;
        dims.by_group
            .insert((g.to_string(), name.to_string()), (id, *len));
    }
    Ok(())
}

/// The values of a chunk as netCDF takes them: native-endian, f16 widened to f32.
fn native<'b>(dtype: ElementType, bytes: &'b [u8], buf: &'b mut Vec<u8>) -> &'b [u8] {
    if dtype == ElementType::F16 {
        buf.clear();
        for c in bytes.chunks_exact(2) {
            let v = f16_to_f32(u16::from_le_bytes([c[0], c[1]]));
            buf.extend_from_slice(&v.to_ne_bytes());
        }
        return buf;
    }
    let size = dtype.size();
    if cfg!(target_endian = "little") || size == 1 {
        return bytes;
    }
    buf.clear();
    buf.extend_from_slice(bytes);
    for e in buf.chunks_exact_mut(size) {
        e.reverse();
    }
    buf
}

/// Writes every chunk of the arrays defined as `vars` (model index, group id, variable id).
fn write_data(
    model: &Model,
    chunks: &mut dyn ChunkSource,
    vars: &[(usize, c_int, c_int)],
) -> Result<()> {
    let mut buf = Vec::new();
    for &(i, gid, varid) in vars {
        let a = &model.arrays[i];
        // Opaque values: the trailing byte axis is the type's, whole in every chunk.
        let blob = ragged::opaque_of(a).and(a.shape.last().copied());
        for coords in a.chunk_coords() {
            let mut c = chunks.chunk(i, &coords)?;
            if let Some(size) = blob {
                if c.count.last() != Some(&size) {
                    return Err(ExportError::Invalid(format!(
                        "`{}`: a chunk splits its opaque values",
                        a.name
                    )));
                }
                c.start.pop();
                c.count.pop();
            }
            let to_usize = |v: &[u64]| -> Result<Vec<usize>> {
                v.iter()
                    .map(|&x| usize::try_from(x))
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|_| ExportError::Invalid(format!("`{}`: too large", a.name)))
            };
            let (start, count) = (to_usize(&c.start)?, to_usize(&c.count)?);
            let bytes = native(a.dtype, c.bytes, &mut buf);
            nc(
                || format!("write `{}` chunk {coords:?}", a.name),
                ffi::put_vara(gid, varid, &start, &count, bytes),
            )?;
        }
    }
    Ok(())
}

/// What [`define_all`] defined: arrays (model index, group id, variable id), string variables
/// and rebuilt compound variables, waiting for their values.
struct Defined<'m> {
    vars: Vec<(usize, c_int, c_int)>,
    strings: Vec<TextVar<'m>>,
    records: Vec<(records::RecordVar, (c_int, c_int))>,
    vlens: Vec<(ragged::VlenVar, (c_int, c_int))>,
    /// Ragged text rebuilt as vlen-of-string variables.
    text_vlens: Vec<(ragged::TextVlen, (c_int, c_int))>,
    /// Attributes netCDF-C cannot write, for libhdf5 once the file is closed.
    slashed: Vec<h5attrs::SlashedAttr>,
}

/// Defines everything of `model` in the file whose root group is `root`.
fn define_all<'m>(
    model: &'m Model,
    root: c_int,
    compression: Compression,
    warnings: &mut Vec<String>,
) -> Result<Defined<'m>> {
    // Compound variables rebuilt from their fields: the fields are no variables of their own.
    let recs = records::plan(model, warnings);
    // Ragged arrays rebuilt as vlen variables: their values and counts are no variables either.
    // (Those that are vlen fields of rebuilt compound variables are written in the records.)
    let in_records: HashSet<usize> = recs
        .iter()
        .flat_map(|r| r.leaves.iter())
        .filter_map(|(_, m)| match m {
            records::Member::Ragged { values, .. } => Some(*values),
            _ => None,
        })
        .collect();
    let vlens: Vec<_> = ragged::plan(model, warnings)
        .into_iter()
        .filter(|v| !in_records.contains(&v.values))
        .collect();
    let text_vlens = ragged::plan_text(model, warnings);
    let ragged_texts: HashSet<usize> = text_vlens.iter().map(|t| t.text).collect();
    let members: HashSet<records::Member> = recs
        .iter()
        .flat_map(|r| r.leaves.iter().map(|(_, m)| *m))
        .flat_map(|m| match m {
            records::Member::Ragged { values, count } => vec![
                records::Member::Array(values),
                records::Member::Array(count),
            ],
            m => vec![m],
        })
        .chain(vlens.iter().flat_map(|v| {
            [
                records::Member::Array(v.values),
                records::Member::Array(v.count),
            ]
            .into_iter()
            .chain(v.outer.iter().map(|(c, _)| records::Member::Array(*c)))
        }))
        .chain(text_vlens.iter().map(|t| records::Member::Array(t.count)))
        .collect();
    let member = |i: usize| members.contains(&records::Member::Array(i));
    let text_member = |i: usize| members.contains(&records::Member::Text(i));
    let mut groups = Groups {
        ids: HashMap::from([(String::new(), root)]),
    };
    if !model.subset {
        // Every group the source had, in its order: also those holding only attributes,
        // dimensions or nothing.
        for g in hints::text_list(&model.global_facts, crate::GROUPS) {
            groups.ensure(g)?;
        }
    }
    for (i, a) in model.arrays.iter().enumerate() {
        if !member(i) {
            groups.ensure(a.split_name().0)?;
        }
    }
    // Coordinates first, so their dimensions live in their groups.
    let coordinate = |a: &Array| a.role == Role::Coordinate;
    let arrays = || model.arrays.iter().enumerate().filter(|(i, _)| !member(*i));
    let order = arrays()
        .filter(|(_, a)| coordinate(a))
        .chain(arrays().filter(|(_, a)| !coordinate(a)));
    let mut dims = Dims {
        exact: !hints::text_list(&model.global_facts, crate::GROUPS).is_empty(),
        ..Dims::default()
    };
    if !model.subset {
        define_unused_dims(model, &mut groups, &mut dims, warnings)?;
    }
    let mut enums = EnumTypes::default();
    enums.compounds.root = Some(root);
    let mut ctx = Defining {
        groups: &mut groups,
        dims: &mut dims,
        enums: &mut enums,
        warnings,
        compression,
        slashed: Vec::new(),
    };
    let mut vars = Vec::with_capacity(model.arrays.len());
    for (i, a) in order {
        let others = arrays().filter(|(j, _)| *j != i).map(|(_, b)| b);
        define_dim_named_like(a, others, &mut ctx)?;
        let (gid, varid) = define_array(a, &mut ctx)?;
        vars.push((i, gid, varid));
    }
    let mut records = Vec::with_capacity(recs.len());
    for r in recs {
        let ids = records::define(&r, model, &mut ctx)?;
        records.push((r, ids));
    }
    let mut vlen_vars = Vec::with_capacity(vlens.len());
    for v in vlens {
        let ids = ragged::define(&v, model, &mut ctx)?;
        vlen_vars.push((v, ids));
    }
    let mut text_vlen_vars = Vec::with_capacity(text_vlens.len());
    for t in text_vlens {
        let ids = ragged::define_text(&t, model, &mut ctx)?;
        text_vlen_vars.push((t, ids));
    }
    write_globals(model, root, &mut ctx)?;
    let mut strings = Vec::new();
    for (i, t) in model.text_variables.iter().enumerate() {
        match t {
            TextEntry::Variable(_) if text_member(i) || ragged_texts.contains(&i) => {}
            TextEntry::Variable(v) => strings.push(define_text(v, &mut ctx)?),
            TextEntry::Malformed { .. } => ctx.warnings.push(format!(
                "string variable `{}` is malformed in the footer; left out",
                t.name()
            )),
        }
    }
    let slashed = std::mem::take(&mut ctx.slashed);
    ctx.warnings.append(&mut ctx.enums.warnings);
    Ok(Defined {
        vars,
        strings,
        records,
        vlens: vlen_vars,
        text_vlens: text_vlen_vars,
        slashed,
    })
}

/// Writes the model as a netCDF-4 file at `out.staging`.
pub fn write(
    model: &Model,
    chunks: &mut dyn ChunkSource,
    out: Output<'_>,
    compression: Compression,
) -> Result<Written> {
    let mut warnings: Vec<String> = model
        .arrays
        .iter()
        .filter(|a| a.dtype == ElementType::F16)
        .map(|a| {
            format!(
                "`{}`: netCDF has no f16: values exported as f32 (exactly)",
                a.name
            )
        })
        .collect();
    let cpath = path_cstring(out.staging)?;
    let file = nc(
        || format!("create {}", out.staging.display()),
        Handle::create(&cpath),
    )?;
    let root = file.ncid();
    if matches!(compression, Compression::Zstd(_)) && !ffi::filter_avail(root, H5Z_FILTER_ZSTD) {
        return Err(ExportError::Invalid(
            "this netCDF-C library has no zstd filter (HDF5 plugin 32015); use --compress zlib"
                .into(),
        ));
    }
    let d = define_all(model, root, compression, &mut warnings)?;
    nc(|| "end of definitions".into(), ffi::enddef(root))?;
    for v in &d.strings {
        write_text(v)?;
    }
    write_data(model, chunks, &d.vars)?;
    for (r, ids) in &d.records {
        records::write(r, model, chunks, *ids)?;
    }
    for (v, ids) in &d.vlens {
        ragged::write(v, model, chunks, *ids)?;
    }
    for (t, ids) in &d.text_vlens {
        ragged::write_text(t, model, chunks, *ids)?;
    }
    nc(|| format!("close {}", out.staging.display()), file.close())?;
    h5attrs::write(out.staging, &cpath, &d.slashed, &mut warnings)?;
    let arrays = model
        .arrays
        .iter()
        .map(|a| WrittenArray {
            dtype: written_type(a.dtype),
            ..WrittenArray::of(a)
        })
        .collect();
    Ok(Written {
        arrays,
        reused_chunks: 0,
        warnings,
    })
}

/// The netCDF-4 target of the engine's driver registry.
pub struct NcExporter;

impl tet_source::export::Exporter for NcExporter {
    fn name(&self) -> &'static str {
        "netcdf"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["nc", "netcdf4"]
    }
    fn extensions(&self) -> &'static [&'static str] {
        &["nc", "nc4", "cdf", "netcdf"]
    }
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }
    fn write(
        &self,
        model: &Model,
        chunks: &mut dyn ChunkSource,
        out: Output<'_>,
        compression: Compression,
    ) -> Result<Written> {
        write(model, chunks, out, compression)
    }
}
