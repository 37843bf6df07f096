//! Blosc2 (filter 32026) datasets written by h5py + hdf5plugin and by PyTables
//! (`tests/fixtures/make_blosc2.py`), decoded by this crate with no libhdf5 plugin and compared
//! value for value with what h5py, with hdf5plugin's plugins, reads from them
//! (`tests/fixtures/expect_blosc2.json`; datasets of more than 256 elements as the sha256 of
//! their little-endian bytes). Also: damaged frames are errors, never panics; variants the
//! decoder lacks are unsupported items naming the filter.

use crate::common;

use std::fs::File;
use std::os::unix::fs::FileExt;

use common::{fixture, read_named, var};
use serde_json::Value;
use tet_hdf5::chunks::{ChunkAccess, ChunkedVar};
use tet_hdf5::filters::blosc2::blosc2_decompress;
use tet_hdf5::{open_path, H5Source};
use tet_source::{ElementType, Feature, OpenOptions, Source};
use tet_testkit::{first_difference, json_u64s, sha_hex};

fn expect(file: &str) -> serde_json::Map<String, Value> {
    let all: Value =
        serde_json::from_slice(&std::fs::read(fixture("expect_blosc2.json")).unwrap()).unwrap();
    all["files"][file].as_object().unwrap().clone()
}

fn skip_opts() -> OpenOptions {
    OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    }
}

/// The element type h5py's dtype stands for.
fn element_type(dtype: &str) -> ElementType {
    match dtype.trim_start_matches(['<', '>', '=', '|']) {
        "float64" | "f8" => ElementType::F64,
        "float32" | "f4" => ElementType::F32,
        "uint8" | "u1" => ElementType::U8,
        "int16" | "i2" => ElementType::I16,
        "int32" | "i4" => ElementType::I32,
        "int64" | "i8" => ElementType::I64,
        other => panic!("dtype {other}"),
    }
}

/// Every dataset of `file` under `prefix` converts, by direct chunk access, to h5py's type,
/// shape and values; returns how many were checked.
fn check_prefix(file: &str, src: &H5Source, prefix: &str) -> usize {
    let direct = src.direct_chunk_variables();
    let mut n = 0;
    for (name, e) in expect(file) {
        if !name.starts_with(prefix) {
            continue;
        }
        let v = var(src, &name);
        let ty = element_type(e["dtype"].as_str().unwrap());
        assert_eq!(v.dtype, ty, "{file}: {name}");
        assert_eq!(v.shape, json_u64s(&e["shape"]), "{file}: {name}");
        assert!(
            direct.contains(&name.as_str()),
            "{name} is not read directly"
        );
        assert!(v.layout.filters.contains(&"blosc2".to_string()), "{name}");
        let got = read_named(src, &name);
        if let Some(sha) = e.get("sha256") {
            assert_eq!(sha_hex(&got), sha.as_str().unwrap(), "{file}: {name}");
        } else {
            let want = tet_testkit::expected_le_bytes(&e, ty.size());
            if let Some(d) = first_difference(&got, &want, ty.size()) {
                panic!("{file}: {name}: {d}");
            }
        }
        n += 1;
    }
    n
}

fn open_blosc2() -> H5Source {
    open_path(&fixture("blosc2.h5"), &skip_opts()).unwrap()
}

#[test]
fn every_codec_and_filter_decodes_value_for_value() {
    // blosclz, lz4, lz4hc, zlib, zstd × none, shuffle, bitshuffle, delta; 2-D edge chunks.
    assert_eq!(check_prefix("blosc2.h5", &open_blosc2(), "codec/"), 20);
}

#[test]
fn types_and_byte_orders_decode_value_for_value() {
    // u1, i2, big-endian i4, f4, big-endian f8; 1-D frames without b2nd, an edge chunk.
    assert_eq!(check_prefix("blosc2.h5", &open_blosc2(), "dtype/"), 5);
}

#[test]
fn b2nd_chunks_of_several_blocks_come_out_in_c_order() {
    let src = open_blosc2();
    assert_eq!(check_prefix("blosc2.h5", &src, "blocks/"), 2);
    // One element per block of the 128×256-block grid of the 300×300 chunk (values i % 251).
    let got = read_named(&src, "blocks/u1_2d");
    for (r, c) in [
        (0, 0),
        (127, 255),
        (128, 0),
        (129, 256),
        (299, 299),
        (300, 7),
        (309, 299),
    ] {
        let i = r * 300 + c;
        assert_eq!(got[i], (i % 251) as u8, "({r}, {c})");
    }
}

#[test]
fn chunks_with_a_shorter_last_block_decode_value_for_value() {
    // Blocks of 16 or 32 KiB of a 80008-byte chunk: shuffle, bitshuffle (1809 elements in the
    // last block, not a multiple of 8), delta against the first block.
    assert_eq!(check_prefix("blosc2.h5", &open_blosc2(), "leftover/"), 3);
}

