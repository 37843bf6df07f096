//! Damaged inputs: every truncation and byte flips of every corpus file, and hostile hand-made
//! messages, give `Ok` or a clear `Err`, never a panic (tests run with overflow checks on).

use crate::common;

use common::*;
use tet_source::{AttrValue, OpenOptions, Source, SourceError, Variable};
use tet_tensogram::{open_bytes, TgmSource};

fn opts() -> OpenOptions {
    OpenOptions::default()
}

/// What a reader sees of a source (without the preamble flags, which change nothing).
type View = (Vec<Variable>, Vec<(String, AttrValue)>, Vec<Vec<u8>>);

fn view(src: &TgmSource) -> Result<View, SourceError> {
    Ok((
        src.variables().to_vec(),
        src.global_attrs().to_vec(),
        read_everything(src)?,
    ))
}

/// Every prefix: at a message boundary it opens (with the messages before it); anywhere else it
/// is refused as a truncated message that starts at the last boundary.
#[test]
fn every_truncation() {
    for path in corpus_files() {
        let bytes = std::fs::read(&path).unwrap();
        let expect = sidecar(&path);
        let ends: Vec<u64> = expect["container"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["offset"].as_u64().unwrap() + m["length"].as_u64().unwrap())
            .collect();
        assert_eq!(*ends.last().unwrap(), bytes.len() as u64);
        for len in 0..=bytes.len() {
            let res = open_bytes(bytes[..len].to_vec(), &opts());
            let l = len as u64;
            if let Some(m) = ends.iter().position(|&e| e == l) {
                let src = res.unwrap_or_else(|e| panic!("{path:?}[..{len}]: {e}"));
                assert_eq!(src.messages().len(), m + 1);
                read_everything(&src).unwrap();
            } else if len == 0 {
                assert!(res.unwrap_err().to_string().contains("empty file"));
            } else {
                let start = ends.iter().copied().filter(|&e| e < l).max().unwrap_or(0);
                let err = res
                    .err()
                    .unwrap_or_else(|| panic!("{path:?}[..{len}] opened"));
                let msg = err.to_string();
                assert!(
                    msg.starts_with(&format!(
                        "truncated Tensogram message at byte {start} (file is {len} bytes)"
                    )),
                    "{path:?}[..{len}]: {msg}"
                );
                assert!(matches!(err, SourceError::Malformed { .. }));
            }
        }
    }
}

/// Bytes after the last message are refused, not dropped.
#[test]
fn trailing_bytes_are_refused() {
    let mut bytes = corpus("two_objects.tgm");
    bytes.extend_from_slice(b"garbage");
    let msg = open_bytes(bytes, &opts()).unwrap_err().to_string();
    assert!(msg.contains("after the last Tensogram message"), "{msg}");
    let msg = open_bytes(b"NOTATGM!".repeat(8), &opts())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("not a Tensogram file"), "{msg}");
}

/// Flipping any one byte of a corpus file (all of them carry hashes) either changes nothing a
/// reader sees or is refused — at open or at read. Never a panic, never silently wrong data.
#[test]
fn single_byte_flips_are_detected_or_harmless() {
    for path in corpus_files() {
        let bytes = std::fs::read(&path).unwrap();
        let Flips {
            at_open,
            at_read,
            harmless,
        } = flip_every_byte(&format!("{path:?}"), &bytes, &[0x01, 0x80], view);
        eprintln!("{path:?}: refused at open {at_open}, at read {at_read}, harmless {harmless}");
        // Payload bytes are only checked when decoded; headers and metadata at open.
        assert!(at_open > 0 && at_read > 0 && harmless > 0);
    }
}

/// Random multi-byte damage: no panic whatever happens.
#[test]
fn random_byte_flips_never_panic() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for path in corpus_files() {
        let bytes = std::fs::read(&path).unwrap();
        for _ in 0..400 {
            let mut b = bytes.clone();
            for _ in 0..1 + rng.next_u64() % 6 {
                let at = (rng.next_u64() % b.len() as u64) as usize;
                b[at] = rng.next_u64() as u8;
            }
            if let Ok(src) = open_bytes(b, &opts()) {
                let _ = read_everything(&src);
            }
        }
    }
}

fn open_one(desc: ciborium::Value, payload: Vec<u8>) -> Result<TgmSource, SourceError> {
    let md = metadata(vec![], vec![]);
    open_bytes(message(&md, &[(payload, desc)]), &opts())
}

#[test]
fn codecs_not_in_this_build_are_named_at_open() {
    for codec in ["brotli", "lzma", "zfp3"] {
        let good = descriptor(&[4], "float32", &[]);
        let bad = descriptor(&[4], "float32", &[("compression", text(codec))]);
        let md = metadata(vec![], vec![]);
        let bytes = message(&md, &[(vec![0; 16], good), (vec![0; 16], bad)]);
        let err = open_bytes(bytes.clone(), &opts()).err().unwrap();
        assert!(matches!(err, SourceError::Unsupported { .. }));
        assert_eq!(
            err.to_string(),
            format!(
                "unsupported: message 0 object 1: compression '{codec}' is not supported by \
                 this build (supported: none, zstd, lz4, szip, blosc2, zfp, sz3)"
            )
        );
        // With --skip-unsupported the object is listed, the others delivered.
        let skip = OpenOptions {
            skip_unsupported: true,
            ..OpenOptions::default()
        };
        let src = open_bytes(bytes, &skip).unwrap();
        assert_eq!(src.variables().len(), 1);
        assert_eq!(src.skipped().len(), 1);
        assert_eq!(src.skipped()[0].name, "message_0/object_1");
        assert!(src.skipped()[0].reason.contains(codec));
    }
}

