//! `tet-convert --concat DIM IN… OUT`: five daily netCDF-4 files written by xarray
//! (fixtures/concat, `make_concat.py`) combined along time equal xarray's `combine_by_coords`
//! (`data_vars="minimal"`), whatever order the inputs are given in (the same bytes); another
//! grid, time units that cannot be rebased exactly, overlapping times and a missing variable are
//! refused with one line naming both inputs, and nothing is written; other CF time units are
//! rebased into the first input's (files xarray and netCDF4-python write in the test, several
//! calendars), equal to ncrcat's times and to `open_mfdataset`'s; every input is a parent that
//! `tet audit` re-checks.
//! The same for a month of 31 daily files (fixtures/concat/month, `make_month.py`), compared
//! after `tet export` with `xr.open_mfdataset(days, combine="by_coords", data_vars="minimal")`:
//! more parents and params than a history row holds in the reference's form (the footer's
//! history extension keeps them, every written row stays within the reference limits). Days
//! 1–3 as Zarr stores (`make_zarr.py`) and as `.tet` files combine to the same values; a manifest
//! job combines too. Combined jobs are batch jobs: ledger rows, the up-to-date check, workers.
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
        DType::I32 => b
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        DType::I64 => b
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
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
    // Other time units are rebased into the first input's (day 6's hours since 2000-01-02).
    let mut inputs = DAYS.to_vec();
    inputs.insert(2, "units.nc");
    let o = concat(d.path(), &inputs, "units.tet");
    assert!(o.status.success(), "{o:?}");
    let f = TetFile::open(&d.path().join("units.tet")).unwrap();
    let t = values(
        &f,
        f.datasets.iter().position(|x| x.name == "time").unwrap(),
    );
    assert_eq!(
        (t.len(), t[119], t[120], t[143]),
        (144, 119.0, 144.0, 167.0)
    );
    // Another grid taken from the first input, when asked for.
    let mut inputs = vec!["--concat-take-first"];
    inputs.extend_from_slice(&DAYS[..4]);
    inputs.push("grid.nc");
    let o = concat(d.path(), &inputs, "first.tet");
    assert!(o.status.success(), "{o:?}");
    // Fewer than two inputs is a usage error.
    let o = concat(d.path(), &["day1.nc"], "one.tet");
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

/// `--concat tim` says there is no dimension `tim` (and the closest), not that a variable
/// differs (issue 33); the summary line and the history count every input's bytes.
#[test]
fn a_dimension_that_is_not_there_is_named_and_every_input_counts() {
    let d = tempfile::tempdir().unwrap();
    copy_fixtures(d.path());
    let mut args = vec!["-q", "--concat", "tim"];
    args.extend_from_slice(&DAYS[..2]);
    args.push("t.tet");
    let o = run(d.path(), "tet-convert", &args);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("day1.nc: --concat: no dimension `tim` (closest: time"),
        "{err}"
    );
    assert!(!err.contains("differs"), "{err}");
    assert!(!d.path().join("t.tet").exists());

    let mut args = vec!["--concat", "time", "--json"];
    args.extend_from_slice(&DAYS);
    args.push("all.tet");
    let o = run(d.path(), "tet-convert", &args);
    assert!(o.status.success(), "{o:?}");
    let sizes: Vec<u64> = DAYS
        .iter()
        .map(|n| std::fs::metadata(d.path().join(n)).unwrap().len())
        .collect();
    let total: u64 = sizes.iter().sum();
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["bytes_in"], total, "{report}");
    let f = TetFile::open(&d.path().join("all.tet")).unwrap();
    let footer = f.footer().unwrap().unwrap();
    let row = footer.history.last().unwrap();
    // `input_bytes` is the first input's size (what `tet audit` compares), `input_bytes.K` the
    // others', in the combined order (the days are given in order).
    assert_eq!(row.params["input_bytes"], sizes[0].to_string());
    for (k, s) in sizes.iter().enumerate().skip(1) {
        assert_eq!(
            row.params[&format!("input_bytes.{k}")],
            s.to_string(),
            "{k}"
        );
    }
    // The terminal's summary line says the same total.
    let mut args = vec!["--concat", "time", "--force"];
    args.extend_from_slice(&DAYS);
    args.push("all.tet");
    let o = run(d.path(), "tet-convert", &args);
    let err = String::from_utf8_lossy(&o.stderr);
    let human = |n: u64| tet_cli::batch::text::human_bytes(n);
    assert!(err.contains(&format!("{} in", human(total))), "{err}");
    // `tet audit` shows each input's recorded size.
    let o = run(d.path(), "tet", &["audit", "--json", "all.tet"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let row: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().next().unwrap()).unwrap();
    let recorded: Vec<u64> = row["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["recorded_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(recorded, sizes);
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

// ---------------------------------------------------------------------------------------------
// A month: 31 daily files (fixtures/concat/month, make_month.py), more than one history row
// holds in the reference's form.

fn month_days() -> Vec<String> {
    (1..=31).map(|d| format!("day{d:02}.nc")).collect()
}

/// The month fixtures copied into `dir`.
fn copy_month(dir: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/concat/month");
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "nc") {
            std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
        }
    }
}

