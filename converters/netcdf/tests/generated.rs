//! Files written here with the `netcdf` crate (classic, 64-bit offset, 64-bit data, netCDF-4
//! classic model, netCDF-4 with groups), read back through the importer: every numeric type,
//! unlimited and zero-length dimensions, scalars, chunking and deflate, strings, char arrays,
//! enums, unsupported user types, attributes of every type, CF packing; and a property test
//! comparing random regions of random variables value for value.

use crate::common;

use std::path::Path;

use common::{packed_type, packing, read_all, unpacking};
use netcdf::types::{
    CompoundType, CompoundTypeField, EnumType, EnumTypeValues, FloatType, IntType,
    NcTypeDescriptor, NcVariableType, OpaqueType, VlenType,
};
use netcdf::Options;
use proptest::prelude::*;
use tet_netcdf::{open_path, DataModel, NcImporter, NcSource};
use tet_source::{AttrValue, ElementType, Fact, Importer, OpenOptions, Role, Source};
use tet_testkit::{find, sub_block, var_index, XorShift};

/// NC_CHAR elements.
#[repr(transparent)]
#[derive(Copy, Clone)]
struct NcChar(u8);
// SAFETY: one byte, as NC_CHAR.
unsafe impl NcTypeDescriptor for NcChar {
    fn type_descriptor() -> NcVariableType {
        NcVariableType::Char
    }
}

fn weather_type() -> NcVariableType {
    NcVariableType::Enum(EnumType {
        name: "weather_t".into(),
        fieldnames: vec!["CLEAR".into(), "CLOUDY".into(), "RAIN".into()],
        fieldvalues: EnumTypeValues::I8(vec![0, 1, -2]),
    })
}

/// Elements of the enum `weather_t` (base int8).
#[repr(transparent)]
#[derive(Copy, Clone)]
struct Weather(i8);
// SAFETY: one byte, the enum's base type.
unsafe impl NcTypeDescriptor for Weather {
    fn type_descriptor() -> NcVariableType {
        weather_type()
    }
}

fn chars(names: &[&str], strlen: usize) -> Vec<NcChar> {
    names
        .iter()
        .flat_map(|n| {
            let mut b = n.as_bytes().to_vec();
            b.resize(strlen, 0);
            b.into_iter().map(NcChar)
        })
        .collect()
}

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn var<'a>(src: &'a dyn Source, name: &str) -> (usize, &'a tet_source::Variable) {
    let i = var_index(src, name);
    (i, &src.variables()[i])
}

/// A classic-model file (CDF-1, CDF-2 or netCDF-4 classic) with every classic type, a record
/// dimension, a scalar and a char array.
fn write_classic(path: &Path, options: &Options, records: usize) {
    let mut f = netcdf::create_with(path, Options::from_bits_retain(options.bits())).unwrap();
    // Definitions first (classic files must leave define mode before data is written).
    f.add_unlimited_dimension("time").unwrap();
    f.add_dimension("x", 3).unwrap();
    f.add_dimension("y", 4).unwrap();
    f.add_dimension("station", 2).unwrap();
    f.add_dimension("strlen", 6).unwrap();
    f.add_attribute("title", "classic test").unwrap();
    f.add_attribute("history", "written by the tet-netcdf tests")
        .unwrap();
    f.add_attribute("ints", vec![1i32, -2, 3]).unwrap();
    f.add_attribute("bytes", vec![-1i8, 2]).unwrap();
    f.add_attribute("shorts", -7i16).unwrap();
    f.add_attribute("floats", vec![0.5f32, -0.25]).unwrap();
    f.add_attribute("double", 1e300f64).unwrap();
    {
        let mut t = f.add_variable::<f64>("time", &["time"]).unwrap();
        t.put_attribute("units", "days since 2000-01-01").unwrap();
        t.put_attribute("calendar", "noleap").unwrap();
    }
    f.add_variable::<f32>("x", &["x"]).unwrap();
    f.add_variable::<i8>("b", &["time", "x", "y"])
        .unwrap()
        .put_attribute("_Unsigned", "true")
        .unwrap();
    f.add_variable::<i16>("s", &["time", "x", "y"]).unwrap();
    f.add_variable::<i32>("i", &["x", "y"]).unwrap();
    f.add_variable::<f32>("f", &["x", "y"])
        .unwrap()
        .put_attribute("_FillValue", -9.5f32)
        .unwrap();
    f.add_variable::<f64>("d", &["x", "y"]).unwrap();
    f.add_variable::<i32>("crs", &[])
        .unwrap()
        .put_attribute("grid_mapping_name", "latitude_longitude")
        .unwrap();
    f.add_variable::<NcChar>("station_name", &["station", "strlen"])
        .unwrap()
        .put_attribute("cf_role", "timeseries_id")
        .unwrap();
    f.enddef().unwrap();

    let n = records * 12;
    let rec = (&[0, 0, 0][..], &[records, 3, 4][..]);
    if records > 0 {
        let times: Vec<f64> = (0..records).map(|i| i as f64 * 0.5).collect();
        let b: Vec<i8> = (0..n).map(|i| (i as i64 * 37 % 256 - 128) as i8).collect();
        let s: Vec<i16> = (0..n).map(|i| i as i16 * -300).collect();
        f.variable_mut("time")
            .unwrap()
            .put_values(&times, (&[0][..], &[records][..]))
            .unwrap();
        f.variable_mut("b").unwrap().put_values(&b, rec).unwrap();
        f.variable_mut("s").unwrap().put_values(&s, rec).unwrap();
    }
    let x: Vec<f32> = vec![-1.5, 0.0, 1.5];
    let ints: Vec<i32> = (0..12).map(|i| i * 1_000_003 - 7).collect();
    let fl: Vec<f32> = (0..12).map(|i| i as f32 / 3.0).collect();
    let d: Vec<f64> = (0..12).map(|i| (i as f64).sqrt() * -1e10).collect();
    f.variable_mut("x").unwrap().put_values(&x, ..).unwrap();
    f.variable_mut("i").unwrap().put_values(&ints, ..).unwrap();
    f.variable_mut("f").unwrap().put_values(&fl, ..).unwrap();
    f.variable_mut("d").unwrap().put_values(&d, ..).unwrap();
    f.variable_mut("crs").unwrap().put_value(42i32, ()).unwrap();
    f.variable_mut("station_name")
        .unwrap()
        .put_values(&chars(&["Alpha", "Bravo"], 6), ..)
        .unwrap();
    f.close().unwrap();
}

