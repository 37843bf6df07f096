//! HDF5 virtual datasets (`tests/fixtures/vds/make.py`, written by h5py), compared value for value
//! with what h5py reads from them (`expect.json`, `expect/*.bin`):
//!
//! * with `follow_external`, a VDS whose source files resolve inside the input's directory is
//!   read through libhdf5 (stacked, interleaved, partly covered: the fill value where no source
//!   maps), and records its sources;
//! * a VDS over its own file (`"."`) converts without `follow_external`;
//! * otherwise it is one refusal line naming the dataset and the reason (source file missing,
//!   outside, `--follow-external` needed, source dataset missing, nested, unlimited, printf
//!   names), and with `skip_unsupported` a skipped item while the rest converts;
//! * the source files are looked for beside the VDS file's canonical path, never beside a
//!   symbolic link to it.

use crate::common;

use std::path::{Path, PathBuf};

use common::{assert_note, fixture, var};
use serde_json::Value;
use tet_hdf5::{open_path, H5Source};
use tet_source::{AttrValue, Fact, OpenOptions, Source, SourceError};
use tet_testkit::{json_u64s, read_all, sub_block, var_index};

fn dir() -> PathBuf {
    fixture("vds")
}

fn follow() -> OpenOptions {
    OpenOptions {
        follow_external: true,
        ..OpenOptions::default()
    }
}

fn skip(follow_external: bool) -> OpenOptions {
    OpenOptions {
        skip_unsupported: true,
        follow_external,
        ..OpenOptions::default()
    }
}

/// h5py's reading of `file:name`: element type, shape, little-endian bytes.
fn expected(file: &str, name: &str) -> (String, Vec<u64>, Vec<u8>) {
    let all: Value =
        serde_json::from_slice(&std::fs::read(dir().join("expect.json")).unwrap()).unwrap();
    let e = &all[file][name];
    let shape = json_u64s(&e["shape"]);
    let bytes = std::fs::read(dir().join("expect").join(e["bin"].as_str().unwrap())).unwrap();
    (e["dtype"].as_str().unwrap().to_string(), shape, bytes)
}

/// Reads the whole variable `name` and checks it against h5py's reading of `file:expect_name`.
fn check_values(src: &H5Source, name: &str, file: &str, expect_name: &str) {
    let (dtype, shape, want) = expected(file, expect_name);
    let i = var_index(src, name);
    let v = &src.variables()[i];
    assert_eq!(v.shape, shape, "{name}");
    let et = match dtype.as_str() {
        "f4" => "f32",
        "i4" => "i32",
        "i2" => "i16",
        other => panic!("{other}"),
    };
    assert_eq!(v.dtype.name(), et, "{name}");
    assert!(
        read_all(src, i) == want,
        "{file}:{name}: values differ from h5py's"
    );
    // A region in the middle too (a hyperslab across mappings).
    if shape.len() == 3 {
        let (start, count) = ([1, 3, 2], [2, 4, 5]);
        let mut part = vec![0u8; 2 * 4 * 5 * 4];
        src.read_region(i, &start, &count, &mut part).unwrap();
        assert!(
            part == sub_block(&want, &shape, 4, &start, &count),
            "{name} region"
        );
    }
}

