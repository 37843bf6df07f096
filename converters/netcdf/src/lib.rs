//! NetCDF importer for tet-convert: classic (CDF-1), 64-bit offset (CDF-2), 64-bit data (CDF-5),
//! netCDF-4 and netCDF-4 classic-model files, read through the system netCDF-C library. The
//! other direction (writing netCDF-4 files from `tet export`) is the [`export`] module; both go
//! through the one FFI layer of this crate (module `ffi`: one error type, one lock).
//!
//! # Mapping
//!
//! * **Variables** become [`Variable`]s in file order: the root group's variables first, then
//!   each group depth-first in the library's order. Names are the group path joined with `/`
//!   (`forecast/surface/t2m`; root variables have no prefix). `dims` are the variables'
//!   dimension names (a dimension of an ancestor group keeps its own short name); shapes use
//!   the current length of unlimited dimensions, and a dimension of length 0 gives a variable
//!   with no elements. A 1-D variable named like its dimension, in the group that defines the
//!   dimension, is a [`tet_source::Role::Coordinate`].
//! * **Types**: `byte` → [`tet_source::ElementType::I8`] (the engine widens it to i16 and records it; a
//!   `_Unsigned = "true"` attribute is kept but never applied to the stored values), `ubyte` →
//!   `U8`, `short`/`ushort`/`int`/`uint`/`int64`/`uint64`/`float`/`double` → the same type.
//!   Values are read in the variable's own type (no conversion) and delivered little-endian.
//!   An **enum** variable is delivered as its underlying integer type, with the facts
//!   [`Fact::EnumType`] and [`Fact::EnumMapping`] and a note.
//! * **Compound** variables (netCDF-4) are split as the HDF5 importer splits HDF5 compounds (module
//!   `compound`): one variable `<name>/<field>` per field, nested compounds joined with `/`,
//!   array fields adding trailing axes named `<field>_dim<axis>`, a `/` in a field name
//!   becoming `_` (with a note); each (text fields too) gets the variable's dims, attributes
//!   (with their recorded types), unlimited dimensions, the fact [`Fact::SourceDataset`] and
//!   the type ([`COMPOUND_TYPE`]), from which an export rebuilds the compound variable (a
//!   vlen field of numbers is a ragged array `<name>/<field>` + `<name>/<field>_count`, gathered
//!   at open; such a compound is exported as its fields). A
//!   compound of two f32 or two f64 named `r`/`i` or `real`/`imag` (netCDF4-python's complex
//!   numbers) is one `C64`/`C128` variable. A `char` field is a [`TextVariable`] (strings
//!   along its last axis when it is an array). Values are read
//!   by region: whole records through `nc_get_vara` in batches of at most 16 MiB, the field
//!   copied out, little-endian.
//! * **Vlen** variables of numbers or enums (netCDF-4) become CF contiguous ragged arrays
//!   (module `ragged`, `tet_source::ragged`): the values variable under the variable's name
//!   (1-D along `<short>_sample`, the attributes with it, [`Fact::Ragged`] naming the count
//!   variable and the vlen type) and `<name>_count` (`i64`, the variable's shape and dims, CF's
//!   `sample_dimension`), gathered at open (at most 256 MiB). **Opaque** variables become `u8`
//!   with a trailing axis `<short>_bytes` of the blob size and [`Fact::Opaque`] naming the type.
//! * **Scalars** (0-d) have an empty shape and no dims.
//! * **Text**: `char` and `string` variables are not numeric. Each becomes a [`TextVariable`]
//!   (values in C order; for `char` the last axis is the string length, each row decoded with
//!   trailing NULs removed; UTF-8 when every value of the variable is, else every value as
//!   Latin-1, one character per byte, recorded as the private fact [`TEXT_ENCODING`] =
//!   `latin1`). A 0-d `char` variable has the fact [`TEXT_TYPE`] = `char` (a 0-d `string` none),
//!   and unlimited dimensions are recorded as for numeric variables ([`Fact::UnlimitedDims`],
//!   the string-length axis included). Some also label a
//!   dimension through [`Source::dim_labels`]: a 1-D `string` coordinate variable labels its
//!   dimension, and a 2-D `char` variable such as `station_name(station, name_strlen)` labels its
//!   first dimension (labels trimmed of trailing NULs and spaces) — but only when that
//!   dimension has no numeric coordinate variable, which stays the dimension's coordinate as
//!   CF says (the engine would otherwise prefer the importer's labels). Among several `char`
//!   candidates for one dimension, one with a `cf_role` attribute or named in some variable's
//!   `coordinates` attribute wins, else the first.
//! * **Attributes** keep their netCDF type: `byte` → `I8`, …, `double` → `F64`, `char` → `Text`
//!   (trailing NULs removed, except in a variable's `_FillValue`, `missing_value` and `valid_*`,
//!   whose bytes are data values and kept whole: `_FillValue = '\0'` is `"\0"`), `string` → `Text` for one value (named in the
//!   private fact [`STRING_ATTRS`] of its owner) and `TextList` otherwise; text that is not UTF-8
//!   is decoded as Latin-1 (each string of the attribute), named in [`LATIN1_ATTRS`]; enum →
//!   the underlying integers. Compound, vlen and opaque attributes are JSON `Text` (one value:
//!   the value itself, several: an array; compounds as objects, vlens as arrays, opaque values
//!   as lowercase hex strings, floats as the HDF5 importer writes them, NaN/±Infinity as
//!   strings). Every attribute of a user type (enum included) has its type recorded in the
//!   private fact `nc_attr_type:<name>` (group attributes: `nc_attr_type:<group>/<name>`, among
//!   the global facts) as `{"count": n, "type": {...}}` — for an enum its name, base and
//!   members — and a variable gets a note saying how the value is given. Root attributes are the global attributes; a group's attributes
//!   are global attributes named `group/path/name` (with a [`Fact::AttrGroup`] naming the group
//!   when the own name holds a `/`, which netCDF-C reads from HDF5 files but never writes). The library's hidden attributes
//!   (`_NCProperties`, `_IsNetcdf4`, `_SuperblockVersion`, `_Format`, `_Netcdf4Dimid`,
//!   `_Netcdf4Coordinates`, `_nc3_strict`, `_NCZARR_*`) are not user attributes and are left
//!   out; everything else (`_FillValue`, `_Unsigned`, `history`, …) is kept as is. A variable
//!   using an unlimited dimension gets the fact [`Fact::UnlimitedDims`].
//! * **Groups**: every group but the root is listed, parents first, in the file fact
//!   [`GROUPS`] (so groups holding only attributes, only groups or nothing are kept). A
//!   variable using a dimension of another group than its own (an ancestor's, which netCDF
//!   resolves by id) has the fact [`DIM_GROUPS`]: the defining group of each of its dimensions.
//! * **Dimensions no variable uses** are file facts [`UNUSED_DIM`]`<group/path/name>` =
//!   `[length, unlimited 0/1]` (so a group holding only dimensions is kept too).
//! * **CF packing**: by default packed variables are delivered as stored (the packed integers
//!   with all their attributes: lossless, never unpacked twice). With [`OpenOptions::unpack`] a
//!   variable with `scale_factor` and/or `add_offset` is delivered as physical values (`f32`,
//!   or `f64` when an attribute or the packed type needs it) with fill/missing/out-of-range
//!   values as NaN — see the `cf` module for the exact rules. The packing attributes
//!   (`scale_factor`, `add_offset`, `_FillValue`, `missing_value`, `valid_*`, and `_Unsigned`
//!   when it was applied) move from the attributes to the fact [`Fact::Unpacked`] (with the
//!   packed type), a `_FillValue = NaN` attribute replaces a fill value or missing value, and a
//!   note records the transformation.
//! * **Layout**: netCDF-4 chunked variables report their chunk shape; `compressed` is set when
//!   a compressing filter is on, and `filters` lists the pipeline (`shuffle`, `deflate(4)`,
//!   `szip`, `zstd(3)`, `lzf`, `filter <id>` for others, `fletcher32`).
//!
//! # Refused, skipped, validated
//!
//! * Vlens of vlens, strings, compounds or opaque values, ragged variables of more than 256 MiB,
//!   compound fields of opaque type or of vlens of anything but numbers and enums,
//!   compound variables whose field names collide once `/` becomes `_`, and variables whose
//!   filter this libnetcdf/libhdf5 cannot decode, are [`SourceError::Unsupported`] — or listed
//!   in [`Source::skipped`] with the reason under `skip_unsupported`. Text variables with more
//!   than 64 Mi characters (their values go to the footer) are treated the same way.
//! * Before netCDF-C sees a file it must carry a CDF-1/2/5 or HDF5 signature. A classic file's
//!   header is parsed here (module `classic`) and every variable's data must lie inside the
//!   file: netCDF-C would otherwise read a truncated classic file's missing tail as zeros.
//!   (Truncated HDF5 files are refused by HDF5 itself, which checks its end-of-file address.)
//! * No library call can panic here: the importer calls netCDF-C through `netcdf-sys` with
//!   every return code checked (the `netcdf` crate's high-level API unwraps internally and can
//!   panic on corrupt files), and the whole open is additionally wrapped in
//!   [`std::panic::catch_unwind`] so that no panic can escape as anything but an error.
//!
//! # Threads and the library lock
//!
//! netCDF-C (and HDF5 below it) are not thread-safe: every call takes `netcdf_sys`'s global lock,
//! which is the very lock of `hdf5-metno-sys` that the HDF5 importer uses, so the two importers
//! can live in one process. Since every read is serialised anyway,
//! [`Source::parallel_reads`] is `false` (the engine then reads one region at a time and
//! compresses in parallel). Each variable has its own read strategy (`ReadPlan`), chosen at
//! open, so that faster paths (e.g. netCDF-4 chunks read through HDF5 and inflated in
//! parallel) can be added per variable. Dropping the source closes the netCDF handle, which
//! closes every HDF5 handle on the file.
//!
//! # Identification
//!
//! `CDF\x01`, `CDF\x02` and `CDF\x05` at offset 0 are netCDF whatever the name. An HDF5
//! signature (at 0, 512, 1024 or 2048) is netCDF-4 only when the name has a netCDF extension
//! (`nc`, `nc3`, `nc4`, `cdf`) or the first bytes hold the `_NCProperties` attribute that
//! netCDF-4 writes into the root group; otherwise the answer is [`Confidence::No`], so that plain
//! `.h5` files go to the HDF5 importer, which reads any HDF5 file (netCDF would mangle some:
//! half floats become `float`, phony dimensions appear). Anything else is claimed by extension
//! only, and refused at open if it has no signature.

