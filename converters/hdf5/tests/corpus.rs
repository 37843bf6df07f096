//! Every `.h5` of the public corpus against its `.expect.json` sidecar: names, shapes, dims,
//! roles, stored dtypes (after the engine's widening), value hashes, attributes (typed, against
//! `attribute_types`), global and group attributes, enum mappings, compound fields, strings,
//! coordinates and links.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tet_hdf5::{open_path, H5Importer};
use tet_source::{AttrValue, Confidence, ElementType, Importer, OpenOptions, Role, Source};

const CORPUS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/corpus/public/hdf5"
);

fn corpus_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(CORPUS)
        .expect("corpus directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("h5"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "corpus looks incomplete: {files:?}");
    files
}

fn sidecar(path: &Path) -> Value {
    let s = std::fs::read_to_string(format!("{}.expect.json", path.display())).unwrap();
    serde_json::from_str(&s).unwrap()
}

fn read_all(src: &dyn Source, var: usize) -> Vec<u8> {
    let v = &src.variables()[var];
    let mut out = vec![0u8; v.byte_len().unwrap() as usize];
    let start = vec![0; v.shape.len()];
    src.read_region(var, &start, &v.shape, &mut out)
        .unwrap_or_else(|e| panic!("{}: {e}", v.name));
    out
}

/// The engine's widening, emulated.
fn widen(dtype: ElementType, bytes: &[u8], stored: &str) -> Vec<u8> {
    match (dtype, stored) {
        (ElementType::I8, "i16") => bytes
            .iter()
            .flat_map(|&b| i16::from(b as i8).to_le_bytes())
            .collect(),
        (ElementType::Bool, "u8") => bytes.to_vec(),
        (d, s) => {
            assert_eq!(d.name(), s, "dtype mismatch");
            bytes.to_vec()
        }
    }
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn shape_of(a: &Value) -> Vec<u64> {
    let s: Vec<u64> = a["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .collect();
    if s.is_empty() {
        vec![1]
    } else {
        s
    }
}

/// Flattens nested JSON arrays (C order).
fn flat(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        v => vec![v.clone()],
    }
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap(),
        Value::String(s) if s == "NaN" => f64::NAN,
        Value::String(s) if s == "Infinity" => f64::INFINITY,
        Value::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
        v => panic!("not a number: {v}"),
    }
}

