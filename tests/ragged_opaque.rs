//! Ragged (vlen) and opaque netCDF-4 variables in `.tet` (issue 23): a vlen variable is a CF
//! contiguous ragged array — the values dataset (every element's sequence one after the other)
//! and `<name>_count` (`i64`, one count per element) — and an opaque variable is `u8` with a
//! trailing axis of the blob size. The fixtures (`converters/netcdf/tests/fixtures/
//! make_ragged.py`: netCDF4-python and `ncgen`) are compared value for value with what h5py
//! reads from them (`ragged_expect.json`). Their round trip back to netCDF-4 is in
//! `tests/netcdf_fidelity.rs`.
#![cfg(feature = "netcdf")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tet::format::{DType, TetFile};
use tet::pipeline::ConvertOptions;

use crate::common::convert;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("converters/netcdf/tests/fixtures")
}

/// Every dataset's dtype, shape and decoded bytes, by name.
fn datasets(path: &Path) -> BTreeMap<String, (DType, Vec<u64>, Vec<u8>)> {
    let f = TetFile::open(path).expect("open");
    (0..f.datasets.len())
        .map(|i| {
            let ds = &f.datasets[i];
            let bytes = f.read_dataset(i).expect("read dataset");
            (ds.name.clone(), (ds.dtype, ds.shape.clone(), bytes))
        })
        .collect()
}

/// The little-endian bytes of the value `text` (Python `repr`) of numpy type `dtype`.
fn value_bytes(dtype: &str, text: &str) -> Vec<u8> {
    match dtype {
        "int16" => text.parse::<i16>().expect(text).to_le_bytes().to_vec(),
        "uint8" => vec![text.parse::<u8>().expect(text)],
        "int32" => text.parse::<i32>().expect(text).to_le_bytes().to_vec(),
        "float64" => text.parse::<f64>().expect(text).to_le_bytes().to_vec(),
        other => panic!("no case for {other}"),
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Converts every file of the sidecar `dir/ragged_expect.json` and compares each vlen and
/// opaque dataset with it; the `.tet` files, by fixture name.
fn check_against_h5py(dir: &Path, tmp: &Path) -> BTreeMap<String, PathBuf> {
    let expect: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("ragged_expect.json")).expect("sidecar"),
    )
    .expect("json");
    let mut out = BTreeMap::new();
    let files = expect["files"].as_object().expect("files");
    assert_eq!(files.len(), 2);
    for (file, vars) in files {
        let tet = tmp.join(format!("{file}.tet"));
        convert(&dir.join(file), &tet, &ConvertOptions::default())
            .unwrap_or_else(|e| panic!("convert {file}: {e}"));
        let got = datasets(&tet);
        let mut checked = 0;
        for (name, want) in vars.as_object().expect("vars") {
            let shape: Vec<u64> = serde_json::from_value(want["shape"].clone()).expect("shape");
            // 0-d variables are stored as shape [1].
            let stored: Vec<u64> = if shape.is_empty() { vec![1] } else { shape };
            if let Some(seqs) = want["vlen"].as_array() {
                let dtype = want["dtype"].as_str().expect("dtype");
                let (cd, cs, cb) = &got[&format!("{name}_count")];
                assert_eq!((*cd, cs), (DType::I64, &stored), "{file}: {name}_count");
                let counts: Vec<i64> = seqs
                    .iter()
                    .map(|s| s.as_array().expect("seq").len() as i64)
                    .collect();
                let want_counts: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
                assert_eq!(cb, &want_counts, "{file}: {name}_count values");
                let values: Vec<u8> = seqs
                    .iter()
                    .flat_map(|s| s.as_array().expect("seq").clone())
                    .flat_map(|v| value_bytes(dtype, v.as_str().expect("value")))
                    .collect();
                let (_, vs, vb) = &got[name];
                assert_eq!(
                    vs,
                    &[counts.iter().sum::<i64>() as u64],
                    "{file}: {name} shape"
                );
                assert_eq!(vb, &values, "{file}: {name} values");
            } else {
                let size = want["size"].as_u64().expect("size");
                let blobs: Vec<u8> = want["opaque"]
                    .as_array()
                    .expect("opaque")
                    .iter()
                    .flat_map(|b| hex(b.as_str().expect("hex")))
                    .collect();
                let (d, s, b) = &got[name];
                let mut want_shape = stored.clone();
                if want["shape"].as_array().is_some_and(Vec::is_empty) {
                    want_shape = vec![size];
                } else {
                    want_shape.push(size);
                }
                assert_eq!((*d, s), (DType::U8, &want_shape), "{file}: {name}");
                assert_eq!(b, &blobs, "{file}: {name} bytes");
            }
            checked += 1;
        }
        assert!(checked >= 1, "{file}: {checked} variables checked");
        out.insert(file.clone(), tet);
    }
    out
}

