//! Inflate speed of the deflate filter's zlib streams, flate2 against libdeflate, on realistic
//! chunks: 4 MiB f32 chunks (1, 1024, 1024) of the benchmark field (`benches/gen_npy.rs`: a
//! smooth field plus quantised noise), written by libhdf5 (so compressed by the system zlib, as
//! netCDF-C and h5py write them) with shuffle + deflate 1, shuffle + deflate 4 and plain deflate 1
//! (what `nccopy -d 1` writes), then read back as stored bytes.
//!
//! ```sh
//! cargo run --release -p tet-hdf5 --example inflate_bench                 # flate2: miniz_oxide
//! cargo run --release -p tet -p tet-hdf5 --example inflate_bench          # flate2: zlib-rs (as in tet)
//! cargo run --release -p tet-hdf5 --example inflate_bench -- [ROUNDS] [FILE:DATASET ...]
//! ```
//!
//! The flate2 backend is chosen by cargo's feature unification: alone, tet-hdf5 builds flate2
//! with miniz_oxide; with `tet` in the build, `zip` turns on flate2's `zlib-rs` backend, which
//! then wins (`cargo tree -e features -i flate2`). Every decoder is timed over all chunks, for
//! ROUNDS rounds (default 7), interleaved; the median round is printed as MiB/s of output.

use std::os::unix::fs::FileExt;
use std::time::Instant;

use tet_hdf5::chunks::{ChunkAccess, ChunkedVar};

const PLANES: usize = 8;
const Y: usize = 1024;
const X: usize = 1024;

/// The benchmark field of `benches/gen_npy.rs`, first `PLANES` time steps.
fn field() -> Vec<f32> {
    let rows: Vec<f32> = (0..Y).map(|j| (j as f32 / 97.0).sin() * 20.0).collect();
    let cols: Vec<f32> = (0..X).map(|i| (i as f32 / 61.0).cos()).collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(PLANES * Y * X);
    for k in 0..PLANES {
        for r in &rows {
            for c in &cols {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let noise = ((state >> 40) % 64) as f32 * 0.01;
                let v = 280.0 + r * c + k as f32 * 0.01 + noise;
                out.push((v * 100.0).round() / 100.0);
            }
        }
    }
    out
}

/// The stored (still filtered) bytes of every allocated chunk of `dataset` in `path`, and the
/// chunk's decoded size.
fn stored_chunks(path: &std::path::Path, dataset: &str, limit: usize) -> (Vec<Vec<u8>>, usize) {
    let ChunkAccess::Direct(cv) = ChunkedVar::open(path, dataset).expect("open") else {
        panic!("{}:{dataset}: not read directly", path.display());
    };
    let file = std::fs::File::open(path).unwrap();
    let grid: Vec<u64> = cv
        .shape()
        .iter()
        .zip(cv.chunk_shape())
        .map(|(&s, &c)| s.div_ceil(c))
        .collect();
    let chunk_bytes = cv.chunk_shape().iter().product::<u64>() as usize * cv.elem_size();
    let mut out = Vec::new();
    let mut g = vec![0u64; grid.len()];
    'grid: while out.len() < limit {
        if let Some(loc) = cv.chunk_location(&g) {
            let mut buf = vec![0u8; loc.size as usize];
            file.read_exact_at(&mut buf, loc.offset).unwrap();
            out.push(buf);
        }
        let mut a = g.len();
        loop {
            if a == 0 {
                break 'grid;
            }
            a -= 1;
            g[a] += 1;
            if g[a] < grid[a] {
                break;
            }
            g[a] = 0;
        }
    }
    (out, chunk_bytes)
}

/// Today's decoder before this benchmark: flate2 `Decompress`, growing the output.
fn flate2_inflate(input: &[u8], max: usize) -> Vec<u8> {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut d = Decompress::new(true);
    let mut out: Vec<u8> = Vec::with_capacity(max.saturating_add(1).min(64 << 20));
    loop {
        let consumed = (d.total_in() as usize).min(input.len());
        let status = d
            .decompress_vec(&input[consumed..], &mut out, FlushDecompress::Finish)
            .unwrap();
        if status == Status::StreamEnd {
            break;
        }
        assert!(out.len() < out.capacity(), "chunk larger than expected");
    }
    out
}

