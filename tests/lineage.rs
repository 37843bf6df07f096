//! tet → tet conversions (re-chunk, re-compress): values unchanged, every footer fact carried
//! over, the history rows kept with one appended per step, and `tet audit` following the lineage
//! back to the original source.

use crate::common;
// Signatures, PROV-JSON and the lineage picture (issue 36).
#[path = "provenance/mod.rs"]
mod provenance;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use tet::format::{Footer, TetFile};

fn bin(name: &str) -> Command {
    let mut c = Command::new(match name {
        "tet" => env!("CARGO_BIN_EXE_tet"),
        _ => env!("CARGO_BIN_EXE_tet-convert"),
    });
    c.env("SOURCE_DATE_EPOCH", "1700000000");
    c
}

fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn convert(input: &Path, output: &Path, extra: &[&str]) -> Output {
    bin("tet-convert")
        .arg(input)
        .arg(output)
        .arg("-q")
        .args(extra)
        .output()
        .unwrap()
}

fn footer(f: &TetFile) -> Footer {
    f.footer().unwrap().unwrap().clone()
}

fn values(f: &TetFile) -> Vec<(String, Vec<u8>)> {
    (0..f.datasets.len())
        .map(|i| (f.datasets[i].name.clone(), f.read_dataset(i).unwrap()))
        .collect()
}

fn digest(p: &Path) -> String {
    tet::meta::digest_input(p).unwrap().0
}

/// One lineage: `source` → a (as converted) → b (re-chunked small, raw) → c (re-compressed).
fn lineage(source: &Path, format: &str) {
    let dir = tempfile::tempdir().unwrap();
    let [a, b, c] = ["a.tet", "b.tet", "c.tet"].map(|n| dir.path().join(n));
    ok(convert(source, &a, &[]));
    ok(convert(&a, &b, &["--chunk-bytes", "64", "--codec", "raw"]));
    ok(convert(&b, &c, &["--codec", "zstd:9", "--jobs", "2"]));
    for p in [&a, &b, &c] {
        ok(bin("tet")
            .args(["verify", "--deep", "-q"])
            .arg(p)
            .output()
            .unwrap());
    }

    let (fa, fb, fc) = (
        TetFile::open(&a).unwrap(),
        TetFile::open(&b).unwrap(),
        TetFile::open(&c).unwrap(),
    );
    // Values and types unchanged at every step.
    assert_eq!(values(&fa), values(&fb), "{}", source.display());
    assert_eq!(values(&fa), values(&fc), "{}", source.display());
    for (da, db) in fa.datasets.iter().zip(&fb.datasets) {
        assert_eq!((da.dtype, &da.shape), (db.dtype, &db.shape));
        // Re-chunked: 64-byte chunks (one innermost row may be larger).
        let row = db.chunk_shape.last().copied().unwrap_or(1) * db.dtype.size() as u64;
        let bytes: u64 = db.chunk_shape.iter().product::<u64>() * db.dtype.size() as u64;
        assert!(
            bytes <= 64 || bytes == row,
            "{}: {:?}",
            db.name,
            db.chunk_shape
        );
    }
    assert!(fb.entries.iter().all(|e| e.codec_id == 0), "--codec raw");

    // Every footer fact carried; the history grows by one row per step.
    let (ha, hb, hc) = (footer(&fa), footer(&fb), footer(&fc));
    for later in [&hb, &hc] {
        assert_eq!(later.datasets, ha.datasets);
        assert_eq!(later.global_attrs, ha.global_attrs);
        assert_eq!(later.skipped, ha.skipped);
        assert_eq!(later.ext, ha.ext);
    }
    assert_eq!(ha.history.len(), 1);
    assert_eq!(hb.history[..1], ha.history[..]);
    assert_eq!(hc.history[..2], hb.history[..]);
    assert_eq!(hc.history.len(), 3);
    assert_eq!(hc.history[0].source, format);
    assert_eq!(hc.history[0].parents, [digest(source)]);
    for (row, parent) in hc.history[1..].iter().zip([&a, &b]) {
        assert_eq!((row.op.as_str(), row.source.as_str()), ("convert", "tet"));
        assert_eq!(row.parents, [digest(parent)]);
    }
    assert_eq!(hc.history[2].params["codec"], "zstd:9");
    if format == "h5" {
        // structure.h5's global 2×3 `matrix` attribute: values flattened, shape recorded.
        assert_eq!(
            hc.ext.to_json_map()["global_facts"],
            serde_json::json!([["attr_shape:matrix", {"u64": [2, 3]}]])
        );
    }
    assert_eq!(hb.history[1].params["chunk"], "64");

    // The audit follows the chain back to the source; an input of no step is a mismatch.
    let o = ok(bin("tet")
        .args(["audit", "--json"])
        .arg(&c)
        .arg("--source")
        .args([source, &a, &b])
        .output()
        .unwrap());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], true);
    let rows: Vec<Value> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["matches_rows"].clone())
        .collect();
    assert_eq!(rows, [[0], [1], [2]].map(|r| Value::from(r.to_vec())));
    let o = bin("tet")
        .arg("audit")
        .arg(&c)
        .arg("--source")
        .arg(&c)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));

    // Re-running a step is up to date; the same step at another --jobs is byte-identical.
    let o = ok(bin("tet-convert")
        .arg(&b)
        .arg(&c)
        .args(["--codec", "zstd:9"])
        .output()
        .unwrap());
    assert!(String::from_utf8_lossy(&o.stderr).contains("up to date"));
    let c1 = dir.path().join("c1.tet");
    ok(convert(&b, &c1, &["--codec", "zstd:9", "--jobs", "1"]));
    assert!(std::fs::read(&c).unwrap() == std::fs::read(&c1).unwrap());
}

