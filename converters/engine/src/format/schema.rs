//! The footer's JSON as serde types: the one description of every key the footer holds, read
//! and written by derive, never by walking `serde_json::Value` with string keys.
//!
//! The document ([`FooterDoc`]) is the footer object of the `THST` trailer: `history` (the
//! reference's rows, [`Row`]), `metadata` ([`Metadata`], or `metadata_ref` when it is spilled)
//! and whatever else is there (the footer digest, keys of other tools). Inside `metadata`, the
//! reference part (`file`, `datasets[name].{attrs, dim_names, coords}`) holds only plain strings
//! within the reference reader's limits; the extension `tet_ext` ([`GlobalExt`] in `metadata`,
//! [`DatasetExt`] in each dataset entry) holds the typed rest: typed attributes ([`TypedAttrs`]),
//! what lowering did to the source ([`SourceRecord`]), typed facts ([`Facts`]), string
//! variables ([`TextVariableRecord`]), skipped items, the history extension ([`RowExt`]) and the
//! chunk digests ([`ChunkDigests`]). Extension schema version: [`EXT_VERSION`].
//!
//! Every object keeps the keys it does not know in its `other` map (`#[serde(flatten)]`), so a
//! file written by a newer tool or with keys of another tool reads and writes back unchanged.
//! The text form is canonical: the document serialized, then every object's keys sorted
//! ([`to_canonical_json`]); what `tet-convert` writes reads back and re-encodes to the same
//! bytes (`tests/footer_schema.rs`). Fields that are `Option` distinguish an absent key from an
//! empty value, so nothing written is added or dropped by a round trip.

use std::collections::BTreeMap;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tet_source::{AttrValue, Attrs, Fact};

/// The extension key, in `metadata` and in each `metadata.datasets` entry.
pub const EXT_KEY: &str = "tet_ext";
/// Version of the extension schema (`metadata.tet_ext.version`).
pub const EXT_VERSION: u64 = 1;

/// Keys an object does not describe, kept as they were.
pub type Other = BTreeMap<String, Value>;

/// The footer object.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FooterDoc {
    /// The provenance rows (required by the reference; `None` only in a malformed footer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Row>>,
    /// The metadata, inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Where the metadata was spilled instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_ref: Option<MetadataRef>,
    /// Other top-level keys (`tet_footer_digest`, another tool's).
    #[serde(flatten)]
    pub other: Other,
}

/// `metadata_ref`: the spilled metadata JSON's place in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataRef {
    pub offset: u64,
    pub len: u64,
}

/// One history row: the object form, or the compact legacy form `["op", "source", "at"]`
/// (kept as its list, whose length and types `verify` checks).
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    Legacy(Vec<String>),
    Object(RowObject),
}

/// A history row in its object form.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RowObject {
    pub op: String,
    pub source: String,
    /// Decimal Unix seconds.
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parents: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<BTreeMap<String, String>>,
    /// Keys the reference does not allow in a row (`verify` reports them).
    #[serde(flatten)]
    pub other: Other,
}

impl Serialize for Row {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Row::Legacy(l) => l.serialize(s),
            Row::Object(o) => o.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Row {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct RowVisitor;
        impl<'de> Visitor<'de> for RowVisitor {
            type Value = Row;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a history row: an object, or [\"op\", \"source\", \"at\"]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Row, A::Error> {
                Vec::<String>::deserialize(de::value::SeqAccessDeserializer::new(seq))
                    .map(Row::Legacy)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Row, A::Error> {
                RowObject::deserialize(de::value::MapAccessDeserializer::new(map)).map(Row::Object)
            }
        }
        d.deserialize_any(RowVisitor)
    }
}

/// The history extension entry of one row that exceeds the reference limits (more than 16
/// parents or 32 params, or a param outside 1..=1024 bytes): its complete parents and params.
/// The row itself keeps its first parents and the params that fit, with the marker param
/// (`footer::HISTORY_MARKER`); `parents` here starts with the row's and `params` holds every
/// one of the row's except the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowExt {
    /// Index of the row in `history`.
    pub row: usize,
    pub parents: Vec<String>,
    pub params: BTreeMap<String, String>,
}