/// Every history row of `f`'s footer JSON, as written, is within the reference reader's limits
/// (docs/FORMAT.md): known keys only, at most 16 parents and 32 params, strings 1..=1024 bytes.
fn assert_reference_rows(f: &TetFile) {
    let (json, _) = f.footer_json();
    let rows = json.unwrap()["history"].as_array().unwrap();
    for (i, row) in rows.iter().enumerate() {
        let o = row.as_object().unwrap();
        for k in o.keys() {
            assert!(
                ["op", "source", "at", "parents", "params"].contains(&k.as_str()),
                "row {i}: key {k}"
            );
        }
        let parents = o.get("parents").map_or(0, |p| p.as_array().unwrap().len());
        let params = o.get("params").map_or(0, |p| p.as_object().unwrap().len());
        assert!(
            parents <= 16 && params <= 32,
            "row {i}: {parents}, {params}"
        );
        let strings = o.get("params").into_iter().flat_map(|p| {
            p.as_object()
                .unwrap()
                .iter()
                .flat_map(|(k, v)| [k.clone(), v.as_str().unwrap().to_string()])
        });
        for s in strings {
            assert!((1..=1024).contains(&s.len()), "row {i}: {s}");
        }
    }
}

/// A variable of netCDF-C's dump as f64 values.
fn dump_values(v: &tet_netcdf::dump::VarDump) -> Vec<f64> {
    let tet_netcdf::dump::RawValues::Bytes(b) = &v.values else {
        panic!("{}: not numbers", v.name)
    };
    match v.xtype.as_str() {
        "f32" => b
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        "f64" => b
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect(),
        "i16" => b
            .chunks_exact(2)
            .map(|c| i16::from_ne_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        "i32" => b
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        "i64" => b
            .chunks_exact(8)
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        other => panic!("{}: no {other} in the fixtures", v.name),
    }
}

/// An attribute of netCDF-C's dump as expect.json writes it (text, or numbers as f64).
fn dump_attr(a: &tet_netcdf::dump::AttrDump) -> serde_json::Value {
    let tet_netcdf::dump::RawValues::Bytes(b) = &a.values else {
        panic!("{}: not read", a.name)
    };
    let nums: Vec<f64> = match a.xtype.as_str() {
        "char" => return serde_json::Value::String(String::from_utf8(b.clone()).unwrap()),
        "f32" => b
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        "f64" => b
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect(),
        "i16" => b
            .chunks_exact(2)
            .map(|c| i16::from_ne_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        other => panic!("{}: no {other} attribute in the fixtures", a.name),
    };
    serde_json::json!(nums)
}

fn same_number(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        // null (a NaN in expect.json) or text: equal as JSON values.
        _ => a == b,
    }
}

#[test]
fn a_month_of_daily_files_equals_xarray_open_mfdataset_after_export() {
    let d = tempfile::tempdir().unwrap();
    copy_month(d.path());
    let days = month_days();
    let in_order: Vec<&str> = days.iter().map(String::as_str).collect();
    // A fixed shuffle: day (7k mod 31) + 1.
    let shuffled: Vec<&str> = (0..31).map(|k| in_order[(7 * k) % 31]).collect();
    assert!(concat(d.path(), &shuffled, "a.tet").status.success());
    let o = concat(d.path(), &in_order, "b.tet");
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        std::fs::read(d.path().join("a.tet")).unwrap(),
        std::fs::read(d.path().join("b.tet")).unwrap(),
        "same bytes for any input order"
    );
    let f = TetFile::open(&d.path().join("a.tet")).unwrap();
    assert!(tet::format::verify::verify(&f, tet::format::verify::Depth::Deep).ok());
    assert_reference_rows(&f);

    // Our reader has the whole row: 31 parents in time order, every input's path.
    let row = f.footer().unwrap().unwrap().history.last().unwrap().clone();
    assert_eq!(row.parents.len(), 31);
    assert_eq!(row.params["input"], "day01.nc");
    for (k, day) in days.iter().enumerate() {
        let (digest, _) = tet::meta::digest_input(&d.path().join(day)).unwrap();
        assert_eq!(row.parents[k], digest, "{day}");
        if k > 0 {
            assert_eq!(row.params[&format!("input.{k}")], *day);
        }
    }
    assert!(!row.params.contains_key("tet_ext"));

    // Exported to netCDF-4 and read by netCDF-C: xarray's combined month, raw values and the
    // attributes that decode them.
    let o = run(d.path(), "tet", &["export", "a.tet", "a.nc"]);
    assert!(o.status.success(), "{o:?}");
    let expect: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/concat/month/expect.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let groups = tet_netcdf::dump::dump(&d.path().join("a.nc")).unwrap();
    let root = &groups[0];
    let mut names: Vec<&str> = root.vars.iter().map(|v| v.name.as_str()).collect();
    names.sort();
    let want: Vec<&str> = expect
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, want);
    for v in &root.vars {
        let w = &expect[&v.name];
        let dtype = match v.xtype.as_str() {
            "f32" => "float32",
            "f64" => "float64",
            "i16" => "int16",
            other => other,
        };
        assert_eq!(dtype, w["dtype"], "{}", v.name);
        assert_eq!(v.dims, w["dims"].as_array().unwrap().clone(), "{}", v.name);
        let want: Vec<f64> = serde_json::from_value(w["values"].clone()).unwrap();
        assert_eq!(dump_values(v), want, "{}", v.name);
        for (k, a) in w["attrs"].as_object().unwrap() {
            // xarray reports the NaN fill a float variable gets by default; the export writes
            // no fill for a variable without missing values (the same decoded values).
            if k == "_FillValue" && a[0].is_null() {
                continue;
            }
            let got = v
                .attrs
                .iter()
                .find(|x| &x.name == k)
                .unwrap_or_else(|| panic!("{}: no attribute {k}", v.name));
            let got = dump_attr(got);
            let equal = match (a.as_array(), got.as_array()) {
                (Some(x), Some(y)) => {
                    x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_number(p, q))
                }
                _ => *a == got,
            };
            assert!(equal, "{}: {k} = {got}, xarray {a}", v.name);
        }
    }
    let time = root.dims.iter().find(|x| x.name == "time").unwrap();
    assert_eq!(time.len, 124);
}

