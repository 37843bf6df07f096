//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod s3;
pub mod sidecar;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;

use serde_json::Value;
use tet::format::{
    gather_block, ChunkPayload, Codec, DType, DatasetSpec, Footer, TetFile, TetWriter,
    WriterOptions,
};

/// The names in a directory, sorted.
pub fn only_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// An f32 `.npy` of `rows × 4096` values with some structure (so zstd has work to do).
pub fn write_npy(path: &Path, rows: usize) {
    let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, 4096), }}");
    let mut data = Vec::with_capacity(rows * 4096 * 4);
    let mut x: u32 = 0x9E37_79B9;
    for i in 0..rows * 4096 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        data.extend(((i % 4096) as f32 * 0.5 + (x % 16) as f32).to_le_bytes());
    }
    std::fs::write(path, npy_bytes(&header, &data)).unwrap();
}

/// A version 1.0 `.npy` with this header dictionary, followed by `data`.
pub fn npy_bytes(dict: &str, data: &[u8]) -> Vec<u8> {
    let pad = 64 - (10 + dict.len() + 1) % 64;
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend(((dict.len() + pad + 1) as u16).to_le_bytes());
    b.extend(dict.as_bytes());
    b.extend(std::iter::repeat_n(b' ', pad));
    b.push(b'\n');
    b.extend(data);
    b
}

/// Asserts that a run succeeded (else fails with `what` and its output); its stdout.
pub fn ok(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every dataset of a `.tet` file: its name, dtype, shape and values.
pub fn datasets(path: &Path) -> Vec<(String, String, Vec<u64>, Vec<u8>)> {
    let f = TetFile::open(path).unwrap();
    f.datasets
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let v = f.read_dataset(i).unwrap();
            (
                d.name.clone(),
                d.dtype.name().to_string(),
                d.shape.clone(),
                v,
            )
        })
        .collect()
}

/// The shared corpus and interop files beside the repository.
pub fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

pub fn reference(name: &str) -> PathBuf {
    shared().join("interop/reference-tet").join(name)
}

/// The bytes of a `.tet` file whose footer is not spilled, with its footer JSON edited.
pub fn with_footer(bytes: &[u8], edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let n = bytes.len();
    let len = u64::from_le_bytes(bytes[n - 16..n - 8].try_into().unwrap()) as usize;
    let start = n - 16 - len;
    let mut v: Value = serde_json::from_slice(&bytes[start..n - 16]).unwrap();
    edit(&mut v);
    let json = v.to_string();
    let mut out = bytes[..start].to_vec();
    out.extend(json.as_bytes());
    out.extend((json.len() as u64).to_le_bytes());
    out.extend(&bytes[n - 8..]);
    out
}

/// One dataset with its full C-order data.
#[derive(Debug, Clone)]
pub struct Array {
    pub spec: DatasetSpec,
    pub data: Vec<u8>,
}

impl Array {
    pub fn new(
        name: &str,
        dtype: DType,
        shape: &[u64],
        chunk_shape: &[u64],
        data: Vec<u8>,
    ) -> Self {
        Array {
            spec: DatasetSpec {
                name: name.into(),
                dtype,
                shape: shape.to_vec(),
                chunk_shape: chunk_shape.to_vec(),
            },
            data,
        }
    }
}

/// Encodes chunk `coords` of `a` with `codec` (zstd level 1).
pub fn payload(a: &Array, coords: &[u64], codec: Codec) -> ChunkPayload<'static> {
    let g = tet::format::Grid::new(&a.spec.shape, &a.spec.chunk_shape).unwrap();
    let (start, count) = g.chunk_region(coords);
    let raw = gather_block(&a.data, &a.spec.shape, &start, &count, a.spec.dtype.size());
    match codec {
        Codec::Raw => ChunkPayload::raw(raw),
        Codec::Zstd => ChunkPayload {
            codec,
            raw_len: raw.len() as u64,
            data: zstd::bulk::compress(&raw, 1).unwrap().into(),
        },
        // The extension codecs: zstd over transformed elements.
        c => {
            let mut comp = zstd::bulk::Compressor::new(1).unwrap();
            let (mut scratch, mut out) = (Vec::new(), Vec::new());
            tet::format::codec::ChunkCodec::new(c, a.spec.dtype.size())
                .encode(&raw, &mut comp, &mut scratch, &mut out)
                .unwrap();
            ChunkPayload {
                codec: c,
                raw_len: raw.len() as u64,
                data: out.into(),
            }
        }
    }
}

/// Every (dataset, coords) of the arrays, in index order.
pub fn jobs(arrays: &[Array]) -> Vec<(usize, Vec<u64>)> {
    let mut out = Vec::new();
    for (i, a) in arrays.iter().enumerate() {
        let g = tet::format::Grid::new(&a.spec.shape, &a.spec.chunk_shape).unwrap();
        for l in 0..g.total {
            out.push((i, g.coords(l)));
        }
    }
    out
}

/// Writes `arrays` from one thread, every chunk in index order.
pub fn write_in_order(
    path: &Path,
    arrays: &[Array],
    footer: &Footer,
    window: usize,
    codec_of: &(dyn Fn(usize) -> Codec + Sync),
) {
    let order: Vec<usize> = (0..jobs(arrays).len()).collect();
    write(path, arrays, footer, &order, 1, window, codec_of);
}

/// Writes `arrays` submitting `order` (positions into `jobs(arrays)`) from `threads` threads
/// that pop jobs from one shared queue. `codec_of(job)` picks each chunk's codec.
pub fn write(
    path: &Path,
    arrays: &[Array],
    footer: &Footer,
    order: &[usize],
    threads: usize,
    window: usize,
    codec_of: &(dyn Fn(usize) -> Codec + Sync),
) {
    let all = jobs(arrays);
    let w = TetWriter::create(
        path,
        arrays.iter().map(|a| a.spec.clone()).collect(),
        WriterOptions {
            window,
            ..Default::default()
        },
    )
    .unwrap();
    let queue = Mutex::new(order.iter().rev().copied().collect::<Vec<_>>());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let Some(j) = queue.lock().unwrap().pop() else {
                    break;
                };
                let (d, c) = &all[j];
                w.submit(*d, c, payload(&arrays[*d], c, codec_of(j)))
                    .unwrap();
            });
        }
    });
    w.finish(footer).unwrap();
}

/// python/.venv's Python when it imports `modules` (`.ci/python-setup` installs them); `None`
/// (with a line saying the comparison is skipped) when it does not, which under CI is a broken
/// setup and fails the test.
pub fn python_with(modules: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/.venv/bin/python");
    let ok = std::process::Command::new(&p)
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok || std::env::var_os("CI").is_none(),
        "python/.venv lacks {modules} under CI: run .ci/python-setup first"
    );
    if !ok {
        eprintln!("python/.venv lacks {modules} (run .ci/python-setup): Python comparison skipped");
    }
    ok.then_some(p)
}

/// Converts `input` into `output` under `opts` as a front end does: one request run by
/// [`tet::run`] (its progress and cancel carried in the context).
pub fn convert(
    input: &Path,
    output: &Path,
    opts: &tet::pipeline::ConvertOptions,
) -> Result<tet::pipeline::ConvertReport, tet::pipeline::ConvertError> {
    let cx = tet::Context {
        progress: opts.progress.clone(),
        cancel: opts.cancel.clone(),
        ..tet::Context::default()
    };
    tet::run(
        &tet::Request::new([input], output, opts.settings.clone()),
        &cx,
    )
}
