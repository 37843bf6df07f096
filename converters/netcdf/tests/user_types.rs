//! netCDF-4 user-defined types, in files written by netCDF4-python (and, for what it has no
//! API for, the netCDF-C it bundles) and h5py: `tests/fixtures/make_user_types.py`. Every
//! converted value is compared with what netCDF4-python reads (`tests/fixtures/user_types.json`):
//! compound variables split per field (nested, array and `char` fields, over an unlimited
//! dimension, in a subgroup), a complex compound, attributes of compound, enum, vlen and opaque
//! types kept as JSON text (enum: the codes) with their recorded types, and the refusals of
//! ragged, opaque and colliding variables with and without `skip_unsupported`.

use crate::common;

use std::path::{Path, PathBuf};

use common::read_all;
use serde_json::{json, Value};
use tet_netcdf::{open_path, NcSource, ATTR_TYPE};
use tet_source::{AttrValue, ElementType, Fact, OpenOptions, Source, SourceError};
use tet_testkit::{find, private_fact, sub_block, var_index};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn expect(file: &str) -> Value {
    let all: Value =
        serde_json::from_slice(&std::fs::read(fixture("user_types.json")).unwrap()).unwrap();
    all["files"][file].clone()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn skipping() -> OpenOptions {
    OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    }
}

fn open_skipping(name: &str) -> NcSource {
    open_path(&fixture(name), &skipping()).unwrap()
}

/// The JSON text of a `Text` attribute, parsed.
fn json_attr(v: Option<&AttrValue>) -> Value {
    match v {
        Some(AttrValue::Text(t)) => serde_json::from_str(t).unwrap(),
        other => panic!("not a JSON text attribute: {other:?}"),
    }
}

/// The recorded type of a user-typed attribute (a private fact), parsed.
fn recorded_type(facts: &[Fact], attr: &str) -> Value {
    match private_fact(facts, "nc", &format!("{ATTR_TYPE}{attr}")) {
        Some(AttrValue::Text(t)) => serde_json::from_str(t).unwrap(),
        other => panic!("no recorded type for {attr}: {other:?}"),
    }
}

/// Every field's values, bit for bit, as netCDF4-python reads them.
#[test]
fn compound_fields_match_netcdf4_python() {
    let src = open_skipping("user_types.nc");
    let exp = expect("user_types.nc");
    let values = exp["values"].as_object().unwrap();
    assert_eq!(values.len(), 11);
    for (name, hex) in values {
        let i = var_index(&src, name);
        let got = read_all(&src, i);
        assert_eq!(got, unhex(hex.as_str().unwrap()), "{name}");
    }
    let v = |n: &str| &src.variables()[var_index(&src, n)];
    let types = [
        ("obs/id", ElementType::I32, vec![3, 2]),
        ("obs/temp", ElementType::F64, vec![3, 2]),
        ("obs/flag", ElementType::I8, vec![3, 2]),
        ("obs/pos", ElementType::F32, vec![3, 2, 3]),
        ("obs/inner/u", ElementType::U16, vec![3, 2]),
        ("obs/inner/w", ElementType::F32, vec![3, 2]),
        ("z", ElementType::C128, vec![2]),
        ("sub/rec/a", ElementType::I32, vec![2]),
        ("sub/rec/b", ElementType::F64, vec![2]),
        ("mixed/a", ElementType::I32, vec![2]),
    ];
    for (name, t, shape) in types {
        assert_eq!((v(name).dtype, &v(name).shape), (t, &shape), "{name}");
    }
    let pos = v("obs/pos");
    assert_eq!(
        pos.dims.as_deref().unwrap(),
        ["time", "station", "pos_dim2"]
    );
    assert_eq!(v("obs/id").dims.as_deref().unwrap(), ["time", "station"]);
    assert!(pos.facts.contains(&Fact::SourceDataset("obs".into())));
    assert!(pos
        .facts
        .contains(&Fact::UnlimitedDims(vec!["time".into()])));
    assert!(!v("z")
        .facts
        .iter()
        .any(|f| matches!(f, Fact::SourceDataset(_))));
    assert!(v("obs/inner/w")
        .notes
        .iter()
        .any(|n| n == "field 'w' of a compound record (netCDF type 'inner_t')"));
    // The variable's attributes go with every field, as the HDF5 importer does.
    for name in ["obs/id", "obs/inner/u"] {
        assert_eq!(
            find(&v(name).attrs, "units"),
            Some(&AttrValue::Text("mixed".into()))
        );
        assert_eq!(
            json_attr(find(&v(name).attrs, "origin")),
            exp["attrs"]["obs/origin"]
        );
    }
    // A region of an array field (the record batches and inner axes at work).
    let full = read_all(&src, var_index(&src, "obs/pos"));
    let (start, count) = ([1u64, 0, 1], [2u64, 2, 2]);
    let mut part = vec![0u8; 8 * 4];
    src.read_region(var_index(&src, "obs/pos"), &start, &count, &mut part)
        .unwrap();
    assert_eq!(part, sub_block(&full, &[3, 2, 3], 4, &start, &count));
}

