//! The converter binary under stress: killed at random moments, out of file space. The target path
//! holds nothing or a complete, valid file; a clean failure leaves no temporary file behind.

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use tet::format::verify::{verify, Depth};
use tet::format::TetFile;

use common::{only_files, write_npy};

fn convert(input: &Path, output: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tet-convert"));
    c.args([
        "-q",
        "--codec",
        "zstd:3",
        "--jobs",
        "2",
        "--chunk-bytes",
        "256KiB",
    ])
    .arg(input)
    .arg(output)
    .env("SOURCE_DATE_EPOCH", "1700000000")
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    c
}

/// SIGKILL at 50 moments spread over a whole conversion (and past it): each time the target is absent or a
/// complete file identical to an uninterrupted run's output (so it passes `verify --deep`).
#[test]
fn sigkill_at_random_moments_leaves_nothing_or_a_complete_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    write_npy(&input, 4096); // 64 MiB
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    // The reference output and how long a run takes.
    let reference = out_dir.join("reference.tet");
    let t = Instant::now();
    let o = convert(&input, &reference).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let full = t.elapsed();
    let want = std::fs::read(&reference).unwrap();
    let f = TetFile::open(&reference).unwrap();
    assert!(verify(&f, Depth::Deep).ok());
    std::fs::remove_file(&reference).unwrap();

    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let (mut absent, mut complete, mut temp_left) = (0, 0, 0);
    for round in 0..50 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Moments from the start to twice the reference time: on a loaded machine a run may
        // take longer than the reference did, and both outcomes must still occur.
        let at = full.mul_f64((x % 2000) as f64 / 1000.0);
        let target = out_dir.join("out.tet");
        let mut child = convert(&input, &target).spawn().unwrap();
        std::thread::sleep(at);
        let _ = child.kill(); // SIGKILL; fails harmlessly when it already finished
        child.wait().unwrap();
        if target.exists() {
            let got = std::fs::read(&target).unwrap();
            assert!(
                got == want,
                "round {round} ({at:?}): an incomplete or different file"
            );
            complete += 1;
            std::fs::remove_file(&target).unwrap();
        } else {
            absent += 1;
        }
        // A killed run cannot clean up its temporary file; remove it for the next round.
        let left = only_files(&out_dir);
        temp_left += usize::from(!left.is_empty());
        for e in left {
            assert!(
                e.starts_with('.') && e.contains(".tmp"),
                "round {round}: stray {e}"
            );
            std::fs::remove_file(out_dir.join(e)).unwrap();
        }
    }
    eprintln!(
        "50 SIGKILLs over a {full:?} conversion: {absent} times no file at the target, \
         {complete} times the complete file (identical to the uninterrupted output, which passes \
         verify --deep); {temp_left} killed runs left their hidden temporary file"
    );
    // Both outcomes occurred, so the moments did span the write.
    assert!(
        absent > 0 && complete > 0,
        "absent {absent}, complete {complete}"
    );
}

/// Out of file space (RLIMIT_FSIZE below the output size): one clear line, exit 1, no output and
/// no temporary file.
#[test]
fn out_of_space_is_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    write_npy(&input, 512); // 8 MiB
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let target = out_dir.join("out.tet");
    let mut c = convert(&input, &target);
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        c.pre_exec(|| {
            // Writes past the limit fail with EFBIG instead of killing the process.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: 1 << 20,
                rlim_max: 1 << 20,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines().count() == 1 && err.contains("writing") && err.contains("out.tet"),
        "{err}"
    );
    assert!(
        only_files(&out_dir).is_empty(),
        "left behind: {:?}",
        only_files(&out_dir)
    );
    eprintln!(
        "RLIMIT_FSIZE 1 MiB for an 8 MiB input: exit 1, one line ({}), no output, no temporary file",
        err.trim_end()
    );
}
