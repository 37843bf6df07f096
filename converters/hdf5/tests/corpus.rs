//! Every `.h5` of the public corpus against its `.expect.json` sidecar: names, shapes, dims,
//! roles, stored dtypes (after the engine's widening), value hashes, attributes (typed, against
//! `attribute_types`), global and group attributes, enum mappings, compound fields, strings,
//! coordinates and links.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tet_hdf5::{open_path, H5Importer};
use tet_source::{
    AttrValue, Confidence, ElementType, Fact, Importer, OpenOptions, Role, Source, Variable,
};
use tet_testkit::{
    as_f64s, complex_part, corpus_dir, json_strs, json_u64s, read_all, sha_hex, sidecar, var_index,
    widen,
};

/// The public HDF5 corpus files (`.h5`), sorted; there must be at least the five the tests were
/// written against.
fn corpus_files() -> Vec<PathBuf> {
    let files = tet_testkit::corpus_files("hdf5", &["h5"]);
    assert!(files.len() >= 5, "corpus looks incomplete: {files:?}");
    files
}

/// A file of the public HDF5 corpus.
fn corpus(name: &str) -> PathBuf {
    corpus_dir("hdf5").join(name)
}

/// The bytes the engine stores for `bytes` of `dtype` ([`widen`]), which must be of the type
/// `stored`.
fn stored_bytes(dtype: ElementType, bytes: &[u8], stored: &str) -> Vec<u8> {
    let (out, stored_type) = widen(dtype, bytes);
    assert_eq!(stored_type, stored, "stored dtype of {dtype}");
    out
}

