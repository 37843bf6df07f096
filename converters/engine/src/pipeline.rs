//! The conversion pipeline: an opened source ([`Opened`], from [`crate::request::run`]) planned
//! dataset by dataset, then read → (widen) → compress on a pool of worker threads feeding the
//! ordered writer ([`convert_source`]).
//!
//! Workers claim chunk jobs in index order from the [`MemoryBudget`], each with the most memory
//! it can need, and wait — allocating nothing — while that does not fit: the bytes in flight are
//! bounded by the settings' `memory_budget` (default 256 MiB), whatever the number of jobs or
//! the input size, and the chunk the writer waits for is always claimed, so it cannot deadlock
//! (see `format::budget`). Read buffers, compressed buffers and zstd contexts are reused through
//! the budget's idle pool. The pipeline knows nothing of any
//! format: everything format-specific is behind the `tet-source` API.
//!
//! This module drives a conversion and assembles the output's footer; the steps are its
//! submodules: `options` (what shapes a conversion), `paths` (the output path checked),
//! `plan` (variables to datasets), `workers` (the pool, progress, cancellation), `encode` (one
//! chunk: read, widen, compress), `compressor` (zstd contexts) and `report` (the report and
//! [`ConvertError`]).

mod choose;
mod compressor;
mod encode;
mod options;
mod paths;
mod plan;
mod report;
mod workers;

pub use compressor::{chunk_compressor, return_freed_memory};
pub use encode::ZSTD_MIN_SAVING_DIVISOR;
pub use options::{
    CodecChoice, CodecError, ConvertOptions, AUTO_ZSTD_LEVEL, DEFAULT_ZSTD_LEVEL, ZSTD_LEVELS,
};
pub(crate) use paths::check_paths;
pub use paths::OutputError;
pub use plan::{DatasetError, MAX_CHUNK_BYTES, MAX_LABELS};
pub use report::{ConvertError, ConvertReport, DatasetReport, SkippedItem};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tet_source::byte_source::ByteSource;
use tet_source::{Importer, Skipped, Source};

use plan::{dimension_labels, plan_all, Planned};
use workers::{input_ranges, run_workers, Stored};

use crate::format::budget::MemoryBudget;
use crate::format::footer::Footer;
use crate::format::{Codec, TetError, TetWriter, WriterOptions};
use crate::meta;
use crate::tet_input;

/// An importer opened on `input` (its path, or `bytes` read by ranges) and cut to what `opts`
/// selects (`--variables`, `--isel`…: a source over the source), with the footer a `.tet`
/// input hands on (history and metadata, read from the same open file), cut alike.
pub(crate) fn open_selected(
    importer: &dyn Importer,
    input: &Path,
    bytes: Option<Arc<dyn ByteSource>>,
    opts: &ConvertOptions,
) -> Result<(Box<dyn Source>, Option<Footer>), ConvertError> {
    let (source, carried) = tet_input::open_input(importer, input, bytes, &opts.settings.open())?;
    let (source, cuts) = crate::select::apply(source, &opts.settings.select())?;
    let carried = carried
        .map(|mut f| cuts.cut_carried(&mut f).map(|()| f))
        .transpose()?;
    Ok((source, carried))
}

/// The input digest (`sha256:<hex>`) and size of an input that is no local file.
pub type InputDigest = Box<dyn FnOnce() -> std::io::Result<(String, u64)> + Send>;

/// How the input digest of a conversion is had.
pub enum DigestOf {
    /// Read from this local file (or folder) on a thread of its own: the input itself, or the
    /// local copy of an object.
    File(PathBuf),
    /// Computed on a thread of its own while the conversion runs (the objects of a Zarr
    /// prefix stream themselves once).
    Beside(InputDigest),
    /// Computed once the conversion has read what it reads: an object read by ranges hashes
    /// the bytes its reads fetch, and fetches only the rest at the end.
    After(InputDigest),
}

/// One input of a conversion: what the history row and the report name it (a path, a URL) and
/// how its digest is had.
pub struct Parent {
    pub name: PathBuf,
    pub digest: DigestOf,
}

impl Parent {
    /// A local file or folder, named by its path.
    pub fn file(path: &Path) -> Parent {
        Parent {
            name: path.to_path_buf(),
            digest: DigestOf::File(path.to_path_buf()),
        }
    }

    /// The local file read for the input: itself, or its local copy (else its name).
    fn local(&self) -> &Path {
        match &self.digest {
            DigestOf::File(p) => p,
            _ => &self.name,
        }
    }
}

