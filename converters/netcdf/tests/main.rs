//! The integration tests of `tet-netcdf`, as one test binary (issue 31).
//!
//! Every file of `tests/` is a module of this one (`autotests = false` in Cargo.toml), so that
//! the shared helpers (`mod common`) are compiled once and one binary is linked instead of one
//! per file. A test file's module reaches the helpers as `crate::common`.

// -- the test files (kept in step with tests/*.rs by every_test_file_is_declared) --
mod common;
mod corpus;
mod export_errors;
mod fidelity;
mod fixtures;
mod generated;
mod robustness;
mod user_types;
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
