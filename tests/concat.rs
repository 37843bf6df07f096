//! `tet-convert --concat DIM IN… OUT`: five daily netCDF-4 files written by xarray
//! (fixtures/concat, `make_concat.py`) combined along time equal xarray's `combine_by_coords`
//! (`data_vars="minimal"`), whatever order the inputs are given in (the same bytes); another
//! grid, other units, overlapping times and a missing variable are refused with one line naming
//! both inputs, and nothing is written; every input is a parent that `tet audit` re-checks.
#![cfg(feature = "netcdf")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tet::format::{DType, TetFile};

const DAYS: [&str; 5] = ["day1.nc", "day2.nc", "day3.nc", "day4.nc", "day5.nc"];

/// The fixtures copied into `dir` (audit tests touch them).
fn copy_fixtures(dir: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/concat");
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "nc" || x == "json") {
            std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
        }
    }
}

fn run(dir: &Path, program: &str, args: &[&str]) -> Output {
    let exe = match program {
        "tet" => env!("CARGO_BIN_EXE_tet"),
        _ => env!("CARGO_BIN_EXE_tet-convert"),
    };
    Command::new(exe)
        .current_dir(dir)
        .args(args)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap()
}

fn concat(dir: &Path, inputs: &[&str], out: &str) -> Output {
    let mut args = vec!["-q", "--concat", "time"];
    args.extend_from_slice(inputs);
    args.push(out);
    run(dir, "tet-convert", &args)
}

fn values(f: &TetFile, i: usize) -> Vec<f64> {
    let b = f.read_dataset(i).unwrap();
    match f.datasets[i].dtype {
        DType::F32 => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        DType::F64 => b
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        DType::I16 => b
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        other => panic!("no {other:?} in the fixtures"),
    }
}

#[test]
fn combined_days_equal_xarray_in_any_input_order() {
    let d = tempfile::tempdir().unwrap();
    copy_fixtures(d.path());
    let shuffled = ["day3.nc", "day1.nc", "day5.nc", "day2.nc", "day4.nc"];
    let o = concat(d.path(), &shuffled, "a.tet");
    assert!(o.status.success(), "{o:?}");
    let o = concat(d.path(), &DAYS, "b.tet");
    assert!(o.status.success(), "{o:?}");
    let a = std::fs::read(d.path().join("a.tet")).unwrap();
    assert_eq!(
        a,
        std::fs::read(d.path().join("b.tet")).unwrap(),
        "same bytes"
    );

    let expect: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("expect.json")).unwrap())
            .unwrap();
    let f = TetFile::open(&d.path().join("a.tet")).unwrap();
    let mut names: Vec<&str> = f.datasets.iter().map(|x| x.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["lat", "lon", "orography", "precip", "temp", "time"]);
    for (i, ds) in f.datasets.iter().enumerate() {
        let w = &expect[&ds.name];
        let shape: Vec<u64> = serde_json::from_value(w["shape"].clone()).unwrap();
        assert_eq!(ds.shape, shape, "{}", ds.name);
        let want: Vec<f64> = serde_json::from_value(w["values"].clone()).unwrap();
        assert_eq!(values(&f, i), want, "{}", ds.name);
    }
    assert!(tet::format::verify::verify(&f, tet::format::verify::Depth::Deep).ok());

    // Every input is a parent, in time order, and recorded by path.
    let row = f.footer().unwrap().unwrap().history.last().unwrap().clone();
    assert_eq!(row.parents.len(), 5);
    assert_eq!(row.params["concat"], "time");
    assert_eq!(row.params["input"], "day1.nc");
    for (k, day) in DAYS.iter().enumerate().skip(1) {
        assert_eq!(row.params[&format!("input.{k}")], *day);
    }
    let (digest, _) = tet::meta::digest_input(&d.path().join("day3.nc")).unwrap();
    assert_eq!(row.parents[2], digest);
}

