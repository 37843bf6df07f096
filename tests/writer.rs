//! The streaming writer: pinned bytes (golden files, payload alignment), metadata spill, refusal
//! of bad input, and crash safety (a killed writer leaves nothing at the target path).

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{write_in_order, Array};
use tet::format::{
    ChunkDigest, ChunkPayload, Codec, DType, DatasetSpec, Footer, HistoryRow, MemoryBudget,
    TetFile, TetWriter, WriterOptions,
};
use tet_source::AttrValue;

fn golden_arrays() -> Vec<Array> {
    vec![
        Array::new(
            "temperature",
            DType::F32,
            &[2, 3],
            &[2, 2],
            (1..=6).flat_map(|v| (v as f32).to_le_bytes()).collect(),
        ),
        Array::new(
            "grp/counts",
            DType::U16,
            &[5],
            &[2],
            (10u16..15).flat_map(|v| v.to_le_bytes()).collect(),
        ),
        Array::new("empty", DType::I64, &[0, 4], &[1, 4], vec![]),
    ]
}

fn golden_footer() -> Footer {
    let mut f = Footer::default();
    f.history.push(HistoryRow {
        op: "convert".into(),
        source: "npy".into(),
        at: "1700000000".into(),
        parents: vec!["sha256:0000".into()],
        params: [("codec".to_string(), "raw".to_string())].into(),
    });
    f.file.insert("tool".into(), "tet-convert".into());
    f.global_attrs
        .push(("title".into(), AttrValue::Text("golden".into())));
    let m = f.datasets.entry("temperature".into()).or_default();
    m.dim_names = Some(vec!["y".into(), "x".into()]);
    m.coords
        .insert("x".into(), vec!["a".into(), "b".into(), "c".into()]);
    m.attrs.push(("units".into(), AttrValue::Text("K".into())));
    m.attrs
        .push(("valid_range".into(), AttrValue::F32(vec![0.5, 100.0])));
    f
}

#[test]
fn golden_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("g.tet");
    let arrays = golden_arrays();
    write_in_order(&p, &arrays, &golden_footer(), 1, &|_| Codec::Raw);
    let got = std::fs::read(&p).unwrap();
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/small.tet");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &got).unwrap();
    }
    let want =
        std::fs::read(&golden).expect("fixtures/golden/small.tet (UPDATE_GOLDEN=1 creates it)");
    assert_eq!(
        got, want,
        "format drift: the writer no longer produces the pinned bytes"
    );
    // The pinned layout facts, spelled out.
    assert_eq!(&got[0..4], b"TETR");
    let f = TetFile::open(&golden).unwrap();
    assert_eq!(f.chunk_index_offset % 8, 0);
    assert_eq!(f.entries.len(), 2 + 3);
    assert_eq!(f.entries[1].raw_byte_len, 8); // clipped edge chunk: 3 and 6
    assert_eq!(f.footer().unwrap().unwrap(), &golden_footer());
}

