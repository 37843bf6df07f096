//! Object storage (issue 22) against a real S3 server on 127.0.0.1: moto's server mode, started
//! here on a free port from the Python environment `.ci/s3-setup` prepares (TET_PYTHON, else
//! python/.venv/bin/python, else python3). Skipped with a printed reason only when moto cannot
//! start. Buckets and objects are made and read back with boto3 (the standard client), the
//! conversions run through the `tet-convert` and `tet` binaries. The server, the boto3 helper
//! and the proxies are `tests/common/s3.rs`.

use crate::common;
// `#[macro_export]` puts the macro at the test crate's root (tests/common/s3.rs).
use crate::moto_or_skip;

use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::s3::{python, ranged_bytes, signal_when_seen, Proxy};
use common::{datasets, ok};
use tet::format::TetFile;

const CONVERT: &str = env!("CARGO_BIN_EXE_tet-convert");
const TET: &str = env!("CARGO_BIN_EXE_tet");

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/public")
        .join(rel)
}

/// The parents (input digests) of the last history row.
fn history_parents(path: &Path) -> Vec<String> {
    let f = TetFile::open(path).unwrap();
    let footer = f.footer().unwrap().unwrap();
    footer.history.last().unwrap().parents.clone()
}

fn last_history_params(path: &Path) -> std::collections::BTreeMap<String, String> {
    let f = TetFile::open(path).unwrap();
    let footer = f.footer().unwrap().unwrap();
    footer.history.last().unwrap().params.clone()
}

#[test]
fn every_format_from_s3_to_s3_equals_the_local_conversion() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    moto.helper(&["mb", "outbox"]);
    let tmp = tempfile::tempdir().unwrap();
    // A .tet input too: the local conversion of an NPY file.
    let tet_in = tmp.path().join("made.tet");
    ok(
        &moto.run(
            CONVERT,
            &[
                corpus("npy/rank3.npy").to_str().unwrap(),
                tet_in.to_str().unwrap(),
            ],
        ),
        "local .tet",
    );
    let mut inputs = vec![
        corpus("npy/rank3.npy"),
        corpus("npy/arrays_savez.npz"),
        corpus("teafile/tick_full.tea"),
        corpus("tensogram/two_objects.tgm"),
        corpus("zarr/climate.zarr"),
        tet_in,
    ];
    if cfg!(feature = "netcdf") {
        inputs.push(corpus("netcdf/nc4_classic_chunked.nc"));
    }
    if cfg!(feature = "hdf5") {
        inputs.push(corpus("hdf5/structure.h5"));
    }
    for input in inputs {
        let name = input.file_name().unwrap().to_str().unwrap().to_string();
        let key = format!("data/{name}");
        moto.helper(&["put", "inbox", &key, input.to_str().unwrap()]);
        let url_in = format!("s3://inbox/{key}");
        let url_out = format!("s3://outbox/tet/{name}.tet");
        let spool = tmp.path().join(format!("spool-{name}"));
        std::fs::create_dir(&spool).unwrap();
        let o = moto.run(
            CONVERT,
            &[&url_in, &url_out, "--spool-dir", spool.to_str().unwrap()],
        );
        ok(&o, &format!("convert {url_in}"));
        // The spool is gone after the run.
        assert!(
            std::fs::read_dir(&spool).unwrap().next().is_none(),
            "{name}: spool left behind"
        );
        let local = tmp.path().join(format!("{name}.local.tet"));
        ok(
            &moto.run(CONVERT, &[input.to_str().unwrap(), local.to_str().unwrap()]),
            "local conversion",
        );
        let fetched = tmp.path().join(format!("{name}.fetched.tet"));
        moto.helper(&[
            "get",
            "outbox",
            &format!("tet/{name}.tet"),
            fetched.to_str().unwrap(),
        ]);
        assert_eq!(
            datasets(&fetched),
            datasets(&local),
            "{name}: values differ"
        );
        let params = last_history_params(&fetched);
        assert_eq!(params.get("input"), Some(&url_in), "{name}: history input");
        assert!(
            params.get("input_object").is_some_and(|s| s.contains(':')),
            "{name}: no object stamp: {params:?}"
        );
        let text = serde_json::to_string(&params).unwrap();
        assert!(!text.contains("verysecretvalue") && !text.contains("spool-"));
        // The object itself verifies and shows.
        ok(
            &moto.run(TET, &["verify", "--deep", &url_out]),
            "verify --deep",
        );
        let info = moto.run(TET, &["info", "--history", &url_out]);
        ok(&info, "info");
        assert!(String::from_utf8_lossy(&info.stdout).contains(&url_in));
    }
}

