//! Bad input to the binaries, run as child processes under a 2 GiB address-space cap (so that
//! an allocation sized by a lying header aborts the child instead of succeeding on a large
//! machine) and a time limit. A signal death, a panic (exit 101), a hang or a second line of
//! error is a failure.
//!
//! * every corpus input whose sidecar says `expect_error` → exit 1, one line naming the input,
//!   no output, nothing left in the output directory;
//! * a truncation sweep over every corpus input of every compiled-in format (and damaged Zarr
//!   stores) → that clean refusal, or success with an output that passes `verify --deep`;
//! * absurd headers crafted here (NPY shape products past u64, NPZ members claiming huge sizes,
//!   TeaFile item areas past the end, Tensogram lengths in terabytes, `.tet` chunks claiming
//!   terabytes) → a clean refusal.
//!
//! `cargo test -p tet-cli --test main bad_inputs:: -- --nocapture` prints the counts quoted in RELIABILITY.md.

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tet::format::verify::{verify, Depth};
use tet::format::TetFile;

use common::sidecar::corpus;
use common::{npy_bytes, only_files};
use tet_testkit::{copy_tree, files_below};

/// The address-space cap of every child.
const MEMORY_CAP: u64 = 2 << 30;
/// The file-size cap of every child (no corpus output comes near it).
const FILE_CAP: u64 = 1 << 30;
/// A child running longer than this is a hang.
const TIME_LIMIT: Duration = Duration::from_secs(60);

/// (input, sidecar) of every corpus input this build has an importer for, then the `.tet` inputs.
fn corpus_inputs() -> Vec<(PathBuf, Value)> {
    let mut out = common::sidecar::inputs();
    assert!(out.len() >= 30, "corpus not found: {} inputs", out.len());
    // `.tet` inputs (re-chunk, re-compress): the reference implementation's files and our golden
    // file, with no sidecar (none is an expected refusal; plan.tet's corrupt footer is refused).
    out.extend(tet_inputs().into_iter().map(|p| (p, Value::Null)));
    out
}

/// The `.tet` files every sweep also feeds to `tet-convert`.
fn tet_inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(common::shared().join("interop/reference-tet"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tet"))
        .collect();
    v.sort();
    assert!(v.len() >= 5, "reference .tet files not found");
    v.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/small.tet"));
    v
}

/// Runs `c` under the memory cap and the time limit. `Err` describes a hang.
fn run_capped(c: &mut Command) -> Result<Output, String> {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        c.pre_exec(|| {
            for (resource, cap) in [
                (libc::RLIMIT_AS, MEMORY_CAP),
                (libc::RLIMIT_FSIZE, FILE_CAP),
            ] {
                let lim = libc::rlimit {
                    rlim_cur: cap as libc::rlim_t,
                    rlim_max: cap as libc::rlim_t,
                };
                if libc::setrlimit(resource, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // A write past the file-size cap fails with EFBIG instead of killing the child.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = c.spawn().unwrap();
    // Drain the pipes on threads so a chatty child cannot block on a full pipe.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut b).unwrap();
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut b).unwrap();
        b
    });
    let started = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if started.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("no exit after {TIME_LIMIT:?} (hang)"));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok(Output {
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    })
}

fn tet_convert(input: &Path, output: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tet-convert"));
    c.arg(input)
        .arg(output)
        .args(["-q", "--jobs", "2", "--codec", "zstd:1"])
        .env("SOURCE_DATE_EPOCH", "1700000000");
    c
}

fn tet(args: &[&str], file: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tet"));
    c.args(args).arg(file);
    c
}

/// How a conversion ended, when it ended well.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// With the error line.
    Refused(String),
    Converted,
}

