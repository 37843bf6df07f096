//! NPY and NPZ export (the other direction of this crate): one `.npy` per array
//! (`group__name.npy` for `group/name`), in a directory, as a single `.npy` file when the output
//! ends in `.npy` and there is one array, or in an `.npz` archive (stored, or deflated with
//! `--compress zlib`).
//!
//! NPY has no attributes, dimension names, groups or strings: only the values, element type and
//! shape are kept, and those exactly (the [`Model`] gives i8, bool, complex and 0-d arrays as
//! the file held them; opaque values, `u8` with a trailing byte axis and
//! [`tet_source::Fact::Opaque`], as raw void `|V<n>`); string variables are left out with a
//! warning. Each chunk is written at
//! its place in the C-order data with positioned writes, so memory stays at one chunk. An
//! `.npz` entry is first written as a `.npy` file beside the staged archive and then copied
//! into it. Output bytes are deterministic (fixed header layout, zip entries dated 1980-01-01).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use tet_source::export::{
    io_err, Array, Capabilities, ChunkSource, Compression, ExportError, Model, Output, Result,
    Written, WrittenArray,
};
use tet_source::{ElementType, Fact};

/// What NPY holds: booleans and complex numbers.
pub const CAPABILITIES: Capabilities = Capabilities {
    has_bool: true,
    has_complex: true,
};

/// The NPY `descr` of an element type (little-endian); `None` for bfloat16, which NumPy lacks.
fn descr(e: ElementType) -> Option<&'static str> {
    Some(match e {
        ElementType::Bool => "|b1",
        ElementType::I8 => "|i1",
        ElementType::U8 => "|u1",
        ElementType::I16 => "<i2",
        ElementType::U16 => "<u2",
        ElementType::I32 => "<i4",
        ElementType::U32 => "<u4",
        ElementType::I64 => "<i8",
        ElementType::U64 => "<u8",
        ElementType::F16 => "<f2",
        ElementType::F32 => "<f4",
        ElementType::F64 => "<f8",
        ElementType::C64 => "<c8",
        ElementType::C128 => "<c16",
        ElementType::BF16 => return None,
    })
}

/// The NPY header of a little-endian C-order array (format 1.0, or 2.0 when the dict does not
/// fit 1.0's 16-bit length), padded so the data starts at a multiple of 64 bytes; `None` for an
/// element type NPY lacks.
pub fn header(e: ElementType, shape: &[u64]) -> Option<Vec<u8>> {
    header_of(descr(e)?, shape)
}

/// The NPY header of a C-order array of `shape` whose dtype is `descr` (see [`header`]).
fn header_of(descr: &str, shape: &[u64]) -> Option<Vec<u8>> {
    let dims = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    let build = |v2: bool| {
        let prefix = if v2 { 12 } else { 10 };
        let unpadded = prefix + dict.len() + 1;
        let pad = (64 - unpadded % 64) % 64;
        let len = dict.len() + pad + 1;
        let mut h = Vec::with_capacity(prefix + len);
        h.extend_from_slice(b"\x93NUMPY");
        if v2 {
            h.extend_from_slice(&[2, 0]);
            h.extend_from_slice(&u32::try_from(len).ok()?.to_le_bytes());
        } else {
            h.extend_from_slice(&[1, 0]);
            h.extend_from_slice(&u16::try_from(len).ok()?.to_le_bytes());
        }
        h.extend_from_slice(dict.as_bytes());
        h.extend(std::iter::repeat_n(b' ', pad));
        h.push(b'\n');
        Some(h)
    };
    build(false).or_else(|| build(true))
}

/// The file name of an array: `/` → `__`.
fn file_name(a: &Array) -> String {
    format!("{}.npy", a.name.replace('/', "__"))
}

