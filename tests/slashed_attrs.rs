//! HDF5 group attributes whose own names hold a `/` (h5py's `f.attrs["a/b"]`) survive
//! `.h5` → `.tet` → netCDF-4 (issue 21): the `.tet` records where each one's group path ends
//! ([`Fact::AttrGroup`]), and the netCDF export writes them into their own group under their
//! own name (with libhdf5: netCDF-C cannot write such a name), where netCDF-C reads them back —
//! no group `a` holding an attribute `b`. Variable attributes with such names
//! (`f["d"].attrs["a/b"]`) go onto their variable's dataset the same way — the one netCDF-C
//! reads as the variable, also when it is `_nc4_non_coord_<name>` (a variable named like a
//! dimension but not its coordinate), never the dimension's. The fixtures are
//! `converters/hdf5/tests/fixtures/slashed_attrs.h5` (h5py) and `slashed_vars.nc`
//! (netCDF4-python, the slashed names added by h5py), both from `make_slashed.py`.
#![cfg(all(feature = "netcdf", feature = "hdf5"))]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tet::export::{self, ExportOptions, Target};
use tet::format::TetFile;
use tet::pipeline::ConvertOptions;
use tet_netcdf::dump::{dump, AttrDump, GroupDump, RawValues, VarDump};
use tet_source::Fact;

use crate::common::convert as convert_file;

fn fixture_named(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("converters/hdf5/tests/fixtures")
        .join(name)
}

/// The fixture converted to `.tet` in `dir`.
fn convert(dir: &Path) -> PathBuf {
    convert_named(dir, "slashed_attrs.h5")
}

/// Fixture `name` converted to `<name>.tet` in `dir`.
fn convert_named(dir: &Path, name: &str) -> PathBuf {
    let tet = dir.join(format!("{name}.tet"));
    convert_file(&fixture_named(name), &tet, &ConvertOptions::default()).expect("convert");
    tet
}

/// `tet` exported to netCDF-4 beside it (only `datasets` when not empty), as netCDF-C reads
/// it back, and the export's warnings.
fn export(tet: &Path, datasets: &[&str]) -> (Vec<GroupDump>, Vec<String>) {
    let out = tet.with_extension(format!("{}.nc", datasets.len()));
    let opts = ExportOptions {
        target: Some(Target::NETCDF),
        datasets: datasets.iter().map(|d| d.to_string()).collect(),
        ..ExportOptions::default()
    };
    let report = export::export(tet, &out, &opts).expect("export");
    (
        dump(&out).expect("netCDF-C reads the export"),
        report.warnings,
    )
}

fn by_path(groups: &[GroupDump]) -> BTreeMap<&str, &GroupDump> {
    groups.iter().map(|g| (g.path.as_str(), g)).collect()
}

fn attr<'a>(g: &'a GroupDump, name: &str) -> &'a AttrDump {
    g.attrs.iter().find(|a| a.name == name).unwrap_or_else(|| {
        panic!(
            "group `/{}` has no attribute `{name}`: {:?}",
            g.path, g.attrs
        )
    })
}

fn var<'a>(g: &'a GroupDump, name: &str) -> &'a VarDump {
    g.vars.iter().find(|v| v.name == name).unwrap_or_else(|| {
        panic!(
            "group `/{}` has no variable `{name}`: {:?}",
            g.path,
            g.vars.iter().map(|v| &v.name).collect::<Vec<_>>()
        )
    })
}

/// Attribute `name` of variable `v`.
fn vattr<'a>(v: &'a VarDump, name: &str) -> &'a AttrDump {
    v.attrs.iter().find(|a| a.name == name).unwrap_or_else(|| {
        panic!(
            "variable `{}` has no attribute `{name}`: {:?}",
            v.name, v.attrs
        )
    })
}

/// The attribute names of variable `v`, sorted.
fn vnames(v: &VarDump) -> Vec<&str> {
    let mut n: Vec<&str> = v.attrs.iter().map(|a| a.name.as_str()).collect();
    n.sort_unstable();
    n
}

