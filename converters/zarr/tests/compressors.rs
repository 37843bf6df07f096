//! numcodecs compressors and checksums zarrs lacks (`lz4`, `lzma`, `crc32`,
//! `jenkins_lookup3`, `zfpy`) or has behind a feature (`pcodec`), and zarr-python 3's
//! argument-less `numcodecs.blosc` / `numcodecs.bz2` configurations, in stores written by
//! zarr-python + numcodecs (`tests/fixtures/compressors/make.py`): every value read here is
//! exactly what zarr-python reads (lossy zfp modes included), whole arrays and sub-regions
//! that cut chunks, a never-written chunk included; Zarr v2 (`compressor`) and v3 (zarr-python's
//! `numcodecs.*` names).

use crate::common;

use serde_json::Value;
use tet_source::{OpenOptions, Source};
use tet_testkit::json_u64s;
use tet_zarr::open_store;

use common::{assert_reads_as, expected_array, fixture_dir, fixture_expect};

fn check_store(store: &str) -> Vec<String> {
    let expect = fixture_expect("compressors");
    let arrays = expect["stores"][store].as_array().unwrap();
    let src = open_store(
        &fixture_dir("compressors").join(store),
        &OpenOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{store}: {e}"));
    assert!(src.skipped().is_empty(), "{store}: {:?}", src.skipped());
    let mut checked = Vec::new();
    for a in arrays {
        let name = a["name"].as_str().unwrap();
        let shape = json_u64s(&a["shape"]);
        let (want, idx) = expected_array("compressors", store, name, &src);
        let v = &src.variables()[idx];
        assert_eq!(v.shape, shape, "{store}/{name}");
        let elem = v.dtype.size();
        assert_eq!(
            want.len() as u64,
            shape.iter().product::<u64>() * elem as u64,
            "{store}/{name}"
        );
        let ctx = format!("{store}/{name}");
        assert_reads_as(&ctx, &src, idx, &want, &shape, elem, |n| {
            n - n / 3 - 1.min(n / 4)
        });
        checked.push(name.to_string());
    }
    checked
}

#[test]
fn v2_compressors_decode_as_zarr_python_reads_them() {
    let checked = check_store("compressors_v2.zarr");
    assert_eq!(checked.len(), 14, "{checked:?}");
}

#[test]
fn v3_numcodecs_compressors_decode_as_zarr_python_reads_them() {
    let checked = check_store("compressors_v3.zarr");
    assert_eq!(checked.len(), 16, "{checked:?}");
    for name in ["blosc_defaults", "bz2_defaults", "zfpy_accuracy", "pcodec"] {
        assert!(checked.iter().any(|c| c == name), "{name}: {checked:?}");
    }
}

/// The fixtures hold what the tests claim: zarr-python's names, the empty Blosc/BZ2
/// configurations, zfpy as the only (array-to-bytes) codec.
#[test]
fn fixtures_use_zarr_python_names_and_configurations() {
    let meta = |array: &str| -> Value {
        let path = fixture_dir("compressors")
            .join("compressors_v3.zarr")
            .join(array)
            .join("zarr.json");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    };
    for (array, name) in [
        ("lz4", "numcodecs.lz4"),
        ("lzma", "numcodecs.lzma"),
        ("crc32", "numcodecs.crc32"),
        ("jenkins_lookup3", "numcodecs.jenkins_lookup3"),
        ("pcodec", "numcodecs.pcodec"),
        ("zfpy_reversible", "numcodecs.zfpy"),
    ] {
        let m = meta(array);
        assert!(
            m["codecs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["name"] == name),
            "{array}: {m}"
        );
    }
    for (array, name) in [
        ("blosc_defaults", "numcodecs.blosc"),
        ("bz2_defaults", "numcodecs.bz2"),
    ] {
        let codecs = meta(array)["codecs"].clone();
        let c = codecs
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{array}: {codecs}"))
            .clone();
        assert!(
            c.get("configuration")
                .is_none_or(|v| v.as_object().unwrap().is_empty()),
            "{array}: {c}"
        );
    }
    // zfpy as the only codec: no `bytes` codec in the metadata.
    let zfpy = meta("zfpy_reversible");
    assert_eq!(zfpy["codecs"].as_array().unwrap().len(), 1, "{zfpy}");
}

/// A flipped payload byte is a read error for the checksums, never silently wrong values.
#[test]
fn corrupted_checksummed_chunks_are_read_errors() {
    for (array, chunk) in [("crc32", "0"), ("jenkins_lookup3", "0"), ("crc32_end", "0")] {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.zarr");
        copy_dir(
            &fixture_dir("compressors").join("compressors_v2.zarr"),
            &store,
        );
        let path = store.join(array).join(chunk);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[6] ^= 0x10;
        std::fs::write(&path, bytes).unwrap();
        let src = open_store(&store, &OpenOptions::default()).unwrap();
        let idx = tet_testkit::var_index(&src, array);
        let n = src.variables()[idx].shape[0];
        let elem = src.variables()[idx].dtype.size();
        let mut buf = vec![0u8; n as usize * elem];
        let err = src
            .read_region(idx, &[0], &[n], &mut buf)
            .expect_err(array)
            .to_string();
        assert!(err.contains("checksum"), "{array}: {err}");
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
