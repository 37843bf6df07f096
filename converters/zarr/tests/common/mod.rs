//! Helpers shared by the tests: writing stores with zarrs, the fixtures zarr-python wrote and
//! what it reads from them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tet_source::{AttrValue, Fact, Source};
use tet_testkit::{first_difference, private_fact, read_all, sub_block, var_index, XorShift};
use zarrs::array::{Array, ArrayBytes, ArraySubset};
use zarrs::filesystem::FilesystemStore;

/// The value of the fact `key`; every fact of a Zarr variable is a [`Fact::Private`] of the
/// `zarr` format (checked here).
pub fn zarr_fact<'a>(facts: &'a [Fact], key: &str) -> Option<&'a AttrValue> {
    private_fact(facts, "zarr", key)
}

/// Deterministic pseudo-random bytes (xorshift).
pub fn bytes(seed: u64, n: usize) -> Vec<u8> {
    XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1).bytes(n)
}

/// Finite float32 values (as LE bytes) so that NaN never hides a difference.
pub fn f32_bytes(seed: u64, n: usize) -> Vec<u8> {
    bytes(seed, n * 2)
        .chunks_exact(2)
        .flat_map(|c| (f32::from(i16::from_le_bytes([c[0], c[1]])) * 0.25).to_le_bytes())
        .collect()
}

/// Writes `metadata` as the node's `zarr.json` (or `.zarray` when `v2`) under `root/rel`.
pub fn write_meta(root: &Path, rel: &str, file: &str, metadata: &str) {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(file), metadata).unwrap();
}

/// Stores `data` (C order, native bytes) into `subset` of the array at `rel` with zarrs.
pub fn store(root: &Path, rel: &str, start: &[u64], shape: &[u64], data: Vec<u8>) {
    let fs = Arc::new(FilesystemStore::new(root).unwrap());
    let array = Array::open(fs, &format!("/{rel}")).unwrap();
    let subset = ArraySubset::new_with_start_shape(start.to_vec(), shape.to_vec()).unwrap();
    array
        .store_array_subset(&subset, ArrayBytes::new_flen(data))
        .unwrap();
}

/// A fixture folder of this crate's tests (`tests/fixtures/<name>`).
pub fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The `expect.json` a fixture generator wrote beside its stores.
pub fn fixture_expect(name: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixture_dir(name).join("expect.json")).unwrap()).unwrap()
}

/// The little-endian bytes a fixture generator stored for `array` of `store` (what zarr-python
/// reads), and the index of that array's variable in `src`.
pub fn expected_array(
    fixture: &str,
    store: &str,
    array: &str,
    src: &dyn Source,
) -> (Vec<u8>, usize) {
    let want = std::fs::read(
        fixture_dir(fixture)
            .join("expect")
            .join(format!("{store}__{array}.le")),
    )
    .unwrap_or_else(|e| panic!("{fixture}: {store}__{array}.le: {e}"));
    (want, var_index(src, array))
}

/// Variable `idx` of `src` reads as `want` (what zarr-python reads: little-endian, C order, of
/// `shape`, elements of `elem` bytes), whole and over the region that starts a third into each
/// axis and spans `count(n)` of an axis of `n` (a region that cuts chunks: partial decodes).
pub fn assert_reads_as(
    ctx: &str,
    src: &dyn Source,
    idx: usize,
    want: &[u8],
    shape: &[u64],
    elem: usize,
    count: impl Fn(u64) -> u64,
) {
    let got = read_all(src, idx);
    if let Some(d) = first_difference(&got, want, elem) {
        panic!("{ctx}: {d}");
    }
    let start: Vec<u64> = shape.iter().map(|&n| n / 3).collect();
    let count: Vec<u64> = shape.iter().map(|&n| count(n)).collect();
    let n: u64 = count.iter().product();
    let mut part = vec![0u8; n as usize * elem];
    src.read_region(idx, &start, &count, &mut part)
        .unwrap_or_else(|e| panic!("{ctx} region {start:?}+{count:?}: {e}"));
    let want_part = sub_block(want, shape, elem, &start, &count);
    if let Some(d) = first_difference(&part, &want_part, elem) {
        panic!("{ctx} region {start:?}+{count:?}: {d}");
    }
}
