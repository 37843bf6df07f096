//! Every public corpus NetCDF file against its `.expect.json` sidecar: names, order, shapes,
//! dims, roles, element types (after the engine's i8 → i16 widening), sha256 of the values,
//! attributes with their types, global and group attributes, storage facts, text variables and
//! dimension labels, and the CF-unpacked view of packed variables.

use crate::common;

use std::path::Path;

use common::{corpus_files, packed_type, packing, read_all, unpacking};
use serde_json::Value;
use tet_netcdf::{open_bytes, open_path, Container, NcImporter, NcSource};
use tet_source::{AttrValue, Confidence, ElementType, Fact, Importer, OpenOptions, Source};
use tet_testkit::{
    attr_matches, check_sidecar_array, corpus_dir, find, json_strs, json_u64s, sha_hex, sidecar,
    var_index,
};

/// A sidecar attribute type (`<i2`, `|i1[3]`, `str`, `float`, `list[2]`) matches the variant.
fn attr_type_matches(attr: &AttrValue, t: &str) -> bool {
    let (base, len) = match t.split_once('[') {
        Some((b, rest)) => (b, rest.trim_end_matches(']').parse::<usize>().ok()),
        None => (t, None),
    };
    let (ok, n) = match (base, attr) {
        ("str", AttrValue::Text(_)) => (true, 1),
        ("list", AttrValue::TextList(v)) => (true, v.len()),
        ("float" | "<f8", AttrValue::F64(v)) => (true, v.len()),
        ("<f4", AttrValue::F32(v)) => (true, v.len()),
        ("|i1", AttrValue::I8(v)) => (true, v.len()),
        ("|u1", AttrValue::U8(v)) => (true, v.len()),
        ("<i2", AttrValue::I16(v)) => (true, v.len()),
        ("<u2", AttrValue::U16(v)) => (true, v.len()),
        ("<i4", AttrValue::I32(v)) => (true, v.len()),
        ("<u4", AttrValue::U32(v)) => (true, v.len()),
        ("int" | "<i8", AttrValue::I64(v)) => (true, v.len()),
        ("<u8", AttrValue::U64(v)) => (true, v.len()),
        _ => (false, 0),
    };
    ok && len.is_none_or(|l| l == n) && (len.is_some() || n == 1)
}

/// [`attr_matches`], and float attributes within what the sidecar's parsing may lose:
/// serde_json (without `float_roundtrip`) may parse a float 1 ulp off (`1e20f32`, written as
/// `1.0000000200408773e+20`, parses one below), so f32 values may also compare as f32 and the
/// others within a relative 1e-15.
fn attr_matches_as_parsed(attr: &AttrValue, json: &Value) -> bool {
    let (got, f32_attr): (Vec<f64>, bool) = match attr {
        AttrValue::F32(v) => (v.iter().map(|&x| f64::from(x)).collect(), true),
        AttrValue::F64(v) => (v.clone(), false),
        _ => return attr_matches(attr, json),
    };
    let want: Vec<&Value> = match json {
        Value::Array(a) => a.iter().collect(),
        scalar => vec![scalar],
    };
    let close =
        |w: f64, g: f64| (f32_attr && w as f32 == g as f32) || (w - g).abs() <= 1e-15 * g.abs();
    want.len() == got.len()
        && want.iter().zip(&got).all(|(&w, &g)| {
            attr_matches(&AttrValue::F64(vec![g]), w) || w.as_f64().is_some_and(|w| close(w, g))
        })
}

/// `ours` hold exactly the sidecar's attributes `values` (none when it has none), value for
/// value, each of the type `types` names for it.
fn check_attrs(ctx: &str, ours: &[(String, AttrValue)], values: &Value, types: &Value) {
    let values = values.as_object().cloned().unwrap_or_default();
    let mut a: Vec<&str> = ours.iter().map(|(k, _)| k.as_str()).collect();
    let mut b: Vec<&str> = values.keys().map(String::as_str).collect();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b, "{ctx}: attribute names");
    for (k, a) in ours {
        let j = &values[k];
        assert!(
            attr_matches_as_parsed(a, j),
            "{ctx}: attribute {k} = {a:?}, sidecar {j}"
        );
        if let Some(t) = types.get(k).and_then(Value::as_str) {
            assert!(
                attr_type_matches(a, t),
                "{ctx}: attribute {k} = {a:?}, sidecar type {t}"
            );
        }
    }
}

