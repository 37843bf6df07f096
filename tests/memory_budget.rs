//! `--memory-budget` as a promise about the process (issue 34): a conversion at `--jobs 64`
//! peaks within the budget in resident memory — chunk data, mapped input pages, thread stacks,
//! zstd contexts, allocator arenas and the binary together — and its output is byte for byte the
//! output of `--jobs 2` and of another budget. Peak RSS is the child's own (`wait4`'s
//! `ru_maxrss`). The 1 GiB figure is in BENCHMARKS.md (`benches/budget.py`, `benches/device.sh`).

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs tet-convert on `input` → `output` with `args`; returns its peak resident set in bytes.
// The child is reaped by wait4 (for its rusage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn peak_rss(input: &Path, output: &Path, args: &[&str]) -> u64 {
    // The child's high-water mark starts from this process's (the exec replaces a memory map
    // shared with, or copied from, this one, and its peak is kept): bring this process's peak
    // down to what it holds now (it wrote the input). Linux ≥ 4.0.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tet-convert"))
        .args(["-q", "--codec", "zstd:3", "--chunk-bytes", "1MiB"])
        .args(args)
        .arg(input)
        .arg(output)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: `usage` is a zeroed plain C struct that wait4 fills; the pid is our unreaped child.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let pid = libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage);
        assert_eq!(pid, child.id() as libc::pid_t);
        usage
    };
    let st = std::process::ExitStatus::from_raw(status);
    assert!(st.success(), "tet-convert {args:?}: {st}");
    // Linux reports ru_maxrss in KiB.
    u64::try_from(usage.ru_maxrss).unwrap() * 1024
}

/// Set in the process that measures (see the test below).
const ALONE: &str = "TET_MEMORY_BUDGET_ALONE";

/// A child's peak RSS starts from this process's resident memory (see `peak_rss`), and in the
/// one test binary (issue 31) the other tests running beside this one hold memory too: the
/// measurement runs in a process of its own, the test binary re-run for this test alone.
#[test]
fn peak_rss_stays_within_the_budget_at_64_jobs() {
    if std::env::var_os(ALONE).is_none() {
        let name = tet_testkit::layout::test_name(
            module_path!(),
            "peak_rss_stays_within_the_budget_at_64_jobs",
        );
        let o = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name.as_str(), "--test-threads=1", "--nocapture"])
            .env(ALONE, "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success() && text.contains("1 passed"), "{text}");
        eprint!("{text}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    common::write_npy(&input, 8192); // 128 MiB of f32
    let mib = 1u64 << 20;
    let mut outputs = Vec::new();
    for (jobs, budget) in [(64, 96u64), (64, 128), (2, 128)] {
        let out = dir.path().join(format!("j{jobs}-b{budget}.tet"));
        let b = format!("{budget}MiB");
        let peak = peak_rss(
            &input,
            &out,
            &["--jobs", &jobs.to_string(), "--memory-budget", &b],
        );
        eprintln!(
            "--jobs {jobs} --memory-budget {budget}MiB: peak RSS {:.1} MiB",
            peak as f64 / mib as f64
        );
        assert!(
            peak <= budget * mib,
            "--jobs {jobs}: peak RSS {peak} bytes over the {budget} MiB budget"
        );
        outputs.push(std::fs::read(&out).unwrap());
    }
    // The bytes depend neither on the threads nor on the budget.
    assert!(outputs.windows(2).all(|w| w[0] == w[1]));
    let v = tet::format::deep_verify(&dir.path().join("j64-b96.tet")).unwrap();
    assert!(v.chunks == 128 && v.checked == v.chunks, "{v:?}");
}
