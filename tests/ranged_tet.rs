//! `.tet` files read by ranges (issue 22): [`TetFile::open_source`] over a source that lends
//! nothing reads what [`TetFile::open`] reads, for every `.tet` of the fixtures and the reference
//! files, for damaged copies of them, and with a source that fails; then `tet info`, `tet verify`,
//! `tet export` and a conversion of a `.tet` object on a real S3 server (moto, as in
//! `tests/object_store.rs`), which read the object by ranges with no spool.

use crate::common;
// `#[macro_export]` puts the macro at the test crate's root (tests/common/s3.rs).
use crate::moto_or_skip;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use tet::format::verify::{verify, Depth};
use tet::format::{Codec, DType, Footer, TetError, TetFile};
use tet_source::byte_source::{ByteSource, CountingSource};

use common::{datasets, ok, s3, Array};

/// Every `.tet` under `fixtures/` and the shared reference files.
fn every_tet() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
        common::shared().join("interop/reference-tet"),
    ];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "tet") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Everything a reader tells about a file, as text: structure, footer, checks, every chunk's
/// bytes and every dataset's values (or the errors), and the deep verification report.
fn everything(f: &TetFile) -> Vec<String> {
    let mut v = vec![
        format!(
            "{} {} {} {} {:?}",
            f.flags, f.chunk_index_offset, f.chunk_index_length, f.dataset_blob_len, f.index_header
        ),
        format!("{:?}", f.datasets),
        format!("{:?}", f.entries),
        format!("{:?}", f.footer().map(|x| x.cloned())),
        format!("{:?}", f.footer_layout()),
        format!("{:?}", f.footer_json()),
        format!("{:?}", f.chunk_digests()),
        format!("{:?}", f.footer_digest()),
        format!("{}", f.has_checksums()),
        format!("{}", f.file_len()),
    ];
    for (i, e) in f.entries.iter().enumerate() {
        v.push(format!("{i}: {:?}", f.chunk_check(i)));
        v.push(format!("{i}: {:?}", f.stored_bytes(e).map(|b| b.to_vec())));
        v.push(format!(
            "{i}: {:?}",
            f.raw_payload(e).map(|b| b.map(|b| b.to_vec()))
        ));
        v.push(format!("{i}: {:?}", f.check_stored(e)));
        if e.raw_byte_len < 1 << 20 {
            let mut out = vec![0u8; e.raw_byte_len as usize];
            let r = f.read_chunk_into(e, &mut out);
            v.push(format!(
                "{i}: {r:?} {}",
                r.is_ok().then_some(&out).is_some()
            ));
            if r.is_ok() {
                v.push(format!("{i}: {out:?}"));
            }
        }
    }
    for d in 0..f.datasets.len() {
        if f.datasets[d].byte_len() < 64 << 20 {
            v.push(format!("{d}: {:?}", f.read_dataset(d)));
        }
    }
    v.push(serde_json::to_string(&verify(f, Depth::Deep)).unwrap());
    v.push(serde_json::to_string(&verify(f, Depth::Sample)).unwrap());
    v
}