#[test]
fn a_rerun_is_up_to_date_and_errors_are_one_line() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    moto.helper(&["mb", "outbox"]);
    let input = corpus("npy/rank3.npy");
    moto.helper(&["put", "inbox", "a.npy", input.to_str().unwrap()]);
    let o = moto.run(CONVERT, &["s3://inbox/a.npy", "s3://outbox/a.tet"]);
    ok(&o, "first");
    // The ledger as one object per run under a prefix.
    moto.helper(&["mb", "logs"]);
    let o = moto.run(
        CONVERT,
        &[
            "s3://inbox/a.npy",
            "s3://outbox/a.tet",
            "-v",
            "--report",
            "s3://logs/runs/",
        ],
    );
    ok(&o, "second");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("up to date"), "{err}");
    let logs = moto.helper(&["ls", "logs", "runs/"]);
    let keys: Vec<&str> = logs.lines().collect();
    assert!(keys.len() == 1 && keys[0].ends_with(".jsonl"), "{logs}");
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("ledger.jsonl");
    moto.helper(&["get", "logs", keys[0], ledger.to_str().unwrap()]);
    let rows = ledger_rows(&ledger);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "skipped");
    assert_eq!(rows[0]["input"], "s3://inbox/a.npy");
    // A changed object is converted again.
    moto.helper(&[
        "put",
        "inbox",
        "a.npy",
        corpus("npy/dtype_i32.npy").to_str().unwrap(),
    ]);
    let o = moto.run(CONVERT, &["s3://inbox/a.npy", "s3://outbox/a.tet"]);
    ok(&o, "third");
    assert!(String::from_utf8_lossy(&o.stderr).contains("rebuilt: the input changed"));

    for (args, cause) in [
        (
            ["s3://inbox/missing.npy", "s3://outbox/m.tet"],
            "no such key",
        ),
        (
            ["s3://nobucket/a.npy", "s3://outbox/m.tet"],
            "no such bucket",
        ),
    ] {
        let o = moto.run(CONVERT, &args);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(args[0]) && err.contains(cause), "{err}");
        assert!(!err.contains("verysecretvalue"));
    }
    // Nothing was written for the failures.
    let listed = moto.helper(&["ls", "outbox", ""]);
    assert_eq!(listed.lines().collect::<Vec<_>>(), ["a.tet"]);
    let _ = std::io::stderr().flush();
}

/// A small f32 `.npy` whose values depend on `seed`.
fn small_npy(seed: u32) -> Vec<u8> {
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (16, 8), }";
    let data: Vec<u8> = (0..128u32)
        .flat_map(|i| ((i * 7 + seed) as f32).to_le_bytes())
        .collect();
    let pad = 64 - (10 + header.len() + 1) % 64;
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend(((header.len() + pad + 1) as u16).to_le_bytes());
    b.extend(header.as_bytes());
    b.extend(std::iter::repeat_n(b' ', pad));
    b.push(b'\n');
    b.extend(data);
    b
}

fn ledger_rows(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.get("status").is_some())
        .collect()
}

#[test]
fn a_sharded_batch_over_a_prefix_converts_each_object_once_and_reruns_get_nothing() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    moto.helper(&["mb", "outbox"]);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    for i in 0..200u32 {
        let dir = src.join(format!("d{}", i % 4));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i:03}.npy")), small_npy(i)).unwrap();
    }
    moto.helper(&["put", "inbox", "2024", src.to_str().unwrap()]);
    let proxy = Proxy::start(&moto.endpoint, None, None);
    let run = |shard: &str, report: &Path| {
        let mut c = Command::new(CONVERT);
        moto.env(&mut c);
        c.env("AWS_ENDPOINT_URL", &proxy.endpoint).args([
            "s3://inbox/2024/",
            "--out-dir",
            "s3://outbox/tet/",
            "--shard",
            shard,
            "--workers",
            "2",
            "--jobs",
            "1",
            "--keep-going",
            "--report",
            report.to_str().unwrap(),
        ]);
        c.output().unwrap()
    };
    let mut converted = Vec::new();
    for shard in ["0/2", "1/2"] {
        let report = tmp.path().join(format!("first-{}.jsonl", &shard[..1]));
        ok(&run(shard, &report), shard);
        for r in ledger_rows(&report) {
            assert_eq!(r["status"], "ok", "{r}");
            converted.push(r["input"].as_str().unwrap().to_string());
        }
    }
    converted.sort();
    let before = converted.len();
    converted.dedup();
    assert_eq!((before, converted.len()), (200, 200));
    let listed = moto.helper(&["ls", "outbox", "tet/"]);
    assert_eq!(listed.lines().count(), 200);
    assert!(listed.lines().any(|l| l == "tet/d1/f001.tet"), "{listed}");
    // Values of one output against its input.
    let out = tmp.path().join("f005.tet");
    moto.helper(&["get", "outbox", "tet/d1/f005.tet", out.to_str().unwrap()]);
    let f = TetFile::open(&out).unwrap();
    let want: Vec<u8> = small_npy(5)[small_npy(5).len() - 512..].to_vec();
    assert_eq!(f.read_dataset(0).unwrap(), want);

    proxy.take();
    let mut skipped = 0;
    for shard in ["0/2", "1/2"] {
        let report = tmp.path().join(format!("again-{}.jsonl", &shard[..1]));
        ok(&run(shard, &report), shard);
        let rows = ledger_rows(&report);
        assert!(rows.iter().all(|r| r["status"] == "skipped"), "{rows:?}");
        skipped += rows.len();
    }
    assert_eq!(skipped, 200);
    let lines = proxy.take();
    let body_gets: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("GET /inbox/"))
        .collect();
    assert!(body_gets.is_empty(), "{body_gets:?}");
    assert!(lines.iter().any(|l| l.starts_with("HEAD /inbox/")));
}

