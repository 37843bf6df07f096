//! Compressed sources at copy speed: a Zarr store whose chunks are zstd frames of exactly the
//! chunk's bytes keeps those frames in the `.tet` (`--codec auto`), byte for byte, where a
//! `.tet` chunk is one source chunk; edge chunks (padded in Zarr storage) are decoded and
//! encoded. Decoded values are the same as the decode/re-encode path's, and a damaged source
//! frame is caught — by the conversion, or by `tet verify --deep`, as each case says.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::json;
use tet::format::verify::{verify, Depth};
use tet::format::{Codec, TetFile};
use zarrs::array::codec::{BytesCodec, ZstdCodec};
use zarrs::array::{ArrayBuilder, ArrayBytes, BytesToBytesCodecTraits, FillValueMetadata};
use zarrs::filesystem::FilesystemStore;
use zarrs::group::GroupBuilder;

const SHAPE: [u64; 3] = [4, 300, 256];
const CHUNK: [u64; 3] = [1, 256, 256];

/// A Zarr v3 store at `root` holding f32 `t` (SHAPE, chunks CHUNK) with bytes + zstd, the zstd
/// frames carrying zstd's content checksum.
fn write_store(root: &Path) {
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
    for t in 0..SHAPE[0] {
        for j in 0..2u64 {
            let rows = if j == 0 { 256 } else { SHAPE[1] - 256 };
            let mut v = Vec::with_capacity((rows * 256 * 4) as usize);
            for r in 0..rows {
                for x in 0..256u64 {
                    let y = j * 256 + r;
                    let val = (t * 1000 + y) as f32 * 0.25 + ((x * 7 + y * 13) % 17) as f32;
                    v.extend(val.to_le_bytes());
                }
            }
            // Zarr stores edge chunks whole: pad the rows past the array's end.
            v.resize((256 * 256 * 4) as usize, 0);
            array
                .store_chunk(&[t, j, 0], ArrayBytes::new_flen(v))
                .unwrap();
        }
    }
}

fn convert(input: &Path, output: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .args(["-q", "--isolation", "none"])
        .args(extra)
        .arg(input)
        .arg(output)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap()
}

/// Every value of dataset 0, decoded.
fn values(f: &TetFile) -> Vec<u8> {
    let mut out = vec![0u8; (SHAPE.iter().product::<u64>() * 4) as usize];
    f.read_region(0, &[0, 0, 0], &SHAPE, &mut out).unwrap();
    out
}

#[test]
fn stored_zstd_frames_are_kept_byte_for_byte() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("s.zarr");
    write_store(&store);
    let out = d.path().join("auto.tet");
    let o = convert(&store, &out, &[]);
    assert!(o.status.success(), "{o:?}");
    let f = TetFile::open(&out).unwrap();
    assert_eq!(f.datasets[0].chunk_shape, CHUNK, "the source grid is kept");
    let mut kept = 0;
    for e in &f.entries {
        assert_eq!(e.codec(), Some(Codec::Zstd));
        let c = &e.coords;
        let file = store.join(format!("t/c/{}/{}/{}", c[0], c[1], c[2]));
        let source = std::fs::read(&file).unwrap();
        let stored = f.stored_bytes(e).unwrap();
        if c[1] == 0 {
            // An interior chunk: the source's frame, as it is.
            assert_eq!(stored, &source[..], "chunk {c:?}");
            kept += 1;
        } else {
            // An edge chunk: 44 rows, not the padded 256 of the store.
            assert_ne!(stored, &source[..]);
            assert_eq!(e.raw_byte_len, 44 * 256 * 4);
        }
    }
    assert_eq!(kept, 4);
    let history = &f.footer().unwrap().unwrap().history;
    assert_eq!(history.last().unwrap().params["zstd_frames_kept"], "4");
    assert!(verify(&f, Depth::Deep).ok());

    // The decode/re-encode path (an explicit level) gives the same values.
    let recoded = d.path().join("recoded.tet");
    assert!(convert(&store, &recoded, &["--codec", "zstd:3"])
        .status
        .success());
    let g = TetFile::open(&recoded).unwrap();
    assert!(!g.footer().unwrap().unwrap().history[0]
        .params
        .contains_key("zstd_frames_kept"));
    assert_eq!(values(&f), values(&g));
}

