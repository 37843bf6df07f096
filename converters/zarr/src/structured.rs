//! Structured (record) data types: Zarr v2 `dtype` lists (`[["a", "<i4"], ["b", ">f8", [3]]]`,
//! NumPy's `descr`) and the Zarr v3 `structured` data type zarr-python 3 writes
//! (`{"name": "structured", "configuration": {"fields": [["a", "int32"], …]}}`).
//!
//! zarrs cannot read these types, so the array's metadata is rewritten to an opaque type of
//! the record's size (v3 raw bits `r<bits>`, v2 `|V<bytes>`): zarrs then runs the array's codec
//! chain (compressors, filters, sharding, order F) on whole records and never swaps bytes in
//! them (raw bits are one-byte elements to the `bytes` codec); missing chunks read as the fill
//! value, which is the record's bytes in base64 in both versions, as raw bits take it. Each
//! field is then cut out of the records here ([`extract`]), byte-swapped to little-endian when
//! it is stored big-endian.
//!
//! Byte order: a v2 field has its own (`<`, `>`; `|` and `=` are this machine's,
//! little-endian). A v3 field type has none, and zarr-python 3 reads every v3 field as
//! little-endian whatever the `bytes` codec's `endian` says (it ignores it for structured
//! types); so does this module.
//!
//! What a field becomes follows the NPY importer: one variable per numeric field
//! (`<array>/<field>`, nested records joined with `/`); sub-array fields add trailing axes;
//! unnamed raw (`|V`, v3 `raw_bytes`) fields are padding and ignored; a field with an empty
//! name that is not padding is named `f<position>` (`_` appended while that collides) with a
//! note; complex fields are complex variables; `datetime64` / `timedelta64` fields are `int64`
//! counts with `units`; fixed-length byte (`S`, v3 `null_terminated_bytes`) and UCS-4 (`U`, v3
//! `fixed_length_utf32`) strings are text; named raw fields and extended precision have no
//! numeric form (unsupported, that field only). A field type with no fixed size (objects,
//! variable-length strings) or one this module does not know makes the whole array
//! unsupported.

use serde_json::{Map, Value};
use tet_source::record::{self, Place};
use tet_source::{AttrValue, Attrs, ElementType};

/// Why a record data type, or records of it, cannot be read: what the importer does not map
/// (an unsupported item), or what contradicts itself; under the field it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The type description or the records contradict themselves (what, one line).
    #[error("{0}")]
    Malformed(String),
    /// Valid, but with no form here (what, one line).
    #[error("{0}")]
    Unsupported(String),
    /// An error about one field of the record.
    #[error("field '{field}': {source}")]
    InField {
        /// The field's name.
        field: String,
        /// What is wrong with it.
        source: Box<RecordError>,
    },
}

impl RecordError {
    /// This error about field `name`.
    fn in_field(self, name: &str) -> Self {
        RecordError::InField {
            field: name.to_string(),
            source: Box::new(self),
        }
    }

    /// Whether the record is valid but not mappable (whatever field it is about).
    pub fn is_unsupported(&self) -> bool {
        match self {
            RecordError::Unsupported(_) => true,
            RecordError::InField { source, .. } => source.is_unsupported(),
            RecordError::Malformed(_) => false,
        }
    }
}

fn bad(what: impl Into<String>) -> RecordError {
    RecordError::Malformed(what.into())
}

fn unsupported(what: impl Into<String>) -> RecordError {
    RecordError::Unsupported(what.into())
}

/// Deepest nesting of records and sub-arrays accepted.
const MAX_NESTING: usize = 32;
/// Most leaves (variables) one record may have.
const MAX_LEAVES: usize = 1 << 16;

/// A record data type: its size and the variables it becomes.
#[derive(Debug, Clone)]
pub struct Record {
    /// Bytes of one record.
    pub size: u64,
    /// The fields, in record order (nested records flattened).
    pub leaves: Vec<Leaf>,
}