#[test]
fn a_month_is_audited_input_by_input() {
    let d = tempfile::tempdir().unwrap();
    copy_month(d.path());
    let days = month_days();
    let inputs: Vec<&str> = days.iter().map(String::as_str).collect();
    assert!(concat(d.path(), &inputs, "m.tet").status.success());
    let o = run(d.path(), "tet", &["audit", "m.tet"]);
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        text.matches("unchanged since conversion").count(),
        31,
        "{text}"
    );
    // A `.tet → .tet` conversion carries the whole row over (and writes it shortened again).
    let o = run(
        d.path(),
        "tet-convert",
        &["-q", "--codec", "zstd:1", "m.tet", "m2.tet"],
    );
    assert!(o.status.success(), "{o:?}");
    let f = TetFile::open(&d.path().join("m2.tet")).unwrap();
    assert_reference_rows(&f);
    let rows = f.footer().unwrap().unwrap().history.clone();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].parents.len(), 31);
    assert_eq!(rows[0].params["input.30"], "day31.nc");
    // Day 23 lies past the 16 parents of the row's reference form: its digest comes from the
    // footer's history extension.
    let touched = d.path().join("day23.nc");
    let mut b = std::fs::read(&touched).unwrap();
    b.push(0);
    std::fs::write(&touched, b).unwrap();
    let o = run(d.path(), "tet", &["audit", "m.tet"]);
    assert!(!o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        text.matches("unchanged since conversion").count(),
        30,
        "{text}"
    );
    let changed: Vec<&str> = text.lines().filter(|l| l.starts_with("CHANGED")).collect();
    assert_eq!(changed.len(), 1, "{text}");
    assert!(changed[0].contains("day23.nc"), "{text}");
}