/// The attribute names of the HDF5 object `path` of the netCDF-4 file `nc`, as libhdf5 lists
/// them (the library's hidden ones too), sorted.
fn h5_attr_names(nc: &Path, path: &str) -> Vec<String> {
    use tet_hdf5::hdf5;
    let f = hdf5::File::open(nc).expect("libhdf5 opens the export");
    let mut names = f
        .dataset(path)
        .unwrap_or_else(|e| panic!("dataset `{path}`: {e}"))
        .attr_names()
        .expect("attribute names");
    names.sort();
    names
}

fn chars(a: &AttrDump) -> &[u8] {
    assert_eq!(a.xtype, "char", "`{}`", a.name);
    match &a.values {
        RawValues::Bytes(b) => b,
        other => panic!("`{}`: {other:?}", a.name),
    }
}

fn numbers<'a>(a: &'a AttrDump, xtype: &str) -> &'a [u8] {
    assert_eq!(a.xtype, xtype, "`{}`", a.name);
    match &a.values {
        RawValues::Bytes(b) => b,
        other => panic!("`{}`: {other:?}", a.name),
    }
}

fn ne<T: Copy, const N: usize>(xs: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    xs.iter().flat_map(|&x| f(x)).collect()
}

#[test]
fn the_tet_records_the_group_of_each_slashed_attribute_only() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tet = convert(tmp.path());
    let f = TetFile::open(&tet).expect("open");
    let footer = f.footer().expect("footer").expect("a footer");
    let keys: Vec<&str> = footer
        .global_attrs
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "a/b",
            "m/2d",
            "plain",
            "s/l",
            "t/x",
            "g/c/d",
            "g/units",
            "g/h/x/y/z"
        ]
    );
    let facts = footer.ext.global_facts.as_ref().expect("global facts");
    let owned: Vec<(&str, &str)> = facts
        .0
        .iter()
        .filter_map(|f| match f {
            Fact::AttrGroup { attr, group } => Some((attr.as_str(), group.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        owned,
        [
            ("a/b", ""),
            ("m/2d", ""),
            ("s/l", ""),
            ("t/x", ""),
            ("g/c/d", "g"),
            ("g/h/x/y/z", "g/h")
        ]
    );
    // The multi-dimensional attribute's shape, keyed by its whole key as ever.
    assert!(facts.0.contains(&Fact::AttrShape {
        attr: "m/2d".into(),
        shape: vec![2, 3]
    }));
}

#[test]
fn slashed_attributes_come_back_in_their_groups_under_their_names() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tet = convert(tmp.path());
    let (groups, warnings) = export(&tet, &[]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let g = by_path(&groups);
    // No group `a`, `t`, `m`, `s`, `g/c` or `g/h/x/y` made of the names (`g/rec`: the
    // compound dataset's fields).
    assert_eq!(
        g.keys().copied().collect::<Vec<_>>(),
        ["", "g", "g/h", "g/rec"]
    );
    let root = g[""];
    assert_eq!(numbers(attr(root, "a/b"), "f64"), 3.5f64.to_ne_bytes());
    assert_eq!(chars(attr(root, "t/x")), b"slash text");
    assert_eq!(chars(attr(root, "plain")), b"plain text");
    // Flattened in C order, as every multi-dimensional attribute of a netCDF export.
    assert_eq!(
        numbers(attr(root, "m/2d"), "i16"),
        ne(&[0i16, 1, 2, 3, 4, 5], i16::to_ne_bytes)
    );
    let list = attr(root, "s/l");
    assert_eq!(list.xtype, "string");
    assert_eq!(
        list.values,
        RawValues::Strings(vec![Some(b"x".to_vec()), Some(b"yy".to_vec())])
    );
    let grp = g["g"];
    assert_eq!(
        numbers(attr(grp, "c/d"), "i32"),
        ne(&[1i32, 2, 3], i32::to_ne_bytes)
    );
    // A plain group attribute still lands in its group.
    assert_eq!(chars(attr(grp, "units")), b"m");
    let vars: Vec<&str> = grp.vars.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(vars, ["ks", "x", "k", "v", "w", "seq", "names"]);
    assert_eq!(numbers(attr(g["g/h"], "x/y/z"), "u8"), [7]);
    // Nothing else in the groups.
    let names = |gr: &GroupDump| -> Vec<String> {
        let mut n: Vec<String> = gr.attrs.iter().map(|a| a.name.clone()).collect();
        n.sort();
        n
    };
    assert_eq!(
        names(root),
        ["a/b", "history", "m/2d", "plain", "s/l", "t/x"]
    );
    assert_eq!(names(grp), ["c/d", "units"]);
}

#[test]
fn a_subset_export_keeps_the_slashed_attributes_of_the_groups_it_writes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tet = convert(tmp.path());
    let (groups, warnings) = export(&tet, &["g/v"]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let g = by_path(&groups);
    // `g/h` holds no exported array: neither it nor its attribute is written.
    assert_eq!(g.keys().copied().collect::<Vec<_>>(), ["", "g"]);
    assert_eq!(numbers(attr(g[""], "a/b"), "f64"), 3.5f64.to_ne_bytes());
    assert_eq!(
        numbers(attr(g["g"], "c/d"), "i32"),
        ne(&[1i32, 2, 3], i32::to_ne_bytes)
    );
    let v = var(g["g"], "v");
    assert_eq!(
        vnames(v),
        ["units", "v/f", "v/l", "v/t", "var/attr"],
        "{:?}",
        v.attrs
    );
    assert_eq!(numbers(vattr(v, "var/attr"), "i32"), 1i32.to_ne_bytes());
}

/// Variable attributes whose names hold a `/` come back on their variables with their values
/// and netCDF types: a plain variable's, a coordinate variable's (a dimension scale), a
/// variable named like a dimension whose coordinate it is not (netCDF-C's dataset
/// `_nc4_non_coord_k`; the dataset `k` is the dimension's and gets nothing), a string
/// variable's, a vlen variable's and those the fields of a split compound carry.
#[test]
fn slashed_variable_attributes_come_back_on_their_variables() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tet = convert(tmp.path());
    let (groups, warnings) = export(&tet, &[]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let g = by_path(&groups);
    let grp = g["g"];
    let v = var(grp, "v");
    assert_eq!(numbers(vattr(v, "var/attr"), "i32"), 1i32.to_ne_bytes());
    assert_eq!(chars(vattr(v, "v/t")), b"var text");
    let list = vattr(v, "v/l");
    assert_eq!(list.xtype, "string");
    assert_eq!(
        list.values,
        RawValues::Strings(vec![Some(b"p".to_vec()), Some(b"qq".to_vec())])
    );
    assert_eq!(
        numbers(vattr(v, "v/f"), "f64"),
        ne(&[0.25f64, -1.0], f64::to_ne_bytes)
    );
    // netCDF-C's own attribute first, as the export wrote it, then libhdf5's.
    let order: Vec<&str> = v.attrs.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(order[0], "units");
    assert_eq!(chars(vattr(v, "units")), b"s");
    assert_eq!(vnames(v), ["units", "v/f", "v/l", "v/t", "var/attr"]);
    // The coordinate variable `x` (its dataset is the dimension's too).
    let x = var(grp, "x");
    assert_eq!(x.dims, ["x"]);
    assert_eq!(vnames(x), ["c/u"]);
    assert_eq!(chars(vattr(x, "c/u")), b"km");
    // `k` is no coordinate of the dimension `k` (that is `ks`'s).
    let k = var(grp, "k");
    assert_eq!(k.dims, ["k_dim0"]);
    assert_eq!(var(grp, "ks").dims, ["k"]);
    assert_eq!(vnames(k), ["k/n"]);
    assert_eq!(numbers(vattr(k, "k/n"), "u16"), 9u16.to_ne_bytes());
    assert!(vnames(var(grp, "ks")).is_empty() && vnames(var(grp, "w")).is_empty());
    let nc = tet.with_extension("0.nc");
    assert!(h5_attr_names(&nc, "g/_nc4_non_coord_k").contains(&"k/n".to_string()));
    let dim_k = h5_attr_names(&nc, "g/k");
    assert!(!dim_k.iter().any(|n| n.contains('/')), "{dim_k:?}");
    // A string variable's, a vlen variable's.
    let names = var(grp, "names");
    assert_eq!(names.xtype, "string");
    assert_eq!(vnames(names), ["n/a"]);
    assert_eq!(numbers(vattr(names, "n/a"), "i64"), (-4i64).to_ne_bytes());
    let seq = var(grp, "seq");
    assert!(seq.xtype.contains("vlen"), "{}", seq.xtype);
    assert_eq!(vnames(seq), ["q/r"]);
    assert_eq!(numbers(vattr(seq, "q/r"), "i8"), [0xff, 1]);
    // HDF5 compounds stay split: each field carries the compound's attributes.
    for field in ["i", "f"] {
        let f = var(g["g/rec"], field);
        assert_eq!(vnames(f), ["r/a"]);
        assert_eq!(numbers(vattr(f, "r/a"), "f32"), 0.5f32.to_ne_bytes());
    }
}

/// A netCDF-4 source (`slashed_vars.nc`): the variable `t`, named like the dimension `t` but
/// not its coordinate (stored as `_nc4_non_coord_t`), a compound variable the export rebuilds
/// (module `records`) and a `string` variable keep their slashed attributes; the dataset `t`
/// (the dimension's) gets none. One of an enum type is left out with a warning (its type is
/// netCDF-C's to define), the export goes on.
#[test]
fn a_netcdf_source_keeps_them_on_renamed_compound_and_string_variables() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tet = convert_named(tmp.path(), "slashed_vars.nc");
    let (groups, warnings) = export(&tet, &[]);
    assert_eq!(
        warnings,
        [
            "attribute `e/n` of variable `u`: it is of an enum or compound type; left out (its \
             name holds a `/`, which netCDF-C cannot write: such attributes are written with \
             libhdf5)"
        ]
    );
    let root = &groups[0];
    assert_eq!(root.path, "");
    let dims: Vec<(&str, u64)> = root.dims.iter().map(|d| (d.name.as_str(), d.len)).collect();
    assert_eq!(dims, [("t", 3), ("n", 2)]);
    let t = var(root, "t");
    assert_eq!(
        (t.xtype.as_str(), t.dims.as_slice()),
        ("i32", &["n".to_string()][..])
    );
    assert_eq!(t.values, RawValues::Bytes(ne(&[5i32, 6], i32::to_ne_bytes)));
    assert_eq!(vnames(t), ["t/a"]);
    assert_eq!(chars(vattr(t, "t/a")), b"non coord");
    assert!(vnames(var(root, "u")).is_empty());
    let rec = var(root, "rec");
    assert!(rec.xtype.contains("compound"), "{}", rec.xtype);
    assert_eq!(vnames(rec), ["long_name", "r/a"]);
    assert_eq!(chars(vattr(rec, "long_name")), b"records");
    assert_eq!(numbers(vattr(rec, "r/a"), "f32"), 0.5f32.to_ne_bytes());
    let s = var(root, "s");
    assert_eq!(s.xtype, "string");
    assert_eq!(vnames(s), ["s/x"]);
    assert_eq!(numbers(vattr(s, "s/x"), "i32"), 3i32.to_ne_bytes());
    let nc = tet.with_extension("0.nc");
    assert_eq!(
        h5_attr_names(&nc, "_nc4_non_coord_t")
            .iter()
            .filter(|n| *n == "t/a")
            .count(),
        1
    );
    let dim_t = h5_attr_names(&nc, "t");
    assert!(!dim_t.iter().any(|n| n.contains('/')), "{dim_t:?}");
}

/// The netCDF importer reads such names through netCDF-C and records their groups as the HDF5
/// importer does: the exported file, converted and exported again, has the same attributes.
#[test]
fn the_netcdf_importer_keeps_them_too() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tet = convert(tmp.path());
    export(&tet, &[]);
    let nc = tet.with_extension("0.nc");
    let again = tmp.path().join("again.tet");
    convert_file(&nc, &again, &ConvertOptions::default()).expect("convert the export");
    let f = TetFile::open(&again).expect("open");
    let footer = f.footer().expect("footer").expect("a footer");
    let facts = &footer.ext.global_facts.as_ref().expect("global facts").0;
    assert!(facts.contains(&Fact::AttrGroup {
        attr: "g/c/d".into(),
        group: "g".into()
    }));
    assert!(facts.contains(&Fact::AttrGroup {
        attr: "a/b".into(),
        group: String::new()
    }));
    let first = dump(&nc).expect("dump");
    let (second, warnings) = export(&again, &[]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let strip = |groups: &[GroupDump]| -> Vec<(String, Vec<AttrDump>)> {
        groups
            .iter()
            .map(|g| {
                let attrs = g.attrs.iter().filter(|a| a.name != "history").cloned();
                (g.path.clone(), attrs.collect())
            })
            .collect()
    };
    assert_eq!(strip(&first), strip(&second));
    assert_eq!(strip(&second)[0].1.len(), 5, "{:?}", strip(&second));
    // The variables' attributes too, `k`'s (`_nc4_non_coord_k` in both files) included.
    let var_attrs = |groups: &[GroupDump]| -> BTreeMap<String, Vec<AttrDump>> {
        groups
            .iter()
            .flat_map(|g| {
                g.vars
                    .iter()
                    .map(|v| (format!("{}/{}", g.path, v.name), v.attrs.clone()))
            })
            .collect()
    };
    let (a, b) = (var_attrs(&first), var_attrs(&second));
    assert_eq!(a, b);
    assert_eq!(vnames(var(by_path(&second)["g"], "k")), ["k/n"]);
    let slashed: usize = b
        .values()
        .map(|attrs| attrs.iter().filter(|a| a.name.contains('/')).count())
        .sum();
    assert_eq!(slashed, 10, "{b:?}");
}

/// The Zarr export puts them into their groups the same way (Zarr attribute names may hold a
/// `/`).
#[test]
fn the_zarr_export_puts_them_into_their_groups() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tet = convert(tmp.path());
    let out = tmp.path().join("x.zarr");
    let opts = ExportOptions {
        target: Some(Target::ZARR),
        ..ExportOptions::default()
    };
    export::export(&tet, &out, &opts).expect("export");
    let attrs = |group: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(out.join(group).join("zarr.json")).expect("zarr.json");
        let meta: serde_json::Value = serde_json::from_str(&text).expect("json");
        meta["attributes"].clone()
    };
    let (root, g) = (attrs(""), attrs("g"));
    assert_eq!(root["a/b"], 3.5);
    assert_eq!(root["t/x"], "slash text");
    assert_eq!(g["c/d"], serde_json::json!([1, 2, 3]));
    assert_eq!(g["units"], "m");
    // A group without arrays is no Zarr group: its attributes stay in the root, under their keys.
    assert!(!out.join("g/h").exists());
    assert_eq!(root["g/h/x/y/z"], 7);
    assert!(root.get("g/c/d").is_none() && !out.join("g/c").exists());
}

