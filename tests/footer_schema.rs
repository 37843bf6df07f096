//! The footer schema (`tet::format::schema`) describes every footer there is: each `.tet` under
//! `fixtures/` and `../shared/interop/` reads through the typed document and writes back to the
//! same text (the history JSON and the spilled metadata), keys the schema does not know survive
//! at every level, and the model (`Footer`) re-encodes our own files' metadata unchanged.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tet::format::footer::{Footer, HistoryRow, RecordedRole};
use tet::format::schema::{self, Facts, FooterDoc, Lenient, Metadata, TextVariableRecord};
use tet::format::{DatasetMeta, TetFile};
use tet_source::{AttrValue, Fact, Skipped};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.tet` file under `dir`, sorted.
fn tet_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            tet_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "tet") {
            out.push(p);
        }
    }
}

/// A file's footer texts: the history JSON and the spilled metadata JSON (when spilled).
struct Texts {
    path: PathBuf,
    footer: String,
    spill: Option<String>,
}

/// The footers of every fixture and interop `.tet` whose footer is JSON (the others are
/// corruption fixtures: counted, not read).
fn footers() -> Vec<Texts> {
    let mut files = Vec::new();
    tet_files(&root().join("fixtures"), &mut files);
    tet_files(&root().join("../shared/interop"), &mut files);
    assert!(files.len() >= 7, "found only {files:?}");
    let mut out = Vec::new();
    for path in files {
        let Ok(f) = TetFile::open(&path) else {
            continue;
        };
        let Some(l) = f.footer_layout().cloned() else {
            continue;
        };
        let bytes = std::fs::read(&path).unwrap();
        let slice = |off: u64, len: u64| bytes[off as usize..(off + len) as usize].to_vec();
        let Ok(footer) = String::from_utf8(slice(l.json_offset, l.json_len)) else {
            continue;
        };
        if serde_json::from_str::<Value>(&footer).is_err() {
            continue;
        }
        let spill = l
            .spill
            .map(|(off, len)| String::from_utf8(slice(off, len)).unwrap());
        out.push(Texts {
            path,
            footer,
            spill,
        });
    }
    assert!(out.len() >= 6, "{} footers", out.len());
    out
}

/// The canonical text of a JSON text: parsed, keys sorted, printed compactly.
fn canonical_text(text: &str) -> String {
    let v: Value = serde_json::from_str(text).unwrap();
    tet_source::json_text::canonical(&v).to_string()
}

/// `text` through the typed type `T` and back.
fn through<T: serde::de::DeserializeOwned + serde::Serialize>(text: &str) -> String {
    let v: Value = serde_json::from_str(text).unwrap();
    let typed: T = schema::from_value(&v).unwrap_or_else(|e| panic!("{e}: {:?}", e.source));
    schema::to_canonical_json(&typed).unwrap()
}

/// What a round trip must give: the same bytes for a canonical text (every file tet-convert
/// writes), the canonical form for another tool's (the reference tools do not sort keys).
fn expect_same(path: &Path, what: &str, original: &str, back: &str) -> bool {
    let canonical = canonical_text(original);
    assert_eq!(back, canonical, "{}: {what}", path.display());
    if original == canonical {
        assert_eq!(back.as_bytes(), original.as_bytes(), "{}", path.display());
        true
    } else {
        false
    }
}

#[test]
fn every_footer_round_trips_through_the_typed_schema() {
    let mut byte_identical = 0;
    let mut spills = 0;
    for t in footers() {
        if expect_same(
            &t.path,
            "footer",
            &t.footer,
            &through::<FooterDoc>(&t.footer),
        ) {
            byte_identical += 1;
        }
        if let Some(spill) = &t.spill {
            spills += 1;
            expect_same(
                &t.path,
                "spilled metadata",
                spill,
                &through::<Metadata>(spill),
            );
        }
    }
    // The golden and legacy fixtures are ours, written canonically.
    assert!(
        byte_identical >= 6,
        "{byte_identical} byte-identical footers"
    );
    let _ = spills;
}

/// Adds `"zz_unknown": {...}` to the object at every level the schema describes.
fn add_unknown_keys(v: &mut Value) -> usize {
    fn mark(o: &mut Value, n: &mut usize) {
        if let Some(m) = o.as_object_mut() {
            m.insert("zz_unknown".into(), json!({"a": [1, 2.5, "x", null]}));
            *n += 1;
        }
    }
    fn each(o: &mut Value, n: &mut usize, f: fn(&mut Value, &mut usize)) {
        if let Some(m) = o.as_object_mut() {
            for (_, v) in m.iter_mut() {
                f(v, n);
            }
        }
    }
    fn metadata(md: &mut Value, n: &mut usize) {
        fn entry(e: &mut Value, n: &mut usize) {
            if let Some(c) = e.get_mut("coords") {
                each(c, n, mark);
            }
            if let Some(x) = e.get_mut("tet_ext") {
                mark(x, n);
                if let Some(c) = x.get_mut("coords") {
                    each(c, n, mark);
                }
            }
            mark(e, n);
        }
        if let Some(d) = md.get_mut("datasets") {
            each(d, n, entry);
        }
        if let Some(x) = md.get_mut("tet_ext") {
            for key in ["text_variables", "skipped"] {
                if let Some(list) = x.get_mut(key).and_then(Value::as_array_mut) {
                    list.iter_mut().for_each(|t| mark(t, n));
                }
            }
            if let Some(d) = x.get_mut("chunk_digests") {
                mark(d, n);
            }
            if let Some(d) = x.get_mut("datasets") {
                each(d, n, entry);
            }
            mark(x, n);
        }
        mark(md, n);
    }
    let mut n = 0;
    if let Some(rows) = v.get_mut("history").and_then(Value::as_array_mut) {
        rows.iter_mut().for_each(|r| mark(r, &mut n));
    }
    if let Some(md) = v.get_mut("metadata") {
        metadata(md, &mut n);
    }
    mark(v, &mut n);
    n
}

#[test]
fn unknown_keys_survive_at_every_level() {
    let mut marked = 0;
    for t in footers() {
        let mut v: Value = serde_json::from_str(&t.footer).unwrap();
        let added = add_unknown_keys(&mut v);
        marked += added;
        let text = v.to_string();
        let back = through::<FooterDoc>(&text);
        assert_eq!(back, canonical_text(&text), "{}", t.path.display());
        assert_eq!(
            back.matches("zz_unknown").count(),
            added,
            "{}",
            t.path.display()
        );
    }
    assert!(marked > 40, "{marked} unknown keys placed");
}

#[test]
fn a_lost_key_or_value_changes_the_bytes() {
    // The comparison the round trip relies on sees what a schema that dropped or changed
    // something would do.
    let t = footers()
        .into_iter()
        .find(|t| t.path.ends_with("fixtures/golden/small.tet"))
        .expect("small.tet");
    let mut v: Value = serde_json::from_str(&t.footer).unwrap();
    add_unknown_keys(&mut v);
    let mut doc: FooterDoc = schema::from_value(&v).unwrap();
    let full = schema::to_canonical_json(&doc).unwrap();
    assert_eq!(full, canonical_text(&v.to_string()));
    let md = doc.metadata.as_mut().unwrap();
    md.other.clear();
    assert_ne!(schema::to_canonical_json(&doc).unwrap(), full);

    let mut doc: FooterDoc = schema::from_value(&v).unwrap();
    let ds = doc.metadata.as_mut().unwrap().datasets.as_mut().unwrap();
    let e = ds.get_mut("temperature").unwrap();
    let attrs = &mut e.ext.as_mut().unwrap().attrs.as_mut().unwrap().0;
    attrs[1].1 = AttrValue::F64(vec![0.5, 100.0]);
    let changed = schema::to_canonical_json(&doc).unwrap();
    assert_ne!(changed, full);
    assert!(
        changed.contains(r#"["valid_range",{"f64":[0.5,100.0]}]"#),
        "{changed}"
    );
}

/// A footer with every part of the model filled.
fn everything() -> Footer {
    let mut f = Footer::default();
    f.history.push(HistoryRow {
        op: "convert".into(),
        source: "h5".into(),
        at: "1700000000".into(),
        parents: (0..20).map(|i| format!("sha256:{i:064x}")).collect(),
        params: (0..40)
            .map(|i| (format!("input.{i}"), format!("d{i}.h5")))
            .collect(),
    });
    f.file.insert("tool".into(), "tet-convert".into());
    f.file.insert("note".into(), String::new());
    f.global_attrs
        .push(("title".into(), AttrValue::Text("T".into())));
    f.global_attrs
        .push(("g/x".into(), AttrValue::I64(vec![-3])));
    let mut d = DatasetMeta {
        dim_names: Some(vec!["time".into(), "x".into()]),
        attrs: vec![
            ("units".into(), AttrValue::Text("K".into())),
            (
                "f".into(),
                AttrValue::F32(vec![0.1, f32::NAN, f32::INFINITY]),
            ),
            ("u".into(), AttrValue::U64(vec![u64::MAX])),
            ("l".into(), AttrValue::TextList(vec!["a".into(), "".into()])),
        ],
        ..Default::default()
    };
    d.coords
        .insert("time".into(), (0..70).map(|i| i.to_string()).collect());
    d.ext.source_dtype = Some("i8".into());
    d.ext.widened = Some("i8 -> i16".into());
    d.ext.role = Some(RecordedRole::Coordinate);
    d.ext.source_shape = Some(vec![]);
    d.ext.source_chunks = Some(vec![4, 4]);
    d.ext.source_filters = Some(vec!["deflate(4)".into()]);
    d.ext.notes = Some(vec!["n".into()]);
    d.ext.source_facts = Some(Facts(vec![
        Fact::EnumType("e".into()),
        Fact::EnumMapping(vec![("a".into(), 1), ("b".into(), -2)]),
        Fact::AttrShape {
            attr: "m".into(),
            shape: vec![2, 3],
        },
        Fact::ComplexPart {
            imag: true,
            complex: tet_source::ElementType::C128,
        },
        Fact::Unpacked {
            packed_type: "short".into(),
            packing: vec![("scale_factor".into(), AttrValue::F32(vec![0.5]))],
        },
    ]));
    d.ext.other.insert("future".into(), json!({"k": [1]}));
    f.datasets.insert("temp".into(), d);
    for i in 0..260 {
        f.datasets.insert(
            format!("v{i:03}"),
            DatasetMeta {
                dim_names: Some(vec!["x".into()]),
                ..Default::default()
            },
        );
    }
    f.skipped.push(Skipped {
        name: "names".into(),
        reason: "strings".into(),
    });
    f.ext.global_facts = Some(Facts(vec![Fact::UnlimitedDims(vec!["time".into()])]));
    f.ext.text_variables = Some(vec![Lenient::Typed(TextVariableRecord::new(
        &tet_source::TextVariable {
            name: "s".into(),
            shape: vec![2],
            dims: None,
            values: vec!["a".into(), "b".into()],
            attrs: vec![],
            char_axis: Some(tet_source::CharAxis {
                dim: "n".into(),
                len: 4,
            }),
            facts: vec![],
        },
    ))]);
    f.ext.other.insert("later".into(), json!(true));
    f
}

#[test]
fn the_model_round_trips_everything_it_holds() {
    let f = everything();
    let enc = f.encode().unwrap();
    let text = enc.inline_json();
    // The reference view keeps its limits; the rest went to the extension.
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["metadata"]["datasets"].as_object().unwrap().len(), 256);
    assert_eq!(v["metadata"]["tet_ext"]["version"], 1);
    assert_eq!(v["metadata"]["tet_ext"]["file"]["note"], "");
    assert_eq!(
        v["metadata"]["tet_ext"]["history"][0]["parents"]
            .as_array()
            .unwrap()
            .len(),
        20
    );
    let temp = &v["metadata"]["datasets"]["temp"]["tet_ext"];
    assert_eq!(temp["role"], "coordinate");
    assert_eq!(temp["future"], json!({"k": [1]}));
    assert_eq!(
        temp["attrs"][1][1],
        json!({"f32": [0.1, "NaN", "Infinity"]})
    );
    assert_eq!(
        temp["source_facts"][1],
        json!(["enum_mapping", {"text_list": ["a=1", "b=-2"]}])
    );
    assert_eq!(
        temp["source_facts"][6],
        json!(["packed:scale_factor", {"f32": [0.5]}])
    );
    assert_eq!(
        v["metadata"]["tet_ext"]["text_variables"][0]["dims"],
        Value::Null
    );

    // Read back through the schema: the same model, the same bytes.
    let back = Footer::from_json(&v, None).unwrap();
    assert_eq!(format!("{back:?}"), format!("{f:?}"));
    assert_eq!(back.encode().unwrap().inline_json(), text);
    assert_eq!(through::<FooterDoc>(&text), text);
    // Spilled: the metadata text alone.
    let spilled = enc.metadata_json();
    let md: Value = serde_json::from_str(&spilled).unwrap();
    let top: Value = serde_json::from_str(&enc.spilled_json(40, spilled.len() as u64)).unwrap();
    let back = Footer::from_json(&top, Some(&md)).unwrap();
    assert_eq!(back.encode().unwrap().metadata_json(), spilled);
}

#[test]
fn our_fixture_footers_re_encode_through_the_model() {
    // What the model holds of a file written by tet-convert is everything but the chunk
    // digests (a conversion writes its own): put them back and the metadata is the same.
    let mut checked = 0;
    for t in footers() {
        if canonical_text(&t.footer) != t.footer {
            continue; // another tool's
        }
        let v: Value = serde_json::from_str(&t.footer).unwrap();
        let spill: Option<Value> = t.spill.as_ref().map(|s| serde_json::from_str(s).unwrap());
        let doc: FooterDoc = schema::from_value(&v).unwrap();
        let md: Option<Metadata> = spill.as_ref().map(|s| schema::from_value(s).unwrap());
        let footer = Footer::from_doc(&doc, md.as_ref()).unwrap();
        let mut enc: Metadata = footer.encode().unwrap().metadata;
        let original = md.or(doc.metadata).unwrap();
        if let (Some(ext), Some(orig)) = (enc.ext.as_mut(), original.ext.as_ref()) {
            ext.chunk_digests = orig.chunk_digests.clone();
        } else if let Some(orig) = &original.ext {
            // Only the digests were in the extension.
            assert!(orig.chunk_digests.is_some(), "{}", t.path.display());
            enc.ext = original.ext.clone();
        }
        assert_eq!(
            schema::to_canonical_json(&enc).unwrap(),
            schema::to_canonical_json(&original).unwrap(),
            "{}",
            t.path.display()
        );
        checked += 1;
    }
    assert!(checked >= 6, "{checked}");
}

#[test]
fn a_mistyped_key_is_named_by_its_path() {
    let v = json!({"history": [], "metadata": {"datasets": {"t": {"tet_ext": {"role": 5}}}}});
    let e = schema::from_value::<FooterDoc>(&v).unwrap_err();
    assert!(e.path.starts_with("metadata"), "{}", e.path);
    let full = schema::error_chain(&e);
    assert!(
        full.contains("footer JSON does not fit the schema at `metadata"),
        "{full}"
    );
    let v = json!({"history": [["convert", "nc"]]});
    let doc: FooterDoc = schema::from_value(&v).unwrap();
    assert!(Footer::from_doc(&doc, None)
        .unwrap_err()
        .to_string()
        .contains("history row 0: a legacy row"));
}
