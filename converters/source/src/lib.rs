//! The data model of tet-convert: what a file holds, in typed terms, shared by the importers,
//! the engine and the exporters.
//!
//! An importer knows one file format and nothing of `.tet`. It does two things:
//!
//! 1. [`Importer::identify`] looks at a path and the first bytes of the file and says how sure it
//!    is that the file is its format (magic bytes first, the extension only as a tie-break);
//! 2. [`Importer::open`] opens the file as a [`Source`]: a list of [`Variable`]s (name, element
//!    type as the file holds it — complex and 0-d included —, shape, dimension names, typed
//!    attributes, typed [`Fact`]s, the source's own chunking) whose values are read region by
//!    region with [`Source::read_region`] as little-endian, C-order bytes.
//!
//! Everything the engine does afterwards (lowering to what `.tet` can store: widening, 0-d,
//! complex parts; planning chunks, compressing, writing the footer and the history row) is
//! format-agnostic and lives in the `tet` crate. Importers never depend on it, and it never knows
//! a format's quirks. In the other direction, [`export`] is what a format's exporter receives:
//! the arrays the file held, raised back by the engine, and their values chunk by chunk.

#![warn(missing_docs)]

pub mod byte_source;
mod error;
pub mod export;
pub mod fields;
pub mod json_text;
pub mod mapped;
pub mod numpy;
pub mod ragged;
pub mod record;

use std::fmt;
use std::path::Path;

/// The message of a caught panic (`std::panic::catch_unwind`'s payload): the text `panic!` was
/// given, or "unknown panic" for a payload of another type.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

pub use error::{Feature, Lib, LibraryMessage, Part, PathIssue, Request, Result, SourceError};

/// The element type of a source variable, as the importer delivers its bytes.
///
/// This is a superset of the `.tet` dtypes: `I8`, `Bool` and `BF16` have no `.tet` tag and are
/// widened by the engine (i8 → i16, bool → u8, bf16 → f32), which records it; `C64` / `C128`
/// are split by the engine into a real and an imaginary dataset. An importer delivers what the
/// file holds and never lowers a type itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementType {
    /// One byte, 0 or 1.
    Bool,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// IEEE 754 half precision.
    F16,
    /// bfloat16 (the top half of an f32).
    BF16,
    /// IEEE 754 single precision.
    F32,
    /// IEEE 754 double precision.
    F64,
    /// A complex number of two `F32` (real, then imaginary), as NumPy's `c8`.
    C64,
    /// A complex number of two `F64` (real, then imaginary), as NumPy's `c16`.
    C128,
}

