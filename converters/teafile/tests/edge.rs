//! Hand-built edge cases: refusals with their messages, unsupported items, names.

use tet_source::{AttrValue, OpenOptions, Role, Source, SourceError};
use tet_teafile::{open_bytes, ByteOrder, TeaSource};
use tet_testkit::find as attr;

/// A little-endian TeaFile builder over raw sections.
struct Build {
    item_start: Option<i64>,
    item_end: i64,
    section_count: Option<i64>,
    sections: Vec<(i32, Vec<u8>)>,
    items: Vec<u8>,
}

fn s(text: &str) -> Vec<u8> {
    let mut v = (text.len() as i32).to_le_bytes().to_vec();
    v.extend_from_slice(text.as_bytes());
    v
}

fn item_section(size: i32, name: &str, fields: &[(i32, i32, &str)]) -> Vec<u8> {
    let mut v = size.to_le_bytes().to_vec();
    v.extend(s(name));
    v.extend((fields.len() as i32).to_le_bytes());
    for &(t, o, n) in fields {
        v.extend(t.to_le_bytes());
        v.extend(o.to_le_bytes());
        v.extend(s(n));
    }
    v
}

fn time_section(epoch: i64, tpd: i64, offsets: &[i32]) -> Vec<u8> {
    let mut v = epoch.to_le_bytes().to_vec();
    v.extend(tpd.to_le_bytes());
    v.extend((offsets.len() as i32).to_le_bytes());
    for o in offsets {
        v.extend(o.to_le_bytes());
    }
    v
}

impl Build {
    fn new() -> Self {
        Build {
            item_start: None,
            item_end: 0,
            section_count: None,
            sections: Vec::new(),
            items: Vec::new(),
        }
    }
    fn section(mut self, id: i32, body: Vec<u8>) -> Self {
        self.sections.push((id, body));
        self
    }
    fn items(mut self, bytes: Vec<u8>) -> Self {
        self.items = bytes;
        self
    }
    fn bytes(&self) -> Vec<u8> {
        let mut secs = Vec::new();
        for (id, body) in &self.sections {
            secs.extend(id.to_le_bytes());
            secs.extend((body.len() as i32).to_le_bytes());
            secs.extend(body);
        }
        let start = self.item_start.unwrap_or(32 + secs.len() as i64);
        let mut v = 0x0d0e0a0402080500u64.to_le_bytes().to_vec();
        v.extend(start.to_le_bytes());
        v.extend(self.item_end.to_le_bytes());
        v.extend(
            self.section_count
                .unwrap_or(self.sections.len() as i64)
                .to_le_bytes(),
        );
        v.extend(secs);
        v.extend(&self.items);
        v
    }
    fn open(&self) -> Result<TeaSource, SourceError> {
        open_bytes(self.bytes(), &OpenOptions::default())
    }
    fn open_skipping(&self) -> Result<TeaSource, SourceError> {
        open_bytes(
            self.bytes(),
            &OpenOptions {
                skip_unsupported: true,
                ..Default::default()
            },
        )
    }
}

fn malformed(r: Result<TeaSource, SourceError>) -> String {
    match r {
        Err(e @ SourceError::Malformed { .. }) => e.to_string(),
        Err(e) => panic!("expected Malformed, got {e:?}"),
        Ok(_) => panic!("expected Malformed, got Ok"),
    }
}

fn tick() -> Build {
    Build::new().section(
        0x0a,
        item_section(
            24,
            "Tick",
            &[(4, 0, "Time"), (10, 8, "Price"), (4, 16, "Volume")],
        ),
    )
}

#[test]
fn shortest_valid_files() {
    let b = Build::new();
    let src = b.open().unwrap();
    assert!(src.variables().is_empty());
    assert_eq!(src.header().byte_order, ByteOrder::Little);
    let mut b = Build::new();
    b.item_end = 32;
    assert!(b.open().unwrap().variables().is_empty());
    // Big-endian: the magic's bytes reversed.
    let mut be = 0x0d0e0a0402080500u64.to_be_bytes().to_vec();
    be.extend(32i64.to_be_bytes());
    be.extend([0u8; 16]);
    let src = open_bytes(be, &OpenOptions::default()).unwrap();
    assert_eq!(src.header().byte_order, ByteOrder::Big);
}

