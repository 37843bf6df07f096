//! Writes a Tensogram benchmark input of many large messages: each message holds one f32 object
//! of shape (MiB × 256, 1024), i.e. MiB mebibytes of values, smooth field plus quantised noise.
//! Usage: `gen_tgm OUT MESSAGES MIB [none|zstd]`.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};

use tensogram::{ByteOrder, DataObjectDescriptor, Dtype, EncodeOptions, GlobalMetadata};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 || args.len() > 5 {
        eprintln!("usage: gen_tgm OUT MESSAGES MIB [none|zstd]");
        std::process::exit(2);
    }
    let messages: u64 = args[2].parse().expect("integer");
    let mib: u64 = args[3].parse().expect("integer");
    let compression = args.get(4).map(String::as_str).unwrap_or("zstd");
    let (rows, cols) = (mib * 256, 1024u64);
    let mut params = BTreeMap::new();
    if compression == "zstd" {
        params.insert("zstd_level".to_string(), ciborium::Value::Integer(1.into()));
    }
    let desc = DataObjectDescriptor {
        obj_type: "ntensor".into(),
        ndim: 2,
        shape: vec![rows, cols],
        strides: vec![cols, 1],
        dtype: Dtype::Float32,
        byte_order: ByteOrder::Little,
        encoding: "none".into(),
        filter: "none".into(),
        compression: compression.into(),
        masks: None,
        params,
    };
    let options = EncodeOptions {
        threads: 1,
        ..EncodeOptions::default()
    };
    let mut out = BufWriter::with_capacity(1 << 22, std::fs::File::create(&args[1]).unwrap());
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut wire = vec![0u8; (rows * cols * 4) as usize];
    for m in 0..messages {
        for (k, v) in wire.chunks_exact_mut(4).enumerate() {
            let (j, i) = (k as u64 / cols, k as u64 % cols);
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let noise = ((state >> 40) % 64) as f32 * 0.01;
            let val = 280.0
                + (j as f32 / 97.0).sin() * (i as f32 / 61.0).cos() * 20.0
                + m as f32 * 0.01
                + noise;
            v.copy_from_slice(&((val * 100.0).round() / 100.0).to_le_bytes());
        }
        let bytes = tensogram::encode(&GlobalMetadata::default(), &[(&desc, &wire)], &options)
            .expect("encode");
        out.write_all(&bytes).unwrap();
    }
    out.flush().unwrap();
}
