//! One run over a list of jobs: feeds the jobs to supervised workers (or runs them in this
//! process with `Isolation::None`), appends a ledger row per input between the run's `start`
//! and `end` rows, stops taking inputs at the first failure unless `keep_going`, and on SIGTERM /
//! SIGINT stops the workers, removes their temporary files and closes the ledger.

use std::time::{Duration, Instant};

use super::job::{execute, Outcome, WireJob};
use super::ledger::{self, Counts, EndRow, Ledger, Row, StartRow, Status};
use super::signals;
use super::supervise::Pool;

/// Where jobs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// In supervised worker processes: a crash or hang costs one input.
    Process,
    /// In this process (what batches did before workers; for measurements and debugging).
    None,
}

/// How a run goes.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub isolation: Isolation,
    /// Worker processes (with `Isolation::Process`).
    pub workers: usize,
    /// Wall-time limit per input (with `Isolation::Process`).
    pub timeout: Option<Duration>,
    pub keep_going: bool,
    /// Arguments workers are started with after the worker flag (logging).
    pub worker_args: Vec<String>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Summary {
    pub counts: Counts,
    pub exit_code: u8,
    pub signal: Option<i32>,
    pub elapsed: Duration,
}

/// Exit code when some inputs failed.
pub const EXIT_SOME_FAILED: u8 = 1;

/// Runs `jobs` (an `Err` is an input refused before it started, e.g. two inputs that map to one
/// output: it is recorded as it is); `on_done` sees each outcome as it comes (in completion order). The ledger gets
/// `start` first and `end` last; a ledger write error is reported through `on_ledger_error`
/// once and the run goes on (the conversions are worth more than the report).
pub fn run(
    jobs: Vec<Result<WireJob, Box<Outcome>>>,
    opts: &RunOptions,
    ledger: Option<&mut Ledger>,
    start: StartRow,
    on_done: &mut dyn FnMut(&Outcome),
    on_ledger_error: &mut dyn FnMut(std::io::Error),
) -> Summary {
    let started = Instant::now();
    let run_id = start.run.clone();
    let mut rec = Recorder {
        ledger,
        ledger_ok: true,
        on_ledger_error,
        on_done,
        counts: Counts::default(),
        lineage: super::openlineage::Emitter::configured(&run_id),
    };
    rec.append(&Row::Start(start));

    let total = jobs.len();
    let signal = match opts.isolation {
        Isolation::None => run_in_process(jobs, opts, &mut rec),
        Isolation::Process => {
            let exe = std::env::current_exe().unwrap_or_else(|_| "tet-convert".into());
            let workers = opts.workers.clamp(1, total.max(1));
            match Pool::new(workers, exe, opts.worker_args.clone(), opts.timeout) {
                Err(e) => {
                    refuse_all(jobs, opts, &e, &mut rec);
                    None
                }
                Ok(pool) => run_in_pool(pool, jobs, opts, &mut rec),
            }
        }
    };
    let signal = signal.or_else(signals::pending);
    let mut counts = rec.counts;
    let finished = counts.ok + counts.skipped + counts.failed + counts.interrupted;
    counts.not_started = total.saturating_sub(finished);
    let exit_code = match signal {
        Some(sig) => signals::exit_code(sig),
        None if counts.failed > 0 || counts.interrupted > 0 => EXIT_SOME_FAILED,
        None => 0,
    };
    // Events not delivered: said in one line, and the run fails (its outputs are kept).
    let exit_code = rec.lineage.finish().map_or_else(
        |e| {
            eprintln!("tet-convert: {e}");
            exit_code.max(EXIT_SOME_FAILED)
        },
        |()| exit_code,
    );
    let elapsed = started.elapsed();
    rec.append(&Row::End(EndRow {
        run: run_id,
        at: ledger::now(),
        elapsed_s: elapsed.as_secs_f64(),
        counts,
        exit_code,
        signal: signal.map(signals::name),
    }));
    Summary {
        counts,
        exit_code,
        signal,
        elapsed,
    }
}

/// Where outcomes go: the counts, the ledger (its first write error reported once), `on_done`.
struct Recorder<'a> {
    ledger: Option<&'a mut Ledger>,
    /// No ledger write has failed yet.
    ledger_ok: bool,
    on_ledger_error: &'a mut dyn FnMut(std::io::Error),
    on_done: &'a mut dyn FnMut(&Outcome),
    counts: Counts,
    /// `--openlineage`: the run events of each job.
    lineage: super::openlineage::Emitter,
}

