//! The engine library stays free of its front ends (issue 21): built without the `cli` feature it
//! pulls in none of the front-end crates, and no engine module imports a front-end module or
//! (the reader) the verifier.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates only the command line needs.
const FRONT_END_CRATES: &[&str] = &[
    "clap",
    "indicatif",
    "walkdir",
    "globset",
    "signal-hook",
    "xattr",
    "toml",
    "env_logger",
];

/// The modules of the front end, under `src/`.
const FRONT_END_MODULES: &[&str] = &["cli", "batch", "manifest", "bin"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `cargo tree` of the engine build (no `cli` feature), normal dependencies only: the crate
/// names it lists, and the text.
fn engine_tree(extra: &[&str]) -> (Vec<String>, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root())
        .args([
            "tree",
            "--offline",
            "--locked",
            "-p",
            "tet",
            "--no-default-features",
            "--features",
            "netcdf,hdf5",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .args(extra)
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout).into_owned();
    let names = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    (names, tree)
}

#[test]
fn engine_dependency_tree_has_no_front_end_crate() {
    let (direct, tree) = engine_tree(&["--depth", "1"]);
    // The check can fail: the tree does list the engine's own dependencies.
    assert!(
        direct.iter().any(|n| n == "zstd"),
        "unexpected tree:\n{tree}"
    );
    assert!(
        direct.iter().any(|n| n == "tet-hdf5"),
        "unexpected tree:\n{tree}"
    );
    for c in FRONT_END_CRATES {
        assert!(
            !direct.iter().any(|n| n == c),
            "the engine library depends on front-end crate {c}:\n{tree}"
        );
    }
    // Nor through another crate — except walkdir, which zarrs' filesystem store (the Zarr
    // importer's store) lists directories with.
    let (all, tree) = engine_tree(&[]);
    for c in FRONT_END_CRATES.iter().filter(|&&c| c != "walkdir") {
        assert!(
            !all.iter().any(|n| n == c),
            "the engine library pulls in front-end crate {c}:\n{tree}"
        );
    }
    if !all.iter().any(|n| n == "walkdir") {
        return;
    }
    let (why, tree) = engine_tree(&["-i", "walkdir", "--depth", "1"]);
    assert!(
        why.iter()
            .all(|n| n == "walkdir" || n == "zarrs_filesystem"),
        "walkdir reaches the engine other than through zarrs_filesystem:\n{tree}"
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src is readable") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Lines that are code, not comments.
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim_start)
        .filter(|l| !l.starts_with("//"))
}

#[test]
fn engine_modules_import_no_front_end_module() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut checked = 0;
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src");
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("")
            .trim_end_matches(".rs");
        if FRONT_END_MODULES.contains(&top) || top == "lib" {
            continue;
        }
        checked += 1;
        let text = std::fs::read_to_string(f).expect("readable");
        for line in code_lines(&text) {
            for m in ["cli", "batch", "manifest"] {
                assert!(
                    !line.contains(&format!("crate::{m}")),
                    "{}: engine module uses the front end: {line}",
                    rel.display()
                );
            }
        }
    }
    assert!(checked >= 10, "only {checked} engine files found");
    // The batch runner is driven by the command line, never the other way round.
    let mut batch = Vec::new();
    rust_files(&src.join("batch"), &mut batch);
    for f in &batch {
        let text = std::fs::read_to_string(f).expect("readable");
        for line in code_lines(&text) {
            assert!(
                !line.contains("crate::cli"),
                "{}: batch imports the command line: {line}",
                f.display()
            );
        }
    }
}

#[test]
fn reader_does_not_import_verify() {
    let text = std::fs::read_to_string(root().join("src/format/reader.rs")).expect("readable");
    for line in code_lines(&text) {
        assert!(
            !line.contains("verify::") && !line.contains("use super::verify"),
            "reader.rs imports the verifier: {line}"
        );
    }
}
