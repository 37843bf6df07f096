//! Region reads against an independent reference gather, over random shapes, dtypes (plain,
//! complex, datetime, records with sub-array fields), both byte orders, C and Fortran order,
//! `.npy` and `.npz` (stored and deflated).

use crate::common;

use common::{npy_bytes, npz_bytes, py_shape};
use proptest::prelude::*;
use tet_npy::{open_npy_bytes, open_npz_bytes, NpySource};
use tet_source::{ElementType, OpenOptions, Source};
use tet_testkit::XorShift;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Prim {
    B1,
    I1,
    I2,
    I4,
    I8,
    U1,
    U2,
    U4,
    U8,
    F2,
    F4,
    F8,
    C8,
    C16,
    M8s,
}

impl Prim {
    fn size(self) -> usize {
        match self {
            Prim::B1 | Prim::I1 | Prim::U1 => 1,
            Prim::I2 | Prim::U2 | Prim::F2 => 2,
            Prim::I4 | Prim::U4 | Prim::F4 => 4,
            Prim::I8 | Prim::U8 | Prim::F8 | Prim::C8 | Prim::M8s => 8,
            Prim::C16 => 16,
        }
    }

    fn code(self) -> &'static str {
        match self {
            Prim::B1 => "b1",
            Prim::I1 => "i1",
            Prim::I2 => "i2",
            Prim::I4 => "i4",
            Prim::I8 => "i8",
            Prim::U1 => "u1",
            Prim::U2 => "u2",
            Prim::U4 => "u4",
            Prim::U8 => "u8",
            Prim::F2 => "f2",
            Prim::F4 => "f4",
            Prim::F8 => "f8",
            Prim::C8 => "c8",
            Prim::C16 => "c16",
            Prim::M8s => "M8[s]",
        }
    }

    fn descr(self, big: bool) -> String {
        let order = if self.size() == 1 {
            '|'
        } else if big {
            '>'
        } else {
            '<'
        };
        format!("'{order}{}'", self.code())
    }

    fn elem(self) -> ElementType {
        match self {
            Prim::B1 => ElementType::Bool,
            Prim::I1 => ElementType::I8,
            Prim::I2 => ElementType::I16,
            Prim::I4 => ElementType::I32,
            Prim::I8 | Prim::M8s => ElementType::I64,
            Prim::U1 => ElementType::U8,
            Prim::U2 => ElementType::U16,
            Prim::U4 => ElementType::U32,
            Prim::U8 => ElementType::U64,
            Prim::F2 => ElementType::F16,
            Prim::F4 => ElementType::F32,
            Prim::F8 => ElementType::F64,
            Prim::C8 => ElementType::C64,
            Prim::C16 => ElementType::C128,
        }
    }
}

#[derive(Debug, Clone)]
struct FieldSpec {
    prim: Prim,
    big: bool,
    sub: Vec<u64>,
}

#[derive(Debug, Clone)]
enum Spec {
    Plain(Prim, bool),
    Record(Vec<FieldSpec>),
}

/// A variable the reference expects: name suffix, where its elements are inside a record.
#[derive(Debug, Clone)]
struct ExpLeaf {
    suffix: String,
    offset: usize,
    sub: Vec<u64>,
    sub_stride: usize,
    esize: usize,
    /// Big-endian: the bytes of each unit of this many bytes (an element, or each part of a
    /// complex element) are reversed; 1 when nothing is swapped.
    swap_unit: usize,
    is_bool: bool,
    elem: ElementType,
}

fn prim_leaves(prim: Prim, big: bool, suffix: &str, offset: usize, sub: &[u64]) -> Vec<ExpLeaf> {
    // A complex element is one value whose two parts are swapped separately.
    let unit = match prim {
        Prim::C8 | Prim::C16 => prim.size() / 2,
        _ => prim.size(),
    };
    vec![ExpLeaf {
        suffix: suffix.to_string(),
        offset,
        sub: sub.to_vec(),
        sub_stride: prim.size(),
        esize: prim.size(),
        swap_unit: if big { unit } else { 1 },
        is_bool: prim == Prim::B1,
        elem: prim.elem(),
    }]
}