impl ElementType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            ElementType::Bool | ElementType::I8 | ElementType::U8 => 1,
            ElementType::I16 | ElementType::U16 | ElementType::F16 | ElementType::BF16 => 2,
            ElementType::I32 | ElementType::U32 | ElementType::F32 => 4,
            ElementType::I64 | ElementType::U64 | ElementType::F64 | ElementType::C64 => 8,
            ElementType::C128 => 16,
        }
    }

    /// The type of each of the two parts of a complex type (`None` for a real type).
    pub fn complex_component(self) -> Option<ElementType> {
        match self {
            ElementType::C64 => Some(ElementType::F32),
            ElementType::C128 => Some(ElementType::F64),
            _ => None,
        }
    }

    /// The complex type whose parts are `self` (`F32` → `C64`, `F64` → `C128`).
    pub fn complex_of(self) -> Option<ElementType> {
        match self {
            ElementType::F32 => Some(ElementType::C64),
            ElementType::F64 => Some(ElementType::C128),
            _ => None,
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
            ElementType::C64 => "c64",
            ElementType::C128 => "c128",
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
    /// One string.
    Text(String),
    /// A list of strings.
    TextList(Vec<String>),
    /// Signed 8-bit integers.
    I8(Vec<i8>),
    /// Unsigned 8-bit integers (also bytes and booleans).
    U8(Vec<u8>),
    /// Signed 16-bit integers.
    I16(Vec<i16>),
    /// Unsigned 16-bit integers.
    U16(Vec<u16>),
    /// Signed 32-bit integers.
    I32(Vec<i32>),
    /// Unsigned 32-bit integers.
    U32(Vec<u32>),
    /// Signed 64-bit integers.
    I64(Vec<i64>),
    /// Unsigned 64-bit integers.
    U64(Vec<u64>),
    /// Single-precision floats.
    F32(Vec<f32>),
    /// Double-precision floats.
    F64(Vec<f64>),
}

/// Attributes in the order the source lists them.
pub type Attrs = Vec<(String, AttrValue)>;

/// A fact about a variable or a file that is not one of its attributes but must survive the
/// conversion, typed. The engine records facts in the footer's extension metadata as
/// `key → value` entries ([`Fact::entries`]) and reads them back with [`Fact::from_entries`];
/// the set is closed: what only one format needs goes into [`Fact::Private`], which only that
/// format's own code reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// The shape of the multi-dimensional attribute `attr` (its values are flattened in C order
    /// in the attributes). For a file-level fact, `attr` is the group path joined with `/`.
    AttrShape {
        /// The attribute's name.
        attr: String,
        /// Its extents, outermost first.
        shape: Vec<u64>,
    },
    /// The name of the enumeration type whose integer codes the variable stores.
    EnumType(String),
    /// The enumeration's members: name and integer value, in the source's order.
    EnumMapping(Vec<(String, i128)>),
    /// Other names under which the same data is reachable in the source (links).
    Aliases(Vec<String>),
    /// The source object this variable was taken from, when its name differs (a field of a
    /// compound dataset, a member of an array type).
    SourceDataset(String),
    /// The variable's dimensions that are unlimited (growable) in the source.
    UnlimitedDims(Vec<String>),
    /// CF packing was undone (`--unpack`): the type the values were packed in (the source
    /// format's own name for it) and the packing attributes that were consumed.
    Unpacked {
        /// The packed type's name in the source format (`short`, `i16`…).
        packed_type: String,
        /// The packing attributes (`scale_factor`, `add_offset`, …) as the source had them.
        packing: Attrs,
    },
    /// Set by the engine, never by an importer: this stored dataset is the real or the
    /// imaginary part of the complex variable whose name it extends by `/real` or `/imag`.
    ComplexPart {
        /// `true` for the imaginary part.
        imag: bool,
        /// The complex type (`C64` or `C128`).
        complex: ElementType,
    },
    /// This variable holds the values of a variable-length (ragged) variable as a CF contiguous
    /// ragged array (see [`ragged`]): every element's values one after the other; `count`
    /// names the variable holding each element's count, which has the ragged variable's shape.
    Ragged {
        /// The count variable's name.
        count: String,
        /// The source's name of the variable-length type (empty when it had none).
        type_name: String,
    },
    /// This `u8` variable holds opaque values (blobs) of the source type `type_name` (empty
    /// when it had none) along its trailing axis, whose length is the blob size.
    Opaque {
        /// The source's name of the opaque type.
        type_name: String,
    },
    /// The file-level attribute recorded under the key `attr` (see [`Source::global_attrs`])
    /// belongs to the group `group` (`""` for the root), and its own name is the rest of the key
    /// after `group/`. Recorded only for an attribute whose own name holds a `/` (an HDF5 root
    /// attribute `a/b` is the key `a/b` of group `""`, not the attribute `b` of a group `a`):
    /// any other key is split at its last `/` ([`export::split_group`]).
    AttrGroup {
        /// The attribute's key: the group path joined with `/`, then its own name.
        attr: String,
        /// The group's path, `/`-joined, no leading slash (`""` for the root).
        group: String,
    },
    /// A fact only `format` (an importer id, see [`Importer::id`]) reads back; `key` is recorded
    /// as it is.
    Private {
        /// The importer id of the format that reads it back.
        format: String,
        /// The footer key, recorded as it is.
        key: String,
        /// The value.
        value: AttrValue,
    },
}

