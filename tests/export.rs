//! Round trips over the public corpus: source → `.tet` → `tet export` to NetCDF-4, Zarr v3, NPY
//! and NPZ → read back by an independent reader (the importers, which open the exports through
//! netCDF-C, zarrs and the NPY/ZIP parsers, and the engine that widens i8/bool exactly as for any
//! input) → compared with the source's `.expect.json` sidecar: values (sha256 of the stored
//! bytes), element type, shape and, where the target has them, dimension names, attributes,
//! coordinate roles and global attributes.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::sidecar::{check_attrs, expected_datasets, inputs, sha256};
use serde_json::Value;
use tet::export::{export, Compression, ExportOptions, Target};
use tet::format::{DType, DatasetMeta, TetFile};
use tet::pipeline::ConvertOptions;
use tet_source::AttrValue;

use crate::common::convert;

/// Held by the test that spawns the `tet` binary and by the tests that write netCDF files: a
/// child started while this process has a netCDF-4 file open for writing inherits its file
/// descriptor and with it HDF5's lock on the file, and the parent's re-open then fails until
/// the child exits.
static SPAWN_OR_NETCDF: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn spawn_or_netcdf() -> std::sync::MutexGuard<'static, ()> {
    SPAWN_OR_NETCDF
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a reader found for one array.
struct Found {
    dtype: DType,
    shape: Vec<u64>,
    sha: String,
    meta: DatasetMeta,
}

struct ReadBack {
    arrays: BTreeMap<String, Found>,
    global_attrs: Vec<(String, AttrValue)>,
    text_variables: Vec<Value>,
}

fn opts() -> ConvertOptions {
    ConvertOptions::from(tet::settings::Settings {
        jobs: Some(1),
        ..Default::default()
    })
}

/// Converts `input` to `.tet` and reads every dataset of the result (f16 widened to f32 when
/// `f16_as_f32`, to compare with a NetCDF export).
fn read_via_tet(input: &Path, scratch: &Path, into: &mut ReadBack) {
    let out = scratch.join(format!(
        "{}.back.tet",
        input.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&out);
    convert(input, &out, &opts()).unwrap_or_else(|e| panic!("re-import {}: {e}", input.display()));
    let f = TetFile::open(&out).unwrap();
    let footer = f.footer().unwrap().cloned().unwrap_or_default();
    for (id, d) in f.datasets.iter().enumerate() {
        into.arrays.insert(
            d.name.clone(),
            Found {
                dtype: d.dtype,
                shape: d.shape.clone(),
                sha: sha256(&f.read_dataset(id).unwrap()),
                meta: footer.datasets.get(&d.name).cloned().unwrap_or_default(),
            },
        );
    }
    into.global_attrs.extend(footer.global_attrs.clone());
    if let Some(t) = footer
        .ext
        .to_json_map()
        .get("text_variables")
        .and_then(Value::as_array)
    {
        into.text_variables.extend(t.iter().cloned());
    }
    std::fs::remove_file(&out).unwrap();
}

fn read_back(target: Target, out: &Path, scratch: &Path) -> ReadBack {
    let mut rb = ReadBack {
        arrays: BTreeMap::new(),
        global_attrs: Vec::new(),
        text_variables: Vec::new(),
    };
    if target == Target::NPY && out.is_dir() {
        for name in common::only_files(out) {
            read_via_tet(&out.join(name), scratch, &mut rb);
        }
    } else {
        read_via_tet(out, scratch, &mut rb);
    }
    rb
}

/// f16 bytes as the f32 bytes a NetCDF export holds.
fn f16_bytes_as_f32(b: &[u8]) -> Vec<u8> {
    b.chunks_exact(2)
        .flat_map(|c| tet::export::f16_to_f32(u16::from_le_bytes([c[0], c[1]])).to_le_bytes())
        .collect()
}

/// Dimensions of the string variables in a footer.
fn text_axes(footer: &tet::format::Footer) -> Vec<String> {
    footer
        .ext
        .to_json_map()
        .get("text_variables")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t["dims"].as_array())
        .flatten()
        .filter_map(|d| d.as_str().map(str::to_string))
        .collect()
}

