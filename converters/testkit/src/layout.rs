//! The integration tests of a crate as one test binary (issue 31): each crate that sets
//! `autotests = false` declares every file of its `tests/` folder as a module of `tests/main.rs`,
//! so that `mod common` is compiled once and one binary is linked instead of one per file. With
//! `autotests = false` a file that is not declared would silently never be compiled nor run:
//! [`undeclared_test_files`] finds them, and each crate's `tests/main.rs` asserts it finds none.

use std::path::Path;

/// The `.rs` files directly under `tests_dir` (other than `main.rs`) that `main.rs` does not
/// declare as a module (`mod NAME;`), and the module folders (`tests/NAME/mod.rs`) that no file of
/// `tests_dir` declares, as paths relative to `tests_dir`, sorted.
pub fn undeclared_test_files(tests_dir: &Path) -> Vec<String> {
    let read =
        |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let declared = |text: &str, name: &str| {
        let decl = format!("mod {name};");
        text.lines()
            .map(str::trim)
            .any(|l| l == decl || l == format!("pub {decl}"))
    };
    let main = read(&tests_dir.join("main.rs"));
    let mut sources = vec![main.clone()];
    let mut missing = Vec::new();
    let mut folders = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(tests_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", tests_dir.display()))
        .map(|e| e.expect("tests entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if p.is_dir() {
            if p.join("mod.rs").is_file() {
                folders.push(name);
            }
        } else if let Some(module) = name.strip_suffix(".rs") {
            if module == "main" {
                continue;
            }
            sources.push(read(&p));
            if !declared(&main, module) {
                missing.push(name);
            }
        }
    }
    for f in folders {
        if !sources.iter().any(|s| declared(s, &f)) {
            missing.push(format!("{f}/mod.rs"));
        }
    }
    missing
}

/// The name libtest gives the test function `name` of the module whose `module_path!()` is
/// `module_path` (the module path less the test crate's own name): what `--exact` takes when a
/// test re-runs its own binary for one test in a child process.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, inner)) => format!("{inner}::{name}"),
        None => name.to_string(),
    }
}

/// In a test binary's root (`tests/main.rs`): turns libhdf5's file locks off for the process and
/// the programs it starts (`HDF5_USE_FILE_LOCKING=FALSE`, unless already set), before `main`.
///
/// Why: libhdf5 (under netCDF-C too) opens files without close-on-exec, so a program a test
/// starts while another test of the same process writes a netCDF-4 or HDF5 file inherits the
/// descriptor, and with it the file's lock, until it exits; re-opening the file in the
/// meantime fails ("NetCDF: HDF error"). With one test binary per crate every test of the crate
/// shares the process, so one test's child could break another test's re-open. No test checks
/// the locks themselves.
#[macro_export]
macro_rules! hdf5_without_file_locks {
    () => {
        /// Runs before `main`, as an ELF constructor: the process has one thread then, so the
        /// environment can be changed safely.
        #[used]
        #[link_section = ".init_array"]
        static HDF5_WITHOUT_FILE_LOCKS: extern "C" fn() = {
            extern "C" fn init() {
                if std::env::var_os("HDF5_USE_FILE_LOCKING").is_none() {
                    std::env::set_var("HDF5_USE_FILE_LOCKING", "FALSE");
                }
            }
            init
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_names_drop_the_crate() {
        assert_eq!(test_name("main::disk_full", "inner"), "disk_full::inner");
        assert_eq!(test_name("main", "inner"), "inner");
    }

    #[test]
    fn an_undeclared_file_and_folder_are_found() {
        let d = tempfile_dir();
        std::fs::write(d.join("main.rs"), "mod common;\nmod a;\n").unwrap();
        std::fs::write(d.join("a.rs"), "#[path = \"x/mod.rs\"]\nmod x;\n").unwrap();
        std::fs::write(d.join("b.rs"), "").unwrap();
        for f in ["common", "x", "y"] {
            std::fs::create_dir_all(d.join(f)).unwrap();
            std::fs::write(d.join(f).join("mod.rs"), "").unwrap();
        }
        assert_eq!(undeclared_test_files(&d), ["b.rs", "y/mod.rs"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("tet-testkit-layout-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
