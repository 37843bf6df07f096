//! netCDF → `.tet` → netCDF keeps what netCDF-C says the source holds
//! (`converters/netcdf/tests/fixtures/make_fidelity.py`, written by `ncgen`): both files are read
//! back through netCDF-C (`tet_netcdf::dump`, no decoding) and compared group by group —
//! dimensions (name, length, unlimited), variables (netCDF type: `char` vs `string`, an enum
//! type; dimensions; the bytes of every value) and attributes (netCDF type, bytes). The cases:
//! `char` bytes 0x80–0xff in variables and attributes and valid multi-byte UTF-8, 0-d `char` and
//! `string` variables, single- and multi-valued `string` attributes, enum attributes, dimensions
//! no variable uses (root, subgroup, a group of dimensions only; unlimited too), unlimited
//! dimensions used only by `char` variables, in a netCDF-4 and a classic file; a variable named
//! like a dimension it does not use, listed before that dimension's variables (`non_coord.nc`,
//! `make_non_coord.py`: netCDF-C cannot define the dimension after it).
#![cfg(feature = "netcdf")]

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tet::export::{self, ExportOptions, Target};
use tet::pipeline::ConvertOptions;
use tet_netcdf::dump::{
    dump, zero_compound_padding, AttrDump, DimDump, GroupDump, RawValues, VarDump,
};

use crate::common::convert;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("converters/netcdf/tests/fixtures")
        .join(name)
}

/// `input` converted to `.tet`, then exported to netCDF; both files read through netCDF-C.
fn round_trip(input: &str) -> (Vec<GroupDump>, Vec<GroupDump>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = fixture(input);
    let tet = tmp.path().join("x.tet");
    convert(&src, &tet, &ConvertOptions::default())
        .unwrap_or_else(|e| panic!("convert {input}: {e}"));
    let out = tmp.path().join("back.nc");
    let opts = ExportOptions {
        target: Some(Target::NETCDF),
        ..ExportOptions::default()
    };
    export::export(&tet, &out, &opts).unwrap_or_else(|e| panic!("export {input}: {e}"));
    (
        dump(&src).expect("dump source"),
        dump(&out).expect("dump export"),
    )
}

fn by_path(groups: &[GroupDump]) -> BTreeMap<&str, &GroupDump> {
    groups.iter().map(|g| (g.path.as_str(), g)).collect()
}

fn dims(g: &GroupDump) -> Vec<&DimDump> {
    let mut d: Vec<&DimDump> = g.dims.iter().collect();
    d.sort_by(|a, b| a.name.cmp(&b.name));
    d
}

fn vars(g: &GroupDump) -> BTreeMap<&str, &VarDump> {
    g.vars.iter().map(|v| (v.name.as_str(), v)).collect()
}

/// The attributes, without the root `history` the export extends with the conversion rows.
fn attrs(list: &[AttrDump], root: bool) -> Vec<&AttrDump> {
    list.iter()
        .filter(|a| !(root && a.name == "history"))
        .collect()
}

/// Every group, dimension, variable and attribute of `src` is in `out`, the same, and `out`
/// has nothing else.
fn assert_same(src: &[GroupDump], out: &[GroupDump], file: &str) {
    let (s, o) = (by_path(src), by_path(out));
    assert_eq!(
        s.keys().collect::<Vec<_>>(),
        o.keys().collect::<Vec<_>>(),
        "{file}: groups"
    );
    for (path, sg) in &s {
        let og = o[path];
        assert_eq!(dims(sg), dims(og), "{file}: dimensions of group `/{path}`");
        assert_eq!(
            attrs(&sg.attrs, path.is_empty()),
            attrs(&og.attrs, path.is_empty()),
            "{file}: attributes of group `/{path}`"
        );
        let (sv, ov) = (vars(sg), vars(og));
        assert_eq!(
            sv.keys().collect::<Vec<_>>(),
            ov.keys().collect::<Vec<_>>(),
            "{file}: variables of group `/{path}`"
        );
        for (name, v) in &sv {
            assert_eq!(*v, ov[name], "{file}: variable `/{path}/{name}`");
        }
    }
}