/// The same file read from its bytes in memory and by ranges (a source that lends nothing):
/// both open or both fail with the same message, and tell the same.
fn same_by_ranges(bytes: &[u8], what: &str) {
    let whole = TetFile::from_bytes(bytes.to_vec());
    let counting = Arc::new(CountingSource::new(bytes.to_vec()));
    let ranged = TetFile::open_source(counting.clone());
    match (whole, ranged) {
        (Ok(a), Ok(b)) => {
            assert!(b.bytes().is_none(), "{what}: a ranged file lends no bytes");
            assert_eq!(everything(&a), everything(&b), "{what}");
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
        (a, b) => panic!(
            "{what}: in memory {:?}, by ranges {:?}",
            a.map(|_| ()),
            b.map(|_| ())
        ),
    }
}

/// A file of our writer with raw and zstd chunks, several datasets and edge chunks, and the
/// footer our writer records (checksums).
fn written(dir: &Path) -> Vec<u8> {
    let a: Vec<u8> = (0..40 * 30u32)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect();
    let b: Vec<u8> = (0..33u64).flat_map(|i| (i * i).to_le_bytes()).collect();
    let arrays = [
        Array::new("a", DType::F32, &[40, 30], &[16, 8], a),
        Array::new("b", DType::U64, &[33], &[10], b),
    ];
    let p = dir.join("w.tet");
    common::write_in_order(&p, &arrays, &Footer::default(), 4, &|j| {
        if j % 2 == 0 {
            Codec::Zstd
        } else {
            Codec::Raw
        }
    });
    std::fs::read(p).unwrap()
}

#[test]
fn every_fixture_reads_the_same_by_ranges() {
    let files = every_tet();
    assert!(files.len() >= 7, "{files:?}");
    for p in &files {
        let bytes = std::fs::read(p).unwrap();
        same_by_ranges(&bytes, &p.display().to_string());
        // And against the mapped file itself.
        let mapped = TetFile::open(p).unwrap();
        let ranged = TetFile::open_source(Arc::new(CountingSource::new(bytes))).unwrap();
        assert_eq!(everything(&mapped), everything(&ranged), "{}", p.display());
    }
    let dir = tempfile::tempdir().unwrap();
    same_by_ranges(&written(dir.path()), "written");
}

#[test]
fn a_ranged_open_reads_the_head_and_the_tail_only() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = written(dir.path());
    let whole = TetFile::from_bytes(bytes.clone()).unwrap();
    let src = Arc::new(CountingSource::new(bytes.clone()));
    let f = TetFile::open_source(src.clone()).unwrap();
    let (reads, read) = src.counts();
    let head = f.chunk_index_offset + f.chunk_index_length;
    let layout = f.footer_layout().unwrap().clone();
    let tail = f.file_len() - layout.start;
    // The superblock, the head up to the end of the index, the trailer and the footer JSON.
    assert_eq!(reads, 4, "{reads} reads");
    assert_eq!(read, 40 + head + 16 + layout.json_len);
    assert!(read < 40 + head + tail + 16);
    // The footer digest is checked from what the open read: no more reads.
    assert!(matches!(
        f.footer_digest(),
        tet::format::integrity::FooterDigest::Ok(_)
    ));
    for i in 0..f.entries.len() {
        f.chunk_check(i);
    }
    assert_eq!(
        src.counts().0,
        reads,
        "digests recorded: no payload is read"
    );
    // A chunk is one read of its stored bytes.
    let e = f.entries[1];
    assert_eq!(
        &f.raw_payload(&e).unwrap().unwrap()[..],
        &whole.raw_payload(&e).unwrap().unwrap()[..]
    );
    assert_eq!(src.counts(), (reads + 1, read + e.stored_byte_len));
    // A source that lends its bytes is read as a local file is: borrowed.
    let lent = TetFile::open_source(Arc::new(bytes.clone())).unwrap();
    assert_eq!(lent.bytes(), Some(&bytes[..]));
    assert!(matches!(
        lent.stored_bytes(&e).unwrap(),
        std::borrow::Cow::Borrowed(_)
    ));
    assert!(matches!(
        f.stored_bytes(&e).unwrap(),
        std::borrow::Cow::Owned(_)
    ));
}

/// A source that fails every read after the first `ok` reads, as a store that goes away.
#[derive(Debug)]
struct Failing {
    bytes: Vec<u8>,
    ok: AtomicU64,
}

impl ByteSource for Failing {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if self
            .ok
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_err()
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "the store went away",
            ));
        }
        tet_source::byte_source::copy_at(&self.bytes, offset, buf)
    }
}

