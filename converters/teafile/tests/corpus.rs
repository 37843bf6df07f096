//! Every public corpus TeaFile against its `.expect.json` sidecar, plus every truncation of it.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tet_source::{AttrValue, Confidence, ElementType, Importer, OpenOptions, Role, Source};
use tet_teafile::{open_bytes, ByteOrder, TeaImporter};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/public/teafile")
}

fn corpus_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("corpus directory ../shared/corpus/public/teafile")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tea"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .tea files in the corpus");
    files
}

fn sidecar(path: &Path) -> Value {
    let mut p = path.as_os_str().to_owned();
    p.push(".expect.json");
    let text = std::fs::read_to_string(PathBuf::from(p)).expect("sidecar");
    serde_json::from_str(&text).expect("sidecar JSON")
}

/// The whole variable as little-endian bytes of its element type, read in a few pieces.
fn read_all(src: &dyn Source, var: usize) -> Vec<u8> {
    let v = &src.variables()[var];
    let n = v.shape[0];
    let size = v.dtype.size();
    let mut out = vec![0u8; n as usize * size];
    // Read in uneven pieces to exercise region offsets.
    let mut start = 0u64;
    let mut step = 1u64;
    while start < n {
        let c = step.min(n - start);
        let a = start as usize * size;
        let b = (start + c) as usize * size;
        src.read_region(var, &[start], &[c], &mut out[a..b])
            .expect("read_region");
        start += c;
        step = step * 2 + 1;
    }
    let mut whole = vec![0u8; out.len()];
    src.read_region(var, &[0], &[n], &mut whole).unwrap();
    assert_eq!(whole, out, "piecewise and whole reads differ");
    if let Some(c) = src.contiguous_bytes(var) {
        assert_eq!(c, &out[..], "contiguous_bytes differs from read_region");
    }
    out
}

/// Bytes as the sidecar hashes them: in the stored dtype (i8 widened to i16).
fn stored_bytes(dtype: ElementType, bytes: Vec<u8>) -> Vec<u8> {
    match dtype {
        ElementType::I8 => bytes
            .iter()
            .flat_map(|&b| i16::from(b as i8).to_le_bytes())
            .collect(),
        ElementType::Bool => bytes,
        _ => bytes,
    }
}

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Compares a typed attribute with a sidecar JSON value: numbers by value, strings exactly,
/// booleans as 0/1.
fn attr_matches(attr: &AttrValue, json: &Value) -> bool {
    fn one<T: Copy>(v: &[T]) -> Option<T> {
        (v.len() == 1).then(|| v[0])
    }
    let int = |x: i128| match json {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or(n.as_u64().map(i128::from))
            .is_some_and(|j| j == x),
        Value::Bool(b) => i128::from(*b) == x,
        _ => false,
    };
    let float = |x: f64| match json {
        Value::Number(n) => n.as_f64().is_some_and(|j| j == x),
        Value::String(s) => match s.as_str() {
            "NaN" => x.is_nan(),
            "Infinity" => x == f64::INFINITY,
            "-Infinity" => x == f64::NEG_INFINITY,
            _ => false,
        },
        _ => false,
    };
    match attr {
        AttrValue::Text(s) => json.as_str() == Some(s.as_str()),
        AttrValue::I8(v) => one(v).is_some_and(|x| int(x.into())),
        AttrValue::U8(v) => one(v).is_some_and(|x| int(x.into())),
        AttrValue::I16(v) => one(v).is_some_and(|x| int(x.into())),
        AttrValue::U16(v) => one(v).is_some_and(|x| int(x.into())),
        AttrValue::I32(v) => one(v).is_some_and(|x| int(x.into())),
        AttrValue::U32(v) => one(v).is_some_and(|x| int(x.into())),
        AttrValue::I64(v) => one(v).is_some_and(|x| int(x.into())),
        AttrValue::U64(v) => one(v).is_some_and(|x| int(x.into())),
        AttrValue::F32(v) => one(v).is_some_and(|x| float(x.into())),
        AttrValue::F64(v) => one(v).is_some_and(float),
        AttrValue::TextList(_) => false,
    }
}

