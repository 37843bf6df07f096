//! How dtypes, members and file facts map to variables, skips, attributes and notes.

use crate::common;

use std::path::Path;

use common::{npy_bytes, npz_bytes};
use tet_npy::{open_npy_bytes, open_npz_bytes, NpyImporter, NpySource, NpzImporter};
use tet_source::{AttrValue, Confidence, ElementType, Importer, OpenOptions, Source, SourceError};
use tet_testkit::{find, read_all};

fn skip() -> OpenOptions {
    OpenOptions {
        skip_unsupported: true,
        ..OpenOptions::default()
    }
}

fn names(s: &NpySource) -> Vec<&str> {
    s.variables().iter().map(|v| v.name.as_str()).collect()
}

fn attr<'a>(s: &'a NpySource, var: usize, key: &str) -> Option<&'a AttrValue> {
    find(&s.variables()[var].attrs, key)
}

fn read(s: &NpySource, var: usize) -> Vec<u8> {
    read_all(s, var)
}

#[test]
fn nested_records_sub_arrays_complex_and_datetime() {
    let descr = "[('id', '<u2'), ('pos', [('x', '>f4'), ('y', '<f4')]), ('v', '<i2', (3,)), \
                 ('z', '>c8'), ('t', '<M8[s]'), ('dt', '>m8[ms]'), ('', '|V2'), (('Title', 'ok'), '|b1')]";
    let rec = 2 + 8 + 6 + 8 + 8 + 8 + 2 + 1;
    let mut data = Vec::new();
    for r in 0..2u8 {
        data.extend_from_slice(&[r, 0]); // id
        data.extend_from_slice(&1.5f32.to_be_bytes()); // pos/x
        data.extend_from_slice(&2.5f32.to_le_bytes()); // pos/y
        for k in 0..3i16 {
            data.extend_from_slice(&(k - 1).to_le_bytes()); // v
        }
        data.extend_from_slice(&3.0f32.to_be_bytes()); // z real
        data.extend_from_slice(&(-4.0f32).to_be_bytes()); // z imag
        data.extend_from_slice(&86_400i64.to_le_bytes()); // t
        data.extend_from_slice(&(-5i64).to_be_bytes()); // dt
        data.extend_from_slice(&[0xEE, 0xEE]); // padding
        data.push(r); // ok
    }
    assert_eq!(data.len(), 2 * rec);
    let s = open_npy_bytes(
        "rec",
        npy_bytes(1, descr, false, &[2], &data),
        &OpenOptions::default(),
    )
    .unwrap();
    assert_eq!(
        names(&s),
        [
            "rec/id",
            "rec/pos/x",
            "rec/pos/y",
            "rec/v",
            "rec/z",
            "rec/t",
            "rec/dt",
            "rec/ok"
        ]
    );
    let v = s.variables();
    assert_eq!(v[3].shape, vec![2, 3]);
    assert_eq!(v[3].dtype, ElementType::I16);
    assert!(v[3].notes.iter().any(|n| n.contains("trailing axes")));
    assert!(v[0].notes.iter().any(|n| n.contains("record")));
    assert_eq!(
        read(&s, 1),
        [1.5f32.to_le_bytes(), 1.5f32.to_le_bytes()].concat()
    );
    assert_eq!(
        read(&s, 3),
        [-1i16, 0, 1, -1, 0, 1]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<_>>()
    );
    // The big-endian complex field is one c64 variable: (real, imaginary) little-endian pairs,
    // each part swapped on its own; no attributes or notes about complex numbers.
    assert_eq!(v[4].dtype, ElementType::C64);
    assert_eq!(v[4].shape, vec![2]);
    assert_eq!(
        read(&s, 4),
        [3.0f32.to_le_bytes(), (-4.0f32).to_le_bytes()]
            .concat()
            .repeat(2)
    );
    assert!(v[4].attrs.is_empty());
    assert!(v[4].notes.iter().all(|n| !n.contains("complex")));
    assert_eq!(v[4].facts, []);
    assert_eq!(v[5].dtype, ElementType::I64);
    assert_eq!(
        attr(&s, 5, "units"),
        Some(&AttrValue::Text("seconds since 1970-01-01".into()))
    );
    assert_eq!(
        attr(&s, 6, "units"),
        Some(&AttrValue::Text("milliseconds".into()))
    );
    assert_eq!(read(&s, 6), [(-5i64).to_le_bytes(); 2].concat());
    assert_eq!(v[7].dtype, ElementType::Bool);
    assert_eq!(read(&s, 7), [0, 1]);
}