#[test]
fn failures_in_a_batch_are_one_line_and_a_failed_row_and_the_batch_goes_on() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    moto.helper(&["mb", "outbox"]);
    let tmp = tempfile::tempdir().unwrap();
    // An object large enough to be cut mid-download, and a good one.
    let big = tmp.path().join("cut.npy");
    let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (262144,), }";
    let mut bytes = Vec::new();
    let pad = 64 - (10 + header.len() + 1) % 64;
    bytes.extend(b"\x93NUMPY\x01\x00");
    bytes.extend(((header.len() + pad + 1) as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(std::iter::repeat_n(b' ', pad));
    bytes.push(b'\n');
    bytes.extend((0..262144u32).flat_map(|i| f64::from(i).to_le_bytes()));
    std::fs::write(&big, bytes).unwrap();
    moto.helper(&["put", "inbox", "cut.npy", big.to_str().unwrap()]);
    let good = tmp.path().join("good.npy");
    std::fs::write(&good, small_npy(3)).unwrap();
    moto.helper(&["put", "inbox", "good.npy", good.to_str().unwrap()]);
    moto.helper(&["mb", "locked"]);
    moto.helper(&["put", "locked", "secret.npy", good.to_str().unwrap()]);
    let proxy = Proxy::start_denying(&moto.endpoint, Some("cut.npy"), None, Some("/locked/"));
    let report = tmp.path().join("ledger.jsonl");
    let mut c = Command::new(CONVERT);
    moto.env(&mut c);
    c.env("AWS_ENDPOINT_URL", &proxy.endpoint).args([
        "s3://nobucket/x.npy",
        "s3://locked/secret.npy",
        "s3://inbox/cut.npy",
        "s3://inbox/good.npy",
        "--out-dir",
        "s3://outbox/",
        "--keep-going",
        "--storage-option",
        "max_retries=1",
        "--storage-option",
        "retry_timeout=10",
        "--report",
        report.to_str().unwrap(),
    ]);
    let o = c.output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{err}");
    let fails: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("tet-convert: s3://"))
        .collect();
    assert_eq!(fails.len(), 3, "{err} {:?}", proxy.take());
    assert!(
        fails
            .iter()
            .any(|l| l.contains("secret.npy") && l.contains("access denied")),
        "{err}"
    );
    assert!(
        fails
            .iter()
            .any(|l| l.contains("nobucket") && l.contains("no such bucket")),
        "{err}"
    );
    // Cut mid-read: the first ranged GET of cut.npy (read by ranges, no spool) loses its
    // connection after 64 KiB, and so does its retry.
    assert!(
        fails
            .iter()
            .any(|l| l.contains("cut.npy") && l.contains("connection lost")),
        "{err}"
    );
    assert!(!err.contains("verysecretvalue"));
    let rows = ledger_rows(&report);
    let status = |name: &str| {
        rows.iter()
            .find(|r| r["input"].as_str().unwrap().contains(name))
            .map(|r| r["status"].as_str().unwrap().to_string())
    };
    assert_eq!(status("x.npy").as_deref(), Some("failed"), "{rows:?}");
    assert_eq!(status("cut.npy").as_deref(), Some("failed"), "{rows:?}");
    assert_eq!(status("secret.npy").as_deref(), Some("failed"), "{rows:?}");
    assert_eq!(status("good.npy").as_deref(), Some("ok"), "{rows:?}");
    let listed = moto.helper(&["ls", "outbox", ""]);
    assert_eq!(listed.lines().collect::<Vec<_>>(), ["good.tet"]);
}

#[test]
fn an_http_input_converts() {
    let python = python();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("h.npy"), small_npy(9)).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let Ok(mut server) = Command::new(&python)
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
        ])
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        eprintln!("skipped: cannot start python -m http.server");
        return;
    };
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() && t.elapsed().as_secs() < 20 {
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = tmp.path().join("h.tet");
    let url = format!("http://127.0.0.1:{port}/h.npy");
    let o = Command::new(CONVERT)
        .args([
            &url,
            out.to_str().unwrap(),
            "--storage-option",
            "allow_http=true",
        ])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    ok(&o, "http input");
    let f = TetFile::open(&out).unwrap();
    let npy = small_npy(9);
    assert_eq!(f.read_dataset(0).unwrap(), npy[npy.len() - 512..].to_vec());
    assert_eq!(last_history_params(&out).get("input"), Some(&url));
}

