//! tet-convert: convert tensor files into chunked, compressed, memory-mappable `.tet` files.
//!
//! - [`request`]: one conversion as one value ([`Request`]: inputs, output, settings) and the one
//!   function that runs it ([`run`], with a runtime [`Context`]);
//! - [`mod@format`]: the `.tet` v1 container (reader, streaming writer, footer, verifier);
//! - [`planner`]: the chunk planner (pure);
//! - [`pipeline`]: parallel read → compress → ordered write;
//! - [`meta`]: metadata and provenance mapping shared by every importer;
//! - [`registry`]: the importers compiled into this build;
//! - [`select`]: `--variables`/`--exclude`/`--isel`/`--sel`, a source over the opened one;
//! - [`mod@concat`]: `--concat DIM`, several sources combined along a dimension;
//! - [`tet_input`]: `.tet` files as conversion inputs (re-chunk, re-compress, history kept);
//! - [`export`]: `.tet` back out to NetCDF-4, Zarr v3, NPY/NPZ (streamed chunk by chunk);
//! - [`control`]: the progress callback and cancellation token a front end hands the pipeline;
//! - [`storage`]: `s3://`, `gs://`, `az://`, `https://` objects as inputs and outputs (objects
//!   with the `object-store` feature).
//!
//! This crate is the engine alone: the command line (`tet`, `tet-convert`, batches, manifests)
//! is the `tet-cli` crate over it (the repository's root package), and the Python package
//! (`python/`) is another front end. No front-end crate (clap, indicatif, toml…) is a dependency
//! of this one, whatever its features (`tests/engine_shape.rs` asks `cargo tree`). Importers live
//! in their own crates under `converters/` and implement the `tet-source` API.

// n-d index arithmetic walks several per-axis arrays in step; index loops read best there.
#![allow(clippy::needless_range_loop)]

pub mod concat;
pub mod control;
pub mod export;
pub mod format;
pub mod lower;
pub mod meta;
pub mod pipeline;
pub mod planner;
pub mod provenance;
pub mod registry;
pub mod request;
pub use request::{run, Context, Input, Output, Request};
pub mod select;
pub mod settings;
pub mod storage;
pub mod tet_input;