fn same_f(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// Compares one attribute with its sidecar value and type string.
fn check_attr(what: &str, ours: &AttrValue, want: &Value, ty: Option<&str>) {
    let ty = ty.unwrap_or("");
    match ours {
        AttrValue::Text(s) => assert_eq!(want.as_str(), Some(s.as_str()), "{what}"),
        AttrValue::TextList(l) => {
            let w: Vec<String> = flat(want)
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            assert_eq!(&w, l, "{what}");
        }
        v => {
            let want = flat(want);
            macro_rules! ints {
                ($l:expr) => {{
                    let got: Vec<i128> = $l.iter().map(|&x| x as i128).collect();
                    let w: Vec<i128> = want
                        .iter()
                        .map(|x| match x {
                            Value::Bool(b) => i128::from(*b),
                            Value::Number(n) => n
                                .as_i64()
                                .map(i128::from)
                                .or(n.as_u64().map(i128::from))
                                .unwrap(),
                            v => panic!("{what}: not an integer: {v}"),
                        })
                        .collect();
                    assert_eq!(got, w, "{what}");
                }};
            }
            match v {
                AttrValue::I8(l) => ints!(l),
                AttrValue::U8(l) => ints!(l),
                AttrValue::I16(l) => ints!(l),
                AttrValue::U16(l) => ints!(l),
                AttrValue::I32(l) => ints!(l),
                AttrValue::U32(l) => ints!(l),
                AttrValue::I64(l) => ints!(l),
                AttrValue::U64(l) => ints!(l),
                AttrValue::F32(l) => {
                    assert_eq!(l.len(), want.len(), "{what}");
                    for (a, b) in l.iter().zip(&want) {
                        assert!(
                            same_f(*a as f64, num(b)) || *a == num(b) as f32,
                            "{what}: {a} vs {b}"
                        );
                    }
                    assert!(
                        ty.contains("f4") || ty.contains("f2"),
                        "{what}: f32 for {ty}"
                    );
                }
                AttrValue::F64(l) => {
                    assert_eq!(l.len(), want.len(), "{what}");
                    for (a, b) in l.iter().zip(&want) {
                        assert!(same_f(*a, num(b)), "{what}: {a} vs {b}");
                    }
                    assert!(ty.contains("f8"), "{what}: f64 for {ty}");
                }
                _ => unreachable!(),
            }
            // The sidecar's numpy type string names the width: check it.
            let code = match v {
                AttrValue::I8(_) => "i1",
                AttrValue::U8(_) => "u1",
                AttrValue::I16(_) => "i2",
                AttrValue::U16(_) => "u2",
                AttrValue::I32(_) => "i4",
                AttrValue::U32(_) => "u4",
                AttrValue::I64(_) => "i8",
                AttrValue::U64(_) => "u8",
                _ => "",
            };
            if !code.is_empty() && ty != "|b1" {
                assert!(ty.contains(code), "{what}: {code} for {ty}");
            }
            if ty == "|b1" {
                assert!(matches!(v, AttrValue::U8(_)), "{what}: bool as u8");
            }
        }
    }
}

fn check_attrs(what: &str, ours: &[(String, AttrValue)], want: &Value, types: &Value) {
    let want = want.as_object().cloned().unwrap_or_default();
    let ours_map: BTreeMap<&str, &AttrValue> = ours.iter().map(|(k, v)| (k.as_str(), v)).collect();
    assert_eq!(
        ours_map.keys().copied().collect::<Vec<_>>(),
        want.keys()
            .map(String::as_str)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>(),
        "{what}: attribute names"
    );
    for (k, v) in &want {
        check_attr(
            &format!("{what}@{k}"),
            ours_map[k.as_str()],
            v,
            types.get(k).and_then(Value::as_str),
        );
    }
}

/// Multi-dimensional attributes (nested arrays in the sidecar) have their shape recorded as an
/// `attr_shape:<name>` fact, and only they do.
fn check_attr_shapes(what: &str, facts: &[(String, AttrValue)], want: &Value) {
    fn nested_shape(v: &Value) -> Vec<u64> {
        match v {
            Value::Array(a) if a.first().is_some_and(Value::is_array) => {
                let mut s = vec![a.len() as u64];
                s.extend(nested_shape(&a[0]));
                s
            }
            Value::Array(a) => vec![a.len() as u64],
            _ => Vec::new(),
        }
    }
    let want: BTreeMap<String, AttrValue> = want
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, nested_shape(v)))
        .filter(|(_, s)| s.len() > 1)
        .map(|(k, s)| (tet_source::attr_shape_key(k), AttrValue::U64(s)))
        .collect();
    let got: BTreeMap<String, AttrValue> = facts
        .iter()
        .filter(|(k, _)| k.starts_with("attr_shape:"))
        .cloned()
        .collect();
    assert_eq!(got, want, "{what}: attribute shapes");
}

