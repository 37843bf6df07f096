//! The importer registry: every format the product knows, in sniff order, with whether it is
//! compiled into this build. Adding a format = one folder under `converters/` + one line here.

use std::io::Read;
use std::path::Path;

use tet_source::{extension_confidence, Confidence, Importer};

/// One known format.
pub struct Format {
    pub id: &'static str,
    pub name: &'static str,
    pub extensions: &'static [&'static str],
    /// The cargo feature that compiles it in (`None`: always built).
    pub feature: Option<&'static str>,
    /// The importer, when compiled in.
    pub importer: Option<&'static dyn Importer>,
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
        },
        Format {
            id: "npy",
            name: "NumPy .npy",
            extensions: &["npy"],
            feature: None,
            importer: Some(&tet_npy::NpyImporter),
        },
        Format {
            id: "npz",
            name: "NumPy .npz",
            extensions: &["npz"],
            feature: None,
            importer: Some(&tet_npy::NpzImporter),
        },
        Format {
            id: "tea",
            name: "TeaFile",
            extensions: &["tea"],
            feature: None,
            importer: Some(&tet_teafile::TeaImporter),
        },
        Format {
            id: "tgm",
            name: "Tensogram",
            extensions: &["tgm"],
            feature: None,
            importer: Some(&tet_tensogram::TgmImporter),
        },
        Format {
            id: "zarr",
            name: "Zarr v2/v3",
            extensions: &["zarr"],
            feature: None,
            importer: Some(&tet_zarr::ZarrImporter),
        },
        Format {
            id: crate::tet_input::ID,
            name: ".tet v1",
            extensions: &["tet"],
            feature: None,
            importer: Some(&crate::tet_input::TetImporter),
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

/// Picks the importer for `path`: magic bytes first, the extension as a tie-break.
pub fn identify(path: &Path) -> Result<&'static dyn Importer, IdentifyError> {
    let mut head = Vec::new();
    if !path.is_dir() {
        std::fs::File::open(path)?
            .take(4096)
            .read_to_end(&mut head)?;
    }
    let all = formats();
    let mut best: Option<(Confidence, bool, &'static dyn Importer)> = None;
    for f in &all {
        let Some(imp) = f.importer else { continue };
        let c = imp.identify(path, &head);
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
