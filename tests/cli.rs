//! The command lines as a user (or a CI gate) runs them: exit codes, one-line errors, no partial
//! output, determinism across `--jobs`, `SOURCE_DATE_EPOCH`.

#[path = "cli_reports/mod.rs"]
mod cli_reports;
use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn tet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tet"))
}

fn tet_convert() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tet-convert"));
    c.env("SOURCE_DATE_EPOCH", "1700000000");
    c
}

fn corpus(rel: &str) -> PathBuf {
    common::shared().join("corpus/public").join(rel)
}

fn run(c: &mut Command) -> Output {
    c.output().unwrap()
}

use common::{npy_bytes, only_files};

#[test]
fn output_is_identical_for_any_jobs_and_run() {
    let dir = tempfile::tempdir().unwrap();
    for input in [
        corpus("npy/rank3.npy"),
        corpus("npy/arrays_compressed.npz"),
        corpus("teafile/tick_full.tea"),
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample/ocean.npy"),
    ] {
        let mut outputs = Vec::new();
        for (run_no, jobs) in [(0, "1"), (1, "4"), (2, "1"), (3, "2")] {
            let out = dir.path().join(format!("o{run_no}.tet"));
            let o = run(tet_convert().arg(&input).arg(&out).args([
                "--codec",
                "zstd:1",
                "--chunk-bytes",
                "4KiB",
                "-q",
                "--jobs",
                jobs,
            ]));
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            outputs.push(std::fs::read(&out).unwrap());
        }
        assert!(
            outputs.windows(2).all(|w| w[0] == w[1]),
            "{}: bytes differ",
            input.display()
        );
    }
}

#[test]
fn history_records_the_input_and_options_but_not_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.tet");
    let input = corpus("npy/dtype_i8.npy");
    let o = run(tet_convert()
        .arg(&input)
        .arg(&out)
        .args(["--jobs", "3", "--json", "--chunk", "dim_0=2"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["format"], "npy");
    assert_eq!(report["datasets"][0]["widened"], "i8 -> i16");
    assert_eq!(report["datasets"][0]["dtype"], "i16");

    let o = run(tet().args(["info", "--json"]).arg(&out));
    assert!(o.status.success());
    let info: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(info["schema"], "tet-info/1");
    let row = &info["history"][0];
    assert_eq!(row["op"], "convert");
    assert_eq!(row["source"], "npy");
    assert_eq!(row["at"], "1700000000");
    assert_eq!(row["parents"][0], report["input_digest"]);
    let params = row["params"].as_object().unwrap();
    assert_eq!(params["codec"], "auto");
    assert_eq!(params["chunk"], "4194304;dim_0=2");
    assert_eq!(params["input"], input.display().to_string());
    assert_eq!(params["tool"], "tet-convert");
    assert!(!params.contains_key("jobs"));
    assert_eq!(info["datasets"][0]["extra"]["widened"], "i8 -> i16");
}

#[test]
fn refusals_are_one_line_with_no_output() {
    let dir = tempfile::tempdir().unwrap();
    for input in [
        corpus("npy/truncated.npy"),
        corpus("teafile/corrupt_itemstart.tea"),
        corpus("npy/dtype_f32.npy.expect.json"),
        dir.path().join("missing.npy"),
    ] {
        let out = dir.path().join("o.tet");
        let o = run(tet_convert().arg(&input).arg(&out));
        assert_eq!(o.status.code(), Some(1), "{}", input.display());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(&input.display().to_string()), "{err}");
        assert!(!out.exists());
        assert!(
            only_files(dir.path()).is_empty(),
            "{:?}",
            only_files(dir.path())
        );
    }
    // The specific reasons.
    let o = run(tet_convert()
        .arg(corpus("npy/truncated.npy"))
        .arg(dir.path().join("o.tet")));
    assert!(String::from_utf8_lossy(&o.stderr).contains("truncated .npy"));
    let o = run(tet_convert()
        .arg(corpus("npy/dtype_f32.npy.expect.json"))
        .arg(dir.path().join("o.tet")));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unrecognised input format"));

    // The output never overwrites the input.
    let copy = dir.path().join("in.npy");
    std::fs::copy(corpus("npy/rank1.npy"), &copy).unwrap();
    let o = run(tet_convert().arg(&copy).arg(&copy));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(corpus("npy/rank1.npy")).unwrap()
    );

    // Usage errors exit 2.
    assert_eq!(
        run(tet_convert().args(["--codec", "lz4", "a", "b"]))
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        run(tet_convert().args(["--chunk", "x=0", "a", "b"]))
            .status
            .code(),
        Some(2)
    );
    assert_eq!(run(tet_convert().arg("only-one")).status.code(), Some(2));
}