/// The format facts of an opened corpus file: data model, which read path its variables take.
fn check_container(name: &str, src: &NcSource, expect: &Value) {
    assert!(
        src.skipped().is_empty(),
        "{name}: skipped {:?}",
        src.skipped()
    );
    // Chunked netCDF-4 variables are read from their stored chunks (and the values below are
    // then those of the direct path); classic files always go through netCDF-C.
    assert_eq!(src.parallel_reads(), src.direct_chunk_variables() > 0);
    if name == "nc4_classic_chunked.nc" {
        assert!(
            src.direct_chunk_variables() > 0,
            "{name}: no direct chunk reads"
        );
    }
    if name.starts_with("nc3") {
        assert_eq!(src.direct_chunk_variables(), 0, "{name}");
    }
    assert_eq!(
        src.data_model().name(),
        expect["container"]["data_model"].as_str().unwrap(),
        "{name}: data model"
    );
}

/// Numeric variable `i` of `src` against its sidecar array `a`: name, shape, dims, role, type,
/// stored values (widened, hashed), attributes, storage facts, dimension labels.
fn check_numeric(name: &str, src: &NcSource, i: usize, a: &Value) {
    let ctx = format!("{name}/{}", a["name"].as_str().unwrap());
    let v = &src.variables()[i];
    let mut a = a.clone();
    if json_u64s(&a["shape"]).is_empty() {
        // A 0-d variable has no dims (the sidecar lists none) and no note about its rank.
        assert_eq!(a["dims"], Value::Array(Vec::new()), "{ctx}: scalar dims");
        a["dims"] = Value::Null;
        assert!(!v.notes.iter().any(|n| n.contains("0-d")), "{ctx}");
    }
    check_sidecar_array(name, src, i, &a, read_all);
    check_attrs(&ctx, &v.attrs, &a["attributes"], &a["attribute_types"]);
    check_storage(&ctx, v, &a["storage"]);
    check_coord_labels(&ctx, src, &a["coords"]);
}

/// Storage facts of netCDF-4 variables: chunk shape, deflate level, shuffle.
fn check_storage(ctx: &str, v: &tet_source::Variable, st: &Value) {
    match &st["chunking"] {
        c @ Value::Array(_) => {
            assert_eq!(
                v.layout.chunk_shape.as_ref(),
                Some(&json_u64s(c)),
                "{ctx}: chunks"
            );
        }
        _ => assert_eq!(v.layout.chunk_shape, None, "{ctx}: chunks"),
    }
    let f = &st["filters"];
    assert_eq!(
        v.layout.compressed,
        f["zlib"].as_bool() == Some(true),
        "{ctx}: compressed"
    );
    if let Some(level) = f["complevel"].as_u64() {
        assert!(
            v.layout.filters.contains(&format!("deflate({level})")),
            "{ctx}: {:?}",
            v.layout.filters
        );
    }
    assert_eq!(
        v.layout.filters.iter().any(|f| f == "shuffle"),
        f["shuffle"].as_bool() == Some(true),
        "{ctx}: shuffle in {:?}",
        v.layout.filters
    );
}

/// Dimensions labelled by a numeric coordinate variable get no importer labels (the engine
/// formats the coordinate's values); string coordinates come as labels.
fn check_coord_labels(ctx: &str, src: &NcSource, coords: &Value) {
    for (dim, c) in coords.as_object().into_iter().flatten() {
        let ours = src.dim_labels().iter().find(|l| &l.dim == dim);
        let first = c["first"].as_array().unwrap();
        if first.iter().all(Value::is_string) {
            let l = ours.unwrap_or_else(|| panic!("{ctx}: no labels for {dim}"));
            assert_eq!(l.labels.len() as u64, c["count"].as_u64().unwrap());
            assert_eq!(
                &l.labels[..first.len()],
                &json_strs(&c["first"])[..],
                "{ctx}"
            );
        } else {
            assert!(
                ours.is_none(),
                "{ctx}: importer labels {ours:?} for numeric {dim}"
            );
        }
    }
}

