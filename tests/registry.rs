//! The driver registry is the one list of formats (issue 21): every driver shows in
//! `tet-convert --formats`, is identified from its sample, has fuzz seeds the registry-driven fuzz
//! target uses, and its extensions are what `.ci/output-digests.sh` converts; every exporter is
//! reachable through `tet export --to` and by its extensions. A place forgotten when a format is
//! added fails here.

use std::path::{Path, PathBuf};
use std::process::Command;

use tet::export::Target;
use tet::registry::{formats, identify};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn formats_json() -> Vec<serde_json::Value> {
    let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .args(["--formats", "--json"])
        .output()
        .expect("tet-convert runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice::<serde_json::Value>(&o.stdout)
        .expect("--formats --json prints JSON")
        .as_array()
        .expect("an array")
        .clone()
}

#[test]
fn every_driver_shows_in_formats() {
    let listed = formats_json();
    let all = formats();
    assert_eq!(listed.len(), all.len());
    for (f, row) in all.iter().zip(&listed) {
        assert_eq!(row["id"], f.id);
        assert_eq!(row["name"], f.name);
        let exts: Vec<&str> = row["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert_eq!(exts, f.extensions, "{}", f.id);
        assert_eq!(row["compiled"], f.importer.is_some(), "{}", f.id);
        assert_eq!(
            row["export"].as_str(),
            f.exporter.map(|e| e.name()),
            "{}",
            f.id
        );
    }
    // The table names every id too.
    let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .arg("--formats")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    for f in &all {
        assert!(
            table
                .lines()
                .any(|l| l.split_whitespace().next() == Some(f.id)),
            "{} missing from --formats:\n{table}",
            f.id
        );
    }
}

#[test]
fn every_driver_is_identified_from_its_sample() {
    let mut checked = 0;
    for f in formats() {
        let sample = root().join(f.sample);
        assert!(sample.exists(), "{}: sample {} missing", f.id, f.sample);
        let Some(importer) = f.importer else {
            continue; // not compiled into this build
        };
        let got = identify(&sample).unwrap_or_else(|e| panic!("{}: {e}", f.sample));
        assert_eq!(
            got.id(),
            importer.id(),
            "{} identified as {}",
            f.sample,
            got.id()
        );
        // By content: the same bytes under a name without a known extension.
        if sample.is_file() {
            let dir = tempfile::tempdir().unwrap();
            let anon = dir.path().join("input.bin");
            std::fs::copy(&sample, &anon).unwrap();
            let got = identify(&anon).unwrap_or_else(|e| panic!("{} renamed: {e}", f.sample));
            assert_eq!(got.id(), importer.id(), "{} renamed", f.sample);
        }
        checked += 1;
    }
    assert!(checked >= 6, "only {checked} drivers compiled in");
}

#[test]
fn every_driver_has_fuzz_seeds_for_the_registry_target() {
    let fuzz = root().join("fuzz");
    let target = std::fs::read_to_string(fuzz.join("fuzz_targets/importer.rs")).unwrap();
    assert!(
        target.contains("tet::registry::formats()"),
        "the importer fuzz target must iterate the registry"
    );
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("fuzz_targets/importer.rs"));
    for f in formats() {
        let seeds = fuzz.join("seeds").join(f.fuzz_seeds);
        let n = std::fs::read_dir(&seeds)
            .unwrap_or_else(|e| panic!("{}: {}: {e}", f.id, seeds.display()))
            .filter(|e| e.as_ref().is_ok_and(|e| e.path().is_file()))
            .count();
        assert!(n > 0, "{}: no seeds in {}", f.id, seeds.display());
    }
}

#[test]
fn output_digest_script_covers_every_input_driver() {
    let o = Command::new("bash")
        .arg(root().join(".ci/output-digests.sh"))
        .arg("--extensions")
        .arg(env!("CARGO_BIN_EXE_tet"))
        .output()
        .expect("bash runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed = String::from_utf8_lossy(&o.stdout);
    let listed: Vec<&str> = listed.lines().collect();
    for f in formats() {
        if f.id == tet::tet_input::ID {
            continue; // our own outputs are not inputs of the digest run
        }
        for e in f.extensions {
            assert!(
                listed.contains(e),
                "{}: .{e} not in the digest script",
                f.id
            );
        }
    }
}

#[test]
fn every_exporter_is_a_target_by_name_and_extension() {
    let mut n = 0;
    for f in formats() {
        let Some(e) = f.exporter else { continue };
        n += 1;
        let t = Target::from_name(e.name()).expect("--to takes the name");
        assert_eq!(t.name(), e.name());
        for a in e.aliases() {
            assert_eq!(Target::from_name(a), Some(t), "alias {a}");
        }
        for x in e.extensions() {
            let p = Path::new("out").with_extension(x);
            assert_eq!(Target::from_path(&p), Some(t), "{}", p.display());
        }
    }
    assert_eq!(n, Target::all().len());
    assert_eq!(n, 4, "netcdf, npy, npz, zarr");
}

/// The two halves of reading by ranges go together: a driver that says it opens bytes
/// (`Importer::opens_bytes`, what decides whether an object input is read by ranges or spooled)
/// opens its sample from a source that lends nothing (every byte through `read_at`, as from an
/// object store) with the same variables, attributes and values as from the file; one that does
/// not refuses `open_bytes` instead of half-working.
#[test]
fn drivers_that_open_bytes_read_their_sample_by_ranges_alike() {
    use std::sync::Arc;
    use tet_source::byte_source::CountingSource;
    use tet_source::OpenOptions;
    let opts = OpenOptions::default();
    let mut ranged = 0;
    for f in formats() {
        let Some(importer) = f.importer else {
            continue;
        };
        let sample = root().join(f.sample);
        if sample.is_dir() {
            assert!(!importer.opens_bytes(), "{}: a folder has no bytes", f.id);
            continue;
        }
        let bytes = std::fs::read(&sample).unwrap();
        let src = Arc::new(CountingSource::new(bytes.clone()));
        let by_ranges = importer.open_bytes(&sample, src.clone(), &opts);
        if !importer.opens_bytes() {
            assert!(
                matches!(by_ranges, Err(tet_source::SourceError::Unsupported { .. })),
                "{}: opens_bytes() is false but open_bytes did not refuse",
                f.id
            );
            continue;
        }
        let by_ranges = by_ranges.unwrap_or_else(|e| panic!("{}: open_bytes: {e}", f.id));
        let local = importer
            .open(&sample, &opts)
            .unwrap_or_else(|e| panic!("{}: open: {e}", f.id));
        assert_eq!(
            format!("{:?}", by_ranges.variables()),
            format!("{:?}", local.variables()),
            "{}: the variables differ",
            f.id
        );
        assert_eq!(
            format!("{:?}", by_ranges.global_attrs()),
            format!("{:?}", local.global_attrs()),
            "{}",
            f.id
        );
        assert!(!local.variables().is_empty(), "{}: an empty sample", f.id);
        for (i, v) in local.variables().iter().enumerate() {
            let n = v
                .shape
                .iter()
                .product::<u64>()
                .checked_mul(v.dtype.size() as u64)
                .unwrap();
            let zeros = vec![0u64; v.shape.len()];
            let mut a = vec![0u8; n as usize];
            let mut b = vec![1u8; n as usize];
            local.read_region(i, &zeros, &v.shape, &mut a).unwrap();
            by_ranges
                .read_region(i, &zeros, &v.shape, &mut b)
                .unwrap_or_else(|e| panic!("{}: {}: {e}", f.id, v.name));
            assert!(a == b, "{}: {}: values differ", f.id, v.name);
        }
        let (reads, _) = src.counts();
        assert!(reads > 0, "{}: nothing read through read_at", f.id);
        ranged += 1;
    }
    assert!(ranged >= 3, "NPY, TeaFile and Tensogram open bytes");
}