fn check_classic(path: &Path, model: DataModel, records: usize) {
    let src = open_path(path, &OpenOptions::default()).unwrap();
    assert_eq!(src.data_model(), model);
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["time", "x", "b", "s", "i", "f", "d", "crs"]);
    let g = src.global_attrs();
    assert_eq!(
        find(g, "title"),
        Some(&AttrValue::Text("classic test".into()))
    );
    assert_eq!(
        find(g, "history"),
        Some(&AttrValue::Text("written by the tet-netcdf tests".into()))
    );
    assert_eq!(find(g, "ints"), Some(&AttrValue::I32(vec![1, -2, 3])));
    assert_eq!(find(g, "bytes"), Some(&AttrValue::I8(vec![-1, 2])));
    assert_eq!(find(g, "shorts"), Some(&AttrValue::I16(vec![-7])));
    assert_eq!(find(g, "floats"), Some(&AttrValue::F32(vec![0.5, -0.25])));
    assert_eq!(find(g, "double"), Some(&AttrValue::F64(vec![1e300])));
    assert_eq!(g.len(), 7, "{g:?}");

    let (ti, t) = var(&src, "time");
    assert_eq!(t.role, Role::Coordinate);
    assert_eq!(t.shape, vec![records as u64]);
    assert!(
        t.facts.contains(&Fact::UnlimitedDims(vec!["time".into()])),
        "{:?}",
        t.facts
    );
    let times: Vec<f64> = (0..records).map(|i| i as f64 * 0.5).collect();
    assert_eq!(read_all(&src, ti), le(&times, f64::to_le_bytes));

    let (bi, b) = var(&src, "b");
    assert_eq!(b.dtype, ElementType::I8, "byte stays signed");
    assert_eq!(b.shape, vec![records as u64, 3, 4]);
    assert_eq!(b.dims, Some(vec!["time".into(), "x".into(), "y".into()]));
    assert_eq!(b.role, Role::Data);
    assert_eq!(
        find(&b.attrs, "_Unsigned"),
        Some(&AttrValue::Text("true".into()))
    );
    let n = records * 12;
    let want: Vec<u8> = (0..n)
        .map(|i| (i as i64 * 37 % 256 - 128) as i8 as u8)
        .collect();
    if n > 0 {
        assert_eq!(read_all(&src, bi), want);
    }
    let (si, _) = var(&src, "s");
    let s: Vec<i16> = (0..n).map(|i| i as i16 * -300).collect();
    if n > 0 {
        assert_eq!(read_all(&src, si), le(&s, i16::to_le_bytes));
    }
    let (ii, _) = var(&src, "i");
    let ints: Vec<i32> = (0..12).map(|i| i * 1_000_003 - 7).collect();
    assert_eq!(read_all(&src, ii), le(&ints, i32::to_le_bytes));
    let (fi, fv) = var(&src, "f");
    assert_eq!(
        find(&fv.attrs, "_FillValue"),
        Some(&AttrValue::F32(vec![-9.5]))
    );
    let fl: Vec<f32> = (0..12).map(|i| i as f32 / 3.0).collect();
    assert_eq!(read_all(&src, fi), le(&fl, f32::to_le_bytes));
    let (di, _) = var(&src, "d");
    let d: Vec<f64> = (0..12).map(|i| (i as f64).sqrt() * -1e10).collect();
    assert_eq!(read_all(&src, di), le(&d, f64::to_le_bytes));

    let (ci, crs) = var(&src, "crs");
    assert_eq!(crs.shape, Vec::<u64>::new());
    assert_eq!(crs.dims, None);
    assert!(crs.notes.is_empty(), "{:?}", crs.notes);
    assert_eq!(read_all(&src, ci), 42i32.to_le_bytes());

    let texts = src.text_variables();
    assert_eq!(texts.len(), 1);
    assert_eq!(texts[0].name, "station_name");
    assert_eq!(texts[0].shape, vec![2]);
    assert_eq!(texts[0].dims, Some(vec!["station".into()]));
    assert_eq!(texts[0].values, ["Alpha", "Bravo"]);
    // `station` has no numeric coordinate variable: the names label it.
    assert_eq!(src.dim_labels().len(), 1);
    assert_eq!(src.dim_labels()[0].dim, "station");
    assert_eq!(src.dim_labels()[0].labels, ["Alpha", "Bravo"]);

    for v in src.variables() {
        if model.name().starts_with("NETCDF3") {
            assert_eq!(v.layout, Default::default(), "{}", v.name);
        }
    }
}

