//! The importer plug-in API of tet-convert.
//!
//! An importer knows one file format and nothing of `.tet`. It does two things:
//!
//! 1. [`Importer::identify`] looks at a path and the first bytes of the file and says how sure it
//!    is that the file is its format (magic bytes first, the extension only as a tie-break);
//! 2. [`Importer::open`] opens the file as a [`Source`]: a list of [`Variable`]s (name, element
//!    type, shape, dimension names, typed attributes, the source's own chunking) whose values are
//!    read region by region with [`Source::read_region`] as little-endian, C-order bytes.
//!
//! Everything the engine does afterwards (planning chunks, widening types that `.tet` has no tag
//! for, compressing, writing the footer and the history row) is format-agnostic and lives in the
//! `tet` crate. Importers never depend on it, and it never knows a format's quirks.

use std::fmt;
use std::path::Path;

/// The element type of a source variable, as the importer delivers its bytes.
///
/// This is a superset of the `.tet` dtypes: `I8`, `Bool` and `BF16` have no `.tet` tag and are
/// widened by the engine (i8 → i16, bool → u8, bf16 → f32), which records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementType {
    /// One byte, 0 or 1.
    Bool,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    /// IEEE 754 half precision.
    F16,
    /// bfloat16 (the top half of an f32).
    BF16,
    F32,
    F64,
}

impl ElementType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            ElementType::Bool | ElementType::I8 | ElementType::U8 => 1,
            ElementType::I16 | ElementType::U16 | ElementType::F16 | ElementType::BF16 => 2,
            ElementType::I32 | ElementType::U32 | ElementType::F32 => 4,
            ElementType::I64 | ElementType::U64 | ElementType::F64 => 8,
        }
    }

    /// Short lower-case name (`i8`, `bool`, `f16`, `bf16`, …).
    pub fn name(self) -> &'static str {
        match self {
            ElementType::Bool => "bool",
            ElementType::I8 => "i8",
            ElementType::U8 => "u8",
            ElementType::I16 => "i16",
            ElementType::U16 => "u16",
            ElementType::I32 => "i32",
            ElementType::U32 => "u32",
            ElementType::I64 => "i64",
            ElementType::U64 => "u64",
            ElementType::F16 => "f16",
            ElementType::BF16 => "bf16",
            ElementType::F32 => "f32",
            ElementType::F64 => "f64",
        }
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A typed attribute value, kept losslessly.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Text(String),
    TextList(Vec<String>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    I16(Vec<i16>),
    U16(Vec<u16>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Attributes in the order the source lists them.
pub type Attrs = Vec<(String, AttrValue)>;

/// The fact key that records the shape of a multi-dimensional attribute `name`.
pub fn attr_shape_key(name: &str) -> String {
    format!("attr_shape:{name}")
}

/// What a variable is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// An ordinary data array.
    #[default]
    Data,
    /// A coordinate variable: 1-D, named like the dimension it labels.
    Coordinate,
}

/// How the source stores a variable, used by the chunk planner as a hint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceLayout {
    /// The source's own chunk shape (`None` for contiguous storage).
    pub chunk_shape: Option<Vec<u64>>,
    /// Whether the stored bytes are compressed (drives `--codec auto`).
    pub compressed: bool,
    /// A short description of the source filters/codecs, e.g. `deflate(4)+shuffle`.
    pub filters: Vec<String>,
}

