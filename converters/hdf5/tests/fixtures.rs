//! Files written by h5py and PyTables (`tests/fixtures/make.py`), compared with what h5py reads
//! from them (`tests/fixtures/expect.json`):
//!
//! * `CLASS` and `NAME` attributes of groups, the root included (PyTables marks every node with
//!   them), are kept as global attributes; a dimension scale's `CLASS`/`NAME` stay bookkeeping.
//! * A dataset libhdf5 cannot open (a layout message of a newer HDF5, `libver='latest'`) is a
//!   refusal naming it, or with `skip_unsupported` a skipped item while the rest converts.

mod common;

use common::{fixture, json_i32s_le, var};
use serde_json::Value;
use tet_hdf5::open_path;
use tet_source::{AttrValue, OpenOptions, Source, SourceError};
use tet_testkit::{find, read_all};

fn expect(file: &str) -> Value {
    let all: Value =
        serde_json::from_slice(&std::fs::read(fixture("expect.json")).unwrap()).unwrap();
    all["files"][file].clone()
}

/// An attribute value as the generator wrote h5py's reading: a string, or a list of numbers.
fn as_json(v: &AttrValue) -> Value {
    fn nums<T: Into<f64> + Copy>(v: &[T]) -> Value {
        Value::from(v.iter().map(|&x| x.into()).collect::<Vec<f64>>())
    }
    match v {
        AttrValue::Text(s) => Value::from(s.clone()),
        AttrValue::TextList(l) if l.len() == 1 => Value::from(l[0].clone()),
        AttrValue::TextList(l) => Value::from(l.clone()),
        AttrValue::I8(x) => nums(x),
        AttrValue::U8(x) => nums(x),
        AttrValue::I16(x) => nums(x),
        AttrValue::U16(x) => nums(x),
        AttrValue::I32(x) => nums(x),
        AttrValue::U32(x) => nums(x),
        AttrValue::I64(x) => Value::from(x.iter().map(|&v| v as f64).collect::<Vec<_>>()),
        AttrValue::U64(x) => Value::from(x.iter().map(|&v| v as f64).collect::<Vec<_>>()),
        AttrValue::F32(x) => nums(x),
        AttrValue::F64(x) => nums(x),
    }
}

/// h5py's reading with numbers as f64, for comparison with [`as_json`].
fn normalise(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::from(a.iter().map(|x| x.as_f64().unwrap()).collect::<Vec<_>>()),
        other => other.clone(),
    }
}

/// Every group attribute h5py reads is a global attribute (`name` for the root,
/// `group/name` else) with the same value, `CLASS` and `NAME` included.
fn check_group_attrs(file: &str, opts: &OpenOptions) {
    let src = open_path(&fixture(file), opts).unwrap();
    let globals = src.global_attrs();
    let exp = expect(file);
    let mut seen = 0;
    for (group, attrs) in exp["groups"].as_object().unwrap() {
        for (name, want) in attrs.as_object().unwrap() {
            let key = if group.is_empty() {
                name.clone()
            } else {
                format!("{group}/{name}")
            };
            let got = find(globals, &key)
                .unwrap_or_else(|| panic!("{file}: global attribute '{key}' is missing"));
            assert_eq!(as_json(got), normalise(want), "{file}: {key}");
            seen += 1;
        }
    }
    assert_eq!(globals.len(), seen, "{file}: {globals:?}");
}

#[test]
fn pytables_group_class_and_name_are_kept() {
    check_group_attrs("pytables.h5", &OpenOptions::default());
    let src = open_path(&fixture("pytables.h5"), &OpenOptions::default()).unwrap();
    let g = |k: &str| find(src.global_attrs(), k);
    assert_eq!(g("CLASS"), Some(&AttrValue::Text("GROUP".into())));
    assert_eq!(
        g("detector/calib/CLASS"),
        Some(&AttrValue::Text("GROUP".into()))
    );
    // Leaves keep theirs too, with their values.
    let exp = expect("pytables.h5");
    for (name, d) in exp["datasets"].as_object().unwrap() {
        let v = var(&src, name);
        for (k, want) in d["attrs"].as_object().unwrap() {
            let got = find(&v.attrs, k).unwrap_or_else(|| panic!("{name}: attribute {k} missing"));
            assert_eq!(as_json(got), normalise(want), "{name}: {k}");
        }
    }
}

#[test]
fn class_and_name_of_groups_and_datasets_but_not_of_scales() {
    check_group_attrs("class_name.h5", &OpenOptions::default());
    let src = open_path(&fixture("class_name.h5"), &OpenOptions::default()).unwrap();
    let v = |n: &str| var(&src, n);
    let names = |n: &str| -> Vec<String> { v(n).attrs.iter().map(|(k, _)| k.clone()).collect() };
    assert_eq!(names("tagged"), ["CLASS", "NAME"]);
    assert_eq!(v("tagged").attrs[0].1, AttrValue::Text("TABLE".into()));
    // The scale: a coordinate named by NAME, with no CLASS/NAME attributes.
    assert!(names("x").is_empty(), "{:?}", names("x"));
    assert_eq!(v("data").dims, Some(vec!["x".to_string()]));
    // Numeric CLASS / NAME on a group keep their types.
    let g = |k: &str| find(src.global_attrs(), k);
    assert_eq!(g("numeric/CLASS"), Some(&AttrValue::I16(vec![1, 2, 3])));
    assert_eq!(g("numeric/NAME"), Some(&AttrValue::F32(vec![2.5])));
}

#[test]
fn a_dataset_libhdf5_cannot_open_is_refused() {
    let path = fixture("latest_layout.h5");
    let err = open_path(&path, &OpenOptions::default()).unwrap_err();
    assert!(matches!(err, SourceError::Unsupported { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("dataset 'chunked'"), "{msg}");
    assert!(msg.contains("cannot be opened by libhdf5"), "{msg}");
    assert!(msg.contains("layout message"), "{msg}");
}

#[test]
fn with_skip_unsupported_the_unreadable_dataset_is_reported_and_the_rest_converts() {
    let opts = OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    };
    let src = open_path(&fixture("latest_layout.h5"), &opts).unwrap();
    let skipped = src.skipped();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].name, "chunked");
    assert!(skipped[0].reason.contains("layout message"), "{skipped:?}");
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["contig"]);
    let want = json_i32s_le(&expect("latest_layout.h5")["datasets"]["contig"]["values"]);
    assert_eq!(want.len(), 40);
    assert_eq!(read_all(&src, 0), want);
    check_group_attrs("latest_layout.h5", &opts);
}