fn refusal(file: &Path, opts: &OpenOptions) -> String {
    let err = open_path(file, opts).unwrap_err();
    assert!(
        matches!(
            err,
            SourceError::Unsupported {
                feature: tet_source::Feature::Layout,
                ..
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    msg
}

fn sources(src: &H5Source, name: &str) -> Vec<String> {
    let v = var(src, name);
    v.facts
        .iter()
        .find_map(|f| match f {
            Fact::Private {
                key,
                value: AttrValue::TextList(l),
                ..
            } if key == "vds_sources" => Some(l.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{name}: no vds_sources in {:?}", v.facts))
}

#[test]
fn stacked_and_interleaved_sources_read_as_h5py_reads_them() {
    let src = open_path(&dir().join("stacked.h5"), &follow()).unwrap();
    assert!(src.skipped().is_empty(), "{:?}", src.skipped());
    check_values(&src, "stack", "stacked.h5", "stack");
    check_values(&src, "interleaved", "stacked.h5", "interleaved");
    let want: Vec<String> = (0..4).map(|i| format!("src_{i}.h5:data")).collect();
    let got = sources(&src, "stack");
    assert_eq!(
        got.iter().map(|s| s.replace(":/", ":")).collect::<Vec<_>>(),
        want
    );
    assert_eq!(sources(&src, "interleaved").len(), 2);
    let v = var(&src, "stack");
    assert_note(v, "virtual dataset: 4 mappings from 4 source files");
    assert!(
        !v.notes.iter().any(|n| n.contains("fill value")),
        "{:?}",
        v.notes
    );
    assert_eq!(
        v.attrs,
        [("units".to_string(), AttrValue::Text("counts".into()))]
    );
    assert_eq!(src.library_read_variables(), ["interleaved", "stack"]);
}

#[test]
fn a_vds_over_its_own_file_converts_without_follow_external() {
    let src = open_path(&dir().join("same_file.h5"), &OpenOptions::default()).unwrap();
    check_values(&src, "raw", "same_file.h5", "raw");
    // Big-endian i16 source, i32 VDS: libhdf5 converts, as h5py reads it.
    check_values(&src, "view", "same_file.h5", "view");
    assert_note(var(&src, "view"), "1 mapping from its own file");
    assert_eq!(sources(&src, "view"), [".:raw"]);
}

#[test]
fn regions_no_source_maps_read_as_the_fill_value() {
    let src = open_path(&dir().join("fill.h5"), &follow()).unwrap();
    check_values(&src, "partial", "fill.h5", "partial");
    let v = var(&src, "partial");
    assert!(
        v.notes.iter().any(|n| n.starts_with(
            "100 elements are mapped by no source and read as the dataset's fill value"
        )),
        "{:?}",
        v.notes
    );
}

#[test]
fn source_files_need_follow_external() {
    let msg = refusal(&dir().join("stacked.h5"), &OpenOptions::default());
    assert!(msg.contains("dataset 'interleaved'"), "{msg}");
    assert!(msg.contains("--follow-external"), "{msg}");
    assert!(msg.contains("src_0.h5, src_1.h5"), "{msg}");
    let src = open_path(&dir().join("stacked.h5"), &skip(false)).unwrap();
    assert!(src.variables().is_empty());
    let names: Vec<&str> = src.skipped().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["interleaved", "stack"]);
    assert!(
        src.skipped()[1].reason.contains("4 source files"),
        "{:?}",
        src.skipped()
    );
}

#[test]
fn a_missing_source_file_is_refused_never_filled() {
    for opts in [follow(), OpenOptions::default()] {
        let msg = refusal(&dir().join("missing.h5"), &opts);
        assert!(msg.contains("dataset 'frames'"), "{msg}");
        assert!(msg.contains("source file 'absent.h5' not found"), "{msg}");
    }
    let src = open_path(&dir().join("missing.h5"), &skip(true)).unwrap();
    assert_eq!(src.skipped().len(), 1, "{:?}", src.skipped());
    assert_eq!(src.skipped()[0].name, "frames");
    assert!(src.skipped()[0].reason.contains("absent.h5"));
    check_values(&src, "ok", "missing.h5", "ok");
}

#[test]
fn a_missing_source_dataset_is_refused() {
    let msg = refusal(&dir().join("nodset.h5"), &follow());
    assert!(msg.contains("dataset 'frames'"), "{msg}");
    assert!(
        msg.contains("source dataset 'src_0.h5:nope' not found"),
        "{msg}"
    );
    let src = open_path(&dir().join("nodset.h5"), &skip(true)).unwrap();
    check_values(&src, "ok", "nodset.h5", "ok");
}

#[test]
fn a_source_outside_the_input_directory_is_refused() {
    let file = dir().join("outer/inner/outside.h5");
    let msg = refusal(&file, &follow());
    assert!(msg.contains("dataset 'up'"), "{msg}");
    assert!(
        msg.contains("'../outside_src.h5' resolves outside the input's directory"),
        "{msg}"
    );
    let src = open_path(&file, &skip(true)).unwrap();
    assert_eq!(src.skipped()[0].name, "up");
}

#[test]
fn nested_unlimited_and_printf_mappings_are_refused_by_name() {
    for (file, ds, why) in [
        ("nested.h5", "again", "is itself a virtual dataset"),
        ("unlimited.h5", "tail", "unlimited mapping"),
        (
            "printf.h5",
            "growing",
            "printf-style source names ('src_%b.h5",
        ),
    ] {
        let msg = refusal(&dir().join(file), &follow());
        assert!(msg.contains(&format!("dataset '{ds}'")), "{msg}");
        assert!(msg.contains(why), "{msg}");
        let src = open_path(&dir().join(file), &skip(true)).unwrap();
        assert_eq!(src.skipped().len(), 1, "{:?}", src.skipped());
        assert!(src.variables().is_empty());
    }
}

#[test]
fn a_vds_reached_by_an_external_link_converts_under_the_link_name() {
    let src = open_path(&dir().join("via_link.h5"), &follow()).unwrap();
    check_values(&src, "linked", "stacked.h5", "stack");
}

/// libhdf5 alone would look beside the name the file was opened by (a symbolic link's
/// directory) before the working directory: the prefix makes it look beside the real file.
#[test]
fn sources_are_found_beside_the_real_file_not_beside_a_link_to_it() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(dir().join("stacked.h5"), real.join("stacked.h5")).unwrap();
    for i in 0..4 {
        let name = format!("src_{i}.h5");
        std::fs::copy(dir().join(&name), real.join(&name)).unwrap();
        // Decoys with other values where libhdf5 would otherwise look first.
        std::fs::copy(dir().join("src_3.h5"), other.join(&name)).unwrap();
    }
    let link = other.join("link.h5");
    std::os::unix::fs::symlink(real.join("stacked.h5"), &link).unwrap();
    let src = open_path(&link, &follow()).unwrap();
    check_values(&src, "stack", "stacked.h5", "stack");
}
