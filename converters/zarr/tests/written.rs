//! Stores written with zarrs itself (v3: every supported codec, sharding, missing chunks,
//! nested groups, the small types; v2: by zarrs and by hand) read back value for value,
//! over random sub-regions too.

use crate::common;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use serde_json::{json, Value};
use tet_source::{AttrValue, ElementType, Fact, Importer, OpenOptions, Role, Source, SourceError};
use tet_zarr::{open_store, ZarrImporter, ZarrSource};
use zarrs::array::{Array, ArraySubset};
use zarrs::filesystem::FilesystemStore;

use tet_testkit::{put_block, read_all, sub_block, var_index};

use common::{bytes, f32_bytes, store, write_meta, zarr_fact};

fn bytes_codec(endian: &str) -> Value {
    json!({"name": "bytes", "configuration": {"endian": endian}})
}

fn zstd(level: i32, checksum: bool) -> Value {
    json!({"name": "zstd", "configuration": {"level": level, "checksum": checksum}})
}

/// Zarr v3 array metadata.
fn v3(
    shape: &[u64],
    dtype: Value,
    chunks: &[u64],
    fill: Value,
    codecs: Vec<Value>,
    dims: Option<Value>,
    attrs: Value,
) -> String {
    let mut m = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": codecs,
        "attributes": attrs,
    });
    if let Some(d) = dims {
        m["dimension_names"] = d;
    }
    serde_json::to_string_pretty(&m).unwrap()
}

fn group(attrs: Value) -> String {
    json!({"zarr_format": 3, "node_type": "group", "attributes": attrs}).to_string()
}

/// One numeric array written to a test store and what it must read back as.
#[derive(Debug, Clone)]
struct Expect {
    name: &'static str,
    dtype: ElementType,
    shape: Vec<u64>,
    /// Little-endian C-order values.
    data: Vec<u8>,
    chunk_hint: Option<Vec<u64>>,
    compressed: bool,
}

fn fill_bytes(n: usize, value: &[u8]) -> Vec<u8> {
    value
        .iter()
        .copied()
        .cycle()
        .take(n * value.len())
        .collect()
}