/// Text variables (char labels, vlen strings) against the sidecar arrays with no stored type.
fn check_texts(name: &str, src: &NcSource, text: &[&Value]) {
    assert_eq!(
        src.text_variables().len(),
        text.len(),
        "{name}: text variables"
    );
    for (t, a) in src.text_variables().iter().zip(text) {
        let ctx = format!("{name}/{}", t.name);
        assert_eq!(t.name, a["name"].as_str().unwrap());
        assert_eq!(t.values, json_strs(&a["values"]), "{ctx}: values");
        let shape = json_u64s(&a["shape"]);
        let dims = json_strs(&a["dims"]);
        let axes = if a["role"] == "char_labels" {
            // The last axis is the characters of one value.
            shape.len() - 1
        } else {
            shape.len()
        };
        assert_eq!(t.shape, shape[..axes], "{ctx}: shape");
        assert_eq!(
            t.dims
                .as_ref()
                .map(|d| d.iter().map(String::as_str).collect::<Vec<_>>()),
            Some(dims[..axes].to_vec()),
            "{ctx}: dims"
        );
        check_attrs(&ctx, &t.attrs, &a["attributes"], &a["attribute_types"]);
    }
}

/// Global attributes, then group attributes as `group/path/name`.
fn check_globals(name: &str, src: &NcSource, expect: &Value) {
    let mut globals = expect["global_attributes"].as_object().cloned().unwrap();
    let mut types = expect["global_attribute_types"]
        .as_object()
        .cloned()
        .unwrap();
    for g in expect["groups"].as_array().unwrap() {
        let path = g["path"].as_str().unwrap();
        for (k, v) in g["attributes"].as_object().into_iter().flatten() {
            globals.insert(format!("{path}/{k}"), v.clone());
            types.insert(format!("{path}/{k}"), Value::from("str"));
        }
    }
    check_attrs(
        &format!("{name} (global)"),
        src.global_attrs(),
        &Value::Object(globals),
        &Value::Object(types),
    );
}

/// The CF-unpacked view of packed variables (`numeric`: the sidecar arrays of the variables of
/// `src`, in order); the others are as in the raw view.
fn check_unpacked(name: &str, path: &Path, src: &NcSource, numeric: &[&Value]) {
    let unpacked = open_path(path, &unpacking()).unwrap();
    for (i, a) in numeric.iter().enumerate() {
        let v = &unpacked.variables()[i];
        let ctx = format!("{name}/{} (unpacked)", v.name);
        let Some(cf) = a.get("cf_decoded") else {
            // Not packed: identical to the raw view.
            assert_eq!(v, &src.variables()[i], "{ctx}");
            continue;
        };
        assert_eq!(
            v.dtype.name(),
            cf["dtype"].as_str().unwrap(),
            "{ctx}: dtype"
        );
        let bytes = read_all(&unpacked, i);
        assert_eq!(
            sha_hex(&bytes),
            cf["sha256"].as_str().unwrap(),
            "{ctx}: sha256"
        );
        let nans = bytes
            .chunks_exact(4)
            .filter(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_nan())
            .count();
        assert_eq!(
            nans as u64,
            cf["masked_count"].as_u64().unwrap(),
            "{ctx}: masked"
        );
        for k in ["scale_factor", "add_offset", "valid_min", "valid_max"] {
            assert!(find(&v.attrs, k).is_none(), "{ctx}: {k} kept");
            assert!(
                find(packing(&v.facts).unwrap_or(&[]), k).is_some(),
                "{ctx}: {k} not in facts"
            );
        }
        match find(&v.attrs, "_FillValue") {
            Some(AttrValue::F32(f)) => assert!(f.len() == 1 && f[0].is_nan(), "{ctx}"),
            other => panic!("{ctx}: _FillValue {other:?}"),
        }
        let from = src.variables()[i].dtype.name();
        assert_eq!(packed_type(&v.facts), Some(from), "{ctx}");
        assert!(v.notes.iter().any(|n| n.contains("CF-unpacked")), "{ctx}");
        for (j, w) in cf["first"].as_array().unwrap().iter().enumerate() {
            let x = f32::from_le_bytes(bytes[j * 4..j * 4 + 4].try_into().unwrap());
            match w {
                Value::String(s) if s == "NaN" => assert!(x.is_nan(), "{ctx}: value {j}"),
                w => assert_eq!(f64::from(x), w.as_f64().unwrap(), "{ctx}: value {j}"),
            }
        }
    }
}

