//! A batch of many small files killed with SIGKILL at random moments (issue 34): the supervisor,
//! a worker, or all of them. The batch makes small outputs durable as a group (the supervisor
//! syncs the finished temporary files together, renames them, syncs each folder once, and only
//! then writes their `ok` rows), so this checks what that must not weaken: after every kill each
//! output path is absent or holds the whole file (it passes deep verification and holds the
//! input's values), every ledger row that says `ok` names such a file, and a later run over the
//! same folder finishes the batch, leaving no temporary file behind.
//!
//! What this proves: the output names only ever point at complete files, whatever moment the
//! processes die; a row is written only after its file is in place; temporary files of killed
//! writers are removed by the next run. What it cannot prove: durability across a power cut (a
//! process kill leaves the page cache intact, so a file that was renamed but never synced would
//! pass here too). That part rests on the order the supervisor follows — every file fsynced before
//! any rename, each folder fsynced before the rows are written — which `strace` shows
//! (BENCHMARKS.md, issue 34).

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tet::format::verify::{verify, Depth};
use tet::format::TetFile;

use common::npy_bytes;

const FILES: usize = 240;
const FOLDERS: usize = 6;

/// The values of input `k`: 992 f32 (a 4 KiB NPY file).
fn values(k: usize) -> Vec<u8> {
    (0..992u32)
        .flat_map(|i| ((k as f32) * 1000.0 + i as f32 * 0.25).to_le_bytes())
        .collect()
}

fn rel(k: usize) -> PathBuf {
    PathBuf::from(format!("d{}", k % FOLDERS)).join(format!("s{k:04}"))
}

fn batch(dir: &Path, ledger: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tet-convert"));
    c.args([
        "-q",
        "in",
        "--out-dir",
        "out",
        "--workers",
        "2",
        "--report",
        ledger,
    ])
    .current_dir(dir)
    .env("SOURCE_DATE_EPOCH", "1700000000")
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    // Its own process group: the workers are in it too, so the test can wait for them all.
    .process_group(0);
    c
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) on a pid (or process group) this test started; a stale pid at worst
    // gives ESRCH.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Waits until no process of group `pgid` is left (workers die with their supervisor).
fn wait_group(pgid: i32) {
    let until = Instant::now() + Duration::from_secs(20);
    // SAFETY: kill with signal 0 only checks for existence.
    while unsafe { libc::kill(-pgid, 0) } == 0 {
        assert!(Instant::now() < until, "workers outlived their supervisor");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The worker processes of `pid` (its children).
fn children(pid: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Checks every `.tet` under `out`: whole, verified and holding its input's values. Returns
/// them, and the temporary files found.
fn check_outputs(out: &Path, round: &str) -> (Vec<PathBuf>, usize) {
    let mut found = Vec::new();
    let mut temps = 0;
    for k in 0..FILES {
        let p = out.join(rel(k)).with_extension("tet");
        if p.exists() {
            let f = TetFile::open(&p).unwrap_or_else(|e| panic!("{round}: {}: {e}", p.display()));
            let r = verify(&f, Depth::Deep);
            assert!(r.ok(), "{round}: {} fails verification", p.display());
            assert_eq!(
                f.read_dataset(0).unwrap(),
                values(k),
                "{round}: {}",
                p.display()
            );
            found.push(p);
        }
    }
    for d in 0..FOLDERS {
        let Ok(entries) = std::fs::read_dir(out.join(format!("d{d}"))) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tet") {
                continue;
            }
            assert!(
                name.starts_with('.') && name.ends_with(".tet-convert.tmp"),
                "{round}: stray file {name}"
            );
            temps += 1;
        }
    }
    (found, temps)
}

/// The outputs the ledger says were converted (`ok`).
fn ok_rows(ledger: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(ledger).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["kind"] == "input" && r["status"] == "ok")
        .map(|r| PathBuf::from(r["output"].as_str().unwrap()))
        .collect()
}

#[test]
fn sigkill_during_a_small_file_batch_leaves_only_whole_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for k in 0..FILES {
        let p = root.join("in").join(rel(k)).with_extension("npy");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (992,), }";
        std::fs::write(&p, npy_bytes(dict, &values(k))).unwrap();
    }
    // How long an uninterrupted batch takes here.
    let t = Instant::now();
    let st = batch(root, "full.jsonl").status().unwrap();
    assert!(st.success());
    let full = t.elapsed();
    let (all, temps) = check_outputs(&root.join("out"), "uninterrupted");
    assert_eq!((all.len(), temps), (FILES, 0));
    assert_eq!(ok_rows(&root.join("full.jsonl")).len(), FILES);

    let mut x: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seed {x:#x}; an uninterrupted batch of {FILES} files takes {full:?}");
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let rounds = 12;
    let (mut mid_batch, mut temps_seen) = (0, 0);
    for round in 0..rounds {
        // Every third round resumes over what the killed run before it left (up-to-date
        // outputs, temporary files of killed writers); the others start from an empty folder.
        if round % 3 != 2 {
            let _ = std::fs::remove_dir_all(root.join("out"));
        }
        let ledger = format!("r{round}.jsonl");
        let at = full.mul_f64((next() % 1000) as f64 / 1000.0);
        let mut child = batch(root, &ledger).spawn().unwrap();
        let pid = child.id();
        std::thread::sleep(at);
        let how = match round % 3 {
            0 => {
                signal(pid as i32, libc::SIGKILL);
                "the supervisor"
            }
            1 => {
                // A worker first (its job fails, it is replaced), then the supervisor.
                if let Some(&w) = children(pid).first() {
                    signal(w, libc::SIGKILL);
                }
                std::thread::sleep(full.mul_f64((next() % 300) as f64 / 1000.0));
                signal(pid as i32, libc::SIGKILL);
                "a worker, then the supervisor"
            }
            _ => {
                signal(-(pid as i32), libc::SIGKILL);
                "every process at once"
            }
        };
        let _ = child.wait();
        wait_group(pid as i32);
        let name = format!("round {round} (killed {how} after {at:?})");
        let (found, temps) = check_outputs(&root.join("out"), &name);
        temps_seen += temps;
        let ok = ok_rows(&root.join(&ledger));
        for p in &ok {
            let p = root.join(p);
            assert!(
                found.contains(&p),
                "{name}: an ok row names {}, which is not whole",
                p.display()
            );
        }
        if !found.is_empty() && found.len() < FILES {
            mid_batch += 1;
        }
        eprintln!(
            "{name}: {} outputs whole, {} ok rows, {temps} temporary files",
            found.len(),
            ok.len()
        );
    }
    assert!(mid_batch > 0, "no kill landed in the middle of a batch");

    // A run over what the last kill left finishes the batch and removes the dead writers'
    // temporary files.
    let st = batch(root, "last.jsonl").status().unwrap();
    assert!(st.success());
    let (all, temps) = check_outputs(&root.join("out"), "the run after");
    assert_eq!((all.len(), temps), (FILES, 0));
    eprintln!(
        "{rounds} kills: {mid_batch} in the middle of a batch; {temps_seen} temporary files of \
         killed writers seen, none left by the run after"
    );
}