/// One variable derived from a (nested) field: its path below the array (`["pos", "x"]`),
/// where its elements lie in a record, what it is and notes on its naming (an empty name
/// replaced).
pub type Leaf = record::Leaf<LeafKind>;

/// What a field is.
#[derive(Debug, Clone)]
pub enum LeafKind {
    /// Numbers of an element type.
    Numeric {
        elem: ElementType,
        /// Stored big-endian (each part, for a complex type).
        swap: bool,
        attrs: Attrs,
        notes: Vec<String>,
    },
    /// Fixed-length strings: bytes (`S`) or UCS-4 code points (`U`, `utf32`).
    Text { utf32: bool, chars: u64, swap: bool },
    /// No numeric or text form, with the reason.
    Unsupported(String),
}

/// How bytes are fixed after they are cut out of the records (the one of every format).
pub use tet_source::record::Fix;

/// Where one field sits in a record, and how it is delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldLayout {
    /// Bytes of one record.
    pub record: usize,
    /// Where its elements lie in a record.
    pub place: Place,
    /// Bytes of one delivered element.
    pub esize: usize,
    pub fix: Fix,
}

impl FieldLayout {
    /// The layout of a numeric leaf in records of `record` bytes, after checking that every
    /// element of it lies inside a record.
    pub fn new(
        record: u64,
        leaf: &Leaf,
        elem: ElementType,
        swap: bool,
    ) -> Result<Self, RecordError> {
        Self::with(record, leaf, elem.size() as u64, Fix::numbers(elem, swap))
    }

    /// The layout of `esize`-byte elements of `leaf`, checked to lie inside a record.
    pub fn with(record: u64, leaf: &Leaf, esize: u64, fix: Fix) -> Result<Self, RecordError> {
        if !leaf.place.fits(record, esize) {
            return Err(bad(format!(
                "field '{}' lies outside the {record}-byte record",
                leaf.path.join("/")
            )));
        }
        let size = |v: u64| usize::try_from(v).map_err(|_| bad("record too large"));
        Ok(FieldLayout {
            record: size(record)?,
            place: leaf.place.clone(),
            esize: size(esize)?,
            fix,
        })
    }
}

/// Cuts elements of one field out of whole records: for every record of `records` (C order),
/// the block `inner_start .. inner_start + inner_count` of the field's trailing axes, in C
/// order, `esize` bytes each, fixed as [`FieldLayout::fix`] says, into `out`
/// ([`record::gather`]). Errors (never panics) when `records` is not whole records, `out` has
/// the wrong length or an element lies outside its record.
pub fn extract(
    records: &[u8],
    f: &FieldLayout,
    inner_start: &[u64],
    inner_count: &[u64],
    out: &mut [u8],
) -> Result<(), RecordError> {
    let elem = record::Element::plain(f.esize, f.fix);
    record::gather(
        records,
        f.record,
        &f.place,
        inner_start,
        inner_count,
        elem,
        out,
    )
    .map_err(|e| bad(e.to_string()))
}

/// A field's type, parsed.
enum Ty {
    Scalar(Scalar),
    Record(Vec<FieldTy>),
}

struct FieldTy {
    name: String,
    ty: Ty,
    /// Sub-array shape (empty for a plain field).
    shape: Vec<u64>,
}

enum Scalar {
    Num(ElementType, bool),
    /// datetime64 (`true`) / timedelta64 counts of `unit` (e.g. `10s`), big-endian or not.
    Time(bool, String, bool),
    Text {
        utf32: bool,
        chars: u64,
        swap: bool,
    },
    /// Bytes with no numeric form: raw (padding when unnamed) or not, and the reason.
    Opaque {
        size: u64,
        raw: bool,
        what: String,
    },
}

impl Ty {
    fn size(&self) -> Option<u64> {
        match self {
            Ty::Scalar(s) => match s {
                Scalar::Num(e, _) => Some(e.size() as u64),
                Scalar::Time(..) => Some(8),
                Scalar::Text { utf32, chars, .. } => chars.checked_mul(if *utf32 { 4 } else { 1 }),
                Scalar::Opaque { size, .. } => Some(*size),
            },
            Ty::Record(fields) => fields.iter().try_fold(0u64, |a, f| {
                let n = f.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
                a.checked_add(f.ty.size()?.checked_mul(n)?)
            }),
        }
    }
}

