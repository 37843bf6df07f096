//! `tet export`: streams the datasets of a `.tet` file back out to NetCDF-4, Zarr v3 or NPY/NPZ.
//!
//! The engine keeps the container side; each format crate owns its writer (the other direction
//! of its importer):
//!
//! - [`Plan::new`] (module `raise`) reads the footer only and raises what `.tet` stores back to
//!   what the file held, as far as the target can hold it (the format crate's
//!   [`Capabilities`]): a [`tet_source::export::Model`] of arrays (name, element type with the widening undone,
//!   complex pairs joined, 0-d restored, dims, typed attributes, role, unlimited dimensions),
//!   string variables and global attributes, after the `--dataset` selection.
//! - A [`tet_source::export::ChunkSource`] over the `.tet` file (module `chunks`) then delivers one chunk at a time
//!   in the model's element type (decoded into reusable buffers, narrowed with a range check),
//!   and the target's writer (`tet_netcdf::export`, `tet_zarr::export`, `tet_npy::export`) puts
//!   each chunk at its region. Memory is a few chunks, whatever the dataset size.
//!
//! Every writer builds its output in a temporary directory beside `OUT`; the engine renames it
//! into place only once everything is written (after making it durable), so a failed export
//! leaves nothing behind.

mod chunks;
mod raise;
mod region;

use std::path::{Path, PathBuf};

pub use tet_source::export::{f16_to_f32, Compression};
use tet_source::export::{io_err, Capabilities, Exporter, Output};
use tet_source::ElementType;

pub use crate::format::open_checks::{check_index_covers, check_integrity};
pub use raise::Plan;
pub use region::{read_selection, DamagedFooter, Reading, EVERY_TYPE};

use crate::format::{HistoryRow, TetError, TetFile};

/// An output format: one exporter of the driver registry ([`crate::registry::formats`]).
#[derive(Clone, Copy)]
pub struct Target(&'static dyn Exporter);

impl PartialEq for Target {
    fn eq(&self, other: &Target) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Target {}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Target({})", self.name())
    }
}

impl Target {
    /// netCDF-4 (present in every build; without the `netcdf` feature it refuses to write).
    pub const NETCDF: Target = Target(crate::registry::NETCDF_EXPORTER);
    /// Zarr v3.
    pub const ZARR: Target = Target(&tet_zarr::export::ZarrExporter);
    /// One `.npy` per array in a directory (or a single `.npy` file for one array).
    pub const NPY: Target = Target(&tet_npy::export::NpyExporter { archive: false });
    /// One `.npz` archive.
    pub const NPZ: Target = Target(&tet_npy::export::NpyExporter { archive: true });

    /// Every target of the registry, in its order.
    pub fn all() -> Vec<Target> {
        crate::registry::formats()
            .iter()
            .filter_map(|f| f.exporter)
            .map(Target)
            .collect()
    }

    /// The target `tet export --to` names (its name or an alias, any case).
    pub fn from_name(s: &str) -> Option<Target> {
        let s = s.to_ascii_lowercase();
        Target::all()
            .into_iter()
            .find(|t| t.name() == s || t.0.aliases().contains(&s.as_str()))
    }

    /// The target an output path's extension names.
    pub fn from_path(p: &Path) -> Option<Target> {
        let ext = p.extension()?.to_str()?.to_ascii_lowercase();
        Target::all()
            .into_iter()
            .find(|t| t.0.extensions().contains(&ext.as_str()))
    }

    /// `netcdf`, `zarr`, `npy`, `npz`.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// What the target holds, as its exporter declares it.
    pub fn capabilities(self) -> Capabilities {
        self.0.capabilities()
    }

