//! CF packing (`scale_factor`, `add_offset`) and masking (`_FillValue`, `missing_value`,
//! `valid_min`/`valid_max`/`valid_range`), applied only when `OpenOptions::unpack` asks for
//! physical values.
//!
//! The rules are those of netCDF4-python's automatic mask-and-scale (the reference the corpus
//! sidecars' `cf_decoded` sections were made with):
//!
//! * The unpacked type follows NumPy's promotion of the packed type with the types of
//!   `scale_factor`/`add_offset`: `f64` when either attribute (or the packed type) is `f64`, or
//!   when the packed type is a 32- or 64-bit integer; `f32` otherwise. This is CF's rule ("the
//!   unpacked type is the type of the attributes") with the precision NumPy keeps.
//! * Masking compares the *packed* values with the attributes converted to the packed type:
//!   equal to `_FillValue` (or, without one, to netCDF's default fill value for the type, except
//!   for byte types whose fill mode is off), equal to any `missing_value`, below `valid_min` /
//!   above `valid_max` (or outside a two-value `valid_range`). Masked values become NaN.
//! * `value = packed * scale_factor + add_offset` in the unpacked type (`packed * scale_factor`
//!   or `packed + add_offset` when only one is present; an identity pair is skipped), each
//!   operation rounded separately (no fused multiply-add).
//! * `_Unsigned = "true"` on a signed integer variable (the netCDF-3 convention for unsigned
//!   data) makes the packed values and the masking attributes unsigned of the same width.

use tet_source::{AttrValue, ElementType};

/// A packed value or attribute value, compared exactly within its kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Key {
    Int(i128),
    Float(f64),
}

impl Key {
    fn same(self, other: Key) -> bool {
        match (self, other) {
            (Key::Int(a), Key::Int(b)) => a == b,
            (Key::Float(a), Key::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
            _ => false,
        }
    }

    fn below(self, bound: Key) -> bool {
        match (self, bound) {
            (Key::Int(a), Key::Int(b)) => a < b,
            (Key::Float(a), Key::Float(b)) => a < b,
            _ => false,
        }
    }

    fn above(self, bound: Key) -> bool {
        match (self, bound) {
            (Key::Int(a), Key::Int(b)) => a > b,
            (Key::Float(a), Key::Float(b)) => a > b,
            _ => false,
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Key::Int(i) => i as f64,
            Key::Float(f) => f,
        }
    }

    fn as_f32(self) -> f32 {
        match self {
            Key::Int(i) => i as f32,
            Key::Float(f) => f as f32,
        }
    }
}

/// The unsigned type of the same width, for `_Unsigned = "true"`.
pub(crate) fn unsigned_of(t: ElementType) -> ElementType {
    match t {
        ElementType::I8 => ElementType::U8,
        ElementType::I16 => ElementType::U16,
        ElementType::I32 => ElementType::U32,
        ElementType::I64 => ElementType::U64,
        other => other,
    }
}

fn is_int(t: ElementType) -> bool {
    !matches!(
        t,
        ElementType::F16 | ElementType::BF16 | ElementType::F32 | ElementType::F64
    )
}

/// netCDF's default fill value of a type.
fn default_fill(t: ElementType) -> Option<Key> {
    use netcdf_sys as nc;
    Some(match t {
        ElementType::I8 => Key::Int(nc::NC_FILL_BYTE.into()),
        ElementType::U8 => Key::Int(nc::NC_FILL_UBYTE.into()),
        ElementType::I16 => Key::Int(nc::NC_FILL_SHORT.into()),
        ElementType::U16 => Key::Int(nc::NC_FILL_USHORT.into()),
        ElementType::I32 => Key::Int(nc::NC_FILL_INT.into()),
        ElementType::U32 => Key::Int(nc::NC_FILL_UINT.into()),
        ElementType::I64 => Key::Int(nc::NC_FILL_INT64.into()),
        ElementType::U64 => Key::Int(nc::NC_FILL_UINT64.into()),
        ElementType::F32 => Key::Float(nc::NC_FILL_FLOAT.into()),
        ElementType::F64 => Key::Float(nc::NC_FILL_DOUBLE),
        _ => return None,
    })
}

/// A number converted to the packed type `t` (as `numpy.array(x, t)` does: integers wrap,
/// floats truncate toward zero and saturate), then reinterpreted as unsigned when `unsigned`.
fn to_packed(x: Key, t: ElementType, unsigned: bool) -> Key {
    macro_rules! int {
        ($s:ty, $u:ty) => {{
            let v: $s = match x {
                Key::Int(i) => i as $s,
                Key::Float(f) => f as $s,
            };
            if unsigned {
                Key::Int(i128::from(v as $u))
            } else {
                Key::Int(i128::from(v))
            }
        }};
    }
    match t {
        ElementType::I8 | ElementType::Bool => int!(i8, u8),
        ElementType::U8 => int!(u8, u8),
        ElementType::I16 => int!(i16, u16),
        ElementType::U16 => int!(u16, u16),
        ElementType::I32 => int!(i32, u32),
        ElementType::U32 => int!(u32, u32),
        ElementType::I64 => int!(i64, u64),
        ElementType::U64 => int!(u64, u64),
        ElementType::F32 | ElementType::F16 | ElementType::BF16 => {
            Key::Float(f64::from(x.as_f64() as f32))
        }
        // netCDF has no complex type; a complex key compares as its real part.
        ElementType::F64 | ElementType::C64 | ElementType::C128 => Key::Float(match x {
            Key::Int(i) => i as f64,
            Key::Float(f) => f,
        }),
    }
}

/// The numbers of a numeric attribute (`None` for text).
pub(crate) fn attr_numbers(v: &AttrValue) -> Option<Vec<Key>> {
    fn ints<T: Copy + Into<i128>>(v: &[T]) -> Vec<Key> {
        v.iter().map(|&x| Key::Int(x.into())).collect()
    }
    Some(match v {
        AttrValue::Text(_) | AttrValue::TextList(_) => return None,
        AttrValue::I8(v) => ints(v),
        AttrValue::U8(v) => ints(v),
        AttrValue::I16(v) => ints(v),
        AttrValue::U16(v) => ints(v),
        AttrValue::I32(v) => ints(v),
        AttrValue::U32(v) => ints(v),
        AttrValue::I64(v) => ints(v),
        AttrValue::U64(v) => ints(v),
        AttrValue::F32(v) => v.iter().map(|&x| Key::Float(f64::from(x))).collect(),
        AttrValue::F64(v) => v.iter().map(|&x| Key::Float(x)).collect(),
    })
}

/// How one packed variable becomes physical values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unpacking {
    /// The stored type (what `nc_get_vara` returns).
    pub stored: ElementType,
    /// The type the values are interpreted as (`stored`, or its unsigned twin).
    pub packed: ElementType,
    /// `F32` or `F64`.
    pub out: ElementType,
    pub scale: Option<f64>,
    pub offset: Option<f64>,
    /// Values equal to one of these are masked.
    pub masked: Vec<Key>,
    pub valid_min: Option<Key>,
    pub valid_max: Option<Key>,
}