/// A value that is kept as written when it does not have the expected form: readers of the
/// extension skip what they cannot use (as the reference reader skips the whole extension)
/// instead of refusing the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Lenient<T> {
    Typed(T),
    Raw(Value),
}

impl<T> Lenient<T> {
    /// The typed value, when it had the expected form.
    pub fn typed(&self) -> Option<&T> {
        match self {
            Lenient::Typed(t) => Some(t),
            Lenient::Raw(_) => None,
        }
    }
}

/// A `metadata.file` value: a string, as the reference requires, or anything else as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    Text(String),
    Other(Value),
}

/// `metadata`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Metadata {
    /// `tool`, `library_version`, `created_at`, … (strings of 1..=1024 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<BTreeMap<String, Scalar>>,
    /// At most 256 entries, named by dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasets: Option<BTreeMap<String, DatasetEntry>>,
    #[serde(default, rename = "tet_ext", skip_serializing_if = "Option::is_none")]
    pub ext: Option<GlobalExt>,
    #[serde(flatten)]
    pub other: Other,
}

/// `metadata.datasets.<name>` (or, past the reference's limits, `metadata.tet_ext.datasets`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DatasetEntry {
    /// The plain-string view of the attributes that fit (at most 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attrs: Option<BTreeMap<String, String>>,
    /// One name per axis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim_names: Option<Vec<String>>,
    /// Per axis name, its labels (at most 64, one per position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coords: Option<BTreeMap<String, CoordAxis>>,
    #[serde(default, rename = "tet_ext", skip_serializing_if = "Option::is_none")]
    pub ext: Option<DatasetExt>,
    #[serde(flatten)]
    pub other: Other,
}

/// One axis of `coords`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CoordAxis {
    pub labels: Vec<String>,
    #[serde(flatten)]
    pub other: Other,
}

/// `metadata.datasets.<name>.tet_ext`: what the reference part could not hold, and the
/// [`SourceRecord`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DatasetExt {
    /// Every attribute, typed, in source order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attrs: Option<TypedAttrs>,
    /// Names of the attributes the reference `attrs` left out (informative; not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attrs_not_in_reference: Option<Vec<String>>,
    /// The dimension names when one of them is outside the reference limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim_names: Option<Vec<String>>,
    /// The coordinate axes outside the reference limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coords: Option<BTreeMap<String, CoordAxis>>,
    #[serde(flatten)]
    pub record: SourceRecord,
}

/// What a dataset was in the source and what storing it did (the typed part of a dataset's
/// extension that the model carries as it is).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SourceRecord {
    /// The shape the source gave when lowering changed it (`[]`: a 0-d variable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_shape: Option<Vec<u64>>,
    /// The source element type (its `ElementType` name) when it was widened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_dtype: Option<String>,
    /// How it was widened (`i8 -> i16`, `bool -> u8`, `bf16 -> f32`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widened: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<RecordedRole>,
    /// The source's chunk shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_chunks: Option<Vec<u64>>,
    /// The source's filters, as the importer describes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_filters: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_facts: Option<Facts>,
    /// Extension keys this version does not describe.
    #[serde(flatten)]
    pub other: Other,
}

impl SourceRecord {
    pub fn is_empty(&self) -> bool {
        *self == SourceRecord::default()
    }

    /// The notes (none when absent).
    pub fn notes(&self) -> &[String] {
        self.notes.as_deref().unwrap_or_default()
    }

    /// The typed facts (none when absent).
    pub fn facts(&self) -> &[Fact] {
        self.source_facts
            .as_ref()
            .map_or(&[][..], |f| f.0.as_slice())
    }

    /// The record as a JSON object (for `tet info`).
    pub fn to_json_map(&self) -> serde_json::Map<String, Value> {
        canonical_map(self)
    }
}

/// `value` as a JSON object with its keys sorted (empty when it is no object).
fn canonical_map<T: Serialize>(value: &T) -> serde_json::Map<String, Value> {
    match serde_json::to_value(value).map(|v| tet_source::json_text::canonical(&v)) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// A dataset's recorded role. Only coordinates are recorded; `data` is read too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordedRole {
    Coordinate,
    Data,
}