#[test]
fn classic_formats_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    for (options, model) in [
        (Options::empty(), DataModel::Classic),
        (Options::_64BIT_OFFSET, DataModel::Offset64),
        (Options::_64BIT_DATA, DataModel::Data64),
        (
            Options::NETCDF4 | Options::CLASSIC,
            DataModel::Netcdf4Classic,
        ),
    ] {
        for records in [0usize, 1, 5] {
            let p = dir.path().join(format!("{}_{records}.nc", model.name()));
            write_classic(&p, &options, records);
            check_classic(&p, model, records);
        }
    }
}

/// Calls `$m!(name, Rust type, ElementType and AttrValue variant, values)` for every numeric
/// type of CDF-5 and netCDF-4, with its extremes.
macro_rules! numeric_types {
    ($m:ident) => {
        $m!("i1", i8, I8, [i8::MIN, 0, i8::MAX]);
        $m!("u1", u8, U8, [0, 1, u8::MAX]);
        $m!("i2", i16, I16, [i16::MIN, -1, i16::MAX]);
        $m!("u2", u16, U16, [0, 2, u16::MAX]);
        $m!("i4", i32, I32, [i32::MIN, -3, i32::MAX]);
        $m!("u4", u32, U32, [0, 4, u32::MAX]);
        $m!("i8", i64, I64, [i64::MIN, -5, i64::MAX]);
        $m!("u8", u64, U64, [0, 6, u64::MAX]);
        $m!("f4", f32, F32, [f32::MIN_POSITIVE, -0.0, f32::NAN]);
        $m!("f8", f64, F64, [f64::MAX, f64::NEG_INFINITY, -0.0]);
    };
}

/// Writes one variable `n` long of each of [`numeric_types`], with its values and its type's
/// minimum as the attribute `min`.
fn write_numeric_types(p: &Path, options: Options) {
    let mut f = netcdf::create_with(p, options).unwrap();
    f.add_dimension("n", 3).unwrap();
    macro_rules! def {
        ($name:literal, $t:ty, $v:ident, $vals:expr) => {{
            let mut var = f.add_variable::<$t>($name, &["n"]).unwrap();
            var.put_attribute("min", <$t>::MIN).unwrap();
        }};
    }
    numeric_types!(def);
    f.enddef().unwrap();
    macro_rules! put {
        ($name:literal, $t:ty, $v:ident, $vals:expr) => {{
            let v: [$t; 3] = $vals;
            f.variable_mut($name).unwrap().put_values(&v, ..).unwrap();
        }};
    }
    numeric_types!(put);
    f.close().unwrap();
}