/// A source opened for the pipeline, with what its output's footer and history row are made
/// of besides the chunks.
pub struct Opened<'a> {
    /// The source, selection applied.
    pub source: &'a dyn Source,
    /// Its importer's id (the history row's `format`).
    pub format: &'a str,
    /// Its inputs, in the combined order for a combination (each a parent of the history row).
    pub parents: Vec<Parent>,
    /// History params that describe the inputs (an object input's stamp).
    pub input_params: BTreeMap<String, String>,
    /// The footer of an input `.tet` whose history rows, dataset metadata, global attributes,
    /// skipped items and extension keys the output keeps (the new row is appended to its rows).
    pub carried: Option<Footer>,
    /// When the conversion began (opening included), for the report.
    pub started: Instant,
}

impl<'a> Opened<'a> {
    /// `source` (of format `format`) opened from the local file `input`, carrying nothing.
    pub fn new(source: &'a dyn Source, format: &'a str, input: &Path) -> Opened<'a> {
        Opened {
            source,
            format,
            parents: vec![Parent::file(input)],
            input_params: BTreeMap::new(),
            carried: None,
            started: Instant::now(),
        }
    }
}

/// Converts an opened source into the `.tet` file `output`: the pipeline's step of every
/// conversion ([`crate::request::run`] opens the inputs and calls it).
pub fn convert_source(
    opened: Opened<'_>,
    output: &Path,
    opts: &ConvertOptions,
) -> Result<ConvertReport, ConvertError> {
    let Opened {
        source,
        format,
        parents,
        input_params,
        carried,
        started,
    } = opened;
    let mut parents = parents.into_iter();
    let first = parents
        .next()
        .ok_or_else(|| ConvertError::Refused("no input".into()))?;
    let more: Vec<Parent> = parents.collect();
    let input = first.local().to_path_buf();
    let names = Names {
        first: first.name,
        more: more.iter().map(|p| p.name.clone()).collect(),
        params: input_params,
    };
    convert_digested(
        source,
        format,
        &input,
        &names,
        output,
        opts,
        (started, carried),
        (first.digest, more),
    )
}

/// What the history row names as the inputs: the first, the others of a combination, and
/// the params that describe them.
struct Names {
    first: PathBuf,
    more: Vec<PathBuf>,
    params: BTreeMap<String, String>,
}

/// A combined conversion's (`--concat`) other inputs: checked not to be the output, then
/// hashed: local files in turn on one thread of their own (each one is a parent of the
/// history row), the others as their [`DigestOf`] says.
fn digest_more_inputs(
    output: &Path,
    opts: &ConvertOptions,
    more: Vec<Parent>,
) -> Result<MorePending, ConvertError> {
    for m in &more {
        check_paths(m.local(), output, &opts.settings)?;
    }
    if more.iter().all(|m| matches!(m.digest, DigestOf::File(_))) {
        let paths: Vec<PathBuf> = more.iter().map(|m| m.local().to_path_buf()).collect();
        return Ok(MorePending::Paths(std::thread::spawn(move || {
            paths.iter().map(|p| meta::digest_input(p)).collect()
        })));
    }
    let pending = more
        .into_iter()
        .map(|m| {
            let local = m.local().to_path_buf();
            digest_beside(m.digest, &local, Vec::new())
        })
        .collect();
    Ok(MorePending::Given(pending))
}

/// The other inputs' digests under way.
enum MorePending {
    /// Hashed from their paths, in turn, on one thread.
    Paths(std::thread::JoinHandle<std::io::Result<Vec<(String, u64)>>>),
    Given(Vec<Pending>),
}

impl MorePending {
    /// Each other input's digest and size, in the combined order.
    fn finish(self) -> Result<Vec<(String, u64)>, ConvertError> {
        let panicked = |_| ConvertError::Panicked {
            what: "the input digest thread",
        };
        match self {
            MorePending::Paths(t) => Ok(t.join().map_err(panicked)??),
            MorePending::Given(v) => v
                .into_iter()
                .map(|p| p.finish().map(|(d, n, _)| (d, n)))
                .collect(),
        }
    }
}

