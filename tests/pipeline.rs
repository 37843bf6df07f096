//! The pipeline against a synthetic source: widening, coordinate labels (numbers, CF time,
//! importer labels), typed attributes, facts, string variables, skipped items, serial-read
//! sources, and failures that leave no output.

use std::sync::atomic::{AtomicUsize, Ordering};

use tet::format::verify::{verify, Depth};
use tet::format::TetFile;
use tet::pipeline::{convert_source, ConvertOptions, Opened};
use tet_source::{
    check_region, AttrValue, DimLabels, ElementType, Fact, Part, Result, Role, Skipped, Source,
    TextVariable, Variable,
};

/// Values are a function of the flat index, so any region can be produced and checked.
struct Synthetic {
    vars: Vec<Variable>,
    globals: Vec<(String, AttrValue)>,
    skipped: Vec<Skipped>,
    labels: Vec<DimLabels>,
    texts: Vec<TextVariable>,
    fail_on_var: Option<usize>,
    /// A read of this variable's chunk at this flat offset (region start) panics.
    panic_on: Option<(usize, u64)>,
    parallel: bool,
    concurrent: AtomicUsize,
    max_concurrent: AtomicUsize,
}

fn value_bytes(var: usize, t: ElementType, flat: u64) -> Vec<u8> {
    let v = flat as i64 * 7 + var as i64 - 50;
    match t {
        ElementType::I8 => vec![(v % 128) as i8 as u8],
        ElementType::Bool => vec![flat.is_multiple_of(3) as u8],
        ElementType::BF16 => ((v as f32).to_bits() >> 16).to_le_bytes()[..2].to_vec(),
        ElementType::F64 => (flat as f64).to_le_bytes().to_vec(),
        ElementType::I64 => v.to_le_bytes().to_vec(),
        ElementType::U16 => ((v as u64 % 65536) as u16).to_le_bytes().to_vec(),
        _ => unimplemented!(),
    }
}

impl Source for Synthetic {
    fn variables(&self) -> &[Variable] {
        &self.vars
    }
    fn global_attrs(&self) -> &[(String, AttrValue)] {
        &self.globals
    }
    fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }
    fn dim_labels(&self) -> &[DimLabels] {
        &self.labels
    }
    fn text_variables(&self) -> &[TextVariable] {
        &self.texts
    }
    fn parallel_reads(&self) -> bool {
        self.parallel
    }
    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let n = self.concurrent.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_concurrent.fetch_max(n, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_micros(200));
        let v = &self.vars[var];
        let r = (|| {
            check_region(&v.shape, start, count, v.dtype.size(), out.len())?;
            if self.fail_on_var == Some(var) {
                return Err(Part::Values.malformed("synthetic failure"));
            }
            if self.panic_on == Some((var, start[0])) {
                panic!("synthetic panic");
            }
            let total: u64 = count.iter().product();
            let mut o = 0;
            for k in 0..total {
                // C-order index inside the region → global flat index.
                let mut rem = k;
                let mut idx = vec![0u64; count.len()];
                for a in (0..count.len()).rev() {
                    idx[a] = rem % count[a] + start[a];
                    rem /= count[a];
                }
                let flat = idx
                    .iter()
                    .zip(&v.shape)
                    .fold(0u64, |acc, (&i, &s)| acc * s + i);
                let b = value_bytes(var, v.dtype, flat);
                out[o..o + b.len()].copy_from_slice(&b);
                o += b.len();
            }
            Ok(())
        })();
        self.concurrent.fetch_sub(1, Ordering::SeqCst);
        r
    }
}