/// Every numeric type of CDF-5 and netCDF-4, with extremes.
#[test]
fn every_numeric_type() {
    let dir = tempfile::tempdir().unwrap();
    for (options, model) in [
        (Options::_64BIT_DATA, DataModel::Data64),
        (Options::NETCDF4, DataModel::Netcdf4),
    ] {
        let p = dir.path().join(format!("types_{}.nc", model.name()));
        write_numeric_types(&p, options);
        let src = open_path(&p, &OpenOptions::default()).unwrap();
        assert_eq!(src.data_model(), model);
        let mut i = 0;
        macro_rules! check {
            ($name:literal, $t:ty, $v:ident, $vals:expr) => {{
                let v = &src.variables()[i];
                assert_eq!(v.name, $name);
                assert_eq!(v.dtype, ElementType::$v, $name);
                let vals: [$t; 3] = $vals;
                assert_eq!(read_all(&src, i), le(&vals, <$t>::to_le_bytes), $name);
                let min = AttrValue::$v(vec![<$t>::MIN]);
                assert_eq!(find(&v.attrs, "min"), Some(&min), $name);
                i += 1;
            }};
        }
        numeric_types!(check);
        assert_eq!(src.variables().len(), i);
    }
}

/// Writes the netCDF-4 file of [`netcdf4_groups_and_types`].
fn write_groups(p: &Path) {
    let mut f = netcdf::create(p).unwrap();
    f.add_dimension("n", 4).unwrap();
    f.add_unlimited_dimension("rec").unwrap();
    f.add_attribute("history", "h").unwrap();
    f.add_attribute("one_string", vec!["only".to_string()])
        .unwrap();
    f.add_attribute("strings", vec!["a", "bé"]).unwrap();
    f.add_attribute("u64s", vec![u64::MAX, 1]).unwrap();
    f.add_type_from_descriptor(weather_type()).unwrap();
    let nv: Vec<i32> = vec![10, 20, 30, 40];
    f.add_variable::<i32>("n", &["n"])
        .unwrap()
        .put_values(&nv, ..)
        .unwrap();
    // A record variable with no records yet.
    f.add_variable::<f32>("empty", &["rec", "n"]).unwrap();

    let mut a = f.add_group("a").unwrap();
    a.add_attribute("description", "group a").unwrap();
    a.add_attribute("level", 3i16).unwrap();
    a.add_dimension("k", 5).unwrap();
    let k: Vec<f64> = vec![5.0, 4.0, 3.0, 2.0, 1.0];
    a.add_variable::<f64>("k", &["k"])
        .unwrap()
        .put_values(&k, ..)
        .unwrap();
    let mut big = a.add_variable::<f32>("field", &["k", "n"]).unwrap();
    big.set_chunking(&[2, 3]).unwrap();
    big.set_compression(5, true).unwrap();
    let vals: Vec<f32> = (0..20).map(|i| i as f32 * 1.25 - 3.0).collect();
    big.put_values(&vals, ..).unwrap();
    let mut w = a.add_variable::<Weather>("weather", &["n"]).unwrap();
    w.put_values(&[Weather(0), Weather(1), Weather(-2), Weather(1)], ..)
        .unwrap();

    let mut b = a.add_group("b").unwrap();
    b.add_dimension("station", 3).unwrap();
    let mut st = b.add_string_variable("station", &["station"]).unwrap();
    for (i, s) in ["Zürich", "", "Ōsaka"].iter().enumerate() {
        st.put_string(s, (&[i][..], &[1][..])).unwrap();
    }
    let mut run = b.add_variable::<i64>("run", &[]).unwrap();
    run.put_value(-99i64, ()).unwrap();
    // Uses `rec` and `n` of the root group.
    let mut obs = b.add_variable::<u16>("obs", &["rec", "n"]).unwrap();
    obs.put_values(&[1u16, 2, 3, 4, 5, 6, 7, 8], (&[0, 0][..], &[2, 4][..]))
        .unwrap();
    b.add_dimension("len", 4).unwrap();
    b.add_variable::<NcChar>("codes", &["n", "len"])
        .unwrap()
        .put_values(&chars(&["AB", "C  ", "", "DEFG"], 4), ..)
        .unwrap();
    f.close().unwrap();
}

