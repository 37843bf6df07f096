//! numcodecs' `fixedscaleoffset` filter, in stores written by zarr-python + numcodecs
//! (`tests/fixtures/fixedscaleoffset/make.py`): every value read here has exactly the bits
//! zarr-python reads (stored by the generator as little-endian bytes), whole arrays and
//! sub-regions, Zarr v2 (filters) and v3 (`numcodecs.fixedscaleoffset`).

use crate::common;

use tet_source::{ElementType, OpenOptions, Source};
use tet_testkit::{json_u64s, read_all};
use tet_zarr::open_store;

use common::{assert_reads_as, expected_array, fixture_dir, fixture_expect};

#[test]
fn values_are_bit_for_bit_what_numcodecs_decodes() {
    let expect = fixture_expect("fixedscaleoffset");
    let stores = expect["stores"].as_object().unwrap();
    assert_eq!(stores.len(), 2);
    let mut checked = 0;
    for (store, arrays) in stores {
        let src = open_store(
            &fixture_dir("fixedscaleoffset").join(store),
            &OpenOptions::default(),
        )
        .unwrap();
        assert!(src.skipped().is_empty(), "{store}: {:?}", src.skipped());
        for a in arrays.as_array().unwrap() {
            let name = a["name"].as_str().unwrap();
            let (want, idx) = expected_array("fixedscaleoffset", store, name, &src);
            let v = &src.variables()[idx];
            let shape = json_u64s(&a["shape"]);
            assert_eq!(v.shape, shape, "{store}/{name}");
            let (ty, elem) = match a["dtype"].as_str().unwrap() {
                "float64" => (ElementType::F64, 8),
                "float32" => (ElementType::F32, 4),
                "int32" => (ElementType::I32, 4),
                other => panic!("{other}"),
            };
            assert_eq!(v.dtype, ty, "{store}/{name}");
            assert!(
                v.layout
                    .filters
                    .iter()
                    .any(|f| f.contains("fixedscaleoffset")),
                "{store}/{name}: the filter is recorded: {:?}",
                v.layout.filters
            );

            let ctx = format!("{store}/{name}");
            assert_reads_as(&ctx, &src, idx, &want, &shape, elem, |n| n - n / 3 - n / 4);
            checked += 1;
        }
    }
    assert_eq!(checked, 20);
}

/// zarrs' own codec computes in f32; the fixtures are chosen so that it would be caught: for
/// float64 data decoded from integers, the f32 result differs from the f64 one.
#[test]
fn fixtures_tell_f32_from_f64_arithmetic() {
    let want = std::fs::read(fixture_dir("fixedscaleoffset").join("expect/fso_v2.zarr__f8_i2.le"))
        .unwrap();
    let differs = want.chunks_exact(8).take(50).any(|c| {
        let v = f64::from_le_bytes(c.try_into().unwrap());
        let enc = ((v + 12.5) * 333.3).round();
        f64::from((enc as f32) / 333.3f32 + (-12.5f32)) != v
    });
    assert!(differs);
}

#[test]
fn unsupported_configurations_are_unsupported_items() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("s.zarr");
    std::fs::create_dir_all(root.join("half")).unwrap();
    std::fs::create_dir_all(root.join("ok")).unwrap();
    std::fs::write(root.join(".zgroup"), r#"{"zarr_format": 2}"#).unwrap();
    let zarray = |dtype: &str| {
        format!(
            r#"{{"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "{dtype}",
            "compressor": null, "fill_value": 0, "order": "C",
            "filters": [{{"id": "fixedscaleoffset", "scale": 10, "offset": 0,
                         "dtype": "{dtype}", "astype": "|u1"}}]}}"#
        )
    };
    std::fs::write(root.join("half/.zarray"), zarray("<f2")).unwrap();
    std::fs::write(root.join("ok/.zarray"), zarray("<f8")).unwrap();
    std::fs::write(root.join("ok/0"), [0u8, 1, 2, 255]).unwrap();

    let err = open_store(&root, &OpenOptions::default()).unwrap_err();
    assert!(
        matches!(err, tet_source::SourceError::Unsupported { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("fixedscaleoffset"), "{err}");

    let opts = OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    };
    let src = open_store(&root, &opts).unwrap();
    assert_eq!(src.skipped().len(), 1, "{:?}", src.skipped());
    assert_eq!(src.variables().len(), 1);
    let got = read_all(&src, 0);
    let want: Vec<u8> = [0.0f64, 0.1, 0.2, 25.5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(got, want);
}