/// The attributes unpacking consumes (dropped from the unpacked variable's attributes).
pub(crate) const PACKING_ATTRS: &[&str] = &[
    "scale_factor",
    "add_offset",
    "_FillValue",
    "missing_value",
    "valid_min",
    "valid_max",
    "valid_range",
];

/// Why a variable with packing attributes is left packed.
pub(crate) type NotUnpacked = String;

impl Unpacking {
    /// The unpacking of a variable of type `stored` with attributes `attrs`; `Ok(None)` when
    /// it has neither `scale_factor` nor `add_offset`; `Err(reason)` when those are not single
    /// numbers. `fill_on` is the variable's fill mode.
    pub(crate) fn plan(
        stored: ElementType,
        attrs: &[(String, AttrValue)],
        fill_on: bool,
    ) -> Result<Option<Unpacking>, NotUnpacked> {
        let get = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v);
        let scale_attr = get("scale_factor");
        let offset_attr = get("add_offset");
        if scale_attr.is_none() && offset_attr.is_none() {
            return Ok(None);
        }
        let single = |name: &str, a: Option<&AttrValue>| -> Result<Option<Key>, NotUnpacked> {
            match a {
                None => Ok(None),
                Some(v) => match attr_numbers(v).as_deref() {
                    Some([k]) => Ok(Some(*k)),
                    _ => Err(format!("{name} is not a single number")),
                },
            }
        };
        let scale = single("scale_factor", scale_attr)?;
        let offset = single("add_offset", offset_attr)?;

        let unsigned = is_int(stored)
            && matches!(get("_Unsigned"), Some(AttrValue::Text(s)) if s.eq_ignore_ascii_case("true"));
        let packed = if unsigned {
            unsigned_of(stored)
        } else {
            stored
        };
        let wide_attr = [scale_attr, offset_attr]
            .into_iter()
            .flatten()
            .any(|a| matches!(a, AttrValue::F64(_)));
        let out = if wide_attr
            || matches!(
                packed,
                ElementType::F64
                    | ElementType::I32
                    | ElementType::U32
                    | ElementType::I64
                    | ElementType::U64
            ) {
            ElementType::F64
        } else {
            ElementType::F32
        };