/// Writes the v3 test store; returns what each numeric array must read as.
fn write_v3_store(root: &Path) -> Vec<Expect> {
    let mut out = Vec::new();
    write_meta(
        root,
        "",
        "zarr.json",
        &group(
            json!({"title": "written", "n": 3, "flag": true, "list": [1.5, 2],
                      "obj": {"b": [1, 2], "a": null}}),
        ),
    );
    write_meta(root, "grp", "zarr.json", &group(json!({"network": "toy"})));
    write_meta(root, "grp/sub", "zarr.json", &group(json!({"level": 2})));
    // Not part of the hierarchy: no metadata, or a reserved name.
    std::fs::create_dir_all(root.join("grp/junk")).unwrap();
    std::fs::write(root.join("grp/junk/readme.txt"), "not zarr").unwrap();
    write_meta(root, "__reserved", "zarr.json", &group(json!({})));

    // Plain little-endian bytes codec: the coordinate x.
    let x: Vec<u8> = (0..7)
        .flat_map(|i| (f64::from(i) * 1.5).to_le_bytes())
        .collect();
    write_meta(
        root,
        "x",
        "zarr.json",
        &v3(
            &[7],
            json!("float64"),
            &[7],
            json!(0.0),
            vec![bytes_codec("little")],
            Some(json!(["x"])),
            json!({"units": "m"}),
        ),
    );
    store(root, "x", &[0], &[7], x.clone());
    out.push(Expect {
        name: "x",
        dtype: ElementType::F64,
        shape: vec![7],
        data: x,
        chunk_hint: Some(vec![7]),
        compressed: false,
    });

    // A coordinate in a sub-group.
    let y: Vec<u8> = (0..11).flat_map(|i| (i as f32).to_le_bytes()).collect();
    write_meta(
        root,
        "grp/y",
        "zarr.json",
        &v3(
            &[11],
            json!("float32"),
            &[5],
            json!(0.0),
            vec![bytes_codec("little")],
            Some(json!(["y"])),
            json!({}),
        ),
    );
    store(root, "grp/y", &[0], &[11], y.clone());
    out.push(Expect {
        name: "grp/y",
        dtype: ElementType::F32,
        shape: vec![11],
        data: y,
        chunk_hint: Some(vec![5]),
        compressed: false,
    });

    // zstd with checksum, partial edge chunks.
    let d = f32_bytes(1, 9 * 11);
    write_meta(
        root,
        "grp/zstd_f32",
        "zarr.json",
        &v3(
            &[9, 11],
            json!("float32"),
            &[4, 5],
            json!("NaN"),
            vec![bytes_codec("little"), zstd(3, true)],
            Some(json!(["row", "y"])),
            json!({"long_name": "zstd data"}),
        ),
    );
    store(root, "grp/zstd_f32", &[0, 0], &[9, 11], d.clone());
    out.push(Expect {
        name: "grp/zstd_f32",
        dtype: ElementType::F32,
        shape: vec![9, 11],
        data: d,
        chunk_hint: Some(vec![4, 5]),
        compressed: true,
    });

    // gzip, rank 3.
    let d = bytes(2, 5 * 6 * 7 * 2);
    write_meta(
        root,
        "grp/sub/gzip_i16",
        "zarr.json",
        &v3(
            &[5, 6, 7],
            json!("int16"),
            &[2, 3, 4],
            json!(0),
            vec![
                bytes_codec("little"),
                json!({"name": "gzip", "configuration": {"level": 5}}),
            ],
            Some(json!(["a", "b", "c"])),
            json!({}),
        ),
    );
    store(root, "grp/sub/gzip_i16", &[0, 0, 0], &[5, 6, 7], d.clone());
    out.push(Expect {
        name: "grp/sub/gzip_i16",
        dtype: ElementType::I16,
        shape: vec![5, 6, 7],
        data: d,
        chunk_hint: Some(vec![2, 3, 4]),
        compressed: true,
    });

    // crc32c only (not a compressor).
    let d = bytes(3, 10 * 10 * 4);
    write_meta(
        root,
        "crc_u32",
        "zarr.json",
        &v3(
            &[10, 10],
            json!("uint32"),
            &[3, 3],
            json!(0),
            vec![bytes_codec("little"), json!({"name": "crc32c"})],
            None,
            json!({}),
        ),
    );
    store(root, "crc_u32", &[0, 0], &[10, 10], d.clone());
    out.push(Expect {
        name: "crc_u32",
        dtype: ElementType::U32,
        shape: vec![10, 10],
        data: d,
        chunk_hint: Some(vec![3, 3]),
        compressed: false,
    });

    // transpose + big-endian bytes + zstd.
    let d = bytes(4, 6 * 5 * 8);
    write_meta(
        root,
        "tr_u64",
        "zarr.json",
        &v3(
            &[6, 5],
            json!("uint64"),
            &[4, 4],
            json!(0),
            vec![
                json!({"name": "transpose", "configuration": {"order": [1, 0]}}),
                bytes_codec("big"),
                zstd(1, false),
            ],
            None,
            json!({}),
        ),
    );
    store(root, "tr_u64", &[0, 0], &[6, 5], d.clone());
    out.push(Expect {
        name: "tr_u64",
        dtype: ElementType::U64,
        shape: vec![6, 5],
        data: d,
        chunk_hint: Some(vec![4, 4]),
        compressed: true,
    });

    // Big-endian float32, bytes only.
    let d = f32_bytes(5, 5);
    write_meta(
        root,
        "be_f32",
        "zarr.json",
        &v3(
            &[5],
            json!("float32"),
            &[2],
            json!(0.0),
            vec![bytes_codec("big")],
            None,
            json!({}),
        ),
    );
    store(root, "be_f32", &[0], &[5], d.clone());
    out.push(Expect {
        name: "be_f32",
        dtype: ElementType::F32,
        shape: vec![5],
        data: d,
        chunk_hint: Some(vec![2]),
        compressed: false,
    });

    // Sharding (inner zstd, index with crc32c); only part written, so some inner chunks
    // and one whole shard are missing and read as the fill value.
    let shape = [16u64, 12];
    let sharding = json!({"name": "sharding_indexed", "configuration": {
        "chunk_shape": [4, 3],
        "codecs": [bytes_codec("little"), zstd(1, false)],
        "index_codecs": [bytes_codec("little"), {"name": "crc32c"}],
        "index_location": "end"}});
    write_meta(
        root,
        "sharded_i32",
        "zarr.json",
        &v3(
            &shape,
            json!("int32"),
            &[8, 6],
            json!(-1),
            vec![sharding],
            None,
            json!({}),
        ),
    );
    let mut full = fill_bytes(16 * 12, &(-1i32).to_le_bytes());
    let part = bytes(6, 9 * 7 * 4);
    store(root, "sharded_i32", &[1, 2], &[9, 7], part.clone());
    put_block(&mut full, &shape, 4, &[1, 2], &[9, 7], &part);
    out.push(Expect {
        name: "sharded_i32",
        dtype: ElementType::I32,
        shape: shape.to_vec(),
        data: full,
        chunk_hint: Some(vec![4, 3]),
        compressed: true,
    });

    // Sharding behind a transpose: the inner chunk shape is given in transposed order.
    let sharding = json!({"name": "sharding_indexed", "configuration": {
        "chunk_shape": [4, 5],
        "codecs": [bytes_codec("little")],
        "index_codecs": [bytes_codec("little")],
        "index_location": "start"}});
    let d = bytes(7, 10 * 12 * 2);
    write_meta(
        root,
        "sharded_tr_u16",
        "zarr.json",
        &v3(
            &[10, 12],
            json!("uint16"),
            &[10, 12],
            json!(0),
            vec![
                json!({"name": "transpose", "configuration": {"order": [1, 0]}}),
                sharding,
            ],
            None,
            json!({}),
        ),
    );
    store(root, "sharded_tr_u16", &[0, 0], &[10, 12], d.clone());
    out.push(Expect {
        name: "sharded_tr_u16",
        dtype: ElementType::U16,
        shape: vec![10, 12],
        data: d,
        chunk_hint: Some(vec![5, 4]),
        compressed: false,
    });

    // Missing chunks with a NaN fill value.
    let shape = [10u64, 10];
    write_meta(
        root,
        "missing_f32",
        "zarr.json",
        &v3(
            &shape,
            json!("float32"),
            &[4, 4],
            json!("NaN"),
            vec![bytes_codec("little"), zstd(3, false)],
            None,
            json!({}),
        ),
    );
    let mut full = fill_bytes(100, &f32::NAN.to_le_bytes());
    let a = f32_bytes(8, 16);
    let b = f32_bytes(9, 4);
    store(root, "missing_f32", &[0, 0], &[4, 4], a.clone());
    store(root, "missing_f32", &[5, 8], &[2, 2], b.clone());
    put_block(&mut full, &shape, 4, &[0, 0], &[4, 4], &a);
    put_block(&mut full, &shape, 4, &[5, 8], &[2, 2], &b);
    assert!(!root.join("missing_f32/c/2/2").exists());
    out.push(Expect {
        name: "missing_f32",
        dtype: ElementType::F32,
        shape: shape.to_vec(),
        data: full,
        chunk_hint: Some(vec![4, 4]),
        compressed: true,
    });

    // int8 with a fill value of 7, partly written.
    let shape = [7u64, 9];
    write_meta(
        root,
        "small_i8",
        "zarr.json",
        &v3(
            &shape,
            json!("int8"),
            &[3, 3],
            json!(7),
            vec![bytes_codec("little")],
            None,
            json!({}),
        ),
    );
    let mut full = vec![7u8; 63];
    let part = bytes(10, 2 * 6);
    store(root, "small_i8", &[1, 2], &[2, 6], part.clone());
    put_block(&mut full, &shape, 1, &[1, 2], &[2, 6], &part);
    out.push(Expect {
        name: "small_i8",
        dtype: ElementType::I8,
        shape: shape.to_vec(),
        data: full,
        chunk_hint: Some(vec![3, 3]),
        compressed: false,
    });

    // bool.
    let d: Vec<u8> = bytes(11, 13).iter().map(|b| b & 1).collect();
    write_meta(
        root,
        "flags",
        "zarr.json",
        &v3(
            &[13],
            json!("bool"),
            &[5],
            json!(false),
            vec![bytes_codec("little")],
            None,
            json!({}),
        ),
    );
    store(root, "flags", &[0], &[13], d.clone());
    out.push(Expect {
        name: "flags",
        dtype: ElementType::Bool,
        shape: vec![13],
        data: d,
        chunk_hint: Some(vec![5]),
        compressed: false,
    });

    // float16 and bfloat16 (finite values).
    let d: Vec<u8> = (0..8u16)
        .flat_map(|i| (0x3c00 + i * 0x111).to_le_bytes())
        .collect();
    write_meta(
        root,
        "half",
        "zarr.json",
        &v3(
            &[8],
            json!("float16"),
            &[3],
            json!(0.0),
            vec![bytes_codec("little"), zstd(1, false)],
            None,
            json!({}),
        ),
    );
    store(root, "half", &[0], &[8], d.clone());
    out.push(Expect {
        name: "half",
        dtype: ElementType::F16,
        shape: vec![8],
        data: d,
        chunk_hint: Some(vec![3]),
        compressed: true,
    });
    let d: Vec<u8> = (0..5u16)
        .flat_map(|i| (0x3f80 + i * 0x21).to_le_bytes())
        .collect();
    write_meta(
        root,
        "bf",
        "zarr.json",
        &v3(
            &[5],
            json!("bfloat16"),
            &[5],
            json!(0.0),
            vec![bytes_codec("little")],
            None,
            json!({}),
        ),
    );
    store(root, "bf", &[0], &[5], d.clone());
    out.push(Expect {
        name: "bf",
        dtype: ElementType::BF16,
        shape: vec![5],
        data: d,
        chunk_hint: Some(vec![5]),
        compressed: false,
    });

    // Every integer type, little and big endian, through the same chain.
    for (i, (name, t)) in [
        ("int16", ElementType::I16),
        ("int32", ElementType::I32),
        ("int64", ElementType::I64),
        ("uint8", ElementType::U8),
        ("uint16", ElementType::U16),
        ("uint32", ElementType::U32),
        ("uint64", ElementType::U64),
        ("float64", ElementType::F64),
    ]
    .into_iter()
    .enumerate()
    {
        let rel: &'static str = Box::leak(format!("types/{name}").into_boxed_str());
        if i == 0 {
            write_meta(root, "types", "zarr.json", &group(json!({})));
        }
        let endian = if i % 2 == 0 { "big" } else { "little" };
        let d = if t == ElementType::F64 {
            (0..12)
                .flat_map(|k| (f64::from(k) / 3.0).to_le_bytes())
                .collect()
        } else {
            bytes(20 + i as u64, 12 * t.size())
        };
        write_meta(
            root,
            rel,
            "zarr.json",
            &v3(
                &[3, 4],
                json!(name),
                &[2, 3],
                json!(0),
                vec![bytes_codec(endian)],
                None,
                json!({}),
            ),
        );
        store(root, rel, &[0, 0], &[3, 4], d.clone());
        out.push(Expect {
            name: rel,
            dtype: t,
            shape: vec![3, 4],
            data: d,
            chunk_hint: Some(vec![2, 3]),
            compressed: false,
        });
    }

    // A 0-d scalar.
    write_meta(
        root,
        "scalar",
        "zarr.json",
        &v3(
            &[],
            json!("float64"),
            &[],
            json!(0.0),
            vec![bytes_codec("little")],
            None,
            json!({"units": "K"}),
        ),
    );
    let d = 273.15f64.to_le_bytes().to_vec();
    store(root, "scalar", &[], &[], d.clone());
    out.push(Expect {
        name: "scalar",
        dtype: ElementType::F64,
        shape: vec![],
        data: d,
        chunk_hint: None,
        compressed: false,
    });

    // Partial dimension names.
    write_meta(
        root,
        "partial_dims",
        "zarr.json",
        &v3(
            &[2, 3],
            json!("uint8"),
            &[2, 3],
            json!(0),
            vec![bytes_codec("little")],
            Some(json!(["a", null])),
            json!({}),
        ),
    );
    let d = bytes(30, 6);
    store(root, "partial_dims", &[0, 0], &[2, 3], d.clone());
    out.push(Expect {
        name: "partial_dims",
        dtype: ElementType::U8,
        shape: vec![2, 3],
        data: d,
        chunk_hint: Some(vec![2, 3]),
        compressed: false,
    });

    // Complex: one complex64 variable of (real, imaginary) pairs.
    write_meta(
        root,
        "cplx",
        "zarr.json",
        &v3(
            &[4],
            json!("complex64"),
            &[3],
            json!([0.0, 0.0]),
            vec![bytes_codec("little")],
            Some(json!(["k"])),
            json!({"kind": "wave"}),
        ),
    );
    let c: Vec<u8> = (0..4)
        .flat_map(|i| {
            let mut v = (i as f32 + 0.5).to_le_bytes().to_vec();
            v.extend_from_slice(&(-(i as f32)).to_le_bytes());
            v
        })
        .collect();
    store(root, "cplx", &[0], &[4], c.clone());
    out.push(Expect {
        name: "cplx",
        dtype: ElementType::C64,
        shape: vec![4],
        data: c,
        chunk_hint: Some(vec![3]),
        compressed: false,
    });

    // Strings.
    write_meta(
        root,
        "grp/names",
        "zarr.json",
        &v3(
            &[2, 2],
            json!("string"),
            &[1, 2],
            json!(""),
            vec![json!({"name": "vlen-utf8"})],
            Some(json!(["p", "q"])),
            json!({"note": "labels"}),
        ),
    );
    let fs = Arc::new(FilesystemStore::new(root).unwrap());
    let a = Array::open(fs, "/grp/names").unwrap();
    a.store_array_subset(
        &ArraySubset::new_with_shape(vec![2, 2]),
        &["a", "bé", "", "xyz"][..],
    )
    .unwrap();
    out
}