/// `metadata.tet_ext`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GlobalExt {
    /// [`EXT_VERSION`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// `metadata.file` entries outside the reference limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<BTreeMap<String, Scalar>>,
    /// Dataset entries past the reference's 256, or whose name does not fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasets: Option<BTreeMap<String, DatasetEntry>>,
    /// The history extension (malformed: ignored, as the reference ignores the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Lenient<Vec<RowExt>>>,
    /// Global (file-level) attributes, typed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_attrs: Option<TypedAttrs>,
    /// Source items with no `.tet` form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<Vec<Lenient<SkippedRecord>>>,
    /// xxh3-64 digests of the stored chunks (see `integrity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_digests: Option<Lenient<ChunkDigests>>,
    #[serde(flatten)]
    pub record: FileRecord,
}

/// The file-level extension facts the model carries as they are.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FileRecord {
    /// Facts about the source file (multi-dimensional global attributes' shapes, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_facts: Option<Facts>,
    /// String variables, whose values have no numeric `.tet` form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_variables: Option<Vec<Lenient<TextVariableRecord>>>,
    /// Extension keys this version does not describe.
    #[serde(flatten)]
    pub other: Other,
}

impl FileRecord {
    pub fn is_empty(&self) -> bool {
        *self == FileRecord::default()
    }

    /// The record as a JSON object (for `tet info`).
    pub fn to_json_map(&self) -> serde_json::Map<String, Value> {
        canonical_map(self)
    }
}

/// One skipped source item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedRecord {
    pub name: String,
    pub reason: String,
    #[serde(flatten)]
    pub other: Other,
}

/// `tet_ext.chunk_digests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkDigests {
    /// `xxh3-64`.
    pub algorithm: String,
    /// One per index row: 16 lowercase hex digits, or `null` for a zstd frame with its own
    /// checksum.
    pub digests: Vec<Option<String>>,
    #[serde(flatten)]
    pub other: Other,
}

/// The character axis of a string variable stored as characters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CharDim {
    pub name: String,
    pub len: u64,
}

/// One string variable (`tet_ext.text_variables`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextVariableRecord {
    pub name: String,
    pub shape: Vec<u64>,
    /// Written as `null` when the source names none.
    #[serde(default)]
    pub dims: Option<Vec<String>>,
    /// The values in C order.
    pub values: Vec<String>,
    pub attrs: TypedAttrs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub char_dim: Option<CharDim>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Facts>,
    #[serde(flatten)]
    pub other: Other,
}

impl TextVariableRecord {
    /// The record of a string variable.
    pub fn new(t: &tet_source::TextVariable) -> Self {
        TextVariableRecord {
            name: t.name.clone(),
            shape: t.shape.clone(),
            dims: t.dims.clone(),
            values: t.values.clone(),
            attrs: TypedAttrs(t.attrs.clone()),
            char_dim: t.char_axis.as_ref().map(|c| CharDim {
                name: c.dim.clone(),
                len: c.len,
            }),
            // Only when there are some: records of variables without facts are unchanged.
            facts: (!t.facts.is_empty()).then(|| Facts(t.facts.clone())),
            other: Other::new(),
        }
    }

    /// The variable it records; `None` when the value count is not the product of the shape.
    /// Dims of another length than the shape are dropped.
    pub fn variable(&self) -> Option<tet_source::TextVariable> {
        let n = self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
        if n != self.values.len() as u64 {
            return None;
        }
        Some(tet_source::TextVariable {
            name: self.name.clone(),
            shape: self.shape.clone(),
            dims: self.dims.clone().filter(|d| d.len() == self.shape.len()),
            values: self.values.clone(),
            attrs: self.attrs.0.clone(),
            char_axis: self.char_dim.as_ref().map(|c| tet_source::CharAxis {
                dim: c.name.clone(),
                len: c.len,
            }),
            facts: self.facts.as_ref().map(|f| f.0.clone()).unwrap_or_default(),
        })
    }
}

/// The name of a text variable record, also of one that is malformed.
pub fn text_record_name(r: &Lenient<TextVariableRecord>) -> Option<String> {
    #[derive(Deserialize)]
    struct Named {
        name: String,
    }
    match r {
        Lenient::Typed(t) => Some(t.name.clone()),
        Lenient::Raw(v) => Named::deserialize(v).ok().map(|n| n.name),
    }
}

// ---------------------------------------------------------------------------------------------
// Typed attribute values: `{"<type>": [values]}` (`{"text": "…"}` for one string).

