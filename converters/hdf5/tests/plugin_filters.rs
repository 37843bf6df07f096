//! Files written by h5py + hdf5plugin and PyTables (`tests/fixtures/make_filters.py`), compared
//! value for value with what h5py, with hdf5plugin's filter plugins, reads from them
//! (`tests/fixtures/expect_filters.json`):
//!
//! * Blosc (every compressor, each shuffle mode), Zstandard, bzip2, LZ4 and Blosc2 chunks are
//!   decoded by this crate (direct chunk access), with no plugin in libhdf5 (Blosc2 in depth:
//!   `tests/blosc2.rs`).
//! * N-bit integers come out as their container type, sign-extended; HDF5 time values mapped
//!   (32-bit seconds, 64-bit PyTables words as microseconds) or refused; compound datasets
//!   whose field names collide after `/` → `_` are an unsupported item, not a failure of the
//!   whole file.
//! * Every decoder refuses damaged chunks with an error (truncated, bit-flipped, made-up headers).

use crate::common;

use std::fs::File;

use common::{assert_note, fixture, json_i32s_le, read_named, var};
use serde_json::Value;
use tet_hdf5::chunks::{ChunkAccess, ChunkedVar};
use tet_hdf5::filters::{blosc_decompress, bzip2_decompress, lz4_decompress, zstd_decompress};
use tet_hdf5::open_path;
use tet_source::{AttrValue, ElementType, Feature, OpenOptions, Source};
use tet_testkit::{first_difference, json_u64s, private_fact};

fn expect(file: &str) -> serde_json::Map<String, Value> {
    let all: Value =
        serde_json::from_slice(&std::fs::read(fixture("expect_filters.json")).unwrap()).unwrap();
    all["files"][file].as_object().unwrap().clone()
}

fn skip_opts() -> OpenOptions {
    OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    }
}

/// The element type and little-endian bytes h5py's reading stands for.
fn expected_bytes(e: &Value) -> (ElementType, Vec<u8>) {
    let dt = e["dtype"]
        .as_str()
        .unwrap()
        .trim_start_matches(['<', '>', '=']);
    let (ty, size) = match dt {
        "float64" | "f8" => (ElementType::F64, 8),
        "float32" | "f4" => (ElementType::F32, 4),
        "int8" | "i1" => (ElementType::I8, 1),
        "uint8" | "u1" => (ElementType::U8, 1),
        "int16" | "i2" => (ElementType::I16, 2),
        "uint16" | "u2" => (ElementType::U16, 2),
        "int32" | "i4" | "time32" => (ElementType::I32, 4),
        "uint32" | "u4" => (ElementType::U32, 4),
        "int64" | "i8" | "time64" => (ElementType::I64, 8),
        "uint64" | "u8" => (ElementType::U64, 8),
        other => panic!("dtype {other}"),
    };
    (ty, tet_testkit::expected_le_bytes(e, size))
}

/// The type and the whole bytes of the variable `name`.
fn read_all(src: &dyn Source, name: &str) -> (ElementType, Vec<u8>) {
    (var(src, name).dtype, read_named(src, name))
}

/// Every dataset of `file` but `except` has h5py's values and shape.
fn check_values(file: &str, src: &dyn Source, except: &[&str]) -> usize {
    let mut n = 0;
    for (name, e) in expect(file) {
        if except.contains(&name.as_str()) {
            continue;
        }
        let (want_ty, want) = expected_bytes(&e);
        let (ty, got) = read_all(src, &name);
        assert_eq!(ty, want_ty, "{file}: {name}");
        if let Some(d) = first_difference(&got, &want, ty.size()) {
            panic!("{file}: {name}: {d}");
        }
        assert_eq!(
            var(src, &name).shape,
            json_u64s(&e["shape"]),
            "{file}: {name}"
        );
        n += 1;
    }
    n
}