#[test]
fn a_month_with_a_disagreeing_file_is_refused_naming_both_inputs() {
    let d = tempfile::tempdir().unwrap();
    copy_month(d.path());
    let days = month_days();
    let cases = [
        ("grid.nc", "day01.nc and grid.nc: variable lat differs"),
        ("overlap.nc", "day15.nc and overlap.nc: time values overlap"),
        (
            "missing.nc",
            "day01.nc and missing.nc: variable precip is missing from missing.nc",
        ),
    ];
    for (bad, line) in cases {
        let mut inputs: Vec<&str> = days.iter().map(String::as_str).collect();
        inputs.insert(20, bad);
        let o = concat(d.path(), &inputs, "bad.tet");
        assert_eq!(o.status.code(), Some(1), "{bad}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(line), "{bad}: {err}");
        assert_eq!(err.lines().count(), 1, "{bad}: one line: {err}");
        assert!(!d.path().join("bad.tet").exists(), "{bad}: nothing written");
    }
    // Other time units (hours since 2000-01-02) are rebased into day01's, not refused.
    let mut inputs: Vec<&str> = days.iter().map(String::as_str).collect();
    inputs.insert(20, "units.nc");
    let o = concat(d.path(), &inputs, "units.tet");
    assert!(o.status.success(), "{o:?}");
    let f = TetFile::open(&d.path().join("units.tet")).unwrap();
    let t = values(
        &f,
        f.datasets.iter().position(|x| x.name == "time").unwrap(),
    );
    assert_eq!(t[t.len() - 4..], [768.0, 774.0, 780.0, 786.0]);
}

#[test]
fn a_manifest_job_combines_its_inputs() {
    let d = tempfile::tempdir().unwrap();
    copy_fixtures(d.path());
    std::fs::write(
        d.path().join("jobs.toml"),
        r#"
        [[job]]
        inputs = ["day3.nc", "day1.nc", "day5.nc", "day2.nc", "day4.nc"]
        concat = "time"
        variables = "temp"
        output = "week.tet"
        [[job]]
        input = "day1.nc"
        output = "day1.tet"
        "#,
    )
    .unwrap();
    let o = run(d.path(), "tet-convert", &["-q", "--manifest", "jobs.toml"]);
    assert!(o.status.success(), "{o:?}");
    let f = TetFile::open(&d.path().join("week.tet")).unwrap();
    let row = f.footer().unwrap().unwrap().history.last().unwrap().clone();
    assert_eq!(row.parents.len(), 5);
    assert_eq!(row.params["concat"], "time");
    assert_eq!(row.params["variables"], "temp");
    assert!(row.params["input.4"].ends_with("day5.nc"));
    // The same values as the command line's --concat.
    let mut args = vec!["-q", "--concat", "time", "--variables", "temp"];
    args.extend_from_slice(&DAYS);
    args.push("cli.tet");
    assert!(run(d.path(), "tet-convert", &args).status.success());
    let cli = TetFile::open(&d.path().join("cli.tet")).unwrap();
    let i = f.datasets.iter().position(|x| x.name == "temp").unwrap();
    let j = cli.datasets.iter().position(|x| x.name == "temp").unwrap();
    assert_eq!(f.datasets[i].shape, [120, 6, 8]);
    assert_eq!(values(&f, i), values(&cli, j));
    assert_eq!(
        row.parents,
        cli.footer().unwrap().unwrap().history[0].parents
    );
    // The plain job ran beside it.
    assert!(d.path().join("day1.tet").exists());

    // A combined job that disagrees: one line naming the output and both inputs, no output.
    std::fs::write(
        d.path().join("bad.toml"),
        "[[job]]\ninputs = [\"day1.nc\", \"grid.nc\"]\nconcat = \"time\"\noutput = \"bad.tet\"\n",
    )
    .unwrap();
    let o = run(d.path(), "tet-convert", &["-q", "--manifest", "bad.toml"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("bad.tet") && err.contains("day1.nc and grid.nc: variable lat differs"),
        "{err}"
    );
    assert!(!d.path().join("bad.tet").exists());
}

/// Days 1–3 as Zarr stores written by xarray (fixtures/concat, `make_zarr.py`): combined in
/// any order to the same bytes, the first 72 hours of the netCDF days' combination; a store
/// with another grid is refused naming both.
#[test]
fn zarr_days_combine_like_the_netcdf_ones() {
    let d = tempfile::tempdir().unwrap();
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/concat");
    let store = |n: &str| fx.join(n).display().to_string();
    let (a, b, c) = (store("day1.zarr"), store("day2.zarr"), store("day3.zarr"));
    let o = concat(d.path(), &[&c, &a, &b], "z1.tet");
    assert!(o.status.success(), "{o:?}");
    assert!(concat(d.path(), &[&a, &b, &c], "z2.tet").status.success());
    assert_eq!(
        std::fs::read(d.path().join("z1.tet")).unwrap(),
        std::fs::read(d.path().join("z2.tet")).unwrap()
    );
    let expect: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fx.join("expect.json")).unwrap()).unwrap();
    let f = TetFile::open(&d.path().join("z1.tet")).unwrap();
    let mut names: Vec<&str> = f.datasets.iter().map(|x| x.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["lat", "lon", "orography", "precip", "temp", "time"]);
    for (i, ds) in f.datasets.iter().enumerate() {
        let want: Vec<f64> = serde_json::from_value(expect[&ds.name]["values"].clone()).unwrap();
        // 72 of the 120 hours: the leading part of each time-major variable.
        let got = values(&f, i);
        assert_eq!(got, want[..got.len()].to_vec(), "{}", ds.name);
        if ["time", "temp", "precip"].contains(&ds.name.as_str()) {
            assert_eq!(ds.shape[0], 72, "{}", ds.name);
        }
    }
    let row = f.footer().unwrap().unwrap().history.last().unwrap().clone();
    assert_eq!(row.parents.len(), 3);
    assert_eq!(row.params["input"], a);

    let o = concat(d.path(), &[&a, &store("grid.zarr"), &b], "bad.tet");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("grid.zarr: variable lat differs"), "{err}");
    assert!(!d.path().join("bad.tet").exists());
}

