//! The engine crate stays free of its front ends (issues 21, 31): the engine is the `tet` crate
//! (`converters/engine`), the command line the `tet-cli` crate over it, so an engine module cannot
//! import a front-end module (the compiler refuses: `tet` does not depend on `tet-cli`). What is
//! left to check: `cargo tree` of the engine, with its default features and with all of them (no
//! feature is turned off to pass), lists none of the crates only a front end needs; the batch
//! runner does not import the command line; the reader does not import the verifier.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates only the command line needs.
const FRONT_END_CRATES: &[&str] = &[
    "clap",
    "clap_mangen",
    "clap_complete",
    "indicatif",
    "walkdir",
    "globset",
    "signal-hook",
    "xattr",
    "toml",
    "env_logger",
    "tet-cli",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `cargo tree` of the engine crate `tet`, normal dependencies only, with `features` (cargo's
/// arguments: none for the default features, `--all-features`): the crate names it lists, and
/// the text.
fn engine_tree(features: &[&str], extra: &[&str]) -> (Vec<String>, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root())
        .args([
            "tree",
            "--offline",
            "--locked",
            "-p",
            "tet",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .args(features)
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
    for features in [&[][..], &["--all-features"][..]] {
        let (direct, tree) = engine_tree(features, &["--depth", "1"]);
        // The check can fail: the tree does list the engine's own dependencies (the importers
        // and object storage are default features).
        for own in ["zstd", "tet-hdf5", "tet-netcdf", "object_store"] {
            assert!(
                direct.iter().any(|n| n == own),
                "{features:?}: {own} missing from the tree:\n{tree}"
            );
        }
        for c in FRONT_END_CRATES {
            assert!(
                !direct.iter().any(|n| n == c),
                "{features:?}: the engine depends on front-end crate {c}:\n{tree}"
            );
        }
        // Nor through another crate — except walkdir, which zarrs' filesystem store (the Zarr
        // importer's store) lists directories with.
        let (all, tree) = engine_tree(features, &[]);
        for c in FRONT_END_CRATES.iter().filter(|&&c| c != "walkdir") {
            assert!(
                !all.iter().any(|n| n == c),
                "{features:?}: the engine pulls in front-end crate {c}:\n{tree}"
            );
        }
        if !all.iter().any(|n| n == "walkdir") {
            continue;
        }
        let (why, tree) = engine_tree(features, &["-i", "walkdir", "--depth", "1"]);
        assert!(
            why.iter()
                .all(|n| n == "walkdir" || n == "zarrs_filesystem"),
            "{features:?}: walkdir reaches the engine other than through zarrs_filesystem:\n{tree}"
        );
    }
}

/// The engine has no `cli` feature: none of its features names a front-end crate (there is
/// nothing of the front end to turn on or off), and it has the features the front ends turn on.
#[test]
fn engine_has_no_front_end_feature() {
    let manifest = std::fs::read_to_string(root().join("converters/engine/Cargo.toml"))
        .expect("the engine's Cargo.toml");
    let features: Vec<(&str, &str)> = manifest
        .split("\n[features]\n")
        .nth(1)
        .expect("a [features] table")
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.trim(), v.trim())))
        .collect();
    let names: Vec<&str> = features.iter().map(|f| f.0).collect();
    for want in ["object-store", "netcdf", "hdf5"] {
        assert!(names.contains(&want), "no feature {want}: {names:?}");
    }
    assert!(!names.contains(&"cli"), "{names:?}");
    for (name, turns_on) in &features {
        for c in FRONT_END_CRATES {
            assert!(
                !turns_on.contains(&format!("\"dep:{c}\"")),
                "engine feature {name} turns on front-end crate {c}: {turns_on}"
            );
        }
    }
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
fn batch_does_not_import_the_command_line() {
    // The batch runner is driven by the command line, never the other way round.
    let mut batch = Vec::new();
    rust_files(&root().join("src/batch"), &mut batch);
    assert!(batch.len() >= 5, "only {} batch files found", batch.len());
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
    let text = std::fs::read_to_string(root().join("converters/engine/src/format/reader.rs"))
        .expect("readable");
    for line in code_lines(&text) {
        assert!(
            !line.contains("verify::") && !line.contains("use super::verify"),
            "reader.rs imports the verifier: {line}"
        );
    }
}

/// The circles among the engine's top-level modules that are known and still to be removed
/// (issue 31): `settings` names `pipeline::CodecChoice` while `pipeline` takes
/// `settings::Settings`; `storage` digests a local file with `meta::digest_input` (`open.rs`)
/// and names the closest option keys with `select::closest`, while `meta::inputs` rechecks
/// object inputs through `storage` (and `select` uses `meta`). Each entry is one circle, its
/// modules sorted.
const KNOWN_MODULE_CIRCLES: &[&[&str]] =
    &[&["meta", "select", "storage"], &["pipeline", "settings"]];

/// The engine's top-level modules (`converters/engine/src/<name>.rs` or `<name>/`) and, for each,
/// the other top-level modules its code names as `crate::<module>` (comments and `#[cfg(test)]
/// mod tests` left out).
fn engine_module_imports() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>>
{
    let src = root().join("converters/engine/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let top = |p: &Path| {
        let rel = p.strip_prefix(&src).expect("under src");
        let first = rel.components().next().expect("a component");
        first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string()
    };
    let modules: std::collections::BTreeSet<String> = files
        .iter()
        .map(|f| top(f))
        .filter(|m| m != "lib")
        .collect();
    let mut graph = std::collections::BTreeMap::new();
    for f in &files {
        let from = top(f);
        if from == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("readable");
        let code = match text.find("#[cfg(test)]\nmod tests") {
            Some(at) => &text[..at],
            None => &text[..],
        };
        let edges: &mut std::collections::BTreeSet<String> = graph.entry(from.clone()).or_default();
        for line in code_lines(code) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != from && modules.contains(&name) {
                    edges.insert(name);
                }
            }
        }
    }
    graph
}

/// No circle among the engine's top-level modules other than the known ones (a module that
/// imports another which, through any path, imports it back).
#[test]
fn engine_modules_import_no_new_circle() {
    let graph = engine_module_imports();
    assert!(
        graph.len() >= 12,
        "only {} engine modules found",
        graph.len()
    );
    let reach = |from: &str| {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for n in graph.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let reached: std::collections::BTreeMap<&String, _> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut circles = std::collections::BTreeSet::new();
    for (m, r) in &reached {
        if r.contains(*m) {
            let circle: Vec<&str> = reached
                .iter()
                .filter(|(n, rn)| r.contains(**n) && rn.contains(*m))
                .map(|(n, _)| n.as_str())
                .collect();
            circles.insert(circle);
        }
    }
    for c in &circles {
        assert!(
            KNOWN_MODULE_CIRCLES.contains(&c.as_slice()),
            "an import circle among the engine's modules: {c:?} (imports: {graph:?})"
        );
    }
}
