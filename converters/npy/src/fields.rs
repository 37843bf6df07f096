//! From a numpy dtype to the variables it becomes: a plain numeric dtype (complex included) is
//! one variable; a record dtype is one variable per (nested) field; sub-array fields add
//! trailing axes. Each leaf knows where its elements sit inside one array
//! element (byte offset, and a byte stride per trailing axis). Fixed-length strings (`S`, `U`)
//! are text leaves.
//!
//! A record field with an empty name that is not padding (numpy only leaves unnamed `|V`
//! padding fields nameless, but other writers leave any field nameless) is named as numpy names
//! fields it creates without a name: `f<position>` (position among the record's fields, from 0),
//! with `_` appended while that collides with another field of the same record.

use npyz::{Endianness, TimeUnits, TypeChar, TypeStr};
use tet_source::record::{self, Place};
use tet_source::{AttrValue, Attrs, ElementType};

use crate::header::{Dtype, Plain};

/// One variable derived from (part of) a dtype: its path below the array name (`["price"]`,
/// `["pos", "x"]`; empty for a plain array), where its elements sit inside one array element
/// (record), what it is and its notes (a numeric leaf's: its time units, a name it was given).
pub(crate) type Leaf = record::Leaf<LeafKind>;

#[derive(Debug, Clone)]
pub(crate) enum LeafKind {
    /// Numbers that map to an element type.
    Numeric {
        elem: ElementType,
        /// The stored bytes are big-endian (and wider than one byte); for a complex type, each
        /// of its two parts is.
        swap: bool,
        attrs: Attrs,
    },
    /// Fixed-length strings: `S<chars>` bytes, or `U<chars>` UCS-4 code points.
    Text {
        /// `U` (4 bytes per character) rather than `S`.
        utf32: bool,
        /// Characters per string (the type string's size).
        chars: u64,
        /// `U` code points are big-endian.
        swap: bool,
    },
    /// Raw void (`|V<size>` without fields): opaque blobs of `size` bytes, `u8` with a trailing
    /// axis of that length.
    Opaque { size: u64 },
    /// Something with no numeric form (float128, …), with the reason.
    Unsupported(String),
}

/// Short name of a numpy type string: `f64`, `i8`, `bool`, `c64`, `M8[s]`, or the type string.
pub(crate) fn type_tag(ts: &TypeStr) -> String {
    let size = ts.size_field();
    match (ts.type_char(), size) {
        (TypeChar::Bool, 1) => "bool".into(),
        (TypeChar::Int, _) => format!("i{}", size * 8),
        (TypeChar::Uint, _) => format!("u{}", size * 8),
        (TypeChar::Float, _) => format!("f{}", size * 8),
        (TypeChar::Complex, _) => format!("c{}", size * 8),
        (TypeChar::DateTime, _) | (TypeChar::TimeDelta, _) => {
            let units = ts.time_units().map(|u| u.to_str()).unwrap_or("");
            format!("{}8[{units}]", ts.type_char().to_str())
        }
        _ => ts.to_string(),
    }
}

/// What to call one element of `dtype` in a message: `f64`, `c64`, `records of 21 bytes`, ….
pub(crate) fn describe(dtype: &Dtype) -> String {
    match dtype {
        Dtype::Plain(p) => plain_tag(p),
        Dtype::Record(_) => match dtype.num_bytes() {
            Some(n) => format!("records of {n} bytes"),
            None => "records".into(),
        },
        Dtype::Array(..) => match dtype.num_bytes() {
            Some(n) => format!("sub-arrays of {n} bytes"),
            None => "sub-arrays".into(),
        },
    }
}

/// [`type_tag`] with the time-unit multiplier put back (`m8[10ms]`).
fn plain_tag(p: &Plain) -> String {
    let tag = type_tag(&p.ts);
    if p.time_mult > 1 {
        if let Some(u) = p.ts.time_units() {
            return format!(
                "{}8[{}{}]",
                p.ts.type_char().to_str(),
                p.time_mult,
                u.to_str()
            );
        }
    }
    tag
}

