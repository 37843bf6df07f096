//! Shared test helpers: corpus access, reading whole variables, the engine's widening, hashing,
//! attribute comparison with sidecar JSON, and a builder of hand-made (hash-less) messages.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use ciborium::Value as Cbor;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tet_source::{AttrValue, ElementType, Source};

pub const CORPUS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/corpus/public/tensogram"
);

pub fn corpus_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(CORPUS)
        .expect("corpus directory ../shared/corpus/public/tensogram")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tgm"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "corpus looks incomplete: {files:?}");
    files
}

pub fn corpus(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(CORPUS).join(name)).unwrap()
}

pub fn sidecar(path: &Path) -> Value {
    let mut p = path.as_os_str().to_owned();
    p.push(".expect.json");
    serde_json::from_str(&std::fs::read_to_string(PathBuf::from(p)).unwrap()).unwrap()
}

/// The whole variable in one read.
pub fn read_all(src: &dyn Source, var: usize) -> Vec<u8> {
    let v = &src.variables()[var];
    let mut out = vec![0u8; v.byte_len().unwrap() as usize];
    let start = vec![0; v.shape.len()];
    src.read_region(var, &start, &v.shape, &mut out).unwrap();
    out
}

/// The whole variable read in uneven slabs of the first axis (and, for rank ≥ 2, a sub-box),
/// checked against the whole read.
pub fn read_in_pieces(src: &dyn Source, var: usize) -> Vec<u8> {
    let whole = read_all(src, var);
    let v = &src.variables()[var];
    let size = v.dtype.size();
    let rank = v.shape.len();
    let row: usize = v.shape[1..].iter().product::<u64>() as usize * size;
    let mut out = vec![0u8; whole.len()];
    let (mut s, mut step) = (0u64, 1u64);
    while s < v.shape[0] {
        let c = step.min(v.shape[0] - s);
        let mut start = vec![0; rank];
        start[0] = s;
        let mut count = v.shape.clone();
        count[0] = c;
        let a = s as usize * row;
        let b = (s + c) as usize * row;
        src.read_region(var, &start, &count, &mut out[a..b])
            .unwrap();
        s += c;
        step = step * 2 + 1;
    }
    assert_eq!(
        out, whole,
        "{}: slab reads differ from the whole read",
        v.name
    );
    if rank >= 2 && v.shape.iter().all(|&d| d >= 2) {
        // The box [1.., 1.., …] against the whole read.
        let start = vec![1u64; rank];
        let count: Vec<u64> = v.shape.iter().map(|d| d - 1).collect();
        let n: u64 = count.iter().product();
        let mut sub = vec![0u8; n as usize * size];
        src.read_region(var, &start, &count, &mut sub).unwrap();
        let mut expect = Vec::new();
        let mut idx = vec![0u64; rank];
        for _ in 0..n {
            let mut lin = 0u64;
            for k in 0..rank {
                lin = lin * v.shape[k] + start[k] + idx[k];
            }
            let a = lin as usize * size;
            expect.extend_from_slice(&whole[a..a + size]);
            for k in (0..rank).rev() {
                idx[k] += 1;
                if idx[k] < count[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
        assert_eq!(sub, expect, "{}: sub-box read", v.name);
    }
    whole
}

/// The bytes as the engine stores them (i8 → i16, bf16 → f32, bool → u8) and the stored type.
pub fn widen(dtype: ElementType, bytes: &[u8]) -> (Vec<u8>, &'static str) {
    match dtype {
        ElementType::I8 => (
            bytes
                .iter()
                .flat_map(|&b| i16::from(b as i8).to_le_bytes())
                .collect(),
            "i16",
        ),
        ElementType::BF16 => (
            bytes
                .chunks_exact(2)
                .flat_map(|c| (u32::from(u16::from_le_bytes([c[0], c[1]])) << 16).to_le_bytes())
                .collect(),
            "f32",
        ),
        ElementType::Bool => (bytes.to_vec(), "u8"),
        d => (bytes.to_vec(), d.name()),
    }
}

pub fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A JSON object flattened to dotted keys (arrays and scalars are leaves).
pub fn flatten_json(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten_json(&key, v, out);
            }
        }
        leaf => out.push((prefix.to_string(), leaf.clone())),
    }
}

fn num_eq(json: &Value, x: f64) -> bool {
    match json {
        Value::Number(n) => n.as_f64().is_some_and(|j| j == x),
        Value::Bool(b) => f64::from(u8::from(*b)) == x,
        Value::String(s) => match s.as_str() {
            "NaN" => x.is_nan(),
            "Infinity" => x == f64::INFINITY,
            "-Infinity" => x == f64::NEG_INFINITY,
            _ => false,
        },
        _ => false,
    }
}

fn int_eq(json: &Value, x: i128) -> bool {
    match json {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or(n.as_u64().map(i128::from))
            .is_some_and(|j| j == x),
        Value::Bool(b) => i128::from(*b) == x,
        _ => false,
    }
}