/// HDF5's root `a/b` and the attribute `b` of a group `a` are one key in the record, which
/// cannot tell them apart: the export writes the first and says it left the second out.
#[test]
fn two_attributes_of_one_key_give_a_warning() {
    use tet_hdf5::hdf5;
    let tmp = tempfile::tempdir().expect("tempdir");
    let h5 = tmp.path().join("collide.h5");
    {
        let f = hdf5::File::create(&h5).expect("create");
        let put = |loc: &hdf5::Group, name: &str, v: f64| {
            let a = loc.new_attr::<f64>().create(name).expect("attr");
            a.write_scalar(&v).expect("write");
        };
        put(&f, "a/b", 1.0);
        let g = f.create_group("a").expect("group");
        put(&g, "b", 2.0);
        g.new_dataset_builder()
            .with_data(&[1i32, 2])
            .create("v")
            .expect("dataset");
    }
    let tet = tmp.path().join("collide.tet");
    convert_file(&h5, &tet, &ConvertOptions::default()).expect("convert");
    let (groups, warnings) = export(&tet, &[]);
    assert_eq!(
        warnings,
        ["global attribute `a/b`: recorded twice under this key; the second is left out"]
    );
    let g = by_path(&groups);
    assert_eq!(numbers(attr(g[""], "a/b"), "f64"), 1.0f64.to_ne_bytes());
    assert!(g["a"].attrs.is_empty(), "{:?}", g["a"].attrs);
}