/// Contiguous byte runs of the C-order block `start .. start + count` inside a C-order array of
/// shape `shape`: calls `f(offset in the array, offset in the block, length)`, all in bytes. A
/// 0-d array is one run of one element.
fn for_each_run(
    shape: &[u64],
    start: &[u64],
    count: &[u64],
    elem: usize,
    mut f: impl FnMut(u64, u64, u64) -> Result<()>,
) -> Result<()> {
    let rank = shape.len();
    if rank == 0 {
        return f(0, 0, elem as u64);
    }
    if count.contains(&0) {
        return Ok(());
    }
    // Merge trailing axes the block covers whole into one run.
    let mut k = rank - 1;
    while k > 0 && count[k] == shape[k] {
        k -= 1;
    }
    // The run spans axes k.. : count[k] × the full extents after k.
    let inner: u64 = shape[k + 1..].iter().product();
    let run = count[k] * inner * elem as u64;
    let mut strides = vec![0u64; rank];
    let mut s = elem as u64;
    for a in (0..rank).rev() {
        strides[a] = s;
        s *= shape[a];
    }
    let outer: u64 = count[..k].iter().product();
    let mut idx = vec![0u64; k];
    let mut src = 0u64;
    for _ in 0..outer {
        let mut off = start[k] * strides[k];
        for a in 0..k {
            off += (start[a] + idx[a]) * strides[a];
        }
        f(off, src, run)?;
        src += run;
        for a in (0..k).rev() {
            idx[a] += 1;
            if idx[a] < count[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    Ok(())
}

/// Writes array `i` of the model as a `.npy` file at `path`.
fn write_npy(chunks: &mut dyn ChunkSource, i: usize, a: &Array, path: &Path) -> Result<()> {
    // Opaque values (`u8` with a trailing byte axis) are numpy's raw void `|V<n>` again.
    let opaque = a.facts.iter().any(|f| matches!(f, Fact::Opaque { .. }));
    let h = match a.shape.split_last() {
        Some((n, outer)) if opaque && a.dtype == ElementType::U8 => {
            header_of(&format!("|V{n}"), outer)
        }
        _ => header(a.dtype, &a.shape),
    }
    .ok_or_else(|| ExportError::Invalid(format!("`{}`: NPY has no {} type", a.name, a.dtype)))?;
    let too_large = || ExportError::Invalid(format!("`{}`: too large", a.name));
    let data_len = a.byte_len().ok_or_else(too_large)?;
    let file = File::create(path).map_err(io_err(path))?;
    file.write_all_at(&h, 0).map_err(io_err(path))?;
    let base = h.len() as u64;
    file.set_len(base.checked_add(data_len).ok_or_else(too_large)?)
        .map_err(io_err(path))?;
    let elem = a.dtype.size();
    for coords in a.chunk_coords() {
        let c = chunks.chunk(i, &coords)?;
        for_each_run(&a.shape, &c.start, &c.count, elem, |dst, s, len| {
            let bytes = usize::try_from(s)
                .ok()
                .zip(usize::try_from(len).ok())
                .and_then(|(s, len)| c.bytes.get(s..s.checked_add(len)?))
                .ok_or_else(|| {
                    ExportError::Data(format!("`{}`: a chunk is shorter than its region", a.name))
                })?;
            file.write_all_at(bytes, base + dst).map_err(io_err(path))
        })?;
    }
    Ok(())
}

/// Writes every array of `model` into an `.npz` archive at `zpath` (`.npy` entries staged one
/// at a time as `entry`).
fn write_npz(
    model: &Model,
    chunks: &mut dyn ChunkSource,
    output: &Path,
    zpath: &Path,
    entry: &Path,
    deflate: Option<u32>,
) -> Result<()> {
    let zfile = File::create(zpath).map_err(io_err(zpath))?;
    let mut zip = zip::ZipWriter::new(BufWriter::new(zfile));
    let ze = |e: zip::result::ZipError| ExportError::Archive {
        path: output.to_path_buf(),
        source: Box::new(e),
    };
    for (i, a) in model.arrays.iter().enumerate() {
        write_npy(chunks, i, a, entry)?;
        let len = std::fs::metadata(entry).map_err(io_err(entry))?.len();
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
            .large_file(len >= u64::from(u32::MAX));
        zip.start_file(file_name(a), opts).map_err(ze)?;
        let mut r = File::open(entry).map_err(io_err(entry))?;
        std::io::copy(&mut r, &mut zip).map_err(io_err(zpath))?;
        std::fs::remove_file(entry).map_err(io_err(entry))?;
    }
    let mut w = zip.finish().map_err(ze)?;
    w.flush().map_err(io_err(zpath))?;
    w.into_inner().map_err(|e| io_err(zpath)(e.into_error()))?;
    Ok(())
}

/// Writes the model's arrays as NPY files (`archive` false: a directory of `.npy` files, or one
/// `.npy` file when the output's name ends in `.npy`) or as an NPZ archive (`archive` true) at
/// `out.staging`.
pub fn write(
    model: &Model,
    chunks: &mut dyn ChunkSource,
    out: Output<'_>,
    compression: Compression,
    archive: bool,
) -> Result<Written> {
    let format = if archive { "npz" } else { "npy" };
    let deflate = match (archive, compression) {
        (_, Compression::Default | Compression::None) => None,
        (true, Compression::Zlib(l)) => Some(l),
        _ => {
            return Err(ExportError::Invalid(format!(
                "{format} export has no {compression} compression (NPY: none; NPZ: none or zlib)"
            )))
        }
    };
    // Names must stay distinct once `/` becomes `__`.
    let mut names: Vec<String> = model.arrays.iter().map(file_name).collect();
    names.sort();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(ExportError::Invalid(format!(
            "two arrays would both be written as `{}`",
            w[0]
        )));
    }
    let warnings = model
        .text_variables
        .iter()
        .map(|t| {
            format!(
                "string variable `{}` is not exported ({format} has no string arrays here)",
                t.name()
            )
        })
        .collect();
    let single_npy = !archive
        && out
            .path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    if single_npy {
        let [a] = &model.arrays[..] else {
            return Err(ExportError::Invalid(format!(
                "{}: a single .npy holds one array, the selection has {}; give a directory name or one --dataset",
                out.path.display(),
                model.arrays.len()
            )));
        };
        write_npy(chunks, 0, a, out.staging)?;
    } else if archive {
        let entry = out.staging.with_extension("entry.npy");
        write_npz(model, chunks, out.path, out.staging, &entry, deflate)?;
    } else {
        std::fs::create_dir(out.staging).map_err(io_err(out.staging))?;
        for (i, a) in model.arrays.iter().enumerate() {
            write_npy(chunks, i, a, &out.staging.join(file_name(a)))?;
        }
    }
    Ok(Written {
        arrays: model.arrays.iter().map(WrittenArray::of).collect(),
        reused_chunks: 0,
        warnings,
    })
}

/// The NPY (`archive` false) and NPZ (`archive` true) targets of the engine's driver registry.
pub struct NpyExporter {
    /// One `.npz` archive rather than `.npy` files.
    pub archive: bool,
}

impl tet_source::export::Exporter for NpyExporter {
    fn name(&self) -> &'static str {
        if self.archive {
            "npz"
        } else {
            "npy"
        }
    }
    fn extensions(&self) -> &'static [&'static str] {
        if self.archive {
            &["npz"]
        } else {
            &["npy"]
        }
    }
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }
    fn write(
        &self,
        model: &Model,
        chunks: &mut dyn ChunkSource,
        out: Output<'_>,
        compression: Compression,
    ) -> Result<Written> {
        write(model, chunks, out, compression, self.archive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_readable() {
        for shape in [vec![], vec![7], vec![3, 4, 5]] {
            let h = header(ElementType::C64, &shape).unwrap();
            assert_eq!(h.len() % 64, 0);
            assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
            assert_eq!(*h.last().unwrap(), b'\n');
        }
        let h = header(ElementType::I8, &[2, 3]).unwrap();
        let text = String::from_utf8_lossy(&h[10..]);
        assert!(text.starts_with("{'descr': '|i1', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(header(ElementType::BF16, &[1]).is_none());
    }

    #[test]
    fn runs_cover_the_block() {
        let shape = [4u64, 5, 6];
        let mut seen = [0u8; 4 * 5 * 6];
        for_each_run(&shape, &[1, 2, 0], &[2, 3, 6], 1, |dst, src, len| {
            for i in 0..len {
                seen[(dst + i) as usize] += 1;
                assert!(src + i < 36);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.iter().map(|&v| v as u32).sum::<u32>(), 36);
        assert_eq!(seen[30 + 12], 1);
        let mut runs = 0;
        for_each_run(&shape, &[0, 0, 0], &[2, 5, 6], 4, |_, _, len| {
            runs += 1;
            assert_eq!(len, 2 * 30 * 4);
            Ok(())
        })
        .unwrap();
        assert_eq!(runs, 1);
        let mut scalar = Vec::new();
        for_each_run(&[], &[], &[], 8, |dst, src, len| {
            scalar.push((dst, src, len));
            Ok(())
        })
        .unwrap();
        assert_eq!(scalar, [(0, 0, 8)]);
    }
}