/// Footer keys of the typed facts (see [`Fact::entries`]).
mod fact_keys {
    pub const ATTR_SHAPE: &str = "attr_shape:";
    pub const ENUM_TYPE: &str = "enum_type";
    pub const ENUM_MAPPING: &str = "enum_mapping";
    pub const ALIASES: &str = "aliases";
    pub const SOURCE_DATASET: &str = "source_dataset";
    pub const UNLIMITED_DIMS: &str = "unlimited_dims";
    pub const UNPACKED_FROM: &str = "unpacked_from";
    pub const PACKED: &str = "packed:";
    pub const COMPLEX_PART: &str = "complex_part";
    pub const COMPLEX_DTYPE: &str = "complex_dtype";
    pub const RAGGED_COUNT: &str = "ragged_count";
    pub const RAGGED_TYPE: &str = "ragged_type";
    pub const OPAQUE_TYPE: &str = "opaque_type";
    pub const ATTR_GROUP: &str = "attr_group:";
}

impl Fact {
    /// A format's private fact.
    pub fn private(format: &str, key: impl Into<String>, value: AttrValue) -> Fact {
        Fact::Private {
            format: format.to_string(),
            key: key.into(),
            value,
        }
    }

    /// The [`Fact::AttrGroup`] of the attribute `name` of the group `group` (`""` for the
    /// root), recorded under the key `group/name`: `Some` only when `name` holds a `/`, which
    /// splitting the key at its last `/` would misread.
    pub fn attr_group(group: &str, name: &str) -> Option<Fact> {
        name.contains('/').then(|| Fact::AttrGroup {
            attr: if group.is_empty() {
                name.to_string()
            } else {
                format!("{group}/{name}")
            },
            group: group.to_string(),
        })
    }

    /// The `key → value` entries that record this fact in the footer (one, except for
    /// [`Fact::Unpacked`], which records each consumed packing attribute as `packed:<name>`).
    pub fn entries(&self) -> Vec<(String, AttrValue)> {
        use fact_keys::*;
        let text = |s: &str| AttrValue::Text(s.to_string());
        let list = |l: &[String]| AttrValue::TextList(l.to_vec());
        match self {
            Fact::AttrShape { attr, shape } => {
                vec![(format!("{ATTR_SHAPE}{attr}"), AttrValue::U64(shape.clone()))]
            }
            Fact::EnumType(t) => vec![(ENUM_TYPE.into(), text(t))],
            Fact::EnumMapping(m) => vec![(
                ENUM_MAPPING.into(),
                AttrValue::TextList(m.iter().map(|(n, v)| format!("{n}={v}")).collect()),
            )],
            Fact::Aliases(a) => vec![(ALIASES.into(), list(a))],
            Fact::SourceDataset(d) => vec![(SOURCE_DATASET.into(), text(d))],
            Fact::UnlimitedDims(d) => vec![(UNLIMITED_DIMS.into(), list(d))],
            Fact::Unpacked {
                packed_type,
                packing,
            } => std::iter::once((UNPACKED_FROM.to_string(), text(packed_type)))
                .chain(
                    packing
                        .iter()
                        .map(|(k, v)| (format!("{PACKED}{k}"), v.clone())),
                )
                .collect(),
            Fact::ComplexPart { imag, complex } => vec![
                (
                    COMPLEX_PART.into(),
                    text(if *imag { "imag" } else { "real" }),
                ),
                (COMPLEX_DTYPE.into(), text(complex.name())),
            ],
            Fact::Ragged { count, type_name } => vec![
                (RAGGED_COUNT.into(), text(count)),
                (RAGGED_TYPE.into(), text(type_name)),
            ],
            Fact::Opaque { type_name } => vec![(OPAQUE_TYPE.into(), text(type_name))],
            Fact::AttrGroup { attr, group } => vec![(format!("{ATTR_GROUP}{attr}"), text(group))],
            Fact::Private { key, value, .. } => vec![(key.clone(), value.clone())],
        }
    }

    /// The entries of a list of facts, in order.
    pub fn all_entries(facts: &[Fact]) -> Attrs {
        facts.iter().flat_map(Fact::entries).collect()
    }

