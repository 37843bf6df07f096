//! Zarr v3 variable-length `bytes` arrays written by zarr-python 3
//! (`tests/fixtures/bytes/make.py`): arrays whose values all decode as UTF-8 are text
//! variables; the others are CF contiguous ragged arrays of `u8` (values + `<name>_count`),
//! compared value for value with what zarr-python reads (issue 23).

use crate::common;

use tet_source::{AttrValue, ElementType, Fact, OpenOptions, Source};
use tet_testkit::{read_all, var_index};
use tet_zarr::open_store;

use common::{fixture_dir, fixture_expect};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn attr<'a>(attrs: &'a [(String, AttrValue)], key: &str) -> Option<&'a AttrValue> {
    attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

#[test]
fn bytes_arrays_read_as_zarr_python_reads_them() {
    // v3 `variable_length_bytes`, and v2 `|O` with the `vlen-bytes` filter.
    for store in ["bytes_v3.zarr", "bytes_v2.zarr"] {
        check_bytes_store(store);
    }
}

fn check_bytes_store(store: &str) {
    let expect = fixture_expect("bytes");
    let arrays = expect["stores"][store].as_array().unwrap();
    let src = open_store(&fixture_dir("bytes").join(store), &OpenOptions::default()).unwrap();
    assert!(src.skipped().is_empty(), "{:?}", src.skipped());
    assert_eq!(arrays.len(), 4);
    let (mut texts, mut ragged) = (0, 0);
    for a in arrays {
        let name = a["name"].as_str().unwrap();
        let want: Vec<Vec<u8>> = a["values_hex"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| unhex(v.as_str().unwrap()))
            .collect();
        let shape: Vec<u64> = a["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        let dims: Vec<String> = a["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap().to_string())
            .collect();
        if a["utf8"].as_bool().unwrap() {
            texts += 1;
            let t = src
                .text_variables()
                .iter()
                .find(|t| t.name == name)
                .unwrap_or_else(|| panic!("{name}: no text variable"));
            assert_eq!(t.shape, shape, "{name}");
            assert_eq!(t.dims.as_ref(), Some(&dims), "{name}");
            let got: Vec<Vec<u8>> = t.values.iter().map(|s| s.as_bytes().to_vec()).collect();
            assert_eq!(got, want, "{name}");
            assert_eq!(
                attr(&t.attrs, "note"),
                Some(&AttrValue::Text(format!("{name} bytes")))
            );
            assert!(src.variables().iter().all(|v| v.name != name), "{name}");
            continue;
        }
        ragged += 1;
        assert!(src.text_variables().iter().all(|t| t.name != name));
        let vi = var_index(&src, name);
        let ci = var_index(&src, &format!("{name}_count"));
        let (values, counts) = (&src.variables()[vi], &src.variables()[ci]);
        assert_eq!(values.dtype, ElementType::U8, "{name}");
        assert_eq!(values.dims, Some(vec![format!("{name}_sample")]));
        assert!(values.facts.iter().any(|f| matches!(
            f,
            Fact::Ragged { count, type_name } if *count == format!("{name}_count") && type_name == "bytes"
        )));
        assert_eq!(counts.dtype, ElementType::I64);
        assert_eq!(counts.shape, shape, "{name}");
        assert_eq!(counts.dims.as_ref(), Some(&dims), "{name}");
        assert_eq!(
            attr(&counts.attrs, "sample_dimension"),
            Some(&AttrValue::Text(format!("{name}_sample")))
        );
        let flat = read_all(&src, vi);
        let n: Vec<i64> = read_all(&src, ci)
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let mut got = Vec::new();
        let mut at = 0usize;
        for k in n {
            let k = usize::try_from(k).unwrap();
            got.push(flat[at..at + k].to_vec());
            at += k;
        }
        assert_eq!(at, flat.len(), "{name}: values left over");
        assert_eq!(got, want, "{name}");
        // A region of the values: what zarr-python's values 2.. hold, one after the other.
        let tail: Vec<u8> = want[2..].concat();
        let start = want[..2].iter().map(Vec::len).sum::<usize>() as u64;
        let mut part = vec![0u8; tail.len()];
        src.read_region(vi, &[start], &[tail.len() as u64], &mut part)
            .unwrap();
        assert_eq!(part, tail, "{name}");
    }
    assert_eq!((texts, ragged), (3, 1), "{store}");
}

#[test]
fn v2_fixed_bytes_read_as_npy_s_is() {
    let expect = fixture_expect("bytes");
    let arrays = expect["stores"]["fixed_v2.zarr"].as_array().unwrap();
    let src = open_store(
        &fixture_dir("bytes").join("fixed_v2.zarr"),
        &OpenOptions::default(),
    )
    .unwrap();
    assert!(src.skipped().is_empty(), "{:?}", src.skipped());
    assert!(src.variables().is_empty(), "{:?}", src.variables());
    assert_eq!(arrays.len(), 2);
    for a in arrays {
        let name = a["name"].as_str().unwrap();
        let t = src
            .text_variables()
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name}: no text variable"));
        assert_eq!(t.shape, vec![a["shape"][0].as_u64().unwrap()], "{name}");
        assert_eq!(t.dims, Some(vec![format!("{name}_n")]), "{name}");
        let want: Vec<&str> = a["text"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(t.values, want, "{name}");
        // Nothing lost: each value's bytes are what zarr-python reads (UTF-8, else one
        // character per byte).
        for (s, hex) in t.values.iter().zip(a["values_hex"].as_array().unwrap()) {
            let raw = unhex(hex.as_str().unwrap());
            let back = match std::str::from_utf8(&raw) {
                Ok(_) => s.as_bytes().to_vec(),
                Err(_) => s
                    .chars()
                    .map(|c| u8::try_from(u32::from(c)).unwrap())
                    .collect(),
            };
            assert_eq!(back, raw, "{name}: {s:?}");
        }
    }
}
