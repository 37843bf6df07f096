//! Supervised worker processes: the same binary re-executed as `PROGRAM --tet-worker`, a small
//! pool of long-lived workers fed one job at a time over a pipe (JSON lines: a [`WireJob`] in;
//! a stage message, then the [`Outcome`], out). A worker killed by a signal (libhdf5's SIGSEGV,
//! a heap-corruption SIGABRT), one that exits without an answer, or one still busy after the
//! per-input timeout (killed) costs its input a `failed` row naming what happened and where —
//! `crashed: SIGSEGV in the NetCDF 3/4 importer`, `timed out after 600 s` — and is replaced; the
//! run goes on. Temporary files of a dead worker are removed ([`super::stale`]).
//!
//! Small outputs are made durable as a group (issue 34): a worker leaves a finished output of
//! at most `GROUP_FILE_MAX` (8 MiB) unsynced under its temporary name and names it in its answer,
//! the file's lock shared with the supervisor; the supervisor fsyncs a group of them, renames
//! each over its target, fsyncs each folder once, and only then gives their outcomes (the `ok`
//! ledger rows). RELIABILITY.md has the argument and the kill test.
//!
//! Workers die with their supervisor (`PR_SET_PDEATHSIG`), and exit when their input pipe closes.
//! A worker's standard output is the protocol; anything a library prints there is moved to
//! standard error, which the worker shares with its supervisor (logs, progress bars).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::job::{execute, Outcome, WireJob};
use super::ledger::{InputRow, Status};
use super::{signals, stale};
use tet::format::writer;

/// The first argument that makes either binary a worker.
pub const WORKER_FLAG: &str = "--tet-worker";

/// What a worker says.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
enum Msg {
    /// The input was identified: a crash from here on is blamed on this importer.
    Stage { importer: String },
    /// The job's outcome; with `pending`, an `ok` whose output waits for the group commit.
    Done {
        outcome: Box<Outcome>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pending: Vec<WirePending>,
    },
}

/// An output a worker finished and left to its supervisor to commit: whole, unsynced, under
/// its temporary name, with a shared `flock` on it (see [`tet::format::writer::defer_commits`]).
#[derive(Debug, Serialize, Deserialize)]
struct WirePending {
    temp: super::job::WirePath,
    target: super::job::WirePath,
    len: u64,
}

/// Outputs up to this size are committed as a group; larger ones are synced and renamed by
/// their worker as before (their own write dwarfs two fsyncs, and the supervisor stays free).
const GROUP_FILE_MAX: u64 = 8 << 20;
/// A group is committed once it holds this many outputs, this many bytes, or its oldest output
/// has waited this long — or when no job is running.
const GROUP_FILES: usize = 256;
const GROUP_BYTES: u64 = 64 << 20;
const GROUP_AGE: Duration = Duration::from_millis(1000);

/// Whether a job's output may wait for the group commit: a local file from one input (object
/// outputs are uploaded from the finished file; combined jobs keep their own path).
fn group_committable(job: &WireJob) -> bool {
    let local =
        |p: Result<PathBuf, super::job::WireError>| p.is_ok_and(|p| !tet::storage::is_url(&p));
    job.settings.concat.is_none() && local(job.input.path()) && local(job.output.path())
}

/// A finished output the supervisor holds (its shared lock in `file`) until the group commit.
struct Uncommitted {
    index: usize,
    outcome: Outcome,
    temp: PathBuf,
    target: PathBuf,
    file: std::fs::File,
    len: u64,
    since: Instant,
}

