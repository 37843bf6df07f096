//! hdf5 importer (work in progress).