/// The variable order and the global and group attributes of [`write_groups`]'s file.
fn check_groups_inventory(src: &NcSource) {
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "n",
            "empty",
            "a/k",
            "a/field",
            "a/weather",
            "a/b/run",
            "a/b/obs"
        ]
    );
    let g = src.global_attrs();
    assert_eq!(find(g, "one_string"), Some(&AttrValue::Text("only".into())));
    assert_eq!(
        find(g, "strings"),
        Some(&AttrValue::TextList(vec!["a".into(), "bé".into()]))
    );
    assert_eq!(find(g, "u64s"), Some(&AttrValue::U64(vec![u64::MAX, 1])));
    assert_eq!(
        find(g, "a/description"),
        Some(&AttrValue::Text("group a".into()))
    );
    assert_eq!(find(g, "a/level"), Some(&AttrValue::I16(vec![3])));
    assert!(g.iter().all(|(k, _)| !k.starts_with("_NC")), "{g:?}");
}

/// The variables of [`write_groups`]'s file: shapes across groups, chunking, filters, enums,
/// scalars, values.
fn check_groups_variables(src: &NcSource) {
    let (ei, e) = var(src, "empty");
    assert_eq!(
        e.shape,
        vec![2, 4],
        "the root's `rec` has 2 records (from a/b/obs)"
    );
    assert_eq!(read_all(src, ei).len(), 32);

    let (_, k) = var(src, "a/k");
    assert_eq!(k.role, Role::Coordinate);
    let (fi, field) = var(src, "a/field");
    assert_eq!(field.dims, Some(vec!["k".into(), "n".into()]));
    assert_eq!(field.layout.chunk_shape, Some(vec![2, 3]));
    assert!(field.layout.compressed);
    assert_eq!(field.layout.filters, ["shuffle", "deflate(5)"]);
    let vals: Vec<f32> = (0..20).map(|i| i as f32 * 1.25 - 3.0).collect();
    assert_eq!(read_all(src, fi), le(&vals, f32::to_le_bytes));
    let mut region = vec![0u8; 2 * 2 * 4];
    src.read_region(fi, &[3, 1], &[2, 2], &mut region).unwrap();
    let want: Vec<f32> = vec![vals[13], vals[14], vals[17], vals[18]];
    assert_eq!(region, le(&want, f32::to_le_bytes));

    let (wi, w) = var(src, "a/weather");
    assert_eq!(w.dtype, ElementType::I8);
    assert!(w.facts.contains(&Fact::EnumType("weather_t".into())));
    assert!(w.facts.contains(&Fact::EnumMapping(vec![
        ("CLEAR".into(), 0),
        ("CLOUDY".into(), 1),
        ("RAIN".into(), -2)
    ])));
    assert_eq!(read_all(src, wi), [0, 1, 0xfe, 1]);

    let (ri, run) = var(src, "a/b/run");
    assert_eq!(run.shape, Vec::<u64>::new());
    assert_eq!(read_all(src, ri), (-99i64).to_le_bytes());
    let (oi, obs) = var(src, "a/b/obs");
    assert_eq!(obs.dims, Some(vec!["rec".into(), "n".into()]));
    assert!(
        obs.facts.contains(&Fact::UnlimitedDims(vec!["rec".into()])),
        "an unlimited dimension of an ancestor group is known as such"
    );
    assert_eq!(
        read_all(src, oi),
        le(&[1u16, 2, 3, 4, 5, 6, 7, 8], u16::to_le_bytes)
    );
}

/// The text variables and dimension labels of [`write_groups`]'s file.
fn check_groups_texts(src: &NcSource) {
    let texts = src.text_variables();
    assert_eq!(texts.len(), 2);
    assert_eq!(texts[0].name, "a/b/station");
    assert_eq!(texts[0].values, ["Zürich", "", "Ōsaka"]);
    assert_eq!(texts[1].name, "a/b/codes");
    assert_eq!(texts[1].shape, vec![4]);
    assert_eq!(texts[1].values, ["AB", "C  ", "", "DEFG"]);
    // `station` is labelled by its string coordinate; `n` has a numeric coordinate, so the
    // char array `codes` does not label it.
    assert_eq!(src.dim_labels().len(), 1);
    assert_eq!(src.dim_labels()[0].dim, "station");
    assert_eq!(src.dim_labels()[0].labels, ["Zürich", "", "Ōsaka"]);
}

/// netCDF-4: nested groups, parent dimensions, unlimited and zero-length dimensions, chunking,
/// deflate + shuffle, strings, char arrays, enums, attributes of every kind.
#[test]
fn netcdf4_groups_and_types() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("groups.nc");
    write_groups(&p);
    let src = open_path(&p, &OpenOptions::default()).unwrap();
    assert_eq!(src.data_model(), DataModel::Netcdf4);
    check_groups_inventory(&src);
    check_groups_variables(&src);
    check_groups_texts(&src);
}