/// [`convert_source`]: `input` is the local file of the first input (read for its digest and
/// the raw chunks copied file to file), `names` what the row names.
#[allow(clippy::too_many_arguments)]
fn convert_digested(
    source: &dyn Source,
    format: &str,
    input: &Path,
    names: &Names,
    output: &Path,
    opts: &ConvertOptions,
    (started, carried): (Instant, Option<Footer>),
    (first_digest, more): (DigestOf, Vec<Parent>),
) -> Result<ConvertReport, ConvertError> {
    let output = &check_paths(input, output, &opts.settings)?;
    let more_digests = digest_more_inputs(output, opts, more)?;
    // From here on the source is what `.tet` stores: 0-d as [1], complex as two parts.
    let lowered = crate::lower::Lowered::new(source);
    let source: &dyn Source = &lowered;
    // The input's size and mtime as the conversion starts (what `tet audit` compares later).
    let input_stat = (!crate::storage::is_url(&names.first))
        .then(|| meta::inputs::stat_input(&names.first).ok())
        .flatten();
    let (planned, skipped) = plan_all(source, opts, carried.is_some())?;
    let checksums = opts.settings.checksums;
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
    let digest = digest_beside(first_digest, input, ranges);
    let labels = dimension_labels(source)?;
    let (mut footer, skipped) = start_footer(&lowered, &planned, carried, &labels, skipped);

    let jobs = opts.settings.threads();
    let out_err = |e: TetError| ConvertError::Write {
        path: output.clone(),
        source: e,
    };
    // The budget, not a chunk count, bounds the data in flight: the reorder window is open.
    let total: u64 = planned.iter().map(|p| p.grid.total).sum();
    let budget = Arc::new(MemoryBudget::new(
        crate::format::pool_limit(opts.settings.memory_budget_bytes()),
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

    let (digest, bytes_in, range_digests) = digest.finish()?;
    writer.provide_digests(ranged.iter().map(|r| r.0).zip(range_digests));
    log::debug!("memory budget: {:?}", budget.stats());
    let at = meta::timestamp();
    let input_mtime = input_stat.map(|(_, mtime)| mtime);
    let mut params = history_params(opts, names, bytes_in, input_mtime, carried);
    let chooser = match opts.settings.codec {
        CodecChoice::Smallest { ext, .. } => Some(ext),
        CodecChoice::AutoExt => Some(true),
        _ => None,
    };
    choose::record(&planned, chooser, &mut params);
    footer
        .history
        .push(meta::convert_row(format, &at, &digest, params));
    // The report counts every input's bytes.
    let bytes_in = bytes_in.saturating_add(record_more_inputs(&mut footer, more_digests.finish()?));
    footer.file.insert("tool".into(), "tet-convert".into());
    footer
        .file
        .insert("library_version".into(), env!("CARGO_PKG_VERSION").into());
    footer.file.insert("created_at".into(), at);
    // Where the file lies now: `output`, or its temporary name when a batch worker leaves
    // the commit to its supervisor (format::writer::defer_commits).
    let written = writer.finish(&footer).map_err(out_err)?;

    let bytes_out = std::fs::metadata(&written)?.len();
    let datasets = dataset_reports(
        source,
        &planned,
        &stored,
        &stored_codecs(&written, &planned),
    );
    let warnings = datasets
        .iter()
        .filter_map(|d| {
            d.widened
                .as_ref()
                .map(|w| format!("dataset `{}`: widened {w}", d.name))
        })
        .collect();
    Ok(ConvertReport {
        input: names.first.display().to_string(),
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
        order: Vec::new(),
        retries: 0,
    })
}

/// Records a combined conversion's other inputs (`more`: digest and size of each, in the
/// combined order) in its history row: each one a parent, its size `input_bytes.K` beside its
/// `input.K`. Returns their bytes.
fn record_more_inputs(footer: &mut Footer, more: Vec<(String, u64)>) -> u64 {
    let bytes = more.iter().fold(0u64, |t, m| t.saturating_add(m.1));
    if let Some(row) = footer.history.last_mut() {
        for (k, (_, n)) in more.iter().enumerate() {
            let key = format!("{}.{}", meta::inputs::BYTES_KEY, k + 1);
            row.params.insert(key, n.to_string());
        }
        row.parents.extend(more.into_iter().map(|m| m.0));
    }
    bytes
}

/// An input digest under way: on its own thread, or asked for at the end.
enum Pending {
    Thread(std::thread::JoinHandle<std::io::Result<(String, u64, Vec<u64>)>>),
    After(InputDigest),
}

impl Pending {
    /// The digest, size and range digests (once the chunks are read).
    fn finish(self) -> Result<(String, u64, Vec<u64>), ConvertError> {
        match self {
            Pending::Thread(t) => Ok(t.join().map_err(|_| ConvertError::Panicked {
                what: "the input digest thread",
            })??),
            Pending::After(f) => Ok(f().map(|(d, n)| (d, n, Vec::new()))?),
        }
    }
}

/// Starts hashing the input beside the conversion (a file: with the xxh3 digests of the byte
/// `ranges` copied file to file), unless it is hashed at the end ([`DigestOf::After`]).
fn digest_beside(digest_of: DigestOf, input: &Path, ranges: Vec<(u64, u64)>) -> Pending {
    let path = input.to_path_buf();
    match digest_of {
        DigestOf::After(f) => Pending::After(f),
        DigestOf::Beside(f) => Pending::Thread(std::thread::spawn(move || {
            f().map(|(d, n)| (d, n, Vec::new()))
        })),
        DigestOf::File(_) => Pending::Thread(std::thread::spawn(move || {
            meta::digest_input_and_ranges(&path, &ranges)
        })),
    }
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
        footer.ext.global_facts =
            Some(crate::format::schema::Facts(source.global_facts().to_vec()));
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
    names: &Names,
    bytes_in: u64,
    input_mtime: Option<String>,
    frames_kept: u64,
) -> BTreeMap<String, String> {
    let mut params = opts.settings.recorded_params();
    params.insert("tool".into(), "tet-convert".into());
    params.insert("version".into(), env!("CARGO_PKG_VERSION").into());
    params.insert(meta::inputs::BYTES_KEY.into(), bytes_in.to_string());
    // Chunks whose zstd frame was kept from the source (what a reader decodes is the same).
    if frames_kept > 0 {
        params.insert(ZSTD_FRAMES_KEPT_KEY.into(), frames_kept.to_string());
    }
    // What describes the inputs (an object input's stamp, never a local copy's path or time).
    params.extend(names.params.clone());
    params.insert("input".into(), names.first.display().to_string());
    // The other inputs of a combined conversion, in the combined order (`input` is the first).
    for (k, m) in names.more.iter().enumerate() {
        params.insert(format!("input.{}", k + 1), m.display().to_string());
    }
    // Where a relative input lies, for `tet audit` (recorded, never byte-affecting; a URL is
    // no relative path).
    let relative = |p: &Path| p.is_relative() && !crate::storage::is_url(p);
    if relative(&names.first) || names.more.iter().any(|m| relative(m)) {
        if let Ok(cwd) = std::env::current_dir() {
            params.insert(meta::inputs::CWD_KEY.into(), cwd.display().to_string());
        }
    }
    if let Some(mtime) = input_mtime {
        params.insert(meta::inputs::MTIME_KEY.into(), mtime);
    }
    params
}

/// The chunks of each planned dataset of the written `output` by the codec they are stored
/// with, named as `tet info` names them: a chunk may be stored otherwise than its dataset was
/// planned (under `auto` a chunk of one repeated value as zstd, a chunk zstd cannot shrink raw).
fn stored_codecs(output: &Path, planned: &[Planned]) -> Vec<BTreeMap<String, u64>> {
    let mut out = vec![BTreeMap::new(); planned.len()];
    if let Ok(f) = crate::format::TetFile::open(output) {
        for e in &f.entries {
            if let Some(m) = usize::try_from(e.dataset_id)
                .ok()
                .and_then(|d| out.get_mut(d))
            {
                let name = e
                    .codec()
                    .map_or_else(|| format!("codec{}", e.codec_id), |c| c.name().to_string());
                *m.entry(name).or_default() += 1;
            }
        }
    }
    out
}

/// A dataset's codec as the report says it: the planned one (`zstd:3`) when every chunk is
/// stored with it, else the codecs its chunks are stored with (`raw+zstd`).
fn codec_text(planned: String, stored: &BTreeMap<String, u64>) -> String {
    let is_planned = |k: &String| planned == *k || planned.starts_with(&format!("{k}:"));
    if stored.keys().all(is_planned) {
        return planned;
    }
    stored.keys().cloned().collect::<Vec<_>>().join("+")
}

/// The report of each planned dataset, with its `(raw, stored)` bytes and the codecs its
/// chunks are stored with.
fn dataset_reports(
    source: &dyn Source,
    planned: &[Planned],
    stored: &[(u64, u64)],
    codecs: &[BTreeMap<String, u64>],
) -> Vec<DatasetReport> {
    planned
        .iter()
        .zip(stored)
        .zip(codecs)
        .map(|((p, &(raw, st)), codecs)| DatasetReport {
            name: p.spec.name.clone(),
            dtype: p.spec.dtype.name().into(),
            source_dtype: source.variables()[p.var].dtype.name().into(),
            shape: p.spec.shape.clone(),
            chunk_shape: p.spec.chunk_shape.clone(),
            chunks: p.grid.total,
            raw_bytes: raw,
            stored_bytes: st,
            codec: codec_text(
                match p.codec {
                    Codec::Raw => "raw".into(),
                    c => format!("{}:{}", c.name(), p.level),
                },
                codecs,
            ),
            codecs: codecs.clone(),
            widened: p.widen.describe().map(String::from),
        })
        .collect()
}

/// History param: how many chunks kept the source's zstd frame (recorded, never byte-affecting).
pub const ZSTD_FRAMES_KEPT_KEY: &str = "zstd_frames_kept";
