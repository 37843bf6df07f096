//! The conversion pipeline: open a source through the registry, plan every dataset's chunks,
//! then read → (widen) → compress on a pool of worker threads feeding the ordered writer.
//!
//! Workers claim chunk jobs in index order from the [`MemoryBudget`], each with the most memory
//! it can need, and wait — allocating nothing — while that does not fit: the bytes in flight are
//! bounded by `ConvertOptions::memory_budget` (default 256 MiB), whatever the number of jobs or
//! the input size, and the chunk the writer waits for is always claimed, so it cannot deadlock
//! (see `format::budget`). Read buffers, compressed buffers and zstd contexts are reused through
//! the budget's idle pool. The pipeline knows nothing of any
//! format: everything format-specific is behind the `tet-source` API.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use tet_source::byte_source::ByteSource;
use tet_source::{Importer, OpenOptions, Role, Skipped, Source, SourceError, Variable};

use crate::control::{Cancel, Progress, ProgressEvent};
use crate::format::budget::MemoryBudget;
use crate::format::footer::Footer;
use crate::format::{
    ChunkDigest, ChunkPayload, Codec, DatasetSpec, Grid, PayloadBytes, TetError, TetWriter,
    WriterOptions,
};
use crate::meta::{self, storage_type, Widen};
use crate::planner::{self, PlanInput, PlanOptions};
use crate::registry::{self, IdentifyError};
use crate::tet_input;

/// Coordinate variables up to this length also become `coords` labels.
pub const MAX_LABELS: u64 = 64;

/// zstd is kept for a chunk only when it saves at least 1/32 (~3 %) of the raw size: below
/// that, raw chunks read faster and mmap without decoding.
pub const ZSTD_MIN_SAVING_DIVISOR: usize = 32;

/// The zstd level of `--codec zstd` without a level (the zstd CLI's default).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// The zstd level `--codec auto` uses for data the source stored compressed. Level 2 rather
/// than 3: measured on five kinds of 4 MiB chunks (BENCHMARKS.md, issue 14: noisy and smooth
/// f32, f64, masked f32, i16 counts) level 2 compresses 11–55 % faster on four of them, and its
/// output is between 2.8 % smaller and 7.1 % larger; on the netCDF-4 zlib case it is both
/// smaller (478 vs 490 MiB per GiB) and 25 % cheaper. `auto` serves scheduled conversions
/// that mirror the source's choice to compress; `--codec zstd:N` picks any level.
pub const AUTO_ZSTD_LEVEL: i32 = 2;

/// The largest chunk the pipeline holds in memory (raw bytes). A plan over it (one enormous
/// source chunk, or `--chunk` asking for it) is refused up front instead of failing to allocate.
pub const MAX_CHUNK_BYTES: u64 = 2 << 30;

/// `--codec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodecChoice {
    /// Mirror the source: compressed source data → zstd, uncompressed → raw.
    Auto,
    Raw,
    Zstd(i32),
}

/// The levels `--codec zstd:LEVEL` takes (zstd's positive levels).
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=22;

/// A `--codec` value that is none of `auto`, `raw`, `zstd`, `zstd:LEVEL`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "codec {0:?}: expected auto, raw, zstd or zstd:{lo}..{hi}",
    lo = ZSTD_LEVELS.start(),
    hi = ZSTD_LEVELS.end()
)]
pub struct CodecError(pub String);

impl FromStr for CodecChoice {
    type Err = CodecError;
    fn from_str(s: &str) -> Result<Self, CodecError> {
        match s {
            "auto" => Ok(CodecChoice::Auto),
            "raw" => Ok(CodecChoice::Raw),
            "zstd" => Ok(CodecChoice::Zstd(DEFAULT_ZSTD_LEVEL)),
            _ => {
                let level = s
                    .strip_prefix("zstd:")
                    .and_then(|l| l.parse::<i32>().ok())
                    .filter(|l| ZSTD_LEVELS.contains(l))
                    .ok_or_else(|| CodecError(s.into()))?;
                Ok(CodecChoice::Zstd(level))
            }
        }
    }
}

impl std::fmt::Display for CodecChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CodecChoice::Auto => f.write_str("auto"),
            CodecChoice::Raw => f.write_str("raw"),
            CodecChoice::Zstd(l) => write!(f, "zstd:{l}"),
        }
    }
}

/// Everything that shapes a conversion.
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    pub codec: CodecChoice,
    pub plan: PlanOptions,
    /// Worker threads (≥ 1).
    pub jobs: usize,
    /// Bytes of chunk data in flight at most, whatever `jobs` is ([`MemoryBudget`]): workers
    /// wait, allocating nothing, while a chunk's memory does not fit. A chunk larger than the
    /// whole budget is converted alone. Never changes the output bytes.
    pub memory_budget: u64,
    pub open: OpenOptions,
    /// Told of the chunk work as it goes (the CLI draws a progress bar from it).
    pub progress: Option<Progress>,
    /// Asked between chunks whether to stop (the CLI's asks its signal handlers).
    pub cancel: Cancel,
    /// When the output path is a symbolic link, write the file it points to (atomically, beside
    /// the target). Otherwise such an output is refused.
    pub write_through_symlink: bool,
    /// Variables chosen and dimensions cut (`--variables`, `--exclude`, `--isel`, `--sel`).
    pub select: crate::select::SelectOptions,
    /// A combined conversion (`--concat`, see [`crate::concat::convert`]).
    pub combine: Option<crate::concat::Combine>,
    /// What the history row names as the input when `input` is a local copy of it (an object
    /// URL spooled by `batch::remote`); `None`: the input path itself.
    pub input_origin: Option<crate::storage::Origin>,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            codec: CodecChoice::Auto,
            plan: PlanOptions::default(),
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_budget: crate::format::DEFAULT_MEMORY_BUDGET,
            open: OpenOptions::default(),
            progress: None,
            cancel: Cancel::never(),
            write_through_symlink: false,
            select: Default::default(),
            combine: None,
            input_origin: None,
        }
    }
}