fn numeric(ts: &TypeStr) -> Option<ElementType> {
    Some(match (ts.type_char(), ts.size_field()) {
        (TypeChar::Bool, 1) => ElementType::Bool,
        (TypeChar::Int, 1) => ElementType::I8,
        (TypeChar::Int, 2) => ElementType::I16,
        (TypeChar::Int, 4) => ElementType::I32,
        (TypeChar::Int, 8) => ElementType::I64,
        (TypeChar::Uint, 1) => ElementType::U8,
        (TypeChar::Uint, 2) => ElementType::U16,
        (TypeChar::Uint, 4) => ElementType::U32,
        (TypeChar::Uint, 8) => ElementType::U64,
        (TypeChar::Float, 2) => ElementType::F16,
        (TypeChar::Float, 4) => ElementType::F32,
        (TypeChar::Float, 8) => ElementType::F64,
        (TypeChar::Complex, 8) => ElementType::C64,
        (TypeChar::Complex, 16) => ElementType::C128,
        _ => return None,
    })
}

fn time_unit_word(u: TimeUnits) -> &'static str {
    match u {
        TimeUnits::Year => "years",
        TimeUnits::Month => "months",
        TimeUnits::Week => "weeks",
        TimeUnits::Day => "days",
        TimeUnits::Hour => "hours",
        TimeUnits::Minute => "minutes",
        TimeUnits::Second => "seconds",
        TimeUnits::Millisecond => "milliseconds",
        TimeUnits::Microsecond => "microseconds",
        TimeUnits::Nanosecond => "nanoseconds",
        TimeUnits::Picosecond => "picoseconds",
        TimeUnits::Femtosecond => "femtoseconds",
        TimeUnits::Attosecond => "attoseconds",
        _ => "units",
    }
}

/// The leaves of `dtype`. `Err` carries the reason when the dtype has no fixed layout at all
/// (pickled objects), so no field offsets can be computed.
/// Why a dtype has no leaves (the array is then an unsupported item with this reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoLeaves {
    /// Python objects, pickled.
    #[error("object dtype ('O'): the data is pickled Python objects")]
    Object,
    /// A size that does not fit memory's integers (`record size`, `sub-array size`).
    #[error("{0} overflows")]
    Overflow(&'static str),
}

pub(crate) fn leaves(dtype: &Dtype) -> Result<Vec<Leaf>, NoLeaves> {
    if dtype.uses_pickled_array() {
        return Err(NoLeaves::Object);
    }
    let mut out = Vec::new();
    walk(dtype, &mut Vec::new(), &Place::whole(), &mut out)?;
    Ok(out)
}

fn walk(
    dtype: &Dtype,
    path: &mut Vec<String>,
    place: &Place,
    out: &mut Vec<Leaf>,
) -> Result<(), NoLeaves> {
    match dtype {
        Dtype::Plain(p) => plain(p, path, place, out),
        Dtype::Array(n, inner) => {
            let stride = inner
                .num_bytes()
                .ok_or(NoLeaves::Overflow("sub-array size"))? as u64;
            walk(inner, path, &place.with_array(&[*n], stride), out)
        }
        Dtype::Record(fields) => {
            let mut off = place.offset;
            for (i, f) in fields.iter().enumerate() {
                let size = f
                    .dtype
                    .num_bytes()
                    .ok_or(NoLeaves::Overflow("record size"))? as u64;
                let padding = f.name.is_empty()
                    && matches!(&f.dtype, Dtype::Plain(p) if p.ts.type_char() == TypeChar::RawData);
                if !padding {
                    let name = if f.name.is_empty() {
                        tet_source::numpy::unnamed_field(i, |n| fields.iter().any(|g| g.name == n))
                    } else {
                        f.name.clone()
                    };
                    let first = out.len();
                    path.push(name.clone());
                    let at = Place {
                        offset: off,
                        inner: place.inner.clone(),
                    };
                    let r = walk(&f.dtype, path, &at, out);
                    path.pop();
                    r?;
                    if f.name.is_empty() {
                        let note = format!(
                            "record field {i} has an empty name; named '{name}' as numpy names unnamed fields"
                        );
                        // Numeric leaves only (text and opaque leaves keep no notes).
                        for leaf in &mut out[first..] {
                            if let LeafKind::Numeric { .. } = leaf.kind {
                                leaf.notes.push(note.clone());
                            }
                        }
                    }
                }
                off = off
                    .checked_add(size)
                    .ok_or(NoLeaves::Overflow("record size"))?;
            }
            Ok(())
        }
    }
}