fn check(target: Target, input: &Path, tet: &Path, back: &ReadBack, expect: &Value) {
    let ctx = format!(
        "{} → {}",
        input.file_name().unwrap().to_string_lossy(),
        target.name()
    );
    let src = TetFile::open(tet).unwrap();
    let src_footer = src.footer().unwrap().cloned().unwrap_or_default();
    let want = expected_datasets(expect);
    let with_meta = target == Target::NETCDF || target == Target::ZARR;
    for (name, dtype, shape, sha, array) in &want {
        let flat = name.replace('/', "__");
        let got = back
            .arrays
            .get(name)
            .or_else(|| back.arrays.get(&flat))
            .unwrap_or_else(|| {
                panic!(
                    "{ctx}: `{name}` missing; have {:?}",
                    back.arrays.keys().collect::<Vec<_>>()
                )
            });
        assert_eq!(&got.shape, shape, "{ctx}/{name}: shape");
        if target == Target::NETCDF && dtype == "f16" {
            // netCDF has no f16: exported as the same values in f32.
            assert_eq!(got.dtype, DType::F32, "{ctx}/{name}: dtype");
            let id = src.dataset_id(name).unwrap();
            let widened = f16_bytes_as_f32(&src.read_dataset(id).unwrap());
            assert_eq!(got.sha, sha256(&widened), "{ctx}/{name}: values");
            continue;
        }
        assert_eq!(got.dtype.name(), dtype, "{ctx}/{name}: dtype");
        assert_eq!(&got.sha, sha, "{ctx}/{name}: values");
        if !with_meta {
            continue;
        }
        let src_meta = src_footer.datasets.get(name).cloned().unwrap_or_default();
        // Coordinate variables stay coordinates.
        assert_eq!(src_meta.ext.role, got.meta.ext.role, "{ctx}/{name}: role");
        // Coordinate labels (values of the coordinate variables of short axes) are the same;
        // the Zarr importer does not label axes by string arrays.
        let mut want_coords = src_meta.coords.clone();
        if target == Target::ZARR {
            want_coords.retain(|axis, _| !text_axes(&src_footer).contains(axis));
        }
        if target == Target::NETCDF {
            assert_eq!(want_coords, got.meta.coords, "{ctx}/{name}: coordinates");
        } else {
            // The Zarr importer labels an axis by any 1-D array named like it: it may find
            // more labels than the source's importer did, never other ones.
            for (axis, labels) in &want_coords {
                assert_eq!(
                    Some(labels),
                    got.meta.coords.get(axis),
                    "{ctx}/{name}: labels of `{axis}`"
                );
            }
        }
        if array.is_null() {
            continue;
        }
        if let Some(dims) = array["dims"].as_array().filter(|d| !d.is_empty()) {
            let dims: Vec<String> = dims
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            assert_eq!(got.meta.dim_names, Some(dims), "{ctx}/{name}: dims");
        }
        if let Some(attrs) = array.get("attributes") {
            check_attrs(&format!("{ctx}/{name}"), attrs, &got.meta.attrs);
        }
        if target == Target::NETCDF {
            // Attributes keep their exact types.
            for (k, v) in &src_meta.attrs {
                let g = got.meta.attrs.iter().find(|(n, _)| n == k);
                assert_eq!(
                    g.map(|(_, v)| format!("{v:?}")),
                    Some(format!("{v:?}")),
                    "{ctx}/{name}: attribute `{k}`"
                );
            }
        }
    }
    assert_eq!(back.arrays.len(), want.len(), "{ctx}: array count");
    if with_meta {
        // String variables: names, shapes, dims and values (attribute order aside: Zarr
        // attributes are a JSON object).
        let norm = |t: &Value| {
            let mut t = t.clone();
            if let Some(a) = t.get_mut("attrs").and_then(Value::as_array_mut) {
                a.sort_by_key(|p| p[0].as_str().unwrap_or("").to_string());
            }
            t
        };
        let src_texts = src_footer
            .ext
            .to_json_map()
            .get("text_variables")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut got_texts: Vec<Value> = back.text_variables.iter().map(norm).collect();
        for (g, w) in got_texts.iter_mut().zip(&src_texts) {
            // netCDF needs dimension names: those it made up for unnamed axes do not count.
            if w["dims"].is_null() {
                g["dims"] = Value::Null;
            }
            // Zarr has no character arrays: a char variable's string-length axis stays in
            // NetCDF only (its strings are compared either way).
            if target == Target::ZARR && w.get("char_dim").is_some() {
                g["char_dim"] = w["char_dim"].clone();
            }
        }
        assert_eq!(
            src_texts.iter().map(norm).collect::<Vec<_>>(),
            got_texts,
            "{ctx}: string variables"
        );
        let mut globals = expect["global_attributes"].clone();
        if target == Target::NETCDF {
            // `history` gains the `.tet` history rows: the original text comes first.
            if let Some(old) = globals.as_object_mut().and_then(|g| g.remove("history")) {
                let new = back.global_attrs.iter().find(|(k, _)| k == "history");
                let Some((_, AttrValue::Text(new))) = new else {
                    panic!("{ctx}: history lost")
                };
                assert!(
                    new.starts_with(old.as_str().unwrap_or("")),
                    "{ctx}: history {new:?}"
                );
            }
            let new = back.global_attrs.iter().find(|(k, _)| k == "history");
            assert!(
                matches!(new, Some((_, AttrValue::Text(t))) if t.contains("tet convert")),
                "{ctx}: no .tet history in {new:?}"
            );
        }
        check_attrs(&ctx, &globals, &back.global_attrs);
    }
}