/// Vlen and opaque variables are refused, or listed as skipped on request; a compound variable
/// is split per field (`pairs/a`, `pairs/b`: never written, so netCDF's fill values, zeros).
#[test]
fn unsupported_user_types() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("user.nc");
    {
        let mut f = netcdf::create(&p).unwrap();
        f.add_dimension("n", 2).unwrap();
        let pair = NcVariableType::Compound(CompoundType {
            name: "pair_t".into(),
            size: 16,
            fields: vec![
                CompoundTypeField {
                    name: "a".into(),
                    basetype: NcVariableType::Int(IntType::I32),
                    arraydims: None,
                    offset: 0,
                },
                CompoundTypeField {
                    name: "b".into(),
                    basetype: NcVariableType::Float(FloatType::F64),
                    arraydims: None,
                    offset: 8,
                },
            ],
        });
        let vlen = NcVariableType::Vlen(VlenType {
            name: "ragged_t".into(),
            basetype: Box::new(NcVariableType::Int(IntType::I16)),
        });
        let opaque = NcVariableType::Opaque(OpaqueType {
            name: "blob_t".into(),
            size: 5,
        });
        let nested = NcVariableType::Vlen(VlenType {
            name: "nested_t".into(),
            basetype: Box::new(vlen.clone()),
        });
        for t in [&pair, &vlen, &opaque, &nested] {
            f.add_type_from_descriptor(t.clone()).unwrap();
        }
        f.add_variable_with_type("pairs", &["n"], &pair).unwrap();
        f.add_variable_with_type("ragged", &["n"], &vlen).unwrap();
        f.add_variable_with_type("blobs", &["n"], &opaque).unwrap();
        f.add_variable_with_type("nested", &["n"], &nested).unwrap();
        f.add_variable::<u8>("ok", &["n"])
            .unwrap()
            .put_values(&[7u8, 8], ..)
            .unwrap();
        f.close().unwrap();
    }
    // A vlen of vlens is a ragged array with two count variables (docs/FORMAT.md); never
    // written, it has no sequences.
    let src = NcImporter.open(&p, &OpenOptions::default()).unwrap();
    assert!(src.skipped().is_empty(), "{:?}", src.skipped());
    // A vlen variable is a CF contiguous ragged array (never written: empty sequences), an
    // opaque one u8 with a trailing axis of the blob size.
    let names: Vec<&str> = src.variables().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "pairs/a",
            "pairs/b",
            "ragged",
            "ragged_count",
            "blobs",
            "nested",
            "nested_count",
            "nested_count_count",
            "ok"
        ]
    );
    let v = src.variables();
    assert_eq!(v[0].dtype, ElementType::I32);
    assert_eq!(v[1].dtype, ElementType::F64);
    assert_eq!(
        (v[2].dtype, v[2].shape.as_slice()),
        (ElementType::I16, &[0u64][..])
    );
    assert_eq!(
        (v[3].dtype, v[3].shape.as_slice()),
        (ElementType::I64, &[2u64][..])
    );
    assert!(v[3]
        .attrs
        .iter()
        .any(|(k, a)| k == "sample_dimension" && *a == AttrValue::Text("ragged_sample".into())));
    assert!(v[2].facts.contains(&Fact::Ragged {
        count: "ragged_count".into(),
        type_name: "ragged_t".into()
    }));
    assert_eq!(
        (v[4].dtype, v[4].shape.as_slice()),
        (ElementType::U8, &[2u64, 5][..])
    );
    assert_eq!(
        (v[5].dtype, v[5].shape.as_slice()),
        (ElementType::I16, &[0u64][..])
    );
    assert_eq!(
        (v[7].dtype, v[7].shape.as_slice()),
        (ElementType::I64, &[2u64][..])
    );
    assert!(v[6].facts.contains(&Fact::Ragged {
        count: "nested_count_count".into(),
        type_name: "nested_t".into()
    }));
    assert!(v[4].facts.contains(&Fact::Opaque {
        type_name: "blob_t".into()
    }));
    assert_eq!(read_all(src.as_ref(), 0), [0u8; 8]);
    assert_eq!(read_all(src.as_ref(), 1), [0u8; 16]);
    assert_eq!(read_all(src.as_ref(), 3), [0u8; 16]);
    // The never-written vlen of vlens: no inner sequences in either element.
    assert_eq!(read_all(src.as_ref(), 7), [0u8; 16]);
    assert_eq!(read_all(src.as_ref(), 8), [7, 8]);
}

