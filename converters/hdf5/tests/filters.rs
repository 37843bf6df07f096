//! The Rust filter decoders: LZF, shuffle, fletcher32, deflate and whole pipelines, with
//! hand-made vectors and round trips against encoders written here.

use std::io::Write;

use proptest::prelude::*;
use tet_hdf5::filters::{
    decode_filters, decode_filters_into, fletcher32, fletcher32_strip, inflate, inflate_bound,
    inflate_into, lzf_decompress, unshuffle, Filter, StageBuffers,
};

/// A small greedy LZF compressor (liblzf's format): literal runs of up to 32 bytes,
/// back-references of 3..=264 bytes up to 8192 bytes back.
fn lzf_compress(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut lit: Vec<u8> = Vec::new();
    let flush = |lit: &mut Vec<u8>, out: &mut Vec<u8>| {
        for run in lit.chunks(32) {
            out.push((run.len() - 1) as u8);
            out.extend_from_slice(run);
        }
        lit.clear();
    };
    let mut table = std::collections::HashMap::<[u8; 3], usize>::new();
    let mut i = 0;
    while i < input.len() {
        let mut best = (0usize, 0usize);
        if i + 3 <= input.len() {
            let key = [input[i], input[i + 1], input[i + 2]];
            if let Some(&p) = table.get(&key) {
                let back = i - p;
                if back <= 8192 {
                    let mut l = 0;
                    while i + l < input.len() && l < 264 && input[p + l] == input[i + l] {
                        l += 1;
                    }
                    if l >= 3 {
                        best = (l, back);
                    }
                }
            }
            table.insert(key, i);
        }
        if best.0 >= 3 {
            flush(&mut lit, &mut out);
            let (len, back) = best;
            let l = len - 2;
            let off = back - 1;
            if l < 7 {
                out.push(((l << 5) | (off >> 8)) as u8);
            } else {
                out.push(((7 << 5) | (off >> 8)) as u8);
                out.push((l - 7) as u8);
            }
            out.push((off & 0xff) as u8);
            i += len;
        } else {
            lit.push(input[i]);
            i += 1;
        }
    }
    flush(&mut lit, &mut out);
    out
}

fn shuffle(input: &[u8], s: usize) -> Vec<u8> {
    let n = input.len() / s;
    if s <= 1 || n <= 1 {
        return input.to_vec();
    }
    let mut out = vec![0u8; input.len()];
    for e in 0..n {
        for b in 0..s {
            out[b * n + e] = input[e * s + b];
        }
    }
    out[n * s..].copy_from_slice(&input[n * s..]);
    out
}

fn zlib(input: &[u8], level: u32) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
    e.write_all(input).unwrap();
    e.finish().unwrap()
}

fn with_fletcher(mut v: Vec<u8>) -> Vec<u8> {
    let s = fletcher32(&v);
    v.extend_from_slice(&s.to_le_bytes());
    v
}

#[test]
fn lzf_hand_vectors() {
    // Literal "abc", then a back-reference of 3 bytes, 3 back.
    assert_eq!(
        lzf_decompress(&[2, b'a', b'b', b'c', 0x20, 2], 100).unwrap(),
        b"abcabc"
    );
    // Overlapping run: "x" then 7+5+2 = 14 copies of the byte 1 back.
    assert_eq!(
        lzf_decompress(&[0, b'x', 0xe0, 5, 0], 100).unwrap(),
        vec![b'x'; 15]
    );
    // Long back-reference: length byte before the offset byte.
    let v = lzf_decompress(&[3, 1, 2, 3, 4, 0xe0, 0, 3], 100).unwrap();
    assert_eq!(v, [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1]);
    // Empty input is empty output.
    assert!(lzf_decompress(&[], 10).unwrap().is_empty());
}

#[test]
fn lzf_rejects_bad_streams() {
    // Back-reference before the start.
    assert!(lzf_decompress(&[0x20, 0], 100).is_err());
    assert!(lzf_decompress(&[0, b'a', 0x20, 5], 100).is_err());
    // Literal past the end.
    assert!(lzf_decompress(&[5, 1, 2], 100).is_err());
    // Truncated back-reference (missing offset, missing length byte).
    assert!(lzf_decompress(&[0, b'a', 0x20], 100).is_err());
    assert!(lzf_decompress(&[0, b'a', 0xe0], 100).is_err());
    // Output bound.
    assert!(lzf_decompress(&[0, b'x', 0xe0, 5, 0], 10).is_err());
    assert!(lzf_decompress(&[2, 1, 2, 3], 2).is_err());
}

