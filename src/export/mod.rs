//! `tet export`: streams the datasets of a `.tet` file back out to NetCDF-4, Zarr v3 or NPY/NPZ.
//!
//! The work splits in two:
//!
//! - [`Plan::new`] reads the footer only and decides what each output array is: its name (a `/`
//!   is a group), its element type with the importer's widening undone (`source_dtype` i8 → i8,
//!   bool → bool; bf16 stays f32, which no target lacks), complex `<x>/real` + `<x>/imag` pairs
//!   recombined into one complex array where the target has complex numbers, a 0-d scalar
//!   (stored as shape `[1]`) restored to 0-d, its dimension names, typed attributes and role.
//! - [`ChunkSource`] then delivers one `.tet` chunk at a time in the output type (decoded into
//!   reusable buffers, narrowed with a range check), and the target writers (`netcdf`, `zarr`,
//!   `npy`) put each chunk at its region. Memory is a few chunks, whatever the dataset size.
//!
//! Every writer builds its output beside `OUT` under a temporary name and renames it into place
//! only once everything is written, so a failed export leaves nothing behind.

#[cfg(feature = "netcdf")]
mod netcdf;
mod npy;
mod zarr;

use std::path::{Path, PathBuf};

use serde_json::Value;
use tet_source::{AttrValue, Attrs};

use crate::format::footer::attr_from_json;
use crate::format::{DType, Footer, HistoryRow, TetError, TetFile};

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    NetCdf,
    Zarr,
    /// One `.npy` per array in a directory (or a single `.npy` file for one array).
    Npy,
    /// One `.npz` archive.
    Npz,
}

impl Target {
    /// `netcdf`, `zarr`, `npy`, `npz`.
    pub fn from_name(s: &str) -> Option<Target> {
        match s.to_ascii_lowercase().as_str() {
            "netcdf" | "nc" | "netcdf4" => Some(Target::NetCdf),
            "zarr" => Some(Target::Zarr),
            "npy" => Some(Target::Npy),
            "npz" => Some(Target::Npz),
            _ => None,
        }
    }

    /// The target an output path's extension names.
    pub fn from_path(p: &Path) -> Option<Target> {
        let ext = p.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "nc" | "nc4" | "cdf" | "netcdf" => Some(Target::NetCdf),
            "zarr" => Some(Target::Zarr),
            "npy" => Some(Target::Npy),
            "npz" => Some(Target::Npz),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::NetCdf => "netcdf",
            Target::Zarr => "zarr",
            Target::Npy => "npy",
            Target::Npz => "npz",
        }
    }

    /// Whether the target has a complex element type (else the real/imag pair stays two arrays).
    fn has_complex(self) -> bool {
        !matches!(self, Target::NetCdf)
    }

    /// Whether the target has a boolean element type (else bool stays u8 0/1).
    fn has_bool(self) -> bool {
        !matches!(self, Target::NetCdf)
    }
}

/// Compression of the exported chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// The target's default: NetCDF zlib level 4 with shuffle, Zarr zstd level 3 (reusing the
    /// `.tet` zstd frames), NPY/NPZ none.
    #[default]
    Default,
    None,
    /// zlib / deflate at a level 1..=9.
    Zlib(u32),
    /// zstd at a level 1..=22.
    Zstd(i32),
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::Default => f.write_str("default"),
            Compression::None => f.write_str("none"),
            Compression::Zlib(l) => write!(f, "zlib:{l}"),
            Compression::Zstd(l) => write!(f, "zstd:{l}"),
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, level) = match s.split_once(':') {
            Some((n, l)) => (n, Some(l)),
            None => (s, None),
        };
        let lvl = |lo: i64, hi: i64, def: i64| -> Result<i64, String> {
            match level {
                None => Ok(def),
                Some(l) => l
                    .parse::<i64>()
                    .ok()
                    .filter(|v| (lo..=hi).contains(v))
                    .ok_or_else(|| format!("{name} level `{l}` is not in {lo}..={hi}")),
            }
        };
        match name {
            "none" if level.is_none() => Ok(Compression::None),
            "zlib" | "deflate" => Ok(Compression::Zlib(lvl(1, 9, 4)? as u32)),
            "zstd" => Ok(Compression::Zstd(lvl(1, 22, 3)? as i32)),
            _ => Err(format!(
                "unknown compression `{s}` (none, zlib[:1-9], zstd[:1-22])"
            )),
        }
    }
}