#[test]
fn header_refusals() {
    assert!(malformed(open_bytes(vec![0u8; 10], &OpenOptions::default())).contains("32-byte"));
    assert!(malformed(open_bytes(vec![0u8; 64], &OpenOptions::default())).contains("magic"));

    let mut b = tick();
    b.item_start = Some(12);
    assert_eq!(
        malformed(b.open()),
        "ItemStart 12 is inside the header (the mandatory header ends at offset 32)"
    );
    b.item_start = Some(-5);
    assert!(malformed(b.open()).contains("inside the header"));
    b.item_start = Some(i64::MAX);
    assert!(malformed(b.open()).contains("beyond end of file"));

    let mut b = tick().items(vec![0; 48]);
    b.item_end = 40;
    assert!(malformed(b.open()).contains("before ItemStart"));
    let len = b.bytes().len() as i64;
    b.item_end = len + 24;
    assert!(malformed(b.open()).contains("ItemEnd"));
    b.item_end = -1;
    assert!(malformed(b.open()).contains("negative"));

    let mut b = tick();
    b.section_count = Some(i64::MAX);
    assert!(malformed(b.open()).contains("SectionCount"));
    b.section_count = Some(-1);
    assert!(malformed(b.open()).contains("SectionCount"));
    // One section too many: the header ends before it.
    b.section_count = Some(2);
    assert!(malformed(b.open()).contains("does not fit before ItemStart"));
}

#[test]
fn section_refusals() {
    // A field beyond the item.
    let b = Build::new().section(0x0a, item_section(24, "T", &[(4, 30, "X")]));
    assert_eq!(
        malformed(b.open()),
        "item section declares field 'X' (Int64) at offset 30 beyond item size 24"
    );
    let b = Build::new().section(0x0a, item_section(24, "T", &[(4, 20, "X")]));
    assert!(malformed(b.open()).contains("running past item size 24"));
    let b = Build::new().section(0x0a, item_section(0, "T", &[(4, 0, "X")]));
    assert!(malformed(b.open()).contains("item size 0"));
    let b = Build::new().section(0x0a, item_section(8, "T", &[]));
    assert!(malformed(b.open()).contains("field count 0"));
    let b = Build::new().section(0x0a, item_section(8, "T", &[(4, -8, "X")]));
    assert!(malformed(b.open()).contains("negative"));

    // A field count far beyond the section.
    let mut body = item_section(8, "T", &[(4, 0, "X")]);
    body[4 + 4 + 1..4 + 4 + 1 + 4].copy_from_slice(&i32::MAX.to_le_bytes());
    let b = Build::new().section(0x0a, body);
    assert!(malformed(b.open()).contains("field count"));

    // A string length beyond the section.
    let mut body = item_section(8, "T", &[(4, 0, "X")]);
    body[4..8].copy_from_slice(&1000i32.to_le_bytes());
    assert!(malformed(Build::new().section(0x0a, body).open()).contains("item name"));

    // Invalid UTF-8 in a name.
    let body = item_section(8, "\u{e9}", &[(4, 0, "X")]);
    let mut bad = body.clone();
    bad[8] = 0xff;
    assert!(malformed(Build::new().section(0x0a, bad).open()).contains("UTF-8"));

    // Time field offsets that name no field; ticks per day 0.
    let b = tick().section(0x40, time_section(719162, 86_400_000, &[4]));
    assert!(malformed(b.open()).contains("no field of item 'Tick' starts there"));
    let b = tick().section(0x40, time_section(719162, 0, &[0]));
    assert!(malformed(b.open()).contains("ticks per day 0"));
    let b = Build::new().section(0x40, time_section(719162, 1, &[0]));
    assert!(malformed(b.open()).contains("no item section"));

    // A duplicated section.
    let b = tick().section(0x80, s("a")).section(0x80, s("b"));
    assert!(malformed(b.open()).contains("occurs twice"));

    // A next-section offset past ItemStart, and a negative one.
    let mut bytes = tick().section(0x80, s("abc")).bytes();
    bytes[36..40].copy_from_slice(&10_000i32.to_le_bytes());
    assert!(
        malformed(open_bytes(bytes.clone(), &OpenOptions::default())).contains("beyond ItemStart")
    );
    bytes[36..40].copy_from_slice(&(-8i32).to_le_bytes());
    assert!(malformed(open_bytes(bytes, &OpenOptions::default())).contains("negative"));

    // A section body that ends before its content: truncated.
    let b = tick().section(0x80, 100i32.to_le_bytes().to_vec());
    assert!(malformed(b.open()).contains("content description"));
}

