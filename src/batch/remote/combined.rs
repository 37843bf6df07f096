//! A combined job (`tet-convert --concat DIM IN… OUT`) with an object URL among its inputs or
//! as its output: every input opened as a job of one input opens it (read by ranges, spooled
//! with the free space checked, a Zarr prefix in place; a local file as it is), combined by
//! [`tet::concat::convert_opened`], each input's digest a parent of the history row and each
//! URL named in it (`input`, `input.1`, …). The spools live until the conversion ends (success,
//! failure or signal: they are dropped), an object output is staged and published as for one
//! input.
//!
//! Up to date: the output records the same options and the stamp of the combination (the
//! inputs' stamps, in any order, hashed: `input_object` of the history row, or the upload's
//! `tet-input-stamp`); `--rehash` compares the inputs' digests instead.

use std::path::{Path, PathBuf};

use super::input::{open_local, ObjectInput};
use super::{failed, failed_text, interrupted, object_of, run_checked, AllInputs, NoStage, Staged};
use crate::batch::job::{failed_row, record_converted, Outcome, StageHook, WireJob};
use tet::pipeline::{ConvertError, ConvertOptions};
use tet::storage::{self, Object, Origin, OBJECT_STAMP_KEY};

/// Runs a combined job with an object input or output (see the module docs): `inputs` are the
/// combination's (`opts.combined`), the row already names them.
pub fn execute_combined(
    job: &WireJob,
    inputs: &[PathBuf],
    output: &Path,
    opts: ConvertOptions,
    stage: StageHook<'_>,
    out: Outcome,
) -> Outcome {
    let Some(first) = inputs.first().cloned() else {
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
        Err(e) => return failed(out, &first, &e),
    };
    // Every store of the job (clones share their store's count of retried requests).
    let stores: Vec<Object> = all
        .iter()
        .filter_map(|(_, o)| o.clone())
        .chain(dst.iter().cloned())
        .collect();
    let src = all[0].1.clone();
    let mut out = run_checked(job, &first, output, opts, stage, out, src, dst, root, &all);
    out.row.retries = Some(stores.iter().map(Object::retries).sum());
    out
}

impl Staged<'_> {
    /// Converts the combination of `all` past its up-to-date check (see the module docs).
    pub(super) fn run_combined(
        self,
        all: &AllInputs,
        mut opts: ConvertOptions,
        stage: StageHook<'_>,
        mut out: Outcome,
        rebuild: Option<super::Rebuild>,
    ) -> Outcome {
        let first = self.input;
        // Kept until the conversion ends: the spools and the objects read by ranges.
        let mut held: Vec<ObjectInput> = Vec::with_capacity(all.len());
        let mut opened = Vec::with_capacity(all.len());
        // Every input is open until the end: objects read by ranges share the part of the
        // memory budget that chunks do not take (each keeps its windows and cache within it).
        let objects = all.iter().filter(|(_, o)| o.is_some()).count().max(1) as u64;
        let budget = opts.settings.memory_budget_bytes();
        let reserve = budget - tet::format::pool_limit(budget);
        let share = reserve / objects;
        for (p, o) in all {
            let one = match o {
                Some(o) => match ObjectInput::open_within(o, &self.root, &opts.cancel, share) {
                    Ok(i) => {
                        let one = i.opened(p, &opts);
                        held.push(i);
                        one
                    }
                    Err(e) => return failed(out, p, &e),
                },
                None => open_local(p, &opts),
            };
            match one {
                Ok(i) => opened.push(i),
                Err(ConvertError::Interrupted(sig)) => return interrupted(out, sig),
                Err(e) => return failed_text(out, first, e.to_string()),
            }
        }
        if let Some(imp) = opened.first().map(|i| i.importer) {
            out.row.format = Some(imp.id().to_owned());
            stage(imp.name());
        }
        let staged_out = match self.staged_output() {
            Ok(s) => s,
            Err(NoStage::Storage(e)) => return failed(out, first, &e),
            Err(NoStage::Dir(why)) => return failed_text(out, first, why),
        };
        let local_out = staged_out
            .as_ref()
            .map_or(self.output, storage::Spool::path);
        let mut params = std::collections::BTreeMap::new();
        params.insert(OBJECT_STAMP_KEY.to_string(), self.stamp.0.clone());
        opts.input_origin = Some(Origin {
            name: first.display().to_string(),
            params,
        });
        log::info!(
            "{} inputs -> {}: combining",
            all.len(),
            self.output.display()
        );
        let r = match tet::concat::convert_opened(opened, local_out, &opts) {
            Ok((r, _order)) => r,
            Err(ConvertError::Interrupted(sig)) => return interrupted(out, sig),
            Err(e) => return failed_text(out, first, e.to_string()),
        };
        drop(held);
        if let Some(o) = &self.dst {
            let parents = super::super::recorded(local_out, &self.params)
                .map(|r| r.parents)
                .unwrap_or_default();
            let digest = super::combined_digest(&parents);
            if let Err(e) = self.publish(o, local_out, &digest, &opts) {
                return match e {
                    storage::StorageError::Interrupted { signal, .. } => interrupted(out, signal),
                    e => failed(out, first, &e),
                };
            }
        }
        let rebuild = rebuild.map(|why| why.to_string());
        record_converted(&mut out, &r, rebuild, self.job.want_report);
        if let (Some(n), Some(dim)) = (out.notes.first_mut(), &opts.settings.concat) {
            *n = format!("combined along {dim}: {n}");
        }
        out.row.bytes_in = Some(self.stamp.1);
        out
    }
}
