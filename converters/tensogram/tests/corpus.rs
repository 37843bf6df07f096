//! Every public corpus `.tgm` against its `.expect.json` sidecar: names, shapes, types, value
//! hashes (after the engine's widening), statistics (NaN/Inf restored from masks), attributes,
//! global attributes, the pipeline facts and the message layout.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;
use tet_source::{AttrValue, Confidence, ElementType, Importer, OpenOptions, Role, Source};
use tet_tensogram::{open_bytes, TgmImporter};

fn f64s(dtype: ElementType, bytes: &[u8]) -> Vec<f64> {
    match dtype {
        ElementType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        ElementType::F64 => bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        ElementType::U8 => bytes.iter().map(|&b| f64::from(b)).collect(),
        ElementType::U16 => bytes
            .chunks_exact(2)
            .map(|c| f64::from(u16::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        ElementType::I32 => bytes
            .chunks_exact(4)
            .map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        ElementType::I64 => bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        d => panic!("no stats for {d}"),
    }
}

fn check_stats(what: &str, dtype: ElementType, bytes: &[u8], stats: &Value) {
    let v = f64s(dtype, bytes);
    assert_eq!(
        stats["count"].as_u64(),
        Some(v.len() as u64),
        "{what}: count"
    );
    let count = |f: &dyn Fn(f64) -> bool| v.iter().filter(|&&x| f(x)).count() as u64;
    for (key, n) in [
        ("nan_count", count(&|x| x.is_nan())),
        ("posinf_count", count(&|x| x == f64::INFINITY)),
        ("neginf_count", count(&|x| x == f64::NEG_INFINITY)),
    ] {
        if let Some(e) = stats.get(key) {
            assert_eq!(e.as_u64(), Some(n), "{what}: {key}");
        }
    }
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(stats["min"].as_f64(), Some(min), "{what}: min");
    assert_eq!(stats["max"].as_f64(), Some(max), "{what}: max");
}

fn check_file(path: &Path) {
    let file = path.file_name().unwrap().to_string_lossy().to_string();
    let expect = sidecar(path);
    let head = std::fs::read(path).unwrap();
    assert_eq!(
        TgmImporter.identify(Path::new("x.bin"), &head[..16]),
        Confidence::Magic
    );
    let opened = TgmImporter.open(path, &OpenOptions::default());
    if let Some(err) = expect.get("expect_error") {
        let e = opened
            .err()
            .unwrap_or_else(|| panic!("{file}: must be refused ({err})"));
        eprintln!("{file}: refused as expected: {e}");
        return;
    }
    let src = opened.unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(src.skipped().is_empty(), "{file}: {:?}", src.skipped());
    assert!(src.parallel_reads());

    let arrays = expect["arrays"].as_array().unwrap();
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    let want: Vec<&str> = arrays.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, want, "{file}: variables");

    for (i, a) in arrays.iter().enumerate() {
        let v = &src.variables()[i];
        let what = format!("{file}/{}", v.name);
        let shape: Vec<u64> = a["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(v.shape, shape, "{what}: shape");
        assert!(a["dims"].is_null() && v.dims.is_none(), "{what}: dims");
        assert_eq!(a["role"], "data");
        assert_eq!(v.role, Role::Data);
        assert_eq!(v.dtype.name(), a["source_tag"].as_str().unwrap(), "{what}");

        let raw = read_in_pieces(src.as_ref(), i);
        let (stored, stored_type) = widen(v.dtype, &raw);
        assert_eq!(stored_type, a["stored_dtype"].as_str().unwrap(), "{what}");
        assert_eq!(
            stored.len() as u64,
            a["nbytes_stored"].as_u64().unwrap(),
            "{what}: stored bytes"
        );
        assert_eq!(
            sha_hex(&stored),
            a["sha256"].as_str().unwrap(),
            "{what}: sha256"
        );
        check_stats(&what, v.dtype, &raw, &a["stats"]);

        // Attributes: the object's metadata minus `_reserved_`, flattened.
        assert_attrs_equal(&what, &v.attrs, &a["attributes"]);
        assert_eq!(
            find(&v.attrs, "name"),
            Some(&AttrValue::Text(
                a["metadata_name"].as_str().unwrap().into()
            )),
            "{what}: metadata name"
        );

        // Facts: position and pipeline.
        let fact = |k: &str| find(&v.facts, k).unwrap_or_else(|| panic!("{what}: fact {k}"));
        assert!(attr_matches(fact("tensogram_message"), &a["message_index"]));
        assert!(attr_matches(fact("tensogram_object"), &a["object_index"]));
        let t = &a["tensogram"];
        for k in ["encoding", "filter", "compression", "byte_order"] {
            assert!(
                attr_matches(fact(&format!("tensogram_{k}")), &t[k]),
                "{what}: {k}"
            );
        }
        let mut params = Vec::new();
        flatten_json("tensogram_params", &t["params"], &mut params);
        let ours: Vec<&str> = v
            .facts
            .iter()
            .filter(|(k, _)| k.starts_with("tensogram_params."))
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(ours.len(), params.len(), "{what}: params {ours:?}");
        for (k, j) in &params {
            assert!(attr_matches(fact(k), j), "{what}: {k}");
        }
        let masks = t["masks"].as_array().unwrap();
        if masks.is_empty() {
            assert!(find(&v.facts, "tensogram_masks").is_none());
        } else {
            let AttrValue::TextList(ours) = fact("tensogram_masks") else {
                panic!("{what}: masks fact")
            };
            let mut ours = ours.clone();
            ours.sort();
            let theirs: Vec<&str> = masks.iter().map(|m| m.as_str().unwrap()).collect();
            assert_eq!(ours, theirs, "{what}: masks");
            assert!(v.notes.iter().any(|n| n.contains("restored")), "{what}");
        }
        assert_eq!(
            v.layout.compressed,
            t["compression"] != "none" || t["encoding"] != "none",
            "{what}: compressed"
        );
        assert_eq!(v.layout.chunk_shape, None);
        let lossy = t["encoding"] == "simple_packing";
        assert_eq!(
            v.notes
                .iter()
                .any(|n| n == "lossy encoding simple_packing: values are the decoded f64"),
            lossy,
            "{what}: {:?}",
            v.notes
        );
        assert!(find(&v.facts, "tensogram_metadata_json").is_none());
        assert!(
            matches!(find(&v.facts, "tensogram_encoder"), Some(AttrValue::Text(e)) if e == "tensogram 0.24.0"),
            "{what}: encoder"
        );
        // Nothing of `_reserved_` leaks into attributes or facts.
        assert!(v
            .attrs
            .iter()
            .chain(&v.facts)
            .all(|(k, _)| !k.contains("_reserved_") && !k.contains("uuid") && !k.contains("time")));
    }

    assert_attrs_equal(
        &format!("{file} (global)"),
        src.global_attrs(),
        &expect["global_attributes"],
    );

    // Message layout.
    let bytes = std::fs::read(path).unwrap();
    let tgm = open_bytes(bytes, &OpenOptions::default()).unwrap();
    let msgs = expect["container"]["messages"].as_array().unwrap();
    assert_eq!(tgm.messages().len(), msgs.len(), "{file}: messages");
    for (m, j) in tgm.messages().iter().zip(msgs) {
        assert_eq!(Some(m.offset), j["offset"].as_u64());
        assert_eq!(Some(m.length), j["length"].as_u64());
        assert_eq!(Some(m.streaming), j["streaming_mode"].as_bool());
        assert_eq!(
            Some(u64::from(m.preamble_flags)),
            j["preamble_flags"].as_u64()
        );
        assert_eq!(Some(m.object_count as u64), j["object_count"].as_u64());
        if msgs.len() > 1 {
            // Each message's `_extra_` survives as facts of its variables.
            let index = j["index"].as_u64().unwrap();
            for v in tgm.variables() {
                if find(&v.facts, "tensogram_message") != Some(&AttrValue::I64(vec![index as i64]))
                {
                    continue;
                }
                let mut extra = Vec::new();
                flatten_json("tensogram_message_extra", &j["extra"], &mut extra);
                for (k, e) in &extra {
                    assert!(attr_matches(find(&v.facts, k).unwrap(), e), "{file}: {k}");
                }
            }
        }
    }
}

#[test]
fn corpus_files_match_sidecars() {
    for f in corpus_files() {
        check_file(&f);
    }
}

#[test]
fn nested_metadata_is_flattened_and_typed() {
    let src = open_bytes(corpus("two_objects.tgm"), &OpenOptions::default()).unwrap();
    let v = &src.variables()[0];
    assert_eq!(
        find(&v.attrs, "mars.param"),
        Some(&AttrValue::Text("2t".into()))
    );
    assert_eq!(
        find(&v.attrs, "mars.date"),
        Some(&AttrValue::I64(vec![20260101]))
    );
    assert_eq!(
        find(src.global_attrs(), "version"),
        Some(&AttrValue::I64(vec![3]))
    );
    assert_eq!(
        find(src.global_attrs(), "producer"),
        Some(&AttrValue::Text("make_corpus.py".into()))
    );
    assert_eq!(v.layout.filters, vec!["shuffle", "zstd(5)"]);
    assert_eq!(
        find(&v.facts, "tensogram_params.zstd_level"),
        Some(&AttrValue::I64(vec![5]))
    );
    let raw = &src.variables()[1];
    assert!(!raw.layout.compressed);
    assert!(raw.layout.filters.is_empty());
}

#[test]
fn masks_restore_canonical_non_finite_values() {
    let src = open_bytes(corpus("nan_inf_masks.tgm"), &OpenOptions::default()).unwrap();
    let a = read_all(&src, 0);
    let nans = a
        .chunks_exact(8)
        .filter(|c| u64::from_le_bytes((*c).try_into().unwrap()) == 0x7ff8_0000_0000_0000)
        .count();
    assert_eq!(nans, 4);
    let b = read_all(&src, 1);
    let nans = b
        .chunks_exact(4)
        .filter(|c| u32::from_le_bytes((*c).try_into().unwrap()) == 0x7fc0_0000)
        .count();
    assert_eq!(nans, 80);
}

#[test]
fn simple_packing_says_it_is_lossy() {
    let src = open_bytes(corpus("simple_packing.tgm"), &OpenOptions::default()).unwrap();
    for v in src.variables() {
        assert_eq!(v.dtype, ElementType::F64);
        assert!(v.layout.compressed);
        assert_eq!(
            find(&v.facts, "tensogram_encoding"),
            Some(&AttrValue::Text("simple_packing".into()))
        );
        assert!(find(&v.facts, "tensogram_params.sp_bits_per_value").is_some());
        assert!(find(&v.facts, "tensogram_params.sp_reference_value").is_some());
    }
    assert_eq!(
        src.variables()[1].layout.filters,
        vec!["simple_packing(12 bits)", "szip"]
    );
}

#[test]
fn streaming_and_multi_message_layouts() {
    let src = open_bytes(corpus("streaming.tgm"), &OpenOptions::default()).unwrap();
    assert!(src.messages()[0].streaming);
    assert_eq!(src.messages()[0].length, 1072);
    let src = open_bytes(corpus("multi_message.tgm"), &OpenOptions::default()).unwrap();
    let starts: Vec<u64> = src.messages().iter().map(|m| m.offset).collect();
    assert_eq!(starts, vec![0, 1552, 2304]);
    assert!(src.global_attrs().is_empty());
    assert_eq!(
        find(&src.variables()[2].facts, "tensogram_message_extra.version"),
        Some(&AttrValue::I64(vec![3]))
    );
}

#[test]
fn identify_and_names() {
    assert_eq!(TgmImporter.id(), "tgm");
    assert_eq!(TgmImporter.name(), "Tensogram");
    assert_eq!(TgmImporter.extensions(), &["tgm"]);
    assert_eq!(
        TgmImporter.identify(Path::new("a/B.TGM"), b"nothing"),
        Confidence::Extension
    );
    assert_eq!(
        TgmImporter.identify(Path::new("a/b.npy"), b"\x93NUMPY"),
        Confidence::No
    );
    assert_eq!(
        TgmImporter.identify(Path::new("a/b"), b"TENSOGRM\x00\x03"),
        Confidence::Magic
    );
}

/// Many threads reading chunk regions of the same objects at once get the same bytes.
#[test]
fn concurrent_region_reads_agree() {
    let src = open_bytes(corpus("simple_packing.tgm"), &OpenOptions::default()).unwrap();
    let whole: Vec<Vec<u8>> = (0..2).map(|i| read_all(&src, i)).collect();
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (src, whole) = (&src, &whole);
            s.spawn(move || {
                for round in 0..20u64 {
                    let var = ((t + round) % 2) as usize;
                    let row = (t * 7 + round * 3) % 30;
                    let mut out = vec![0u8; 40 * 8];
                    src.read_region(var, &[row, 0], &[1, 40], &mut out).unwrap();
                    let a = row as usize * 40 * 8;
                    assert_eq!(out, whole[var][a..a + 40 * 8]);
                }
            });
        }
    });
}

#[test]
fn region_requests_are_checked() {
    let src = open_bytes(corpus("two_objects.tgm"), &OpenOptions::default()).unwrap();
    let mut out = vec![0u8; 4];
    assert!(src.read_region(0, &[4, 0], &[1, 1], &mut out).is_err());
    assert!(src.read_region(0, &[0], &[1], &mut out).is_err());
    assert!(src.read_region(0, &[0, 0], &[1, 2], &mut out).is_err());
    assert!(src.read_region(9, &[0], &[1], &mut out).is_err());
    let mut none: Vec<u8> = Vec::new();
    src.read_region(0, &[4, 6], &[0, 0], &mut none).unwrap();
}
