//! Compound attributes written as their compound type again: the importer gives their values
//! as JSON text and records the type (`nc_attr_type:<name>` = `{"count": n, "type": {...}}`,
//! the crate's `NcType::json`); here the type is parsed, defined in the attribute's group (its
//! fields: numbers, `char`, enums, nested compounds, arrays of these, at their recorded offsets
//! in a record of the recorded size) and the JSON values encoded into those records.
//!
//! A type with a `string`, vlen or opaque part, or values that do not fit the type, gives an
//! error naming why: the caller then keeps the JSON text (with a warning).

use std::collections::{HashMap, HashSet};
use std::ffi::c_int;

use netcdf_sys as nc;
use serde_json::Value;
use tet_source::export::{ExportError, Result};
use tet_source::{json_text, ElementType};

use super::hints::{int_bytes, latin1, EnumDef, EnumTypes, Members};

/// A type a compound attribute's record holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TypeDef {
    Atomic(ElementType),
    Char,
    /// `string`: a pointer to a NUL-terminated string in memory.
    Str,
    Enum(EnumDef),
    Compound {
        name: String,
        size: usize,
        fields: Vec<FieldDef>,
    },
    /// A vlen of numbers or enums (a compound's field only): an `nc_vlen_t` in the record.
    Vlen {
        name: String,
        base: Box<TypeDef>,
    },
}

/// One field of a compound type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldDef {
    pub name: String,
    pub offset: usize,
    /// Extents of an array field (empty: one value).
    pub dims: Vec<usize>,
    pub ty: TypeDef,
}

/// Nesting deeper than this is refused (the importer analyses at most 16 levels).
const MAX_DEPTH: u32 = 32;

fn atomic(name: &str) -> Option<ElementType> {
    Some(match name {
        "i8" => ElementType::I8,
        "u8" => ElementType::U8,
        "i16" => ElementType::I16,
        "u16" => ElementType::U16,
        "i32" => ElementType::I32,
        "u32" => ElementType::U32,
        "i64" => ElementType::I64,
        "u64" => ElementType::U64,
        "f32" => ElementType::F32,
        "f64" => ElementType::F64,
        _ => return None,
    })
}

impl TypeDef {
    /// Bytes of one value.
    pub fn size(&self) -> usize {
        match self {
            TypeDef::Atomic(t) => t.size(),
            TypeDef::Char => 1,
            TypeDef::Str => std::mem::size_of::<*const std::ffi::c_char>(),
            TypeDef::Enum(e) => e.base.size(),
            TypeDef::Compound { size, .. } => *size,
            TypeDef::Vlen { .. } => std::mem::size_of::<nc::nc_vlen_t>(),
        }
    }

    /// Whether values hold `string` or vlen parts (netCDF-4 then allows no filters on the
    /// variable).
    pub fn has_strings(&self) -> bool {
        match self {
            TypeDef::Str | TypeDef::Vlen { .. } => true,
            TypeDef::Compound { fields, .. } => fields.iter().any(|f| f.ty.has_strings()),
            _ => false,
        }
    }

    /// The value count and type of a recorded attribute type (`{"count": n, "type": {...}}`)
    /// of a compound; `Err`: why it has no form here.
    pub fn of_record(record: &str) -> std::result::Result<(usize, TypeDef), RecordError> {
        let r: Record = serde_json::from_str(record).map_err(RecordError::Json)?;
        let count = usize::try_from(r.count)
            .map_err(|_| RecordError::Malformed("too many values".into()))?;
        match Self::parse(&r.ty, 0)? {
            TypeDef::Vlen { name, .. } => {
                Err(RecordError::Unsupported(format!("a vlen type `{name}`")))
            }
            t => Ok((count, t)),
        }
    }

    /// The type of a recorded type JSON (`NcType::json`, as [`crate::COMPOUND_TYPE`] holds).
    pub fn of_type_json(json: &str) -> std::result::Result<TypeDef, RecordError> {
        let t: RawType = serde_json::from_str(json).map_err(RecordError::Json)?;
        Self::parse(&t, 0)
    }