#[test]
fn unsupported_pipeline_stages_and_masks() {
    let cases: Vec<(ciborium::Value, &str)> = vec![
        (
            descriptor(&[4], "float32", &[("encoding", text("zfp_magic"))]),
            "encoding 'zfp_magic'",
        ),
        (
            descriptor(&[4], "float32", &[("filter", text("bitshuffle"))]),
            "filter 'bitshuffle'",
        ),
        (
            descriptor(
                &[2, 3],
                "float32",
                // Overlapping (Fortran order, [1, 2], is read: tests/strides.rs).
                &[("strides", ciborium::Value::Array(vec![1.into(), 1.into()]))],
            ),
            "do not lay the elements out densely",
        ),
    ];
    for (desc, what) in cases {
        let n: u64 = 24;
        let err = open_one(desc, vec![0; n as usize]).err().unwrap();
        assert!(matches!(err, SourceError::Unsupported { .. }), "{err}");
        assert!(err.to_string().contains(what), "{err}");
    }
    // A mask method tensogram does not know.
    let mask = ciborium::Value::Map(vec![(
        text("nan"),
        ciborium::Value::Map(vec![
            (text("method"), text("brotli")),
            (text("offset"), 16.into()),
            (text("length"), 1.into()),
        ]),
    )]);
    let err = open_one(descriptor(&[4], "float32", &[("masks", mask)]), vec![0; 17])
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("nan mask method 'brotli'"),
        "{err}"
    );
}

#[test]
fn malformed_descriptors_are_refused() {
    let cases: Vec<(ciborium::Value, Vec<u8>, &str)> = vec![
        // Payload shorter than the shape needs.
        (descriptor(&[4], "float32", &[]), vec![0; 15], "needs 16"),
        // ndim disagrees.
        (
            descriptor(&[4], "float32", &[("ndim", 2.into())]),
            vec![0; 16],
            "ndim",
        ),
        // Shape overflows.
        (
            descriptor(&[u64::MAX, 4], "float32", &[]),
            vec![0; 16],
            "too many elements",
        ),
        // simple_packing on float32.
        (
            descriptor(&[4], "float32", &[("encoding", text("simple_packing"))]),
            vec![0; 16],
            "float64",
        ),
        // szip without its parameters.
        (
            descriptor(&[4], "float32", &[("compression", text("szip"))]),
            vec![0; 16],
            "szip_rsi",
        ),
        // An lz4 stream declaring another size.
        (
            descriptor(&[4], "float32", &[("compression", text("lz4"))]),
            vec![0xff, 0xff, 0xff, 0x7f, 0],
            "lz4 payload declares",
        ),
        // rle on a float.
        (
            descriptor(&[4], "float32", &[("compression", text("rle"))]),
            vec![0; 16],
            "bitmask objects only",
        ),
    ];
    for (desc, payload, what) in cases {
        let err = open_one(desc, payload).err().unwrap();
        assert!(matches!(err, SourceError::Malformed { .. }), "{err}");
        assert!(err.to_string().contains(what), "{what}: {err}");
        assert!(err
            .to_string()
            .starts_with("corrupt Tensogram message 0 at byte 0"));
    }
}

#[test]
fn a_decoder_error_names_the_object_at_read() {
    // zstd with garbage: accepted at open (compressed sizes are unknown), refused at read.
    let desc = descriptor(&[4], "float32", &[("compression", text("zstd"))]);
    let src = open_one(desc, vec![1, 2, 3, 4, 5]).unwrap();
    let mut out = vec![0u8; 16];
    let err = src.read_region(0, &[0], &[4], &mut out).unwrap_err();
    assert!(err.to_string().starts_with("message 0 object 0:"), "{err}");
    // The failure is remembered, not decoded again, and stays an error.
    assert!(src.read_region(0, &[0], &[4], &mut out).is_err());
}

#[test]
fn rank_nine_is_delivered_as_is() {
    let shape = [1u64, 1, 1, 1, 1, 1, 1, 2, 2];
    let src = open_one(descriptor(&shape, "uint8", &[]), vec![1, 2, 3, 4]).unwrap();
    assert_eq!(src.variables()[0].shape, shape.to_vec());
    assert_eq!(read_all(&src, 0), vec![1, 2, 3, 4]);
}

#[test]
fn hand_made_messages_without_hashes_open() {
    // Metadata with structures the dotted form cannot hold keeps them as JSON facts.
    let base = ciborium::Value::Map(vec![
        (text("name"), text("x")),
        (
            text("steps"),
            ciborium::Value::Array(vec![ciborium::Value::Map(vec![(text("a"), 1.into())])]),
        ),
        (text("missing"), ciborium::Value::Null),
    ]);
    let md = metadata(vec![base], vec![(text("v"), 1.into())]);
    let bytes = message(&md, &[(vec![7u8; 4], descriptor(&[4], "int8", &[]))]);
    let src = open_bytes(bytes, &opts()).unwrap();
    let v = &src.variables()[0];
    assert_eq!(v.dtype, tet_source::ElementType::I8);
    assert_eq!(find(&v.attrs, "name"), Some(&AttrValue::Text("x".into())));
    assert_eq!(
        find(&v.attrs, "steps"),
        Some(&AttrValue::Text(r#"[{"a":1}]"#.into()))
    );
    assert!(find(&v.attrs, "missing").is_none());
    assert_eq!(
        find_fact(&v.facts, "tensogram_metadata_json"),
        Some(&AttrValue::Text(
            r#"{"missing":null,"name":"x","steps":[{"a":1}]}"#.into()
        ))
    );
    assert_eq!(
        src.global_attrs(),
        &[("v".to_string(), AttrValue::I64(vec![1]))]
    );
    assert_eq!(read_all(&src, 0), vec![7; 4]);
}
