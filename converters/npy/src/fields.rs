//! From a numpy dtype to the variables it becomes: a plain numeric dtype is one variable; a
//! record dtype is one variable per (nested) field; a complex dtype is two (real, imaginary);
//! sub-array fields add trailing axes. Each leaf knows where its elements sit inside one array
//! element (byte offset, and a byte stride per trailing axis).

use npyz::{DType, Endianness, TimeUnits, TypeChar, TypeStr};
use tet_source::{AttrValue, Attrs, ElementType};

/// One variable derived from (part of) a dtype.
#[derive(Debug, Clone)]
pub(crate) struct Leaf {
    /// Path below the array name (`["price"]`, `["pos", "x"]`, `["real"]`); empty for a plain
    /// array.
    pub path: Vec<String>,
    /// Byte offset of the leaf's first element inside one array element (record).
    pub offset: u64,
    /// Trailing axes from sub-array fields: `(length, byte stride)`.
    pub sub_axes: Vec<(u64, u64)>,
    /// What the leaf is.
    pub kind: LeafKind,
}

#[derive(Debug, Clone)]
pub(crate) enum LeafKind {
    /// Numbers that map to an element type.
    Numeric {
        elem: ElementType,
        /// The stored bytes are big-endian (and wider than one byte).
        swap: bool,
        attrs: Attrs,
        notes: Vec<String>,
    },
    /// Something with no numeric form (strings, raw bytes, float128, …), with the reason.
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
pub(crate) fn describe(dtype: &DType) -> String {
    match dtype {
        DType::Plain(ts) => type_tag(ts),
        DType::Record(_) => match dtype.num_bytes() {
            Some(n) => format!("records of {n} bytes"),
            None => "records".into(),
        },
        DType::Array(..) => match dtype.num_bytes() {
            Some(n) => format!("sub-arrays of {n} bytes"),
            None => "sub-arrays".into(),
        },
    }
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
pub(crate) fn leaves(dtype: &DType) -> Result<Vec<Leaf>, String> {
    if dtype.uses_pickled_array() {
        return Err("object dtype ('O'): the data is pickled Python objects".into());
    }
    let mut out = Vec::new();
    walk(dtype, &mut Vec::new(), 0, &mut Vec::new(), &mut out)?;
    Ok(out)
}

fn walk(
    dtype: &DType,
    path: &mut Vec<String>,
    offset: u64,
    sub_axes: &mut Vec<(u64, u64)>,
    out: &mut Vec<Leaf>,
) -> Result<(), String> {
    match dtype {
        DType::Plain(ts) => plain(ts, path, offset, sub_axes, out),
        DType::Array(n, inner) => {
            let stride = inner
                .num_bytes()
                .ok_or_else(|| "sub-array size overflows".to_string())?
                as u64;
            sub_axes.push((*n, stride));
            let r = walk(inner, path, offset, sub_axes, out);
            sub_axes.pop();
            r
        }
        DType::Record(fields) => {
            let mut off = offset;
            for f in fields {
                let size = f
                    .dtype
                    .num_bytes()
                    .ok_or_else(|| "record size overflows".to_string())?
                    as u64;
                let padding = f.name.is_empty()
                    && matches!(&f.dtype, DType::Plain(ts) if ts.type_char() == TypeChar::RawData);
                if !padding {
                    path.push(f.name.clone());
                    let r = walk(&f.dtype, path, off, sub_axes, out);
                    path.pop();
                    r?;
                }
                off = off
                    .checked_add(size)
                    .ok_or_else(|| "record size overflows".to_string())?;
            }
            Ok(())
        }
    }
}

fn plain(
    ts: &TypeStr,
    path: &[String],
    offset: u64,
    sub_axes: &[(u64, u64)],
    out: &mut Vec<Leaf>,
) -> Result<(), String> {
    let big = ts.endianness() == Endianness::Big;
    let leaf = |path: Vec<String>, offset: u64, kind: LeafKind| Leaf {
        path,
        offset,
        sub_axes: sub_axes.to_vec(),
        kind,
    };
    if let Some(elem) = numeric(ts) {
        out.push(leaf(
            path.to_vec(),
            offset,
            LeafKind::Numeric {
                elem,
                swap: big && elem.size() > 1,
                attrs: Vec::new(),
                notes: Vec::new(),
            },
        ));
        return Ok(());
    }
    let tag = type_tag(ts);
    match ts.type_char() {
        TypeChar::Complex if matches!(ts.size_field(), 8 | 16) => {
            let (elem, half) = if ts.size_field() == 8 {
                (ElementType::F32, 4)
            } else {
                (ElementType::F64, 8)
            };
            for (part, off) in [("real", 0u64), ("imag", half)] {
                let mut p = path.to_vec();
                p.push(part.to_string());
                out.push(leaf(
                    p,
                    offset + off,
                    LeafKind::Numeric {
                        elem,
                        swap: big,
                        attrs: vec![
                            ("complex_part".into(), AttrValue::Text(part.into())),
                            ("complex_dtype".into(), AttrValue::Text(tag.clone())),
                        ],
                        notes: vec![format!(
                            "{} part of a complex {tag} value, split into '…/real' and '…/imag' {elem} datasets",
                            if part == "real" { "real" } else { "imaginary" }
                        )],
                    },
                ));
            }
        }
        TypeChar::DateTime | TypeChar::TimeDelta if ts.size_field() == 8 => {
            let Some(u) = ts.time_units() else {
                out.push(leaf(
                    path.to_vec(),
                    offset,
                    LeafKind::Unsupported(format!("{tag} without time units")),
                ));
                return Ok(());
            };
            let word = time_unit_word(u);
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
                ("timedelta64", word.to_string(), Vec::new())
            };
            attrs.insert(0, ("units".into(), AttrValue::Text(units)));
            out.push(leaf(
                path.to_vec(),
                offset,
                LeafKind::Numeric {
                    elem: ElementType::I64,
                    swap: big,
                    attrs,
                    notes: vec![format!(
                        "numpy {kind}[{}] stored as int64 counts (NaT = {})",
                        u.to_str(),
                        i64::MIN
                    )],
                },
            ));
        }
        other => {
            let what = match other {
                TypeChar::ByteStr => "byte-string",
                TypeChar::UnicodeStr => "unicode-string",
                TypeChar::RawData => "raw void",
                TypeChar::Float => "extended-precision float",
                TypeChar::Complex => "extended-precision complex",
                _ => "non-numeric",
            };
            out.push(leaf(
                path.to_vec(),
                offset,
                LeafKind::Unsupported(format!("{what} dtype '{ts}' has no numeric .tet form")),
            ));
        }
    }
    Ok(())
}