/// Converts `input` into `out_dir/out.tet` and checks the result: a clean refusal (exit 1, one
/// stderr line naming the input, nothing in `out_dir`) or a success whose output passes
/// `verify --deep` (then removed). `Err` says what went wrong.
fn convert_checked(input: &Path, out_dir: &Path) -> Result<Outcome, String> {
    let out = out_dir.join("out.tet");
    let o = run_capped(&mut tet_convert(input, &out))?;
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    if let Some(sig) = o.status.signal() {
        return Err(format!("killed by signal {sig}; stderr: {err}"));
    }
    let left = only_files(out_dir);
    match o.status.code() {
        Some(0) => {
            let f = TetFile::open(&out).map_err(|e| format!("converted, but: {e}"))?;
            let report = verify(&f, Depth::Deep);
            if !report.ok() {
                return Err(format!(
                    "converted, but verify --deep fails: {:?}",
                    report.failures
                ));
            }
            drop(f);
            std::fs::remove_file(&out).unwrap();
            if left != ["out.tet"] {
                return Err(format!("converted, but the output dir holds {left:?}"));
            }
            Ok(Outcome::Converted)
        }
        Some(1) => {
            if err.trim_end().lines().count() != 1 || err.trim().is_empty() {
                return Err(format!("exit 1 with not exactly one line: {err:?}"));
            }
            if !err.contains(&input.display().to_string()) {
                return Err(format!("the error does not name the input: {err}"));
            }
            if !left.is_empty() {
                for f in &left {
                    let _ = std::fs::remove_file(out_dir.join(f));
                }
                return Err(format!("refused, but left {left:?} behind ({err})"));
            }
            Ok(Outcome::Refused(err.trim_end().to_string()))
        }
        code => Err(format!("exit {code:?}: {err}")),
    }
}

#[test]
fn expect_error_inputs_are_refused_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let mut refused = Vec::new();
    for (input, expect) in corpus_inputs() {
        let Some(reason) = expect["expect_error"].as_str() else {
            continue;
        };
        let got = convert_checked(&input, &out_dir);
        assert!(
            matches!(got, Ok(Outcome::Refused(_))),
            "{} (expected: {reason}): {got:?}",
            input.display()
        );
        refused.push(input.file_name().unwrap().to_string_lossy().into_owned());
    }
    // npy/truncated.npy and teafile/corrupt_itemstart.tea at least (hdf5/rank9.h5 with HDF5).
    assert!(refused.len() >= 2, "{refused:?}");
    eprintln!("expect_error inputs refused cleanly: {refused:?}");
}

/// The lengths a file of `len` bytes is cut to.
fn cut_points(len: usize) -> Vec<usize> {
    let mut v = vec![
        0,
        1,
        4,
        8,
        12,
        16,
        32,
        64,
        128,
        512,
        len / 4,
        len / 2,
        3 * len / 4,
        len.saturating_sub(64),
        len.saturating_sub(8),
        len.saturating_sub(1),
    ];
    v.retain(|&n| n < len);
    v.sort_unstable();
    v.dedup();
    v
}

/// Every file below the directory store `dir`, relative to it, sorted.
fn store_files(dir: &Path) -> Vec<PathBuf> {
    files_below(dir)
        .into_iter()
        .map(|p| p.strip_prefix(dir).unwrap().to_path_buf())
        .collect()
}

#[derive(Default, Debug)]
struct Tally {
    refused: usize,
    /// Refusals whose message says "truncated".
    said_truncated: usize,
    converted: usize,
}