#[test]
fn plugin_filters_are_decoded_here_value_for_value() {
    let src = open_path(&fixture("filters.h5"), &skip_opts()).unwrap();
    let n = check_values("filters.h5", &src, &[]);
    assert_eq!(n, 33);
    // Read by direct chunk access: no libhdf5 plugin involved.
    let direct = src.direct_chunk_variables();
    for prefix in ["blosc/", "zstd/", "bzip2/", "lz4/", "blosc2/"] {
        let names: Vec<&str> = src
            .variables()
            .iter()
            .map(|v| v.name.as_str())
            .filter(|n| n.starts_with(prefix))
            .collect();
        assert!(!names.is_empty(), "{prefix}");
        for name in names {
            assert!(direct.contains(&name), "{name} is not read directly");
        }
    }
    // The filters were applied (HDF5 stores a chunk unfiltered when an optional filter cannot
    // shrink it): every dataset but the incompressible one has filtered chunks.
    for v in src.variables() {
        if v.name == "plain" || v.name == "blosc/noise_u1" {
            continue;
        }
        let masks = filter_masks(&v.name);
        assert!(masks.contains(&0), "{}: {masks:?}", v.name);
    }
    assert!(!filter_masks("blosc/noise_u1").contains(&0));
    // The layout names the filters.
    let v = var(&src, "lz4/shuffle_fletcher");
    assert_eq!(v.layout.filters, ["shuffle", "lz4", "fletcher32"]);
    assert!(v.layout.compressed);
}

#[test]
fn pytables_blosc_arrays_convert() {
    let src = open_path(&fixture("pytables_blosc.h5"), &OpenOptions::default()).unwrap();
    assert_eq!(check_values("pytables_blosc.h5", &src, &[]), 4);
    assert_eq!(src.library_read_variables(), Vec::<&str>::new());
    let v = var(&src, "blosc_zstd");
    assert!(
        v.layout.filters.contains(&"blosc".to_string()),
        "{:?}",
        v.layout
    );
}

#[test]
fn nbit_integers_come_out_as_their_container_type() {
    let src = open_path(&fixture("types.h5"), &skip_opts()).unwrap();
    let exp = expect("types.h5");
    let nbit: Vec<&str> = exp
        .keys()
        .map(String::as_str)
        .filter(|k| k.starts_with("nbit/"))
        .collect();
    assert_eq!(nbit.len(), 6);
    for name in nbit {
        let (want_ty, want) = expected_bytes(&exp[name]);
        let (ty, got) = read_all(&src, name);
        assert_eq!((ty, got), (want_ty, want), "{name}");
        let v = var(&src, name);
        assert!(
            private_fact(&v.facts, "h5", "hdf5_nbit").is_some(),
            "{name}: {:?}",
            v.facts
        );
    }
    // Sign extension of a 12-bit field: -2048 and -1 (0x800 and 0xfff stored).
    let (_, got) = read_all(&src, "nbit/i12_off2");
    assert_eq!(i16::from_le_bytes([got[0], got[1]]), -2048);
    assert_eq!(i16::from_le_bytes([got[2], got[3]]), -1);
    let v = var(&src, "nbit/i12_off2");
    assert_eq!(
        private_fact(&v.facts, "h5", "hdf5_nbit"),
        Some(&AttrValue::Text("precision=12 offset=2".into()))
    );
}

