//! The output path of a conversion: symbolic links resolved or refused, and an output that
//! would overwrite the input (the same path, a link to it, another name of the same file), is a
//! directory, or has no directory, refused before any work.

use std::path::{Path, PathBuf};

use super::report::{refused, ConvertError};

/// The absolute form of a path that may not exist yet (its parent must).
fn absolute(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let parent = p.parent().filter(|x| !x.as_os_str().is_empty());
    let dir = parent
        .map(|d| d.canonicalize().unwrap_or_else(|_| d.to_path_buf()))
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
    dir.join(p.file_name().unwrap_or_default())
}

/// Symbolic links followed at most, as the kernel does.
const MAX_SYMLINK_HOPS: usize = 40;

/// The path the output is written to: `output` itself, or, when it is a symbolic link and
/// `through` is set, the file at the end of the link chain (which need not exist yet). A link is
/// refused when `through` is not set: replacing it, or writing where it points, must be asked for.
fn resolve_output(output: &Path, through: bool) -> Result<PathBuf, ConvertError> {
    let mut p = output.to_path_buf();
    for _ in 0..MAX_SYMLINK_HOPS {
        let is_link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            return Ok(p);
        }
        let target = std::fs::read_link(&p)?;
        if !through {
            return Err(refused(format!(
                "output {} is a symbolic link (to {}); --write-through-symlink writes to its target",
                output.display(),
                target.display()
            )));
        }
        p = match p.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    Err(refused(format!(
        "output {}: too many levels of symbolic links",
        output.display()
    )))
}

/// Refuses an output that would overwrite the input (the same path, a link to it, or another
/// name of the same file), is a directory, or has no directory; returns the path to write
/// (see [`resolve_output`]).
pub(super) fn check_paths(
    input: &Path,
    output: &Path,
    through: bool,
) -> Result<PathBuf, ConvertError> {
    let overwrite = || refused("the output would overwrite the input");
    if absolute(input) == absolute(output) {
        return Err(overwrite());
    }
    let output = resolve_output(output, through)?;
    if absolute(input) == absolute(&output) || same_file(input, &output) {
        return Err(overwrite());
    }
    if output.is_dir() {
        return Err(refused(format!(
            "output {} is a directory",
            output.display()
        )));
    }
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(refused(format!(
                "output directory {} does not exist",
                dir.display()
            )));
        }
    }
    Ok(output)
}

/// Whether two existing paths are one file (hard links included).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}