/// One array the source offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    /// Dataset name: group path joined with `/`, no leading slash.
    pub name: String,
    /// Element type of the bytes [`Source::read_region`] produces.
    pub dtype: ElementType,
    /// Shape; a 0-d source value is reported as `[1]` (and noted).
    pub shape: Vec<u64>,
    /// One name per axis, when the source names its dimensions.
    pub dims: Option<Vec<String>>,
    /// Attributes, typed.
    pub attrs: Attrs,
    /// Storage facts.
    pub layout: SourceLayout,
    /// Data or coordinate.
    pub role: Role,
    /// Transformations the importer applied that a reader should know of (e.g. "0-d scalar
    /// stored as shape [1]", "Fortran order transposed to C order"). Recorded in the footer.
    pub notes: Vec<String>,
    /// Facts about the variable that are not attributes of the source but must survive (an enum's
    /// name → value mapping, soft-link aliases, the lossy encoding it was decoded from, the shape
    /// of a multi-dimensional attribute as `attr_shape:<name>` = u64 extents, its values being
    /// flattened in C order in `attrs`…): kept typed in the footer's extension metadata, never
    /// mixed into `attrs`.
    pub facts: Attrs,
}

impl Variable {
    /// A data variable with no attributes, dims or layout hints.
    pub fn new(name: impl Into<String>, dtype: ElementType, shape: Vec<u64>) -> Self {
        Variable {
            name: name.into(),
            dtype,
            shape,
            dims: None,
            attrs: Vec::new(),
            layout: SourceLayout::default(),
            role: Role::Data,
            notes: Vec::new(),
            facts: Vec::new(),
        }
    }

    /// Number of elements, `None` on overflow.
    pub fn element_count(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }

    /// Number of bytes of the whole variable, `None` on overflow.
    pub fn byte_len(&self) -> Option<u64> {
        self.element_count()?.checked_mul(self.dtype.size() as u64)
    }
}

/// Something in the source that has no `.tet` form, with the reason. Never dropped silently:
/// the engine lists it in the report and the footer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// A variable of strings (NetCDF `string` or char arrays that are not labels, HDF5 fixed or
/// variable-length strings). It has no numeric `.tet` form: the engine keeps its values losslessly
/// in the footer's extension metadata and lists it in the report.
#[derive(Debug, Clone, PartialEq)]
pub struct TextVariable {
    pub name: String,
    pub shape: Vec<u64>,
    pub dims: Option<Vec<String>>,
    /// The values in C order (`product(shape)` of them).
    pub values: Vec<String>,
    pub attrs: Attrs,
    /// Set when the source stores the strings as a fixed-length character array (NetCDF
    /// `char name(station, name_strlen)`): its trailing string-length axis, which `shape` and
    /// `dims` leave out.
    pub char_axis: Option<CharAxis>,
}

/// The string-length axis of a character array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharAxis {
    /// The dimension's name (`name_strlen`).
    pub dim: String,
    /// Characters per string.
    pub len: u64,
}

/// Labels for the positions of one dimension that the importer knows directly (e.g. a NetCDF
/// 2-D char variable of station names). Numeric coordinate variables need no entry here: the
/// engine formats their values itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DimLabels {
    pub dim: String,
    pub labels: Vec<String>,
}

/// Errors an importer returns.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not a valid file of the format (truncated, corrupt, inconsistent header).
    #[error("{0}")]
    Malformed(String),
    /// Valid, but something the importer cannot map (and `skip_unsupported` was not set).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// An error reported by an underlying library.
    #[error("{0}")]
    Library(String),
    /// A caller error: a region outside the variable, a wrong buffer size, a bad variable index.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

impl SourceError {
    pub fn malformed(msg: impl Into<String>) -> Self {
        SourceError::Malformed(msg.into())
    }
    pub fn unsupported(msg: impl Into<String>) -> Self {
        SourceError::Unsupported(msg.into())
    }
}

pub type Result<T, E = SourceError> = std::result::Result<T, E>;

/// An opened input.
pub trait Source: Send + Sync {
    /// The variables, in the order they should become datasets.
    fn variables(&self) -> &[Variable];

    /// File-level (global) attributes.
    fn global_attrs(&self) -> &[(String, AttrValue)] {
        &[]
    }

