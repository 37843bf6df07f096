//! Fuzzes the `.tet` reader over a source read by ranges (an object in a store): whatever the
//! bytes, `TetFile::open_source` over a source that lends nothing tells exactly what
//! `TetFile::from_bytes` tells (the same error, or the same structure, footer, chunk bytes and
//! values), and never panics.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use tet::format::verify::{verify, Depth};
use tet::format::TetFile;
use tet_source::byte_source::CountingSource;

/// Only read datasets and chunks smaller than this.
const CAP: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let whole = TetFile::from_bytes(data.to_vec());
    let ranged = TetFile::open_source(Arc::new(CountingSource::new(data.to_vec())));
    let (a, b) = match (whole, ranged) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string());
            return;
        }
        (a, b) => panic!("from_bytes {:?}, open_source {:?}", a.err(), b.err()),
    };
    assert!(b.bytes().is_none());
    assert_eq!(a.datasets, b.datasets);
    assert_eq!(a.entries, b.entries);
    assert_eq!(
        format!("{:?}", a.footer().map(|f| f.cloned())),
        format!("{:?}", b.footer().map(|f| f.cloned()))
    );
    assert_eq!(a.footer_layout(), b.footer_layout());
    assert_eq!(a.footer_digest(), b.footer_digest());
    for (i, e) in a.entries.iter().enumerate() {
        assert_eq!(a.chunk_check(i), b.chunk_check(i));
        let (sa, sb) = (a.stored_bytes(e), b.stored_bytes(e));
        assert_eq!(
            sa.as_deref().map_err(|e| e.to_string()),
            sb.as_deref().map_err(|e| e.to_string())
        );
        if e.raw_byte_len < CAP {
            let mut oa = vec![0u8; e.raw_byte_len as usize];
            let mut ob = oa.clone();
            let (ra, rb) = (a.read_chunk_into(e, &mut oa), b.read_chunk_into(e, &mut ob));
            assert_eq!(
                ra.as_ref().map_err(|e| e.to_string()),
                rb.as_ref().map_err(|e| e.to_string())
            );
            if ra.is_ok() {
                assert_eq!(oa, ob);
            }
        }
    }
    for i in 0..a.datasets.len() {
        if a.datasets[i].byte_len() < CAP {
            let (va, vb) = (a.read_dataset(i), b.read_dataset(i));
            assert_eq!(va.map_err(|e| e.to_string()), vb.map_err(|e| e.to_string()));
        }
    }
    let (ra, rb) = (verify(&a, Depth::Deep), verify(&b, Depth::Deep));
    assert_eq!(ra.failures, rb.failures);
    assert_eq!(ra.warnings, rb.warnings);
});
