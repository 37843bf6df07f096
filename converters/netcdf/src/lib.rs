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
//!   dimension, is a [`Role::Coordinate`].
//! * **Types**: `byte` → [`ElementType::I8`] (the engine widens it to i16 and records it; a
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

use std::collections::HashSet;
use std::ffi::c_int;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use netcdf_sys as nc;
use tet_source::{
    check_region, extension_confidence, AttrValue, Attrs, CharAxis, Confidence, DimLabels,
    ElementType, Fact, Feature, Importer, Lib, OpenOptions, Part, Request, Result, Role, Skipped,
    Source, SourceError, SourceLayout, TextVariable, Variable,
};

mod cf;
pub mod classic;
mod compound;
pub mod dump;
pub mod export;
mod ffi;
mod ragged;
mod user;

use cf::Unpacking;
use classic::{ClassicHeader, HeaderError};
use tet_hdf5::chunks::{ChunkAccess, ChunkedVar};
use user::{EnumInfo, NcType};

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

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Names only netCDF-C (and h5netcdf) write into an HDF5 file: the root attribute
/// `_NCProperties` and the per-variable bookkeeping attributes.
const NETCDF4_MARKERS: [&[u8]; 3] = [b"_NCProperties", b"_Netcdf4Dimid", b"_Netcdf4Coordinates"];

fn has_netcdf4_marker(bytes: &[u8]) -> bool {
    NETCDF4_MARKERS.iter().any(|m| contains(bytes, m))
}

/// How far into an HDF5 file without a netCDF extension `identify` looks for a netCDF-4 marker:
/// netCDF-C writes the root group's attributes when the file is first closed, after the
/// metadata of its variables, so they are often past the registry's first 4 KiB.
const MARKER_SCAN_BYTES: u64 = 1 << 20;

/// Whether the first MiB of an HDF5 file at `path` holds a netCDF-4 marker (a file named
/// `.h5`/`.hdf5`/… is left to the HDF5 importer: its name says how the user reads it).
fn netcdf4_marker_in_file(path: &Path) -> bool {
    if extension_confidence(path, &["h5", "hdf5", "he5", "hdf"]) == Confidence::Extension {
        return false;
    }
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MARKER_SCAN_BYTES).read_to_end(&mut head))
        .is_ok_and(|_| has_netcdf4_marker(&head))
}

/// What the first bytes say a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// Classic format, `CDF\x01`.
    Cdf1,
    /// 64-bit offset format, `CDF\x02`.
    Cdf2,
    /// 64-bit data format, `CDF\x05`.
    Cdf5,
    /// HDF5 (netCDF-4).
    Hdf5,
}

impl Container {
    /// The container of a file starting with `head`, if it has a known signature.
    pub fn sniff(head: &[u8]) -> Option<Container> {
        match head.get(..4) {
            Some(b"CDF\x01") => return Some(Container::Cdf1),
            Some(b"CDF\x02") => return Some(Container::Cdf2),
            Some(b"CDF\x05") => return Some(Container::Cdf5),
            _ => {}
        }
        let mut at = 0usize;
        while at + HDF5_SIGNATURE.len() <= head.len() {
            if &head[at..at + HDF5_SIGNATURE.len()] == HDF5_SIGNATURE {
                return Some(Container::Hdf5);
            }
            at = if at == 0 { 512 } else { at * 2 };
        }
        None
    }

    fn is_classic(self) -> bool {
        self != Container::Hdf5
    }
}

/// The netCDF data model of an opened file, as netCDF-C reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataModel {
    /// CDF-1.
    Classic,
    /// CDF-2.
    Offset64,
    /// CDF-5.
    Data64,
    /// netCDF-4 (HDF5) restricted to the classic model.
    Netcdf4Classic,
    /// netCDF-4 (HDF5), enhanced model.
    Netcdf4,
}