#[test]
fn truncated_corpus_inputs_are_refused_or_convert_to_valid_files() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let scratch = dir.path().join("in");
    std::fs::create_dir(&scratch).unwrap();
    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut record = |format: &str, what: String, r: Result<Outcome, String>| {
        let t = tally.entry(format.to_string()).or_default();
        match r {
            Ok(Outcome::Refused(e)) => {
                t.refused += 1;
                t.said_truncated += usize::from(e.contains("truncated"));
            }
            Ok(Outcome::Converted) => t.converted += 1,
            Err(e) => problems.push(format!("{what}: {e}")),
        }
    };
    let started = Instant::now();
    for (input, _) in corpus_inputs() {
        let format = input
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let name = input.file_name().unwrap();
        if input.is_dir() {
            // A Zarr store: cut the metadata and chunk files one at a time.
            let store = scratch.join(name);
            let mut victims = store_files(&input);
            // Every zarr.json, and every third chunk file.
            let mut n = 0;
            victims.retain(|v| {
                n += 1;
                v.ends_with("zarr.json") || n % 3 == 0
            });
            for v in victims {
                let bytes = std::fs::read(input.join(&v)).unwrap();
                let mut cuts = cut_points(bytes.len());
                cuts.retain(|&c| c <= 1 || c == bytes.len() / 2 || c + 1 == bytes.len());
                for cut in cuts {
                    copy_tree(&input, &store);
                    std::fs::write(store.join(&v), &bytes[..cut]).unwrap();
                    let r = convert_checked(&store, &out_dir);
                    record(&format, format!("{} cut to {cut}", v.display()), r);
                    std::fs::remove_dir_all(&store).unwrap();
                }
                // Garbage instead of the file.
                copy_tree(&input, &store);
                std::fs::write(store.join(&v), b"\xff\xfe not what it should be {[").unwrap();
                let r = convert_checked(&store, &out_dir);
                record(&format, format!("{} replaced by garbage", v.display()), r);
                std::fs::remove_dir_all(&store).unwrap();
            }
            continue;
        }
        let bytes = std::fs::read(&input).unwrap();
        let target = scratch.join(name);
        for cut in cut_points(bytes.len()) {
            std::fs::write(&target, &bytes[..cut]).unwrap();
            let r = convert_checked(&target, &out_dir);
            record(
                &format,
                format!("{} cut to {cut} of {}", name.to_string_lossy(), bytes.len()),
                r,
            );
        }
        std::fs::remove_file(&target).unwrap();
    }
    for (f, t) in &tally {
        eprintln!(
            "truncation sweep {f}: {} runs, {} refused ({} saying \"truncated\"), {} converted \
             (verify --deep ok)",
            t.refused + t.converted,
            t.refused,
            t.said_truncated,
            t.converted
        );
    }
    eprintln!("truncation sweep took {:?}", started.elapsed());
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // Every format was swept and every format refused something.
    for f in common::sidecar::FORMATS {
        assert!(
            tally.get(*f).is_some_and(|t| t.refused > 0),
            "{f}: {tally:?}"
        );
    }
}

