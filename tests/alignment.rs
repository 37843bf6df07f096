//! Payload alignment (docs/FORMAT.md, "Payload alignment"): every raw payload the writer puts in
//! a file starts at a multiple of its element size, after the fewest zero bytes that reach it,
//! and nothing else separates payloads. Checked on the index as our reader parses it (not on
//! what the writer says it did): for every fixture of the repository converted (the corpus is
//! checked in `tests/corpus.rs`'s conversion loop), and as a property of the writer and of the
//! pipeline over random mixes of datasets, whatever the thread count.

use crate::common;

use std::path::{Path, PathBuf};

use common::{write, write_in_order, Array};
use proptest::prelude::*;
use tet::format::verify::{verify, Depth};
use tet::format::{payload_alignment, Codec, DType, Footer, HistoryRow, TetFile};
use tet::pipeline::ConvertOptions;

use crate::common::convert;

/// The layout rule on an opened file: payloads in index order, each raw one at a multiple of its
/// element size, each separated from the one before by fewer bytes than its alignment, all of
/// them zero; and `verify --deep` has no warning about it.
fn check_layout(f: &TetFile) -> Result<(), String> {
    let mut cursor: Option<u64> = None;
    for (i, e) in f.entries.iter().enumerate() {
        let ds = &f.datasets[e.dataset_id as usize];
        let codec = e.codec().ok_or(format!("row {i}: unknown codec"))?;
        let align = payload_alignment(codec, ds.dtype);
        let at = e.payload_offset;
        if codec == Codec::Raw && at % ds.dtype.size() as u64 != 0 {
            return Err(format!(
                "row {i} (`{}`, {}): raw payload at {at}, not a multiple of {}",
                ds.name,
                ds.dtype,
                ds.dtype.size()
            ));
        }
        if let Some(c) = cursor {
            if at < c || at - c >= align {
                return Err(format!(
                    "row {i} (`{}`): payload at {at}, the previous one ends at {c} \
                     (alignment {align})",
                    ds.name
                ));
            }
            let pad = &f.bytes().unwrap()[c as usize..at as usize];
            if pad.iter().any(|&b| b != 0) {
                return Err(format!("row {i}: padding {pad:?} before it is not zero"));
            }
        }
        cursor = Some(at + e.stored_byte_len);
    }
    let r = verify(f, Depth::Deep);
    if !r.ok() {
        return Err(format!("verify failed: {:?}", r.failures));
    }
    if let Some(w) = r.warnings.iter().find(|w| w.code.starts_with("payload")) {
        return Err(format!("verify warns: {w:?}"));
    }
    Ok(())
}

/// Every input among the repository's fixtures: files with an importer's extension, and
/// directories an importer identifies (Zarr stores, not descended into); `fixtures/crash`
/// (inputs that crash libraries, for the process isolation tests) left out.
fn fixture_inputs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut roots = vec![root.join("fixtures")];
    for e in std::fs::read_dir(root.join("converters")).unwrap() {
        roots.push(e.unwrap().path().join("tests/fixtures"));
    }
    let extensions: Vec<&str> = tet::registry::formats()
        .iter()
        .filter(|f| f.importer.is_some())
        .flat_map(|f| f.extensions.iter().copied())
        .collect();
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = roots.into_iter().filter(|p| p.is_dir()).collect();
    while let Some(dir) = stack.pop() {
        if dir.ends_with("fixtures/crash") {
            continue;
        }
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if tet::registry::identify(&p).is_ok() {
                    out.push(p);
                } else {
                    stack.push(p);
                }
            } else if p
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| extensions.contains(&x.to_ascii_lowercase().as_str()))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_fixture_output_has_aligned_raw_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.tet");
    let opts = ConvertOptions::from(tet::settings::Settings {
        jobs: Some(2),
        skip_unsupported: true,
        ..Default::default()
    });
    // Small chunks too: odd payload sizes everywhere, raw beside zstd (auto keeps a chunk raw
    // unless zstd saves enough).
    let small = ConvertOptions::from(tet::settings::Settings {
        chunk_bytes: Some(100),
        ..opts.settings.clone()
    });
    let (mut converted, mut padded) = (0, 0);
    for input in fixture_inputs() {
        for o in [&opts, &small] {
            if convert(&input, &out, o).is_err() {
                // Refused inputs (bad-input fixtures) are other tests' business.
                continue;
            }
            converted += 1;
            let f = TetFile::open(&out).unwrap();
            check_layout(&f).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
            padded += usize::from(
                f.entries
                    .windows(2)
                    .any(|w| w[1].payload_offset != w[0].payload_offset + w[0].stored_byte_len),
            );
        }
    }
    eprintln!("{converted} fixture conversions, {padded} of them with alignment padding");
    assert!(converted >= 150, "only {converted} fixture conversions");
    // The rule is exercised: some outputs needed padding.
    assert!(padded >= 10, "only {padded} outputs with padding");
}