        let mut masked = Vec::new();
        let convert = |a: &AttrValue| -> Vec<Key> {
            attr_numbers(a)
                .unwrap_or_default()
                .into_iter()
                .map(|k| to_packed(k, stored, unsigned))
                .collect()
        };
        match get("_FillValue").map(convert) {
            Some(f) if !f.is_empty() => masked.push(f[0]),
            Some(_) => {}
            None => {
                // netCDF4-python: the default fill value is masked unless the variable is a
                // byte type with its fill mode off.
                let byte = matches!(stored, ElementType::I8 | ElementType::U8);
                if fill_on || !byte {
                    if let Some(d) = default_fill(stored) {
                        masked.push(to_packed(d, stored, unsigned));
                    }
                }
            }
        }
        if let Some(m) = get("missing_value") {
            masked.extend(convert(m));
        }
        let (valid_min, valid_max) = match get("valid_range").map(convert) {
            Some(r) if r.len() == 2 => (Some(r[0]), Some(r[1])),
            _ => (
                get("valid_min")
                    .map(convert)
                    .and_then(|v| v.first().copied()),
                get("valid_max")
                    .map(convert)
                    .and_then(|v| v.first().copied()),
            ),
        };
        Ok(Some(Unpacking {
            stored,
            packed,
            out,
            scale: scale.map(Key::as_f64),
            offset: offset.map(Key::as_f64),
            masked,
            valid_min,
            valid_max,
        }))
    }

    /// Whether the `_FillValue = NaN` marker belongs on the unpacked variable.
    pub(crate) fn has_fill_attrs(attrs: &[(String, AttrValue)]) -> bool {
        attrs
            .iter()
            .any(|(k, _)| k == "_FillValue" || k == "missing_value")
    }

    /// A one-line description for the variable's notes.
    pub(crate) fn describe(&self) -> String {
        let formula = match (self.scale, self.offset) {
            (Some(s), Some(o)) => format!("packed * {s} + {o}"),
            (Some(s), None) => format!("packed * {s}"),
            (None, Some(o)) => format!("packed + {o}"),
            (None, None) => "packed".to_string(),
        };
        let unsigned = if self.packed != self.stored {
            format!(" (read as {} per _Unsigned)", self.packed)
        } else {
            String::new()
        };
        format!(
            "CF-unpacked from {}{unsigned}: value = {formula} in {}; _FillValue, missing_value \
             and out-of-valid-range values became NaN",
            self.stored, self.out
        )
    }

    fn key(&self, b: &[u8]) -> Key {
        macro_rules! le {
            ($t:ty, $n:literal) => {{
                let mut a = [0u8; $n];
                a.copy_from_slice(&b[..$n]);
                <$t>::from_le_bytes(a)
            }};
        }
        match self.packed {
            ElementType::I8 | ElementType::Bool => Key::Int(i128::from(b[0] as i8)),
            ElementType::U8 => Key::Int(i128::from(b[0])),
            ElementType::I16 => Key::Int(i128::from(le!(i16, 2))),
            ElementType::U16 => Key::Int(i128::from(le!(u16, 2))),
            ElementType::I32 => Key::Int(i128::from(le!(i32, 4))),
            ElementType::U32 => Key::Int(i128::from(le!(u32, 4))),
            ElementType::I64 => Key::Int(i128::from(le!(i64, 8))),
            ElementType::U64 => Key::Int(i128::from(le!(u64, 8))),
            ElementType::F32 | ElementType::C64 => Key::Float(f64::from(le!(f32, 4))),
            ElementType::F64 | ElementType::C128 => Key::Float(le!(f64, 8)),
            // Not produced by netCDF; read as raw 16-bit integers.
            ElementType::F16 | ElementType::BF16 => Key::Int(i128::from(le!(u16, 2))),
        }
    }

    fn is_masked(&self, k: Key) -> bool {
        self.masked.iter().any(|&m| k.same(m))
            || self.valid_min.is_some_and(|m| k.below(m))
            || self.valid_max.is_some_and(|m| k.above(m))
    }

    /// Converts packed little-endian values `src` into unpacked little-endian values `dst`
    /// (`dst.len() / out size == src.len() / stored size`).
    pub(crate) fn apply(&self, src: &[u8], dst: &mut [u8]) {
        let step = self.stored.size();
        match self.out {
            ElementType::F32 => {
                let s = self.scale.map(|s| s as f32);
                let o = self.offset.map(|o| o as f32);
                for (p, d) in src.chunks_exact(step).zip(dst.chunks_exact_mut(4)) {
                    let k = self.key(p);
                    let v = if self.is_masked(k) {
                        f32::NAN
                    } else {
                        let x = k.as_f32();
                        match (s, o) {
                            (Some(s), Some(o)) if s != 1.0 || o != 0.0 => x * s + o,
                            (Some(_), Some(_)) => x,
                            (Some(s), None) if s != 1.0 => x * s,
                            (None, Some(o)) if o != 0.0 => x + o,
                            _ => x,
                        }
                    };
                    d.copy_from_slice(&v.to_le_bytes());
                }
            }
            _ => {
                let (s, o) = (self.scale, self.offset);
                for (p, d) in src.chunks_exact(step).zip(dst.chunks_exact_mut(8)) {
                    let k = self.key(p);
                    let v = if self.is_masked(k) {
                        f64::NAN
                    } else {
                        let x = k.as_f64();
                        match (s, o) {
                            (Some(s), Some(o)) if s != 1.0 || o != 0.0 => x * s + o,
                            (Some(_), Some(_)) => x,
                            (Some(s), None) if s != 1.0 => x * s,
                            (None, Some(o)) if o != 0.0 => x + o,
                            _ => x,
                        }
                    };
                    d.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(list: &[(&str, AttrValue)]) -> Vec<(String, AttrValue)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn no_packing_attributes_no_plan() {
        let a = attrs(&[("units", AttrValue::Text("K".into()))]);
        assert_eq!(Unpacking::plan(ElementType::I16, &a, true), Ok(None));
    }

    #[test]
    fn output_type_follows_numpy_promotion() {
        let f32s = attrs(&[("scale_factor", AttrValue::F32(vec![0.5]))]);
        let f64s = attrs(&[("scale_factor", AttrValue::F64(vec![0.5]))]);
        let out = |t, a: &[(String, AttrValue)]| Unpacking::plan(t, a, true).unwrap().unwrap().out;
        assert_eq!(out(ElementType::I16, &f32s), ElementType::F32);
        assert_eq!(out(ElementType::U8, &f32s), ElementType::F32);
        assert_eq!(out(ElementType::I32, &f32s), ElementType::F64);
        assert_eq!(out(ElementType::I16, &f64s), ElementType::F64);
        assert_eq!(out(ElementType::F64, &f32s), ElementType::F64);
    }

    #[test]
    fn masks_and_scales_like_netcdf4_python() {
        let a = attrs(&[
            ("_FillValue", AttrValue::I16(vec![-32767])),
            ("scale_factor", AttrValue::F32(vec![0.01])),
            ("add_offset", AttrValue::F32(vec![273.15])),
            ("valid_min", AttrValue::I16(vec![-3000])),
            ("valid_max", AttrValue::I16(vec![4000])),
        ]);
        let u = Unpacking::plan(ElementType::I16, &a, true)
            .unwrap()
            .unwrap();
        let src: Vec<u8> = [-32767i16, 1101, -3001, 4001, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut dst = vec![0u8; 20];
        u.apply(&src, &mut dst);
        let v: Vec<f32> = dst
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert!(v[0].is_nan() && v[2].is_nan() && v[3].is_nan());
        assert_eq!(v[1], 1101f32 * 0.01f32 + 273.15f32);
        assert_eq!(v[4], 0f32 * 0.01f32 + 273.15f32);
    }

    #[test]
    fn unsigned_convention_reinterprets_bytes_and_fill() {
        let a = attrs(&[
            ("_Unsigned", AttrValue::Text("true".into())),
            ("_FillValue", AttrValue::I8(vec![-1])),
            ("scale_factor", AttrValue::F32(vec![2.0])),
        ]);
        let u = Unpacking::plan(ElementType::I8, &a, true).unwrap().unwrap();
        assert_eq!(u.packed, ElementType::U8);
        let mut dst = vec![0u8; 12];
        u.apply(&[0xff, 0x80, 0x01], &mut dst);
        let v: Vec<f32> = dst
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert!(v[0].is_nan());
        assert_eq!(v[1], 256.0);
        assert_eq!(v[2], 2.0);
    }

    #[test]
    fn non_numeric_scale_is_refused() {
        let a = attrs(&[("scale_factor", AttrValue::Text("0.1".into()))]);
        assert!(Unpacking::plan(ElementType::I16, &a, true).is_err());
        let a = attrs(&[("scale_factor", AttrValue::F32(vec![0.1, 0.2]))]);
        assert!(Unpacking::plan(ElementType::I16, &a, true).is_err());
    }

    #[test]
    fn default_fill_is_masked_without_fill_attribute() {
        let a = attrs(&[("add_offset", AttrValue::F64(vec![1.0]))]);
        let u = Unpacking::plan(ElementType::I32, &a, true)
            .unwrap()
            .unwrap();
        let src: Vec<u8> = [-2147483647i32, 5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut dst = vec![0u8; 16];
        u.apply(&src, &mut dst);
        assert!(f64::from_le_bytes(dst[..8].try_into().unwrap()).is_nan());
        assert_eq!(f64::from_le_bytes(dst[8..].try_into().unwrap()), 6.0);
        // Byte types with fill mode off keep their default fill value.
        let u = Unpacking::plan(ElementType::I8, &a, false)
            .unwrap()
            .unwrap();
        assert!(u.masked.is_empty());
    }
}
