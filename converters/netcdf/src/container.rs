//! What kind of netCDF file a path or buffer holds before netCDF-C opens it: the container
//! (classic CDF-1/2/5 header or HDF5) and the data model, netCDF-4 told from plain HDF5 by
//! netCDF-C's own attributes near the start of the file.

use std::io::Read;
use std::path::Path;

use tet_source::{extension_confidence, Confidence};

use crate::HDF5_SIGNATURE;

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Names only netCDF-C (and h5netcdf) write into an HDF5 file: the root attribute
/// `_NCProperties` and the per-variable bookkeeping attributes.
const NETCDF4_MARKERS: [&[u8]; 3] = [b"_NCProperties", b"_Netcdf4Dimid", b"_Netcdf4Coordinates"];

pub(crate) fn has_netcdf4_marker(bytes: &[u8]) -> bool {
    NETCDF4_MARKERS.iter().any(|m| contains(bytes, m))
}

/// How far into an HDF5 file without a netCDF extension `identify` looks for a netCDF-4 marker:
/// netCDF-C writes the root group's attributes when the file is first closed, after the
/// metadata of its variables, so they are often past the registry's first 4 KiB.
const MARKER_SCAN_BYTES: u64 = 1 << 20;

/// Whether the first MiB of an HDF5 file at `path` holds a netCDF-4 marker (a file named
/// `.h5`/`.hdf5`/… is left to the HDF5 importer: its name says how the user reads it).
pub(crate) fn netcdf4_marker_in_file(path: &Path) -> bool {
    if extension_confidence(path, &["h5", "hdf5", "he5", "hdf"]) == Confidence::Extension {
        return false;
    }
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MARKER_SCAN_BYTES).read_to_end(&mut head))
        .is_ok_and(|_| has_netcdf4_marker(&head))
}

/// What the first bytes say a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// Classic format, `CDF\x01`.
    Cdf1,
    /// 64-bit offset format, `CDF\x02`.
    Cdf2,
    /// 64-bit data format, `CDF\x05`.
    Cdf5,
    /// HDF5 (netCDF-4).
    Hdf5,
}

impl Container {
    /// The container of a file starting with `head`, if it has a known signature.
    pub fn sniff(head: &[u8]) -> Option<Container> {
        match head.get(..4) {
            Some(b"CDF\x01") => return Some(Container::Cdf1),
            Some(b"CDF\x02") => return Some(Container::Cdf2),
            Some(b"CDF\x05") => return Some(Container::Cdf5),
            _ => {}
        }
        let mut at = 0usize;
        while at + HDF5_SIGNATURE.len() <= head.len() {
            if &head[at..at + HDF5_SIGNATURE.len()] == HDF5_SIGNATURE {
                return Some(Container::Hdf5);
            }
            at = if at == 0 { 512 } else { at * 2 };
        }
        None
    }

    pub(crate) fn is_classic(self) -> bool {
        self != Container::Hdf5
    }
}

/// The netCDF data model of an opened file, as netCDF-C reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataModel {
    /// CDF-1.
    Classic,
    /// CDF-2.
    Offset64,
    /// CDF-5.
    Data64,
    /// netCDF-4 (HDF5) restricted to the classic model.
    Netcdf4Classic,
    /// netCDF-4 (HDF5), enhanced model.
    Netcdf4,
}

impl DataModel {
    /// The name netCDF4-python gives it (`NETCDF3_CLASSIC`, …, `NETCDF4`).
    pub fn name(self) -> &'static str {
        match self {
            DataModel::Classic => "NETCDF3_CLASSIC",
            DataModel::Offset64 => "NETCDF3_64BIT_OFFSET",
            DataModel::Data64 => "NETCDF3_64BIT_DATA",
            DataModel::Netcdf4Classic => "NETCDF4_CLASSIC",
            DataModel::Netcdf4 => "NETCDF4",
        }
    }

    pub(crate) fn is_netcdf4(self) -> bool {
        matches!(self, DataModel::Netcdf4 | DataModel::Netcdf4Classic)
    }
}
