//! A full disk: the error reaches the caller as `io::ErrorKind::StorageFull` (not as text), no
//! partial output or temporary file is left, and the CLI says so in one line and exits 1.
//!
//! The disk is a 1 MiB tmpfs mounted in a private user + mount namespace (`unshare -rm`), so
//! the test needs no privilege and touches nothing outside its temporary folder: the outer test
//! re-runs this test binary's ignored inner test inside the namespace.

use std::io::ErrorKind;
use std::path::Path;
use std::process::Command;

use tet::format::TetError;
use tet::pipeline::{ConvertError, ConvertOptions};

use crate::common::convert;

const INNER: &str = "TET_DISK_FULL_INNER";

#[test]
fn disk_full_reaches_the_caller_as_storage_full() {
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new("unshare")
        .arg("-rm")
        .arg(&exe)
        .args([
            "--exact",
            tet_testkit::layout::test_name(module_path!(), "inner").as_str(),
            "--ignored",
            "--test-threads=1",
        ])
        .env(INNER, "1")
        .output()
        .expect("unshare (util-linux) runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "inner test failed:\n{text}");
    assert!(text.contains("1 passed"), "inner test did not run:\n{text}");
}

/// Incompressible data (an xorshift sequence), `n` f64 values, as an `.npy` file.
fn write_noise_npy(path: &Path, n: usize) {
    let header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({n},), }}");
    let mut h = header.into_bytes();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(&h);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.extend_from_slice(&f64::from_bits((x >> 12) | 0x3FF0_0000_0000_0000).to_le_bytes());
    }
    std::fs::write(path, b).expect("write input");
}

#[test]
#[ignore = "run by disk_full_reaches_the_caller_as_storage_full inside a mount namespace"]
fn inner() {
    assert!(
        std::env::var_os(INNER).is_some(),
        "run through the outer test"
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let input = tmp.path().join("noise.npy");
    write_noise_npy(&input, 1 << 20); // 8 MiB, incompressible
    let disk = tmp.path().join("disk");
    std::fs::create_dir(&disk).expect("mkdir");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&disk)
        .status()
        .expect("mount runs");
    assert!(mounted.success(), "mount tmpfs in the namespace");

    // The last case: 8 threads on 64 KiB chunks with a budget of about three of them, so that
    // threads wait for room when the write fails (they must be released, not left waiting).
    for (codec, jobs, budget) in [
        ("raw", 2, None),
        ("zstd", 2, None),
        ("zstd", 8, Some(6 << 20)),
    ] {
        let output = disk.join(format!("out-{codec}-{jobs}.tet"));
        let mut opts = ConvertOptions::from(tet::settings::Settings {
            codec: codec.parse().expect("codec"),
            jobs: Some(jobs),
            ..Default::default()
        });
        if let Some(b) = budget {
            opts.settings.memory_budget = Some(b);
            opts.settings.chunk_bytes = Some(64 << 10);
        }
        let err = convert(&input, &output, &opts).expect_err("the disk is full");
        match &err {
            ConvertError::Write {
                path,
                source: TetError::Io(io),
            } => {
                assert_eq!(io.kind(), ErrorKind::StorageFull, "{codec}: {err}");
                assert_eq!(path, &output, "{codec}: the error names the output");
            }
            other => panic!("{codec}: expected a write error of kind StorageFull, got {other:?}"),
        }
        let left: Vec<_> = std::fs::read_dir(&disk)
            .expect("read disk")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert!(left.is_empty(), "{codec}: left behind {left:?}");
    }

    // The CLI: one line naming the file, exit 1, nothing left.
    let out = Command::new(env!("CARGO_BIN_EXE_tet"))
        .arg("convert")
        .arg(&input)
        .arg(disk.join("cli.tet"))
        .output()
        .expect("tet runs");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("noise.npy"), "{err}");
    assert_eq!(std::fs::read_dir(&disk).expect("read disk").count(), 0);
}
