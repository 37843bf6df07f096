//! Property tests: random TeaFiles written by a small writer read back exactly, and random,
//! truncated or bit-flipped bytes never make the importer panic.

use proptest::prelude::*;
use tet_source::{AttrValue, ElementType, OpenOptions, Role, Source, SourceError};
use tet_teafile::{open_bytes, TeaSource};
use tet_testkit::find as attr;

const NET_DECIMAL: i32 = 0x200;

#[derive(Debug, Clone)]
enum Nv {
    I32(i32),
    F64(f64),
    Text(String),
    Uuid([u8; 16]),
}

#[derive(Debug, Clone)]
struct Field {
    ty: i32,
    offset: u32,
    name: String,
}

#[derive(Debug, Clone)]
struct Tea {
    big: bool,
    item_name: String,
    item_size: u32,
    fields: Vec<Field>,
    content: Option<String>,
    nvs: Vec<(String, Nv)>,
    /// (epoch days, ticks per day, indices of the time fields)
    time: Option<(i64, i64, Vec<usize>)>,
    /// A custom section with this body, written between the others.
    custom: Option<Vec<u8>>,
    /// Section order: a permutation of the present sections.
    order_seed: u64,
    /// Extra bytes between the last section and ItemStart.
    padding: usize,
    /// Per item, per field: the value's bits (masked to the field size).
    items: Vec<Vec<u64>>,
    /// Bytes of a trailing partial item.
    partial: usize,
    /// Preallocated junk after ItemEnd (ItemEnd != 0 when Some).
    prealloc: Option<usize>,
}

fn type_size(ty: i32) -> usize {
    match ty {
        1 | 5 => 1,
        2 | 6 => 2,
        3 | 7 | 9 => 4,
        4 | 8 | 10 => 8,
        NET_DECIMAL => 16,
        _ => unreachable!(),
    }
}

struct W {
    big: bool,
    buf: Vec<u8>,
}

impl W {
    fn i32(&mut self, v: i32) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    fn i64(&mut self, v: i64) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    fn f64(&mut self, v: f64) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    fn str(&mut self, s: &str) {
        self.i32(s.len() as i32);
        self.buf.extend_from_slice(s.as_bytes());
    }
    /// The value's `size` low bytes in the file's order.
    fn value(&mut self, v: u64, size: usize) {
        let le = v.to_le_bytes();
        if self.big {
            self.buf.extend(le[..size].iter().rev());
        } else {
            self.buf.extend_from_slice(&le[..size]);
        }
    }
}

fn section_body(t: &Tea, id: i32) -> Vec<u8> {
    let mut w = W {
        big: t.big,
        buf: Vec::new(),
    };
    match id {
        0x0a => {
            w.i32(t.item_size as i32);
            w.str(&t.item_name);
            w.i32(t.fields.len() as i32);
            for f in &t.fields {
                w.i32(f.ty);
                w.i32(f.offset as i32);
                w.str(&f.name);
            }
        }
        0x40 => {
            let (epoch, tpd, tf) = t.time.as_ref().unwrap();
            w.i64(*epoch);
            w.i64(*tpd);
            w.i32(tf.len() as i32);
            for &i in tf {
                w.i32(t.fields[i].offset as i32);
            }
        }
        0x80 => w.str(t.content.as_deref().unwrap()),
        0x81 => {
            w.i32(t.nvs.len() as i32);
            for (name, v) in &t.nvs {
                w.str(name);
                match v {
                    Nv::I32(x) => {
                        w.i32(1);
                        w.i32(*x);
                    }
                    Nv::F64(x) => {
                        w.i32(2);
                        w.f64(*x);
                    }
                    Nv::Text(s) => {
                        w.i32(3);
                        w.str(s);
                    }
                    Nv::Uuid(b) => {
                        w.i32(4);
                        w.buf.extend_from_slice(b);
                    }
                }
            }
        }
        _ => w.buf.extend_from_slice(t.custom.as_deref().unwrap()),
    }
    w.buf
}

