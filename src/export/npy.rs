//! NPY and NPZ export: one `.npy` per array (`group__name.npy` for `group/name`), in a
//! directory, as a single `.npy` file when `OUT` ends in `.npy` and there is one array, or in an
//! `.npz` archive (stored, or deflated with `--compress zlib`).
//!
//! NPY has no attributes, dimension names or groups: only the values, element type and shape
//! are kept, and those exactly (i8 and bool restored, complex pairs recombined, 0-d restored).
//! Each chunk is written at its place in the C-order data with positioned writes, so memory
//! stays at one chunk. An `.npz` entry is first written as a `.npy` file in the temporary
//! directory and then copied into the archive. Output bytes are deterministic (fixed header
//! layout, zip entries dated 1980-01-01). Everything is made durable before the final rename.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{
    commit, for_each_run, grid_coords, io_err, parent_dir, Array, ChunkSource, Compression, Elem,
    ExportError, Plan, Result, Target,
};
use crate::format::TetFile;

/// The NPY `descr` of an element type (little-endian).
fn descr(e: Elem) -> &'static str {
    match e {
        Elem::Bool => "|b1",
        Elem::I8 => "|i1",
        Elem::U8 => "|u1",
        Elem::I16 => "<i2",
        Elem::U16 => "<u2",
        Elem::I32 => "<i4",
        Elem::U32 => "<u4",
        Elem::I64 => "<i8",
        Elem::U64 => "<u8",
        Elem::F16 => "<f2",
        Elem::F32 => "<f4",
        Elem::F64 => "<f8",
        Elem::C64 => "<c8",
        Elem::C128 => "<c16",
    }
}

/// The NPY header (format 1.0, or 2.0 when the dict does not fit 1.0's 16-bit length), padded
/// so the data starts at a multiple of 64 bytes.
pub(crate) fn header(e: Elem, shape: &[u64]) -> Vec<u8> {
    let dims = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {dims}, }}",
        descr(e)
    );
    let build = |v2: bool| {
        let prefix = if v2 { 12 } else { 10 };
        let unpadded = prefix + dict.len() + 1;
        let pad = (64 - unpadded % 64) % 64;
        let len = dict.len() + pad + 1;
        let mut h = Vec::with_capacity(prefix + len);
        h.extend_from_slice(b"\x93NUMPY");
        if v2 {
            h.extend_from_slice(&[2, 0]);
            h.extend_from_slice(&(len as u32).to_le_bytes());
        } else {
            h.extend_from_slice(&[1, 0]);
            h.extend_from_slice(&(len as u16).to_le_bytes());
        }
        h.extend_from_slice(dict.as_bytes());
        h.extend(std::iter::repeat_n(b' ', pad));
        h.push(b'\n');
        (h, len)
    };
    let (h, len) = build(false);
    if len <= u16::MAX as usize {
        h
    } else {
        build(true).0
    }
}

/// The file name of an array: `/` → `__`.
pub(crate) fn file_name(a: &Array) -> String {
    format!("{}.npy", a.name.replace('/', "__"))
}

/// Writes one array as a `.npy` file at `path`.
fn write_npy(src: &mut ChunkSource, a: &Array, path: &Path) -> Result<()> {
    let tet: &TetFile = src.tet();
    let h = header(a.elem, &a.shape);
    let data_len = a
        .tet_shape
        .iter()
        .try_fold(a.elem.size() as u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| ExportError::Invalid(format!("`{}`: too large", a.name)))?;
    let file = File::create(path).map_err(io_err(path))?;
    file.write_all_at(&h, 0).map_err(io_err(path))?;
    let base = h.len() as u64;
    file.set_len(base + data_len).map_err(io_err(path))?;
    let elem = a.elem.size();
    for coords in grid_coords(tet, a.ds) {
        let c = src.chunk(a, &coords)?;
        for_each_run(&a.tet_shape, &c.start, &c.count, elem, |dst, s, len| {
            let s = s as usize;
            let bytes = &c.bytes[s..s + len as usize];
            file.write_all_at(bytes, base + dst).map_err(io_err(path))
        })?;
    }
    Ok(())
}

