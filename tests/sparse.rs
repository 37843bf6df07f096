//! Sparse and fill-only data: a netCDF-4 variable that was never written (no chunk allocated,
//! every value the fill value) converts by default (`--codec auto`) to a few hundred KiB, not
//! to its 4 GiB of fill values, and decodes to the same values. The rule: under `auto`, a chunk of
//! one repeated value is stored as zstd even when the dataset is otherwise stored raw.
#![cfg(feature = "netcdf")]

use std::path::Path;
use std::process::Command;

use tet::format::{Codec, TetFile};

/// netCDF's default fill value for double (NC_FILL_DOUBLE); NC_FILL_FLOAT is the same number
/// rounded to f32.
const NC_FILL_DOUBLE: f64 = 9.969_209_968_386_869e36;

/// A netCDF-4 file from CDL, written by netCDF-C's own `ncgen`.
fn ncgen(cdl: &str, out: &Path) {
    let src = out.with_extension("cdl");
    std::fs::write(&src, cdl).unwrap();
    let o = Command::new("ncgen")
        .arg("-4")
        .arg("-o")
        .arg(out)
        .arg(&src)
        .output()
        .expect("ncgen (netcdf-bin, installed by .ci/setup)");
    assert!(o.status.success(), "{o:?}");
}

/// Every stored value of dataset `name` is `want` (checked chunk by chunk).
fn all_equal(f: &TetFile, name: &str, want: &[u8]) -> u64 {
    let ds = f.dataset_id(name).unwrap() as u64;
    let mut n = 0;
    let mut buf = Vec::new();
    for e in f.entries.iter().filter(|e| e.dataset_id == ds) {
        buf.resize(e.raw_byte_len as usize, 0);
        f.read_chunk_into(e, &mut buf).unwrap();
        assert!(!buf.is_empty() && buf.len().is_multiple_of(want.len()));
        assert_eq!(&buf[..want.len()], want, "{name}");
        // Equal to itself shifted by one element: every element equals the first.
        assert!(buf[want.len()..] == buf[..buf.len() - want.len()], "{name}");
        n += (buf.len() / want.len()) as u64;
    }
    n
}

#[test]
fn a_never_written_4_gib_variable_converts_to_under_1_mib() {
    let d = tempfile::tempdir().unwrap();
    let nc = d.path().join("fill.nc");
    ncgen(
        "netcdf fill {\ndimensions:\n  t = 1024 ;\n  y = 1024 ;\n  x = 1024 ;\nvariables:\n  \
         float v(t, y, x) ;\n    v:_FillValue = -999.f ;\n    v:_ChunkSizes = 1, 1024, 1024 ;\n  \
         double t(t) ;\n  short s(t, y) ;\n}\n",
        &nc,
    );
    assert!(std::fs::metadata(&nc).unwrap().len() < 64 * 1024);
    let out = d.path().join("fill.tet");
    let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .arg("-q")
        .arg(&nc)
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let size = std::fs::metadata(&out).unwrap().len();
    assert!(size < 1 << 20, "{size} bytes");

    let f = TetFile::open(&out).unwrap();
    // The explicit fill value, and netCDF's default fills for double and short.
    assert_eq!(all_equal(&f, "v", &(-999f32).to_le_bytes()), 1 << 30);
    assert_eq!(all_equal(&f, "t", &NC_FILL_DOUBLE.to_le_bytes()), 1024);
    assert_eq!(all_equal(&f, "s", &(-32767i16).to_le_bytes()), 1 << 20);
    let v = f.dataset_id("v").unwrap() as u64;
    assert!(f
        .entries
        .iter()
        .filter(|e| e.dataset_id == v)
        .all(|e| e.codec() == Some(Codec::Zstd)));
}

/// `--codec raw` is taken at its word (every byte written), and data that is not one repeated
/// value stays raw under `auto`.
#[test]
fn only_constant_chunks_change_codec_and_only_under_auto() {
    let d = tempfile::tempdir().unwrap();
    let nc = d.path().join("mixed.nc");
    let values: Vec<String> = (0..64).map(|i| i.to_string()).collect();
    ncgen(
        &format!(
            "netcdf mixed {{\ndimensions:\n  y = 64 ;\n  x = 4096 ;\nvariables:\n  \
             float empty(y, x) ;\n  int ramp(y) ;\ndata:\n  ramp = {} ;\n}}\n",
            values.join(", ")
        ),
        &nc,
    );
    let convert = |codec: &str| {
        let out = d.path().join(format!("{codec}.tet"));
        let o = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
            .args(["-q", "--chunk-bytes", "64KiB", "--codec", codec])
            .arg(&nc)
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        TetFile::open(&out).unwrap()
    };
    let codecs = |f: &TetFile, name: &str| -> Vec<Option<Codec>> {
        let ds = f.dataset_id(name).unwrap() as u64;
        f.entries
            .iter()
            .filter(|e| e.dataset_id == ds)
            .map(|e| e.codec())
            .collect()
    };
    let auto = convert("auto");
    assert!(codecs(&auto, "empty")
        .iter()
        .all(|c| *c == Some(Codec::Zstd)));
    assert_eq!(codecs(&auto, "ramp"), [Some(Codec::Raw)]);
    assert_eq!(
        all_equal(&auto, "empty", &(NC_FILL_DOUBLE as f32).to_le_bytes()),
        64 * 4096
    );
    let raw = convert("raw");
    assert!(codecs(&raw, "empty").iter().all(|c| *c == Some(Codec::Raw)));
    assert_eq!(
        all_equal(&raw, "empty", &(NC_FILL_DOUBLE as f32).to_le_bytes()),
        64 * 4096
    );
}
