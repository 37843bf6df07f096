//! Structured (record) data types, in stores written by zarr-python 3 (v3 and v2 metadata) and
//! zarr-python 2 (`tests/fixtures/structured/make.py`): every field is one variable whose values
//! are exactly what zarr-python reads as `arr[...][field]` (stored by the generator as
//! little-endian bytes), whole, in slabs, and over regions that cut chunks; string fields are
//! text variables with zarr-python's strings. Hand-written stores cover what is refused (as
//! unsupported items, never as broken stores) and corrupt chunks.

use crate::common;

use std::path::Path;

use proptest::prelude::*;
use serde_json::Value;
use tet_source::record::Place;
use tet_source::{AttrValue, ElementType, OpenOptions, Source, SourceError};
use tet_testkit::{
    first_difference, json_u64s, read_all, read_all_in_pieces, read_all_in_slabs, var_index,
};
use tet_zarr::open_store;
use tet_zarr::structured::{extract, FieldLayout, Fix};

use common::{assert_reads_as, fixture_dir, fixture_expect, zarr_fact};

const FIXTURE: &str = "structured";

fn skip() -> OpenOptions {
    OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    }
}

fn elem_of(dtype: &str) -> ElementType {
    match dtype {
        "bool" => ElementType::Bool,
        "int8" => ElementType::I8,
        "int16" => ElementType::I16,
        "int32" => ElementType::I32,
        "int64" | "datetime64" => ElementType::I64,
        "uint8" => ElementType::U8,
        "uint16" => ElementType::U16,
        "uint32" => ElementType::U32,
        "uint64" => ElementType::U64,
        "float16" => ElementType::F16,
        "float32" => ElementType::F32,
        "float64" => ElementType::F64,
        "complex64" => ElementType::C64,
        "complex128" => ElementType::C128,
        other => panic!("dtype {other} in expect.json"),
    }
}

