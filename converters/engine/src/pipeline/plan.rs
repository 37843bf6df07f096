//! Planning: every variable of the (lowered) source mapped to a `.tet` dataset — element type
//! and widening, chunk shape from [`crate::planner`], codec — or skipped, and the labels of short
//! coordinate variables.

use std::collections::BTreeMap;

use tet_source::{Role, Skipped, Source};

use super::choose;
use super::options::{CodecChoice, ConvertOptions, AUTO_ZSTD_LEVEL};
use super::report::ConvertError;

/// A variable `.tet` cannot store as the options ask, refused before any work.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// Rank 0 (not lowered to `[1]`) or above the format's maximum rank.
    #[error("dataset '{dataset}' has {} (use --skip-unsupported to skip it)", rank_problem(*.rank))]
    Rank { dataset: String, rank: usize },
    /// More bytes than 64 bits count.
    #[error("dataset '{dataset}' is too large: its size overflows u64")]
    TooLarge { dataset: String },
    /// A chunk larger than one chunk may take in memory ([`MAX_CHUNK_BYTES`]).
    #[error(
        "dataset '{dataset}': a chunk of {chunk:?} {dtype} elements is more than the {gib} GiB one \
         chunk may take in memory (choose smaller chunks with --chunk or --chunk-bytes)",
        gib = MAX_CHUNK_BYTES >> 30
    )]
    ChunkTooLarge {
        dataset: String,
        chunk: Vec<u64>,
        dtype: &'static str,
    },
}

/// Why a rank has no `.tet` form (also the reason a skipped variable records).
fn rank_problem(rank: usize) -> String {
    if rank == 0 {
        "rank 0 (a scalar must be given shape [1])".to_string()
    } else {
        format!("rank {rank} > tet maximum rank {}", crate::format::MAX_RANK)
    }
}
use crate::format::{Codec, DatasetSpec, Grid};
use crate::meta::{self, storage_type, Widen};
use crate::planner::{self, PlanError, PlanInput, PlanOptions};

/// Coordinate variables up to this length also become `coords` labels.
pub const MAX_LABELS: u64 = 64;

/// The largest chunk the pipeline holds in memory (raw bytes). A plan over it (one enormous
/// source chunk, or `--chunk` asking for it) is refused up front instead of failing to allocate.
pub const MAX_CHUNK_BYTES: u64 = 2 << 30;

/// One planned dataset.
pub(super) struct Planned {
    pub(super) var: usize,
    pub(super) spec: DatasetSpec,
    pub(super) grid: Grid,
    pub(super) widen: Widen,
    pub(super) codec: Codec,
    pub(super) level: i32,
    /// `--codec auto` stored this dataset raw: a chunk of one repeated value (an unallocated
    /// chunk read back as fill values, a never-written variable) is stored as zstd instead.
    pub(super) constant_as_zstd: bool,
    /// `--codec auto` of a source whose stored chunks are zstd frames of exactly the chunk's
    /// bytes ([`Source::zstd_frames`]): a chunk that is one source chunk keeps its frame.
    pub(super) carry_frames: bool,
}

