//! netcdf importer (work in progress).