    /// Facts about the file that are not attributes but must survive, typed (as
    /// [`Variable::facts`] for one variable), e.g. `attr_shape:<group/name>` = the shape of a
    /// multi-dimensional group attribute, whose values [`Source::global_attrs`] gives flattened
    /// in C order.
    fn global_facts(&self) -> &[(String, AttrValue)] {
        &[]
    }

    /// Items with no `.tet` form, each with its reason.
    fn skipped(&self) -> &[Skipped] {
        &[]
    }

    /// String variables (see [`TextVariable`]).
    fn text_variables(&self) -> &[TextVariable] {
        &[]
    }

    /// Explicit dimension labels (see [`DimLabels`]).
    fn dim_labels(&self) -> &[DimLabels] {
        &[]
    }

    /// Reads the hyper-rectangle `start .. start + count` of variable `var` into `out` as
    /// little-endian, C-order bytes of the variable's [`ElementType`]. `out.len()` must equal
    /// `product(count) * dtype.size()`.
    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()>;

    /// Whether `read_region` may usefully be called from several threads at once (false when an
    /// underlying library serialises every call anyway).
    fn parallel_reads(&self) -> bool {
        true
    }

    /// Where the whole variable lies in a file as one little-endian C-order run of
    /// `byte_len()` bytes, in exactly the bytes the engine would store: the engine may then
    /// copy uncompressed chunks file to file (`copy_file_range`) without reading them.
    fn file_extent(&self, _var: usize) -> Option<FileExtent<'_>> {
        None
    }

    /// Whether every stored chunk of `var` is one zstd frame of exactly that chunk's
    /// little-endian, C-order bytes, with no other codec or filter in the chain: the output may
    /// then keep such frames verbatim ([`Source::zstd_frame`]) instead of decoding and
    /// re-encoding them.
    fn zstd_frames(&self, _var: usize) -> bool {
        false
    }

    /// The stored zstd frame of the source chunk that is exactly the region `start`/`count` of
    /// `var` (see [`Source::zstd_frames`]); `None` when the region is not exactly one stored
    /// chunk (an edge chunk padded in storage, a chunk never written). The caller checks the
    /// frame's declared content size before it trusts the frame.
    fn zstd_frame(&self, _var: usize, _start: &[u64], _count: &[u64]) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// The whole variable as one borrowed little-endian C-order byte slice, when the source can
    /// lend it without any per-element work (e.g. a memory-mapped C-order `.npy`).
    fn contiguous_bytes(&self, _var: usize) -> Option<&[u8]> {
        None
    }
}

/// A variable's bytes inside a file (see [`Source::file_extent`]).
#[derive(Debug, Clone, Copy)]
pub struct FileExtent<'a> {
    pub file: &'a std::fs::File,
    /// Byte offset of the variable's first element.
    pub offset: u64,
}

/// How sure an importer is that a file is its format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Confidence {
    /// Not this format.
    No,
    /// Only the extension matches.
    Extension,
    /// The magic bytes (or the directory structure) match.
    Magic,
}

/// Options every importer honours where they apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Report unmappable items as skipped instead of failing.
    pub skip_unsupported: bool,
    /// CF unpacking requested (store physical values).
    pub unpack: bool,
    /// Follow external links that resolve inside the input's directory.
    pub follow_external: bool,
}

/// An importer plug-in: one per format.
pub trait Importer: Send + Sync {
    /// Format id, used in the history row's `source` (`npy`, `npz`, `tea`, `nc`, `h5`, `tgm`, `zarr`).
    fn id(&self) -> &'static str;

    /// Human-readable format name.
    fn name(&self) -> &'static str;

    /// File extensions (lower case, no dot).
    fn extensions(&self) -> &'static [&'static str];

    /// How sure this importer is that `path` (whose first bytes are `head`; empty for a
    /// directory) is its format.
    fn identify(&self, path: &Path, head: &[u8]) -> Confidence;

    /// Opens the file.
    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Box<dyn Source>>;
}