#[test]
fn a_source_that_fails_gives_io_errors_never_data() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = written(dir.path());
    for ok in 0..6 {
        let src = Arc::new(Failing {
            bytes: bytes.clone(),
            ok: AtomicU64::new(ok),
        });
        match TetFile::open_source(src) {
            // The superblock or the head failed: an I/O error, as it is.
            Err(TetError::Io(e)) => {
                assert!(ok < 2, "{ok}: {e}");
                assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset);
            }
            Err(e) => panic!("{ok}: {e}"),
            Ok(f) if ok < 4 => {
                // The footer failed: it says why, the datasets stay readable until the
                // source fails them.
                let e = f.footer().unwrap_err().to_string();
                assert!(e.contains("the store went away"), "{ok}: {e}");
            }
            Ok(f) => {
                f.footer().unwrap().unwrap();
                let err = f.read_dataset(0).unwrap_err();
                let TetError::Io(io) = &err else {
                    panic!("{ok}: {err}");
                };
                assert_eq!(io.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
                assert!(err.to_string().contains("dataset `a` chunk"), "{err}");
                // verify names the chunk that cannot be read.
                let r = verify(&f, Depth::Deep);
                assert!(r.failures.iter().any(|x| x.code == "chunk-read"), "{r:?}");
            }
        }
    }
}

