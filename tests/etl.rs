//! Batch runs as a nightly operator has them: inputs that crash or hang libhdf5 in the middle of a
//! batch, folders that grow between array tasks, overlapping runs sharing one report, lists
//! longer than the command line allows, the same file name on two days, SIGTERM, a file-size
//! limit, and re-runs that must not read unchanged inputs.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tet::format::verify::{verify, Depth};
use tet::format::TetFile;

use common::write_npy;

fn tet_convert() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tet-convert"));
    c.env("SOURCE_DATE_EPOCH", "1700000000")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
        .stdin(Stdio::null());
    c
}

fn run(c: &mut Command) -> Output {
    c.output().expect("spawn tet-convert")
}

fn crash_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/crash")
        .join(name)
}

/// Every file below `dir` (relative paths), sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            e.path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    v.sort();
    v
}

fn temp_files(dir: &Path) -> Vec<String> {
    tree(dir)
        .into_iter()
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// Every row of a ledger, each line checked to be one whole JSON object.
fn ledger(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("garbled row {l:?}: {e}")))
        .collect()
}

fn inputs_of(rows: &[Value]) -> Vec<&Value> {
    rows.iter().filter(|r| r["kind"] == "input").collect()
}

/// The file name of a row's input.
fn file_name(row: &Value) -> String {
    let input = row["input"].as_str().unwrap();
    input.rsplit('/').next().unwrap().to_string()
}

/// Each run of a ledger has a start row, then its input rows, then an end row whose counts
/// match its input rows.
fn check_runs(rows: &[Value]) {
    let mut runs: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for r in rows {
        let id = r["run"].as_str().unwrap().to_string();
        let e = runs.entry(id).or_default();
        match r["kind"].as_str().unwrap() {
            "start" => {
                assert_eq!(*e, (0, 0, 0), "start row after others: {r}");
                e.0 += 1;
            }
            "input" => {
                assert_eq!((e.0, e.2), (1, 0), "input row outside its run: {r}");
                e.1 += 1;
            }
            "end" => {
                assert_eq!((e.0, e.2), (1, 0), "end row out of place: {r}");
                let c = &r["counts"];
                let n: u64 = ["ok", "skipped", "failed", "interrupted"]
                    .iter()
                    .map(|k| c[k].as_u64().unwrap())
                    .sum();
                assert_eq!(n as usize, e.1, "counts of {r}");
                e.2 += 1;
            }
            k => panic!("unknown row kind {k}"),
        }
    }
    assert!(runs.values().all(|&(s, _, e)| s == 1 && e == 1), "{runs:?}");
}

/// A temporary folder with `in` (not created) and `out` (created) inside.
fn folders() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let (input, out) = (d.path().join("in"), d.path().join("out"));
    std::fs::create_dir_all(&out).unwrap();
    (d, input, out)
}

/// Small distinct `.npy` files `name` in `dir`.
fn npys(dir: &Path, names: &[String]) {
    for (i, n) in names.iter().enumerate() {
        let p = dir.join(n);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        write_npy(&p, 1 + i % 3);
    }
}

