//! PyTables' LZO filter (HDF5 filter 305), which libhdf5 reads only with PyTables' plugin:
//! `tests/fixtures/pytables_lzo.h5`, written by PyTables with liblzo2
//! (`tests/fixtures/make_lzo.py`), is decoded by this crate's direct chunk path (lzokay) and
//! compared value for value with what PyTables reads (`tests/fixtures/expect_lzo.json`):
//! CArrays and an EArray behind shuffle and fletcher32, chunks PyTables stored raw (the filter
//! skipped in their filter mask), a chunk never written, and a Table's columns.

use crate::common;

use common::{fixture, read_named, var};
use serde_json::Value;
use tet_hdf5::filters::lzo_decompress;
use tet_hdf5::open_path;
use tet_source::OpenOptions;
use tet_testkit::first_difference;

fn expect() -> Value {
    serde_json::from_slice(&std::fs::read(fixture("expect_lzo.json")).unwrap()).unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn pytables_lzo_datasets_read_as_pytables_reads_them() {
    let e = expect();
    let src = open_path(&fixture("pytables_lzo.h5"), &OpenOptions::default()).unwrap();
    // Every one decoded here: libhdf5 has no LZO plugin.
    assert_eq!(src.library_read_variables(), Vec::<&str>::new());
    let datasets = e["datasets"].as_object().unwrap();
    assert_eq!(datasets.len(), 6);
    for (name, d) in datasets {
        let v = var(&src, name);
        let shape: Vec<u64> = d["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(v.shape, shape, "{name}");
        let want = unhex(d["le_hex"].as_str().unwrap());
        let got = read_named(&src, name);
        if let Some(diff) = first_difference(&got, &want, v.dtype.size()) {
            panic!("{name}: {diff}");
        }
        assert!(
            v.layout.filters.iter().any(|f| f == "lzo"),
            "{name}: {:?}",
            v.layout.filters
        );
    }
    // The fixture holds what the test claims: LZO in every pipeline, fletcher32 in one.
    let filters = e["filters"].as_object().unwrap();
    assert!(filters
        .values()
        .all(|f| f.as_str().unwrap().contains("complib='lzo'")));
    assert!(filters["fletcher_i2"]
        .as_str()
        .unwrap()
        .contains("fletcher32=True"));
}

/// A damaged LZO chunk is a read error, never wrong values.
#[test]
fn damaged_lzo_chunks_are_errors() {
    // A literal-only LZO1X stream: 17 + n, n literals, the end-of-stream marker.
    let stream = |lits: &[u8]| {
        let mut s = vec![17 + lits.len() as u8];
        s.extend_from_slice(lits);
        s.extend_from_slice(&[0x11, 0, 0]);
        s
    };
    let ok = stream(b"hello lzo");
    assert_eq!(lzo_decompress(&ok, 100).unwrap(), b"hello lzo");
    // Past the chunk size.
    assert!(lzo_decompress(&ok, 5).is_err());
    // Truncated: no end marker.
    assert!(lzo_decompress(&ok[..ok.len() - 2], 100).is_err());
    // A trailing Adler-32 (PyTables built with CHECKSUM) is verified.
    let mut summed = ok.clone();
    summed.extend_from_slice(&adler32(b"hello lzo").to_le_bytes());
    assert_eq!(lzo_decompress(&summed, 100).unwrap(), b"hello lzo");
    let n = summed.len();
    summed[n - 1] ^= 1;
    assert!(lzo_decompress(&summed, 100).is_err());
    // Other trailing bytes.
    let mut junk = ok.clone();
    junk.extend_from_slice(&[1, 2]);
    assert!(lzo_decompress(&junk, 100).is_err());
}

/// Adler-32 (RFC 1950), written out for the test.
fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}