fn write_tea(t: &Tea) -> Vec<u8> {
    let mut ids = vec![0x0a];
    if t.time.is_some() {
        ids.push(0x40);
    }
    if t.content.is_some() {
        ids.push(0x80);
    }
    if !t.nvs.is_empty() {
        ids.push(0x81);
    }
    if t.custom.is_some() {
        ids.push(0x12345);
    }
    // A deterministic shuffle.
    let mut seed = t.order_seed;
    for i in (1..ids.len()).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ids.swap(i, (seed >> 33) as usize % (i + 1));
    }
    let mut sections = W {
        big: t.big,
        buf: Vec::new(),
    };
    for (k, &id) in ids.iter().enumerate() {
        let body = section_body(t, id);
        // Some headroom inside non-last sections, as writers may reserve.
        let headroom = if k + 1 < ids.len() {
            (seed as usize >> k) % 3
        } else {
            0
        };
        sections.i32(id);
        sections.i32((body.len() + headroom) as i32);
        sections.buf.extend_from_slice(&body);
        sections.buf.extend(std::iter::repeat_n(0xEEu8, headroom));
    }
    let item_start = 32 + sections.buf.len() + t.padding;
    let area = t.items.len() * t.item_size as usize + t.partial;
    let mut w = W {
        big: t.big,
        buf: Vec::new(),
    };
    w.buf.extend_from_slice(&if t.big {
        0x0d0e0a0402080500u64.to_be_bytes()
    } else {
        0x0d0e0a0402080500u64.to_le_bytes()
    });
    w.i64(item_start as i64);
    w.i64(if t.prealloc.is_some() {
        (item_start + area) as i64
    } else {
        0
    });
    w.i64(ids.len() as i64);
    w.buf.extend_from_slice(&sections.buf);
    w.buf.extend(std::iter::repeat_n(0u8, t.padding));
    for item in &t.items {
        let start = w.buf.len();
        w.buf.resize(start + t.item_size as usize, 0xCD);
        let mut tmp = W {
            big: t.big,
            buf: Vec::new(),
        };
        for (f, &v) in t.fields.iter().zip(item) {
            let size = type_size(f.ty);
            tmp.buf.clear();
            if f.ty == NET_DECIMAL {
                tmp.buf.extend(std::iter::repeat_n(v as u8, 16));
            } else {
                tmp.value(v, size);
            }
            let o = start + f.offset as usize;
            w.buf[o..o + size].copy_from_slice(&tmp.buf);
        }
    }
    w.buf.extend(std::iter::repeat_n(0x77u8, t.partial));
    if let Some(n) = t.prealloc {
        w.buf.extend(std::iter::repeat_n(0xABu8, n));
    }
    w.buf
}

fn arb_nv() -> impl Strategy<Value = Nv> {
    prop_oneof![
        any::<i32>().prop_map(Nv::I32),
        any::<f64>().prop_map(Nv::F64),
        "[a-zA-Z0-9 äöü€]{0,12}".prop_map(Nv::Text),
        any::<[u8; 16]>().prop_map(Nv::Uuid),
    ]
}

fn arb_tea() -> impl Strategy<Value = Tea> {
    let fields = prop::collection::vec(
        (
            prop_oneof![9 => 1i32..=10, 1 => Just(NET_DECIMAL)],
            any::<bool>(),
        ),
        1..7,
    );
    (fields, 0u32..9, any::<bool>()).prop_flat_map(|(types, extra, big)| {
        // Lay the fields out one after another, naturally aligned or packed.
        let mut offset = 0u32;
        let mut fields = Vec::new();
        for (i, (ty, align)) in types.iter().enumerate() {
            let size = type_size(*ty) as u32;
            if *align {
                offset = offset.div_ceil(size.min(8)) * size.min(8);
            }
            fields.push(Field {
                ty: *ty,
                offset,
                name: format!("f{i}_{ty}"),
            });
            offset += size;
        }
        let item_size = offset + extra;
        let nfields = fields.len();
        let time = prop::option::of((
            prop_oneof![Just(0i64), Just(719_162i64), 0i64..4_000_000, any::<i64>()],
            prop_oneof![
                Just(1i64),
                Just(86_400),
                Just(86_400_000),
                Just(864_000_000_000),
                Just(86_400_000_000_000),
                1i64..i64::MAX
            ],
            prop::sample::subsequence((0..nfields).collect::<Vec<_>>(), 0..=nfields).prop_shuffle(),
        ));
        let items = prop::collection::vec(prop::collection::vec(any::<u64>(), nfields), 0..40);
        (
            (
                Just(big),
                "[A-Za-z]{1,8}",
                Just(item_size),
                Just(fields),
                prop::option::of("[ -~]{0,20}"),
                prop::collection::vec(("[a-z_]{1,8}", arb_nv()), 0..5),
                time,
            ),
            (
                prop::option::of(prop::collection::vec(any::<u8>(), 0..20)),
                any::<u64>(),
                0usize..16,
                items,
                0..item_size as usize,
                prop::option::of(0usize..64),
            ),
        )
            .prop_map(
                |(
                    (big, item_name, item_size, fields, content, nvs, time),
                    (custom, order_seed, padding, mut items, partial, prealloc),
                )| {
                    // Mask each value to its field size.
                    for item in &mut items {
                        for (v, f) in item.iter_mut().zip(&fields) {
                            let bits = 8 * type_size(f.ty).min(8);
                            if bits < 64 {
                                *v &= (1u64 << bits) - 1;
                            }
                        }
                    }
                    Tea {
                        big,
                        item_name,
                        item_size,
                        fields,
                        content,
                        nvs,
                        time,
                        custom,
                        order_seed,
                        padding,
                        items,
                        partial,
                        prealloc,
                    }
                },
            )
    })
}