/// 32-bit HDF5 time values are stored seconds (CF units added); 64-bit ones are PyTables'
/// seconds + microseconds words, decoded into microseconds, and an integer whose low word is
/// no count of microseconds is refused in one line naming the dataset (PyTables' own files:
/// `tests/fixtures.rs`).
#[test]
fn hdf5_time_values_are_mapped_recorded_or_refused() {
    let src = open_path(&fixture("types.h5"), &skip_opts()).unwrap();
    let exp = expect("types.h5");
    let (want_ty, want) = expected_bytes(&exp["time/d32le"]);
    assert_eq!(read_all(&src, "time/d32le"), (want_ty, want));
    for (name, bits, units) in [
        ("time/d32le", 32, "seconds since 1970-01-01 00:00:00"),
        ("time/d64be", 64, "microseconds since 1970-01-01 00:00:00"),
    ] {
        let v = var(&src, name);
        assert_eq!(
            private_fact(&v.facts, "h5", "hdf5_time"),
            Some(&AttrValue::Text(format!("H5T_UNIX_D{bits}"))),
            "{name}"
        );
        assert_eq!(
            tet_testkit::find(&v.attrs, "units"),
            Some(&AttrValue::Text(units.into())),
            "{name}"
        );
        assert_note(v, "H5T_TIME");
    }
    // Big-endian words [[0, -1], [1700000000123, 1 << 40]]: the first row is seconds 0 and
    // -1 with microseconds 0 and -1 (PyTables' negative fraction), the second row holds a low
    // word that is no count of microseconds.
    let i = src
        .variables()
        .iter()
        .position(|v| v.name == "time/d64be")
        .unwrap();
    assert_eq!(var(&src, "time/d64be").dtype, ElementType::I64);
    let mut row = vec![0u8; 16];
    src.read_region(i, &[0, 0], &[1, 2], &mut row).unwrap();
    let want: Vec<u8> = [0i64, -1_000_001]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(row, want);
    let mut all = vec![0u8; 32];
    let err = src.read_region(i, &[0, 0], &[2, 2], &mut all).unwrap_err();
    assert_eq!(err.feature(), Some(Feature::DataType), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("'time/d64be'") && msg.contains("0x0000018bcfe5687b") && !msg.contains('\n'),
        "{msg}"
    );
}

#[test]
fn colliding_compound_fields_skip_only_that_dataset() {
    let err = open_path(&fixture("types.h5"), &OpenOptions::default()).unwrap_err();
    assert_eq!(err.feature(), Some(Feature::DataType), "{err:?}");
    assert!(err.to_string().contains("compound/clash"), "{err}");
    let src = open_path(&fixture("types.h5"), &skip_opts()).unwrap();
    let mut skipped: Vec<(&str, &str)> = src
        .skipped()
        .iter()
        .map(|s| (s.name.as_str(), s.reason.as_str()))
        .collect();
    skipped.sort();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].0, "compound/clash");
    assert!(skipped[0].1.contains("'compound/clash/a_b'"), "{skipped:?}");
    assert_eq!(skipped[1].0, "compound/clash_nested");
    // The well-formed compound next to them converts, its renamed field included.
    let exp = expect("types.h5");
    let (ty, got) = read_all(&src, "compound/ok/a_b");
    assert_eq!(ty, ElementType::I32);
    assert_eq!(got, json_i32s_le(&exp["compound/ok"]["fields"]["a/b"]));
    assert!(src.variables().iter().any(|v| v.name == "compound/ok/c"));
    assert!(!src
        .variables()
        .iter()
        .any(|v| v.name.starts_with("compound/clash")));
}

/// The chunk grid positions of a dataset of `filters.h5`.
fn grid(cv: &ChunkedVar) -> Vec<Vec<u64>> {
    let dims: Vec<u64> = cv
        .shape()
        .iter()
        .zip(cv.chunk_shape())
        .map(|(&d, &c)| d.div_ceil(c))
        .collect();
    let mut out = vec![vec![]];
    for d in dims {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..d).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    out
}

fn direct(dataset: &str) -> ChunkedVar {
    match ChunkedVar::open(&fixture("filters.h5"), dataset).unwrap() {
        ChunkAccess::Direct(cv) => cv,
        ChunkAccess::Library(why) => panic!("{dataset} is not read directly: {why}"),
    }
}

/// The filter mask of every stored chunk of a dataset of `filters.h5`.
fn filter_masks(dataset: &str) -> Vec<u32> {
    let cv = direct(dataset);
    grid(&cv)
        .iter()
        .filter_map(|g| cv.chunk_location(g))
        .map(|l| l.filter_mask)
        .collect()
}