/// Writes the plan's arrays as NPY files or an NPZ archive at `output`.
pub(crate) fn write(
    tet: &TetFile,
    plan: &Plan,
    output: &Path,
    compression: Compression,
) -> Result<()> {
    let deflate = match (plan.target, compression) {
        (_, Compression::Default | Compression::None) => None,
        (Target::Npz, Compression::Zlib(l)) => Some(l),
        _ => {
            return Err(ExportError::Invalid(format!(
                "{} export has no {compression} compression (NPY: none; NPZ: none or zlib)",
                plan.target.name()
            )))
        }
    };
    // Names must stay distinct once `/` becomes `__`.
    let mut names: Vec<String> = plan.arrays.iter().map(file_name).collect();
    names.sort();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(ExportError::Invalid(format!(
            "two arrays would both be written as `{}`",
            w[0]
        )));
    }
    let parent = parent_dir(output);
    let tmp = tempfile::Builder::new()
        .prefix(".tet-export-")
        .tempdir_in(&parent)
        .map_err(io_err(&parent))?;
    let mut src = ChunkSource::new(tet);
    let single_npy = plan.target == Target::Npy
        && output
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    if single_npy {
        let [a] = &plan.arrays[..] else {
            return Err(ExportError::Invalid(format!(
                "{}: a single .npy holds one array, the selection has {}; give a directory name or one --dataset",
                output.display(),
                plan.arrays.len()
            )));
        };
        let f = tmp.path().join("out.npy");
        write_npy(&mut src, a, &f)?;
        return commit(&f, output);
    }
    match plan.target {
        Target::Npz => {
            let zpath = tmp.path().join("out.npz");
            let zfile = File::create(&zpath).map_err(io_err(&zpath))?;
            let mut zip = zip::ZipWriter::new(BufWriter::new(zfile));
            let ze = |e: zip::result::ZipError| {
                ExportError::Target(format!("{}: {e}", output.display()))
            };
            for a in &plan.arrays {
                let name = file_name(a);
                let f = tmp.path().join("entry.npy");
                write_npy(&mut src, a, &f)?;
                let len = std::fs::metadata(&f).map_err(io_err(&f))?.len();
                let method = if deflate.is_some() {
                    zip::CompressionMethod::Deflated
                } else {
                    zip::CompressionMethod::Stored
                };
                let opts = zip::write::SimpleFileOptions::default()
                    .compression_method(method)
                    .compression_level(deflate.map(i64::from))
                    .last_modified_time(zip::DateTime::default())
                    .unix_permissions(0o644)
                    .large_file(len >= u32::MAX as u64);
                zip.start_file(name, opts).map_err(ze)?;
                let mut r = File::open(&f).map_err(io_err(&f))?;
                std::io::copy(&mut r, &mut zip).map_err(io_err(&zpath))?;
                std::fs::remove_file(&f).map_err(io_err(&f))?;
            }
            let mut w = zip.finish().map_err(ze)?;
            w.flush().map_err(io_err(&zpath))?;
            w.into_inner().map_err(|e| io_err(&zpath)(e.into_error()))?;
            commit(&zpath, output)
        }
        _ => {
            let dir: PathBuf = tmp.path().join("out");
            std::fs::create_dir(&dir).map_err(io_err(&dir))?;
            for a in &plan.arrays {
                let f = dir.join(file_name(a));
                write_npy(&mut src, a, &f)?;
            }
            commit(&dir, output)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_readable() {
        for shape in [vec![], vec![7], vec![3, 4, 5]] {
            let h = header(Elem::C64, &shape);
            assert_eq!(h.len() % 64, 0);
            assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
            assert_eq!(*h.last().unwrap(), b'\n');
        }
        let h = header(Elem::I8, &[2, 3]);
        let text = String::from_utf8_lossy(&h[10..]);
        assert!(text.starts_with("{'descr': '|i1', 'fortran_order': False, 'shape': (2, 3), }"));
    }
}
