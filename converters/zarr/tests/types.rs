//! Zarr data types in stores written by zarr-python (`tests/fixtures/types/make.py`): v2
//! datetime64/timedelta64 arrays read as the int64 counts zarr-python reads (NaT, big-endian,
//! multiplied units, a never-written chunk), with the data type recorded as for v3; and a
//! structured array, split into one variable per field (see also `structured.rs`).

use crate::common;

use serde_json::Value;
use tet_source::{AttrValue, ElementType, OpenOptions, Source};
use tet_testkit::{read_all, sub_block, var_index};
use tet_zarr::open_store;

use common::{fixture_dir, fixture_expect, zarr_fact};

#[test]
fn v2_datetimes_read_as_zarr_python_reads_them() {
    let expect = fixture_expect("types");
    let arrays = expect["stores"]["time_v2.zarr"].as_array().unwrap();
    let src = open_store(
        &fixture_dir("types").join("time_v2.zarr"),
        &OpenOptions::default(),
    )
    .unwrap();
    assert!(src.skipped().is_empty(), "{:?}", src.skipped());
    assert_eq!(arrays.len(), 4);
    for a in arrays {
        let name = a["name"].as_str().unwrap();
        let want =
            std::fs::read(fixture_dir("types").join(format!("expect/time_v2.zarr__{name}.le")))
                .unwrap();
        let idx = var_index(&src, name);
        let v = &src.variables()[idx];
        assert_eq!(v.dtype, ElementType::I64, "{name}");
        let got = read_all(&src, idx);
        assert_eq!(got, want, "{name}");
        let n = v.shape[0];
        let (start, count) = ([1u64], [n - 2]);
        let mut part = vec![0u8; (n - 2) as usize * 8];
        src.read_region(idx, &start, &count, &mut part).unwrap();
        assert_eq!(
            part,
            sub_block(&want, &v.shape, 8, &start, &count),
            "{name}"
        );
        // The data type is recorded as the v3 one: unit and scale factor.
        let dt = zarr_fact(&v.facts, "zarr_data_type");
        let Some(AttrValue::Text(dt)) = dt else {
            panic!("{name}: no zarr_data_type fact: {:?}", v.facts)
        };
        let dt: Value = serde_json::from_str(dt).unwrap();
        let conf = &dt["configuration"];
        assert_eq!(conf["unit"], a["unit"], "{name}: {dt}");
        assert_eq!(conf["scale_factor"], a["scale_factor"], "{name}: {dt}");
    }
}

#[test]
fn structured_arrays_are_split_into_fields() {
    for store in ["structured_v2.zarr", "structured_v3.zarr"] {
        let path = fixture_dir("types").join(store);
        let src = open_store(&path, &OpenOptions::default()).unwrap();
        assert!(src.skipped().is_empty(), "{store}: {:?}", src.skipped());
        let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["plain", "rec/x", "rec/y"], "{store}");
        assert_eq!(read_all(&src, 0), [4u8, 0, 5, 0, 6, 0], "{store}");
        let x: Vec<u8> = [1i32, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        let y: Vec<u8> = [0.5f64, 1.5, 2.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(read_all(&src, 1), x, "{store}");
        assert_eq!(read_all(&src, 2), y, "{store}");
    }
}

/// v2 raw void (`|V8`, zarrs' `r64`) and v3 `raw_bytes` are u8 with a trailing axis of 8
/// bytes, recorded as opaque, with the bytes zarr-python reads; a region cuts both axes.
#[test]
fn raw_void_is_u8_with_a_trailing_byte_axis() {
    for store in ["raw_v2.zarr", "raw_v3.zarr"] {
        raw_store(store);
    }
}

fn raw_store(store: &str) {
    let expect = fixture_expect("types");
    let a = &expect["stores"][store][0];
    assert_eq!(a["dtype"], "|V8");
    let src = open_store(&fixture_dir("types").join(store), &OpenOptions::default()).unwrap();
    let idx = var_index(&src, "blob");
    let v = &src.variables()[idx];
    assert_eq!(
        (v.dtype, v.shape.as_slice()),
        (ElementType::U8, &[5u64, 8][..])
    );
    assert!(v
        .facts
        .iter()
        .any(|f| matches!(f, tet_source::Fact::Opaque { .. })));
    let want =
        std::fs::read(fixture_dir("types").join(format!("expect/{store}__blob.le"))).unwrap();
    assert_eq!(want.len(), 40);
    assert_eq!(read_all(&src, idx), want);
    let (start, count) = ([1u64, 2], [3u64, 4]);
    let mut part = vec![0u8; 12];
    src.read_region(idx, &start, &count, &mut part).unwrap();
    assert_eq!(part, sub_block(&want, &v.shape, 1, &start, &count));
}