impl DataModel {
    /// The name netCDF4-python gives it (`NETCDF3_CLASSIC`, …, `NETCDF4`).
    pub fn name(self) -> &'static str {
        match self {
            DataModel::Classic => "NETCDF3_CLASSIC",
            DataModel::Offset64 => "NETCDF3_64BIT_OFFSET",
            DataModel::Data64 => "NETCDF3_64BIT_DATA",
            DataModel::Netcdf4Classic => "NETCDF4_CLASSIC",
            DataModel::Netcdf4 => "NETCDF4",
        }
    }

    fn is_netcdf4(self) -> bool {
        matches!(self, DataModel::Netcdf4 | DataModel::Netcdf4Classic)
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

impl NcSource {
    /// Walks the open dataset. Callers hold the library lock for the whole open: libhdf5 caches
    /// a variable-length datatype's file pointer on the dataset it shares between handles of one
    /// file, and two opens of the same netCDF-4 file interleaved call by call from two threads
    /// can crash inside the library (vlen-string fill values, seen with HDF5 1.10.8).
    fn build(
        handle: std::sync::Arc<ffi::Handle>,
        file_len: u64,
        options: &OpenOptions,
    ) -> Result<NcSource> {
        let ncid = handle.ncid();
        let parts = catch_unwind(AssertUnwindSafe(|| {
            Builder::new(options, file_len).run(ncid)
        }))
        .unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(SourceError::library_status(
                Lib::NetCdf,
                "internal error while reading the NetCDF structure",
                msg,
            ))
        })?;
        Ok(NcSource {
            _handle: handle,
            file: None,
            model: parts.model,
            variables: parts.variables,
            plans: parts.plans,
            global_attrs: parts.globals,
            global_facts: parts.global_facts,
            texts: parts.texts,
            labels: parts.labels,
            skipped: parts.skipped,
        })
    }

    /// Switches the chunked variables of a netCDF-4 file whose chunks this crate can decode to
    /// direct reads: chunk addresses come from libhdf5 once, at open (tet-hdf5's chunk index),
    /// then reads and decompression run in parallel without the library. A variable qualifies
    /// when it is read natively (not CF-unpacked), every chunk is stored (so netCDF's fill
    /// semantics never come into play), the chunk index fits a table, and the HDF5 view agrees
    /// with netCDF's on shape and element size; anything else keeps reading through netCDF.
    /// Callers hold the library lock.
    fn attach_direct_chunks(&mut self, path: &Path) -> Result<()> {
        let mut picks: Vec<(usize, String)> = Vec::new();
        for (i, (v, plan)) in self.variables.iter().zip(&self.plans).enumerate() {
            let chunked = v.layout.chunk_shape.is_some();
            let candidate = match plan {
                ReadPlan::Native(loc) | ReadPlan::Undecodable(loc, _) => !loc.scalar,
                _ => false,
            };
            if candidate && chunked {
                picks.push((i, format!("/{}", v.name)));
            }
        }
        if picks.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = picks.iter().map(|(_, n)| n.as_str()).collect();
        // A file netCDF opened but HDF5 alone cannot is no reason to fail: keep netCDF reads.
        let Ok(found) = ChunkedVar::open_many(path, &names) else {
            return Ok(());
        };
        for ((i, _), access) in picks.into_iter().zip(found) {
            let v = &self.variables[i];
            if let Ok(ChunkAccess::Direct(cv)) = access {
                let all_stored = cv
                    .shape()
                    .iter()
                    .zip(cv.chunk_shape())
                    .try_fold(1u64, |n, (&d, &c)| n.checked_mul(d.div_ceil(c)))
                    == Some(cv.stored_chunks() as u64);
                // A chunk never written reads as the HDF5 fill value, which netCDF-C sets to
                // the variable's fill value: relied on only where netCDF-C cannot read at all.
                let undecodable = matches!(self.plans[i], ReadPlan::Undecodable(..));
                if cv.shape() == v.shape.as_slice()
                    && cv.elem_size() == v.dtype.size()
                    && cv.has_chunk_table()
                    && (all_stored || undecodable)
                {
                    self.plans[i] = ReadPlan::Direct(Box::new(cv));
                }
            }
        }
        if self.plans.iter().any(|p| matches!(p, ReadPlan::Direct(_))) {
            self.file = Some(std::fs::File::open(path)?);
        }
        Ok(())
    }

    /// Records every variable still [`ReadPlan::Undecodable`] (its filter has no decoder in
    /// netCDF-C, and tet-hdf5 could not take it over) as unsupported: an error, or with
    /// `skip_unsupported` a skipped item, and the variable is dropped.
    fn refuse_undecodable(&mut self, options: &OpenOptions) -> Result<()> {
        let mut keep_vars = Vec::with_capacity(self.variables.len());
        let mut keep_plans = Vec::with_capacity(self.plans.len());
        let vars = std::mem::take(&mut self.variables);
        let plans = std::mem::take(&mut self.plans);
        for (v, plan) in vars.into_iter().zip(plans) {
            if let ReadPlan::Undecodable(_, reason) = plan {
                if !options.skip_unsupported {
                    return Err(Feature::Codec.unsupported(format!("{}: {reason}", v.name)));
                }
                self.skipped.push(Skipped {
                    name: v.name,
                    reason,
                });
            } else {
                keep_vars.push(v);
                keep_plans.push(plan);
            }
        }
        self.variables = keep_vars;
        self.plans = keep_plans;
        Ok(())
    }

    /// How many variables are read directly from their stored chunks (see
    /// `NcSource::attach_direct_chunks`); the rest go through netCDF-C.
    pub fn direct_chunk_variables(&self) -> usize {
        self.plans
            .iter()
            .filter(|p| matches!(p, ReadPlan::Direct(_)))
            .count()
    }

    /// The file's data model.
    pub fn data_model(&self) -> DataModel {
        self.model
    }

    fn read_native(
        &self,
        loc: VarLoc,
        name: &str,
        elem: usize,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        let to_usize = |v: &[u64]| -> Result<Vec<usize>> {
            v.iter()
                .map(|&x| usize::try_from(x).map_err(|_| Request::TooLarge.into()))
                .collect()
        };
        let (s, c) = if loc.scalar {
            (Vec::new(), Vec::new())
        } else {
            (to_usize(start)?, to_usize(count)?)
        };
        let context = |e: SourceError| with_var(name, e);
        if (out.as_ptr() as usize).is_multiple_of(elem) {
            ffi::get_vara(loc.ncid, loc.varid, &s, &c, out).map_err(context)?;
        } else {
            let mut tmp = vec![0u64; out.len().div_ceil(8)];
            let bytes = as_bytes_mut(&mut tmp);
            ffi::get_vara(loc.ncid, loc.varid, &s, &c, &mut bytes[..out.len()]).map_err(context)?;
            out.copy_from_slice(&bytes[..out.len()]);
        }
        native_to_le(out, elem);
        Ok(())
    }
}

/// A `u64` buffer viewed as bytes (an 8-aligned byte buffer).
fn as_bytes_mut(v: &mut [u64]) -> &mut [u8] {
    let len = std::mem::size_of_val(v);
    // SAFETY: any byte pattern is a valid u8; the slice covers exactly v's memory.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), len) }
}

/// Native-endian elements of `size` bytes to little-endian, in place.
fn native_to_le(buf: &mut [u8], size: usize) {
    if cfg!(target_endian = "big") && size > 1 {
        for e in buf.chunks_exact_mut(size) {
            e.reverse();
        }
    }
}

impl Source for NcSource {
    fn variables(&self) -> &[Variable] {
        &self.variables
    }

    fn global_attrs(&self) -> &[(String, AttrValue)] {
        &self.global_attrs
    }

    fn global_facts(&self) -> &[Fact] {
        &self.global_facts
    }

    fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    fn text_variables(&self) -> &[TextVariable] {
        &self.texts
    }