fn fact<'a>(v: &'a tet_source::Variable, key: &str) -> Option<&'a AttrValue> {
    v.facts.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn check_file(path: &Path, opts: &OpenOptions) -> usize {
    let expect = sidecar(path);
    let head: Vec<u8> = std::fs::read(path)
        .unwrap()
        .into_iter()
        .take(4096)
        .collect();
    assert_eq!(H5Importer.identify(path, &head), Confidence::Magic);
    let src = H5Importer
        .open(path, opts)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let src = src.as_ref();
    let vars = src.variables();
    let by_name = |n: &str| vars.iter().position(|v| v.name == n);
    let text_by_name = |n: &str| src.text_variables().iter().find(|t| t.name == n);
    let mut expected_vars = Vec::new();
    let mut expected_texts = Vec::new();
    let mut checked = 0;

    for a in expect["arrays"].as_array().unwrap() {
        let name = a["name"].as_str().unwrap();
        let shape = shape_of(a);
        if let Some(fields) = a.get("fields").and_then(Value::as_array) {
            for f in fields {
                let fname = format!("{name}/{}", f["name"].as_str().unwrap());
                if let Some(vals) = f.get("values") {
                    let t = text_by_name(&fname).unwrap_or_else(|| panic!("text {fname}"));
                    let want: Vec<String> = flat(vals)
                        .iter()
                        .map(|v| v.as_str().unwrap().to_string())
                        .collect();
                    assert_eq!(t.values, want, "{fname}");
                    assert_eq!(t.shape, shape, "{fname}");
                    expected_texts.push(fname);
                    continue;
                }
                let i = by_name(&fname).unwrap_or_else(|| panic!("field {fname}"));
                let v = &vars[i];
                assert_eq!(v.shape, shape, "{fname}");
                let bytes = widen(
                    v.dtype,
                    &read_all(src, i),
                    f["stored_dtype"].as_str().unwrap(),
                );
                assert_eq!(sha(&bytes), f["sha256"].as_str().unwrap(), "{fname}");
                assert!(
                    v.notes.iter().any(|n| n.contains("compound")),
                    "{fname}: {:?}",
                    v.notes
                );
                expected_vars.push(fname);
                checked += 1;
            }
            continue;
        }
        if let Some(c) = a.get("components") {
            for part in ["real", "imag"] {
                let pname = format!("{name}/{part}");
                let i = by_name(&pname).unwrap();
                let bytes = read_all(src, i);
                assert_eq!(sha(&bytes), c[part].as_str().unwrap(), "{pname}");
                expected_vars.push(pname);
                checked += 1;
            }
            continue;
        }
        if a["stored_dtype"].is_null() && a.get("values").is_some() {
            let t = text_by_name(name).unwrap_or_else(|| panic!("text {name}"));
            let want: Vec<String> = flat(&a["values"])
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            assert_eq!(t.values, want, "{name}");
            assert_eq!(t.shape, shape, "{name}");
            expected_texts.push(name.to_string());
            continue;
        }
        let i = by_name(name).unwrap_or_else(|| panic!("{}: no variable {name}", path.display()));
        let v = &vars[i];
        assert_eq!(v.shape, shape, "{name}");
        let stored = a["stored_dtype"]
            .as_str()
            .or(a
                .get("stored_dtype_if_rank_allowed")
                .and_then(Value::as_str))
            .unwrap();
        let bytes = widen(v.dtype, &read_all(src, i), stored);
        assert_eq!(
            sha(&bytes),
            a["sha256"].as_str().unwrap(),
            "{}: {name}",
            path.display()
        );
        // Dims and role.
        let dims: Option<Vec<String>> = a["dims"]
            .as_array()
            .map(|d| d.iter().map(|x| x.as_str().unwrap().to_string()).collect());
        assert_eq!(v.dims, dims, "{name}: dims");
        let role = if v.role == Role::Coordinate {
            "coordinate"
        } else {
            "data"
        };
        assert_eq!(role, a["role"].as_str().unwrap(), "{name}: role");
        // Attributes.
        check_attrs(
            name,
            &v.attrs,
            &a["attributes"],
            a.get("attribute_types").unwrap_or(&Value::Null),
        );
        check_attr_shapes(name, &v.facts, &a["attributes"]);
        // Enum mapping.
        match a.get("enum_mapping").and_then(Value::as_object) {
            Some(m) => {
                let mut want: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_i64().unwrap()))
                    .collect();
                want.sort();
                let Some(AttrValue::TextList(got)) = fact(v, "enum_mapping") else {
                    panic!("{name}: no enum_mapping fact");
                };
                let mut got = got.clone();
                got.sort();
                assert_eq!(got, want, "{name}");
            }
            None => assert!(fact(v, "enum_mapping").is_none(), "{name}"),
        }
        if a["source_tag"] == "bool" {
            assert_eq!(v.dtype, ElementType::Bool, "{name}");
        }
        if a["source_dtype"]
            .as_str()
            .is_some_and(|s| s.starts_with('>'))
        {
            assert!(v.notes.iter().any(|n| n.contains("big-endian")), "{name}");
        }
        // Layout facts.
        let storage = &a["storage"];
        let chunks: Option<Vec<u64>> = storage["chunks"]
            .as_array()
            .map(|c| c.iter().map(|x| x.as_u64().unwrap()).collect());
        assert_eq!(v.layout.chunk_shape, chunks, "{name}: chunks");
        let filter_names: Vec<String> = storage["filters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let n = f["name"].as_str().unwrap();
                match n {
                    "deflate" => format!("deflate({})", f["cd_values"][0]),
                    n => n.to_string(),
                }
            })
            .collect();
        assert_eq!(v.layout.filters, filter_names, "{name}: filters");
        // Coordinates: the named coordinate variable exists and starts with the listed values.
        if let Some(coords) = a.get("coords").and_then(Value::as_object) {
            for (dim, c) in coords {
                let cv = c["variable"].as_str().unwrap();
                let ci = by_name(cv).unwrap_or_else(|| panic!("{name}: coordinate {cv}"));
                let cvar = &vars[ci];
                assert_eq!(cvar.role, Role::Coordinate, "{cv}");
                assert_eq!(cvar.dims.as_deref(), Some(&[dim.clone()][..]), "{cv}");
                assert_eq!(cvar.shape, vec![c["count"].as_u64().unwrap()], "{cv}");
                let vals = tet_values(cvar.dtype, &read_all(src, ci));
                for (k, want) in c["first"].as_array().unwrap().iter().enumerate() {
                    assert!(same_f(vals[k], num(want)), "{cv}[{k}]");
                }
            }
        }
        expected_vars.push(name.to_string());
        checked += 1;
    }

    // Nothing more and nothing less.
    let mut ours: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
    let extra_external = opts.follow_external;
    if extra_external {
        ours.retain(|n| *n != "external_payload");
    }
    let mut want_sorted: Vec<&str> = expected_vars.iter().map(String::as_str).collect();
    ours.sort();
    want_sorted.sort();
    assert_eq!(ours, want_sorted, "{}: variables", path.display());
    let mut texts: Vec<&str> = src
        .text_variables()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    texts.sort();
    expected_texts.sort();
    assert_eq!(texts, expected_texts, "{}: text variables", path.display());

    // Global and group attributes.
    let mut want_globals = expect["global_attributes"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut types = expect["global_attribute_types"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for g in expect["groups"].as_array().unwrap() {
        let p = g["path"].as_str().unwrap();
        for (k, v) in g["attributes"].as_object().unwrap() {
            want_globals.insert(format!("{p}/{k}"), v.clone());
            if let Some(t) = g["attribute_types"].get(k) {
                types.insert(format!("{p}/{k}"), t.clone());
            }
        }
    }
    let want_globals = Value::Object(want_globals);
    check_attrs(
        &format!("{} globals", path.display()),
        src.global_attrs(),
        &want_globals,
        &Value::Object(types),
    );
    check_attr_shapes(
        &format!("{} globals", path.display()),
        src.global_facts(),
        &want_globals,
    );

    // Links.
    for l in expect["links"].as_array().unwrap() {
        let name = l["name"].as_str().unwrap();
        match l["type"].as_str().unwrap() {
            "soft" => {
                let target = l["target"].as_str().unwrap().trim_start_matches('/');
                let v = &vars[by_name(target).unwrap()];
                let Some(AttrValue::TextList(al)) = fact(v, "aliases") else {
                    panic!("{target}: no aliases fact");
                };
                assert_eq!(al, &vec![name.to_string()]);
                assert!(v.notes.iter().any(|n| n.contains(name)));
                assert!(by_name(name).is_none());
            }
            "external" if !opts.follow_external => {
                let reason = format!(
                    "external link to {}:{} not followed (use --follow-external)",
                    l["target_file"].as_str().unwrap(),
                    l["target_path"].as_str().unwrap()
                );
                assert!(
                    src.skipped()
                        .iter()
                        .any(|s| s.name == name && s.reason == reason),
                    "{:?}",
                    src.skipped()
                );
            }
            "external" => {
                let i = by_name(name).expect("followed external link");
                assert!(vars[i]
                    .notes
                    .iter()
                    .any(|n| n.contains("followed external link")));
            }
            t => panic!("link type {t}"),
        }
    }
    if expect["links"].as_array().unwrap().is_empty() {
        assert!(
            src.skipped().is_empty(),
            "{}: {:?}",
            path.display(),
            src.skipped()
        );
    }
    checked
}

/// Element values as f64.
fn tet_values(t: ElementType, b: &[u8]) -> Vec<f64> {
    match t {
        ElementType::I64 => b
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        ElementType::I32 => b
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        ElementType::F32 => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        ElementType::F64 => b
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        t => panic!("coordinate type {t}"),
    }
}

#[test]
fn corpus_matches_sidecars() {
    let mut checked = 0;
    for path in corpus_files() {
        checked += check_file(&path, &OpenOptions::default());
    }
    assert!(checked >= 30, "only {checked} variables checked");
}

#[test]
fn skip_unsupported_changes_nothing_on_the_corpus() {
    let opts = OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    };
    for path in corpus_files() {
        check_file(&path, &opts);
    }
}

