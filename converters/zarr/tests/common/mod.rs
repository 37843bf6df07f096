//! Helpers shared by the tests: writing stores with zarrs, reading variables back.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tet_source::{ElementType, Source};
use zarrs::array::{Array, ArrayBytes, ArraySubset};
use zarrs::filesystem::FilesystemStore;

pub fn corpus_dir() -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/public/zarr"
    ))
    .to_path_buf()
}

/// Deterministic pseudo-random bytes (xorshift).
pub fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
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

/// The whole variable, read in one call.
pub fn read_all(src: &dyn Source, var: usize) -> Vec<u8> {
    let v = &src.variables()[var];
    let n = v.byte_len().unwrap() as usize;
    let mut out = vec![0xAAu8; n];
    let start = vec![0; v.shape.len()];
    src.read_region(var, &start, &v.shape, &mut out)
        .unwrap_or_else(|e| panic!("{}: {e}", v.name));
    out
}

/// The C-order sub-block `start..start+count` of a full buffer of `shape`.
pub fn sub_block(full: &[u8], shape: &[u64], elem: usize, start: &[u64], count: &[u64]) -> Vec<u8> {
    let n: u64 = count.iter().product();
    let mut out = Vec::with_capacity(n as usize * elem);
    let rank = shape.len();
    let mut idx = vec![0u64; rank];
    for _ in 0..n {
        let mut off = 0u64;
        for d in 0..rank {
            off = off * shape[d] + start[d] + idx[d];
        }
        let o = off as usize * elem;
        out.extend_from_slice(&full[o..o + elem]);
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < count[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Bytes as the sidecars hash them: the engine's widening (i8 → i16, bool → u8, bf16 → f32).
pub fn widened(dtype: ElementType, bytes: &[u8]) -> Vec<u8> {
    match dtype {
        ElementType::I8 => bytes
            .iter()
            .flat_map(|&b| i16::from(b as i8).to_le_bytes())
            .collect(),
        ElementType::BF16 => bytes
            .chunks_exact(2)
            .flat_map(|c| {
                f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16).to_le_bytes()
            })
            .collect(),
        _ => bytes.to_vec(),
    }
}

/// Copies a directory tree.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            copy_tree(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

/// Every regular file below `dir`, sorted.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_below(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
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

/// The first element whose bytes differ, for a readable failure (floats of 4 and 8 bytes are
/// shown as numbers too).
pub fn first_difference(got: &[u8], want: &[u8], elem: usize) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} bytes, expected {}", got.len(), want.len()));
    }
    got.chunks_exact(elem)
        .zip(want.chunks_exact(elem))
        .position(|(g, w)| g != w)
        .map(|i| {
            let (g, w) = (&got[i * elem..][..elem], &want[i * elem..][..elem]);
            let num = |b: &[u8]| match elem {
                8 => format!(" ({:e})", f64::from_le_bytes(b.try_into().unwrap())),
                4 => format!(" ({:e})", f32::from_le_bytes(b.try_into().unwrap())),
                _ => String::new(),
            };
            format!(
                "element {i}: got {g:?}{}, zarr-python reads {w:?}{}",
                num(g),
                num(w)
            )
        })
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
    .unwrap();
    let idx = src
        .variables()
        .iter()
        .position(|v| v.name == array)
        .unwrap_or_else(|| panic!("{store}: no variable {array}"));
    (want, idx)
}