#[test]
fn skip_unsupported_reports_instead_of_failing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.tet");
    // complex is split into real/imag, strings become text variables and raw void bytes u8,
    // so take a record with an extended-precision float field (no numeric form): craft one.
    let npy = dir.path().join("strs.npy");
    let header =
        "{'descr': [('id', '<i4'), ('name', '<f16')], 'fortran_order': False, 'shape': (2,), }";
    let mut data = Vec::new();
    for id in [7i32, 8] {
        data.extend(id.to_le_bytes());
        data.extend([0u8; 16]);
    }
    std::fs::write(&npy, npy_bytes(header, &data)).unwrap();
    let o = run(tet_convert().arg(&npy).arg(&out));
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.exists());
    let o = run(tet_convert()
        .arg(&npy)
        .arg(&out)
        .args(["--skip-unsupported", "--json"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["skipped"][0]["name"], "strs/name");
    let o = run(tet().args(["info", "--json"]).arg(&out));
    let info: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(info["skipped"][0]["name"], "strs/name");
    assert_eq!(info["history"][0]["params"]["skip_unsupported"], "true");
}

/// A `.npy` of the given shape (u8 zeros).
fn write_npy(path: &Path, shape: &[u64]) {
    let dims: Vec<String> = shape.iter().map(|d| format!("{d}, ")).collect();
    let header = format!(
        "{{'descr': '|u1', 'fortran_order': False, 'shape': ({}), }}",
        dims.concat()
    );
    let data = vec![0u8; shape.iter().product::<u64>() as usize];
    std::fs::write(path, npy_bytes(&header, &data)).unwrap();
}

#[test]
fn rank_above_eight_is_refused_or_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("deep.npy");
    write_npy(&npy, &[1, 2, 1, 2, 1, 2, 1, 2, 1]);
    let out = dir.path().join("o.tet");
    let o = run(tet_convert().arg(&npy).arg(&out));
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("dataset 'deep' has rank 9 > tet maximum rank 8"),
        "{err}"
    );
    assert!(!out.exists());
    let o = run(tet_convert()
        .arg(&npy)
        .arg(&out)
        .args(["--skip-unsupported", "--json"]));
    assert!(o.status.success());
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["skipped"][0]["name"], "deep");
    assert_eq!(r["datasets"].as_array().unwrap().len(), 0);
    let f = tet::format::TetFile::open(&out).unwrap();
    assert!(tet::format::verify::verify(&f, tet::format::verify::Depth::Deep).ok());
}

#[test]
fn verify_exit_codes() {
    let ok = common::reference("sample.tet");
    let o = run(tet().arg("verify").arg(&ok));
    assert_eq!(o.status.code(), Some(0));
    let o = run(tet()
        .args(["verify", "--deep", "-q"])
        .arg(common::reference("plan.tet")));
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let o = run(tet()
        .args(["verify", "--json"])
        .arg(common::reference("plan.tet")));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["failures"][0]["code"], "footer");
    let o = run(tet().args(["verify", "/nonexistent/x.tet"]));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(run(tet().args(["verify"])).status.code(), Some(2));
    assert_eq!(
        run(tet().args(["verify", "--bogus", "x"])).status.code(),
        Some(2)
    );
}

#[test]
fn info_shows_datasets_metadata_and_history() {
    let o = run(tet()
        .arg("info")
        .arg(common::reference("converted_small_cf.tet")));
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "chunked",
        "f32",
        "100×7",
        "30×4",
        "8 raw",
        "dims: (t, x)",
        "units = hours",
        "convert from nc",
    ] {
        assert!(s.contains(needle), "missing {needle:?} in\n{s}");
    }
    let o = run(tet()
        .args(["info", "--chunks", "-n", "3"])
        .arg(common::reference("large.tet")));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("chunk index (3 of 144 rows)"), "{s}");
    // A footer that cannot be read: what can be read is shown, and the exit code says the file
    // is damaged (one line on stderr).
    let o = run(tet().arg("info").arg(common::reference("plan.tet")));
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("footer: UNREADABLE"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines().count() == 1 && err.contains("file is damaged: its footer"),
        "{err}"
    );
    let o = run(tet().args(["info", "/nonexistent.tet"]));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
}

