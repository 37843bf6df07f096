//! Every public corpus `.tgm` against its `.expect.json` sidecar: names, shapes, types, value
//! hashes (after the engine's widening), statistics (NaN/Inf restored from masks), attributes,
//! global attributes, the pipeline facts and the message layout.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;
use tet_source::{AttrValue, Confidence, ElementType, Importer, OpenOptions, Role, Source};
use tet_tensogram::{open_bytes, TgmImporter};

fn check_stats(what: &str, dtype: ElementType, bytes: &[u8], stats: &Value) {
    let v = as_f64s(dtype, bytes);
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

/// The facts, layout and notes of one variable against its sidecar entry `a`.
fn check_facts(what: &str, v: &tet_source::Variable, a: &Value) {
    // Facts: position and pipeline.
    let fact = |k: &str| find_fact(&v.facts, k).unwrap_or_else(|| panic!("{what}: fact {k}"));
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
    let ours: Vec<&str> = fact_keys(&v.facts)
        .into_iter()
        .filter(|k| k.starts_with("tensogram_params."))
        .collect();
    assert_eq!(ours.len(), params.len(), "{what}: params {ours:?}");
    for (k, j) in &params {
        assert!(attr_matches(fact(k), j), "{what}: {k}");
    }
    let masks = t["masks"].as_array().unwrap();
    if masks.is_empty() {
        assert!(find_fact(&v.facts, "tensogram_masks").is_none());
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
    // The lossy stage is named with its parameters.
    match find_fact(&v.facts, "tensogram_lossy") {
        Some(AttrValue::Text(stage)) => {
            assert!(
                lossy && stage.starts_with("simple_packing(bin"),
                "{what}: {stage}"
            )
        }
        other => assert!(!lossy && other.is_none(), "{what}: {other:?}"),
    }
    assert!(find_fact(&v.facts, "tensogram_metadata_json").is_none());
    assert!(
        matches!(find_fact(&v.facts, "tensogram_encoder"), Some(AttrValue::Text(e)) if e == "tensogram 0.24.0"),
        "{what}: encoder"
    );
    // Nothing of `_reserved_` leaks into attributes or facts.
    assert!(v
        .attrs
        .iter()
        .map(|(k, _)| k.as_str())
        .chain(fact_keys(&v.facts))
        .all(|k| !k.contains("_reserved_") && !k.contains("uuid") && !k.contains("time")));
}

fn check_file(path: &Path) {
    let file = path.file_name().unwrap().to_string_lossy().to_string();
    let expect = sidecar(path);
    let head = std::fs::read(path).unwrap();
    assert_eq!(
        TgmImporter.identify(Path::new("x.bin"), &head[..16]),
        Confidence::Magic
    );
    let src = match (
        TgmImporter.open(path, &OpenOptions::default()),
        expect.get("expect_error"),
    ) {
        (Ok(src), None) => src,
        (Err(e), None) => panic!("{file}: {e}"),
        (Ok(_), Some(err)) => panic!("{file}: must be refused ({err})"),
        (Err(e), Some(_)) => {
            eprintln!("{file}: refused as expected: {e}");
            return;
        }
    };
    assert!(src.skipped().is_empty(), "{file}: {:?}", src.skipped());
    assert!(src.parallel_reads());

    let arrays = expect["arrays"].as_array().unwrap();
    let want: Vec<&str> = arrays.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(variable_names(src.as_ref()), want, "{file}: variables");

    for (i, a) in arrays.iter().enumerate() {
        let v = &src.variables()[i];
        let what = format!("{file}/{}", v.name);
        // Name, shape, dims, role, type; values read in pieces, widened, against the stored
        // type, byte count and SHA-256.
        let raw = check_sidecar_array(&file, src.as_ref(), i, a, read_in_pieces);
        assert!(a["dims"].is_null() && v.dims.is_none(), "{what}: dims");
        assert_eq!(a["role"], "data");
        assert_eq!(v.role, Role::Data);
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

        check_facts(&what, v, a);
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
                if find_fact(&v.facts, "tensogram_message")
                    != Some(&AttrValue::I64(vec![index as i64]))
                {
                    continue;
                }
                let mut extra = Vec::new();
                flatten_json("tensogram_message_extra", &j["extra"], &mut extra);
                for (k, e) in &extra {
                    assert!(
                        attr_matches(find_fact(&v.facts, k).unwrap(), e),
                        "{file}: {k}"
                    );
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
        find_fact(&v.facts, "tensogram_params.zstd_level"),
        Some(&AttrValue::I64(vec![5]))
    );
    let raw = &src.variables()[1];
    assert!(!raw.layout.compressed);
    assert!(raw.layout.filters.is_empty());
}

#[test]
fn masks_restore_canonical_non_finite_values() {
    let src = open_bytes(corpus("nan_inf_masks.tgm"), &OpenOptions::default()).unwrap();
    // Canonical quiet NaNs: f64 in the first object, f32 in the second.
    let count = |bytes: &[u8], width: usize, bits: u64| {
        bytes
            .chunks_exact(width)
            .filter(|c| c.iter().rev().fold(0u64, |x, &b| x << 8 | u64::from(b)) == bits)
            .count()
    };
    assert_eq!(count(&read_all(&src, 0), 8, 0x7ff8_0000_0000_0000), 4);
    assert_eq!(count(&read_all(&src, 1), 4, 0x7fc0_0000), 80);
}

#[test]
fn simple_packing_says_it_is_lossy() {
    let src = open_bytes(corpus("simple_packing.tgm"), &OpenOptions::default()).unwrap();
    for v in src.variables() {
        assert_eq!(v.dtype, ElementType::F64);
        assert!(v.layout.compressed);
        assert_eq!(
            find_fact(&v.facts, "tensogram_encoding"),
            Some(&AttrValue::Text("simple_packing".into()))
        );
        assert!(find_fact(&v.facts, "tensogram_params.sp_bits_per_value").is_some());
        assert!(find_fact(&v.facts, "tensogram_params.sp_reference_value").is_some());
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
        find_fact(&src.variables()[2].facts, "tensogram_message_extra.version"),
        Some(&AttrValue::I64(vec![3]))
    );
}

#[test]
fn identify_and_names() {
    assert_eq!(TgmImporter.id(), "tgm");
    assert_eq!(TgmImporter.name(), "Tensogram");
    assert_eq!(TgmImporter.extensions(), &["tgm"]);
    for (path, head, want) in [
        ("a/B.TGM", &b"nothing"[..], Confidence::Extension),
        ("a/b.npy", b"\x93NUMPY", Confidence::No),
        ("a/b", b"TENSOGRM\x00\x03", Confidence::Magic),
    ] {
        assert_eq!(TgmImporter.identify(Path::new(path), head), want, "{path}");
    }
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