impl Spec {
    fn descr(&self) -> String {
        match self {
            Spec::Plain(p, big) => p.descr(*big),
            Spec::Record(fields) => {
                let items: Vec<String> = fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        if f.sub.is_empty() {
                            format!("('f{i}', {})", f.prim.descr(f.big))
                        } else {
                            format!("('f{i}', {}, {})", f.prim.descr(f.big), py_shape(&f.sub))
                        }
                    })
                    .collect();
                format!("[{}]", items.join(", "))
            }
        }
    }

    fn record_size(&self) -> usize {
        match self {
            Spec::Plain(p, _) => p.size(),
            Spec::Record(fields) => fields
                .iter()
                .map(|f| f.prim.size() * f.sub.iter().product::<u64>() as usize)
                .sum(),
        }
    }

    fn leaves(&self) -> Vec<ExpLeaf> {
        match self {
            Spec::Plain(p, big) => prim_leaves(*p, *big, "", 0, &[]),
            Spec::Record(fields) => {
                let mut off = 0;
                let mut out = Vec::new();
                for (i, f) in fields.iter().enumerate() {
                    out.extend(prim_leaves(f.prim, f.big, &format!("/f{i}"), off, &f.sub));
                    off += f.prim.size() * f.sub.iter().product::<u64>() as usize;
                }
                out
            }
        }
    }
}

fn prim() -> impl Strategy<Value = Prim> {
    prop_oneof![
        Just(Prim::B1),
        Just(Prim::I1),
        Just(Prim::I2),
        Just(Prim::I4),
        Just(Prim::I8),
        Just(Prim::U1),
        Just(Prim::U2),
        Just(Prim::U4),
        Just(Prim::U8),
        Just(Prim::F2),
        Just(Prim::F4),
        Just(Prim::F8),
        Just(Prim::C8),
        Just(Prim::C16),
        Just(Prim::M8s),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    let field = (prim(), any::<bool>(), prop::collection::vec(0u64..4, 0..3))
        .prop_map(|(prim, big, sub)| FieldSpec { prim, big, sub });
    prop_oneof![
        3 => (prim(), any::<bool>()).prop_map(|(p, b)| Spec::Plain(p, b)),
        1 => prop::collection::vec(field, 1..4).prop_map(Spec::Record),
    ]
}

fn shape() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        8 => prop::collection::vec(1u64..6, 1..=4),
        1 => prop::collection::vec(0u64..4, 1..=4),
        1 => Just(Vec::new()),
    ]
}

/// A small deterministic byte generator.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    XorShift(seed | 1).bytes(n)
}

fn lin(idx: &[u64], shape: &[u64], fortran: bool) -> u64 {
    let mut l = 0;
    let mut m = 1;
    let axes: Vec<usize> = if fortran {
        (0..shape.len()).collect()
    } else {
        (0..shape.len()).rev().collect()
    };
    for a in axes {
        l += idx[a] * m;
        m *= shape[a];
    }
    l
}

