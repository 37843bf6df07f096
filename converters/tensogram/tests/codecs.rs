//! The blosc2, zfp and sz3 codecs and zero-object messages (issue #12), against files written by
//! ECMWF's Python `tensogram` (tests/fixtures/codecs, see its make.py): every value is compared
//! with what that library decodes, bit for bit — lossless and lossy codecs alike, since the
//! library's decoded values are what every reader sees — and lossy decoding is recorded (a note
//! and the `tensogram_lossy` fact). Pipelines that do not decode to their values are refused in
//! one line, or skipped with `--skip-unsupported`. Property tests encode with the Rust crate and
//! compare with its own decoder.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ciborium::Value as Cbor;
use common::*;
use proptest::prelude::*;
use serde_json::Value;
use tensogram::{
    ByteOrder, CompressionBackend, DataObjectDescriptor, DecodeOptions, Dtype, EncodeOptions,
    GlobalMetadata, StreamingEncoder,
};
use tet_source::{AttrValue, Importer, OpenOptions, Source, SourceError};
use tet_tensogram::{open_bytes, TgmImporter, TgmSource};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/codecs");

fn fixture(name: &str) -> PathBuf {
    Path::new(FIXTURES).join(name)
}

fn expect() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("expect.json")).unwrap()).unwrap()
}

fn skip() -> OpenOptions {
    OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    }
}

/// `got` and `want` are the same bytes; otherwise the first differing element is named.
fn assert_same_values(what: &str, got: &[u8], want: &[u8], size: usize) {
    if let Some(d) = first_difference(got, want, size.max(1)) {
        panic!("{what}: {d} (the library's decoding)");
    }
}

/// The facts and notes of a variable against its expect.json entry.
fn check_recording(what: &str, v: &tet_source::Variable, e: &Value) {
    let fact = |k: &str| find_fact(&v.facts, k);
    assert_eq!(
        fact("tensogram_compression"),
        Some(&AttrValue::Text(e["compression"].as_str().unwrap().into())),
        "{what}"
    );
    assert_eq!(
        fact("tensogram_byte_order"),
        Some(&AttrValue::Text(e["byte_order"].as_str().unwrap().into())),
        "{what}"
    );
    match e["lossy"].as_str() {
        Some(stage) => {
            assert_eq!(
                fact("tensogram_lossy"),
                Some(&AttrValue::Text(stage.into())),
                "{what}"
            );
            let note = if stage.starts_with("simple_packing") {
                "lossy encoding simple_packing: values are the decoded f64".to_string()
            } else {
                format!("lossy compression {stage}: values are the decoded f64")
            };
            assert!(v.notes.contains(&note), "{what}: {:?}", v.notes);
        }
        None => {
            assert!(fact("tensogram_lossy").is_none(), "{what}");
            assert!(v.notes.iter().all(|n| !n.contains("lossy")), "{what}");
        }
    }
    let masks: Vec<String> = e["masks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    match fact("tensogram_masks") {
        Some(AttrValue::TextList(l)) => {
            let mut l = l.clone();
            l.sort();
            assert_eq!(l, masks, "{what}: masks");
        }
        None => assert!(masks.is_empty(), "{what}: masks"),
        other => panic!("{what}: masks fact {other:?}"),
    }
    // Objects compressed with blosc2, or with blosc2 masks, are decoded by tet-blosc2 (noted).
    let blosc2 = e["compression"] == "blosc2" || !e["masks"].as_array().unwrap().is_empty();
    let blosc2_file = what.starts_with("blosc2");
    assert_eq!(
        v.notes
            .iter()
            .any(|n| n.starts_with("blosc2 decoded by tet-blosc2")),
        blosc2 && (blosc2_file || e["compression"] == "blosc2"),
        "{what}: {:?}",
        v.notes
    );
    if e["compression"] != "none" {
        assert!(v.layout.compressed, "{what}");
    }
}