#[test]
fn rank9_is_delivered_for_the_engine_to_refuse() {
    let p = Path::new(CORPUS).join("rank9.h5");
    let expect = sidecar(&p);
    assert!(expect["expect_error"]
        .as_str()
        .unwrap()
        .contains("rank 9 > tet maximum rank 8"));
    let src = open_path(&p, &OpenOptions::default()).unwrap();
    assert_eq!(src.variables().len(), 1);
    assert_eq!(src.variables()[0].name, "rank9");
    assert_eq!(src.variables()[0].shape.len(), 9);
}

#[test]
fn external_link_followed_inside_the_directory() {
    let p = Path::new(CORPUS).join("structure.h5");
    let opts = OpenOptions {
        follow_external: true,
        ..OpenOptions::default()
    };
    check_file(&p, &opts);
    let src = open_path(&p, &opts).unwrap();
    let i = src
        .variables()
        .iter()
        .position(|v| v.name == "external_payload")
        .unwrap();
    let v = &src.variables()[i];
    assert_eq!(v.shape, vec![4, 4]);
    assert_eq!(v.dtype, ElementType::I32);
    assert_eq!(
        v.attrs,
        vec![("units".to_string(), AttrValue::Text("counts".into()))]
    );
    let target = sidecar(&Path::new(CORPUS).join("ext_target.h5"));
    assert_eq!(
        sha(&read_all(&src, i)),
        target["arrays"][0]["sha256"].as_str().unwrap()
    );
    assert!(!src.skipped().iter().any(|s| s.name == "external_payload"));
}