/// Whether `input` kills the converter when it runs unsupervised: `Some(signal)`, `Some(0)` for
/// a hang (still running after `wait`), `None` for a clean exit.
fn unsupervised_death(input: &Path, wait: Duration) -> Option<i32> {
    let d = tempfile::tempdir().unwrap();
    let mut child = tet_convert()
        .args(["--isolation", "none", "-q"])
        .arg(input)
        .arg(d.path().join("o.tet"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + wait;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.signal();
        }
        if Instant::now() >= until {
            child.kill().unwrap();
            child.wait().unwrap();
            return Some(0);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// 30 inputs, three of which crash (SIGSEGV), abort (SIGABRT) or hang libhdf5: exit 1, every
/// other output present and verified, one row per input with the three failures explained, no
/// temporary file, and a wall time bounded by --timeout.
#[test]
fn crashing_aborting_and_hanging_inputs_cost_one_row_each() {
    let (d, input, out) = folders();
    let bad = [(10, "segv"), (15, "abort"), (20, "hang")];
    let mut names = Vec::new();
    for i in 0..30 {
        match bad.iter().find(|(at, _)| *at == i) {
            Some((_, b)) => {
                std::fs::create_dir_all(&input).unwrap();
                std::fs::copy(
                    crash_fixture(&format!("{b}.nc")),
                    input.join(format!("f{i:02}_{b}.nc")),
                )
                .unwrap();
            }
            None => names.push(format!("f{i:02}.npy")),
        }
    }
    npys(&input, &names);
    let report = d.path().join("report.jsonl");
    let timeout = 4;
    let started = Instant::now();
    let o = run(tet_convert()
        .arg(&input)
        .arg("--out-dir")
        .arg(&out)
        .args([
            "--keep-going",
            "--timeout",
            &timeout.to_string(),
            "--report",
        ])
        .arg(&report));
    let wall = started.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    // Not a terminal: the failures and one summary line, nothing else.
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert!(
        lines[3].contains("30 inputs: 27 converted, 0 up to date, 3 failed"),
        "{err}"
    );
    // Without the timeout the hang would never end; with it, the batch takes its few seconds.
    assert!(wall < Duration::from_secs(timeout + 60), "{wall:?}");

    let rows = ledger(&report);
    check_runs(&rows);
    let inputs = inputs_of(&rows);
    assert_eq!(inputs.len(), 30);
    let failed: Vec<&&Value> = inputs.iter().filter(|r| r["status"] == "failed").collect();
    assert_eq!(failed.len(), 3, "{failed:?}");
    for (_, b) in bad {
        let row = failed
            .iter()
            .find(|r| r["input"].as_str().unwrap().ends_with(&format!("_{b}.nc")))
            .unwrap();
        let reason = row["reason"].as_str().unwrap();
        // What is known of a failed input is kept.
        assert!(row["input_digest"].as_str().unwrap().starts_with("sha256:"));
        assert_eq!(row["bytes_in"], 7344);
        let want =
            match unsupervised_death(&crash_fixture(&format!("{b}.nc")), Duration::from_secs(3)) {
                Some(0) => format!("timed out after {timeout} s in the NetCDF 3/4 importer"),
                Some(libc::SIGSEGV) => "crashed: SIGSEGV in the NetCDF 3/4 importer".into(),
                Some(libc::SIGABRT) => "crashed: SIGABRT in the NetCDF 3/4 importer".into(),
                other => {
                    eprintln!("note: this libhdf5 no longer dies on {b}.nc ({other:?}): {reason}");
                    continue;
                }
            };
        assert!(reason.contains(&want), "{b}: {reason}");
        assert!(err.contains(&format!("_{b}.nc: {want}")), "{err}");
    }
    for r in inputs.iter().filter(|r| r["status"] == "ok") {
        let f = TetFile::open(Path::new(r["output"].as_str().unwrap())).unwrap();
        let v = verify(&f, Depth::Deep);
        assert!(v.ok(), "{r}: {:?}", v.failures);
    }
    assert_eq!(tree(&out).len(), 27);
    assert!(temp_files(&out).is_empty(), "{:?}", temp_files(&out));
}

/// A single-file conversion of an input that kills libhdf5 ends with one clear line and exit 1,
/// not a shell's "Segmentation fault"; nothing is left behind.
#[test]
fn a_single_crashing_input_is_one_line_and_exit_1() {
    let d = tempfile::tempdir().unwrap();
    for b in ["segv", "abort"] {
        let out = d.path().join(format!("{b}.tet"));
        let o = run(tet_convert()
            .arg(crash_fixture(&format!("{b}.nc")))
            .arg(&out));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("tet-convert: ") && err.contains(&format!("{b}.nc: ")),
            "{err}"
        );
        assert!(!out.exists());
    }
    assert!(temp_files(d.path()).is_empty());
}

fn shard_run(input: &Path, out: &Path, report: &Path, k: u64, n: u64) -> Output {
    run(tet_convert()
        .arg(input)
        .arg("--out-dir")
        .arg(out)
        .arg("--report")
        .arg(report)
        .env("SLURM_ARRAY_TASK_ID", k.to_string())
        .env("SLURM_ARRAY_TASK_COUNT", n.to_string())
        .env("SLURM_ARRAY_TASK_MIN", "0"))
}

/// Files arriving between two array tasks' listings shift no other file: every file present for
/// the whole night is converted exactly once, and the late ones are taken by the next night.
#[test]
fn live_folder_sharding_loses_no_file() {
    let (d, input, out) = folders();
    let early: Vec<String> = (0..24).map(|i| format!("day/e{i:02}.npy")).collect();
    let late: Vec<String> = (0..11).map(|i| format!("day/l{i:02}.npy")).collect();
    npys(&input, &early);
    let report = d.path().join("r.jsonl");
    let n = 3;
    // Task 0 lists the folder, then files arrive, then tasks 1 and 2 list it.
    assert!(shard_run(&input, &out, &report, 0, n).status.success());
    npys(&input, &late);
    for k in 1..n {
        assert!(shard_run(&input, &out, &report, k, n).status.success());
    }
    let rows = ledger(&report);
    check_runs(&rows);
    let mut converted: Vec<String> = inputs_of(&rows)
        .iter()
        .map(|r| {
            assert_eq!(r["status"], "ok");
            file_name(r)
        })
        .collect();
    converted.sort();
    let unique: BTreeSet<&String> = converted.iter().collect();
    assert_eq!(
        unique.len(),
        converted.len(),
        "converted twice: {converted:?}"
    );
    for e in &early {
        let name = e.rsplit('/').next().unwrap().to_string();
        assert!(converted.contains(&name), "{e} was converted by no task");
    }
    // The next night converts exactly the late files task 0 could not see.
    for k in 0..n {
        assert!(shard_run(&input, &out, &report, k, n).status.success());
    }
    let rows = ledger(&report);
    let all: Vec<&Value> = inputs_of(&rows)
        .into_iter()
        .filter(|r| r["status"] == "ok")
        .collect();
    assert_eq!(all.len(), early.len() + late.len());
    assert_eq!(tree(&out).len(), early.len() + late.len());
}

/// Two overlapping runs (a scheduler's retry) and an `xargs`-split list append to one report:
/// every line is a whole row, every run has its start and end, every input has its rows.
#[test]
fn overlapping_and_xargs_split_runs_share_one_ledger() {
    let (d, input, out) = folders();
    let names: Vec<String> = (0..40).map(|i| format!("x{i:02}.npy")).collect();
    npys(&input, &names);
    let report = d.path().join("r.jsonl");
    std::fs::write(&report, b"").unwrap();
    let spawn = |extra: &[&str]| {
        tet_convert()
            .arg(&input)
            .arg("--out-dir")
            .arg(&out)
            .args(["--force", "--report"])
            .arg(&report)
            .args(extra)
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn(&[]), spawn(&["--workers", "2"]));
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    // A list split by xargs into runs of 7 paths, two at a time.
    let list: String = names
        .iter()
        .map(|n| format!("{}\n", input.join(n).display()))
        .collect();
    let mut x = Command::new("xargs")
        .args(["-n", "7", "-P", "2"])
        .arg(env!("CARGO_BIN_EXE_tet-convert"))
        .arg("--out-dir")
        .arg(&out)
        .args(["--force", "--report"])
        .arg(&report)
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    x.stdin.take().unwrap().write_all(list.as_bytes()).unwrap();
    assert!(x.wait().unwrap().success());

    let rows = ledger(&report);
    check_runs(&rows);
    let starts = rows.iter().filter(|r| r["kind"] == "start").count();
    assert_eq!(starts, 2 + 6, "two runs and six xargs chunks");
    let mut per_input: BTreeMap<String, usize> = BTreeMap::new();
    for r in inputs_of(&rows) {
        assert_eq!(r["status"], "ok", "{r}");
        *per_input.entry(file_name(r)).or_default() += 1;
    }
    assert_eq!(per_input.len(), 40);
    assert!(per_input.values().all(|&n| n == 3), "{per_input:?}");
}

/// 3,000 inputs whose paths together exceed ARG_MAX: too many for a command line, fine through
/// --files-from (NUL-separated here, as `find -print0` writes them).
#[test]
fn files_from_takes_lists_beyond_arg_max() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let long = "L".repeat(240);
    let src = d.path().join("src.npy");
    write_npy(&src, 1);
    let mut paths = Vec::new();
    for g in 0..30 {
        let dir = d.path().join(format!("{long}{g:02}/{long}/{long}"));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..100 {
            let p = dir.join(format!("n{i:03}.npy"));
            std::fs::hard_link(&src, &p).unwrap();
            paths.push(p);
        }
    }
    let total: usize = paths.iter().map(|p| p.as_os_str().len() + 1).sum();
    assert!(total > 2 * 1024 * 1024, "{total} bytes of paths");
    // As arguments they do not fit.
    let e = tet_convert()
        .arg("--out-dir")
        .arg(&out)
        .args(&paths)
        .output()
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::E2BIG), "{e}");

    let mut list = Vec::new();
    for p in &paths {
        use std::os::unix::ffi::OsStrExt;
        list.extend_from_slice(p.as_os_str().as_bytes());
        list.push(0);
    }
    let list_file = d.path().join("list");
    std::fs::write(&list_file, list).unwrap();
    let report = d.path().join("r.jsonl");
    let o = run(tet_convert()
        .arg("--files-from")
        .arg(&list_file)
        .args(["-0", "--base"])
        .arg(d.path())
        .args(["--workers", "2", "--jobs", "1", "--out-dir"])
        .arg(&out)
        .arg("--report")
        .arg(&report));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = ledger(&report);
    let end = rows.last().unwrap();
    assert_eq!(end["counts"]["ok"], 3000, "{end}");
    // Outputs mirror the listed paths relative to --base.
    assert_eq!(tree(&out).len(), 3000);
    assert!(out
        .join(format!("{long}07/{long}/{long}/n042.tet"))
        .is_file());
}