#[test]
fn formats_lists_the_registry() {
    let o = run(tet_convert().arg("--formats"));
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("npy") && s.contains("tea") && s.contains("zarr"),
        "{s}"
    );
}

/// A build without the C-library importers names the missing feature for their files (and still
/// converts everything else); with them, NetCDF and HDF5 files convert through the CLI.
#[test]
fn c_library_formats_follow_the_build_features() {
    let dir = tempfile::tempdir().unwrap();
    for (rel, feature, on) in [
        ("netcdf/nc3_classic.nc", "netcdf", cfg!(feature = "netcdf")),
        ("hdf5/structure.h5", "hdf5", cfg!(feature = "hdf5")),
    ] {
        let out = dir.path().join("out.tet");
        let o = run(tet_convert().arg(corpus(rel)).arg(&out));
        if on {
            assert!(o.status.success(), "{rel}: {o:?}");
            assert!(run(tet().arg("verify").arg(&out)).status.success());
            std::fs::remove_file(&out).unwrap();
        } else {
            assert!(
                !o.status.success(),
                "{rel} converted without feature {feature}"
            );
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains(&format!("feature `{feature}`")) && err.lines().count() == 1,
                "{rel}: {err}"
            );
            assert!(!out.exists());
        }
    }
}

/// The README's main job: the bundled NetCDF sample converts, verifies, and holds the values the
/// sample was written with (converters/netcdf/examples/make_sample.rs computes them the same way).
#[cfg(feature = "netcdf")]
#[test]
fn bundled_netcdf_sample_converts_with_its_values() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ocean.tet");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample/ocean.nc");
    let o = run(tet_convert().arg(&sample).arg(&out));
    assert!(o.status.success(), "{o:?}");
    assert!(run(tet().args(["verify", "--deep"]).arg(&out))
        .status
        .success());
    let f = tet::format::TetFile::open(&out).unwrap();
    let (nt, ny, nx) = (4usize, 90usize, 180usize);
    let lat: Vec<f32> = (0..ny).map(|j| -89.0 + 2.0 * j as f32).collect();
    let lon: Vec<f32> = (0..nx).map(|i| 1.0 + 2.0 * i as f32).collect();
    let (mut sst, mut wind) = (Vec::new(), Vec::new());
    for k in 0..nt {
        for (j, la) in lat.iter().enumerate() {
            for (i, lo) in lon.iter().enumerate() {
                let land = (j / 10 + i / 15) % 7 == 0;
                let t = 300.0 - 30.0 * (la.to_radians().sin()).powi(2)
                    + 0.5 * (lo.to_radians() * 3.0 + k as f32).cos();
                let v: f32 = if land {
                    -999.0
                } else {
                    (t * 100.0).round() / 100.0
                };
                sst.extend(v.to_le_bytes());
                wind.extend((((j * 7 + i * 3 + k * 11) % 1500) as i16 - 500).to_le_bytes());
            }
        }
    }
    let read = |name: &str| f.read_dataset(f.dataset_id(name).unwrap()).unwrap();
    assert!(read("sst") == sst, "sst values");
    assert!(
        read("wind") == wind,
        "wind values (packed, stored unchanged)"
    );
    let footer = f.footer().unwrap().unwrap();
    let meta = &footer.datasets["sst"];
    assert_eq!(
        meta.coords["time"][..2],
        ["2024-01-01T00:00:00", "2024-01-01T06:00:00"]
    );
}