#[test]
fn special_chunks_decode_value_for_value() {
    // clevel 0, zero chunks (special offsets), constants, runs, NaN, incompressible, fill
    // values of unwritten chunks, Blosc2 + fletcher32, TRUNC_PREC chunks stored unfiltered.
    let src = open_blosc2();
    assert_eq!(check_prefix("blosc2.h5", &src, "special/"), 11);
    let got = read_named(&src, "special/sparse");
    assert_eq!(&got[..4], &(-3i32).to_le_bytes());
    assert_eq!(&got[21 * 4..22 * 4], &1i32.to_le_bytes());
    // The all-zero chunks are frames with a special offset and no stored chunk.
    let zeros = read_named(&src, "special/zeros_1d");
    assert!(zeros[..3500 * 4].iter().all(|&b| b == 0));
    assert_eq!(&zeros[3500 * 4..3501 * 4], &1.5f32.to_le_bytes());
}

#[test]
fn pytables_blosc2_arrays_convert() {
    let src = open_path(&fixture("pytables_blosc2.h5"), &OpenOptions::default()).unwrap();
    assert_eq!(check_prefix("pytables_blosc2.h5", &src, ""), 3);
}

#[test]
fn missing_decoder_variants_are_unsupported_items() {
    if std::env::var_os("HDF5_PLUGIN_PATH").is_some() {
        // libhdf5 may load hdf5plugin's Blosc2 from there: then they are read by the library.
        eprintln!("HDF5_PLUGIN_PATH is set: the refusal is not checked");
        return;
    }
    let err = open_path(&fixture("blosc2.h5"), &OpenOptions::default()).unwrap_err();
    assert_eq!(err.feature(), Some(Feature::Codec), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("dataset 'unsupported/bytedelta'"), "{msg}");
    assert!(
        msg.contains("filter blosc2 (id 32026) with Blosc2 filter 35 (bytedelta)"),
        "{msg}"
    );
    assert!(msg.contains("HDF5_PLUGIN_PATH"), "{msg}");
    let src = open_blosc2();
    let skipped: Vec<(&str, &str)> = src
        .skipped()
        .iter()
        .map(|s| (s.name.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].0, "unsupported/bytedelta");
    assert_eq!(skipped[1].0, "unsupported/zfp");
    assert!(skipped[1].1.contains("with codec zfp"), "{skipped:?}");
    assert!(!skipped[1].1.contains('\n'), "{skipped:?}");
    // Everything else of the file converts.
    assert_eq!(src.variables().len(), expect("blosc2.h5").len() - 2);
}

fn direct(dataset: &str) -> ChunkedVar {
    match ChunkedVar::open(&fixture("blosc2.h5"), dataset).unwrap() {
        ChunkAccess::Direct(cv) => cv,
        ChunkAccess::Library(why) => panic!("{dataset} is not read directly: {why}"),
    }
}

/// The stored bytes (one Blosc2 frame) of the chunk at `grid` of a dataset of `blosc2.h5`.
fn stored_frame(dataset: &str, grid: &[u64]) -> Vec<u8> {
    let loc = direct(dataset).chunk_location(grid).unwrap();
    assert_eq!(loc.filter_mask, 0, "{dataset}");
    let mut buf = vec![0u8; loc.size as usize];
    File::open(fixture("blosc2.h5"))
        .unwrap()
        .read_exact_at(&mut buf, loc.offset)
        .unwrap();
    buf
}

/// A frame's damaged forms: every truncation is an error; a flipped byte anywhere is an error
/// or some chunk-sized output (Blosc2 has no checksum: a flipped filter slot or compressed byte
/// may decode to other values), never a panic; in the frame header it is an error or the very
/// same values (a field the decoder does not use), and so is every flip of the offsets chunk
/// and of the data chunk's sizes.
fn refuses_damage(dataset: &str, grid: &[u64], chunk_bytes: usize, step: usize) {
    let good = stored_frame(dataset, grid);
    let want = blosc2_decompress(&good, chunk_bytes).unwrap();
    assert_eq!(want.len(), chunk_bytes);
    assert!(
        blosc2_decompress(&good, chunk_bytes - 1).is_err(),
        "{dataset}: size"
    );
    assert!(
        blosc2_decompress(&good, chunk_bytes + 8).is_err(),
        "{dataset}: size"
    );
    for cut in 0..good.len() {
        assert!(
            blosc2_decompress(&good[..cut], chunk_bytes).is_err(),
            "{dataset}: cut {cut}"
        );
    }
    let header = u32::from_be_bytes(good[11..15].try_into().unwrap()) as usize;
    let comp = u64::from_be_bytes(good[39..47].try_into().unwrap()) as usize;
    let offsets = header + comp;
    for i in (0..good.len()).step_by(step) {
        for x in [0x01, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= x;
            let r = blosc2_decompress(&bad, chunk_bytes);
            let sizes = header + 4..header + 16;
            let strict = i < header || sizes.contains(&i) || (offsets..offsets + 40).contains(&i);
            match r {
                Ok(o) if strict => assert_eq!(o, want, "{dataset}: byte {i} ^ {x:#x}"),
                Ok(o) => assert_eq!(o.len(), chunk_bytes, "{dataset}: byte {i}"),
                Err(e) => assert!(e.to_string().starts_with("blosc2: "), "{e}"),
            }
        }
    }
}