/// Whether Zarr v3 array metadata's data type is `structured`.
pub fn is_v3_structured(obj: &Map<String, Value>) -> bool {
    obj.get("data_type")
        .and_then(Value::as_object)
        .and_then(|d| d.get("name"))
        .and_then(Value::as_str)
        == Some("structured")
}

/// The record a Zarr v2 `dtype` list describes.
pub fn parse_v2(dtype: &Value) -> Result<Record, RecordError> {
    let fields = parse_fields(dtype, false, 0)?;
    record_of(fields)
}

/// The record a Zarr v3 `structured` data type (`{"name": "structured", "configuration":
/// {"fields": …}}`) describes.
pub fn parse_v3(data_type: &Value) -> Result<Record, RecordError> {
    let fields = data_type
        .get("configuration")
        .and_then(|c| c.get("fields"))
        .ok_or_else(|| bad("structured data type without configuration.fields"))?;
    record_of(parse_fields(fields, true, 0)?)
}

fn record_of(fields: Vec<FieldTy>) -> Result<Record, RecordError> {
    let ty = Ty::Record(fields);
    let size = ty.size().ok_or_else(|| bad("record size overflows"))?;
    if size == 0 {
        return Err(bad("record of 0 bytes"));
    }
    let Ty::Record(fields) = &ty else {
        return Err(bad("not a record"));
    };
    let mut leaves = Vec::new();
    walk(fields, &mut Vec::new(), &Place::whole(), &mut leaves)?;
    Ok(Record { size, leaves })
}

/// Parses a list of fields (`[name, type]` or `[name, type, shape]`).
fn parse_fields(list: &Value, v3: bool, depth: usize) -> Result<Vec<FieldTy>, RecordError> {
    if depth > MAX_NESTING {
        return Err(unsupported(format!(
            "records nested deeper than {MAX_NESTING} levels"
        )));
    }
    let items = list
        .as_array()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| bad("a record's fields must be a non-empty list"))?;
    items
        .iter()
        .map(|item| {
            let parts = item
                .as_array()
                .filter(|p| p.len() == 2 || p.len() == 3)
                .ok_or_else(|| {
                    bad(format!(
                        "field {item} is not [name, type] or [name, type, shape]"
                    ))
                })?;
            let name = parts[0]
                .as_str()
                .ok_or_else(|| bad(format!("field name {} is not a string", parts[0])))?
                .to_string();
            let ty = parse_type(&parts[1], v3, depth + 1).map_err(|e| e.in_field(&name))?;
            let shape = match parts.get(2) {
                None => Vec::new(),
                Some(Value::Number(n)) => {
                    vec![n.as_u64().ok_or_else(|| bad("bad sub-array shape"))?]
                }
                Some(Value::Array(dims)) => dims
                    .iter()
                    .map(Value::as_u64)
                    .collect::<Option<Vec<u64>>>()
                    .ok_or_else(|| bad(format!("field '{name}': bad sub-array shape")))?,
                Some(other) => return Err(bad(format!("field '{name}': sub-array shape {other}"))),
            };
            if shape.len() > MAX_NESTING {
                return Err(bad(format!(
                    "field '{name}': sub-array of {} axes",
                    shape.len()
                )));
            }
            Ok(FieldTy { name, ty, shape })
        })
        .collect()
}

fn parse_type(v: &Value, v3: bool, depth: usize) -> Result<Ty, RecordError> {
    match v {
        Value::String(s) if v3 => v3_scalar(s, None).map(Ty::Scalar),
        Value::String(s) => v2_scalar(s).map(Ty::Scalar),
        Value::Array(_) if !v3 => Ok(Ty::Record(parse_fields(v, v3, depth)?)),
        Value::Object(o) if v3 => {
            let name = o
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("data type object without a name"))?;
            if name == "structured" {
                return Ok(Ty::Record(parse_fields(
                    o.get("configuration")
                        .and_then(|c| c.get("fields"))
                        .ok_or_else(|| bad("structured data type without configuration.fields"))?,
                    v3,
                    depth,
                )?));
            }
            let conf = o.get("configuration").and_then(Value::as_object);
            v3_scalar(name, conf).map(Ty::Scalar)
        }
        other => Err(unsupported(format!("data type {other} is not understood"))),
    }
}