/// The same file name on two days: mirrored into two outputs by a walk; given flat on two
/// nights, the second refuses to replace the first's output instead of silently overwriting.
/// An empty selection is a normal night.
#[test]
fn walked_trees_keep_same_named_files_apart() {
    let (d, input, out) = folders();
    for (day, rows) in [("2024-01-01", 1), ("2024-01-02", 2)] {
        let p = input.join(day).join("ocean.npy");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        write_npy(&p, rows);
    }
    // Hidden files and other extensions are not taken.
    std::fs::write(input.join("2024-01-01/.partial.npy"), b"x").unwrap();
    std::fs::write(input.join("2024-01-01/notes.txt"), b"x").unwrap();
    // A temporary file left by a writer that died (no process holds its lock): removed.
    std::fs::create_dir_all(out.join("2024-01-01")).unwrap();
    std::fs::write(
        out.join("2024-01-01/.ocean.tet.Ab12Cd.tet-convert.tmp"),
        b"x",
    )
    .unwrap();
    let o = run(tet_convert()
        .arg(&input)
        .arg("--out-dir")
        .arg(&out)
        .arg("-v"));
    assert!(o.status.success(), "{o:?}");
    assert_eq!(tree(&out), ["2024-01-01/ocean.tet", "2024-01-02/ocean.tet"]);
    // -v lists every input, even off a terminal.
    let err = String::from_utf8_lossy(&o.stderr);
    for day in ["2024-01-01", "2024-01-02"] {
        assert!(err.contains(&format!("{day}/ocean.npy -> ")), "{err}");
    }
    let shape = |p: &str| {
        TetFile::open(&out.join(p)).unwrap().datasets[0]
            .shape
            .clone()
    };
    assert_eq!(shape("2024-01-01/ocean.tet"), [1, 4096]);
    assert_eq!(shape("2024-01-02/ocean.tet"), [2, 4096]);

    // Flat names across nights: night 2's ocean.npy would land on night 1's output.
    let flat = d.path().join("flat");
    std::fs::create_dir_all(&flat).unwrap();
    let night = |day: &str| {
        run(tet_convert()
            .arg(input.join(day).join("ocean.npy"))
            .arg("--out-dir")
            .arg(&flat))
    };
    assert!(night("2024-01-01").status.success());
    let o = night("2024-01-02");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("holds the conversion of another input"),
        "{err}"
    );
    assert_eq!(
        TetFile::open(&flat.join("ocean.tet")).unwrap().datasets[0].shape,
        [1, 4096]
    );

    // Nothing to do is a normal night.
    let empty = d.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = run(tet_convert().arg(&empty).arg("--out-dir").arg(&out));
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("0 inputs"));
    let list = d.path().join("none.txt");
    std::fs::write(&list, b"").unwrap();
    let o = run(tet_convert()
        .arg("--files-from")
        .arg(&list)
        .arg("--out-dir")
        .arg(&out));
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