/// `tet audit`: the history table, and `--source` re-hashing inputs (files and directory stores)
/// against the recorded parents: exit 0 when all match, 1 on a changed input, 2 when it cannot
/// check, one-line errors.
#[test]
fn audit_checks_sources_against_recorded_parents() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    std::fs::copy(corpus("npy/big_endian_f64.npy"), &input).unwrap();
    let out = dir.path().join("out.tet");
    assert!(run(tet_convert().arg(&input).arg(&out)).status.success());

    let o = run(tet().arg("audit").arg(&out).arg("--source").arg(&input));
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("convert") && text.contains("2023-11-14T22:13:20Z"),
        "{text}"
    );
    assert!(text.contains("unchanged (parent of row 0)"), "{text}");

    let o = run(tet()
        .args(["audit", "--json"])
        .arg(&out)
        .arg("--source")
        .arg(&input));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "tet-audit/1");
    assert_eq!(v["ok"], true);
    assert_eq!(v["history"][0]["op"], "convert");
    assert_eq!(v["history"][0]["params"]["tool"], "tet-convert");
    assert_eq!(v["sources"][0]["matches_rows"][0], 0);
    assert_eq!(v["history"][0]["parents"][0], v["sources"][0]["digest"]);

    // One byte changed: the same path no longer matches.
    let mut bytes = std::fs::read(&input).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&input, bytes).unwrap();
    let o = run(tet().arg("audit").arg(&out).arg("--source").arg(&input));
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("MISMATCH"));

    // A directory store: its digest covers every file below it.
    let store = corpus("zarr/climate.zarr");
    let zout = dir.path().join("z.tet");
    assert!(run(tet_convert().arg(&store).arg(&zout)).status.success());
    let o = run(tet().arg("audit").arg(&zout).arg("--source").arg(&store));
    assert!(o.status.success(), "{o:?}");

    // A file whose footer is corrupt: one line naming it, exit 2 (could not check).
    let plan = common::shared().join("interop/reference-tet/plan.tet");
    let o = run(tet().arg("audit").arg(&plan));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("plan.tet") && err.lines().count() == 1,
        "{err}"
    );
}

/// The input rows of the last run in a report ledger (which every run appends to), checking
/// that the run has its start and end rows.
fn report_rows(path: &Path) -> Vec<Value> {
    let rows: Vec<Value> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = rows.last().expect("an empty report");
    assert_eq!(end["kind"], "end", "the last run has no end row");
    let run = end["run"].clone();
    let start = rows
        .iter()
        .position(|r| r["kind"] == "start" && r["run"] == run)
        .expect("the last run has no start row");
    let inputs: Vec<Value> = rows[start..]
        .iter()
        .filter(|r| r["kind"] == "input")
        .cloned()
        .collect();
    assert!(inputs.iter().all(|r| r["run"] == run));
    inputs
}

