//! Every truncation and thousands of random byte flips of valid files: the reader and
//! `verify` return errors or findings, never panic, and never allocate beyond what the bytes
//! can back; a reader that opens with `Plan::for_reading` gets the original or an error.

use crate::common;

use common::{write_in_order, Array};
use tet::export::{read_selection, DamagedFooter, Plan};
use tet::format::verify::{verify_bytes, Depth};
use tet::format::{Codec, DType, Footer, HistoryRow, TetFile};
use tet_source::AttrValue;

/// Exercises everything a user can do with the bytes.
fn poke(bytes: Vec<u8>) {
    let _ = verify_bytes(bytes.clone(), Depth::Deep);
    let _ = verify_bytes(bytes.clone(), Depth::Sample);
    if let Ok(f) = TetFile::from_bytes(bytes) {
        let _ = f.footer();
        for i in 0..f.datasets.len() {
            let _ = f.read_dataset(i);
            let d = &f.datasets[i];
            // A small region at the origin.
            let count: Vec<u64> = d.shape.iter().map(|&s| s.min(2)).collect();
            let n: u64 = count.iter().product::<u64>() * d.dtype.size() as u64;
            let mut out = vec![0u8; n as usize];
            let _ = f.read_region(i, &vec![0; d.shape.len()], &count, &mut out);
        }
        for e in &f.entries {
            let _ = f.stored_bytes(e);
            if e.raw_byte_len < 1 << 20 {
                let mut out = vec![0u8; e.raw_byte_len as usize];
                let _ = f.read_chunk_into(e, &mut out);
            }
        }
    }
}

fn ours() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..7 * 5 * 2).map(|i| (i % 7) as u8).collect();
    let arrays = vec![
        Array::new("a", DType::I16, &[7, 5], &[3, 2], data),
        Array::new("b", DType::F64, &[4], &[4], (0..32).collect()),
    ];
    let mut footer = Footer::default();
    footer.history.push(HistoryRow {
        op: "convert".into(),
        source: "test".into(),
        at: "1".into(),
        parents: vec!["sha256:ab".into()],
        params: [("codec".to_string(), "zstd".to_string())].into(),
    });
    let m = footer.datasets.entry("a".into()).or_default();
    m.dim_names = Some(vec!["y".into(), "x".into()]);
    m.attrs.push(("scale".into(), AttrValue::F32(vec![0.5])));
    m.coords
        .insert("x".into(), (0..5).map(|i| i.to_string()).collect());
    let p = dir.path().join("x.tet");
    write_in_order(&p, &arrays, &footer, 4, &|j| {
        if j % 2 == 0 {
            Codec::Zstd
        } else {
            Codec::Raw
        }
    });
    std::fs::read(p).unwrap()
}

fn files() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> =
        ["sample.tet", "large.tet", "plan.tet", "multichunk_f16.tet"]
            .iter()
            .map(|n| (n.to_string(), std::fs::read(common::reference(n)).unwrap()))
            .collect();
    v.push(("ours".into(), ours()));
    v
}

#[test]
fn every_truncation() {
    for (name, bytes) in files() {
        for len in 0..bytes.len() {
            let r = verify_bytes(bytes[..len].to_vec(), Depth::Deep);
            // A strict prefix is never a valid file (the footer or a payload goes missing),
            // except that a footer-less file may lose nothing of substance: still never a panic.
            if name == "ours" {
                assert!(!r.ok(), "{name} truncated to {len} verified ok");
            }
            poke(bytes[..len].to_vec());
        }
    }
}

#[test]
fn random_byte_flips() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (_name, bytes) in files() {
        for _ in 0..2000 {
            let mut b = bytes.clone();
            let flips = 1 + next() % 4;
            for _ in 0..flips {
                let i = (next() % b.len() as u64) as usize;
                // Mostly single-bit flips, sometimes a whole random byte.
                if next() % 3 == 0 {
                    b[i] = next() as u8;
                } else {
                    b[i] ^= 1 << (next() % 8);
                }
            }
            poke(b);
        }
    }
}

