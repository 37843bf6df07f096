//! The driver registry: every format the product knows, in sniff order — its identity, its
//! importer (when compiled into this build) and its exporter — and what iterates it: input
//! identification, `tet-convert --formats`, `tet export --to`, the fuzz target
//! (`fuzz/fuzz_targets/importer.rs`), `.ci/output-digests.sh` (through `--formats`) and
//! `tests/registry.rs`, which checks that every driver has a sample, a fuzz seed folder and a
//! place in those lists. Adding a format = its crate under `converters/` + one entry here + its
//! feature line in `Cargo.toml` when it needs a system library.

use std::io::Read;
use std::path::Path;

use tet_source::export::Exporter;
use tet_source::{extension_confidence, Confidence, Importer};

/// One known format (a driver).
pub struct Format {
    /// Short id (`nc`, `npy`…), shown by `--formats` and in history rows.
    pub id: &'static str,
    pub name: &'static str,
    /// Input extensions, lower case, without the dot (a tie-break after the magic bytes).
    pub extensions: &'static [&'static str],
    /// The cargo feature that compiles it in (`None`: always built).
    pub feature: Option<&'static str>,
    /// The importer, when compiled in.
    pub importer: Option<&'static dyn Importer>,
    /// The writer of `tet export`, when the product writes the format.
    pub exporter: Option<&'static dyn Exporter>,
    /// A committed file of the format, relative to the repository root, that identification
    /// must recognise (`tests/registry.rs`).
    pub sample: &'static str,
    /// The folder of fuzz seeds under `fuzz/seeds/` (the fuzz target picks the driver by id).
    pub fuzz_seeds: &'static str,
}

/// The netCDF-4 writer: the real one with the `netcdf` feature, else one that says the build
/// has no NetCDF support (so `--to netcdf` is understood in every build).
#[cfg(feature = "netcdf")]
pub const NETCDF_EXPORTER: &dyn Exporter = &tet_netcdf::export::NcExporter;
/// The netCDF-4 writer: the real one with the `netcdf` feature, else one that says the build
/// has no NetCDF support (so `--to netcdf` is understood in every build).
#[cfg(not(feature = "netcdf"))]
pub const NETCDF_EXPORTER: &dyn Exporter = &NotCompiledNetCdf;

/// `tet export --to netcdf` in a build without the `netcdf` feature.
#[cfg(not(feature = "netcdf"))]
pub struct NotCompiledNetCdf;

#[cfg(not(feature = "netcdf"))]
impl Exporter for NotCompiledNetCdf {
    fn name(&self) -> &'static str {
        "netcdf"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["nc", "netcdf4"]
    }
    fn extensions(&self) -> &'static [&'static str] {
        &["nc", "nc4", "cdf", "netcdf"]
    }
    fn capabilities(&self) -> tet_source::export::Capabilities {
        tet_source::export::Capabilities {
            has_bool: false,
            has_complex: false,
        }
    }
    fn write(
        &self,
        _: &tet_source::export::Model,
        _: &mut dyn tet_source::export::ChunkSource,
        _: tet_source::export::Output<'_>,
        _: tet_source::export::Compression,
    ) -> tet_source::export::Result<tet_source::export::Written> {
        Err(tet_source::export::ExportError::Invalid(
            "this build has no NetCDF support (cargo feature `netcdf`)".into(),
        ))
    }
}