/// CF packing in netCDF-4: an int32 packed with f32 attributes unpacks to f64 (NumPy's
/// promotion); masking by missing_value and valid_range; the raw view is untouched.
#[test]
fn cf_unpacking_rules() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("packed.nc");
    let raw: Vec<i32> = vec![0, 1, -5, 1000, 999_999, -2147483647];
    {
        let mut f = netcdf::create(&p).unwrap();
        f.add_dimension("n", 6).unwrap();
        let mut v = f.add_variable::<i32>("p", &["n"]).unwrap();
        v.put_attribute("scale_factor", 0.5f32).unwrap();
        v.put_attribute("add_offset", 10f32).unwrap();
        v.put_attribute("missing_value", vec![-5i32]).unwrap();
        v.put_attribute("valid_range", vec![-100i32, 100_000])
            .unwrap();
        v.put_attribute("units", "m").unwrap();
        v.put_values(&raw, ..).unwrap();
        let mut q = f.add_variable::<i16>("q", &["n"]).unwrap();
        q.put_attribute("scale_factor", "not a number").unwrap();
        q.put_values(&[1i16, 2, 3, 4, 5, 6], ..).unwrap();
        f.close().unwrap();
    }
    let src = open_path(&p, &OpenOptions::default()).unwrap();
    assert_eq!(src.variables()[0].dtype, ElementType::I32);
    assert_eq!(read_all(&src, 0), le(&raw, i32::to_le_bytes));

    let un = open_path(&p, &unpacking()).unwrap();
    let v = &un.variables()[0];
    assert_eq!(v.dtype, ElementType::F64);
    let got: Vec<f64> = read_all(&un, 0)
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got[0], 10.0);
    assert_eq!(got[1], 10.5);
    assert!(got[2].is_nan(), "missing_value");
    assert_eq!(got[3], 510.0);
    assert!(got[4].is_nan(), "above valid_range");
    assert!(got[5].is_nan(), "default fill value");
    assert_eq!(
        v.attrs.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["units", "_FillValue"]
    );
    assert_eq!(
        find(packing(&v.facts).unwrap(), "valid_range"),
        Some(&AttrValue::I32(vec![-100, 100_000]))
    );
    assert_eq!(packed_type(&v.facts), Some("i32"));
    // A scale_factor that is not a number: left packed, with a note.
    let q = &un.variables()[1];
    assert_eq!(q.dtype, ElementType::I16);
    assert!(
        q.notes.iter().any(|n| n.contains("not CF-unpacked")),
        "{:?}",
        q.notes
    );
}

/// The Source can be sent to and shared between threads, and closes its file on drop (a new
/// open of the same file in the same process then works).
#[test]
fn source_is_send_sync_and_closes() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.nc");
    write_classic(&p, &Options::NETCDF4, 2);
    let src = open_path(&p, &OpenOptions::default()).unwrap();
    assert_send_sync(&src);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for i in 0..src.variables().len() {
                    read_all(&src, i);
                }
            });
        }
    });
    drop(src);
    // Rewriting the file works once the importer has let go of it.
    write_classic(&p, &Options::NETCDF4, 3);
    let again = open_path(&p, &OpenOptions::default()).unwrap();
    assert_eq!(var(&again, "time").1.shape, vec![3]);
}

// ---------------------------------------------------------------------------------------------
// Property test: random variables in random formats, random regions, value for value.

#[derive(Debug, Clone, Copy)]
enum Fmt {
    Classic,
    Offset64,
    Data64,
    Nc4,
    Nc4Chunked,
}

impl Fmt {
    fn options(self) -> Options {
        match self {
            Fmt::Classic => Options::empty(),
            Fmt::Offset64 => Options::_64BIT_OFFSET,
            Fmt::Data64 => Options::_64BIT_DATA,
            Fmt::Nc4 | Fmt::Nc4Chunked => Options::NETCDF4,
        }
    }
    fn types(self) -> &'static [ElementType] {
        use ElementType::*;
        match self {
            Fmt::Classic | Fmt::Offset64 => &[I8, I16, I32, F32, F64],
            _ => &[I8, U8, I16, U16, I32, U32, I64, U64, F32, F64],
        }
    }
}