#[test]
fn lzf_known_compressor_output() {
    // liblzf output for "hello hello hello hello" (literal "hello ", then one 17-byte
    // back-reference 6 back): 05 'hello ' e0 08 05 ... computed by the format rules.
    let data = b"hello hello hello hello";
    let c = lzf_compress(data);
    assert_eq!(&c[..7], &[5, b'h', b'e', b'l', b'l', b'o', b' ']);
    assert_eq!(lzf_decompress(&c, data.len()).unwrap(), data);
}

#[test]
fn shuffle_hand_vector() {
    let input = [0x44, 0x88, 0x33, 0x77, 0x22, 0x66, 0x11, 0x55, 0xaa];
    let mut out = [0u8; 9];
    unshuffle(&input, 4, &mut out);
    assert_eq!(out, [0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55, 0xaa]);
    // Element size 1 and single elements are untouched.
    let mut o = [0u8; 3];
    unshuffle(&[1, 2, 3], 1, &mut o);
    assert_eq!(o, [1, 2, 3]);
    unshuffle(&[1, 2, 3], 4, &mut o);
    assert_eq!(o, [1, 2, 3]);
}

#[test]
fn fletcher32_vectors() {
    // Word-by-word by hand: words (big-endian) 0x6162, 0x6364, last byte 0x65 as 0x6500.
    // sum1 = 0x6162, sum2 = 0x6162; sum1 = 0xc4c6, sum2 = 0x12628 -> folded later;
    // the odd byte: sum1 = 0x129c6 ... reduce.
    let d = b"abcde";
    let mut s1: u32 = 0x6162;
    let mut s2: u32 = s1;
    s1 += 0x6364;
    s2 += s1;
    s1 = (s1 & 0xffff) + (s1 >> 16);
    s2 = (s2 & 0xffff) + (s2 >> 16);
    s1 += 0x6500;
    s2 += s1;
    s1 = (s1 & 0xffff) + (s1 >> 16);
    s2 = (s2 & 0xffff) + (s2 >> 16);
    s1 = (s1 & 0xffff) + (s1 >> 16);
    s2 = (s2 & 0xffff) + (s2 >> 16);
    assert_eq!(fletcher32(d), (s2 << 16) | s1);
    assert_eq!(fletcher32(&[]), 0);
    // Strip: correct, byte-swapped (pre-1.6.3) and wrong checksums.
    let body = b"some chunk bytes".to_vec();
    let mut ok = with_fletcher(body.clone());
    fletcher32_strip(&mut ok).unwrap();
    assert_eq!(ok, body);
    let s = fletcher32(&body);
    let swapped = ((s & 0x00ff_00ff) << 8) | ((s >> 8) & 0x00ff_00ff);
    let mut old = body.clone();
    old.extend_from_slice(&swapped.to_le_bytes());
    fletcher32_strip(&mut old).unwrap();
    let mut bad = with_fletcher(body.clone());
    bad[0] ^= 1;
    assert!(fletcher32_strip(&mut bad).is_err());
    assert!(fletcher32_strip(&mut vec![1, 2, 3]).is_err());
}

#[test]
fn deflate_bounds() {
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let z = zlib(&data, 6);
    assert_eq!(inflate(&z, data.len()).unwrap(), data);
    assert!(inflate(&z, data.len() - 1).is_err());
    assert!(inflate(&z[..z.len() / 2], data.len())
        .map(|v| v.len() < data.len())
        .unwrap_or(true));
    assert!(inflate(b"not zlib", 100).is_err());
}