/// Random byte changes (1–4 per mutant, half of them in the first 512 bytes, where the headers
/// are) of every corpus input whose format is parsed by Rust code or netCDF-C's classic reader,
/// and of every `zarr.json` and chunk file of the Zarr store: a clean refusal or an output
/// that passes `verify --deep`. HDF5 and netCDF-4 inputs are left out: libhdf5 1.10.8 itself
/// crashes on some damaged files (see RELIABILITY.md; `converters/hdf5/tests/robustness.rs`
/// runs those in child processes and counts the crashes).
#[test]
fn byte_flipped_corpus_inputs_are_refused_or_convert_to_valid_files() {
    const MUTANTS: usize = 12;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let scratch = dir.path().join("in");
    std::fs::create_dir(&scratch).unwrap();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut mutate = |bytes: &[u8]| -> Vec<u8> {
        let mut b = bytes.to_vec();
        for _ in 0..1 + next() % 4 {
            let span = if next() % 2 == 0 {
                b.len().min(512)
            } else {
                b.len()
            };
            let at = (next() % span as u64) as usize;
            b[at] = next() as u8;
        }
        b
    };
    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
    let mut problems = Vec::new();
    for (input, _) in corpus_inputs() {
        let format = input.parent().unwrap().file_name().unwrap();
        let format = format.to_string_lossy().into_owned();
        let name = input.file_name().unwrap();
        let hdf5_container = std::fs::File::open(&input).is_ok_and(|mut f| {
            let mut head = [0u8; 8];
            std::io::Read::read_exact(&mut f, &mut head).is_ok() && &head == b"\x89HDF\r\n\x1a\n"
        });
        if format == "hdf5" || hdf5_container {
            continue;
        }
        // (file to damage, relative to the input; the input itself for a plain file)
        let victims: Vec<PathBuf> = if input.is_dir() {
            store_files(&input)
        } else {
            vec![PathBuf::new()]
        };
        let per_victim = if input.is_dir() { 2 } else { MUTANTS };
        for v in &victims {
            let (from, to) = if input.is_dir() {
                (input.join(v), scratch.join(name).join(v))
            } else {
                (input.clone(), scratch.join(name))
            };
            let original = std::fs::read(&from).unwrap();
            if original.is_empty() {
                continue;
            }
            for k in 0..per_victim {
                let target = scratch.join(name);
                if input.is_dir() {
                    copy_tree(&input, &target);
                }
                std::fs::write(&to, mutate(&original)).unwrap();
                let r = convert_checked(&target, &out_dir);
                let t = tally.entry(format.clone()).or_default();
                match r {
                    Ok(Outcome::Refused(_)) => t.refused += 1,
                    Ok(Outcome::Converted) => t.converted += 1,
                    Err(e) => problems.push(format!("{} mutant {k}: {e}", from.display())),
                }
                if input.is_dir() {
                    std::fs::remove_dir_all(&target).unwrap();
                } else {
                    std::fs::remove_file(&target).unwrap();
                }
            }
        }
    }
    for (f, t) in &tally {
        eprintln!(
            "byte flips {f}: {} runs, {} refused, {} converted (verify --deep ok)",
            t.refused + t.converted,
            t.refused,
            t.converted
        );
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        tally.values().map(|t| t.refused).sum::<usize>() > 300,
        "{tally:?}"
    );
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A zip of one deflated member `name` whose deflate stream is `content` in one stored block,
/// but whose headers claim `claimed` uncompressed bytes (in zip64 fields when it does not fit
/// 32 bits).
fn npz_claiming(name: &str, content: &[u8], claimed: u64) -> Vec<u8> {
    let mut deflate = vec![0x01]; // final block, stored
    deflate.extend((content.len() as u16).to_le_bytes());
    deflate.extend((!(content.len() as u16)).to_le_bytes());
    deflate.extend(content);
    let zip64 = claimed >= 0xFFFF_FFFF;
    let (usize32, csize32) = if zip64 {
        (0xFFFF_FFFFu32, 0xFFFF_FFFFu32)
    } else {
        (claimed as u32, deflate.len() as u32)
    };
    let mut extra = Vec::new();
    if zip64 {
        extra.extend(1u16.to_le_bytes());
        extra.extend(16u16.to_le_bytes());
        extra.extend(claimed.to_le_bytes());
        extra.extend((deflate.len() as u64).to_le_bytes());
    }
    let crc = crc32(content);
    let mut z = Vec::new();
    // Local file header.
    z.extend(0x0403_4b50u32.to_le_bytes());
    z.extend(45u16.to_le_bytes()); // version needed
    z.extend(0u16.to_le_bytes()); // flags
    z.extend(8u16.to_le_bytes()); // deflate
    z.extend([0, 0, 0x21, 0]); // time, date (1980-01-01)
    z.extend(crc.to_le_bytes());
    z.extend(csize32.to_le_bytes());
    z.extend(usize32.to_le_bytes());
    z.extend((name.len() as u16).to_le_bytes());
    z.extend((extra.len() as u16).to_le_bytes());
    z.extend(name.as_bytes());
    z.extend(&extra);
    z.extend(&deflate);
    // Central directory.
    let cd_start = z.len() as u32;
    z.extend(0x0201_4b50u32.to_le_bytes());
    z.extend(45u16.to_le_bytes()); // made by
    z.extend(45u16.to_le_bytes()); // needed
    z.extend(0u16.to_le_bytes());
    z.extend(8u16.to_le_bytes());
    z.extend([0, 0, 0x21, 0]);
    z.extend(crc.to_le_bytes());
    z.extend(csize32.to_le_bytes());
    z.extend(usize32.to_le_bytes());
    z.extend((name.len() as u16).to_le_bytes());
    z.extend((extra.len() as u16).to_le_bytes());
    z.extend(0u16.to_le_bytes()); // comment
    z.extend(0u16.to_le_bytes()); // disk
    z.extend(0u16.to_le_bytes()); // internal attributes
    z.extend(0u32.to_le_bytes()); // external attributes
    z.extend(0u32.to_le_bytes()); // local header offset
    z.extend(name.as_bytes());
    z.extend(&extra);
    let cd_len = z.len() as u32 - cd_start;
    // End of central directory.
    z.extend(0x0605_4b50u32.to_le_bytes());
    z.extend([0, 0, 0, 0]);
    z.extend(1u16.to_le_bytes());
    z.extend(1u16.to_le_bytes());
    z.extend(cd_len.to_le_bytes());
    z.extend(cd_start.to_le_bytes());
    z.extend(0u16.to_le_bytes());
    z
}

/// A corpus file with `value` written over `at..at + value.len()`.
fn patched(rel: &str, at: usize, value: &[u8]) -> Vec<u8> {
    let mut b = std::fs::read(corpus().join(rel)).unwrap();
    b[at..at + value.len()].copy_from_slice(value);
    b
}

/// (what, shape, chunk shape, first chunk file, reason).
type ZarrCase<'a> = (&'a str, &'a [u64], &'a [u64], &'a [u8], &'a str);