impl ConvertOptions {
    /// The options that change output bytes, as history params (never `jobs`).
    pub fn byte_affecting_params(&self) -> BTreeMap<String, String> {
        let mut p = BTreeMap::new();
        p.insert("codec".into(), self.codec.to_string());
        p.insert("chunk".into(), self.plan.describe());
        p.insert(
            "skip_unsupported".into(),
            self.open.skip_unsupported.to_string(),
        );
        if self.open.unpack {
            p.insert("unpack".into(), "true".into());
        }
        if self.open.follow_external {
            p.insert("follow_external".into(), "true".into());
        }
        self.select.params(&mut p);
        if let Some(c) = &self.combine {
            c.params(&mut p);
        }
        p
    }
}

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
    pub codec: String,
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
    /// Refused before any work (bad options, output = input, unmappable data…).
    #[error("{0}")]
    Refused(String),
    /// The selection (`--variables`, `--exclude`, `--isel`, `--sel`) does not fit the input.
    #[error(transparent)]
    Select(#[from] crate::select::SelectError),
    /// A dataset's chunk shape cannot be planned as `--chunk` asks.
    #[error(transparent)]
    Plan(#[from] crate::planner::PlanError),
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
}

fn refused(msg: impl Into<String>) -> ConvertError {
    ConvertError::Refused(msg.into())
}

/// One planned dataset.
struct Planned {
    var: usize,
    spec: DatasetSpec,
    grid: Grid,
    widen: Widen,
    codec: Codec,
    level: i32,
    /// `--codec auto` stored this dataset raw: a chunk of one repeated value (an unallocated
    /// chunk read back as fill values, a never-written variable) is stored as zstd instead.
    constant_as_zstd: bool,
    /// `--codec auto` of a source whose stored chunks are zstd frames of exactly the chunk's
    /// bytes ([`Source::zstd_frames`]): a chunk that is one source chunk keeps its frame.
    carry_frames: bool,
}

/// The absolute form of a path that may not exist yet (its parent must).
fn absolute(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let parent = p.parent().filter(|x| !x.as_os_str().is_empty());
    let dir = parent
        .map(|d| d.canonicalize().unwrap_or_else(|_| d.to_path_buf()))
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
    dir.join(p.file_name().unwrap_or_default())
}

/// Symbolic links followed at most, as the kernel does.
const MAX_SYMLINK_HOPS: usize = 40;

/// The path the output is written to: `output` itself, or, when it is a symbolic link and
/// `through` is set, the file at the end of the link chain (which need not exist yet). A link is
/// refused when `through` is not set: replacing it, or writing where it points, must be asked for.
fn resolve_output(output: &Path, through: bool) -> Result<PathBuf, ConvertError> {
    let mut p = output.to_path_buf();
    for _ in 0..MAX_SYMLINK_HOPS {
        let is_link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            return Ok(p);
        }
        let target = std::fs::read_link(&p)?;
        if !through {
            return Err(refused(format!(
                "output {} is a symbolic link (to {}); --write-through-symlink writes to its target",
                output.display(),
                target.display()
            )));
        }
        p = match p.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    Err(refused(format!(
        "output {}: too many levels of symbolic links",
        output.display()
    )))
}

/// Refuses an output that would overwrite the input (the same path, a link to it, or another
/// name of the same file), is a directory, or has no directory; returns the path to write
/// (see [`resolve_output`]).
fn check_paths(input: &Path, output: &Path, through: bool) -> Result<PathBuf, ConvertError> {
    let overwrite = || refused("the output would overwrite the input");
    if absolute(input) == absolute(output) {
        return Err(overwrite());
    }
    let output = resolve_output(output, through)?;
    if absolute(input) == absolute(&output) || same_file(input, &output) {
        return Err(overwrite());
    }
    if output.is_dir() {
        return Err(refused(format!(
            "output {} is a directory",
            output.display()
        )));
    }
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(refused(format!(
                "output directory {} does not exist",
                dir.display()
            )));
        }
    }
    Ok(output)
}

/// Whether two existing paths are one file (hard links included).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Converts `input` into the `.tet` file `output`.
pub fn convert(
    input: &Path,
    output: &Path,
    opts: &ConvertOptions,
) -> Result<ConvertReport, ConvertError> {
    let started = Instant::now();
    let output = &check_paths(input, output, opts.write_through_symlink)?;
    let importer = registry::identify(input)?;
    log::debug!("{}: identified as {}", input.display(), importer.name());
    let source = importer.open(input, &opts.open)?;
    // Only the chosen variables, cut (`--variables`, `--isel`…): a source over the source.
    let (source, cuts) = crate::select::apply(source, &opts.select)?;
    // A `.tet` input (re-chunk, re-compress) hands its footer on: history and metadata.
    let carried = if importer.id() == tet_input::ID {
        let mut f = tet_input::carried_footer(input, &opts.open).map_err(ConvertError::Refused)?;
        cuts.cut_carried(&mut f)?;
        Some(f)
    } else {
        None
    };
    convert_carrying(
        source.as_ref(),
        importer.id(),
        input,
        output,
        opts,
        started,
        carried,
    )
}

/// The input digest (`sha256:<hex>`) and size of an input that is no local file, computed
/// while the conversion runs (an object input streams itself once).
pub type InputDigest = Box<dyn FnOnce() -> std::io::Result<(String, u64)> + Send>;

/// [`convert`] of an input that is no local file: `bytes` are its bytes (an object read by
/// ranges), `importer` its format ([`Importer::opens_bytes`]), `digest` its input digest; `input`
/// names it (a URL).
pub fn convert_bytes(
    input: &Path,
    importer: &dyn Importer,
    bytes: Arc<dyn ByteSource>,
    digest: InputDigest,
    output: &Path,
    opts: &ConvertOptions,
) -> Result<ConvertReport, ConvertError> {
    let started = Instant::now();
    log::debug!("{}: read by ranges as {}", input.display(), importer.name());
    let source = importer.open_bytes(input, bytes, &opts.open)?;
    let (source, _cuts) = crate::select::apply(source, &opts.select)?;
    convert_digested(
        source.as_ref(),
        importer.id(),
        input,
        output,
        opts,
        started,
        None,
        Some(digest),
    )
}

/// [`convert`] of a source the caller opened from an input that is no local file (a Zarr store
/// under an object prefix, read through a zarrs storage): `format` is its importer's id,
/// `digest` its input digest; `input` names it (a URL).
pub fn convert_opened(
    input: &Path,
    source: Box<dyn Source>,
    format: &str,
    digest: InputDigest,
    output: &Path,
    opts: &ConvertOptions,
) -> Result<ConvertReport, ConvertError> {
    let started = Instant::now();
    let (source, _cuts) = crate::select::apply(source, &opts.select)?;
    convert_digested(
        source.as_ref(),
        format,
        input,
        output,
        opts,
        started,
        None,
        Some(digest),
    )
}

/// Converts an opened source (format id `format`, read from `input`, which is also what the
/// history digest covers) into `output`. `started` is when the conversion began, for the report.
pub fn convert_source(
    source: &dyn Source,
    format: &str,
    input: &Path,
    output: &Path,
    opts: &ConvertOptions,
    started: Instant,
) -> Result<ConvertReport, ConvertError> {
    convert_carrying(source, format, input, output, opts, started, None)
}