/// A shuffled noisy f32 field (like the benchmark data), deflated at zlib levels 1 and 4:
/// truncated streams, flipped bytes and chunk sizes the stream cannot produce are errors (or,
/// for a flip in bits the decoder never reads, the right data), never a panic or wrong data.
#[test]
fn deflate_bad_bytes() {
    let mut x = 0x2545_f491u32;
    let data: Vec<u8> = (0..16_384u32)
        .flat_map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let v = 280.0 + ((i / 128) as f32 / 9.0).sin() * 20.0 + (x % 64) as f32 * 0.01;
            ((v * 100.0).round() / 100.0).to_le_bytes()
        })
        .collect();
    let pipe = [Filter::Shuffle { elem_size: 4 }, Filter::Deflate];
    for level in [1, 4] {
        let z = zlib(&shuffle(&data, 4), level);
        assert_eq!(
            decode_filters(&pipe, 0, z.clone(), data.len()).unwrap(),
            data
        );
        // Truncations: every length near both ends, and a stride through the middle.
        let lens = (0..64)
            .chain((64..z.len()).step_by(97))
            .chain(z.len() - 64..z.len());
        for n in lens {
            let cut = z[..n].to_vec();
            assert!(
                inflate(&cut, data.len()).is_err(),
                "level {level}: stream cut at {n} of {} bytes inflated",
                z.len()
            );
            assert!(decode_filters(&pipe, 0, cut, data.len()).is_err());
        }
        // Flipped bytes: header, a stride through the blocks, the Adler-32 trailer.
        let at = (0..8)
            .chain((8..z.len()).step_by(61))
            .chain(z.len() - 8..z.len());
        for i in at {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = z.clone();
                bad[i] ^= flip;
                if let Ok(v) = decode_filters(&pipe, 0, bad, data.len()) {
                    assert_eq!(
                        v, data,
                        "level {level}: flip {flip:#x} at {i} gave wrong data"
                    );
                }
            }
        }
        // Longer than the chunk: an error, not a longer chunk.
        assert!(inflate(&z, data.len() - 1).is_err());
        assert!(decode_filters(&pipe, 0, z.clone(), data.len() - 4).is_err());
        // Trailing bytes after the stream are ignored (zlib's inflate stops at the end too).
        let mut tail = z.clone();
        tail.extend_from_slice(b"trailing");
        assert_eq!(decode_filters(&pipe, 0, tail, data.len()).unwrap(), data);
    }
    // A chunk size the stream cannot reach (deflate expands at most 1032:1): refused before
    // anything of that size is allocated.
    let small = zlib(&[7u8; 1000], 9);
    for claim in [1usize << 40, usize::MAX, inflate_bound(small.len()) + 1] {
        let e = decode_filters(&[Filter::Deflate], 0, small.clone(), claim).unwrap_err();
        assert!(e.to_string().contains("cannot inflate"), "{e}");
        // `inflate` alone keeps its "at most `max`" contract within the stream's bound.
        assert_eq!(inflate(&small, claim).unwrap(), vec![7u8; 1000]);
    }
    assert!(inflate(b"", 100).is_err());
    assert!(inflate(&[0x78], 100).is_err());
    assert!(decode_filters(&[Filter::Deflate], 0, vec![], 0).is_err());
}

/// The most compressible chunks (long zero runs, near deflate's 1032:1) still fit the bound
/// that caps the output buffer.
#[test]
fn deflate_bound_holds_for_zeros() {
    for (n, level) in [
        (4usize << 20, 9),
        (4 << 20, 1),
        (1 << 20, 6),
        (1, 9),
        (0, 9),
    ] {
        let data = vec![0u8; n];
        let z = zlib(&data, level);
        assert!(
            inflate_bound(z.len()) >= n,
            "{n} zeros in {} bytes",
            z.len()
        );
        assert_eq!(inflate(&z, n).unwrap(), data);
        assert_eq!(decode_filters(&[Filter::Deflate], 0, z, n).unwrap(), data);
    }
}