/// A copy of `bytes` with damage: cut at `cut` (when shorter), and `flips` bytes XORed.
fn damaged(bytes: &[u8], cut: usize, flips: &[(usize, u8)]) -> Vec<u8> {
    let mut b = bytes[..cut.min(bytes.len())].to_vec();
    let n = b.len();
    for &(at, x) in flips {
        if n > 0 {
            b[at % n] ^= x;
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Truncated or damaged files (the tail, where the footer is read from, most of all):
    /// by ranges as in memory, typed errors, never a panic.
    #[test]
    fn damaged_files_read_the_same_by_ranges(
        file in 0usize..64,
        cut_back in prop_oneof![Just(0usize), 0usize..64, 0usize..4096],
        flips in proptest::collection::vec((0usize..1 << 20, 1u8..=255), 0..3),
        tail in any::<bool>(),
    ) {
        let mut files = every_tet();
        files.retain(|p| std::fs::metadata(p).unwrap().len() < 64 << 10);
        let bytes = std::fs::read(&files[file % files.len()]).unwrap();
        let cut = bytes.len().saturating_sub(cut_back);
        // Flips in the last 64 bytes (trailer, footer JSON) or anywhere.
        let flips: Vec<(usize, u8)> = flips
            .into_iter()
            .map(|(at, x)| if tail { (cut.saturating_sub(1 + at % 64), x) } else { (at, x) })
            .collect();
        let b = damaged(&bytes, cut, &flips);
        same_by_ranges(&b, "damaged");
    }
}

// ---------------------------------------------------------------------------------------------
// Against a real S3 server: moto's server mode, started on a free port of 127.0.0.1 from the
// Python environment `.ci/s3-setup` prepares (TET_PYTHON, else python/.venv/bin/python, else
// python3), behind a proxy that records every request line and Range header (both in
// `tests/common/s3.rs`). Skipped with a printed reason only when moto cannot start.

const CONVERT: &str = env!("CARGO_BIN_EXE_tet-convert");
const TET: &str = env!("CARGO_BIN_EXE_tet");

/// `n` pseudo-random bytes (zstd cannot shrink them much).
fn noise(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// A `.tet` of 6 MiB with three datasets (raw and zstd chunks, edge chunks) and a
/// history row: written, then converted by `tet-convert`.
fn big_tet(dir: &Path) -> PathBuf {
    let arrays = [
        Array::new(
            "a",
            DType::F32,
            &[512, 2048],
            &[64, 2048],
            noise(512 * 2048 * 4, 7),
        ),
        Array::new(
            "b",
            DType::F64,
            &[250, 1024],
            &[32, 1024],
            noise(250 * 1024 * 8, 9),
        ),
        Array::new("c", DType::I16, &[3000], &[1000], noise(6000, 11)),
    ];
    let w = dir.join("w.tet");
    let zstd_from = 8; // the chunks of `a` raw, the others zstd
    common::write_in_order(&w, &arrays, &Footer::default(), 4, &|j| {
        if j < zstd_from {
            Codec::Raw
        } else {
            Codec::Zstd
        }
    });
    let x = dir.join("x.tet");
    let o = std::process::Command::new(CONVERT)
        .args([w.to_str().unwrap(), x.to_str().unwrap()])
        .output()
        .unwrap();
    ok(&o, "local conversion");
    x
}

#[test]
fn info_verify_audit_and_export_of_a_tet_object_read_by_ranges() {
    let moto = moto_or_skip!(s3::Moto::start_recorded());
    moto.helper(&["mb", "tets"]);
    let tmp = tempfile::tempdir().unwrap();
    let x = big_tet(tmp.path());
    let xs = x.to_str().unwrap();
    let size = std::fs::metadata(&x).unwrap().len();
    assert!(size > 5 << 20, "{size}");
    moto.helper(&["put", "tets", "x.tet", xs]);
    let url = "s3://tets/x.tet";

    // info: the same output as of the local file, from a few ranged GETs.
    for args in [
        &["info"][..],
        &["info", "--chunks", "--history", "--metadata"],
        &["info", "--json"],
    ] {
        moto.take();
        let remote = ok(&moto.run(TET, &[args, &[url]].concat()), "info");
        let lines = moto.take();
        let local = ok(&moto.run(TET, &[args, &[xs]].concat()), "local info");
        assert_eq!(remote.replace(url, "X"), local.replace(xs, "X"), "{args:?}");
        let gets = lines.iter().filter(|l| l.starts_with("GET ")).count();
        let ranges = lines.iter().filter(|l| l.starts_with("RANGE ")).count();
        assert!(
            gets >= 1 && gets == ranges,
            "a GET without a range: {lines:?}"
        );
        let fetched = s3::ranged_bytes(&lines);
        assert!(
            fetched <= 1 << 20 && fetched * 6 < size,
            "{fetched} of {size}: {lines:?}"
        );
    }

    // verify --deep passes, reading each chunk once (about the object's size).
    moto.take();
    let out = ok(&moto.run(TET, &["verify", "--deep", url]), "verify --deep");
    assert!(out.starts_with(&format!("{url}: ok (")), "{out}");
    let fetched = s3::ranged_bytes(&moto.take());
    assert!(
        fetched >= size - (64 << 10) && fetched < size + (1 << 20),
        "{fetched}"
    );
    ok(&moto.run(TET, &["verify", url]), "verify");

    // audit: the same history and recorded inputs; a --source object is streamed and matches.
    let remote = ok(&moto.run(TET, &["audit", url]), "audit");
    let local = ok(&moto.run(TET, &["audit", xs]), "local audit");
    assert_eq!(remote.replace(url, "X"), local.replace(xs, "X"));
    let w = tmp.path().join("w.tet");
    moto.helper(&["put", "tets", "w.tet", w.to_str().unwrap()]);
    ok(
        &moto.run(TET, &["audit", url, "--source", "s3://tets/w.tet"]),
        "audit --source object",
    );
    let o = moto.run(TET, &["audit", url, "--source", "s3://tets/x.tet"]);
    assert_eq!(o.status.code(), Some(1), "x is not its own parent");

    // export: the same file as the local export.
    moto.take();
    for ext in ["npz", "nc"] {
        if ext == "nc" && !cfg!(feature = "netcdf") {
            continue;
        }
        let from_s3 = tmp.path().join(format!("s3.{ext}"));
        let from_file = tmp.path().join(format!("file.{ext}"));
        ok(
            &moto.run(TET, &["export", url, from_s3.to_str().unwrap(), "-q"]),
            "export",
        );
        ok(
            &moto.run(TET, &["export", xs, from_file.to_str().unwrap(), "-q"]),
            "local export",
        );
        assert!(
            std::fs::read(&from_s3).unwrap() == std::fs::read(&from_file).unwrap(),
            "{ext}: the exports differ"
        );
    }

    // The export read ranges, no download of the whole object.
    let lines = moto.take();
    let gets = lines.iter().filter(|l| l.starts_with("GET ")).count();
    let ranges = lines.iter().filter(|l| l.starts_with("RANGE ")).count();
    assert!(
        gets >= 2 && gets == ranges,
        "a GET without a range: {lines:?}"
    );
}

#[test]
fn a_damaged_or_missing_tet_object_fails_on_one_line_naming_it() {
    let moto = moto_or_skip!(s3::Moto::start_recorded());
    moto.helper(&["mb", "tets"]);
    let tmp = tempfile::tempdir().unwrap();
    let x = big_tet(tmp.path());
    // One payload byte flipped: in the middle of a chunk of `b` (zstd, digested).
    let mut bytes = std::fs::read(&x).unwrap();
    let f = TetFile::open(&x).unwrap();
    let e = f.entries.iter().find(|e| e.dataset_id == 1).unwrap();
    let at = (e.payload_offset + e.stored_byte_len / 2) as usize;
    bytes[at] ^= 0x40;
    let y = tmp.path().join("y.tet");
    std::fs::write(&y, &bytes).unwrap();
    moto.helper(&["put", "tets", "y.tet", y.to_str().unwrap()]);
    let url = "s3://tets/y.tet";
    let o = moto.run(TET, &["verify", "--deep", url]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    let fails: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL ")).collect();
    assert_eq!(fails.len(), 1, "{out}");
    assert!(
        fails[0].starts_with(&format!(
            "FAIL {url}: [chunk-checksum] dataset `b` chunk [0, 0]"
        )),
        "{out}"
    );
    // Several files: one line each.
    let o = moto.run(TET, &["verify", "s3://tets/y.tet", "s3://tets/nothing.tet"]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with("s3://tets/y.tet: FAILED [chunk-checksum]"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("s3://tets/nothing.tet: FAILED [structure]")
            && lines[1].contains("no such key"),
        "{out}"
    );
    // info, audit, export of a missing key or bucket: one line on stderr naming the URL.
    for args in [
        vec!["info", "s3://tets/nothing.tet"],
        vec!["audit", "s3://tets/nothing.tet"],
        vec![
            "export",
            "s3://nobucket/x.tet",
            tmp.path().join("o.npz").to_str().unwrap(),
        ],
    ] {
        let o = moto.run(TET, &args);
        // audit: a file it cannot read is "could not check" (2).
        let code = if args[0] == "audit" { 2 } else { 1 };
        assert_eq!(o.status.code(), Some(code), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        let url = args[1];
        assert!(err.starts_with(&format!("tet: {url}: ")), "{err}");
        assert!(
            err.contains("no such key") || err.contains("no such bucket"),
            "{err}"
        );
    }
}

#[test]
fn a_tet_object_converts_by_ranges_with_no_spool_and_keeps_its_history() {
    let moto = moto_or_skip!(s3::Moto::start_recorded());
    moto.helper(&["mb", "tets"]);
    let tmp = tempfile::tempdir().unwrap();
    let x = big_tet(tmp.path());
    let xs = x.to_str().unwrap();
    moto.helper(&["put", "tets", "x.tet", xs]);
    let rechunk = [
        "--chunk",
        "a:100,512",
        "--chunk",
        "b:64,256",
        "--codec",
        "zstd",
    ];
    // The local re-conversion.
    let want = tmp.path().join("want.tet");
    ok(
        &moto.run(
            CONVERT,
            &[&[xs, want.to_str().unwrap()][..], &rechunk].concat(),
        ),
        "local re-conversion",
    );
    // To a local file, with a spool folder that is a file: any spool would fail.
    let no_spool = tmp.path().join("spool-is-a-file");
    std::fs::write(&no_spool, b"").unwrap();
    let got = tmp.path().join("got.tet");
    let ledger = tmp.path().join("ledger.jsonl");
    moto.take();
    let args = [
        "s3://tets/x.tet",
        got.to_str().unwrap(),
        "--spool-dir",
        no_spool.to_str().unwrap(),
        "--report",
        ledger.to_str().unwrap(),
    ];
    ok(
        &moto.run(CONVERT, &[&args[..], &rechunk].concat()),
        "convert by ranges",
    );
    let lines = moto.take();
    let gets = lines
        .iter()
        .filter(|l| l.starts_with("GET /tets/x.tet"))
        .count();
    let ranges = lines.iter().filter(|l| l.starts_with("RANGE ")).count();
    assert!(
        gets >= 2 && gets == ranges,
        "a GET without a range: {lines:?}"
    );
    let size = std::fs::metadata(&x).unwrap().len();
    let fetched = s3::ranged_bytes(&lines);
    assert!(fetched < 2 * size, "{fetched} bytes fetched of {size}");
    assert_eq!(datasets(&got), datasets(&want));
    // The chunks are the new ones.
    let g = TetFile::open(&got).unwrap();
    assert_eq!(g.datasets[0].chunk_shape, vec![100, 512]);
    // The footer was carried over: x's history row, then this conversion's, naming the URL.
    let history = g.footer().unwrap().unwrap().history.clone();
    let x_history = TetFile::open(&x)
        .unwrap()
        .footer()
        .unwrap()
        .unwrap()
        .history
        .clone();
    assert_eq!(history.len(), x_history.len() + 1);
    assert_eq!(history[..x_history.len()], x_history[..]);
    let last = history.last().unwrap();
    assert_eq!(
        last.params.get("input").map(String::as_str),
        Some("s3://tets/x.tet")
    );
    // The same parent digest as the local re-conversion records (the input's bytes).
    let want_last = TetFile::open(&want)
        .unwrap()
        .footer()
        .unwrap()
        .unwrap()
        .history
        .last()
        .unwrap()
        .clone();
    assert_eq!(last.parents, want_last.parents);
    let ledger = std::fs::read_to_string(&ledger).unwrap();
    assert!(
        ledger
            .lines()
            .any(|l| l.contains("\"s3://tets/x.tet\"") && l.contains("\"ok\"")),
        "{ledger}"
    );

    // Object to object, with a real spool folder: empty afterwards, y equals the local one.
    let spool = tmp.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    let args = [
        "s3://tets/x.tet",
        "s3://tets/y.tet",
        "--spool-dir",
        spool.to_str().unwrap(),
    ];
    ok(
        &moto.run(CONVERT, &[&args[..], &rechunk].concat()),
        "s3 to s3",
    );
    assert!(
        std::fs::read_dir(&spool).unwrap().next().is_none(),
        "spool left behind"
    );
    let y = tmp.path().join("y.tet");
    moto.helper(&["get", "tets", "y.tet", y.to_str().unwrap()]);
    assert_eq!(datasets(&y), datasets(&want));
    ok(
        &moto.run(TET, &["verify", "--deep", "s3://tets/y.tet"]),
        "verify y",
    );
}

/// `tet info`, `verify` and `audit` of an object stop at SIGINT/SIGTERM while a ranged read
/// waits: one line saying the object's read was interrupted, no more files taken, exit 128 + the
/// signal (as a conversion's and an export's). They used to keep the default disposition: killed
/// by the signal, with no line, and a spooled copy (a server that ignores ranges) left behind.
#[test]
fn info_verify_and_audit_of_an_object_stop_at_a_signal_with_its_exit_code() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let moto = moto_or_skip!(s3::Moto::start());
    moto.helper(&["mb", "tets"]);
    let tmp = tempfile::tempdir().unwrap();
    let x = big_tet(tmp.path());
    moto.helper(&["put", "tets", "x.tet", x.to_str().unwrap()]);
    let url = "s3://tets/x.tet";
    for (args, sig, code) in [
        (&["info", url][..], "TERM", 143),
        (&["verify", "--deep", url, url], "INT", 130),
        (&["audit", url, url], "TERM", 143),
    ] {
        // Every GET of the object is held by the proxy: the command waits in its first read.
        let proxy = s3::Proxy::start(&moto.endpoint, None, Some("GET /tets/x.tet"));
        let mut c = Command::new(TET);
        c.args(args).stdout(Stdio::piped());
        moto.env_at(&mut c, &proxy.endpoint);
        let t = Instant::now();
        let o = s3::signal_when_seen(&proxy, c, "GET /tets/x.tet", Duration::from_secs(120), sig);
        let what = format!("{args:?} {sig}: {o:?}");
        assert_eq!(o.status.code(), Some(code), "{what}");
        assert!(t.elapsed() < Duration::from_secs(60), "{what}");
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        // One file reported, then the command stopped: never a second file's line.
        let lines: Vec<&str> = if args[0] == "verify" {
            out.lines().collect()
        } else {
            err.lines().collect()
        };
        assert_eq!(lines.len(), 1, "{what}");
        assert!(lines[0].contains(url), "{what}");
        assert!(lines[0].contains("interrupted"), "{what}");
    }
}