/// Every format, in sniff order (ties in confidence go to the earlier one).
pub fn formats() -> Vec<Format> {
    vec![
        Format {
            id: "nc",
            name: "NetCDF 3/4",
            extensions: &["nc", "nc3", "nc4", "cdf"],
            feature: Some("netcdf"),
            #[cfg(feature = "netcdf")]
            importer: Some(&tet_netcdf::NcImporter),
            #[cfg(not(feature = "netcdf"))]
            importer: None,
            exporter: Some(NETCDF_EXPORTER),
            sample: "fixtures/sample/ocean.nc",
            fuzz_seeds: "netcdf_classic",
        },
        Format {
            id: "h5",
            name: "HDF5",
            extensions: &["h5", "hdf5", "he5", "hdf"],
            feature: Some("hdf5"),
            #[cfg(feature = "hdf5")]
            importer: Some(&tet_hdf5::H5Importer),
            #[cfg(not(feature = "hdf5"))]
            importer: None,
            exporter: None,
            sample: "converters/hdf5/tests/fixtures/types.h5",
            fuzz_seeds: "hdf5",
        },
        Format {
            id: "npy",
            name: "NumPy .npy",
            extensions: &["npy"],
            feature: None,
            importer: Some(&tet_npy::NpyImporter),
            exporter: Some(&tet_npy::export::NpyExporter { archive: false }),
            sample: "fixtures/sample/ocean.npy",
            fuzz_seeds: "npy",
        },
        Format {
            id: "npz",
            name: "NumPy .npz",
            extensions: &["npz"],
            feature: None,
            importer: Some(&tet_npy::NpzImporter),
            exporter: Some(&tet_npy::export::NpyExporter { archive: true }),
            sample: "converters/npy/tests/fixtures/bundle.npz",
            fuzz_seeds: "npz",
        },
        Format {
            id: "tea",
            name: "TeaFile",
            extensions: &["tea"],
            feature: None,
            importer: Some(&tet_teafile::TeaImporter),
            exporter: None,
            sample: "fuzz/seeds/teafile/tick_full.tea",
            fuzz_seeds: "teafile",
        },
        Format {
            id: "tgm",
            name: "Tensogram",
            extensions: &["tgm"],
            feature: None,
            importer: Some(&tet_tensogram::TgmImporter),
            exporter: None,
            sample: "fuzz/seeds/tensogram/two_objects.tgm",
            fuzz_seeds: "tensogram",
        },
        Format {
            id: "zarr",
            name: "Zarr v2/v3",
            extensions: &["zarr"],
            feature: None,
            importer: Some(&tet_zarr::ZarrImporter),
            exporter: Some(&tet_zarr::export::ZarrExporter),
            sample: "fixtures/zarr/blosc_v3.zarr",
            fuzz_seeds: "zarr",
        },
        Format {
            id: crate::tet_input::ID,
            name: ".tet v1",
            extensions: &["tet"],
            feature: None,
            importer: Some(&crate::tet_input::TetImporter),
            exporter: None,
            sample: "fixtures/golden/small.tet",
            fuzz_seeds: "tet_reader",
        },
    ]
}

/// Why no importer could take a file.
#[derive(Debug, thiserror::Error)]
pub enum IdentifyError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("unrecognised input format (known: {known})")]
    Unknown { known: String },
    #[error("{name} support is not compiled into this build (cargo feature `{feature}`)")]
    NotCompiled {
        name: &'static str,
        feature: &'static str,
    },
}

/// Bytes of an input's start that identification looks at.
pub const HEAD_BYTES: u64 = 4096;

/// Picks the importer for `path`: magic bytes first, the extension as a tie-break.
pub fn identify(path: &Path) -> Result<&'static dyn Importer, IdentifyError> {
    let mut head = Vec::new();
    if !path.is_dir() {
        std::fs::File::open(path)?
            .take(HEAD_BYTES)
            .read_to_end(&mut head)?;
    }
    identify_head(path, &head)
}

/// [`identify`] of an input named `path` (a URL too) whose first bytes (up to [`HEAD_BYTES`])
/// are `head`.
pub fn identify_head(path: &Path, head: &[u8]) -> Result<&'static dyn Importer, IdentifyError> {
    let all = formats();
    let mut best: Option<(Confidence, bool, &'static dyn Importer)> = None;
    for f in &all {
        let Some(imp) = f.importer else { continue };
        let c = imp.identify(path, head);
        if c == Confidence::No {
            continue;
        }
        let ext = extension_confidence(path, f.extensions) == Confidence::Extension;
        if best.is_none_or(|(bc, be, _)| (c, ext) > (bc, be)) {
            best = Some((c, ext, imp));
        }
    }
    if let Some((_, _, imp)) = best {
        return Ok(imp);
    }
    for f in &all {
        if f.importer.is_none() && extension_confidence(path, f.extensions) == Confidence::Extension
        {
            return Err(IdentifyError::NotCompiled {
                name: f.name,
                feature: f.feature.unwrap_or("?"),
            });
        }
    }
    Err(IdentifyError::Unknown {
        known: all
            .iter()
            .filter(|f| f.importer.is_some())
            .map(|f| f.id)
            .collect::<Vec<_>>()
            .join(", "),
    })
}
