//! Many inputs in one run, as schedulers use it (cron, Slurm arrays, Kubernetes indexed Jobs):
//! what a run takes (`inputs`), which task takes it (`shard`), whether its output is already up
//! to date (`fresh`), the job that converts one input (`job`) or combines several along a
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
pub mod progress;
pub mod remote;
pub mod run;
pub mod shard;
pub mod signals;
pub mod stale;
pub mod supervise;
pub mod text;

use std::collections::BTreeMap;
use std::path::Path;

use tet::format::{TetError, TetFile};

pub use shard::Shard;

/// What an existing output's last history row says of the conversion that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The input digests (parents).
    pub parents: Vec<String>,
    /// The input path as it was given then.
    pub input: Option<String>,
    /// An object input's stamp (ETag, size, last-modified) then.
    pub object_stamp: Option<String>,
}

/// Why an existing output does not hold the conversion asked for (so it is rebuilt).
#[derive(Debug, thiserror::Error)]
pub enum NotRecorded {
    /// The output cannot be opened as a `.tet` file.
    #[error("existing output unreadable: {0}")]
    Unreadable(#[source] TetError),
    /// The output has no footer, so no history.
    #[error("existing output has no footer")]
    NoFooter,
    /// The output's footer cannot be read.
    #[error("existing output's footer unreadable: {0}")]
    FooterUnreadable(#[source] TetError),
    /// The output was converted under other byte-affecting options.
    #[error("the options changed")]
    OptionsChanged,
    /// The output's last history row is not a conversion.
    #[error("existing output is not a conversion")]
    NotAConversion,
}

/// The last history row of `output` when it is a conversion under the same recorded settings
/// (`params`' keys that [`tet::settings::is_recorded_key`] names); otherwise why the output does not count (no file, unreadable footer, other options).
pub fn recorded(output: &Path, params: &BTreeMap<String, String>) -> Result<Recorded, NotRecorded> {
    let f = TetFile::open(output).map_err(NotRecorded::Unreadable)?;
    let footer = match f.footer() {
        Ok(Some(footer)) => footer,
        Ok(None) => return Err(NotRecorded::NoFooter),
        Err(e) => return Err(NotRecorded::FooterUnreadable(e)),
    };
    let pick = |p: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        p.iter()
            .filter(|(k, _)| tet::settings::is_recorded_key(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    // The last row made the file; earlier ones are the lineage a `.tet` input carried over.
    match footer.history.last() {
        Some(row) if row.op == "convert" && pick(&row.params) == pick(params) => Ok(Recorded {
            parents: row.parents.clone(),
            input: row.params.get("input").cloned(),
            object_stamp: row.params.get(tet::storage::OBJECT_STAMP_KEY).cloned(),
        }),
        Some(row) if row.op == "convert" => Err(NotRecorded::OptionsChanged),
        _ => Err(NotRecorded::NotAConversion),
    }
}

/// Whether `output` already holds the conversion of an input with `digest` under `params`.
pub fn up_to_date(output: &Path, digest: &str, params: &BTreeMap<String, String>) -> bool {
    recorded(output, params).is_ok_and(|r| r.parents.iter().any(|d| d == digest))
}