    fn parse(v: &RawType, depth: u32) -> std::result::Result<TypeDef, RecordError> {
        if depth > MAX_DEPTH {
            return Err(RecordError::Malformed("types nested too deeply".into()));
        }
        let o = match v {
            RawType::Name(s) if s == "char" => return Ok(TypeDef::Char),
            RawType::Name(s) if s == "string" => return Ok(TypeDef::Str),
            RawType::Name(s) => {
                return atomic(s)
                    .map(TypeDef::Atomic)
                    .ok_or_else(|| RecordError::Unsupported(format!("a field of type {s}")))
            }
            RawType::Object(o) => o,
        };
        let name = o.name.clone().unwrap_or_default();
        match o.class.as_str() {
            "enum" => {
                let base = match &o.base_type {
                    Some(RawType::Name(b)) => atomic(b),
                    _ => None,
                };
                match (base, &o.members) {
                    (Some(base), Some(m))
                        if !matches!(base, ElementType::F32 | ElementType::F64) =>
                    {
                        Ok(TypeDef::Enum(EnumDef {
                            name,
                            base,
                            members: m.0.clone(),
                        }))
                    }
                    _ => Err(RecordError::Malformed(format!(
                        "enum `{name}` malformed in its record"
                    ))),
                }
            }
            "vlen" => {
                let base = match &o.base_type {
                    Some(b) => Self::parse(b, depth + 1)?,
                    None => {
                        return Err(RecordError::Malformed(format!(
                            "vlen `{name}` without a base type"
                        )))
                    }
                };
                match base {
                    TypeDef::Atomic(_) | TypeDef::Enum(_) => Ok(TypeDef::Vlen {
                        name,
                        base: Box::new(base),
                    }),
                    _ => Err(RecordError::Unsupported(format!(
                        "vlen `{name}` of other than numbers or enums"
                    ))),
                }
            }
            "compound" => {
                let size = o
                    .size
                    .and_then(|s| usize::try_from(s).ok())
                    .ok_or_else(|| {
                        RecordError::Malformed(format!("compound `{name}` without a size"))
                    })?;
                let fields = o
                    .fields
                    .as_deref()
                    .ok_or_else(|| {
                        RecordError::Malformed(format!("compound `{name}` without fields"))
                    })?
                    .iter()
                    .map(|f| FieldDef::parse(f, depth))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                for f in &fields {
                    if f.end().is_none_or(|e| e > size) {
                        return Err(RecordError::Malformed(format!(
                            "compound `{name}`: field `{}` outside its record",
                            f.name
                        )));
                    }
                }
                Ok(TypeDef::Compound { name, size, fields })
            }
            other => Err(RecordError::Unsupported(format!("a {other} type `{name}`"))),
        }
    }
}

/// A recorded attribute type, as the importer writes it.
#[derive(serde::Deserialize)]
struct Record {
    count: u64,
    #[serde(rename = "type")]
    ty: RawType,
}

/// A recorded type: an atomic type's name, or an object (enum, compound, …).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum RawType {
    Name(String),
    Object(Box<RawObject>),
}

#[derive(serde::Deserialize)]
struct RawObject {
    class: String,
    name: Option<String>,
    /// The base type: an atomic type's name (enums), or a type (vlens).
    #[serde(rename = "base")]
    base_type: Option<RawType>,
    members: Option<Members>,
    size: Option<u64>,
    fields: Option<Vec<RawField>>,
}

#[derive(serde::Deserialize)]
struct RawField {
    name: String,
    offset: u64,
    dims: Option<Vec<u64>>,
    #[serde(rename = "type")]
    ty: RawType,
}