fn expected(store: &str, var: &str) -> Vec<u8> {
    let file = format!("{store}__{}.le", var.replace('/', "."));
    std::fs::read(fixture_dir(FIXTURE).join("expect").join(&file))
        .unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn every_field_reads_as_zarr_python_reads_it() {
    let expect = fixture_expect(FIXTURE);
    let stores = expect["stores"].as_object().unwrap();
    assert_eq!(stores.len(), 3);
    let (mut fields, mut texts) = (0, 0);
    for (store, arrays) in stores {
        let src = open_store(&fixture_dir(FIXTURE).join(store), &OpenOptions::default())
            .unwrap_or_else(|e| panic!("{store}: {e}"));
        assert!(src.skipped().is_empty(), "{store}: {:?}", src.skipped());
        let mut names: Vec<&str> = Vec::new();
        for a in arrays.as_array().unwrap() {
            for f in a["fields"].as_array().unwrap() {
                let name = f["name"].as_str().unwrap();
                names.push(name);
                let ctx = format!("{store}/{name}");
                let idx = var_index(&src, name);
                let v = &src.variables()[idx];
                let want_type = elem_of(f["dtype"].as_str().unwrap());
                assert_eq!(v.dtype, want_type, "{ctx}");
                let shape = json_u64s(&f["shape"]);
                assert_eq!(v.shape, shape, "{ctx}");
                let want = expected(store, name);
                let elem = v.dtype.size();
                assert_reads_as(&ctx, &src, idx, &want, &shape, elem, |n| {
                    (n - n / 3 - n / 4).max(1)
                });
                if !shape.is_empty() {
                    let slabs = read_all_in_slabs(&src, idx);
                    assert!(first_difference(&slabs, &want, elem).is_none(), "{ctx}");
                    let pieces = read_all_in_pieces(&src, idx);
                    assert!(first_difference(&pieces, &want, elem).is_none(), "{ctx}");
                }
                fields += 1;
            }
            for t in a["texts"].as_array().unwrap() {
                let name = t["name"].as_str().unwrap();
                names.push(name);
                let tv = src
                    .text_variables()
                    .iter()
                    .find(|x| x.name == name)
                    .unwrap_or_else(|| panic!("{store}: no text variable {name}"));
                let want: Vec<&str> = t["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap())
                    .collect();
                assert_eq!(tv.values, want, "{store}/{name}");
                assert_eq!(tv.shape, json_u64s(&t["shape"]), "{store}/{name}");
                texts += 1;
            }
        }
        // Nothing else: padding fields give no variable, nothing is duplicated.
        let mut got: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
        got.extend(src.text_variables().iter().map(|t| t.name.as_str()));
        got.sort_unstable();
        names.sort_unstable();
        assert_eq!(got, names, "{store}");
    }
    assert_eq!((fields, texts), (50, 4));
}

/// The fixtures would catch a reader that ignores byte order, fill values or `order="F"`.
#[test]
fn fixtures_are_not_trivial() {
    // v2 big-endian int32: the stored chunk bytes are big-endian, the values are not 0.
    let want = expected("rec_v2z3.zarr", "bigendian/i");
    let last: Vec<i32> = want[6 * 4..]
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // Chunks 2 and 3 were never written: the fill value (5, -0.5, True, 9).
    assert_eq!(last, [5; 5]);
    let f = expected("rec_v2z3.zarr", "bigendian/f");
    assert_eq!(f64::from_le_bytes(f[80..88].try_into().unwrap()), -0.5);
    let k = expected("rec_v3.zarr", "missing/k");
    assert_eq!(i64::from_le_bytes(k[72..80].try_into().unwrap()), -7);
    let v = expected("rec_v3.zarr", "missing/v");
    assert_eq!(f32::from_le_bytes(v[36..40].try_into().unwrap()), 2.5);
    // order F: the fill value of unwritten chunks, and written values that are not.
    let a = expected("rec_v2.zarr", "fortran/a");
    assert_eq!(i32::from_le_bytes(a[44..48].try_into().unwrap()), 3);
    assert!(a[..4] != [3, 0, 0, 0]);
    // v3 "endian": "big" on the bytes codec is ignored for records, as zarr-python does.
    let plain =
        std::fs::read(fixture_dir(FIXTURE).join("rec_v3.zarr/endian_big/zarr.json")).unwrap();
    assert!(String::from_utf8(plain).unwrap().contains("\"big\""));
}

#[test]
fn metadata_of_field_variables() {
    let dir = fixture_dir(FIXTURE);
    let src = open_store(&dir.join("rec_v2.zarr"), &OpenOptions::default()).unwrap();
    let y = &src.variables()[var_index(&src, "nested/n/y")];
    assert_eq!(y.shape, [3, 4, 2]);
    assert_eq!(y.layout.chunk_shape.as_deref(), Some(&[2, 3, 2][..]));
    assert!(y.layout.compressed);
    assert!(
        y.notes.iter().any(|n| n.contains("field 'n/y'")),
        "{:?}",
        y.notes
    );
    assert!(y
        .notes
        .iter()
        .any(|n| n.contains("sub-array field of shape (2,)")));
    let dt = zarr_fact(&y.facts, "zarr_data_type").unwrap();
    assert!(
        matches!(dt, AttrValue::Text(t) if t.contains("\">i2\"")),
        "{dt:?}"
    );
    let fill = zarr_fact(
        &src.variables()[var_index(&src, "fortran/a")].facts,
        "zarr_fill_value",
    );
    assert_eq!(fill, Some(&AttrValue::Text("\"AwAAAAQAAAUABg==\"".into())));
    let t = &src.variables()[var_index(&src, "sub/t")];
    assert_eq!(
        tet_testkit::find(&t.attrs, "units"),
        Some(&AttrValue::Text("seconds since 1970-01-01".into()))
    );
    // Padding (unnamed |V4 fields) gives nothing.
    assert!(src.variables().iter().all(|v| !v.name.starts_with("pad/f")));

    let src = open_store(&dir.join("rec_v3.zarr"), &OpenOptions::default()).unwrap();
    let f1 = &src.variables()[var_index(&src, "unnamed/f1")];
    assert!(
        f1.notes
            .iter()
            .any(|n| n.contains("empty name; named 'f1'")),
        "{:?}",
        f1.notes
    );
    let s = &src.variables()[var_index(&src, "scalar/f")];
    assert!(s.shape.is_empty());
    assert_eq!(s.layout.chunk_shape, None);
    let n = &src.variables()[var_index(&src, "nested/n/x")];
    assert_eq!(n.layout.chunk_shape.as_deref(), Some(&[3, 2][..]));
    assert!(
        n.layout.filters.iter().any(|f| f.starts_with("blosc")),
        "{:?}",
        n.layout.filters
    );
    let text = src
        .text_variables()
        .iter()
        .find(|t| t.name == "strs/s")
        .unwrap();
    assert_eq!(text.char_axis.as_ref().map(|c| c.len), Some(5));
}

/// A store with one array of records of `dtype` (v2 `.zarray`) whose chunk files are `chunks`.
fn v2_store(dir: &Path, dtype: &str, fill: &str, shape: &str, chunks: &[(&str, Vec<u8>)]) {
    let root = dir.join("s.zarr");
    std::fs::create_dir_all(root.join("rec")).unwrap();
    std::fs::create_dir_all(root.join("ok")).unwrap();
    std::fs::write(root.join(".zgroup"), r#"{"zarr_format": 2}"#).unwrap();
    std::fs::write(
        root.join("rec/.zarray"),
        format!(
            r#"{{"zarr_format": 2, "shape": {shape}, "chunks": [2], "dtype": {dtype},
            "compressor": null, "fill_value": {fill}, "order": "C", "filters": null}}"#
        ),
    )
    .unwrap();
    for (key, bytes) in chunks {
        std::fs::write(root.join("rec").join(key), bytes).unwrap();
    }
    std::fs::write(
        root.join("ok/.zarray"),
        r#"{"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "<u2",
        "compressor": null, "fill_value": 0, "order": "C", "filters": null}"#,
    )
    .unwrap();
    std::fs::write(root.join("ok/0"), [1u8, 0, 2, 0]).unwrap();
}