fn numeric_v3(name: &str) -> Option<ElementType> {
    use ElementType as E;
    Some(match name {
        "bool" => E::Bool,
        "int8" => E::I8,
        "int16" => E::I16,
        "int32" => E::I32,
        "int64" => E::I64,
        "uint8" => E::U8,
        "uint16" => E::U16,
        "uint32" => E::U32,
        "uint64" => E::U64,
        "float16" => E::F16,
        "bfloat16" => E::BF16,
        "float32" => E::F32,
        "float64" => E::F64,
        "complex64" | "complex_float32" => E::C64,
        "complex128" | "complex_float64" => E::C128,
        _ => return None,
    })
}

/// A v3 field type other than a record (always little-endian).
fn v3_scalar(name: &str, conf: Option<&Map<String, Value>>) -> Result<Scalar, RecordError> {
    if let Some(e) = numeric_v3(name) {
        return Ok(Scalar::Num(e, false));
    }
    let length = || {
        conf.and_then(|c| c.get("length_bytes"))
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(format!("{name} without configuration.length_bytes")))
    };
    match name {
        "raw_bytes" => Ok(Scalar::Opaque {
            size: length()?,
            raw: true,
            what: format!("raw bytes ({name}) have no numeric .tet form"),
        }),
        "null_terminated_bytes" => Ok(Scalar::Text {
            utf32: false,
            chars: length()?,
            swap: false,
        }),
        "fixed_length_utf32" => {
            let n = length()?;
            if !n.is_multiple_of(4) {
                return Err(bad(format!("{name} of {n} bytes (not a multiple of 4)")));
            }
            Ok(Scalar::Text {
                utf32: true,
                chars: n / 4,
                swap: false,
            })
        }
        "numpy.datetime64" | "numpy.timedelta64" => {
            let unit = conf
                .and_then(|c| c.get("unit"))
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("{name} without a unit")))?;
            let scale = conf
                .and_then(|c| c.get("scale_factor"))
                .and_then(Value::as_u64)
                .unwrap_or(1);
            let unit = if scale > 1 {
                format!("{scale}{unit}")
            } else {
                unit.to_string()
            };
            Ok(Scalar::Time(name == "numpy.datetime64", unit, false))
        }
        _ => match name.strip_prefix('r').and_then(|b| b.parse::<u64>().ok()) {
            Some(bits) if bits > 0 && bits.is_multiple_of(8) => Ok(Scalar::Opaque {
                size: bits / 8,
                raw: true,
                what: format!("raw bits ({name}) have no numeric .tet form"),
            }),
            _ => Err(unsupported(format!(
                "data type {name} has no fixed size known here (or is not supported)"
            ))),
        },
    }
}

