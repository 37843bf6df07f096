//! Files written by h5py and PyTables (`tests/fixtures/make.py`), compared with what h5py reads
//! from them (`tests/fixtures/expect.json`):
//!
//! * `CLASS` and `NAME` attributes of groups, the root included (PyTables marks every node with
//!   them), are kept as global attributes; a dimension scale's `CLASS`/`NAME` stay bookkeeping.
//! * A dataset libhdf5 cannot open (a layout message of a newer HDF5, `libver='latest'`) is a
//!   refusal naming it, or with `skip_unsupported` a skipped item while the rest converts.
//! * PyTables' time types (`pytables_time.h5`, `make_time.py`, compared with what PyTables
//!   reads: `expect_time.json`): `Time64` as exact microseconds since the epoch, `Time32` as
//!   seconds, with their CF units.

use crate::common;

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

/// `expect_time.json` (`tests/fixtures/make_time.py`): what PyTables reads from
/// `pytables_time.h5`, per variable.
fn expect_time() -> serde_json::Map<String, Value> {
    let all: Value =
        serde_json::from_slice(&std::fs::read(fixture("expect_time.json")).unwrap()).unwrap();
    all["variables"].as_object().unwrap().clone()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| f64::from_bits(x.as_u64().unwrap()))
        .collect()
}

/// PyTables' time columns and arrays (`Time64`: seconds and microseconds in one 64-bit word;
/// `Time32`: seconds) in tables (compound fields, array fields, a big-endian table) and in
/// compressed and plain arrays: every 64-bit value is the exact count of microseconds since
/// the epoch that PyTables was given, equal to PyTables' reading (its float, computed the way
/// PyTables computes it from the two words, bit for bit), 32-bit values are PyTables' seconds;
/// each variable carries the CF units xarray decodes.
#[test]
fn pytables_time_values_are_exact_microseconds_and_seconds() {
    let src = open_path(&fixture("pytables_time.h5"), &OpenOptions::default()).unwrap();
    let exp = expect_time();
    assert_eq!(exp.len(), 9);
    for (name, e) in &exp {
        let v = var(&src, name);
        let shape: Vec<u64> = ints(&e["shape"]).iter().map(|&d| d as u64).collect();
        assert_eq!(v.shape, shape, "{name}");
        let got = read_all(&src, tet_testkit::var_index(&src, name));
        let (units, calendar) = (find(&v.attrs, "units"), find(&v.attrs, "calendar"));
        assert_eq!(
            calendar,
            Some(&AttrValue::Text("proleptic_gregorian".into())),
            "{name}"
        );
        if e["kind"] == "time32" {
            assert_eq!(v.dtype, tet_source::ElementType::I32, "{name}");
            assert_eq!(got, json_i32s_le(&e["pytables"]), "{name}");
            assert_eq!(got, json_i32s_le(&e["written"]), "{name}");
            let want = AttrValue::Text("seconds since 1970-01-01 00:00:00".into());
            assert_eq!(units, Some(&want), "{name}");
            continue;
        }
        assert_eq!(v.dtype, tet_source::ElementType::I64, "{name}");
        let want = AttrValue::Text("microseconds since 1970-01-01 00:00:00".into());
        assert_eq!(units, Some(&want), "{name}");
        let us: Vec<i64> = got
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let (written, pytables, raw) = (
            floats(&e["written"]),
            floats(&e["pytables"]),
            ints(&e["raw"]),
        );
        assert_eq!(us.len(), written.len(), "{name}");
        for (k, &u) in us.iter().enumerate() {
            // What PyTables was given, to the microsecond.
            assert_eq!(u, (written[k] * 1e6).round() as i64, "{name}[{k}]");
            // PyTables' reading: seconds + microseconds * 1e-6 from the stored words (the
            // microseconds may reach 1000000: PyTables rounds 0.9999999999999999 so).
            let (s, m) = (raw[k] >> 32, raw[k] as i32);
            assert_eq!(u, s * 1_000_000 + i64::from(m), "{name}[{k}]");
            let theirs = s as f64 + f64::from(m) * 1e-6;
            assert_eq!(theirs.to_bits(), pytables[k].to_bits(), "{name}[{k}]");
        }
    }
    // The compressed array is still read by direct chunk access (then decoded).
    assert!(src.direct_chunk_variables().contains(&"t64_carray"));
    // The value PyTables documents: 1178896298.832258, stored 5063321045286302466.
    let e = &exp["events/t64"];
    assert_eq!(ints(&e["raw"])[0], 5_063_321_045_286_302_466);
}