struct Written {
    _dir: tempfile::TempDir,
    src: ZarrSource,
    expect: Vec<Expect>,
}

fn written() -> &'static Written {
    static W: OnceLock<Written> = OnceLock::new();
    W.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("written.zarr");
        let expect = write_v3_store(&root);
        let src = open_store(&root, &OpenOptions::default()).unwrap();
        Written {
            _dir: dir,
            src,
            expect,
        }
    })
}

#[test]
fn v3_store_reads_back_what_was_written() {
    let w = written();
    let src: &dyn Source = &w.src;
    assert!(src.skipped().is_empty(), "{:?}", src.skipped());
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names.len(), w.expect.len(), "{names:?}");
    // Sorted by array name.
    assert!(names.windows(2).all(|w| w[0] <= w[1]), "{names:?}");
    for e in &w.expect {
        let i = var_index(src, e.name);
        let v = &src.variables()[i];
        assert_eq!(v.dtype, e.dtype, "{}", e.name);
        assert_eq!(v.shape, e.shape, "{}", e.name);
        assert_eq!(read_all(src, i), e.data, "{}: values", e.name);
        assert_eq!(v.layout.chunk_shape, e.chunk_hint, "{}: chunk hint", e.name);
        assert_eq!(
            v.layout.compressed, e.compressed,
            "{}: compressed {:?}",
            e.name, v.layout.filters
        );
    }
}