use std::ffi::c_int;
use std::io::Read;
use std::path::Path;

use tet_source::{
    extension_confidence, Attrs, Confidence, DimLabels, Fact, Importer, OpenOptions, Part, Result,
    Skipped, Source, SourceError, TextVariable, Variable,
};

mod build;
mod cf;
pub mod classic;
mod compound;
mod container;
pub mod dump;
pub mod export;
mod ffi;
mod ragged;
mod read;
mod user;
mod values;

use cf::Unpacking;
use classic::{ClassicHeader, HeaderError};
use tet_hdf5::chunks::ChunkedVar;

use container::{has_netcdf4_marker, netcdf4_marker_in_file};
pub use container::{Container, DataModel};

/// The HDF5 format signature.
pub const HDF5_SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Largest classic header accepted (a bound on what is read to validate it).
const MAX_CLASSIC_HEADER: u64 = 256 << 20;

/// Text variables with more characters (or strings) than this are not kept.
const TEXT_LIMIT: u64 = 64 << 20;

/// At most this many groups are walked (netCDF builds a tree, but a corrupt file must not
/// make the walk unbounded).
const MAX_GROUPS: usize = 1 << 20;

/// Attributes the library keeps for itself; never user attributes.
const HIDDEN_ATTRS: &[&str] = &[
    "_NCProperties",
    "_IsNetcdf4",
    "_SuperblockVersion",
    "_Format",
    "_Netcdf4Dimid",
    "_Netcdf4Coordinates",
    "_nc3_strict",
];