/// [`convert_source`], starting from `carried`: the footer of an input `.tet` whose history rows,
/// dataset metadata, global attributes, skipped items and extension keys the output keeps (the
/// new history row is appended to its rows).
pub(crate) fn convert_carrying(
    source: &dyn Source,
    format: &str,
    input: &Path,
    output: &Path,
    opts: &ConvertOptions,
    started: Instant,
    carried: Option<Footer>,
) -> Result<ConvertReport, ConvertError> {
    convert_digested(source, format, input, output, opts, started, carried, None)
}

/// [`convert_carrying`]; the input digest from `digest` when given (an input that is no local
/// file), else by reading `input`.
#[allow(clippy::too_many_arguments)]
fn convert_digested(
    source: &dyn Source,
    format: &str,
    input: &Path,
    output: &Path,
    opts: &ConvertOptions,
    started: Instant,
    carried: Option<Footer>,
    digest: Option<InputDigest>,
) -> Result<ConvertReport, ConvertError> {
    let digest_of = digest;
    let output = &check_paths(input, output, opts.write_through_symlink)?;
    // A combined conversion (`--concat`): no input is overwritten, and each one is a parent.
    for more in crate::concat::more_inputs(opts) {
        check_paths(more, output, opts.write_through_symlink)?;
    }
    let more = crate::concat::more_inputs(opts).to_vec();
    let more_digests = std::thread::spawn(move || {
        more.iter()
            .map(|p| meta::digest_input(p).map(|d| d.0))
            .collect::<std::io::Result<Vec<String>>>()
    });
    // From here on the source is what `.tet` stores: 0-d as [1], complex as two parts.
    let lowered = crate::lower::Lowered::new(source);
    let source: &dyn Source = &lowered;
    // The input's size and mtime as the conversion starts (what `tet audit` compares later).
    let input_stat = meta::inputs::stat_input(input).ok();
    let (planned, skipped) = plan_all(source, opts, carried.is_some())?;
    let checksums = checksums_on();
    // Hash the input on its own thread while the conversion runs. The raw chunks copied file to
    // file out of the input itself get their digests in the same pass (their bytes are read
    // once, for both digests; the workers and the write stage never read them).
    let ranged = if checksums {
        input_ranges(source, &planned, input)
    } else {
        Vec::new()
    };
    let ranges: Vec<(u64, u64)> = ranged.iter().map(|r| (r.1, r.2)).collect();
    let mut later: Vec<u64> = ranged.iter().map(|r| r.0).collect();
    later.sort_unstable();
    let digest_path = input.to_path_buf();
    let digest = std::thread::spawn(move || match digest_of {
        Some(f) => f().map(|(d, n)| (d, n, Vec::new())),
        None => meta::digest_input_and_ranges(&digest_path, &ranges),
    });
    let labels = dimension_labels(source)?;
    let (mut footer, skipped) = start_footer(&lowered, &planned, carried, &labels, skipped);

    let jobs = opts.jobs.max(1);
    let out_err = |e: TetError| ConvertError::Write {
        path: output.clone(),
        source: e,
    };
    // The budget, not a chunk count, bounds the data in flight: the reorder window is open.
    let total: u64 = planned.iter().map(|p| p.grid.total).sum();
    let budget = Arc::new(MemoryBudget::new(
        crate::format::pool_limit(opts.memory_budget),
        total,
    ));
    let mut writer = TetWriter::create(
        output,
        planned.iter().map(|p| p.spec.clone()).collect(),
        WriterOptions {
            window: usize::MAX,
            checksums,
            ..WriterOptions::default()
        },
    )
    .map_err(out_err)?;
    writer.set_budget(budget.clone());
    // Errors of the writer (disk full, file size limit, I/O) name the output.
    let Stored {
        sizes: stored,
        carried,
    } = run_workers(
        source, &planned, &writer, jobs, opts, checksums, &budget, &later,
    )
    .map_err(|e| match e {
        ConvertError::Tet(t) => out_err(t),
        other => other,
    })?;

    let (digest, bytes_in, range_digests) = digest
        .join()
        .map_err(|_| ConvertError::Panicked {
            what: "the input digest thread",
        })??;
    writer.provide_digests(ranged.iter().map(|r| r.0).zip(range_digests));
    log::debug!("memory budget: {:?}", budget.stats());
    let at = meta::timestamp();
    let input_mtime = input_stat.map(|(_, mtime)| mtime);
    let params = history_params(opts, input, bytes_in, input_mtime, carried);
    footer
        .history
        .push(meta::convert_row(format, &at, &digest, params));
    let more_digests = more_digests
        .join()
        .map_err(|_| ConvertError::Panicked {
            what: "the input digest thread",
        })??;
    if let Some(row) = footer.history.last_mut() {
        row.parents.extend(more_digests);
    }
    footer.file.insert("tool".into(), "tet-convert".into());
    footer
        .file
        .insert("library_version".into(), env!("CARGO_PKG_VERSION").into());
    footer.file.insert("created_at".into(), at);
    writer.finish(&footer).map_err(out_err)?;

    let bytes_out = std::fs::metadata(output)?.len();
    let datasets = dataset_reports(source, &planned, &stored);
    let warnings = datasets
        .iter()
        .filter_map(|d| {
            d.widened
                .as_ref()
                .map(|w| format!("dataset `{}`: widened {w}", d.name))
        })
        .collect();
    Ok(ConvertReport {
        input: input.display().to_string(),
        output: output.display().to_string(),
        format: format.into(),
        input_digest: digest,
        bytes_in,
        bytes_out,
        raw_bytes: stored.iter().map(|s| s.0).sum(),
        stored_bytes: stored.iter().map(|s| s.1).sum(),
        ratio: if bytes_in > 0 {
            bytes_out as f64 / bytes_in as f64
        } else {
            0.0
        },
        elapsed_s: started.elapsed().as_secs_f64(),
        jobs,
        datasets,
        memory: Some(budget.stats()),
        skipped: skipped
            .into_iter()
            .map(|s| SkippedItem {
                name: s.name,
                reason: s.reason,
            })
            .collect(),
        warnings,
    })
}

