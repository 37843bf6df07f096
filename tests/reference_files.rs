//! Files written by the public reference implementation read with the values they imply, and
//! verify (deep) passes on all but `plan.tet`, whose footer is deliberately corrupt.

use crate::common;

use common::reference;
use tet::format::verify::{verify, Depth};
use tet::format::{DType, TetFile};

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn f64s(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn open(name: &str) -> TetFile {
    TetFile::open(&reference(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn read(f: &TetFile, name: &str) -> Vec<u8> {
    f.read_dataset(f.dataset_id(name).unwrap()).unwrap()
}

#[test]
fn one_to_six_files() {
    let want: Vec<f32> = (1..=6).map(|v| v as f32).collect();
    for (file, ds, dtype) in [
        ("sample.tet", "temperature", DType::F32),
        ("plan.tet", "a", DType::F32),
        ("multichunk_u8.tet", "a", DType::U8),
        ("multichunk_u32.tet", "a", DType::U32),
        ("multichunk_f16.tet", "a", DType::F16),
    ] {
        let f = open(file);
        let d = &f.datasets[0];
        assert_eq!((d.name.as_str(), d.dtype), (ds, dtype), "{file}");
        assert_eq!(d.shape, vec![2, 3]);
        assert_eq!(d.chunk_shape, vec![2, 2]);
        let b = read(&f, ds);
        let got: Vec<f32> = match dtype {
            DType::F32 => f32s(&b),
            DType::U8 => b.iter().map(|&v| v as f32).collect(),
            DType::U32 => b
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()) as f32)
                .collect(),
            // IEEE half 1..6: exponent/mantissa decode of small integers.
            DType::F16 => b
                .chunks_exact(2)
                .map(|c| {
                    let h = u16::from_le_bytes(c.try_into().unwrap());
                    let e = ((h >> 10) & 0x1f) as i32 - 15;
                    let m = (h & 0x3ff) as f32 / 1024.0 + 1.0;
                    m * 2f32.powi(e)
                })
                .collect(),
            _ => unreachable!(),
        };
        assert_eq!(got, want, "{file}");
    }
    // sample.tet: the clipped edge chunk (0,1) holds 3 and 6 only.
    let f = open("sample.tet");
    let e = f.find_chunk(0, &[0, 1]).unwrap();
    assert_eq!(e.raw_byte_len, 8);
    assert_eq!(f32s(&f.raw_payload(e).unwrap().unwrap()), vec![3.0, 6.0]);
}

#[test]
fn large_is_iota() {
    let f = open("large.tet");
    let d = &f.datasets[0];
    assert_eq!(d.shape, vec![34, 64]);
    assert_eq!(f.entries.len(), 9 * 16);
    let want: Vec<f32> = (0..34 * 64).map(|v| v as f32).collect();
    assert_eq!(f32s(&read(&f, "a")), want);
    // A region crossing chunk borders.
    let mut out = vec![0u8; 5 * 7 * 4];
    f.read_region(0, &[3, 10], &[5, 7], &mut out).unwrap();
    let want: Vec<f32> = (3..8)
        .flat_map(|r| (10..17).map(move |c| (r * 64 + c) as f32))
        .collect();
    assert_eq!(f32s(&out), want);
}

#[test]
fn converted_small_cf() {
    let f = open("converted_small_cf.tet");
    let iota: Vec<f32> = (0..700).map(|v| v as f32).collect();
    assert_eq!(f32s(&read(&f, "chunked")), iota);
    assert_eq!(f32s(&read(&f, "contig")), vec![1.0; 700]);
    let t: Vec<f64> = (0..100).map(|v| v as f64 * 0.5).collect();
    assert_eq!(f64s(&read(&f, "t")), t);
    let x: Vec<i32> = read(&f, "x")
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(x, vec![0, 10, 20, 30, 40, 50, 60]);
    let packed = f32s(&read(&f, "packedf"));
    assert!(packed[0].is_nan());
    assert!(packed[1..].iter().all(|&v| v == 7.0));

    let meta = f.footer().unwrap().unwrap();
    assert_eq!(meta.history.len(), 1);
    assert_eq!(meta.history[0].op, "convert");
    assert_eq!(meta.history[0].source, "nc");
    assert_eq!(meta.file["tool"], "tet convert");
    let xm = &meta.datasets["x"];
    assert_eq!(xm.dim_names.as_deref(), Some(&["x".to_string()][..]));
    assert_eq!(xm.coords["x"][6], "60");
    let pm = &meta.datasets["packedf"];
    assert!(pm
        .attrs
        .iter()
        .any(|(k, v)| k == "scale_factor" && *v == tet_source::AttrValue::Text("2".into())));
}

#[test]
fn converted_cf_3d() {
    let f = open("converted_cf_3d.tet");
    assert_eq!(f.datasets.len(), 8);
    let lat = f32s(&read(&f, "lat"));
    assert_eq!((lat[0], lat[31], lat.len()), (-90.0, 90.0, 32));
    let lon = f32s(&read(&f, "lon"));
    assert_eq!((lon[0], lon[31]), (-180.0, 180.0));
    assert_eq!(
        f64s(&read(&f, "time")),
        (0..32).map(|v| v as f64).collect::<Vec<_>>()
    );
    for name in ["f32", "f64", "i32", "i64", "temperature"] {
        let id = f.dataset_id(name).unwrap();
        assert_eq!(f.datasets[id].shape, vec![32, 32, 32]);
        assert_eq!(read(&f, name).len(), 32768 * f.datasets[id].dtype.size());
    }
    let meta = f.footer().unwrap().unwrap();
    assert_eq!(meta.datasets["lat"].coords["lat"].len(), 32);
    assert_eq!(
        meta.datasets["temperature"].dim_names.as_deref().unwrap(),
        ["time", "lat", "lon"]
    );
}

#[test]
fn verify_deep_passes_on_all_but_plan() {
    for entry in std::fs::read_dir(common::shared().join("interop/reference-tet")).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let f = TetFile::open(&p).unwrap();
        let r = verify(&f, Depth::Deep);
        if name == "plan.tet" {
            assert!(!r.ok());
            assert!(
                r.failures.iter().all(|x| x.code == "footer"),
                "{:?}",
                r.failures
            );
            assert!(f.footer().is_err());
        } else {
            assert!(r.ok(), "{name}: {:?}", r.failures);
            assert!(r.warnings.is_empty(), "{name}: {:?}", r.warnings);
        }
    }
}
