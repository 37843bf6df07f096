//! The integration tests of the command line and the engine under it, as one test binary (issue 31).
//!
//! Every file of `tests/` is a module of this one (`autotests = false` in Cargo.toml), so that
//! the shared helpers (`mod common`) are compiled once and one binary is linked instead of one
//! per file. A test file's module reaches the helpers as `crate::common`.

// -- the test files (kept in step with tests/*.rs by every_test_file_is_declared) --
mod alignment;
mod bad_inputs;
mod budget;
mod cdl_roundtrip;
mod cli;
mod common;
mod concat;
mod corpus;
mod corruption;
mod crash_batch;
mod disk_full;
mod engine_shape;
mod etl;
mod export;
mod export_errors;
mod export_object;
mod footer_schema;
mod format_roundtrip;
mod integrity;
mod legacy;
mod lineage;
mod memory_budget;
mod netcdf_fidelity;
mod object_store;
mod passthrough;
mod pipeline;
mod ragged_deeper;
mod ragged_opaque;
mod ranged_tet;
mod records_roundtrip;
mod reference_files;
mod registry;
mod reliability;
mod reproducible;
mod select;
mod slashed_attrs;
mod slurm;
mod sparse;
mod vds_roundtrip;
mod verify_rejects;
mod writer;
mod zarr_blosc;
// -- end of the test files --

// Every test of this binary shares one process: a program one test starts must not hold
// libhdf5's lock on a file another test is writing (tet_testkit::hdf5_without_file_locks).
tet_testkit::hdf5_without_file_locks!();

/// With `autotests = false` a file of `tests/` that is not declared above would never be
/// compiled nor run: none may be missing.
#[test]
fn every_test_file_is_declared() {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let missing = tet_testkit::layout::undeclared_test_files(&tests);
    assert!(
        missing.is_empty(),
        "test files not declared as modules of tests/main.rs (or of the file that owns their folder): {missing:?}"
    );
}