/// A Zarr v3 store at `dir` with one u8 array `a` of `shape`, chunks of `chunk` compressed with
/// zstd, and chunk file `c/0…/0` holding `first_chunk`.
fn zarr_store(dir: &Path, shape: &[u64], chunk: &[u64], first_chunk: &[u8]) {
    std::fs::create_dir_all(dir.join("a/c")).unwrap();
    std::fs::write(
        dir.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group", "attributes": {}}"#,
    )
    .unwrap();
    let meta = serde_json::json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunk}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [
            {"name": "bytes"},
            {"name": "zstd", "configuration": {"level": 0, "checksum": false}}
        ],
        "attributes": {}
    });
    std::fs::write(dir.join("a/zarr.json"), meta.to_string()).unwrap();
    let mut key = dir.join("a/c");
    for _ in 1..shape.len() {
        key = key.join("0");
        std::fs::create_dir_all(&key).unwrap();
    }
    std::fs::write(key.join("0"), first_chunk).unwrap();
}

#[test]
fn absurd_headers_are_refused_by_checks_not_by_allocation_failure() {
    let tick = "teafile/tick_full.tea";
    let tick_len = std::fs::metadata(corpus().join(tick)).unwrap().len() as i64;
    let tgm = "tensogram/two_objects.tgm";
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        // NPY: the shape's element count overflows u64 (2^32 · 2^32 · 2^16).
        (
            "npy shape product past u64",
            "a.npy",
            npy_bytes(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 65536), }",
                &[0; 64],
            ),
        ),
        // NPY: the elements fit u64 but their bytes do not (2^61 · 8).
        (
            "npy byte count past u64",
            "a.npy",
            npy_bytes(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }",
                &[0; 64],
            ),
        ),
        // NPY: a petabyte (2^47 · 8 bytes) in a 128-byte file.
        (
            "npy claiming a petabyte",
            "a.npy",
            npy_bytes(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (140737488355328,), }",
                &[0; 64],
            ),
        ),
        // NPY 2.0: a header length of 4 GiB.
        ("npy 4 GiB header length", "a.npy", {
            let mut b = b"\x93NUMPY\x02\x00\xff\xff\xff\xff{'descr': '<f8'".to_vec();
            b.resize(256, b' ');
            b
        }),
        // NPZ: a member whose zip64 sizes and .npy header claim a petabyte; it inflates to 128
        // bytes.
        (
            "npz member claiming a petabyte",
            "a.npz",
            npz_claiming(
                "x.npy",
                &npy_bytes(
                    "{'descr': '<f8', 'fortran_order': False, 'shape': (140737488355328,), }",
                    &[],
                ),
                (1 << 50) + 128,
            ),
        ),
        // NPZ: the same with a 4 GiB claim in the 32-bit size fields.
        (
            "npz member claiming 4 GiB",
            "a.npz",
            npz_claiming(
                "x.npy",
                &npy_bytes(
                    "{'descr': '<f8', 'fortran_order': False, 'shape': (536870895,), }",
                    &[],
                ),
                0xFFFF_FFFE,
            ),
        ),
        // TeaFile: ItemEnd (offset 16) far past the end of the file, so the item count is huge.
        (
            "tea ItemEnd at i64::MAX",
            "a.tea",
            patched(tick, 16, &i64::MAX.to_le_bytes()),
        ),
        (
            "tea ItemEnd a terabyte past the end",
            "a.tea",
            patched(tick, 16, &(tick_len + (1 << 40)).to_le_bytes()),
        ),
        // TeaFile: a SectionCount no file could hold.
        (
            "tea SectionCount at i64::MAX",
            "a.tea",
            patched(tick, 24, &i64::MAX.to_le_bytes()),
        ),
        // Tensogram: the message's total_length (big-endian u64 at 16) in terabytes or at u64::MAX.
        (
            "tgm total_length a terabyte",
            "a.tgm",
            patched(tgm, 16, &(1u64 << 40).to_be_bytes()),
        ),
        (
            "tgm total_length u64::MAX",
            "a.tgm",
            patched(tgm, 16, &u64::MAX.to_be_bytes()),
        ),
        // Tensogram: the first frame's length (at 32) claiming 2^60 bytes.
        (
            "tgm frame length 2^60",
            "a.tgm",
            patched(tgm, 32, &(1u64 << 60).to_be_bytes()),
        ),
    ];
    #[cfg(feature = "netcdf")]
    let cases = {
        let mut cases = cases;
        // NetCDF classic: numrecs (big-endian at 4) at the largest count the format allows,
        // and the `lat` dimension's length (at 36) likewise.
        let nc = "netcdf/nc3_classic.nc";
        cases.push((
            "nc numrecs 2^31-1",
            "a.nc",
            patched(nc, 4, &0x7FFF_FFFFu32.to_be_bytes()),
        ));
        cases.push((
            "nc dimension length 2^31-1",
            "a.nc",
            patched(nc, 36, &0x7FFF_FFFFu32.to_be_bytes()),
        ));
        cases
    };
    #[cfg(feature = "hdf5")]
    let cases = {
        let mut cases = cases;
        // HDF5 superblock v0: the end-of-file address (at 40) a terabyte or 2^64-2 past the
        // 22 KB file.
        let h5 = "hdf5/structure.h5";
        cases.push((
            "h5 end of file at 2^40",
            "a.h5",
            patched(h5, 40, &(1u64 << 40).to_le_bytes()),
        ));
        cases.push((
            "h5 end of file at 2^64-2",
            "a.h5",
            patched(h5, 40, &(u64::MAX - 1).to_le_bytes()),
        ));
        cases
    };
    #[cfg(feature = "netcdf")]
    let cases = {
        let mut cases = cases;
        // netCDF-4 (HDF5 superblock v2): the end-of-file address (at 28) at 2^40 (the
        // superblock checksum no longer matches either; netCDF-C would only say "HDF error").
        let nc4 = "netcdf/nc4_classic_chunked.nc";
        cases.push((
            "nc4 end of file at 2^40",
            "a.nc",
            patched(nc4, 28, &(1u64 << 40).to_le_bytes()),
        ));
        cases
    };
    // The reason each must give: a check of the claim, before any work is done for it.
    let reasons = [
        ("npy shape product past u64", "overflows"),
        ("npy byte count past u64", "overflows"),
        ("npy claiming a petabyte", "but only 64 data bytes follow"),
        ("npy 4 GiB header length", "exceeds the 1048576-byte limit"),
        (
            "npz member claiming a petabyte",
            "more than deflate can produce",
        ),
        ("npz member claiming 4 GiB", "more than deflate can produce"),
        ("tea ItemEnd at i64::MAX", "beyond end of file"),
        ("tea ItemEnd a terabyte past the end", "beyond end of file"),
        ("tea SectionCount at i64::MAX", "cannot fit"),
        (
            "tgm total_length a terabyte",
            "the message declares 1099511627776 bytes",
        ),
        (
            "tgm total_length u64::MAX",
            "the message declares 18446744073709551615 bytes",
        ),
        ("tgm frame length 2^60", "exceeds buffer"),
        #[cfg(feature = "netcdf")]
        (
            "nc numrecs 2^31-1",
            "(2147483647 records) needs 206158431468 bytes",
        ),
        #[cfg(feature = "netcdf")]
        ("nc dimension length 2^31-1", "needs 214748366232 bytes"),
        #[cfg(feature = "hdf5")]
        ("h5 end of file at 2^40", "truncated HDF5 file"),
        #[cfg(feature = "hdf5")]
        ("h5 end of file at 2^64-2", "truncated HDF5 file"),
        #[cfg(feature = "netcdf")]
        ("nc4 end of file at 2^40", "truncated netCDF-4 file"),
    ];
    assert_eq!(reasons.len(), cases.len());
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let mut problems = Vec::new();
    for ((what, name, bytes), (w, reason)) in cases.iter().zip(reasons) {
        assert_eq!(*what, w);
        let input = dir.path().join(name);
        std::fs::write(&input, bytes).unwrap();
        let t = Instant::now();
        match convert_checked(&input, &out_dir) {
            Ok(Outcome::Refused(e)) if e.contains(reason) => {
                eprintln!("  {what}: refused in {:?}: {e}", t.elapsed())
            }
            other => problems.push(format!("{what}: {other:?}")),
        }
    }
    // Zarr stores.
    let terabyte_frame = zstd_frame_claiming(1 << 40);
    let zarr_cases: [ZarrCase; 3] = [
        (
            "zarr shape product past u64",
            &[1 << 32, 1 << 32, 1 << 16],
            &[1, 1, 1],
            &terabyte_frame,
            "has too many elements",
        ),
        (
            "zarr terabyte chunk, frame claiming a terabyte",
            &[1 << 40],
            &[1 << 40],
            &terabyte_frame,
            "decodes to more than",
        ),
        (
            "zarr 64-byte chunk, frame claiming a terabyte",
            &[64],
            &[64],
            &terabyte_frame,
            "does not decode to at most 64 bytes",
        ),
    ];
    for (what, shape, chunk, first, reason) in zarr_cases {
        let store = dir.path().join("a.zarr");
        zarr_store(&store, shape, chunk, first);
        let t = Instant::now();
        match convert_checked(&store, &out_dir) {
            Ok(Outcome::Refused(e)) if e.contains(reason) => {
                eprintln!("  {what}: refused in {:?}: {e}", t.elapsed())
            }
            other => problems.push(format!("{what}: {other:?}")),
        }
        std::fs::remove_dir_all(&store).unwrap();
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    eprintln!(
        "absurd headers refused cleanly under a {} GiB address-space cap: {}",
        MEMORY_CAP >> 30,
        cases.len() + zarr_cases.len()
    );
}