fn corpus(rel: &str) -> PathBuf {
    common::shared().join("corpus/public").join(rel)
}

#[test]
fn npy_lineage() {
    // i8 → i16 widening recorded by the first step must survive the later ones.
    lineage(&corpus("npy/dtype_i8.npy"), "npy");
    lineage(&corpus("npy/arrays_compressed.npz"), "npz");
}

#[test]
fn teafile_lineage() {
    lineage(&corpus("teafile/tick_full.tea"), "tea");
}

#[cfg(feature = "netcdf")]
#[test]
fn netcdf_lineage() {
    // Groups, typed attributes, text variables, coordinates, CF time labels.
    lineage(&corpus("netcdf/nc4_groups_types.nc"), "nc");
    lineage(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample/ocean.nc"),
        "nc",
    );
}

#[cfg(feature = "hdf5")]
#[test]
fn hdf5_lineage() {
    lineage(&corpus("hdf5/structure.h5"), "h5");
}

/// A `.tet` written by the reference tools converts too; one with an unreadable footer is refused
/// (its history could not be kept) unless `--skip-unsupported`, which records the loss.
#[test]
fn reference_files_as_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.tet");
    ok(convert(&common::reference("sample.tet"), &out, &[]));
    let f = TetFile::open(&out).unwrap();
    let v: Vec<f32> = f
        .read_dataset(0)
        .unwrap()
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(v, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    let plan = common::reference("plan.tet");
    let o = convert(&plan, &out, &["--force"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("plan.tet") && err.contains("--skip-unsupported"),
        "{err}"
    );
    assert!(
        TetFile::open(&out)
            .unwrap()
            .footer()
            .unwrap()
            .unwrap()
            .history[0]
            .source
            == "tet"
    );

    ok(convert(&plan, &out, &["--force", "--skip-unsupported"]));
    let f = TetFile::open(&out).unwrap();
    let footer = footer(&f);
    assert_eq!(footer.skipped[0].name, "footer");
    assert_eq!(footer.history.len(), 1);
    let src = TetFile::open(&plan).unwrap();
    assert_eq!(values(&f), values(&src));
}