    /// The names `--to` takes, for messages: `netcdf, zarr, npy, npz`.
    pub fn names() -> String {
        Target::all()
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What to export and how.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// The format; `None`: from the output's extension.
    pub target: Option<Target>,
    /// Datasets to export (exact names, complex base names or group prefixes); empty: all.
    pub datasets: Vec<String>,
    pub compression: Compression,
    /// Replace an existing output.
    pub force: bool,
    /// Asked before every chunk: `Some(code)` stops the export with
    /// [`ExportError::Interrupted`] (the staged output removed). The default never stops.
    pub cancel: crate::control::Cancel,
}

/// Errors of an export: the one [`tet_source::export::ExportError`] the format crates' exporters
/// return too; a `.tet` read error is its `Container` variant, kept as the cause.
pub use tet_source::export::ExportError;

impl From<TetError> for ExportError {
    fn from(e: TetError) -> Self {
        ExportError::Container(Box::new(e))
    }
}

pub type Result<T, E = ExportError> = std::result::Result<T, E>;

/// A chunk of the `.tet` file being exported that cannot be read (damaged, failing its
/// checksum): the dataset and chunk it is, with the container's error kept as the cause.
#[derive(Debug, thiserror::Error)]
#[error("dataset `{dataset}` chunk {coords:?}: {source}")]
pub struct ChunkReadError {
    pub dataset: String,
    pub coords: Vec<u64>,
    #[source]
    pub source: TetError,
}

impl From<ChunkReadError> for ExportError {
    fn from(e: ChunkReadError) -> Self {
        ExportError::Container(Box::new(e))
    }
}

/// The footer of the `.tet` file to export cannot be read, so there is no metadata to export:
/// the container's error is kept as the cause.
#[derive(Debug, thiserror::Error)]
#[error("{source} (the metadata to export is unreadable)")]
pub struct FooterUnreadable {
    /// The reader's error about the footer.
    #[source]
    pub source: TetError,
}

impl From<FooterUnreadable> for ExportError {
    fn from(e: FooterUnreadable) -> Self {
        ExportError::Container(Box::new(e))
    }
}

/// The `.tet` file to export cannot be opened as one (not a `.tet` file, a damaged directory or
/// index): its path, with the container's error kept as the cause.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", .path.display())]
pub struct OpenError {
    pub path: PathBuf,
    #[source]
    pub source: TetError,
}

impl From<OpenError> for ExportError {
    fn from(e: OpenError) -> Self {
        ExportError::Container(Box::new(e))
    }
}

/// The NPY (format 1.0) header of a little-endian C-order array, padded to 64 bytes (`None` for
/// an element type NPY lacks).
pub fn npy_header(elem: ElementType, shape: &[u64]) -> Option<Vec<u8>> {
    tet_npy::export::header(elem, shape)
}

/// Facts about a finished export.
#[derive(Debug, Clone)]
pub struct ExportReport {
    pub target: Target,
    pub output: PathBuf,
    /// Each array written: name, element type name, shape.
    pub arrays: Vec<(String, String, Vec<u64>)>,
    /// Zarr chunks whose zstd frames were copied from the `.tet` file verbatim.
    pub reused_chunks: u64,
    pub warnings: Vec<String>,
}

/// Exports `input` (a `.tet` file) to `output`.
pub fn export(input: &Path, output: &Path, opts: &ExportOptions) -> Result<ExportReport> {
    let target = target_of(input, output, opts)?;
    let tet = TetFile::open(input).map_err(|e| match e {
        TetError::Io(source) => ExportError::Io {
            path: input.to_path_buf(),
            source,
        },
        source => OpenError {
            path: input.to_path_buf(),
            source,
        }
        .into(),
    })?;
    write(&tet, target, output, opts)
}

/// [`export`] of an open `.tet` file (a local file, or an object read by ranges, whose chunks
/// are read one at a time as the writer asks for them); `input` names it.
pub fn export_file(
    tet: &TetFile,
    input: &Path,
    output: &Path,
    opts: &ExportOptions,
) -> Result<ExportReport> {
    let target = target_of(input, output, opts)?;
    write(tet, target, output, opts)
}

/// The format to write (`--to`, else the output's extension), once the output is checked not
/// to be the input nor to exist (unless `force`).
fn target_of(input: &Path, output: &Path, opts: &ExportOptions) -> Result<Target> {
    let target = target_for(output, opts)?;
    check_paths(input, output, opts.force)?;
    Ok(target)
}

/// The format to write to `output`: `--to` (`opts.target`), else the one its extension names.
pub fn target_for(output: &Path, opts: &ExportOptions) -> Result<Target> {
    Ok(match opts.target {
        Some(t) => t,
        None => Target::from_path(output).ok_or_else(|| {
            ExportError::Invalid(format!(
                "{}: cannot tell the format from the extension ({}); use --to",
                output.display(),
                Target::all()
                    .iter()
                    .flat_map(|t| t.0.extensions())
                    .map(|e| format!(".{e}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?,
    })
}

/// About how many bytes the export of `tet` as `target` writes (for a free-space check before
/// it starts): the raw bytes of the datasets it reads when the output is not compressed, else
/// their stored (compressed) bytes in the `.tet` file; an estimate, not a bound.
pub fn estimated_size(tet: &TetFile, target: Target, opts: &ExportOptions) -> Result<u64> {
    let plan = Plan::new(tet, target.capabilities(), &opts.datasets)?;
    let read: std::collections::BTreeSet<usize> = plan
        .stored
        .iter()
        .flat_map(|s| std::iter::once(s.ds).chain(s.imag))
        .collect();
    let compressed = match opts.compression {
        Compression::None => false,
        Compression::Default => target == Target::NETCDF || target == Target::ZARR,
        Compression::Zlib(_) | Compression::Zstd(_) => true,
    };
    Ok(tet
        .entries
        .iter()
        .filter(|e| usize::try_from(e.dataset_id).is_ok_and(|d| read.contains(&d)))
        .map(|e| {
            if compressed {
                e.stored_byte_len
            } else {
                e.raw_byte_len
            }
        })
        .fold(0u64, u64::saturating_add))
}

/// Writes the export of `tet` to `output` as `target`.
fn write(
    tet: &TetFile,
    target: Target,
    output: &Path,
    opts: &ExportOptions,
) -> Result<ExportReport> {
    // What a reader refuses before it reads ([`Plan::for_reading`]): a directory or index the
    // footer digest disowns (a renamed dataset, another shape) would otherwise be written out.
    check_integrity(tet)?;
    check_index_covers(tet)?;
    let plan = Plan::new(tet, target.capabilities(), &opts.datasets)?;
    // Written in a private directory beside the output, moved into place when complete (the
    // directory and whatever is in it is removed on failure).
    let parent = parent_dir(output);
    let tmp = tempfile::Builder::new()
        .prefix(".tet-export-")
        .tempdir_in(&parent)
        .map_err(io_err(&parent))?;
    let staging = tmp.path().join("out");
    let out = Output {
        path: output,
        staging: &staging,
    };
    let mut chunks = chunks::TetChunks::new(tet, &plan.stored, &opts.cancel);
    // Errors name the output as the user named it, never the staging folder.
    let written = target
        .0
        .write(&plan.model, &mut chunks, out, opts.compression)
        .map_err(|e| named_as_output(e, tmp.path(), &staging, output))?;
    commit(&staging, output).map_err(|e| named_as_output(e, tmp.path(), &staging, output))?;
    let mut warnings = plan.warnings.clone();
    warnings.extend(written.warnings);
    Ok(ExportReport {
        target,
        output: output.to_path_buf(),
        arrays: written
            .arrays
            .into_iter()
            .map(|a| (a.name, a.dtype.name().to_string(), a.shape))
            .collect(),
        reused_chunks: written.reused_chunks,
        warnings,
    })
}

/// `e` as the user should read it: every path under the private staging folder `tmp` named after
/// `output` instead: the staged output `staging` and what lies in it as `output` and its
/// contents, any other file of the writer's there (an archive entry being written) as `output`
/// itself; in a path field and in a message's text alike, so that no error names a
/// `.tet-export-…` folder or a spool file. A library's or archive's own error is kept as the
/// cause; when its text names a staged path, it is shown renamed, the original one level down.
pub fn named_as_output(e: ExportError, tmp: &Path, staging: &Path, output: &Path) -> ExportError {
    let path = |p: PathBuf| -> PathBuf {
        match p.strip_prefix(staging) {
            Ok(rest) if rest.as_os_str().is_empty() => output.to_path_buf(),
            Ok(rest) => output.join(rest),
            Err(_) if p.starts_with(tmp) => output.to_path_buf(),
            Err(_) => p,
        }
    };
    let text = |s: String| renamed_in_text(&s, tmp, &path);
    let cause = |c: Cause| -> Cause {
        let shown = c.to_string();
        let renamed = text(shown.clone());
        if renamed == shown {
            c
        } else {
            Box::new(RenamedCause {
                text: renamed,
                cause: c,
            })
        }
    };
    match e {
        ExportError::Io { path: p, source } => ExportError::Io {
            path: path(p),
            source,
        },
        ExportError::Invalid(s) => ExportError::Invalid(text(s)),
        ExportError::Data(s) => ExportError::Data(text(s)),
        ExportError::Archive { path: p, source } => ExportError::Archive {
            path: path(p),
            source: cause(source),
        },
        ExportError::Library {
            lib,
            context,
            source,
        } => ExportError::Library {
            lib,
            context: text(context),
            source: cause(source),
        },
        e => e,
    }
}

/// The cause an [`ExportError`] keeps.
type Cause = Box<dyn std::error::Error + Send + Sync>;

/// A library's error whose text named a staged path: the text with the output's name, the
/// error itself as the cause.
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
struct RenamedCause {
    text: String,
    #[source]
    cause: Cause,
}

/// `s` with every path that starts with `tmp` (up to the next space, quote or colon) replaced
/// by `rename` of it.
fn renamed_in_text(s: &str, tmp: &Path, rename: &dyn Fn(PathBuf) -> PathBuf) -> String {
    let needle = tmp.to_string_lossy();
    if needle.is_empty() {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(needle.as_ref()) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ':' | ',' | ')'))
            .unwrap_or(tail.len());
        out.push_str(&rename(PathBuf::from(&tail[..end])).to_string_lossy());
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

fn check_paths(input: &Path, output: &Path, force: bool) -> Result<()> {
    if let (Ok(a), Ok(b)) = (input.canonicalize(), output.canonicalize()) {
        if a == b {
            return Err(ExportError::Invalid(format!(
                "{}: the output is the input",
                output.display()
            )));
        }
    }
    if output.symlink_metadata().is_ok() && !force {
        return Err(ExportError::Invalid(format!(
            "{}: exists (use --force to replace it)",
            output.display()
        )));
    }
    Ok(())
}

/// The directory `output` lives in (`.` for a bare name).
fn parent_dir(output: &Path) -> PathBuf {
    match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// fsyncs a file, or every file and directory below a directory (its own files only: unlike
/// syncfs, the cost does not depend on what else is being written on the file system).
fn sync_tree(p: &Path) -> Result<()> {
    if p.is_dir() {
        for e in std::fs::read_dir(p).map_err(io_err(p))? {
            let e = e.map_err(io_err(p))?;
            sync_tree(&e.path())?;
        }
    }
    std::fs::File::open(p)
        .and_then(|f| f.sync_all())
        .map_err(io_err(p))
}

/// Makes a finished temporary file or directory durable, then moves it onto `output`, replacing
/// what is there, and makes the rename durable: after a crash `output` holds the old content or
/// the complete new one.
fn commit(tmp: &Path, output: &Path) -> Result<()> {
    sync_tree(tmp)?;
    let sync_parent = || {
        std::fs::File::open(parent_dir(output))
            .and_then(|d| d.sync_all())
            .map_err(io_err(output))
    };
    if output.is_dir() && !output.is_symlink() {
        // A directory cannot be renamed over a non-empty one: move the old one aside first.
        let aside = parent_dir(output).join(format!(
            ".{}.old-{}",
            output
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        std::fs::rename(output, &aside).map_err(io_err(output))?;
        std::fs::rename(tmp, output).map_err(io_err(output))?;
        sync_parent()?;
        std::fs::remove_dir_all(&aside).map_err(io_err(&aside))?;
        return Ok(());
    }
    std::fs::rename(tmp, output).map_err(io_err(output))?;
    sync_parent()
}

/// The history rows as text lines for a NetCDF `history` attribute.
pub fn history_lines(rows: &[HistoryRow]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            let at = crate::meta::unix_iso(&r.at).unwrap_or_else(|| r.at.clone());
            let mut s = format!("{at}: tet {} (source {})", r.op, r.source);
            if !r.parents.is_empty() {
                s.push_str(&format!(" parents={}", r.parents.join(",")));
            }
            for (k, v) in &r.params {
                s.push_str(&format!(" {k}={v}"));
            }
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_from_names_and_paths() {
        assert_eq!(Target::from_name("NetCDF4"), Some(Target::NETCDF));
        assert_eq!(Target::from_name("npz"), Some(Target::NPZ));
        assert_eq!(Target::from_name("tiff"), None);
        assert_eq!(Target::from_path(Path::new("a/b.ZARR")), Some(Target::ZARR));
        assert_eq!(Target::from_path(Path::new("a.npy")), Some(Target::NPY));
        assert_eq!(Target::from_path(Path::new("b.bin")), None);
        assert!(Target::ZARR.capabilities().has_complex);
        assert!(!Target::NETCDF.capabilities().has_bool);
        assert_eq!(Target::names(), "netcdf, npy, npz, zarr");
    }
}
