//! Property test: random datasets written from random threads in random order read back
//! bit-identical, and the file bytes equal a single-threaded in-order write — with every codec,
//! the extension codecs (zstd over transformed elements) included; and the element transforms
//! against reference implementations written here, independently of `tet::format::codec`.

use crate::common;

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
        // Every codec, chunk by chunk (three bits of the mask per chunk).
        let codec = |j: usize| Codec::ALL[(zstd_mask >> (3 * (j % 21)) & 7) as usize % Codec::ALL.len()];
        let f = footer();

        let p1 = dir.path().join("serial.tet");
        write_in_order(&p1, &arrays, &f, 1, &codec);
        let p2 = dir.path().join("parallel.tet");
        write(&p2, &arrays, &f, &local_shuffle(n, window, seed), threads, window, &codec);
        prop_assert_eq!(std::fs::read(&p1).unwrap(), std::fs::read(&p2).unwrap());

        let t = TetFile::open(&p2).unwrap();
        let report = tet::format::verify::verify(&t, tet::format::verify::Depth::Deep);
        prop_assert!(report.ok(), "{:?}", report.failures);
        // The only warning: the extension codecs' (readers of v1 refuse them).
        prop_assert!(
            report.warnings.iter().all(|w| w.code == "chunk-codec-extension"),
            "{:?}",
            report.warnings
        );
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

/// Reference byte shuffle: for each byte position `k`, byte `k` of every whole element in
/// order; then the bytes of a trailing partial element as they are.
fn ref_shuffle(elem: usize, b: &[u8]) -> Vec<u8> {
    let n = b.len() / elem;
    let mut out = Vec::new();
    for k in 0..elem {
        for i in 0..n {
            out.push(b[i * elem + k]);
        }
    }
    out.extend_from_slice(&b[n * elem..]);
    out
}

/// Reference bit shuffle: `m` = the whole elements rounded down to a multiple of 8; for each
/// byte `k`, each bit `j` (LSB first), a plane of `m / 8` bytes whose byte `g` has as bit `t`
/// bit `j` of byte `k` of element `8g + t`; then every byte after the first `m` elements.
fn ref_bitshuffle(elem: usize, b: &[u8]) -> Vec<u8> {
    let m = b.len() / elem / 8 * 8;
    let mut out = Vec::new();
    for k in 0..elem {
        for j in 0..8 {
            for g in 0..m / 8 {
                let mut byte = 0u8;
                for t in 0..8 {
                    let bit = (b[(8 * g + t) * elem + k] >> j) & 1;
                    byte |= bit << t;
                }
                out.push(byte);
            }
        }
    }
    out.extend_from_slice(&b[m * elem..]);
    out
}

/// Reference subtraction delta through u128 (elements up to 16 bytes): element `i` minus
/// element `i - 1` modulo `2^(8 elem)`, the first as it is, a trailing partial element as it is.
fn ref_delta(elem: usize, b: &[u8]) -> Vec<u8> {
    let n = b.len() / elem;
    let val = |i: usize| {
        let mut w = [0u8; 16];
        w[..elem].copy_from_slice(&b[i * elem..(i + 1) * elem]);
        u128::from_le_bytes(w)
    };
    let mut d = b.to_vec();
    for i in 1..n {
        let v = val(i).wrapping_sub(val(i - 1)).to_le_bytes();
        d[i * elem..(i + 1) * elem].copy_from_slice(&v[..elem]);
    }
    d
}

fn reference_transform(codec: Codec, elem: usize, b: &[u8]) -> Vec<u8> {
    match codec {
        Codec::ZstdShuffle => ref_shuffle(elem, b),
        Codec::ZstdBitShuffle => ref_bitshuffle(elem, b),
        Codec::ZstdDelta => ref_shuffle(elem, &ref_delta(elem, b)),
        Codec::ZstdDeltaBitShuffle => ref_bitshuffle(elem, &ref_delta(elem, b)),
        _ => b.to_vec(),
    }
}

