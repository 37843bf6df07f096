//! What a conversion gives back: its report ([`ConvertReport`], printed by `--json`) or why it
//! failed ([`ConvertError`]).

use std::path::PathBuf;

use serde::Serialize;
use tet_source::SourceError;

use crate::format::TetError;
use crate::registry::IdentifyError;

/// What happened to one dataset.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct DatasetReport {
    pub name: String,
    pub dtype: String,
    pub source_dtype: String,
    pub shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
    pub chunks: u64,
    pub raw_bytes: u64,
    pub stored_bytes: u64,
    /// The planned codec (`zstd:3`), or when chunks are stored otherwise the codecs they are
    /// stored with (`raw+zstd`).
    pub codec: String,
    /// The chunks by the codec they are stored with, as `tet info` counts them.
    #[serde(default)]
    pub codecs: std::collections::BTreeMap<String, u64>,
    pub widened: Option<String>,
}

/// The outcome of one conversion (`--json` prints it).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ConvertReport {
    pub input: String,
    pub output: String,
    pub format: String,
    pub input_digest: String,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub raw_bytes: u64,
    pub stored_bytes: u64,
    /// bytes_out / bytes_in.
    pub ratio: f64,
    pub elapsed_s: f64,
    pub jobs: usize,
    pub datasets: Vec<DatasetReport>,
    /// What the memory budget saw (not in the JSON report: it depends on thread timing).
    #[serde(skip)]
    pub memory: Option<crate::format::budget::BudgetStats>,
    pub skipped: Vec<SkippedItem>,
    pub warnings: Vec<String>,
    /// A combined conversion's inputs in the combined order: the index in the request's inputs
    /// of each parent of the history row, in turn (empty for one input; not in the JSON
    /// report, whose `input` is the first).
    #[serde(skip)]
    pub order: Vec<usize>,
    /// Requests to object storage that were retried (not in the JSON report).
    #[serde(skip)]
    pub retries: u64,
}

/// A source item with no `.tet` form.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SkippedItem {
    pub name: String,
    pub reason: String,
}

/// Why a conversion failed.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Identify(#[from] IdentifyError),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Tet(#[from] TetError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A `.tet` input whose footer cannot be carried over.
    #[error(transparent)]
    Carry(#[from] crate::tet_input::CarryError),
    /// Refused before any work (bad options, unmappable data…).
    #[error("{0}")]
    Refused(String),
    /// An output path that is not written (a link, the input, a directory…).
    #[error(transparent)]
    Output(#[from] super::paths::OutputError),
    /// A variable `.tet` cannot store as asked (rank, size, chunk size).
    #[error(transparent)]
    Dataset(#[from] super::plan::DatasetError),
    /// The selection (`--variables`, `--exclude`, `--isel`, `--sel`) does not fit the input.
    #[error(transparent)]
    Select(#[from] crate::select::SelectError),
    /// A dataset's chunk shape cannot be planned as `--chunk` asks.
    #[error(transparent)]
    Plan(#[from] crate::planner::PlanError),
    /// A dataset's shape and chunk shape make no chunk grid.
    #[error("dataset '{dataset}': {source}")]
    Grid {
        dataset: String,
        #[source]
        source: crate::format::GridError,
    },
    /// Reading a short coordinate variable for its dimension's labels failed.
    #[error("dataset '{dataset}' (coordinate labels): {source}")]
    Labels {
        dataset: String,
        #[source]
        source: SourceError,
    },
    /// The worker threads could not be started.
    #[error("cannot start {threads} worker threads: {source}")]
    Threads {
        threads: usize,
        #[source]
        source: rayon::ThreadPoolBuildError,
    },
    /// A thread of the conversion panicked (`what`: the input digest thread, the write stage);
    /// the output was not written.
    #[error("{what} panicked")]
    Panicked { what: &'static str },
    /// Reading, encoding or handing in one chunk panicked (in an importer, a codec or the
    /// engine: a bug, reported with the panic's text instead of taking the process down).
    #[error("dataset '{dataset}' chunk {coords:?}: internal error (panic): {message}")]
    ChunkPanicked {
        dataset: String,
        coords: Vec<u64>,
        message: String,
    },
    /// Reading or decoding one chunk of the source failed.
    #[error("dataset '{dataset}' chunk {coords:?}: {source}")]
    Chunk {
        dataset: String,
        coords: Vec<u64>,
        #[source]
        source: SourceError,
    },
    /// Writing the output failed (a full disk arrives here as `TetError::Io` with
    /// `ErrorKind::StorageFull`).
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: TetError,
    },
    /// zstd refused its parameters.
    #[error("zstd level {level}: {source}")]
    Zstd {
        level: i32,
        #[source]
        source: std::io::Error,
    },
    /// Stopped between two chunks by a signal (SIGTERM, SIGINT); nothing was left behind.
    #[error("stopped by signal {0}")]
    Interrupted(i32),
    /// Reading an object input or writing an object output failed.
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
}

impl ConvertError {
    /// The signal that stopped the conversion (between chunks or during a transfer).
    pub fn interrupted_by(&self) -> Option<i32> {
        match self {
            ConvertError::Interrupted(sig) => Some(*sig),
            ConvertError::Storage(crate::storage::StorageError::Interrupted { signal, .. }) => {
                Some(*signal)
            }
            _ => None,
        }
    }
}

impl From<crate::tet_input::OpenInputError> for ConvertError {
    fn from(e: crate::tet_input::OpenInputError) -> Self {
        match e {
            crate::tet_input::OpenInputError::Open(e) => ConvertError::Source(e),
            crate::tet_input::OpenInputError::Carry(e) => ConvertError::Carry(e),
        }
    }
}

pub(super) fn refused(msg: impl Into<String>) -> ConvertError {
    ConvertError::Refused(msg.into())
}