/// The confidence an extension alone gives: [`Confidence::Extension`] when `path` ends with one of
/// `extensions` (case-insensitive), else [`Confidence::No`].
pub fn extension_confidence(path: &Path, extensions: &[&str]) -> Confidence {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    match ext {
        Some(e) if extensions.iter().any(|x| *x == e) => Confidence::Extension,
        _ => Confidence::No,
    }
}

/// Checks a region request against a shape and an output buffer; returns the element count.
/// Importers call this first in `read_region`.
pub fn check_region(
    shape: &[u64],
    start: &[u64],
    count: &[u64],
    elem_size: usize,
    out_len: usize,
) -> Result<u64> {
    if start.len() != shape.len() || count.len() != shape.len() {
        return Err(SourceError::InvalidRequest(format!(
            "region rank {}/{} does not match variable rank {}",
            start.len(),
            count.len(),
            shape.len()
        )));
    }
    let mut n = 1u64;
    for ((&s, &c), &d) in start.iter().zip(count).zip(shape) {
        let end = s
            .checked_add(c)
            .ok_or_else(|| SourceError::InvalidRequest("region end overflows".into()))?;
        if end > d {
            return Err(SourceError::InvalidRequest(format!(
                "region {s}+{c} exceeds axis length {d}"
            )));
        }
        n = n
            .checked_mul(c)
            .ok_or_else(|| SourceError::InvalidRequest("region size overflows".into()))?;
    }
    let bytes = n
        .checked_mul(elem_size as u64)
        .ok_or_else(|| SourceError::InvalidRequest("region size overflows".into()))?;
    if bytes != out_len as u64 {
        return Err(SourceError::InvalidRequest(format!(
            "output buffer is {out_len} bytes, region needs {bytes}"
        )));
    }
    Ok(n)
}

/// The page-aligned interior of `sub` inside `base`, as (offset, length) relative to `base`:
/// the whole pages a memory-mapped importer may drop from its resident set (`MADV_DONTNEED`)
/// once it has copied `sub` out, so that resident memory does not grow with the input size.
/// `None` when `sub` is not inside `base` or covers no whole page.
pub fn whole_pages(base: &[u8], sub: &[u8]) -> Option<(usize, usize)> {
    const PAGE: usize = 4096;
    let b = base.as_ptr() as usize;
    let s = (sub.as_ptr() as usize).checked_sub(b)?;
    let e = s.checked_add(sub.len())?;
    if e > base.len() {
        return None;
    }
    // Mappings start on a page boundary, so offsets from `base` align like addresses.
    let first = s.div_ceil(PAGE) * PAGE;
    let last = e / PAGE * PAGE;
    (last > first).then(|| (first, last - first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_checks() {
        assert_eq!(check_region(&[4, 5], &[1, 2], &[3, 3], 4, 36).unwrap(), 9);
        assert!(check_region(&[4, 5], &[1, 2], &[4, 3], 4, 48).is_err());
        assert!(check_region(&[4, 5], &[0, 0], &[1, 1], 4, 8).is_err());
        assert!(check_region(&[4], &[0, 0], &[1, 1], 4, 4).is_err());
        assert!(check_region(&[u64::MAX], &[u64::MAX], &[1], 1, 1).is_err());
    }

    #[test]
    fn page_interior() {
        let base = vec![0u8; 5 * 4096];
        assert_eq!(
            whole_pages(&base, &base[100..3 * 4096 + 5]),
            Some((4096, 2 * 4096))
        );
        assert_eq!(whole_pages(&base, &base[100..200]), None);
        assert_eq!(whole_pages(&base[..10], &base[100..200]), None);
    }

    #[test]
    fn extension_tie_break() {
        let p = Path::new("/x/Data.NPY");
        assert_eq!(extension_confidence(p, &["npy"]), Confidence::Extension);
        assert_eq!(extension_confidence(p, &["npz"]), Confidence::No);
    }
}