#[test]
fn filters_read_directly_and_equal() {
    let p = Path::new(CORPUS).join("dtypes_filters.h5");
    let src = open_path(&p, &OpenOptions::default()).unwrap();
    let direct = src.direct_chunk_variables();
    for n in [
        "filters/gzip_shuffle",
        "filters/lzf",
        "filters/shuffle_only",
        "big_endian/i32_be",
        "f16_chunked",
        "rank8",
    ] {
        assert!(direct.contains(&n), "{n} not read directly: {direct:?}");
    }
    assert!(src.parallel_reads());
    let get = |n: &str| {
        let i = src.variables().iter().position(|v| v.name == n).unwrap();
        read_all(&src, i)
    };
    let c = get("filters/contiguous");
    for n in [
        "filters/gzip_shuffle",
        "filters/lzf",
        "filters/shuffle_only",
    ] {
        assert_eq!(get(n), c, "{n}");
    }
    // Every region of the chunked ones equals the contiguous one.
    let ci = src
        .variables()
        .iter()
        .position(|v| v.name == "filters/contiguous")
        .unwrap();
    for n in [
        "filters/gzip_shuffle",
        "filters/lzf",
        "filters/shuffle_only",
    ] {
        let i = src.variables().iter().position(|v| v.name == n).unwrap();
        for (s, c) in [
            ([0u64, 0u64], [40u64, 30u64]),
            ([3, 5], [17, 9]),
            ([39, 29], [1, 1]),
            ([15, 6], [2, 20]),
        ] {
            let mut a = vec![0u8; (c[0] * c[1] * 4) as usize];
            let mut b = a.clone();
            src.read_region(i, &s, &c, &mut a).unwrap();
            src.read_region(ci, &s, &c, &mut b).unwrap();
            assert_eq!(a, b, "{n} {s:?} {c:?}");
        }
    }
    // The library agrees where it can decode (not LZF).
    for n in [
        "filters/gzip_shuffle",
        "filters/shuffle_only",
        "big_endian/i32_be",
        "big_endian/f64_be",
        "f16_chunked",
        "dtypes/f16",
    ] {
        let i = src.variables().iter().position(|v| v.name == n).unwrap();
        let v = &src.variables()[i];
        let mut lib = vec![0u8; v.byte_len().unwrap() as usize];
        src.read_region_via_library(i, &vec![0; v.shape.len()], &v.shape, &mut lib)
            .unwrap();
        assert_eq!(lib, read_all(&src, i), "{n}");
    }
}