/// The output's footer before this conversion's history row: per planned dataset its metadata
/// (`carried` as it was written, else from the source), the carried history, file entries and
/// extension keys, the source's global attributes and facts, and its text variables. Returns
/// it with everything skipped (`skipped` by the planner, then the carried footer's, the
/// source's and the text variables), which the footer records too.
fn start_footer(
    lowered: &crate::lower::Lowered<'_>,
    planned: &[Planned],
    carried: Option<Footer>,
    labels: &BTreeMap<String, Vec<String>>,
    mut skipped: Vec<Skipped>,
) -> (Footer, Vec<Skipped>) {
    let source: &dyn Source = lowered;
    let mut footer = Footer::default();
    let is_carried = carried.is_some();
    let mut carried = carried.unwrap_or_default();
    for p in planned {
        let var = &source.variables()[p.var];
        // Carried metadata is kept as it was written (it knows what an earlier step widened);
        // a dataset it does not describe stays undescribed.
        let meta = match carried.datasets.remove(&p.spec.name) {
            Some(m) => m,
            None if is_carried => Default::default(),
            None => meta::dataset_meta(var, p.widen, lowered.source_shape(p.var), labels),
        };
        footer.datasets.insert(p.spec.name.clone(), meta);
    }
    footer.history = carried.history;
    footer.file = carried.file;
    footer.ext = carried.ext;
    footer.global_attrs = source.global_attrs().to_vec();
    if !source.global_facts().is_empty() {
        footer.ext.global_facts = Some(crate::format::schema::Facts(
            source.global_facts().to_vec(),
        ));
    }
    skipped.extend(carried.skipped);
    skipped.extend(source.skipped().iter().cloned());
    let texts = source.text_variables();
    if !texts.is_empty() {
        footer.ext.text_variables = Some(meta::text_variable_records(texts));
        skipped.extend(texts.iter().map(|t| Skipped {
            name: t.name.clone(),
            reason: "strings have no numeric .tet form: values kept in the footer (tet_ext.text_variables)".into(),
        }));
    }
    footer.skipped = skipped.clone();
    (footer, skipped)
}

/// The params of this conversion's history row: the byte-affecting options, the tool, the
/// input (path, size, mtime, and the working directory of a relative path), and how many
/// chunks kept the source's zstd frame.
fn history_params(
    opts: &ConvertOptions,
    input: &Path,
    bytes_in: u64,
    input_mtime: Option<String>,
    frames_kept: u64,
) -> BTreeMap<String, String> {
    let mut params = opts.byte_affecting_params();
    params.insert("tool".into(), "tet-convert".into());
    params.insert("version".into(), env!("CARGO_PKG_VERSION").into());
    params.insert(meta::inputs::BYTES_KEY.into(), bytes_in.to_string());
    // Chunks whose zstd frame was kept from the source (what a reader decodes is the same).
    if frames_kept > 0 {
        params.insert(ZSTD_FRAMES_KEPT_KEY.into(), frames_kept.to_string());
    }
    // An object input read from a local copy: its URL and stamp, never the copy's path or time.
    if let Some(origin) = &opts.input_origin {
        params.insert("input".into(), origin.name.clone());
        params.extend(origin.params.clone());
        return params;
    }
    params.insert("input".into(), input.display().to_string());
    // The other inputs of a combined conversion, in the combined order (`input` is the first).
    let more = crate::concat::more_inputs(opts);
    for (k, m) in more.iter().enumerate() {
        params.insert(format!("input.{}", k + 1), m.display().to_string());
    }
    // Where a relative input lies, for `tet audit` (recorded, never byte-affecting).
    if input.is_relative() || more.iter().any(|m| m.is_relative()) {
        if let Ok(cwd) = std::env::current_dir() {
            params.insert(meta::inputs::CWD_KEY.into(), cwd.display().to_string());
        }
    }
    if let Some(mtime) = input_mtime {
        params.insert(meta::inputs::MTIME_KEY.into(), mtime);
    }
    params
}

/// The report of each planned dataset, with its `(raw, stored)` bytes.
fn dataset_reports(
    source: &dyn Source,
    planned: &[Planned],
    stored: &[(u64, u64)],
) -> Vec<DatasetReport> {
    planned
        .iter()
        .zip(stored)
        .map(|(p, &(raw, st))| DatasetReport {
            name: p.spec.name.clone(),
            dtype: p.spec.dtype.name().into(),
            source_dtype: source.variables()[p.var].dtype.name().into(),
            shape: p.spec.shape.clone(),
            chunk_shape: p.spec.chunk_shape.clone(),
            chunks: p.grid.total,
            raw_bytes: raw,
            stored_bytes: st,
            codec: match p.codec {
                Codec::Raw => "raw".into(),
                Codec::Zstd => format!("zstd:{}", p.level),
            },
            widened: p.widen.describe().map(String::from),
        })
        .collect()
}

/// Maps and plans every variable; returns the planned datasets and what had to be skipped.
fn plan_all(
    source: &dyn Source,
    opts: &ConvertOptions,
    tet_input: bool,
) -> Result<(Vec<Planned>, Vec<Skipped>), ConvertError> {
    let mut planned = Vec::new();
    let mut skipped = Vec::new();
    for (i, var) in source.variables().iter().enumerate() {
        if var.shape.is_empty() || var.shape.len() > crate::format::MAX_RANK {
            let rank = var.shape.len();
            let what = if rank == 0 {
                "rank 0 (a scalar must be given shape [1])".to_string()
            } else {
                format!("rank {rank} > tet maximum rank {}", crate::format::MAX_RANK)
            };
            if opts.open.skip_unsupported {
                skipped.push(Skipped {
                    name: var.name.clone(),
                    reason: what,
                });
                continue;
            }
            return Err(refused(format!(
                "dataset '{}' has {what} (use --skip-unsupported to skip it)",
                var.name
            )));
        }
        let (dtype, widen) = storage_type(var.dtype);
        if var
            .element_count()
            .and_then(|n| n.checked_mul(dtype.size() as u64))
            .is_none()
        {
            return Err(refused(format!(
                "dataset '{}' is too large: its size overflows u64",
                var.name
            )));
        }
        // Stored zstd frames of whole source chunks are kept as they are (under `auto`, which
        // mirrors the source), so the source's own grid is preferred where no option applies.
        let carry = opts.codec == CodecChoice::Auto
            && var.layout.compressed
            && !widen.converts()
            && source.zstd_frames(i);
        let chunk_shape = planner::plan(
            &PlanInput {
                name: &var.name,
                shape: &var.shape,
                elem_size: dtype.size() as u64,
                dims: var.dims.as_deref(),
                // A `.tet` input's chunks are kept on a plain re-compress, never a constraint.
                source_chunks: var.layout.chunk_shape.as_deref().filter(|_| !tet_input),
                preferred_chunks: var
                    .layout
                    .chunk_shape
                    .as_deref()
                    .filter(|_| tet_input || carry),
            },
            &opts.plan,
        )?;
        let grid = Grid::new(&var.shape, &chunk_shape)
            .map_err(|e| refused(format!("dataset '{}': {e}", var.name)))?;
        let chunk_bytes = chunk_shape
            .iter()
            .zip(&var.shape)
            .try_fold(dtype.size() as u64, |acc, (&c, &n)| {
                acc.checked_mul(c.min(n.max(1)))
            });
        if chunk_bytes.is_none_or(|b| b > MAX_CHUNK_BYTES) {
            return Err(refused(format!(
                "dataset '{}': a chunk of {chunk_shape:?} {} elements is more than the {} GiB one \
                 chunk may take in memory (choose smaller chunks with --chunk or --chunk-bytes)",
                var.name,
                dtype.name(),
                MAX_CHUNK_BYTES >> 30
            )));
        }
        let (codec, level) = match opts.codec {
            CodecChoice::Raw => (Codec::Raw, 0),
            CodecChoice::Zstd(l) => (Codec::Zstd, l),
            CodecChoice::Auto if var.layout.compressed => (Codec::Zstd, AUTO_ZSTD_LEVEL),
            CodecChoice::Auto => (Codec::Raw, 0),
        };
        log::debug!(
            "dataset '{}': {} {:?} → {} chunks {:?}, {}",
            var.name,
            var.dtype.name(),
            var.shape,
            dtype.name(),
            chunk_shape,
            match codec {
                Codec::Raw => "raw".to_string(),
                Codec::Zstd => format!("zstd:{level}"),
            }
        );
        planned.push(Planned {
            var: i,
            spec: DatasetSpec {
                name: var.name.clone(),
                dtype,
                shape: var.shape.clone(),
                chunk_shape,
            },
            grid,
            widen,
            codec,
            level,
            constant_as_zstd: opts.codec == CodecChoice::Auto && codec == Codec::Raw,
            carry_frames: carry,
        });
    }
    Ok((planned, skipped))
}

