//! Blosc-compressed Zarr stores (zarr-python's default compressor for v2) convert to the values
//! zarr-python reads: every Blosc compressor and shuffle mode, v2 and v3, with a chunk never
//! written (the fill value). Fixtures and sidecar: `fixtures/zarr/make_blosc.py`.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tet::format::TetFile;

#[test]
fn blosc_stores_convert_to_the_values_zarr_python_reads() {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/zarr");
    let expect: Value =
        serde_json::from_slice(&std::fs::read(fixtures.join("blosc.expect.json")).unwrap())
            .unwrap();
    let stores = expect["stores"].as_object().unwrap();
    assert_eq!(stores.len(), 2);
    let dir = tempfile::tempdir().unwrap();
    for (store, arrays) in stores {
        let out = dir.path().join(format!("{store}.tet"));
        let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
            .arg(fixtures.join(store))
            .arg(&out)
            .arg("-q")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{store}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let o = Command::new(env!("CARGO_BIN_EXE_tet"))
            .args(["verify", "--deep", "-q"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{store}: verify");

        let f = TetFile::open(&out).unwrap();
        let footer = f.footer().unwrap().unwrap().clone();
        let arrays = arrays.as_array().unwrap();
        assert_eq!(f.datasets.len(), arrays.len(), "{store}");
        for a in arrays {
            let name = a["name"].as_str().unwrap();
            let what = format!("{store}/{name} ({})", a["codec"]);
            let id = f
                .dataset_id(name)
                .unwrap_or_else(|| panic!("{what}: missing"));
            let ds = &f.datasets[id];
            let want_dtype = match a["dtype"].as_str().unwrap() {
                "float32" => "f32",
                "float64" => "f64",
                "int16" => "i16",
                "int64" => "i64",
                "uint32" => "u32",
                "uint8" => "u8",
                other => panic!("{what}: dtype {other} not in the fixture list"),
            };
            assert_eq!(ds.dtype.name(), want_dtype, "{what}");
            let shape: Vec<u64> = serde_json::from_value(a["shape"].clone()).unwrap();
            assert_eq!(ds.shape, shape, "{what}");
            let dims: Option<Vec<String>> = serde_json::from_value(a["dims"].clone()).unwrap();
            assert_eq!(footer.datasets[name].dim_names, dims, "{what}");
            let bytes = f.read_dataset(id).unwrap();
            let hex: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(hex, a["sha256"].as_str().unwrap(), "{what}: values");
        }
    }
}