    fn dim_labels(&self) -> &[DimLabels] {
        &self.labels
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let v = self.variables.get(var).ok_or(Request::NoVariable {
            var,
            count: self.variables.len(),
        })?;
        let n = check_region(&v.shape, start, count, v.dtype.size(), out.len())?;
        if n == 0 {
            return Ok(());
        }
        match &self.plans[var] {
            ReadPlan::Native(loc) => {
                self.read_native(*loc, &v.name, v.dtype.size(), start, count, out)
            }
            ReadPlan::Unpack(loc, u) => {
                let elem = u.stored.size();
                let bytes = usize::try_from(n)
                    .ok()
                    .and_then(|n| n.checked_mul(elem))
                    .ok_or(Request::TooLarge)?;
                let mut tmp = vec![0u64; bytes.div_ceil(8)];
                let packed = &mut as_bytes_mut(&mut tmp)[..bytes];
                self.read_native(*loc, &v.name, elem, start, count, packed)?;
                u.apply(packed, out);
                Ok(())
            }
            ReadPlan::Direct(cv) => {
                let file = self.file.as_ref().ok_or(Request::NotReadable {
                    name: v.name.clone(),
                    why: "is read chunk by chunk, but the file is not open",
                })?;
                cv.read_region(file, start, count, out)
                    .map_err(|e| with_var(&v.name, e))
            }
            ReadPlan::Field(f) => f.read(start, count, out).map_err(|e| with_var(&v.name, e)),
            ReadPlan::Memory(m) => m
                .read_region(start, count, out)
                .map_err(|e| with_var(&v.name, e)),
            ReadPlan::Opaque(o) => o
                .read(self, start, count, out)
                .map_err(|e| with_var(&v.name, e)),
            ReadPlan::Undecodable(_, reason) => {
                Err(Feature::Codec.unsupported(format!("{}: {reason}", v.name)))
            }
        }
    }

    /// Chunks of variables read from their stored chunks whose only filter is zstd are one
    /// frame each (see `tet_hdf5::chunks::ChunkedVar::zstd_frames`).
    fn zstd_frames(&self, var: usize) -> bool {
        matches!(self.plans.get(var), Some(ReadPlan::Direct(cv)) if cv.zstd_frames())
    }

    fn zstd_frame(&self, var: usize, start: &[u64], count: &[u64]) -> Result<Option<Vec<u8>>> {
        match (self.plans.get(var), &self.file) {
            (Some(ReadPlan::Direct(cv)), Some(file)) => cv.zstd_frame_of_region(file, start, count),
            _ => Ok(None),
        }
    }

    /// Workers may read concurrently when some variables are read from their stored chunks
    /// (decoding runs on the calling thread); netCDF-C calls serialise on the library lock.
    fn parallel_reads(&self) -> bool {
        self.file.is_some()
    }
}

/// What the walk produces.
struct Parts {
    model: DataModel,
    variables: Vec<Variable>,
    plans: Vec<ReadPlan>,
    globals: Attrs,
    global_facts: Vec<Fact>,
    texts: Vec<TextVariable>,
    labels: Vec<DimLabels>,
    skipped: Vec<Skipped>,
}

/// A text variable that may label a dimension.
struct LabelCandidate {
    dim: String,
    /// Short name of the variable (as `coordinates` attributes name it).
    var: String,
    /// A 1-D string coordinate variable (as opposed to a 2-D char array).
    string_coord: bool,
    cf_role: bool,
    labels: Vec<String>,
}

/// The kind of a netCDF type.
enum Kind {
    Numeric(ElementType),
    Enum(EnumInfo),
    Char,
    Str,
    /// A compound type ([`NcType::Compound`]): one variable per field.
    Compound(NcType),
    /// A vlen type: its name and base type.
    Vlen(String, NcType),
    /// An opaque type: its name and size.
    Opaque(String, usize),
    Unsupported(String),
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

/// The attributes of one variable or group.
#[derive(Default)]
struct ObjAttrs {
    attrs: Attrs,
    /// Attribute name → its recorded type (see [`UserAttr::record`]).
    types: Vec<(String, String)>,
    /// Notes for the owner (attributes given as JSON text, …).
    notes: Vec<String>,
    /// Single-valued `string` attributes (a `Text` value that is no `char` attribute).
    strings: Vec<String>,
    /// `char`/`string` attributes whose bytes are not UTF-8, decoded as Latin-1.
    latin1: Vec<String>,
}

impl ObjAttrs {
    /// The private facts recording the user types, each attribute named `prefix/name` (the
    /// group path for group attributes, empty for variables and the root group).
    fn type_facts(&self, prefix: &str) -> Vec<Fact> {
        let mut facts: Vec<Fact> = self
            .types
            .iter()
            .map(|(n, t)| {
                Fact::private(
                    "nc",
                    format!("{ATTR_TYPE}{}", join(prefix, n)),
                    AttrValue::Text(t.clone()),
                )
            })
            .collect();
        for (key, names) in [(STRING_ATTRS, &self.strings), (LATIN1_ATTRS, &self.latin1)] {
            if !names.is_empty() {
                let names = names.iter().map(|n| join(prefix, n)).collect();
                facts.push(Fact::private("nc", key, AttrValue::TextList(names)));
            }
        }
        facts
    }
}

/// An attribute read: its value, its recorded type when it is of a user type, and whether its
/// text was decoded as Latin-1.
type AttrRead = (AttrValue, Option<UserAttr>, bool);

/// Why an attribute has no form here (it is then an unsupported item with this reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NoForm {
    /// An enum whose base type's values cannot be read.
    #[error("enum attribute of base type {0}")]
    EnumBase(ElementType),
    /// A type with no attribute form (its description).
    #[error("attribute of type {0} has no form")]
    Type(String),
    /// A value of a user type with no JSON text (the type's description, and why).
    #[error("{ty} attribute with {why}")]
    Json {
        /// The type's description.
        ty: String,
        /// Why.
        why: user::NoJson,
    },
    /// A type code netCDF-C reported that is no type it defines.
    #[error("unknown netCDF type code {0}")]
    UnknownType(c_int),
}

/// What is recorded of an attribute of a user type beside its value.
struct UserAttr {
    /// The type as JSON ([`NcType::json`]).
    json: String,
    /// How the value is given.
    note: String,
}

impl UserAttr {
    /// The recorded type: `{"count":<values>,"type":<type JSON>}`.
    fn record(&self, count: usize) -> String {
        format!("{{\"count\":{count},\"type\":{}}}", self.json)
    }
}

fn atomic(xtype: c_int) -> Option<ElementType> {
    Some(match xtype {
        nc::NC_BYTE => ElementType::I8,
        nc::NC_UBYTE => ElementType::U8,
        nc::NC_SHORT => ElementType::I16,
        nc::NC_USHORT => ElementType::U16,
        nc::NC_INT => ElementType::I32,
        nc::NC_UINT => ElementType::U32,
        nc::NC_INT64 => ElementType::I64,
        nc::NC_UINT64 => ElementType::U64,
        nc::NC_FLOAT => ElementType::F32,
        nc::NC_DOUBLE => ElementType::F64,
        _ => return None,
    })
}