#[test]
fn pipeline_with_mask() {
    let data: Vec<u8> = (0..4000u32)
        .flat_map(|i| ((i as f32) * 0.5).to_le_bytes())
        .collect();
    let pipe = [
        Filter::Shuffle { elem_size: 4 },
        Filter::Deflate,
        Filter::Fletcher32,
    ];
    let stored = with_fletcher(zlib(&shuffle(&data, 4), 4));
    assert_eq!(decode_filters(&pipe, 0, stored, data.len()).unwrap(), data);
    // Deflate skipped for this chunk (mask bit 1).
    let stored = with_fletcher(shuffle(&data, 4));
    assert_eq!(
        decode_filters(&pipe, 0b010, stored, data.len()).unwrap(),
        data
    );
    // Everything skipped.
    assert_eq!(
        decode_filters(&pipe, 0b111, data.clone(), data.len()).unwrap(),
        data
    );
    // Fletcher first in the pipeline: inflating yields the chunk plus its checksum.
    let pipe2 = [Filter::Fletcher32, Filter::Deflate];
    let stored = zlib(&with_fletcher(data.clone()), 1);
    assert_eq!(decode_filters(&pipe2, 0, stored, data.len()).unwrap(), data);
    // LZF, and LZF skipped (h5py stores incompressible chunks raw).
    let pipe3 = [Filter::Lzf];
    assert_eq!(
        decode_filters(&pipe3, 0, lzf_compress(&data), data.len()).unwrap(),
        data
    );
    assert_eq!(
        decode_filters(&pipe3, 1, data.clone(), data.len()).unwrap(),
        data
    );
    // Wrong sizes are errors, not panics.
    assert!(decode_filters(&pipe3, 1, data.clone(), data.len() + 1).is_err());
    assert!(decode_filters(&pipe, 0, vec![], 16).is_err());
}

/// `decode_filters_into` with one `StageBuffers` reused across chunks of different pipelines
/// and sizes, into outputs holding stale bytes: the same results as `decode_filters`.
#[test]
fn decode_into_reuses_buffers() {
    let chunk = |n: u32, k: f32| -> Vec<u8> {
        (0..n)
            .flat_map(|i| ((i as f32) * k).sin().to_le_bytes())
            .collect()
    };
    let big = chunk(6000, 0.25);
    let small = chunk(700, 0.5);
    let shuf = Filter::Shuffle { elem_size: 4 };
    // (pipeline, filter mask, stored bytes, decoded chunk)
    type Case = (Vec<Filter>, u32, Vec<u8>, Vec<u8>);
    let cases: Vec<Case> = vec![
        (
            vec![shuf, Filter::Deflate],
            0,
            zlib(&shuffle(&big, 4), 1),
            big.clone(),
        ),
        (vec![Filter::Deflate], 0, zlib(&small, 1), small.clone()),
        (
            vec![shuf, Filter::Deflate],
            0,
            zlib(&shuffle(&small, 4), 6),
            small.clone(),
        ),
        (
            vec![shuf, Filter::Deflate, Filter::Fletcher32],
            0,
            with_fletcher(zlib(&shuffle(&big, 4), 4)),
            big.clone(),
        ),
        (
            vec![Filter::Fletcher32, shuf, Filter::Deflate],
            0,
            zlib(&shuffle(&with_fletcher(small.clone()), 4), 2),
            small.clone(),
        ),
        // Fletcher32 the only stage applied: the body is copied out.
        (
            vec![shuf, Filter::Fletcher32],
            0b01,
            with_fletcher(big.clone()),
            big.clone(),
        ),
        (
            vec![shuf, Filter::Deflate],
            0b10,
            shuffle(&small, 4),
            small.clone(),
        ),
        (vec![shuf, Filter::Deflate], 0b11, big.clone(), big.clone()),
        (
            vec![shuf, Filter::Lzf],
            0,
            lzf_compress(&shuffle(&small, 4)),
            small.clone(),
        ),
        (
            vec![Filter::Lzf, shuf],
            0,
            shuffle(&lzf_compress(&big), 4),
            big.clone(),
        ),
    ];
    let mut bufs = StageBuffers::default();
    for (round, (pipe, mask, stored, want)) in cases.iter().enumerate() {
        let mut out = vec![0xA5u8; want.len()];
        decode_filters_into(pipe, *mask, stored, &mut out, &mut bufs)
            .unwrap_or_else(|e| panic!("case {round}: {e}"));
        assert!(out == *want, "case {round}");
        assert_eq!(
            decode_filters(pipe, *mask, stored.clone(), want.len()).unwrap(),
            *want,
            "case {round}"
        );
        // An output of the wrong size is an error, not a panic or a partial write past it.
        let mut short = vec![0u8; want.len() - 1];
        assert!(decode_filters_into(pipe, *mask, stored, &mut short, &mut bufs).is_err());
        let mut long = vec![0u8; want.len() + 4];
        assert!(decode_filters_into(pipe, *mask, stored, &mut long, &mut bufs).is_err());
    }
}

