//! Speed of the direct chunk path alone (`ChunkedVar::read_region`: pread of the stored bytes,
//! filter decode, copy into the caller's buffer), without the engine, its writer or the output
//! file: every chunk of a dataset is read as one region, the chunks shared out among THREADS
//! threads, for ROUNDS rounds. Prints the median round's wall seconds, its CPU seconds (user +
//! system of the process, from /proc/self/stat) and MiB/s of decoded output.
//!
//! ```sh
//! cargo build --release -p tet-hdf5 --example read_bench
//! target/release/examples/read_bench /work/bench/nc4_z1.nc:/t [THREADS] [ROUNDS] [fresh]
//! ```
//!
//! Each thread reuses one output buffer unless `fresh` is given; then every chunk gets a new
//! zeroed buffer, as the engine's `--codec raw` path does (it hands each buffer to the writer).
//! The input should be in the page cache (`cat FILE > /dev/null`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tet_hdf5::chunks::{ChunkAccess, ChunkedVar};

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // `rest` starts at field 3 (state), so field n is at index n - 3. USER_HZ is 100 on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(target) = args.first() else {
        eprintln!("usage: read_bench FILE:DATASET [THREADS] [ROUNDS] [fresh]");
        std::process::exit(2);
    };
    let threads: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2).max(1);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5).max(1);
    let fresh = args.iter().any(|a| a == "fresh");
    let (path, dataset) = target.rsplit_once(':').expect("FILE:DATASET");
    let path = std::path::Path::new(path);
    let cv = match ChunkedVar::open(path, dataset).expect("open") {
        ChunkAccess::Direct(cv) => cv,
        ChunkAccess::Library(why) => panic!("{target}: not read directly: {why}"),
    };
    let file = std::fs::File::open(path).expect("open file");
    let shape = cv.shape().to_vec();
    let chunk = cv.chunk_shape().to_vec();
    let grid: Vec<u64> = shape
        .iter()
        .zip(&chunk)
        .map(|(&s, &c)| s.div_ceil(c))
        .collect();
    let n_chunks: usize = grid.iter().product::<u64>() as usize;
    // Region (start, count) of chunk number `i` (C order over the grid).
    let region = |mut i: usize| {
        let rank = grid.len();
        let mut start = vec![0u64; rank];
        let mut count = vec![0u64; rank];
        for a in (0..rank).rev() {
            let g = (i as u64) % grid[a];
            i /= grid[a] as usize;
            start[a] = g * chunk[a];
            count[a] = chunk[a].min(shape[a] - start[a]);
        }
        (start, count)
    };
    let total_bytes: u64 = shape.iter().product::<u64>() * cv.elem_size() as u64;
    println!(
        "{target}: shape {shape:?}, chunks {chunk:?}, {} stored, filters {:?}; {threads} threads, {} buffers",
        cv.stored_chunks(),
        cv.filters().iter().map(|f| f.label()).collect::<Vec<_>>(),
        if fresh { "fresh" } else { "reused" }
    );
    let mut results = Vec::new();
    for r in 0..rounds {
        let next = AtomicUsize::new(0);
        let cpu0 = cpu_seconds();
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n_chunks {
                            break;
                        }
                        let (start, count) = region(i);
                        let n = count.iter().product::<u64>() as usize * cv.elem_size();
                        if fresh {
                            out = vec![0u8; n];
                        } else {
                            out.resize(n, 0);
                        }
                        cv.read_region(&file, &start, &count, &mut out)
                            .expect("read");
                        std::hint::black_box(&out);
                    }
                });
            }
        });
        let wall = t0.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        println!("round {r}: {wall:.3} s wall, {cpu:.2} s CPU");
        results.push((wall, cpu));
    }
    results.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (wall, cpu) = results[results.len() / 2];
    println!(
        "median: {wall:.3} s wall, {cpu:.2} s CPU, {:.0} MiB/s",
        total_bytes as f64 / wall / (1 << 20) as f64
    );
}
