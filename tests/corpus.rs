//! Every input of the public corpus whose importer is compiled in converts, and the output
//! matches its `.expect.json` sidecar value for value: sha256 of the stored bytes, dtype, shape,
//! dims, coordinate labels of short axes, attributes. `expect_error` inputs are refused with no
//! output. Every output passes `verify --deep` without warnings, and its raw payloads start at a
//! multiple of their element size.

use crate::common;

use std::path::Path;

use common::sidecar::{check_attrs, expected_datasets, inputs, sha256};
use serde_json::Value;
use tet::format::verify::{verify, Depth};
use tet::format::{Codec, TetFile};
use tet::meta::cftime;
use tet::pipeline::ConvertOptions;

use crate::common::convert;

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
    // Raw payloads at a multiple of their element size (docs/FORMAT.md, "Payload alignment"),
    // from the index as the reader parsed it.
    for e in &f.entries {
        let d = &f.datasets[e.dataset_id as usize];
        if e.codec() == Some(Codec::Raw) {
            assert_eq!(
                e.payload_offset % d.dtype.size() as u64,
                0,
                "{ctx}/{}: raw payload at {} ({})",
                d.name,
                e.payload_offset,
                d.dtype
            );
        }
    }
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
    if !input.is_dir() {
        return std::fs::read(input).unwrap();
    }
    let mut image = Vec::new();
    for f in tet_testkit::files_below(input) {
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
    let opts = ConvertOptions::from(tet::settings::Settings {
        jobs: Some(2),
        ..Default::default()
    });
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
    let opts = ConvertOptions::from(tet::settings::Settings {
        codec: "zstd:1".parse().unwrap(),
        chunk_bytes: Some(64),
        jobs: Some(3),
        ..Default::default()
    });
    for (input, expect) in inputs() {
        if expect["expect_error"].is_string() {
            continue;
        }
        let out = dir.path().join("z.tet");
        convert(&input, &out, &opts).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        check_output(&input, &out, &expect);
    }
}
