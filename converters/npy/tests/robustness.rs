//! Damaged inputs: every truncation and random byte flips of corpus files, and hostile headers,
//! must give `Ok` or `Err`, never a panic (tests run with overflow checks on).

use crate::common;

use common::{npy_bytes, npz_bytes};
use tet_npy::{open_npy_bytes, open_npz_bytes, NpySource};
use tet_source::{OpenOptions, Source, SourceError};
use tet_testkit::{corpus_dir, XorShift};

fn corpus(name: &str) -> Vec<u8> {
    std::fs::read(corpus_dir("npy").join(name)).unwrap()
}

/// Reads every variable whole (when it is small enough) and lends it; errors are fine.
fn exercise(src: &NpySource) {
    for (i, v) in src.variables().iter().enumerate() {
        let _ = src.contiguous_bytes(i);
        let Some(len) = v.byte_len() else { continue };
        if len > 1 << 24 {
            continue;
        }
        let mut out = vec![0u8; len as usize];
        let start = vec![0; v.shape.len()];
        let _ = src.read_region(i, &start, &v.shape, &mut out);
        // A bad request is refused, not a panic: a region past the end, or (a 0-d variable
        // has no end to go past) of the wrong rank.
        let mut one = vec![0u8; v.dtype.size()];
        let past: Vec<u64> = if v.shape.is_empty() {
            vec![0]
        } else {
            v.shape.clone()
        };
        assert!(src
            .read_region(i, &past, &vec![1; past.len()], &mut one)
            .is_err());
    }
    assert!(src
        .read_region(src.variables().len(), &[0], &[1], &mut [0u8; 8])
        .is_err());
}

fn try_open(npz: bool, bytes: &[u8], skip: bool) -> Result<NpySource, SourceError> {
    let opts = OpenOptions {
        skip_unsupported: skip,
        ..OpenOptions::default()
    };
    if npz {
        open_npz_bytes(bytes, &opts)
    } else {
        open_npy_bytes("x", bytes, &opts)
    }
}

const FILES: &[&str] = &[
    "dtype_f64.npy",
    "big_endian_i32.npy",
    "fortran_order_f64.npy",
    "scalar_0d.npy",
    "structured_record.npy",
    "dtype_c64.npy",
    "rank8.npy",
    "arrays_savez.npz",
    "arrays_compressed.npz",
];

#[test]
fn every_truncation() {
    for f in FILES {
        let bytes = corpus(f);
        let npz = f.ends_with(".npz");
        for len in 0..bytes.len() {
            if let Ok(src) = try_open(npz, &bytes[..len], false) {
                exercise(&src);
            }
        }
        if !npz {
            // A truncated .npy is always refused (the data is at the end).
            for len in 0..bytes.len() {
                assert!(
                    try_open(false, &bytes[..len], false).is_err(),
                    "{f} @ {len}"
                );
            }
        }
    }
}

#[test]
fn random_byte_flips() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for f in FILES {
        let bytes = corpus(f);
        let npz = f.ends_with(".npz");
        let rounds = if npz { 1500 } else { 3000 };
        for _ in 0..rounds {
            // Aim at the header/zip structures more often than at the data.
            let (b, _) = rng.damage(&bytes, 160);
            for skip in [false, true] {
                if let Ok(src) = try_open(npz, &b, skip) {
                    exercise(&src);
                }
            }
        }
    }
}

