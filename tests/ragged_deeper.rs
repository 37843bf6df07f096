//! Variable-length values one level deeper than numbers (issue 32): vlens of strings (netCDF
//! `string(*)` from `ncgen`, h5py `vlen_dtype(S3)`, PyTables `VLArray` of `StringAtom`) become
//! *ragged text* — a string variable of every element's strings plus the `i64` count dataset
//! `<name>_count` — and a netCDF vlen of vlens of numbers a ragged array with two count
//! datasets (docs/FORMAT.md, "Ragged arrays, ragged text and nested ragged arrays"). The inputs
//! are written here with the real libraries; the `.tet` is compared value for value with what
//! h5py (libhdf5) reads from the source, and `tet export` back to netCDF-4 is read by h5py
//! (equal to the source) and by netCDF-C's `ncdump` (its data section equal to the source's).
#![cfg(feature = "netcdf")]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tet::export::{self, ExportOptions, Target};
use tet::format::{DType, TetFile};
use tet::pipeline::ConvertOptions;

/// Writes the inputs (`write DIR`) or prints what h5py reads of the named variables of a file
/// (`read FILE NAME…`): per variable, nested lists of its values (strings as UTF-8 text).
const PY: &str = r#"
import json, subprocess, sys
import h5py, numpy as np, tables

CDL = """netcdf deeper {
types:
  string(*) names_t ;
  int(*) ints_t ;
  ints_t(*) nested_t ;
  double(*) reals_t ;
dimensions:
  n = 3 ;
  time = UNLIMITED ;
variables:
  names_t names(n) ;
    names:long_name = "names per station" ;
  nested_t nested(time) ;
    nested:units = "1" ;
  names_t scalar_names ;
  reals_t reals(n) ;
data:
  names = {"a", "bc"}, {}, {"d\u00e9f", "", "g h"} ;
  nested = {{1, 2}, {}, {3}}, {}, {{-4, 5, 2147483647}} ;
  scalar_names = {"only", "two"} ;
  reals = {0.5}, {}, {-1e300, 3.25} ;
}
"""

def tolist(x):
    if isinstance(x, bytes):
        return x.decode("utf-8")
    if isinstance(x, np.ndarray):
        return [tolist(e) for e in x.tolist()] if x.dtype != object else [tolist(e) for e in x]
    if isinstance(x, (list, tuple)):
        return [tolist(e) for e in x]
    if isinstance(x, np.generic):
        return x.item()
    return x

if sys.argv[1] == "write":
    d = sys.argv[2]
    with open(f"{d}/deeper.cdl", "w") as f:
        f.write(CDL)
    subprocess.run(["ncgen", "-4", "-o", f"{d}/deeper.nc", f"{d}/deeper.cdl"], check=True)
    with h5py.File(f"{d}/h5py_vlen_str.h5", "w") as f:
        ds = f.create_dataset("fixed", (2, 2), dtype=h5py.vlen_dtype(np.dtype("S3")))
        ds[0, 0] = np.array([b"ab", b"cde"], dtype="S3")
        ds[0, 1] = np.array([], dtype="S3")
        ds[1, 0] = np.array([b"x"], dtype="S3")
        ds[1, 1] = np.array([b"", b"yz", b"q"], dtype="S3")
        ds.attrs["units"] = "1"
    with tables.open_file(f"{d}/pytables_vlarray.h5", "w") as f:
        v = f.create_vlarray("/", "words", tables.StringAtom(itemsize=4))
        v.append([b"one", b"two2"]); v.append([]); v.append([b"thre"])
    with tables.open_file(f"{d}/pytables_times.h5", "w") as f:
        t = f.create_vlarray("/", "pairs", tables.Time32Atom(shape=(2, 1)))
        t.append(np.array([[[1], [2]], [[3], [-4]]], dtype=np.int32))
        t.append(np.zeros((0, 2, 1), dtype=np.int32))
        t.append(np.array([[[2147483647], [6]]], dtype=np.int32))
        t = f.create_vlarray("/", "stamps", tables.Time64Atom())
        t.append([1178896298.832258, -1.5]); t.append([0.000001])  # (an empty row breaks its read)