fn find<'a>(attrs: &'a [(String, AttrValue)], key: &str) -> Option<&'a AttrValue> {
    attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn check_file(path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let expect = sidecar(path);
    let opened = TeaImporter.open(path, &OpenOptions::default());
    if let Some(err) = expect.get("expect_error") {
        let e = opened
            .err()
            .unwrap_or_else(|| panic!("{name}: expected error {err}"));
        eprintln!("{name}: refused as expected: {e}");
        return;
    }
    let src = opened.unwrap_or_else(|e| panic!("{name}: {e}"));
    let arrays = expect["arrays"].as_array().unwrap();
    assert_eq!(
        src.variables().len(),
        arrays.len(),
        "{name}: variable count"
    );
    assert!(
        src.skipped().is_empty(),
        "{name}: skipped {:?}",
        src.skipped()
    );

    for (i, a) in arrays.iter().enumerate() {
        let aname = a["name"].as_str().unwrap();
        let var_index = src
            .variables()
            .iter()
            .position(|v| v.name == aname)
            .unwrap_or_else(|| panic!("{name}: no variable {aname}"));
        assert_eq!(var_index, i, "{name}: variable order");
        let v = &src.variables()[var_index];
        let shape: Vec<u64> = a["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(v.shape, shape, "{name}/{aname}: shape");
        let dims: Option<Vec<String>> = a["dims"]
            .as_array()
            .map(|d| d.iter().map(|x| x.as_str().unwrap().to_string()).collect());
        assert_eq!(v.dims, dims, "{name}/{aname}: dims");
        let role = match a["role"].as_str().unwrap() {
            "coordinate" => Role::Coordinate,
            "data" => Role::Data,
            r => panic!("{name}/{aname}: unexpected role {r}"),
        };
        assert_eq!(v.role, role, "{name}/{aname}: role");
        let source_tag = a["source_tag"].as_str().unwrap();
        assert_eq!(v.dtype.name(), source_tag, "{name}/{aname}: dtype");
        assert_eq!(v.layout.chunk_shape, None);
        assert!(!v.layout.compressed);

        let bytes = stored_bytes(v.dtype, read_all(src.as_ref(), var_index));
        assert_eq!(
            bytes.len() as u64,
            a["nbytes_stored"].as_u64().unwrap(),
            "{name}/{aname}: stored bytes"
        );
        assert_eq!(
            sha_hex(&bytes),
            a["sha256"].as_str().unwrap(),
            "{name}/{aname}: sha256"
        );

        for (k, jv) in a["attributes"].as_object().unwrap() {
            let av = find(&v.attrs, k).unwrap_or_else(|| panic!("{name}/{aname}: no attr {k}"));
            assert!(
                attr_matches(av, jv),
                "{name}/{aname}: attr {k} = {av:?}, sidecar {jv}"
            );
        }
        // The event time carries CF units the engine can label with ISO 8601.
        if role == Role::Coordinate {
            let t = &expect["container"]["time"];
            let tpd = t["ticks_per_day"].as_i64().unwrap();
            let epoch = t["epoch"].as_i64().unwrap();
            assert_eq!(epoch, 719162);
            assert_eq!(tpd, 86_400_000);
            assert_eq!(
                find(&v.attrs, "units"),
                Some(&AttrValue::Text(
                    "milliseconds since 1970-01-01 00:00:00".into()
                ))
            );
        }
    }

    let globals = expect["global_attributes"].as_object().unwrap();
    for (k, jv) in globals {
        let av = find(src.global_attrs(), k).unwrap_or_else(|| panic!("{name}: no global {k}"));
        assert!(
            attr_matches(av, jv),
            "{name}: global {k} = {av:?}, sidecar {jv}"
        );
    }
    let ours: Vec<&str> = src.global_attrs().iter().map(|(k, _)| k.as_str()).collect();
    let theirs: Vec<&str> = globals.keys().map(|k| k.as_str()).collect();
    let mut a = ours.clone();
    let mut b = theirs.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b, "{name}: global attribute keys");
    for (k, t) in expect["global_attribute_types"].as_object().unwrap() {
        let av = find(src.global_attrs(), k).unwrap();
        let ok = match t.as_str().unwrap() {
            "int32" => matches!(av, AttrValue::I32(_)),
            "double" => matches!(av, AttrValue::F64(_)),
            "text" | "uuid" => matches!(av, AttrValue::Text(_)),
            other => panic!("{name}: unknown type {other}"),
        };
        assert!(ok, "{name}: global {k} is {av:?}, sidecar type {t}");
    }
}