fn check_file(path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let expect = sidecar(path);
    let src = open_path(path, &OpenOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    check_container(&name, &src, &expect);

    let arrays = expect["arrays"].as_array().unwrap();
    let (numeric, text): (Vec<&Value>, Vec<&Value>) =
        arrays.iter().partition(|a| !a["stored_dtype"].is_null());
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    let want: Vec<&str> = numeric
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, want, "{name}: numeric variables in order");
    for (i, a) in numeric.iter().enumerate() {
        check_numeric(&name, &src, i, a);
    }
    check_texts(&name, &src, &text);
    check_globals(&name, &src, &expect);
    check_unpacked(&name, path, &src, &numeric);
}

/// The float tolerance of [`attr_matches_as_parsed`] covers the sidecar parser's error and no
/// more; other attributes compare exactly.
#[test]
fn attribute_floats_allow_only_the_parsing_error() {
    use serde_json::json;
    let parsed: Value = serde_json::from_str("1.0000000200408773e+20").unwrap();
    assert!(attr_matches_as_parsed(&AttrValue::F32(vec![1e20]), &parsed));
    assert!(!attr_matches_as_parsed(
        &AttrValue::F32(vec![1e20]),
        &json!(1.0001e20)
    ));
    assert!(!attr_matches_as_parsed(
        &AttrValue::F64(vec![0.25]),
        &json!(0.250_000_1)
    ));
    assert!(attr_matches_as_parsed(
        &AttrValue::F64(vec![f64::NAN, 1.0]),
        &json!(["NaN", 1.0])
    ));
    assert!(!attr_matches_as_parsed(
        &AttrValue::F64(vec![1.0]),
        &json!([1.0, 2.0])
    ));
    assert!(!attr_matches_as_parsed(&AttrValue::I32(vec![2]), &json!(3)));
    assert!(!attr_matches_as_parsed(
        &AttrValue::Text("a".into()),
        &json!("b")
    ));
}

#[test]
fn corpus_files_match_sidecars() {
    for f in corpus_files() {
        check_file(&f);
    }
}