#[test]
fn v3_store_metadata() {
    let w = written();
    let src: &dyn Source = &w.src;
    let v = |n: &str| &src.variables()[var_index(src, n)];
    // Coordinates by the xarray convention, at the root and in a group.
    assert_eq!(v("x").role, Role::Coordinate);
    assert_eq!(v("grp/y").role, Role::Coordinate);
    assert_eq!(v("grp/zstd_f32").role, Role::Data);
    assert_eq!(v("grp/zstd_f32").dims, Some(vec!["row".into(), "y".into()]));
    assert_eq!(
        v("x").attrs,
        vec![("units".into(), AttrValue::Text("m".into()))]
    );
    // Sharding: the inner codecs are listed.
    let f = &v("sharded_i32").layout.filters;
    assert!(
        f[0].starts_with("sharding_indexed(chunk_shape=[4,3]"),
        "{f:?}"
    );
    assert!(
        f.contains(&"inner:zstd(level=1,checksum=false)".to_string()),
        "{f:?}"
    );
    assert_eq!(
        v("tr_u64").layout.filters,
        vec![
            "transpose(order=[1,0])",
            "bytes(endian=\"big\")",
            "zstd(level=1,checksum=false)"
        ]
    );
    // A 0-d scalar is a 0-d variable (the engine notes how it stores it, not the importer).
    let s = v("scalar");
    assert_eq!(s.shape, Vec::<u64>::new());
    assert!(s.notes.is_empty());
    assert_eq!(s.dims, None);
    assert_eq!(s.layout.chunk_shape, None);
    // Partial dimension names are kept as a fact only.
    let p = v("partial_dims");
    assert_eq!(p.dims, None);
    assert!(zarr_fact(&p.facts, "zarr_dimension_names").is_some());
    // A complex array is one variable, with its dimensions and attributes, and nothing said
    // about complex numbers (the engine splits it and records that).
    let c = v("cplx");
    assert_eq!(c.dims, Some(vec!["k".into()]));
    assert_eq!(
        c.attrs,
        vec![("kind".into(), AttrValue::Text("wave".into()))]
    );
    assert!(c.notes.is_empty(), "{:?}", c.notes);
    assert_eq!(
        c.facts
            .iter()
            .flat_map(Fact::entries)
            .map(|(k, _)| k)
            .collect::<Vec<_>>(),
        ["zarr_fill_value"]
    );
    // Fill value fact.
    assert_eq!(
        zarr_fact(&v("missing_f32").facts, "zarr_fill_value"),
        Some(&AttrValue::Text("\"NaN\"".into()))
    );
    // Global attributes: root, then groups by path.
    let g: Vec<(String, AttrValue)> = src.global_attrs().to_vec();
    assert_eq!(
        g,
        vec![
            ("title".into(), AttrValue::Text("written".into())),
            ("n".into(), AttrValue::I64(vec![3])),
            ("flag".into(), AttrValue::U8(vec![1])),
            ("list".into(), AttrValue::F64(vec![1.5, 2.0])),
            (
                "obj".into(),
                AttrValue::Text(r#"{"b":[1,2],"a":null}"#.into())
            ),
            ("grp/network".into(), AttrValue::Text("toy".into())),
            ("grp/sub/level".into(), AttrValue::I64(vec![2])),
        ]
    );
    // Strings.
    let t = src.text_variables();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].name, "grp/names");
    assert_eq!(t[0].shape, vec![2, 2]);
    assert_eq!(t[0].dims, Some(vec!["p".into(), "q".into()]));
    assert_eq!(t[0].values, vec!["a", "bé", "", "xyz"]);
    assert_eq!(
        t[0].attrs,
        vec![("note".into(), AttrValue::Text("labels".into()))]
    );
    // Nothing from directories outside the hierarchy.
    assert!(!src
        .variables()
        .iter()
        .any(|v| v.name.contains("junk") || v.name.contains("__")));
}