/// An integer of type `t` from native-endian bytes.
fn int_from_ne(t: ElementType, b: &[u8]) -> i128 {
    let mut a = [0u8; 8];
    a[..t.size().min(8)].copy_from_slice(&b[..t.size().min(8)]);
    match t {
        ElementType::I8 => i128::from(a[0] as i8),
        ElementType::U8 => i128::from(a[0]),
        ElementType::I16 => i128::from(i16::from_ne_bytes([a[0], a[1]])),
        ElementType::U16 => i128::from(u16::from_ne_bytes([a[0], a[1]])),
        ElementType::I32 => i128::from(i32::from_ne_bytes([a[0], a[1], a[2], a[3]])),
        ElementType::U32 => i128::from(u32::from_ne_bytes([a[0], a[1], a[2], a[3]])),
        ElementType::I64 => i128::from(i64::from_ne_bytes(a)),
        _ => i128::from(u64::from_ne_bytes(a)),
    }
}

/// Text from bytes: UTF-8 when valid, else Latin-1 (every byte one character, nothing lost).
fn decode_text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => b.iter().map(|&c| char::from(c)).collect(),
    }
}

/// Decodes the byte strings of one variable or attribute alike: each as UTF-8 when every one is
/// valid UTF-8, else each as Latin-1, one character per byte (`true` then, recorded so that an
/// export gives back the very bytes: a mix of the two decodings could not be undone).
fn decode_all<B: AsRef<[u8]>>(rows: &[B]) -> (Vec<String>, bool) {
    let utf8 = rows.iter().all(|r| std::str::from_utf8(r.as_ref()).is_ok());
    let values = rows
        .iter()
        .map(|r| {
            if utf8 {
                String::from_utf8_lossy(r.as_ref()).into_owned()
            } else {
                r.as_ref().iter().map(|&c| char::from(c)).collect()
            }
        })
        .collect();
    (values, !utf8)
}

/// The values of a text variable (`units` characters, or `values_n` strings) in C order, each
/// `char` row with its trailing NULs removed, decoded alike ([`decode_all`]: `true` when as
/// Latin-1).
fn text_values(
    loc: VarLoc,
    p: &VarParts,
    is_char: bool,
    units: u64,
    values_n: u64,
) -> Result<(Vec<String>, bool)> {
    let context = |e: SourceError| with_var(&p.full, e);
    let too_large = || SourceError::in_variable(&p.full, Request::TooLarge.into());
    let usize_shape: Vec<usize> = p
        .shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| too_large())?;
    let values_n = usize::try_from(values_n).map_err(|_| too_large())?;
    if !is_char {
        let raw: Vec<Vec<u8>> = ffi::get_var_strings(loc.ncid, loc.varid, &usize_shape, values_n)
            .map_err(context)?
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        return Ok(decode_all(&raw));
    }
    let mut buf = vec![0u8; usize::try_from(units).map_err(|_| too_large())?];
    if units > 0 {
        let start = vec![0usize; usize_shape.len()];
        ffi::get_vara(loc.ncid, loc.varid, &start, &usize_shape, &mut buf).map_err(context)?;
    }
    let strlen = usize_shape.last().copied().unwrap_or(1);
    if strlen == 0 {
        return Ok((vec![String::new(); values_n], false));
    }
    let rows: Vec<&[u8]> = buf.chunks(strlen).map(trim_nuls).collect();
    Ok(decode_all(&rows))
}

/// Attributes whose values are values of their variable (CF, NUG): a `char` one is a
/// character of the data, NUL included, not text.
fn is_value_attr(name: &str) -> bool {
    matches!(
        name,
        "_FillValue" | "missing_value" | "valid_min" | "valid_max" | "valid_range"
    )
}

fn trim_nuls(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
    &b[..end]
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}/{name}")
    }
}

fn filter_name(id: u32, params: &[u32]) -> String {
    let level = params.first().map(|l| format!("({l})")).unwrap_or_default();
    match id {
        1 => format!("deflate{level}"),
        2 => "shuffle".into(),
        3 => "fletcher32".into(),
        4 => "szip".into(),
        5 => "nbit".into(),
        6 => "scaleoffset".into(),
        307 => format!("bzip2{level}"),
        32000 => "lzf".into(),
        32001 => "blosc".into(),
        32004 => "lz4".into(),
        32013 => "zfp".into(),
        32015 => format!("zstd{level}"),
        32017 => "sz".into(),
        other => format!("filter {other}"),
    }
}

struct Builder<'o> {
    options: &'o OpenOptions,
    file_len: u64,
    model: DataModel,
    variables: Vec<Variable>,
    plans: Vec<ReadPlan>,
    globals: Attrs,
    /// The recorded types of global and group attributes of user types.
    global_facts: Vec<Fact>,
    texts: Vec<TextVariable>,
    skipped: Vec<Skipped>,
    candidates: Vec<LabelCandidate>,
    /// Variable names listed in `coordinates` attributes.
    coordinate_refs: HashSet<String>,
    /// Unlimited dimension ids of the groups walked so far (ids are file-wide in netCDF-4).
    unlimited: HashSet<c_int>,
    /// Every group's own dimensions: (group path, group id, dimension id).
    group_dims: Vec<(String, c_int, c_int)>,
    /// The dimension ids some variable uses.
    used_dims: HashSet<c_int>,
}

impl<'o> Builder<'o> {
    fn new(options: &'o OpenOptions, file_len: u64) -> Self {
        Builder {
            options,
            file_len,
            model: DataModel::Classic,
            variables: Vec::new(),
            plans: Vec::new(),
            globals: Vec::new(),
            global_facts: Vec::new(),
            texts: Vec::new(),
            skipped: Vec::new(),
            candidates: Vec::new(),
            coordinate_refs: HashSet::new(),
            unlimited: HashSet::new(),
            group_dims: Vec::new(),
            used_dims: HashSet::new(),
        }
    }

    /// Records an unmappable item: an error, or a skipped entry under `skip_unsupported`.
    fn unsupported(&mut self, name: String, feature: Feature, reason: String) -> Result<()> {
        if self.options.skip_unsupported {
            self.skipped.push(Skipped { name, reason });
            Ok(())
        } else {
            Err(feature.unsupported(format!("{name}: {reason}")))
        }
    }

