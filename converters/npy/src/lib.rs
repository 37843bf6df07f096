//! NPY / NPZ importer (work in progress).
