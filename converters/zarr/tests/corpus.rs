//! The public corpus store against its `.expect.json` sidecar.

mod common;

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tet_source::{AttrValue, Confidence, ElementType, Importer, OpenOptions, Role, Source};
use tet_zarr::ZarrImporter;

use common::{corpus_dir, read_all, sub_block, widened};

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Compares a typed attribute with a sidecar JSON value: numbers by value, strings exactly,
/// lists element-wise, objects (kept as JSON text) by their parsed value.
fn attr_matches(attr: &AttrValue, json: &Value) -> bool {
    let num = |v: &Value| v.as_f64();
    let nums = |xs: Vec<f64>| match json {
        Value::Array(a) => {
            a.len() == xs.len() && a.iter().zip(&xs).all(|(j, x)| num(j) == Some(*x))
        }
        Value::Bool(b) => xs == [f64::from(u8::from(*b))],
        v => xs.len() == 1 && num(v) == Some(xs[0]),
    };
    match attr {
        AttrValue::Text(s) => match json {
            Value::String(j) => j == s,
            other => serde_json::from_str::<Value>(s).is_ok_and(|v| &v == other),
        },
        AttrValue::TextList(l) => json.as_array().is_some_and(|a| {
            a.len() == l.len() && a.iter().zip(l).all(|(j, s)| j.as_str() == Some(s))
        }),
        AttrValue::I64(v) => nums(v.iter().map(|&x| x as f64).collect()),
        AttrValue::U64(v) => nums(v.iter().map(|&x| x as f64).collect()),
        AttrValue::F64(v) => nums(v.clone()),
        AttrValue::U8(v) => nums(v.iter().map(|&x| f64::from(x)).collect()),
        _ => false,
    }
}

fn find<'a>(attrs: &'a [(String, AttrValue)], key: &str) -> Option<&'a AttrValue> {
    attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn stored_name(dtype: ElementType) -> &'static str {
    match dtype {
        ElementType::I8 => "i16",
        ElementType::Bool => "u8",
        ElementType::BF16 => "f32",
        t => t.name(),
    }
}