    /// The facts recorded as `entries` (the inverse of [`Fact::all_entries`]). An entry that is
    /// no typed fact, or whose value has another type than the fact's, comes back as
    /// [`Fact::Private`] with an empty `format`, so nothing recorded is lost.
    pub fn from_entries(entries: &[(String, AttrValue)]) -> Vec<Fact> {
        use fact_keys::*;
        let mut out: Vec<Fact> = Vec::new();
        for (k, v) in entries {
            let typed = match (k.as_str(), v) {
                (ENUM_TYPE, AttrValue::Text(t)) => Some(Fact::EnumType(t.clone())),
                (ENUM_MAPPING, AttrValue::TextList(l)) => l
                    .iter()
                    .map(|e| {
                        let (n, v) = e.rsplit_once('=')?;
                        Some((n.to_string(), v.parse().ok()?))
                    })
                    .collect::<Option<Vec<_>>>()
                    .map(Fact::EnumMapping),
                (ALIASES, AttrValue::TextList(l)) => Some(Fact::Aliases(l.clone())),
                (SOURCE_DATASET, AttrValue::Text(t)) => Some(Fact::SourceDataset(t.clone())),
                (UNLIMITED_DIMS, AttrValue::TextList(l)) => Some(Fact::UnlimitedDims(l.clone())),
                (UNPACKED_FROM, AttrValue::Text(t)) => Some(Fact::Unpacked {
                    packed_type: t.clone(),
                    packing: Vec::new(),
                }),
                (key, AttrValue::U64(shape)) if key.starts_with(ATTR_SHAPE) => {
                    Some(Fact::AttrShape {
                        attr: key[ATTR_SHAPE.len()..].to_string(),
                        shape: shape.clone(),
                    })
                }
                (COMPLEX_PART, AttrValue::Text(p)) if p == "real" || p == "imag" => {
                    Some(Fact::ComplexPart {
                        imag: p == "imag",
                        complex: ElementType::C64,
                    })
                }
                (COMPLEX_DTYPE, AttrValue::Text(t)) if t == "c64" || t == "c128" => {
                    match out.last_mut() {
                        Some(Fact::ComplexPart { complex, .. }) => {
                            *complex = if t == "c64" {
                                ElementType::C64
                            } else {
                                ElementType::C128
                            };
                            continue;
                        }
                        _ => None,
                    }
                }
                (RAGGED_COUNT, AttrValue::Text(c)) => Some(Fact::Ragged {
                    count: c.clone(),
                    type_name: String::new(),
                }),
                (RAGGED_TYPE, AttrValue::Text(t)) => match out.last_mut() {
                    Some(Fact::Ragged { type_name, .. }) => {
                        type_name.clone_from(t);
                        continue;
                    }
                    _ => None,
                },
                (OPAQUE_TYPE, AttrValue::Text(t)) => Some(Fact::Opaque {
                    type_name: t.clone(),
                }),
                (key, AttrValue::Text(g)) if key.starts_with(ATTR_GROUP) => Some(Fact::AttrGroup {
                    attr: key[ATTR_GROUP.len()..].to_string(),
                    group: g.clone(),
                }),
                (key, value) if key.starts_with(PACKED) => match out.last_mut() {
                    Some(Fact::Unpacked { packing, .. }) => {
                        packing.push((key[PACKED.len()..].to_string(), value.clone()));
                        continue;
                    }
                    _ => None,
                },
                _ => None,
            };
            out.push(typed.unwrap_or_else(|| Fact::private("", k.clone(), v.clone())));
        }
        out
    }
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
    /// Shape; empty for a 0-d (scalar) value, which the engine stores as shape `[1]` and
    /// records as such.
    pub shape: Vec<u64>,
    /// One name per axis, when the source names its dimensions.
    pub dims: Option<Vec<String>>,
    /// Attributes, typed.
    pub attrs: Attrs,
    /// Storage facts.
    pub layout: SourceLayout,
    /// Data or coordinate.
    pub role: Role,
    /// Transformations of the values the importer applied that a reader should know of, in
    /// prose (e.g. "Fortran order transposed to C order", "decoded from simple_packing").
    /// Recorded in the footer. What the engine does to store the variable (0-d, complex,
    /// widening) is recorded by the engine, never here.
    pub notes: Vec<String>,
    /// Facts about the variable that are not attributes of the source but must survive (see
    /// [`Fact`]): kept typed in the footer's extension metadata, never mixed into `attrs`.
    pub facts: Vec<Fact>,
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
    /// The item's name (a variable, an attribute as `owner/name`, a group…).
    pub name: String,
    /// Why it has no `.tet` form.
    pub reason: String,
}