/// A zstd frame (single segment) whose header declares `content_size` bytes, holding one RLE
/// block of one zero byte.
fn zstd_frame_claiming(content_size: u64) -> Vec<u8> {
    let mut f = vec![0x28, 0xB5, 0x2F, 0xFD];
    f.push(0xE0); // frame content size in 8 bytes, single segment, no checksum
    f.extend(content_size.to_le_bytes());
    f.extend([0x0B, 0x00, 0x00]); // last block, RLE, 1 byte
    f.push(0);
    f
}

/// Writes a one-dataset, one-chunk `.tet` whose zstd chunk claims `raw_len` bytes (the dataset's
/// whole size) and whose frame header claims `frame_claim`.
fn tet_with_claim(path: &Path, len: u64, frame_claim: u64) {
    use tet::format::{ChunkPayload, Codec, DType, DatasetSpec, Footer, TetWriter, WriterOptions};
    let w = TetWriter::create(
        path,
        vec![DatasetSpec {
            name: "x".into(),
            dtype: DType::U8,
            shape: vec![len],
            chunk_shape: vec![len],
        }],
        WriterOptions::default(),
    )
    .unwrap();
    w.submit(
        0,
        &[0],
        ChunkPayload {
            codec: Codec::Zstd,
            raw_len: len,
            data: zstd_frame_claiming(frame_claim).into(),
        },
    )
    .unwrap();
    w.finish(&Footer::default()).unwrap();
}