/// The shape of a text variable: a 0-d string is one value of shape `[1]`.
fn text_shape(shape: &[u64]) -> Vec<u64> {
    if shape.is_empty() {
        vec![1]
    } else {
        shape.to_vec()
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
/// [`Fact::AttrShape`], and only they do.
fn check_attr_shapes(what: &str, facts: &[Fact], want: &Value) {
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
    let want: BTreeMap<String, Vec<u64>> = want
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), nested_shape(v)))
        .filter(|(_, s)| s.len() > 1)
        .collect();
    let got: BTreeMap<String, Vec<u64>> = facts
        .iter()
        .filter_map(|f| match f {
            Fact::AttrShape { attr, shape } => Some((attr.clone(), shape.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(got, want, "{what}: attribute shapes");
}

/// The variable's enum mapping as sorted `NAME=value` texts.
fn enum_mapping(v: &Variable) -> Option<Vec<String>> {
    v.facts.iter().find_map(|f| match f {
        Fact::EnumMapping(m) => {
            let mut l: Vec<String> = m.iter().map(|(n, x)| format!("{n}={x}")).collect();
            l.sort();
            Some(l)
        }
        _ => None,
    })
}

/// The variable's aliases (other link names).
fn aliases(v: &Variable) -> Option<&[String]> {
    v.facts.iter().find_map(|f| match f {
        Fact::Aliases(a) => Some(a.as_slice()),
        _ => None,
    })
}

/// The variables and text variables a sidecar's arrays stand for, as they are checked.
#[derive(Default)]
struct Seen {
    vars: Vec<String>,
    texts: Vec<String>,
    /// Numeric variables whose values were checked.
    checked: usize,
}

/// A text variable `name` of `src` holds the sidecar's `values` with shape `shape`.
fn check_text(src: &dyn Source, name: &str, values: &Value, shape: &[u64], seen: &mut Seen) {
    let t = src
        .text_variables()
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("text {name}"));
    let want: Vec<String> = flat(values)
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(t.values, want, "{name}");
    assert_eq!(t.shape, text_shape(shape), "{name}");
    seen.texts.push(name.to_string());
}

/// A compound dataset `a`: one variable (or text variable) a field, of the dataset's shape.
fn check_compound_fields(src: &dyn Source, a: &Value, fields: &[Value], seen: &mut Seen) {
    let name = a["name"].as_str().unwrap();
    let shape = json_u64s(&a["shape"]);
    for f in fields {
        let fname = format!("{name}/{}", f["name"].as_str().unwrap());
        if let Some(vals) = f.get("values") {
            check_text(src, &fname, vals, &shape, seen);
            continue;
        }
        let i = var_index(src, &fname);
        let v = &src.variables()[i];
        assert_eq!(v.shape, shape, "{fname}");
        let bytes = stored_bytes(
            v.dtype,
            &read_all(src, i),
            f["stored_dtype"].as_str().unwrap(),
        );
        assert_eq!(sha_hex(&bytes), f["sha256"].as_str().unwrap(), "{fname}");
        assert!(
            v.notes.iter().any(|n| n.contains("compound")),
            "{fname}: {:?}",
            v.notes
        );
        seen.vars.push(fname);
        seen.checked += 1;
    }
}

/// A complex dataset `a`: one complex variable, whose parts (what the engine stores) have the
/// sidecar's hashes `c`.
fn check_complex(src: &dyn Source, a: &Value, c: &Value, seen: &mut Seen) {
    let name = a["name"].as_str().unwrap();
    let i = var_index(src, name);
    let v = &src.variables()[i];
    assert_eq!(v.shape, json_u64s(&a["shape"]), "{name}");
    assert!(
        v.dtype.complex_component().is_some(),
        "{name}: {} is not complex",
        v.dtype
    );
    let bytes = read_all(src, i);
    let (re, im) = (
        complex_part(&bytes, v.dtype, 0),
        complex_part(&bytes, v.dtype, 1),
    );
    assert_eq!(sha_hex(&re), c["real"].as_str().unwrap(), "{name}/real");
    assert_eq!(sha_hex(&im), c["imag"].as_str().unwrap(), "{name}/imag");
    seen.vars.push(name.to_string());
    seen.checked += 1;
}

/// Chunk shape and filter pipeline of `v` against the sidecar's `storage`.
fn check_layout(name: &str, v: &Variable, storage: &Value) {
    let chunks = storage["chunks"]
        .as_array()
        .map(|_| json_u64s(&storage["chunks"]));
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
}

/// Coordinates: the named coordinate variable exists and starts with the listed values.
fn check_coords(src: &dyn Source, coords: &Value) {
    for (dim, c) in coords.as_object().into_iter().flatten() {
        let cv = c["variable"].as_str().unwrap();
        let ci = var_index(src, cv);
        let cvar = &src.variables()[ci];
        assert_eq!(cvar.role, Role::Coordinate, "{cv}");
        assert_eq!(cvar.dims.as_deref(), Some(&[dim.clone()][..]), "{cv}");
        assert_eq!(cvar.shape, vec![c["count"].as_u64().unwrap()], "{cv}");
        let vals = as_f64s(cvar.dtype, &read_all(src, ci));
        for (k, want) in c["first"].as_array().unwrap().iter().enumerate() {
            assert!(same_f(vals[k], num(want)), "{cv}[{k}]");
        }
    }
}

/// The enum mapping of `v`, if the sidecar lists one, and none else.
fn check_enum(name: &str, v: &Variable, mapping: Option<&Value>) {
    match mapping.and_then(Value::as_object) {
        Some(m) => {
            let mut want: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_i64().unwrap()))
                .collect();
            want.sort();
            let got = enum_mapping(v).unwrap_or_else(|| panic!("{name}: no enum mapping"));
            assert_eq!(got, want, "{name}");
        }
        None => assert!(enum_mapping(v).is_none(), "{name}"),
    }
}