fn is_hidden_attr(name: &str) -> bool {
    HIDDEN_ATTRS.contains(&name) || name.starts_with("_NCZARR") || name.starts_with("_Netcdf4")
}

/// The NetCDF importer plug-in (`nc`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NcImporter;

impl Importer for NcImporter {
    fn id(&self) -> &'static str {
        "nc"
    }

    fn name(&self) -> &'static str {
        "NetCDF 3/4"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["nc", "nc3", "nc4", "cdf"]
    }

    fn identify(&self, path: &Path, head: &[u8]) -> Confidence {
        let by_ext = extension_confidence(path, self.extensions());
        match Container::sniff(head) {
            Some(Container::Hdf5) => {
                if by_ext == Confidence::Extension
                    || has_netcdf4_marker(head)
                    || netcdf4_marker_in_file(path)
                {
                    Confidence::Magic
                } else {
                    Confidence::No
                }
            }
            Some(_) => Confidence::Magic,
            None => by_ext,
        }
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Box<dyn Source>> {
        Ok(Box::new(open_path(path, options)?))
    }
}

/// Opens a NetCDF file on disk.
pub fn open_path(path: &Path, options: &OpenOptions) -> Result<NcSource> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut head = Vec::new();
    (&mut file).take(64 << 10).read_to_end(&mut head)?;
    let container = Container::sniff(&head).ok_or_else(not_netcdf)?;
    if !container.is_classic() {
        tet_hdf5::check_not_truncated(&head, len, "netCDF-4")?;
    }
    if container.is_classic() {
        let mut buf = head;
        loop {
            match ClassicHeader::parse(&buf, len) {
                Ok(h) => {
                    h.check_extent(len).map_err(header_error)?;
                    break;
                }
                Err(HeaderError::NeedMore) if (buf.len() as u64) < len.min(MAX_CLASSIC_HEADER) => {
                    let more = (buf.len() as u64).max(64 << 10);
                    if (&mut file).take(more).read_to_end(&mut buf)? == 0 {
                        return Err(Part::Header
                            .malformed("the file shrank while its classic header was read"));
                    }
                }
                Err(HeaderError::NeedMore) => return Err(Part::Header.malformed(
                    "classic netCDF header is larger than 256 MiB or runs past the end of the file",
                )),
                Err(e) => return Err(header_error(e)),
            }
        }
    }
    drop(file);
    // One open at a time, start to finish (see `NcSource::build`).
    ffi::locked(|| {
        let mut src = NcSource::build(ffi::Handle::open_path(path)?, len, options)?;
        if src.model.is_netcdf4() {
            src.attach_direct_chunks(path)?;
        }
        src.refuse_undecodable(options)?;
        Ok(src)
    })
}

