//! Every input of the public corpus whose importer is compiled in converts, and the output
//! matches its `.expect.json` sidecar value for value: sha256 of the stored bytes, dtype, shape,
//! dims, coordinate labels of short axes, attributes. `expect_error` inputs are refused with no
//! output. Every output passes `verify --deep` without warnings.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tet::format::verify::{verify, Depth};
use tet::format::TetFile;
use tet::meta::cftime;
use tet::pipeline::{convert, ConvertOptions};
use tet_source::AttrValue;

/// Corpus folders whose importers this build has.
const FORMATS: &[&str] = &[
    "npy",
    "teafile",
    "tensogram",
    "zarr",
    #[cfg(feature = "netcdf")]
    "netcdf",
    #[cfg(feature = "hdf5")]
    "hdf5",
];

fn corpus() -> PathBuf {
    common::shared().join("corpus/public")
}

fn inputs() -> Vec<(PathBuf, Value)> {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(corpus().join("manifest.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for f in manifest["files"].as_array().unwrap() {
        let rel = f["file"].as_str().unwrap();
        if !FORMATS.contains(&rel.split('/').next().unwrap()) {
            continue;
        }
        let input = corpus().join(rel);
        let sidecar = PathBuf::from(format!("{}.expect.json", input.display()));
        let expect: Value = serde_json::from_slice(&std::fs::read(&sidecar).unwrap()).unwrap();
        out.push((input, expect));
    }
    assert!(
        out.len() >= 30,
        "corpus not found or too small: {}",
        out.len()
    );
    out
}

fn sha256(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Compares a sidecar JSON value with a typed attribute.
fn attr_matches(want: &Value, got: &AttrValue) -> bool {
    fn num(v: &Value) -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::String(s) if s == "NaN" => Some(f64::NAN),
            Value::String(s) if s == "Infinity" => Some(f64::INFINITY),
            Value::String(s) if s == "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        }
    }
    let nums: Option<Vec<f64>> = match got {
        AttrValue::Text(s) => return want.as_str() == Some(s.as_str()),
        AttrValue::TextList(l) => {
            return want.as_array().is_some_and(|a| {
                a.iter()
                    .map(Value::as_str)
                    .eq(l.iter().map(|s| Some(s.as_str())))
            })
        }
        AttrValue::I8(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::U8(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::I16(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::U16(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::I32(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::U32(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::I64(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::U64(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::F32(v) => Some(v.iter().map(|&x| x as f64).collect()),
        AttrValue::F64(v) => Some(v.clone()),
    };
    let nums = nums.unwrap();
    // Multi-dimensional attributes arrive flattened in row-major order.
    fn flatten(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Array(a) => a.iter().for_each(|x| flatten(x, out)),
            v => out.extend(num(v)),
        }
    }
    let mut flat = Vec::new();
    flatten(want, &mut flat);
    let want = flat;
    let close =
        |a: f64, b: f64| (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-6 * b.abs();
    want.len() == nums.len() && want.iter().zip(&nums).all(|(&a, &b)| close(a, b))
}

fn check_attrs(ctx: &str, want: &Value, got: &[(String, AttrValue)]) {
    check_attrs_prefixed(ctx, "", want, got)
}

/// Nested maps in a sidecar (Tensogram's CBOR metadata, e.g. `{"mars": {"param": "2t"}}`) are
/// stored as dotted keys (`mars.param`).
fn check_attrs_prefixed(ctx: &str, prefix: &str, want: &Value, got: &[(String, AttrValue)]) {
    let Some(want) = want.as_object() else { return };
    for (k, v) in want {
        let k = &format!("{prefix}{k}");
        if v.is_object() {
            // Zarr keeps a nested JSON attribute whole, as JSON text.
            if let Some((_, AttrValue::Text(t))) = got.iter().find(|(n, _)| n == k) {
                let parsed: Value = serde_json::from_str(t)
                    .unwrap_or_else(|e| panic!("{ctx}: attribute `{k}` is not JSON: {e}"));
                assert_eq!(&parsed, v, "{ctx}: attribute `{k}`");
                continue;
            }
            check_attrs_prefixed(ctx, &format!("{k}."), v, got);
            continue;
        }
        let g = got.iter().find(|(n, _)| n == k).map(|(_, v)| v);
        let g = g.unwrap_or_else(|| panic!("{ctx}: attribute `{k}` missing (have {got:?})"));
        assert!(
            attr_matches(v, g),
            "{ctx}: attribute `{k}`: want {v}, got {g:?}"
        );
    }
}

/// One expected dataset: (name, stored dtype, shape, sha256).
fn expected_datasets(expect: &Value) -> Vec<(String, String, Vec<u64>, String, Value)> {
    let mut out = Vec::new();
    for a in expect["arrays"].as_array().unwrap() {
        let name = a["name"].as_str().unwrap().to_string();
        let mut shape: Vec<u64> = a["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        if shape.is_empty() {
            shape = vec![1]; // a 0-d scalar is stored as [1]
        }
        if let Some(dt) = a["stored_dtype"].as_str() {
            out.push((
                name.clone(),
                dt.into(),
                shape.clone(),
                a["sha256"].as_str().unwrap().into(),
                a.clone(),
            ));
        }
        for f in a["fields"].as_array().into_iter().flatten() {
            if let Some(dt) = f["stored_dtype"].as_str() {
                let mut s = shape.clone();
                if let Some(sub) = f["shape"].as_array() {
                    s.extend(sub.iter().map(|v| v.as_u64().unwrap()));
                }
                out.push((
                    format!("{name}/{}", f["name"].as_str().unwrap()),
                    dt.into(),
                    s,
                    f["sha256"].as_str().unwrap().into(),
                    Value::Null,
                ));
            }
        }
        if let Some(c) = a.get("components").filter(|c| c.is_object()) {
            for part in ["real", "imag"] {
                out.push((
                    format!("{name}/{part}"),
                    c["dtype"].as_str().unwrap().into(),
                    shape.clone(),
                    c[part].as_str().unwrap().into(),
                    Value::Null,
                ));
            }
        }
    }
    out
}

fn check_output(input: &Path, out: &Path, expect: &Value) {
    let ctx = input.file_name().unwrap().to_string_lossy().to_string();
    let f = TetFile::open(out).unwrap();
    let report = verify(&f, Depth::Deep);
    assert!(report.ok(), "{ctx}: verify failed: {:?}", report.failures);
    assert!(
        report.warnings.is_empty(),
        "{ctx}: verify warnings: {:?}",
        report.warnings
    );
    let footer = f.footer().unwrap().expect("footer");
    let want = expected_datasets(expect);
    for (name, dtype, shape, sha, array) in &want {
        let id = f.dataset_id(name).unwrap_or_else(|| {
            panic!(
                "{ctx}: dataset `{name}` missing; have {:?}",
                f.datasets.iter().map(|d| &d.name).collect::<Vec<_>>()
            )
        });
        let d = &f.datasets[id];
        assert_eq!(d.dtype.name(), dtype, "{ctx}/{name}: dtype");
        assert_eq!(&d.shape, shape, "{ctx}/{name}: shape");
        assert_eq!(
            &sha256(&f.read_dataset(id).unwrap()),
            sha,
            "{ctx}/{name}: values"
        );
        if array.is_null() {
            continue;
        }
        let meta = footer.datasets.get(name);
        if let Some(dims) = array["dims"].as_array() {
            let dims: Vec<String> = dims
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            // A 0-d variable (stored as shape [1]) has no dimension names to keep.
            let got = meta.and_then(|m| m.dim_names.clone());
            if dims.is_empty() {
                assert!(got.is_none_or(|d| d.is_empty()), "{ctx}/{name}: dims");
            } else {
                assert_eq!(got, Some(dims), "{ctx}/{name}: dims");
            }
        }
        if let Some(attrs) = array.get("attributes") {
            check_attrs(
                &format!("{ctx}/{name}"),
                attrs,
                meta.map(|m| &m.attrs[..]).unwrap_or(&[]),
            );
        }
        for (dim, c) in array["coords"].as_object().into_iter().flatten() {
            let count = c["count"].as_u64().unwrap();
            let labels = meta.and_then(|m| m.coords.get(dim));
            if count > 64 {
                assert!(
                    labels.is_none(),
                    "{ctx}/{name}: {count} labels for `{dim}` (limit 64)"
                );
                continue;
            }
            let labels = labels.unwrap_or_else(|| panic!("{ctx}/{name}: no labels for `{dim}`"));
            assert_eq!(
                labels.len() as u64,
                count,
                "{ctx}/{name}: label count of `{dim}`"
            );
            if let Some(iso) = c["first_iso"].as_array() {
                for (l, w) in labels.iter().zip(iso) {
                    assert_eq!(
                        Some(l.as_str()),
                        w.as_str(),
                        "{ctx}/{name}: label of `{dim}`"
                    );
                }
            } else if let Some(first) = c["first"].as_array() {
                // A coordinate with CF time units is labelled in ISO 8601 even when the sidecar
                // lists raw values (HDF5 sidecars give no `first_iso`).
                let time_units = c["variable"]
                    .as_str()
                    .and_then(|v| expect["arrays"].as_array()?.iter().find(|a| a["name"] == v))
                    .and_then(|a| a["attributes"]["units"].as_str())
                    .and_then(cftime::parse_units);
                for (l, w) in labels.iter().zip(first) {
                    match (w, &time_units) {
                        (Value::String(s), _) => {
                            assert_eq!(l, s, "{ctx}/{name}: label of `{dim}`")
                        }
                        (v, Some(u)) if l.parse::<f64>().is_err() => assert_eq!(
                            Some(l.clone()),
                            cftime::label(v.as_f64().unwrap(), u, cftime::Calendar::Standard),
                            "{ctx}/{name}: time label of `{dim}`"
                        ),
                        (v, _) => assert_eq!(
                            l.parse::<f64>().ok(),
                            v.as_f64(),
                            "{ctx}/{name}: label of `{dim}`"
                        ),
                    }
                }
            }
        }
    }
    assert_eq!(f.datasets.len(), want.len(), "{ctx}: dataset count");
    check_attrs(&ctx, &expect["global_attributes"], &footer.global_attrs);
    // Provenance: one convert row whose parent is the input digest.
    let row = &footer.history[0];
    assert_eq!(row.op, "convert");
    let digest = format!("sha256:{}", sha256(&input_image(input)));
    assert_eq!(row.parents, vec![digest], "{ctx}: parent digest");
}

/// What the parent digest covers: a file's bytes; for a directory store, every regular file
/// below it in sorted relative-path order, each as `path NUL decimal-length NUL bytes`
/// (docs/FORMAT.md).
fn input_image(input: &Path) -> Vec<u8> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    if !input.is_dir() {
        return std::fs::read(input).unwrap();
    }
    let mut files = Vec::new();
    walk(input, &mut files);
    files.sort();
    let mut image = Vec::new();
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let rel = f
            .strip_prefix(input)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        image.extend(format!("{rel}\0{}\0", bytes.len()).as_bytes());
        image.extend(bytes);
    }
    image
}

#[test]
fn corpus_converts_and_matches_sidecars() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ConvertOptions {
        jobs: 2,
        ..ConvertOptions::default()
    };
    for (input, expect) in inputs() {
        let out = dir.path().join(format!(
            "{}.tet",
            input.file_name().unwrap().to_string_lossy()
        ));
        let result = convert(&input, &out, &opts);
        if let Some(err) = expect["expect_error"].as_str() {
            let e = result.err().unwrap_or_else(|| {
                panic!("{}: converted, expected error {err:?}", input.display())
            });
            assert!(!e.to_string().contains('\n'), "{e}");
            assert!(!out.exists(), "{}: output left behind", input.display());
            continue;
        }
        result.unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        check_output(&input, &out, &expect);
    }
    // Nothing but finished outputs in the directory (no temporary files).
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().to_string();
        assert!(n.ends_with(".tet") && !n.starts_with('.'), "stray file {n}");
    }
}

#[test]
fn zstd_outputs_match_too() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ConvertOptions {
        codec: "zstd:1".parse().unwrap(),
        plan: tet::planner::PlanOptions {
            target_bytes: Some(64),
            ..Default::default()
        },
        jobs: 3,
        ..ConvertOptions::default()
    };
    for (input, expect) in inputs() {
        if expect["expect_error"].is_string() {
            continue;
        }
        let out = dir.path().join("z.tet");
        convert(&input, &out, &opts).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        check_output(&input, &out, &expect);
    }
}