#[test]
fn a_damaged_source_frame_is_caught() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("s.zarr");
    write_store(&store);

    // A flipped byte inside a frame: the header still says "one frame of the chunk's size", so
    // the frame is kept without decoding and the conversion succeeds; `verify --deep` decodes
    // it and zstd's content checksum fails, naming the chunk.
    let chunk = store.join("t/c/2/0/0");
    let mut b = std::fs::read(&chunk).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0x10;
    std::fs::write(&chunk, &b).unwrap();
    let out = d.path().join("flipped.tet");
    let o = convert(&store, &out, &[]);
    assert!(o.status.success(), "kept without decoding: {o:?}");
    let v = verify(&TetFile::open(&out).unwrap(), Depth::Deep);
    assert!(!v.ok());
    assert!(
        v.failures.iter().any(|f| f.message.contains("[2, 0, 0]")),
        "{:?}",
        v.failures
    );

    // A cut frame: its size no longer matches, so it is decoded — and the conversion fails.
    b.truncate(mid);
    std::fs::write(&chunk, &b).unwrap();
    let out = d.path().join("cut.tet");
    let o = convert(&store, &out, &[]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("[2, 0, 0]"), "{err}");
    assert!(!out.exists());
}

/// HDF5 datasets whose only filter is zstd (hdf5plugin's, as h5py writes it) keep their stored
/// chunks too: every kept frame is found verbatim in the `.h5` file, the history counts them,
/// and the values equal the decode/re-encode path's.
#[cfg(feature = "hdf5")]
#[test]
fn hdf5_zstd_filter_chunks_are_kept() {
    let h5 =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("converters/hdf5/tests/fixtures/filters.h5");
    let file = std::fs::read(&h5).unwrap();
    let d = tempfile::tempdir().unwrap();
    let (auto, recoded) = (d.path().join("auto.tet"), d.path().join("recoded.tet"));
    // Filters without a decoder here (e.g. Blosc2 plugin codecs) are skipped in both runs alike.
    assert!(convert(&h5, &auto, &["--skip-unsupported"])
        .status
        .success());
    assert!(
        convert(&h5, &recoded, &["--skip-unsupported", "--codec", "zstd:3"])
            .status
            .success()
    );
    let (f, g) = (
        TetFile::open(&auto).unwrap(),
        TetFile::open(&recoded).unwrap(),
    );
    let found = |frame: &[u8]| file.windows(frame.len()).any(|w| w == frame);
    let mut kept = 0u64;
    for (i, ds) in f.datasets.iter().enumerate() {
        let zstd_only = ds.name.starts_with("zstd/level") || ds.name == "zstd/sparse";
        for e in f.entries.iter().filter(|e| e.dataset_id == i as u64) {
            if e.codec() == Some(Codec::Zstd) && found(&f.stored_bytes(e).unwrap()) {
                assert!(
                    zstd_only,
                    "{}: a frame of another pipeline was kept",
                    ds.name
                );
                kept += 1;
            }
        }
        // The same values whichever path each chunk took.
        let n = ds.shape.iter().product::<u64>() as usize * ds.dtype.size();
        let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
        let start = vec![0; ds.shape.len()];
        f.read_region(i, &start, &ds.shape, &mut a).unwrap();
        let j = g.dataset_id(&ds.name).unwrap();
        g.read_region(j, &start, &ds.shape, &mut b).unwrap();
        assert!(a == b, "{}", ds.name);
    }
    assert!(kept >= 4, "{kept} frames kept");
    let row = f.footer().unwrap().unwrap().history.last().unwrap().clone();
    assert_eq!(row.params["zstd_frames_kept"], kept.to_string());
    assert!(verify(&f, Depth::Deep).ok());
}

