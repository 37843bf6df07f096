//! NPY/NPZ inputs numpy writes that used to be refused (`tests/fixtures/issue12/make.py`,
//! numpy 2.4.6): unicode and byte-string arrays and record fields become text variables,
//! datetime64/timedelta64 with multiplied units, the `=` / `|` byte-order spellings, record
//! fields with an empty name. Every value is compared with what `np.load` returned.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use tet_source::{AttrValue, ElementType, Source};
use tet_testkit::{find, json_strs, json_u64s, read_all, var_index};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/issue12");

fn open(file: &str) -> Box<dyn Source> {
    common::open_file(&Path::new(FIXTURES).join(file))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn values_are_what_numpy_loads() {
    let expect: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/expect.json")).unwrap())
            .unwrap();
    let files = expect["files"].as_object().unwrap();
    assert_eq!(files.len(), 12);
    let mut checked = 0;
    for (file, datasets) in files {
        let src = open(file);
        assert!(src.skipped().is_empty(), "{file}: {:?}", src.skipped());
        let datasets = datasets.as_object().unwrap();
        // Exactly the expected datasets, numeric and text together.
        let got: BTreeSet<&str> = src
            .variables()
            .iter()
            .map(|v| v.name.as_str())
            .chain(src.text_variables().iter().map(|t| t.name.as_str()))
            .collect();
        let want: BTreeSet<&str> = datasets.keys().map(String::as_str).collect();
        assert_eq!(got, want, "{file}");
        for (name, e) in datasets {
            let shape = json_u64s(&e["shape"]);
            if e["kind"] == "text" {
                let t = src
                    .text_variables()
                    .iter()
                    .find(|t| &t.name == name)
                    .unwrap();
                assert_eq!(t.shape, shape, "{file}: {name}");
                assert_eq!(t.values, json_strs(&e["text"]), "{file}: {name}");
                assert_eq!(
                    t.char_axis.as_ref().map(|c| c.len),
                    e.get("char_len").and_then(Value::as_u64),
                    "{file}: {name}"
                );
            } else {
                let i = var_index(src.as_ref(), name);
                let v = &src.variables()[i];
                assert_eq!(v.shape, shape, "{file}: {name}");
                assert_eq!(
                    v.dtype.name(),
                    e["elem"].as_str().unwrap(),
                    "{file}: {name}"
                );
                let out = read_all(src.as_ref(), i);
                assert_eq!(hex(&out), e["le_hex"].as_str().unwrap(), "{file}: {name}");
                if let Some(units) = e.get("units").and_then(Value::as_str) {
                    let got = find(&v.attrs, "units");
                    assert_eq!(got, Some(&AttrValue::Text(units.into())), "{file}: {name}");
                }
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 24);
}

#[test]
fn multiplied_units_are_noted_and_empty_names_explained() {
    let src = open("time_units.npz");
    let v = src.variables().iter().find(|v| v.name == "dt10ms").unwrap();
    assert_eq!(v.dtype, ElementType::I64);
    assert!(
        v.notes.iter().any(|n| n.contains("datetime64[10ms]")),
        "{:?}",
        v.notes
    );
    assert!(v
        .attrs
        .iter()
        .any(|(k, a)| k == "calendar" && *a == AttrValue::Text("proleptic_gregorian".into())));

    let src = open("empty_name_collides.npy");
    let v = src
        .variables()
        .iter()
        .find(|v| v.name == "empty_name_collides/f0_")
        .unwrap();
    assert!(
        v.notes.iter().any(|n| n.contains("empty name")),
        "{:?}",
        v.notes
    );
}

/// The fixtures really use the spellings under test (a regenerated file that lost them would
/// make the value test pass for the wrong reason).
#[test]
fn fixtures_hold_the_spellings_under_test() {
    let head = |f: &str| {
        let b = std::fs::read(Path::new(FIXTURES).join(f)).unwrap();
        String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned()
    };
    assert!(head("native_f8.npy").contains("'descr': '=f8'"));
    assert!(head("bar_i4.npy").contains("'descr': '|i4'"));
    assert!(head("native_record.npy").contains("('c', '=U2')"));
    assert!(head("empty_name.npy").contains("[('', '<i4')"));
    assert!(head("unicode_be_fortran.npy").contains("'>U3', 'fortran_order': True"));
}