/// Waits until `report` has a row of kind `input` or until `secs` pass.
fn wait_for_rows(report: &Path, at_least: usize, secs: u64) {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        let n = std::fs::read_to_string(report)
            .map(|s| {
                s.lines()
                    .filter(|l| l.contains("\"kind\":\"input\""))
                    .count()
            })
            .unwrap_or(0);
        if n >= at_least {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no progress in {}", report.display());
}

/// SIGTERM mid-batch — a worker stuck in libhdf5, and an in-process conversion in the middle of
/// its chunks: exit 143, no temporary file, and the ledger's last row closes the run.
#[test]
fn sigterm_mid_batch_leaves_no_temp_file_and_a_closing_row() {
    let (d, input, out) = folders();
    npys(&input, &["a0.npy".into(), "a1.npy".into()]);
    std::fs::copy(crash_fixture("hang.nc"), input.join("b_hang.nc")).unwrap();
    npys(&input, &["c0.npy".into()]);
    let big = d.path().join("big");
    std::fs::create_dir_all(&big).unwrap();
    write_npy(&big.join("big.npy"), 8192); // 128 MiB: long enough at zstd:19

    for (what, src, extra) in [
        ("worker in libhdf5", &input, vec!["--keep-going"]),
        (
            "in-process conversion",
            &big,
            vec!["--isolation", "none", "--codec", "zstd:19", "--jobs", "1"],
        ),
    ] {
        let report = d.path().join(format!("{}.jsonl", extra.len()));
        let child = tet_convert()
            .arg(src)
            .arg("--out-dir")
            .arg(&out)
            .arg("--report")
            .arg(&report)
            .args(&extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if what.starts_with("worker") {
            wait_for_rows(&report, 2, 60);
        } else {
            // Well inside the conversion: its temporary file exists.
            let until = Instant::now() + Duration::from_secs(60);
            while temp_files(&out).is_empty() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(!temp_files(&out).is_empty(), "no conversion in progress");
        }
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(143), "{what}: {err}");
        assert!(
            temp_files(&out).is_empty(),
            "{what}: {:?}",
            temp_files(&out)
        );
        let rows = ledger(&report);
        check_runs(&rows);
        let end = rows.last().unwrap();
        assert_eq!(end["kind"], "end");
        assert_eq!(end["signal"], "SIGTERM", "{what}");
        assert_eq!(end["exit_code"], 143);
        assert!(
            inputs_of(&rows)
                .iter()
                .any(|r| r["status"] == "interrupted"),
            "{what}: {rows:?}"
        );
        assert!(err.contains("stopped by SIGTERM"), "{what}: {err}");
    }
}

/// Under a file-size limit (`prlimit --fsize`) a conversion fails with a clean line naming the
/// output, not a silent death by SIGXFSZ, and leaves nothing behind.
#[test]
fn a_file_size_limit_is_a_clean_error() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("in.npy");
    write_npy(&src, 512); // 8 MiB
    let out = d.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    for extra in [&[][..], &["--isolation", "none"][..]] {
        let o = run(Command::new("prlimit")
            .arg("--fsize=1048576")
            .arg(env!("CARGO_BIN_EXE_tet-convert"))
            .args(["-q", "--codec", "raw"])
            .args(extra)
            .arg(&src)
            .arg(out.join("o.tet")));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("o.tet") && err.contains("File too large"),
            "{err}"
        );
        assert!(tree(&out).is_empty(), "{:?}", tree(&out));
    }
}