#[test]
fn disagreements_are_refused_naming_both_inputs() {
    let d = tempfile::tempdir().unwrap();
    copy_fixtures(d.path());
    let cases = [
        ("grid.nc", "day1.nc and grid.nc: variable lat differs"),
        (
            "units.nc",
            "day1.nc and units.nc: time has another attribute units",
        ),
        ("overlap.nc", "day3.nc and overlap.nc: time values overlap"),
        (
            "missing.nc",
            "day1.nc and missing.nc: variable precip is missing from missing.nc",
        ),
    ];
    for (bad, line) in cases {
        let mut inputs = DAYS.to_vec();
        inputs.insert(2, bad);
        let o = concat(d.path(), &inputs, "bad.tet");
        assert_eq!(o.status.code(), Some(1), "{bad}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(line), "{bad}: {err}");
        assert_eq!(err.lines().count(), 1, "{bad}: one line: {err}");
        assert!(!d.path().join("bad.tet").exists(), "{bad}: nothing written");
    }
    // Another grid taken from the first input, when asked for.
    let mut inputs = vec!["--concat-take-first"];
    inputs.extend_from_slice(&DAYS[..4]);
    inputs.push("grid.nc");
    let o = concat(d.path(), &inputs, "first.tet");
    assert!(o.status.success(), "{o:?}");
    // More inputs than one history row can name as parents: refused before any is opened.
    let many: Vec<&str> = DAYS.iter().cycle().take(17).copied().collect();
    let o = concat(d.path(), &many, "many.tet");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("at most 16 parents"),
        "{o:?}"
    );
    // Fewer than two inputs is a usage error.
    let o = concat(d.path(), &["day1.nc"], "one.tet");
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

#[test]
fn audit_rechecks_every_input_and_names_the_changed_one() {
    let d = tempfile::tempdir().unwrap();
    copy_fixtures(d.path());
    assert!(concat(d.path(), &DAYS, "out.tet").status.success());
    let o = run(d.path(), "tet", &["audit", "out.tet"]);
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        text.matches("unchanged since conversion").count(),
        5,
        "{text}"
    );

    let touched: PathBuf = d.path().join("day4.nc");
    let mut b = std::fs::read(&touched).unwrap();
    b.push(0);
    std::fs::write(&touched, b).unwrap();
    std::fs::remove_file(d.path().join("day2.nc")).unwrap();
    let o = run(d.path(), "tet", &["audit", "out.tet"]);
    assert!(!o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        text.matches("unchanged since conversion").count(),
        3,
        "{text}"
    );
    let changed: Vec<&str> = text.lines().filter(|l| l.starts_with("CHANGED")).collect();
    assert_eq!(changed.len(), 1, "{text}");
    assert!(changed[0].contains("day4.nc"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("day2.nc") && !l.starts_with("ok")),
        "the missing input is named: {text}"
    );
}

#[test]
fn a_combined_conversion_can_be_cut() {
    let d = tempfile::tempdir().unwrap();
    copy_fixtures(d.path());
    let mut args = vec![
        "-q",
        "--concat",
        "time",
        "--variables",
        "temp",
        "--sel",
        "time=2000-01-02T12:00..2000-01-04T06",
    ];
    args.extend_from_slice(&DAYS);
    args.push("cut.tet");
    let o = run(d.path(), "tet-convert", &args);
    assert!(o.status.success(), "{o:?}");
    let f = TetFile::open(&d.path().join("cut.tet")).unwrap();
    let i = f.datasets.iter().position(|x| x.name == "temp").unwrap();
    // Hours 36 ..= 78 of the 120.
    assert_eq!(f.datasets[i].shape, [43, 6, 8]);
    assert!(concat(d.path(), &DAYS, "all.tet").status.success());
    let all = TetFile::open(&d.path().join("all.tet")).unwrap();
    let j = all.datasets.iter().position(|x| x.name == "temp").unwrap();
    let whole = values(&all, j);
    assert_eq!(values(&f, i), whole[36 * 48..79 * 48].to_vec());
    assert!(f.datasets.iter().all(|x| x.name != "precip"));
}
