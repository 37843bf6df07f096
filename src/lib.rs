//! tet-convert's command line, over the engine crate [`tet`]:
//!
//! - [`cli`]: the `tet` and `tet-convert` command lines;
//! - [`batch`]: many inputs in one run (supervised workers, ledger, signals, shards);
//! - [`manifest`]: `--manifest jobs.toml` batch lists.
//!
//! The binaries (`src/bin`) are thin: each calls one entry point of [`cli`]. Everything that
//! converts, reads, verifies or exports is the engine's ([`tet`], `converters/engine`), which
//! depends on none of this crate's front-end crates (clap, indicatif, toml, signal-hook…).

// n-d index arithmetic walks several per-axis arrays in step; index loops read best there.
#![allow(clippy::needless_range_loop)]

pub mod batch;
pub mod cli;
pub mod manifest;
