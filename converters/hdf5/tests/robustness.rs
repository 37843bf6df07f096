//! Damaged inputs: truncations and random byte flips of the corpus files must give `Ok` or
//! `Err` from this crate, never a panic (tests run with overflow checks on).
//!
//! The metadata is parsed by libhdf5 (C), which can crash the whole process on some corrupt
//! files. Each batch therefore runs in a child process (this test binary, re-run on one
//! ignored test); a child that dies from a signal is reported with the mutation that killed it
//! instead of taking the whole test run down. A child that *panics* fails the test: that would
//! be a bug of this crate.

use std::path::{Path, PathBuf};
use std::process::Command;

use tet_hdf5::open_path;
use tet_source::{OpenOptions, Source};
use tet_testkit::{corpus_dir, XorShift};

/// A file of the public HDF5 corpus.
fn corpus(name: &str) -> PathBuf {
    corpus_dir("hdf5").join(name)
}

const FILES: &[&str] = &[
    "structure.h5",
    "dtypes_filters.h5",
    "ext_target.h5",
    "rank9.h5",
];

/// Opens and reads everything; errors are fine.
fn exercise(path: &Path) {
    for skip in [false, true] {
        let opts = OpenOptions {
            skip_unsupported: skip,
            follow_external: skip,
            ..OpenOptions::default()
        };
        let Ok(src) = open_path(path, &opts) else {
            continue;
        };
        for (i, v) in src.variables().iter().enumerate() {
            let _ = src.file_extent(i);
            let Some(len) = v.byte_len() else { continue };
            if len <= 1 << 24 {
                let mut out = vec![0u8; len as usize];
                let start = vec![0; v.shape.len()];
                let _ = src.read_region(i, &start, &v.shape, &mut out);
            }
            let mut one = vec![0u8; v.dtype.size()];
            assert!(src
                .read_region(i, &v.shape, &vec![1; v.shape.len()], &mut one)
                .is_err());
        }
        let _ = src.read_region(src.variables().len(), &[0], &[1], &mut [0u8; 8]);
    }
}

/// The mutations of one batch: (label, bytes).
fn mutations(file: &str, kind: &str) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(corpus(file)).unwrap();
    let mut out = Vec::new();
    match kind {
        "truncate" => {
            // Every length inside the first 4 KiB (superblock, root group, most headers), then
            // a stride through the rest.
            let mut len = 0;
            while len < bytes.len() {
                out.push((format!("{file} truncated to {len}"), bytes[..len].to_vec()));
                len += if len < 4096 { 1 } else { 97 };
            }
        }
        _ => {
            let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ bytes.len() as u64);
            for round in 0..300 {
                // 1 to 4 bytes set, each one half the time in the first 4 KiB (the metadata).
                let (b, changes) = rng.damage(&bytes, 4096);
                let what: Vec<String> = changes
                    .iter()
                    .map(|(pos, val)| format!("{pos}={val:#04x}"))
                    .collect();
                out.push((format!("{file} flip round {round}: {}", what.join(",")), b));
            }
        }
    }
    out
}

/// Child side: runs one batch, from mutation `from` on. Prints each label before trying it,
/// so that the parent knows which one crashed.
#[test]
#[ignore]
fn child_batch() {
    let Ok(spec) = std::env::var("TET_HDF5_BATCH") else {
        return;
    };
    let mut parts = spec.split(':');
    let file = parts.next().unwrap();
    let kind = parts.next().unwrap();
    let from: usize = parts.next().unwrap().parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The external link target sits next to the mutated files, as in the corpus.
    std::fs::copy(corpus("ext_target.h5"), dir.path().join("ext_target.h5")).unwrap();
    println!();
    for (k, (label, bytes)) in mutations(file, kind).into_iter().enumerate().skip(from) {
        println!("TRY {k} {label}");
        let p: PathBuf = dir.path().join(format!("m{k}.h5"));
        std::fs::write(&p, &bytes).unwrap();
        exercise(&p);
        let _ = std::fs::remove_file(&p);
    }
    println!("DONE");
}

