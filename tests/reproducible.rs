//! Reproducibility of the converter binary: the same input, options and `SOURCE_DATE_EPOCH` give
//! byte-identical output whatever `--jobs` is and however often it runs, for every importer of
//! this build; and where the input lies does not matter beyond the input argument, which the
//! history records as given.
//!
//! What the output may depend on: the input's bytes, the byte-affecting options (codec, chunking,
//! `--unpack`, `--skip-unsupported`, `--follow-external`), `SOURCE_DATE_EPOCH` (the history and
//! `created_at` timestamp), the tool version, the input argument as typed (history row
//! `params.input`) and, recorded beside it for `tet audit`, the input's modification time
//! (`params.input_mtime`) and, for a relative input argument only, the working directory
//! (`params.cwd`). What it must not depend on: `--jobs`, the run, the machine (thread count,
//! scheduling, host name, user). `--jobs` only changes which thread compresses a chunk; chunks
//! are placed in index order.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The importer ids (`tet-convert --json` `format`) this build must cover.
fn importer_ids() -> BTreeSet<&'static str> {
    let mut ids: BTreeSet<&str> = ["npy", "npz", "tea", "tgm", "zarr", "tet"].into();
    if cfg!(feature = "netcdf") {
        ids.insert("nc");
    }
    if cfg!(feature = "hdf5") {
        ids.insert("h5");
    }
    ids
}

/// Every corpus input this build converts (no `expect_error`), by manifest order, then `.tet`
/// inputs.
fn inputs() -> Vec<PathBuf> {
    let out: Vec<PathBuf> = common::sidecar::inputs()
        .into_iter()
        .filter(|(_, expect)| expect["expect_error"].is_null())
        .map(|(input, _)| input)
        .collect();
    assert!(out.len() >= 25, "corpus not found: {} inputs", out.len());
    // `.tet` inputs (re-chunk, re-compress): the reference implementation's files with a
    // readable footer.
    let mut out = out;
    let reference = common::shared().join("interop/reference-tet");
    for name in ["sample.tet", "converted_small_cf.tet", "multichunk_f16.tet"] {
        out.push(reference.join(name));
    }
    out
}

fn tet_convert(input: &Path, output: &Path, jobs: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tet-convert"));
    c.arg(input)
        .arg(output)
        .args([
            "--codec",
            "zstd:3",
            "--chunk-bytes",
            "4KiB",
            "--jobs",
            jobs,
            "-q",
        ])
        .env("SOURCE_DATE_EPOCH", "1700000000");
    c
}

/// Runs `c` and asserts success.
fn run_ok(c: &mut Command, what: &str) {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{what}: {:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The importer `tet-convert` picks for `input` (from its `--json` report).
fn format_of(input: &Path, dir: &Path) -> String {
    let out = dir.join("fmt.tet");
    let o = tet_convert(input, &out, "1")
        .arg("--json")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    std::fs::remove_file(&out).unwrap();
    report["format"].as_str().unwrap().to_string()
}

#[test]
fn every_importer_is_byte_identical_across_jobs_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut covered = BTreeSet::new();
    let mut files = 0;
    let mut runs = 0;
    for input in inputs() {
        covered.insert(format_of(&input, dir.path()));
        let mut first: Option<Vec<u8>> = None;
        for round in 0..2 {
            for jobs in ["1", "2", "4"] {
                let out = dir.path().join(format!("o{round}-{jobs}.tet"));
                run_ok(
                    &mut tet_convert(&input, &out, jobs),
                    &format!("{} --jobs {jobs}", input.display()),
                );
                let got = std::fs::read(&out).unwrap();
                std::fs::remove_file(&out).unwrap();
                runs += 1;
                match &first {
                    None => first = Some(got),
                    Some(want) => assert!(
                        *want == got,
                        "{}: run {round} with --jobs {jobs} differs from the first run",
                        input.display()
                    ),
                }
            }
        }
        // The timestamp does reach the bytes (so SOURCE_DATE_EPOCH is what keeps them equal).
        let out = dir.path().join("later.tet");
        run_ok(
            tet_convert(&input, &out, "2").env("SOURCE_DATE_EPOCH", "1700000001"),
            &input.display().to_string(),
        );
        assert!(
            std::fs::read(&out).unwrap() != first.unwrap(),
            "{}: SOURCE_DATE_EPOCH does not reach the output",
            input.display()
        );
        files += 1;
    }
    let want = importer_ids();
    let want: BTreeSet<String> = want.into_iter().map(String::from).collect();
    assert!(
        want.is_subset(&covered),
        "importers not covered: {:?}",
        want.difference(&covered).collect::<Vec<_>>()
    );
    eprintln!(
        "reproducible: {files} inputs, importers {covered:?}, {runs} runs (--jobs 1/2/4 twice), \
         all byte-identical per input"
    );
}

/// Sets the modification time of a file, or of a directory store and everything below it.
fn set_mtime(p: &Path, t: std::time::SystemTime) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            set_mtime(&e.unwrap().path(), t);
        }
    }
    std::fs::File::open(p).unwrap().set_modified(t).unwrap();
}