#[test]
fn netcdf4_text_types_and_dimensions_survive_the_round_trip() {
    let (src, out) = round_trip("fidelity.nc");
    // The comparison sees the cases (a dump that saw nothing would compare equal).
    let root = &src[0];
    let var = |n: &str| root.vars.iter().find(|v| v.name == n).expect(n);
    assert_eq!(var("c1").values, RawValues::Bytes(vec![0x80]));
    assert_eq!(var("cr").values, RawValues::Bytes(vec![0x80, 0x7f]));
    assert_eq!(
        (var("c").xtype.as_str(), var("s").xtype.as_str()),
        ("char", "string")
    );
    assert_eq!(var("c_high").values, RawValues::Bytes(vec![0xe9]));
    assert!(root
        .dims
        .iter()
        .any(|d| d.name == "rec_unused" && d.unlimited));
    let g_single = root.attrs.iter().find(|a| a.name == "g_single").unwrap();
    assert_eq!(g_single.xtype, "string");
    let cloud = &var("v").attrs.iter().find(|a| a.name == "cloud").unwrap();
    assert!(
        cloud.xtype.contains("\"class\":\"enum\""),
        "{}",
        cloud.xtype
    );
    assert_eq!(src.len(), 3, "root, sub, onlydims");

    assert_same(&src, &out, "fidelity.nc");

    // The comparison fails on what these fixes restore: a 0-d `string` for a 0-d `char`, a
    // byte decoded to UTF-8, an unused dimension missing.
    let mut wrong = out.clone();
    let c = wrong[0].vars.iter_mut().find(|v| v.name == "c").unwrap();
    c.xtype = "string".into();
    assert!(std::panic::catch_unwind(|| assert_same(&src, &wrong, "type")).is_err());
    let mut wrong = out.clone();
    let c1 = wrong[0].vars.iter_mut().find(|v| v.name == "c1").unwrap();
    c1.values = RawValues::Bytes(vec![0xc2, 0x80]);
    assert!(std::panic::catch_unwind(|| assert_same(&src, &wrong, "bytes")).is_err());
    let mut wrong = out.clone();
    wrong[0].dims.retain(|d| d.name != "unused");
    assert!(std::panic::catch_unwind(|| assert_same(&src, &wrong, "dims")).is_err());
}

#[test]
fn classic_text_and_dimensions_survive_the_round_trip() {
    let (src, out) = round_trip("fidelity_classic.nc");
    let names = src[0].vars.iter().find(|v| v.name == "names").unwrap();
    assert_eq!(names.values, RawValues::Bytes(b"\xe9t\0ab\0".to_vec()));
    let rec = src[0].dims.iter().find(|d| d.name == "rec").unwrap();
    assert_eq!((rec.len, rec.unlimited), (2, true));
    assert_same(&src, &out, "fidelity_classic.nc");
}

/// Groups holding only attributes, a group or nothing come back, and every variable uses the
/// very dimension it used in the source (netCDF resolves names through ancestor groups): an
/// ancestor's dimension shadowed by its own group's (`g1/b(/dim)`), one no variable of the
/// ancestor uses (`x`), a group's own dimension named and sized like an ancestor's (`g3/x`),
/// a `char` variable's string length from the root (`make_roundtrip.py`).
#[test]
fn empty_groups_and_ancestor_dimensions_survive_the_round_trip() {
    let (src, out) = round_trip("roundtrip_groups.nc");
    let s = by_path(&src);
    assert!(s["empty"].vars.is_empty() && s["empty"].attrs.is_empty());
    assert!(s.contains_key("attrs_only/empty_inner"));
    assert!(s["attrs_only"].vars.is_empty() && s["attrs_only"].attrs.len() == 2);
    assert!(s["g3"].dims.iter().any(|d| d.name == "x"));
    let dims_of = |g: &str, v: &str| {
        let v = s[g].vars.iter().find(|x| x.name == v).expect(v);
        v.dims.clone()
    };
    // The dump names which dimension each variable uses.
    assert_eq!(dims_of("g1", "b"), ["/dim"]);
    assert_eq!(dims_of("g1", "names"), ["dim", "/strlen"]);
    assert_eq!(dims_of("g1/g2", "d"), ["/g1/dim"]);
    assert_eq!(
        (dims_of("g3", "f"), dims_of("g3", "h")),
        (vec!["x".to_string()], vec!["/x".to_string()])
    );
    assert_same(&src, &out, "roundtrip_groups.nc");
    let o = by_path(&out);
    // The dimensions are where the source had them: `x` in the root and in `g3`, `dim` (4)
    // only in the root (no `dim_4` anywhere), `g1` and `g2` no others.
    let names = |g: &GroupDump| g.dims.iter().map(|d| d.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(o[""]), ["dim", "x", "strlen"]);
    assert_eq!(names(o["g1"]), ["dim"]);
    assert!(o["g1/g2"].dims.is_empty());
    assert_eq!(names(o["g3"]), ["x"]);
}