/// A v2 (NumPy) type string: byte order, kind, size, optional `[unit]`.
fn v2_scalar(s: &str) -> Result<Scalar, RecordError> {
    let (big, rest) = match s.as_bytes().first() {
        Some(b'>') => (true, &s[1..]),
        Some(b'<' | b'|' | b'=') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut chars = rest.chars();
    let kind = chars
        .next()
        .ok_or_else(|| bad(format!("empty type string '{s}'")))?;
    let tail = chars.as_str();
    let (digits, unit) = match tail.find('[') {
        Some(i) => (&tail[..i], Some(&tail[i..])),
        None => (tail, None),
    };
    if kind == 'O' {
        return Err(unsupported(format!(
            "'{s}' (Python objects) has no fixed size: the array cannot be read"
        )));
    }
    let size: u64 = digits
        .parse()
        .map_err(|_| unsupported(format!("type string '{s}' is not understood")))?;
    let swap = big && size > 1;
    let num = |e: ElementType| {
        if e.size() as u64 == size {
            Ok(Scalar::Num(e, swap))
        } else {
            Err(())
        }
    };
    use ElementType as E;
    let got = match (kind, size, unit) {
        ('b', 1, None) => num(E::Bool),
        ('i', 1, None) => num(E::I8),
        ('i', 2, None) => num(E::I16),
        ('i', 4, None) => num(E::I32),
        ('i', 8, None) => num(E::I64),
        ('u', 1, None) => num(E::U8),
        ('u', 2, None) => num(E::U16),
        ('u', 4, None) => num(E::U32),
        ('u', 8, None) => num(E::U64),
        ('f', 2, None) => num(E::F16),
        ('f', 4, None) => num(E::F32),
        ('f', 8, None) => num(E::F64),
        ('c', 8, None) => num(E::C64),
        ('c', 16, None) => num(E::C128),
        ('f' | 'c', _, None) => Ok(Scalar::Opaque {
            size,
            raw: false,
            what: format!("extended-precision type '{s}' has no numeric .tet form"),
        }),
        ('M' | 'm', 8, Some(u)) if u.len() > 2 && u.ends_with(']') => Ok(Scalar::Time(
            kind == 'M',
            u[1..u.len() - 1].to_string(),
            big,
        )),
        ('S', n, None) => Ok(Scalar::Text {
            utf32: false,
            chars: n,
            swap: false,
        }),
        ('U', n, None) => Ok(Scalar::Text {
            utf32: true,
            chars: n,
            swap: big,
        }),
        ('V', n, None) => Ok(Scalar::Opaque {
            size: n,
            raw: true,
            what: format!("raw void type '{s}' has no numeric .tet form"),
        }),
        _ => Err(()),
    };
    got.map_err(|()| unsupported(format!("type string '{s}' is not supported in a record")))
}

fn walk(
    fields: &[FieldTy],
    path: &mut Vec<String>,
    place: &Place,
    out: &mut Vec<Leaf>,
) -> Result<(), RecordError> {
    let mut off = place.offset;
    for (i, f) in fields.iter().enumerate() {
        let esize = f.ty.size().ok_or_else(|| bad("record size overflows"))?;
        let count = f
            .shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| bad("sub-array size overflows"))?;
        let size = esize
            .checked_mul(count)
            .ok_or_else(|| bad("record size overflows"))?;
        let raw = matches!(&f.ty, Ty::Scalar(Scalar::Opaque { raw: true, .. }));
        if !(f.name.is_empty() && raw) {
            let name = if f.name.is_empty() {
                tet_source::numpy::unnamed_field(i, |n| fields.iter().any(|g| g.name == n))
            } else {
                f.name.clone()
            };
            // The sub-array axes (C order) after the enclosing ones.
            let at = Place {
                offset: off,
                inner: place.inner.clone(),
            }
            .with_array(&f.shape, esize);
            let first = out.len();
            path.push(name.clone());
            let r = match &f.ty {
                Ty::Record(inner) => walk(inner, path, &at, out),
                Ty::Scalar(s) => leaf(s, path, &at, out),
            };
            path.pop();
            r?;
            if f.name.is_empty() {
                let note = format!(
                    "record field {i} has an empty name; named '{name}' as numpy names unnamed fields"
                );
                out[first..]
                    .iter_mut()
                    .for_each(|l| l.notes.push(note.clone()));
            }
            if out.len() > MAX_LEAVES {
                return Err(unsupported(format!(
                    "a record of more than {MAX_LEAVES} fields"
                )));
            }
        }
        off = off
            .checked_add(size)
            .ok_or_else(|| bad("record size overflows"))?;
    }
    Ok(())
}