/// One fixture file against its expect.json entry: messages, variables, values, attributes,
/// facts, skipped objects.
fn check_fixture(file: &str, e: &Value) {
    let path = fixture(file);
    let src = TgmImporter
        .open(&path, &skip())
        .unwrap_or_else(|err| panic!("{file}: {err}"));
    let tgm = open_bytes(std::fs::read(&path).unwrap(), &skip()).unwrap();
    let msgs = e["messages"].as_array().unwrap();
    assert_eq!(tgm.messages().len(), msgs.len(), "{file}: messages");
    for (m, j) in tgm.messages().iter().zip(msgs) {
        assert_eq!(Some(m.offset), j["offset"].as_u64(), "{file}");
        assert_eq!(Some(m.length), j["length"].as_u64(), "{file}");
        assert_eq!(Some(m.streaming), j["streaming"].as_bool(), "{file}");
        assert_eq!(Some(m.object_count as u64), j["object_count"].as_u64());
    }
    let vars: Vec<&Value> = e["variables"].as_array().unwrap().iter().collect();
    let want: Vec<&str> = vars.iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(variable_names(src.as_ref()), want, "{file}: variables");
    for (i, ev) in vars.iter().enumerate() {
        let v = &src.variables()[i];
        let what = format!("{file}/{}", v.name);
        assert_eq!(v.dtype.name(), ev["dtype"].as_str().unwrap(), "{what}");
        assert_eq!(v.shape, json_u64s(&ev["shape"]), "{what}: shape");
        let got = read_in_pieces(src.as_ref(), i);
        let want = std::fs::read(fixture("expect").join(ev["expect"].as_str().unwrap())).unwrap();
        assert_same_values(&what, &got, &want, v.dtype.size());
        assert_eq!(sha_hex(&got), ev["sha256"].as_str().unwrap(), "{what}");
        assert_attrs_equal(&what, &v.attrs, &ev["attributes"]);
        check_recording(&what, v, ev);
    }
    assert_attrs_equal(file, src.global_attrs(), &e["global_attributes"]);
    let mut skipped: Vec<(&str, &str)> = e["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            let word = j["reason_contains"].as_str().unwrap();
            (j["name"].as_str().unwrap(), word)
        })
        .collect();
    skipped.sort_by_key(|(name, _)| object_position(name));
    assert_eq!(src.skipped().len(), skipped.len(), "{file}: skipped");
    for (s, (name, word)) in src.skipped().iter().zip(skipped) {
        assert_eq!(s.name, name, "{file}");
        assert!(s.reason.contains(word), "{file}: {} — {}", s.name, s.reason);
        assert!(!s.reason.contains('\n'), "{file}: {}", s.reason);
    }
}

/// `(message, object)` of a variable named `message_<m>/object_<i>`.
fn object_position(name: &str) -> (u64, u64) {
    let (m, o) = name.split_once('/').unwrap();
    let num = |s: &str, p: &str| s.strip_prefix(p).unwrap().parse::<u64>().unwrap();
    (num(m, "message_"), num(o, "object_"))
}

#[test]
fn fixtures_match_the_python_library() {
    let e = expect();
    let files = e.as_object().unwrap();
    assert_eq!(files.len(), 7);
    for (file, entry) in files {
        check_fixture(file, entry);
    }
}

/// Lossy objects decoded from several threads at once (each waits for the one decode of the
/// object it wants, or decodes it) give the same values.
#[test]
fn lossy_objects_read_concurrently_agree() {
    let src = TgmImporter
        .open(&fixture("zfp.tgm"), &OpenOptions::default())
        .unwrap();
    let whole: Vec<Vec<u8>> = (0..src.variables().len())
        .map(|i| read_all(src.as_ref(), i))
        .collect();
    std::thread::scope(|s| {
        for t in 0..4usize {
            let (src, whole) = (&src, &whole);
            s.spawn(move || {
                for round in 0..12 {
                    let var = (t + round) % whole.len();
                    assert_eq!(read_all(src.as_ref(), var), whole[var]);
                }
            });
        }
    });
}

