//! Writes the bundled NetCDF sample `fixtures/sample/ocean.nc` (the README's main job converts
//! it): a small netCDF-4 file with the features a real one has — an unlimited CF time axis,
//! latitude/longitude coordinates, a chunked, deflated sea-surface temperature with a fill value,
//! a packed (scale_factor/add_offset) wind speed, and global attributes. Deterministic.
//! Usage: `make_sample OUT`.

fn main() {
    let out = std::env::args().nth(1).unwrap_or_else(|| "ocean.nc".into());
    let (nt, ny, nx) = (4usize, 90usize, 180usize);
    let mut f = netcdf::create_with(&out, netcdf::Options::NETCDF4).expect("create");
    f.add_attribute(
        "title",
        "tet-convert sample: synthetic sea-surface temperature",
    )
    .unwrap();
    f.add_attribute("Conventions", "CF-1.8").unwrap();
    f.add_attribute("history", "2026-11-22 make_sample (tet-convert)")
        .unwrap();
    f.add_unlimited_dimension("time").unwrap();
    f.add_dimension("lat", ny).unwrap();
    f.add_dimension("lon", nx).unwrap();
    {
        let mut t = f.add_variable::<f64>("time", &["time"]).unwrap();
        t.put_attribute("units", "hours since 2024-01-01 00:00:00")
            .unwrap();
        t.put_attribute("calendar", "standard").unwrap();
        t.put_attribute("standard_name", "time").unwrap();
    }
    {
        let mut v = f.add_variable::<f32>("lat", &["lat"]).unwrap();
        v.put_attribute("units", "degrees_north").unwrap();
    }
    {
        let mut v = f.add_variable::<f32>("lon", &["lon"]).unwrap();
        v.put_attribute("units", "degrees_east").unwrap();
    }
    {
        let mut v = f
            .add_variable::<f32>("sst", &["time", "lat", "lon"])
            .unwrap();
        v.set_chunking(&[1, ny, nx]).unwrap();
        v.set_compression(4, true).unwrap();
        v.set_fill_value(-999.0f32).unwrap();
        v.put_attribute("units", "K").unwrap();
        v.put_attribute("standard_name", "sea_surface_temperature")
            .unwrap();
    }
    {
        let mut v = f
            .add_variable::<i16>("wind", &["time", "lat", "lon"])
            .unwrap();
        v.set_chunking(&[1, ny, nx]).unwrap();
        v.set_compression(4, true).unwrap();
        v.put_attribute("scale_factor", 0.01f32).unwrap();
        v.put_attribute("add_offset", 10.0f32).unwrap();
        v.put_attribute("units", "m s-1").unwrap();
    }
    f.enddef().unwrap();
    let lat: Vec<f32> = (0..ny).map(|j| -89.0 + 2.0 * j as f32).collect();
    let lon: Vec<f32> = (0..nx).map(|i| 1.0 + 2.0 * i as f32).collect();
    f.variable_mut("lat").unwrap().put_values(&lat, ..).unwrap();
    f.variable_mut("lon").unwrap().put_values(&lon, ..).unwrap();
    let time: Vec<f64> = (0..nt).map(|k| 6.0 * k as f64).collect();
    f.variable_mut("time")
        .unwrap()
        .put_values(&time, (&[0][..], &[nt][..]))
        .unwrap();
    let mut sst = Vec::with_capacity(nt * ny * nx);
    let mut wind = Vec::with_capacity(nt * ny * nx);
    for k in 0..nt {
        for (j, la) in lat.iter().enumerate() {
            for (i, lo) in lon.iter().enumerate() {
                let land = (j / 10 + i / 15) % 7 == 0;
                let t = 300.0 - 30.0 * (la.to_radians().sin()).powi(2)
                    + 0.5 * (lo.to_radians() * 3.0 + k as f32).cos();
                sst.push(if land {
                    -999.0
                } else {
                    (t * 100.0).round() / 100.0
                });
                wind.push(((j * 7 + i * 3 + k * 11) % 1500) as i16 - 500);
            }
        }
    }
    let extent = (&[0, 0, 0][..], &[nt, ny, nx][..]);
    f.variable_mut("sst")
        .unwrap()
        .put_values(&sst, extent)
        .unwrap();
    f.variable_mut("wind")
        .unwrap()
        .put_values(&wind, extent)
        .unwrap();
    f.close().unwrap();
}