/// Object URLs are combined too (tests/object_store.rs, against an S3 server); one that cannot
/// be read fails the combined job with one line naming it, and nothing is written.
#[test]
fn an_object_url_that_cannot_be_read_fails_the_combination_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    copy_fixtures(d.path());
    let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .current_dir(d.path())
        .args([
            "-q",
            "--concat",
            "time",
            "day1.nc",
            "s3://bucket/day2.nc",
            "w.tet",
        ])
        .args(["--storage-option", "max_retries=0"])
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        // Nothing listens on port 1.
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .env("AWS_ALLOW_HTTP", "true")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("s3://bucket/day2.nc: endpoint unreachable"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(std::fs::read_dir(d.path()).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".tet")));
    assert!(!d.path().join("s3:").exists());
}

/// The `input` rows of a `--report` ledger.
fn ledger_inputs(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["kind"] == "input")
        .collect()
}

/// A combined job is a batch job: a ledger row naming the output and every input; a re-run
/// (inputs in any order) is skipped as up to date without rewriting the output; a touched but
/// unchanged input is re-hashed and still up to date; a changed input or other options rebuild.
#[test]
fn a_combined_job_is_skipped_when_up_to_date_and_rebuilt_when_an_input_changes() {
    let d = tempfile::tempdir().unwrap();
    copy_fixtures(d.path());
    let report = d.path().join("r.jsonl");
    let go = |inputs: &[&str], extra: &[&str]| {
        let mut args = vec!["-q", "--report", "r.jsonl"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--concat", "time"]);
        args.extend_from_slice(inputs);
        args.push("out.tet");
        let o = run(d.path(), "tet-convert", &args);
        assert!(o.status.success(), "{o:?}");
        ledger_inputs(&report).last().unwrap().clone()
    };
    let row = go(&DAYS, &[]);
    assert_eq!(row["status"], "ok", "{row}");
    assert_eq!(row["output"], "out.tet");
    assert_eq!(row["input"], "day1.nc");
    assert_eq!(row["inputs"], serde_json::json!(DAYS));
    let (digest, _) = tet::meta::digest_input(&d.path().join("day1.nc")).unwrap();
    assert_eq!(row["input_digest"], digest);
    let sizes: u64 = DAYS
        .iter()
        .map(|n| std::fs::metadata(d.path().join(n)).unwrap().len())
        .sum();
    assert_eq!(row["bytes_in"], sizes);
    let out = d.path().join("out.tet");
    let bytes = std::fs::read(&out).unwrap();
    let mtime = std::fs::metadata(&out).unwrap().modified().unwrap();

    let shuffled = ["day4.nc", "day2.nc", "day5.nc", "day1.nc", "day3.nc"];
    for inputs in [DAYS, shuffled] {
        let row = go(&inputs, &[]);
        assert_eq!(row["status"], "skipped", "{row}");
        assert_eq!(row["reason"], "up to date");
        assert_eq!(row["bytes_in"], sizes);
    }
    assert_eq!(std::fs::metadata(&out).unwrap().modified().unwrap(), mtime);

    // Touched (new mtime), same bytes: hashed again, still up to date.
    let day3 = d.path().join("day3.nc");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&day3)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(go(&DAYS, &[])["status"], "skipped");

    // Another input in the set, then a changed one: rebuilt, naming it.
    let row = go(&DAYS[..4], &[]);
    assert_eq!(row["status"], "ok", "{row}");
    assert_eq!(row["reason"], "rebuilt: the inputs changed");
    assert_eq!(go(&DAYS, &[])["status"], "ok");
    let mut b = std::fs::read(&day3).unwrap();
    b.extend_from_slice(&[0; 8]);
    std::fs::write(&day3, b).unwrap();
    let row = go(&DAYS, &[]);
    assert_eq!(row["status"], "ok", "{row}");
    assert_eq!(row["reason"], "rebuilt: day3.nc changed");
    assert_eq!(std::fs::read(&out).unwrap().len(), bytes.len());
    let f = TetFile::open(&out).unwrap();
    let parents = f
        .footer()
        .unwrap()
        .unwrap()
        .history
        .last()
        .unwrap()
        .parents
        .clone();
    let (d3, _) = tet::meta::digest_input(&day3).unwrap();
    assert_eq!(parents[2], d3);
    assert_eq!(go(&DAYS, &[])["status"], "skipped");
    // Other options: rebuilt.
    let row = go(&DAYS, &["--variables", "temp"]);
    assert_eq!(row["reason"], "rebuilt: the options changed", "{row}");
    assert_eq!(go(&DAYS, &["--variables", "temp"])["status"], "skipped");
    // --force rebuilds.
    assert_eq!(
        go(&DAYS, &["--force", "--variables", "temp"])["status"],
        "ok"
    );
}