/// Labels per dimension name: the importer's own, then short 1-D coordinate variables.
fn dimension_labels(source: &dyn Source) -> Result<BTreeMap<String, Vec<String>>, ConvertError> {
    let mut labels: BTreeMap<String, Vec<String>> = source
        .dim_labels()
        .iter()
        .filter(|l| l.labels.len() as u64 <= MAX_LABELS)
        .map(|l| (l.dim.clone(), l.labels.clone()))
        .collect();
    for (i, var) in source.variables().iter().enumerate() {
        let is_coord = var.role == Role::Coordinate
            || (var.shape.len() == 1 && var.dims.as_ref().is_some_and(|d| d[0] == var.name));
        if !is_coord || var.shape.len() != 1 || var.shape[0] == 0 || var.shape[0] > MAX_LABELS {
            continue;
        }
        let dim = var
            .dims
            .as_ref()
            .map(|d| d[0].clone())
            .unwrap_or_else(|| var.name.clone());
        if labels.contains_key(&dim) {
            continue;
        }
        let mut buf = vec![0u8; var.shape[0] as usize * var.dtype.size()];
        source
            .read_region(i, &[0], &var.shape, &mut buf)
            .map_err(|source| ConvertError::Labels {
                dataset: var.name.clone(),
                source,
            })?;
        labels.insert(dim, meta::coordinate_labels(&buf, var.dtype, &var.attrs));
    }
    Ok(labels)
}

/// Environment variable that turns checksums off (zstd content checksums, chunk and footer
/// digests), writing files as tet-convert did before they existed. For measuring their cost
/// (`benches/integrity.py`) only.
pub const NO_CHECKSUMS_ENV: &str = "TET_BENCH_NO_CHECKSUMS";

/// Whether this run writes checksums (always, unless [`NO_CHECKSUMS_ENV`] is `1`).
fn checksums_on() -> bool {
    std::env::var_os(NO_CHECKSUMS_ENV).is_none_or(|v| v != "1")
}

/// A zstd context for chunks: level `level`'s parameters with a hash table one step larger
/// (hashLog + 1, see [`chunk_params`]), and zstd's content checksum in every frame (`checksum`:
/// the low 32 bits of XXH64 of the decoded chunk, checked by every zstd decoder). Every chunk is
/// an independent frame, which loses the history a single stream would have at each chunk start;
/// the larger table finds more matches inside the chunk and more than makes up for it (measured
/// in BENCHMARKS.md). Decoding is unaffected: a reader sees an ordinary zstd frame.
pub fn chunk_compressor(
    level: i32,
    checksum: bool,
) -> Result<zstd::bulk::Compressor<'static>, ConvertError> {
    let err = |source: std::io::Error| ConvertError::Zstd { level, source };
    let mut c = zstd::bulk::Compressor::new(level).map_err(err)?;
    c.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(checksum))
        .map_err(err)?;
    let params = chunk_params(level);
    c.set_parameter(zstd::stream::raw::CParameter::HashLog(params.hashLog))
        .map_err(err)?;
    if params.chainLog < stock_params(level).chainLog {
        // Only where lowered: elsewhere zstd keeps choosing it by each chunk's size, as before.
        c.set_parameter(zstd::stream::raw::CParameter::ChainLog(params.chainLog))
            .map_err(err)?;
    }
    Ok(c)
}

/// The compression parameters of our chunk frames at `level`: zstd's own for a chunk of the
/// default size, with the hash table one step larger (hashLog + 1). Where that makes the
/// double-fast match finder's long table reach 1 MiB (level 3: hashLog 17 → 18), its second
/// table (chainLog) goes one step smaller (16 → 15): the two tables then stay close to a 1 MiB L2
/// cache. Measured with the zstd CLI on the 1 GiB input (`-T1 -3 --zstd=hlog=…,clog=…`, issue 25):
/// stock 17/16 8.2 s of CPU, 521.3 MB; 18/16 (what we used before) 10.6 s, 512.7 MB; 18/15
/// 8.4 s, 513.1 MB — nearly all of the size gain at the stock speed. callgrind's cache model
/// with a 1 MiB last level showed the cost: 1.9× the misses of the zstd CLI in the match finder.
fn chunk_params(level: i32) -> zstd::zstd_safe::zstd_sys::ZSTD_compressionParameters {
    let mut p = stock_params(level);
    p.hashLog = (p.hashLog + 1).min(p.windowLog + 1).min(30);
    if p.strategy == zstd::zstd_safe::zstd_sys::ZSTD_strategy::ZSTD_dfast && p.hashLog == 18 {
        p.chainLog -= 1;
    }
    p
}

/// zstd's own parameters of `level` for a chunk of the default size.
fn stock_params(level: i32) -> zstd::zstd_safe::zstd_sys::ZSTD_compressionParameters {
    // SAFETY: a pure function of its arguments (zstd's parameter table lookup).
    unsafe { zstd::zstd_safe::zstd_sys::ZSTD_getCParams(level, DEFAULT_CHUNK_HINT, 0) }
}

/// The chunk size zstd's parameters are looked up for (the planner's default target).
const DEFAULT_CHUNK_HINT: u64 = crate::planner::DEFAULT_CHUNK_BYTES;