/// A list of typed attributes: `[[name, {"<type>": value}], …]`, in source order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TypedAttrs(pub Attrs);

/// One attribute value in its typed JSON form, borrowed for writing.
pub struct TypedValue<'a>(pub &'a AttrValue);

/// An f32 written as the f64 nearest to its shortest decimal form, so the JSON shows `0.1`, not
/// `0.10000000149011612`, and still reads back to the same f32; NaN and the infinities as
/// strings.
struct F32Out(f32);
/// An f64 written as the shortest decimal that reads back to it; NaN and the infinities as
/// strings.
struct F64Out(f64);

fn write_float<S: Serializer>(v: f64, s: S) -> Result<S::Ok, S::Error> {
    match tet_source::json_text::non_finite(v) {
        Some(name) => s.serialize_str(name),
        None => s.serialize_f64(v),
    }
}

impl Serialize for F32Out {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        if !v.is_finite() {
            return write_float(v as f64, s);
        }
        write_float(v.to_string().parse::<f64>().unwrap_or(v as f64), s)
    }
}

impl Serialize for F64Out {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write_float(self.0, s)
    }
}

/// A float read back: a number, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
struct FloatIn(f64);

impl<'de> Deserialize<'de> for FloatIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = FloatIn;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, \"NaN\", \"Infinity\" or \"-Infinity\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<FloatIn, E> {
                Ok(FloatIn(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<FloatIn, E> {
                Ok(FloatIn(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<FloatIn, E> {
                Ok(FloatIn(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FloatIn, E> {
                tet_source::json_text::parse_non_finite(v)
                    .map(FloatIn)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for TypedValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        match self.0 {
            AttrValue::Text(v) => m.serialize_entry("text", v)?,
            AttrValue::TextList(v) => m.serialize_entry("text_list", v)?,
            AttrValue::I8(v) => m.serialize_entry("i8", v)?,
            AttrValue::U8(v) => m.serialize_entry("u8", v)?,
            AttrValue::I16(v) => m.serialize_entry("i16", v)?,
            AttrValue::U16(v) => m.serialize_entry("u16", v)?,
            AttrValue::I32(v) => m.serialize_entry("i32", v)?,
            AttrValue::U32(v) => m.serialize_entry("u32", v)?,
            AttrValue::I64(v) => m.serialize_entry("i64", v)?,
            AttrValue::U64(v) => m.serialize_entry("u64", v)?,
            AttrValue::F32(v) => {
                let out: Vec<F32Out> = v.iter().map(|&x| F32Out(x)).collect();
                m.serialize_entry("f32", &out)?
            }
            AttrValue::F64(v) => {
                let out: Vec<F64Out> = v.iter().map(|&x| F64Out(x)).collect();
                m.serialize_entry("f64", &out)?
            }
        }
        m.end()
    }
}

/// The typed form read back (one key: the type).
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum TypedValueIn {
    Text(String),
    TextList(Vec<String>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    I16(Vec<i16>),
    U16(Vec<u16>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    F32(Vec<FloatIn>),
    F64(Vec<FloatIn>),
}

impl From<TypedValueIn> for AttrValue {
    fn from(v: TypedValueIn) -> AttrValue {
        match v {
            TypedValueIn::Text(x) => AttrValue::Text(x),
            TypedValueIn::TextList(x) => AttrValue::TextList(x),
            TypedValueIn::I8(x) => AttrValue::I8(x),
            TypedValueIn::U8(x) => AttrValue::U8(x),
            TypedValueIn::I16(x) => AttrValue::I16(x),
            TypedValueIn::U16(x) => AttrValue::U16(x),
            TypedValueIn::I32(x) => AttrValue::I32(x),
            TypedValueIn::U32(x) => AttrValue::U32(x),
            TypedValueIn::I64(x) => AttrValue::I64(x),
            TypedValueIn::U64(x) => AttrValue::U64(x),
            TypedValueIn::F32(x) => AttrValue::F32(x.into_iter().map(|f| f.0 as f32).collect()),
            TypedValueIn::F64(x) => AttrValue::F64(x.into_iter().map(|f| f.0).collect()),
        }
    }
}

/// Reads one typed attribute value.
pub fn read_typed_value<'de, D: Deserializer<'de>>(d: D) -> Result<AttrValue, D::Error> {
    TypedValueIn::deserialize(d).map(AttrValue::from)
}

impl Serialize for TypedAttrs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|(k, v)| (k, TypedValue(v))))
    }
}

impl<'de> Deserialize<'de> for TypedAttrs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let pairs = Vec::<(String, TypedValueIn)>::deserialize(d)?;
        Ok(TypedAttrs(
            pairs.into_iter().map(|(k, v)| (k, v.into())).collect(),
        ))
    }
}

/// Typed facts ([`Fact`], one variant each), written as the fact entries
/// ([`Fact::all_entries`]: `[[key, {"<type>": value}], …]`, the key naming the fact) and read
/// back with [`Fact::from_entries`], which keeps an entry it does not know as
/// [`Fact::Private`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Facts(pub Vec<Fact>);

impl Serialize for Facts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        TypedAttrs(Fact::all_entries(&self.0)).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Facts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entries = TypedAttrs::deserialize(d)?;
        Ok(Facts(Fact::from_entries(&entries.0)))
    }
}

// ---------------------------------------------------------------------------------------------
// Text

/// `value` serialized, every object's keys sorted: the canonical JSON text.
pub fn to_canonical_json<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    let v = serde_json::to_value(value)?;
    Ok(tet_source::json_text::canonical(&v).to_string())
}