/// The worker's main loop: jobs from standard input, messages to the protocol descriptor.
pub fn worker_main() -> std::process::ExitCode {
    signals::install();
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process; the argument is a valid
    // signal number.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    }
    let Some(mut proto) = protocol_channel() else {
        eprintln!("tet worker: cannot set up the protocol pipe");
        return std::process::ExitCode::from(1);
    };
    let stdin = std::io::stdin().lock();
    // Outputs handed over with the last answer, their lock shared with the supervisor: kept
    // open until the next job comes, which the supervisor sends only after it holds them.
    let mut handed: Vec<std::fs::File> = Vec::new();
    for line in stdin.lines() {
        handed.clear();
        let Ok(line) = line else { break };
        let outcome = match serde_json::from_str::<WireJob>(&line) {
            Ok(job) => {
                writer::defer_commits(if group_committable(&job) {
                    GROUP_FILE_MAX
                } else {
                    0
                });
                let mut hook = |importer: &str| {
                    let _ = send(
                        &mut proto,
                        &Msg::Stage {
                            importer: importer.to_owned(),
                        },
                    );
                };
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    execute(&job, &mut hook)
                }));
                run.unwrap_or_else(|p| {
                    let what = tet_source::panic_text(&*p);
                    let mut o = Outcome::default();
                    o.row.status = Some(Status::Failed);
                    o.row.reason = Some(format!("internal error (panic): {what}"));
                    o
                })
            }
            Err(e) => {
                let mut o = Outcome::default();
                o.row.status = Some(Status::Failed);
                o.row.reason = Some(format!("bad job from the supervisor: {e}"));
                o
            }
        };
        let mut pending = Vec::new();
        for d in writer::take_deferred() {
            // One output per job; anything else (a failure after the file was finished) is
            // removed, its lock still held so no cleaner races us.
            if outcome.row.status() == Status::Ok && pending.is_empty() {
                // Shared, so the supervisor can take it too before this process lets go.
                if d.file.lock_shared().is_ok() {
                    pending.push(WirePending {
                        temp: super::job::WirePath::of(&d.temp),
                        target: super::job::WirePath::of(&d.target),
                        len: d.len,
                    });
                    handed.push(d.file);
                    continue;
                }
            }
            let _ = std::fs::remove_file(&d.temp);
        }
        if send(
            &mut proto,
            &Msg::Done {
                outcome: Box::new(outcome),
                pending,
            },
        )
        .is_err()
        {
            break;
        }
    }
    std::process::ExitCode::SUCCESS
}

/// Moves the protocol off standard output: returns a handle on a duplicate of it and points
/// descriptor 1 at standard error, so stray prints of C libraries cannot corrupt the protocol.
fn protocol_channel() -> Option<std::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: dup and dup2 on the process's own standard descriptors; the duplicate returned by
    // dup is a fresh descriptor that nothing else owns, so the File may take ownership of it.
    unsafe {
        let fd = libc::dup(1);
        if fd < 0 {
            return None;
        }
        if libc::dup2(2, 1) < 0 {
            libc::close(fd);
            return None;
        }
        Some(std::fs::File::from_raw_fd(fd))
    }
}

fn send(w: &mut std::fs::File, m: &Msg) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(m).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)
}

/// A job a worker is busy with.
struct Busy {
    index: usize,
    job: WireJob,
    started: Instant,
    importer: Option<String>,
    timed_out: bool,
}

struct Slot {
    child: Child,
    /// What the worker wrote to standard error that is not a log line of ours (when captured).
    stray: Arc<Mutex<Vec<String>>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    stdin: Option<ChildStdin>,
    /// Distinguishes this child's messages from an earlier one's in the same slot.
    generation: u64,
    busy: Option<Busy>,
    dead: bool,
}

enum Event {
    Msg(Msg),
    Eof,
}

/// A pool of worker processes.
pub struct Pool {
    exe: PathBuf,
    args: Vec<String>,
    slots: Vec<Slot>,
    next_generation: u64,
    tx: Sender<(usize, u64, Event)>,
    rx: Receiver<(usize, u64, Event)>,
    timeout: Option<Duration>,
    capture_stderr: bool,
    /// Finished outputs waiting for the group commit, in the order they finished.
    uncommitted: Vec<Uncommitted>,
}