/// Makes the C allocator hand large freed blocks back to the system at once (glibc: a fixed mmap
/// threshold of 1 MiB, which also stops glibc raising the threshold as it sees large blocks
/// freed). Chunk buffers the memory budget frees then leave the process instead of staying in one
/// of glibc's per-thread arenas, so resident memory follows the budget: measured on the 1 GiB
/// input at `--jobs 64`, 422 MiB peak RSS without, 229 MiB with (BENCHMARKS.md, issue 25).
/// Process-wide, so the command-line programs call it once at start; a library user decides for
/// their own process. A no-op elsewhere.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before any threads are started.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// The memory of a compression context of `level` as [`chunk_compressor`] sets it up (zstd's
/// own estimate for those parameters).
fn compressor_bytes(level: i32) -> u64 {
    // SAFETY: a pure function of its argument (zstd's size estimate).
    unsafe {
        zstd::zstd_safe::zstd_sys::ZSTD_estimateCCtxSize_usingCParams(chunk_params(level)) as u64
    }
}

/// The byte range of a source file that the chunk at `coords` of `p` is copied from, file to
/// file: raw, not widened, and one contiguous run of a variable the source stores as one extent.
fn file_range<'s>(
    source: &'s dyn Source,
    p: &Planned,
    coords: &[u64],
) -> Option<(&'s std::fs::File, u64, u64)> {
    if p.codec != Codec::Raw || p.widen.converts() {
        return None;
    }
    let var: &Variable = &source.variables()[p.var];
    let ext = source.file_extent(p.var)?;
    let (start, count) = p.grid.chunk_region(coords);
    let (off, len) = contiguous_offset(&var.shape, &start, &count, var.dtype.size() as u64)?;
    Some((ext.file, ext.offset.checked_add(off)?, len))
}

/// The most memory the chunk at `coords` of `p` holds while it is encoded (read buffer, widened
/// copy, compressed output and a compression context, as far as each applies): what the worker
/// claims from the [`MemoryBudget`] before it touches the chunk. A chunk copied file to file
/// holds none.
fn chunk_cost(source: &dyn Source, p: &Planned, coords: &[u64]) -> u64 {
    if file_range(source, p, coords).is_some() {
        return 0;
    }
    let elems = p.grid.chunk_elements(coords);
    let read = elems.saturating_mul(source.variables()[p.var].dtype.size() as u64);
    let stored = elems.saturating_mul(p.spec.dtype.size() as u64);
    let mut cost = read;
    if p.widen.converts() {
        cost = cost.saturating_add(stored);
    }
    if p.codec == Codec::Zstd || p.constant_as_zstd || p.carry_frames {
        let bound = zstd::zstd_safe::compress_bound(stored as usize) as u64;
        let level = if p.codec == Codec::Zstd {
            p.level
        } else {
            DEFAULT_ZSTD_LEVEL
        };
        cost = cost
            .saturating_add(bound)
            .saturating_add(compressor_bytes(level));
    }
    cost
}