fn leaf(
    s: &Scalar,
    path: &[String],
    place: &Place,
    out: &mut Vec<Leaf>,
) -> Result<(), RecordError> {
    let kind = match s {
        Scalar::Num(elem, swap) => LeafKind::Numeric {
            elem: *elem,
            swap: *swap,
            attrs: Vec::new(),
            notes: Vec::new(),
        },
        Scalar::Time(datetime, unit, swap) => time_leaf(*datetime, unit, *swap),
        Scalar::Text { utf32, chars, swap } => LeafKind::Text {
            utf32: *utf32,
            chars: *chars,
            swap: *swap,
        },
        Scalar::Opaque { what, .. } => LeafKind::Unsupported(what.clone()),
    };
    out.push(Leaf {
        path: path.to_vec(),
        place: place.clone(),
        kind,
        notes: Vec::new(),
    });
    Ok(())
}

/// A datetime64/timedelta64 field: int64 counts, with `units` as the NPY importer gives them.
fn time_leaf(datetime: bool, unit: &str, swap: bool) -> LeafKind {
    let digits = unit
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(unit.len());
    let (mult, base) = unit.split_at(digits);
    let word = match base {
        "Y" => "years",
        "M" => "months",
        "W" => "weeks",
        "D" => "days",
        "h" => "hours",
        "m" => "minutes",
        "s" => "seconds",
        "ms" => "milliseconds",
        "us" | "μs" => "microseconds",
        "ns" => "nanoseconds",
        "ps" => "picoseconds",
        "fs" => "femtoseconds",
        "as" => "attoseconds",
        _ => "units",
    };
    let word = if mult.is_empty() || mult == "1" {
        word.to_string()
    } else {
        format!("{mult} {word}")
    };
    let (kind, attrs) = if datetime {
        (
            "datetime64",
            vec![
                (
                    "units".to_string(),
                    AttrValue::Text(format!("{word} since 1970-01-01")),
                ),
                (
                    "calendar".to_string(),
                    AttrValue::Text("proleptic_gregorian".into()),
                ),
            ],
        )
    } else {
        (
            "timedelta64",
            vec![("units".to_string(), AttrValue::Text(word))],
        )
    };
    LeafKind::Numeric {
        elem: ElementType::I64,
        swap,
        attrs,
        notes: vec![format!(
            "numpy {kind}[{unit}] stored as int64 counts (NaT = {})",
            i64::MIN
        )],
    }
}

