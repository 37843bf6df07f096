//! HDF5 virtual datasets (issue 12) round-trip: VDS `.h5` → `.tet` (`--follow-external`) →
//! NetCDF-4 and Zarr v3 → read back by our own importers → the values h5py reads from the VDS,
//! byte for byte (`converters/hdf5/tests/fixtures/vds/expect/*.bin`, written by its generator).
#![cfg(all(feature = "hdf5", feature = "netcdf"))]

use std::path::{Path, PathBuf};

use serde_json::Value;
use tet::export::{self, ExportOptions, Target};
use tet::format::TetFile;
use tet::pipeline::ConvertOptions;

use crate::common::convert as run_request;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("converters/hdf5/tests/fixtures/vds")
}

fn convert(input: &Path, output: &Path) {
    let opts = ConvertOptions::from(tet::settings::Settings {
        follow_external: true,
        ..Default::default()
    });
    run_request(input, output, &opts)
        .unwrap_or_else(|e| panic!("{} → {}: {e}", input.display(), output.display()));
}

/// The little-endian bytes h5py read for `dataset` of `file`, widened as `.tet` stores them
/// (the fixtures hold f4/i2/i4 only, which `.tet` stores as they are).
fn expected(file: &str, dataset: &str) -> (Vec<u8>, Vec<u64>) {
    let expect: Value = serde_json::from_slice(
        &std::fs::read(fixtures().join("expect.json")).expect("expect.json"),
    )
    .expect("expect.json parses");
    let e = &expect[file][dataset];
    let bin = e["bin"].as_str().expect("bin");
    let shape = e["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("extent"))
        .collect();
    (
        std::fs::read(fixtures().join("expect").join(bin)).expect("expected bytes"),
        shape,
    )
}

fn dataset(tet: &Path, name: &str) -> (Vec<u8>, Vec<u64>) {
    let f = TetFile::open(tet).unwrap_or_else(|e| panic!("{}: {e}", tet.display()));
    let id = f
        .dataset_id(name)
        .unwrap_or_else(|| panic!("{}: no dataset {name}", tet.display()));
    let bytes = f.read_dataset(id).expect("read dataset");
    (bytes, f.datasets[id].shape.clone())
}

#[test]
fn virtual_datasets_round_trip_to_netcdf_and_zarr() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (file, names) in [
        ("stacked.h5", &["stack", "interleaved"][..]),
        ("fill.h5", &["partial"][..]),
        ("same_file.h5", &["view", "raw"][..]),
    ] {
        let tet = tmp.path().join(format!("{file}.tet"));
        convert(&fixtures().join(file), &tet);
        for target in [Target::NETCDF, Target::ZARR] {
            let out = tmp.path().join(format!("{file}.{}", target.name()));
            let opts = ExportOptions {
                target: Some(target),
                ..ExportOptions::default()
            };
            export::export(&tet, &out, &opts)
                .unwrap_or_else(|e| panic!("{file} → {}: {e}", target.name()));
            let back = tmp.path().join(format!("{file}.{}.tet", target.name()));
            convert(&out, &back);
            for name in names {
                let (want, shape) = expected(file, name);
                for (what, path) in [("converted", &tet), ("round trip", &back)] {
                    let (got, got_shape) = dataset(path, name);
                    assert_eq!(
                        got_shape,
                        shape,
                        "{file}/{name} {what} via {}",
                        target.name()
                    );
                    assert!(
                        got == want,
                        "{file}/{name} {what} via {}: values differ from h5py's",
                        target.name()
                    );
                }
            }
        }
    }
}

#[test]
fn a_vds_with_a_missing_source_is_refused_not_filled() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("missing.tet");
    let opts = ConvertOptions::from(tet::settings::Settings {
        follow_external: true,
        ..Default::default()
    });
    let err = run_request(&fixtures().join("missing.h5"), &out, &opts)
        .expect_err("a missing source must not read as fill values");
    assert!(
        matches!(
            err,
            tet::pipeline::ConvertError::Source(tet_source::SourceError::Unsupported { .. })
        ),
        "{err:?}"
    );
    assert!(!out.exists());
}
