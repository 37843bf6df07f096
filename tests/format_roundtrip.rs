//! Property test: random datasets written from random threads in random order read back
//! bit-identical, and the file bytes equal a single-threaded in-order write.

mod common;

use common::{write, write_in_order, Array};
use proptest::prelude::*;
use tet::format::{gather_block, Codec, DType, Footer, HistoryRow, TetFile};

fn arb_array() -> impl Strategy<Value = Array> {
    (0usize..10, 1usize..=8)
        .prop_flat_map(|(t, rank)| {
            // Keep the element count small whatever the rank.
            let max_axis = match rank {
                1 => 40u64,
                2 => 12,
                3 => 7,
                4 => 5,
                _ => 3,
            };
            (
                Just(DType::ALL[t]),
                proptest::collection::vec(0..=max_axis, rank),
                proptest::collection::vec(1..=max_axis + 1, rank),
                any::<u64>(),
            )
        })
        .prop_map(|(dtype, shape, chunk, seed)| {
            let n: u64 = shape.iter().product::<u64>() * dtype.size() as u64;
            let mut x = seed | 1;
            let data = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Runs of equal bytes so zstd has something to compress.
                    (x % 4) as u8
                })
                .collect();
            Array::new("", dtype, &shape, &chunk, data)
        })
}

fn footer() -> Footer {
    let mut f = Footer::default();
    f.history.push(HistoryRow {
        op: "convert".into(),
        source: "test".into(),
        at: "0".into(),
        ..Default::default()
    });
    f
}

/// A permutation that moves each job at most `w - 1` places (shuffled inside blocks of `w`):
/// the writer's window never blocks a producer whose predecessor is still queued.
fn local_shuffle(n: usize, w: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = seed | 1;
    for block in order.chunks_mut(w.max(1)) {
        for i in (1..block.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            block.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    order
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn round_trip(
        mut arrays in proptest::collection::vec(arb_array(), 1..4),
        threads in 1usize..5,
        window in 1usize..9,
        seed in any::<u64>(),
        zstd_mask in any::<u64>(),
        region_seed in any::<u64>(),
    ) {
        for (i, a) in arrays.iter_mut().enumerate() {
            a.spec.name = format!("ds{i}");
        }
        let dir = tempfile::tempdir().unwrap();
        let n = common::jobs(&arrays).len();
        let codec = |j: usize| if zstd_mask >> (j % 64) & 1 == 1 { Codec::Zstd } else { Codec::Raw };
        let f = footer();

        let p1 = dir.path().join("serial.tet");
        write_in_order(&p1, &arrays, &f, 1, &codec);
        let p2 = dir.path().join("parallel.tet");
        write(&p2, &arrays, &f, &local_shuffle(n, window, seed), threads, window, &codec);
        prop_assert_eq!(std::fs::read(&p1).unwrap(), std::fs::read(&p2).unwrap());

        let t = TetFile::open(&p2).unwrap();
        let report = tet::format::verify::verify(&t, tet::format::verify::Depth::Deep);
        prop_assert!(report.ok(), "{:?}", report.failures);
        prop_assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        prop_assert_eq!(t.footer().unwrap().unwrap(), &f);
        for (i, a) in arrays.iter().enumerate() {
            let d = &t.datasets[i];
            prop_assert_eq!(&d.shape, &a.spec.shape);
            prop_assert_eq!(d.dtype, a.spec.dtype);
            prop_assert_eq!(&t.read_dataset(i).unwrap(), &a.data);
            // A random region.
            let mut x = region_seed | 1;
            let mut start = Vec::new();
            let mut count = Vec::new();
            for &s in &a.spec.shape {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let st = if s == 0 { 0 } else { (x >> 33) % s };
                let c = if s == 0 { 0 } else { (x >> 17) % (s - st) + 1 };
                start.push(st);
                count.push(c);
            }
            let want = gather_block(&a.data, &a.spec.shape, &start, &count, a.spec.dtype.size());
            let mut got = vec![0u8; want.len()];
            t.read_region(i, &start, &count, &mut got).unwrap();
            prop_assert_eq!(got, want);
        }
    }
}
