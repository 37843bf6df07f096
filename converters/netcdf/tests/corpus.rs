//! Every public corpus NetCDF file against its `.expect.json` sidecar: names, order, shapes,
//! dims, roles, element types (after the engine's i8 → i16 widening), sha256 of the values,
//! attributes with their types, global and group attributes, storage facts, text variables and
//! dimension labels, and the CF-unpacked view of packed variables.

mod common;

use std::path::Path;

use common::{corpus_dir, corpus_files, find, read_all, sha_hex, widen};
use serde_json::Value;
use tet_netcdf::{open_bytes, open_path, Container, NcImporter};
use tet_source::{AttrValue, Confidence, ElementType, Importer, OpenOptions, Role, Source};

fn sidecar(path: &Path) -> Value {
    let text = std::fs::read_to_string(format!("{}.expect.json", path.display())).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A sidecar attribute value matches a typed attribute: strings exactly, numbers by value.
fn attr_matches(attr: &AttrValue, json: &Value) -> bool {
    fn num(v: &Value) -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) if s == "NaN" => Some(f64::NAN),
            Value::String(s) if s == "Infinity" => Some(f64::INFINITY),
            Value::String(s) if s == "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        }
    }
    let nums: Vec<f64> = match attr {
        AttrValue::Text(s) => return json.as_str() == Some(s.as_str()),
        AttrValue::TextList(l) => {
            return json.as_array().is_some_and(|a| {
                a.iter()
                    .map(Value::as_str)
                    .eq(l.iter().map(|s| Some(s.as_str())))
            })
        }
        AttrValue::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        AttrValue::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        AttrValue::I16(v) => v.iter().map(|&x| f64::from(x)).collect(),
        AttrValue::U16(v) => v.iter().map(|&x| f64::from(x)).collect(),
        AttrValue::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        AttrValue::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        AttrValue::I64(v) => v.iter().map(|&x| x as f64).collect(),
        AttrValue::U64(v) => v.iter().map(|&x| x as f64).collect(),
        AttrValue::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        AttrValue::F64(v) => v.clone(),
    };
    let want: Vec<Option<f64>> = match json {
        Value::Array(a) => a.iter().map(num).collect(),
        v => vec![num(v)],
    };
    // serde_json (without `float_roundtrip`) may parse a float 1 ulp off: f32 values compare
    // as f32, the others within a relative 1e-15.
    let f32_attr = matches!(attr, AttrValue::F32(_));
    let close = |w: f64, g: f64| {
        (w.is_nan() && g.is_nan())
            || w == g
            || (f32_attr && w as f32 == g as f32)
            || (w - g).abs() <= 1e-15 * g.abs()
    };
    want.len() == nums.len()
        && want
            .iter()
            .zip(&nums)
            .all(|(w, &g)| w.is_some_and(|w| close(w, g)))
}

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

fn check_attrs(ctx: &str, ours: &[(String, AttrValue)], values: &Value, types: &Value) {
    let values = values.as_object().cloned().unwrap_or_default();
    for (k, jv) in &values {
        let a = find(ours, k).unwrap_or_else(|| panic!("{ctx}: no attribute {k} in {ours:?}"));
        assert!(
            attr_matches(a, jv),
            "{ctx}: attribute {k} = {a:?}, sidecar {jv}"
        );
        if let Some(t) = types.get(k).and_then(Value::as_str) {
            assert!(
                attr_type_matches(a, t),
                "{ctx}: attribute {k} = {a:?}, sidecar type {t}"
            );
        }
    }
    let mut a: Vec<&str> = ours.iter().map(|(k, _)| k.as_str()).collect();
    let mut b: Vec<&str> = values.keys().map(String::as_str).collect();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b, "{ctx}: attribute names");
}