/// Opens a NetCDF file held in memory (the file-system-free entry point, for fuzzing).
pub fn open_bytes(bytes: impl Into<Vec<u8>>, options: &OpenOptions) -> Result<NcSource> {
    let bytes = bytes.into();
    let container = Container::sniff(&bytes).ok_or_else(not_netcdf)?;
    let len = bytes.len() as u64;
    if !container.is_classic() {
        tet_hdf5::check_not_truncated(&bytes, len, "netCDF-4")?;
    }
    if container.is_classic() {
        let h = ClassicHeader::parse(&bytes, len).map_err(header_error)?;
        h.check_extent(len).map_err(header_error)?;
    }
    ffi::locked(|| {
        let mut src = NcSource::build(
            std::sync::Arc::new(ffi::Handle::open_memory(bytes)?),
            len,
            options,
        )?;
        src.refuse_undecodable(options)?;
        Ok(src)
    })
}

/// Names the variable in a malformed-file or a library error (the others name what they are
/// about themselves).
fn with_var(name: &str, e: SourceError) -> SourceError {
    match e {
        e @ (SourceError::Malformed { .. } | SourceError::Library { .. }) => {
            SourceError::in_variable(name, e)
        }
        e => e,
    }
}

/// A classic header that cannot be read, as a malformed header.
fn header_error(e: HeaderError) -> SourceError {
    Part::Header.malformed_from(e)
}

fn not_netcdf() -> SourceError {
    Part::Header.malformed("not a NetCDF file: no CDF-1/2/5 or HDF5 signature")
}

