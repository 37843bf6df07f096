//! Issue 12's new input classes survive the round trip: a `.tet` converted from Zarr record
//! (structured) stores, netCDF-4 compound variables and NPY/NPZ string arrays is exported to
//! NetCDF-4 and to Zarr v3, the export is converted again, and every dataset and string
//! variable of the second `.tet` equals the first's, value for value (the first's values are
//! checked against the source libraries' in each importer's own tests), and every `.tet`
//! written passes `verify --deep`. The one type change allowed is NetCDF's: f16 is exported as
//! f32 (then compared as the same numbers).
#![cfg(feature = "netcdf")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tet::export::{self, ExportOptions, Target};
use tet::format::verify::{verify, Depth};
use tet::format::{DType, TetFile};
use tet::pipeline::ConvertOptions;

use crate::common::convert as run_request;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn convert(input: &Path, output: &Path) {
    let opts = ConvertOptions::from(tet::settings::Settings {
        skip_unsupported: true,
        ..Default::default()
    });
    run_request(input, output, &opts)
        .unwrap_or_else(|e| panic!("{} → {}: {e}", input.display(), output.display()));
    let f = TetFile::open(output).expect("open the output");
    assert!(
        verify(&f, Depth::Deep).ok(),
        "{}: verify --deep fails",
        output.display()
    );
}

/// Every dataset's decoded bytes and dtype, by name.
fn datasets(path: &Path) -> BTreeMap<String, (DType, Vec<u64>, Vec<u8>)> {
    let f = TetFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (0..f.datasets.len())
        .map(|i| {
            let ds = &f.datasets[i];
            let bytes = f.read_dataset(i).expect("read dataset");
            (ds.name.clone(), (ds.dtype, ds.shape.clone(), bytes))
        })
        .collect()
}

/// The string variables (`tet_ext.text_variables`): values by name.
fn texts(path: &Path) -> BTreeMap<String, Value> {
    let f = TetFile::open(path).expect("open");
    let footer = f.footer().expect("footer").expect("a footer");
    footer
        .ext
        .to_json_map()
        .get("text_variables")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|t| {
                    let name = t["name"].as_str().expect("name").to_string();
                    (name, t["values"].clone())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// IEEE half → single, exactly (every f16 is an f32).
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalise.
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

fn round_trip(input: &Path, expect_datasets: usize, expect_texts: usize) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let first = tmp.path().join("first.tet");
    convert(input, &first);
    let want = datasets(&first);
    let want_texts = texts(&first);
    let what = input.display();
    assert!(
        want.len() >= expect_datasets && want_texts.len() >= expect_texts,
        "{what}: {} datasets, {} string variables",
        want.len(),
        want_texts.len()
    );
    for target in [Target::NETCDF, Target::ZARR] {
        let out = tmp.path().join(format!("out.{}", target.name()));
        let opts = ExportOptions {
            target: Some(target),
            ..ExportOptions::default()
        };
        export::export(&first, &out, &opts)
            .unwrap_or_else(|e| panic!("{what} → {}: {e}", target.name()));
        let back = tmp.path().join(format!("back.{}.tet", target.name()));
        convert(&out, &back);
        let got = datasets(&back);
        for (name, (dtype, shape, bytes)) in &want {
            let via = target.name();
            let (gd, gs, gb) = got
                .get(name)
                .unwrap_or_else(|| panic!("{what} via {via}: `{name}` is missing"));
            assert_eq!(gs, shape, "{what} via {via}: `{name}` shape");
            if gd == dtype {
                assert!(gb == bytes, "{what} via {via}: `{name}` values differ");
            } else {
                assert!(
                    *dtype == DType::F16 && *gd == DType::F32 && target == Target::NETCDF,
                    "{what} via {via}: `{name}` {dtype:?} came back as {gd:?}"
                );
                let as_f32: Vec<u8> = bytes
                    .chunks_exact(2)
                    .flat_map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])).to_le_bytes())
                    .collect();
                assert!(
                    *gb == as_f32,
                    "{what} via {via}: `{name}` f16 values differ"
                );
            }
        }
        assert_eq!(
            texts(&back),
            want_texts,
            "{what} via {}: string variables",
            target.name()
        );
    }
}

#[test]
fn zarr_record_stores_round_trip() {
    let dir = root().join("converters/zarr/tests/fixtures/structured");
    for (store, datasets) in [
        ("rec_v3.zarr", 20),
        ("rec_v2z3.zarr", 8),
        ("rec_v2.zarr", 10),
    ] {
        round_trip(&dir.join(store), datasets, 0);
    }
}

#[test]
fn netcdf_compound_variables_round_trip() {
    round_trip(
        &root().join("converters/netcdf/tests/fixtures/user_types.nc"),
        10,
        1,
    );
}

#[test]
fn npy_string_arrays_round_trip() {
    let dir = root().join("converters/npy/tests/fixtures/issue12");
    for (file, texts) in [
        ("unicode.npy", 1),
        ("bytes.npy", 1),
        ("strings.npz", 2),
        ("records_text.npy", 1),
    ] {
        round_trip(&dir.join(file), 0, texts);
    }
}

