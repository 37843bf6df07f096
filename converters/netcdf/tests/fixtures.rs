//! Files written by netCDF4-python (`tests/fixtures/make.py`), compared with what it wrote and
//! reads (`tests/fixtures/expect.json`): a `char` variable's `_FillValue = '\0'` (netCDF's
//! default char fill) and `missing_value = '\0'` keep their byte (they are values of the data,
//! not text with a C string's terminator), in the classic and the netCDF-4 format.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tet_netcdf::open_path;
use tet_source::{AttrValue, OpenOptions, Source};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn char_fill_values_keep_their_byte() {
    let all: Value =
        serde_json::from_slice(&std::fs::read(fixture("expect.json")).unwrap()).unwrap();
    let files = all["files"].as_object().unwrap();
    assert_eq!(files.len(), 2);
    for (file, exp) in files {
        let src = open_path(&fixture(file), &OpenOptions::default()).unwrap();
        let text = src.text_variables();
        for (key, hex) in exp["attrs"].as_object().unwrap() {
            let (var, attr) = key.split_once('/').unwrap();
            let tv = text
                .iter()
                .find(|t| t.name == var)
                .unwrap_or_else(|| panic!("{file}: no text variable {var}"));
            let got = tv
                .attrs
                .iter()
                .find(|(k, _)| k == attr)
                .unwrap_or_else(|| panic!("{file}: {key} missing: {:?}", tv.attrs));
            let want = String::from_utf8(unhex(hex.as_str().unwrap())).unwrap();
            assert_eq!(got.1, AttrValue::Text(want), "{file}: {key}");
        }
        // The values: rows of the char arrays as netCDF4-python reads them, trailing NULs
        // removed (the documented text mapping); the fill bytes of unwritten rows included.
        for (var, hex) in exp["values"].as_object().unwrap() {
            let tv = text.iter().find(|t| t.name == *var).unwrap();
            let bytes = unhex(hex.as_str().unwrap());
            let row = tv
                .char_axis
                .as_ref()
                .map_or(bytes.len(), |c| c.len as usize);
            let want: Vec<String> = bytes
                .chunks(row)
                .map(|r| {
                    let end = r.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
                    String::from_utf8(r[..end].to_vec()).unwrap()
                })
                .collect();
            assert_eq!(tv.values, want, "{file}: {var}");
        }
    }
}