/// The blosc2 fixture's masks were written with the blosc2 mask method (so that method is
/// covered), and its objects use every blosc2 codec.
#[test]
fn blosc2_fixture_covers_its_codecs_and_mask_method() {
    let bytes = std::fs::read(fixture("blosc2.tgm")).unwrap();
    let msg = tensogram::framing::decode_message(&bytes).unwrap();
    let mut codecs: Vec<String> = Vec::new();
    let mut mask_methods: Vec<String> = Vec::new();
    for (d, _, _, _) in &msg.objects {
        assert_eq!(d.compression, "blosc2");
        codecs.push(match d.params.get("blosc2_codec") {
            Some(Cbor::Text(c)) => c.clone(),
            _ => "lz4 (default)".into(),
        });
        if let Some(m) = &d.masks {
            for k in [&m.nan, &m.pos_inf, &m.neg_inf].into_iter().flatten() {
                mask_methods.push(k.method.clone());
            }
        }
    }
    for c in ["blosclz", "lz4", "lz4hc", "zlib", "zstd", "lz4 (default)"] {
        assert!(codecs.iter().any(|x| x == c), "{c} not in {codecs:?}");
    }
    assert_eq!(mask_methods, vec!["blosc2"; 3]);
}

/// The fixture `file` opened without `--skip-unsupported`: refused as unsupported (never as a
/// malformed file), in one line; the message.
fn refusal(file: &str) -> String {
    let err = TgmImporter
        .open(&fixture(file), &OpenOptions::default())
        .err()
        .unwrap_or_else(|| panic!("{file} must be refused"));
    assert!(matches!(err, SourceError::Unsupported { .. }), "{err}");
    let text = err.to_string();
    assert!(!text.contains('\n'), "{text}");
    text
}

/// Without `--skip-unsupported`, a pipeline that does not decode to its values is refused in
/// one line naming the object and why — as unsupported, never as a malformed file.
#[test]
fn undecodable_pipelines_are_refused_in_one_line() {
    let text = refusal("refused.tgm");
    assert_eq!(
        text,
        "unsupported: message 0 object 1: compression 'zfp' on a float32 object: tensogram's \
         zfp codec compresses its input as float64 values, so only plain float64 objects \
         decode to their values"
    );
    assert!(!text.contains("corrupt") && !text.contains("malformed"));
}

/// The zero-object streamed message as the library writes it: valid, no variables, nothing
/// skipped — from the Python library (fixture) and from the Rust crate, with and without
/// hashes, streamed or backfilled, alone or between other messages.
#[test]
fn zero_object_messages_are_valid() {
    let bytes = std::fs::read(fixture("empty_stream.tgm")).unwrap();
    let src = open_bytes(bytes, &OpenOptions::default()).unwrap();
    assert!(src.variables().is_empty() && src.skipped().is_empty());
    let m = &src.messages()[0];
    assert!(m.streaming);
    assert_eq!(m.object_count, 0);
    // It declares a footer hash frame (preamble flag 0x20) that it does not hold.
    assert_ne!(m.preamble_flags & 0x20, 0);

    let meta = GlobalMetadata {
        extra: BTreeMap::from([("k".to_string(), Cbor::Text("v".into()))]),
        ..GlobalMetadata::default()
    };
    for hashing in [true, false] {
        let opts = EncodeOptions {
            hashing,
            ..encode_options()
        };
        let streamed = StreamingEncoder::new(Vec::new(), &meta, &opts)
            .unwrap()
            .finish()
            .unwrap();
        let buffered = tensogram::encode(&meta, &[], &opts).unwrap();
        let one = lossy_message(&[case("zfp", 3)], false, &opts);
        for (bytes, vars) in [
            (streamed.clone(), 0),
            (buffered.clone(), 0),
            ([one.clone(), streamed.clone(), one.clone()].concat(), 2),
            (
                [streamed.clone(), buffered.clone(), one.clone()].concat(),
                1,
            ),
        ] {
            let n = bytes.len();
            let src = open_bytes(bytes, &OpenOptions::default())
                .unwrap_or_else(|e| panic!("hashing {hashing}, {n} bytes: {e}"));
            assert_eq!(src.variables().len(), vars);
            assert!(src.skipped().is_empty());
        }
        // A single empty message keeps its `_extra_` as the global attributes.
        let src = open_bytes(streamed, &OpenOptions::default()).unwrap();
        assert_eq!(
            find(src.global_attrs(), "k"),
            Some(&AttrValue::Text("v".into()))
        );
    }
}

