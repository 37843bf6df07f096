//! Every public corpus TeaFile against its `.expect.json` sidecar, plus every truncation of it.

use std::path::{Path, PathBuf};

use tet_source::{AttrValue, Confidence, Importer, OpenOptions, Role, Source};
use tet_teafile::{open_bytes, ByteOrder, TeaImporter};
use tet_testkit::{
    assert_attrs_equal, attr_matches, check_sidecar_array, corpus_dir, find, read_all_in_pieces,
    sidecar,
};

fn corpus_files() -> Vec<PathBuf> {
    tet_testkit::corpus_files("teafile", &["tea"])
}

/// A corpus file opened by the importer.
fn open_corpus(name: &str) -> Box<dyn Source> {
    TeaImporter
        .open(&corpus_dir("teafile").join(name), &OpenOptions::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
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
        // Name (so the order too), shape, dims, role, type; the values, read in pieces,
        // against the hash.
        check_sidecar_array(&name, src.as_ref(), i, a, read_all_in_pieces);
        let v = &src.variables()[i];
        assert_eq!(v.layout.chunk_shape, None);
        assert!(!v.layout.compressed);

        for (k, jv) in a["attributes"].as_object().unwrap() {
            let av = find(&v.attrs, k).unwrap_or_else(|| panic!("{name}/{aname}: no attr {k}"));
            assert!(
                attr_matches(av, jv),
                "{name}/{aname}: attr {k} = {av:?}, sidecar {jv}"
            );
        }
        // The event time carries CF units the engine can label with ISO 8601.
        if v.role == Role::Coordinate {
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

    assert_attrs_equal(
        &format!("{name}: global"),
        src.global_attrs(),
        &expect["global_attributes"],
    );
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
    let p = corpus_dir("teafile").join("corrupt_itemstart.tea");
    let err = TeaImporter
        .open(&p, &OpenOptions::default())
        .err()
        .expect("must be refused");
    let msg = err.to_string();
    assert!(
        msg.contains("ItemStart 4312 points 4096 bytes beyond end of file"),
        "{msg}"
    );
    assert!(matches!(err, tet_source::SourceError::Malformed { .. }));
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
    let bytes = std::fs::read(corpus_dir("teafile").join("tick_full.tea")).unwrap();
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
    let src = open_corpus("big_endian_tick.tea");
    let mut t = vec![0u8; 8];
    src.read_region(0, &[0], &[1], &mut t).unwrap();
    assert_eq!(i64::from_le_bytes(t.try_into().unwrap()), 1711000004159);
    assert!(src.contiguous_bytes(0).is_none());
}

#[test]
fn region_requests_are_checked() {
    let src = open_corpus("primitive_double.tea");
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
