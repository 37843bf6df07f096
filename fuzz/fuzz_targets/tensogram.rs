//! Fuzzes the Tensogram importer on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tet_source::OpenOptions;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    for skip in [false, true] {
        let opts = OpenOptions {
            skip_unsupported: skip,
            ..OpenOptions::default()
        };
        if let Ok(src) = tet_tensogram::open_bytes(data.to_vec(), &opts) {
            common::read_all(&src);
        }
    }
});
