//! Truncated and bit-flipped corpus files: opening and reading never panics, and whatever opens
//! never delivers different values than the intact file (no silently zero-filled tails).

use crate::common;

use common::corpus_files;
use tet_netcdf::{open_bytes, open_path, Container};
use tet_source::{OpenOptions, Source};

/// Reads every variable whole; returns the bytes of those that read. Variables larger than
/// 16 MiB are left out: a flipped bit can make a dimension huge, and a netCDF-4 variable of
/// unallocated chunks legitimately reads as fill values, however large.
fn read_everything(src: &dyn Source) -> Vec<Option<Vec<u8>>> {
    tet_testkit::read_each_whole(src, 16 << 20)
}

fn options() -> [OpenOptions; 2] {
    [
        OpenOptions::default(),
        OpenOptions {
            unpack: true,
            skip_unsupported: true,
            ..OpenOptions::default()
        },
    ]
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn every_truncation_is_refused_or_exact() {
    for f in corpus_files() {
        let bytes = std::fs::read(&f).unwrap();
        let full = open_bytes(bytes.clone(), &OpenOptions::default()).unwrap();
        let want = read_everything(&full);
        let classic = Container::sniff(&bytes).is_some_and(|c| c != Container::Hdf5);
        // Classic files: every length. netCDF-4 files: a spread of lengths.
        let step = if classic { 1 } else { 61 };
        let mut lens: Vec<usize> = (0..bytes.len()).step_by(step).collect();
        lens.extend(bytes.len().saturating_sub(16)..bytes.len());
        for len in lens {
            for opts in options() {
                let Ok(src) = open_bytes(bytes[..len].to_vec(), &opts) else {
                    continue;
                };
                let got = read_everything(&src);
                if opts == OpenOptions::default() && src.variables() == full.variables() {
                    for (g, w) in got.iter().zip(&want) {
                        if let Some(g) = g {
                            assert_eq!(
                                Some(g),
                                w.as_ref(),
                                "{} cut to {len} bytes reads different values",
                                f.display()
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn classic_truncations_are_refused_through_the_file_path() {
    let dir = tempfile::tempdir().unwrap();
    for f in corpus_files() {
        let bytes = std::fs::read(&f).unwrap();
        if Container::sniff(&bytes) == Some(Container::Hdf5) {
            continue;
        }
        // (The last 1–3 bytes may be record padding, which nothing reads.)
        for cut in [4usize, 100] {
            let p = dir.path().join("cut.nc");
            std::fs::write(&p, &bytes[..bytes.len() - cut]).unwrap();
            let e = open_path(&p, &OpenOptions::default()).unwrap_err();
            assert!(
                e.to_string().contains("truncated"),
                "{} minus {cut}: {e}",
                f.display()
            );
        }
    }
}

/// A cut netCDF-4 file is refused as truncated (by the superblock's end-of-file address) before
/// netCDF-C sees it, which would only say "HDF error"; through the path and from memory.
#[test]
fn netcdf4_truncations_are_refused_as_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for f in corpus_files() {
        let bytes = std::fs::read(&f).unwrap();
        if Container::sniff(&bytes) != Some(Container::Hdf5) {
            continue;
        }
        for len in [8, 9, 30, 64, 512, bytes.len() / 2, bytes.len() - 1] {
            let p = dir.path().join("cut.nc");
            std::fs::write(&p, &bytes[..len]).unwrap();
            for e in [
                open_path(&p, &OpenOptions::default()).unwrap_err(),
                open_bytes(bytes[..len].to_vec(), &OpenOptions::default()).unwrap_err(),
            ] {
                assert!(
                    e.to_string().contains("truncated netCDF-4 file"),
                    "{} cut to {len}: {e}",
                    f.display()
                );
            }
            checked += 1;
        }
        // The whole file still opens.
        open_path(&f, &OpenOptions::default()).unwrap();
    }
    assert!(checked >= 14, "{checked}");
}

/// `n` mutants of `bytes`: 1–4 random bit flips each, within the first `span` bytes.
fn mutants(bytes: &[u8], span: usize, n: usize, rng: &mut Rng) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let mut b = bytes.to_vec();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(span.min(b.len()));
                b[at] ^= 1 << rng.below(8);
            }
            b
        })
        .collect()
}

fn open_and_read(b: &[u8]) {
    for opts in options() {
        if let Ok(src) = open_bytes(b.to_vec(), &opts) {
            read_everything(&src);
            let _ = src.text_variables();
        }
    }
}

/// Classic files, in process: the header (where flips matter) is validated before netCDF-C
/// sees it.
#[test]
fn random_byte_flips_in_classic_files() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for f in corpus_files() {
        let bytes = std::fs::read(&f).unwrap();
        if Container::sniff(&bytes) == Some(Container::Hdf5) {
            continue;
        }
        for m in mutants(&bytes, 1024, 800, &mut rng) {
            open_and_read(&m);
        }
    }
}

/// netCDF-4 files, in child processes. Corrupt HDF5 metadata can make libhdf5 itself loop
/// (seen: a flipped vlen length in a `DIMENSION_LIST` attribute keeps 1.10.8 busy in
/// `H5DSget_num_scales` for minutes) or crash; no in-process guard can stop C code, so each
/// batch runs in a child with a watchdog. A Rust panic or an allocation failure in the child
/// fails the test; library hangs and crashes are counted and reported.
#[test]
fn random_byte_flips_in_netcdf4_files() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let mut rng = Rng(0x51_7cc1_b727_220a);
    let dir = tempfile::tempdir().unwrap();
    let mut count = 0usize;
    for f in corpus_files() {
        let bytes = std::fs::read(&f).unwrap();
        if Container::sniff(&bytes) != Some(Container::Hdf5) {
            continue;
        }
        for m in mutants(&bytes, bytes.len(), 120, &mut rng) {
            std::fs::write(dir.path().join(format!("m{count:05}.nc")), m).unwrap();
            count += 1;
        }
    }
    let exe = std::env::current_exe().unwrap();
    let (mut next, mut hangs, mut crashes) = (0usize, Vec::new(), Vec::new());
    while next < count {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                tet_testkit::layout::test_name(module_path!(), "open_mutants_child").as_str(),
                "--ignored",
                "--nocapture",
            ])
            .arg("--test-threads=1")
            .env("TET_NC_MUTANTS", dir.path())
            .env("TET_NC_START", next.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(i) = line.strip_prefix("mutant-done ") {
                    let _ = tx.send(i.trim().parse::<usize>().unwrap());
                }
            }
        });
        let mut last = Instant::now();
        let status = loop {
            while let Ok(i) = rx.try_recv() {
                next = i + 1;
                last = Instant::now();
            }
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            if last.elapsed() > Duration::from_secs(30) {
                child.kill().unwrap();
                child.wait().unwrap();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        reader.join().unwrap();
        while let Ok(i) = rx.try_recv() {
            next = i + 1;
        }
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(
            !err.contains("panicked") && !err.contains("memory allocation"),
            "mutant {next}: {err}"
        );
        match status {
            Some(st) if st.success() => {}
            Some(st) => {
                assert_ne!(
                    st.code(),
                    Some(101),
                    "mutant {next}: the child test failed: {err}"
                );
                crashes.push(next);
                next += 1;
            }
            None => {
                hangs.push(next);
                next += 1;
            }
        }
    }
    eprintln!(
        "{count} netCDF-4 mutants: libhdf5 hung on {:?}, crashed on {:?}",
        hangs, crashes
    );
}

/// The child side of [`random_byte_flips_in_netcdf4_files`].
#[test]
#[ignore = "run by random_byte_flips_in_netcdf4_files in a child process"]
fn open_mutants_child() {
    let Ok(dir) = std::env::var("TET_NC_MUTANTS") else {
        return;
    };
    let start: usize = std::env::var("TET_NC_START").unwrap().parse().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for (i, p) in files.iter().enumerate().skip(start) {
        open_and_read(&std::fs::read(p).unwrap());
        println!("mutant-done {i}");
    }
}

/// Several threads opening and reading the same netCDF-4 files at once (as tests and library
/// users do) get the same values as one thread alone. Regression: interleaved opens of a file
/// with a vlen-string variable crashed inside libhdf5 before each open held the library lock.
#[test]
fn concurrent_opens_of_one_file_agree() {
    let files = corpus_files();
    let want: Vec<_> = files
        .iter()
        .map(|f| read_everything(&open_path(f, &OpenOptions::default()).unwrap()))
        .collect();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..25 {
                    for (f, want) in files.iter().zip(&want) {
                        let src = open_path(f, &OpenOptions::default()).unwrap();
                        assert!(read_everything(&src) == *want, "{}", f.display());
                    }
                }
            });
        }
    });
}