elif sys.argv[1] == "tables":
    with tables.open_file(sys.argv[2], "r") as f:
        print(json.dumps({n: [tolist(x) for x in f.get_node("/" + n).read()] for n in sys.argv[3:]}))
else:
    with h5py.File(sys.argv[2], "r") as f:
        out = {}
        for name in sys.argv[3:]:
            ds = f[name]
            out[name] = tolist(ds[()]) if ds.shape == () else tolist(ds[...])
        print(json.dumps(out))
"#;

/// Converts `input` to `out` (the library, not the `tet` binary: target/debug/tet is shared
/// with other worktrees' builds).
fn convert(input: &Path, out: &Path) {
    let settings = ConvertOptions::default().settings;
    tet::run(
        &tet::Request::new([input], out, settings),
        &tet::Context::default(),
    )
    .unwrap_or_else(|e| panic!("convert {}: {e}", input.display()));
}

/// Exports `tet` to netCDF-4 at `out`; the warnings.
fn export_nc(tet: &Path, out: &Path) -> Vec<String> {
    let opts = ExportOptions {
        target: Some(Target::NETCDF),
        ..ExportOptions::default()
    };
    export::export(tet, out, &opts)
        .unwrap_or_else(|e| panic!("export {}: {e}", tet.display()))
        .warnings
}

fn run(c: &mut Command, what: &str) -> String {
    let o = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn h5py_read(py: &Path, file: &Path, names: &[&str]) -> Value {
    let out = run(
        Command::new(py)
            .args(["-c", PY, "read"])
            .arg(file)
            .args(names),
        "h5py read",
    );
    serde_json::from_str(&out).expect("json")
}

/// The data section of `ncdump FILE` (after `data:`), one `name = …` entry per variable, in
/// name order (export defines vlen variables after the others); `None` when ncdump is not
/// installed.
fn ncdump_data(file: &Path) -> Option<Vec<String>> {
    let o = Command::new("ncdump").arg(file).output().ok()?;
    assert!(o.status.success(), "ncdump {}: {o:?}", file.display());
    let s = String::from_utf8(o.stdout).expect("utf-8");
    let data = &s[s.find("data:").expect("data section") + 5..];
    let mut v: Vec<String> = data
        .split(" ;\n")
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty() && e != "}")
        .collect();
    v.sort();
    Some(v)
}

/// Each dataset's dtype, shape and bytes, and the text variables, of a `.tet`.
struct Tet {
    datasets: Vec<(String, DType, Vec<u64>, Vec<u8>)>,
    texts: Vec<Value>,
}

impl Tet {
    fn open(path: &Path) -> Tet {
        let f = TetFile::open(path).expect("open");
        let datasets = (0..f.datasets.len())
            .map(|i| {
                let d = &f.datasets[i];
                let b = f.read_dataset(i).expect("read");
                (d.name.clone(), d.dtype, d.shape.clone(), b)
            })
            .collect();
        let footer = f.footer().expect("footer").expect("has a footer");
        let texts = footer
            .ext
            .to_json_map()
            .get("text_variables")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        Tet { datasets, texts }
    }

    fn dataset(&self, name: &str) -> (DType, &[u64], &[u8]) {
        let d = self
            .datasets
            .iter()
            .find(|d| d.0 == name)
            .unwrap_or_else(|| panic!("no dataset {name}"));
        (d.1, &d.2, &d.3)
    }

    fn i64s(&self, name: &str) -> Vec<i64> {
        let (t, _, b) = self.dataset(name);
        assert_eq!(t, DType::I64, "{name}");
        b.chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn text(&self, name: &str) -> &Value {
        self.texts
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no text variable {name}"))
    }
}

/// The value of fact `key` in a typed fact list.
fn fact<'a>(facts: &'a Value, key: &str) -> Option<&'a Value> {
    facts
        .as_array()?
        .iter()
        .find(|f| f[0] == key)
        .map(|f| &f[1]["text"])
}

