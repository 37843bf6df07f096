//! Many inputs in one run, as schedulers use it (cron, Slurm arrays, Kubernetes indexed Jobs):
//! what a run takes (`inputs`), which task takes it (`shard`), whether its output is already up
//! to date (`fresh`: the one [`Recorded`] type, what an output's history row says), the job as it
//! travels to a worker (`wire`) and what it gives back (`outcome`), the job that converts one input (`job`) or combines several along a
//! dimension (`combined`), the supervised worker processes that run jobs so that a crashing or
//! hanging C library costs one input and not the night (`supervise`), the ledger every run appends to (`ledger`), signals (`signals`) and the
//! temporary files of dead writers (`stale`). `run` ties them together; `progress` and `text`
//! are the terminal conventions the command lines share with it.

pub mod combined;
pub mod fresh;
pub mod inputs;
pub mod job;
pub mod ledger;
pub mod openlineage;
pub mod outcome;
pub mod progress;
pub mod remote;
pub mod run;
pub mod shard;
pub mod signals;
pub mod stale;
pub mod supervise;
pub mod text;
pub mod wire;

pub use fresh::{recorded, up_to_date, NotRecorded, Recorded};
pub use shard::Shard;
