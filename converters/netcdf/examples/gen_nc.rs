//! Writes a large f32 NetCDF-4 benchmark input, contiguous and uncompressed: variable `t(time, y,
//! x)` holding the same smooth field plus quantised noise as `benches/gen_npy.rs`.
//! Usage: `gen_nc OUT T Y X`. Chunked/deflated variants are made from it with `nccopy`
//! (see BENCHMARKS.md).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: gen_nc OUT T Y X");
        std::process::exit(2);
    }
    let dims: Vec<usize> = args[2..]
        .iter()
        .map(|a| a.parse().expect("integer"))
        .collect();
    let (t, y, x) = (dims[0], dims[1], dims[2]);
    let mut f = netcdf::create_with(&args[1], netcdf::Options::NETCDF4).expect("create");
    // Fixed dimensions and no filters: netCDF-4 stores the variable contiguously.
    f.add_dimension("time", t).unwrap();
    f.add_dimension("y", y).unwrap();
    f.add_dimension("x", x).unwrap();
    {
        let mut v = f.add_variable::<f32>("t", &["time", "y", "x"]).unwrap();
        v.put_attribute("units", "K").unwrap();
    }
    f.enddef().unwrap();
    let mut v = f.variable_mut("t").unwrap();
    let rows: Vec<f32> = (0..y).map(|j| (j as f32 / 97.0).sin() * 20.0).collect();
    let cols: Vec<f32> = (0..x).map(|i| (i as f32 / 61.0).cos()).collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut plane = vec![0f32; y * x];
    for k in 0..t {
        for (j, r) in rows.iter().enumerate() {
            for (i, c) in cols.iter().enumerate() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let noise = ((state >> 40) % 64) as f32 * 0.01;
                let val = 280.0 + r * c + k as f32 * 0.01 + noise;
                plane[j * x + i] = (val * 100.0).round() / 100.0;
            }
        }
        v.put_values(&plane, (&[k, 0, 0][..], &[1, y, x][..]))
            .unwrap();
    }
    f.close().unwrap();
}