/// Batch runs: `--out-dir` names outputs deterministically, re-runs skip what is up to date
/// (same digest and byte-affecting options) unless `--force` or the options change, `--report`
/// writes one JSON line per input, `--keep-going` goes past a failure, shards partition the list.
#[test]
fn batch_runs_are_idempotent_sharded_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // The inputs sit in one folder of the test's own, so their sorted order (which fail-fast and
    // sharding follow) does not depend on where the checkout and the temporary folder are.
    let in_dir = dir.path().join("in");
    std::fs::create_dir(&in_dir).unwrap();
    let inputs = ["big_endian_f64.npy", "big_endian_i32.npy", "dtype_bool.npy"].map(|name| {
        let p = in_dir.join(name);
        std::fs::copy(corpus(&format!("npy/{name}")), &p).unwrap();
        p
    });
    let report = dir.path().join("report.jsonl");
    let batch = |extra: &[&str]| {
        let mut c = tet_convert();
        c.args(["-q", "--out-dir"])
            .arg(&out)
            .args(&inputs)
            .arg("--report")
            .arg(&report);
        c.args(extra);
        run(&mut c)
    };
    let o = batch(&[]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        only_files(&out),
        ["big_endian_f64.tet", "big_endian_i32.tet", "dtype_bool.tet"]
    );
    let rows = report_rows(&report);
    assert_eq!(rows.len(), 3);
    assert!(rows
        .iter()
        .all(|r| r["status"] == "ok" && r["input_digest"].is_string()));
    let first = std::fs::read(out.join("dtype_bool.tet")).unwrap();

    // Re-run: everything up to date, nothing rewritten.
    let o = batch(&[]);
    assert!(o.status.success());
    assert!(report_rows(&report)
        .iter()
        .all(|r| r["status"] == "skipped" && r["reason"] == "up to date"));
    // --force, or other byte-affecting options: converted again.
    assert!(batch(&["--force"]).status.success());
    assert!(report_rows(&report).iter().all(|r| r["status"] == "ok"));
    assert!(batch(&["--codec", "raw"]).status.success());
    assert!(report_rows(&report).iter().all(|r| r["status"] == "ok"));
    assert!(batch(&["--codec", "raw"]).status.success());
    assert!(report_rows(&report)
        .iter()
        .all(|r| r["status"] == "skipped"));
    // Back to the first options: rebuilt, byte-identical to the first run's output.
    assert!(batch(&[]).status.success());
    assert!(report_rows(&report).iter().all(|r| r["status"] == "ok"));
    assert!(std::fs::read(out.join("dtype_bool.tet")).unwrap() == first);

    // Shards 0/2 and 1/2 (explicit or from Slurm's variables) partition the sorted inputs.
    let mut seen = Vec::new();
    for k in 0..2 {
        let mut c = tet_convert();
        c.args(["-q", "--force", "--out-dir"])
            .arg(&out)
            .args(&inputs);
        c.arg("--report").arg(&report);
        c.env("SLURM_ARRAY_TASK_ID", k.to_string())
            .env("SLURM_ARRAY_TASK_COUNT", "2");
        assert!(run(&mut c).status.success());
        seen.extend(report_rows(&report).into_iter().map(|r| r["input"].clone()));
        assert!(batch(&["--force", "--shard", &format!("{k}/2")])
            .status
            .success());
        let explicit: Vec<Value> = report_rows(&report)
            .into_iter()
            .map(|r| r["input"].clone())
            .collect();
        assert_eq!(seen[seen.len() - explicit.len()..], explicit[..]);
    }
    seen.sort_by_key(|v| v.to_string());
    let mut all: Vec<Value> = inputs
        .iter()
        .map(|p| Value::from(p.display().to_string()))
        .collect();
    all.sort_by_key(|v| v.to_string());
    assert_eq!(seen, all);

    // A failing input: fail-fast stops there, --keep-going converts the rest; exit 1 both times.
    let bad = in_dir.join("aaa_bad.npy");
    std::fs::write(&bad, b"\x93NUMPY garbage").unwrap();
    for (keep, n) in [(false, 1), (true, 4)] {
        let mut c = tet_convert();
        c.args(["-q", "--force", "--out-dir"])
            .arg(&out)
            .arg(&bad)
            .args(&inputs);
        c.arg("--report").arg(&report);
        if keep {
            c.arg("--keep-going");
        }
        let o = run(&mut c);
        assert_eq!(o.status.code(), Some(1));
        let rows = report_rows(&report);
        assert_eq!(rows.len(), n, "keep-going {keep}");
        assert_eq!(rows[0]["status"], "failed");
        assert!(rows[0]["reason"].is_string());
        assert!(!out.join("aaa_bad.tet").exists());
    }
    // Two inputs that would share an output name: the first converts, the other is a failed row
    // (one odd input never costs the batch).
    let twin = dir.path().join("dtype_bool.npy");
    std::fs::copy(&inputs[2], &twin).unwrap();
    let mut c = tet_convert();
    c.args(["-q", "--force", "--keep-going", "--out-dir"])
        .arg(&out)
        .arg(&inputs[2])
        .arg(&twin)
        .arg("--report")
        .arg(&report);
    assert_eq!(run(&mut c).status.code(), Some(1));
    let rows = report_rows(&report);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows.iter().filter(|r| r["status"] == "ok").count(), 1);
    let refused = rows.iter().find(|r| r["status"] == "failed").unwrap();
    assert!(refused["reason"]
        .as_str()
        .unwrap()
        .contains("would also be written by"));
}

