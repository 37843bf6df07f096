//! Signals as a scheduler sends them. SIGTERM (Slurm, Kubernetes, `timeout`) and SIGINT (Ctrl-C)
//! set a flag that the batch runner and the conversion loop poll: no new input is taken, running
//! conversions stop between two chunks (their temporary files removed), workers are stopped, the
//! ledger gets its last row and the process exits 128 + the signal (143, 130). A second signal of
//! either kind exits at once. SIGXFSZ is ignored, so a file-size limit (`ulimit -f`, `prlimit
//! --fsize`) is an ordinary write error (EFBIG) with a clear message instead of a silent death.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};

static RECEIVED: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// Installs the handlers (idempotent). Call once at program start.
pub fn install() {
    // SAFETY: setting a signal's disposition to SIG_IGN is async-signal-safe and touches no Rust
    // state; SIGXFSZ has no other handler in this program.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    RECEIVED.get_or_init(|| {
        let flag = Arc::new(AtomicUsize::new(0));
        for sig in [SIGTERM, SIGINT] {
            // A second signal while the first is being handled exits at once (128 + signal).
            let second = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let _ =
                signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, second.clone());
            let _ = signal_hook::flag::register(sig, second);
            let _ = signal_hook::flag::register_usize(sig, flag.clone(), sig as usize);
        }
        flag
    });
}

/// The signal received (SIGTERM or SIGINT), if any.
pub fn pending() -> Option<i32> {
    let n = RECEIVED.get()?.load(Ordering::Relaxed);
    (n != 0).then_some(n as i32)
}

/// The exit code for a run stopped by `sig` (143 for SIGTERM, 130 for SIGINT).
pub fn exit_code(sig: i32) -> u8 {
    u8::try_from(128 + sig).unwrap_or(1)
}

/// `SIGSEGV`-style name of a signal number.
pub fn name(sig: i32) -> String {
    let known = [
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    known
        .iter()
        .find(|(n, _)| *n == sig)
        .map_or_else(|| format!("signal {sig}"), |(_, s)| (*s).to_string())
}