/// A numeric dataset `a`: shape, stored values, dims, role, attributes, enum mapping, type
/// notes, layout, coordinates.
fn check_array(path: &Path, src: &dyn Source, a: &Value, seen: &mut Seen) {
    let name = a["name"].as_str().unwrap();
    let i = src
        .variables()
        .iter()
        .position(|v| v.name == name)
        .unwrap_or_else(|| panic!("{}: no variable {name}", path.display()));
    let v = &src.variables()[i];
    assert_eq!(v.shape, json_u64s(&a["shape"]), "{name}");
    let stored = a["stored_dtype"]
        .as_str()
        .or(a
            .get("stored_dtype_if_rank_allowed")
            .and_then(Value::as_str))
        .unwrap();
    let bytes = stored_bytes(v.dtype, &read_all(src, i), stored);
    assert_eq!(
        Some(bytes.len() as u64),
        a["nbytes_stored"].as_u64(),
        "{name}: stored bytes"
    );
    assert_eq!(
        sha_hex(&bytes),
        a["sha256"].as_str().unwrap(),
        "{}: {name}",
        path.display()
    );
    let dims = a["dims"].as_array().map(|_| json_strs(&a["dims"]));
    assert_eq!(
        v.dims
            .as_ref()
            .map(|d| d.iter().map(String::as_str).collect::<Vec<_>>()),
        dims,
        "{name}: dims"
    );
    let role = if v.role == Role::Coordinate {
        "coordinate"
    } else {
        "data"
    };
    assert_eq!(role, a["role"].as_str().unwrap(), "{name}: role");
    check_attrs(
        name,
        &v.attrs,
        &a["attributes"],
        a.get("attribute_types").unwrap_or(&Value::Null),
    );
    check_attr_shapes(name, &v.facts, &a["attributes"]);
    check_enum(name, v, a.get("enum_mapping"));
    if a["source_tag"] == "bool" {
        assert_eq!(v.dtype, ElementType::Bool, "{name}");
    }
    if a["source_dtype"]
        .as_str()
        .is_some_and(|s| s.starts_with('>'))
    {
        assert!(v.notes.iter().any(|n| n.contains("big-endian")), "{name}");
    }
    check_layout(name, v, &a["storage"]);
    check_coords(src, &a["coords"]);
    seen.vars.push(name.to_string());
    seen.checked += 1;
}

/// Nothing more and nothing less than the sidecar's arrays (and, when external links are
/// followed, the one the corpus links to).
fn check_inventory(path: &Path, src: &dyn Source, opts: &OpenOptions, mut seen: Seen) {
    let mut ours: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    if opts.follow_external {
        ours.retain(|n| *n != "external_payload");
    }
    let mut want_sorted: Vec<&str> = seen.vars.iter().map(String::as_str).collect();
    ours.sort();
    want_sorted.sort();
    assert_eq!(ours, want_sorted, "{}: variables", path.display());
    let mut texts: Vec<&str> = src
        .text_variables()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    texts.sort();
    seen.texts.sort();
    assert_eq!(texts, seen.texts, "{}: text variables", path.display());
}

/// Global and group attributes (group ones as `group/path/name`).
fn check_globals(path: &Path, src: &dyn Source, expect: &Value) {
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
}

/// Soft links are aliases of their target; external links are skipped (named with their
/// target) or, when followed, variables that say so; nothing is skipped where there are none.
fn check_links(path: &Path, src: &dyn Source, opts: &OpenOptions, links: &[Value]) {
    for l in links {
        let name = l["name"].as_str().unwrap();
        match l["type"].as_str().unwrap() {
            "soft" => {
                let target = l["target"].as_str().unwrap().trim_start_matches('/');
                let v = &src.variables()[var_index(src, target)];
                let al = aliases(v).unwrap_or_else(|| panic!("{target}: no aliases fact"));
                assert_eq!(al, [name.to_string()]);
                assert!(v.notes.iter().any(|n| n.contains(name)));
                assert!(!src.variables().iter().any(|v| v.name == name));
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
                let v = &src.variables()[var_index(src, name)];
                assert!(v.notes.iter().any(|n| n.contains("followed external link")));
            }
            t => panic!("link type {t}"),
        }
    }
    if links.is_empty() {
        assert!(
            src.skipped().is_empty(),
            "{}: {:?}",
            path.display(),
            src.skipped()
        );
    }
}