/// `.tet` files whose zstd chunk claims terabytes: `tet verify --deep` fails them with a reason
/// and `tet info` describes them, both under the memory cap, neither by allocating the claim.
#[test]
fn tet_chunks_claiming_terabytes_are_refused_by_verify_and_described_by_info() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // The index row and the frame both claim a terabyte, for 17 stored bytes.
        (
            "terabyte.tet",
            1u64 << 40,
            1u64 << 40,
            "more than a 17-byte zstd frame can hold",
        ),
        // A 16-byte chunk whose frame claims a terabyte.
        ("lying_frame.tet", 16, 1 << 40, "1099511627776"),
    ];
    for (name, len, claim, reason) in cases {
        let path = dir.path().join(name);
        tet_with_claim(&path, len, claim);
        let o = run_capped(&mut tet(&["verify", "--deep"], &path)).unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{name}: {o:?}");
        assert!(o.stderr.is_empty(), "{name}: {o:?}");
        let fail: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL ")).collect();
        assert!(
            !fail.is_empty() && fail.iter().all(|l| l.contains(name)),
            "{name}: {out}"
        );
        assert!(out.contains(reason), "{name}: {out}");
        eprintln!("verify --deep {name}: exit 1: {}", fail[0]);

        let o = run_capped(&mut tet(&["info"], &path)).unwrap();
        assert!(o.status.signal().is_none(), "{name}: {o:?}");
        assert_eq!(o.status.code(), Some(0), "{name}: {o:?}");
        assert!(String::from_utf8_lossy(&o.stdout).contains(&len.to_string()));
        let o = run_capped(&mut tet(&["info", "--json", "--chunks"], &path)).unwrap();
        assert_eq!(o.status.code(), Some(0), "{name}: {o:?}");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["chunks"][0]["raw_bytes"], len, "{name}");
        eprintln!(
            "info --json --chunks {name}: exit 0, raw_bytes {len} shown under the memory cap"
        );

        // As a conversion input: a clean refusal naming the file, no output.
        let out = dir.path().join(format!("{name}.converted.tet"));
        let o = run_capped(&mut tet_convert(&path, &out)).unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {o:?}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.contains(name), "{name}: {err}");
        assert!(!out.exists(), "{name}: output left behind");
        eprintln!("tet-convert {name}: exit 1: {}", err.trim());
    }
    // A plan asking for a chunk past what the pipeline holds in memory is refused before any
    // work, not by an allocation failure. The input is a valid file with a 3-billion-element
    // variable that was never written (all fill values, a few KiB on disk, written by netCDF-C's
    // own ncgen): a `.tet` claiming such chunks is refused as damaged when it is opened.
    let cdl = dir.path().join("big.cdl");
    std::fs::write(
        &cdl,
        "netcdf big {\ndimensions:\n  x = 3000000000 ;\nvariables:\n  ubyte v(x) ;\n}\n",
    )
    .unwrap();
    let path = dir.path().join("big.nc");
    let o = Command::new("ncgen")
        .arg("-4")
        .arg("-o")
        .arg(&path)
        .arg(&cdl)
        .output()
        .expect("ncgen (netcdf-bin, installed by .ci/setup)");
    assert!(o.status.success(), "{o:?}");
    let out = dir.path().join("huge_chunks.tet");
    let o = run_capped(tet_convert(&path, &out).args(["--chunk", "v:3000000000"])).unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("more than the 2 GiB one chunk may take"),
        "{err}"
    );
    assert!(!out.exists());
}