fn source() -> Synthetic {
    let mut temp = Variable::new("grid/temp", ElementType::I8, vec![3, 40, 50]);
    temp.dims = Some(vec!["time".into(), "y".into(), "station".into()]);
    temp.attrs = vec![
        ("units".into(), AttrValue::Text("K".into())),
        ("valid_range".into(), AttrValue::I8(vec![-100, 100])),
    ];
    temp.facts = vec![Fact::EnumMapping(vec![("a".into(), 1)])];
    let mut time = Variable::new("time", ElementType::F64, vec![3]);
    time.dims = Some(vec!["time".into()]);
    time.role = Role::Coordinate;
    time.attrs = vec![
        (
            "units".into(),
            AttrValue::Text("days since 2000-02-28".into()),
        ),
        ("calendar".into(), AttrValue::Text("noleap".into())),
    ];
    let mut y = Variable::new("y", ElementType::I64, vec![40]);
    y.dims = Some(vec!["y".into()]);
    let mut flags = Variable::new("flags", ElementType::Bool, vec![10]);
    flags.dims = Some(vec!["station".into()]);
    let half = Variable::new("half", ElementType::BF16, vec![6]);
    Synthetic {
        vars: vec![temp, time, y, flags, half],
        globals: vec![("title".into(), AttrValue::Text("synthetic".into()))],
        skipped: vec![Skipped {
            name: "opaque".into(),
            reason: "opaque type".into(),
        }],
        labels: vec![DimLabels {
            dim: "station".into(),
            labels: (0..50).map(|i| format!("S{i:02}")).collect(),
        }],
        texts: vec![TextVariable {
            name: "names".into(),
            shape: vec![2],
            dims: None,
            values: vec!["alpha".into(), "beta".into()],
            attrs: vec![],
            char_axis: None,
            facts: Vec::new(),
        }],
        fail_on_var: None,
        panic_on: None,
        parallel: true,
        concurrent: AtomicUsize::new(0),
        max_concurrent: AtomicUsize::new(0),
    }
}

fn opts(jobs: usize) -> ConvertOptions {
    ConvertOptions::from(tet::settings::Settings {
        jobs: Some(jobs),
        codec: "zstd:1".parse().unwrap(),
        chunk_bytes: Some(1000),
        ..Default::default()
    })
}

#[test]
fn synthetic_source_maps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.bin");
    std::fs::write(&input, b"the input bytes").unwrap();
    let out = dir.path().join("o.tet");
    let src = source();
    let r = convert_source(Opened::new(&src, "syn", &input), &out, &opts(3)).unwrap();
    assert!(
        src.max_concurrent.load(Ordering::SeqCst) > 1,
        "reads never ran in parallel"
    );
    assert_eq!(r.datasets.len(), 5);
    assert!(r.skipped.iter().any(|s| s.name == "opaque"));
    assert!(r.skipped.iter().any(|s| s.name == "names"));

    let f = TetFile::open(&out).unwrap();
    assert!(verify(&f, Depth::Deep).ok());
    // Widened values.
    let temp = f.read_dataset(f.dataset_id("grid/temp").unwrap()).unwrap();
    assert_eq!(f.datasets[0].dtype.name(), "i16");
    for flat in [0u64, 1, 999, 5999] {
        let want = ((flat as i64 * 7 - 50) % 128) as i8 as i16;
        let got = i16::from_le_bytes([temp[flat as usize * 2], temp[flat as usize * 2 + 1]]);
        assert_eq!(got, want, "flat {flat}");
    }
    let half = f.read_dataset(f.dataset_id("half").unwrap()).unwrap();
    let got: Vec<f32> = half
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, vec![-46.0, -39.0, -32.0, -25.0, -18.0, -11.0]);
    let flags = f.read_dataset(f.dataset_id("flags").unwrap()).unwrap();
    assert_eq!(flags, vec![1, 0, 0, 1, 0, 0, 1, 0, 0, 1]);

    let meta = f.footer().unwrap().unwrap();
    let t = &meta.datasets["grid/temp"];
    // CF time in the noleap calendar: 2000-02-28 + 1 day = 2000-03-01.
    assert_eq!(
        t.coords["time"],
        [
            "2000-02-28T00:00:00",
            "2000-03-01T00:00:00",
            "2000-03-02T00:00:00"
        ]
    );
    assert_eq!(t.coords["y"][39], "225"); // y (variable 2): 39 * 7 + 2 - 50
    assert_eq!(t.coords["station"][49], "S49");
    assert_eq!(t.ext.to_json_map()["widened"], "i8 -> i16");
    assert_eq!(t.ext.to_json_map()["source_facts"][0][0], "enum_mapping");
    assert_eq!(
        t.ext.to_json_map()["source_facts"][0][1],
        serde_json::json!({"text_list": ["a=1"]})
    );
    assert_eq!(
        t.attrs[1],
        ("valid_range".to_string(), AttrValue::I8(vec![-100, 100]))
    );
    assert_eq!(
        meta.datasets["time"].ext.to_json_map()["role"],
        "coordinate"
    );
    assert_eq!(
        meta.datasets["flags"].ext.to_json_map()["widened"],
        "bool -> u8"
    );
    assert_eq!(
        meta.ext.to_json_map()["text_variables"][0]["values"][1],
        "beta"
    );
    assert_eq!(meta.global_attrs[0].0, "title");
    assert!(meta.skipped.iter().any(|s| s.name == "opaque"));

    // The same bytes from one job.
    let out1 = dir.path().join("o1.tet");
    convert_source(Opened::new(&source(), "syn", &input), &out1, &opts(1)).unwrap();
    let strip = |p: &std::path::Path| std::fs::read(p).unwrap();
    // Only the timestamp may differ between runs without SOURCE_DATE_EPOCH: compare the data.
    let a = strip(&out);
    let b = strip(&out1);
    let fa = TetFile::from_bytes(a).unwrap();
    let fb = TetFile::from_bytes(b).unwrap();
    for i in 0..fa.datasets.len() {
        assert_eq!(fa.read_dataset(i).unwrap(), fb.read_dataset(i).unwrap());
    }
}