/// Reads `T` from a parsed JSON value; the error names the path of the offending key
/// (`metadata.datasets.x.attrs.units: invalid type …`).
pub fn from_value<'de, T: Deserialize<'de>>(v: &'de Value) -> Result<T, SchemaError> {
    serde_path_to_error::deserialize(v).map_err(|e| SchemaError {
        path: e.path().to_string(),
        source: e.into_inner(),
    })
}

/// A footer JSON value that does not have the schema's form (the cause is its
/// [`source`](std::error::Error::source); [`error_chain`] prints both).
#[derive(Debug, thiserror::Error)]
#[error("footer JSON does not fit the schema at `{path}`")]
pub struct SchemaError {
    /// Where in the document (`.`-separated keys and indices).
    pub path: String,
    #[source]
    pub source: serde_json::Error,
}

/// An error and its causes joined with `: ` (for the places that keep an error as text:
/// `TetError::Footer`, `verify`'s findings, storage errors). A cause whose text the message
/// already holds is not repeated: many errors here print their cause and keep it as
/// `source()` too (`{context}: {source}`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        cause = c.source();
    }
    text
}

// ---------------------------------------------------------------------------------------------
// What a reader needs before (and without) the whole document

/// The parts of the footer a reader needs even when the rest does not fit the schema: where
/// the metadata was spilled, the chunk digests and the footer digest. Other keys are passed
/// over.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FooterFrame {
    /// Read as [`MetadataRef`] by the reader, which refuses any other form.
    #[serde(default)]
    pub metadata_ref: Option<Value>,
    #[serde(default)]
    pub metadata: Option<Lenient<MetadataFrame>>,
    /// `xxh3-64:<16 hex>` (see `integrity`).
    #[serde(default)]
    pub tet_footer_digest: Option<Scalar>,
}

/// `metadata`, as far as [`FooterFrame`] reads it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MetadataFrame {
    #[serde(default, rename = "tet_ext")]
    pub ext: Option<Lenient<ExtFrame>>,
}

/// `metadata.tet_ext`, as far as [`FooterFrame`] reads it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ExtFrame {
    #[serde(default)]
    pub chunk_digests: Option<Lenient<ChunkDigests>>,
}

impl MetadataFrame {
    /// The recorded chunk digests, when there is the key.
    pub fn chunk_digests(&self) -> Option<&Lenient<ChunkDigests>> {
        self.ext.as_ref()?.typed()?.chunk_digests.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("reading `x`: {0}")]
    struct Prints(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("reading `x`")]
    struct Keeps(#[source] std::io::Error);

    #[test]
    fn a_cause_is_written_once() {
        let io = || std::io::Error::other("disk on fire");
        // A message that prints its cause and keeps it as source(): not repeated.
        assert_eq!(error_chain(&Prints(io())), "reading `x`: disk on fire");
        // One that only keeps it: joined.
        assert_eq!(error_chain(&Keeps(io())), "reading `x`: disk on fire");
    }
}