    fn run(mut self, root: c_int) -> Result<Parts> {
        self.model = match ffi::format(root)? {
            nc::NC_FORMAT_CLASSIC => DataModel::Classic,
            nc::NC_FORMAT_64BIT_OFFSET => DataModel::Offset64,
            nc::NC_FORMAT_64BIT_DATA => DataModel::Data64,
            nc::NC_FORMAT_NETCDF4_CLASSIC => DataModel::Netcdf4Classic,
            nc::NC_FORMAT_NETCDF4 => DataModel::Netcdf4,
            other => {
                return Err(Feature::Version.unsupported(format!(
                "netCDF format code {other} (not classic, 64-bit offset, 64-bit data or netCDF-4)"
            )))
            }
        };
        let nc4 = self.model.is_netcdf4();
        let mut stack = vec![(root, String::new())];
        let mut walked = 0usize;
        let mut group_paths = Vec::new();
        while let Some((g, path)) = stack.pop() {
            walked += 1;
            if walked > MAX_GROUPS {
                return Err(Part::Metadata.malformed(format!("more than {MAX_GROUPS} groups")));
            }
            if !path.is_empty() {
                group_paths.push(path.clone());
            }
            let attrs = self.attrs(g, nc::NC_GLOBAL, &path)?;
            self.global_facts.extend(attrs.type_facts(&path));
            // A name holding a `/` (netCDF-C reads those HDF5 writes): where `path` ends.
            self.global_facts.extend(
                attrs
                    .attrs
                    .iter()
                    .filter_map(|(k, _)| Fact::attr_group(&path, k)),
            );
            self.globals
                .extend(attrs.attrs.into_iter().map(|(k, v)| (join(&path, &k), v)));
            self.unlimited.extend(ffi::unlimdims(g)?);
            let dimids = ffi::own_dimids(g)?;
            self.group_dims
                .extend(dimids.iter().map(|&d| (path.clone(), g, d)));
            let own_dims = if nc4 { Some(dimids) } else { None };
            for varid in ffi::varids(g)? {
                self.variable(g, varid, &path, own_dims.as_deref())?;
            }
            if nc4 {
                let kids = ffi::groups(g)?;
                for &k in kids.iter().rev() {
                    let name = ffi::group_name(k)?;
                    stack.push((k, join(&path, &name)));
                }
            }
        }
        self.record_unused_dims()?;
        if !group_paths.is_empty() {
            self.global_facts.push(Fact::private(
                "nc",
                GROUPS,
                AttrValue::TextList(group_paths),
            ));
        }
        let labels = self.resolve_labels();
        Ok(Parts {
            model: self.model,
            variables: self.variables,
            plans: self.plans,
            globals: self.globals,
            global_facts: self.global_facts,
            texts: self.texts,
            labels,
            skipped: self.skipped,
        })
    }

    /// Records the dimensions no variable uses (which no variable would bring back) as the
    /// file facts [`UNUSED_DIM`]`<group/path/name>` = `[length, unlimited 0/1]`.
    fn record_unused_dims(&mut self) -> Result<()> {
        for (path, g, d) in &self.group_dims {
            if self.used_dims.contains(d) {
                continue;
            }
            let (name, len) = ffi::dim(*g, *d)?;
            let unlimited = u64::from(self.unlimited.contains(d));
            self.global_facts.push(Fact::private(
                "nc",
                format!("{UNUSED_DIM}{}", join(path, &name)),
                AttrValue::U64(vec![len, unlimited]),
            ));
        }
        Ok(())
    }

    /// The [`DIM_GROUPS`] fact of a variable of group `path` with dimensions `dimids`, when one
    /// of them is defined in another group (its ancestors are walked before it, so every
    /// dimension it can use is known).
    fn dim_groups(&self, path: &str, dimids: &[c_int]) -> Option<Fact> {
        let groups: Vec<String> = dimids
            .iter()
            .map(|d| {
                self.group_dims
                    .iter()
                    .find(|(_, _, id)| id == d)
                    .map_or_else(|| path.to_string(), |(p, _, _)| p.clone())
            })
            .collect();
        groups
            .iter()
            .any(|g| g != path)
            .then(|| Fact::private("nc", DIM_GROUPS, AttrValue::TextList(groups)))
    }

    /// Dimension labels: string coordinate variables first, then 2-D char arrays (those with a
    /// `cf_role` or named in a `coordinates` attribute first), never for a dimension that has a
    /// numeric coordinate variable, at most one per dimension name.
    fn resolve_labels(&self) -> Vec<DimLabels> {
        let numeric: HashSet<&str> = self
            .variables
            .iter()
            .filter(|v| v.role == Role::Coordinate)
            .filter_map(|v| v.dims.as_ref().and_then(|d| d.first()).map(String::as_str))
            .collect();
        let rank = |c: &LabelCandidate| {
            if c.string_coord {
                0
            } else if c.cf_role || self.coordinate_refs.contains(&c.var) {
                1
            } else {
                2
            }
        };
        let mut order: Vec<usize> = (0..self.candidates.len()).collect();
        order.sort_by_key(|&i| rank(&self.candidates[i])); // stable: file order within a rank
        let mut done: HashSet<String> = HashSet::new();
        let mut out = Vec::new();
        for i in order {
            let c = &self.candidates[i];
            if numeric.contains(c.dim.as_str()) || done.contains(&c.dim) {
                continue;
            }
            done.insert(c.dim.clone());
            out.push(DimLabels {
                dim: c.dim.clone(),
                labels: c.labels.clone(),
            });
        }
        out
    }

