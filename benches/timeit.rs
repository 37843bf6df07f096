//! Times one shell command for the benchmark scripts where GNU time may be missing (the lent
//! benchmark machine of `benches/device.sh`): runs `sh -c CMD`, waits for it, and prints one line
//! `wall_s user_s sys_s maxrss_kib exit_code` — wall seconds, the CPU seconds and the largest
//! resident set (KiB) of the command and every child it waited for. Usage: `timeit 'CMD'`.

use std::process::Command;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: timeit 'shell command'");
        std::process::exit(2);
    }
    let start = Instant::now();
    let status = Command::new("sh").arg("-c").arg(args.join(" ")).status();
    let wall = start.elapsed().as_secs_f64();
    let code = match status {
        Ok(s) => s.code().unwrap_or(-1),
        Err(e) => {
            eprintln!("timeit: cannot run sh: {e}");
            std::process::exit(2);
        }
    };
    // SAFETY: `usage` is a zero-initialised `rusage`, a plain C struct; getrusage only writes it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    println!(
        "{wall:.3} {:.3} {:.3} {} {code}",
        secs(usage.ru_utime),
        secs(usage.ru_stime),
        usage.ru_maxrss
    );
}