#[test]
fn unknown_sections_are_skipped_by_offset() {
    let items: Vec<u8> = (0..48u8).collect();
    let b = Build::new()
        .section(0x10000, vec![1, 2, 3, 4, 5])
        .section(0x0a, item_section(24, "Tick", &[(4, 0, "Time")]))
        .section(0x77, vec![9; 3])
        .items(items);
    let src = b.open().unwrap();
    assert_eq!(src.variables().len(), 1);
    assert_eq!(src.item_count(), 2);
    let names: Vec<&str> = src.skipped().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["section 0x10000", "section 0x77"]);
    assert!(src.skipped()[0].reason.contains("custom"));
    assert!(src.skipped()[1].reason.contains("unknown"));
}

#[test]
fn unsupported_fields_fail_or_are_skipped() {
    let b = Build::new()
        .section(
            0x0a,
            item_section(
                40,
                "D",
                &[
                    (0x200, 0, "Amount"),
                    (10, 16, "Price"),
                    (0x1001, 24, "Blob"),
                    (77, 32, "Odd"),
                ],
            ),
        )
        .items(vec![0; 80]);
    match b.open() {
        Err(SourceError::Unsupported { detail: m, .. }) => {
            assert!(m.contains("'Amount'") && m.contains("NetDecimal"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    let src = b.open_skipping().unwrap();
    assert_eq!(src.variables().len(), 1);
    assert_eq!(src.variables()[0].name, "Price");
    assert_eq!(src.variables()[0].dims, Some(vec!["index".to_string()]));
    let sk = src.skipped();
    assert_eq!(sk.len(), 3);
    assert_eq!(sk[0].name, "field 'Amount'");
    assert!(sk[0].reason.contains("NetDecimal (0x200)"));
    assert!(sk[1].reason.contains("Custom (0x1001)"));
    assert!(sk[2].reason.contains("Unknown (0x4d)"));
}

#[test]
fn unknown_name_value_kind() {
    let mut nv = 2i32.to_le_bytes().to_vec();
    nv.extend(s("a"));
    nv.extend(1i32.to_le_bytes());
    nv.extend(7i32.to_le_bytes());
    nv.extend(s("b"));
    nv.extend(9i32.to_le_bytes());
    nv.extend([0u8; 12]);
    let b = tick().section(0x81, nv);
    assert!(matches!(b.open(), Err(SourceError::Unsupported { .. })));
    let src = b.open_skipping().unwrap();
    assert_eq!(
        attr(src.global_attrs(), "a"),
        Some(&AttrValue::I32(vec![7]))
    );
    assert_eq!(src.skipped().len(), 1);
    assert!(src.skipped()[0]
        .reason
        .contains("unknown name/value kind 9"));
}

#[test]
fn items_without_item_section() {
    let b = Build::new().items(vec![1, 2, 3]);
    assert!(matches!(b.open(), Err(SourceError::Unsupported { .. })));
    let src = b.open_skipping().unwrap();
    assert!(src.variables().is_empty());
    assert_eq!(src.skipped()[0].name, "item area");
}

#[test]
fn names_are_made_unique_and_safe() {
    let b = Build::new()
        .section(
            0x0a,
            item_section(
                16,
                "N",
                &[
                    (3, 0, "a"),
                    (3, 4, "a"),
                    (3, 8, ""),
                    (2, 12, "x/y"),
                    (2, 14, "index"),
                ],
            ),
        )
        .items(vec![0; 32]);
    let src = b.open().unwrap();
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["a", "a_2", "field_3", "x_y", "index"]);
    for v in src.variables() {
        assert_eq!(v.dims, Some(vec!["index_2".to_string()]));
    }
    assert_eq!(
        attr(&src.variables()[1].attrs, "teafile_field_name"),
        Some(&AttrValue::Text("a".into()))
    );
    assert!(!src.variables()[1].notes.is_empty());
    assert!(src.variables()[0].notes.is_empty());
}

#[test]
fn name_value_collisions_and_uuid() {
    let mut nv = 4i32.to_le_bytes().to_vec();
    for (name, v) in [("item_name", 1i32), ("k", 2), ("k", 3)] {
        nv.extend(s(name));
        nv.extend(1i32.to_le_bytes());
        nv.extend(v.to_le_bytes());
    }
    nv.extend(s("id"));
    nv.extend(4i32.to_le_bytes());
    nv.extend([
        0x3f, 0x25, 0x04, 0xe0, 0x4f, 0x89, 0x11, 0xd3, 0x9a, 0x0c, 0x03, 0x05, 0xe8, 0x2c, 0x33,
        0x01,
    ]);
    let src = tick().section(0x81, nv).open().unwrap();
    let g = src.global_attrs();
    let keys: Vec<&str> = g.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        ["item_name", "item_size", "item_name_2", "k", "k_2", "id"]
    );
    assert_eq!(
        attr(g, "id"),
        Some(&AttrValue::Text(
            "3f2504e0-4f89-11d3-9a0c-0305e82c3301".into()
        ))
    );
}

#[test]
fn time_fields_and_units() {
    let mut items = Vec::new();
    for i in 0..3i64 {
        items.extend((i * 1000).to_le_bytes());
        items.extend(1.5f64.to_le_bytes());
        items.extend((i * 7).to_le_bytes());
    }
    let b = tick()
        .section(0x40, time_section(0, 864_000_000_000, &[16, 0, 16]))
        .items(items);
    let src = b.open().unwrap();
    let v = src.variables();
    // The first time field (Volume at offset 16) is the event time.
    assert_eq!(v[2].role, Role::Coordinate);
    assert_eq!(v[0].role, Role::Data);
    for x in v {
        assert_eq!(x.dims, Some(vec!["Volume".to_string()]));
    }
    assert_eq!(
        attr(&v[2].attrs, "units"),
        Some(&AttrValue::Text(
            "100 nanoseconds since 0001-01-01 00:00:00".into()
        ))
    );
    assert_eq!(
        attr(&v[2].attrs, "is_event_time"),
        Some(&AttrValue::U8(vec![1]))
    );
    assert_eq!(
        attr(&v[0].attrs, "is_event_time"),
        Some(&AttrValue::U8(vec![0]))
    );
    assert_eq!(
        attr(&v[0].attrs, "calendar"),
        Some(&AttrValue::Text("proleptic_gregorian".into()))
    );
    assert!(attr(&v[1].attrs, "units").is_none());
    assert_eq!(
        attr(src.global_attrs(), "time_ticks_per_day"),
        Some(&AttrValue::I64(vec![864_000_000_000]))
    );

    // An epoch outside years 1..9999: no units, but epoch/ticks kept and a note.
    let b = tick().section(0x40, time_section(-1, 86_400, &[0]));
    let src = b.open().unwrap();
    let t = &src.variables()[0];
    assert!(attr(&t.attrs, "units").is_none());
    assert_eq!(
        attr(&t.attrs, "time_epoch_days"),
        Some(&AttrValue::I64(vec![-1]))
    );
    assert!(t.notes.iter().any(|n| n.contains("no CF units")));
}

#[test]
fn big_regions_from_a_file_on_disk() {
    // Over the mmap threshold: 100k items of 24 bytes, big-endian.
    let n = 100_000u64;
    let mut v = 0x0d0e0a0402080500u64.to_be_bytes().to_vec();
    let mut body = 24i32.to_be_bytes().to_vec();
    body.extend(4i32.to_be_bytes());
    body.extend(b"Tick");
    body.extend(2i32.to_be_bytes());
    for (t, o, name) in [(4i32, 0i32, "T"), (9, 8, "F")] {
        body.extend(t.to_be_bytes());
        body.extend(o.to_be_bytes());
        body.extend((name.len() as i32).to_be_bytes());
        body.extend(name.as_bytes());
    }
    let start = 32 + 8 + body.len() as i64;
    v.extend(start.to_be_bytes());
    v.extend(0i64.to_be_bytes());
    v.extend(1i64.to_be_bytes());
    v.extend(0x0ai32.to_be_bytes());
    v.extend((body.len() as i32).to_be_bytes());
    v.extend(body);
    for i in 0..n {
        v.extend((i as i64 * 3).to_be_bytes());
        v.extend((i as f32).to_be_bytes());
        v.extend([0u8; 12]);
    }
    let dir = std::env::temp_dir().join(format!("tet-teafile-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.tea");
    std::fs::write(&path, &v).unwrap();
    let src = tet_teafile::open_path(&path, &OpenOptions::default()).unwrap();
    assert_eq!(src.item_count(), n);
    let mut out = vec![0u8; 8 * 1000];
    src.read_region(0, &[50_000], &[1000], &mut out).unwrap();
    for (k, c) in out.chunks_exact(8).enumerate() {
        assert_eq!(
            i64::from_le_bytes(c.try_into().unwrap()),
            (50_000 + k as i64) * 3
        );
    }
    let mut out = vec![0u8; 4 * n as usize];
    src.read_region(1, &[0], &[n], &mut out).unwrap();
    assert_eq!(
        f32::from_le_bytes(out[4 * 99_999..].try_into().unwrap()),
        99_999.0
    );
    drop(src);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn source_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<TeaSource>();
}