/// The fill value rewritten for the opaque type of `size` bytes: a base64 string (what
/// zarr-python writes, both versions) stays; a list of byte values stays; `0` or `null` is all
/// zero bytes (zarr-python 2 leaves the chunks of a `null` fill value uninitialised: any bytes
/// are right, zeros are chosen). Anything else cannot be read.
pub fn raw_fill(fill: Option<&Value>, size: u64) -> Result<Value, RecordError> {
    let zeros = || {
        usize::try_from(size)
            .map(|n| Value::Array(vec![Value::from(0u8); n]))
            .map_err(|_| bad("record too large"))
    };
    match fill {
        Some(Value::String(_)) | Some(Value::Array(_)) => Ok(fill.cloned().unwrap_or_default()),
        Some(Value::Number(n)) if n.as_u64() == Some(0) => zeros(),
        Some(Value::Null) | None => zeros(),
        Some(other) => Err(bad(format!(
            "fill value {other} of a structured data type (base64 of the record expected)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    type Placed = (String, u64, Vec<(u64, u64)>);

    fn paths(r: &Record) -> Vec<Placed> {
        r.leaves
            .iter()
            .map(|l| (l.path.join("/"), l.place.offset, l.place.inner.clone()))
            .collect()
    }

    #[test]
    fn v2_offsets_sub_arrays_nesting_padding() {
        let r = parse_v2(&json!([
            ["a", "<i4"],
            ["", "|V4"],
            ["b", ">f8", [3]],
            ["n", [["x", "<u2"], ["y", ">i2", [2]]], [2]],
            ["", "<f4"]
        ]))
        .unwrap();
        assert_eq!(r.size, 4 + 4 + 24 + 2 * 6 + 4);
        assert_eq!(
            paths(&r),
            vec![
                ("a".into(), 0, vec![]),
                ("b".into(), 8, vec![(3, 8)]),
                ("n/x".into(), 32, vec![(2, 6)]),
                ("n/y".into(), 34, vec![(2, 6), (2, 2)]),
                ("f4".into(), 44, vec![]),
            ]
        );
        assert!(r.leaves[4].notes[0].contains("empty name"));
        assert!(matches!(
            r.leaves[1].kind,
            LeafKind::Numeric {
                elem: ElementType::F64,
                swap: true,
                ..
            }
        ));
    }

    #[test]
    fn v3_types() {
        let r = parse_v3(&json!({"name": "structured", "configuration": {"fields": [
            ["t", {"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 10}}],
            ["s", {"name": "null_terminated_bytes", "configuration": {"length_bytes": 3}}],
            ["u", {"name": "fixed_length_utf32", "configuration": {"length_bytes": 8}}],
            ["r", {"name": "raw_bytes", "configuration": {"length_bytes": 5}}],
            ["n", {"name": "structured", "configuration": {"fields": [["c", "complex64"]]}}]
        ]}}))
        .unwrap();
        assert_eq!(r.size, 8 + 3 + 8 + 5 + 8);
        let LeafKind::Numeric { attrs, .. } = &r.leaves[0].kind else {
            panic!()
        };
        assert_eq!(
            attrs[0].1,
            AttrValue::Text("10 seconds since 1970-01-01".into())
        );
        assert!(matches!(
            r.leaves[2].kind,
            LeafKind::Text {
                utf32: true,
                chars: 2,
                ..
            }
        ));
        assert!(matches!(r.leaves[3].kind, LeafKind::Unsupported(_)));
        assert_eq!(r.leaves[4].path, ["n", "c"]);
        assert_eq!(r.leaves[4].place.offset, 24);
        assert!(parse_v3(
            &json!({"name": "structured", "configuration": {"fields": [["s", "string"]]}})
        )
        .is_err());
        assert!(parse_v2(&json!([["o", "|O"]])).is_err());
        assert!(parse_v2(&json!([])).is_err());
    }

    #[test]
    fn empty_names_do_not_collide() {
        let r = parse_v2(&json!([["", "<i2"], ["f0", "<i2"]])).unwrap();
        assert_eq!(r.leaves[0].path, ["f0_"]);
    }

    #[test]
    fn extract_cuts_swaps_and_normalises() {
        // Records of 8 bytes: a big-endian u16 at 0, a bool at 2, u8[2][2] sub-array at 4.
        let recs: Vec<u8> = vec![1, 2, 7, 0, 10, 11, 12, 13, 3, 4, 0, 0, 20, 21, 22, 23];
        let f = FieldLayout {
            record: 8,
            place: Place::whole(),
            esize: 2,
            fix: Fix::Swap,
        };
        let mut out = vec![0u8; 4];
        extract(&recs, &f, &[], &[], &mut out).unwrap();
        assert_eq!(out, [2, 1, 4, 3]);
        let b = FieldLayout {
            place: Place::whole().shifted(2),
            esize: 1,
            fix: Fix::Bool,
            ..f.clone()
        };
        let mut out = vec![0u8; 2];
        extract(&recs, &b, &[], &[], &mut out).unwrap();
        assert_eq!(out, [1, 0]);
        let s = FieldLayout {
            place: Place::whole().shifted(4).with_array(&[2, 2], 1),
            esize: 1,
            fix: Fix::None,
            ..f.clone()
        };
        let mut out = vec![0u8; 4];
        extract(&recs, &s, &[0, 1], &[2, 1], &mut out).unwrap();
        assert_eq!(out, [11, 13, 21, 23]);
        // Wrong sizes are errors.
        assert!(extract(&recs[..7], &f, &[], &[], &mut [0u8; 4]).is_err());
        assert!(extract(&recs, &f, &[], &[], &mut [0u8; 3]).is_err());
        assert!(extract(&recs, &s, &[1, 1], &[2, 1], &mut [0u8; 4]).is_err());
    }
}
