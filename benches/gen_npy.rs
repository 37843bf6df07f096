//! Writes a large f32 `.npy` benchmark input: a smooth field plus quantised noise (so zstd has
//! something realistic to do). Usage: `gen_npy OUT T Y X` → shape (T, Y, X), C order.

use std::io::{BufWriter, Write};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: gen_npy OUT T Y X");
        std::process::exit(2);
    }
    let dims: Vec<u64> = args[2..]
        .iter()
        .map(|a| a.parse().expect("integer"))
        .collect();
    let (t, y, x) = (dims[0], dims[1] as usize, dims[2] as usize);
    let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({t}, {y}, {x}), }}");
    let pad = 64 - (10 + header.len() + 1) % 64;
    let mut out = BufWriter::with_capacity(1 << 22, std::fs::File::create(&args[1]).unwrap());
    out.write_all(b"\x93NUMPY\x01\x00").unwrap();
    out.write_all(&((header.len() + pad + 1) as u16).to_le_bytes())
        .unwrap();
    out.write_all(header.as_bytes()).unwrap();
    out.write_all(&vec![b' '; pad]).unwrap();
    out.write_all(b"\n").unwrap();
    let rows: Vec<f32> = (0..y).map(|j| (j as f32 / 97.0).sin() * 20.0).collect();
    let cols: Vec<f32> = (0..x).map(|i| (i as f32 / 61.0).cos()).collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut plane = vec![0u8; x * 4];
    for k in 0..t {
        for r in &rows {
            for (i, c) in cols.iter().enumerate() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let noise = ((state >> 40) % 64) as f32 * 0.01;
                let v = 280.0 + r * c + k as f32 * 0.01 + noise;
                // Quantise to 0.01 like most stored observations.
                let v = (v * 100.0).round() / 100.0;
                plane[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
            }
            out.write_all(&plane).unwrap();
        }
    }
    out.flush().unwrap();
}
