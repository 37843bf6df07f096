//! Writes the small-file batch input of issue 25: `N` different f32 `.npy` files of 4 KiB (a
//! 128-byte header and 992 values, `s00000.npy`, …) in a folder, as `benches/budget.py`'s
//! `make_small` does, for machines without Python. Usage: `gen_small DIR N [FOLDERS]`: with
//! FOLDERS, the files are spread over that many sub-folders `d000`, `d001`, … (issue 34's batch:
//! 3,000 files in 30 folders).

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 && args.len() != 4 {
        eprintln!("usage: gen_small DIR N [FOLDERS]");
        std::process::exit(2);
    }
    let dir = std::path::Path::new(&args[1]);
    let n: u32 = args[2].parse().expect("N: an integer");
    let folders: u32 = args
        .get(3)
        .map_or(0, |f| f.parse().expect("FOLDERS: an integer"));
    std::fs::create_dir_all(dir).expect("create DIR");
    for k in 0..folders {
        std::fs::create_dir_all(dir.join(format!("d{k:03}"))).expect("create a folder");
    }
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (992,), }";
    let pad = 128 - (10 + header.len() + 1);
    let mut head = b"\x93NUMPY\x01\x00".to_vec();
    head.extend_from_slice(&((header.len() + pad + 1) as u16).to_le_bytes());
    head.extend_from_slice(header.as_bytes());
    head.extend(std::iter::repeat_n(b' ', pad));
    head.push(b'\n');
    let mut buf = Vec::with_capacity(4096);
    for i in 0..n {
        buf.clear();
        buf.extend_from_slice(&head);
        for k in 0..992u32 {
            let v = (f64::from(i) * 992.0 + f64::from(k)) * 0.25;
            buf.extend_from_slice(&(v as f32).to_le_bytes());
        }
        let name = format!("s{i:05}.npy");
        let path = if folders > 0 {
            dir.join(format!("d{:03}", i % folders)).join(name)
        } else {
            dir.join(name)
        };
        let mut f = std::fs::File::create(&path).expect("create a file");
        f.write_all(&buf).expect("write a file");
    }
}