    /// The attributes of `varid` (`NC_GLOBAL`: of group `ncid`), hidden ones left out, with
    /// the recorded types of those of user types.
    fn attrs(&mut self, ncid: c_int, varid: c_int, owner: &str) -> Result<ObjAttrs> {
        let n = ffi::natts(ncid, varid)?;
        let mut out = ObjAttrs::default();
        for i in 0..n {
            let (name, cname) = ffi::att_name(ncid, varid, i)?;
            if is_hidden_attr(&name) {
                continue;
            }
            let (xtype, len) = ffi::att_info(ncid, varid, &cname)?;
            match self.attr_value(ncid, varid, &cname, xtype, len, &name, owner)? {
                Ok((v, typed, latin1)) => {
                    if latin1 {
                        out.latin1.push(name.clone());
                    }
                    if xtype == nc::NC_STRING && matches!(v, AttrValue::Text(_)) {
                        out.strings.push(name.clone());
                    }
                    if let Some(t) = typed {
                        out.notes.push(format!(
                            "attribute '{name}': {} ({ATTR_TYPE}{name})",
                            t.note
                        ));
                        out.types.push((name.clone(), t.record(len)));
                    }
                    out.attrs.push((name, v));
                }
                Err(reason) => {
                    let who = if owner.is_empty() {
                        format!("global attribute '{name}'")
                    } else if varid == nc::NC_GLOBAL {
                        format!("attribute '{name}' of group '{owner}'")
                    } else {
                        format!("attribute '{name}' of '{owner}'")
                    };
                    self.unsupported(who, Feature::Attribute, reason.to_string())?;
                }
            }
        }
        Ok(out)
    }

    /// One attribute's value (with its recorded type when it is of a user type, and whether its
    /// text was decoded as Latin-1); the inner `Err` is the reason it has no form here.
    #[allow(clippy::too_many_arguments)]
    fn attr_value(
        &mut self,
        ncid: c_int,
        varid: c_int,
        cname: &[u8],
        xtype: c_int,
        len: usize,
        name: &str,
        owner: &str,
    ) -> Result<std::result::Result<AttrRead, NoForm>> {
        // Attribute values are stored uncompressed in the file: a count the file cannot hold
        // is corrupt, and is refused before anything is allocated for it.
        let unit = match xtype {
            nc::NC_CHAR | nc::NC_STRING => 1,
            t => atomic(t).map_or(1, |e| e.size() as u64),
        };
        if (len as u128) * u128::from(unit) > u128::from(self.file_len.max(64)) {
            return Err(Part::Attribute.malformed(format!(
                "attribute '{name}' of '{owner}' claims {len} values, more than the file holds"
            )));
        }
        if xtype < nc::NC_FIRSTUSERTYPEID {
            return Ok(self
                .attr_builtin(ncid, varid, cname, xtype, len, name)?
                .map(|(v, latin1)| (v, None, latin1)));
        }
        let t = user::analyze(ncid, xtype, self.file_len.max(64))?;
        let (value, note) = match &t {
            NcType::Enum(e) => {
                let Ok((v, _)) = self.attr_builtin(
                    ncid,
                    varid,
                    cname,
                    export::xtype(e.base).unwrap_or(nc::NC_NAT),
                    len,
                    name,
                )?
                else {
                    return Ok(Err(NoForm::EnumBase(e.base)));
                };
                // The codes are read in the enum's own type (the same bytes as its base).
                (
                    v,
                    format!("enum '{}' codes; names in the recorded type", e.name),
                )
            }
            NcType::Compound { .. } | NcType::Vlen { .. } | NcType::Opaque { .. } => {
                match self.attr_json(ncid, varid, cname, &t, len, name, owner)? {
                    Ok(v) => v,
                    Err(why) => return Ok(Err(why)),
                }
            }
            other => return Ok(Err(NoForm::Type(other.describe()))),
        };
        let json = t.json();
        Ok(Ok((value, Some(UserAttr { json, note }), false)))
    }

    /// An attribute of a compound, vlen or opaque type as JSON text, and its note.
    #[allow(clippy::too_many_arguments)]
    fn attr_json(
        &mut self,
        ncid: c_int,
        varid: c_int,
        cname: &[u8],
        t: &NcType,
        len: usize,
        name: &str,
        owner: &str,
    ) -> Result<std::result::Result<(AttrValue, String), NoForm>> {
        let bytes = (len as u128) * (t.size() as u128);
        if bytes > u128::from(self.file_len.max(64)) * 16 {
            return Err(Part::Attribute.malformed(format!(
                "attribute '{name}' of '{owner}' claims {len} values of {} bytes, more than the file holds",
                t.size()
            )));
        }
        if t.size() == 0 {
            return Ok(Err(NoForm::Type(t.describe())));
        }
        let mut rec = user::Records::new(t, len)?;
        if len > 0 {
            ffi::get_att_raw(ncid, varid, cname, rec.fill())?;
            rec.arm();
        }
        // SAFETY: `rec` holds `len` values netCDF read in type `t`, whose allocated parts stay
        // live until `rec` is dropped (after this call).
        let json = match unsafe { user::attr_json(t, rec.bytes(), len) } {
            Ok(j) => j,
            Err(why) => {
                return Ok(Err(NoForm::Json {
                    ty: t.describe(),
                    why,
                }))
            }
        };
        let class = match t {
            NcType::Compound { .. } => "compound",
            NcType::Vlen { .. } => "vlen",
            _ => "opaque",
        };
        Ok(Ok((
            AttrValue::Text(json),
            format!("{class} value given as JSON text"),
        )))
    }