#[test]
fn absurd_headers_are_refused() {
    // A shape whose byte size overflows u64.
    let mut b = std::fs::read(common::reference("sample.tet")).unwrap();
    // shape[0] of the only record lies at 40 + 16 + 16 (name padded to 16).
    b[72..80].copy_from_slice(&u64::MAX.to_le_bytes());
    let r = verify_bytes(b, Depth::Deep);
    assert!(
        r.failures.iter().any(|f| f.message.contains("overflow")),
        "{:?}",
        r.failures
    );

    // An index claiming more rows than the file can hold.
    let mut b = std::fs::read(common::reference("sample.tet")).unwrap();
    b[24..32].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
    assert!(!verify_bytes(b, Depth::Deep).ok());

    // A zstd chunk claiming terabytes.
    let mut b = ours();
    let f = TetFile::from_bytes(b.clone()).unwrap();
    let pos = f.entries.iter().position(|e| e.codec_id == 1).unwrap();
    let row = f.chunk_index_offset as usize + 32 + pos * 104;
    b[row + 80..row + 88].copy_from_slice(&(1u64 << 42).to_le_bytes());
    let f = TetFile::from_bytes(b.clone()).unwrap();
    assert!(f.read_dataset(0).is_err());
    assert!(!verify_bytes(b, Depth::Deep).ok());
}

/// What a reader that opens with `Plan::for_reading` (the Python package's way in) gets: the
/// model as text with whether it is verified, and every array read whole; or the error.
fn read_all(bytes: Vec<u8>, damaged: DamagedFooter) -> Result<(String, Vec<Vec<u8>>), String> {
    let f = TetFile::from_bytes(bytes).map_err(|e| e.to_string())?;
    let r = Plan::for_reading(&f, damaged).map_err(|e| e.to_string())?;
    let mut values = Vec::new();
    for (i, a) in r.plan.model.arrays.iter().enumerate() {
        let sel: Vec<Vec<u64>> = a.shape.iter().map(|&n| (0..n).collect()).collect();
        let n = a.shape.iter().product::<u64>() * a.dtype.size() as u64;
        // The plan's shapes were checked against the index: never more than the file holds.
        assert!(n < 1 << 20, "a plan of {n} bytes for `{}`", a.name);
        let mut out = vec![0u8; n as usize];
        read_selection(&f, &r.plan, i, &sel, &mut out).map_err(|e| e.to_string())?;
        values.push(out);
    }
    Ok((
        format!("{:?} verified={}", r.plan.model, r.verified),
        values,
    ))
}

/// A reader never gets damaged values or lost metadata without an error: every truncation
/// and every single-bit flip of a file with checksums reads as the original or is refused,
/// and a cleared footer flag is a contradiction, not a footer-less file.
#[test]
fn a_reader_gets_the_original_or_an_error() {
    let bytes = ours();
    let want = read_all(bytes.clone(), DamagedFooter::Refuse).unwrap();
    assert!(want.0.ends_with("verified=true"), "{}", want.0);
    for len in 0..bytes.len() {
        let r = read_all(bytes[..len].to_vec(), DamagedFooter::Refuse);
        assert!(r.is_err(), "truncated to {len}: read");
    }
    let mut refused = 0;
    for i in 0..bytes.len() {
        for bit in [0, 3, 6] {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            match read_all(b, DamagedFooter::Refuse) {
                Ok(got) => assert!(got == want, "byte {i} bit {bit}: read other values"),
                Err(_) => refused += 1,
            }
        }
    }
    assert!(
        refused > bytes.len(),
        "{refused} of {} flips refused",
        3 * bytes.len()
    );
    let mut b = bytes.clone();
    b[12] &= !1;
    let e = read_all(b.clone(), DamagedFooter::Refuse).unwrap_err();
    assert!(e.contains("flag bit 0 is clear"), "{e}");
    let (model, values) = read_all(b.clone(), DamagedFooter::ReadStored).unwrap();
    assert!(model.ends_with("verified=false"));
    // The stored datasets, without the footer's raising (no metadata): the same bytes.
    assert_eq!(values, want.1);
    assert!(!verify_bytes(b, Depth::Sample).ok());
}

/// The reference tools' files record no checksums: they plan, unverified; `plan.tet`, whose
/// footer is corrupt, only when the caller asks for the stored datasets.
#[test]
fn reference_files_plan_unverified() {
    for n in [
        "sample.tet",
        "large.tet",
        "multichunk_f16.tet",
        "converted_small_cf.tet",
    ] {
        let b = std::fs::read(common::reference(n)).unwrap();
        let (model, _) = read_all(b, DamagedFooter::Refuse).unwrap_or_else(|e| panic!("{n}: {e}"));
        assert!(model.ends_with("verified=false"), "{n}");
    }
    let b = std::fs::read(common::reference("plan.tet")).unwrap();
    let e = read_all(b.clone(), DamagedFooter::Refuse).unwrap_err();
    assert!(e.starts_with("footer: "), "{e}");
    let (_, values) = read_all(b, DamagedFooter::ReadStored).unwrap();
    let want: Vec<u8> = (1..=6).flat_map(|v| (v as f32).to_le_bytes()).collect();
    assert_eq!(values, vec![want]);
}