/// The input argument is recorded as given: the same relative argument run from two different
/// working directories (each holding its own copy of the input, with the same modification
/// time) differs only in the recorded `params.cwd`; two different absolute paths differ only in
/// the recorded `params.input` (and record no `cwd`).
#[test]
fn output_does_not_depend_on_where_the_input_lies() {
    let mut rels = vec![
        "npy/rank3.npy",
        "npy/arrays_compressed.npz",
        "teafile/tick_full.tea",
        "tensogram/multi_message.tgm",
        "zarr/climate.zarr",
    ];
    if cfg!(feature = "netcdf") {
        rels.push("netcdf/nc3_classic.nc");
    }
    if cfg!(feature = "hdf5") {
        rels.push("hdf5/structure.h5");
    }
    let root = tempfile::tempdir().unwrap();
    for rel in rels {
        let name = Path::new(rel).file_name().unwrap();
        let mut outs = Vec::new();
        for place in ["a", "deeper/b"] {
            let cwd = root.path().join(place);
            std::fs::create_dir_all(&cwd).unwrap();
            tet_testkit::copy_tree(&common::sidecar::corpus().join(rel), &cwd.join(name));
            // The copies' modification time is recorded (`params.input_mtime`): make it one.
            set_mtime(
                &cwd.join(name),
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000),
            );
            // Relative input, relative output, from the copy's own directory.
            let mut c = tet_convert(Path::new(name), Path::new("out.tet"), "2");
            c.current_dir(&cwd);
            run_ok(&mut c, rel);
            outs.push(cwd.join("out.tet"));
            // Absolute input.
            let abs = cwd.join("abs.tet");
            run_ok(&mut tet_convert(&cwd.join(name), &abs, "2"), rel);
        }
        let info = |p: &Path| -> Value {
            let o = Command::new(env!("CARGO_BIN_EXE_tet"))
                .args(["info", "--json"])
                .arg(p)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            serde_json::from_slice(&o.stdout).unwrap()
        };
        // Relative arguments: the bytes differ only in the recorded working directory.
        let (mut ra, mut rb) = (info(&outs[0]), info(&outs[1]));
        for (i, place) in [(&mut ra, "a"), (&mut rb, "deeper/b")] {
            let cwd = i["history"][0]["params"]["cwd"].take();
            assert_eq!(
                cwd,
                root.path().join(place).display().to_string(),
                "{rel}: the recorded working directory"
            );
            let o = i.as_object_mut().unwrap();
            assert!(o.remove("file").is_some() && o.remove("file_bytes").is_some());
        }
        assert_eq!(ra, rb, "{rel}: more than the working directory differs");

        // Absolute arguments: the bytes differ (the history names the input), the rest does not.
        let a = root.path().join("a/abs.tet");
        let b = root.path().join("deeper/b/abs.tet");
        assert_ne!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let (mut ia, mut ib) = (info(&a), info(&b));
        let input_a = ia["history"][0]["params"]["input"].take();
        let input_b = ib["history"][0]["params"]["input"].take();
        assert!(ia["history"][0]["params"].get("cwd").is_none());
        assert_eq!(
            input_a,
            root.path().join("a").join(name).display().to_string()
        );
        assert_eq!(
            input_b,
            root.path()
                .join("deeper/b")
                .join(name)
                .display()
                .to_string()
        );
        // `tet info` also prints the path it was given and the file size (the footer holds the
        // longer or shorter input path); drop those.
        for i in [&mut ia, &mut ib] {
            let o = i.as_object_mut().unwrap();
            assert!(o.remove("file").is_some() && o.remove("file_bytes").is_some());
        }
        assert_eq!(ia, ib, "{rel}: more than the recorded input differs");
        for place in ["a", "deeper/b"] {
            std::fs::remove_dir_all(root.path().join(place)).unwrap();
        }
    }
}
