//! tet-convert: convert tensor files into chunked, compressed, memory-mappable `.tet` files.
//!
//! - [`format`]: the `.tet` v1 container (reader, streaming writer, footer, verifier);
//! - [`planner`]: the chunk planner (pure);
//! - [`pipeline`]: parallel read → compress → ordered write;
//! - [`manifest`]: `--manifest jobs.toml` batch lists;
//! - [`meta`]: metadata and provenance mapping shared by every importer;
//! - [`registry`]: the importers compiled into this build;
//! - [`tet_input`]: `.tet` files as conversion inputs (re-chunk, re-compress, history kept);
//! - [`export`]: `.tet` back out to NetCDF-4, Zarr v3, NPY/NPZ (streamed chunk by chunk);
//! - [`cli`]: the `tet` and `tet-convert` command lines.
//!
//! Importers live in their own crates under `converters/` and implement the `tet-source` API.

// n-d index arithmetic walks several per-axis arrays in step; index loops read best there.
#![allow(clippy::needless_range_loop)]

pub mod batch;
pub mod cli;
pub mod export;
pub mod format;
pub mod lower;
pub mod manifest;
pub mod meta;
pub mod pipeline;
pub mod planner;
pub mod registry;
pub mod tet_input;