fn v3_store(dir: &Path, fields: &str, fill: &str) {
    let root = dir.join("s.zarr");
    std::fs::create_dir_all(root.join("rec")).unwrap();
    std::fs::write(
        root.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group"}"#,
    )
    .unwrap();
    std::fs::write(
        root.join("rec/zarr.json"),
        format!(
            r#"{{"zarr_format": 3, "node_type": "array", "shape": [3],
            "data_type": {{"name": "structured", "configuration": {{"fields": {fields}}}}},
            "chunk_grid": {{"name": "regular", "configuration": {{"chunk_shape": [2]}}}},
            "chunk_key_encoding": {{"name": "default"}},
            "fill_value": {fill}, "codecs": [{{"name": "bytes"}}]}}"#
        ),
    )
    .unwrap();
}

#[test]
fn fields_without_a_form_are_unsupported_fields_only() {
    let dir = tempfile::tempdir().unwrap();
    // A named raw field and an extended-precision one beside an int16 (records of 19 bytes).
    let mut chunk = Vec::new();
    for i in 0..2u8 {
        chunk.extend_from_slice(&[i + 1, 0]);
        chunk.extend_from_slice(&[9; 3]);
        chunk.extend_from_slice(&[7; 16]);
    }
    v2_store(
        dir.path(),
        r#"[["a", "<i2"], ["r", "|V3"], ["q", "<f16"]]"#,
        "null",
        "[3]",
        &[("0", chunk)],
    );
    let root = dir.path().join("s.zarr");
    let err = open_store(&root, &OpenOptions::default()).unwrap_err();
    assert!(matches!(err, SourceError::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("'rec/r'"), "{err}");
    let src = open_store(&root, &skip()).unwrap();
    let skipped: Vec<&str> = src.skipped().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(skipped, ["rec/r", "rec/q"]);
    assert!(src.skipped()[1].reason.contains("extended-precision"));
    let a = var_index(&src, "rec/a");
    // The missing chunk (element 2) reads as the null fill value: zeros.
    assert_eq!(read_all(&src, a), [1, 0, 2, 0, 0, 0]);
    assert_eq!(read_all(&src, var_index(&src, "ok")), [1, 0, 2, 0]);
}

#[test]
fn sub_array_fields_extend_the_dimension_names() {
    let dir = tempfile::tempdir().unwrap();
    // Records of 3 bytes: an i8 and a u8[2] sub-array.
    v2_store(
        dir.path(),
        r#"[["a", "|i1"], ["b", "|u1", [2]]]"#,
        "\"AQID\"",
        "[3]",
        &[("0", vec![5, 6, 7, 8, 9, 10])],
    );
    let root = dir.path().join("s.zarr");
    std::fs::write(root.join("rec/.zattrs"), r#"{"_ARRAY_DIMENSIONS": ["x"]}"#).unwrap();
    let src = open_store(&root, &OpenOptions::default()).unwrap();
    let b = &src.variables()[var_index(&src, "rec/b")];
    assert_eq!(
        b.dims.as_deref(),
        Some(&["x".to_string(), "b_0".to_string()][..])
    );
    assert_eq!(b.shape, [3, 2]);
    // Chunk 1 is missing: the fill value's record (1, [2, 3]).
    assert_eq!(
        read_all(&src, var_index(&src, "rec/b")),
        [6, 7, 9, 10, 2, 3]
    );
    let a = &src.variables()[var_index(&src, "rec/a")];
    assert_eq!(a.dims.as_deref(), Some(&["x".to_string()][..]));
    assert_eq!(read_all(&src, var_index(&src, "rec/a")), [5, 8, 1]);
}

#[test]
fn unreadable_record_metadata_is_an_unsupported_array() {
    let cases: &[(&str, &str, &str)] = &[
        // Python objects: no fixed size.
        (r#"[["a", "<i2"], ["o", "|O"]]"#, "null", "Python objects"),
        // A field that is not [name, type].
        (r#"[["a"]]"#, "null", "not [name, type]"),
        // A fill value that is no record.
        (r#"[["a", "<i2"]]"#, "3.5", "fill value"),
        // base64 of the wrong length (3 bytes, records of 2).
        (r#"[["a", "<i2"]]"#, "\"AAAA\"", "structured"),
        // An unknown type string.
        (r#"[["a", "<x3"]]"#, "null", "not supported"),
    ];
    for (dtype, fill, why) in cases {
        let dir = tempfile::tempdir().unwrap();
        v2_store(dir.path(), dtype, fill, "[2]", &[]);
        let root = dir.path().join("s.zarr");
        match open_store(&root, &OpenOptions::default()) {
            Err(e @ SourceError::Unsupported { .. }) => {
                assert!(e.to_string().contains(why), "{dtype}: {e}")
            }
            other => panic!("{dtype}: expected unsupported, got {other:?}"),
        }
        let src = open_store(&root, &skip()).unwrap();
        assert_eq!(src.skipped().len(), 1, "{dtype}");
        assert_eq!(src.skipped()[0].name, "rec");
        assert_eq!(src.variables().len(), 1, "{dtype}");
    }
    // v3: a variable-length string field, an unknown field type.
    for fields in [
        r#"[["a", "int16"], ["s", "string"]]"#,
        r#"[["a", {"name": "x"}]]"#,
    ] {
        let dir = tempfile::tempdir().unwrap();
        v3_store(dir.path(), fields, "\"AAAA\"");
        let root = dir.path().join("s.zarr");
        let err = open_store(&root, &OpenOptions::default()).unwrap_err();
        assert!(
            matches!(err, SourceError::Unsupported { .. }),
            "{fields}: {err}"
        );
        let src = open_store(&root, &skip()).unwrap();
        assert_eq!(src.skipped()[0].name, "rec", "{fields}");
    }
}

#[test]
fn v3_fill_values_and_missing_chunks() {
    // A zero fill value (other writers) is all zero bytes; no chunk is stored.
    let dir = tempfile::tempdir().unwrap();
    v3_store(dir.path(), r#"[["a", "int16"], ["b", "uint8"]]"#, "0");
    let src = open_store(&dir.path().join("s.zarr"), &OpenOptions::default()).unwrap();
    assert_eq!(read_all(&src, var_index(&src, "rec/a")), [0; 6]);
    // base64 of the record (what zarr-python writes): a = 0x0201, b = 3.
    let dir = tempfile::tempdir().unwrap();
    v3_store(
        dir.path(),
        r#"[["a", "int16"], ["b", "uint8"]]"#,
        "\"AQID\"",
    );
    let src = open_store(&dir.path().join("s.zarr"), &OpenOptions::default()).unwrap();
    assert_eq!(read_all(&src, var_index(&src, "rec/a")), [1, 2, 1, 2, 1, 2]);
    assert_eq!(read_all(&src, var_index(&src, "rec/b")), [3, 3, 3]);
}

#[test]
fn corrupt_chunks_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    // A chunk one byte short of two records of 4 bytes.
    v2_store(
        dir.path(),
        r#"[["a", "<i2"], ["b", ">u2"]]"#,
        "null",
        "[3]",
        &[("0", vec![1, 2, 3, 4, 5, 6, 7])],
    );
    let src = open_store(&dir.path().join("s.zarr"), &OpenOptions::default()).unwrap();
    let idx = var_index(&src, "rec/b");
    let mut out = [0u8; 6];
    let err = src.read_region(idx, &[0], &[3], &mut out).unwrap_err();
    assert!(matches!(err, SourceError::Malformed { .. }), "{err}");
    // The other chunk is fine: element 2 is the fill value.
    let mut one = [9u8; 2];
    src.read_region(idx, &[2], &[1], &mut one).unwrap();
    assert_eq!(one, [0, 0]);
}

/// The field elements `extract` should give, computed the plain way.
fn naive(records: &[u8], f: &FieldLayout, start: &[u64], count: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    let n: u64 = count.iter().product();
    for rec in records.chunks_exact(f.record) {
        for k in 0..n {
            // The k-th index of the block, C order.
            let mut rem = k;
            let mut pos = f.place.offset;
            for d in (0..count.len()).rev() {
                let i = rem % count[d];
                rem /= count[d];
                pos += (start[d] + i) * f.place.inner[d].1;
            }
            let mut e = rec[pos as usize..pos as usize + f.esize].to_vec();
            match f.fix {
                Fix::None => {}
                Fix::Swap => e.reverse(),
                Fix::SwapParts => {
                    let h = e.len() / 2;
                    e[..h].reverse();
                    e[h..].reverse();
                }
                Fix::Bool => e.iter_mut().for_each(|b| *b = u8::from(*b != 0)),
            }
            out.extend(e);
        }
    }
    out
}

fn layout_strategy() -> impl Strategy<Value = (FieldLayout, Vec<u64>, Vec<u64>, usize)> {
    (
        prop::sample::select(vec![1usize, 2, 4, 8, 16]),
        prop::collection::vec(1u64..4, 0..3),
        0usize..6,
        0usize..5,
        prop::sample::select(vec![Fix::None, Fix::Swap, Fix::SwapParts, Fix::Bool]),
    )
        .prop_flat_map(|(esize, dims, offset, pad, fix)| {
            let mut stride = esize as u64;
            let mut axes = Vec::new();
            for &d in dims.iter().rev() {
                axes.push((d, stride));
                stride *= d;
            }
            axes.reverse();
            let record = offset + stride as usize + pad;
            let f = FieldLayout {
                record,
                place: Place {
                    offset: offset as u64,
                    inner: axes,
                },
                esize,
                fix,
            };
            let starts: Vec<_> = dims.iter().map(|&d| 0..d).collect();
            (Just(f), starts, Just(dims), 0usize..4)
        })
        .prop_flat_map(|(f, start, dims, n)| {
            let counts: Vec<_> = start
                .iter()
                .zip(&dims)
                .map(|(&s, &d)| 0..=(d - s))
                .collect();
            (Just(f), Just(start), counts, Just(n))
        })
}

proptest! {
    /// `extract` gives exactly the plain computation's bytes, for any layout and block.
    #[test]
    fn extract_matches_the_plain_computation(
        (f, start, count, n) in layout_strategy(),
        seed in any::<u64>(),
    ) {
        let records = common::bytes(seed, f.record * n);
        let want = naive(&records, &f, &start, &count);
        let mut out = vec![0u8; want.len()];
        extract(&records, &f, &start, &count, &mut out).unwrap();
        prop_assert_eq!(out, want);
    }

    /// Arbitrary layouts, record bytes and output sizes never panic.
    #[test]
    fn extract_never_panics(
        record in 0usize..20,
        offset in 0usize..40,
        esize in 0usize..9,
        axes in prop::collection::vec((0u64..5, 0u64..50), 0..3),
        start in prop::collection::vec(0u64..6, 0..3),
        count in prop::collection::vec(0u64..6, 0..3),
        len in 0usize..100,
        out_len in 0usize..200,
    ) {
        let place = Place { offset: offset as u64, inner: axes };
        let f = FieldLayout { record, place, esize, fix: Fix::Swap };
        let records = vec![1u8; len];
        let mut out = vec![0u8; out_len];
        let _ = extract(&records, &f, &start, &count, &mut out);
    }

    /// Any JSON as a record dtype parses or is refused with a reason, never a panic.
    #[test]
    fn dtype_parsers_never_panic(v in json_strategy()) {
        let _ = tet_zarr::structured::parse_v2(&v);
        let wrapped = serde_json::json!({"name": "structured", "configuration": {"fields": v}});
        let _ = tet_zarr::structured::parse_v3(&wrapped);
    }
}

fn json_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<u32>().prop_map(Value::from),
        prop::sample::select(vec![
            "",
            "<i4",
            ">f8",
            "|V3",
            "|b1",
            "S0",
            "<U2",
            ">c16",
            "<M8[10s]",
            "<f16",
            "|O",
            "int8",
            "float64",
            "string",
            "r24",
            "r7",
            "<x",
            ">",
            "<i",
            "i99999999999999999999",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "name",
                        "configuration",
                        "length_bytes",
                        "fields",
                        "unit"
                    ]),
                    inner
                ),
                0..3
            )
            .prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
        ]
    })
}