fn round_trip(target: Target, ext: &str, compression: Compression) {
    let _guard = (target == Target::NETCDF).then(spawn_or_netcdf);
    let dir = tempfile::tempdir().unwrap();
    let mut done = 0;
    for (input, expect) in inputs() {
        if expect["expect_error"].is_string() {
            continue;
        }
        let stem = input.file_name().unwrap().to_string_lossy().to_string();
        let tet = dir.path().join(format!("{stem}.tet"));
        convert(&input, &tet, &opts()).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        let out = dir.path().join(format!("{stem}.{ext}"));
        export(
            &tet,
            &out,
            &ExportOptions {
                target: Some(target),
                compression,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("export {stem} to {}: {e}", target.name()));
        let back = read_back(target, &out, dir.path());
        check(target, &input, &tet, &back, &expect);
        done += 1;
    }
    assert!(done >= 30, "only {done} corpus files");
    // Nothing left behind but the outputs.
    for name in common::only_files(dir.path()) {
        assert!(!name.starts_with('.'), "temporary {name} left behind");
    }
}

#[test]
fn corpus_round_trips_through_npy() {
    round_trip(Target::NPY, "npy.d", Compression::Default);
}

#[test]
fn corpus_round_trips_through_npz() {
    round_trip(Target::NPZ, "npz", Compression::Zlib(6));
}

#[test]
fn corpus_round_trips_through_zarr() {
    round_trip(Target::ZARR, "zarr", Compression::Default);
}

#[cfg(feature = "netcdf")]
#[test]
fn corpus_round_trips_through_netcdf() {
    round_trip(Target::NETCDF, "nc", Compression::Default);
}

/// A `.tet` file of one f32 dataset `[rows, cols]` with chunks `[crows, cols]`, zstd.
fn make_tet(dir: &Path, rows: u64, cols: u64, crows: u64) -> (PathBuf, Vec<u8>) {
    let data: Vec<u8> = (0..rows * cols)
        .flat_map(|i| ((i % 1000) as f32 * 0.5).to_le_bytes())
        .collect();
    let npy = dir.join("m.npy");
    let mut bytes = tet::export::npy_header(tet_source::ElementType::F32, &[rows, cols]).unwrap();
    bytes.extend(&data);
    std::fs::write(&npy, bytes).unwrap();
    let tet = dir.join("m.tet");
    let mut o = opts();
    o.settings.codec = "zstd:1".parse().unwrap();
    o.settings.chunk_bytes = Some(crows * cols * 4);
    convert(&npy, &tet, &o).unwrap();
    let f = TetFile::open(&tet).unwrap();
    assert_eq!(f.datasets[0].chunk_shape, vec![crows, cols]);
    (tet, data)
}

#[test]
fn zarr_reuses_zstd_frames_of_full_chunks_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let (tet, data) = make_tet(dir.path(), 100, 64, 16);
    let out = dir.path().join("m.zarr");
    let r = export(&tet, &out, &ExportOptions::default()).unwrap();
    // 6 full chunks of 16 rows, one edge chunk of 4 rows (re-encoded, padded).
    assert_eq!(r.reused_chunks, 6);
    let mut back = read_back(Target::ZARR, &out, dir.path());
    let m = back.arrays.remove("m").unwrap();
    assert_eq!(m.shape, vec![100, 64]);
    assert_eq!(m.sha, sha256(&data));
    // The frame is the .tet payload, byte for byte.
    let f = TetFile::open(&tet).unwrap();
    let e = f.find_chunk(0, &[1, 0]).unwrap();
    assert_eq!(
        std::fs::read(out.join("m/c/1/0")).unwrap(),
        &f.stored_bytes(e).unwrap()[..]
    );
}

#[test]
fn outputs_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let input = common::shared().join("corpus/public/npy/arrays_savez.npz");
    let tet = dir.path().join("a.tet");
    convert(&input, &tet, &opts()).unwrap();
    for (t, ext) in [
        (Target::NPZ, "npz"),
        (Target::ZARR, "zarr"),
        (Target::NPY, "d"),
    ] {
        let a = dir.path().join(format!("a.{ext}"));
        let b = dir.path().join(format!("b.{ext}"));
        for o in [&a, &b] {
            let opts = ExportOptions {
                target: Some(t),
                ..Default::default()
            };
            export(&tet, o, &opts).unwrap();
        }
        assert_eq!(tree(&a), tree(&b), "{}", t.name());
    }
}