/// Maps and plans every variable; returns the planned datasets and what had to be skipped.
pub(super) fn plan_all(
    source: &dyn Source,
    opts: &ConvertOptions,
    tet_input: bool,
) -> Result<(Vec<Planned>, Vec<Skipped>), ConvertError> {
    let plan = opts.settings.plan();
    check_chunk_names(source, &plan)?;
    let mut planned = Vec::new();
    let mut skipped = Vec::new();
    for (i, var) in source.variables().iter().enumerate() {
        if var.shape.is_empty() || var.shape.len() > crate::format::MAX_RANK {
            let rank = var.shape.len();
            if opts.settings.skip_unsupported {
                skipped.push(Skipped {
                    name: var.name.clone(),
                    reason: rank_problem(rank),
                });
                continue;
            }
            return Err(DatasetError::Rank {
                dataset: var.name.clone(),
                rank,
            }
            .into());
        }
        let (dtype, widen) = storage_type(var.dtype);
        if var
            .element_count()
            .and_then(|n| n.checked_mul(dtype.size() as u64))
            .is_none()
        {
            return Err(DatasetError::TooLarge {
                dataset: var.name.clone(),
            }
            .into());
        }
        // Stored zstd frames of whole source chunks are kept as they are (under `auto`, which
        // mirrors the source), so the source's own grid is preferred where no option applies.
        let carry = opts.settings.codec == CodecChoice::Auto
            && var.layout.compressed
            && !widen.converts()
            && source.zstd_frames(i);
        let chunk_shape = planner::plan(
            &PlanInput {
                name: &var.name,
                shape: &var.shape,
                elem_size: dtype.size() as u64,
                // `dim_0`, `dim_1`, … where the source names none (xarray's names, as
                // `--isel` and the name check take them).
                dims: Some(&crate::select::dims_of(var.dims.as_ref(), var.shape.len())),
                // A `.tet` input's chunks are kept on a plain re-compress, never a constraint.
                source_chunks: var.layout.chunk_shape.as_deref().filter(|_| !tet_input),
                preferred_chunks: var
                    .layout
                    .chunk_shape
                    .as_deref()
                    .filter(|_| tet_input || carry),
            },
            &plan,
        )?;
        let grid = Grid::new(&var.shape, &chunk_shape).map_err(|source| ConvertError::Grid {
            dataset: var.name.clone(),
            source,
        })?;
        let chunk_bytes = chunk_shape
            .iter()
            .zip(&var.shape)
            .try_fold(dtype.size() as u64, |acc, (&c, &n)| {
                acc.checked_mul(c.min(n.max(1)))
            });
        if chunk_bytes.is_none_or(|b| b > MAX_CHUNK_BYTES) {
            return Err(DatasetError::ChunkTooLarge {
                dataset: var.name.clone(),
                chunk: chunk_shape,
                dtype: dtype.name(),
            }
            .into());
        }
        let pick = |level: i32, ext: bool| {
            let d = choose::Candidate {
                var: i,
                grid: &grid,
                widen,
                elem: dtype.size(),
            };
            choose::choose(source, &d, level, &choose::candidates(ext)).map(|c| (c, level))
        };
        let (codec, level) = match opts.settings.codec {
            CodecChoice::Raw => (Codec::Raw, 0),
            CodecChoice::Zstd(l) => (Codec::Zstd, l),
            CodecChoice::Transformed(c, l) => (c, l),
            CodecChoice::Smallest { level, ext } => pick(level, ext)?,
            CodecChoice::Auto | CodecChoice::AutoExt if !var.layout.compressed => (Codec::Raw, 0),
            CodecChoice::Auto => (Codec::Zstd, AUTO_ZSTD_LEVEL),
            CodecChoice::AutoExt => pick(AUTO_ZSTD_LEVEL, true)?,
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
                c => format!("{}:{level}", c.name()),
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
            constant_as_zstd: matches!(
                opts.settings.codec,
                CodecChoice::Auto | CodecChoice::AutoExt
            ) && codec == Codec::Raw,
            carry_frames: carry,
        });
    }
    Ok((planned, skipped))
}

/// Refuses `--chunk` settings that name a dataset or a dimension `source` does not have (each
/// is a typo or a setting meant for another input: silently ignored, it would plan chunks the
/// user did not ask for); the error names the closest names the input has.
fn check_chunk_names(source: &dyn Source, plan: &PlanOptions) -> Result<(), PlanError> {
    let vars = source.variables();
    if let Some(name) = plan
        .by_dataset
        .keys()
        .find(|n| !vars.iter().any(|v| &v.name == *n))
    {
        return Err(PlanError::UnknownName {
            what: "variable",
            name: name.clone(),
            closest: crate::select::closest(name, vars.iter().map(|v| v.name.as_str())),
        });
    }
    let dims: std::collections::BTreeSet<String> = vars
        .iter()
        .flat_map(|v| crate::select::dims_of(v.dims.as_ref(), v.shape.len()))
        .collect();
    if let Some(name) = plan.by_dim.keys().find(|d| !dims.contains(*d)) {
        return Err(PlanError::UnknownName {
            what: "dimension",
            name: name.clone(),
            closest: crate::select::closest(name, dims.iter().map(String::as_str)),
        });
    }
    Ok(())
}

/// Labels per dimension name: the importer's own, then short 1-D coordinate variables.
pub(super) fn dimension_labels(
    source: &dyn Source,
) -> Result<BTreeMap<String, Vec<String>>, ConvertError> {
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
