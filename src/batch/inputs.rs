//! What a batch converts and where each output goes: positional paths, `--files-from` lists,
//! walked directory trees (`--include`), and output paths that mirror each input's path relative
//! to its root under `--out-dir`.
//!
//! Rules (README "Batch runs"):
//! - A directory argument that no importer takes as a store (Zarr) is walked in sorted order;
//!   directories that are stores are taken whole, not entered. Hidden entries (`.name`, which
//!   includes our temporary files) are skipped; symbolic links to files are taken, symbolic links
//!   to directories are not followed.
//! - A walked file is taken when its path relative to the walked root matches an `--include` glob
//!   (default: the extensions of the compiled formats, any case).
//! - The *key* of an input (its shard and its output path) is its path relative to its root: the
//!   walked directory, or `--base` for listed files under it. A file listed without `--base` is
//!   keyed by its file name, and its output is `<stem>.tet` directly in `--out-dir`.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use tet::registry;

/// One input of a batch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Input {
    /// Its key: the path relative to its root (see the module docs); shards and outputs use it.
    pub key: PathBuf,
    /// Where it is.
    pub path: PathBuf,
}

impl Input {
    /// Its output under `out_dir`: the key with its last extension replaced by `.tet`.
    pub fn output_in(&self, out_dir: &Path) -> Option<PathBuf> {
        let name = self.key.file_stem().filter(|s| !s.is_empty())?;
        let mut file = name.to_os_string();
        file.push(".tet");
        Some(match self.key.parent() {
            Some(p) => out_dir.join(p).join(file),
            None => out_dir.join(file),
        })
    }
}

/// Why inputs cannot be listed.
#[derive(Debug, thiserror::Error)]
pub enum InputsError {
    /// An `--include` glob that does not parse.
    #[error("--include {pattern:?}: {source}")]
    Include {
        pattern: String,
        #[source]
        source: globset::Error,
    },
    /// The `--include` globs cannot be combined.
    #[error("--include: {0}")]
    IncludeSet(#[source] globset::Error),
    /// A directory that cannot be walked.
    #[error("{}: cannot walk: {source}", .root.display())]
    Walk {
        root: PathBuf,
        #[source]
        source: walkdir::Error,
    },
    /// A walked entry outside its root (a walker that misbehaves).
    #[error("{}: outside {}", .path.display(), .root.display())]
    Outside { path: PathBuf, root: PathBuf },
    /// A listed file outside `--base`.
    #[error("{}: not under --base {}", .path.display(), .base.display())]
    NotUnderBase { path: PathBuf, base: PathBuf },
    /// A path with no file name (`/`, `..`) to name its output after.
    #[error("{}: no file name to name the output", .0.display())]
    NoFileName(PathBuf),
}

/// Which walked files are taken.
pub struct Selection {
    globs: GlobSet,
    /// The globs as given, for messages.
    pub patterns: Vec<String>,
}

impl Selection {
    /// `--include` globs; none given: every extension of the compiled formats.
    pub fn new(include: &[String]) -> Result<Selection, InputsError> {
        let patterns: Vec<String> = if include.is_empty() {
            let mut exts: BTreeSet<&str> = BTreeSet::new();
            for f in registry::formats() {
                if f.importer.is_some() {
                    exts.extend(f.extensions.iter().copied());
                }
            }
            exts.into_iter().map(|e| format!("*.{e}")).collect()
        } else {
            include.to_vec()
        };
        let mut b = GlobSetBuilder::new();
        for p in &patterns {
            let g = GlobBuilder::new(p)
                .case_insensitive(include.is_empty())
                .literal_separator(false)
                .build()
                .map_err(|source| InputsError::Include {
                    pattern: p.clone(),
                    source,
                })?;
            b.add(g);
        }
        let globs = b.build().map_err(InputsError::IncludeSet)?;
        Ok(Selection { globs, patterns })
    }