fn check_store(path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let mut sidecar = path.as_os_str().to_owned();
    sidecar.push(".expect.json");
    let expect: Value = serde_json::from_slice(&std::fs::read(sidecar).unwrap()).unwrap();
    assert_eq!(ZarrImporter.identify(path, &[]), Confidence::Magic);
    let opened = ZarrImporter.open(path, &OpenOptions::default());
    if let Some(err) = expect.get("expect_error") {
        assert!(opened.is_err(), "{name}: expected error {err}");
        return;
    }
    let src = opened.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(src.skipped().is_empty(), "{name}: {:?}", src.skipped());
    assert!(src.text_variables().is_empty());
    let arrays = expect["arrays"].as_array().unwrap();
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    let want: Vec<&str> = arrays.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, want, "{name}: variables and their order");

    for (i, a) in arrays.iter().enumerate() {
        let v = &src.variables()[i];
        let ctx = format!("{name}/{}", v.name);
        let shape: Vec<u64> = a["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(v.shape, shape, "{ctx}: shape");
        let dims: Option<Vec<String>> = a["dims"]
            .as_array()
            .map(|d| d.iter().map(|x| x.as_str().unwrap().to_string()).collect());
        assert_eq!(v.dims, dims, "{ctx}: dims");
        let role = match a["role"].as_str().unwrap() {
            "coordinate" => Role::Coordinate,
            _ => Role::Data,
        };
        assert_eq!(v.role, role, "{ctx}: role");
        assert_eq!(
            v.dtype.name(),
            a["source_tag"].as_str().unwrap(),
            "{ctx}: dtype"
        );
        assert_eq!(
            stored_name(v.dtype),
            a["stored_dtype"].as_str().unwrap(),
            "{ctx}: stored dtype"
        );

        let raw = read_all(src.as_ref(), i);
        let stored = widened(v.dtype, &raw);
        assert_eq!(
            stored.len() as u64,
            a["nbytes_stored"].as_u64().unwrap(),
            "{ctx}"
        );
        assert_eq!(
            sha_hex(&stored),
            a["sha256"].as_str().unwrap(),
            "{ctx}: sha256"
        );

        // Every sub-region of a few shapes agrees with the whole read.
        let elem = v.dtype.size();
        let rank = v.shape.len();
        for step in 1..=4u64 {
            let count: Vec<u64> = v.shape.iter().map(|&d| d.div_ceil(step).max(1)).collect();
            let start: Vec<u64> = v
                .shape
                .iter()
                .zip(&count)
                .map(|(&d, &c)| (d - c) / 2)
                .collect();
            let n: u64 = count.iter().product();
            let mut out = vec![0u8; n as usize * elem];
            src.read_region(i, &start, &count, &mut out).unwrap();
            assert_eq!(
                out,
                sub_block(&raw, &v.shape, elem, &start, &count),
                "{ctx}"
            );
        }
        assert_eq!(rank, shape.len());

        let attrs = a["attributes"].as_object().unwrap();
        for (k, jv) in attrs {
            let av = find(&v.attrs, k).unwrap_or_else(|| panic!("{ctx}: no attribute {k}"));
            assert!(attr_matches(av, jv), "{ctx}: {k} = {av:?}, sidecar {jv}");
        }
        assert_eq!(
            v.attrs.len(),
            attrs.len(),
            "{ctx}: attributes {:?}",
            v.attrs
        );

        // Coordinates: each dim's coordinate variable exists, with the sidecar's first values.
        for (dim, c) in a["coords"].as_object().unwrap() {
            let cv = c["variable"].as_str().unwrap();
            let ci = src
                .variables()
                .iter()
                .position(|x| x.name == cv)
                .unwrap_or_else(|| panic!("{ctx}: no coordinate {cv}"));
            let coord = &src.variables()[ci];
            assert_eq!(coord.role, Role::Coordinate, "{ctx}: {cv}");
            assert_eq!(coord.dims.as_deref(), Some(&[dim.clone()][..]));
            assert_eq!(coord.shape, vec![c["count"].as_u64().unwrap()]);
            let vals = read_all(src.as_ref(), ci);
            let first: Vec<f64> = match coord.dtype {
                ElementType::F32 => vals
                    .chunks_exact(4)
                    .map(|b| f64::from(f32::from_le_bytes(b.try_into().unwrap())))
                    .collect(),
                ElementType::F64 => vals
                    .chunks_exact(8)
                    .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                    .collect(),
                t => panic!("{ctx}: coordinate type {t}"),
            };
            for (got, want) in first.iter().zip(c["first"].as_array().unwrap()) {
                assert_eq!(Some(*got), want.as_f64(), "{ctx}: {cv} values");
            }
        }
        if a["coords"].as_object().unwrap().is_empty() {
            for d in v.dims.iter().flatten() {
                assert!(
                    !src.variables()
                        .iter()
                        .any(|x| &x.name == d && x.role == Role::Coordinate),
                    "{ctx}: unexpected coordinate {d}"
                );
            }
        }

        // The planner hint: the regular chunk shape (clipped), compressed when zstd is there.
        let st = &a["storage"];
        let chunks: Vec<u64> = st["chunk_grid"]["configuration"]["chunk_shape"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&shape)
            .map(|(c, &d)| c.as_u64().unwrap().min(d))
            .collect();
        assert_eq!(
            v.layout.chunk_shape.as_ref(),
            Some(&chunks),
            "{ctx}: chunks"
        );
        let zstd = st["codecs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "zstd");
        assert_eq!(v.layout.compressed, zstd, "{ctx}: compressed");
        assert_eq!(
            v.layout.filters.len(),
            st["codecs"].as_array().unwrap().len(),
            "{ctx}: {:?}",
            v.layout.filters
        );
        assert_eq!(
            find(&v.facts, "zarr_fill_value").map(|f| match f {
                AttrValue::Text(t) => serde_json::from_str::<Value>(t).unwrap(),
                _ => Value::Null,
            }),
            Some(st["fill_value"].clone()),
            "{ctx}: fill value"
        );
    }

    // Global attributes: the root group's, then each sub-group's with its path as prefix.
    let globals = src.global_attrs();
    let mut want_keys: Vec<String> = Vec::new();
    for (k, jv) in expect["global_attributes"].as_object().unwrap() {
        let av = find(globals, k).unwrap_or_else(|| panic!("{name}: no global {k}"));
        assert!(
            attr_matches(av, jv),
            "{name}: global {k} = {av:?}, sidecar {jv}"
        );
        want_keys.push(k.clone());
    }
    for g in expect["groups"].as_array().unwrap() {
        let p = g["path"].as_str().unwrap();
        for (k, jv) in g["attributes"].as_object().unwrap() {
            let key = format!("{p}/{k}");
            let av = find(globals, &key).unwrap_or_else(|| panic!("{name}: no global {key}"));
            assert!(attr_matches(av, jv), "{name}: {key} = {av:?}, sidecar {jv}");
            want_keys.push(key);
        }
    }
    let keys: Vec<String> = globals.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(keys, want_keys, "{name}: global attributes and their order");
    // A nested object keeps its JSON text, in the file's key order.
    assert_eq!(
        find(globals, "nested"),
        Some(&AttrValue::Text(r#"{"k":1,"f":0.5}"#.into()))
    );
    assert_eq!(
        find(globals, "tags"),
        Some(&AttrValue::TextList(vec!["a".into(), "b".into()]))
    );
}

#[test]
fn corpus_stores_match_sidecars() {
    let mut n = 0;
    for e in std::fs::read_dir(corpus_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && p.extension().is_some_and(|x| x == "zarr") {
            check_store(&p);
            n += 1;
        }
    }
    assert!(n >= 1, "no .zarr store in the corpus");
}

#[test]
fn identify_by_structure_then_extension() {
    let store = corpus_dir().join("climate.zarr");
    assert_eq!(ZarrImporter.identify(&store, &[]), Confidence::Magic);
    // A group or array directory inside the store is a Zarr node too.
    assert_eq!(
        ZarrImporter.identify(&store.join("station"), &[]),
        Confidence::Magic
    );
    assert_eq!(
        ZarrImporter.identify(Path::new("/nonexistent/x.ZARR"), &[]),
        Confidence::Extension
    );
    assert_eq!(
        ZarrImporter.identify(Path::new("/nonexistent/x.npy"), b"\x93NUMPY"),
        Confidence::No
    );
    // A directory without Zarr metadata is not a store.
    assert_eq!(
        ZarrImporter.identify(&store.join("lat/c"), &[]),
        Confidence::No
    );
    assert_eq!(ZarrImporter.id(), "zarr");
    assert_eq!(ZarrImporter.name(), "Zarr v2/v3");
    assert_eq!(ZarrImporter.extensions(), &["zarr"]);
}

#[test]
fn a_sub_group_opens_as_its_own_store() {
    let src = ZarrImporter
        .open(
            &corpus_dir().join("climate.zarr/station"),
            &OpenOptions::default(),
        )
        .unwrap();
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["counts"]);
    assert_eq!(
        src.global_attrs(),
        &[("network".to_string(), AttrValue::Text("toy".into()))]
    );
}

#[test]
fn a_root_array_is_named_after_the_directory() {
    let src = ZarrImporter
        .open(
            &corpus_dir().join("climate.zarr/lat"),
            &OpenOptions::default(),
        )
        .unwrap();
    assert_eq!(src.variables().len(), 1);
    assert_eq!(src.variables()[0].name, "lat");
    assert_eq!(src.variables()[0].role, Role::Coordinate);
}

#[test]
fn region_requests_are_checked() {
    let src = ZarrImporter
        .open(&corpus_dir().join("climate.zarr"), &OpenOptions::default())
        .unwrap();
    let mut out = vec![0u8; 4];
    assert!(src.read_region(0, &[17], &[1], &mut out).is_err());
    assert!(src.read_region(0, &[0], &[2], &mut out).is_err());
    assert!(src.read_region(0, &[0, 0], &[1, 1], &mut out).is_err());
    assert!(src.read_region(99, &[0], &[1], &mut out).is_err());
    assert!(src.read_region(0, &[u64::MAX], &[1], &mut out).is_err());
    let mut empty = Vec::new();
    src.read_region(0, &[17], &[0], &mut empty).unwrap();
    src.read_region(0, &[3], &[1], &mut out).unwrap();
    assert_eq!(f32::from_le_bytes(out[..].try_into().unwrap()), -50.0);
}

#[test]
fn reads_from_many_threads_agree() {
    let src = ZarrImporter
        .open(&corpus_dir().join("climate.zarr"), &OpenOptions::default())
        .unwrap();
    let src: &dyn Source = src.as_ref();
    let t = src
        .variables()
        .iter()
        .position(|v| v.name == "temperature")
        .unwrap();
    let whole = read_all(src, t);
    std::thread::scope(|s| {
        for k in 0..4u64 {
            let whole = &whole;
            s.spawn(move || {
                for i in 0..10u64 {
                    let start = [(i + k) % 10, (i * 3) % 17, (i * 5 + k) % 23];
                    let count = [1, 17 - start[1], 23 - start[2]];
                    let n: u64 = count.iter().product();
                    let mut out = vec![0u8; n as usize * 4];
                    src.read_region(t, &start, &count, &mut out).unwrap();
                    assert_eq!(out, sub_block(whole, &[10, 17, 23], 4, &start, &count));
                }
            });
        }
    });
}