/// The layout rule (docs/FORMAT.md, "Payload alignment"), pinned in
/// `fixtures/golden/aligned.tet`: a raw payload starts at a multiple of its element size after
/// the fewest zero bytes that reach it; a zstd frame follows the previous payload directly.
#[test]
fn golden_alignment_padding() {
    let spec = |name: &str, dtype, shape: u64, chunk: u64| DatasetSpec {
        name: name.into(),
        dtype,
        shape: vec![shape],
        chunk_shape: vec![chunk],
    };
    let specs = vec![
        spec("bytes", DType::U8, 3, 3),
        spec("wide", DType::F64, 3, 2),
        spec("half", DType::I16, 5, 5),
        spec("words", DType::U32, 3, 2),
    ];
    let wide: Vec<u8> = [1.5f64, -2.25, 1e300]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let half: Vec<u8> = (-1i16..4).flat_map(|v| v.to_le_bytes()).collect();
    let words: Vec<u8> = [7u32, 0xdead_beef, 9]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    // A zstd frame of one raw block (19 bytes, independent of the zstd library's version):
    // magic, single segment with a 1-byte content size, last raw block of 10 bytes.
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x20, 10, 0x51, 0, 0];
    frame.extend(&half);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.tet");
    let w = TetWriter::create(&p, specs, WriterOptions::default()).unwrap();
    // Submitted out of order: the padding depends on what precedes a chunk in the file only.
    w.submit(3, &[1], ChunkPayload::raw(words[8..].to_vec()))
        .unwrap();
    w.submit(1, &[1], ChunkPayload::raw(wide[16..].to_vec()))
        .unwrap();
    let zstd = ChunkPayload {
        codec: Codec::Zstd,
        raw_len: 10,
        data: frame.clone().into(),
    };
    w.submit(2, &[0], zstd).unwrap();
    w.submit(3, &[0], ChunkPayload::raw(words[..8].to_vec()))
        .unwrap();
    w.submit(1, &[0], ChunkPayload::raw(wide[..16].to_vec()))
        .unwrap();
    w.submit(0, &[0], ChunkPayload::raw(vec![1, 2, 3])).unwrap();
    let mut footer = Footer::default();
    footer.history.push(HistoryRow {
        op: "convert".into(),
        source: "test".into(),
        at: "1700000000".into(),
        ..Default::default()
    });
    w.finish(&footer).unwrap();
    let got = std::fs::read(&p).unwrap();
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/aligned.tet");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &got).unwrap();
    }
    let want =
        std::fs::read(&golden).expect("fixtures/golden/aligned.tet (UPDATE_GOLDEN=1 creates it)");
    assert_eq!(got, want, "format drift: the padding rule changed");

    let f = TetFile::open(&golden).unwrap();
    let at: Vec<u64> = f.entries.iter().map(|e| e.payload_offset).collect();
    let first = f.chunk_index_offset + f.chunk_index_length;
    assert_eq!(first % 8, 0);
    // u8 (3 bytes) + 5 zero bytes; f64 16, f64 8; the zstd frame directly (19 bytes); then
    // the u32 chunk at the next multiple of 4 (1 zero byte), and the next right after it.
    assert_eq!(
        at,
        [
            first,
            first + 8,
            first + 24,
            first + 32,
            first + 52,
            first + 60
        ]
    );
    assert_eq!(&got[first as usize..][..8], &[1, 2, 3, 0, 0, 0, 0, 0]);
    assert_eq!(got[(first + 51) as usize], 0);
    assert_eq!(f.read_dataset(1).unwrap(), wide);
    assert_eq!(f.read_dataset(2).unwrap(), half);
    assert_eq!(f.read_dataset(3).unwrap(), words);
    let r = tet::format::verify::verify(&f, tet::format::verify::Depth::Deep);
    assert!(r.ok() && r.warnings.is_empty(), "{r:?}");

    // A non-zero padding byte: the data still reads, verify warns where it is.
    let mut bad = got.clone();
    bad[(first + 51) as usize] = 0x40;
    let r = tet::format::verify::verify_bytes(bad, tet::format::verify::Depth::Sample);
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.warnings.len(), 1, "{r:?}");
    assert_eq!(r.warnings[0].code, "payload-padding");
    let (from, to) = (first + 51, first + 52);
    assert!(
        r.warnings[0]
            .message
            .contains(&format!("bytes {from}..{to} before index row 4")),
        "{r:?}"
    );
}

#[test]
fn large_metadata_spills() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.tet");
    let arrays = golden_arrays();
    let mut footer = golden_footer();
    let m = footer.datasets.get_mut("temperature").unwrap();
    for i in 0..3000 {
        m.attrs
            .push((format!("attr_{i:04}"), AttrValue::Text("v".repeat(40))));
    }
    write_in_order(&p, &arrays, &footer, 4, &|_| Codec::Zstd);
    let f = TetFile::open(&p).unwrap();
    let layout = f.footer_layout().unwrap().clone();
    let (off, len) = layout.spill.expect("metadata spilled");
    assert!(len > 64 * 1024);
    assert_eq!(off + len, layout.json_offset);
    assert!(layout.json_len < 64 * 1024);
    assert_eq!(f.footer().unwrap().unwrap(), &footer);
    let r = tet::format::verify::verify(&f, tet::format::verify::Depth::Deep);
    assert!(r.ok(), "{:?}", r.failures);
    // The reference-compatible view stays within its limits (64 attrs).
    let (_, spilled) = f.footer_json();
    let attrs = spilled.unwrap()["datasets"]["temperature"]["attrs"]
        .as_object()
        .unwrap();
    assert_eq!(attrs.len(), 64);
}

fn one_dataset(dir: &std::path::Path) -> (PathBuf, TetWriter<'static>) {
    let p = dir.join("w.tet");
    let w = TetWriter::create(
        &p,
        vec![DatasetSpec {
            name: "d".into(),
            dtype: DType::U8,
            shape: vec![5],
            chunk_shape: vec![2],
        }],
        WriterOptions::default(),
    )
    .unwrap();
    (p, w)
}

