//! The netCDF round trip over every CDL case the repository holds (issue 23's acceptance):
//! `fixtures/**/*.cdl` and the cases of `tests/fixtures/cdl/` (groups: empty, attribute-only,
//! nested, ancestor and unlimited dimensions; compounds, nested and with array fields; enums;
//! vlens of numbers and of enums; opaque types; `char` and `string` variables; fill values;
//! attributes of every netCDF type). Each is written to netCDF-4 by `ncgen`, converted to
//! `.tet`, exported back to netCDF-4 by `tet export`, and the two files are compared:
//!
//! - through netCDF-C (`tet_netcdf::dump`: every group's dimensions — name, length,
//!   unlimited —, every variable's netCDF type (user types by class, name and definition),
//!   dimensions, attributes and the bytes of every value, vlens element by element);
//! - with xarray (`decode_cf=False`, `tests/fixtures/cdl/compare_xarray.py`), group by group:
//!   every variable it reads (name, dims, dtype, values, attributes), dims and group
//!   attributes — when `python/.venv` has xarray (`.ci/python-setup`), else this part says it
//!   is skipped.
//!
//! The one rule: the values of a variable the CDL declares without fill (`_NoFill = "true"`)
//! and gives no data are undefined (netCDF-C returns whatever storage holds), so they are not
//! compared; everything else about such a variable is. The root `history` attribute is not
//! compared either: the export appends the conversion's rows to it, nor the padding bytes of
//! compound values (not data: netCDF-C writes what memory held there). Cases still known to
//! differ are listed in `KNOWN` with the reason, and checked to still differ.
#![cfg(feature = "netcdf")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use tet::export::{self, ExportOptions, Target};
use tet::pipeline::ConvertOptions;
use tet_netcdf::dump::{
    dump, zero_compound_padding, AttrDump, DimDump, GroupDump, RawValues, VarDump,
};