/// What to export and how.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// The format; `None`: from the output's extension.
    pub target: Option<Target>,
    /// Datasets to export (exact names, complex base names or group prefixes); empty: all.
    pub datasets: Vec<String>,
    pub compression: Compression,
    /// Replace an existing output.
    pub force: bool,
}

/// Errors of an export. Every message is one line naming what failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Tet(#[from] TetError),
    /// The request cannot be honoured (unknown dataset, option the target lacks, …).
    #[error("{0}")]
    Invalid(String),
    /// The data contradicts its own metadata (a value outside the recorded source type, …).
    #[error("{0}")]
    Data(String),
    /// The target library refused something.
    #[error("{0}")]
    Target(String),
}

pub type Result<T, E = ExportError> = std::result::Result<T, E>;

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Element type of an exported array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    Bool,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F16,
    F32,
    F64,
    /// Two f32.
    C64,
    /// Two f64.
    C128,
}

impl Elem {
    pub fn size(self) -> usize {
        match self {
            Elem::Bool | Elem::I8 | Elem::U8 => 1,
            Elem::I16 | Elem::U16 | Elem::F16 => 2,
            Elem::I32 | Elem::U32 | Elem::F32 => 4,
            Elem::I64 | Elem::U64 | Elem::F64 | Elem::C64 => 8,
            Elem::C128 => 16,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Elem::Bool => "bool",
            Elem::I8 => "i8",
            Elem::U8 => "u8",
            Elem::I16 => "i16",
            Elem::U16 => "u16",
            Elem::I32 => "i32",
            Elem::U32 => "u32",
            Elem::I64 => "i64",
            Elem::U64 => "u64",
            Elem::F16 => "f16",
            Elem::F32 => "f32",
            Elem::F64 => "f64",
            Elem::C64 => "c64",
            Elem::C128 => "c128",
        }
    }

    fn of(d: DType) -> Elem {
        match d {
            DType::F32 => Elem::F32,
            DType::F64 => Elem::F64,
            DType::I32 => Elem::I32,
            DType::I64 => Elem::I64,
            DType::U8 => Elem::U8,
            DType::U16 => Elem::U16,
            DType::I16 => Elem::I16,
            DType::U32 => Elem::U32,
            DType::F16 => Elem::F16,
            DType::U64 => Elem::U64,
        }
    }
}

/// How the output values come from the stored ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// The stored bytes as they are.
    Same,
    /// i16 → i8 (the importer widened i8).
    I16ToI8,
    /// u8 0/1 → bool.
    U8ToBool,
    /// f16 → f32 (for a target without f16).
    F16ToF32,
    /// Real and imaginary datasets interleaved.
    Complex,
}

/// One output array.
#[derive(Debug, Clone)]
pub struct Array {
    /// Output name; `/` separates groups.
    pub name: String,
    /// The `.tet` dataset (the real part for a complex array).
    pub ds: usize,
    /// The imaginary part's dataset.
    pub imag: Option<usize>,
    pub elem: Elem,
    pub restore: Restore,
    /// The output shape (empty for a restored 0-d scalar).
    pub shape: Vec<u64>,
    /// The `.tet` shape and chunk shape.
    pub tet_shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
    /// One name per output axis.
    pub dims: Option<Vec<String>>,
    /// Typed attributes in source order.
    pub attrs: Attrs,
    /// A coordinate variable.
    pub coordinate: bool,
    /// Dimensions the source had as unlimited (NetCDF fact `unlimited_dims`).
    pub unlimited_dims: Vec<String>,
}

impl Array {
    /// The group path (empty for the root) and the short name.
    pub fn split_name(&self) -> (&str, &str) {
        split_group(&self.name)
    }
}