/// Digests handed in after the chunks (`ChunkDigest::Later`, as the pipeline does for raw chunks
/// copied out of the input) make the same file as digests computed on submit; a digest that never
/// arrives fails `finish`, leaving nothing behind.
#[test]
fn digests_handed_in_later_make_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let chunks: [&[u8]; 3] = [&[1, 2], &[3, 4], &[5]];
    let write = |how: &str| -> Option<Vec<u8>> {
        let (p, w) = one_dataset(dir.path());
        for (i, c) in chunks.iter().enumerate() {
            let digest = match how {
                "compute" => ChunkDigest::Compute,
                "known" => ChunkDigest::Known(tet::format::integrity::digest(c)),
                _ => ChunkDigest::Later,
            };
            w.submit_digested(0, &[i as u64], ChunkPayload::raw(c.to_vec()), digest)
                .unwrap();
        }
        let given = if how == "missing" { 2 } else { 3 };
        w.provide_digests(
            (0..given).map(|i| (i as u64, tet::format::integrity::digest(chunks[i]))),
        );
        assert_eq!(w.sequence(0, &[2]), Some(2));
        let done = w.finish(&Footer::default());
        if how == "missing" {
            let e = done.unwrap_err().to_string();
            assert!(
                e.contains("chunk [2]: its digest was never handed in"),
                "{e}"
            );
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
            return None;
        }
        done.unwrap();
        let v = tet::format::deep_verify(&p).unwrap();
        assert!(v.has_checksums && v.checked == 3, "{how}: {v:?}");
        let bytes = std::fs::read(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        Some(bytes)
    };
    let computed = write("compute").unwrap();
    assert_eq!(write("known").unwrap(), computed);
    assert_eq!(write("later").unwrap(), computed);
    assert!(write("missing").is_none());
}

/// With a budget, the writer releases each written chunk's bytes and offers its buffer to the
/// budget's idle pool: producers that claim before they allocate never hold more than the budget,
/// and the file is the one an unbudgeted writer makes.
#[test]
fn a_budgeted_writer_releases_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let spec = DatasetSpec {
        name: "d".into(),
        dtype: DType::U8,
        shape: vec![4000],
        chunk_shape: vec![100],
    };
    let chunk = |i: u64| -> Vec<u8> { (0..100).map(|k| (i * 7 + k) as u8).collect() };
    let plain = dir.path().join("plain.tet");
    let w = TetWriter::create(&plain, vec![spec.clone()], WriterOptions::default()).unwrap();
    for i in 0..40 {
        w.submit(0, &[i], ChunkPayload::raw(chunk(i))).unwrap();
    }
    w.finish(&Footer::default()).unwrap();

    let budgeted = dir.path().join("budgeted.tet");
    let budget = std::sync::Arc::new(MemoryBudget::new(350, 40));
    let mut w = TetWriter::create(
        &budgeted,
        vec![spec],
        WriterOptions {
            window: usize::MAX,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    w.set_budget(budget.clone());
    std::thread::scope(|s| {
        s.spawn(|| w.write_all().unwrap());
        for _ in 0..8 {
            s.spawn(|| {
                while let Some(mut claim) = budget.claim(|_| 100) {
                    let mut buf = w.spare_buffer().unwrap_or_default();
                    buf.clear();
                    buf.extend(chunk(claim.seq));
                    buf.shrink_to(100);
                    let payload = ChunkPayload::raw(buf);
                    budget.settle(&mut claim, payload.held_bytes());
                    w.submit(0, &[claim.seq], payload).unwrap();
                }
            });
        }
    });
    let stats = budget.stats();
    assert_eq!(stats.claimed, 0, "{stats:?}");
    assert!(stats.peak <= 350, "{stats:?}");
    w.finish(&Footer::default()).unwrap();
    assert_eq!(
        std::fs::read(&budgeted).unwrap(),
        std::fs::read(&plain).unwrap()
    );
}

#[test]
fn refuses_bad_chunks_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let (p, w) = one_dataset(dir.path());
    // Wrong clipped size: the edge chunk holds 1 byte.
    let e = w
        .submit(0, &[2], ChunkPayload::raw(vec![0, 0]))
        .unwrap_err();
    assert!(e.to_string().contains("clipped chunk holds 1 bytes"), "{e}");
    assert!(w.submit(0, &[3], ChunkPayload::raw(vec![0])).is_err());
    assert!(w.submit(1, &[0], ChunkPayload::raw(vec![0, 0])).is_err());
    w.submit(0, &[0], ChunkPayload::raw(vec![1, 2])).unwrap();
    let e = w
        .submit(0, &[0], ChunkPayload::raw(vec![1, 2]))
        .unwrap_err();
    assert!(e.to_string().contains("submitted twice"), "{e}");
    // Missing chunks: finish fails and nothing is left behind.
    let e = w.finish(&Footer::default()).unwrap_err();
    assert!(
        e.to_string().contains("chunk [1] was never submitted"),
        "{e}"
    );
    assert!(!p.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "temporary file left behind"
    );

    // Dropped without finish: nothing either.
    let (p, w) = one_dataset(dir.path());
    w.submit(0, &[0], ChunkPayload::raw(vec![1, 2])).unwrap();
    drop(w);
    assert!(!p.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // Bad specs.
    let bad = |shape: Vec<u64>, chunk: Vec<u64>| {
        TetWriter::create(
            &dir.path().join("b.tet"),
            vec![DatasetSpec {
                name: "d".into(),
                dtype: DType::U8,
                shape,
                chunk_shape: chunk,
            }],
            WriterOptions::default(),
        )
        .is_err()
    };
    assert!(bad(vec![4], vec![0]));
    assert!(bad(vec![], vec![]));
    assert!(bad(vec![1; 9], vec![1; 9]));
    assert!(bad(vec![u64::MAX, 2], vec![1, 1]));
}

#[test]
fn an_existing_target_is_replaced_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let (p, w) = one_dataset(dir.path());
    std::fs::write(&p, b"old").unwrap();
    for c in 0..3u64 {
        let n = if c == 2 { 1 } else { 2 };
        w.submit(0, &[c], ChunkPayload::raw(vec![c as u8; n]))
            .unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
    }
    w.finish(&Footer::default()).unwrap();
    let f = TetFile::open(&p).unwrap();
    assert_eq!(f.read_dataset(0).unwrap(), vec![0, 0, 1, 1, 2]);
}