/// A `char` array field becomes a text variable; trailing NULs dropped.
#[test]
fn char_field_is_text() {
    let src = open_skipping("user_types.nc");
    let exp = expect("user_types.nc");
    let t = src
        .text_variables()
        .iter()
        .find(|t| t.name == "obs/name")
        .unwrap();
    let want: Vec<String> = serde_json::from_value(exp["strings"]["obs/name"].clone()).unwrap();
    assert_eq!(t.values, want);
    assert_eq!(t.shape, [3, 2]);
    assert_eq!(t.dims.as_deref().unwrap(), ["time", "station"]);
    let axis = t.char_axis.as_ref().unwrap();
    assert_eq!((axis.dim.as_str(), axis.len), ("name_dim2", 4));
}

/// Compound, vlen and opaque attributes as JSON text, enum attributes as their codes, each
/// with its recorded type (variable facts; global facts for the root group).
#[test]
fn user_type_attributes_keep_value_and_type() {
    let src = open_skipping("user_types.nc");
    let exp = &expect("user_types.nc")["attrs"];
    let g = src.global_attrs();
    let gf = src.global_facts();
    assert_eq!(json_attr(find(g, "bbox")), exp["bbox"]);
    let t = recorded_type(gf, "bbox");
    assert_eq!(t["count"], 2);
    assert_eq!(
        t["type"],
        json!({"class": "compound", "name": "pair_t", "size": 16, "fields": [
            {"name": "a", "offset": 0, "type": "i32"},
            {"name": "b", "offset": 8, "type": "f64"}]})
    );
    assert_eq!(find(g, "sky"), Some(&AttrValue::U8(vec![5, 0, 9])));
    assert_eq!(json!([5, 0, 9]), exp["sky"]);
    assert_eq!(
        recorded_type(gf, "sky"),
        json!({"count": 3, "type": {"class": "enum", "name": "cloud_t", "base": "u8",
            "members": {"CLEAR": 0, "CLOUDY": 5, "RAIN": 9}}})
    );
    assert_eq!(json_attr(find(g, "ragged_attr")), exp["ragged_attr"]);
    assert_eq!(
        recorded_type(gf, "ragged_attr"),
        json!({"count": 2, "type": {"class": "vlen", "name": "ints_t", "base": "i32"}})
    );
    assert_eq!(json_attr(find(g, "magic")), exp["magic"]);
    assert_eq!(
        recorded_type(gf, "magic"),
        json!({"count": 2, "type": {"class": "opaque", "name": "blob_t", "size": 3,
            "encoding": "hex"}})
    );
    let obs = &src.variables()[var_index(&src, "obs/temp")];
    assert_eq!(recorded_type(&obs.facts, "origin")["count"], 1);
    assert!(obs.notes.iter().any(
        |n| n == "attribute 'origin': compound value given as JSON text (nc_attr_type:origin)"
    ));
    let temp = &src.variables()[var_index(&src, "temp")];
    assert_eq!(find(&temp.attrs, "sky"), Some(&AttrValue::U8(vec![9])));
    assert_eq!(json!([9]), exp["temp/sky"]);
    assert_eq!(recorded_type(&temp.facts, "sky")["type"]["name"], "cloud_t");
}