impl Recorder<'_> {
    /// Appends `row` to the ledger, if there is one.
    fn append(&mut self, row: &Row) {
        if let Some(l) = self.ledger.as_deref_mut() {
            if let Err(e) = l.append(row) {
                if self.ledger_ok {
                    (self.on_ledger_error)(e);
                }
                self.ledger_ok = false;
            }
        }
    }

    /// Counts an outcome, appends its ledger row and hands it to `on_done`.
    fn record(&mut self, o: &Outcome) {
        self.counts.add(o.row.status());
        self.append(&Row::Input(o.row.clone()));
        (self.on_done)(o);
        self.lineage.done(o);
    }
}

/// [`Isolation::None`]: runs the jobs one after the other in this process. Returns the signal
/// that stopped the run.
fn run_in_process(
    jobs: Vec<Result<WireJob, Box<Outcome>>>,
    opts: &RunOptions,
    rec: &mut Recorder,
) -> Option<i32> {
    let mut signal = None;
    for job in jobs {
        if let Some(sig) = signals::pending() {
            signal = Some(sig);
            break;
        }
        let o = match job {
            Ok(job) => {
                rec.lineage.start(&job);
                execute(&job, &mut |_| {})
            }
            Err(o) => *o,
        };
        if let Some(sig) = o.interrupted_by {
            signal = Some(sig);
        }
        let failed = o.row.status() == Status::Failed;
        rec.record(&o);
        if signal.is_some() || (failed && !opts.keep_going) {
            break;
        }
    }
    signal
}

/// No worker process could be started (`e`): every job fails with that reason (the first
/// only, unless `keep_going`).
fn refuse_all(
    jobs: Vec<Result<WireJob, Box<Outcome>>>,
    opts: &RunOptions,
    e: &std::io::Error,
    rec: &mut Recorder,
) {
    for job in jobs {
        let o = job.map_or_else(
            |o| *o,
            |job| {
                let mut row = ledger::InputRow::new(
                    &job.run,
                    &job.input.path().unwrap_or_default(),
                    &job.output.path().unwrap_or_default(),
                );
                row.inputs = super::combined::row_inputs(&job);
                row.status = Some(Status::Failed);
                row.reason = Some(format!("cannot start a worker process: {e}"));
                Outcome {
                    row,
                    ..Outcome::default()
                }
            },
        );
        rec.record(&o);
        if !opts.keep_going {
            break;
        }
    }
}

/// [`Isolation::Process`]: feeds the jobs to the idle workers of `pool` and records outcomes as
/// they come, until all are done, a failure stops the taking (unless `keep_going`) or a
/// signal stops the workers. Returns the signal that stopped the run.
fn run_in_pool(
    mut pool: Pool,
    jobs: Vec<Result<WireJob, Box<Outcome>>>,
    opts: &RunOptions,
    rec: &mut Recorder,
) -> Option<i32> {
    let mut signal = None;
    let mut stop_taking = false;
    let mut queue = jobs.into_iter().enumerate();
    loop {
        if let Some(sig) = signals::pending() {
            signal = Some(sig);
            for (_, o) in pool.stop(sig, Duration::from_secs(3)) {
                rec.record(&o);
            }
            break;
        }
        while !stop_taking && pool.has_idle() {
            let Some((i, job)) = queue.next() else {
                stop_taking = true;
                break;
            };
            let refused = match job {
                Ok(job) => {
                    rec.lineage.start(&job);
                    pool.submit(i, job)
                }
                Err(o) => Some(*o),
            };
            if let Some(o) = refused {
                let failed = o.row.status() == Status::Failed;
                rec.record(&o);
                if failed && !opts.keep_going {
                    stop_taking = true;
                }
            }
        }
        if pool.busy() == 0 && pool.uncommitted() == 0 {
            break;
        }
        for (_, o) in pool.poll(Duration::from_millis(200)) {
            if let Some(sig) = o.interrupted_by {
                signal.get_or_insert(sig);
            }
            let failed = o.row.status() == Status::Failed;
            rec.record(&o);
            if failed && !opts.keep_going {
                stop_taking = true;
            }
        }
    }
    signal
}