/// Hands a worker's scratch buffers and compression context back to the budget's idle pool: a
/// worker holds nothing of its own while it waits for its next claim.
fn recycle(
    budget: &MemoryBudget,
    buf: &mut Vec<u8>,
    wide: &mut Vec<u8>,
    zctx: &mut Option<(i32, zstd::bulk::Compressor<'static>)>,
) {
    for b in [std::mem::take(buf), std::mem::take(wide)] {
        let n = b.capacity() as u64;
        budget.put(b, n);
    }
    if let Some(c) = zctx.take() {
        let n = compressor_bytes(c.0);
        budget.put(c, n);
    }
}

/// The raw chunks the workers copy file to file out of the input file itself, as (sequence
/// number, offset, length) sorted by offset: their digests come from the input digest's pass.
/// A chunk whose range overlaps an earlier one's is left out (its worker hashes it).
fn input_ranges(source: &dyn Source, planned: &[Planned], input: &Path) -> Vec<(u64, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(input) else {
        return Vec::new();
    };
    if !meta.is_file() {
        return Vec::new();
    }
    let bases = chunk_bases(planned);
    let mut ranges = Vec::new();
    for (d, p) in planned.iter().enumerate() {
        let Some(ext) = source.file_extent(p.var) else {
            continue;
        };
        let same = ext
            .file
            .metadata()
            .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
        if !same {
            continue;
        }
        for i in 0..p.grid.total {
            if let Some((_, off, len)) = file_range(source, p, &p.grid.coords(i)) {
                ranges.push((bases[d] + i, off, len));
            }
        }
    }
    ranges.sort_by_key(|r| (r.1, r.2));
    let mut end = 0u64;
    ranges.retain(|r| {
        let keep = r.1 >= end;
        if keep {
            end = r.1 + r.2;
        }
        keep
    });
    ranges
}

/// Byte offset and length of a region inside a C-order array, when the region is one
/// contiguous run there (every axis after the first one with more than one position is whole).
fn contiguous_offset(shape: &[u64], start: &[u64], count: &[u64], elem: u64) -> Option<(u64, u64)> {
    let first = count.iter().position(|&c| c > 1).unwrap_or(count.len());
    if (first + 1..shape.len()).any(|a| count[a] != shape[a]) {
        return None;
    }
    let mut off = 0u64;
    for a in 0..shape.len() {
        off = off.checked_mul(shape[a])?.checked_add(start[a])?;
    }
    let len = count.iter().try_fold(elem, |acc, &c| acc.checked_mul(c))?;
    Some((off.checked_mul(elem)?, len))
}

/// Runs the workers; returns what they stored.
#[allow(clippy::too_many_arguments)]
fn run_workers<'s>(
    source: &'s dyn Source,
    planned: &[Planned],
    writer: &TetWriter<'s>,
    jobs: usize,
    opts: &ConvertOptions,
    checksums: bool,
    budget: &MemoryBudget,
    later: &[u64],
) -> Result<Stored, ConvertError> {
    let bases = chunk_bases(planned);
    let raw_total: u64 = planned
        .iter()
        .map(|p| p.grid.byte_len(p.spec.dtype.size()).unwrap_or(0))
        .sum();
    let progress = opts.progress.as_ref();
    if let Some(p) = progress {
        p.report(ProgressEvent::Start {
            total_bytes: raw_total,
        });
    }
    // What a chunk may hold in memory at most: claimed before a worker touches it.
    let cost = |seq: u64| {
        let d = bases.partition_point(|&b| b <= seq) - 1;
        chunk_cost(source, &planned[d], &planned[d].grid.coords(seq - bases[d]))
    };
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<ConvertError>> = Mutex::new(None);
    let sizes: Vec<(AtomicU64, AtomicU64)> = planned
        .iter()
        .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
        .collect();
    let carried = AtomicU64::new(0);
    // Sources whose library serialises every call anyway are read by one thread at a time.
    let read_lock = Mutex::new(());
    let serial_reads = !source.parallel_reads();
    // The first error stops every worker, the writer and whoever waits for room in the budget.
    let stop = |e: ConvertError, why: &str| {
        let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
        failed.store(true, Ordering::Relaxed);
        writer.abort(why);
        budget.close();
    };

    let worker = || {
        let mut buf: Vec<u8> = Vec::new();
        let mut wide: Vec<u8> = Vec::new();
        let mut zctx: Option<(i32, zstd::bulk::Compressor<'static>)> = None;
        loop {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            // Waits, allocating nothing, until the chunk's memory fits in the budget.
            let Some(mut claim) = budget.claim(cost) else {
                return;
            };
            let seq = claim.seq;
            if let Some(sig) = opts.cancel.requested() {
                stop(ConvertError::Interrupted(sig), "stopped by a signal");
                return;
            }
            let d = bases.partition_point(|&b| b <= seq) - 1;
            let p = &planned[d];
            let coords = p.grid.coords(seq - bases[d]);
            if buf.capacity() == 0 {
                // The last chunk's buffer went to the writer: take one it has written.
                buf = writer.spare_buffer().unwrap_or_default();
            }
            let result = encode_chunk(
                source,
                p,
                &coords,
                &mut buf,
                &mut wide,
                &mut zctx,
                &read_lock,
                serial_reads,
                checksums,
                &|| writer.spare_buffer(),
                budget,
            )
            .and_then(|(payload, kept)| {
                let (raw, stored) = (payload.raw_len, payload.data.len());
                // The claim keeps what the payload holds until the writer has written it; the
                // scratch buffers and the context go back to the budget's idle pool.
                budget.settle(&mut claim, payload.held_bytes());
                recycle(budget, &mut buf, &mut wide, &mut zctx);
                let digest = if later.binary_search(&seq).is_ok() {
                    ChunkDigest::Later
                } else {
                    ChunkDigest::Compute
                };
                writer.submit_digested(d, &coords, payload, digest)?;
                if kept {
                    carried.fetch_add(1, Ordering::Relaxed);
                }
                sizes[d].0.fetch_add(raw, Ordering::Relaxed);
                sizes[d].1.fetch_add(stored, Ordering::Relaxed);
                if let Some(p) = progress {
                    p.report(ProgressEvent::Advance { bytes: raw });
                }
                Ok(())
            });
            if let Err(e) = result {
                stop(chunk_error(e, &p.spec.name, &coords), "conversion failed");
                return;
            }
        }
    };
    let threads = pool_threads(jobs, planned);
    let written = run_pool(threads, writer, budget, &failed, &worker)?;
    if let Some(p) = progress {
        p.report(ProgressEvent::Finish);
    }
    let first_error = first_error.into_inner().unwrap_or_else(|p| p.into_inner());
    run_outcome(written, first_error)?;
    Ok(Stored {
        sizes: sizes
            .iter()
            .map(|(r, s)| (r.load(Ordering::Relaxed), s.load(Ordering::Relaxed)))
            .collect(),
        carried: carried.load(Ordering::Relaxed),
    })
}

/// The worker threads of a run: `jobs`, but no more than there are chunks. A file of one chunk
/// gets one thread, not a pool of `jobs` that would start and wait for nothing: the batch's
/// in-process mode converts thousands of small files one after another (issue 25).
fn pool_threads(jobs: usize, planned: &[Planned]) -> usize {
    let chunks: u64 = planned.iter().map(|p| p.grid.total).sum();
    jobs.min(usize::try_from(chunks).unwrap_or(usize::MAX))
        .max(1)
}

/// Runs `worker` on `jobs` threads beside the write stage (one thread writing chunks in index
/// order; the workers only read, widen and compress); returns how the write stage ended.
fn run_pool(
    jobs: usize,
    writer: &TetWriter<'_>,
    budget: &MemoryBudget,
    failed: &AtomicBool,
    worker: &(dyn Fn() + Sync),
) -> Result<std::thread::Result<Result<(), TetError>>, ConvertError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|source| ConvertError::Threads {
            threads: jobs,
            source,
        })?;
    Ok(std::thread::scope(|scope| {
        let stage = scope.spawn(|| {
            let written = writer.write_all();
            if written.is_err() {
                // Workers waiting for room would wait for writes that never come.
                budget.close();
            }
            written
        });
        pool.scope(|s| {
            for _ in 0..jobs {
                s.spawn(|_| worker());
            }
        });
        if failed.load(Ordering::Relaxed) {
            writer.abort("conversion failed");
        }
        budget.close();
        stage.join()
    }))
}

/// Where each planned dataset's chunks start in the sequence of all chunks the workers take.
fn chunk_bases(planned: &[Planned]) -> Vec<u64> {
    planned
        .iter()
        .scan(0u64, |acc, p| {
            let b = *acc;
            *acc += p.grid.total;
            Some(b)
        })
        .collect()
}

/// The error of the chunk at `coords` of dataset `dataset`: a source error names the chunk.
fn chunk_error(e: ConvertError, dataset: &str, coords: &[u64]) -> ConvertError {
    match e {
        ConvertError::Source(source) => ConvertError::Chunk {
            dataset: dataset.to_string(),
            coords: coords.to_vec(),
            source,
        },
        other => other,
    }
}