#[test]
fn unsupported_fields_fail_or_are_skipped() {
    let descr = "[('a', '<f4'), ('raw', '|V3'), ('q', '<f16')]";
    let data = vec![0u8; 2 * (4 + 3 + 16)];
    let file = npy_bytes(1, descr, false, &[2], &data);
    match open_npy_bytes("r", file.clone(), &OpenOptions::default()) {
        Err(SourceError::Unsupported { detail: m, .. }) => assert!(m.contains("r/q"), "{m}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // Raw void is u8 with a trailing byte axis (issue 23); float128 has no form.
    let s = open_npy_bytes("r", file, &skip()).unwrap();
    assert_eq!(names(&s), ["r/a", "r/raw"]);
    assert_eq!(s.variables()[1].shape, [2, 3]);
    let skipped: Vec<&str> = s.skipped().iter().map(|k| k.name.as_str()).collect();
    assert_eq!(skipped, ["r/q"]);
    assert!(s.skipped()[0].reason.contains("extended-precision"));

    // A unicode value holding a surrogate code point has no exact UTF-8 form.
    let mut data = vec![0u8; 2 * 8];
    data[..4].copy_from_slice(&0x41u32.to_le_bytes());
    data[8..12].copy_from_slice(&0xd800u32.to_le_bytes());
    let file = npy_bytes(1, "'<U2'", false, &[2], &data);
    match open_npy_bytes("u", file.clone(), &OpenOptions::default()) {
        Err(SourceError::Unsupported { detail: m, .. }) => {
            assert!(m.contains("'u'") && m.contains("0xd800"), "{m}")
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    let s = open_npy_bytes("u", file, &skip()).unwrap();
    assert!(s.text_variables().is_empty());
    assert_eq!(s.skipped()[0].name, "u");

    // String arrays over the footer's text budget (bytes, or values) are refused, naming them.
    let data = vec![b'x'; (tet_npy::MAX_TEXT_BYTES + (1 << 20)) as usize];
    let file = npy_bytes(1, "'|S1048576'", false, &[65], &data);
    match open_npy_bytes("big", file, &OpenOptions::default()) {
        Err(SourceError::Unsupported { detail: m, .. }) => {
            assert!(m.contains("'big'") && m.contains("64 MiB"), "{m}")
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    let n = tet_npy::MAX_TEXT_VALUES + 1;
    let file = npy_bytes(1, "'|S1'", false, &[n], &data[..n as usize]);
    match open_npy_bytes("many", file, &skip()) {
        Ok(s) => {
            assert_eq!(s.skipped()[0].name, "many");
            assert!(
                s.skipped()[0].reason.contains("16777217 values"),
                "{:?}",
                s.skipped()
            );
        }
        other => panic!("expected a skipped item, got {other:?}"),
    }

    // A whole object array.
    let file = npy_bytes(1, "'|O'", false, &[2], b"\x80\x02pickle");
    assert!(matches!(
        open_npy_bytes("o", file.clone(), &OpenOptions::default()),
        Err(SourceError::Unsupported { .. })
    ));
    let s = open_npy_bytes("o", file, &skip()).unwrap();
    assert!(s.variables().is_empty());
    assert_eq!(s.skipped()[0].name, "o");
}

#[test]
fn scalars_trailing_bytes_and_python2_headers() {
    let s = open_npy_bytes(
        "s",
        npy_bytes(1, "'<i8'", false, &[], &[1, 0, 0, 0, 0, 0, 0, 0, 9, 9]),
        &OpenOptions::default(),
    )
    .unwrap();
    // A 0-d array is a 0-d variable (the engine notes how it stores it, not the importer).
    let v = &s.variables()[0];
    assert_eq!(v.shape, Vec::<u64>::new());
    assert!(v.notes.iter().all(|n| !n.contains("0-d")));
    assert!(v.notes.iter().any(|n| n.contains("2 bytes after")));
    assert_eq!(read(&s, 0), 1i64.to_le_bytes());

    // numpy under Python 2 wrote `3L`.
    let mut f = b"\x93NUMPY\x01\x00".to_vec();
    let h = b"{'descr': '<u2', 'fortran_order': False, 'shape': (3L,), }\n";
    f.extend_from_slice(&(h.len() as u16).to_le_bytes());
    f.extend_from_slice(h);
    f.extend_from_slice(&[1, 0, 2, 0, 3, 0]);
    let s = open_npy_bytes("p2", f, &OpenOptions::default()).unwrap();
    assert_eq!(s.variables()[0].shape, vec![3]);

    // Empty arrays.
    let s = open_npy_bytes(
        "e",
        npy_bytes(1, "'<f4'", true, &[3, 0, 2], &[]),
        &OpenOptions::default(),
    )
    .unwrap();
    assert_eq!(s.variables()[0].shape, vec![3, 0, 2]);
    s.read_region(0, &[0, 0, 0], &[3, 0, 2], &mut []).unwrap();
    assert_eq!(s.contiguous_bytes(0).map(<[u8]>::len).unwrap_or(0), 0);
}

#[test]
fn truncated_npy_message() {
    let f = npy_bytes(1, "'<f8'", false, &[1000], &vec![0u8; 6999]);
    let e = open_npy_bytes("t", f, &OpenOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "truncated .npy: header declares 1000 f64 (8000 bytes) but only 6999 data bytes follow"
    );
    let f = npy_bytes(1, "[('a', '<f8'), ('b', '|i1')]", false, &[4], &[0; 10]);
    let e = open_npy_bytes("t", f, &OpenOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("4 records of 9 bytes (36 bytes)"),
        "{e}"
    );
}

#[test]
fn npz_members() {
    let a = npy_bytes(1, "'<i4'", false, &[2], &[1, 0, 0, 0, 2, 0, 0, 0]);
    let b = npy_bytes(1, "'>u2'", false, &[1], &[1, 2]);
    let z = npz_bytes(&[
        ("a.npy", &a, false),
        ("group/sub/b.npy", &b, true),
        ("readme.txt", b"hi", true),
    ]);
    let s = open_npz_bytes(z, &OpenOptions::default()).unwrap();
    assert_eq!(names(&s), ["a", "group/sub/b"]);
    assert_eq!(s.skipped().len(), 1);
    assert_eq!(s.skipped()[0].name, "readme.txt");
    assert!(!s.variables()[0].layout.compressed);
    assert!(s.variables()[1].layout.compressed);
    assert_eq!(s.variables()[1].layout.filters, ["deflate"]);
    assert_eq!(s.variables()[1].layout.chunk_shape, None);
    assert_eq!(read(&s, 1), [2, 1]);

    // A record field colliding with a member name.
    let r = npy_bytes(1, "[('b', '<f4')]", false, &[1], &[0; 4]);
    let z = npz_bytes(&[("a.npy", &r, false), ("a/b.npy", &b, false)]);
    assert!(open_npz_bytes(z.clone(), &OpenOptions::default()).is_err());
    let s = open_npz_bytes(z, &skip()).unwrap();
    assert_eq!(names(&s), ["a/b"]);
    assert_eq!(s.skipped()[0].name, "a/b");
}

#[test]
fn npz_corruption() {
    let data: Vec<u8> = (0..800u32).map(|i| (i * 7) as u8).collect();
    let a = npy_bytes(1, "'<f8'", false, &[100], &data);
    for deflate in [false, true] {
        let mut z = npz_bytes(&[("a.npy", &a, deflate)]);
        let (start, len) = {
            let mut ar = zip::ZipArchive::new(std::io::Cursor::new(&z[..])).unwrap();
            let f = ar.by_index_raw(0).unwrap();
            (
                f.data_start().unwrap() as usize,
                f.compressed_size() as usize,
            )
        };
        // Flip a byte of the member's data (stored: the last data byte; deflated: mid-stream).
        let pos = if deflate {
            start + len / 2
        } else {
            start + len - 1
        };
        z[pos] ^= 0x40;
        let s = open_npz_bytes(z, &OpenOptions::default()).unwrap();
        let mut out = vec![0u8; 800];
        let r = s.read_region(0, &[0], &[100], &mut out);
        assert!(r.is_err(), "deflate={deflate}: corrupt member read fine");
        assert!(s.contiguous_bytes(0).is_none());
    }
    // A stored member cut short inside a valid-looking archive.
    let full = npy_bytes(1, "'<f8'", false, &[100], &data);
    let z = npz_bytes(&[("a.npy", &full[..full.len() - 8], false)]);
    let e = open_npz_bytes(z, &OpenOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("truncated .npy member 'a.npy'"),
        "{e}"
    );
}

#[test]
fn identify_and_open_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("temperature.npy");
    std::fs::write(&npy, npy_bytes(1, "'<f4'", false, &[2], &[0; 8])).unwrap();
    let head = std::fs::read(&npy).unwrap();
    assert_eq!(NpyImporter.identify(&npy, &head), Confidence::Magic);
    assert_eq!(
        NpyImporter.identify(Path::new("x.dat"), &head),
        Confidence::Magic
    );
    assert_eq!(
        NpyImporter.identify(Path::new("x.NPY"), b"junk"),
        Confidence::Extension
    );
    assert_eq!(
        NpyImporter.identify(Path::new("x.dat"), b"junk"),
        Confidence::No
    );
    assert_eq!(NpzImporter.identify(&npy, &head), Confidence::No);
    let s = NpyImporter.open(&npy, &OpenOptions::default()).unwrap();
    assert_eq!(s.variables()[0].name, "temperature");

    let z = npz_bytes(&[("a.npy", &head, false)]);
    assert_eq!(
        NpzImporter.identify(Path::new("x.zip"), &z),
        Confidence::Magic
    );
    assert_eq!(NpyImporter.identify(Path::new("x.zip"), &z), Confidence::No);
    let other = npz_bytes(&[("a.txt", b"x", false)]);
    assert_eq!(
        NpzImporter.identify(Path::new("x.zip"), &other),
        Confidence::No
    );
    assert_eq!(
        NpzImporter.identify(Path::new("x.npz"), &other),
        Confidence::Magic
    );
    assert_eq!(
        NpzImporter.identify(Path::new("x.npz"), b""),
        Confidence::Extension
    );
    let npz = dir.path().join("bundle.npz");
    std::fs::write(&npz, &z).unwrap();
    let s = NpzImporter.open(&npz, &OpenOptions::default()).unwrap();
    assert_eq!(s.variables()[0].name, "a");

    // Importers and sources are usable across threads.
    fn send_sync<T: Send + Sync>() {}
    send_sync::<NpySource>();
    send_sync::<NpyImporter>();
    send_sync::<NpzImporter>();
}
