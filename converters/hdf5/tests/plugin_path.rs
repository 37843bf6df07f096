//! `HDF5_PLUGIN_PATH` is honoured: a filter variant this crate does not decode (Blosc2 with the
//! bytedelta filter or the zfp codec) is read through libhdf5 when a plugin for it is found
//! there, and the plugins' reading of the filters this crate decodes itself (Blosc2 included)
//! matches ours value for value.
//!
//! Needs filter plugins built for HDF5 (hdf5plugin's: `python3 -c "import hdf5plugin;
//! print(hdf5plugin.PLUGIN_PATH)"`), given as `TET_TEST_HDF5_PLUGIN_DIR`; without it the test
//! says so and passes (CI has no plugins; `tests/plugin_filters.rs` checks the refusal there).
//! One test in this binary: the variable must be set before libhdf5 starts, which reads it once.

use crate::common;

use common::fixture;
use tet_hdf5::open_path;
use tet_source::{OpenOptions, Source};
use tet_testkit::{read_all, var_index};

#[test]
fn plugins_from_hdf5_plugin_path_are_used() {
    let Some(dir) = std::env::var_os("TET_TEST_HDF5_PLUGIN_DIR") else {
        eprintln!("TET_TEST_HDF5_PLUGIN_DIR not set: HDF5_PLUGIN_PATH not tested");
        return;
    };
    // SAFETY: the only test of this binary, run before any HDF5 call and before any other
    // thread of this process reads the environment.
    unsafe { std::env::set_var("HDF5_PLUGIN_PATH", &dir) };
    for (file, library) in [
        ("filters.h5", vec![]),
        (
            "blosc2.h5",
            vec!["unsupported/bytedelta", "unsupported/zfp"],
        ),
        ("pytables_blosc2.h5", vec![]),
    ] {
        let src = open_path(&fixture(file), &OpenOptions::default()).unwrap();
        // (PyTables' empty TITLE attributes are skipped.)
        let skipped = src.skipped().iter().filter(|s| !s.name.contains('@'));
        assert_eq!(skipped.count(), 0, "{file}: {:?}", src.skipped());
        assert_eq!(src.library_read_variables(), library, "{file}");
        // Every dataset, through the plugins (H5Dread) and through our decoders, agree.
        for (i, v) in src.variables().iter().enumerate() {
            let ours = read_all(&src, i);
            let mut lib = vec![0u8; ours.len()];
            let zeros = vec![0; v.shape.len()];
            src.read_region_via_library(i, &zeros, &v.shape, &mut lib)
                .unwrap_or_else(|e| panic!("{file}: {}: {e}", v.name));
            assert_eq!(ours, lib, "{file}: {}", v.name);
        }
    }
    let src = open_path(&fixture("filters.h5"), &OpenOptions::default()).unwrap();
    // Blosc2 read here: its values are h5py's (the generator's bits).
    let all: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("expect_filters.json")).unwrap()).unwrap();
    let want: Vec<u8> = all["files"]["filters.h5"]["blosc2/lz4"]["bits"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b.as_u64().unwrap().to_le_bytes())
        .collect();
    assert_eq!(read_all(&src, var_index(&src, "blosc2/lz4")), want);
}