#[test]
fn serial_sources_are_read_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.bin");
    std::fs::write(&input, b"x").unwrap();
    let mut src = source();
    src.parallel = false;
    convert_source(
        Opened::new(&src, "syn", &input),
        &dir.path().join("o.tet"),
        &opts(4),
    )
    .unwrap();
    assert_eq!(src.max_concurrent.load(Ordering::SeqCst), 1);
}

#[test]
fn a_failing_read_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.bin");
    std::fs::write(&input, b"x").unwrap();
    for (var, needle) in [
        (2, "dataset 'y' (coordinate labels)"),
        (4, "dataset 'half' chunk ["),
    ] {
        let mut src = source();
        src.fail_on_var = Some(var);
        let out = dir.path().join("o.tet");
        let e = convert_source(Opened::new(&src, "syn", &input), &out, &opts(2)).unwrap_err();
        assert!(e.to_string().contains(needle), "{e}");
        assert!(e.to_string().contains("synthetic failure"), "{e}");
        assert!(!out.exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "only the input remains"
        );
    }
}

/// A panic in an importer's read (a bug) fails the conversion with the chunk named, at any
/// number of jobs, and leaves no output; before, the write stage waited forever for the chunk
/// the panicking worker had claimed (a hang, seen in tests/sparse.rs).
#[test]
fn a_panicking_read_fails_the_conversion_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.bin");
    std::fs::write(&input, b"x").unwrap();
    for jobs in [1, 2, 4] {
        let out = dir.path().join("o.tet");
        let (tx, rx) = std::sync::mpsc::channel();
        let (i, o) = (input.clone(), out.clone());
        std::thread::spawn(move || {
            let mut src = source();
            // `grid/temp` (3 x 40 x 50 i8, 1000-byte chunks): a chunk of the second time step.
            src.panic_on = Some((0, 1));
            let r = convert_source(Opened::new(&src, "syn", &i), &o, &opts(jobs));
            let _ = tx.send(r.map(|_| ()).map_err(|e| e.to_string()));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("the conversion ended (it hung when a worker panicked)");
        let e = r.unwrap_err();
        assert!(e.contains("dataset 'grid/temp' chunk [1,"), "{e}");
        assert!(e.contains("internal error (panic): synthetic panic"), "{e}");
        assert!(!out.exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "{jobs} jobs"
        );
    }
}