/// The elements of a nested list in C order, down to the sequences (lists of scalars).
fn sequences(v: &Value) -> Vec<Vec<Value>> {
    match v.as_array() {
        Some(a) if a.iter().all(|e| !e.is_array()) => vec![a.clone()],
        Some(a) => a.iter().flat_map(sequences).collect(),
        None => panic!("not a list: {v}"),
    }
}

/// Checks ragged text `name` (a string variable and `<name>_count`) against `want` (h5py's
/// nested lists of strings; `elements` of them in C order).
fn check_ragged_text(t: &Tet, name: &str, want: &Value, elements: usize) {
    let seqs: Vec<Vec<Value>> = if elements == 1
        && want
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string))
    {
        vec![want.as_array().unwrap().clone()]
    } else {
        sequences(want)
    };
    assert_eq!(seqs.len(), elements, "{name}: elements");
    let counts: Vec<i64> = seqs.iter().map(|s| s.len() as i64).collect();
    assert_eq!(t.i64s(&format!("{name}_count")), counts, "{name}_count");
    let tv = t.text(name);
    let strings: Vec<Value> = seqs.into_iter().flatten().collect();
    assert_eq!(tv["values"].as_array().unwrap(), &strings, "{name} strings");
    assert_eq!(
        tv["shape"],
        serde_json::json!([strings.len()]),
        "{name} shape"
    );
    let short = name.rsplit('/').next().unwrap();
    assert_eq!(tv["dims"], serde_json::json!([format!("{short}_sample")]));
    assert_eq!(
        fact(&tv["facts"], "ragged_count"),
        Some(&Value::String(format!("{name}_count"))),
        "{name}: the ragged fact names its count"
    );
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tet-ragged-deeper-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Converts `input`, exports the `.tet` back to netCDF-4; the two paths.
fn round_trip(input: &Path) -> (PathBuf, PathBuf) {
    let t = input.with_extension("tet");
    let back = input.with_extension("back.nc");
    convert(input, &t);
    export_nc(&t, &back);
    (t, back)
}

