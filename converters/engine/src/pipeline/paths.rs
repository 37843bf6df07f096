//! The output path of a conversion: symbolic links resolved or refused, and an output that
//! would overwrite the input (the same path, a link to it, another name of the same file), is a
//! directory, or has no directory, refused before any work.

use std::path::{Path, PathBuf};

use super::report::ConvertError;
use crate::settings::Settings;

/// An output path a conversion refuses to write, before any work.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A symbolic link, without `--write-through-symlink`.
    #[error(
        "output {} is a symbolic link (to {}); --write-through-symlink writes to its target",
        .output.display(),
        .target.display()
    )]
    Symlink { output: PathBuf, target: PathBuf },
    /// A link of the chain that cannot be read.
    #[error("output {}: {source}", .link.display())]
    ReadLink {
        link: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// More links than the kernel follows.
    #[error("output {}: too many levels of symbolic links", .0.display())]
    SymlinkLoop(PathBuf),
    /// The input itself (the same path, a link to it, another name of the same file).
    #[error("the output would overwrite the input")]
    OverwritesInput,
    /// A directory.
    #[error("output {} is a directory", .0.display())]
    IsDirectory(PathBuf),
    /// A name whose extension belongs to another format (`out.nc`), without
    /// `--force-extension`: the file would be a `.tet` file that the other format's tools fail on.
    #[error(
        "output {}: .{ext} is the extension of {format}, but tet-convert writes .tet files; \
         name it .tet, write {format} with `tet export`, or keep the name with --force-extension",
        .output.display()
    )]
    ForeignExtension {
        output: PathBuf,
        ext: String,
        format: &'static str,
    },
    /// In a directory that does not exist.
    #[error("output directory {} does not exist", .0.display())]
    NoDirectory(PathBuf),
}

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
        let target = std::fs::read_link(&p).map_err(|source| OutputError::ReadLink {
            link: p.clone(),
            source,
        })?;
        if !through {
            return Err(OutputError::Symlink {
                output: output.to_path_buf(),
                target,
            }
            .into());
        }
        p = match p.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    Err(OutputError::SymlinkLoop(output.to_path_buf()).into())
}

/// Refuses an output that would overwrite the input (the same path, a link to it, or another
/// name of the same file), is a directory, or has no directory; returns the path to write
/// (see [`resolve_output`]).
pub(crate) fn check_paths(
    input: &Path,
    output: &Path,
    settings: &Settings,
) -> Result<PathBuf, ConvertError> {
    let through = settings.write_through_symlink;
    let given = output;
    let overwrite = || ConvertError::from(OutputError::OverwritesInput);
    if absolute(input) == absolute(output) {
        return Err(overwrite());
    }
    let output = resolve_output(output, through)?;
    if absolute(input) == absolute(&output) || same_file(input, &output) {
        return Err(overwrite());
    }
    if output.is_dir() {
        return Err(OutputError::IsDirectory(output).into());
    }
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(OutputError::NoDirectory(dir.to_path_buf()).into());
        }
    }
    // The name as given (a link's own name: what the user reads).
    check_output_name(given, settings.force_extension)?;
    Ok(output)
}

/// Refuses an output (a path or an object URL) whose extension belongs to another format the
/// registry knows (`out.nc`, `out.zarr`), unless `force`: `tet-convert` writes `.tet` files only.
pub fn check_output_name(output: &Path, force: bool) -> Result<(), OutputError> {
    let Some(ext) = output.extension().and_then(|e| e.to_str()) else {
        return Ok(());
    };
    let ext = ext.to_ascii_lowercase();
    if force || ext == crate::tet_input::ID {
        return Ok(());
    }
    match crate::registry::formats()
        .into_iter()
        .find(|f| f.id != crate::tet_input::ID && f.extensions.contains(&ext.as_str()))
    {
        Some(f) => Err(OutputError::ForeignExtension {
            output: output.to_path_buf(),
            ext,
            format: f.name,
        }),
        None => Ok(()),
    }
}

/// Whether two existing paths are one file (hard links included).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_outputs_are_told_apart_by_variant() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in.npy");
        std::fs::write(&input, b"x").unwrap();
        let s = |through: bool| Settings {
            write_through_symlink: through,
            ..Settings::default()
        };
        let refused = |output: &Path, through: bool| match check_paths(&input, output, &s(through))
        {
            Err(ConvertError::Output(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(matches!(
            refused(&input, false),
            OutputError::OverwritesInput
        ));
        assert!(matches!(
            refused(d.path(), false),
            OutputError::IsDirectory(_)
        ));
        let missing = d.path().join("no/such/out.tet");
        let e = refused(&missing, false);
        assert_eq!(
            e.to_string(),
            format!(
                "output directory {} does not exist",
                missing.parent().unwrap().display()
            )
        );
        // A link to the input is the input; a link elsewhere is refused unless written through.
        let to_input = d.path().join("to_input.tet");
        std::os::unix::fs::symlink(&input, &to_input).unwrap();
        assert!(matches!(
            refused(&to_input, true),
            OutputError::OverwritesInput
        ));
        let link = d.path().join("link.tet");
        std::os::unix::fs::symlink(d.path().join("target.tet"), &link).unwrap();
        assert!(matches!(refused(&link, false), OutputError::Symlink { .. }));
        assert_eq!(
            check_paths(&input, &link, &s(true)).unwrap(),
            d.path().join("target.tet")
        );
        let out = d.path().join("out.tet");
        assert_eq!(check_paths(&input, &out, &s(false)).unwrap(), out);
        // Another format's extension is refused unless forced; no extension, or an unknown
        // one, is the user's choice.
        let nc = d.path().join("out.NC");
        let e = refused(&nc, false);
        assert!(
            matches!(&e, OutputError::ForeignExtension { ext, .. } if ext == "nc"),
            "{e}"
        );
        assert!(e.to_string().contains("tet export"), "{e}");
        let forced = Settings {
            force_extension: true,
            ..Settings::default()
        };
        assert_eq!(check_paths(&input, &nc, &forced).unwrap(), nc);
        for ok in ["out", "out.dat", "out.tet"] {
            let p = d.path().join(ok);
            assert_eq!(check_paths(&input, &p, &s(false)).unwrap(), p);
        }
    }
}