fn shape_of(a: &Value) -> Vec<u64> {
    a["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn check_file(path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let expect = sidecar(path);
    let src = open_path(path, &OpenOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
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

    let arrays = expect["arrays"].as_array().unwrap();
    let numeric: Vec<&Value> = arrays
        .iter()
        .filter(|a| !a["stored_dtype"].is_null())
        .collect();
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    let want: Vec<&str> = numeric
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, want, "{name}: numeric variables in order");

    for (i, a) in numeric.iter().enumerate() {
        let aname = a["name"].as_str().unwrap();
        let ctx = format!("{name}/{aname}");
        let v = &src.variables()[i];
        let shape = shape_of(a);
        if shape.is_empty() {
            assert_eq!(v.shape, vec![1], "{ctx}: scalar shape");
            assert_eq!(v.dims, None, "{ctx}: scalar dims");
            assert!(v.notes.iter().any(|n| n.contains("0-d scalar")), "{ctx}");
        } else {
            assert_eq!(v.shape, shape, "{ctx}: shape");
            assert_eq!(v.dims, Some(strings(&a["dims"])), "{ctx}: dims");
        }
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
        let bytes = widen(v.dtype, read_all(&src, i));
        assert_eq!(
            bytes.len() as u64,
            a["nbytes_stored"].as_u64().unwrap(),
            "{ctx}: stored bytes"
        );
        assert_eq!(
            sha_hex(&bytes),
            a["sha256"].as_str().unwrap(),
            "{ctx}: sha256"
        );
        check_attrs(&ctx, &v.attrs, &a["attributes"], &a["attribute_types"]);

        // Storage facts of netCDF-4 variables.
        let st = &a["storage"];
        match &st["chunking"] {
            Value::Array(c) => {
                let c: Vec<u64> = c.iter().map(|x| x.as_u64().unwrap()).collect();
                assert_eq!(v.layout.chunk_shape.as_ref(), Some(&c), "{ctx}: chunks");
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

        // Dimensions labelled by a numeric coordinate variable get no importer labels (the
        // engine formats the coordinate's values); string coordinates come as labels.
        for (dim, c) in a["coords"].as_object().into_iter().flatten() {
            let ours = src.dim_labels().iter().find(|l| &l.dim == dim);
            let first = c["first"].as_array().unwrap();
            if first.iter().all(Value::is_string) {
                let l = ours.unwrap_or_else(|| panic!("{ctx}: no labels for {dim}"));
                assert_eq!(l.labels.len() as u64, c["count"].as_u64().unwrap());
                assert_eq!(&l.labels[..first.len()], &strings(&c["first"])[..], "{ctx}");
            } else {
                assert!(
                    ours.is_none(),
                    "{ctx}: importer labels {ours:?} for numeric {dim}"
                );
            }
        }
    }

    // Text variables (char labels, vlen strings).
    let text: Vec<&Value> = arrays
        .iter()
        .filter(|a| a["stored_dtype"].is_null())
        .collect();
    assert_eq!(
        src.text_variables().len(),
        text.len(),
        "{name}: text variables"
    );
    for (t, a) in src.text_variables().iter().zip(&text) {
        let ctx = format!("{name}/{}", t.name);
        assert_eq!(t.name, a["name"].as_str().unwrap());
        assert_eq!(t.values, strings(&a["values"]), "{ctx}: values");
        let shape = shape_of(a);
        let dims = strings(&a["dims"]);
        if a["role"] == "char_labels" {
            assert_eq!(t.shape, shape[..shape.len() - 1], "{ctx}: shape");
            assert_eq!(
                t.dims.as_deref(),
                Some(&dims[..dims.len() - 1]),
                "{ctx}: dims"
            );
        } else {
            assert_eq!(t.shape, shape, "{ctx}: shape");
            assert_eq!(t.dims.as_deref(), Some(&dims[..]), "{ctx}: dims");
        }
        check_attrs(&ctx, &t.attrs, &a["attributes"], &a["attribute_types"]);
    }

    // Global attributes, then group attributes as `group/path/name`.
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

    // The CF-unpacked view of packed variables.
    let unpacked = open_path(
        path,
        &OpenOptions {
            unpack: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
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
                find(&v.facts, &format!("packed:{k}")).is_some(),
                "{ctx}: {k} not in facts"
            );
        }
        match find(&v.attrs, "_FillValue") {
            Some(AttrValue::F32(f)) => assert!(f.len() == 1 && f[0].is_nan(), "{ctx}"),
            other => panic!("{ctx}: _FillValue {other:?}"),
        }
        let from = src.variables()[i].dtype.name();
        assert_eq!(
            find(&v.facts, "unpacked_from"),
            Some(&AttrValue::Text(from.into())),
            "{ctx}"
        );
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

#[test]
fn classic_station_names_are_text_not_labels_of_a_numeric_coordinate() {
    let src = open_path(
        &corpus_dir().join("nc3_classic.nc"),
        &OpenOptions::default(),
    )
    .unwrap();
    let t = &src.text_variables()[0];
    assert_eq!(t.name, "station_name");
    assert_eq!(t.values, ["ALPHA", "BRAVO-12", "C"]);
    // `station` has the numeric coordinate variable `station` (10, 20, 30): it stays the
    // dimension's coordinate.
    assert!(src.dim_labels().is_empty(), "{:?}", src.dim_labels());
    // record variables carry the unlimited dimension as a fact
    let temp = src.variables().iter().find(|v| v.name == "temp").unwrap();
    assert_eq!(
        find(&temp.facts, "unlimited_dims"),
        Some(&AttrValue::TextList(vec!["time".into()]))
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
    assert_eq!(
        NcImporter.identify(Path::new("a.nc4"), h5),
        Confidence::Magic
    );
    assert_eq!(NcImporter.identify(Path::new("a.h5"), h5), Confidence::No);
    assert_eq!(NcImporter.identify(Path::new("a.bin"), h5), Confidence::No);
    let mut ub = vec![0u8; 600];
    ub[512..520].copy_from_slice(&h5[..8]);
    assert_eq!(Container::sniff(&ub), Some(Container::Hdf5));
    assert_eq!(
        NcImporter.identify(Path::new("a.NC"), b"garbage"),
        Confidence::Extension
    );
    assert_eq!(
        NcImporter.identify(Path::new("a.npy"), b"\x93NUMPY"),
        Confidence::No
    );
    assert_eq!(
        NcImporter.identify(Path::new("a.h5"), b"CDF\x02"),
        Confidence::Magic
    );
    assert_eq!(NcImporter.id(), "nc");
    assert_eq!(NcImporter.name(), "NetCDF 3/4");
    assert_eq!(NcImporter.extensions(), &["nc", "nc3", "nc4", "cdf"]);
}

#[test]
fn region_requests_are_checked() {
    let src = open_path(
        &corpus_dir().join("nc3_classic.nc"),
        &OpenOptions::default(),
    )
    .unwrap();
    let temp = src
        .variables()
        .iter()
        .position(|v| v.name == "temp")
        .unwrap();
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
    // The scalar `crs` (0-d, delivered as [1]).
    let crs = src
        .variables()
        .iter()
        .position(|v| v.name == "crs")
        .unwrap();
    src.read_region(crs, &[0], &[1], &mut out).unwrap();
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