/// Attributes of compound types (on a variable, the root group and a subgroup; `char`, array,
/// enum and nested compound fields; several values; NaN, ±Infinity, -0) come back as their
/// compound type with the same bytes, not as JSON text (`make_roundtrip.py`).
#[test]
fn compound_attributes_come_back_as_their_compound_type() {
    let (src, out) = round_trip("roundtrip_compound_attrs.nc");
    let o = by_path(&out);
    let v = o[""].vars.iter().find(|v| v.name == "v").unwrap();
    for name in ["origin", "recs", "pts"] {
        let a = v.attrs.iter().find(|a| a.name == name).expect(name);
        assert!(
            a.xtype.contains("\"class\":\"compound\""),
            "{name}: {}",
            a.xtype
        );
        assert!(
            matches!(&a.values, RawValues::Bytes(b) if !b.is_empty()),
            "{name}"
        );
    }
    let nested = o["g"].attrs.iter().find(|a| a.name == "nested").unwrap();
    assert!(
        nested.xtype.contains("\"name\":\"outer_t\""),
        "{}",
        nested.xtype
    );
    assert_same(&src, &out, "roundtrip_compound_attrs.nc");
}

/// A compound variable with a `char` field and a `_FillValue` exports (it failed with
/// `NetCDF: Invalid argument`): rebuilt as one compound variable, its fill of its compound
/// type, beside a `char` variable with its own one-character fill (`make_roundtrip.py`).
#[test]
fn a_compound_with_a_char_field_and_a_fill_value_exports() {
    let (src, out) = round_trip("roundtrip_compound_fill.nc");
    let o = by_path(&out);
    let c = o[""].vars.iter().find(|v| v.name == "c").unwrap();
    let fill = c.attrs.iter().find(|a| a.name == "_FillValue").unwrap();
    assert_eq!(fill.values, RawValues::Bytes(b"x".to_vec()));
    let r = o[""].vars.iter().find(|v| v.name == "r").unwrap();
    let fill = r.attrs.iter().find(|a| a.name == "_FillValue").unwrap();
    assert!(fill.xtype.contains("\"name\":\"rec_t\""), "{}", fill.xtype);
    assert_same(&src, &out, "roundtrip_compound_fill.nc");
}

/// Compound variables (nested compound, array, `char` and `char` array fields; over an
/// unlimited dimension; 0-d; in a subgroup) come back as one compound variable each, of their
/// type, with every value, instead of one variable per field (`make_roundtrip.py`).
#[test]
fn compound_variables_come_back_as_compound_variables() {
    let (mut src, mut out) = round_trip("roundtrip_compound_vars.nc");
    zero_compound_padding(&mut src);
    zero_compound_padding(&mut out);
    let o = by_path(&out);
    assert_eq!(o.keys().collect::<Vec<_>>(), [&"", &"sub"]);
    let obs = o[""].vars.iter().find(|v| v.name == "obs").unwrap();
    assert!(obs.xtype.contains("\"name\":\"obs_t\""), "{}", obs.xtype);
    assert_eq!(obs.dims, ["time", "station"]);
    assert!(matches!(&obs.values, RawValues::Bytes(b) if b.len() == 6 * 48));
    assert_same(&src, &out, "roundtrip_compound_vars.nc");
}

#[test]
fn vlen_and_opaque_variables_come_back_as_their_types() {
    for file in ["ragged_vlen.nc", "ragged_opaque.nc"] {
        let (src, out) = round_trip(file);
        assert_same(&src, &out, file);
        // The comparison saw the values (a dump that read none would compare equal).
        let root = &src[0];
        let ragged = root.vars.iter().find(|v| v.name == "ragged").expect(file);
        let RawValues::Ragged(seqs) = &ragged.values else {
            panic!("{file}: `ragged` values not read");
        };
        assert_eq!(seqs.len(), 6, "{file}");
        assert_eq!(
            seqs[3],
            [5i16, 6]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect::<Vec<_>>()
        );
        assert!(seqs[1].is_empty(), "{file}");
    }
    let (src, _) = round_trip("ragged_opaque.nc");
    let blob = src[0].vars.iter().find(|v| v.name == "blob").expect("blob");
    assert!(blob.xtype.contains("\"opaque\""), "{}", blob.xtype);
    assert_eq!(
        blob.values,
        RawValues::Bytes(
            b"\x01\x02\x03\x04\x05\xff\xff\xff\xff\xff\0\0\0\0\0\xde\xad\xbe\xef\0".to_vec()
        )
    );
}