/// A variable of strings (NetCDF `string` or char arrays that are not labels, HDF5 fixed or
/// variable-length strings). It has no numeric `.tet` form: the engine keeps its values losslessly
/// in the footer's extension metadata and lists it in the report.
#[derive(Debug, Clone, PartialEq)]
pub struct TextVariable {
    /// Name: group path joined with `/`.
    pub name: String,
    /// Shape (without a character axis).
    pub shape: Vec<u64>,
    /// One name per axis, when the source names its dimensions.
    pub dims: Option<Vec<String>>,
    /// The values in C order (`product(shape)` of them).
    pub values: Vec<String>,
    /// Attributes, typed.
    pub attrs: Attrs,
    /// Set when the source stores the strings as a fixed-length character array (NetCDF
    /// `char name(station, name_strlen)`): its trailing string-length axis, which `shape` and
    /// `dims` leave out.
    pub char_axis: Option<CharAxis>,
    /// Facts about the variable that are not attributes but must survive (see [`Fact`]), as
    /// [`Variable::facts`]: e.g. [`Fact::UnlimitedDims`], or a format's private record of how
    /// the text was decoded. Recorded with the values (`text_variables[].facts`).
    pub facts: Vec<Fact>,
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
    /// The dimension's name.
    pub dim: String,
    /// One label per position.
    pub labels: Vec<String>,
}

/// An opened input.
pub trait Source: Send + Sync {
    /// The variables, in the order they should become datasets.
    fn variables(&self) -> &[Variable];

    /// File-level (global) attributes. An attribute of a group is named `group/path/name`;
    /// when its own name holds a `/`, a [`Fact::AttrGroup`] among [`Source::global_facts`] says
    /// where the group path ends.
    fn global_attrs(&self) -> &[(String, AttrValue)] {
        &[]
    }

