//! Zarr v2 filter chains zarr-python reads and tet-zarr once failed on
//! (`tests/fixtures/filter_chains/make.py`): a `filters` list of `fixedscaleoffset` then `delta`
//! (decoded `delta` first; once "invalid byte range" or a wrong decoded size, from the cache
//! zarrs put between them) and Fortran-order arrays with `delta` (once "out-of-bounds"); and
//! the other order, `delta` then `fixedscaleoffset`, with and without compressors. Every value
//! read here is exactly what zarr-python reads, whole arrays, sub-regions that cut chunks and
//! every element alone, a never-written chunk and edge chunks included.

use crate::common;

use tet_source::{OpenOptions, Source};
use tet_testkit::json_u64s;
use tet_zarr::open_store;

use common::{assert_reads_as, expected_array, fixture_dir, fixture_expect};

const STORE: &str = "chains_v2.zarr";

fn check(prefix: &str) -> usize {
    let expect = fixture_expect("filter_chains");
    let src = open_store(
        &fixture_dir("filter_chains").join(STORE),
        &OpenOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{STORE}: {e}"));
    assert!(src.skipped().is_empty(), "{:?}", src.skipped());
    let mut checked = 0;
    for a in expect["stores"][STORE].as_array().unwrap() {
        let name = a["name"].as_str().unwrap();
        if !name.starts_with(prefix) {
            continue;
        }
        let shape = json_u64s(&a["shape"]);
        let (want, idx) = expected_array("filter_chains", STORE, name, &src);
        let v = &src.variables()[idx];
        assert_eq!(v.shape, shape, "{name}");
        let elem = v.dtype.size();
        assert_reads_as(name, &src, idx, &want, &shape, elem, |n| {
            n - n / 3 - 1.min(n / 4)
        });
        // Every single element on its own (partial decodes of one value per chunk).
        let n: u64 = shape.iter().product();
        for flat in 0..n {
            let mut rest = flat;
            let mut at = vec![0u64; shape.len()];
            for (d, &s) in shape.iter().enumerate().rev() {
                at[d] = rest % s;
                rest /= s;
            }
            let mut one = vec![0u8; elem];
            src.read_region(idx, &at, &vec![1; shape.len()], &mut one)
                .unwrap_or_else(|e| panic!("{name} at {at:?}: {e}"));
            let off = flat as usize * elem;
            assert_eq!(one, want[off..off + elem], "{name} at {at:?}");
        }
        checked += 1;
    }
    checked
}

#[test]
fn delta_and_fixedscaleoffset_chains_decode_as_zarr_python_reads_them() {
    assert_eq!(check("delta_fso"), 5);
    assert_eq!(check("fso_delta"), 1);
}

#[test]
fn fortran_order_with_delta_decodes_as_zarr_python_reads_it() {
    assert_eq!(check("f_"), 5);
}