/// A re-run over 40 unchanged inputs trusts the stat stamp and reads none of them: their bytes
/// are changed in place behind its back (same size, mtime and inode) and it still calls them up
/// to date, which it could not if it had read them; `--rehash` reads them and rebuilds all 40.
#[test]
fn reruns_of_unchanged_inputs_read_none_of_them() {
    let (d, input, out) = folders();
    let names: Vec<String> = (0..40).map(|i| format!("s{i:02}.npy")).collect();
    npys(&input, &names);
    let report = d.path().join("r.jsonl");
    let batch = |extra: &[&str]| {
        let o = run(tet_convert()
            .arg(&input)
            .arg("--out-dir")
            .arg(&out)
            .arg("--report")
            .arg(&report)
            .args(extra));
        assert!(o.status.success(), "{o:?}");
        ledger(&report).last().unwrap()["counts"].clone()
    };
    assert_eq!(batch(&[])["ok"], 40);
    assert_eq!(batch(&[])["skipped"], 40);
    for n in &names {
        let p = input.join(n);
        let m = std::fs::metadata(&p).unwrap();
        let mut b = std::fs::read(&p).unwrap();
        let last = b.len() - 1;
        b[last] ^= 0xFF;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .write_all_at(&b, 0)
            .unwrap();
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(m.modified().unwrap())
            .unwrap();
    }
    assert_eq!(batch(&[])["skipped"], 40, "an input was read");
    assert_eq!(batch(&["--rehash"])["ok"], 40);
    // A changed mtime alone makes it hash again (and find the bytes the same: up to date).
    let p = input.join(&names[0]);
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    assert_eq!(batch(&[])["skipped"], 40);
}

