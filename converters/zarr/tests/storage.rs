//! A Zarr store opened through a zarrs storage (`open_storage`, what object store prefixes use)
//! reads the same as the directory opened on disk (`open_store`): variables, attributes,
//! skipped items, text variables and every value.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tet_source::{OpenOptions, Source};
use tet_testkit::{corpus_dir, read_all};
use tet_zarr::{open_storage, open_store};
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::ReadableListableStorage;

/// Every store of the corpus and the fixtures (a fixture folder's `*.zarr`).
fn stores() -> Vec<PathBuf> {
    let mut out = vec![corpus_dir("zarr").join("climate.zarr")];
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for set in std::fs::read_dir(&fixtures).unwrap() {
        let set = set.unwrap().path();
        if !set.is_dir() {
            continue;
        }
        for e in std::fs::read_dir(&set).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "zarr") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn opened(src: &dyn Source) -> (Vec<String>, Vec<Vec<u8>>, String) {
    let names = src
        .variables()
        .iter()
        .map(|v| format!("{} {:?} {:?}", v.name, v.dtype, v.shape))
        .collect();
    let values = (0..src.variables().len())
        .map(|i| read_all(src, i))
        .collect();
    let rest = format!(
        "{:?} {:?} {:?}",
        src.global_attrs(),
        src.skipped(),
        src.text_variables()
    );
    (names, values, rest)
}

#[test]
fn a_store_through_a_zarrs_storage_reads_as_the_directory() {
    let options = OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    };
    let all = stores();
    assert!(all.len() >= 10, "{all:?}");
    for path in all {
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let on_disk = open_store(&path, &options);
        let storage: ReadableListableStorage = Arc::new(FilesystemStore::new(&path).unwrap());
        let through = open_storage(storage, &name, &options);
        let (on_disk, through) = match (on_disk, through) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "{name}");
                continue;
            }
            (a, b) => panic!("{name}: {:?} vs {:?}", a.err(), b.err()),
        };
        let read = on_disk.variables().len() + on_disk.text_variables().len();
        assert!(read > 0, "{name}: nothing read");
        assert_eq!(opened(&on_disk), opened(&through), "{name}");
    }
}

#[test]
fn a_storage_without_metadata_is_not_a_zarr_store() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.txt"), b"hello").unwrap();
    let storage: ReadableListableStorage = Arc::new(FilesystemStore::new(dir.path()).unwrap());
    let e = open_storage(storage, "x.zarr", &OpenOptions::default()).unwrap_err();
    assert!(e.to_string().contains("not a Zarr store"), "{e}");
}