    /// The value of an attribute of a built-in type (`char`, `string`, numbers), and whether
    /// its text was decoded as Latin-1 (bytes that are not UTF-8).
    fn attr_builtin(
        &mut self,
        ncid: c_int,
        varid: c_int,
        cname: &[u8],
        xtype: c_int,
        len: usize,
        name: &str,
    ) -> Result<std::result::Result<(AttrValue, bool), NoForm>> {
        if xtype == nc::NC_CHAR {
            let mut buf = vec![0u8; len];
            ffi::get_att_raw(ncid, varid, cname, &mut buf)?;
            // Text attributes often carry a C string's terminating NUL(s), which are dropped.
            // A variable's value attributes (`_FillValue = '\0'` of a char variable) are data:
            // every byte is kept.
            let bytes = if varid != nc::NC_GLOBAL && is_value_attr(name) {
                &buf[..]
            } else {
                trim_nuls(&buf)
            };
            let (mut v, latin1) = decode_all(&[bytes]);
            return Ok(Ok((AttrValue::Text(v.pop().unwrap_or_default()), latin1)));
        }
        if xtype == nc::NC_STRING {
            let raw: Vec<Vec<u8>> = ffi::get_att_strings(ncid, varid, cname, len)?
                .into_iter()
                .map(Option::unwrap_or_default)
                .collect();
            let (mut v, latin1) = decode_all(&raw);
            let value = if v.len() == 1 {
                AttrValue::Text(v.remove(0))
            } else {
                AttrValue::TextList(v)
            };
            return Ok(Ok((value, latin1)));
        }
        let Some(t) = atomic(xtype) else {
            return Ok(Err(NoForm::UnknownType(xtype)));
        };
        let size = t.size();
        let mut tmp = vec![0u64; (len * size).div_ceil(8).max(1)];
        let bytes = as_bytes_mut(&mut tmp);
        ffi::get_att_raw(ncid, varid, cname, &mut bytes[..len * size])?;
        let b = &bytes[..len * size];
        macro_rules! vals {
            ($v:ident, $ty:ty, $n:literal) => {
                AttrValue::$v(
                    b.chunks_exact($n)
                        .map(|c| {
                            let mut a = [0u8; $n];
                            a.copy_from_slice(c);
                            <$ty>::from_ne_bytes(a)
                        })
                        .collect(),
                )
            };
        }
        let value = match t {
            ElementType::I8 => vals!(I8, i8, 1),
            ElementType::U8 => vals!(U8, u8, 1),
            ElementType::I16 => vals!(I16, i16, 2),
            ElementType::U16 => vals!(U16, u16, 2),
            ElementType::I32 => vals!(I32, i32, 4),
            ElementType::U32 => vals!(U32, u32, 4),
            ElementType::I64 => vals!(I64, i64, 8),
            ElementType::U64 => vals!(U64, u64, 8),
            ElementType::F32 => vals!(F32, f32, 4),
            ElementType::F64 => vals!(F64, f64, 8),
            other => return Ok(Err(NoForm::Type(other.to_string()))),
        };
        Ok(Ok((value, false)))
    }

    /// The kind of type `xtype` (looked up from group `ncid`).
    fn kind(&mut self, ncid: c_int, xtype: c_int) -> Result<Kind> {
        Ok(match user::analyze(ncid, xtype, self.file_len.max(64))? {
            NcType::Atomic(t) => Kind::Numeric(t),
            NcType::Enum(e) => Kind::Enum(e),
            NcType::Char => Kind::Char,
            NcType::Str => Kind::Str,
            t @ NcType::Compound { .. } => Kind::Compound(t),
            NcType::Vlen { name, base } => Kind::Vlen(name, *base),
            NcType::Opaque { name, size } => Kind::Opaque(name, size),
            NcType::Other(reason) => Kind::Unsupported(reason),
        })
    }

    fn variable(
        &mut self,
        g: c_int,
        varid: c_int,
        path: &str,
        own_dims: Option<&[c_int]>,
    ) -> Result<()> {
        let info = ffi::var_info(g, varid)?;
        self.used_dims.extend(info.dimids.iter().copied());
        let full = join(path, &info.name);
        let mut dim_names = Vec::with_capacity(info.dimids.len());
        let mut shape = Vec::with_capacity(info.dimids.len());
        for &d in &info.dimids {
            let (name, len) = ffi::dim(g, d)?;
            dim_names.push(name);
            shape.push(len);
        }
        let obj = self.attrs(g, varid, &full)?;
        let mut attr_facts = obj.type_facts("");
        if let Some(f) = self.dim_groups(path, &info.dimids) {
            attr_facts.push(f);
        }
        let (attrs, attr_notes) = (obj.attrs, obj.notes);
        if let Some(AttrValue::Text(c)) = attrs
            .iter()
            .find(|(k, _)| k == "coordinates")
            .map(|(_, v)| v)
        {
            self.coordinate_refs
                .extend(c.split_whitespace().map(str::to_string));
        }
        let coordinate = info.dimids.len() == 1
            && dim_names[0] == info.name
            && own_dims.is_none_or(|own| own.contains(&info.dimids[0]));
        let unlimited: Vec<String> = info
            .dimids
            .iter()
            .zip(&dim_names)
            .filter(|(d, _)| self.unlimited.contains(d))
            .map(|(_, n)| n.clone())
            .collect();
        let loc = VarLoc {
            ncid: g,
            varid,
            scalar: info.dimids.is_empty(),
        };
        let v = VarParts {
            full,
            short: info.name,
            dim_names,
            shape,
            attrs,
            attr_facts,
            attr_notes,
            coordinate,
            unlimited,
        };
        match self.kind(g, info.xtype)? {
            Kind::Numeric(t) => self.numeric(loc, v, t, None),
            Kind::Enum(e) => {
                let t = e.base;
                self.numeric(loc, v, t, Some(e))
            }
            Kind::Char => self.text(loc, v, true),
            Kind::Str => self.text(loc, v, false),
            Kind::Compound(t) => self.compound(loc, v, t),
            Kind::Vlen(name, base) => self.vlen(loc, v, &name, &base),
            Kind::Opaque(name, size) => self.opaque(loc, v, &name, size),
            Kind::Unsupported(reason) => self.unsupported(v.full, Feature::DataType, reason),
        }
    }

    fn numeric(
        &mut self,
        loc: VarLoc,
        p: VarParts,
        t: ElementType,
        enum_info: Option<EnumInfo>,
    ) -> Result<()> {
        let ndims = p.shape.len();
        let mut v = ragged::base_variable(&loc, p);
        v.dtype = t;
        let mut undecodable = None;
        if self.model.is_netcdf4() && !loc.scalar {
            let (layout, reason) = self.layout(loc, ndims)?;
            v.layout = layout;
            undecodable = reason;
        }
        // Read natively, or (a filter netCDF-C lacks) from the stored chunks once the file is
        // open, when tet-hdf5 decodes them.
        let native = |loc: VarLoc| match &undecodable {
            Some(reason) => ReadPlan::Undecodable(loc, reason.clone()),
            None => ReadPlan::Native(loc),
        };
        if let Some(e) = enum_info {
            v.facts.push(Fact::EnumType(e.name.clone()));
            v.facts.push(Fact::EnumMapping(e.members.clone()));
            v.notes.push(format!(
                "netCDF enum '{}': stored as its underlying {} codes; names in enum_mapping",
                e.name, e.base
            ));
            self.push(v, native(loc));
            return Ok(());
        }
        if self.options.unpack {
            let fill_on = ffi::var_fill_on(loc.ncid, loc.varid).unwrap_or(true);
            match Unpacking::plan(t, &v.attrs, fill_on) {
                Ok(None) => {}
                Ok(Some(u)) => {
                    if let Some(reason) = &undecodable {
                        // Unpacking reads through netCDF-C, which cannot decode this variable.
                        return self.unsupported(v.name, Feature::Codec, reason.clone());
                    }
                    let mut consumed: Vec<&str> = cf::PACKING_ATTRS.to_vec();
                    if u.packed != u.stored {
                        consumed.push("_Unsigned");
                    }
                    let had_fill = Unpacking::has_fill_attrs(&v.attrs);
                    let (dropped, kept): (Attrs, Attrs) = std::mem::take(&mut v.attrs)
                        .into_iter()
                        .partition(|(k, _)| consumed.contains(&k.as_str()));
                    v.attrs = kept;
                    if had_fill {
                        v.attrs.push((
                            "_FillValue".into(),
                            if u.out == ElementType::F32 {
                                AttrValue::F32(vec![f32::NAN])
                            } else {
                                AttrValue::F64(vec![f64::NAN])
                            },
                        ));
                    }
                    v.facts.push(Fact::Unpacked {
                        packed_type: t.name().into(),
                        packing: dropped,
                    });
                    v.notes.push(u.describe());
                    v.dtype = u.out;
                    self.push(v, ReadPlan::Unpack(loc, u));
                    return Ok(());
                }
                Err(reason) => v.notes.push(format!("not CF-unpacked: {reason}")),
            }
        }
        self.push(v, native(loc));
        Ok(())
    }