/// The reference: element by element, in C order over the region.
fn reference(
    data: &[u8],
    shape: &[u64],
    fortran: bool,
    rec: usize,
    leaf: &ExpLeaf,
    start: &[u64],
    count: &[u64],
) -> Vec<u8> {
    let a = shape.len();
    let n: u64 = count.iter().product();
    let mut out = Vec::new();
    let mut idx = vec![0u64; count.len()];
    for _ in 0..n {
        let full: Vec<u64> = idx.iter().zip(start).map(|(i, s)| i + s).collect();
        let r = lin(&full[..a], shape, fortran) as usize;
        let j = lin(&full[a..], &leaf.sub, false) as usize;
        let pos = r * rec + leaf.offset + j * leaf.sub_stride;
        let mut e = data[pos..pos + leaf.esize].to_vec();
        for unit in e.chunks_exact_mut(leaf.swap_unit) {
            unit.reverse();
        }
        if leaf.is_bool {
            e[0] = u8::from(e[0] != 0);
        }
        out.extend(e);
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < count[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

fn open(container: u8, name: &str, file: Vec<u8>) -> NpySource {
    let opts = OpenOptions::default();
    match container {
        0 => open_npy_bytes(name, file, &opts).unwrap(),
        c => {
            let z = npz_bytes(&[
                ("notes.txt", b"hello", false),
                (&format!("{name}.npy"), &file, c == 2),
            ]);
            let s = open_npz_bytes(z, &opts).unwrap();
            assert_eq!(s.skipped().len(), 1);
            assert_eq!(s.skipped()[0].name, "notes.txt");
            s
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn regions_match_reference(
        spec in spec(),
        shape in shape(),
        fortran in any::<bool>(),
        major in 1u8..=3,
        trailing in 0usize..3,
        container in 0u8..3,
        seed in any::<u64>(),
        picks in prop::collection::vec(any::<u64>(), 96),
    ) {
        let rec = spec.record_size();
        let count: u64 = shape.iter().product();
        let data = bytes(seed, rec * count as usize + trailing);
        let file = npy_bytes(major, &spec.descr(), fortran, &shape, &data);
        let name = if container == 0 { "arr" } else { "dir/arr" };
        let src = open(container, name, file);
        let leaves = spec.leaves();
        let vars = src.variables();
        prop_assert_eq!(vars.len(), leaves.len());
        // A 0-d array's variables have just their sub-array axes.
        let ashape = shape.clone();
        let mut picks = picks.into_iter().cycle();
        for (i, (v, leaf)) in vars.iter().zip(&leaves).enumerate() {
            prop_assert_eq!(&v.name, &format!("{name}{}", leaf.suffix));
            prop_assert_eq!(v.dtype, leaf.elem);
            let vshape: Vec<u64> = ashape.iter().chain(&leaf.sub).copied().collect();
            prop_assert_eq!(&v.shape, &vshape);
            prop_assert_eq!(v.layout.compressed, container == 2);
            // Whole variable, and what contiguous_bytes lends.
            let zero = vec![0; vshape.len()];
            let full = reference(&data, &ashape, fortran, rec, leaf, &zero, &vshape);
            let mut out = vec![0xAA; full.len()];
            src.read_region(i, &zero, &vshape, &mut out).unwrap();
            prop_assert_eq!(&out, &full);
            if let Some(lent) = src.contiguous_bytes(i) {
                prop_assert_eq!(lent, &full[..]);
            }
            // Random sub-regions.
            for _ in 0..4 {
                let mut start = Vec::new();
                let mut cnt = Vec::new();
                for &d in &vshape {
                    let s = picks.next().unwrap() % (d + 1);
                    let c = picks.next().unwrap() % (d - s + 1);
                    start.push(s);
                    cnt.push(c);
                }
                let want = reference(&data, &ashape, fortran, rec, leaf, &start, &cnt);
                let mut out = vec![0x55; want.len()];
                src.read_region(i, &start, &cnt, &mut out).unwrap();
                prop_assert_eq!(out, want);
            }
        }
    }
}

#[test]
fn contiguous_bytes_only_for_plain_c_little_endian() {
    let data = bytes(7, 6 * 8);
    let opts = OpenOptions::default();
    let c = open_npy_bytes("a", npy_bytes(1, "'<f8'", false, &[2, 3], &data), &opts).unwrap();
    assert_eq!(c.contiguous_bytes(0), Some(&data[..]));
    let f = open_npy_bytes("a", npy_bytes(1, "'<f8'", true, &[2, 3], &data), &opts).unwrap();
    assert_eq!(f.contiguous_bytes(0), None);
    // A 1-D Fortran array is laid out as in C order.
    let f1 = open_npy_bytes("a", npy_bytes(1, "'<f8'", true, &[6], &data), &opts).unwrap();
    assert_eq!(f1.contiguous_bytes(0), Some(&data[..]));
    assert!(f1.variables()[0].notes.is_empty());
    let be = open_npy_bytes("a", npy_bytes(1, "'>f8'", false, &[6], &data), &opts).unwrap();
    assert_eq!(be.contiguous_bytes(0), None);
    // Bool is lent only when every byte is 0 or 1.
    let clean = [0u8, 1, 1, 0];
    let b = open_npy_bytes("b", npy_bytes(1, "'|b1'", false, &[4], &clean), &opts).unwrap();
    assert_eq!(b.contiguous_bytes(0), Some(&clean[..]));
    let dirty = [0u8, 2, 1, 0];
    let b = open_npy_bytes("b", npy_bytes(1, "'|b1'", false, &[4], &dirty), &opts).unwrap();
    assert_eq!(b.contiguous_bytes(0), None);
    let mut out = [9u8; 4];
    b.read_region(0, &[0], &[4], &mut out).unwrap();
    assert_eq!(out, [0, 1, 1, 0]);
    // A deflated member is inflated, then lent.
    let z = npz_bytes(&[("x.npy", &npy_bytes(1, "'<f8'", false, &[6], &data), true)]);
    let s = open_npz_bytes(z, &opts).unwrap();
    assert_eq!(s.contiguous_bytes(0), Some(&data[..]));
}

#[test]
fn parallel_reads_of_a_deflated_member() {
    let data = bytes(3, 64 * 64 * 4);
    let z = npz_bytes(&[(
        "x.npy",
        &npy_bytes(1, "'<u4'", true, &[64, 64], &data),
        true,
    )]);
    let s = open_npz_bytes(z, &OpenOptions::default()).unwrap();
    let leaf = Spec::Plain(Prim::U4, false).leaves().remove(0);
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let s = &s;
            let data = &data;
            let leaf = &leaf;
            scope.spawn(move || {
                let start = [t * 8, 0];
                let count = [8, 64];
                let mut out = vec![0u8; 8 * 64 * 4];
                s.read_region(0, &start, &count, &mut out).unwrap();
                assert_eq!(
                    out,
                    reference(data, &[64, 64], true, 4, leaf, &start, &count)
                );
            });
        }
    });
}