/// The native-endian bytes of `values`.
fn ne_bytes<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> RawValues {
    RawValues::Bytes(values.iter().flat_map(|&v| to(v)).collect())
}

#[test]
fn a_variable_named_like_a_dimension_it_does_not_use_exports_before_its_users() {
    // `t(n)` before `u(t)` (root), `/g/s(m)` before `/g/w(s)`: the export defines `t` and
    // `s` before the variables of their names (netCDF-C cannot define them after).
    let (src, out) = round_trip("non_coord.nc");
    assert_same(&src, &out, "non_coord.nc");
    let (o, s) = (by_path(&out), by_path(&src));
    let var = |g: &GroupDump, n: &str| -> VarDump {
        g.vars.iter().find(|v| v.name == n).expect(n).clone()
    };
    let root = o[""];
    let t = var(root, "t");
    assert_eq!(
        (t.xtype.as_str(), t.dims.clone()),
        ("f64", vec!["n".to_string()])
    );
    assert_eq!(t.values, ne_bytes(&[1.5f64, 2.5, 3.5], f64::to_ne_bytes));
    let u = var(root, "u");
    assert_eq!(
        (u.xtype.as_str(), u.dims.clone()),
        ("i32", vec!["t".to_string()])
    );
    assert_eq!(u.values, ne_bytes(&[10i32, 20, 30, 40], i32::to_ne_bytes));
    let dim = |g: &GroupDump, n: &str| -> DimDump {
        g.dims.iter().find(|d| d.name == n).expect(n).clone()
    };
    assert_eq!(
        dim(root, "t"),
        DimDump {
            name: "t".into(),
            len: 4,
            unlimited: true
        }
    );
    let g = o["g"];
    let sv = var(g, "s");
    assert_eq!(sv.dims, vec!["m".to_string()]);
    assert_eq!(sv.values, ne_bytes(&[-7i16, 8], i16::to_ne_bytes));
    let w = var(g, "w");
    assert_eq!(w.dims, vec!["s".to_string()]);
    assert_eq!(
        w.values,
        ne_bytes(&[0.25f32, 0.5, 0.75, 1.0, 1.25], f32::to_ne_bytes)
    );
    assert_eq!(dim(g, "s").len, 5);
    // The source is in the failing order: `t` listed before `u`, `s` before `w`.
    let names = |g: &GroupDump| g.vars.iter().map(|v| v.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(s[""]), ["t", "u"]);
    assert_eq!(names(s["g"]), ["s", "w"]);
    assert_eq!((names(root), names(g)), (names(s[""]), names(s["g"])));
}

/// Compound types with complex members as h5py stores them (named types `<c16`, `<c8`, which
/// HDF5 allows and netCDF-C refuses to define: "Name contains illegal characters") come back as
/// compound types of the same fields and bytes under the names nc-complex gives complex types
/// (`_PFNC_DOUBLE_COMPLEX_TYPE`, `_PFNC_FLOAT_COMPLEX_TYPE`); h5py reads the same complex
/// numbers from the export as from the source (`make_h5py_complex.py`).
#[test]
fn complex_types_h5py_named_come_back_under_names_netcdf_takes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = fixture("h5py_complex.nc");
    let tet = tmp.path().join("c.tet");
    convert(&src, &tet, &ConvertOptions::default()).expect("convert");
    let out = tmp.path().join("back.nc");
    let opts = ExportOptions {
        target: Some(Target::NETCDF),
        ..ExportOptions::default()
    };
    export::export(&tet, &out, &opts).expect("export");
    let (s, o) = (dump(&src).expect("dump"), dump(&out).expect("dump"));
    let (s, o) = (by_path(&s), by_path(&o));
    let renamed = |x: &str| {
        x.replace("\"<c16\"", "\"_PFNC_DOUBLE_COMPLEX_TYPE\"")
            .replace("\"<c8\"", "\"_PFNC_FLOAT_COMPLEX_TYPE\"")
    };
    let root_x = |g: &GroupDump| g.vars.iter().find(|v| v.name == "x").unwrap().attrs.clone();
    for (list_s, list_o, names) in [
        (
            s[""].attrs.clone(),
            o[""].attrs.clone(),
            &["za", "wa", "ca"][..],
        ),
        (root_x(s[""]), root_x(o[""]), &["zc"][..]),
    ] {
        for name in names {
            let a = list_s.iter().find(|a| a.name == *name).expect(name);
            let b = list_o.iter().find(|a| a.name == *name).expect(name);
            assert!(a.xtype.contains("\"<c"), "{name}: {}", a.xtype);
            assert_eq!(b.xtype, renamed(&a.xtype), "{name}");
            assert_eq!(b.values, a.values, "{name}");
        }
    }
    let Some(py) = common::python_with("h5py") else {
        return;
    };
    let script = r#"