#[test]
fn damaged_frames_are_errors_not_panics() {
    refuses_damage("codec/zstd_shuffle", &[0, 0], 8 * 5 * 8, 1);
    refuses_damage("codec/blosclz_bitshuffle", &[1, 1], 8 * 5 * 8, 1);
    refuses_damage("codec/zlib_delta", &[0, 1], 8 * 5 * 8, 1);
    refuses_damage("dtype/be_i4", &[2], 128 * 4, 1);
    refuses_damage("special/zeros_2d", &[0, 0], 20 * 25 * 4, 1);
    refuses_damage("special/clevel0_1d", &[0], 100 * 4, 1);
    refuses_damage("special/const", &[1, 1], 20 * 25 * 8, 1);
    refuses_damage("leftover/lz4_bitshuffle", &[0], 10001 * 8, 7);
    refuses_damage("blocks/f4_3d", &[0, 0, 0], 60 * 70 * 30 * 4, 11);
    // Made-up sizes: a frame claiming 1 GiB, a b2nd shape that is not the chunk's.
    let mut big = stored_frame("dtype/u1", &[0]);
    big[30..38].copy_from_slice(&(1u64 << 30).to_be_bytes());
    assert!(blosc2_decompress(&big, 128).is_err());
    let mut shape = stored_frame("codec/lz4_none", &[0, 0]);
    let at = shape.windows(2).position(|w| w == [0x92, 0xd3]).unwrap() + 2;
    shape[at..at + 8].copy_from_slice(&(1u64 << 40).to_be_bytes());
    let e = blosc2_decompress(&shape, 320).unwrap_err();
    assert!(e.to_string().contains("b2nd"), "{e}");
    assert!(blosc2_decompress(&[0x9e; 200], 320).is_err());
    // A block shape (5×3) that pads the 8×5 chunk to 10×6: the frame's size disagrees.
    let mut pad = stored_frame("codec/lz4_none", &[0, 0]);
    let at = pad
        .windows(6)
        .rposition(|w| w == [0x92, 0xd2, 0, 0, 0, 8])
        .unwrap();
    pad[at + 2..at + 6].copy_from_slice(&5u32.to_be_bytes());
    pad[at + 7..at + 11].copy_from_slice(&3u32.to_be_bytes());
    let e = blosc2_decompress(&pad, 320).unwrap_err();
    assert!(
        e.to_string()
            .contains("frame holds 320 bytes, expected 480"),
        "{e}"
    );
}

#[test]
fn a_damaged_chunk_in_a_file_is_a_read_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.h5");
    std::fs::copy(fixture("blosc2.h5"), &path).unwrap();
    let loc = direct("codec/lz4_shuffle").chunk_location(&[1, 0]).unwrap();
    // The frame's magic, "b2frame", overwritten.
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .write_all_at(b"XXXXXXX", loc.offset + 2)
        .unwrap();
    let src = open_path(&path, &skip_opts()).unwrap();
    let i = src
        .variables()
        .iter()
        .position(|v| v.name == "codec/lz4_shuffle")
        .unwrap();
    let mut out = vec![0u8; 12 * 7 * 8];
    let err = src.read_region(i, &[0, 0], &[12, 7], &mut out).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("blosc2") && msg.contains("b2frame"), "{msg}");
    // The chunks before it still read.
    let mut first = vec![0u8; 8 * 5 * 8];
    src.read_region(i, &[0, 0], &[8, 5], &mut first).unwrap();
}

mod mutations {
    use proptest::prelude::*;

    use super::{blosc2_decompress, stored_frame};

    /// Real frames of each layout (rank 1, b2nd of one block, b2nd of several blocks, a
    /// shorter last block, a zero chunk) with their chunk sizes.
    fn frames() -> Vec<(Vec<u8>, usize)> {
        [
            ("codec/blosclz_bitshuffle", vec![0, 0], 320),
            ("codec/lz4hc_delta", vec![1, 1], 320),
            ("dtype/i2", vec![0], 256),
            ("special/const", vec![0, 0], 4000),
            ("special/zeros_2d", vec![0, 0], 2000),
            ("leftover/zstd_delta", vec![0], 80008),
            ("blocks/u1_2d", vec![1, 0], 90000),
        ]
        .into_iter()
        .map(|(d, g, n)| (stored_frame(d, &g), n))
        .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random byte changes and a random cut of real frames: an error or exactly a chunk,
        /// never a panic.
        #[test]
        fn mutated_frames_never_panic(
            which in 0usize..7,
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
            keep_all in any::<bool>(),
        ) {
            let (mut frame, n) = frames().swap_remove(which);
            for (at, v) in edits {
                let i = at.index(frame.len());
                frame[i] = v;
            }
            if !keep_all {
                frame.truncate(cut.index(frame.len()));
            }
            if let Ok(out) = blosc2_decompress(&frame, n) {
                prop_assert_eq!(out.len(), n);
            }
        }
    }
}
