//! Shared test helpers of this crate: the corpus of `.tgm` files, reads in pieces (slabs and a
//! sub-box), facts of the format, encoder settings, damage, and a builder of hand-made
//! (hash-less) messages. What every converter needs comes from `tet-testkit`.

#![allow(dead_code)]

use std::path::PathBuf;

use ciborium::Value as Cbor;
use tensogram::{ByteOrder, CompressionBackend, DataObjectDescriptor, Dtype, EncodeOptions};
use tet_source::{AttrValue, Fact, Source, SourceError};
use tet_tensogram::{open_bytes, TgmSource};

// Not every test binary uses every one.
#[allow(unused_imports)]
pub use tet_testkit::{
    as_f64s, assert_attrs_equal, attr_matches, check_sidecar_array, find, first_difference,
    flatten_json, json_u64s, read_all, read_all_in_pieces, sha_hex, sidecar, sub_block, XorShift,
};

/// The public corpus `.tgm` files, sorted (at least five: a missing corpus fails).
pub fn corpus_files() -> Vec<PathBuf> {
    let files = tet_testkit::corpus_files("tensogram", &["tgm"]);
    assert!(files.len() >= 5, "corpus looks incomplete: {files:?}");
    files
}

/// The bytes of the corpus file `name`.
pub fn corpus(name: &str) -> Vec<u8> {
    let path = tet_testkit::corpus_dir("tensogram").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The whole variable read in uneven slabs of the first axis (and, for rank ≥ 2, a sub-box),
/// checked against the whole read ([`read_all`]).
pub fn read_in_pieces(src: &dyn Source, var: usize) -> Vec<u8> {
    let whole = read_all_in_pieces(src, var);
    let v = &src.variables()[var];
    let rank = v.shape.len();
    if rank >= 2 && v.shape.iter().all(|&d| d >= 2) {
        // The box [1.., 1.., …] against the whole read.
        let size = v.dtype.size();
        let start = vec![1u64; rank];
        let count: Vec<u64> = v.shape.iter().map(|d| d - 1).collect();
        let n: u64 = count.iter().product();
        let mut sub = vec![0u8; n as usize * size];
        src.read_region(var, &start, &count, &mut sub).unwrap();
        let expect = sub_block(&whole, &v.shape, size, &start, &count);
        assert_eq!(sub, expect, "{}: sub-box read", v.name);
    }
    whole
}

/// The names of the variables of `src`, in order.
pub fn variable_names(src: &dyn Source) -> Vec<&str> {
    src.variables().iter().map(|v| v.name.as_str()).collect()
}

/// Every variable of the source read whole (one read each): `Ok` with all values, or the first
/// error.
pub fn read_everything(src: &TgmSource) -> Result<Vec<Vec<u8>>, SourceError> {
    (0..src.variables().len())
        .map(|i| {
            let v = &src.variables()[i];
            let mut out = vec![0u8; v.byte_len().unwrap() as usize];
            src.read_region(i, &vec![0; v.shape.len()], &v.shape, &mut out)?;
            Ok(out)
        })
        .collect()
}

/// How flips of single bytes of a file fared.
#[derive(Debug, Default)]
pub struct Flips {
    pub at_open: usize,
    pub at_read: usize,
    pub harmless: usize,
}

/// Flips every byte of `bytes` with each of `masks` and opens the result: it is refused at open,
/// or `see` (what a reader sees) fails, or it gives what `see` gives of the intact file — a
/// flip that changes what is seen fails the test. `what` names the file in failures.
pub fn flip_every_byte<T: PartialEq>(
    what: &str,
    bytes: &[u8],
    masks: &[u8],
    see: impl Fn(&TgmSource) -> Result<T, SourceError>,
) -> Flips {
    let opts = tet_source::OpenOptions::default();
    let original = see(&open_bytes(bytes.to_vec(), &opts).unwrap()).unwrap();
    let mut flips = Flips::default();
    for at in 0..bytes.len() {
        for &mask in masks {
            let mut b = bytes.to_vec();
            b[at] ^= mask;
            let Ok(src) = open_bytes(b, &opts) else {
                flips.at_open += 1;
                continue;
            };
            match see(&src) {
                Ok(seen) => {
                    assert!(
                        seen == original,
                        "{what}: flipping byte {at} (^{mask:#x}) changed what is read"
                    );
                    flips.harmless += 1;
                }
                Err(_) => flips.at_read += 1,
            }
        }
    }
    flips
}

/// The value of the fact `key`. Every Tensogram fact is the format's own: a [`Fact::Private`]
/// of `tgm` (checked here).
pub fn find_fact<'a>(facts: &'a [Fact], key: &str) -> Option<&'a AttrValue> {
    tet_testkit::private_fact(facts, "tgm", key)
}

/// The footer keys of `facts`, each fact checked to be a private `tgm` one.
pub fn fact_keys(facts: &[Fact]) -> Vec<&str> {
    facts
        .iter()
        .map(|f| match f {
            Fact::Private { format, key, .. } if format == "tgm" => key.as_str(),
            other => panic!("not a Tensogram fact: {other:?}"),
        })
        .collect()
}

// ── Encoding with the crate ─────────────────────────────────────────────────────────────────

/// Single-threaded, through the C libraries, NaN and Inf allowed (masks).
pub fn encode_options() -> EncodeOptions {
    EncodeOptions {
        threads: 1,
        compression_backend: CompressionBackend::Ffi,
        allow_nan: true,
        allow_inf: true,
        ..EncodeOptions::default()
    }
}

/// The C-order strides (in elements) of `shape`.
pub fn c_strides(shape: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// A C-order descriptor of `shape` with no encoding, filter, compression, masks or parameters.
pub fn base_desc(shape: &[u64], dtype: Dtype, order: ByteOrder) -> DataObjectDescriptor {
    DataObjectDescriptor {
        obj_type: "ntensor".into(),
        ndim: shape.len() as u64,
        shape: shape.to_vec(),
        strides: c_strides(shape),
        dtype,
        byte_order: order,
        encoding: "none".into(),
        filter: "none".into(),
        compression: "none".into(),
        masks: None,
        params: std::collections::BTreeMap::new(),
    }
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
    let strides = c_strides(shape);
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
