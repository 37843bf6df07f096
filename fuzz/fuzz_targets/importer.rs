//! Fuzzes every importer of the driver registry (`tet::registry::formats`) through the same
//! path a conversion takes: the bytes are written as a file of the driver's first extension (a
//! Zarr driver gets a store whose `zarr.json` and `.zarray` are the bytes), opened with
//! `Importer::open` with `skip_unsupported` off and on, and every variable is read in full.
//!
//! The driver is `TET_FUZZ_DRIVER=<id>` (as `tet-convert --formats` lists the ids), else the
//! first byte of the input picks it. A format added to the registry is fuzzed without a new
//! target; its seeds go under `fuzz/seeds/<Format::fuzz_seeds>/`.
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use tet_source::OpenOptions;

#[path = "common.rs"]
mod common;

/// This process's scratch folder (one input at a time: libFuzzer runs inputs sequentially).
fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("tet-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&d);
    d
}

fuzz_target!(|data: &[u8]| {
    let formats = tet::registry::formats();
    let (format, bytes) = match std::env::var("TET_FUZZ_DRIVER") {
        Ok(id) => match formats.iter().find(|f| f.id == id) {
            Some(f) => (f, data),
            None => return,
        },
        Err(_) => match data.split_first() {
            Some((&b, rest)) => (&formats[usize::from(b) % formats.len()], rest),
            None => return,
        },
    };
    let Some(importer) = format.importer else {
        return;
    };
    let ext = format.extensions.first().copied().unwrap_or("bin");
    let path = scratch().join(format!("input.{ext}"));
    let _ = std::fs::remove_dir_all(&path);
    let _ = std::fs::remove_file(&path);
    let written = if format.id == "zarr" {
        std::fs::create_dir_all(&path)
            .and_then(|_| std::fs::write(path.join("zarr.json"), bytes))
            .and_then(|_| std::fs::write(path.join(".zarray"), bytes))
    } else {
        std::fs::write(&path, bytes)
    };
    if written.is_err() {
        return;
    }
    for skip in [false, true] {
        let opts = OpenOptions {
            skip_unsupported: skip,
            ..OpenOptions::default()
        };
        if let Ok(src) = importer.open(&path, &opts) {
            common::read_all(src.as_ref());
        }
    }
});