fn check_container(path: &Path) {
    let expect = sidecar(path);
    let Some(c) = expect.get("container") else {
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let src = open_bytes(bytes, &OpenOptions::default()).unwrap();
    let h = src.header();
    let endian = match h.byte_order {
        ByteOrder::Little => "little",
        ByteOrder::Big => "big",
    };
    assert_eq!(c["endian"], endian);
    assert_eq!(c["item_start"].as_u64(), Some(h.item_start));
    assert_eq!(c["item_end"].as_u64(), Some(h.item_end));
    assert_eq!(c["section_count"].as_u64(), Some(h.sections.len() as u64));
    for (s, js) in h.sections.iter().zip(c["sections"].as_array().unwrap()) {
        assert_eq!(js["id"].as_i64(), Some(i64::from(s.id)));
        assert_eq!(js["offset"].as_u64(), Some(s.offset));
        assert_eq!(
            js["next_section_offset"].as_i64(),
            Some(i64::from(s.next_section_offset))
        );
    }
    assert_eq!(c["item_count"].as_u64(), Some(h.item_count));
    assert_eq!(c["trailing_bytes"].as_u64(), Some(h.trailing_bytes));
    let item = h.item.as_ref().unwrap();
    assert_eq!(c["item"]["name"], item.name.as_str());
    assert_eq!(c["item"]["size"].as_u64(), Some(u64::from(item.size)));
    for (f, jf) in item
        .fields
        .iter()
        .zip(c["item"]["fields"].as_array().unwrap())
    {
        assert_eq!(jf["name"], f.name.as_str());
        assert_eq!(jf["type"].as_i64(), Some(i64::from(f.field_type)));
        assert_eq!(jf["offset"].as_u64(), Some(u64::from(f.offset)));
    }
    match (&h.time, c["time"].is_null()) {
        (None, true) => {}
        (Some(t), false) => {
            assert_eq!(c["time"]["epoch"].as_i64(), Some(t.epoch_days));
            assert_eq!(c["time"]["ticks_per_day"].as_i64(), Some(t.ticks_per_day));
            let offs: Vec<u64> = c["time"]["time_field_offsets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            let ours: Vec<u64> = t.field_offsets.iter().map(|&o| u64::from(o)).collect();
            assert_eq!(offs, ours);
        }
        _ => panic!("time section presence differs"),
    }
}

#[test]
fn corpus_files_match_sidecars() {
    for f in corpus_files() {
        check_file(&f);
        check_container(&f);
    }
}

#[test]
fn corrupt_itemstart_message() {
    let p = corpus_dir().join("corrupt_itemstart.tea");
    let err = TeaImporter
        .open(&p, &OpenOptions::default())
        .err()
        .expect("must be refused");
    let msg = err.to_string();
    assert!(
        msg.contains("ItemStart 4312 points 4096 bytes beyond end of file"),
        "{msg}"
    );
    assert!(matches!(err, tet_source::SourceError::Malformed(_)));
}

#[test]
fn identify_by_magic_then_extension() {
    for f in corpus_files() {
        let head = std::fs::read(&f).unwrap();
        assert_eq!(
            TeaImporter.identify(Path::new("x.bin"), &head[..16]),
            Confidence::Magic
        );
    }
    assert_eq!(
        TeaImporter.identify(Path::new("a/B.TEA"), b"nothing"),
        Confidence::Extension
    );
    assert_eq!(
        TeaImporter.identify(Path::new("a/b.npy"), b"\x93NUMPY"),
        Confidence::No
    );
    assert_eq!(TeaImporter.id(), "tea");
    assert_eq!(TeaImporter.name(), "TeaFile");
    assert_eq!(TeaImporter.extensions(), &["tea"]);
}

/// Every prefix of every corpus file opens or fails, never panics; what opens reads cleanly.
#[test]
fn every_truncation_is_handled() {
    for f in corpus_files() {
        let bytes = std::fs::read(&f).unwrap();
        for len in 0..=bytes.len() {
            if let Ok(src) = open_bytes(&bytes[..len], &OpenOptions::default()) {
                for (i, v) in src.variables().iter().enumerate() {
                    let n = v.shape[0];
                    let mut out = vec![0u8; n as usize * v.dtype.size()];
                    src.read_region(i, &[0], &[n], &mut out).unwrap();
                }
            }
        }
    }
}

/// A file whose item area was cut inside an item: the count rounds down and the partial item
/// is reported as skipped.
#[test]
fn trailing_partial_item_is_reported() {
    let bytes = std::fs::read(corpus_dir().join("tick_full.tea")).unwrap();
    let cut = &bytes[..bytes.len() - 5];
    let src = open_bytes(cut, &OpenOptions::default()).unwrap();
    assert_eq!(src.item_count(), 99);
    assert_eq!(src.header().trailing_bytes, 19);
    assert_eq!(src.variables()[0].shape, vec![99]);
    assert_eq!(src.skipped().len(), 1);
    assert!(src.skipped()[0].reason.contains("19 bytes"));
}

/// A big-endian file and its little-endian twin give the same values.
#[test]
fn both_byte_orders_agree_with_sidecar_values() {
    let src = TeaImporter
        .open(
            &corpus_dir().join("big_endian_tick.tea"),
            &OpenOptions::default(),
        )
        .unwrap();
    let mut t = vec![0u8; 8];
    src.read_region(0, &[0], &[1], &mut t).unwrap();
    assert_eq!(i64::from_le_bytes(t.try_into().unwrap()), 1711000004159);
    assert!(src.contiguous_bytes(0).is_none());
}

#[test]
fn region_requests_are_checked() {
    let src = TeaImporter
        .open(
            &corpus_dir().join("primitive_double.tea"),
            &OpenOptions::default(),
        )
        .unwrap();
    let mut out = vec![0u8; 8];
    assert!(src.read_region(0, &[64], &[1], &mut out).is_err());
    assert!(src.read_region(1, &[0], &[1], &mut out).is_err());
    assert!(src.read_region(0, &[0], &[2], &mut out).is_err());
    assert!(src.read_region(0, &[0, 0], &[1, 1], &mut out).is_err());
    assert!(src.read_region(0, &[u64::MAX], &[1], &mut out).is_err());
    let mut empty: Vec<u8> = Vec::new();
    src.read_region(0, &[64], &[0], &mut empty).unwrap();
    // A single-field little-endian item can be lent as is.
    assert_eq!(src.contiguous_bytes(0).map(|b| b.len()), Some(512));
}
