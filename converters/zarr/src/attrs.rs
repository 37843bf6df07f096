//! Zarr attributes (JSON) → typed [`AttrValue`]s.
//!
//! | JSON | AttrValue |
//! |---|---|
//! | string | `Text` |
//! | integer | `I64`, or `U64` above `i64::MAX` |
//! | other number | `F64` |
//! | `true` / `false` | `U8` 1 / 0 (the engine's representation of bool) |
//! | array of strings | `TextList` |
//! | array of integers | `I64` (`U64` when one is above `i64::MAX` and none is negative) |
//! | array of numbers with a fraction | `F64` (when every integer in it is exact as f64) |
//! | array of booleans | `U8` of 0/1 |
//! | anything else (objects, `null`, empty or mixed arrays, …) | `Text` holding the compact JSON |
//!
//! Nothing is lost: a value that fits none of the typed forms keeps its JSON text. A float
//! array's `_FillValue` in xarray's Zarr v3 form (base64 of the f64 bytes) is that number
//! ([`decode_xarray_fill`]).

use serde_json::{Map, Value};
use tet_source::{AttrValue, Attrs};

/// The largest integer magnitude every f64 holds exactly (2^53).
const F64_EXACT: u64 = 1 << 53;

/// One JSON value as a typed attribute.
pub fn json_to_attr(v: &Value) -> AttrValue {
    match v {
        Value::String(s) => AttrValue::Text(s.clone()),
        Value::Bool(b) => AttrValue::U8(vec![u8::from(*b)]),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                AttrValue::I64(vec![i])
            } else if let Some(u) = n.as_u64() {
                AttrValue::U64(vec![u])
            } else {
                AttrValue::F64(vec![n.as_f64().unwrap_or(f64::NAN)])
            }
        }
        Value::Array(items) => array_to_attr(items).unwrap_or_else(|| json_text(v)),
        Value::Null | Value::Object(_) => json_text(v),
    }
}

fn json_text(v: &Value) -> AttrValue {
    AttrValue::Text(serde_json::to_string(v).unwrap_or_default())
}

/// A homogeneous, non-empty array as a typed vector; `None` otherwise.
fn array_to_attr(items: &[Value]) -> Option<AttrValue> {
    let first = items.first()?;
    match first {
        Value::String(_) => items
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(AttrValue::TextList),
        Value::Bool(_) => items
            .iter()
            .map(|x| x.as_bool().map(u8::from))
            .collect::<Option<Vec<_>>>()
            .map(AttrValue::U8),
        Value::Number(_) => numbers_to_attr(items),
        _ => None,
    }
}

fn numbers_to_attr(items: &[Value]) -> Option<AttrValue> {
    let nums: Vec<&serde_json::Number> = items
        .iter()
        .map(|x| match x {
            Value::Number(n) => Some(n),
            _ => None,
        })
        .collect::<Option<_>>()?;
    if let Some(v) = nums.iter().map(|n| n.as_i64()).collect::<Option<Vec<_>>>() {
        return Some(AttrValue::I64(v));
    }
    if let Some(v) = nums.iter().map(|n| n.as_u64()).collect::<Option<Vec<_>>>() {
        return Some(AttrValue::U64(v));
    }
    // Integers beyond ±2^53 would be rounded in an f64 vector: keep the JSON text instead.
    let exact = nums.iter().all(|n| {
        n.as_i64().map_or_else(
            || n.as_u64().map_or(n.is_f64(), |u| u <= F64_EXACT),
            |i| i.unsigned_abs() <= F64_EXACT,
        )
    });
    if !exact {
        return None;
    }
    nums.iter()
        .map(|n| n.as_f64())
        .collect::<Option<Vec<_>>>()
        .map(AttrValue::F64)
}

/// A JSON attribute map as typed attributes, in the map's order (the file's order: zarrs
/// builds `serde_json` with `preserve_order`), skipping the keys in `skip`.
pub fn map_to_attrs(map: &Map<String, Value>, skip: &[&str]) -> Attrs {
    map.iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), json_to_attr(v)))
        .collect()
}

