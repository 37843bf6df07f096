//! `tet audit --reproduce` over everything (issue 36, acceptance 1): the default conversion of
//! every corpus input (../shared/corpus/public, as its manifest lists them, the ones expected to
//! fail left out) and every input among the test fixtures (tests/fixtures), made by one
//! `--out-dir` batch each; a 31-day combine; and a three-step lineage (a netCDF file converted,
//! a selection of it, then combined with another selection) — each `reproduced: byte for byte`,
//! checked step by step.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{common, s, tet_in};

/// Every `.tet` file under `dir`, sorted.
fn tet_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "tet") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `tet audit --reproduce --json` of `files` (in `dir`): each file's report, asserted
/// reproduced byte for byte at every step; returns the number of steps.
fn all_reproduced(dir: &Path, files: &[PathBuf]) -> usize {
    let mut args = vec!["audit", "--reproduce", "--json"];
    args.extend(files.iter().map(|f| s(f)));
    let o = tet_in(dir, "tet", &args);
    let text = String::from_utf8_lossy(&o.stdout);
    let reports: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let bad: Vec<&Value> = reports
        .iter()
        .filter(|r| {
            r["verdict"] != "reproduced"
                || r["steps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|st| st["detail"] != "reproduced: byte for byte")
        })
        .collect();
    assert!(bad.is_empty(), "not reproduced byte for byte: {bad:#?}");
    assert_eq!(reports.len(), files.len(), "{text}");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    reports
        .iter()
        .map(|r| r["steps"].as_array().unwrap().len())
        .sum()
}

/// The corpus files its manifest expects to convert.
fn corpus_inputs() -> Vec<PathBuf> {
    let root = common::shared().join("corpus/public");
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("manifest.json")).unwrap())
            .unwrap();
    m["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["expect_error"].is_null())
        .filter(|f| {
            // Formats whose importer this build lacks are left out.
            let format = f["format"].as_str().unwrap();
            (format != "netcdf" || cfg!(feature = "netcdf"))
                && (format != "hdf5" || cfg!(feature = "hdf5"))
        })
        .map(|f| root.join(f["file"].as_str().unwrap()))
        .collect()
}

#[test]
fn reproduce_every_corpus_and_fixture_output() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let inputs = corpus_inputs();
    assert!(inputs.len() >= 30, "{inputs:?}");
    let mut args = vec!["-q", "--out-dir", "corpus"];
    args.extend(inputs.iter().map(|p| s(p)));
    common::ok(&tet_in(dir, "tet-convert", &args), "the corpus");
    let corpus = tet_files(&dir.join("corpus"));
    assert_eq!(corpus.len(), inputs.len());
    assert_eq!(all_reproduced(dir, &corpus), corpus.len());

    // Every fixture input (the folder: what the batch runner finds there; --keep-going past
    // the inputs made to fail, e.g. the CDL text and a combine's deliberately missing day).
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let o = tet_in(
        dir,
        "tet-convert",
        &["-q", "--keep-going", "--out-dir", "fixtures", s(&fixtures)],
    );
    let made = tet_files(&dir.join("fixtures"));
    if cfg!(feature = "netcdf") {
        // day1-5, grid, missing, overlap, units, 31 days and the month's 4 more, select, year,
        // 4 Zarr stores, the month's orography `.tet`.
        assert!(made.len() >= 45, "{} made: {o:?}", made.len());
    }
    assert!(!made.is_empty(), "{o:?}");
    // month_orography.tet is a checked-in `.tet`: its own step (re-made from the 31 days it
    // records) differs, because it was written before the history rows recorded each combined
    // input's size (`input_bytes.K`), under the same version number. The copy of it made here
    // is re-made after that step, byte for byte.
    let (old, made): (Vec<PathBuf>, Vec<PathBuf>) = made
        .into_iter()
        .partition(|p| p.ends_with("concat/month_orography.tet"));
    assert_eq!(all_reproduced(dir, &made), made.len());
    if let [old] = old.as_slice() {
        let o = tet_in(dir, "tet", &["audit", "--reproduce", "--json", s(old)]);
        assert_eq!(o.status.code(), Some(1));
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        let steps = r["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2, "{r:#}");
        assert_eq!(steps[0]["verdict"], "differs");
        assert!(
            steps[0]["file"]
                .as_str()
                .unwrap()
                .ends_with("tests/fixtures/concat/month_orography.tet"),
            "{r:#}"
        );
        assert!(
            steps[0]["detail"]
                .as_str()
                .unwrap()
                .starts_with("differs first at footer key history[0].params."),
            "{r:#}"
        );
        assert_eq!(steps[1]["detail"], "reproduced: byte for byte", "{r:#}");
    }
}

#[cfg(feature = "netcdf")]
#[test]
fn reproduce_a_month_combined_and_a_three_step_lineage() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let days: Vec<String> = (1..=31).map(|n| format!("day{n:02}.nc")).collect();
    for day in &days {
        std::fs::copy(fixtures.join("concat/month").join(day), dir.join(day)).unwrap();
    }
    let mut args = vec!["-q", "--concat", "time"];
    args.extend(days.iter().map(String::as_str));
    args.push("month.tet");
    common::ok(&tet_in(dir, "tet-convert", &args), "the month");
    let f = tet::format::TetFile::open(&dir.join("month.tet")).unwrap();
    let row = f.footer().unwrap().unwrap().history.last().unwrap().clone();
    assert_eq!(row.parents.len(), 31);
    assert_eq!(all_reproduced(dir, &[dir.join("month.tet")]), 1);

    // convert → select → combine: three steps, each re-made from its parent.
    let sel = fixtures.join("select/select.nc");
    std::fs::copy(&sel, dir.join("select.nc")).unwrap();
    for step in [
        vec!["select.nc", "all.tet"],
        vec!["--isel", "time=0:2", "all.tet", "first.tet"],
        vec!["--isel", "time=2:4", "all.tet", "second.tet"],
        vec!["--concat", "time", "first.tet", "second.tet", "joined.tet"],
    ] {
        let mut a = vec!["-q"];
        a.extend(step);
        common::ok(&tet_in(dir, "tet-convert", &a), "a step");
    }
    // Each `.tet` parent re-made first, once: all.tet, first.tet, second.tet, then the combine.
    assert_eq!(all_reproduced(dir, &[dir.join("joined.tet")]), 4);
    let o = tet_in(dir, "tet", &["audit", "--reproduce", "joined.tet"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let made: Vec<&str> = text
        .lines()
        .map(|l| l.split(": ").next().unwrap())
        .collect();
    let step = |f: &str| format!("{} (step of joined.tet)", dir.join(f).display());
    assert_eq!(
        made,
        [
            step("all.tet"),
            step("first.tet"),
            step("second.tet"),
            "joined.tet".to_string()
        ],
        "{text}"
    );
    assert!(
        text.lines()
            .all(|l| l.ends_with(": reproduced: byte for byte")),
        "{text}"
    );
}