    /// Facts about the file that are not attributes but must survive (as [`Variable::facts`]
    /// for one variable), e.g. [`Fact::AttrShape`] of a multi-dimensional group attribute, whose
    /// values [`Source::global_attrs`] gives flattened in C order.
    fn global_facts(&self) -> &[Fact] {
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

    /// What every [`Source::read_region`] starts with: the variable `var` (else
    /// [`Request::NoVariable`]) and the element count of the region `start .. start + count`,
    /// once [`check_region`] has checked its rank, its bounds and that `out_len` bytes hold it.
    fn region_of(
        &self,
        var: usize,
        start: &[u64],
        count: &[u64],
        out_len: usize,
    ) -> Result<(&Variable, u64)> {
        let vars = self.variables();
        let v = vars.get(var).ok_or(Request::NoVariable {
            var,
            count: vars.len(),
        })?;
        let n = check_region(&v.shape, start, count, v.dtype.size(), out_len)?;
        Ok((v, n))
    }

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
    /// The open file.
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

    /// Whether [`Importer::open_bytes`] reads this format from a [`ByteSource`] (an object read
    /// by ranges) rather than needing a local file.
    ///
    /// [`ByteSource`]: byte_source::ByteSource
    fn opens_bytes(&self) -> bool {
        false
    }

    /// Opens the input whose bytes `bytes` gives; `name` is its name (a URL or a path, for the
    /// dataset names a format takes from the file name). Reads only the ranges it needs. The
    /// default refuses: the format's library needs a local file.
    fn open_bytes(
        &self,
        name: &Path,
        bytes: std::sync::Arc<dyn byte_source::ByteSource>,
        options: &OpenOptions,
    ) -> Result<Box<dyn Source>> {
        let _ = (bytes, options);
        Err(Feature::Layout.unsupported(format!(
            "{}: the {} importer reads local files only",
            name.display(),
            self.name()
        )))
    }
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

/// Moves `idx` to the next index of the box `lo .. hi` (per axis; C order, the last axis
/// fastest); `false` once every index has been visited (`idx` is then back at `lo`). The walk
/// over a region that [`check_region`]-checked requests and record leaves share.
pub fn next_index(idx: &mut [u64], lo: &[u64], hi: &[u64]) -> bool {
    for a in (0..idx.len()).rev() {
        idx[a] += 1;
        if idx[a] < hi[a] {
            return true;
        }
        idx[a] = lo[a];
    }
    false
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
        return Err(Request::Rank {
            start: start.len(),
            count: count.len(),
            rank: shape.len(),
        }
        .into());
    }
    let mut n = 1u64;
    for ((&s, &c), &d) in start.iter().zip(count).zip(shape) {
        let out_of_bounds = || Request::OutOfBounds {
            start: s,
            count: c,
            len: d,
        };
        let end = s.checked_add(c).ok_or_else(out_of_bounds)?;
        if end > d {
            return Err(out_of_bounds().into());
        }
        n = n.checked_mul(c).ok_or(Request::TooLarge)?;
    }
    let bytes = n.checked_mul(elem_size as u64).ok_or(Request::TooLarge)?;
    if bytes != out_len as u64 {
        return Err(Request::BufferSize {
            expected: bytes,
            got: out_len as u64,
        }
        .into());
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
    fn attr_group_only_for_names_with_a_slash() {
        assert_eq!(Fact::attr_group("", "units"), None);
        assert_eq!(Fact::attr_group("g/h", "units"), None);
        assert_eq!(
            Fact::attr_group("", "a/b"),
            Some(Fact::AttrGroup {
                attr: "a/b".into(),
                group: String::new()
            })
        );
        assert_eq!(
            Fact::attr_group("g", "c/d"),
            Some(Fact::AttrGroup {
                attr: "g/c/d".into(),
                group: "g".into()
            })
        );
    }

    #[test]
    fn facts_round_trip_through_entries() {
        let facts = vec![
            Fact::AttrShape {
                attr: "a/b".into(),
                shape: vec![2, 3],
            },
            Fact::AttrGroup {
                attr: "a/b".into(),
                group: String::new(),
            },
            Fact::AttrGroup {
                attr: "g/c/d".into(),
                group: "g".into(),
            },
            Fact::EnumType("kind".into()),
            Fact::Ragged {
                count: "x_count".into(),
                type_name: "vl".into(),
            },
            Fact::private("nc", "nc_groups", AttrValue::TextList(vec!["g".into()])),
        ];
        let entries = Fact::all_entries(&facts);
        assert_eq!(
            entries[1],
            ("attr_group:a/b".to_string(), AttrValue::Text(String::new()))
        );
        assert_eq!(
            entries[2],
            ("attr_group:g/c/d".to_string(), AttrValue::Text("g".into()))
        );
        let back = Fact::from_entries(&entries);
        // A private fact comes back without its format (only the key is recorded).
        let mut want = facts.clone();
        want[5] = Fact::private("", "nc_groups", AttrValue::TextList(vec!["g".into()]));
        assert_eq!(back, want);
        // A group recorded as another type than text is no typed fact.
        let odd = vec![("attr_group:a/b".to_string(), AttrValue::U64(vec![1]))];
        assert_eq!(
            Fact::from_entries(&odd),
            vec![Fact::private("", "attr_group:a/b", AttrValue::U64(vec![1]))]
        );
    }

    #[test]
    fn extension_tie_break() {
        let p = Path::new("/x/Data.NPY");
        assert_eq!(extension_confidence(p, &["npy"]), Confidence::Extension);
        assert_eq!(extension_confidence(p, &["npz"]), Confidence::No);
    }
}