/// Bytes with structure (smooth values of `elem`-byte elements plus noise) or without.
fn arb_bytes() -> impl Strategy<Value = (usize, Vec<u8>)> {
    (
        prop::sample::select(vec![1usize, 2, 3, 4, 8, 16]),
        0usize..300,
        0usize..16,
        any::<u64>(),
    )
        .prop_map(|(elem, n, extra, seed)| {
            let mut x = seed | 1;
            let mut b = Vec::new();
            for i in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let v = (i as u128 * 37 + (x % 5) as u128).wrapping_mul(if x % 7 == 0 {
                    u128::MAX
                } else {
                    1
                });
                b.extend((0..elem).map(|k| v.to_le_bytes()[k % 16] ^ (k / 16) as u8));
            }
            // A trailing partial element (odd sizes).
            b.extend((0..extra % elem).map(|e| e as u8 ^ (x as u8)));
            (elem, b)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Each extension codec's transform equals the reference, its inverse gives the bytes
    /// back, and its frame decodes (through the codec) to the bytes: every element size, odd
    /// lengths with a partial trailing element, zero length.
    #[test]
    fn transforms_match_the_reference((elem, b) in arb_bytes()) {
        let mut comp = zstd::bulk::Compressor::new(3).unwrap();
        for codec in Codec::ALL.into_iter().filter(|c| c.transform().is_some()) {
            let t = codec.transform().unwrap();
            let mut fwd = vec![0u8; b.len()];
            t.forward(elem, &b, &mut fwd);
            prop_assert_eq!(&fwd, &reference_transform(codec, elem, &b), "{:?} elem {}", codec, elem);
            let mut back = vec![0xAAu8; b.len()];
            t.inverse(elem, &fwd, &mut back);
            prop_assert_eq!(&back, &b);

            let c = tet::format::codec::ChunkCodec::new(codec, elem);
            let (mut scratch, mut frame) = (Vec::new(), Vec::new());
            c.encode(&b, &mut comp, &mut scratch, &mut frame).unwrap();
            // The frame holds the transformed bytes: any zstd decoder gets them back.
            prop_assert_eq!(zstd::bulk::decompress(&frame, b.len()).unwrap(), fwd);
            let mut out = vec![0u8; b.len()];
            c.decode(&frame, &mut out).unwrap();
            prop_assert_eq!(&out, &b);
        }
    }
}

/// A frame that decodes to the wrong length is an error naming both lengths, for every codec.
#[test]
fn a_short_frame_is_an_error() {
    let frame = zstd::bulk::compress(&[1u8; 12], 3).unwrap();
    for codec in Codec::ALL.into_iter().filter(|c| c.is_zstd_frame()) {
        let mut out = vec![0u8; 16];
        let e = tet::format::codec::ChunkCodec::new(codec, 4)
            .decode(&frame, &mut out)
            .unwrap_err();
        assert!(
            e.to_string().contains("12") && e.to_string().contains("16"),
            "{e}"
        );
    }
}

/// Every extension codec (and the chooser) writes a file our reader reads back exactly and
/// verifies (deep) with only the extension warning; `--codec zstd` of that file gives a v1
/// file — codec ids 0 and 1 only, no warning — with the same values.
#[test]
fn extension_codec_files_read_back_and_reconvert_to_v1() {
    use tet::format::verify::{verify, Depth};
    let convert = |src: &std::path::Path, out: &std::path::Path, codec: &str| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_tet-convert"))
            .args(["-q", "--codec", codec])
            .arg(src)
            .arg(out)
            .output()
            .unwrap();
        common::ok(&o, codec);
    };
    let dir = tempfile::tempdir().unwrap();
    // A smooth f32 field with noise, an i16 field, u8 classes, f64 steps.
    let mut x = 7u64;
    let mut noise = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 1000) as f32 / 1e5
    };
    let f32s: Vec<u8> = (0..300 * 257)
        .flat_map(|i| (280.0 + (i as f32 / 500.0).sin() * 20.0 + noise()).to_le_bytes())
        .collect();
    let i16s: Vec<u8> = (0..300 * 257)
        .flat_map(|i| (((i % 257) as i16 - 128) * 3 + (i / 257) as i16).to_le_bytes())
        .collect();
    let u8s: Vec<u8> = (0..300 * 257).map(|i| ((i / 97) % 5) as u8).collect();
    let f64s: Vec<u8> = (0..300 * 257)
        .flat_map(|i| (f64::from(i / 13) * 0.25).to_le_bytes())
        .collect();
    for (descr, dtype, data) in [
        ("<f4", 1u32, &f32s),
        ("<i2", 7, &i16s),
        ("|u1", 5, &u8s),
        ("<f8", 2, &f64s),
    ] {
        let src = dir.path().join(format!("a{dtype}.npy"));
        let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (300, 257), }}");
        std::fs::write(&src, common::npy_bytes(&dict, data)).unwrap();
        for choice in [
            "zstd-shuffle:3",
            "zstd-bitshuffle:1",
            "zstd-delta:3",
            "zstd-delta-bitshuffle:3",
            "smallest+ext:3",
        ] {
            let out = dir.path().join("ext.tet");
            let _ = std::fs::remove_file(&out);
            convert(&src, &out, choice);
            let t = TetFile::open(&out).unwrap();
            assert_eq!(&t.read_dataset(0).unwrap(), data, "{descr} {choice}");
            let ids: std::collections::BTreeSet<u32> =
                t.entries.iter().map(|e| e.codec_id).collect();
            let report = verify(&t, Depth::Deep);
            assert!(report.ok(), "{descr} {choice}: {:?}", report.failures);
            assert!(
                report
                    .warnings
                    .iter()
                    .all(|w| w.code == "chunk-codec-extension"),
                "{:?}",
                report.warnings
            );
            assert_eq!(
                report.warnings.len(),
                ids.iter().filter(|&&i| i >= 128).count(),
                "{descr} {choice}: {ids:?}"
            );
            let row = t
                .footer()
                .unwrap()
                .unwrap()
                .history
                .last()
                .cloned()
                .unwrap();
            assert_eq!(row.params.get("codec").map(String::as_str), Some(choice));
            let named = Codec::ALL
                .into_iter()
                .find(|c| choice.split(':').next() == Some(c.name()));
            if let Some(c) = named {
                assert!(ids.iter().all(|&i| i == 0 || i == c.id()), "{ids:?}");
                // Smooth or repetitive data: the transform is used.
                assert!(ids.contains(&c.id()), "{descr} {choice}: {ids:?}");
            } else {
                assert!(row.params.contains_key("codec_chooser"));
                let chosen = &row.params["codec_chosen"];
                assert!(chosen.ends_with("=1"), "{chosen}");
            }

            // Back to v1.
            let v1 = dir.path().join("v1.tet");
            let _ = std::fs::remove_file(&v1);
            convert(&out, &v1, "zstd");
            let t1 = TetFile::open(&v1).unwrap();
            assert!(
                t1.entries.iter().all(|e| e.codec_id <= 1),
                "{descr} {choice}"
            );
            let r1 = verify(&t1, Depth::Deep);
            assert!(r1.ok() && r1.warnings.is_empty(), "{r1:?}");
            assert_eq!(&t1.read_dataset(0).unwrap(), data);
        }
    }
}