#[test]
fn hostile_headers() {
    let hostile = [
        // Shape products that overflow, with and without a zero.
        npy_bytes(1, "'<f8'", false, &[u64::MAX, 2], &[]),
        npy_bytes(1, "'<f8'", false, &[0, u64::MAX, u64::MAX], &[]),
        npy_bytes(1, "'<f8'", false, &[1 << 62], &[]),
        npy_bytes(1, "'<f8'", true, &[1 << 40, 1 << 40], &[0; 64]),
        // Sub-array sizes that overflow, or are huge on an empty array.
        npy_bytes(
            1,
            "[('a', '<f8', (4294967296, 4294967296))]",
            false,
            &[1],
            &[],
        ),
        npy_bytes(1, "[('a', '<f8', (1099511627776,))]", false, &[0], &[]),
        npy_bytes(1, "[('a', '<f8', (0,))]", false, &[1 << 62], &[]),
        npy_bytes(1, "[]", false, &[u64::MAX], &[]),
        // Types without a numeric form.
        npy_bytes(1, "'|O'", false, &[3], &[0; 24]),
        npy_bytes(1, "'<U5'", false, &[3], &[0; 60]),
        npy_bytes(1, "'|S5'", false, &[3], &[0; 15]),
        npy_bytes(1, "'|V8'", false, &[3], &[0; 24]),
        npy_bytes(1, "'<f16'", false, &[3], &[0; 48]),
        npy_bytes(1, "'<M8'", false, &[3], &[0; 24]),
        npy_bytes(1, "'<q8'", false, &[3], &[0; 24]),
        npy_bytes(1, "[('a', '<f8'), ('b', '|O')]", false, &[3], &[0; 48]),
        // Malformed dicts.
        npy_bytes(1, "'<f8', 'shape': (1,)", false, &[1], &[0; 8]),
        npy_bytes(1, "[(1, 2)]", false, &[1], &[0; 8]),
        npy_bytes(1, "[('a',)]", false, &[1], &[0; 8]),
        npy_bytes(1, "[('a', '<f8', (-1,))]", false, &[1], &[0; 8]),
    ];
    for b in &hostile {
        for skip in [false, true] {
            if let Ok(src) = try_open(false, b, skip) {
                exercise(&src);
            }
        }
    }
    // A version-2 header claiming 4 GiB of header text.
    let mut b = b"\x93NUMPY\x02\x00\xff\xff\xff\xff{".to_vec();
    b.extend_from_slice(&[b' '; 100]);
    assert!(try_open(false, &b, false).is_err());
    // Deep nesting.
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    let b = npy_bytes(2, &deep, false, &[1], &[0; 8]);
    assert!(try_open(false, &b, true).is_err());
    // Unknown version.
    let mut b = npy_bytes(1, "'<f8'", false, &[1], &[0; 8]);
    b[6] = 4;
    assert!(matches!(
        try_open(false, &b, false),
        Err(SourceError::Unsupported { .. })
    ));
    // A deflated member whose zip headers claim 4 GiB uncompressed (and whose .npy header claims
    // as much) but which holds a few compressed bytes: refused when opened, before a converter
    // lays out an output for 4 GiB (found by tests/bad_inputs.rs of the root crate).
    let claim = npy_bytes(1, "'<f8'", false, &[536_870_000], &[]);
    let mut z = npz_bytes(&[("a.npy", &claim, true)]);
    let central = z.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    z[22..26].copy_from_slice(&0xFFFF_FFFEu32.to_le_bytes()); // local header
    z[central + 24..central + 28].copy_from_slice(&0xFFFF_FFFEu32.to_le_bytes());
    let e = try_open(true, &z, false).unwrap_err().to_string();
    assert!(
        e.contains("claims 4294967294 uncompressed bytes, more than deflate can produce"),
        "{e}"
    );
    // An honest member at a high ratio still opens.
    let zeros = npy_bytes(1, "'<f8'", false, &[1 << 17], &vec![0; 1 << 20]);
    let z = npz_bytes(&[("a.npy", &zeros, true)]);
    assert!(z.len() < 4096, "{} bytes", z.len());
    let src = try_open(true, &z, false).unwrap();
    exercise(&src);

    // A deflated member whose data is cut short, but whose header is complete.
    let full = npy_bytes(1, "'<f8'", false, &[100], &[7; 800]);
    let z = npz_bytes(&[("a.npy", &full[..full.len() - 1], true)]);
    let e = try_open(true, &z, false).unwrap_err().to_string();
    assert!(e.contains("truncated .npy member 'a.npy'"), "{e}");
}