use std::os::unix::fs::FileExt as _;

/// Non-UTF-8 paths are recorded losslessly: the row's `input_hex` gives the exact bytes back.
#[test]
fn non_utf8_paths_are_recorded_exactly() {
    use std::os::unix::ffi::OsStrExt;
    let d = tempfile::tempdir().unwrap();
    let (input, out) = (d.path().join("in"), d.path().join("out"));
    std::fs::create_dir_all(&input).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.npy");
    write_npy(&input.join(name), 1);
    let report = d.path().join("r.jsonl");
    let o = run(tet_convert()
        .arg(&input)
        .arg("--out-dir")
        .arg(&out)
        .arg("--report")
        .arg(&report));
    assert!(o.status.success(), "{o:?}");
    let rows = ledger(&report);
    let row = inputs_of(&rows)[0].clone();
    let hex = row["input_hex"].as_str().unwrap();
    let want: String = input
        .join(name)
        .as_os_str()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(hex, want);
    assert!(row["input"].as_str().unwrap().ends_with("caf\u{fffd}.npy"));
    assert!(out
        .join(std::ffi::OsStr::from_bytes(b"caf\xe9.tet"))
        .is_file());
}

/// `--verify-existing`: an up-to-date output is deep-verified before it counts. One flipped byte
/// in a chunk of one output goes unnoticed by the plain up-to-date check (it trusts the history
/// row), and is rebuilt — with the reason in its row — when verification is asked for; an output
/// written without checksums is rebuilt too, since nothing can vouch for its bytes.
#[test]
fn verify_existing_rebuilds_damaged_and_unverifiable_outputs() {
    let (d, input, out) = folders();
    let names: Vec<String> = (0..3).map(|i| format!("v{i}.npy")).collect();
    npys(&input, &names);
    let report = d.path().join("r.jsonl");
    let batch = |extra: &[&str], env: Option<(&str, &str)>| {
        let mut c = tet_convert();
        c.arg(&input)
            .arg("--out-dir")
            .arg(&out)
            .args(["--chunk-bytes", "4KiB", "--report"])
            .arg(&report)
            .args(extra);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        let o = run(&mut c);
        assert!(o.status.success(), "{o:?}");
        let rows = ledger(&report);
        let end = rows.iter().rposition(|r| r["kind"] == "start").unwrap();
        let mut by_name: BTreeMap<String, (String, String)> = BTreeMap::new();
        for r in inputs_of(&rows[end..]) {
            let reason = r["reason"].as_str().unwrap_or_default().to_string();
            by_name.insert(file_name(r), (r["status"].as_str().unwrap().into(), reason));
        }
        by_name
    };
    assert!(batch(&[], None).values().all(|(s, _)| s == "ok"));

    // Damage the middle of the second chunk of v1.tet.
    let victim = out.join("v1.tet");
    let f = TetFile::open(&victim).unwrap();
    let e = f.entries[1];
    drop(f);
    let at = e.payload_offset + e.stored_byte_len / 2;
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[at as usize] ^= 0x5a;
    std::fs::write(&victim, &bytes).unwrap();

    // Trusted as it is without verification…
    assert!(batch(&[], None).values().all(|(s, _)| s == "skipped"));
    // …rebuilt with it, the others left alone.
    let rows = batch(&["--verify-existing"], None);
    assert_eq!(rows["v0.npy"].0, "skipped");
    assert_eq!(rows["v2.npy"].0, "skipped");
    let (status, reason) = &rows["v1.npy"];
    assert_eq!(status, "ok");
    assert!(reason.contains("failed verification"), "{reason}");
    assert!(reason.contains("chunk"), "{reason}");
    let f = TetFile::open(&victim).unwrap();
    assert!(verify(&f, Depth::Deep).ok());

    // No environment variable changes what is written (issue 31): the old benchmark switch
    // is ignored, the outputs keep their checksums.
    batch(&["--force"], Some(("TET_BENCH_NO_CHECKSUMS", "1")));
    assert!(TetFile::open(&victim).unwrap().has_checksums());
    // An output without checksums (as tet-convert wrote them before; `--no-checksums` is the
    // explicit, recorded setting that writes one) cannot be vouched for: rebuilt.
    batch(&["--force", "--no-checksums"], None);
    assert!(!TetFile::open(&victim).unwrap().has_checksums());
    let rows = batch(&["--verify-existing", "--no-checksums"], None);
    assert!(
        rows.values()
            .all(|(s, r)| s == "ok" && r.contains("no checksums")),
        "{rows:?}"
    );
    // The setting is recorded: a run with checksums rebuilds them, then trusts them.
    let rows = batch(&["--verify-existing"], None);
    assert!(
        rows.values()
            .all(|(s, r)| s == "ok" && r.contains("options changed")),
        "{rows:?}"
    );
    assert!(TetFile::open(&victim).unwrap().has_checksums());
    assert!(batch(&["--verify-existing"], None)
        .values()
        .all(|(s, _)| s == "skipped"));
}