#[test]
fn bool_bytes_are_normalised() {
    // A bool chunk holding a 2 still reads as 0/1.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("b.zarr");
    write_meta(
        &root,
        "",
        "zarr.json",
        &v3(
            &[4],
            json!("bool"),
            &[4],
            json!(false),
            vec![bytes_codec("little")],
            None,
            json!({}),
        ),
    );
    std::fs::create_dir_all(root.join("c")).unwrap();
    std::fs::write(root.join("c/0"), [0u8, 1, 2, 255]).unwrap();
    let src = open_store(&root, &OpenOptions::default()).unwrap();
    assert_eq!(src.variables()[0].name, "b");
    assert_eq!(read_all(&src, 0), vec![0, 1, 1, 1]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn random_regions_match(which in 0usize..64, picks in proptest::collection::vec(any::<u64>(), 16)) {
        let w = written();
        let e = &w.expect[which % w.expect.len()];
        let i = var_index(&w.src, e.name);
        let rank = e.shape.len();
        let mut start = Vec::with_capacity(rank);
        let mut count = Vec::with_capacity(rank);
        for d in 0..rank {
            let len = e.shape[d];
            let s = picks[2 * d] % len;
            let c = picks[2 * d + 1] % (len - s + 1);
            start.push(s);
            count.push(c);
        }
        let elem = e.dtype.size();
        let n: u64 = count.iter().product();
        let mut out = vec![0x55u8; n as usize * elem];
        w.src.read_region(i, &start, &count, &mut out).unwrap();
        prop_assert_eq!(out, sub_block(&e.data, &e.shape, elem, &start, &count));
    }
}

/// A Zarr v2 store: metadata written by hand, chunks by hand (raw) and by zarrs (gzip,
/// zstd, Fortran order, big-endian).
fn write_v2_store(root: &Path) -> Vec<Expect> {
    let mut out = Vec::new();
    write_meta(root, "", ".zgroup", r#"{"zarr_format": 2}"#);
    write_meta(
        root,
        "",
        ".zattrs",
        r#"{"title": "v2 sample", "version": 2}"#,
    );
    write_meta(root, "g", ".zgroup", r#"{"zarr_format": 2}"#);
    write_meta(root, "g", ".zattrs", r#"{"k": "v"}"#);
    let zarray = |shape: &[u64],
                  chunks: &[u64],
                  dtype: &str,
                  compressor: Value,
                  fill: Value,
                  order: &str,
                  extra: Value| {
        let mut m = json!({"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": dtype,
                           "compressor": compressor, "fill_value": fill, "order": order,
                           "filters": null});
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        m.to_string()
    };

    // Raw chunks written by hand; the padded edge chunk holds garbage past the end.
    write_meta(
        root,
        "lat",
        ".zarray",
        &zarray(&[6], &[4], "<f8", Value::Null, json!("NaN"), "C", json!({})),
    );
    write_meta(
        root,
        "lat",
        ".zattrs",
        r#"{"_ARRAY_DIMENSIONS": ["lat"], "units": "deg"}"#,
    );
    let lat: Vec<u8> = (0..6)
        .flat_map(|i| (f64::from(i) * 10.0 - 25.0).to_le_bytes())
        .collect();
    std::fs::write(root.join("lat/0"), &lat[..32]).unwrap();
    let mut edge = lat[32..].to_vec();
    edge.extend_from_slice(&[0xEE; 16]);
    std::fs::write(root.join("lat/1"), &edge).unwrap();
    out.push(Expect {
        name: "lat",
        dtype: ElementType::F64,
        shape: vec![6],
        data: lat,
        chunk_hint: Some(vec![4]),
        compressed: false,
    });

    // gzip by zarrs.
    write_meta(
        root,
        "temp",
        ".zarray",
        &zarray(
            &[6, 7],
            &[4, 4],
            "<f4",
            json!({"id": "gzip", "level": 5}),
            json!(0.0),
            "C",
            json!({}),
        ),
    );
    write_meta(
        root,
        "temp",
        ".zattrs",
        r#"{"_ARRAY_DIMENSIONS": ["lat", "lon"], "units": "K", "valid": [1, 2]}"#,
    );
    let d = f32_bytes(40, 42);
    store(root, "temp", &[0, 0], &[6, 7], d.clone());
    out.push(Expect {
        name: "temp",
        dtype: ElementType::F32,
        shape: vec![6, 7],
        data: d,
        chunk_hint: Some(vec![4, 4]),
        compressed: true,
    });

    // Big-endian int64 in Fortran order, uncompressed: check one chunk file by hand too.
    write_meta(
        root,
        "g/be_i64",
        ".zarray",
        &zarray(
            &[5, 3],
            &[2, 2],
            ">i8",
            Value::Null,
            json!(0),
            "F",
            json!({}),
        ),
    );
    let vals: Vec<i64> = (0..15).map(|i| i * 1000 - 7000).collect();
    let d: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    store(root, "g/be_i64", &[0, 0], &[5, 3], d.clone());
    let chunk = std::fs::read(root.join("g/be_i64/0.0")).unwrap();
    let want: Vec<u8> = [vals[0], vals[3], vals[1], vals[4]]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    assert_eq!(chunk, want, "v2 F-order big-endian chunk layout");
    out.push(Expect {
        name: "g/be_i64",
        dtype: ElementType::I64,
        shape: vec![5, 3],
        data: d,
        chunk_hint: Some(vec![2, 2]),
        compressed: false,
    });

    // zstd with "/" dimension separator.
    write_meta(
        root,
        "g/zs",
        ".zarray",
        &zarray(
            &[3, 4],
            &[2, 2],
            "<u2",
            json!({"id": "zstd", "level": 1}),
            json!(0),
            "C",
            json!({"dimension_separator": "/"}),
        ),
    );
    let d = bytes(41, 24);
    store(root, "g/zs", &[0, 0], &[3, 4], d.clone());
    assert!(root.join("g/zs/1/1").is_file());
    out.push(Expect {
        name: "g/zs",
        dtype: ElementType::U16,
        shape: vec![3, 4],
        data: d,
        chunk_hint: Some(vec![2, 2]),
        compressed: true,
    });

    // bool, int8, float16, by hand.
    write_meta(
        root,
        "flags",
        ".zarray",
        &zarray(&[5], &[5], "|b1", Value::Null, json!(false), "C", json!({})),
    );
    std::fs::write(root.join("flags/0"), [1u8, 0, 0, 1, 1]).unwrap();
    out.push(Expect {
        name: "flags",
        dtype: ElementType::Bool,
        shape: vec![5],
        data: vec![1, 0, 0, 1, 1],
        chunk_hint: Some(vec![5]),
        compressed: false,
    });
    write_meta(
        root,
        "small",
        ".zarray",
        &zarray(&[4], &[4], "|i1", Value::Null, json!(0), "C", json!({})),
    );
    std::fs::write(root.join("small/0"), [0x80u8, 0xff, 0, 0x7f]).unwrap();
    out.push(Expect {
        name: "small",
        dtype: ElementType::I8,
        shape: vec![4],
        data: vec![0x80, 0xff, 0, 0x7f],
        chunk_hint: Some(vec![4]),
        compressed: false,
    });
    write_meta(
        root,
        "h",
        ".zarray",
        &zarray(&[3], &[3], "<f2", Value::Null, json!(0.0), "C", json!({})),
    );
    let h: Vec<u8> = [0x3c00u16, 0xc000, 0x7bff]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(root.join("h/0"), &h).unwrap();
    out.push(Expect {
        name: "h",
        dtype: ElementType::F16,
        shape: vec![3],
        data: h,
        chunk_hint: Some(vec![3]),
        compressed: false,
    });

    // Fixed-length UTF-32 strings, by hand.
    write_meta(
        root,
        "names",
        ".zarray",
        &zarray(&[3], &[3], "<U3", Value::Null, json!(""), "C", json!({})),
    );
    let mut u = Vec::new();
    for s in ["ab", "", "xyz"] {
        let mut cps: Vec<u32> = s.chars().map(u32::from).collect();
        cps.resize(3, 0);
        u.extend(cps.iter().flat_map(|c| c.to_le_bytes()));
    }
    std::fs::write(root.join("names/0"), &u).unwrap();
    out
}

#[test]
fn v2_store_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("legacy.zarr");
    let expect = write_v2_store(&root);
    assert_eq!(
        ZarrImporter.identify(&root, &[]),
        tet_source::Confidence::Magic
    );
    let src = ZarrImporter.open(&root, &OpenOptions::default()).unwrap();
    let src: &dyn Source = src.as_ref();
    for e in &expect {
        let i = var_index(src, e.name);
        let v = &src.variables()[i];
        assert_eq!(v.dtype, e.dtype, "{}", e.name);
        assert_eq!(v.shape, e.shape, "{}", e.name);
        assert_eq!(read_all(src, i), e.data, "{}: values", e.name);
        assert_eq!(v.layout.chunk_shape, e.chunk_hint, "{}", e.name);
        assert_eq!(v.layout.compressed, e.compressed, "{}", e.name);
        let elem = v.dtype.size();
        for k in 0..e.shape[0] {
            let mut start = vec![0; e.shape.len()];
            start[0] = k;
            let mut count = e.shape.clone();
            count[0] = e.shape[0] - k;
            let n: u64 = count.iter().product();
            let mut out = vec![0u8; n as usize * elem];
            src.read_region(i, &start, &count, &mut out).unwrap();
            assert_eq!(out, sub_block(&e.data, &e.shape, elem, &start, &count));
        }
    }
    let v = |n: &str| &src.variables()[var_index(src, n)];
    // xarray dims; `_ARRAY_DIMENSIONS` is not repeated as an attribute.
    assert_eq!(v("lat").role, Role::Coordinate);
    assert_eq!(v("lat").dims, Some(vec!["lat".into()]));
    assert_eq!(
        v("lat").attrs,
        vec![("units".into(), AttrValue::Text("deg".into()))]
    );
    assert_eq!(v("temp").dims, Some(vec!["lat".into(), "lon".into()]));
    assert_eq!(
        v("temp").attrs,
        vec![
            ("units".into(), AttrValue::Text("K".into())),
            ("valid".into(), AttrValue::I64(vec![1, 2]))
        ]
    );
    assert_eq!(v("g/be_i64").dims, None);
    assert!(v("g/be_i64")
        .layout
        .filters
        .contains(&"order=F".to_string()));
    assert_eq!(v("g/zs").dtype, ElementType::U16);
    assert_eq!(
        src.global_attrs(),
        &[
            ("title".to_string(), AttrValue::Text("v2 sample".into())),
            ("version".to_string(), AttrValue::I64(vec![2])),
            ("g/k".to_string(), AttrValue::Text("v".into())),
        ]
    );
    let t = src.text_variables();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].values, vec!["ab", "", "xyz"]);
}

#[test]
fn unsupported_codecs_are_refused_by_name_or_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("b.zarr");
    write_meta(&root, "", ".zgroup", r#"{"zarr_format": 2}"#);
    write_meta(
        &root,
        "ok",
        ".zarray",
        &json!({"zarr_format": 2, "shape": [2], "chunks": [2],
        "dtype": "<i4", "compressor": null, "fill_value": 5, "order": "C", "filters": null})
        .to_string(),
    );
    write_meta(
        &root,
        "packed",
        ".zarray",
        &json!({"zarr_format": 2, "shape": [2], "chunks": [2],
        "dtype": "<i4", "compressor": {"id": "lzma", "format": 3, "check": -1, "preset": null, "filters": [{"id": 33, "dist": 4}, {"id": 33}]}, "fill_value": 0, "order": "C",
        "filters": null})
        .to_string(),
    );
    write_meta(
        &root,
        "v3lzma",
        "zarr.json",
        &v3(
            &[2],
            json!("int32"),
            &[2],
            json!(0),
            vec![
                bytes_codec("little"),
                json!({"name": "numcodecs.lzma", "configuration": {"format": 3, "check": -1,
                    "filters": [{"id": 33}]}}),
            ],
            None,
            json!({}),
        ),
    );
    let err = ZarrImporter
        .open(&root, &OpenOptions::default())
        .err()
        .expect("raw lzma (a custom filter chain, not read) must be refused");
    assert!(matches!(err, SourceError::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("lzma"), "{err}");
    let src = ZarrImporter
        .open(
            &root,
            &OpenOptions {
                skip_unsupported: true,
                ..OpenOptions::default()
            },
        )
        .unwrap();
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["ok"]);
    assert_eq!(
        read_all(src.as_ref(), 0),
        [5i32, 5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>()
    );
    let skipped: Vec<&str> = src.skipped().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(skipped, ["packed", "v3lzma"]);
    assert!(
        src.skipped().iter().all(|s| s.reason.contains("lzma")),
        "{:?}",
        src.skipped()
    );
}

#[test]
fn source_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<ZarrSource>();
}

#[test]
fn datetime64_reads_as_int64_counts() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t.zarr");
    let dt = json!({"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 1}});
    write_meta(
        &root,
        "",
        "zarr.json",
        &v3(
            &[3],
            dt,
            &[2],
            json!("NaT"),
            vec![bytes_codec("little")],
            None,
            json!({}),
        ),
    );
    let d: Vec<u8> = [0i64, 86400, i64::MIN]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    store(&root, "", &[0], &[3], d.clone());
    let src = open_store(&root, &OpenOptions::default()).unwrap();
    let v = &src.variables()[0];
    assert_eq!(v.dtype, ElementType::I64);
    assert!(
        v.notes.iter().any(|n| n.contains("numpy.datetime64")),
        "{:?}",
        v.notes
    );
    assert!(zarr_fact(&v.facts, "zarr_data_type").is_some());
    assert_eq!(read_all(&src, 0), d);
}

/// Complex numbers whose parts have no complex element type (`complex_float16`) are delivered
/// as their real and imaginary parts, noted, with the data type in the facts; a 0-d
/// `complex128` is one 0-d complex variable.
#[test]
fn complex_without_a_complex_element_type_and_0d_complex() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("c.zarr");
    write_meta(&root, "", "zarr.json", &group(json!({})));
    write_meta(
        &root,
        "h",
        "zarr.json",
        &v3(
            &[3],
            json!("complex_float16"),
            &[3],
            json!([0.0, 0.0]),
            vec![bytes_codec("little")],
            None,
            json!({}),
        ),
    );
    // (1 + 2i), (3 + 4i), (5 + 6i) as f16 bit patterns.
    let halves: [u16; 6] = [0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600];
    let d: Vec<u8> = halves.iter().flat_map(|h| h.to_le_bytes()).collect();
    store(&root, "h", &[0], &[3], d.clone());
    write_meta(
        &root,
        "z",
        "zarr.json",
        &v3(
            &[],
            json!("complex128"),
            &[],
            json!([0.0, 0.0]),
            vec![bytes_codec("big")],
            None,
            json!({}),
        ),
    );
    // `store` takes native (little-endian) bytes; the `bytes` codec writes them big-endian.
    let z: Vec<u8> = [1.5f64.to_le_bytes(), (-2.5f64).to_le_bytes()].concat();
    store(&root, "z", &[], &[], z);
    let src = open_store(&root, &OpenOptions::default()).unwrap();
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["h/real", "h/imag", "z"]);
    for (i, part) in ["real", "imag"].iter().enumerate() {
        let v = &src.variables()[i];
        assert_eq!(v.dtype, ElementType::F16);
        assert_eq!(v.shape, vec![3]);
        let want: Vec<u8> = d
            .chunks_exact(4)
            .flat_map(|e| e[2 * i..2 * i + 2].to_vec())
            .collect();
        assert_eq!(read_all(&src, i), want, "{part}");
        assert!(
            v.notes
                .contains(&format!("{part} part of the complex_float16 array 'h'")),
            "{:?}",
            v.notes
        );
        assert!(zarr_fact(&v.facts, "zarr_data_type").is_some());
    }
    let v = &src.variables()[2];
    assert_eq!((v.dtype, v.shape.len()), (ElementType::C128, 0));
    assert!(v.notes.is_empty());
    assert_eq!(
        read_all(&src, 2),
        [1.5f64.to_le_bytes(), (-2.5f64).to_le_bytes()].concat()
    );
}