#[test]
fn a_terminated_or_killed_upload_leaves_no_object_and_the_next_run_aborts_it() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    moto.helper(&["mb", "outbox"]);
    let tmp = tempfile::tempdir().unwrap();
    // 40 MiB of f64: three 16 MiB parts.
    let big = tmp.path().join("big.npy");
    let n = 5 << 20;
    let header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({n},), }}");
    let pad = 64 - (10 + header.len() + 1) % 64;
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend(((header.len() + pad + 1) as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(std::iter::repeat_n(b' ', pad));
    bytes.push(b'\n');
    bytes.extend((0..n as u32).flat_map(|i| (f64::from(i) * 0.37).sin().to_le_bytes()));
    std::fs::write(&big, bytes).unwrap();
    moto.helper(&["put", "inbox", "big.npy", big.to_str().unwrap()]);
    let spool = tmp.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    let args = [
        "s3://inbox/big.npy",
        "s3://outbox/big.tet",
        "--isolation",
        "none",
        "--spool-dir",
        spool.to_str().unwrap(),
    ];
    for sig in ["TERM", "KILL"] {
        // The second part's upload hangs in the proxy; the signal comes while it does.
        let proxy = Proxy::start(&moto.endpoint, None, Some("partNumber=2"));
        let mut c = Command::new(CONVERT);
        moto.env(&mut c);
        c.env("AWS_ENDPOINT_URL", &proxy.endpoint).args(args);
        let within = Duration::from_secs(60);
        let o = signal_when_seen(&proxy, c, "partNumber=2", within, sig);
        assert!(!o.status.success(), "{sig}");
        let listed = moto.helper(&["ls", "outbox", "big.tet"]);
        assert!(
            listed.trim().is_empty(),
            "{sig}: an object appeared: {listed}"
        );
        let uploads = moto.helper(&["uploads", "outbox"]);
        if sig == "TERM" {
            // Aborted by the run itself; its spool removed.
            assert!(uploads.trim().is_empty(), "{uploads}");
            assert!(std::fs::read_dir(&spool).unwrap().next().is_none());
        } else {
            assert_eq!(uploads.lines().collect::<Vec<_>>(), ["big.tet"]);
        }
    }
    // The next run aborts the stale upload, removes the dead spool, and publishes.
    let o = moto.run(CONVERT, &args);
    ok(&o, "after SIGKILL");
    assert!(moto.helper(&["uploads", "outbox"]).trim().is_empty());
    assert_eq!(moto.helper(&["ls", "outbox", ""]).trim(), "big.tet");
    assert!(std::fs::read_dir(&spool).unwrap().next().is_none());
    let fetched = tmp.path().join("fetched.tet");
    moto.helper(&["get", "outbox", "big.tet", fetched.to_str().unwrap()]);
    ok(
        &moto.run(TET, &["verify", "--deep", fetched.to_str().unwrap()]),
        "verify",
    );
}

/// Runs `c` (its output dropped): whether it succeeded, and its peak resident memory in KiB.
fn peak_rss_kib(mut c: Command) -> (bool, u64) {
    let child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain data, for which all zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not waited for yet (`child` is dropped without a wait); the
    // pointers are to live locals of the types wait4 fills.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    drop(child);
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (ok, u64::try_from(usage.ru_maxrss).unwrap_or(0))
}

/// Writes a `.npy` of `rows` x `cols` f64 whose value at (r, c) is `r * cols + c`.
fn write_f64_npy(path: &Path, rows: u64, cols: u64) {
    let header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    let pad = 64 - (10 + header.len() + 1) % 64;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    w.write_all(b"\x93NUMPY\x01\x00").unwrap();
    w.write_all(&((header.len() + pad + 1) as u16).to_le_bytes())
        .unwrap();
    w.write_all(header.as_bytes()).unwrap();
    w.write_all(&vec![b' '; pad]).unwrap();
    w.write_all(b"\n").unwrap();
    for r in 0..rows {
        let row: Vec<u8> = (0..cols)
            .flat_map(|c| ((r * cols + c) as f64).to_le_bytes())
            .collect();
        w.write_all(&row).unwrap();
    }
    w.flush().unwrap();
}

#[test]
fn engine_formats_are_read_by_ranges_with_no_spool() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    let tmp = tempfile::tempdir().unwrap();
    // A spool folder that is a file: any spool (or free-space check under it) would fail.
    let no_spool = tmp.path().join("spool-is-a-file");
    std::fs::write(&no_spool, b"").unwrap();
    let proxy = Proxy::start(&moto.endpoint, None, None);
    let convert = |url: &str, out: &Path| {
        let mut c = Command::new(CONVERT);
        moto.env(&mut c);
        c.env("AWS_ENDPOINT_URL", &proxy.endpoint).args([
            url,
            out.to_str().unwrap(),
            "--spool-dir",
            no_spool.to_str().unwrap(),
        ]);
        c.output().unwrap()
    };
    for rel in [
        "npy/rank3.npy",
        "npy/big_endian_f64.npy",
        "npy/fortran_order_f64.npy",
        "npy/structured_record.npy",
        "npy/arrays_savez.npz",
        "npy/arrays_compressed.npz",
        "teafile/tick_full.tea",
        "tensogram/two_objects.tgm",
    ] {
        let input = corpus(rel);
        let name = input.file_name().unwrap().to_str().unwrap().to_string();
        moto.helper(&["put", "inbox", &name, input.to_str().unwrap()]);
        proxy.take();
        let url = format!("s3://inbox/{name}");
        let out = tmp.path().join(format!("{name}.tet"));
        ok(&convert(&url, &out), &url);
        let local = tmp.path().join(format!("{name}.local.tet"));
        ok(
            &moto.run(CONVERT, &[input.to_str().unwrap(), local.to_str().unwrap()]),
            "local conversion",
        );
        assert_eq!(datasets(&out), datasets(&local), "{name}: values differ");
        assert_eq!(last_history_params(&out).get("input"), Some(&url));
        // The input digest is the local file's, fed by the ranged reads themselves.
        assert_eq!(history_parents(&out), history_parents(&local), "{name}");
        // Every GET is ranged (no second, plain GET for the digest), and every byte of the
        // object is fetched about once.
        let lines = proxy.take();
        let gets = lines
            .iter()
            .filter(|l| l.starts_with("GET /inbox/"))
            .count();
        let ranged = lines.iter().filter(|l| l.starts_with("RANGE ")).count();
        assert!(ranged >= 1, "{name}: {lines:?}");
        assert_eq!(gets, ranged, "{name}: {lines:?}");
        let size = std::fs::metadata(&input).unwrap().len();
        let fetched = ranged_bytes(&lines);
        assert!(
            fetched >= size && fetched <= size + (512 << 10),
            "{name}: {fetched} bytes fetched of {size}: {lines:?}"
        );
    }
    // NetCDF is spooled (its C library needs a file): the same spool folder fails it, naming it.
    if cfg!(feature = "netcdf") {
        let input = corpus("netcdf/nc4_classic_chunked.nc");
        moto.helper(&["put", "inbox", "c.nc", input.to_str().unwrap()]);
        let o = convert("s3://inbox/c.nc", &tmp.path().join("c.tet"));
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("spool-is-a-file"), "{err}");
    }
}