    pub(crate) fn takes(&self, rel: &Path) -> bool {
        self.globs.is_match(rel)
    }
}

/// Whether an entry name is hidden (and so never taken: dot files, our temporary files).
fn hidden(name: &std::ffi::OsStr) -> bool {
    name.as_bytes().first() == Some(&b'.')
}

/// Whether a directory is itself an input (a store an importer takes whole).
fn is_store(dir: &Path) -> bool {
    registry::identify(dir).is_ok()
}

/// Walks `root` (see the module docs); inputs keyed relative to `root`, in sorted order.
pub fn walk(root: &Path, sel: &Selection, out: &mut Vec<Input>) -> Result<(), InputsError> {
    let mut it = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = it.next() {
        let e = entry.map_err(|source| InputsError::Walk {
            root: root.to_path_buf(),
            source,
        })?;
        if e.depth() == 0 {
            continue;
        }
        if hidden(e.file_name()) {
            if e.file_type().is_dir() {
                it.skip_current_dir();
            }
            continue;
        }
        let rel = e
            .path()
            .strip_prefix(root)
            .map_err(|_| InputsError::Outside {
                path: e.path().to_path_buf(),
                root: root.to_path_buf(),
            })?
            .to_path_buf();
        let ft = e.file_type();
        if ft.is_dir() {
            if is_store(e.path()) {
                it.skip_current_dir();
                if sel.takes(&rel) || sel.patterns.iter().any(|p| p == "*.zarr") {
                    out.push(Input {
                        key: rel,
                        path: e.path().to_path_buf(),
                    });
                }
            }
            continue;
        }
        // Regular files, and symbolic links that lead to one.
        let is_file = ft.is_file() || (ft.is_symlink() && e.path().is_file());
        if is_file && sel.takes(&rel) {
            out.push(Input {
                key: rel,
                path: e.path().to_path_buf(),
            });
        }
    }
    Ok(())
}

/// Reads a `--files-from` list: one path a line (`nul`: NUL-separated), empty entries ignored.
pub fn read_list(mut r: impl Read, nul: bool) -> std::io::Result<Vec<PathBuf>> {
    let sep = if nul { 0u8 } else { b'\n' };
    let mut buf = Vec::new();
    r.read_to_end(&mut buf)?;
    let mut paths = Vec::new();
    for mut item in buf.split(|&b| b == sep) {
        if !nul {
            item = item.strip_suffix(b"\r").unwrap_or(item);
        }
        if !item.is_empty() {
            paths.push(PathBuf::from(std::ffi::OsStr::from_bytes(item)));
        }
    }
    Ok(paths)
}

/// Reads a `--files-from` argument: a file, or `-` for standard input.
pub fn read_list_arg(arg: &Path, nul: bool) -> std::io::Result<Vec<PathBuf>> {
    if arg == Path::new("-") {
        read_list(std::io::stdin().lock(), nul)
    } else {
        read_list(std::fs::File::open(arg)?, nul)
    }
}

/// `p` without `.` parts and with `..` folded where it can be (lexically: links are not resolved).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The input for a path given on the command line or in a list: walked when a directory that is
/// not a store; keyed relative to `base` when under it, else by its file name.
pub fn expand(
    path: &Path,
    base: Option<&Path>,
    sel: &Selection,
    out: &mut Vec<Input>,
) -> Result<(), InputsError> {
    if path.is_dir() && !is_store(path) {
        return walk(path, sel, out);
    }
    let key = match base {
        Some(b) => {
            let (np, nb) = (absolute(path), absolute(b));
            match np.strip_prefix(&nb) {
                Ok(rel) if !rel.as_os_str().is_empty() => rel.to_path_buf(),
                _ => {
                    return Err(InputsError::NotUnderBase {
                        path: path.to_path_buf(),
                        base: b.to_path_buf(),
                    })
                }
            }
        }
        None => match path.file_name() {
            Some(n) => PathBuf::from(n),
            None => return Err(InputsError::NoFileName(path.to_path_buf())),
        },
    };
    out.push(Input {
        key,
        path: path.to_path_buf(),
    });
    Ok(())
}

fn absolute(p: &Path) -> PathBuf {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    normalize(&p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_mirror_keys() {
        let i = |k: &str| Input {
            key: k.into(),
            path: k.into(),
        };
        let d = Path::new("/out");
        assert_eq!(
            i("2024-01-01/ocean.nc").output_in(d),
            Some("/out/2024-01-01/ocean.tet".into())
        );
        assert_eq!(i("ocean.nc").output_in(d), Some("/out/ocean.tet".into()));
        assert_eq!(i("s/c.zarr").output_in(d), Some("/out/s/c.tet".into()));
        assert_eq!(i("x.tar.npy").output_in(d), Some("/out/x.tar.tet".into()));
    }

    #[test]
    fn lists_split_on_newlines_or_nuls() {
        let l = read_list(&b"a.nc\n\nb c.nc\r\n/x/y.h5"[..], false).unwrap();
        assert_eq!(
            l,
            vec![PathBuf::from("a.nc"), "b c.nc".into(), "/x/y.h5".into()]
        );
        let l = read_list(&b"a\nb.nc\0c.nc\0"[..], true).unwrap();
        assert_eq!(l, vec![PathBuf::from("a\nb.nc"), "c.nc".into()]);
    }

    #[test]
    fn default_selection_is_the_compiled_extensions() {
        let s = Selection::new(&[]).unwrap();
        assert!(s.takes(Path::new("a/b.npy")));
        assert!(s.takes(Path::new("B.NPZ")));
        assert!(!s.takes(Path::new("a/b.txt")));
        let s = Selection::new(&["2024-*/*.npy".into()]).unwrap();
        assert!(s.takes(Path::new("2024-01/x.npy")));
        assert!(!s.takes(Path::new("2023-01/x.npy")));
        let e = Selection::new(&["[".into()]).err().expect("a bad glob");
        assert!(matches!(&e, InputsError::Include { pattern, .. } if pattern == "["));
        assert!(e.to_string().starts_with("--include \"[\": "), "{e}");
    }

    #[test]
    fn normalize_folds_dots() {
        assert_eq!(normalize(Path::new("./a/../b/./c")), PathBuf::from("b/c"));
        assert_eq!(normalize(Path::new("../a")), PathBuf::from("../a"));
    }
}
