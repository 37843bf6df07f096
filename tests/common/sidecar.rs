//! The public corpus and its `.expect.json` sidecars: listing the inputs, the datasets a sidecar
//! expects, and comparing attributes with what a reader found.

use std::path::PathBuf;

use serde_json::Value;
use tet_source::AttrValue;
use tet_testkit::{json_u64s, sidecar};

/// Lower-case hex SHA-256, as the sidecars record digests.
#[allow(unused_imports)]
pub use tet_testkit::sha_hex as sha256;

/// Corpus folders whose importers this build has.
pub const FORMATS: &[&str] = &[
    "npy",
    "teafile",
    "tensogram",
    "zarr",
    #[cfg(feature = "netcdf")]
    "netcdf",
    #[cfg(feature = "hdf5")]
    "hdf5",
];

pub fn corpus() -> PathBuf {
    tet_testkit::corpus_root()
}

pub fn inputs() -> Vec<(PathBuf, Value)> {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(corpus().join("manifest.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for f in manifest["files"].as_array().unwrap() {
        let rel = f["file"].as_str().unwrap();
        if !FORMATS.contains(&rel.split('/').next().unwrap()) {
            continue;
        }
        let input = corpus().join(rel);
        let expect = sidecar(&input);
        out.push((input, expect));
    }
    assert!(
        out.len() >= 30,
        "corpus not found or too small: {}",
        out.len()
    );
    out
}

/// Compares a sidecar JSON value with a typed attribute.
pub fn attr_matches(want: &Value, got: &AttrValue) -> bool {
    fn num(v: &Value) -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::String(s) if s == "NaN" => Some(f64::NAN),
            Value::String(s) if s == "Infinity" => Some(f64::INFINITY),
            Value::String(s) if s == "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        }
    }
    let nums: Option<Vec<f64>> = match got {
        AttrValue::Text(s) => return want.as_str() == Some(s.as_str()),
        AttrValue::TextList(l) => {
            return want.as_array().is_some_and(|a| {
                a.iter()
                    .map(Value::as_str)
                    .eq(l.iter().map(|s| Some(s.as_str())))
            })
        }
        AttrValue::I8(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::U8(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::I16(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::U16(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::I32(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::U32(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::I64(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::U64(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::F32(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::F64(v) => Some(v.clone()),
    };
    let nums = nums.unwrap();
    // Multi-dimensional attributes arrive flattened in row-major order.
    fn flatten(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Array(a) => a.iter().for_each(|x| flatten(x, out)),
            v => out.extend(num(v)),
        }
    }
    let mut flat = Vec::new();
    flatten(want, &mut flat);
    let want = flat;
    let close =
        |a: f64, b: f64| (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-6 * b.abs();
    want.len() == nums.len() && want.iter().zip(&nums).all(|(&a, &b)| close(a, b))
}

pub fn check_attrs(ctx: &str, want: &Value, got: &[(String, AttrValue)]) {
    check_attrs_prefixed(ctx, "", want, got)
}

/// Nested maps in a sidecar (Tensogram's CBOR metadata, e.g. `{"mars": {"param": "2t"}}`) are
/// stored as dotted keys (`mars.param`).
pub fn check_attrs_prefixed(ctx: &str, prefix: &str, want: &Value, got: &[(String, AttrValue)]) {
    let Some(want) = want.as_object() else { return };
    for (k, v) in want {
        let k = &format!("{prefix}{k}");
        if v.is_object() {
            // Zarr keeps a nested JSON attribute whole, as JSON text.
            if let Some((_, AttrValue::Text(t))) = got.iter().find(|(n, _)| n == k) {
                let parsed: Value = serde_json::from_str(t)
                    .unwrap_or_else(|e| panic!("{ctx}: attribute `{k}` is not JSON: {e}"));
                assert_eq!(&parsed, v, "{ctx}: attribute `{k}`");
                continue;
            }
            check_attrs_prefixed(ctx, &format!("{k}."), v, got);
            continue;
        }
        let g = got.iter().find(|(n, _)| n == k).map(|(_, v)| v);
        let g = g.unwrap_or_else(|| panic!("{ctx}: attribute `{k}` missing (have {got:?})"));
        assert!(
            attr_matches(v, g),
            "{ctx}: attribute `{k}`: want {v}, got {g:?}"
        );
    }
}

/// One expected dataset: (name, stored dtype, shape, sha256).
pub fn expected_datasets(expect: &Value) -> Vec<(String, String, Vec<u64>, String, Value)> {
    let mut out = Vec::new();
    for a in expect["arrays"].as_array().unwrap() {
        let name = a["name"].as_str().unwrap().to_string();
        let mut shape = json_u64s(&a["shape"]);
        if shape.is_empty() {
            shape = vec![1]; // a 0-d scalar is stored as [1]
        }
        if let Some(dt) = a["stored_dtype"].as_str() {
            out.push((
                name.clone(),
                dt.into(),
                shape.clone(),
                a["sha256"].as_str().unwrap().into(),
                a.clone(),
            ));
        }
        for f in a["fields"].as_array().into_iter().flatten() {
            if let Some(dt) = f["stored_dtype"].as_str() {
                let mut s = shape.clone();
                if f["shape"].is_array() {
                    s.extend(json_u64s(&f["shape"]));
                }
                out.push((
                    format!("{name}/{}", f["name"].as_str().unwrap()),
                    dt.into(),
                    s,
                    f["sha256"].as_str().unwrap().into(),
                    Value::Null,
                ));
            }
        }
        if let Some(c) = a.get("components").filter(|c| c.is_object()) {
            for part in ["real", "imag"] {
                out.push((
                    format!("{name}/{part}"),
                    c["dtype"].as_str().unwrap().into(),
                    shape.clone(),
                    c[part].as_str().unwrap().into(),
                    Value::Null,
                ));
            }
        }
    }
    out
}