/// A combined job that fails is one failed ledger row naming the output and every input; one
/// whose input crashes its library (fixtures/crash, when this libhdf5 still dies on it) costs
/// that row in a worker process, and the manifest's other job is converted beside it.
#[test]
fn a_failed_combined_job_is_one_ledger_row() {
    let d = tempfile::tempdir().unwrap();
    copy_fixtures(d.path());
    let crash = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/crash");
    for b in ["segv.nc", "abort.nc"] {
        std::fs::copy(crash.join(b), d.path().join(b)).unwrap();
    }
    let o = run(
        d.path(),
        "tet-convert",
        &[
            "--report", "r.jsonl", "--concat", "time", "day1.nc", "grid.nc", "bad.tet",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("bad.tet: day1.nc and grid.nc: variable lat differs"),
        "{err}"
    );
    let rows = ledger_inputs(&d.path().join("r.jsonl"));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "failed");
    assert_eq!(rows[0]["output"], "bad.tet");
    assert_eq!(rows[0]["inputs"], serde_json::json!(["day1.nc", "grid.nc"]));
    assert!(rows[0]["reason"]
        .as_str()
        .unwrap()
        .contains("day1.nc and grid.nc: variable lat differs"));
    assert!(!d.path().join("bad.tet").exists());

    std::fs::write(
        d.path().join("jobs.toml"),
        r#"
        [[job]]
        inputs = ["day1.nc", "segv.nc"]
        concat = "time"
        output = "segv.tet"
        [[job]]
        inputs = ["abort.nc", "day2.nc"]
        concat = "time"
        output = "abort.tet"
        [[job]]
        inputs = ["day1.nc", "day2.nc"]
        concat = "time"
        output = "two.tet"
        "#,
    )
    .unwrap();
    let o = run(
        d.path(),
        "tet-convert",
        &[
            "-q",
            "--keep-going",
            "--timeout",
            "20",
            "--report",
            "m.jsonl",
            "--manifest",
            "jobs.toml",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let rows = ledger_inputs(&d.path().join("m.jsonl"));
    assert_eq!(rows.len(), 3, "{rows:?}");
    let by_output = |n: &str| {
        rows.iter()
            .find(|r| r["output"].as_str().unwrap().ends_with(n))
            .unwrap()
    };
    for (out, inputs) in [
        ("segv.tet", ["day1.nc", "segv.nc"]),
        ("abort.tet", ["abort.nc", "day2.nc"]),
    ] {
        let row = by_output(out);
        assert_eq!(row["status"], "failed", "{row}");
        assert!(row["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(inputs)
            .all(|(a, b)| a.as_str().unwrap().ends_with(b)));
        let reason = row["reason"].as_str().unwrap();
        eprintln!("{out}: {reason}");
        assert!(!reason.is_empty());
        assert!(!d.path().join(out).exists());
    }
    assert_eq!(by_output("two.tet")["status"], "ok");
    assert!(TetFile::open(&d.path().join("two.tet")).is_ok());
}

/// `.tet` inputs combine like the others: three daily `.tet` files (converted from the month's
/// netCDF days) given in any order hold, combined, the values, dims, attributes and labels of
/// the netCDF days combined; the history keeps each input's own row (its ancestry, as a single
/// `.tet` input's is kept) and names the three `.tet` files as the parents of the last row.
/// A `.tet` file among other formats is refused, naming both.
#[test]
fn tet_days_combine_like_the_netcdf_ones() {
    let d = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/concat/month");
    let days = ["day01", "day02", "day03"];
    for n in days {
        std::fs::copy(
            src.join(format!("{n}.nc")),
            d.path().join(format!("{n}.nc")),
        )
        .unwrap();
        let o = run(
            d.path(),
            "tet-convert",
            &["-q", &format!("{n}.nc"), &format!("{n}.tet")],
        );
        assert!(o.status.success(), "{o:?}");
    }
    let nc: Vec<String> = days.iter().map(|n| format!("{n}.nc")).collect();
    let tet: Vec<String> = days.iter().map(|n| format!("{n}.tet")).collect();
    let nc_refs: Vec<&str> = nc.iter().map(String::as_str).collect();
    assert!(concat(d.path(), &nc_refs, "nc.tet").status.success());
    let shuffled = [tet[2].as_str(), tet[0].as_str(), tet[1].as_str()];
    let o = concat(d.path(), &shuffled, "tet.tet");
    assert!(o.status.success(), "{o:?}");

    let a = TetFile::open(&d.path().join("nc.tet")).unwrap();
    let b = TetFile::open(&d.path().join("tet.tet")).unwrap();
    let (fa, fb) = (a.footer().unwrap().unwrap(), b.footer().unwrap().unwrap());
    assert_eq!(a.datasets.len(), b.datasets.len());
    for (i, ds) in a.datasets.iter().enumerate() {
        let j = b.datasets.iter().position(|x| x.name == ds.name).unwrap();
        assert_eq!(b.datasets[j].shape, ds.shape, "{}", ds.name);
        assert_eq!(b.datasets[j].dtype, ds.dtype, "{}", ds.name);
        let (va, vb) = (values(&a, i), values(&b, j));
        assert_eq!(va.len(), vb.len(), "{}", ds.name);
        assert!(
            va.iter()
                .zip(&vb)
                .all(|(x, y)| x == y || (x.is_nan() && y.is_nan())),
            "{}",
            ds.name
        );
        let (ma, mb) = (&fa.datasets[&ds.name], &fb.datasets[&ds.name]);
        assert_eq!(ma.dim_names, mb.dim_names, "{}", ds.name);
        assert_eq!(ma.coords, mb.coords, "{}", ds.name);
        // Debug text: NaN fill values compare equal.
        let text = |m: &tet::format::footer::DatasetMeta| format!("{:?}", m.attrs);
        assert_eq!(text(ma), text(mb), "{}", ds.name);
    }
    assert_eq!(a.datasets[0].shape[0], 12);
    assert_eq!(fa.global_attrs, fb.global_attrs);

    let digest = |n: &str| tet::meta::digest_input(&d.path().join(n)).unwrap().0;
    assert_eq!(fb.history.len(), 4);
    for (k, n) in days.iter().enumerate() {
        assert_eq!(fb.history[k].parents, [digest(&format!("{n}.nc"))]);
    }
    let last = &fb.history[3];
    assert_eq!(last.source, "tet");
    assert_eq!(
        last.parents,
        tet.iter().map(|n| digest(n)).collect::<Vec<_>>()
    );
    assert_eq!(last.params["input"], "day01.tet");
    assert_eq!(last.params["input.2"], "day03.tet");
    let o = run(d.path(), "tet", &["audit", "tet.tet"]);
    assert!(o.status.success(), "{o:?}");

    let o = concat(d.path(), &["day01.tet", "day02.nc"], "mixed.tet");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("day01.tet and day02.nc: .tet inputs are combined with .tet inputs only"),
        "{err}"
    );
    assert!(!d.path().join("mixed.tet").exists());
}

/// A month of inputs: the re-run is skipped, and where the file system keeps user extended
/// attributes the output holds a stat stamp for each of its 31 parents (small enough for ext4's
/// 4 KiB), so the re-run reads no input.
#[test]
fn a_month_rerun_is_skipped_on_its_stamps() {
    let d = tempfile::tempdir().unwrap();
    copy_month(d.path());
    let days = month_days();
    let mut args = vec!["-q", "--report", "r.jsonl", "--concat", "time"];
    args.extend(days.iter().map(String::as_str));
    args.push("month.tet");
    for want in ["ok", "skipped"] {
        let o = run(d.path(), "tet-convert", &args);
        assert!(o.status.success(), "{o:?}");
        let rows = ledger_inputs(&d.path().join("r.jsonl"));
        assert_eq!(rows.last().unwrap()["status"], want);
        assert_eq!(rows.last().unwrap()["inputs"].as_array().unwrap().len(), 31);
    }
    let probe = d.path().join("probe");
    std::fs::write(&probe, b"").unwrap();
    if xattr::set(&probe, "user.probe", b"1").is_err() {
        eprintln!("note: no user extended attributes here; the stamps are not checked");
        return;
    }
    let v = xattr::get(d.path().join("month.tet"), "user.tet-convert.sources")
        .unwrap()
        .expect("the output is stamped");
    let j: serde_json::Value = serde_json::from_slice(&v).unwrap();
    assert_eq!(j["stats"].as_array().unwrap().len(), 31, "{j}");
}

/// The venv's Python (xarray, netCDF4, the tet engine), or `None` with the reason printed.
fn venv_python() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/.venv/bin/python");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: no python/.venv (made by .ci/python-setup)");
        None
    }
}