#[test]
fn a_large_npy_object_is_read_in_bounded_memory_and_a_selection_fetches_its_rows() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    let tmp = tempfile::tempdir().unwrap();
    // 64 MiB: 1024 rows of 64 KiB.
    let (rows, cols) = (1024u64, 8192u64);
    let big = tmp.path().join("big.npy");
    write_f64_npy(&big, rows, cols);
    moto.helper(&["put", "inbox", "big.npy", big.to_str().unwrap()]);
    let proxy = Proxy::start(&moto.endpoint, None, None);
    let run = |args: &[&str]| {
        let mut c = Command::new(CONVERT);
        moto.env(&mut c);
        c.env("AWS_ENDPOINT_URL", &proxy.endpoint)
            .args(args)
            .args(["--isolation", "none"]);
        c
    };
    // A selection of 16 rows: the ranged reads fetch those rows (1 MiB) and the first block,
    // then the input digest the rest of the object (the rows are not kept for it).
    let size = std::fs::metadata(&big).unwrap().len();
    let rows_out = tmp.path().join("rows.tet");
    let o = run(&[
        "s3://inbox/big.npy",
        rows_out.to_str().unwrap(),
        "--isel",
        "dim_0=100:116",
    ])
    .output()
    .unwrap();
    ok(&o, "selection");
    let lines = proxy.take();
    let fetched = ranged_bytes(&lines);
    assert!(
        fetched >= size && fetched <= size + 16 * cols * 8 + (512 << 10),
        "{fetched} bytes fetched by ranges: {lines:?}"
    );
    let gets = lines
        .iter()
        .filter(|l| l.starts_with("GET /inbox/"))
        .count();
    assert_eq!(
        gets,
        lines.iter().filter(|l| l.starts_with("RANGE ")).count()
    );
    let f = TetFile::open(&rows_out).unwrap();
    let want: Vec<u8> = (100 * cols..116 * cols)
        .flat_map(|v| (v as f64).to_le_bytes())
        .collect();
    assert_eq!(f.read_dataset(0).unwrap(), want);

    // The whole object, and the same file converted locally, with the same memory budget for
    // chunk data: reading by ranges adds its windows (2 x 8 MiB), its cache (8 MiB) and the
    // client, far less than the object.
    let local_out = tmp.path().join("local.tet");
    let (local_ok, local_kib) = peak_rss_kib(run(&[
        big.to_str().unwrap(),
        local_out.to_str().unwrap(),
        "--memory-budget",
        "16MiB",
    ]));
    let all_out = tmp.path().join("all.tet");
    let (ranged_ok, ranged_kib) = peak_rss_kib(run(&[
        "s3://inbox/big.npy",
        all_out.to_str().unwrap(),
        "--memory-budget",
        "16MiB",
    ]));
    assert!(local_ok && ranged_ok);
    eprintln!("peak RSS: {ranged_kib} KiB by ranges, {local_kib} KiB from the file");
    assert!(
        ranged_kib < local_kib + (40 << 10),
        "peak RSS {ranged_kib} KiB by ranges, {local_kib} KiB from the file"
    );
    assert_eq!(datasets(&all_out), datasets(&local_out));
    assert_eq!(history_parents(&all_out), history_parents(&local_out));
    // The object is fetched once: its ranged reads feed the input digest (no plain GET).
    let lines = proxy.take();
    let fetched = ranged_bytes(&lines);
    assert!(fetched >= size && fetched < size + (1 << 20), "{fetched}");
    let gets = lines
        .iter()
        .filter(|l| l.starts_with("GET /inbox/"))
        .count();
    let ranged = lines.iter().filter(|l| l.starts_with("RANGE ")).count();
    assert_eq!(gets, ranged, "{lines:?}");
}

/// Issue 22: "transient errors are retried with backoff, and the ledger row says how many
/// retries a success needed". The proxy answers the first two GETs of the input and the first
/// upload of a part with 503 SlowDown; the conversion succeeds, its values are the local
/// conversion's, and its ledger row counts 3 retries. With more failures than retries allowed
/// the line says throttled, after how many retries.
#[test]
fn transient_failures_are_retried_and_counted_in_the_ledger() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    moto.helper(&["mb", "outbox"]);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("r.npy");
    std::fs::write(&input, small_npy(11)).unwrap();
    moto.helper(&["put", "inbox", "r.npy", input.to_str().unwrap()]);
    let run = |proxy: &Proxy, extra: &[&str], report: &Path| {
        let mut c = Command::new(CONVERT);
        moto.env(&mut c);
        c.env("AWS_ENDPOINT_URL", &proxy.endpoint)
            .args([
                "s3://inbox/r.npy",
                "s3://outbox/r.tet",
                "--force",
                "--report",
            ])
            .arg(report)
            .args(extra);
        c.output().unwrap()
    };
    let gets = Proxy::start_flaky(&moto.endpoint, "GET /inbox/r.npy", 2);
    let report = tmp.path().join("gets.jsonl");
    ok(&run(&gets, &[], &report), "two failed GETs");
    let rows = ledger_rows(&report);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["status"], "ok", "{rows:?}");
    assert_eq!(rows[0]["retries"], 2, "{rows:?}");
    let refused: Vec<String> = gets
        .take()
        .into_iter()
        .filter(|l| l.starts_with("GET /inbox/r.npy"))
        .collect();
    assert!(refused.len() >= 3, "{refused:?}");

    let parts = Proxy::start_flaky(&moto.endpoint, "partNumber=1", 1);
    let report = tmp.path().join("part.jsonl");
    ok(&run(&parts, &[], &report), "a failed part");
    let rows = ledger_rows(&report);
    assert_eq!(
        (&rows[0]["status"], &rows[0]["retries"]),
        (&"ok".into(), &1.into()),
        "{rows:?}"
    );
    // The published object is the local conversion.
    let local = tmp.path().join("local.tet");
    ok(
        &moto.run(CONVERT, &[input.to_str().unwrap(), local.to_str().unwrap()]),
        "local",
    );
    let fetched = tmp.path().join("fetched.tet");
    moto.helper(&["get", "outbox", "r.tet", fetched.to_str().unwrap()]);
    assert_eq!(datasets(&fetched), datasets(&local));

    // Throttled beyond the retries allowed: one line, a failed row that says so.
    let always = Proxy::start_flaky(&moto.endpoint, "GET /inbox/r.npy", 1000);
    let report = tmp.path().join("throttled.jsonl");
    let o = run(&always, &["--storage-option", "max_retries=2"], &report);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("s3://inbox/r.npy")
            && err.contains("throttled (SlowDown: Please reduce your request rate.)")
            && err.contains("after 2 retries"),
        "{err}"
    );
    let rows = ledger_rows(&report);
    assert_eq!(rows[0]["status"], "failed", "{rows:?}");
    assert!(rows[0]["reason"].as_str().unwrap().contains("throttled"));
}