fn plain(p: &Plain, path: &[String], place: &Place, out: &mut Vec<Leaf>) -> Result<(), NoLeaves> {
    let ts = &p.ts;
    let big = ts.endianness() == Endianness::Big;
    let leaf = |path: Vec<String>, kind: LeafKind| Leaf {
        path,
        place: place.clone(),
        kind,
        notes: Vec::new(),
    };
    if let Some(elem) = numeric(ts) {
        out.push(leaf(
            path.to_vec(),
            LeafKind::Numeric {
                elem,
                swap: big && elem.size() > 1,
                attrs: Vec::new(),
            },
        ));
        return Ok(());
    }
    let tag = plain_tag(p);
    match ts.type_char() {
        TypeChar::ByteStr | TypeChar::UnicodeStr => {
            out.push(leaf(
                path.to_vec(),
                LeafKind::Text {
                    utf32: ts.type_char() == TypeChar::UnicodeStr,
                    chars: ts.size_field(),
                    swap: big,
                },
            ));
        }
        TypeChar::DateTime | TypeChar::TimeDelta if ts.size_field() == 8 => {
            let Some(u) = ts.time_units() else {
                out.push(leaf(
                    path.to_vec(),
                    LeafKind::Unsupported(format!("{tag} without time units")),
                ));
                return Ok(());
            };
            // A multiplied unit (`[10ms]`) counts steps of 10 ms: `10 milliseconds` (UDUNITS).
            let word = if p.time_mult > 1 {
                format!("{} {}", p.time_mult, time_unit_word(u))
            } else {
                time_unit_word(u).to_string()
            };
            let unit_text = if p.time_mult > 1 {
                format!("{}{}", p.time_mult, u.to_str())
            } else {
                u.to_str().to_string()
            };
            let (kind, units, mut attrs) = if ts.type_char() == TypeChar::DateTime {
                (
                    "datetime64",
                    format!("{word} since 1970-01-01"),
                    vec![(
                        "calendar".to_string(),
                        AttrValue::Text("proleptic_gregorian".into()),
                    )],
                )
            } else {
                ("timedelta64", word.clone(), Vec::new())
            };
            attrs.insert(0, ("units".into(), AttrValue::Text(units)));
            let mut time = leaf(
                path.to_vec(),
                LeafKind::Numeric {
                    elem: ElementType::I64,
                    swap: big,
                    attrs,
                },
            );
            time.notes.push(format!(
                "numpy {kind}[{unit_text}] stored as int64 counts (NaT = {})",
                i64::MIN
            ));
            out.push(time);
        }
        TypeChar::RawData if ts.size_field() > 0 => {
            out.push(leaf(
                path.to_vec(),
                LeafKind::Opaque {
                    size: ts.size_field(),
                },
            ));
        }
        other => {
            let what = match other {
                TypeChar::RawData => "raw void",
                TypeChar::Float => "extended-precision float",
                TypeChar::Complex => "extended-precision complex",
                _ => "non-numeric",
            };
            out.push(leaf(
                path.to_vec(),
                LeafKind::Unsupported(format!("{what} dtype '{ts}' has no numeric .tet form")),
            ));
        }
    }
    Ok(())
}