/// The stored bytes of the first chunk of a dataset of `filters.h5` that went through its
/// (single) filter.
fn stored_chunk(dataset: &str) -> Vec<u8> {
    let path = fixture("filters.h5");
    let cv = direct(dataset);
    let loc = grid(&cv)
        .iter()
        .filter_map(|g| cv.chunk_location(g))
        .find(|l| l.filter_mask == 0)
        .unwrap_or_else(|| panic!("{dataset}: no filtered chunk"));
    let mut buf = vec![0u8; loc.size as usize];
    std::os::unix::fs::FileExt::read_exact_at(&File::open(&path).unwrap(), &mut buf, loc.offset)
        .unwrap();
    buf
}

type Decoder = fn(&[u8], usize) -> Result<Vec<u8>, tet_hdf5::filters::DecodeError>;

/// A decoder accepts the real chunk, and refuses (never panics on) its damaged forms: every
/// truncation, single-byte corruption of the header, made-up sizes, garbage.
fn refuses_damage(name: &str, dataset: &str, chunk_bytes: usize, decode: Decoder) {
    let good = stored_chunk(dataset);
    let out = decode(&good, chunk_bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(out.len(), chunk_bytes, "{name}");
    // Too small a bound.
    assert!(decode(&good, chunk_bytes - 1).is_err(), "{name}: bound");
    for cut in [0, 1, 4, 11, 15, good.len() / 2, good.len() - 1] {
        if cut < good.len() {
            let r = decode(&good[..cut], chunk_bytes);
            assert!(
                r.as_ref().map_or(true, |o| o.len() != chunk_bytes),
                "{name}: truncated at {cut} decoded fully"
            );
        }
    }
    // Flipped bytes anywhere: an error or some output, never a panic or an overrun.
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0xa5;
        if let Ok(o) = decode(&bad, chunk_bytes) {
            assert!(o.len() <= chunk_bytes, "{name}: flip at {i}");
        }
    }
    assert!(decode(&[0xff; 64], chunk_bytes).is_err(), "{name}: garbage");
    assert!(
        decode(&[], chunk_bytes).is_err() || chunk_bytes == 0,
        "{name}: empty"
    );
}

#[test]
fn blosc_refuses_damaged_chunks() {
    for d in [
        "zstd_shuffle",
        "blosclz_noshuffle",
        "lz4_bitshuffle",
        "zlib_shuffle",
    ] {
        refuses_damage("blosc", &format!("blosc/{d}"), 8 * 5 * 8, blosc_decompress);
    }
    // A header claiming more than the chunk holds, or more output than allowed.
    let mut h = stored_chunk("blosc/lz4_shuffle");
    h[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(blosc_decompress(&h, 320).is_err());
    let mut h = stored_chunk("blosc/lz4_shuffle");
    h[4..8].copy_from_slice(&(1u32 << 30).to_le_bytes());
    assert!(blosc_decompress(&h, 320).is_err());
}

#[test]
fn zstd_refuses_damaged_chunks() {
    refuses_damage("zstd", "zstd/level22", 8 * 5 * 8, zstd_decompress);
}

#[test]
fn bzip2_refuses_damaged_chunks() {
    refuses_damage("bzip2", "bzip2/block9", 8 * 5 * 8, bzip2_decompress);
}

#[test]
fn lz4_refuses_damaged_chunks() {
    refuses_damage("lz4", "lz4/blocks", 8 * 8 * 8, lz4_decompress);
    refuses_damage("lz4", "lz4/raw_blocks", 8 * 8 * 8, lz4_decompress);
    // Made-up headers: a huge total, a zero block size, a block claiming 2 GiB from 1 byte.
    let mut h = vec![0u8; 12];
    h[..8].copy_from_slice(&u64::MAX.to_be_bytes());
    assert!(lz4_decompress(&h, 1 << 20).is_err());
    let mut h = vec![0u8; 16];
    h[..8].copy_from_slice(&64u64.to_be_bytes());
    assert!(lz4_decompress(&h, 64).is_err());
    let mut h = vec![0u8; 17];
    h[..8].copy_from_slice(&(1u64 << 31).to_be_bytes());
    h[8..12].copy_from_slice(&(1u32 << 31).to_be_bytes());
    h[12..16].copy_from_slice(&1u32.to_be_bytes());
    assert!(lz4_decompress(&h, 1 << 31).is_err());
}