/// Issue 22: an `s3://` input with no credentials anywhere gives one line naming the URL and
/// saying that credentials are missing (not a signing or connection error of the instance
/// metadata service object_store falls back to).
#[test]
fn an_s3_input_without_credentials_says_so() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("a.npy");
    std::fs::write(&input, small_npy(1)).unwrap();
    moto.helper(&["put", "inbox", "a.npy", input.to_str().unwrap()]);
    let out = tmp.path().join("a.tet");
    let mut c = Command::new(CONVERT);
    moto.env(&mut c);
    for k in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_SKIP_SIGNATURE",
    ] {
        c.env_remove(k);
    }
    let started = Instant::now();
    let o = c
        .args(["s3://inbox/a.npy", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{err} ({:?})", started.elapsed());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("s3://inbox/a.npy: no credentials:") && err.contains("AWS_ACCESS_KEY_ID"),
        "{err}"
    );
    assert!(!err.contains("169.254"), "{err}");
    assert!(!out.exists());
}

/// Issue 22: "Zarr stores are read through zarrs' object-store adapter (a prefix is a store)".
/// A store under a prefix converts with nothing written to the spool folder at any time (it is
/// watched during the run), to the values of the local conversion, and records the same input
/// digest as the local conversion of the same files.
#[test]
fn a_zarr_store_under_a_prefix_is_read_in_place() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    let store = corpus("zarr/climate.zarr");
    moto.helper(&[
        "put",
        "inbox",
        "stores/climate.zarr",
        store.to_str().unwrap(),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let spool = tmp.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    let out = tmp.path().join("climate.tet");
    let url = "s3://inbox/stores/climate.zarr/";
    let mut c = Command::new(CONVERT);
    moto.env(&mut c);
    let mut child = c
        .args([
            url,
            out.to_str().unwrap(),
            "--spool-dir",
            spool.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    while child.try_wait().unwrap().is_none() {
        seen.extend(
            std::fs::read_dir(&spool)
                .unwrap()
                .map(|e| e.unwrap().path()),
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let o = child.wait_with_output().unwrap();
    ok(&o, "zarr prefix");
    assert!(seen.is_empty(), "the spool was used: {seen:?}");
    let local = tmp.path().join("local.tet");
    ok(
        &moto.run(CONVERT, &[store.to_str().unwrap(), local.to_str().unwrap()]),
        "local",
    );
    assert_eq!(datasets(&out), datasets(&local));
    let history = |p: &Path| {
        let f = TetFile::open(p).unwrap();
        f.footer().unwrap().unwrap().history.last().unwrap().clone()
    };
    let (remote, here) = (history(&out), history(&local));
    assert_eq!(remote.params.get("input").map(String::as_str), Some(url));
    assert_eq!(remote.parents, here.parents, "the input digest");
    assert_eq!(
        remote.params.get("input_bytes"),
        here.params.get("input_bytes")
    );
}

/// An object output is treated as a local one: `--rehash` hashes the input (streamed, nothing
/// spooled) and keeps an unchanged output; `--verify-existing` rebuilds a damaged output that
/// its metadata alone calls up to date; a batch run never silently replaces an output made from
/// another input (`--force` does).
#[test]
fn object_outputs_follow_rehash_verify_existing_and_the_source_guard() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    moto.helper(&["mb", "outbox"]);
    let tmp = tempfile::tempdir().unwrap();
    for (dir, seed) in [("a", 1), ("b", 2)] {
        let f = tmp.path().join(format!("{dir}.npy"));
        std::fs::write(&f, small_npy(seed)).unwrap();
        moto.helper(&["put", "inbox", &format!("{dir}/x.npy"), f.to_str().unwrap()]);
    }
    let proxy = Proxy::start(&moto.endpoint, None, None);
    let run = |args: &[&str]| {
        let mut c = Command::new(CONVERT);
        moto.env(&mut c);
        c.env("AWS_ENDPOINT_URL", &proxy.endpoint).args(args);
        c.output().unwrap()
    };
    let single = ["s3://inbox/a/x.npy", "s3://outbox/x.tet", "-v"];
    ok(&run(&single), "first");

    // --rehash: the input's body is read and hashed, the output kept (nothing uploaded).
    proxy.take();
    let o = run(&[&single[..], &["--rehash"]].concat());
    ok(&o, "rehash");
    assert!(String::from_utf8_lossy(&o.stderr).contains("up to date"));
    let lines = proxy.take();
    assert!(
        lines.iter().any(|l| l.starts_with("GET /inbox/a/x.npy")),
        "{lines:?}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("PUT /outbox/") || l.starts_with("POST /outbox/")),
        "{lines:?}"
    );

    // A damaged output with its metadata intact: trusted by the stamp, rebuilt when verified.
    moto.helper(&["corrupt", "outbox", "x.tet"]);
    let o = run(&single);
    ok(&o, "trusted");
    assert!(String::from_utf8_lossy(&o.stderr).contains("up to date"));
    let report = tmp.path().join("verify.jsonl");
    let o = run(&[
        &single[..],
        &["--verify-existing", "--report", report.to_str().unwrap()],
    ]
    .concat());
    ok(&o, "verify-existing");
    let rows = ledger_rows(&report);
    assert_eq!(rows[0]["status"], "ok", "{rows:?}");
    let fetched = tmp.path().join("x.tet");
    moto.helper(&["get", "outbox", "x.tet", fetched.to_str().unwrap()]);
    ok(
        &moto.run(TET, &["verify", "--deep", fetched.to_str().unwrap()]),
        "rebuilt output verifies",
    );

    // Another input mapped to the same output key in a batch run: a conflict, not a rebuild.
    let report = tmp.path().join("guard.jsonl");
    let batch = ["s3://inbox/b/", "--out-dir", "s3://outbox/", "--report"];
    let o = run(&[&batch[..], &[report.to_str().unwrap()]].concat());
    assert!(!o.status.success());
    let rows = ledger_rows(&report);
    assert_eq!(rows[0]["status"], "failed", "{rows:?}");
    let reason = rows[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("holds the conversion of another input, s3://inbox/a/x.npy"),
        "{reason}"
    );
    let o = run(&[&batch[..], &[report.to_str().unwrap(), "--force"]].concat());
    ok(&o, "--force replaces it");
    moto.helper(&["get", "outbox", "x.tet", fetched.to_str().unwrap()]);
    let npy = small_npy(2);
    let f = TetFile::open(&fetched).unwrap();
    assert_eq!(f.read_dataset(0).unwrap(), npy[npy.len() - 512..].to_vec());
}

/// Issue 22: `tet-convert --concat DIM URL… OUT`. NPY objects (read by ranges) combined into a
/// local file, netCDF objects (spooled) into an object: the values of the local `--concat` of
/// the same files, the history row names every URL with the local inputs' digests (the same
/// parents in the same order), no spool is left, and a re-run is up to date.
#[test]
fn concat_over_object_urls_equals_the_local_concat() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    moto.helper(&["mb", "outbox"]);
    let tmp = tempfile::tempdir().unwrap();
    let spool = tmp.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    let spool_arg = spool.to_str().unwrap();
    let mut cases: Vec<(&str, Vec<PathBuf>, String)> = Vec::new();
    // One variable name (an NPY's is its file name): the parts in folders of their own.
    let npys: Vec<PathBuf> = (0..3)
        .map(|i| {
            let dir = tmp.path().join(format!("p{i}"));
            std::fs::create_dir(&dir).unwrap();
            let p = dir.join("part.npy");
            std::fs::write(&p, small_npy(100 * i)).unwrap();
            p
        })
        .collect();
    // The same parts converted to `.tet` (read by ranges too, their footers carried over).
    let tets: Vec<PathBuf> = npys
        .iter()
        .map(|p| {
            let t = p.with_extension("tet");
            ok(
                &moto.run(CONVERT, &[p.to_str().unwrap(), t.to_str().unwrap()]),
                "part.tet",
            );
            t
        })
        .collect();
    cases.push((
        "dim_0",
        npys,
        tmp.path().join("npy.tet").display().to_string(),
    ));
    cases.push(("dim_0", tets, "s3://outbox/tets.tet".into()));
    if cfg!(feature = "netcdf") {
        let days = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/concat");
        // Given out of order: the combination puts them in the order of their times.
        let nc = ["day3.nc", "day1.nc", "day2.nc"]
            .map(|d| days.join(d))
            .to_vec();
        cases.push(("time", nc, "s3://outbox/days.tet".into()));
    }
    for (n, (dim, files, out)) in cases.into_iter().enumerate() {
        // The key of a file: its folder and name.
        let key = |f: &Path| {
            let dir = f.parent().unwrap().file_name().unwrap().to_str().unwrap();
            format!("c/{dir}/{}", f.file_name().unwrap().to_str().unwrap())
        };
        let urls: Vec<String> = files
            .iter()
            .map(|f| {
                moto.helper(&["put", "inbox", &key(f), f.to_str().unwrap()]);
                format!("s3://inbox/{}", key(f))
            })
            .collect();
        let mut args = vec!["--concat", dim, "--spool-dir", spool_arg, "-v"];
        args.extend(urls.iter().map(String::as_str));
        args.push(&out);
        let o = moto.run(CONVERT, &args);
        ok(&o, &format!("--concat {dim} over URLs"));
        assert!(
            std::fs::read_dir(&spool).unwrap().next().is_none(),
            "{dim}: spool left behind"
        );
        let local = tmp.path().join(format!("{n}.local.tet"));
        let mut args = vec!["--concat", dim];
        args.extend(files.iter().map(|f| f.to_str().unwrap()));
        args.push(local.to_str().unwrap());
        ok(&moto.run(CONVERT, &args), "local --concat");
        let got = match out.strip_prefix("s3://outbox/") {
            Some(key) => {
                let fetched = tmp.path().join(format!("{n}.fetched.tet"));
                moto.helper(&["get", "outbox", key, fetched.to_str().unwrap()]);
                fetched
            }
            None => PathBuf::from(&out),
        };
        assert_eq!(datasets(&got), datasets(&local), "{dim}: values differ");
        assert_eq!(history_parents(&got), history_parents(&local), "{dim}");
        assert_eq!(history_parents(&got).len(), files.len());
        // Every URL is named, in the combined order of the local conversion's paths.
        let (params, here) = (last_history_params(&got), last_history_params(&local));
        for k in 0..files.len() {
            let name = match k {
                0 => "input".to_string(),
                k => format!("input.{k}"),
            };
            let want = format!("s3://inbox/{}", key(Path::new(&here[&name])));
            assert_eq!(params[&name], want, "{dim}: {params:?}");
        }
        assert!(params["input_object"].starts_with("concat:"), "{params:?}");
        assert!(!params.contains_key("cwd"), "{params:?}");
        let text = serde_json::to_string(&params).unwrap();
        assert!(!text.contains("verysecretvalue") && !text.contains(".tet-spool"));
        // A re-run: up to date.
        let mut args = vec!["--concat", dim, "--spool-dir", spool_arg, "-v"];
        args.extend(urls.iter().map(String::as_str));
        args.push(&out);
        let o = moto.run(CONVERT, &args);
        ok(&o, "re-run");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("up to date"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// Issue 22: a GET whose body stream breaks midway and is asked for again (object_store asks
/// for the rest of the range) counts as a retry in the ledger row, as a refused request does.
/// The proxy cuts the first GET of the object after 64 KiB, once; the conversion succeeds with
/// the local conversion's values and its row says 1 retry.
#[test]
fn a_body_stream_that_breaks_once_is_retried_and_counted() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    let tmp = tempfile::tempdir().unwrap();
    // 2 MiB: the first ranged GET (the first 256 KiB block) is longer than the cut.
    let input = tmp.path().join("b.npy");
    write_f64_npy(&input, 256, 1024);
    moto.helper(&["put", "inbox", "b.npy", input.to_str().unwrap()]);
    let proxy = Proxy::start_cut_once(&moto.endpoint, "/inbox/b.npy");
    let out = tmp.path().join("b.tet");
    let report = tmp.path().join("ledger.jsonl");
    let mut c = Command::new(CONVERT);
    moto.env(&mut c);
    let o = c
        .env("AWS_ENDPOINT_URL", &proxy.endpoint)
        .args(["s3://inbox/b.npy", out.to_str().unwrap(), "--report"])
        .arg(&report)
        .output()
        .unwrap();
    ok(&o, "a broken body stream");
    let lines = proxy.take();
    let gets = lines
        .iter()
        .filter(|l| l.starts_with("GET /inbox/b.npy"))
        .count();
    let ranged = lines.iter().filter(|l| l.starts_with("RANGE ")).count();
    let rows = ledger_rows(&report);
    assert_eq!(rows[0]["status"], "ok", "{rows:?}");
    assert_eq!(rows[0]["retries"], 1, "{rows:?} {lines:?}");
    // The request for the rest of the cut range is one more ranged GET.
    assert_eq!(gets, ranged, "{lines:?}");
    let local = tmp.path().join("local.tet");
    ok(
        &moto.run(CONVERT, &[input.to_str().unwrap(), local.to_str().unwrap()]),
        "local",
    );
    assert_eq!(datasets(&out), datasets(&local));
    assert_eq!(history_parents(&out), history_parents(&local));
}

/// A `--concat` of objects read by ranges keeps every input open until the end: they share the
/// part of `--memory-budget` that chunks do not take, each keeping windows and cache within its
/// share (issue 22: 24 MiB each before, 31 inputs ≈ 744 MiB). Six 2 MiB NPY objects in
/// 256 KiB chunks: under a 4 MiB budget each chunk is its own ranged GET (no window kept), where
/// the default budget's share reads a whole object in one window; the values of the local
/// combination either way.
#[test]
fn a_concat_of_objects_read_by_ranges_keeps_them_within_the_memory_budget() {
    let moto = moto_or_skip!(common::s3::Moto::start_recorded());
    moto.helper(&["mb", "inbox"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut urls = Vec::new();
    let mut files = Vec::new();
    for i in 0..6 {
        let dir = tmp.path().join(format!("p{i}"));
        std::fs::create_dir(&dir).unwrap();
        let f = dir.join("part.npy");
        write_f64_npy(&f, 256, 1024);
        let key = format!("m/p{i}/part.npy");
        moto.helper(&["put", "inbox", &key, f.to_str().unwrap()]);
        urls.push(format!("s3://inbox/{key}"));
        files.push(f);
    }
    let local = tmp.path().join("local.tet");
    let mut args = vec!["--concat", "dim_0"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    args.push(local.to_str().unwrap());
    ok(&moto.run(CONVERT, &args), "local --concat");
    let gets = |budget: &str| {
        let out = tmp.path().join(format!("{budget}.tet"));
        // One job: the chunks are read in order (two workers interleave, and a read that does
        // not continue the previous one is fetched as it is, window or not).
        let mut args = vec![
            "--concat",
            "dim_0",
            "--chunk-bytes",
            "256KiB",
            "--jobs",
            "1",
        ];
        args.extend(["--memory-budget", budget]);
        args.extend(urls.iter().map(String::as_str));
        args.push(out.to_str().unwrap());
        moto.take();
        ok(
            &moto.run(CONVERT, &args),
            &format!("--concat, budget {budget}"),
        );
        assert_eq!(datasets(&out), datasets(&local), "budget {budget}: values");
        let lines = moto.take();
        let ranged: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with("RANGE ") && l.contains("/inbox/m/"))
            .collect();
        (ranged.len(), ranged_bytes(&lines))
    };
    let (wide, wide_bytes) = gets("256MiB");
    let (narrow, narrow_bytes) = gets("4MiB");
    // 6 objects of 2 MiB: every byte fetched about once either way (and hashed from the reads).
    for b in [wide_bytes, narrow_bytes] {
        assert!((12 << 20..=15 << 20).contains(&b), "{b} bytes fetched");
    }
    assert!(wide <= 3 * 6, "{wide} ranged GETs under 256 MiB");
    assert!(narrow >= 8 * 6, "{narrow} ranged GETs under 4 MiB");
}