/// One corpus file against its sidecar; the number of numeric variables whose values were
/// checked.
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
    let mut seen = Seen::default();
    for a in expect["arrays"].as_array().unwrap() {
        if let Some(fields) = a.get("fields").and_then(Value::as_array) {
            check_compound_fields(src, a, fields, &mut seen);
        } else if let Some(c) = a.get("components") {
            check_complex(src, a, c, &mut seen);
        } else if a["stored_dtype"].is_null() && a.get("values").is_some() {
            let name = a["name"].as_str().unwrap();
            check_text(src, name, &a["values"], &json_u64s(&a["shape"]), &mut seen);
        } else {
            check_array(path, src, a, &mut seen);
        }
    }
    let checked = seen.checked;
    check_inventory(path, src, opts, seen);
    check_globals(path, src, &expect);
    check_links(path, src, opts, expect["links"].as_array().unwrap());
    checked
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
    let p = corpus("rank9.h5");
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
    let p = corpus("structure.h5");
    let opts = OpenOptions {
        follow_external: true,
        ..OpenOptions::default()
    };
    check_file(&p, &opts);
    let src = open_path(&p, &opts).unwrap();
    let i = var_index(&src, "external_payload");
    let v = &src.variables()[i];
    assert_eq!(v.shape, vec![4, 4]);
    assert_eq!(v.dtype, ElementType::I32);
    assert_eq!(
        v.attrs,
        vec![("units".to_string(), AttrValue::Text("counts".into()))]
    );
    let target = sidecar(&corpus("ext_target.h5"));
    assert_eq!(
        sha_hex(&read_all(&src, i)),
        target["arrays"][0]["sha256"].as_str().unwrap()
    );
    assert!(!src.skipped().iter().any(|s| s.name == "external_payload"));
}

#[test]
fn filters_read_directly_and_equal() {
    let p = corpus("dtypes_filters.h5");
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
    let get = |n: &str| read_all(&src, var_index(&src, n));
    let c = get("filters/contiguous");
    for n in [
        "filters/gzip_shuffle",
        "filters/lzf",
        "filters/shuffle_only",
    ] {
        assert_eq!(get(n), c, "{n}");
    }
    // Every region of the chunked ones equals the contiguous one.
    let ci = var_index(&src, "filters/contiguous");
    for n in [
        "filters/gzip_shuffle",
        "filters/lzf",
        "filters/shuffle_only",
    ] {
        let i = var_index(&src, n);
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
        let i = var_index(&src, n);
        let v = &src.variables()[i];
        let mut lib = vec![0u8; v.byte_len().unwrap() as usize];
        src.read_region_via_library(i, &vec![0; v.shape.len()], &v.shape, &mut lib)
            .unwrap();
        assert_eq!(lib, read_all(&src, i), "{n}");
    }
}

#[test]
fn structure_details() {
    let p = corpus("structure.h5");
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
    let i = var_index(&src, "sensors/thermal/raw/counts");
    let ext = src.file_extent(i).expect("file extent");
    let mut b = vec![0u8; 100];
    std::os::unix::fs::FileExt::read_exact_at(ext.file, &mut b, ext.offset).unwrap();
    assert_eq!(b, read_all(&src, i));
    // Compound fields are cut per field and say so.
    let id = v("tables/stations/id");
    assert!(id
        .facts
        .contains(&Fact::SourceDataset("tables/stations".into())));
}

/// NetCDF-4 files are HDF5 files: the chunk machinery the NetCDF importer reuses must read the
/// netCDF-C-written chunks (superblock 2) to the values of the NetCDF sidecars.
#[test]
fn netcdf4_corpus_values_through_hdf5() {
    let dir = corpus_dir("netcdf");
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
            let i = var_index(&src, name);
            let v = &src.variables()[i];
            let bytes = stored_bytes(v.dtype, &read_all(&src, i), stored);
            assert_eq!(sha_hex(&bytes), hash, "{f}: {name}");
            checked += 1;
        }
        assert!(!src.direct_chunk_variables().is_empty(), "{f}");
    }
    assert!(checked >= 20, "{checked}");
}
