//! tensogram importer (work in progress).