/// The output never replaces an input (same path, a symbolic link to it, another hard link of
/// it); a symbolic-link output is written through only with --write-through-symlink; new files
/// get 0666 less the umask, like any file a program creates.
#[test]
fn outputs_never_overwrite_inputs_or_follow_links_unasked() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("in.npy");
    std::fs::copy(corpus("npy/rank1.npy"), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let one_line_refusal = |o: &Output, what: &str| {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(what), "{err}");
    };

    // The input itself, a symbolic link to it, a hard link of it.
    symlink(&input, d.join("sym_to_in.tet")).unwrap();
    std::fs::hard_link(&input, d.join("hard_to_in.tet")).unwrap();
    for out in ["in.npy", "sym_to_in.tet", "hard_to_in.tet"] {
        let o = run(tet_convert().arg(&input).arg(d.join(out)).arg("-q"));
        one_line_refusal(&o, "overwrite the input");
        let o = run(tet_convert()
            .arg(&input)
            .arg(d.join(out))
            .args(["-q", "--write-through-symlink"]));
        one_line_refusal(&o, "overwrite the input");
    }
    assert!(std::fs::read(&input).unwrap() == before);

    // A link to another file: refused unless asked; then the target is written, the link stays.
    let target = d.join("target.tet");
    std::fs::write(&target, b"old").unwrap();
    symlink("target.tet", d.join("link.tet")).unwrap();
    let o = run(tet_convert().arg(&input).arg(d.join("link.tet")).arg("-q"));
    one_line_refusal(&o, "--write-through-symlink");
    assert_eq!(std::fs::read(&target).unwrap(), b"old");
    let o = run(tet_convert()
        .arg(&input)
        .arg(d.join("link.tet"))
        .args(["-q", "--write-through-symlink"]));
    assert!(o.status.success(), "{o:?}");
    assert!(std::fs::symlink_metadata(d.join("link.tet"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(tet::format::TetFile::open(&target).is_ok());
    // A dangling link is written through to where it points.
    symlink("new.tet", d.join("dangling.tet")).unwrap();
    let o = run(tet_convert()
        .arg(&input)
        .arg(d.join("dangling.tet"))
        .args(["-q", "--write-through-symlink"]));
    assert!(o.status.success(), "{o:?}");
    assert!(tet::format::TetFile::open(&d.join("new.tet")).is_ok());
    // A loop ends with a refusal, not a hang.
    symlink("loop_b.tet", d.join("loop_a.tet")).unwrap();
    symlink("loop_a.tet", d.join("loop_b.tet")).unwrap();
    let o = run(tet_convert()
        .arg(&input)
        .arg(d.join("loop_a.tet"))
        .args(["-q", "--write-through-symlink"]));
    one_line_refusal(&o, "symbolic links");

    // Modes: 0666 less the umask of the converting process.
    for (umask, mode) in [(0o022, 0o644), (0o007, 0o660)] {
        let out = d.join(format!("mode_{umask:o}.tet"));
        let mut c = tet_convert();
        c.arg(&input).arg(&out).arg("-q");
        // SAFETY: umask is async-signal-safe and only touches the child.
        unsafe {
            c.pre_exec(move || {
                libc::umask(umask);
                Ok(())
            });
        }
        assert!(run(&mut c).status.success());
        let m = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(m, mode, "umask {umask:o}");
    }
    assert_eq!(
        only_files(d).iter().filter(|n| n.ends_with(".tmp")).count(),
        0
    );
}

/// `--manifest`: jobs with their own options (over `[defaults]`), relative paths from the
/// manifest's folder, up-to-date re-runs, sharding in manifest order, and mistakes refused as
/// usage errors before any work.
#[test]
fn manifest_runs_jobs_with_their_own_options() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("out")).unwrap();
    for name in ["dtype_i8.npy", "rank3.npy", "dtype_f32.npy"] {
        std::fs::copy(corpus(&format!("npy/{name}")), d.join(name)).unwrap();
    }
    let manifest = d.join("jobs.toml");
    std::fs::write(
        &manifest,
        r#"
[defaults]
codec = "zstd:5"

[[job]]
input = "rank3.npy"
output = "out/r.tet"
chunk_bytes = "64"

[[job]]
input = "dtype_i8.npy"
output = "out/i8.tet"
codec = "raw"

[[job]]
input = "dtype_f32.npy"
output = "out/f32.tet"
chunk = "dtype_f32:1,4"
"#,
    )
    .unwrap();
    let report = d.join("report.jsonl");
    let run_manifest = |extra: &[&str]| {
        run(tet_convert()
            .arg("--manifest")
            .arg(&manifest)
            .arg("-q")
            .arg("--report")
            .arg(&report)
            .args(extra))
    };
    let o = run_manifest(&[]);
    assert!(o.status.success(), "{o:?}");
    let params = |name: &str| {
        let f = tet::format::TetFile::open(&d.join("out").join(name)).unwrap();
        let row = f.footer().unwrap().unwrap().history[0].clone();
        (row.params["codec"].clone(), row.params["chunk"].clone())
    };
    assert_eq!(params("r.tet"), ("zstd:5".into(), "64".into()));
    assert_eq!(params("i8.tet"), ("raw".into(), "4194304".into()));
    assert_eq!(
        params("f32.tet"),
        ("zstd:5".into(), "4194304;dtype_f32:1,4".into())
    );
    let f = tet::format::TetFile::open(&d.join("out/f32.tet")).unwrap();
    assert_eq!(f.datasets[0].chunk_shape, [1, 4]);
    // In manifest order, every job reported.
    let rows = report_rows(&report);
    let outputs: Vec<&str> = rows.iter().map(|r| r["output"].as_str().unwrap()).collect();
    assert!(outputs[0].ends_with("out/r.tet") && outputs[2].ends_with("out/f32.tet"));
    // Re-run: all up to date; a shard takes the jobs whose input path hashes to it.
    assert!(run_manifest(&[]).status.success());
    assert!(report_rows(&report)
        .iter()
        .all(|r| r["status"] == "skipped"));
    assert!(run_manifest(&["--force", "--shard", "1/2"])
        .status
        .success());
    let mut sharded = report_rows(&report);
    assert!(run_manifest(&["--force", "--shard", "0/2"])
        .status
        .success());
    sharded.extend(report_rows(&report));
    let mut outputs: Vec<&str> = sharded
        .iter()
        .map(|r| r["output"].as_str().unwrap())
        .collect();
    outputs.sort();
    assert_eq!(outputs.len(), 3);
    assert!(outputs[0].ends_with("out/f32.tet") && outputs[2].ends_with("out/r.tet"));

    // Mistakes: exit 2, one line naming the manifest and the job, nothing converted.
    for (text, what) in [
        ("[[job]]\ninput = \"rank3.npy\"\noutput = \"x.tet\"\ncodek = \"raw\"", "job 1: unknown field `codek`"),
        ("[[job]]\ninput = \"rank3.npy\"\n", "job 1: `output` is missing"),
        ("[[job]]\ninput = \"a.npy\"\noutput = \"x.tet\"\n[[job]]\ninput = \"b.npy\"\noutput = \"x.tet\"", "job 2: writes"),
    ] {
        std::fs::write(&manifest, text).unwrap();
        let o = run_manifest(&[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("jobs.toml") && err.contains(what), "{err}");
        assert!(!d.join("x.tet").exists());
    }
}

/// Logging goes to stderr at the level asked for (-v, -vv, RUST_LOG); stdout carries only what
/// was requested (nothing, or the --json report).
#[test]
fn logs_go_to_stderr_by_level() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.tet");
    let input = corpus("npy/rank3.npy");
    let convert = |extra: &[&str], rust_log: Option<&str>| {
        let mut c = tet_convert();
        c.arg(&input).arg(&out).arg("--force").args(extra);
        match rust_log {
            Some(l) => c.env("RUST_LOG", l),
            None => c.env_remove("RUST_LOG"),
        };
        let o = run(&mut c);
        assert!(o.status.success(), "{o:?}");
        (
            String::from_utf8(o.stdout).unwrap(),
            String::from_utf8(o.stderr).unwrap(),
        )
    };
    let (stdout, stderr) = convert(&["-q"], None);
    assert!(stdout.is_empty() && stderr.is_empty(), "{stderr}");
    let (stdout, stderr) = convert(&["-q", "-v"], None);
    assert!(stdout.is_empty());
    assert!(stderr.contains("tet-convert: info: ") && stderr.contains("converting"));
    assert!(!stderr.contains("debug:"));
    let (_, stderr) = convert(&["-q", "-vv"], None);
    assert!(
        stderr.contains("tet-convert: debug: dataset 'rank3'"),
        "{stderr}"
    );
    let (stdout, stderr) = convert(&["--json"], Some("debug"));
    assert!(stderr.contains("debug:"));
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["datasets"][0]["name"], "rank3");
}

/// A mistyped `--storage-option` (no `=`) may be a secret: the one error line never shows it,
/// in `tet-convert` and in every `tet` subcommand that takes the option.
#[test]
fn a_bad_storage_option_is_refused_without_echoing_it() {
    let secret = "secret_access_key:SEKRIT-9f3a";
    let mut cases = vec![(tet_convert(), vec!["in.tet", "out.tet"])];
    for sub in ["info", "verify", "audit", "export"] {
        let mut c = tet();
        c.arg(sub);
        let files = if sub == "export" {
            vec!["in.tet", "out.npz"]
        } else {
            vec!["in.tet"]
        };
        cases.push((c, files));
    }
    for (mut c, files) in cases {
        let o = run(c.args(files).args(["--storage-option", secret]));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{err}");
        assert!(err.contains("expected KEY=VALUE"), "{err}");
        assert!(!err.contains("SEKRIT"), "the secret is echoed: {err}");
        assert!(!String::from_utf8_lossy(&o.stdout).contains("SEKRIT"));
    }
}
