//! tet-convert: convert tensor files into chunked, compressed, memory-mappable `.tet` files.
//!
//! - [`format`]: the `.tet` v1 container (reader, streaming writer, footer, verifier);
//! - [`cli`]: the `tet` and `tet-convert` command lines.
//!
//! Importers live in their own crates under `converters/` and implement the `tet-source` API.

pub mod cli;
pub mod format;
