//! Choosing variables and cutting dimensions while converting (`--variables`, `--exclude`,
//! `--no-coords`, `--isel`, `--sel`): the values equal what xarray's `ds[names].isel(...)` /
//! `.sel(...)` gives on the same netCDF-4 file (fixtures/select: `make_select.py` wrote the file
//! and xarray's answers), edge chunks and steps included; unknown names are errors naming the
//! closest; the history row records the selection and the up-to-date check sees it; the
//! passthrough fast paths (raw file extents, stored zstd frames) never copy uncut bytes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use serde_json::json;
use tet::format::{DType, TetFile};

#[cfg_attr(not(feature = "netcdf"), allow(dead_code))]
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/select")
        .join(name)
}

fn convert(input: &Path, output: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .arg("-q")
        .args(extra)
        .arg(input)
        .arg(output)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap()
}

/// Every value of dataset `i`, as f64.
#[cfg_attr(not(feature = "netcdf"), allow(dead_code))]
fn values(f: &TetFile, i: usize) -> Vec<f64> {
    let b = f.read_dataset(i).unwrap();
    macro_rules! conv {
        ($t:ty, $n:expr) => {
            b.chunks_exact($n)
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect()
        };
    }
    match f.datasets[i].dtype {
        DType::U8 => b.iter().map(|&x| x as f64).collect(),
        DType::I16 => conv!(i16, 2),
        DType::U16 => conv!(u16, 2),
        DType::I32 => conv!(i32, 4),
        DType::U32 => conv!(u32, 4),
        DType::I64 => conv!(i64, 8),
        DType::U64 => conv!(u64, 8),
        DType::F32 => conv!(f32, 4),
        DType::F64 => conv!(f64, 8),
        DType::F16 => panic!("no f16 here"),
    }
}

#[cfg_attr(not(feature = "netcdf"), allow(dead_code))]
fn names(f: &TetFile) -> Vec<String> {
    let mut n: Vec<String> = f.datasets.iter().map(|d| d.name.clone()).collect();
    n.sort();
    n
}

fn last_params(f: &TetFile) -> std::collections::BTreeMap<String, String> {
    f.footer()
        .unwrap()
        .unwrap()
        .history
        .last()
        .unwrap()
        .params
        .clone()
}

#[cfg(feature = "netcdf")]
#[test]
fn selections_equal_xarray() {
    let expect: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("expect.json")).unwrap()).unwrap();
    let d = tempfile::tempdir().unwrap();
    let input = fixture("select.nc");
    let cases = expect.as_object().unwrap();
    assert!(cases.len() >= 10);
    for (case, want) in cases {
        let args: Vec<&str> = want["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let out = d.path().join(format!("{case}.tet"));
        let o = convert(&input, &out, &args);
        assert!(o.status.success(), "{case}: {o:?}");
        let f = TetFile::open(&out).unwrap();
        let vars = want["vars"].as_object().unwrap();
        let mut wanted: Vec<String> = vars.keys().cloned().collect();
        wanted.sort();
        assert_eq!(names(&f), wanted, "{case}: the variables kept");
        for (i, ds) in f.datasets.iter().enumerate() {
            let w = &vars[&ds.name];
            let shape: Vec<u64> = serde_json::from_value(w["shape"].clone()).unwrap();
            assert_eq!(ds.shape, shape, "{case}: shape of {}", ds.name);
            let wv: Vec<f64> = serde_json::from_value(w["values"].clone()).unwrap();
            assert_eq!(values(&f, i), wv, "{case}: values of {}", ds.name);
        }
        assert!(tet::format::verify::verify(&f, tet::format::verify::Depth::Deep).ok());
    }
}