#[test]
fn vlens_of_strings_and_of_vlens_are_converted_and_exported_back() {
    let Some(py) = common::python_with("h5py, tables, netCDF4") else {
        return;
    };
    let dir = scratch("strings");
    run(
        Command::new(&py).args(["-c", PY, "write"]).arg(&dir),
        "write inputs",
    );

    // netCDF-4 from ncgen: vlen of strings (1-D and 0-d), vlen of vlens, vlen of doubles.
    let nc = dir.join("deeper.nc");
    let names = ["names", "nested", "scalar_names", "reals"];
    let want = h5py_read(&py, &nc, &names);
    let (t, back) = round_trip(&nc);
    let got = Tet::open(&t);
    check_ragged_text(&got, "names", &want["names"], 3);
    check_ragged_text(&got, "scalar_names", &want["scalar_names"], 1);
    // The vlen of vlens: values, one count per inner sequence, one count of those per element.
    let elements = want["nested"].as_array().unwrap();
    let inner: Vec<&Vec<Value>> = elements
        .iter()
        .flat_map(|e| e.as_array().unwrap())
        .map(|s| s.as_array().unwrap())
        .collect();
    assert_eq!(
        got.i64s("nested_count_count"),
        elements
            .iter()
            .map(|e| e.as_array().unwrap().len() as i64)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        got.i64s("nested_count"),
        inner.iter().map(|s| s.len() as i64).collect::<Vec<_>>()
    );
    let (dt, shape, bytes) = got.dataset("nested");
    let values: Vec<u8> = inner
        .iter()
        .flat_map(|s| s.iter())
        .flat_map(|v| (v.as_i64().unwrap() as i32).to_le_bytes())
        .collect();
    assert_eq!((dt, shape, bytes), (DType::I32, &[6u64][..], &values[..]));
    let (dt, _, bytes) = got.dataset("reals");
    assert_eq!(dt, DType::F64);
    let reals: Vec<u8> = [0.5f64, -1e300, 3.25]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(bytes, &reals[..]);
    // Exported back: one vlen variable each, equal to the source for h5py and for ncdump.
    assert_eq!(h5py_read(&py, &back, &names), want, "export read by h5py");
    if let (Some(a), Some(b)) = (ncdump_data(&nc), ncdump_data(&back)) {
        assert_eq!(a, b, "ncdump data sections");
    }

    // HDF5 sequences of fixed-length strings: h5py's vlen_dtype(S3) (2-D) and PyTables'
    // VLArray of StringAtom.
    for (file, name, elements) in [
        ("h5py_vlen_str.h5", "fixed", 4),
        ("pytables_vlarray.h5", "words", 3),
    ] {
        let src = dir.join(file);
        let want = h5py_read(&py, &src, &[name]);
        let (t, back) = round_trip(&src);
        check_ragged_text(&Tet::open(&t), name, &want[name], elements);
        // Exported to netCDF-4 as a vlen of `string`: h5py reads the same strings.
        assert_eq!(h5py_read(&py, &back, &[name]), want, "{file}: export");
        if let Some(d) = ncdump_data(&back) {
            assert!(
                d.iter().any(|e| e.starts_with(&format!("{name} ="))
                    && e.contains(r#"{"ab", "cde"}"#)
                    || e.contains(r#"{"one", "two2"}, {}, {"thre"}"#)),
                "{file}: ncdump shows {name}: {d:?}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pytables_sequences_of_times_and_of_arrays_are_ragged_arrays() {
    let Some(py) = common::python_with("h5py, tables") else {
        return;
    };
    let dir = scratch("times");
    run(
        Command::new(&py).args(["-c", PY, "write"]).arg(&dir),
        "write inputs",
    );
    let src = dir.join("pytables_times.h5");
    let want: Value = serde_json::from_str(&run(
        Command::new(&py)
            .args(["-c", PY, "tables"])
            .arg(&src)
            .args(["pairs", "stamps"]),
        "PyTables read",
    ))
    .expect("json");
    let t = src.with_extension("tet");
    convert(&src, &t);
    let got = Tet::open(&t);
    // Time32Atom(shape=(2, 1)): the values keep the atom's axes after the sample axis.
    let pairs = want["pairs"].as_array().unwrap();
    assert_eq!(
        got.i64s("pairs_count"),
        pairs
            .iter()
            .map(|p| p.as_array().unwrap().len() as i64)
            .collect::<Vec<_>>()
    );
    let flat: Vec<u8> = pairs
        .iter()
        .flat_map(|p| p.as_array().unwrap().iter())
        .flat_map(|a| a.as_array().unwrap().iter())
        .flat_map(|a| a.as_array().unwrap().iter())
        .flat_map(|v| (v.as_i64().unwrap() as i32).to_le_bytes())
        .collect();
    let (dt, shape, bytes) = got.dataset("pairs");
    assert_eq!(
        (dt, shape, bytes),
        (DType::I32, &[3u64, 2, 1][..], &flat[..])
    );
    // Time64Atom: PyTables' float seconds, as exact microseconds.
    let stamps = want["stamps"].as_array().unwrap();
    assert_eq!(
        got.i64s("stamps_count"),
        stamps
            .iter()
            .map(|p| p.as_array().unwrap().len() as i64)
            .collect::<Vec<_>>()
    );
    let micros: Vec<i64> = stamps
        .iter()
        .flat_map(|p| p.as_array().unwrap().iter())
        .map(|v| (v.as_f64().unwrap() * 1e6).round() as i64)
        .collect();
    assert_eq!(got.i64s("stamps"), micros);
    let f = TetFile::open(&t).unwrap();
    let footer = f.footer().unwrap().unwrap();
    let attrs = |name: &str| format!("{:?}", footer.datasets[name].attrs);
    assert!(
        attrs("stamps").contains("microseconds since 1970-01-01 00:00:00"),
        "{}",
        attrs("stamps")
    );
    assert!(
        attrs("pairs").contains("seconds since 1970-01-01 00:00:00"),
        "{}",
        attrs("pairs")
    );
    // netCDF has no vlen of arrays: that one is exported as its values and counts, saying so.
    let back = src.with_extension("back.nc");
    let warnings = export_nc(&t, &back);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("ragged array `pairs` exported as its values and counts")),
        "{warnings:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