/// Not a test on its own: when `TET_SLOW_WRITER=OUT,CHUNKS,DELAY_MS` is set, this writes a
/// `.tet` slowly so the crash test (which re-runs this test binary as a child) can SIGKILL it.
#[test]
fn slow_writer_child() {
    let Ok(spec) = std::env::var("TET_SLOW_WRITER") else {
        return;
    };
    let parts: Vec<&str> = spec.split(',').collect();
    let out = PathBuf::from(parts[0]);
    let chunks: u64 = parts[1].parse().unwrap();
    let delay: u64 = parts[2].parse().unwrap();
    let w = TetWriter::create(
        &out,
        vec![DatasetSpec {
            name: "x".into(),
            dtype: DType::U8,
            shape: vec![chunks * 4096],
            chunk_shape: vec![4096],
        }],
        WriterOptions::default(),
    )
    .unwrap();
    println!("started");
    for c in 0..chunks {
        w.submit(0, &[c], ChunkPayload::raw(vec![c as u8; 4096]))
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
    }
    w.finish(&Footer::default()).unwrap();
}

fn slow_writer(target: &std::path::Path, chunks: u64, delay_ms: u64) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        tet_testkit::layout::test_name(module_path!(), "slow_writer_child").as_str(),
        "--nocapture",
        "--test-threads=1",
    ])
    .env(
        "TET_SLOW_WRITER",
        format!("{},{chunks},{delay_ms}", target.display()),
    );
    c
}

#[test]
fn sigkill_mid_write_leaves_no_file_at_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for round in 0..8 {
        let target = dir.path().join(format!("out{round}.tet"));
        let mut child = slow_writer(&target, 200, 2)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("started") {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "child ended before starting"
            );
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::thread::sleep(Duration::from_millis(x % 300));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        assert!(
            !target.exists(),
            "round {round}: a partial file is at the target path"
        );
    }
    // Without a kill the same program completes a valid file.
    let target = dir.path().join("complete.tet");
    let out = slow_writer(&target, 20, 0).output().unwrap();
    assert!(out.status.success());
    let f = TetFile::open(&target).unwrap();
    let r = tet::format::verify::verify(&f, tet::format::verify::Depth::Deep);
    assert!(r.ok(), "{:?}", r.failures);
}