/// Runs a batch in child processes, restarting after any crash or hang; returns them.
fn run_batch(file: &str, kind: &str) -> Vec<String> {
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};
    let exe = std::env::current_exe().unwrap();
    let total = mutations(file, kind).len();
    let logs = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    let mut from = 0;
    let mut attempt = 0;
    while from < total {
        attempt += 1;
        let log = logs.path().join(format!("out{attempt}.txt"));
        let err = logs.path().join(format!("err{attempt}.txt"));
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                tet_testkit::layout::test_name(module_path!(), "child_batch").as_str(),
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TET_HDF5_BATCH", format!("{file}:{kind}:{from}"))
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        // Kill a child that makes no progress for 10 s (a hang inside libhdf5).
        let mut last_len = 0;
        let mut last_change = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            let len = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
            if len != last_len {
                last_len = len;
                last_change = Instant::now();
            } else if last_change.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = std::fs::read_to_string(&log).unwrap_or_default();
        if stdout.contains("DONE") && status.is_some_and(|s| s.success()) {
            break;
        }
        let Some(last) = stdout
            .lines()
            .rev()
            .find_map(|l| l.find("TRY ").map(|p| &l[p..]))
        else {
            panic!(
                "child failed before any mutation: {}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        };
        let k: usize = last.split(' ').nth(1).unwrap().parse().unwrap();
        match status {
            None => problems.push(format!("hang: {}", &last[4..])),
            Some(st) => match st.signal() {
                Some(sig) => problems.push(format!("signal {sig}: {}", &last[4..])),
                None => panic!(
                    "panic or failure on {}:\n{}",
                    &last[4..],
                    std::fs::read_to_string(&err).unwrap_or_default()
                ),
            },
        }
        from = k + 1;
    }
    problems
}

fn report(kind: &str) {
    let mut all = Vec::new();
    for f in FILES {
        all.extend(run_batch(f, kind));
    }
    if !all.is_empty() {
        eprintln!("libhdf5 crashed or hung on {} {kind} mutations:", all.len());
        for c in &all {
            eprintln!("  {c}");
        }
    }
}

#[test]
fn truncations_never_panic() {
    report("truncate");
}

#[test]
fn byte_flips_never_panic() {
    report("flip");
}

#[test]
fn not_hdf5_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        ("empty.h5", &b""[..]),
        ("short.h5", &b"\x89HDF"[..]),
        ("text.h5", &b"hello, this is not an HDF5 file at all"[..]),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let e = open_path(&p, &OpenOptions::default()).unwrap_err();
        assert!(!e.to_string().contains('\n'), "one-line error: {e}");
    }
    assert!(open_path(&dir.path().join("missing.h5"), &OpenOptions::default()).is_err());
}

/// A cut file is refused as truncated by the superblock's end-of-file address before libhdf5
/// parses it (libhdf5 makes the same test, after reading the superblock itself).
#[test]
fn truncations_are_refused_before_the_library_opens_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for f in FILES.iter().chain(&["large.h5"]) {
        let bytes = std::fs::read(corpus(f)).unwrap();
        for len in [8, 9, 30, 64, 512, bytes.len() / 2, bytes.len() - 1] {
            let p = dir.path().join("cut.h5");
            std::fs::write(&p, &bytes[..len]).unwrap();
            let e = open_path(&p, &OpenOptions::default()).unwrap_err();
            assert!(
                e.to_string().contains("truncated HDF5 file"),
                "{f} cut to {len}: {e}"
            );
        }
    }
    // What the superblock says, for each version this reads.
    use tet_hdf5::{superblock_end_of_file, SuperblockEnd};
    let v0 = std::fs::read(corpus("structure.h5")).unwrap();
    assert_eq!(
        superblock_end_of_file(&v0),
        SuperblockEnd::At(v0.len() as u64)
    );
    let mut v2 = b"\x89HDF\r\n\x1a\n\x02\x08\x08\x00".to_vec();
    v2.extend(0u64.to_le_bytes()); // base
    v2.extend(u64::MAX.to_le_bytes()); // no extension
    v2.extend(4096u64.to_le_bytes()); // end of file
    assert_eq!(superblock_end_of_file(&v2), SuperblockEnd::At(4096));
    assert_eq!(superblock_end_of_file(&v2[..35]), SuperblockEnd::CutOff);
    // After a 512-byte user block.
    let mut ub = vec![0u8; 512];
    ub.extend(&v2);
    assert_eq!(superblock_end_of_file(&ub), SuperblockEnd::At(4096));
    // An unknown version, 4-byte addresses, no signature: nothing to say.
    let mut v9 = v2.clone();
    v9[8] = 9;
    assert_eq!(superblock_end_of_file(&v9), SuperblockEnd::Unknown);
    let mut small = v2.clone();
    small[9] = 4;
    assert_eq!(superblock_end_of_file(&small), SuperblockEnd::Unknown);
    assert_eq!(
        superblock_end_of_file(b"not hdf5 at all"),
        SuperblockEnd::Unknown
    );
}

/// Reads every variable of a file whole (variables up to 16 MiB).
fn read_everything(path: &Path) -> Vec<Option<Vec<u8>>> {
    let src = open_path(path, &OpenOptions::default()).unwrap();
    tet_testkit::read_each_whole(&src, 16 << 20)
}

/// Several threads opening and reading the same files at once get the same values as one thread
/// alone. Regression: interleaved walks of a file with a vlen-string dataset (the netCDF-4
/// corpus file) crashed inside libhdf5 before each walk held the library lock.
#[test]
fn concurrent_opens_of_one_file_agree() {
    let mut files: Vec<PathBuf> = FILES.iter().map(|f| corpus(f)).collect();
    files.push(corpus_dir("netcdf").join("nc4_groups_types.nc"));
    let want: Vec<_> = files.iter().map(|f| read_everything(f)).collect();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..25 {
                    for (f, want) in files.iter().zip(&want) {
                        assert!(read_everything(f) == *want, "{}", f.display());
                    }
                }
            });
        }
    });
}