use crate::common::convert;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.cdl` under `dir`, recursively, sorted.
fn cdl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            cdl_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "cdl") {
            out.push(p);
        }
    }
}

/// The variables (as `group/name` paths, as CDL names them relative to their group: the
/// short name) declared `_NoFill = "true"` and given no data in `cdl`.
fn undefined_values(cdl: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in cdl.lines() {
        let l = line.trim();
        if let Some((var, rest)) = l.split_once(":_NoFill") {
            let given = cdl
                .lines()
                .any(|d| d.trim_start().starts_with(&format!("{var} =")));
            if rest.contains("\"true\"") && !given {
                out.insert(var.trim().to_string());
            }
        }
    }
    out
}

fn sorted_dims(g: &GroupDump) -> Vec<&DimDump> {
    let mut d: Vec<&DimDump> = g.dims.iter().collect();
    d.sort_by(|a, b| a.name.cmp(&b.name));
    d
}

fn attrs(list: &[AttrDump], root: bool) -> Vec<&AttrDump> {
    list.iter()
        .filter(|a| !(root && a.name == "history"))
        .collect()
}

/// Differences between the netCDF-C views of `src` and `out` (empty: identical).
fn differences(src: &[GroupDump], out: &[GroupDump], undefined: &BTreeSet<String>) -> Vec<String> {
    let by_path = |g: &'_ [GroupDump]| -> BTreeMap<String, GroupDump> {
        g.iter().map(|g| (g.path.clone(), g.clone())).collect()
    };
    let (s, o) = (by_path(src), by_path(out));
    let mut diffs = Vec::new();
    if s.keys().collect::<Vec<_>>() != o.keys().collect::<Vec<_>>() {
        diffs.push(format!("groups {:?} != {:?}", s.keys(), o.keys()));
    }
    for (path, sg) in &s {
        let Some(og) = o.get(path) else { continue };
        if sorted_dims(sg) != sorted_dims(og) {
            diffs.push(format!("/{path}: dims {:?} != {:?}", sg.dims, og.dims));
        }
        if attrs(&sg.attrs, path.is_empty()) != attrs(&og.attrs, path.is_empty()) {
            diffs.push(format!(
                "/{path}: attributes {:?} != {:?}",
                sg.attrs, og.attrs
            ));
        }
        let vars = |g: &GroupDump| -> BTreeMap<String, VarDump> {
            g.vars.iter().map(|v| (v.name.clone(), v.clone())).collect()
        };
        let (sv, ov) = (vars(sg), vars(og));
        if sv.keys().collect::<Vec<_>>() != ov.keys().collect::<Vec<_>>() {
            diffs.push(format!(
                "/{path}: variables {:?} != {:?}",
                sv.keys(),
                ov.keys()
            ));
        }
        for (name, a) in &sv {
            let Some(b) = ov.get(name) else { continue };
            let (mut a, mut b) = (a.clone(), b.clone());
            if undefined.contains(name) {
                a.values = RawValues::NotRead;
                b.values = RawValues::NotRead;
            }
            if a != b {
                diffs.push(format!("/{path}/{name}: {a:?} != {b:?}"));
            }
        }
    }
    diffs
}

/// Cases known to differ, and why (each still checked to differ).
const KNOWN: &[(&str, &str)] = &[];

/// The venv's Python when it has xarray and netCDF4.
fn python() -> Option<PathBuf> {
    let p = root().join("python/.venv/bin/python");
    let ok = Command::new(&p)
        .args(["-c", "import xarray, netCDF4"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(p)
}

#[test]
fn every_cdl_case_survives_the_netcdf4_round_trip() {
    let mut cases = Vec::new();
    cdl_files(&root().join("fixtures"), &mut cases);
    cdl_files(&root().join("tests/fixtures/cdl"), &mut cases);
    cases.sort();
    assert!(cases.len() >= 7, "CDL cases found: {cases:?}");
    let py = python();
    if py.is_none() {
        // CI prepares the venv before the tests (.ci/test), so there a missing xarray is a
        // broken setup, not a reason to compare less.
        assert!(
            std::env::var_os("CI").is_none(),
            "python/.venv has no xarray and netCDF4 under CI: run .ci/python-setup first"
        );
        eprintln!("python/.venv has no xarray (run .ci/python-setup): xarray comparison skipped");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut failures = Vec::new();
    for (k, cdl) in cases.iter().enumerate() {
        let what = cdl
            .strip_prefix(root())
            .unwrap_or(cdl)
            .display()
            .to_string();
        let src = tmp.path().join(format!("{k}.nc"));
        let status = Command::new("ncgen")
            .args(["-k", "nc4", "-o"])
            .arg(&src)
            .arg(cdl)
            .status()
            .expect("ncgen (netcdf-bin, .ci/setup) runs");
        assert!(status.success(), "{what}: ncgen fails");
        let tet = tmp.path().join(format!("{k}.tet"));
        convert(&src, &tet, &ConvertOptions::default())
            .unwrap_or_else(|e| panic!("{what}: convert: {e}"));
        let out = tmp.path().join(format!("{k}.back.nc"));
        let opts = ExportOptions {
            target: Some(Target::NETCDF),
            ..ExportOptions::default()
        };
        let report =
            export::export(&tet, &out, &opts).unwrap_or_else(|e| panic!("{what}: export: {e}"));
        let text = std::fs::read_to_string(cdl).expect("read the CDL");
        let undefined = undefined_values(&text);
        let (mut a, mut b) = (dump(&src).expect("dump"), dump(&out).expect("dump"));
        if what.ends_with("user_types.cdl") {
            // The compound with vlen members is rebuilt, without a warning, and its records
            // (sequences included) are read for the comparison below.
            let compound = |w: &&String| w.contains("compound");
            let left: Vec<_> = report.warnings.iter().filter(compound).collect();
            assert!(left.is_empty(), "{what}: {left:?}");
            let tagged = a[0].vars.iter().find(|v| v.name == "tagged");
            assert!(
                matches!(tagged.map(|v| &v.values), Some(RawValues::Ragged(r)) if r.len() == 3),
                "{what}: `tagged` not read: {tagged:?}"
            );
        }
        zero_compound_padding(&mut a);
        zero_compound_padding(&mut b);
        let diffs = differences(&a, &b, &undefined);
        if let Some((_, why)) = KNOWN.iter().find(|(f, _)| what.ends_with(f)) {
            // Still different: when this fails, the case is fixed: take it off KNOWN.
            assert!(
                !diffs.is_empty(),
                "{what} is identical now ({why}): take it off KNOWN"
            );
            eprintln!("{what}: known difference ({why})");
            continue;
        }
        for d in diffs {
            failures.push(format!("{what} (netCDF-C): {d}"));
        }
        if let Some(py) = &py {
            let o = Command::new(py)
                .arg(root().join("tests/fixtures/cdl/compare_xarray.py"))
                .arg(&src)
                .arg(&out)
                .args(&undefined)
                .output()
                .expect("python runs");
            if !o.status.success() {
                failures.push(format!(
                    "{what} (xarray): {}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_comparison_sees_differences() {
    // Two different cases differ, in both comparisons: the test above can fail.
    let tmp = tempfile::tempdir().expect("tempdir");
    let mk = |name: &str| {
        let out = tmp.path().join(format!("{name}.nc"));
        let cdl = root().join(format!("tests/fixtures/cdl/{name}.cdl"));
        let ok = Command::new("ncgen")
            .args(["-k", "nc4", "-o"])
            .arg(&out)
            .arg(&cdl)
            .status()
            .expect("ncgen");
        assert!(ok.success());
        out
    };
    let (a, b) = (mk("groups"), mk("user_types"));
    let none = BTreeSet::new();
    let diffs = differences(&dump(&a).expect("dump"), &dump(&b).expect("dump"), &none);
    assert!(diffs.len() >= 3, "{diffs:?}");
    // The undefined-values rule: `nofill` is declared without fill and given no data.
    let text =
        std::fs::read_to_string(root().join("tests/fixtures/cdl/attributes.cdl")).expect("read");
    assert_eq!(
        undefined_values(&text).into_iter().collect::<Vec<_>>(),
        ["nofill"]
    );
    if let Some(py) = python() {
        let o = Command::new(py)
            .arg(root().join("tests/fixtures/cdl/compare_xarray.py"))
            .arg(&a)
            .arg(&b)
            .output()
            .expect("python");
        assert!(!o.status.success() && !o.stdout.is_empty());
    }
}