impl FieldDef {
    fn parse(f: &RawField, depth: u32) -> std::result::Result<FieldDef, RecordError> {
        let big = || RecordError::Malformed(format!("field `{}` too large", f.name));
        let offset = usize::try_from(f.offset).map_err(|_| big())?;
        let dims = f
            .dims
            .iter()
            .flatten()
            .map(|&d| usize::try_from(d).map_err(|_| big()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(FieldDef {
            name: f.name.clone(),
            offset,
            dims,
            ty: TypeDef::parse(&f.ty, depth + 1)?,
        })
    }

    /// Bytes of the field's values.
    fn bytes(&self) -> Option<usize> {
        self.dims
            .iter()
            .try_fold(self.ty.size(), |a, &d| a.checked_mul(d))
    }

    /// Where the field ends in its record.
    fn end(&self) -> Option<usize> {
        self.bytes()?.checked_add(self.offset)
    }
}

/// Why a recorded type, or values given for it, have no netCDF form here (the attribute or
/// variable is then kept another way, with this as the warning's reason).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    /// The record is not JSON of a type record.
    #[error("a malformed type record: {0}")]
    Json(#[source] serde_json::Error),
    /// The values are not JSON.
    #[error("values not JSON: {0}")]
    ValuesJson(#[source] serde_json::Error),
    /// The record contradicts itself (what, one line).
    #[error("{0}")]
    Malformed(String),
    /// A valid type with no netCDF form here (which).
    #[error("{0}")]
    Unsupported(String),
    /// Values that do not fit the type (which, one line).
    #[error("{0}")]
    Value(String),
}

/// Compound types defined in the output, per (group id, type name).
#[derive(Debug, Default)]
pub(crate) struct CompoundTypes {
    ids: HashMap<(c_int, String), nc::nc_type>,
    /// The names the types were defined under (differing from the recorded name when netCDF
    /// refuses that: [`type_name`]).
    names: HashSet<(c_int, String)>,
    /// The group compound types are defined in (the root: every group sees its types).
    pub root: Option<c_int>,
}

/// Whether netCDF-C takes `name` as an object name (its `NC_check_name`): not empty, first an
/// ASCII letter or digit, `_` or a multi-byte UTF-8 character, no `/`, no control character,
/// no trailing space. HDF5 allows any name: h5py commits a complex type as `<c16`.
pub(crate) fn nc_name_ok(name: &str) -> bool {
    let Some(first) = name.chars().next() else {
        return false;
    };
    (first.is_ascii_alphanumeric() || first == '_' || !first.is_ascii())
        && !name.chars().any(|c| c == '/' || c.is_ascii_control())
        && !name.ends_with(|c: char| c.is_ascii_whitespace())
}

/// The name a compound type is defined under: its own, when netCDF-C takes it; else, for a
/// complex number as h5py and nc-complex store one (two fields `r`, `i` of one float type) the
/// name nc-complex gives it (`_PFNC_DOUBLE_COMPLEX_TYPE`, `_PFNC_FLOAT_COMPLEX_TYPE`), for
/// another type `_` followed by its name without the characters netCDF-C refuses; with
/// `_<n>` appended while `taken` says the name is another type's.
fn type_name(name: &str, fields: &[FieldDef], taken: impl Fn(&str) -> bool) -> String {
    if nc_name_ok(name) {
        return name.to_string();
    }
    let complex = match fields {
        [r, i] if r.name == "r" && i.name == "i" && r.ty == i.ty && r.dims.is_empty() => {
            match r.ty {
                TypeDef::Atomic(ElementType::F64) => Some("_PFNC_DOUBLE_COMPLEX_TYPE"),
                TypeDef::Atomic(ElementType::F32) => Some("_PFNC_FLOAT_COMPLEX_TYPE"),
                _ => None,
            }
        }
        _ => None,
    };
    let base = complex.map(str::to_string).unwrap_or_else(|| {
        let kept: String = name
            .chars()
            .filter(|&c| c.is_alphanumeric() || c == '_')
            .collect();
        format!("_{kept}")
    });
    let mut n = base.clone();
    let mut k = 1;
    while taken(&n) {
        n = format!("{base}_{k}");
        k += 1;
    }
    n
}

impl CompoundTypes {
    /// Whether a type of group `gid` was defined under `name`.
    fn taken(&self, gid: c_int, name: &str) -> bool {
        self.names.contains(&(gid, name.to_string()))
    }

    /// The netCDF type of `t` in group `gid`, user types defined there the first time (under
    /// a name netCDF-C takes: [`type_name`]).
    pub fn id(&mut self, gid: c_int, t: &TypeDef, enums: &mut EnumTypes) -> Result<nc::nc_type> {
        let (name, size, fields) = match t {
            TypeDef::Atomic(e) => {
                return super::xtype(*e)
                    .ok_or_else(|| ExportError::Invalid(format!("netCDF has no {e} type")))
            }
            TypeDef::Char => return Ok(nc::NC_CHAR),
            TypeDef::Str => return Ok(nc::NC_STRING),
            TypeDef::Enum(e) => return enums.id(gid, e),
            TypeDef::Vlen { name, base } => {
                let b = self.id(gid, base, enums)?;
                return enums.vlen(gid, name, b);
            }
            TypeDef::Compound { name, size, fields } => (name, *size, fields),
        };
        if let Some(&id) = self.ids.get(&(gid, name.clone())) {
            return Ok(id);
        }
        // The field types first: a nested compound must be complete before it is inserted.
        let types = fields
            .iter()
            .map(|f| self.id(gid, &f.ty, enums))
            .collect::<Result<Vec<_>>>()?;
        let defined = type_name(name, fields, |n| self.taken(gid, n));
        let cn = super::cname(&defined)?;
        let what = || format!("define compound type `{defined}`");
        let id = super::nc(what, crate::ffi::def_compound(gid, size, &cn))?;
        self.names.insert((gid, defined.clone()));
        for (f, &ft) in fields.iter().zip(&types) {
            let cf = super::cname(&f.name)?;
            let dims = f
                .dims
                .iter()
                .map(|&d| c_int::try_from(d))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|_| ExportError::Invalid(format!("field `{}` too large", f.name)))?;
            super::nc(
                || format!("compound `{name}` field `{}`", f.name),
                crate::ffi::insert_compound(gid, id, &cf, f.offset, ft, &dims),
            )?;
        }
        self.ids.insert((gid, name.clone()), id);
        Ok(id)
    }
}

/// `count` values of `t` from their JSON (`json`: the value itself for one, else an array),
/// as native-endian records; `Err`: why they do not fit.
pub(crate) fn encode(
    t: &TypeDef,
    count: usize,
    json: &str,
) -> std::result::Result<Vec<u8>, RecordError> {
    let v: Value = serde_json::from_str(json).map_err(RecordError::ValuesJson)?;
    let size = t.size();
    let too_many = || RecordError::Value("too many values".into());
    let mut out = vec![0u8; count.checked_mul(size).ok_or_else(too_many)?];
    if count == 1 {
        put_value(t, &v, &mut out)?;
        return Ok(out);
    }
    let items = v
        .as_array()
        .ok_or_else(|| RecordError::Value("several values, not a JSON array".into()))?;
    if items.len() != count {
        return Err(RecordError::Value(format!(
            "{} values, the record says {count}",
            items.len()
        )));
    }
    for (item, rec) in items.iter().zip(out.chunks_mut(size.max(1))) {
        put_value(t, item, rec)?;
    }
    Ok(out)
}

/// The bytes of text `s` of at most `n` bytes: UTF-8 when it fits (the importer decodes valid
/// UTF-8 as such), else Latin-1 (its decoding of other bytes).
fn text_bytes(s: &str, n: usize) -> std::result::Result<Vec<u8>, RecordError> {
    if s.len() <= n {
        return Ok(s.as_bytes().to_vec());
    }
    latin1(s)
        .filter(|b| b.len() <= n)
        .ok_or_else(|| RecordError::Value(format!("text {s:?} longer than its {n}-byte field")))
}

/// One value of `t` from `v` into `out` (exactly its bytes).
fn put_value(t: &TypeDef, v: &Value, out: &mut [u8]) -> std::result::Result<(), RecordError> {
    match t {
        TypeDef::Atomic(e) => put_number(*e, v, out),
        TypeDef::Enum(e) => put_number(e.base, v, out),
        TypeDef::Str => Err(RecordError::Unsupported("a string part".into())),
        TypeDef::Vlen { .. } => Err(RecordError::Unsupported("a vlen part".into())),
        TypeDef::Char => {
            let s = v
                .as_str()
                .ok_or_else(|| RecordError::Value("a char value that is not text".into()))?;
            let b = text_bytes(s, 1)?;
            out[..b.len()].copy_from_slice(&b);
            Ok(())
        }
        TypeDef::Compound { fields, .. } => {
            let obj = v.as_object().ok_or_else(|| {
                RecordError::Value("a compound value that is not an object".into())
            })?;
            for f in fields {
                let fv = obj
                    .get(&f.name)
                    .ok_or_else(|| RecordError::Value(format!("no value of field `{}`", f.name)))?;
                let outside =
                    || RecordError::Malformed(format!("field `{}` outside its record", f.name));
                let end = f.end().ok_or_else(outside)?;
                let at = out.get_mut(f.offset..end).ok_or_else(outside)?;
                put_array(&f.ty, &f.dims, fv, at)?;
            }
            Ok(())
        }
    }
}

/// An array of extents `dims` of `t` (one value for none; `char` arrays are strings along
/// their last axis) from `v` into `out`.
fn put_array(
    t: &TypeDef,
    dims: &[usize],
    v: &Value,
    out: &mut [u8],
) -> std::result::Result<(), RecordError> {
    if *t == TypeDef::Char && dims.len() == 1 {
        let s = v
            .as_str()
            .ok_or_else(|| RecordError::Value("a char array that is not text".into()))?;
        let b = text_bytes(s, dims[0])?;
        out[..b.len()].copy_from_slice(&b);
        return Ok(());
    }
    let Some((&d, rest)) = dims.split_first() else {
        return put_value(t, v, out);
    };
    let items = v.as_array().filter(|a| a.len() == d).ok_or_else(|| {
        RecordError::Value(format!(
            "an array field of {d} values given as {}",
            short(v)
        ))
    })?;
    let stride = rest
        .iter()
        .try_fold(t.size(), |a, &x| a.checked_mul(x))
        .ok_or_else(|| RecordError::Malformed("an array field too large".into()))?;
    for (item, part) in items.iter().zip(out.chunks_mut(stride.max(1))) {
        put_array(t, rest, item, part)?;
    }
    Ok(())
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// One number of type `t` from `v` (floats: a number or a non-finite spelling) into `out`.
fn put_number(t: ElementType, v: &Value, out: &mut [u8]) -> std::result::Result<(), RecordError> {
    let bad = || RecordError::Value(format!("{} is no {t} value", short(v)));
    let float = || match v {
        Value::String(s) => json_text::parse_non_finite(s),
        v => v.as_f64(),
    };
    let int = || -> Option<i128> {
        v.as_i64()
            .map(i128::from)
            .or_else(|| v.as_u64().map(i128::from))
    };
    let b: Vec<u8> = match t {
        ElementType::F32 => {
            // The importer wrote the f32 widened to f64 in shortest form: exact back.
            (float().ok_or_else(bad)? as f32).to_ne_bytes().to_vec()
        }
        ElementType::F64 => float().ok_or_else(bad)?.to_ne_bytes().to_vec(),
        _ => int_bytes(t, int().ok_or_else(bad)?).ok_or_else(bad)?,
    };
    let dst = out
        .get_mut(..b.len())
        .ok_or_else(|| RecordError::Malformed("a truncated record".into()))?;
    dst.copy_from_slice(&b);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_netcdf_refuses_are_replaced() {
        for ok in ["rec_t", "_x", "1a", "é", "a b", "a<b"] {
            assert!(nc_name_ok(ok), "{ok}");
        }
        for bad in ["", "<c16", "a/b", "a\u{1}", "a ", " a", "-x"] {
            assert!(!nc_name_ok(bad), "{bad:?}");
        }
        let field = |name: &str, t: ElementType, offset: usize| FieldDef {
            name: name.into(),
            offset,
            dims: Vec::new(),
            ty: TypeDef::Atomic(t),
        };
        let c16 = [
            field("r", ElementType::F64, 0),
            field("i", ElementType::F64, 8),
        ];
        let c8 = [
            field("r", ElementType::F32, 0),
            field("i", ElementType::F32, 4),
        ];
        let none = |_: &str| false;
        assert_eq!(type_name("rec_t", &c16, none), "rec_t");
        assert_eq!(type_name("<c16", &c16, none), "_PFNC_DOUBLE_COMPLEX_TYPE");
        assert_eq!(type_name("<c8", &c8, none), "_PFNC_FLOAT_COMPLEX_TYPE");
        assert_eq!(
            type_name(">c16", &c16, |n| n == "_PFNC_DOUBLE_COMPLEX_TYPE"),
            "_PFNC_DOUBLE_COMPLEX_TYPE_1"
        );
        let other = [field("a", ElementType::I32, 0)];
        assert_eq!(type_name("<rec>", &other, none), "_rec");
    }

    #[test]
    fn records_encode_at_their_offsets() {
        let (n, t) = TypeDef::of_record(
            r#"{"count":2,"type":{"class":"compound","name":"rec_t","size":16,"fields":[
                {"name":"tag","offset":0,"type":"char"},
                {"name":"code","offset":1,"dims":[3],"type":"char"},
                {"name":"n","offset":4,"type":"i16"},
                {"name":"w","offset":8,"dims":[2],"type":"f32"}]}}"#,
        )
        .unwrap();
        assert_eq!(n, 2);
        assert_eq!(t.size(), 16);
        let b = encode(
            &t,
            2,
            r#"[{"tag":"a","code":"xy","n":-2,"w":[0.25,"NaN"]},{"tag":"","code":"xyz","n":3,"w":[1.0,2.0]}]"#,
        )
        .unwrap();
        assert_eq!(&b[..4], b"axy\0");
        assert_eq!(i16::from_ne_bytes([b[4], b[5]]), -2);
        assert_eq!(f32::from_ne_bytes([b[8], b[9], b[10], b[11]]), 0.25);
        assert!(f32::from_ne_bytes([b[12], b[13], b[14], b[15]]).is_nan());
        assert_eq!(&b[16..20], b"\0xyz");
        assert!(encode(&t, 1, r#"{"tag":"a","code":"wxyz","n":1,"w":[1,2]}"#).is_err());
        assert!(encode(&t, 1, r#"{"tag":"a","code":"x","n":70000,"w":[1,2]}"#).is_err());
        let vlen = r#"{"count":1,"type":{"class":"vlen","name":"v","base":"i8"}}"#;
        assert!(TypeDef::of_record(vlen).is_err());
        // A vlen field: an `nc_vlen_t` in the record.
        let t = TypeDef::of_type_json(
            r#"{"class":"compound","name":"c","size":24,"fields":[{"name":"k","offset":0,"type":"i16"},
            {"name":"s","offset":8,"type":{"class":"vlen","name":"v","base":"i32"}}]}"#,
        )
        .unwrap();
        let TypeDef::Compound { fields, .. } = &t else {
            panic!("not a compound")
        };
        assert_eq!(fields[1].ty.size(), 16);
        assert!(t.has_strings());
        let e = r#"{"count":1,"type":{"class":"compound","name":"c","size":1,"fields":[
            {"name":"e","offset":0,"type":{"class":"enum","name":"e_t","base":"u8","members":{"b":1,"a":0}}}]}}"#;
        let (_, t) = TypeDef::of_record(e).unwrap();
        let TypeDef::Compound { fields, .. } = t else {
            panic!("not a compound")
        };
        let TypeDef::Enum(e) = &fields[0].ty else {
            panic!("not an enum")
        };
        assert_eq!(e.members, [("b".to_string(), 1), ("a".to_string(), 0)]);
    }
}
