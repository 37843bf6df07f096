//! Objects whose descriptor strides are not C order (`tests/fixtures/strides`, written by ECMWF's
//! Python `tensogram`, see its make.py): Fortran order and another axis permutation, with and
//! without compression (zstd, lz4, blosc2), big-endian, a length-1 axis with an arbitrary stride,
//! are transposed to C order on read: every value is the element the strides point to in the
//! library's decoded payload (what numpy's `as_strided` gives), whole and in pieces; strides
//! that overlap are refused in one line.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;
use tet_source::{Importer, OpenOptions, SourceError};
use tet_tensogram::TgmImporter;
use tet_testkit::{first_difference, json_u64s};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/strides");

fn fixture(name: &str) -> PathBuf {
    Path::new(FIXTURES).join(name)
}

fn expect() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("expect.json")).unwrap()).unwrap()
}

fn skip() -> OpenOptions {
    OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    }
}

#[test]
fn strided_objects_read_as_their_strides_say() {
    let e = expect();
    let src = TgmImporter.open(&fixture("strides.tgm"), &skip()).unwrap();
    let objects = e["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 7);
    let want_names: Vec<String> = objects
        .iter()
        .map(|o| format!("message_0/object_{}", o["object"]))
        .collect();
    assert_eq!(variable_names(src.as_ref()), want_names);
    for (i, o) in objects.iter().enumerate() {
        let v = &src.variables()[i];
        let what = &v.name;
        assert_eq!(v.dtype.name(), o["elem"].as_str().unwrap(), "{what}");
        assert_eq!(v.shape, json_u64s(&o["shape"]), "{what}");
        let got = read_in_pieces(src.as_ref(), i);
        let want =
            std::fs::read(fixture("expect").join(format!("strides.tgm__o{}.le", o["object"])))
                .unwrap();
        if let Some(d) = first_difference(&got, &want, v.dtype.size()) {
            panic!("{what}: {d}");
        }
        // Transposed objects say so; C-order ones do not.
        let c_order = o["object"] == 6;
        assert_eq!(
            v.notes.iter().any(|n| n.contains("transposed to C order")),
            !c_order,
            "{what}: {:?}",
            v.notes
        );
    }
}

/// The fixture's objects really are laid out as claimed: the payload of the Fortran-order
/// object is the values in Fortran order, not C order.
#[test]
fn fortran_fixture_payload_is_column_major() {
    let want = std::fs::read(fixture("expect/strides.tgm__o0.le")).unwrap();
    let c: Vec<f64> = want
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let file = std::fs::read(fixture("strides.tgm")).unwrap();
    // Column 0 of the (3, 4) array is payload elements 0, 1, 2.
    let column: Vec<u8> = [c[0], c[4], c[8]]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert!(
        file.windows(column.len()).any(|w| w == column.as_slice()),
        "column 0 is not contiguous in the payload"
    );
}

#[test]
fn overlapping_strides_are_refused_in_one_line() {
    let e = expect();
    assert_eq!(e["refused"][0]["object"], 7);
    let src = TgmImporter.open(&fixture("strides.tgm"), &skip()).unwrap();
    let skipped = src.skipped();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].name, "message_0/object_7");
    assert!(
        skipped[0].reason.contains("[1, 1]"),
        "{}",
        skipped[0].reason
    );
    // Shape [2, 2]: C order [2, 1], Fortran order [1, 2], both named.
    assert!(
        skipped[0].reason.contains("[2, 1]") && skipped[0].reason.contains("Fortran order [1, 2]"),
        "{}",
        skipped[0].reason
    );
    assert!(!skipped[0].reason.contains('\n'));
    match TgmImporter.open(&fixture("strides.tgm"), &OpenOptions::default()) {
        Err(SourceError::Unsupported { detail: m, .. }) => assert!(m.contains("object 7"), "{m}"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("opened without refusing object 7"),
    }
}