#[test]
fn netcdf_vlen_and_opaque_values_match_h5py() {
    let tmp = tempfile::tempdir().expect("tempdir");
    assert_eq!(check_against_h5py(&fixtures(), tmp.path()).len(), 2);
}

/// h5py's vlen sequences and opaque blobs and a PyTables VLArray
/// (`converters/hdf5/tests/fixtures/make_ragged.py`) are the ragged arrays and bytes h5py
/// reads; exported to netCDF-4 they are vlen and opaque variables, which convert back to the
/// same datasets.
#[test]
fn hdf5_vlen_sequences_and_opaque_match_h5py_and_export_to_netcdf() {
    use tet::export::{self, ExportOptions, Target};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("converters/hdf5/tests/fixtures");
    let tmp = tempfile::tempdir().expect("tempdir");
    let tets = check_against_h5py(&dir, tmp.path());
    assert_eq!(tets.len(), 2);
    for (file, tet) in &tets {
        let out = tmp.path().join(format!("{file}.nc"));
        let opts = ExportOptions {
            target: Some(Target::NETCDF),
            ..ExportOptions::default()
        };
        let report = export::export(tet, &out, &opts).expect("export");
        // (PyTables' `CLASS` attributes are reserved names in netCDF-4: the one warning.)
        let other: Vec<&String> = report
            .warnings
            .iter()
            .filter(|w| !w.contains("`CLASS`"))
            .collect();
        assert!(other.is_empty(), "{file}: {other:?}");
        let back = tmp.path().join(format!("{file}.back.tet"));
        convert(&out, &back, &ConvertOptions::default()).expect("convert back");
        let (a, b) = (datasets(tet), datasets(&back));
        for (name, v) in &a {
            assert_eq!(b.get(name), Some(v), "{file}: {name} after netCDF-4");
        }
        let types = tet_netcdf::dump::dump(&out).expect("dump");
        let vlens = types[0]
            .vars
            .iter()
            .filter(|v| v.xtype.contains("\"vlen\""))
            .count();
        assert!(vlens >= 1, "{file}: no vlen variable in the export");
    }
}

/// NPY raw void (`|V8`, numpy) goes to `.tet` as `u8` [3, 8] and back to NPY as `|V8` with the
/// same bytes (the fixture's values: `converters/npy/tests/fixtures/issue23/make.py`).
#[test]
fn npy_raw_void_exports_back_as_raw_void() {
    use tet::export::{self, ExportOptions, Target};
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("converters/npy/tests/fixtures/issue23/raw_void.npy");
    let tmp = tempfile::tempdir().expect("tempdir");
    let tet = tmp.path().join("v.tet");
    convert(&src, &tet, &ConvertOptions::default()).expect("convert");
    let got = datasets(&tet);
    let (d, s, b) = &got["raw_void"];
    assert_eq!((*d, s.as_slice()), (DType::U8, &[3u64, 8][..]));
    assert_eq!(b, &(0u8..24).collect::<Vec<_>>());
    let out = tmp.path().join("back.npy");
    let opts = ExportOptions {
        target: Some(Target::NPY),
        ..ExportOptions::default()
    };
    export::export(&tet, &out, &opts).expect("export");
    let bytes = std::fs::read(&out).expect("read");
    let header = String::from_utf8_lossy(&bytes[..bytes.len() - 24]);
    assert!(
        header.contains("'descr': '|V8'") && header.contains("'shape': (3,)"),
        "{header}"
    );
    assert_eq!(&bytes[bytes.len() - 24..], b.as_slice());
}