#[test]
fn memory_open_matches_file_open() {
    for f in corpus_files() {
        let a = open_path(&f, &OpenOptions::default()).unwrap();
        let b = open_bytes(std::fs::read(&f).unwrap(), &OpenOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(a.variables(), b.variables());
        assert_eq!(a.global_attrs(), b.global_attrs());
        assert_eq!(a.text_variables(), b.text_variables());
        for i in 0..a.variables().len() {
            assert_eq!(read_all(&a, i), read_all(&b, i));
        }
    }
}

/// The classic-format corpus file `nc3_classic.nc`.
fn open_classic() -> NcSource {
    open_path(
        &corpus_dir("netcdf").join("nc3_classic.nc"),
        &OpenOptions::default(),
    )
    .unwrap()
}

#[test]
fn classic_station_names_are_text_not_labels_of_a_numeric_coordinate() {
    let src = open_classic();
    let t = &src.text_variables()[0];
    assert_eq!(t.name, "station_name");
    assert_eq!(t.values, ["ALPHA", "BRAVO-12", "C"]);
    // `station` has the numeric coordinate variable `station` (10, 20, 30): it stays the
    // dimension's coordinate.
    assert!(src.dim_labels().is_empty(), "{:?}", src.dim_labels());
    // record variables carry the unlimited dimension as a fact
    let temp = src.variables().iter().find(|v| v.name == "temp").unwrap();
    assert!(
        temp.facts
            .contains(&Fact::UnlimitedDims(vec!["time".into()])),
        "{:?}",
        temp.facts
    );
}

#[test]
fn identify_by_signature_then_extension() {
    for f in corpus_files() {
        let head = std::fs::read(&f).unwrap();
        let head = &head[..head.len().min(4096)];
        assert_eq!(
            NcImporter.identify(&f, head),
            Confidence::Magic,
            "{}",
            f.display()
        );
        // netCDF-4 files carry _NCProperties near the start: recognised under any name.
        assert_eq!(
            NcImporter.identify(Path::new("x.bin"), head),
            Confidence::Magic,
            "{}",
            f.display()
        );
    }
    let h5 = b"\x89HDF\r\n\x1a\n\x02\x08\x08\x00\x00\x00\x00\x00";
    let mut ub = vec![0u8; 600];
    ub[512..520].copy_from_slice(&h5[..8]);
    assert_eq!(Container::sniff(&ub), Some(Container::Hdf5));
    for (name, head, want) in [
        ("a.nc4", &h5[..], Confidence::Magic),
        ("a.h5", h5, Confidence::No),
        ("a.bin", h5, Confidence::No),
        ("a.NC", b"garbage", Confidence::Extension),
        ("a.npy", b"\x93NUMPY", Confidence::No),
        ("a.h5", b"CDF\x02", Confidence::Magic),
    ] {
        assert_eq!(
            NcImporter.identify(Path::new(name), head),
            want,
            "{name}: {head:?}"
        );
    }
    assert_eq!(NcImporter.id(), "nc");
    assert_eq!(NcImporter.name(), "NetCDF 3/4");
    assert_eq!(NcImporter.extensions(), &["nc", "nc3", "nc4", "cdf"]);
}

#[test]
fn region_requests_are_checked() {
    let src = open_classic();
    let temp = var_index(&src, "temp");
    let mut out = vec![0u8; 4];
    assert!(src
        .read_region(temp, &[6, 0, 0], &[1, 1, 1], &mut out)
        .is_err());
    assert!(src.read_region(temp, &[0, 0], &[1, 1], &mut out).is_err());
    assert!(src
        .read_region(temp, &[0, 0, 0], &[1, 1, 2], &mut out)
        .is_err());
    assert!(src.read_region(99, &[0], &[1], &mut out).is_err());
    let mut empty = Vec::new();
    src.read_region(temp, &[6, 0, 0], &[0, 4, 5], &mut empty)
        .unwrap();
    // A misaligned output buffer still gets the right bytes.
    let mut whole = vec![0u8; 480];
    src.read_region(temp, &[0, 0, 0], &[6, 4, 5], &mut whole)
        .unwrap();
    let mut shifted = vec![0u8; 481];
    src.read_region(temp, &[0, 0, 0], &[6, 4, 5], &mut shifted[1..])
        .unwrap();
    assert_eq!(&shifted[1..], &whole[..]);
    // The scalar `crs` (0-d: an empty region).
    let crs = var_index(&src, "crs");
    assert!(src.variables()[crs].shape.is_empty());
    src.read_region(crs, &[], &[], &mut out).unwrap();
    assert_eq!(i32::from_le_bytes(out.clone().try_into().unwrap()), 7);
    assert_eq!(src.variables()[crs].dtype, ElementType::I32);
}

#[test]
fn not_netcdf_is_refused() {
    let e = open_bytes(b"hello world, not netcdf".to_vec(), &OpenOptions::default()).unwrap_err();
    assert!(e.to_string().contains("not a NetCDF file"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("empty.nc");
    std::fs::write(&p, b"").unwrap();
    assert!(NcImporter.open(&p, &OpenOptions::default()).is_err());
}