import sys, h5py, numpy as np
src, out = sys.argv[1:3]
with h5py.File(src, "r") as a, h5py.File(out, "r") as b:
    for obj, name in [("/", "za"), ("/", "wa"), ("/", "ca"), ("x", "zc")]:
        x, y = np.asarray(a[obj].attrs[name]), np.asarray(b[obj].attrs[name])
        assert x.dtype.kind == y.dtype.kind, (name, x.dtype, y.dtype)
        if x.dtype.names:
            assert x.dtype.names == y.dtype.names, (name, x.dtype, y.dtype)
            assert y.dtype["z"] == np.dtype("<c16") and y.dtype["w"] == np.dtype("<c8"), y.dtype
            for f in x.dtype.names:
                np.testing.assert_array_equal(x[f].ravel(), y[f].ravel(), err_msg=f"{name}.{f}")
        else:
            assert y.dtype == x.dtype, (name, x.dtype, y.dtype)
            np.testing.assert_array_equal(x.ravel(), y.ravel(), err_msg=name)
print("ok")
"#;
    let o = std::process::Command::new(&py)
        .args(["-c", script])
        .arg(&src)
        .arg(&out)
        .output()
        .expect("python");
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Complex attributes of an HDF5 file (h5py's anonymous `{r, i}` compounds; the HDF5 importer
/// gives their values as JSON text and records their type) are exported to netCDF as that
/// compound again (named as nc-complex names it), so h5py reads the same complex numbers from
/// the export as from the source, on the root, a group and a variable
/// (`make_h5py_complex.py`, `attrs_only`).
#[test]
fn complex_attributes_of_hdf5_files_come_back_as_complex() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = fixture("h5py_complex_attrs.h5");
    let tet = tmp.path().join("a.tet");
    convert(&src, &tet, &ConvertOptions::default()).expect("convert");
    let out = tmp.path().join("a.nc");
    let opts = ExportOptions {
        target: Some(Target::NETCDF),
        ..ExportOptions::default()
    };
    let report = export::export(&tet, &out, &opts).expect("export");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let o = dump(&out).expect("dump");
    let o = by_path(&o);
    let ty = |list: &[AttrDump], name: &str| {
        list.iter()
            .find(|a| a.name == name)
            .unwrap_or_else(|| panic!("{name}"))
            .xtype
            .clone()
    };
    let d = o[""].vars.iter().find(|v| v.name == "d").unwrap();
    for (xtype, complex) in [
        (ty(&o[""].attrs, "za"), "_PFNC_DOUBLE_COMPLEX_TYPE"),
        (ty(&o[""].attrs, "wa"), "_PFNC_FLOAT_COMPLEX_TYPE"),
        (ty(&o["g"].attrs, "zg"), "_PFNC_DOUBLE_COMPLEX_TYPE"),
        (ty(&d.attrs, "zd"), "_PFNC_DOUBLE_COMPLEX_TYPE"),
    ] {
        assert!(xtype.contains(complex), "{xtype}");
    }
    let Some(py) = common::python_with("h5py") else {
        return;
    };
    let script = r#"
import sys, h5py, numpy as np
src, out = sys.argv[1:3]
with h5py.File(src, "r") as a, h5py.File(out, "r") as b:
    for obj, name in [("/", "za"), ("/", "wa"), ("g", "zg"), ("d", "zd")]:
        x, y = np.asarray(a[obj].attrs[name]), np.asarray(b[obj].attrs[name])
        assert y.dtype == x.dtype, (name, x.dtype, y.dtype)
        np.testing.assert_array_equal(x.ravel(), y.ravel(), err_msg=name)
print("ok")
"#;
    let o = std::process::Command::new(&py)
        .args(["-c", script])
        .arg(&src)
        .arg(&out)
        .output()
        .expect("python");
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