/// (`a/b`, `c`) for `a/b/c`; (``, `c`) for `c`.
pub fn split_group(name: &str) -> (&str, &str) {
    match name.rfind('/') {
        Some(i) => (&name[..i], &name[i + 1..]),
        None => ("", name),
    }
}

/// Everything an export writes, decided from the footer alone.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    pub arrays: Vec<Array>,
    pub global_attrs: Attrs,
    pub history: Vec<HistoryRow>,
    /// `tet_ext.text_variables` (string variables).
    pub text_variables: Vec<Value>,
    /// What the export could not keep as it was (printed as warnings).
    pub warnings: Vec<String>,
    /// Only some datasets were selected (`--dataset`): attributes of groups that are not
    /// exported are left out.
    pub subset: bool,
}

fn text_of<'a>(list: &'a [(String, AttrValue)], key: &str) -> Option<&'a str> {
    list.iter().find_map(|(k, v)| match v {
        AttrValue::Text(s) if k == key => Some(s.as_str()),
        _ => None,
    })
}

/// The typed `tet_ext.source_facts` of a dataset.
fn facts(meta: &crate::format::DatasetMeta) -> Attrs {
    meta.extra
        .get("source_facts")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    let p = p.as_array()?;
                    Some((p.first()?.as_str()?.to_string(), attr_from_json(p.get(1)?)?))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A fact of a dataset: from `tet_ext.source_facts` or (as the NPY and Tensogram importers
/// record complex parts) from its attributes.
fn fact(meta: &crate::format::DatasetMeta, key: &str) -> Option<String> {
    text_of(&facts(meta), key)
        .or_else(|| text_of(&meta.attrs, key))
        .map(str::to_string)
}

const SCALAR_NOTE: &str = "0-d scalar stored as shape [1]";

impl Plan {
    /// Plans the export of `tet` to `target`, restricted to `select` (empty: everything).
    pub fn new(tet: &TetFile, target: Target, select: &[String]) -> Result<Plan> {
        let empty = Footer::default();
        let footer = match tet.footer() {
            Ok(Some(f)) => f,
            Ok(None) => &empty,
            Err(e) => {
                return Err(ExportError::Invalid(format!(
                    "{e} (the metadata to export is unreadable)"
                )))
            }
        };
        let no_meta = crate::format::DatasetMeta::default();
        let mut warnings = Vec::new();
        let mut arrays = Vec::new();
        // Complex pairs first (whatever the dataset order): real part id → imaginary part id.
        let mut partner_of = vec![None; tet.datasets.len()];
        let mut used = vec![false; tet.datasets.len()];
        for (id, d) in tet.datasets.iter().enumerate() {
            let meta = footer.datasets.get(&d.name).unwrap_or(&no_meta);
            if !target.has_complex()
                || !matches!(d.dtype, DType::F32 | DType::F64)
                || fact(meta, "complex_part").as_deref() != Some("real")
            {
                continue;
            }
            let Some(base) = d.name.strip_suffix("/real") else {
                continue;
            };
            let iname = format!("{base}/imag");
            let partner = tet.dataset_id(&iname).filter(|&i| {
                let di = &tet.datasets[i];
                let mi = footer.datasets.get(&iname).unwrap_or(&no_meta);
                !used[i]
                    && di.dtype == d.dtype
                    && di.shape == d.shape
                    && fact(mi, "complex_part").as_deref() == Some("imag")
            });
            if let Some(i) = partner {
                partner_of[id] = Some(i);
                used[i] = true;
            }
        }
        for (id, d) in tet.datasets.iter().enumerate() {
            if used[id] {
                continue;
            }
            let meta = footer.datasets.get(&d.name).unwrap_or(&no_meta);
            let mut elem = Elem::of(d.dtype);
            let mut restore = Restore::Same;
            let mut name = d.name.clone();
            let mut imag = None;
            let mut attrs = meta.attrs.clone();
            let source = meta.extra.get("source_dtype").and_then(Value::as_str);
            match (source, d.dtype) {
                (Some("i8"), DType::I16) => {
                    elem = Elem::I8;
                    restore = Restore::I16ToI8;
                }
                (Some("bool"), DType::U8) if target.has_bool() => {
                    elem = Elem::Bool;
                    restore = Restore::U8ToBool;
                }
                (Some("bool"), DType::U8) => {
                    // xarray reads a `dtype = "bool"` attribute back as booleans.
                    attrs.push(("dtype".into(), AttrValue::Text("bool".into())));
                }
                (Some("bf16"), _) => warnings.push(format!(
                    "`{}`: bfloat16 values exported as the f32 they were widened to",
                    d.name
                )),
                _ => {}
            }
            if d.dtype == DType::F16 && target == Target::NetCdf {
                elem = Elem::F32;
                restore = Restore::F16ToF32;
                warnings.push(format!(
                    "`{}`: netCDF has no f16: values exported as f32 (exactly)",
                    d.name
                ));
            }
            // A complex pair: `<x>/real` here, `<x>/imag` paired above.
            if let Some(i) = partner_of[id] {
                imag = Some(i);
                elem = if d.dtype == DType::F32 {
                    Elem::C64
                } else {
                    Elem::C128
                };
                restore = Restore::Complex;
                name = d.name.strip_suffix("/real").unwrap_or(&d.name).to_string();
                attrs.retain(|(k, _)| k != "complex_part" && k != "complex_dtype");
            }
            let notes: Vec<&str> = meta
                .extra
                .get("notes")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let scalar = d.shape == [1]
                && notes.contains(&SCALAR_NOTE)
                && meta.dim_names.as_ref().is_none_or(|n| n.is_empty());
            let shape = if scalar { Vec::new() } else { d.shape.clone() };
            let dims = meta
                .dim_names
                .clone()
                .filter(|n| n.len() == shape.len() && !n.is_empty());
            let coordinate = meta.extra.get("role").and_then(Value::as_str) == Some("coordinate");
            let unlimited_dims = facts(meta)
                .into_iter()
                .find_map(|(k, v)| match v {
                    AttrValue::TextList(l) if k == "unlimited_dims" => Some(l),
                    AttrValue::Text(t) if k == "unlimited_dims" => Some(vec![t]),
                    _ => None,
                })
                .unwrap_or_default();
            arrays.push(Array {
                name,
                ds: id,
                imag,
                elem,
                restore,
                shape,
                tet_shape: d.shape.clone(),
                chunk_shape: d.chunk_shape.clone(),
                dims,
                attrs,
                coordinate,
                unlimited_dims,
            });
        }
        let all_text: Vec<Value> = footer
            .extra
            .get("text_variables")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let text_name = |t: &Value| {
            t.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let text_selected = |n: &str, s: &str| n == s || n.starts_with(&format!("{s}/"));
        if !select.is_empty() {
            for s in select {
                let hit = arrays.iter().any(|a| selected(a, tet, s))
                    || all_text.iter().any(|t| text_selected(&text_name(t), s));
                if !hit {
                    return Err(ExportError::Invalid(format!(
                        "no dataset or group `{s}` (have: {})",
                        arrays
                            .iter()
                            .map(|a| a.name.clone())
                            .chain(all_text.iter().map(text_name))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
            arrays.retain(|a| select.iter().any(|s| selected(a, tet, s)));
        }
        let text_variables: Vec<Value> = all_text
            .into_iter()
            .filter(|t| {
                let n = text_name(t);
                select.is_empty() || select.iter().any(|s| text_selected(&n, s))
            })
            .collect();
        if matches!(target, Target::Npy | Target::Npz) {
            for t in &text_variables {
                warnings.push(format!(
                    "string variable `{}` is not exported ({} has no string arrays here)",
                    t.get("name").and_then(Value::as_str).unwrap_or("?"),
                    target.name()
                ));
            }
        }
        Ok(Plan {
            target,
            arrays,
            global_attrs: footer.global_attrs.clone(),
            history: footer.history.clone(),
            text_variables,
            warnings,
            subset: !select.is_empty(),
        })
    }
}

fn selected(a: &Array, tet: &TetFile, s: &str) -> bool {
    let prefix = format!("{s}/");
    a.name == s
        || a.name.starts_with(&prefix)
        || tet.datasets[a.ds].name == s
        || a.imag.is_some_and(|i| tet.datasets[i].name == s)
}

/// Delivers the chunks of an array in its output type, reusing its buffers.
pub(crate) struct ChunkSource<'a> {
    tet: &'a TetFile,
    raw: Vec<u8>,
    imag: Vec<u8>,
    out: Vec<u8>,
    /// File ranges of the chunk delivered last, released at the next call.
    done: Vec<(u64, u64)>,
}

/// One chunk: where it lies (in `.tet` coordinates) and its C-order bytes in the output type.
pub(crate) struct Chunk<'b> {
    pub start: Vec<u64>,
    pub count: Vec<u64>,
    pub bytes: &'b [u8],
}

impl<'a> ChunkSource<'a> {
    pub fn new(tet: &'a TetFile) -> Self {
        ChunkSource {
            tet,
            raw: Vec::new(),
            imag: Vec::new(),
            out: Vec::new(),
            done: Vec::new(),
        }
    }

    pub fn tet(&self) -> &'a TetFile {
        self.tet
    }

    /// The chunk at grid coordinates `coords` of `a`.
    pub fn chunk(&mut self, a: &Array, coords: &[u64]) -> Result<Chunk<'_>> {
        let tet = self.tet;
        // The previous chunk's bytes are no longer borrowed: unmap them (bounded RSS).
        for (off, len) in self.done.drain(..) {
            tet.release(off, len);
        }
        let d = &tet.datasets[a.ds];
        let (start, count) = d.grid.chunk_region(coords);
        let e = tet.find_chunk(a.ds, coords).ok_or_else(|| {
            ExportError::Data(format!(
                "dataset `{}`: chunk {coords:?} is missing from the index",
                d.name
            ))
        })?;
        let want = tet.expected_raw_len(a.ds, coords).unwrap_or(u64::MAX);
        if e.raw_byte_len != want {
            return Err(ExportError::Data(format!(
                "dataset `{}` chunk {coords:?}: raw_byte_len {} but the chunk holds {want} bytes",
                d.name, e.raw_byte_len
            )));
        }
        let n = usize::try_from(want)
            .map_err(|_| ExportError::Invalid(format!("`{}`: chunk too large", d.name)))?;
        // Every buffer stays proportional to the file: a zstd frame cannot expand more than
        // this (the reader's own rule), a raw payload must lie inside the file (checked below).
        let limit = e
            .stored_byte_len
            .saturating_mul(crate::format::verify::ZSTD_MAX_RATIO)
            .saturating_add(1 << 17);
        if e.codec() == Some(crate::format::Codec::Zstd) && want > limit {
            return Err(ExportError::Data(format!(
                "dataset `{}` chunk {coords:?}: raw_byte_len {want} is more than a {}-byte zstd frame can hold",
                d.name, e.stored_byte_len
            )));
        }
        self.done.push((e.payload_offset, e.stored_byte_len));
        if let Some(ie) = a.imag.and_then(|i| tet.find_chunk(i, coords)) {
            self.done.push((ie.payload_offset, ie.stored_byte_len));
        }
        let at = |err: TetError| {
            ExportError::Data(format!("dataset `{}` chunk {coords:?}: {err}", d.name))
        };
        // The stored bytes: borrowed when raw, decoded into `raw` otherwise.
        let stored: &[u8] = match tet.raw_payload(e).map_err(at)? {
            Some(b) => b,
            None => {
                self.raw.resize(n, 0);
                tet.read_chunk_into(e, &mut self.raw).map_err(at)?;
                &self.raw
            }
        };
        let bytes: &[u8] = match a.restore {
            Restore::Same => stored,
            Restore::I16ToI8 => {
                self.out.clear();
                for c in stored.chunks_exact(2) {
                    let v = i16::from_le_bytes([c[0], c[1]]);
                    let b = i8::try_from(v).map_err(|_| {
                        ExportError::Data(format!(
                            "dataset `{}`: value {v} does not fit i8, the recorded source type",
                            d.name
                        ))
                    })?;
                    self.out.push(b as u8);
                }
                &self.out
            }
            Restore::U8ToBool => {
                if let Some(v) = stored.iter().find(|&&v| v > 1) {
                    return Err(ExportError::Data(format!(
                        "dataset `{}`: value {v} is not a bool (0 or 1), the recorded source type",
                        d.name
                    )));
                }
                stored
            }
            Restore::F16ToF32 => {
                self.out.clear();
                for c in stored.chunks_exact(2) {
                    let v = f16_to_f32(u16::from_le_bytes([c[0], c[1]]));
                    self.out.extend_from_slice(&v.to_le_bytes());
                }
                &self.out
            }
            Restore::Complex => {
                let i = a.imag.unwrap_or(a.ds);
                self.imag.resize(n, 0);
                tet.read_region(i, &start, &count, &mut self.imag)
                    .map_err(at)?;
                let half = d.dtype.size();
                self.out.clear();
                self.out.reserve(2 * n);
                for (re, im) in stored.chunks_exact(half).zip(self.imag.chunks_exact(half)) {
                    self.out.extend_from_slice(re);
                    self.out.extend_from_slice(im);
                }
                &self.out
            }
        };
        Ok(Chunk {
            start,
            count,
            bytes,
        })
    }
}

/// The NPY (format 1.0) header of a little-endian C-order array, padded to 64 bytes.
pub fn npy_header(elem: Elem, shape: &[u64]) -> Vec<u8> {
    npy::header(elem, shape)
}

/// IEEE half → single, exactly.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, f) => {
            // Subnormal: normalise.
            let mut e = 127 - 15 + 1;
            let mut f = f;
            while f & 0x400 == 0 {
                f <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((f & 0x3ff) << 13)
        }
        (0x1f, f) => sign | 0x7f80_0000 | (f << 13),
        (e, f) => sign | ((e + 127 - 15) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}

/// Contiguous byte runs of the C-order block `start .. start + count` inside a C-order array of
/// shape `shape`: calls `f(offset in the array, offset in the block, length)`, all in bytes.
pub(crate) fn for_each_run(
    shape: &[u64],
    start: &[u64],
    count: &[u64],
    elem: usize,
    mut f: impl FnMut(u64, u64, u64) -> Result<()>,
) -> Result<()> {
    let rank = shape.len();
    if count.contains(&0) {
        return Ok(());
    }
    // Merge trailing axes the block covers whole into one run.
    let mut k = rank.saturating_sub(1);
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

/// Every grid coordinate of a dataset, in index order.
pub(crate) fn grid_coords(tet: &TetFile, ds: usize) -> impl Iterator<Item = Vec<u64>> + '_ {
    let g = &tet.datasets[ds].grid;
    (0..g.total).map(move |l| g.coords(l))
}

/// Facts about a finished export.
#[derive(Debug, Clone)]
pub struct ExportReport {
    pub target: Target,
    pub output: PathBuf,
    pub arrays: Vec<(String, String, Vec<u64>)>,
    /// Zarr chunks whose zstd frames were copied from the `.tet` file verbatim.
    pub reused_chunks: u64,
    pub warnings: Vec<String>,
}

/// Exports `input` (a `.tet` file) to `output`.
pub fn export(input: &Path, output: &Path, opts: &ExportOptions) -> Result<ExportReport> {
    let target = match opts.target {
        Some(t) => t,
        None => Target::from_path(output).ok_or_else(|| {
            ExportError::Invalid(format!(
                "{}: cannot tell the format from the extension (.nc, .zarr, .npy, .npz); use --to",
                output.display()
            ))
        })?,
    };
    check_paths(input, output, opts.force)?;
    let tet = TetFile::open(input).map_err(|e| match e {
        TetError::Io(source) => ExportError::Io {
            path: input.to_path_buf(),
            source,
        },
        e => ExportError::Invalid(format!("{}: {e}", input.display())),
    })?;
    let plan = Plan::new(&tet, target, &opts.datasets)?;
    let (reused, target_warnings) = match target {
        #[cfg(feature = "netcdf")]
        Target::NetCdf => (0, netcdf::write(&tet, &plan, output, opts.compression)?),
        #[cfg(not(feature = "netcdf"))]
        Target::NetCdf => {
            return Err(ExportError::Invalid(
                "this build has no NetCDF support (cargo feature `netcdf`)".into(),
            ))
        }
        Target::Zarr => (
            zarr::write(&tet, &plan, output, opts.compression)?,
            Vec::new(),
        ),
        Target::Npy | Target::Npz => {
            npy::write(&tet, &plan, output, opts.compression)?;
            (0, Vec::new())
        }
    };
    let mut warnings = plan.warnings.clone();
    warnings.extend(target_warnings);
    Ok(ExportReport {
        target,
        output: output.to_path_buf(),
        arrays: plan
            .arrays
            .iter()
            .map(|a| (a.name.clone(), a.elem.name().to_string(), a.shape.clone()))
            .collect(),
        reused_chunks: reused,
        warnings,
    })
}

fn check_paths(input: &Path, output: &Path, force: bool) -> Result<()> {
    if let (Ok(a), Ok(b)) = (input.canonicalize(), output.canonicalize()) {
        if a == b {
            return Err(ExportError::Invalid(format!(
                "{}: the output is the input",
                output.display()
            )));
        }
    }
    if output.symlink_metadata().is_ok() && !force {
        return Err(ExportError::Invalid(format!(
            "{}: exists (use --force to replace it)",
            output.display()
        )));
    }
    Ok(())
}

/// The directory `output` lives in (`.` for a bare name).
pub(crate) fn parent_dir(output: &Path) -> PathBuf {
    match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// fsyncs a file, or every file and directory below a directory (its own files only: unlike
/// syncfs, the cost does not depend on what else is being written on the file system).
fn sync_tree(p: &Path) -> Result<()> {
    if p.is_dir() {
        for e in std::fs::read_dir(p).map_err(io_err(p))? {
            let e = e.map_err(io_err(p))?;
            sync_tree(&e.path())?;
        }
    }
    std::fs::File::open(p)
        .and_then(|f| f.sync_all())
        .map_err(io_err(p))
}

/// Makes a finished temporary file or directory durable, then moves it onto `output`, replacing
/// what is there, and makes the rename durable: after a crash `output` holds the old content or
/// the complete new one.
pub(crate) fn commit(tmp: &Path, output: &Path) -> Result<()> {
    sync_tree(tmp)?;
    let sync_parent = || {
        std::fs::File::open(parent_dir(output))
            .and_then(|d| d.sync_all())
            .map_err(io_err(output))
    };
    if output.is_dir() && !output.is_symlink() {
        // A directory cannot be renamed over a non-empty one: move the old one aside first.
        let aside = parent_dir(output).join(format!(
            ".{}.old-{}",
            output
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        std::fs::rename(output, &aside).map_err(io_err(output))?;
        std::fs::rename(tmp, output).map_err(io_err(output))?;
        sync_parent()?;
        std::fs::remove_dir_all(&aside).map_err(io_err(&aside))?;
        return Ok(());
    }
    std::fs::rename(tmp, output).map_err(io_err(output))?;
    sync_parent()
}

/// The history rows as text lines for a NetCDF `history` attribute.
pub fn history_lines(rows: &[HistoryRow]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            let at = crate::meta::unix_iso(&r.at).unwrap_or_else(|| r.at.clone());
            let mut s = format!("{at}: tet {} (source {})", r.op, r.source);
            if !r.parents.is_empty() {
                s.push_str(&format!(" parents={}", r.parents.join(",")));
            }
            for (k, v) in &r.params {
                s.push_str(&format!(" {k}={v}"));
            }
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn f16_widens_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
    }

    #[test]
    fn compression_parses() {
        assert_eq!("zlib".parse(), Ok(Compression::Zlib(4)));
        assert_eq!("zstd:7".parse(), Ok(Compression::Zstd(7)));
        assert_eq!("none".parse(), Ok(Compression::None));
        assert!("zlib:0".parse::<Compression>().is_err());
        assert!("lz4".parse::<Compression>().is_err());
    }
}
