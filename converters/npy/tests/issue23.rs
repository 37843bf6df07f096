//! NPY/NPZ inputs of issue 23 (`tests/fixtures/issue23/make.py`, numpy 2.4.6 and Python's
//! `zipfile`): `.npz` members compressed with bzip2 or LZMA read like deflated ones, and a
//! record dtype whose one field is unnamed raw-void padding (`[('', '|V8')]`) is refused by
//! name instead of silently giving no variable. Every value is compared with what `np.load`
//! returned.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use tet_npy::NpyImporter;
use tet_source::{Importer, OpenOptions, SourceError};
use tet_testkit::{json_u64s, read_all, var_index};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/issue23");

fn expect() -> Value {
    serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/expect.json")).unwrap())
        .unwrap()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every dataset of `file` is exactly what numpy loads, and there are no others.
fn check_values(file: &str) -> usize {
    let expect = expect();
    let datasets: Vec<(&String, &Value)> = expect[file]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !k.starts_with("__"))
        .collect();
    let src = common::open_file(&Path::new(FIXTURES).join(file));
    assert!(src.skipped().is_empty(), "{file}: {:?}", src.skipped());
    let got: BTreeSet<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    let want: BTreeSet<&str> = datasets.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(got, want, "{file}");
    for (name, e) in &datasets {
        let i = var_index(src.as_ref(), name);
        let v = &src.variables()[i];
        assert_eq!(v.shape, json_u64s(&e["shape"]), "{file}: {name}");
        assert_eq!(
            v.dtype.name(),
            e["elem"].as_str().unwrap(),
            "{file}: {name}"
        );
        let out = read_all(src.as_ref(), i);
        assert_eq!(hex(&out), e["le_hex"].as_str().unwrap(), "{file}: {name}");
        // A region too (a second read of an already decompressed member).
        if v.shape.len() == 2 {
            let (r, c) = (v.shape[0], v.shape[1]);
            let elem = v.dtype.size();
            let mut part = vec![0u8; (r - 1) as usize * (c - 1) as usize * elem];
            src.read_region(i, &[1, 1], &[r - 1, c - 1], &mut part)
                .unwrap();
            let want: Vec<u8> = (1..r)
                .flat_map(|row| {
                    let at = (row * c + 1) as usize * elem;
                    out[at..at + (c - 1) as usize * elem].to_vec()
                })
                .collect();
            assert_eq!(part, want, "{file}: {name} region");
        }
    }
    datasets.len()
}

#[test]
fn bzip2_and_lzma_npz_members_read_as_numpy_loads_them() {
    let e = expect();
    let methods = &e["members.npz"]["__methods__"];
    assert_eq!(methods["bz2_f8.npy"], 12);
    assert_eq!(methods["lzma_i4.npy"], 14);
    assert_eq!(methods["group/lzma_big.npy"], 14);
    assert_eq!(check_values("members.npz"), 5);
}

#[test]
fn one_field_record_with_an_empty_numeric_field_converts_as_f0() {
    assert_eq!(check_values("empty_name_f8.npy"), 1);
}

#[test]
fn padding_only_record_is_refused_by_name_not_dropped() {
    let e = expect();
    assert_eq!(e["padding_only.npy"]["__skipped__"][0], "padding_only");
    let path = Path::new(FIXTURES).join("padding_only.npy");
    let head = std::fs::read(&path).unwrap();
    assert!(String::from_utf8_lossy(&head[..128]).contains("[('', '|V8')]"));
    match NpyImporter.open(&path, &OpenOptions::default()) {
        Err(SourceError::Unsupported { detail: m, .. }) => {
            assert!(m.contains("'padding_only'") && m.contains("padding"), "{m}");
            assert!(!m.contains('\n'), "{m}");
        }
        Err(other) => panic!("expected an unsupported item, got {other}"),
        Ok(src) => panic!(
            "opened with {} variables, {} skipped",
            src.variables().len(),
            src.skipped().len()
        ),
    }
    let options = OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    };
    let src = NpyImporter.open(&path, &options).unwrap();
    assert!(src.variables().is_empty());
    let skipped: Vec<&str> = src.skipped().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(skipped, ["padding_only"]);
    assert!(
        src.skipped()[0].reason.contains("|V8"),
        "{:?}",
        src.skipped()
    );
}

/// Raw void (`|V8` without fields, a named `|V3` field) is `u8` with a trailing axis of the
/// blob size, recorded as opaque, with numpy's bytes.
#[test]
fn raw_void_is_u8_with_a_trailing_byte_axis() {
    assert_eq!(check_values("raw_void.npy"), 1);
    assert_eq!(check_values("record_void.npy"), 2);
    let src = common::open_file(&Path::new(FIXTURES).join("raw_void.npy"));
    assert!(src.variables()[0]
        .facts
        .iter()
        .any(|f| matches!(f, tet_source::Fact::Opaque { .. })));
}