#[test]
fn structure_details() {
    let p = Path::new(CORPUS).join("structure.h5");
    let src = open_path(&p, &OpenOptions::default()).unwrap();
    let v = |n: &str| src.variables().iter().find(|v| v.name == n).unwrap();
    assert_eq!(v("masks/cloud").dtype, ElementType::Bool);
    assert_eq!(v("masks/weather").dtype, ElementType::U8);
    assert_eq!(
        v("grid/temperature").layout.filters,
        vec!["shuffle", "deflate(4)"]
    );
    assert!(v("grid/temperature").layout.compressed);
    assert!(!v("empty").layout.compressed);
    // Coordinates come with labels the engine can read.
    assert_eq!(v("grid/time").role, Role::Coordinate);
    // The dimension-scale bookkeeping is not in the attributes.
    for var in src.variables() {
        for (k, _) in &var.attrs {
            assert!(
                ![
                    "CLASS",
                    "NAME",
                    "REFERENCE_LIST",
                    "DIMENSION_LIST",
                    "DIMENSION_LABELS"
                ]
                .contains(&k.as_str()),
                "{}: {k}",
                var.name
            );
        }
    }
    // Contiguous little-endian variables are offered as file extents.
    let i = src
        .variables()
        .iter()
        .position(|v| v.name == "sensors/thermal/raw/counts")
        .unwrap();
    let ext = src.file_extent(i).expect("file extent");
    let mut b = vec![0u8; 100];
    std::os::unix::fs::FileExt::read_exact_at(ext.file, &mut b, ext.offset).unwrap();
    assert_eq!(b, read_all(&src, i));
    // Compound fields are cut per field and say so.
    let id = v("tables/stations/id");
    assert!(id
        .facts
        .iter()
        .any(|(k, v)| k == "source_dataset" && *v == AttrValue::Text("tables/stations".into())));
}

/// NetCDF-4 files are HDF5 files: the chunk machinery the NetCDF importer reuses must read the
/// netCDF-C-written chunks (superblock 2) to the values of the NetCDF sidecars.
#[test]
fn netcdf4_corpus_values_through_hdf5() {
    let dir = Path::new(CORPUS).join("../netcdf");
    let mut checked = 0;
    for f in ["nc4_classic_chunked.nc", "nc4_groups_types.nc"] {
        let p = dir.join(f);
        let expect = sidecar(&p);
        let opts = OpenOptions {
            skip_unsupported: true,
            ..OpenOptions::default()
        };
        let src = open_path(&p, &opts).unwrap();
        for a in expect["arrays"].as_array().unwrap() {
            let (Some(stored), Some(hash)) = (a["stored_dtype"].as_str(), a["sha256"].as_str())
            else {
                continue;
            };
            let name = a["name"].as_str().unwrap();
            let i = src
                .variables()
                .iter()
                .position(|v| v.name == name)
                .unwrap_or_else(|| panic!("{f}: {name}"));
            let v = &src.variables()[i];
            let bytes = widen(v.dtype, &read_all(&src, i), stored);
            assert_eq!(sha(&bytes), hash, "{f}: {name}");
            checked += 1;
        }
        assert!(!src.direct_chunk_variables().is_empty(), "{f}");
    }
    assert!(checked >= 20, "{checked}");
}
