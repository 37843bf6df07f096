//! The public corpus store against its `.expect.json` sidecar.

use crate::common;

use std::path::Path;

use serde_json::Value;
use tet_source::{AttrValue, Confidence, ElementType, Importer, OpenOptions, Role, Source};
use tet_testkit::{
    as_f64s, attr_matches_or_json_text as attr_matches, check_sidecar_array, corpus_dir,
    corpus_files, find, read_all, sidecar, sub_block, var_index,
};
use tet_zarr::ZarrImporter;

use common::zarr_fact;

/// A store (or a node inside it) of the corpus.
fn climate(node: &str) -> std::path::PathBuf {
    let store = corpus_dir("zarr").join("climate.zarr");
    if node.is_empty() {
        store
    } else {
        store.join(node)
    }
}

/// Opens a store (or a node inside it) of the corpus.
fn open_climate(node: &str) -> Box<dyn Source> {
    ZarrImporter
        .open(&climate(node), &OpenOptions::default())
        .unwrap_or_else(|e| panic!("climate.zarr/{node}: {e}"))
}

fn check_store(path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let expect = sidecar(path);
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
        let raw = check_sidecar_array(&name, src.as_ref(), i, a, read_all);
        let v = &src.variables()[i];
        let ctx = format!("{name}/{}", v.name);
        let shape = &v.shape;

        // Every sub-region of a few shapes agrees with the whole read.
        let elem = v.dtype.size();
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
            let ci = var_index(src.as_ref(), cv);
            let coord = &src.variables()[ci];
            assert_eq!(coord.role, Role::Coordinate, "{ctx}: {cv}");
            assert_eq!(coord.dims.as_deref(), Some(&[dim.clone()][..]));
            assert_eq!(coord.shape, vec![c["count"].as_u64().unwrap()]);
            let vals = read_all(src.as_ref(), ci);
            assert!(
                matches!(coord.dtype, ElementType::F32 | ElementType::F64),
                "{ctx}: coordinate type {}",
                coord.dtype
            );
            let first = as_f64s(coord.dtype, &vals);
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
            .zip(shape)
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
            zarr_fact(&v.facts, "zarr_fill_value").map(|f| match f {
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
    // (corpus_files fails when there is no .zarr store.)
    for p in corpus_files("zarr", &["zarr"]) {
        assert!(p.is_dir(), "{}: a store is a folder", p.display());
        check_store(&p);
    }
}

#[test]
fn identify_by_structure_then_extension() {
    let store = climate("");
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
    let src = open_climate("station");
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["counts"]);
    assert_eq!(
        src.global_attrs(),
        &[("network".to_string(), AttrValue::Text("toy".into()))]
    );
}

#[test]
fn a_root_array_is_named_after_the_directory() {
    let src = open_climate("lat");
    assert_eq!(src.variables().len(), 1);
    assert_eq!(src.variables()[0].name, "lat");
    assert_eq!(src.variables()[0].role, Role::Coordinate);
}

#[test]
fn region_requests_are_checked() {
    let src = open_climate("");
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
    let src = open_climate("");
    let src: &dyn Source = src.as_ref();
    let t = var_index(src, "temperature");
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