/// The first-hour mistakes of issue 33 on the convert side: an output named like another
/// format is refused unless forced (pointing at `tet export`), a folder given as IN without
/// --out-dir says what to add, a missing --out-dir is created.
#[test]
fn first_hour_mistakes_are_caught_with_what_to_do() {
    let (d, input, out) = folders();
    npys(&input, &["a.npy".to_string()]);
    let npy = input.join("a.npy");
    let nc = d.path().join("out.nc");
    let o = run(tet_convert().arg(&npy).arg(&nc));
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(".nc is the extension of NetCDF") && err.contains("tet export"),
        "{err}"
    );
    assert!(err.contains("--force-extension"), "{err}");
    assert!(!nc.exists());
    let o = run(tet_convert().arg("--force-extension").arg(&npy).arg(&nc));
    assert!(o.status.success(), "{o:?}");
    assert!(TetFile::open(&nc).is_ok());

    let o = run(tet_convert().arg(&input).arg(d.path().join("x.tet")));
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("add --out-dir DIR"), "{err}");
    assert!(!err.contains("unrecognised"), "{err}");

    let fresh = out.join("not/yet");
    assert!(!fresh.exists());
    let o = run(tet_convert().arg(&input).arg("--out-dir").arg(&fresh));
    assert!(o.status.success(), "{o:?}");
    assert!(fresh.join("a.tet").is_file());
    // A file in the way is still no directory.
    let o = run(tet_convert().arg(&input).arg("--out-dir").arg(&nc));
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a directory"));
}