#[test]
fn inflate_into_exact_and_short_buffers() {
    let data: Vec<u8> = (0..50_000u32).map(|i| (i / 7 % 251) as u8).collect();
    let z = zlib(&data, 1);
    let mut out = vec![0u8; data.len()];
    assert_eq!(inflate_into(&z, &mut out).unwrap(), data.len());
    assert_eq!(out, data);
    let mut short = vec![0u8; data.len() - 1];
    let e = inflate_into(&z, &mut short).unwrap_err();
    assert!(e.to_string().contains("inflates past"), "{e}");
    let mut long = vec![7u8; data.len() + 10];
    assert_eq!(inflate_into(&z, &mut long).unwrap(), data.len());
    assert_eq!(&long[..data.len()], &data[..]);
    assert!(inflate_into(b"not zlib", &mut out).is_err());
    assert!(inflate_into(&[], &mut out).is_err());
}

proptest! {
    #[test]
    fn lzf_round_trip(data in proptest::collection::vec(prop_oneof![Just(0u8), Just(7u8), any::<u8>()], 0..3000)) {
        let c = lzf_compress(&data);
        prop_assert_eq!(lzf_decompress(&c, data.len()).unwrap(), data);
    }

    #[test]
    fn lzf_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300), max in 0usize..2000) {
        if let Ok(v) = lzf_decompress(&data, max) {
            prop_assert!(v.len() <= max);
        }
    }

    #[test]
    fn shuffle_round_trip(data in proptest::collection::vec(any::<u8>(), 0..500), s in 1usize..12) {
        let mut out = vec![0u8; data.len()];
        unshuffle(&shuffle(&data, s), s, &mut out);
        prop_assert_eq!(out, data);
    }

    #[test]
    fn inflate_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400), max in 0usize..1 << 20) {
        if let Ok(v) = inflate(&data, max) {
            prop_assert!(v.len() <= max);
        }
    }

    #[test]
    fn inflate_mutated_stream(flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4), cut in any::<prop::sample::Index>()) {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 27) as u8 ^ (i / 300) as u8).collect();
        let mut z = zlib(&data, 1);
        for (at, x) in flips {
            let i = at.index(z.len());
            z[i] ^= x;
        }
        // Wrong data is never returned: an error, or (a flip in bits never read) the chunk.
        if let Ok(v) = decode_filters(&[Filter::Deflate], 0, z.clone(), data.len()) {
            prop_assert_eq!(v, data.clone());
        }
        let n = cut.index(z.len());
        prop_assert!(decode_filters(&[Filter::Deflate], 0, z[..n].to_vec(), data.len()).is_err());
    }

    #[test]
    fn decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400), mask in 0u32..16, n in 0usize..600) {
        let pipe = [Filter::Shuffle { elem_size: 4 }, Filter::Deflate, Filter::Lzf, Filter::Fletcher32];
        let _ = decode_filters(&pipe, mask, data, n);
    }

    /// Bad bytes through `decode_filters_into`, with buffers reused from case to case: never a
    /// panic, and the same verdict (and bytes) as `decode_filters`.
    #[test]
    fn decode_into_agrees(data in proptest::collection::vec(any::<u8>(), 0..400), mask in 0u32..16, n in 0usize..600, order in 0usize..3) {
        let s4 = Filter::Shuffle { elem_size: 4 };
        let pipe: Vec<Filter> = match order {
            0 => vec![s4, Filter::Deflate, Filter::Lzf, Filter::Fletcher32],
            1 => vec![Filter::Fletcher32, s4, Filter::Deflate],
            _ => vec![Filter::Deflate, s4],
        };
        thread_local! {
            static BUFS: std::cell::RefCell<StageBuffers> = std::cell::RefCell::new(StageBuffers::default());
        }
        let mut out = vec![0x5Au8; n];
        let into = BUFS.with_borrow_mut(|b| decode_filters_into(&pipe, mask, &data, &mut out, b));
        match decode_filters(&pipe, mask, data.clone(), n) {
            Ok(v) => {
                prop_assert!(into.is_ok());
                prop_assert_eq!(out, v);
            }
            Err(_) => prop_assert!(into.is_err()),
        }
    }
}