fn elem(ty: i32) -> ElementType {
    match ty {
        1 => ElementType::I8,
        2 => ElementType::I16,
        3 => ElementType::I32,
        4 => ElementType::I64,
        5 => ElementType::U8,
        6 => ElementType::U16,
        7 => ElementType::U32,
        8 => ElementType::U64,
        9 => ElementType::F32,
        10 => ElementType::F64,
        _ => unreachable!(),
    }
}

fn check_roundtrip(t: &Tea, src: &TeaSource, split: usize) {
    let n = t.items.len() as u64;
    assert_eq!(src.item_count(), n);
    let kept: Vec<usize> = (0..t.fields.len())
        .filter(|&i| t.fields[i].ty != NET_DECIMAL)
        .collect();
    assert_eq!(src.variables().len(), kept.len());
    let event = t
        .time
        .as_ref()
        .and_then(|(_, _, tf)| tf.first().copied())
        .filter(|&i| t.fields[i].ty != NET_DECIMAL);
    let dim = event.map_or("index".to_string(), |i| t.fields[i].name.clone());
    for (vi, &fi) in kept.iter().enumerate() {
        let f = &t.fields[fi];
        let v = &src.variables()[vi];
        assert_eq!(v.name, f.name);
        assert_eq!(v.dtype, elem(f.ty));
        assert_eq!(v.shape, vec![n]);
        assert_eq!(v.dims, Some(vec![dim.clone()]));
        assert_eq!(
            v.role,
            if Some(fi) == event {
                Role::Coordinate
            } else {
                Role::Data
            }
        );
        assert_eq!(
            attr(&v.attrs, "teafile_field_type"),
            Some(&AttrValue::I32(vec![f.ty]))
        );
        assert_eq!(
            attr(&v.attrs, "teafile_field_offset"),
            Some(&AttrValue::I32(vec![f.offset as i32]))
        );
        let time_pos = t
            .time
            .as_ref()
            .and_then(|(_, _, tf)| tf.iter().position(|&x| x == fi));
        match time_pos {
            Some(p) => {
                let (epoch, tpd, _) = t.time.as_ref().unwrap();
                assert_eq!(
                    attr(&v.attrs, "time_epoch_days"),
                    Some(&AttrValue::I64(vec![*epoch]))
                );
                assert_eq!(
                    attr(&v.attrs, "time_ticks_per_day"),
                    Some(&AttrValue::I64(vec![*tpd]))
                );
                assert_eq!(
                    attr(&v.attrs, "is_event_time"),
                    Some(&AttrValue::U8(vec![u8::from(p == 0)]))
                );
                let units = attr(&v.attrs, "units");
                if (0..=3_652_058).contains(epoch) {
                    let Some(AttrValue::Text(u)) = units else {
                        panic!("no units")
                    };
                    assert!(u.contains(" since "), "{u}");
                } else {
                    assert!(units.is_none());
                }
            }
            None => assert!(attr(&v.attrs, "is_event_time").is_none()),
        }
        // Values, read in two regions split at `split`.
        let size = v.dtype.size();
        let mut out = vec![0u8; n as usize * size];
        let s = (split as u64).min(n);
        let (a, b) = out.split_at_mut(s as usize * size);
        src.read_region(vi, &[0], &[s], a).unwrap();
        src.read_region(vi, &[s], &[n - s], b).unwrap();
        let expected: Vec<u8> = t
            .items
            .iter()
            .flat_map(|item| item[fi].to_le_bytes()[..size].to_vec())
            .collect();
        assert_eq!(out, expected, "values of {}", f.name);
        if let Some(c) = src.contiguous_bytes(vi) {
            assert_eq!(c, &expected[..]);
        }
    }
    // Global attributes.
    let g = src.global_attrs();
    assert_eq!(
        attr(g, "item_name"),
        Some(&AttrValue::Text(t.item_name.clone()))
    );
    assert_eq!(
        attr(g, "item_size"),
        Some(&AttrValue::I32(vec![t.item_size as i32]))
    );
    assert_eq!(
        attr(g, "content_description"),
        t.content.clone().map(AttrValue::Text).as_ref()
    );
    let mut seen = std::collections::HashSet::new();
    for (name, nv) in &t.nvs {
        if !seen.insert(name.clone()) {
            continue; // a repeated name is stored suffixed
        }
        let a = attr(g, name).unwrap();
        match nv {
            Nv::I32(x) => assert_eq!(a, &AttrValue::I32(vec![*x])),
            Nv::F64(x) => match a {
                AttrValue::F64(v) => assert_eq!(v[0].to_bits(), x.to_bits()),
                _ => panic!("{a:?}"),
            },
            Nv::Text(s) => assert_eq!(a, &AttrValue::Text(s.clone())),
            Nv::Uuid(b) => {
                let AttrValue::Text(s) = a else { panic!() };
                let hex: String = s.chars().filter(|&c| c != '-').collect();
                let want: String = b.iter().map(|x| format!("{x:02x}")).collect();
                assert_eq!(hex, want);
                assert_eq!(s.len(), 36);
            }
        }
    }
    // Skipped: decimal fields, the custom section, a trailing partial item.
    let skipped = src.skipped();
    let decimals = t.fields.iter().filter(|f| f.ty == NET_DECIMAL).count();
    let expected_skips = decimals + usize::from(t.custom.is_some()) + usize::from(t.partial > 0);
    assert_eq!(skipped.len(), expected_skips, "{skipped:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn random_teafiles_round_trip(t in arb_tea(), split in 0usize..50) {
        let bytes = write_tea(&t);
        let has_decimal = t.fields.iter().any(|f| f.ty == NET_DECIMAL);
        let strict = open_bytes(bytes.clone(), &OpenOptions::default());
        if has_decimal {
            let err = strict.expect_err("NetDecimal must be refused without skip_unsupported");
            prop_assert!(matches!(err, SourceError::Unsupported { .. }), "{err}");
            prop_assert!(err.to_string().contains("NetDecimal"));
        } else {
            strict.unwrap();
        }
        let opts = OpenOptions { skip_unsupported: true, ..Default::default() };
        let src = open_bytes(bytes, &opts).unwrap();
        check_roundtrip(&t, &src, split);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400), magic in 0u8..3) {
        let mut bytes = bytes;
        let m = 0x0d0e0a0402080500u64;
        match magic {
            0 if bytes.len() >= 8 => bytes[..8].copy_from_slice(&m.to_le_bytes()),
            1 if bytes.len() >= 8 => bytes[..8].copy_from_slice(&m.to_be_bytes()),
            _ => {}
        }
        exercise(&bytes);
    }

    #[test]
    fn mutated_teafiles_never_panic(
        t in arb_tea(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..6),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
    ) {
        let mut bytes = write_tea(&t);
        for (i, bit) in flips {
            let i = i.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        if do_cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        exercise(&bytes);
    }

    #[test]
    fn mutated_corpus_never_panics(
        file in 0usize..16,
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let files = corpus();
        let mut bytes = files[file % files.len()].clone();
        for (i, x) in flips {
            let i = i.index(bytes.len());
            bytes[i] = x;
        }
        exercise(&bytes);
    }
}

fn corpus() -> Vec<Vec<u8>> {
    tet_testkit::corpus_files("teafile", &["tea"])
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

/// Opens the bytes both ways and reads every variable whole; must never panic.
fn exercise(bytes: &[u8]) {
    for skip in [false, true] {
        let opts = OpenOptions {
            skip_unsupported: skip,
            ..Default::default()
        };
        if let Ok(src) = open_bytes(bytes, &opts) {
            for (i, v) in src.variables().iter().enumerate() {
                let n = v.shape[0];
                let mut out = vec![0u8; n as usize * v.dtype.size()];
                src.read_region(i, &[0], &[n], &mut out).unwrap();
                let _ = src.contiguous_bytes(i);
            }
        }
    }
}