/// A missing hash frame is only excused where there is nothing to hash: a message with objects
/// that declares a footer hash frame it does not hold is still refused.
#[test]
fn missing_hash_frame_with_objects_is_still_corrupt() {
    let bytes = lossy_message(&[case("sz3", 5)], true, &encode_options());
    assert!(open_bytes(bytes.clone(), &OpenOptions::default()).is_ok());
    // Remove the footer hash frame (type 5): the message still declares it.
    let at = (24..bytes.len() - 24)
        .step_by(8)
        .find(|&p| bytes[p..p + 4] == [b'F', b'R', 0, 5])
        .expect("a footer hash frame");
    let len = u64::from_be_bytes(bytes[at + 8..at + 16].try_into().unwrap()) as usize;
    let mut cut = bytes[..at].to_vec();
    cut.extend_from_slice(&bytes[at + len.div_ceil(8) * 8..]);
    let err = open_bytes(cut, &OpenOptions::default()).err().unwrap();
    assert!(err.to_string().contains("footer hash frame(s)"), "{err}");
}

// ── Hand-made descriptors: parameters checked at open ───────────────────────────────────────

fn open_one(desc: Cbor, payload: Vec<u8>, opts: &OpenOptions) -> Result<TgmSource, SourceError> {
    let md = metadata(vec![], vec![]);
    open_bytes(message(&md, &[(payload, desc)]), opts)
}

#[test]
fn codec_parameters_are_checked_at_open() {
    let f64_with = |extra: &[(&str, Cbor)]| descriptor(&[4], "float64", extra);
    let zfp = ("compression", text("zfp"));
    let sz3 = ("compression", text("sz3"));
    let mut unsupported: Vec<(Cbor, &str)> = vec![
        (
            f64_with(&[zfp.clone(), ("zfp_mode", text("reversible"))]),
            "zfp mode 'reversible' is not supported",
        ),
        (
            f64_with(&[sz3.clone(), ("sz3_error_bound_mode", text("l2norm"))]),
            "sz3 error bound mode 'l2norm'",
        ),
        (
            descriptor(&[4], "int64", std::slice::from_ref(&sz3)),
            "compression 'sz3' on a int64 object",
        ),
        (
            f64_with(&[
                zfp.clone(),
                ("filter", text("shuffle")),
                ("shuffle_element_size", 8.into()),
            ]),
            "compression 'zfp' on the output of filter 'shuffle'",
        ),
    ];
    let mut malformed: Vec<(Cbor, &str)> = vec![
        (
            f64_with(std::slice::from_ref(&zfp)),
            "zfp needs the text parameter 'zfp_mode'",
        ),
        (
            f64_with(&[zfp.clone(), ("zfp_mode", text("fixed_rate"))]),
            "'zfp_rate'",
        ),
        (
            f64_with(&[
                zfp.clone(),
                ("zfp_mode", text("fixed_precision")),
                ("zfp_precision", Cbor::Integer((1u64 << 40).into())),
            ]),
            "outside the u32 range",
        ),
        (
            f64_with(&[sz3.clone(), ("sz3_error_bound_mode", text("abs"))]),
            "'sz3_error_bound'",
        ),
    ];
    let blosc2 = ("compression", text("blosc2"));
    {
        unsupported.push((
            f64_with(&[blosc2.clone(), ("blosc2_codec", text("snappy"))]),
            "blosc2 codec 'snappy' is not supported by this build (supported: blosclz, lz4, \
             lz4hc, zlib, zstd)",
        ));
        malformed.push((
            f64_with(&[blosc2.clone(), ("blosc2_codec", 3.into())]),
            "'blosc2_codec' is not text",
        ));
        malformed.push((
            f64_with(&[blosc2, ("blosc2_clevel", text("high"))]),
            "'blosc2_clevel'",
        ));
    }
    for (desc, what) in unsupported {
        let err = open_one(desc, vec![0; 32], &OpenOptions::default())
            .err()
            .unwrap();
        assert!(matches!(err, SourceError::Unsupported { .. }), "{err}");
        assert!(err.to_string().contains(what), "{err}");
    }
    for (desc, what) in malformed {
        let err = open_one(desc, vec![0; 32], &OpenOptions::default())
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .starts_with("corrupt Tensogram message 0 at byte 0: object 0:"),
            "{err}"
        );
        assert!(err.to_string().contains(what), "{err}");
    }
}