/// xarray's `_FillValue` of a float array (Zarr v3: its `FillValueCoder` writes the base64 text
/// of the value's little-endian f64 bytes, NaN and infinities included) as the number: `F32`
/// for a `float32` or `float16` array when the value is one, else `F64`. Anything else is left
/// as it is.
pub fn decode_xarray_fill(attrs: &mut Attrs, type_name: &str) {
    use base64::prelude::{Engine as _, BASE64_STANDARD};
    if !matches!(type_name, "float16" | "float32" | "float64") {
        return;
    }
    for (k, v) in attrs.iter_mut() {
        let AttrValue::Text(t) = v else { continue };
        if k != "_FillValue" {
            continue;
        }
        let Some(bytes) = BASE64_STANDARD
            .decode(t.as_bytes())
            .ok()
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
        else {
            continue;
        };
        let x = f64::from_le_bytes(bytes);
        let narrow = x as f32;
        *v = if type_name != "float64" && (f64::from(narrow) == x || x.is_nan()) {
            AttrValue::F32(vec![narrow])
        } else {
            AttrValue::F64(vec![x])
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn xarray_fill_values() {
        let fill = |t: &str, ty: &str| {
            let mut a = vec![("_FillValue".to_string(), AttrValue::Text(t.into()))];
            decode_xarray_fill(&mut a, ty);
            a.remove(0).1
        };
        assert!(matches!(fill("AAAAAAAA+H8=", "float32"), AttrValue::F32(v) if v[0].is_nan()));
        assert_eq!(
            fill("AAAAAAAA8H8=", "float64"),
            AttrValue::F64(vec![f64::INFINITY])
        );
        assert_eq!(fill("AAAAAAAA4D8=", "float32"), AttrValue::F32(vec![0.5]));
        // 0.1 is no f32.
        assert_eq!(fill("mpmZmZmZuT8=", "float32"), AttrValue::F64(vec![0.1]));
        assert_eq!(
            fill("AAAAAAAA4D8=", "int32"),
            AttrValue::Text("AAAAAAAA4D8=".into())
        );
        assert_eq!(fill("NaN", "float64"), AttrValue::Text("NaN".into()));
    }

    #[test]
    fn scalars() {
        assert_eq!(json_to_attr(&json!("K")), AttrValue::Text("K".into()));
        assert_eq!(json_to_attr(&json!(-3)), AttrValue::I64(vec![-3]));
        assert_eq!(
            json_to_attr(&json!(u64::MAX)),
            AttrValue::U64(vec![u64::MAX])
        );
        assert_eq!(json_to_attr(&json!(0.01)), AttrValue::F64(vec![0.01]));
        assert_eq!(json_to_attr(&json!(true)), AttrValue::U8(vec![1]));
        assert_eq!(json_to_attr(&json!(false)), AttrValue::U8(vec![0]));
        assert_eq!(json_to_attr(&json!(null)), AttrValue::Text("null".into()));
    }

    #[test]
    fn arrays() {
        assert_eq!(
            json_to_attr(&json!(["a", "b"])),
            AttrValue::TextList(vec!["a".into(), "b".into()])
        );
        assert_eq!(json_to_attr(&json!([1, -2])), AttrValue::I64(vec![1, -2]));
        assert_eq!(
            json_to_attr(&json!([1, u64::MAX])),
            AttrValue::U64(vec![1, u64::MAX])
        );
        assert_eq!(
            json_to_attr(&json!([1, 2.5])),
            AttrValue::F64(vec![1.0, 2.5])
        );
        assert_eq!(
            json_to_attr(&json!([true, false])),
            AttrValue::U8(vec![1, 0])
        );
        // Not representable losslessly as one typed vector: JSON text.
        assert_eq!(
            json_to_attr(&json!([-1, u64::MAX])),
            AttrValue::Text(format!("[-1,{}]", u64::MAX))
        );
        assert_eq!(
            json_to_attr(&json!([0.5, 9007199254740993u64])),
            AttrValue::Text("[0.5,9007199254740993]".into())
        );
        assert_eq!(json_to_attr(&json!([])), AttrValue::Text("[]".into()));
        assert_eq!(
            json_to_attr(&json!(["a", 1])),
            AttrValue::Text(r#"["a",1]"#.into())
        );
        assert_eq!(
            json_to_attr(&json!([[1], [2]])),
            AttrValue::Text("[[1],[2]]".into())
        );
    }

    #[test]
    fn objects_keep_their_order() {
        let v: Value = serde_json::from_str(r#"{"k": 1, "f": 0.5}"#).unwrap();
        assert_eq!(
            json_to_attr(&v),
            AttrValue::Text(r#"{"k":1,"f":0.5}"#.into())
        );
    }

    #[test]
    fn map_order_and_skip() {
        let v: Value =
            serde_json::from_str(r#"{"z": 1, "_ARRAY_DIMENSIONS": ["x"], "a": "t"}"#).unwrap();
        let attrs = map_to_attrs(v.as_object().unwrap(), &["_ARRAY_DIMENSIONS"]);
        assert_eq!(
            attrs,
            vec![
                ("z".to_string(), AttrValue::I64(vec![1])),
                ("a".to_string(), AttrValue::Text("t".into()))
            ]
        );
    }
}