/// libdeflate, one decompressor reused, output sized up front.
fn libdeflate_inflate(d: &mut libdeflater::Decompressor, input: &[u8], max: usize) -> Vec<u8> {
    let mut out = vec![0u8; max];
    let n = d.zlib_decompress(input, &mut out).unwrap();
    out.truncate(n);
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn bench(label: &str, chunks: &[Vec<u8>], chunk_bytes: usize, rounds: usize) {
    let stored: usize = chunks.iter().map(Vec::len).sum();
    let decoded = (chunks.len() * chunk_bytes) as f64;
    let reference: Vec<Vec<u8>> = chunks
        .iter()
        .map(|c| flate2_inflate(c, chunk_bytes))
        .collect();
    let mut d = libdeflater::Decompressor::new();
    let mut t: [Vec<f64>; 4] = Default::default();
    let mut reused = vec![0u8; chunk_bytes];
    for _ in 0..rounds {
        // flate2 as it was
        let s = Instant::now();
        for (c, r) in chunks.iter().zip(&reference) {
            let o = flate2_inflate(c, chunk_bytes);
            assert_eq!(o.len(), r.len());
        }
        t[0].push(s.elapsed().as_secs_f64());
        // libdeflate, direct
        let s = Instant::now();
        for (c, r) in chunks.iter().zip(&reference) {
            let o = libdeflate_inflate(&mut d, c, chunk_bytes);
            assert_eq!(o.len(), r.len());
        }
        t[1].push(s.elapsed().as_secs_f64());
        // the library's `inflate` as built now
        let s = Instant::now();
        for (c, r) in chunks.iter().zip(&reference) {
            let o = tet_hdf5::filters::inflate(c, chunk_bytes).unwrap();
            assert_eq!(o.len(), r.len());
        }
        t[2].push(s.elapsed().as_secs_f64());
        // libdeflate into one reused buffer: what allocating and zeroing the output costs
        let s = Instant::now();
        for (c, r) in chunks.iter().zip(&reference) {
            let n = d.zlib_decompress(c, &mut reused).unwrap();
            assert_eq!(n, r.len());
        }
        t[3].push(s.elapsed().as_secs_f64());
    }
    // Same bytes from every decoder.
    for (c, r) in chunks.iter().zip(&reference) {
        assert!(libdeflate_inflate(&mut d, c, chunk_bytes) == *r);
        assert!(tet_hdf5::filters::inflate(c, chunk_bytes).unwrap() == *r);
    }
    let mib = |secs: f64| decoded / secs / (1 << 20) as f64;
    let [f, l, lib, reuse] = t.map(median);
    println!(
        "{label:<28} {:>3} chunks, ratio {:.3}: flate2 {:>6.0} MiB/s | libdeflate {:>6.0} MiB/s | chunks::inflate {:>6.0} MiB/s | libdeflate, reused buffer {:>6.0} MiB/s | libdeflate/flate2 {:.2}x",
        chunks.len(),
        stored as f64 / decoded,
        mib(f),
        mib(l),
        mib(lib),
        mib(reuse),
        f / l
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = args.first().and_then(|a| a.parse().ok()).unwrap_or(7usize);
    let files: Vec<&String> = args.iter().filter(|a| a.contains(':')).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.h5");
    {
        let data = field();
        let f = hdf5::File::create(&path).unwrap();
        for (name, shuffle, level) in [("s_d1", true, 1), ("s_d4", true, 4), ("d1", false, 1)] {
            let b = f
                .new_dataset::<f32>()
                .shape([PLANES, Y, X])
                .chunk([1, Y, X]);
            let b = if shuffle { b.shuffle() } else { b };
            let ds = b.deflate(level).create(name).unwrap();
            ds.write_raw(&data).unwrap();
        }
    }
    for (name, label) in [
        ("s_d1", "shuffle + deflate 1"),
        ("s_d4", "shuffle + deflate 4"),
        ("d1", "deflate 1 (nccopy -d 1)"),
    ] {
        let (chunks, chunk_bytes) = stored_chunks(&path, name, PLANES);
        bench(label, &chunks, chunk_bytes, rounds);
    }
    for spec in files {
        let (file, ds) = spec.rsplit_once(':').unwrap();
        let (chunks, chunk_bytes) = stored_chunks(std::path::Path::new(file), ds, 16);
        bench(spec, &chunks, chunk_bytes, rounds);
    }
}
