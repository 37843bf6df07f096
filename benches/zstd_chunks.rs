//! The compression engine alone, without the pipeline: compresses a file in independent chunks
//! (4 MiB by default) with the zstd context the conversion uses (`pipeline::chunk_compressor`),
//! on one thread, and prints the CPU seconds spent in compression and the compressed size. Put
//! beside `zstd -b<level> -e<level> -B<chunk bytes> FILE` (the zstd CLI's own benchmark of
//! independent blocks), it separates the library and its parameters from the pipeline's own
//! costs (issue 25). `HLOG CLOG` replace the context's hashLog and chainLog, for trying other
//! parameters. Usage: `zstd_chunks FILE [LEVEL] [CHUNK_MIB] [HLOG CLOG]`.

use std::io::Read;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: zstd_chunks FILE [LEVEL] [CHUNK_MIB] [HLOG CLOG]");
        std::process::exit(2);
    }
    let level: i32 = args
        .get(2)
        .map_or(3, |s| s.parse().expect("LEVEL: an integer"));
    let mib: usize = args
        .get(3)
        .map_or(4, |s| s.parse().expect("CHUNK_MIB: an integer"));
    let mut file = std::fs::File::open(&args[1]).expect("open FILE");
    let mut comp = tet::pipeline::chunk_compressor(level, true).expect("a zstd context");
    if let (Some(h), Some(c)) = (args.get(4), args.get(5)) {
        use zstd::stream::raw::CParameter;
        let (h, c) = (h.parse().expect("HLOG"), c.parse().expect("CLOG"));
        comp.set_parameter(CParameter::HashLog(h)).expect("HLOG");
        comp.set_parameter(CParameter::ChainLog(c)).expect("CLOG");
    }
    let mut buf = vec![0u8; mib << 20];
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(buf.len()));
    let (mut busy, mut raw, mut packed) = (0.0f64, 0u64, 0u64);
    loop {
        let mut n = 0;
        while n < buf.len() {
            match file.read(&mut buf[n..]).expect("read FILE") {
                0 => break,
                k => n += k,
            }
        }
        if n == 0 {
            break;
        }
        out.clear();
        let t = Instant::now();
        comp.compress_to_buffer(&buf[..n], &mut out)
            .expect("compress");
        busy += t.elapsed().as_secs_f64();
        raw += n as u64;
        packed += out.len() as u64;
    }
    println!(
        "level {level}, {mib} MiB chunks: {raw} -> {packed} bytes, {busy:.3} s compressing, {:.1} MB/s",
        raw as f64 / busy / 1e6
    );
}
