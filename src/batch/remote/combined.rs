//! A combined job (`tet-convert --concat DIM IN… OUT`) with an object URL among its inputs or
//! as its output: every input opened as a job of one input opens it (read by ranges, spooled
//! with the free space checked, a Zarr prefix in place; a local file as it is; see
//! [`tet::request`]), each input's digest a parent of the history row and each URL named in
//! it (`input`, `input.1`, …). An object output is staged and published as for one input.
//!
//! Up to date: the output records the same options and the stamp of the combination (the
//! inputs' stamps, in any order, hashed: `input_object` of the history row, or the upload's
//! `tet-input-stamp`); `--rehash` compares the inputs' digests instead.

use std::path::{Path, PathBuf};

use super::{failed, object_of, Objects};
use crate::batch::job::{failed_row, Outcome, StageHook, WireJob};
use tet::request::{Context, Request};
use tet::storage;

/// Runs a combined job with an object input or output (see the module docs): `inputs` are the
/// request's, the row already names them.
pub fn execute_combined(
    job: &WireJob,
    inputs: &[PathBuf],
    output: &Path,
    req: &Request,
    cx: Context,
    stage: StageHook<'_>,
    out: Outcome,
) -> Outcome {
    let Some(first) = inputs.first() else {
        return failed_row(out, "--concat needs at least two inputs".into());
    };
    let root = job.storage.spool_root();
    storage::clean_stale_spools(&root);
    let mut all = Vec::with_capacity(inputs.len());
    for p in inputs {
        match object_of(p, job) {
            Ok(o) => all.push((p.clone(), o)),
            Err(e) => return failed(out, p, &e),
        }
    }
    let dst = match object_of(output, job) {
        Ok(d) => d,
        Err(e) => return failed(out, first, &e),
    };
    let objects = Objects {
        job,
        input: first,
        output,
        src: all[0].1.clone(),
        dst,
        root,
        all,
    };
    objects.run_checked(req, cx, stage, out)
}