/// Writes one variable `v` of type `t`, shape `shape` (first axis unlimited when `unlim`)
/// whose C-order little-endian bytes are `bytes`.
fn write_random(path: &Path, fmt: Fmt, t: ElementType, shape: &[usize], unlim: bool, bytes: &[u8]) {
    let mut f = netcdf::create_with(path, fmt.options()).unwrap();
    let names: Vec<String> = (0..shape.len()).map(|i| format!("d{i}")).collect();
    for (i, (&len, n)) in shape.iter().zip(&names).enumerate() {
        if i == 0 && unlim {
            f.add_unlimited_dimension(n).unwrap();
        } else {
            f.add_dimension(n, len).unwrap();
        }
    }
    let dims: Vec<&str> = names.iter().map(String::as_str).collect();
    let start = vec![0usize; shape.len()];
    macro_rules! put {
        ($ty:ty, $n:literal) => {{
            let vals: Vec<$ty> = bytes
                .chunks_exact($n)
                .map(|c| <$ty>::from_le_bytes(c.try_into().unwrap()))
                .collect();
            {
                let mut v = f.add_variable::<$ty>("v", &dims).unwrap();
                if matches!(fmt, Fmt::Nc4Chunked) && !shape.is_empty() {
                    let chunks: Vec<usize> = shape.iter().map(|&d| (d / 2).max(1)).collect();
                    v.set_chunking(&chunks).unwrap();
                    v.set_compression(3, true).unwrap();
                }
            }
            f.enddef().unwrap();
            let mut v = f.variable_mut("v").unwrap();
            if !vals.is_empty() {
                if shape.is_empty() {
                    v.put_value(vals[0], ()).unwrap();
                } else {
                    v.put_values(&vals, (&start[..], shape)).unwrap();
                }
            }
        }};
    }
    match t {
        ElementType::I8 => put!(i8, 1),
        ElementType::U8 => put!(u8, 1),
        ElementType::I16 => put!(i16, 2),
        ElementType::U16 => put!(u16, 2),
        ElementType::I32 => put!(i32, 4),
        ElementType::U32 => put!(u32, 4),
        ElementType::I64 => put!(i64, 8),
        ElementType::U64 => put!(u64, 8),
        ElementType::F32 => put!(f32, 4),
        ElementType::F64 => put!(f64, 8),
        other => panic!("{other}"),
    }
    f.close().unwrap();
}

/// (format, type index, shape, first axis unlimited, value seed, region picks)
type Case = (Fmt, usize, Vec<usize>, bool, u64, Vec<(u64, u64)>);

fn case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![
            Just(Fmt::Classic),
            Just(Fmt::Offset64),
            Just(Fmt::Data64),
            Just(Fmt::Nc4),
            Just(Fmt::Nc4Chunked)
        ],
        0usize..10,
        prop::collection::vec(1usize..6, 0..4),
        any::<bool>(),
        any::<u64>(),
        prop::collection::vec((any::<u64>(), any::<u64>()), 4),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn random_regions_match((fmt, ti, mut shape, unlim, seed, picks) in case()) {
        let types = fmt.types();
        let t = types[ti % types.len()];
        let unlim = unlim && !shape.is_empty();
        if unlim && seed % 5 == 0 {
            shape[0] = 0; // an unlimited dimension with no records
        }
        let n: usize = shape.iter().product();
        let bytes = XorShift(seed | 1).bytes(n * t.size());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.nc");
        write_random(&p, fmt, t, &shape, unlim, &bytes);

        let src = open_path(&p, &OpenOptions::default()).unwrap();
        let v = &src.variables()[0];
        prop_assert_eq!(v.dtype, t);
        let shape64: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        prop_assert_eq!(&v.shape, &shape64);
        // Chunked, compressed and fully written: read from the stored chunks, not netCDF-C.
        if matches!(fmt, Fmt::Nc4Chunked) && n > 0 && !shape.is_empty() {
            prop_assert_eq!(src.direct_chunk_variables(), 1);
        }
        prop_assert_eq!(read_all(&src, 0), bytes.clone());
        // Random sub-regions.
        for &(a, b) in &picks {
            let mut start = Vec::new();
            let mut count = Vec::new();
            for (axis, &d) in shape64.iter().enumerate() {
                let r = a.rotate_left(axis as u32 * 13);
                let s = if d == 0 { 0 } else { r % d };
                let c = if d == 0 { 0 } else { b.rotate_left(axis as u32 * 7) % (d - s + 1) };
                start.push(s);
                count.push(c);
            }
            let m: u64 = count.iter().product();
            let mut out = vec![0u8; m as usize * t.size()];
            src.read_region(0, &start, &count, &mut out).unwrap();
            prop_assert_eq!(out, sub_block(&bytes, &shape64, t.size(), &start, &count));
        }
    }
}