fn arb_array() -> impl Strategy<Value = Array> {
    (0usize..10, 1usize..=4)
        .prop_flat_map(|(t, rank)| {
            let max_axis = match rank {
                1 => 45u64,
                2 => 11,
                _ => 5,
            };
            (
                Just(DType::ALL[t]),
                // Zero-length axes now and then, odd lengths mostly.
                proptest::collection::vec(0..=max_axis, rank),
                proptest::collection::vec(1..=max_axis + 2, rank),
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
                    (x % 3) as u8
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

/// The file's bytes before its footer (what `--jobs` could change: payloads, padding, index).
fn before_footer(p: &Path) -> Vec<u8> {
    let f = TetFile::open(p).unwrap();
    let end = f.footer_layout().unwrap().start as usize;
    f.bytes().unwrap()[..end].to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The writer: random dataset mixes, raw and zstd chunks at random, written in index order
    /// from one thread and in shuffled order from several: the same bytes, the layout rule, the
    /// values back.
    #[test]
    fn writer_aligns_raw_payloads(
        mut arrays in proptest::collection::vec(arb_array(), 1..6),
        threads in 2usize..5,
        zstd_mask in any::<u64>(),
    ) {
        for (i, a) in arrays.iter_mut().enumerate() {
            a.spec.name = format!("ds{i}");
        }
        let dir = tempfile::tempdir().unwrap();
        let n = common::jobs(&arrays).len();
        let codec = |j: usize| if zstd_mask >> (j % 64) & 1 == 1 { Codec::Zstd } else { Codec::Raw };
        let p1 = dir.path().join("serial.tet");
        write_in_order(&p1, &arrays, &footer(), 1, &codec);
        let p2 = dir.path().join("parallel.tet");
        let order: Vec<usize> = (0..n).rev().collect();
        write(&p2, &arrays, &footer(), &order, threads, n.max(1), &codec);
        prop_assert_eq!(std::fs::read(&p1).unwrap(), std::fs::read(&p2).unwrap());

        let f = TetFile::open(&p2).unwrap();
        if let Err(e) = check_layout(&f) {
            prop_assert!(false, "{}", e);
        }
        for (i, a) in arrays.iter().enumerate() {
            prop_assert_eq!(&f.read_dataset(i).unwrap(), &a.data);
        }
    }

    /// The pipeline (a `.tet` input re-chunked and re-coded): `--jobs 1` and `--jobs 3` give the
    /// same payload bytes and index, laid out by the rule, with the input's values.
    #[test]
    fn pipeline_aligns_raw_payloads(
        mut arrays in proptest::collection::vec(arb_array(), 1..5),
        codec in prop_oneof![Just("raw"), Just("zstd:1"), Just("auto")],
        target in 8u64..200,
    ) {
        for (i, a) in arrays.iter_mut().enumerate() {
            a.spec.name = format!("ds{i}");
        }
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.tet");
        write_in_order(&input, &arrays, &footer(), 1, &|_| Codec::Raw);
        let mut outputs = Vec::new();
        for jobs in [1, 3] {
            let opts = ConvertOptions::from(tet::settings::Settings {
                codec: codec.parse().unwrap(),
                chunk_bytes: Some(target),
                jobs: Some(jobs),
                ..Default::default()
            });
            let out = dir.path().join(format!("j{jobs}.tet"));
            convert(&input, &out, &opts).unwrap();
            outputs.push(out);
        }
        prop_assert_eq!(before_footer(&outputs[0]), before_footer(&outputs[1]));
        let f = TetFile::open(&outputs[1]).unwrap();
        if let Err(e) = check_layout(&f) {
            prop_assert!(false, "{}", e);
        }
        for a in &arrays {
            let id = f.dataset_id(&a.spec.name).unwrap();
            prop_assert_eq!(&f.read_dataset(id).unwrap(), &a.data);
        }
    }
}

/// A file written before the rule (`fixtures/legacy/complex_scalar.tet`: two f64 payloads at
/// offsets that are no multiple of 8) still reads and verifies, with the warning that names the unaligned payloads; a
/// conversion of it (the `.tet` re-chunk path) is aligned and holds the same values.
#[test]
fn unaligned_files_of_before_still_read() {
    let old = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/legacy/complex_scalar.tet");
    let f = TetFile::open(&old).unwrap();
    let unaligned: Vec<u64> = f
        .entries
        .iter()
        .filter(|e| e.payload_offset % f.datasets[e.dataset_id as usize].dtype.size() as u64 != 0)
        .map(|e| e.payload_offset)
        .collect();
    assert_eq!(unaligned, [828, 876]);
    let r = verify(&f, Depth::Deep);
    assert!(r.ok(), "{:?}", r.failures);
    let codes: Vec<&str> = r.warnings.iter().map(|w| w.code).collect();
    assert_eq!(codes, ["payload-unaligned"], "{r:?}");
    assert!(
        r.warnings[0].message.contains("2 raw payloads")
            && r.warnings[0]
                .message
                .contains("index row 1 at 828, element size 8"),
        "{r:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("again.tet");
    let opts = ConvertOptions::from(tet::settings::Settings {
        codec: "raw".parse().unwrap(),
        jobs: Some(2),
        ..Default::default()
    });
    convert(&old, &out, &opts).unwrap();
    let g = TetFile::open(&out).unwrap();
    check_layout(&g).unwrap();
    assert_eq!(g.datasets.len(), f.datasets.len());
    for (i, d) in f.datasets.iter().enumerate() {
        let id = g.dataset_id(&d.name).unwrap();
        assert_eq!(
            g.read_dataset(id).unwrap(),
            f.read_dataset(i).unwrap(),
            "{}",
            d.name
        );
    }
}