impl Pool {
    /// `size` workers of the program `exe` (started as `exe --tet-worker ARGS…`), each job
    /// limited to `timeout` of wall time.
    pub fn new(
        size: usize,
        exe: PathBuf,
        args: Vec<String>,
        timeout: Option<Duration>,
    ) -> std::io::Result<Pool> {
        let (tx, rx) = channel();
        let mut pool = Pool {
            exe,
            args,
            slots: Vec::with_capacity(size),
            next_generation: 0,
            tx,
            rx,
            timeout,
            // On a terminal the workers draw progress bars there; elsewhere (cron, Slurm) their
            // standard error is read, so a C library's dying words end up in the input's row.
            capture_stderr: !std::io::IsTerminal::is_terminal(&std::io::stderr()),
            uncommitted: Vec::new(),
        };
        for i in 0..size.max(1) {
            let slot = pool.spawn(i)?;
            pool.slots.push(slot);
        }
        Ok(pool)
    }

    fn spawn(&mut self, id: usize) -> std::io::Result<Slot> {
        let mut child = Command::new(&self.exe)
            .arg(WORKER_FLAG)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if self.capture_stderr {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()?;
        let stray = Arc::new(Mutex::new(Vec::new()));
        let stderr_reader = child.stderr.take().map(|e| {
            let stray = stray.clone();
            std::thread::spawn(move || forward_stderr(e, &stray))
        });
        let generation = self.next_generation;
        self.next_generation += 1;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("worker has no stdout"))?;
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Msg>(&line) {
                    Ok(m) => {
                        if tx.send((id, generation, Event::Msg(m))).is_err() {
                            return;
                        }
                    }
                    Err(e) => log::warn!("worker said something unreadable: {e}"),
                }
            }
            let _ = tx.send((id, generation, Event::Eof));
        });
        Ok(Slot {
            stdin: child.stdin.take(),
            stray,
            stderr_reader,
            child,
            generation,
            busy: None,
            dead: false,
        })
    }

    /// Jobs in progress.
    pub fn busy(&self) -> usize {
        self.slots.iter().filter(|s| s.busy.is_some()).count()
    }

    /// Jobs finished whose outputs wait for the group commit (their outcome not yet given).
    pub fn uncommitted(&self) -> usize {
        self.uncommitted.len()
    }

    /// Whether a worker is free for a job.
    pub fn has_idle(&self) -> bool {
        self.slots.iter().any(|s| s.busy.is_none())
    }

    /// Hands job `index` to a free worker (replacing a dead one first). When no worker can be
    /// started or fed, the job's failed outcome is returned instead.
    pub fn submit(&mut self, index: usize, job: WireJob) -> Option<Outcome> {
        let Some(id) = self.slots.iter().position(|s| s.busy.is_none()) else {
            return Some(fail_row(&job, "no free worker".into()));
        };
        let mut line = match serde_json::to_vec(&job) {
            Ok(l) => l,
            Err(e) => return Some(fail_row(&job, format!("cannot encode the job: {e}"))),
        };
        line.push(b'\n');
        for _attempt in 0..2 {
            if self.slots[id].dead {
                match self.spawn(id) {
                    Ok(s) => self.slots[id] = s,
                    Err(e) => return Some(fail_row(&job, format!("cannot start a worker: {e}"))),
                }
            }
            let slot = &mut self.slots[id];
            let ok = slot
                .stdin
                .as_mut()
                .is_some_and(|w| w.write_all(&line).and_then(|_| w.flush()).is_ok());
            if ok {
                slot.busy = Some(Busy {
                    index,
                    job,
                    started: Instant::now(),
                    importer: None,
                    timed_out: false,
                });
                return None;
            }
            // The worker is gone (it died between jobs): reap it and start another.
            let _ = slot.child.kill();
            let _ = slot.child.wait();
            slot.dead = true;
        }
        Some(fail_row(&job, "the worker could not be fed the job".into()))
    }

    /// Waits up to `wait` for jobs to end; returns the ended jobs' indexes and outcomes. Kills
    /// workers past the timeout.
    pub fn poll(&mut self, wait: Duration) -> Vec<(usize, Outcome)> {
        let mut done = Vec::new();
        if self.busy() == 0 {
            // The caller had nothing more to start: nothing to wait for but the commit.
            done.extend(self.commit());
            return done;
        }
        let until = Instant::now() + wait;
        loop {
            self.enforce_timeouts();
            let now = Instant::now();
            if now >= until {
                break;
            }
            let step = (until - now).min(Duration::from_millis(100));
            match self.rx.recv_timeout(step) {
                Ok((id, generation, ev)) => {
                    if self.handle(id, generation, ev, &mut done) {
                        // A worker is free: hand back at once so the caller can keep it fed.
                        break;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        // Take whatever else is already waiting.
        while let Ok((id, generation, ev)) = self.rx.try_recv() {
            self.handle(id, generation, ev, &mut done);
        }
        let due = self.uncommitted.len() >= GROUP_FILES
            || self.uncommitted.iter().map(|u| u.len).sum::<u64>() >= GROUP_BYTES
            || self
                .uncommitted
                .first()
                .is_some_and(|u| u.since.elapsed() >= GROUP_AGE);
        if due {
            done.extend(self.commit());
        }
        done
    }

    /// The group commit: syncs the waiting outputs (their writeback was started by the
    /// workers; one `syncfs` per file system), renames each over its target, syncs each folder
    /// once, and only then
    /// gives their outcomes (`ok`, now naming durable files). An output that cannot be synced
    /// or renamed fails, its temporary file removed.
    fn commit(&mut self) -> Vec<(usize, Outcome)> {
        let group = std::mem::take(&mut self.uncommitted);
        if group.is_empty() {
            return Vec::new();
        }
        // syncfs: one flush of the output's file system for the group (what `cp -r` + `sync`
        // costs). An fsync per file costs a flush of the device cache each even when the first
        // one committed the journal for all (measured: 2 ms each on this machine's ext4, 2-3x the
        // group's syncfs); TET_GROUP_SYNC=files chooses it where other writers' dirty data on
        // the same file system would make syncfs wait for them.
        let syncfs = std::env::var_os("TET_GROUP_SYNC").is_none_or(|v| v != "files");
        let mut synced_fs: Vec<(u64, std::io::Result<()>)> = Vec::new();
        let mut dirs: Vec<PathBuf> = Vec::new();
        // Every file first, then the renames: no rename can reach the disk before its data.
        let synced: Vec<std::io::Result<()>> = group
            .iter()
            .map(|u| {
                if syncfs {
                    sync_filesystem_of(&u.file, &mut synced_fs)
                } else {
                    u.file.sync_all()
                }
            })
            .collect();
        let mut out = Vec::with_capacity(group.len());
        for (u, synced) in group.into_iter().zip(synced) {
            let placed = synced
                .map_err(|e| format!("cannot sync the output: {e}"))
                .and_then(|()| {
                    std::fs::rename(&u.temp, &u.target)
                        .map_err(|e| format!("cannot move the output into place: {e}"))
                });
            let mut o = u.outcome;
            match placed {
                Ok(()) => {
                    let dir = match u.target.parent() {
                        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                        _ => PathBuf::from("."),
                    };
                    if !dirs.contains(&dir) {
                        dirs.push(dir);
                    }
                }
                Err(reason) => {
                    let _ = std::fs::remove_file(&u.temp);
                    o.row.status = Some(Status::Failed);
                    o.row.reason = Some(reason);
                    o.notes.clear();
                }
            }
            out.push((u.index, o));
        }
        // Best effort, as for one file: not every file system can sync a folder.
        for d in &dirs {
            if let Ok(f) = std::fs::File::open(d) {
                let _ = f.sync_all();
            }
        }
        out
    }

    fn enforce_timeouts(&mut self) {
        let Some(limit) = self.timeout else { return };
        for s in &mut self.slots {
            if let Some(b) = &mut s.busy {
                if !b.timed_out && b.started.elapsed() >= limit {
                    b.timed_out = true;
                    let _ = s.child.kill();
                }
            }
        }
    }

    /// Handles one event of worker `id`; a finished job's outcome goes to `done`, or, when its
    /// output waits for the group commit, to `self.uncommitted`. Returns whether a worker
    /// became free.
    fn handle(
        &mut self,
        id: usize,
        generation: u64,
        ev: Event,
        done: &mut Vec<(usize, Outcome)>,
    ) -> bool {
        match self.event(id, generation, ev) {
            None => false,
            Some((index, outcome, pending)) => {
                match pending.into_iter().next() {
                    None => done.push((index, *outcome)),
                    Some(p) => match take_over(p) {
                        Ok((temp, target, file, len)) => self.uncommitted.push(Uncommitted {
                            index,
                            outcome: *outcome,
                            temp,
                            target,
                            file,
                            len,
                            since: Instant::now(),
                        }),
                        Err(reason) => {
                            let mut o = *outcome;
                            o.row.status = Some(Status::Failed);
                            o.row.reason = Some(reason);
                            o.notes.clear();
                            done.push((index, o));
                        }
                    },
                }
                true
            }
        }
    }

    fn event(
        &mut self,
        id: usize,
        generation: u64,
        ev: Event,
    ) -> Option<(usize, Box<Outcome>, Vec<WirePending>)> {
        let timeout = self.timeout;
        let slot = self.slots.get_mut(id)?;
        if slot.generation != generation {
            return None;
        }
        match ev {
            Event::Msg(Msg::Stage { importer }) => {
                if let Some(b) = &mut slot.busy {
                    b.importer = Some(importer);
                }
                None
            }
            Event::Msg(Msg::Done { outcome, pending }) => {
                let b = slot.busy.take()?;
                if b.timed_out {
                    // Answered in the instant it was killed: the kill stands, so does the answer.
                    slot.dead = true;
                }
                // A library's messages for an input that converted are passed on as they were.
                for line in take(&slot.stray) {
                    eprintln!("{line}");
                }
                Some((b.index, outcome, pending))
            }
            Event::Eof => {
                slot.stdin = None;
                let status = slot.child.wait().ok();
                slot.dead = true;
                if let Some(h) = slot.stderr_reader.take() {
                    let _ = h.join();
                }
                let last = take(&slot.stray).pop();
                let b = slot.busy.take()?;
                let mut reason = death_reason(status, &b, timeout);
                if let Some(l) = last {
                    reason += &format!(" (it said: {})", super::text::one_line(&l));
                }
                let mut o = dead_worker_outcome(&b.job, reason);
                o.row.elapsed_s = b.started.elapsed().as_secs_f64();
                Some((b.index, Box::new(o), Vec::new()))
            }
        }
    }

    /// Stops every worker (SIGTERM, then SIGKILL after `grace`); the jobs they were running end
    /// as `interrupted` by `sig`.
    pub fn stop(&mut self, sig: i32, grace: Duration) -> Vec<(usize, Outcome)> {
        // Finished outputs are committed: their conversions are done.
        let mut out = self.commit();
        for s in &mut self.slots {
            s.stdin = None;
            if !s.dead {
                // SAFETY: kill(2) with a child's pid that has not been reaped yet (the slot is
                // not dead), so the pid cannot have been reused.
                unsafe {
                    libc::kill(s.child.id() as libc::pid_t, libc::SIGTERM);
                }
            }
        }
        let until = Instant::now() + grace;
        for s in &mut self.slots {
            if s.dead {
                continue;
            }
            loop {
                match s.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= until => {
                        let _ = s.child.kill();
                        let _ = s.child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            s.dead = true;
            if let Some(b) = s.busy.take() {
                let mut o =
                    dead_worker_outcome(&b.job, format!("stopped by {}", signals::name(sig)));
                o.row.status = Some(Status::Interrupted);
                o.row.elapsed_s = b.started.elapsed().as_secs_f64();
                o.interrupted_by = Some(sig);
                out.push((b.index, o));
            }
        }
        out
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Outputs no outcome will be given for (a caller that stopped polling) are not placed.
        for u in std::mem::take(&mut self.uncommitted) {
            let _ = std::fs::remove_file(&u.temp);
        }
        for s in &mut self.slots {
            s.stdin = None;
            if !s.dead {
                // Workers exit when their input closes; wait for them so none is left behind.
                let _ = s.child.wait();
            }
        }
    }
}

/// The supervisor's hold on a handed-over output: opened, its shared lock taken (so no
/// cleaner removes it once the worker lets go), and still linked (a cleaner that took the lock in
/// the instant the worker changed its kind would have removed it).
fn take_over(p: WirePending) -> Result<(PathBuf, PathBuf, std::fs::File, u64), String> {
    let lost = |e: &dyn std::fmt::Display| format!("the finished output was lost: {e}");
    let temp = p.temp.path().map_err(|e| lost(&e))?;
    let target = p.target.path().map_err(|e| lost(&e))?;
    let file = std::fs::File::open(&temp).map_err(|e| lost(&e))?;
    file.try_lock_shared().map_err(|e| lost(&e))?;
    let meta = file.metadata().map_err(|e| lost(&e))?;
    if std::os::unix::fs::MetadataExt::nlink(&meta) == 0 || meta.len() != p.len {
        return Err(lost(&"its temporary file was removed or changed"));
    }
    Ok((temp, target, file, p.len))
}

/// `syncfs` of the file system `file` is on, once per file system per group (`done` keeps the
/// results).
fn sync_filesystem_of(
    file: &std::fs::File,
    done: &mut Vec<(u64, std::io::Result<()>)>,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let dev = std::os::unix::fs::MetadataExt::dev(&file.metadata()?);
    if let Some((_, r)) = done.iter().find(|(d, _)| *d == dev) {
        return r
            .as_ref()
            .map(|_| ())
            .map_err(|e| std::io::Error::new(e.kind(), e.to_string()));
    }
    // SAFETY: syncfs on a descriptor this process owns for the duration of the call.
    let rc = unsafe { libc::syncfs(file.as_raw_fd()) };
    let r = if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    };
    let back = r
        .as_ref()
        .map(|_| ())
        .map_err(|e| std::io::Error::new(e.kind(), e.to_string()));
    done.push((dev, r));
    back
}

fn take(v: &Mutex<Vec<String>>) -> Vec<String> {
    std::mem::take(&mut *v.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Passes the worker's log lines (`PROGRAM: level: …`) on at once and keeps anything else for
/// the supervisor to place.
fn forward_stderr(e: std::process::ChildStderr, stray: &Mutex<Vec<String>>) {
    let ours = format!("{}: ", super::text::program());
    for line in BufReader::new(e).lines() {
        let Ok(line) = line else { break };
        if line.starts_with(&ours) {
            eprintln!("{line}");
        } else {
            let mut v = stray.lock().unwrap_or_else(|p| p.into_inner());
            if v.len() < 1000 {
                v.push(line);
            }
        }
    }
}

fn death_reason(status: Option<ExitStatus>, b: &Busy, timeout: Option<Duration>) -> String {
    let place = b
        .importer
        .as_deref()
        .map(|i| format!(" in the {i} importer"))
        .unwrap_or_default();
    if b.timed_out {
        let secs = timeout.map_or(0, |t| t.as_secs());
        return format!("timed out after {secs} s{place} (worker killed)");
    }
    match status {
        Some(s) => match (s.signal(), s.code()) {
            (Some(sig), _) => format!("crashed: {}{place}", signals::name(sig)),
            (None, Some(code)) => format!("worker exited with status {code}{place}"),
            _ => format!("worker ended{place}"),
        },
        None => format!("worker vanished{place}"),
    }
}

/// The outcome of a job whose worker died: what is known of the input (size, digest), and no
/// temporary file left behind.
fn dead_worker_outcome(job: &WireJob, reason: String) -> Outcome {
    let mut o = fail_row(job, reason);
    if let Ok(out) = job.output.path() {
        if let (Some(dir), Some(name)) = (out.parent(), out.file_name()) {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            stale::clean(dir, Some(name));
        }
    }
    if let Some(input) = job.input.path().ok().filter(|_| o.row.inputs.is_empty()) {
        super::job::fill_known(&mut o.row, &input);
    }
    o
}

fn fail_row(job: &WireJob, reason: String) -> Outcome {
    let input = job.input.path().unwrap_or_default();
    let output = job.output.path().unwrap_or_default();
    let mut row = InputRow::new(&job.run, &input, &output);
    row.inputs = super::combined::row_inputs(job);
    row.status = Some(Status::Failed);
    row.reason = Some(reason);
    Outcome {
        row,
        ..Outcome::default()
    }
}