    fn push(&mut self, v: Variable, plan: ReadPlan) {
        self.variables.push(v);
        self.plans.push(plan);
    }

    /// Storage facts of a netCDF-4 variable, and why netCDF-C cannot read it when one of its
    /// filters has no decoder in this library (then `attach_direct_chunks` reads it from its
    /// stored chunks if tet-hdf5 decodes them, or it is recorded as unsupported).
    fn layout(&mut self, loc: VarLoc, ndims: usize) -> Result<(SourceLayout, Option<String>)> {
        let chunk_shape = ffi::var_chunking(loc.ncid, loc.varid, ndims)?;
        let f = ffi::var_filters(loc.ncid, loc.varid)?;
        let mut filters = Vec::new();
        if f.shuffle {
            filters.push("shuffle".to_string());
        }
        let mut compressed = false;
        let mut undecodable = None;
        for (id, params, available) in &f.filters {
            if !available {
                undecodable.get_or_insert_with(|| {
                    format!(
                        "compressed with HDF5 filter {id} ({}), which neither this netCDF/HDF5 \
                         library nor tet-convert's own chunk decoders can read here (an HDF5 \
                         plugin for it in HDF5_PLUGIN_PATH lets netCDF-C read it)",
                        filter_name(*id, params)
                    )
                });
            }
            match id {
                2 | 3 => {} // shuffle/fletcher32 are reported by their own queries
                _ => {
                    compressed = true;
                    filters.push(filter_name(*id, params));
                }
            }
        }
        if f.fletcher32 {
            filters.push("fletcher32".to_string());
        }
        Ok((
            SourceLayout {
                chunk_shape,
                compressed,
                filters,
            },
            undecodable,
        ))
    }

    fn text(&mut self, loc: VarLoc, p: VarParts, is_char: bool) -> Result<()> {
        // For char arrays the last axis is the string length.
        let (shape, dims): (Vec<u64>, Vec<String>) = if is_char && !p.shape.is_empty() {
            let n = p.shape.len() - 1;
            (p.shape[..n].to_vec(), p.dim_names[..n].to_vec())
        } else {
            (p.shape.clone(), p.dim_names.clone())
        };
        let product = |s: &[u64]| s.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let units = if is_char {
            product(&p.shape)
        } else {
            product(&shape)
        };
        let values_n = product(&shape);
        let (Some(units), Some(values_n)) = (units, values_n) else {
            return self.unsupported(p.full, Feature::Size, "text variable size overflows".into());
        };
        if units > TEXT_LIMIT || values_n > TEXT_LIMIT {
            return self.unsupported(
                p.full,
                Feature::Size,
                format!(
                    "text variable of {units} {} is too large to keep in the metadata",
                    if is_char { "characters" } else { "strings" }
                ),
            );
        }
        let (values, latin1) = text_values(loc, &p, is_char, units, values_n)?;
        let label_dim = if !is_char && p.coordinate {
            Some((p.dim_names[0].clone(), true))
        } else if is_char && p.shape.len() == 2 {
            Some((p.dim_names[0].clone(), false))
        } else {
            None
        };
        if let Some((dim, string_coord)) = label_dim {
            let labels = values
                .iter()
                .map(|s| {
                    if string_coord {
                        s.clone()
                    } else {
                        s.trim_end_matches(['\0', ' ']).to_string()
                    }
                })
                .collect();
            self.candidates.push(LabelCandidate {
                dim,
                var: p.short.clone(),
                string_coord,
                cf_role: p.attrs.iter().any(|(k, _)| k == "cf_role"),
                labels,
            });
        }
        let char_axis = match (is_char, p.shape.last(), p.dim_names.last()) {
            (true, Some(&len), Some(dim)) => Some(CharAxis {
                dim: dim.clone(),
                len,
            }),
            _ => None,
        };
        let mut facts = p.attr_facts;
        if !p.unlimited.is_empty() {
            facts.push(Fact::UnlimitedDims(p.unlimited));
        }
        if latin1 {
            facts.push(Fact::private(
                "nc",
                TEXT_ENCODING,
                AttrValue::Text("latin1".into()),
            ));
        }
        if is_char && char_axis.is_none() {
            facts.push(Fact::private(
                "nc",
                TEXT_TYPE,
                AttrValue::Text("char".into()),
            ));
        }
        self.texts.push(TextVariable {
            name: p.full,
            shape,
            dims: Some(dims),
            values,
            attrs: p.attrs,
            char_axis,
            facts,
        });
        Ok(())
    }
}

/// A variable's facts gathered before its kind decides what it becomes.
struct VarParts {
    full: String,
    short: String,
    dim_names: Vec<String>,
    shape: Vec<u64>,
    attrs: Attrs,
    /// The recorded types of attributes of user types ([`ATTR_TYPE`] facts).
    attr_facts: Vec<Fact>,
    /// Notes on the attributes (values given as JSON text, …).
    attr_notes: Vec<String>,
    coordinate: bool,
    unlimited: Vec<String>,
}