/// Relative path → bytes of every file below `p` (or `p` itself).
fn tree(p: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, p: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        if p.is_dir() {
            for e in std::fs::read_dir(p).unwrap() {
                walk(root, &e.unwrap().path(), out);
            }
        } else {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.insert(rel, std::fs::read(p).unwrap());
        }
    }
    walk(p, p, &mut out);
    out
}

#[test]
fn selection_groups_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let input = common::shared().join("corpus/public/zarr/climate.zarr");
    let tet = dir.path().join("c.tet");
    convert(&input, &tet, &opts()).unwrap();
    // A group and a dataset by name; `/` becomes `__` in NPY names.
    let out = dir.path().join("sel");
    let o = ExportOptions {
        target: Some(Target::NPY),
        datasets: vec!["station".into(), "lat".into()],
        ..Default::default()
    };
    export(&tet, &out, &o).unwrap();
    assert_eq!(common::only_files(&out), ["lat.npy", "station__counts.npy"]);
    // Unknown dataset, existing output, output = input, unknown extension: one-line errors,
    // nothing written.
    let e = export(
        &tet,
        &dir.path().join("x.zarr"),
        &ExportOptions {
            datasets: vec!["nope".into()],
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("nope") && !e.contains('\n'), "{e}");
    assert!(!dir.path().join("x.zarr").exists());
    let e = export(&tet, &out, &o).unwrap_err().to_string();
    assert!(e.contains("exists"), "{e}");
    let e = export(&tet, &tet, &ExportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("input") || e.contains("extension"), "{e}");
    let e = export(&tet, &dir.path().join("x.bin"), &ExportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--to"), "{e}");
    // --force replaces a directory output.
    let o2 = ExportOptions {
        force: true,
        datasets: vec!["lat".into()],
        ..o
    };
    export(&tet, &out, &o2).unwrap();
    assert_eq!(common::only_files(&out), ["lat.npy"]);
    let names: Vec<String> = common::only_files(dir.path());
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

/// The bytes of a `.tet` file (footer not spilled) with its checksums taken out of the footer,
/// as tet-convert wrote files before they existed.
fn without_checksums(bytes: &[u8]) -> Vec<u8> {
    common::with_footer(bytes, |v| {
        v.as_object_mut().unwrap().remove("tet_footer_digest");
        v["metadata"]["tet_ext"]
            .as_object_mut()
            .unwrap()
            .remove("chunk_digests");
    })
}

#[test]
fn narrowing_refuses_values_outside_the_recorded_type() {
    let dir = tempfile::tempdir().unwrap();
    let input = common::shared().join("corpus/public/npy/dtype_i8.npy");
    let tet = dir.path().join("i8.tet");
    convert(&input, &tet, &opts()).unwrap();
    // Rewrite one stored i16 to 300 in place: the chunk is raw at this size.
    let mut bytes = std::fs::read(&tet).unwrap();
    let f = TetFile::open(&tet).unwrap();
    let e = f.entries[0];
    assert_eq!(e.codec_id, 0, "test needs a raw chunk");
    let at = e.payload_offset as usize;
    bytes[at..at + 2].copy_from_slice(&300i16.to_le_bytes());
    std::fs::write(&tet, &bytes).unwrap();
    let out = dir.path().join("o.npy");
    // The chunk's digest catches the change first…
    let err = export(&tet, &out, &ExportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("digest"), "{err}");
    // …so the narrowing check is what guards a file without checksums (an older writer's).
    std::fs::write(&tet, without_checksums(&bytes)).unwrap();
    let err = export(&tet, &out, &ExportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("300") && err.contains("i8"), "{err}");
    assert!(!out.exists());
    assert_eq!(common::only_files(dir.path()), ["i8.tet"]);
}

#[test]
fn single_npy_restores_i8_bool_complex_and_0d() {
    let dir = tempfile::tempdir().unwrap();
    for (name, descr, shape) in [
        ("dtype_i8", "'|i1'", "(3, 4)"),
        ("dtype_bool", "'|b1'", "(3, 4)"),
        ("dtype_c64", "'<c8'", "(3, 4)"),
        ("scalar_0d", "'<f8'", "()"),
    ] {
        let input = common::shared().join(format!("corpus/public/npy/{name}.npy"));
        let tet = dir.path().join(format!("{name}.tet"));
        convert(&input, &tet, &opts()).unwrap();
        let out = dir.path().join(format!("{name}.npy"));
        export(&tet, &out, &ExportOptions::default()).unwrap();
        let got = std::fs::read(&out).unwrap();
        let head = String::from_utf8_lossy(&got[10..got.len().min(128)]).into_owned();
        assert!(
            head.contains(descr) && head.contains(shape),
            "{name}: {head}"
        );
        // Same values as the original file's data section.
        let orig = std::fs::read(&input).unwrap();
        let hlen = |b: &[u8]| 10 + u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!(&got[hlen(&got)..], &orig[hlen(&orig)..], "{name}: values");
    }
}

#[cfg(feature = "netcdf")]
#[test]
fn netcdf_header_matches_the_original() {
    // The exported file's dims, variables and attributes, read through netCDF-C by the NetCDF
    // importer, equal the original's (`ncdump -h` shows the same), history aside.
    use tet_source::{Importer, OpenOptions};
    let _guard = spawn_or_netcdf();
    let dir = tempfile::tempdir().unwrap();
    let imp = tet_netcdf::NcImporter;
    for (input, expect) in inputs() {
        if !input.to_string_lossy().contains("/netcdf/") || expect["expect_error"].is_string() {
            continue;
        }
        let stem = input.file_name().unwrap().to_string_lossy().to_string();
        let tet = dir.path().join(format!("{stem}.tet"));
        convert(&input, &tet, &opts()).unwrap();
        let out = dir.path().join(format!("{stem}.out.nc"));
        export(&tet, &out, &ExportOptions::default()).unwrap();
        let a = imp.open(&input, &OpenOptions::default()).unwrap();
        let b = imp.open(&out, &OpenOptions::default()).unwrap();
        let vars = |s: &dyn tet_source::Source| {
            s.variables()
                .iter()
                .map(|v| {
                    let mut attrs = v.attrs.clone();
                    attrs.sort_by(|x, y| x.0.cmp(&y.0));
                    let unlimited: Vec<_> = v
                        .facts
                        .iter()
                        .filter(|f| matches!(f, tet_source::Fact::UnlimitedDims(_)))
                        .collect();
                    format!(
                        "{} {:?} {:?} {:?} {:?} {attrs:?} {unlimited:?}",
                        v.name, v.dtype, v.shape, v.dims, v.role
                    )
                })
                .collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(vars(a.as_ref()), vars(b.as_ref()), "{stem}: variables");
        // String variables: same names, shapes, dims, values and attributes.
        let texts = |s: &dyn tet_source::Source| {
            s.text_variables()
                .iter()
                .map(|t| format!("{t:?}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            texts(a.as_ref()),
            texts(b.as_ref()),
            "{stem}: string variables (char arrays with their string-length axis)"
        );
        // Labels the importer takes from char arrays and string coordinates.
        assert_eq!(
            format!("{:?}", a.dim_labels()),
            format!("{:?}", b.dim_labels()),
            "{stem}: dimension labels"
        );
        let globals = |s: &dyn tet_source::Source| {
            s.global_attrs()
                .iter()
                .filter(|(k, _)| k != "history")
                .map(|(k, v)| format!("{k} {v:?}"))
                .collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(
            globals(a.as_ref()),
            globals(b.as_ref()),
            "{stem}: global attributes"
        );
    }
}

#[test]
fn cli_exports_and_fails_in_one_line() {
    let _guard = spawn_or_netcdf();
    let dir = tempfile::tempdir().unwrap();
    let input = common::shared().join("corpus/public/npy/arrays_savez.npz");
    let tet = dir.path().join("a.tet");
    convert(&input, &tet, &opts()).unwrap();
    let bin = env!("CARGO_BIN_EXE_tet");
    let out = dir.path().join("a.zarr");
    let o = std::process::Command::new(bin)
        .args(["export", "--json"])
        .arg(&tet)
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "zarr");
    let names: Vec<&str> = v["arrays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["temperature", "mask", "ids"]);
    assert_eq!(v["arrays"][1]["dtype"], "bool");
    // Failures: one line on stderr naming the file, exit 1, nothing written.
    for args in [
        vec!["--to", "npz", "--compress", "zstd"],
        vec!["--dataset", "nope"],
    ] {
        let target = dir.path().join("b.out");
        let o = std::process::Command::new(bin)
            .arg("export")
            .arg(&tet)
            .arg(&target)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("a.tet"), "{err}");
        assert!(!target.exists());
    }
    let o = std::process::Command::new(bin)
        .args(["export", "--compress", "lz4"])
        .arg(&tet)
        .arg(dir.path().join("c.nc"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(common::only_files(dir.path()), ["a.tet", "a.zarr"]);
}

#[test]
fn hostile_names_stay_inside_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let tet = dir.path().join("h.tet");
    let arrays = vec![common::Array::new(
        "../evil",
        DType::U8,
        &[4],
        &[4],
        vec![1, 2, 3, 4],
    )];
    common::write_in_order(&tet, &arrays, &tet::format::Footer::default(), 4, &|_| {
        tet::format::Codec::Raw
    });
    let e = export(&tet, &dir.path().join("o.zarr"), &ExportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("../evil"), "{e}");
    // NPY flattens the name: `..__evil.npy` inside the output directory.
    let out = dir.path().join("o");
    let o = ExportOptions {
        target: Some(Target::NPY),
        ..Default::default()
    };
    export(&tet, &out, &o).unwrap();
    assert_eq!(common::only_files(&out), ["..__evil.npy"]);
    assert_eq!(common::only_files(dir.path()), ["h.tet", "o"]);
}

#[test]
fn zarr_complex_comes_back_as_complex() {
    // A Zarr v3 complex64 array → .tet (split into real/imag, with the complex facts) → NPY
    // c64 and Zarr complex64, with the original bytes.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("z.zarr");
    std::fs::create_dir_all(store.join("w/c")).unwrap();
    std::fs::write(
        store.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group", "attributes": {}}"#,
    )
    .unwrap();
    std::fs::write(
        store.join("w/zarr.json"),
        r#"{"zarr_format": 3, "node_type": "array", "shape": [3], "data_type": "complex64",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": [0.0, 0.0], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "attributes": {"units": "V"}}"#,
    )
    .unwrap();
    let values: Vec<u8> = [1.0f32, -1.0, 2.5, 0.0, -3.0, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(store.join("w/c/0"), &values).unwrap();
    let tet = dir.path().join("z.tet");
    convert(&store, &tet, &opts()).unwrap();
    let npy = dir.path().join("w.npy");
    export(&tet, &npy, &ExportOptions::default()).unwrap();
    let got = std::fs::read(&npy).unwrap();
    let hlen = 10 + u16::from_le_bytes([got[8], got[9]]) as usize;
    assert!(String::from_utf8_lossy(&got[..hlen]).contains("'<c8'"));
    assert_eq!(&got[hlen..], &values[..]);
    let z = dir.path().join("back.zarr");
    export(&tet, &z, &ExportOptions::default()).unwrap();
    let meta: Value =
        serde_json::from_slice(&std::fs::read(z.join("w/zarr.json")).unwrap()).unwrap();
    assert_eq!(meta["data_type"], "complex64");
    assert_eq!(meta["attributes"], serde_json::json!({"units": "V"}));
}

#[test]
fn a_corrupt_chunk_fails_every_target_with_nothing_left_behind() {
    let _guard = spawn_or_netcdf();
    let dir = tempfile::tempdir().unwrap();
    let (tet, _) = make_tet(dir.path(), 40, 64, 8);
    std::fs::remove_file(dir.path().join("m.npy")).unwrap();
    // Garble the middle of the third chunk's zstd frame.
    let f = TetFile::open(&tet).unwrap();
    let e = *f.find_chunk(0, &[2, 0]).unwrap();
    assert_eq!(e.codec_id, 1);
    drop(f);
    let mut bytes = std::fs::read(&tet).unwrap();
    let mid = (e.payload_offset + e.stored_byte_len / 2) as usize;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0xa5;
    }
    std::fs::write(&tet, bytes).unwrap();
    let mut targets = vec![
        (Target::NPY, "o.npy"),
        (Target::NPY, "o_dir"),
        (Target::NPZ, "o.npz"),
        (Target::ZARR, "o.zarr"),
    ];
    if cfg!(feature = "netcdf") {
        targets.push((Target::NETCDF, "o.nc"));
    }
    for (t, name) in targets {
        let out = dir.path().join(name);
        // Zarr would copy the frame verbatim: re-encoding makes it decode the chunk.
        let compression = if t == Target::ZARR {
            Compression::None
        } else {
            Compression::Default
        };
        let o = ExportOptions {
            target: Some(t),
            compression,
            ..Default::default()
        };
        let err = export(&tet, &out, &o).unwrap_err().to_string();
        assert!(
            err.contains("chunk [2, 0]") && !err.contains('\n'),
            "{}: {err}",
            t.name()
        );
        assert_eq!(common::only_files(dir.path()), ["m.tet"], "{}", t.name());
    }
}

#[test]
fn chunks_longer_than_the_axis_and_impossible_frames() {
    let dir = tempfile::tempdir().unwrap();
    // A chunk of 1000 along an axis of 5 (legal in .tet): Zarr's chunk is clamped to 5.
    let tet = dir.path().join("c.tet");
    let arrays = vec![common::Array::new(
        "v",
        DType::I32,
        &[5],
        &[1000],
        (0..5i32).flat_map(|v| v.to_le_bytes()).collect(),
    )];
    let footer = tet::format::Footer::default();
    common::write_in_order(&tet, &arrays, &footer, 4, &|_| tet::format::Codec::Zstd);
    let out = dir.path().join("c.zarr");
    let r = export(&tet, &out, &ExportOptions::default()).unwrap();
    assert_eq!(r.reused_chunks, 1);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(out.join("v/zarr.json")).unwrap()).unwrap();
    assert_eq!(
        meta["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([5])
    );
    let mut back = read_back(Target::ZARR, &out, dir.path());
    assert_eq!(
        back.arrays.remove("v").unwrap().sha,
        sha256(&arrays[0].data)
    );

    // A zstd chunk claiming more bytes than its frame can hold is refused before any buffer
    // of that size exists.
    let big = dir.path().join("big.tet");
    let spec = tet::format::DatasetSpec {
        name: "v".into(),
        dtype: DType::U8,
        shape: vec![1 << 40],
        chunk_shape: vec![1 << 40],
    };
    let w = tet::format::TetWriter::create(&big, vec![spec], tet::format::WriterOptions::default())
        .unwrap();
    let frame = zstd::bulk::compress(&[0u8; 16], 1).unwrap();
    w.submit(
        0,
        &[0],
        tet::format::ChunkPayload {
            codec: tet::format::Codec::Zstd,
            raw_len: 1 << 40,
            data: frame.into(),
        },
    )
    .unwrap();
    w.finish(&footer).unwrap();
    for (t, name) in [(Target::NPY, "b.npy"), (Target::ZARR, "b.zarr")] {
        let o = ExportOptions {
            target: Some(t),
            compression: Compression::None,
            ..Default::default()
        };
        let e = export(&big, &dir.path().join(name), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("zstd frame can hold"), "{}: {e}", t.name());
    }
}

/// A cancellation (what SIGINT/SIGTERM ask through `ExportOptions::cancel`) stops every target's
/// export between two chunks with `ExportError::Interrupted`: nothing at the output, no staging
/// directory left beside it, and not a chunk more asked of the source once it said stop.
#[test]
fn a_cancelled_export_stops_between_chunks_and_leaves_nothing() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    // 64 chunks of 4 rows.
    let (tet, _) = make_tet(dir.path(), 256, 64, 4);
    for (target, ext) in [
        (Target::NETCDF, "nc"),
        (Target::ZARR, "zarr"),
        (Target::NPY, "npy"),
        (Target::NPZ, "npz"),
    ] {
        let out_dir = dir.path().join(format!("out-{ext}"));
        std::fs::create_dir(&out_dir).unwrap();
        let out = out_dir.join(format!("m.{ext}"));
        let asked = Arc::new(AtomicU32::new(0));
        let seen = asked.clone();
        let opts = ExportOptions {
            target: Some(target),
            cancel: tet::control::Cancel::from_fn(move || {
                // The fifth question says stop (signal 15).
                (seen.fetch_add(1, Ordering::SeqCst) >= 4).then_some(15)
            }),
            ..Default::default()
        };
        let e = export(&tet, &out, &opts).expect_err("cancelled");
        assert!(
            matches!(e, tet::export::ExportError::Interrupted(15)),
            "{}: {e:?}",
            target.name()
        );
        assert_eq!(e.to_string(), "stopped by signal 15");
        // Stopped at once: the question that said stop is the last one asked.
        assert_eq!(asked.load(Ordering::SeqCst), 5, "{}", target.name());
        let left: Vec<_> = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{}: left {left:?}", target.name());
    }
}

/// A netCDF-4 file (`ncgen`) whose variables carry `_FillValue`s of every kind: NaN, ±infinity
/// and a number for floats, and integers of several widths.
#[cfg(feature = "netcdf")]
const FILLS_CDL: &str = r#"netcdf fills {
dimensions:
	x = 4 ;
variables:
	float fnan(x) ;
		fnan:_FillValue = NaNf ;
		fnan:units = "K" ;
	double dpinf(x) ;
		dpinf:_FillValue = Infinity ;
	double dninf(x) ;
		dninf:_FillValue = -Infinity ;
	float big(x) ;
		big:_FillValue = 9.96921e+36f ;
	short s(x) ;
		s:_FillValue = -999s ;
	int64 l(x) ;
		l:_FillValue = -9223372036854775806LL ;
	ubyte ub(x) ;
		ub:_FillValue = 255UB ;
data:
 fnan = 1.5, _, -2, 4 ;
 dpinf = 1, _, 3, _ ;
 dninf = _, 2, 3, 4 ;
 big = 0.25, 1, _, 3 ;
 s = 1, _, -3, 4 ;
 l = _, 2, 3, 4 ;
 ub = 1, 2, _, 4 ;
}
"#;

/// xarray's Zarr backend (`xr.open_zarr`) decodes the export to what `xr.open_dataset` gives for
/// the source (values masked alike, fill values, encoded dtypes, attributes); zarr-python reads
/// the raw values netCDF4 reads unmasked.
#[cfg(feature = "netcdf")]
const COMPARE_ZARR_PY: &str = r#"
import sys, numpy as np, xarray as xr, zarr, netCDF4
src, store = sys.argv[1:3]
a = xr.open_dataset(src).load()
b = xr.open_zarr(store, consolidated=False).load()
assert sorted(a.data_vars) == sorted(b.data_vars), (list(a.data_vars), list(b.data_vars))
for k in a.data_vars:
    xa, xb = a[k], b[k]
    assert xa.dtype == xb.dtype, (k, xa.dtype, xb.dtype)
    np.testing.assert_array_equal(xa.values, xb.values, err_msg=k)
    fa, fb = xa.encoding.get("_FillValue"), xb.encoding.get("_FillValue")
    assert fa == fb or (np.isnan(fa) and np.isnan(fb)), (k, fa, fb)
    assert xa.encoding["dtype"] == xb.encoding["dtype"], (k, xa.encoding, xb.encoding)
    assert xa.attrs == xb.attrs, (k, xa.attrs, xb.attrs)
g = zarr.open_group(store, mode="r")
with netCDF4.Dataset(src) as n:
    n.set_auto_mask(False)
    for k in a.data_vars:
        raw, z = n[k][:], g[k][:]
        assert raw.dtype == z.dtype, (k, raw.dtype, z.dtype)
        np.testing.assert_array_equal(raw, z, err_msg=k)
print("ok", len(a.data_vars))
"#;

/// `_FillValue`s exported to Zarr v3 are written as xarray's Zarr backend reads them (floats:
/// base64 of the f64 bytes, NaN and ±infinity included; integers: numbers), read back by the
/// Zarr importer as the numbers, and by xarray and zarr-python as the netCDF libraries read
/// the source.
#[cfg(feature = "netcdf")]
#[test]
fn zarr_fill_values_are_read_back_by_xarray_and_zarr_python() {
    let dir = tempfile::tempdir().unwrap();
    let (cdl, src) = (dir.path().join("fills.cdl"), dir.path().join("fills.nc"));
    std::fs::write(&cdl, FILLS_CDL).unwrap();
    let st = std::process::Command::new("ncgen")
        .args(["-k", "nc4", "-o"])
        .arg(&src)
        .arg(&cdl)
        .status()
        .expect("ncgen (netcdf-bin, .ci/setup) runs");
    assert!(st.success());
    let tet = dir.path().join("fills.tet");
    convert(&src, &tet, &opts()).unwrap();
    let store = dir.path().join("fills.zarr");
    let report = export(&tet, &store, &ExportOptions::default()).unwrap();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let fill = |name: &str| -> Value {
        let m: Value =
            serde_json::from_slice(&std::fs::read(store.join(name).join("zarr.json")).unwrap())
                .unwrap();
        m["attributes"]["_FillValue"].clone()
    };
    // Python's base64.b64encode(struct.pack("<d", x)).
    assert_eq!(fill("fnan"), "AAAAAAAA+H8=");
    assert_eq!(fill("dpinf"), "AAAAAAAA8H8=");
    assert_eq!(fill("dninf"), "AAAAAAAA8P8=");
    assert_eq!(fill("big"), "AAAAAAAAnkc=");
    assert_eq!(fill("s"), -999);
    assert_eq!(fill("l"), -9_223_372_036_854_775_806i64);
    assert_eq!(fill("ub"), 255);
    // The importer reads them back as the numbers, typed as the array.
    let back = dir.path().join("back.tet");
    convert(&store, &back, &opts()).unwrap();
    let f = TetFile::open(&back).unwrap();
    let footer = f.footer().unwrap().cloned().unwrap_or_default();
    let attr = |name: &str| {
        let m = &footer.datasets[name].attrs;
        m.iter().find(|(k, _)| k == "_FillValue").unwrap().1.clone()
    };
    assert!(matches!(attr("fnan"), AttrValue::F32(v) if v.len() == 1 && v[0].is_nan()));
    assert_eq!(attr("dpinf"), AttrValue::F64(vec![f64::INFINITY]));
    assert_eq!(attr("dninf"), AttrValue::F64(vec![f64::NEG_INFINITY]));
    assert_eq!(attr("big"), AttrValue::F32(vec![9.96921e36]));
    if let Some(py) = common::python_with("xarray, zarr, netCDF4") {
        let o = std::process::Command::new(py)
            .args(["-c", COMPARE_ZARR_PY])
            .arg(&src)
            .arg(&store)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
