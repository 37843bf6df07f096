//! What the importer recorded beside values (its private facts, see the crate docs) that an
//! export needs to write them back as the file had them: the netCDF type of text attributes
//! (`string` or `char`), text that was decoded from Latin-1 bytes, enum attribute types, and how
//! a text variable was stored.

use std::collections::{HashMap, HashSet};
use std::ffi::c_int;
use std::fmt;

use netcdf_sys as nc;
use serde::de::{Deserializer, MapAccess, Visitor};
use tet_source::export::{ExportError, Result};
use tet_source::{AttrValue, ElementType, Fact};

use crate::{ATTR_TYPE, LATIN1_ATTRS, STRING_ATTRS, TEXT_ENCODING, TEXT_TYPE};

/// The text list of private fact `key` among `facts` (empty when there is none).
pub(crate) fn text_list<'f>(facts: &'f [Fact], key: &str) -> &'f [String] {
    facts
        .iter()
        .find_map(|f| match f {
            Fact::Private {
                key: k,
                value: AttrValue::TextList(l),
                ..
            } if k == key => Some(l.as_slice()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The text of private fact `key` among `facts`.
pub(crate) fn private_text<'f>(facts: &'f [Fact], key: &str) -> Option<&'f str> {
    facts.iter().find_map(|f| match f {
        Fact::Private {
            key: k,
            value: AttrValue::Text(t),
            ..
        } if k == key => Some(t.as_str()),
        _ => None,
    })
}

/// An enum type as the importer recorded it (`nc_attr_type:<attr>`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EnumDef {
    pub name: String,
    pub base: ElementType,
    /// Members in the source's order.
    pub members: Vec<(String, i128)>,
}

/// The recorded facts of one owner's attributes (a variable's, or the file's: names then are
/// `group/path/name`, as the global attributes are).
#[derive(Debug, Default)]
pub(crate) struct AttrHints {
    /// Single-valued `string` attributes.
    strings: HashSet<String>,
    /// Attributes whose text is Latin-1-decoded bytes.
    latin1: HashSet<String>,
    /// Enum attributes and their types.
    enums: HashMap<String, EnumDef>,
    /// The recorded types of attributes of other user types (compound, vlen, opaque).
    records: HashMap<String, String>,
}

impl AttrHints {
    /// The hints among `facts`.
    pub fn of(facts: &[Fact]) -> Self {
        let mut h = AttrHints::default();
        for f in facts {
            let Fact::Private { key, value, .. } = f else {
                continue;
            };
            match (key.as_str(), value) {
                (STRING_ATTRS, AttrValue::TextList(l)) => h.strings.extend(l.iter().cloned()),
                (LATIN1_ATTRS, AttrValue::TextList(l)) => h.latin1.extend(l.iter().cloned()),
                (k, AttrValue::Text(t)) if k.starts_with(ATTR_TYPE) => {
                    let name = k[ATTR_TYPE.len()..].to_string();
                    match enum_def(t) {
                        Some(e) => drop(h.enums.insert(name, e)),
                        None => drop(h.records.insert(name, t.clone())),
                    }
                }
                _ => {}
            }
        }
        h
    }

    /// Whether attribute `name` was a single-valued `string` attribute.
    pub fn is_string(&self, name: &str) -> bool {
        self.strings.contains(name)
    }

    /// The bytes of text `s` of attribute `name`: Latin-1 when recorded so, else UTF-8.
    pub fn bytes(&self, name: &str, s: &str, what: &dyn Fn() -> String) -> Result<Vec<u8>> {
        if self.latin1.contains(name) {
            latin1(s).ok_or_else(|| not_latin1(what()))
        } else {
            Ok(s.as_bytes().to_vec())
        }
    }

    /// The recorded type of attribute `name` when it was of a compound, vlen or opaque type
    /// (its value then is JSON text).
    pub fn record(&self, name: &str) -> Option<&str> {
        self.records.get(name).map(String::as_str)
    }

    /// The enum type of attribute `name`, when it was of one.
    pub fn enum_type(&self, name: &str) -> Option<&EnumDef> {
        self.enums.get(name)
    }
}

fn not_latin1(what: String) -> ExportError {
    ExportError::Data(format!(
        "{what}: recorded as Latin-1 bytes but holds a character above U+00FF"
    ))
}