/// A netCDF-4 file is read by the netCDF importer whatever it is called (its HDF5 signature
/// alone would send it to the HDF5 importer, which knows nothing of netCDF's char arrays and
/// dimensions): netCDF-C's `_NCProperties` may lie past the first 4 KiB (here at ~17 KiB of a
/// file `tet export` wrote). A file named `.h5` stays with the HDF5 importer.
#[test]
fn netcdf4_files_are_known_by_content_whatever_their_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let first = tmp.path().join("first.tet");
    convert(
        &root().join("converters/zarr/tests/fixtures/structured/rec_v2z3.zarr"),
        &first,
    );
    let nc = tmp.path().join("exported.nc");
    let opts = ExportOptions {
        target: Some(Target::NETCDF),
        ..ExportOptions::default()
    };
    export::export(&first, &nc, &opts).expect("export");
    let bytes = std::fs::read(&nc).expect("read");
    let at = bytes
        .windows(13)
        .position(|w| w == b"_NCProperties")
        .expect("netCDF-C writes _NCProperties");
    assert!(at > 4096, "the case needs the marker past 4 KiB (at {at})");
    for (name, want) in [
        ("data.netcdf", "nc"),
        ("data", "nc"),
        ("data.nc4", "nc"),
        ("data.h5", "h5"),
    ] {
        let p = tmp.path().join(name);
        std::fs::copy(&nc, &p).expect("copy");
        let got = tet::registry::identify(&p).expect("identified").id();
        assert_eq!(got, want, "{name}");
    }
}

/// HDF5 Blosc2 chunks (hdf5plugin's and PyTables') decoded by tet-hdf5's own decoder: the
/// `.tet` passes `verify --deep` and round-trips through NetCDF-4 and Zarr.
#[cfg(feature = "hdf5")]
#[test]
fn hdf5_blosc2_datasets_round_trip() {
    let dir = root().join("converters/hdf5/tests/fixtures");
    round_trip(&dir.join("blosc2.h5"), 20, 0);
    round_trip(&dir.join("pytables_blosc2.h5"), 3, 0);
}

/// A netCDF-4 compound with a `string` field and a `char(3)` field (ncgen, from
/// `fixtures/netcdf_compound_text/station.cdl`): both become text variables with the values
/// ncdump shows, the numeric fields datasets, and all of it round-trips.
#[test]
fn netcdf_compound_text_fields_are_text_variables() {
    let nc = root().join("fixtures/netcdf_compound_text/station.nc");
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("station.tet");
    convert(&nc, &out);
    let t = texts(&out);
    assert_eq!(t["site/name"], serde_json::json!(["Zürich", "", "KDEN"]));
    assert_eq!(t["site/code"], serde_json::json!(["ZRH", "LY", "abc"]));
    let d = datasets(&out);
    let ids: Vec<u8> = [7i32, -2, 1000]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert!(d["site/id"].2 == ids);
    let heights: Vec<u8> = [408.5f32, -1.25, 1609.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert!(d["site/height"].2 == heights);
    round_trip(&nc, 2, 2);
}

/// Two netCDF exports that netCDF-C refused (found by the netCDF-C CDL re-check): an enum
/// variable whose `_FillValue` is of the enum type (exported as that enum type again, fill
/// included), and a classic file's dimension that no variable uses but a scalar variable is
/// named like (defined before the variables, so that netCDF-4 keeps the variable apart from
/// it, as in the source: no warning). Both export, and the values (and the enum type) come
/// back.
#[test]
fn netcdf_exports_of_enum_fills_and_shadowed_unused_dims() {
    let dir = root().join("fixtures/netcdf_edges");
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = ExportOptions {
        target: Some(Target::NETCDF),
        ..ExportOptions::default()
    };
    for (file, dataset, want, warning) in [
        ("enum_fill.nc", "sky", vec![0u8, 1, 255, 0], None::<&str>),
        (
            "dim_named_like_var.nc",
            "level",
            5i32.to_le_bytes().to_vec(),
            None,
        ),
    ] {
        let tet = tmp.path().join(format!("{file}.tet"));
        convert(&dir.join(file), &tet);
        let out = tmp.path().join(format!("{file}.out.nc"));
        let report = export::export(&tet, &out, &opts).unwrap_or_else(|e| panic!("{file}: {e}"));
        match warning {
            Some(w) => assert!(
                report.warnings.iter().any(|x| x == w),
                "{file}: {:?}",
                report.warnings
            ),
            None => assert!(report.warnings.is_empty(), "{file}: {:?}", report.warnings),
        }
        let back = tmp.path().join(format!("{file}.back.tet"));
        convert(&out, &back);
        assert_eq!(datasets(&back)[dataset].2, want, "{file}");
        // The enum variable comes back as the enum type it was (not as bare codes).
        let back_file = TetFile::open(&back).expect("open");
        let footer = back_file.footer().expect("footer").expect("a footer");
        let facts = footer.datasets[dataset]
            .ext
            .to_json_map()
            .get("source_facts")
            .cloned();
        let enum_type = serde_json::json!(["enum_type", {"text": "sky_t"}]);
        let mapping = serde_json::json!(["enum_mapping", {"text_list": ["clear=0", "cloudy=1", "missing=255"]}]);
        let has = |f: &Value| {
            facts
                .as_ref()
                .and_then(Value::as_array)
                .is_some_and(|l| l.contains(f))
        };
        if file == "enum_fill.nc" {
            assert!(has(&enum_type) && has(&mapping), "{file}: {facts:?}");
        }
    }
}

/// Tensogram objects compressed with blosc2 (decoded by tet-blosc2): verified, exported to
/// NetCDF-4 and Zarr, converted back, the same values.
#[test]
fn tensogram_blosc2_objects_round_trip() {
    let dir = root().join("converters/tensogram/tests/fixtures/codecs");
    round_trip(&dir.join("blosc2.tgm"), 10, 0);
    round_trip(&dir.join("blosc2_unhashed.tgm"), 8, 0);
}