/// Ragged and opaque variables and a compound's vlen field convert (CF contiguous ragged
/// arrays; u8 with a trailing byte axis), with the values h5py reads: nothing is refused.
#[test]
fn ragged_opaque_and_vlen_fields_convert() {
    let src = open_path(&fixture("user_types.nc"), &OpenOptions::default()).unwrap();
    assert!(src.skipped().is_empty(), "{:?}", src.skipped());
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    for n in [
        "obs/id",
        "obs/temp",
        "obs/flag",
        "obs/pos",
        "obs/inner/u",
        "obs/inner/w",
        "z",
        "temp",
        "mixed/a",
        "mixed/tags",
        "mixed/tags_count",
        "sub/rec/a",
        "sub/rec/b",
        "ragged",
        "ragged_count",
        "blobs",
    ] {
        assert!(names.contains(&n), "{n}: {names:?}");
    }
    assert_eq!(names.len(), 16, "{names:?}");
    // h5py reads `ragged` as [1, 2, 3], [-4], `mixed['tags']` as [1, 2, 3], [-4] (int32) and
    // `blobs` as b'\x01\x02\x03', b'\x04\x05\x06'.
    let le16 = |v: &[i16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let le32 = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let counts: Vec<u8> = [3i64, 1].iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(
        read_all(&src, var_index(&src, "ragged")),
        le16(&[1, 2, 3, -4])
    );
    assert_eq!(read_all(&src, var_index(&src, "ragged_count")), counts);
    assert_eq!(
        read_all(&src, var_index(&src, "mixed/tags")),
        le32(&[1, 2, 3, -4])
    );
    assert_eq!(read_all(&src, var_index(&src, "mixed/tags_count")), counts);
    let tags = &src.variables()[var_index(&src, "mixed/tags")];
    assert!(tags.facts.contains(&Fact::Ragged {
        count: "mixed/tags_count".into(),
        type_name: "ints_t".into()
    }));
    let blobs = &src.variables()[var_index(&src, "blobs")];
    assert_eq!(blobs.shape, [2, 3]);
    assert_eq!(read_all(&src, var_index(&src, "blobs")), [1, 2, 3, 4, 5, 6]);
}

/// A field named `a/b` (possible in HDF5, refused by netCDF-C's writer) becomes `ab/a_b`; a
/// compound whose fields collide once renamed is refused alone.
#[test]
fn slash_fields_renamed_and_collisions_refused() {
    let e = open_path(&fixture("slash_fields.nc"), &OpenOptions::default()).unwrap_err();
    assert!(matches!(e, SourceError::Unsupported { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "unsupported: clash: compound fields collide as 'clash/a_b' once '/' in field names \
         becomes '_'"
    );
    let src = open_skipping("slash_fields.nc");
    let exp = expect("slash_fields.nc");
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["ab/a_b", "ab/c", "plain"]);
    for (name, hex) in exp["values"].as_object().unwrap() {
        let got = read_all(&src, var_index(&src, name));
        assert_eq!(got, unhex(hex.as_str().unwrap()), "{name}");
    }
    let ab = &src.variables()[0];
    assert!(ab
        .notes
        .iter()
        .any(|n| n == "compound field 'a/b' renamed 'a_b' ('/' separates groups)"));
    assert_eq!(src.skipped().len(), 1);
    assert_eq!(src.skipped()[0].name, "clash");
}