#[cfg(feature = "netcdf")]
#[test]
fn cut_coordinates_become_cut_labels() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("o.tet");
    let o = convert(
        &fixture("select.nc"),
        &out,
        &[
            "--variables",
            "temp",
            "--sel",
            "time=2000-01-03:2000-01-03T12",
            "--isel",
            "lon=::4",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let f = TetFile::open(&out).unwrap();
    let footer = f.footer().unwrap().unwrap();
    let coords = &footer.datasets["temp"].coords;
    assert_eq!(
        coords["time"],
        [
            "2000-01-03T00:00:00",
            "2000-01-03T06:00:00",
            "2000-01-03T12:00:00"
        ]
    );
    assert_eq!(coords["lon"], ["0", "160", "320"]);
}

#[cfg(feature = "netcdf")]
#[test]
fn names_and_dims_that_match_nothing_are_errors_naming_the_closest() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("o.tet");
    let input = fixture("select.nc");
    let cases: [(&[&str], &[&str]); 6] = [
        (&["--variables", "tmep"], &["'tmep'", "closest: temp"]),
        (&["--variables", "temp,nope*"], &["'nope*'"]),
        (&["--exclude", "precp"], &["--exclude", "closest: precip"]),
        (
            &["--isel", "tim=0:3"],
            &["dimension 'tim'", "closest: time"],
        ),
        (
            &["--sel", "time=2001-01-01:2001-02-01"],
            &["no position of time"],
        ),
        (&["--isel", "time=50:60"], &["selects no position"]),
    ];
    for (args, needles) in cases {
        let o = convert(&input, &out, args);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        for n in needles {
            assert!(err.contains(n), "{args:?}: {err}");
        }
        assert!(!out.exists(), "{args:?}: nothing written");
    }
    // Malformed specifications are usage errors before any input is opened.
    for bad in [
        ["--isel", "time=3"],
        ["--isel", "time=::0"],
        ["--sel", "time=a:b"],
    ] {
        let o = convert(&input, &out, &bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {o:?}");
    }
}

/// `--chunk` names are checked as `--variables` are (issues 31/33: `--chunk latt=2` was
/// silently ignored, exit 0), in the engine: the CLI and a manifest get the same error.
#[cfg(feature = "netcdf")]
#[test]
fn chunk_names_that_match_nothing_are_errors_naming_the_closest() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("o.tet");
    let input = fixture("select.nc");
    for (args, needle) in [
        (
            ["--chunk", "latt=2"],
            "--chunk: no dimension `latt` (closest: lat",
        ),
        (
            ["--chunk", "nosuchvar:1,1,1"],
            "--chunk: no variable `nosuchvar` (closest: ",
        ),
        (["--chunk", "tmie=1"], "no dimension `tmie` (closest: time"),
    ] {
        let o = convert(&input, &out, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!out.exists(), "{args:?}: nothing written");
    }
    // The names that exist still plan what they say.
    let o = convert(
        &input,
        &out,
        &["--chunk", "time=1,lat=2", "--chunk", "temp:1,2,3"],
    );
    assert!(o.status.success(), "{o:?}");
    let f = TetFile::open(&out).unwrap();
    let temp = f.datasets.iter().find(|x| x.name == "temp").unwrap();
    assert_eq!(temp.chunk_shape, [1, 2, 3]);
    // A manifest job gets the same check (its `chunk` key is the same setting).
    let m = d.path().join("jobs.toml");
    std::fs::write(
        &m,
        format!(
            "[[job]]\ninput = {:?}\noutput = \"m.tet\"\nchunk = \"latt=2\"\n",
            input.display().to_string()
        ),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .args(["-q", "--manifest"])
        .arg(&m)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no dimension `latt` (closest: lat"), "{err}");
    assert!(!d.path().join("m.tet").exists());
}

#[cfg(feature = "netcdf")]
#[test]
fn history_records_the_selection_and_the_up_to_date_check_sees_it() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("o.tet");
    let input = fixture("select.nc");
    let args = [
        "--variables",
        "temp,precip",
        "--exclude",
        "time_bnds",
        "--isel",
        "time=2:30:3",
        "--sel",
        "lat=-10:30",
    ];
    assert!(convert(&input, &out, &args).status.success());
    let f = TetFile::open(&out).unwrap();
    let p = last_params(&f);
    assert_eq!(p["variables"], "temp,precip");
    assert_eq!(p["exclude"], "time_bnds");
    assert_eq!(p["isel"], "time=2:30:3");
    assert_eq!(p["sel"], "lat=-10:30");
    assert!(!p.contains_key("no_coords"));
    let stamp = std::fs::metadata(&out).unwrap().modified().unwrap();
    drop(f);
    // The same selection again: up to date, nothing written.
    let again = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .args(args)
        .arg(&input)
        .arg(&out)
        .output()
        .unwrap();
    assert!(again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("up to date"),
        "{again:?}"
    );
    assert_eq!(std::fs::metadata(&out).unwrap().modified().unwrap(), stamp);
    // Another cut: converted again, and recorded.
    let other = ["--variables", "temp,precip", "--isel", "time=2:30:4"];
    assert!(convert(&input, &out, &other).status.success());
    let p = last_params(&TetFile::open(&out).unwrap());
    assert_eq!(p["isel"], "time=2:30:4");
    assert!(!p.contains_key("sel") && !p.contains_key("exclude"));
    // No selection: no selection keys at all (outputs written before keep their params).
    assert!(convert(&input, &out, &[]).status.success());
    let p = last_params(&TetFile::open(&out).unwrap());
    for k in ["variables", "exclude", "no_coords", "isel", "sel"] {
        assert!(!p.contains_key(k), "{k}");
    }
}

/// A raw `.npy` of `rows × 4096` f32 values (see `common::write_npy`): its values.
fn npy_values(path: &Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap();
    let header = u16::from_le_bytes([b[8], b[9]]) as usize;
    b[10 + header..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn f32s(f: &TetFile, i: usize) -> Vec<f32> {
    f.read_dataset(i)
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Raw NPY: a cut along the first axis is still one run of the file (copied file to file from
/// the right offset); any other cut is read and picked. Never the uncut bytes.
#[test]
fn raw_file_extents_are_mapped_or_off_for_cut_variables() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("a.npy");
    common::write_npy(&input, 12);
    let all = npy_values(&input);
    let row = |r: usize| &all[r * 4096..(r + 1) * 4096];
    let cases: [(&[&str], Vec<f32>); 4] = [
        (
            &["--isel", "dim_0=3:7"],
            (3..7).flat_map(|r| row(r).to_vec()).collect(),
        ),
        (
            &["--isel", "dim_0=-2:"],
            (10..12).flat_map(|r| row(r).to_vec()).collect(),
        ),
        (
            &["--isel", "dim_0=1:12:5"],
            [1, 6, 11].iter().flat_map(|&r| row(r).to_vec()).collect(),
        ),
        (
            &["--isel", "dim_1=100:4000:7", "--isel", "dim_0=::-4"],
            [11, 7, 3]
                .iter()
                .flat_map(|&r| row(r)[100..4000].iter().step_by(7).copied())
                .collect(),
        ),
    ];
    for (args, want) in cases {
        for chunk in ["1MiB", "20KiB"] {
            let out = d.path().join("o.tet");
            let _ = std::fs::remove_file(&out);
            let mut a = vec!["--codec", "raw", "--chunk-bytes", chunk];
            a.extend_from_slice(args);
            let o = convert(&input, &out, &a);
            assert!(o.status.success(), "{a:?}: {o:?}");
            let f = TetFile::open(&out).unwrap();
            assert_eq!(f32s(&f, 0), want, "{a:?}");
            assert!(tet::format::verify::verify(&f, tet::format::verify::Depth::Deep).ok());
        }
    }
}

const SHAPE: [u64; 3] = [4, 300, 256];
const CHUNK: [u64; 3] = [1, 256, 256];

/// A Zarr v3 store of f32 `t` (SHAPE, chunks CHUNK, dims time/y/x) whose chunks are zstd frames
/// of exactly the chunk's bytes; returns the values.
fn write_zstd_store(root: &Path) -> Vec<f32> {
    use zarrs::array::codec::{BytesCodec, ZstdCodec};
    use zarrs::array::{ArrayBuilder, ArrayBytes, BytesToBytesCodecTraits, FillValueMetadata};
    use zarrs::filesystem::FilesystemStore;
    use zarrs::group::GroupBuilder;
    let store = Arc::new(FilesystemStore::new(root).unwrap());
    GroupBuilder::new()
        .build(store.clone(), "/")
        .unwrap()
        .store_metadata()
        .unwrap();
    let fill: FillValueMetadata = serde_json::from_value(json!(0.0)).unwrap();
    let zstd: Vec<Arc<dyn BytesToBytesCodecTraits>> = vec![Arc::new(ZstdCodec::new(3, true))];
    let array = ArrayBuilder::new(SHAPE.to_vec(), CHUNK.to_vec(), "float32", fill)
        .array_to_bytes_codec(Arc::new(BytesCodec::little()))
        .bytes_to_bytes_codecs(zstd)
        .dimension_names(Some(["time", "y", "x"]))
        .build(store, "/t")
        .unwrap();
    array.store_metadata().unwrap();
    let val =
        |t: u64, y: u64, x: u64| (t * 1000 + y) as f32 * 0.25 + ((x * 7 + y * 13) % 17) as f32;
    for t in 0..SHAPE[0] {
        for j in 0..2u64 {
            let mut v = Vec::new();
            for r in 0..256 {
                for x in 0..256u64 {
                    let y = j * 256 + r;
                    let f = if y < SHAPE[1] { val(t, y, x) } else { 0.0 };
                    v.extend(f.to_le_bytes());
                }
            }
            array
                .store_chunk(&[t, j, 0], ArrayBytes::new_flen(v))
                .unwrap();
        }
    }
    let mut all = Vec::new();
    for t in 0..SHAPE[0] {
        for y in 0..SHAPE[1] {
            for x in 0..SHAPE[2] {
                all.push(val(t, y, x));
            }
        }
    }
    all
}

/// Zarr with zstd frames: a cut that keeps whole stored chunks keeps their frames; a cut that
/// shifts the grid (or steps) decodes, and the values are the cut's, never the uncut chunk's.
#[test]
fn stored_zstd_frames_are_kept_only_where_they_are_the_cut() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("s.zarr");
    let all = write_zstd_store(&store);
    let at = |t: u64, y: u64, x: u64| all[((t * SHAPE[1] + y) * SHAPE[2] + x) as usize];
    let cut = |ts: &[u64], ys: &[u64], xs: &[u64]| -> Vec<f32> {
        let mut v = Vec::new();
        for &t in ts {
            for &y in ys {
                for &x in xs {
                    v.push(at(t, y, x));
                }
            }
        }
        v
    };
    let every = |n: u64| (0..n).collect::<Vec<u64>>();
    let cases: [(&[&str], Vec<f32>, Option<&str>); 4] = [
        // Time 1..3: the stored frames of y chunk 0 are exactly these chunks.
        (
            &["--isel", "time=1:3"],
            cut(&[1, 2], &every(300), &every(256)),
            Some("2"),
        ),
        // y from 10: every output chunk straddles two stored chunks — decoded.
        (
            &["--isel", "y=10:"],
            cut(&every(4), &(10..300).collect::<Vec<_>>(), &every(256)),
            None,
        ),
        // A step along time: each output chunk is one stored chunk's shape, but not its place.
        (
            &["--isel", "time=1::2"],
            cut(&[1, 3], &every(300), &every(256)),
            None,
        ),
        // A step along x: never a stored frame.
        (
            &["--isel", "x=::2"],
            cut(
                &every(4),
                &every(300),
                &(0..256).step_by(2).collect::<Vec<_>>(),
            ),
            None,
        ),
    ];
    for (args, want, kept) in cases {
        let out = d.path().join("o.tet");
        let _ = std::fs::remove_file(&out);
        let o = convert(&store, &out, args);
        assert!(o.status.success(), "{args:?}: {o:?}");
        let f = TetFile::open(&out).unwrap();
        assert_eq!(f32s(&f, 0), want, "{args:?}");
        let p = last_params(&f);
        assert_eq!(
            p.get("zstd_frames_kept").map(String::as_str),
            kept,
            "{args:?}"
        );
        assert!(tet::format::verify::verify(&f, tet::format::verify::Depth::Deep).ok());
    }
}

/// A year of hourly values (`[8760, 4, 4]` f32, stored in chunks of one day) that records the
/// stored chunks each `read_region` of `v` touches.
struct Year {
    vars: Vec<tet_source::Variable>,
    touched: Arc<std::sync::Mutex<std::collections::BTreeSet<u64>>>,
}

const HOURS: u64 = 8760;

impl Year {
    fn new(touched: Arc<std::sync::Mutex<std::collections::BTreeSet<u64>>>) -> Year {
        use tet_source::{AttrValue, ElementType, Role, Variable};
        let mut time = Variable::new("time", ElementType::F64, vec![HOURS]);
        time.dims = Some(vec!["time".into()]);
        time.role = Role::Coordinate;
        time.attrs = vec![(
            "units".into(),
            AttrValue::Text("hours since 2001-01-01 00:00:00".into()),
        )];
        let mut v = Variable::new("v", ElementType::F32, vec![HOURS, 4, 4]);
        v.dims = Some(vec!["time".into(), "y".into(), "x".into()]);
        v.layout.chunk_shape = Some(vec![24, 4, 4]);
        v.layout.compressed = true;
        Year {
            vars: vec![time, v],
            touched,
        }
    }
}

impl tet_source::Source for Year {
    fn variables(&self) -> &[tet_source::Variable] {
        &self.vars
    }

    fn read_region(
        &self,
        var: usize,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> tet_source::Result<()> {
        let v = &self.vars[var];
        tet_source::check_region(&v.shape, start, count, v.dtype.size(), out.len())?;
        if var == 0 {
            for (i, o) in out.chunks_exact_mut(8).enumerate() {
                o.copy_from_slice(&((start[0] + i as u64) as f64).to_le_bytes());
            }
            return Ok(());
        }
        let last = start[0] + count[0] - 1;
        self.touched
            .lock()
            .unwrap()
            .extend(start[0] / 24..=last / 24);
        let per_hour = (count[1] * count[2]) as usize;
        for (i, o) in out.chunks_exact_mut(4).enumerate() {
            let hour = start[0] + (i / per_hour) as u64;
            o.copy_from_slice(&(hour as f32).to_le_bytes());
        }
        Ok(())
    }
}

/// `--sel` of one day out of a year stored in daily chunks reads that day's chunk and no other.
#[test]
fn a_day_out_of_a_year_reads_only_that_days_chunks() {
    let d = tempfile::tempdir().unwrap();
    let touched = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let opts = tet::pipeline::ConvertOptions::from(tet::settings::Settings {
        jobs: Some(2),
        sel: vec!["time=2001-03-05:2001-03-05".into()],
        ..Default::default()
    });
    let (source, _) = tet::select::apply(
        Box::new(Year::new(touched.clone())),
        &opts.settings.select(),
    )
    .unwrap();
    let input = d.path().join("year.bin");
    std::fs::write(&input, b"stand-in for the input's digest").unwrap();
    let out = d.path().join("day.tet");
    tet::pipeline::convert_source(
        tet::pipeline::Opened::new(source.as_ref(), "test", &input),
        &out,
        &opts,
    )
    .unwrap();
    // 1 March 2001 is day 59 (0-based) of a non-leap year: 5 March is day 63.
    assert_eq!(
        touched.lock().unwrap().iter().copied().collect::<Vec<_>>(),
        [63]
    );
    let f = TetFile::open(&out).unwrap();
    let i = f.datasets.iter().position(|x| x.name == "v").unwrap();
    assert_eq!(f.datasets[i].shape, [24, 4, 4]);
    let v = f32s(&f, i);
    assert_eq!(v[0], (63 * 24) as f32);
    assert_eq!(v[v.len() - 1], (63 * 24 + 23) as f32);
}

/// A `.tet` input cut again: its carried labels are cut with it.
#[cfg(feature = "netcdf")]
#[test]
fn a_tet_input_is_cut_with_its_carried_labels() {
    let d = tempfile::tempdir().unwrap();
    let first = d.path().join("all.tet");
    assert!(convert(&fixture("select.nc"), &first, &[]).status.success());
    let out = d.path().join("cut.tet");
    let o = convert(
        &first,
        &out,
        &[
            "--variables",
            "temp",
            "--isel",
            "lat=1:6:2",
            "--isel",
            "time=-2:",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let f = TetFile::open(&out).unwrap();
    let footer = f.footer().unwrap().unwrap();
    assert_eq!(footer.datasets["temp"].coords["lat"], ["20", "0", "-20"]);
    assert_eq!(
        footer.datasets["temp"].coords["time"],
        ["2000-01-10T12:00:00", "2000-01-10T18:00:00"]
    );
    assert_eq!(footer.history.len(), 2);
    let i = f.datasets.iter().position(|x| x.name == "temp").unwrap();
    assert_eq!(f.datasets[i].shape, [2, 3, 9]);
    // The values: those of the uncut .tet at the same positions.
    let all = TetFile::open(&first).unwrap();
    let j = all.datasets.iter().position(|x| x.name == "temp").unwrap();
    let whole = f32s(&all, j);
    let want: Vec<f32> = [38usize, 39]
        .iter()
        .flat_map(|&t| [1usize, 3, 5].map(move |y| (t, y)))
        .flat_map(|(t, y)| whole[(t * 7 + y) * 9..(t * 7 + y + 1) * 9].to_vec())
        .collect();
    assert_eq!(f32s(&f, i), want);
}

/// `--concat` of `.npy` files (no dimension names: `dim_0`, …; no coordinate: the given order),
/// cut as well: the rows of both files in order.
#[test]
fn npy_inputs_are_combined_in_the_given_order() {
    let d = tempfile::tempdir().unwrap();
    // A `.npy` holds one array named after the file: one name in two folders.
    for day in ["1", "2"] {
        std::fs::create_dir(d.path().join(day)).unwrap();
    }
    let (a, b) = (d.path().join("1/x.npy"), d.path().join("2/x.npy"));
    common::write_npy(&a, 3);
    let rows: Vec<f32> = (0..2 * 4096).map(|i| i as f32).collect();
    let data: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4096), }";
    std::fs::write(&b, common::npy_bytes(header, &data)).unwrap();
    let out = d.path().join("ab.tet");
    let args = ["--concat", "dim_0", "--isel", "dim_1=10:20"];
    let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .arg("-q")
        .args(args)
        .args([&a, &b, &out])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let f = TetFile::open(&out).unwrap();
    assert_eq!(f.datasets[0].shape, [5, 10]);
    let first = npy_values(&a);
    let want: Vec<f32> = (0..5)
        .flat_map(|r| {
            let src: &[f32] = if r < 3 {
                &first[r * 4096..(r + 1) * 4096]
            } else {
                &rows[(r - 3) * 4096..(r - 2) * 4096]
            };
            src[10..20].to_vec()
        })
        .collect();
    assert_eq!(f32s(&f, 0), want);
    let p = last_params(&f);
    assert_eq!(p["concat"], "dim_0");
    assert_eq!(p["isel"], "dim_1=10:20");

    // A third file with rows of another length: refused naming both files, nothing written.
    std::fs::create_dir(d.path().join("3")).unwrap();
    let c = d.path().join("3/x.npy");
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4095), }";
    std::fs::write(&c, common::npy_bytes(header, &vec![0u8; 2 * 4095 * 4])).unwrap();
    let bad = d.path().join("bad.tet");
    let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .args(["-q", "--concat", "dim_0"])
        .args([&a, &c, &bad])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    let both = format!("{} and {}", a.display(), c.display());
    assert!(err.contains(&both), "{err}");
    assert!(!bad.exists());
}

/// A real source with every `read_region` of variable `var` recorded as the days (chunks of 24
/// hours along the first axis) it touches.
#[cfg(feature = "netcdf")]
struct Counting {
    inner: Box<dyn tet_source::Source>,
    var: usize,
    touched: Arc<std::sync::Mutex<std::collections::BTreeSet<u64>>>,
}

#[cfg(feature = "netcdf")]
impl tet_source::Source for Counting {
    fn variables(&self) -> &[tet_source::Variable] {
        self.inner.variables()
    }

    fn read_region(
        &self,
        var: usize,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> tet_source::Result<()> {
        if var == self.var && count.iter().all(|&c| c > 0) {
            let last = start[0] + count[0] - 1;
            self.touched
                .lock()
                .unwrap()
                .extend(start[0] / 24..=last / 24);
        }
        self.inner.read_region(var, start, count, out)
    }

    fn parallel_reads(&self) -> bool {
        self.inner.parallel_reads()
    }
}

/// The same with a chunked netCDF-4 file written by xarray (fixtures/select/year.nc,
/// `make_year.py`: a year of hours in daily chunks): one day of `--sel` asks the netCDF reader
/// for that day's chunk and no other, and the values are that day's hours.
#[cfg(feature = "netcdf")]
#[test]
fn a_day_out_of_a_chunked_netcdf4_year_reads_only_that_days_chunk() {
    let d = tempfile::tempdir().unwrap();
    let path = fixture("year.nc");
    let opts = tet::pipeline::ConvertOptions::from(tet::settings::Settings {
        jobs: Some(2),
        sel: vec!["time=2001-03-05:2001-03-05".into()],
        ..Default::default()
    });
    let inner = tet::registry::identify(&path)
        .unwrap()
        .open(&path, &opts.settings.open())
        .unwrap();
    let var = inner
        .variables()
        .iter()
        .position(|v| v.name == "v")
        .unwrap();
    assert_eq!(
        inner.variables()[var].layout.chunk_shape,
        Some(vec![24, 3, 4])
    );
    let touched = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let counting = Counting {
        inner,
        var,
        touched: touched.clone(),
    };
    let (source, _) = tet::select::apply(Box::new(counting), &opts.settings.select()).unwrap();
    let out = d.path().join("day.tet");
    tet::pipeline::convert_source(
        tet::pipeline::Opened::new(source.as_ref(), "nc", &path),
        &out,
        &opts,
    )
    .unwrap();
    // 5 March 2001 is day 63 (0-based) of the 365.
    assert_eq!(
        touched.lock().unwrap().iter().copied().collect::<Vec<_>>(),
        [63]
    );
    let f = TetFile::open(&out).unwrap();
    let i = f.datasets.iter().position(|x| x.name == "v").unwrap();
    assert_eq!(f.datasets[i].shape, [24, 3, 4]);
    let want: Vec<f32> = (63 * 24..64 * 24).flat_map(|h| [h as f32; 12]).collect();
    assert_eq!(f32s(&f, i), want);
}