/// Writes daily files, each with its own time units: `xr` (xarray's default encoding, 3 days
/// of hours; time a record dimension, as ncrcat needs), `noleap` and `360_day` (netCDF4-python, days since each file's first day, the
/// noleap days across the end of February), `months` and `third0`/`third1` (56 hours are no
/// exact f64 number of days) to be refused.
const MAKE_DAILY: &str = r#"
import sys, numpy as np, pandas as pd, xarray as xr, netCDF4
for k, day in enumerate(["2024-02-28", "2024-02-29", "2024-03-01"]):
    t = pd.date_range(day, periods=24, freq="h")
    ds = xr.Dataset({"tas": (("time", "x"), np.arange(48.0).reshape(24, 2) + 100 * k)},
                    coords={"time": t, "x": [1.0, 2.0]})
    ds.to_netcdf(f"xr{k}.nc", unlimited_dims=["time"])  # a record dimension for ncrcat
def cf(name, cal, units, vals, dtype="f8"):
    with netCDF4.Dataset(name, "w") as d:
        d.createDimension("time", None)
        d.createDimension("x", 2)
        t = d.createVariable("time", dtype, ("time",))
        t.units = units
        t.calendar = cal
        t[:] = vals
        v = d.createVariable("tas", "f4", ("time", "x"))
        v[:] = np.arange(2.0 * len(vals)).reshape(-1, 2)
