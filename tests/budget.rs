//! The memory budget (issue 25): the bytes in flight stay within `--memory-budget` whatever
//! `--jobs` is, a budget smaller than one chunk (or of one byte) still finishes, many more threads
//! than cores do not deadlock, and the output bytes do not depend on the jobs or the budget.
//! Peak RSS is measured by `benches/budget.py`; here the accounting itself is checked.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use tet::pipeline::ConvertOptions;

use crate::common::convert;

/// Runs `f` on its own thread and fails the test when it does not finish in `secs` (a deadlock
/// would otherwise hang the test run).
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what}: did not finish in {secs} s (deadlock?)"))
}

fn opts(jobs: usize, budget: u64, codec: &str, chunk: u64) -> ConvertOptions {
    ConvertOptions::from(tet::settings::Settings {
        jobs: Some(jobs),
        memory_budget: Some(budget),
        codec: codec.parse().unwrap(),
        chunk_bytes: Some(chunk),
        ..Default::default()
    })
}

/// The bytes claimed (and kept idle) never exceed the budget, except a single chunk larger than
/// the whole budget, which runs alone; at the end nothing is left claimed.
#[test]
fn in_flight_bytes_stay_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    common::write_npy(&input, 256); // 4 MiB of f32
    let chunk = 64 << 10;
    for codec in ["zstd:3", "raw", "auto"] {
        for (jobs, budget) in [
            (1, 1u64),
            (4, 100_000),
            (16, 300_000),
            (64, 1 << 20),
            (8, 256 << 20),
        ] {
            let out = dir.path().join(format!("o-{codec}-{jobs}-{budget}.tet"));
            let (input, o, out2) = (input.clone(), opts(jobs, budget, codec, chunk), out.clone());
            let report = within(
                120,
                &format!("{codec} --jobs {jobs} budget {budget}"),
                move || convert(&input, &out2, &o).unwrap(),
            );
            let m = report
                .memory
                .expect("the report carries the budget's figures");
            assert_eq!(m.limit, tet::format::pool_limit(budget));
            assert_eq!(
                m.claimed, 0,
                "{codec} jobs {jobs}: bytes left claimed: {m:?}"
            );
            assert!(
                m.peak <= m.limit.max(m.largest_alone),
                "{codec} --jobs {jobs} budget {budget}: {m:?}"
            );
            if budget >= 16 << 20 {
                // A claim is the chunk's buffers plus a zstd context (~2 MiB at level 3).
                assert_eq!(m.largest_alone, 0, "a 64 KiB chunk fits in {budget}: {m:?}");
            }
            if codec == "raw" {
                // Raw chunks of an .npy are copied file to file: nothing in memory.
                assert_eq!(m.peak, 0, "{m:?}");
            }
            let v = tet::format::deep_verify(&out).unwrap();
            assert!(
                v.chunks > 0 && v.has_checksums && v.checked == v.chunks,
                "{v:?}"
            );
            std::fs::remove_file(&out).unwrap();
        }
    }
}

fn tet_convert(input: &Path, output: &Path, args: &[&str]) -> Vec<u8> {
    let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .arg(input)
        .arg(output)
        .args(args)
        .args(["-q", "--chunk-bytes", "64KiB"])
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bytes = std::fs::read(output).unwrap();
    std::fs::remove_file(output).unwrap();
    bytes
}

/// The same bytes for every `--jobs` and `--memory-budget`, the budget of one byte (below one
/// chunk) and 64 threads on whatever cores there are included; the raw files (whose chunk digests
/// come from the input digest's pass) verify deep.
#[test]
fn output_bytes_do_not_depend_on_jobs_or_budget() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    common::write_npy(&input, 128); // 2 MiB
    let out = dir.path().join("o.tet");
    for codec in ["zstd:3", "raw", "auto"] {
        let mut first: Option<Vec<u8>> = None;
        for (jobs, budget) in [
            ("1", None),
            ("2", None),
            ("64", None),
            ("64", Some("1")),
            ("3", Some("100K")),
            ("8", Some("1M")),
        ] {
            let mut args = vec!["--codec", codec, "--jobs", jobs];
            if let Some(b) = budget {
                args.extend(["--memory-budget", b]);
            }
            let (i, o, a) = (
                input.clone(),
                out.clone(),
                args.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            );
            let got = within(120, &format!("{args:?}"), move || {
                let a: Vec<&str> = a.iter().map(String::as_str).collect();
                tet_convert(&i, &o, &a)
            });
            match &first {
                None => {
                    std::fs::write(&out, &got).unwrap();
                    let v = tet::format::deep_verify(&out).unwrap();
                    assert!(v.has_checksums && v.checked == v.chunks, "{codec}: {v:?}");
                    std::fs::remove_file(&out).unwrap();
                    first = Some(got);
                }
                Some(want) => assert!(*want == got, "{codec} {args:?}: output differs"),
            }
        }
    }
}

#[test]
fn a_bad_budget_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    common::write_npy(&input, 1);
    let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .arg(&input)
        .arg(dir.path().join("o.tet"))
        .args(["--memory-budget", "lots"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("lots"));
}
