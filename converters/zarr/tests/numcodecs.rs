//! numcodecs compressors, checksums and filters in stores written by zarr-python + numcodecs
//! (`tests/fixtures/numcodecs/make.py`): every value read here is exactly what zarr-python
//! reads (stored by the generator as little-endian bytes, or as strings), whole arrays and
//! sub-regions that cut chunks, a never-written chunk included; Zarr v2 (`compressor`,
//! `filters`) and v3 (zarr-python's `numcodecs.*` names).

use crate::common;

use serde_json::Value;
use tet_source::{OpenOptions, Source};
use tet_testkit::{json_strs, json_u64s};
use tet_zarr::open_store;

use common::{assert_reads_as, expected_array, fixture_dir, fixture_expect};

fn elem_size(dtype: &str) -> usize {
    match dtype {
        "bool" | "int8" | "uint8" => 1,
        "int16" | "uint16" => 2,
        "int32" | "uint32" | "float32" => 4,
        "int64" | "uint64" | "float64" => 8,
        other => panic!("{other}"),
    }
}

/// Checks every array of `stores` (names in the fixture's `expect.json`); returns how many.
fn check_stores(stores: &[&str]) -> usize {
    let expect = fixture_expect("numcodecs");
    stores
        .iter()
        .map(|store| check_store(store, expect["stores"][store].as_array().unwrap()))
        .sum()
}

fn check_store(store: &str, arrays: &[Value]) -> usize {
    let src = open_store(
        &fixture_dir("numcodecs").join(store),
        &OpenOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{store}: {e}"));
    assert!(src.skipped().is_empty(), "{store}: {:?}", src.skipped());
    let mut checked = 0;
    for a in arrays {
        let name = a["name"].as_str().unwrap();
        let shape = json_u64s(&a["shape"]);
        if let Some(values) = a.get("values") {
            let t = src
                .text_variables()
                .iter()
                .find(|t| t.name == name)
                .unwrap_or_else(|| panic!("{store}: no text variable {name}"));
            assert_eq!(t.shape, shape, "{store}/{name}");
            assert_eq!(t.values, json_strs(values), "{store}/{name}");
            checked += 1;
            continue;
        }
        let (want, idx) = expected_array("numcodecs", store, name, &src);
        let v = &src.variables()[idx];
        assert_eq!(v.shape, shape, "{store}/{name}");
        let elem = elem_size(a["dtype"].as_str().unwrap());
        assert_eq!(v.dtype.size(), elem, "{store}/{name}");
        // The region includes the never-written chunk.
        let ctx = format!("{store}/{name}");
        assert_reads_as(&ctx, &src, idx, &want, &shape, elem, |n| {
            n - n / 3 - 1.min(n / 4)
        });
        checked += 1;
    }
    checked
}

#[test]
fn compressors_and_checksums_decode_as_zarr_python_reads_them() {
    let checked = check_stores(&["codecs_v2.zarr", "codecs_v3.zarr"]);
    assert_eq!(checked, 10 + 11);
}

#[test]
fn v3_stores_use_zarr_python_numcodecs_names() {
    let meta =
        std::fs::read_to_string(fixture_dir("numcodecs").join("codecs_v3.zarr/zstd/zarr.json"))
            .unwrap();
    assert!(meta.contains("\"numcodecs.zstd\""), "{meta}");
    for (array, name) in [
        ("gzip", "numcodecs.gzip"),
        ("blosc_lz4", "numcodecs.blosc"),
        ("crc32c", "numcodecs.crc32c"),
        ("filters_v3.zarr/delta_i8", "numcodecs.delta"),
    ] {
        let path = if array.contains('/') {
            fixture_dir("numcodecs").join(array).join("zarr.json")
        } else {
            fixture_dir("numcodecs")
                .join("codecs_v3.zarr")
                .join(array)
                .join("zarr.json")
        };
        let meta = std::fs::read_to_string(path).unwrap();
        assert!(meta.contains(&format!("\"{name}\"")), "{array}: {meta}");
    }
}

#[test]
fn filters_decode_as_numcodecs_decodes_them() {
    let checked = check_stores(&["filters_v2.zarr", "filters_v3.zarr"]);
    assert_eq!(checked, 14 + 12);
}

/// The delta fixture's values leave int8's range inside a chunk while its steps fit int8:
/// decoding that accumulated in the encoded type (int8) instead of the array's (int16) would
/// be caught.
#[test]
fn delta_fixture_needs_the_wider_accumulator() {
    let want =
        std::fs::read(fixture_dir("numcodecs").join("expect/filters_v2.zarr__delta_i2_i1.le"))
            .unwrap();
    let v: Vec<i16> = want
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert!(v.iter().any(|&x| x > 127), "{v:?}");
}

/// Every filter's Zarr v2 id and v3 name is recorded in the variable's filters.
#[test]
fn filters_are_recorded() {
    for store in ["filters_v2.zarr", "filters_v3.zarr"] {
        let src = open_store(
            &fixture_dir("numcodecs").join(store),
            &OpenOptions::default(),
        )
        .unwrap();
        for v in src.variables() {
            let id = v.name.split('_').next().unwrap();
            assert!(
                v.layout.filters.iter().any(|f| f.contains(id)),
                "{store}/{}: {:?}",
                v.name,
                v.layout.filters
            );
        }
    }
}