/// `s` as Latin-1 bytes (one per character), `None` when a character is above U+00FF.
pub(crate) fn latin1(s: &str) -> Option<Vec<u8>> {
    s.chars().map(|c| u8::try_from(u32::from(c)).ok()).collect()
}

/// How a text variable was stored, from its facts.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TextHints {
    /// Its values are Latin-1-decoded bytes.
    pub latin1: bool,
    /// A 0-d `char` variable (not `string`).
    pub scalar_char: bool,
}

impl TextHints {
    pub fn of(facts: &[Fact]) -> Self {
        let text = |key: &str| {
            facts.iter().find_map(|f| match f {
                Fact::Private {
                    key: k,
                    value: AttrValue::Text(t),
                    ..
                } if k == key => Some(t.as_str()),
                _ => None,
            })
        };
        TextHints {
            latin1: text(TEXT_ENCODING) == Some("latin1"),
            scalar_char: text(TEXT_TYPE) == Some("char"),
        }
    }

    /// The bytes of each value.
    pub fn bytes(&self, values: &[String], what: &dyn Fn() -> String) -> Result<Vec<Vec<u8>>> {
        values
            .iter()
            .map(|s| {
                if self.latin1 {
                    latin1(s).ok_or_else(|| not_latin1(what()))
                } else {
                    Ok(s.as_bytes().to_vec())
                }
            })
            .collect()
    }
}

/// A recorded attribute type: `{"count": n, "type": {...}}` (other keys passed over).
#[derive(serde::Deserialize)]
struct Record {
    #[serde(rename = "type")]
    ty: TypeRecord,
}

/// The `type` of a [`Record`]; an enum's keys (other classes have other keys, passed over).
#[derive(serde::Deserialize)]
struct TypeRecord {
    class: String,
    name: Option<String>,
    base: Option<String>,
    members: Option<Members>,
}

/// An enum's members in the order the record lists them (a JSON map may come back sorted).
pub(crate) struct Members(pub Vec<(String, i128)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(Ordered).map(Members)
    }
}

/// The enum type of a recorded attribute type (`{"count": n, "type": {"class": "enum", "name",
/// "base", "members": {name: value, …}}}`), members in their recorded order; `None` for
/// another class or a malformed record.
fn enum_def(record: &str) -> Option<EnumDef> {
    let r: Record = serde_json::from_str(record).ok()?;
    if r.ty.class != "enum" {
        return None;
    }
    let base = match r.ty.base?.as_str() {
        "i8" => ElementType::I8,
        "u8" => ElementType::U8,
        "i16" => ElementType::I16,
        "u16" => ElementType::U16,
        "i32" => ElementType::I32,
        "u32" => ElementType::U32,
        "i64" => ElementType::I64,
        "u64" => ElementType::U64,
        _ => return None,
    };
    Some(EnumDef {
        name: r.ty.name?,
        base,
        members: r.ty.members?.0,
    })
}

/// Reads a JSON object of integers as `(key, value)` pairs in the text's order.
struct Ordered;

impl<'de> Visitor<'de> for Ordered {
    type Value = Vec<(String, i128)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of integers")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some((k, Int(v))) = map.next_entry::<String, Int>()? {
            out.push((k, v));
        }
        Ok(out)
    }
}

/// An integer read from any integer a deserializer gives (serde's buffered content, which an
/// untagged enum reads through, has no `i128`).
struct Int(i128);

impl<'de> serde::Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IntVisitor)
    }
}

struct IntVisitor;

impl Visitor<'_> for IntVisitor {
    type Value = Int;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer")
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Int, E> {
        Ok(Int(i128::from(v)))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Int, E> {
        Ok(Int(i128::from(v)))
    }

    fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Int, E> {
        Ok(Int(v))
    }
}

/// Enum types defined in the output, per (group id, type name); also the compound types and
/// what writing user-typed attributes warned of.
#[derive(Debug, Default)]
pub(crate) struct EnumTypes {
    ids: HashMap<(c_int, String), nc::nc_type>,
    /// Vlen and opaque types defined: (group, name, definition) → id.
    others: HashMap<(c_int, String, String), nc::nc_type>,
    pub compounds: super::compound::CompoundTypes,
    pub warnings: Vec<String>,
}

