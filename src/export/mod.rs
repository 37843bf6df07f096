//! `tet export`: streams the datasets of a `.tet` file back out to NetCDF-4, Zarr v3 or NPY/NPZ.
//!
//! The engine keeps the container side; each format crate owns its writer (the other direction
//! of its importer):
//!
//! - [`Plan::new`] (module `raise`) reads the footer only and raises what `.tet` stores back to
//!   what the file held, as far as the target can hold it (the format crate's
//!   [`Capabilities`]): a [`Model`] of arrays (name, element type with the widening undone,
//!   complex pairs joined, 0-d restored, dims, typed attributes, role, unlimited dimensions),
//!   string variables and global attributes, after the `--dataset` selection.
//! - A [`ChunkSource`] over the `.tet` file (module `chunks`) then delivers one chunk at a time
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
use tet_source::export::{io_err, Capabilities, ChunkSource, Model, Output, Written};
use tet_source::ElementType;

pub use raise::Plan;
pub use region::{read_selection, EVERY_TYPE};

use crate::format::{HistoryRow, TetError, TetFile};

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    NetCdf,
    Zarr,
    /// One `.npy` per array in a directory (or a single `.npy` file for one array).
    Npy,
    /// One `.npz` archive.
    Npz,
}

impl Target {
    /// `netcdf`, `zarr`, `npy`, `npz`.
    pub fn from_name(s: &str) -> Option<Target> {
        match s.to_ascii_lowercase().as_str() {
            "netcdf" | "nc" | "netcdf4" => Some(Target::NetCdf),
            "zarr" => Some(Target::Zarr),
            "npy" => Some(Target::Npy),
            "npz" => Some(Target::Npz),
            _ => None,
        }
    }

    /// The target an output path's extension names.
    pub fn from_path(p: &Path) -> Option<Target> {
        let ext = p.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "nc" | "nc4" | "cdf" | "netcdf" => Some(Target::NetCdf),
            "zarr" => Some(Target::Zarr),
            "npy" => Some(Target::Npy),
            "npz" => Some(Target::Npz),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::NetCdf => "netcdf",
            Target::Zarr => "zarr",
            Target::Npy => "npy",
            Target::Npz => "npz",
        }
    }

    /// What the target holds, as its exporter declares it (a build without NetCDF support
    /// cannot write NetCDF anyway: it raises nothing the export would need).
    pub fn capabilities(self) -> Capabilities {
        match self {
            #[cfg(feature = "netcdf")]
            Target::NetCdf => tet_netcdf::export::CAPABILITIES,
            #[cfg(not(feature = "netcdf"))]
            Target::NetCdf => Capabilities {
                has_bool: false,
                has_complex: false,
            },
            Target::Zarr => tet_zarr::export::CAPABILITIES,
            Target::Npy | Target::Npz => tet_npy::export::CAPABILITIES,
        }
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

/// Runs the target's writer on `model`, writing at `out.staging`.
fn write(
    target: Target,
    model: &Model,
    chunks: &mut dyn ChunkSource,
    out: Output<'_>,
    compression: Compression,
) -> Result<Written> {
    Ok(match target {
        #[cfg(feature = "netcdf")]
        Target::NetCdf => tet_netcdf::export::write(model, chunks, out, compression)?,
        #[cfg(not(feature = "netcdf"))]
        Target::NetCdf => {
            let _ = (model, chunks, out, compression);
            return Err(ExportError::Invalid(
                "this build has no NetCDF support (cargo feature `netcdf`)".into(),
            ));
        }
        Target::Zarr => tet_zarr::export::write(model, chunks, out, compression)?,
        Target::Npy => tet_npy::export::write(model, chunks, out, compression, false)?,
        Target::Npz => tet_npy::export::write(model, chunks, out, compression, true)?,
    })
}

/// Exports `input` (a `.tet` file) to `output`.
pub fn export(input: &Path, output: &Path, opts: &ExportOptions) -> Result<ExportReport> {
    let target = match opts.target {
        Some(t) => t,
        None => Target::from_path(output).ok_or_else(|| {
            ExportError::Invalid(format!(
                "{}: cannot tell the format from the extension (.nc, .zarr, .npy, .npz); use --to",
                output.display()
            ))
        })?,
    };
    check_paths(input, output, opts.force)?;
    let tet = TetFile::open(input).map_err(|e| match e {
        TetError::Io(source) => ExportError::Io {
            path: input.to_path_buf(),
            source,
        },
        e => ExportError::Invalid(format!("{}: {e}", input.display())),
    })?;
    let plan = Plan::new(&tet, target.capabilities(), &opts.datasets)?;
    #[cfg(not(feature = "netcdf"))]
    if target == Target::NetCdf {
        return Err(ExportError::Invalid(
            "this build has no NetCDF support (cargo feature `netcdf`)".into(),
        ));
    }
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
    let mut chunks = chunks::TetChunks::new(&tet, &plan.stored);
    let written = write(target, &plan.model, &mut chunks, out, opts.compression)?;
    commit(&staging, output)?;
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
        assert_eq!(Target::from_name("NetCDF4"), Some(Target::NetCdf));
        assert_eq!(Target::from_path(Path::new("a/b.ZARR")), Some(Target::Zarr));
        assert_eq!(Target::from_path(Path::new("b.bin")), None);
        assert!(Target::Zarr.capabilities().has_complex);
        assert!(!Target::NetCdf.capabilities().has_bool);
    }
}