/// netCDF-4 variables with the zstd filter (32015, as netCDF-C 4.9+ writes it), read by the
/// netCDF importer: netCDF-C here has no zstd plugin, so they are read from their stored
/// chunks; whole chunks keep their frames byte for byte, edge chunks are decoded, never-written
/// chunks read as the variable's fill value, and every value equals netCDF4-python's
/// (`fixtures/netcdf_zstd/expect/*.le`, written by its make.py).
#[cfg(feature = "netcdf")]
#[test]
fn netcdf_zstd_filter_chunks_are_kept() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/netcdf_zstd");
    let nc = dir.join("zstd.nc");
    let file = std::fs::read(&nc).unwrap();
    let d = tempfile::tempdir().unwrap();
    let (auto, recoded) = (d.path().join("auto.tet"), d.path().join("recoded.tet"));
    let out = convert(&nc, &auto, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = convert(&nc, &recoded, &["--codec", "zstd:3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (f, g) = (
        TetFile::open(&auto).unwrap(),
        TetFile::open(&recoded).unwrap(),
    );
    let found = |frame: &[u8]| file.windows(frame.len()).any(|w| w == frame);
    let mut kept = 0u64;
    for name in ["t", "s", "partial", "nofill"] {
        let i = f
            .dataset_id(name)
            .unwrap_or_else(|| panic!("no dataset {name}"));
        let ds = &f.datasets[i];
        let n = ds.shape.iter().product::<u64>() as usize * ds.dtype.size();
        let start = vec![0; ds.shape.len()];
        let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
        f.read_region(i, &start, &ds.shape, &mut a).unwrap();
        let j = g.dataset_id(name).unwrap();
        g.read_region(j, &start, &ds.shape, &mut b).unwrap();
        let want = std::fs::read(dir.join("expect").join(format!("{name}.le"))).unwrap();
        assert!(a == want, "{name}: values differ from netCDF4-python's");
        assert!(
            b == want,
            "{name}: decode/re-encode differs from netCDF4-python's"
        );
        for e in f.entries.iter().filter(|e| e.dataset_id == i as u64) {
            if e.codec() == Some(Codec::Zstd) && found(&f.stored_bytes(e).unwrap()) {
                kept += 1;
            }
        }
    }
    // t: 3 planes x 2 whole chunks (the third, an edge, is decoded); s: 5; partial: the two
    // written planes; nofill: the one written plane.
    assert_eq!(kept, 6 + 5 + 2 + 1);
    let row = f.footer().unwrap().unwrap().history.last().unwrap().clone();
    assert_eq!(row.params["zstd_frames_kept"], kept.to_string());
    assert!(verify(&f, Depth::Deep).ok());
}

/// A zstd-filtered netCDF-4 variable that neither netCDF-C (no plugin) nor the stored-chunk
/// reader can take (more chunks than it tabulates) is an unsupported item naming the filter and
/// `HDF5_PLUGIN_PATH`; `--skip-unsupported` converts the rest.
#[cfg(feature = "netcdf")]
#[test]
fn an_unreadable_netcdf_filter_is_an_unsupported_item() {
    let nc = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/netcdf_zstd/many.nc");
    let d = tempfile::tempdir().unwrap();
    let out_path = d.path().join("many.tet");
    let out = convert(&nc, &out_path, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("unsupported: many: compressed with HDF5 filter 32015 (zstd(1))")
            && err.contains("HDF5_PLUGIN_PATH")
            && !err.contains("malformed"),
        "{err}"
    );
    assert!(!out_path.exists());
    let out = convert(&nc, &out_path, &["--skip-unsupported"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = TetFile::open(&out_path).unwrap();
    let names: Vec<&str> = f.datasets.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["ok"]);
    let mut got = vec![0u8; 4097 * 4];
    f.read_region(0, &[0], &[4097], &mut got).unwrap();
    let want: Vec<u8> = (0..4097i32).flat_map(|v| v.to_le_bytes()).collect();
    assert!(got == want);
}