/// How the run ended, from the write stage's result (`written`) and the workers' first error.
fn run_outcome(
    written: std::thread::Result<Result<(), TetError>>,
    first_error: Option<ConvertError>,
) -> Result<(), ConvertError> {
    let written = written.map_err(|_| ConvertError::Panicked {
        what: "the write stage",
    })?;
    // The write stage's own failure (a full disk…) is the cause; the workers it stopped only
    // saw "writer failed earlier".
    if let Err(e @ TetError::Io(_)) = written {
        return Err(ConvertError::Tet(e));
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    written?;
    Ok(())
}

/// History param: how many chunks kept the source's zstd frame (recorded, never byte-affecting).
pub const ZSTD_FRAMES_KEPT_KEY: &str = "zstd_frames_kept";

/// What the workers stored: (raw, stored) bytes per dataset, and how many chunks kept the
/// source's zstd frame.
struct Stored {
    sizes: Vec<(u64, u64)>,
    carried: u64,
}

/// Whether `frame` is exactly one zstd frame whose header declares `raw_len` decoded bytes (read
/// from the frame and block headers only; the frame is not decoded).
fn is_frame_of(frame: &[u8], raw_len: u64) -> bool {
    matches!(zstd::zstd_safe::get_frame_content_size(frame), Ok(Some(n)) if n == raw_len)
        && zstd::zstd_safe::find_frame_compressed_size(frame).is_ok_and(|n| n == frame.len())
}

/// Whether `data` is one value of `elem` bytes repeated (an empty chunk is not). Stops at the
/// first element that differs, so real data costs a few comparisons.
fn is_constant(data: &[u8], elem: usize) -> bool {
    if elem == 0 || data.len() < elem || !data.len().is_multiple_of(elem) {
        return false;
    }
    // Every element equals the first exactly when the buffer equals itself shifted by one
    // element: one memcmp, which stops at the first difference.
    data[elem..] == data[..data.len() - elem]
}

/// Reads, widens and encodes one chunk; `true` with a source's zstd frame kept as it is.
#[allow(clippy::too_many_arguments)]
fn encode_chunk<'s>(
    source: &'s dyn Source,
    p: &Planned,
    coords: &[u64],
    buf: &mut Vec<u8>,
    wide: &mut Vec<u8>,
    zctx: &mut Option<(i32, zstd::bulk::Compressor<'static>)>,
    read_lock: &Mutex<()>,
    serial_reads: bool,
    checksums: bool,
    spare: &dyn Fn() -> Option<Vec<u8>>,
    budget: &MemoryBudget,
) -> Result<(ChunkPayload<'s>, bool), ConvertError> {
    let var: &Variable = &source.variables()[p.var];
    let (start, count) = p.grid.chunk_region(coords);
    let elem = var.dtype.size() as u64;
    let n: u64 = count.iter().product::<u64>() * elem;
    let len = usize::try_from(n).map_err(|_| refused("chunk larger than the address space"))?;

    // A stored zstd frame of exactly this chunk is kept verbatim when its header says it holds
    // exactly the chunk's bytes in one frame (anything else is decoded and encoded below).
    if p.carry_frames {
        let frame = if serial_reads {
            let _g = read_lock.lock().unwrap_or_else(|p| p.into_inner());
            source.zstd_frame(p.var, &start, &count)?
        } else {
            source.zstd_frame(p.var, &start, &count)?
        };
        if let Some(frame) = frame.filter(|f| is_frame_of(f, n)) {
            let payload = ChunkPayload {
                codec: Codec::Zstd,
                raw_len: n,
                data: frame.into(),
            };
            return Ok((payload, true));
        }
    }

    // Uncompressed chunks of a variable stored as one run in a file are copied file to file.
    if let Some((file, offset, len)) = file_range(source, p, coords) {
        return Ok((
            ChunkPayload::raw(PayloadBytes::File { file, offset, len }),
            false,
        ));
    }
    // Source bytes. (`Source::contiguous_bytes` would allow a zero-copy borrow, but pages
    // touched through a borrow stay resident until the end; `read_region` lets a mapped
    // importer drop them after the copy, which keeps peak memory independent of the input.)
    buf.clear();
    buf.resize(len, 0);
    if serial_reads {
        let _g = read_lock.lock().unwrap_or_else(|p| p.into_inner());
        source.read_region(p.var, &start, &count, buf)?;
    } else {
        source.read_region(p.var, &start, &count, buf)?;
    }
    let src: Cow<'s, [u8]> = Cow::Owned(std::mem::take(buf));
    let data: Cow<'s, [u8]> = if p.widen.converts() {
        p.widen.apply(&src, wide);
        if let Cow::Owned(v) = src {
            *buf = v; // keep the read buffer for the next chunk
        }
        Cow::Owned(std::mem::take(wide))
    } else {
        src
    };
    let raw_len = data.len() as u64;
    let constant =
        p.codec == Codec::Raw && p.constant_as_zstd && is_constant(&data, p.spec.dtype.size());
    if p.codec == Codec::Raw && !constant {
        return Ok((ChunkPayload::raw(data), false));
    }
    let level = if constant {
        DEFAULT_ZSTD_LEVEL
    } else {
        p.level
    };
    if zctx.as_ref().is_none_or(|(l, _)| *l != level) {
        // A context of this level from the budget's idle pool, or a new one (the claim
        // covers one).
        let pooled = budget.take::<(i32, zstd::bulk::Compressor<'static>)>(|c| c.0 == level);
        *zctx = Some(match pooled {
            Some(c) => c,
            None => (level, chunk_compressor(level, checksums)?),
        });
    }
    let (_, comp) = zctx.as_mut().expect("set above");
    // Into a buffer the writer has finished with, when it has one (no fresh pages per chunk).
    let mut packed = spare().unwrap_or_default();
    packed.reserve(zstd::zstd_safe::compress_bound(data.len()));
    comp.compress_to_buffer(&data, &mut packed)?;
    if packed.len() > data.len() - data.len() / ZSTD_MIN_SAVING_DIVISOR {
        return Ok((ChunkPayload::raw(data), false));
    }
    if let Cow::Owned(v) = data {
        // Reuse the allocation for the next read.
        if buf.capacity() < v.capacity() {
            *buf = v;
        }
    }
    let payload = ChunkPayload {
        codec: Codec::Zstd,
        raw_len,
        data: packed.into(),
    };
    Ok((payload, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_chunks_are_recognised() {
        let f = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        assert!(is_constant(&f(&[1.5; 100]), 4));
        assert!(is_constant(&f(&[7.0]), 4));
        assert!(!is_constant(&f(&[1.5, 1.5, 2.0]), 4));
        assert!(!is_constant(&f(&[]), 4));
        // Two-byte pattern repeated, but not as four-byte elements of one value.
        assert!(!is_constant(&[1, 2, 1, 2, 1, 3, 1, 2], 4));
        assert!(is_constant(&[1, 2, 1, 2, 1, 2, 1, 2], 2));
        assert!(!is_constant(&[0, 0, 0], 2));
    }

    #[test]
    fn codec_choice_parses() {
        assert_eq!("auto".parse(), Ok(CodecChoice::Auto));
        assert_eq!("zstd".parse(), Ok(CodecChoice::Zstd(3)));
        assert_eq!("zstd:19".parse(), Ok(CodecChoice::Zstd(19)));
        assert!("zstd:0".parse::<CodecChoice>().is_err());
        assert_eq!(
            "lz4".parse::<CodecChoice>().unwrap_err().to_string(),
            "codec \"lz4\": expected auto, raw, zstd or zstd:1..22"
        );
        assert_eq!(
            "zstd:23".parse::<CodecChoice>(),
            Err(CodecError("zstd:23".into()))
        );
        assert_eq!(CodecChoice::Zstd(7).to_string(), "zstd:7");
    }

    #[test]
    fn contiguous_regions() {
        assert_eq!(
            contiguous_offset(&[4, 5], &[1, 0], &[2, 5], 4),
            Some((20, 40))
        );
        assert_eq!(
            contiguous_offset(&[4, 5], &[1, 1], &[1, 3], 4),
            Some((24, 12))
        );
        assert_eq!(contiguous_offset(&[4, 5], &[1, 1], &[2, 3], 4), None);
        assert_eq!(
            contiguous_offset(&[4, 5, 6], &[2, 0, 0], &[1, 5, 6], 1),
            Some((60, 30))
        );
        assert_eq!(
            contiguous_offset(&[4, 5, 6], &[2, 1, 0], &[1, 2, 6], 1),
            Some((66, 12))
        );
    }
}
