//! zarr importer (work in progress).