#[test]
fn a_bad_lossy_stream_fails_the_read_naming_the_object() {
    let desc = descriptor(
        &[8],
        "float64",
        &[
            ("compression", text("sz3")),
            ("sz3_error_bound_mode", text("abs")),
            ("sz3_error_bound", Cbor::Float(0.1)),
        ],
    );
    let src = open_one(desc, vec![0xcd; 24], &OpenOptions::default()).unwrap();
    let mut out = vec![0u8; 64];
    let err = src.read_region(0, &[0], &[8], &mut out).unwrap_err();
    assert!(err.to_string().starts_with("message 0 object 0:"), "{err}");
}

// ── Property tests: the Rust crate's writer and decoder ─────────────────────────────────────

/// One lossy object: shape, codec (`zfp` / `sz3`), mode index, byte order, seed.
#[derive(Debug, Clone)]
struct Case {
    shape: Vec<u64>,
    codec: &'static str,
    mode: usize,
    big: bool,
    seed: u64,
    non_finite: bool,
}

fn case(codec: &'static str, seed: u64) -> Case {
    Case {
        shape: vec![4, 5],
        codec,
        mode: 0,
        big: false,
        seed,
        non_finite: false,
    }
}

fn lossy_desc(c: &Case) -> DataObjectDescriptor {
    let order = if c.big {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    let mut d = base_desc(&c.shape, Dtype::Float64, order);
    d.compression = c.codec.into();
    let p = &mut d.params;
    if c.codec == "zfp" {
        match c.mode % 3 {
            0 => {
                p.insert("zfp_mode".into(), text("fixed_rate"));
                p.insert("zfp_rate".into(), Cbor::Float(8.0 + (c.seed % 40) as f64));
            }
            1 => {
                p.insert("zfp_mode".into(), text("fixed_precision"));
                p.insert(
                    "zfp_precision".into(),
                    Cbor::Integer((8 + c.seed % 50).into()),
                );
            }
            _ => {
                p.insert("zfp_mode".into(), text("fixed_accuracy"));
                p.insert(
                    "zfp_tolerance".into(),
                    Cbor::Float(0.5f64.powi((c.seed % 30) as i32)),
                );
            }
        }
    } else {
        let (mode, bound) = [("abs", 1e-3), ("rel", 1e-4), ("psnr", 60.0)][c.mode % 3];
        p.insert("sz3_error_bound_mode".into(), text(mode));
        p.insert("sz3_error_bound".into(), Cbor::Float(bound));
    }
    d
}

/// Smooth native-endian f64 values (what zfp and sz3 take whatever the declared byte order),
/// with a few NaN / ±Inf when asked.
fn lossy_values(c: &Case) -> Vec<u8> {
    let n: u64 = c.shape.iter().product();
    let mut x = 250.0 + (c.seed % 100) as f64;
    (0..n)
        .map(|i| {
            x += ((i.wrapping_mul(c.seed | 1) % 17) as f64 - 8.0) * 0.37;
            match (c.non_finite, i % 11) {
                (true, 3) => f64::NAN,
                (true, 7) => f64::INFINITY,
                (true, 9) => f64::NEG_INFINITY,
                _ => x,
            }
        })
        .flat_map(f64::to_ne_bytes)
        .collect()
}

fn lossy_message(cases: &[Case], streaming: bool, opts: &EncodeOptions) -> Vec<u8> {
    let descs: Vec<DataObjectDescriptor> = cases.iter().map(lossy_desc).collect();
    let data: Vec<Vec<u8>> = cases.iter().map(lossy_values).collect();
    let meta = GlobalMetadata::default();
    if streaming {
        let mut enc = StreamingEncoder::new(Vec::new(), &meta, opts).unwrap();
        for (d, w) in descs.iter().zip(&data) {
            enc.write_object(d, w).unwrap();
        }
        enc.finish().unwrap()
    } else {
        let pairs: Vec<(&DataObjectDescriptor, &[u8])> =
            descs.iter().zip(&data).map(|(d, w)| (d, &w[..])).collect();
        tensogram::encode(&meta, &pairs, opts).unwrap()
    }
}

/// What tensogram's decoder returns for every object of a message (native byte order, NaN and
/// Inf restored), little-endian.
fn library_decode(message: &[u8]) -> Vec<Vec<u8>> {
    let opts = DecodeOptions {
        compression_backend: CompressionBackend::Ffi,
        threads: 1,
        ..DecodeOptions::default()
    };
    let (_, objects) = tensogram::decode(message, &opts).unwrap();
    objects
        .into_iter()
        .map(|(_, data)| {
            data.chunks_exact(8)
                .flat_map(|c| f64::from_ne_bytes(c.try_into().unwrap()).to_le_bytes())
                .collect()
        })
        .collect()
}

fn lossy_case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(1u64..9, 0..4),
        any::<bool>(),
        0usize..3,
        any::<bool>(),
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(|(shape, sz3, mode, big, seed, non_finite)| Case {
            shape,
            codec: if sz3 { "sz3" } else { "zfp" },
            mode,
            big,
            seed,
            non_finite,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// zfp and sz3 objects of any mode, rank, byte order, with or without masks, buffered or
    /// streamed: the importer delivers exactly what the library decodes, recorded as lossy.
    #[test]
    fn lossy_objects_match_the_library_decoder(
        cases in prop::collection::vec(lossy_case(), 1..4),
        streaming in any::<bool>(),
    ) {
        let bytes = lossy_message(&cases, streaming, &encode_options());
        let oracle = library_decode(&bytes);
        let src = open_bytes(bytes, &OpenOptions::default()).unwrap();
        prop_assert_eq!(src.variables().len(), cases.len());
        for (i, c) in cases.iter().enumerate() {
            let v = &src.variables()[i];
            prop_assert_eq!(&v.shape, &c.shape);
            prop_assert_eq!(read_in_pieces(&src, i), oracle[i].clone());
            let Some(AttrValue::Text(stage)) = find_fact(&v.facts, "tensogram_lossy") else {
                panic!("{}: no tensogram_lossy fact", v.name)
            };
            prop_assert!(stage.starts_with(&format!("{}(", c.codec)), "{}", stage);
            let note = format!("lossy compression {stage}: values are the decoded f64");
            prop_assert!(v.notes.contains(&note));
        }
    }
}

// ── Damage ──────────────────────────────────────────────────────────────────────────────────

/// Flipping any one byte of a codec fixture (all carry hashes) changes nothing a reader sees
/// or is refused, at open or at read: damaged blosc2 / zfp / sz3 payloads never reach their
/// decoders unnoticed (the hash is checked first).
#[test]
fn single_byte_flips_of_codec_fixtures_are_detected_or_harmless() {
    // blosc2.tgm and streams.tgm hold blosc2 objects.
    for file in ["blosc2.tgm", "zfp.tgm", "sz3.tgm", "streams.tgm"] {
        let bytes = std::fs::read(fixture(file)).unwrap();
        let flips = flip_every_byte(file, &bytes, &[0x10], read_everything);
        let (refused, harmless) = (flips.at_open + flips.at_read, flips.harmless);
        assert!(refused > 0 && harmless > 0, "{file}");
    }
}

fn unhashed() -> EncodeOptions {
    EncodeOptions {
        hashing: false,
        ..encode_options()
    }
}

/// Hash-less messages (written by the crate with hashing off) of one codec, each mode once.
fn unhashed_messages(codec: &str) -> Vec<Vec<u8>> {
    if codec == "blosc2" {
        // Written by the Python library without hashes: every blosc2 variant of make.py's
        // second blosc2 file, and blosc2 masks.
        return vec![std::fs::read(fixture("blosc2_unhashed.tgm")).unwrap()];
    }
    let codec = if codec == "zfp" { "zfp" } else { "sz3" };
    (0..3)
        .map(|mode| {
            let c = Case {
                shape: vec![6, 7],
                mode,
                non_finite: mode == 1,
                ..case(codec, 11 + mode as u64)
            };
            lossy_message(&[c], false, &unhashed())
        })
        .collect()
}

/// 1–4 random bytes replaced inside the frames of each message, 100 times: `(label, bytes)`.
fn damaged(codec: &str) -> Vec<(String, Vec<u8>)> {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::new();
    for (m, bytes) in unhashed_messages(codec).into_iter().enumerate() {
        for round in 0..100 {
            let (b, label) = damage_frames(&mut rng, &bytes);
            out.push((format!("{codec} message {m} round {round}: {label}"), b));
        }
    }
    out
}

/// `message` with 1–4 bytes set to random values past its preamble and before its postamble
/// (24 bytes each), and what was set (`position=value`, comma-separated).
fn damage_frames(rng: &mut XorShift, message: &[u8]) -> (Vec<u8>, String) {
    let mut b = message.to_vec();
    let mut what = Vec::new();
    for _ in 0..1 + rng.next_u64() % 4 {
        let at = 24 + (rng.next_u64() % (b.len() as u64 - 48)) as usize;
        b[at] = rng.next_u64() as u8;
        what.push(format!("{at}={:#04x}", b[at]));
    }
    (b, what.join(","))
}

/// Child side of [`damage_report`]: opens and reads the mutations of `TET_TGM_DAMAGE`
/// (`codec:from`) from `from` on, printing each label before trying it.
#[test]
#[ignore]
fn child_damage() {
    let Ok(spec) = std::env::var("TET_TGM_DAMAGE") else {
        return;
    };
    let (codec, from) = spec.split_once(':').unwrap();
    let from: usize = from.parse().unwrap();
    println!();
    for (k, (label, bytes)) in damaged(codec).into_iter().enumerate().skip(from) {
        println!("TRY {k} {label}");
        if let Ok(src) = open_bytes(bytes, &OpenOptions::default()) {
            let _ = read_everything(&src);
        }
    }
    println!("DONE");
}

/// Waits for `child`, killing it once `log` has not grown for `stall` (a hang inside a codec's
/// library): its exit status, or `None` when it was killed.
fn wait_while_logging(
    child: &mut std::process::Child,
    log: &Path,
    stall: Duration,
) -> Option<std::process::ExitStatus> {
    let mut progress = (0, Instant::now());
    while child.try_wait().unwrap().is_none() {
        let len = std::fs::metadata(log).map_or(0, |m| m.len());
        if len != progress.0 {
            progress = (len, Instant::now());
        } else if progress.1.elapsed() > stall {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The status is kept once reaped.
    child.try_wait().unwrap()
}

/// Runs the damaged messages of `codec` in child processes (this test binary), restarting
/// after a crash or a hang; the mutations that crashed or hung the codec's library. A child
/// that panics or fails fails the test: that would be a bug of this crate.
fn damage_report(codec: &str) -> Vec<String> {
    use std::os::unix::process::ExitStatusExt;
    let exe = std::env::current_exe().unwrap();
    let total = damaged(codec).len();
    let logs = tempfile::tempdir().unwrap();
    let (mut problems, mut from, mut attempt) = (Vec::new(), 0, 0);
    while from < total {
        attempt += 1;
        let log = logs.path().join(format!("out{attempt}.txt"));
        let err = logs.path().join(format!("err{attempt}.txt"));
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                tet_testkit::layout::test_name(module_path!(), "child_damage").as_str(),
                "--ignored",
                "--nocapture",
            ])
            .args(["--test-threads=1"])
            .env("TET_TGM_DAMAGE", format!("{codec}:{from}"))
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let status = wait_while_logging(&mut child, &log, Duration::from_secs(10));
        let stdout = std::fs::read_to_string(&log).unwrap_or_default();
        if stdout.contains("DONE") && status.is_some_and(|s| s.success()) {
            break;
        }
        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
        let last = stdout
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("TRY "))
            .unwrap_or_else(|| panic!("child failed before any mutation: {stderr}"));
        let (k, label) = last.split_once(' ').unwrap();
        match status.map(|s| s.signal()) {
            None => problems.push(format!("hang: {label}")),
            Some(Some(sig)) => problems.push(format!("signal {sig}: {label}")),
            Some(None) => panic!("panic or failure on {label}:\n{stderr}"),
        }
        from = k.parse::<usize>().unwrap() + 1;
    }
    if !problems.is_empty() {
        eprintln!(
            "{codec}: its library crashed or hung on {} of {total} damaged hash-less messages:",
            problems.len()
        );
        for p in &problems {
            eprintln!("  {p}");
        }
    }
    problems
}

/// zfp's decoder takes damaged payloads without crashing.
#[test]
fn damaged_unhashed_zfp_payloads_never_crash() {
    assert_eq!(damage_report("zfp"), Vec::<String>::new());
}

/// Known limitation (see the crate docs): SZ3's C++ decoder can crash the process on a damaged
/// payload that no frame hash protects (a C++ exception through the FFI: SIGABRT). Never a
/// panic of this crate; the crashes are reported (`-- --nocapture`).
#[test]
fn damaged_unhashed_sz3_payloads_crash_only_inside_their_library() {
    let problems = damage_report("sz3");
    assert!(problems.len() < damaged("sz3").len() / 2);
}

/// tet-blosc2 takes damaged hash-less blosc2 payloads and masks (every variant of
/// blosc2_unhashed.tgm) without crashing, hanging or panicking (a panic fails
/// [`damage_report`]).
#[test]
fn damaged_unhashed_blosc2_payloads_never_crash() {
    assert_eq!(damage_report("blosc2"), Vec::<String>::new());
}

/// A descriptor damaged into an empty shape (16 × 16 → 0 × 16) leaves nothing to read, so the
/// frame hash that catches it is checked at open.
#[test]
fn a_shape_damaged_to_empty_is_caught_at_open() {
    let mut bytes = std::fs::read(fixture("zfp.tgm")).unwrap();
    let key = b"eshape\x82\x10\x10";
    let at = bytes
        .windows(key.len())
        .rposition(|w| w == key)
        .expect("the 16 x 16 object's descriptor (after its metadata's copy)");
    bytes[at + 7] = 0;
    let err = open_bytes(bytes, &OpenOptions::default()).err().unwrap();
    assert!(
        err.to_string()
            .contains("message 0 object 4: the data frame is corrupt"),
        "{err}"
    );
}