for k, day in enumerate(["2023-02-27", "2023-02-28", "2023-03-01"]):
    cf(f"noleap{k}.nc", "noleap", f"hours since {day} 00:00:00", np.arange(0, 24, 6), "i4")
for k, day in enumerate(["2000-02-29", "2000-02-30", "2000-03-01"]):
    cf(f"d360_{k}.nc", "360_day", f"days since {day}", np.arange(4) / 4)
cf("months.nc", "standard", "months since 2024-03-01", [1.0, 2.0])
cf("third0.nc", "standard", "days since 2024-01-01", [0.0, 1.0])
cf("third1.nc", "standard", "hours since 2024-01-01", [56.0, 64.0])
"#;

/// xarray's `open_mfdataset` times of the files beside the tet engine's of the combination:
/// prints `ok` when they are the same instants.
const COMPARE_MF: &str = r#"
import sys, numpy as np, xarray as xr
out, ins = sys.argv[1], sys.argv[2:]
mf = xr.open_mfdataset(ins, combine="by_coords", data_vars="minimal").time.values
ours = xr.open_dataset(out, engine="tet").time.values
assert len(mf) == len(ours) and all(a == b for a, b in zip(mf, ours)), (mf, ours)
raw = xr.open_dataset(out, engine="tet", decode_times=False).time
print("ok", raw.attrs["units"], len(ours))
"#;

/// `ncrcat`'s combined time values (rebased into the first file's units), or `None` when
/// ncrcat is not installed.
fn ncrcat_times(dir: &Path, inputs: &[&str]) -> Option<Vec<f64>> {
    let mut args: Vec<&str> = vec!["-O", "-h"];
    args.extend_from_slice(inputs);
    args.push("ncrcat.nc");
    let Ok(o) = Command::new("ncrcat").current_dir(dir).args(&args).output() else {
        eprintln!("skipped the ncrcat comparison: ncrcat is not installed (nco)");
        return None;
    };
    assert!(o.status.success(), "ncrcat: {o:?}");
    let groups = tet_netcdf::dump::dump(&dir.join("ncrcat.nc")).unwrap();
    let v = groups[0].vars.iter().find(|v| v.name == "time").unwrap();
    Some(dump_values(v))
}

#[test]
fn daily_files_with_their_own_time_units_are_rebased_like_ncrcat_and_open_mfdataset() {
    let Some(py) = venv_python() else { return };
    let d = tempfile::tempdir().unwrap();
    let o = Command::new(&py)
        .current_dir(d.path())
        .args(["-c", MAKE_DAILY])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let sets: [(&str, [&str; 3]); 3] = [
        ("xr", ["xr0.nc", "xr1.nc", "xr2.nc"]),
        ("noleap", ["noleap0.nc", "noleap1.nc", "noleap2.nc"]),
        ("d360", ["d360_0.nc", "d360_1.nc", "d360_2.nc"]),
    ];
    for (name, ins) in sets {
        let out = format!("{name}.tet");
        let o = concat(d.path(), &ins, &out);
        assert!(o.status.success(), "{name}: {o:?}");
        let f = TetFile::open(&d.path().join(&out)).unwrap();
        let i = f.datasets.iter().position(|x| x.name == "time").unwrap();
        let ours = values(&f, i);
        if let Some(theirs) = ncrcat_times(d.path(), &ins) {
            assert_eq!(ours, theirs, "{name}: ncrcat's rebased times");
        }
        // Strictly increasing across the files: every file rebased.
        assert!(ours.windows(2).all(|w| w[0] < w[1]), "{name}: {ours:?}");
        let mut args = vec!["-c", COMPARE_MF, out.as_str()];
        args.extend_from_slice(&ins);
        let o = Command::new(&py)
            .current_dir(d.path())
            .args(&args)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && said.starts_with("ok"),
            "{name}: {o:?}"
        );
    }
    // xarray's hours: 3 days, 0..71 since the first file's reference date.
    let f = TetFile::open(&d.path().join("xr.tet")).unwrap();
    let t = values(
        &f,
        f.datasets.iter().position(|x| x.name == "time").unwrap(),
    );
    assert_eq!(t, (0..72).map(f64::from).collect::<Vec<_>>());

    // Months have no fixed length; 56 hours are no exact f64 number of days: refused in one
    // line naming both units, nothing written.
    for (ins, units) in [
        (["xr0.nc", "months.nc"], "months since 2024-03-01"),
        (["third0.nc", "third1.nc"], "hours since 2024-01-01"),
    ] {
        let o = concat(d.path(), &ins, "bad.tet");
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("units differ") && err.contains(units) && !err.contains("overlap"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(!d.path().join("bad.tet").exists());
    }
}