impl EnumTypes {
    /// The id of enum type `e` in group `gid`, defined there the first time.
    pub fn id(&mut self, gid: c_int, e: &EnumDef) -> Result<nc::nc_type> {
        if let Some(&id) = self.ids.get(&(gid, e.name.clone())) {
            return Ok(id);
        }
        let base = super::xtype(e.base)
            .ok_or_else(|| ExportError::Invalid(format!("enum `{}`: base {}", e.name, e.base)))?;
        let cn = super::cname(&e.name)?;
        let what = || format!("define enum type `{}`", e.name);
        let id = super::nc(what, crate::ffi::def_enum(gid, base, &cn))?;
        for (m, v) in &e.members {
            let bytes = int_bytes(e.base, *v).ok_or_else(|| {
                ExportError::Data(format!(
                    "enum `{}`: member `{m}` = {v} is outside {}",
                    e.name, e.base
                ))
            })?;
            let cm = super::cname(m)?;
            super::nc(
                || format!("enum `{}` member `{m}`", e.name),
                crate::ffi::insert_enum(gid, id, &cm, &bytes),
            )?;
        }
        self.ids.insert((gid, e.name.clone()), id);
        Ok(id)
    }
}

impl EnumTypes {
    /// The id of the vlen type `name` of values of type `base` in group `gid`, defined there
    /// the first time.
    pub fn vlen(&mut self, gid: c_int, name: &str, base: nc::nc_type) -> Result<nc::nc_type> {
        let key = (gid, name.to_string(), format!("vlen {base}"));
        if let Some(&id) = self.others.get(&key) {
            return Ok(id);
        }
        let cn = super::cname(name)?;
        let what = || format!("define vlen type `{name}`");
        let id = super::nc(what, crate::ffi::def_vlen(gid, base, &cn))?;
        self.others.insert(key, id);
        Ok(id)
    }

    /// The id of the opaque type `name` of `size` bytes in group `gid`, defined there the
    /// first time.
    pub fn opaque(&mut self, gid: c_int, name: &str, size: usize) -> Result<nc::nc_type> {
        let key = (gid, name.to_string(), format!("opaque {size}"));
        if let Some(&id) = self.others.get(&key) {
            return Ok(id);
        }
        let cn = super::cname(name)?;
        let what = || format!("define opaque type `{name}`");
        let id = super::nc(what, crate::ffi::def_opaque(gid, size, &cn))?;
        self.others.insert(key, id);
        Ok(id)
    }
}

/// `v` as one native-endian value of the integer type `t`, when it fits.
pub(crate) fn int_bytes(t: ElementType, v: i128) -> Option<Vec<u8>> {
    Some(match t {
        ElementType::I8 => i8::try_from(v).ok()?.to_ne_bytes().to_vec(),
        ElementType::U8 => u8::try_from(v).ok()?.to_ne_bytes().to_vec(),
        ElementType::I16 => i16::try_from(v).ok()?.to_ne_bytes().to_vec(),
        ElementType::U16 => u16::try_from(v).ok()?.to_ne_bytes().to_vec(),
        ElementType::I32 => i32::try_from(v).ok()?.to_ne_bytes().to_vec(),
        ElementType::U32 => u32::try_from(v).ok()?.to_ne_bytes().to_vec(),
        ElementType::I64 => i64::try_from(v).ok()?.to_ne_bytes().to_vec(),
        ElementType::U64 => u64::try_from(v).ok()?.to_ne_bytes().to_vec(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_records_keep_member_order() {
        let rec = r#"{"count":2,"type":{"class":"enum","name":"cloud_t","base":"i8","members":{"Stratus":2,"Clear":0,"Cumulus":1}}}"#;
        let e = enum_def(rec).unwrap();
        assert_eq!(e.name, "cloud_t");
        assert_eq!(e.base, ElementType::I8);
        let names: Vec<&str> = e.members.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["Stratus", "Clear", "Cumulus"]);
        assert_eq!(e.members[0].1, 2);
        assert!(
            enum_def(r#"{"count":1,"type":{"class":"vlen","name":"v","base":"i8"}}"#).is_none()
        );
    }

    #[test]
    fn latin1_is_one_byte_per_character() {
        assert_eq!(latin1("\u{80}é\u{ff}"), Some(vec![0x80, 0xe9, 0xff]));
        assert_eq!(latin1("€"), None);
    }
}