/// A typed attribute against a sidecar JSON leaf: numbers by value, text exactly, a one-element
/// vector against a scalar, longer vectors against arrays.
pub fn attr_matches(attr: &AttrValue, json: &Value) -> bool {
    fn each<T: Copy>(v: &[T], json: &Value, eq: impl Fn(&Value, T) -> bool) -> bool {
        match json {
            Value::Array(a) => a.len() == v.len() && a.iter().zip(v).all(|(j, &x)| eq(j, x)),
            scalar => v.len() == 1 && eq(scalar, v[0]),
        }
    }
    match attr {
        AttrValue::Text(s) => json.as_str() == Some(s.as_str()),
        AttrValue::TextList(l) => json.as_array().is_some_and(|a| {
            a.len() == l.len() && a.iter().zip(l).all(|(j, s)| j.as_str() == Some(s))
        }),
        AttrValue::I8(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::U8(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::I16(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::U16(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::I32(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::U32(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::I64(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::U64(v) => each(v, json, |j, x| int_eq(j, x.into())),
        AttrValue::F32(v) => each(v, json, |j, x| num_eq(j, x.into())),
        AttrValue::F64(v) => each(v, json, num_eq),
    }
}

/// `attrs` hold exactly the (flattened) sidecar object `expected`.
pub fn assert_attrs_equal(what: &str, attrs: &[(String, AttrValue)], expected: &Value) {
    let mut flat = Vec::new();
    flatten_json("", expected, &mut flat);
    let mut ours: Vec<&str> = attrs.iter().map(|(k, _)| k.as_str()).collect();
    let mut theirs: Vec<&str> = flat.iter().map(|(k, _)| k.as_str()).collect();
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs, "{what}: attribute keys");
    for (k, j) in &flat {
        let a = &attrs.iter().find(|(n, _)| n == k).unwrap().1;
        assert!(attr_matches(a, j), "{what}: {k} = {a:?}, sidecar {j}");
    }
}

pub fn find<'a>(attrs: &'a [(String, AttrValue)], key: &str) -> Option<&'a AttrValue> {
    attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

// ── Hand-made messages (no hashes) ──────────────────────────────────────────────────────────

pub fn text(s: &str) -> Cbor {
    Cbor::Text(s.to_string())
}

pub fn cbor_bytes(v: &Cbor) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(v, &mut out).unwrap();
    out
}

fn pad8(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
}

/// A non-data frame: header, CBOR body, zero hash slot, ENDF.
pub fn frame(frame_type: u16, body: &[u8]) -> Vec<u8> {
    let total = 16 + body.len() as u64 + 12;
    let mut f = Vec::new();
    f.extend_from_slice(b"FR");
    f.extend_from_slice(&frame_type.to_be_bytes());
    f.extend_from_slice(&1u16.to_be_bytes());
    f.extend_from_slice(&0u16.to_be_bytes());
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(body);
    f.extend_from_slice(&[0u8; 8]);
    f.extend_from_slice(b"ENDF");
    f
}

/// A data frame (type 9, CBOR after the payload): header, payload, descriptor, cbor_offset,
/// zero hash slot, ENDF.
pub fn data_frame(payload: &[u8], descriptor: &Cbor) -> Vec<u8> {
    let cbor = cbor_bytes(descriptor);
    let total = 16 + payload.len() as u64 + cbor.len() as u64 + 20;
    let mut f = Vec::new();
    f.extend_from_slice(b"FR");
    f.extend_from_slice(&9u16.to_be_bytes());
    f.extend_from_slice(&1u16.to_be_bytes());
    f.extend_from_slice(&1u16.to_be_bytes());
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(payload);
    f.extend_from_slice(&cbor);
    f.extend_from_slice(&(16 + payload.len() as u64).to_be_bytes());
    f.extend_from_slice(&[0u8; 8]);
    f.extend_from_slice(b"ENDF");
    f
}

/// A descriptor map with the given entries (`type` and `ndim` are added).
pub fn descriptor(shape: &[u64], dtype: &str, extra: &[(&str, Cbor)]) -> Cbor {
    let mut strides = vec![1u64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * shape[k + 1];
    }
    let mut m = vec![
        (text("type"), text("ntensor")),
        (text("ndim"), Cbor::Integer((shape.len() as u64).into())),
        (
            text("shape"),
            Cbor::Array(shape.iter().map(|&d| Cbor::Integer(d.into())).collect()),
        ),
        (
            text("strides"),
            Cbor::Array(strides.iter().map(|&d| Cbor::Integer(d.into())).collect()),
        ),
        (text("dtype"), text(dtype)),
        (text("byte_order"), text("little")),
        (text("encoding"), text("none")),
        (text("filter"), text("none")),
        (text("compression"), text("none")),
    ];
    for (k, v) in extra {
        if let Some(slot) = m.iter_mut().find(|(mk, _)| *mk == text(k)) {
            slot.1 = v.clone();
        } else {
            m.push((text(k), v.clone()));
        }
    }
    Cbor::Map(m)
}

/// A whole buffered message: preamble (flags: header metadata), metadata frame, data frames,
/// postamble. `metadata` is the CBOR metadata map.
pub fn message(metadata: &Cbor, objects: &[(Vec<u8>, Cbor)]) -> Vec<u8> {
    let mut body = vec![0u8; 24];
    body.extend_from_slice(&frame(1, &cbor_bytes(metadata)));
    pad8(&mut body);
    for (payload, desc) in objects {
        body.extend_from_slice(&data_frame(payload, desc));
        pad8(&mut body);
    }
    let post_at = body.len() as u64;
    let total = post_at + 24;
    body.extend_from_slice(&post_at.to_be_bytes());
    body.extend_from_slice(&total.to_be_bytes());
    body.extend_from_slice(b"39277777");
    body[0..8].copy_from_slice(b"TENSOGRM");
    body[8..10].copy_from_slice(&3u16.to_be_bytes());
    body[10..12].copy_from_slice(&1u16.to_be_bytes());
    body[16..24].copy_from_slice(&total.to_be_bytes());
    body
}

/// Metadata `{"base": [...], "_extra_": {...}}`.
pub fn metadata(base: Vec<Cbor>, extra: Vec<(Cbor, Cbor)>) -> Cbor {
    let mut m = vec![(text("base"), Cbor::Array(base))];
    if !extra.is_empty() {
        m.push((text("_extra_"), Cbor::Map(extra)));
    }
    Cbor::Map(m)
}