/// Where a variable lives in the open dataset.
#[derive(Debug, Clone, Copy)]
struct VarLoc {
    /// The id of the variable's group.
    ncid: c_int,
    varid: c_int,
    /// 0-d in the file (an empty shape).
    scalar: bool,
}

/// How [`Source::read_region`] gets one variable's values. Chosen per variable at open.
#[derive(Debug, Clone)]
enum ReadPlan {
    /// `nc_get_vara` in the variable's own type, under the library lock.
    Native(VarLoc),
    /// The packed values read natively, then CF-unpacked.
    Unpack(VarLoc, Unpacking),
    /// A netCDF-4 chunked variable whose stored chunks are read from the file and decoded
    /// (deflate, shuffle, LZF, fletcher32) on the calling thread, outside the library lock.
    Direct(Box<ChunkedVar>),
    /// One field of a compound variable: its records read natively, the field copied out.
    Field(Box<compound::FieldRead>),
    /// Values gathered at open (a vlen variable's values or counts), little-endian.
    Memory(std::sync::Arc<tet_source::ragged::InMemory>),
    /// An opaque variable: its blobs read natively, the trailing byte axis cut.
    Opaque(ragged::OpaqueRead),
    /// A filter this netCDF-C cannot decode (the reason): becomes [`ReadPlan::Direct`] at open
    /// when tet-hdf5 decodes every stored chunk, else the variable is unsupported. Never read.
    Undecodable(VarLoc, String),
}

/// An opened NetCDF file.
#[derive(Debug)]
pub struct NcSource {
    /// The open dataset every `VarLoc` refers to; closed (with every HDF5 handle) on drop.
    _handle: std::sync::Arc<ffi::Handle>,
    /// The file itself, for [`ReadPlan::Direct`] chunk reads.
    file: Option<std::fs::File>,
    model: DataModel,
    variables: Vec<Variable>,
    plans: Vec<ReadPlan>,
    global_attrs: Attrs,
    global_facts: Vec<Fact>,
    texts: Vec<TextVariable>,
    labels: Vec<DimLabels>,
    skipped: Vec<Skipped>,
}

/// The key prefix of the private fact that records an attribute's user type.
pub const ATTR_TYPE: &str = "nc_attr_type:";

/// The private fact listing the attributes (of a variable; among the file facts, of the groups,
/// named `group/path/name`) that are single-valued `string` attributes: their `Text` value is
/// no `char` attribute.
pub const STRING_ATTRS: &str = "nc_string_attrs";

/// The private fact listing the `char` and `string` attributes (named as for
/// [`STRING_ATTRS`]) whose bytes are not UTF-8: their text is the bytes decoded as Latin-1, one
/// character per byte.
pub const LATIN1_ATTRS: &str = "nc_latin1_attrs";

/// The private fact of a text variable whose bytes are not UTF-8: `"latin1"`, its values are
/// the bytes decoded as Latin-1, one character per byte.
pub const TEXT_ENCODING: &str = "nc_text_encoding";

/// The private fact of a text variable that is a 0-d `char` variable: `"char"` (a 0-d
/// `string` variable has none).
pub const TEXT_TYPE: &str = "nc_type";

/// The key prefix of the private file fact recording a dimension no variable uses:
/// `nc_unused_dim:<group/path/name>` = u64 `[length, unlimited (0 or 1)]`.
pub const UNUSED_DIM: &str = "nc_unused_dim:";

/// The private file fact listing every group of a netCDF-4 file but the root (paths joined
/// with `/`, parents before their children, siblings in the library's order), so that groups
/// holding only attributes, only dimensions or nothing are created again on export.
pub const GROUPS: &str = "nc_groups";

/// The private fact of a variable using a dimension of another group than its own (an
/// ancestor's): the path of the group that defines each of its dimensions, in order (`""`: the
/// root), so that an export uses that very dimension as netCDF resolved it.
pub const DIM_GROUPS: &str = "nc_dim_groups";

/// The private fact of each variable (numeric or text) split from a compound variable (named
/// by its [`Fact::SourceDataset`]): the compound type as JSON (`NcType::json`: name, size,
/// fields with their offsets, extents and types), so that an export rebuilds the variable.
pub const COMPOUND_TYPE: &str = "nc_compound_type";
