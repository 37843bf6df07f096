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
//! * **Scalars** (0-d) have an empty shape and no dims.
//! * **Text**: `char` and `string` variables are not numeric. Each becomes a [`TextVariable`]
//!   (values in C order; for `char` the last axis is the string length, each row decoded with
//!   trailing NULs removed; UTF-8, or Latin-1 when the bytes are not UTF-8). Some also label a
//!   dimension through [`Source::dim_labels`]: a 1-D `string` coordinate variable labels its
//!   dimension, and a 2-D `char` variable such as `station_name(station, name_strlen)` labels its
//!   first dimension (labels trimmed of trailing NULs and spaces) — but only when that
//!   dimension has no numeric coordinate variable, which stays the dimension's coordinate as
//!   CF says (the engine would otherwise prefer the importer's labels). Among several `char`
//!   candidates for one dimension, one with a `cf_role` attribute or named in some variable's
//!   `coordinates` attribute wins, else the first.
//! * **Attributes** keep their netCDF type: `byte` → `I8`, …, `double` → `F64`, `char` → `Text`
//!   (trailing NULs removed, except in a variable's `_FillValue`, `missing_value` and `valid_*`,
//!   whose bytes are data values and kept whole: `_FillValue = '\0'` is `"\0"`), `string` → `Text` for one value and `TextList` otherwise, enum →
//!   the underlying integers. Root attributes are the global attributes; a group's attributes
//!   are global attributes named `group/path/name`. The library's hidden attributes
//!   (`_NCProperties`, `_IsNetcdf4`, `_SuperblockVersion`, `_Format`, `_Netcdf4Dimid`,
//!   `_Netcdf4Coordinates`, `_nc3_strict`, `_NCZARR_*`) are not user attributes and are left
//!   out; everything else (`_FillValue`, `_Unsigned`, `history`, …) is kept as is. A variable
//!   using an unlimited dimension gets the fact [`Fact::UnlimitedDims`].
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
//! * Compound, vlen and opaque variables or attributes, and variables whose filter this
//!   libnetcdf/libhdf5 cannot decode, are [`SourceError::Unsupported`] — or listed in
//!   [`Source::skipped`] with the reason under `skip_unsupported`. Text variables with more
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
    ElementType, Fact, Importer, OpenOptions, Result, Role, Skipped, Source, SourceError,
    SourceLayout, TextVariable, Variable,
};

mod cf;
pub mod classic;
pub mod export;
mod ffi;

use cf::Unpacking;
use classic::{ClassicHeader, HeaderError};
use tet_hdf5::chunks::{ChunkAccess, ChunkedVar};

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
                if by_ext == Confidence::Extension || contains(head, b"_NCProperties") {
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
                    h.check_extent(len).map_err(SourceError::Malformed)?;
                    break;
                }
                Err(HeaderError::NeedMore) if (buf.len() as u64) < len.min(MAX_CLASSIC_HEADER) => {
                    let more = (buf.len() as u64).max(64 << 10);
                    if (&mut file).take(more).read_to_end(&mut buf)? == 0 {
                        return Err(SourceError::malformed(
                            "the file shrank while its classic header was read",
                        ));
                    }
                }
                Err(HeaderError::NeedMore) => return Err(SourceError::malformed(
                    "classic netCDF header is larger than 256 MiB or runs past the end of the file",
                )),
                Err(HeaderError::Malformed(m)) => return Err(SourceError::Malformed(m)),
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
        let h =
            ClassicHeader::parse(&bytes, len).map_err(|e| SourceError::Malformed(e.to_string()))?;
        h.check_extent(len).map_err(SourceError::Malformed)?;
    }
    ffi::locked(|| {
        NcSource::build(
            std::sync::Arc::new(ffi::Handle::open_memory(bytes)?),
            len,
            options,
        )
    })
}

/// Names the variable in a read error.
fn with_var(name: &str, e: SourceError) -> SourceError {
    match e {
        SourceError::Malformed(m) => SourceError::Malformed(format!("variable '{name}': {m}")),
        SourceError::Library(m) => SourceError::Library(format!("variable '{name}': {m}")),
        other => other,
    }
}

fn not_netcdf() -> SourceError {
    SourceError::malformed("not a NetCDF file: no CDF-1/2/5 or HDF5 signature")
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
            Err(SourceError::Library(format!(
                "internal error while reading the NetCDF structure: {msg}"
            )))
        })?;
        Ok(NcSource {
            _handle: handle,
            file: None,
            model: parts.model,
            variables: parts.variables,
            plans: parts.plans,
            global_attrs: parts.globals,
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
            if matches!(plan, ReadPlan::Native(loc) if !loc.scalar) && chunked {
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
                if cv.shape() == v.shape.as_slice()
                    && cv.elem_size() == v.dtype.size()
                    && cv.has_chunk_table()
                    && all_stored
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
                .map(|&x| {
                    usize::try_from(x).map_err(|_| {
                        SourceError::InvalidRequest(format!("region index {x} too large"))
                    })
                })
                .collect()
        };
        let (s, c) = if loc.scalar {
            (Vec::new(), Vec::new())
        } else {
            (to_usize(start)?, to_usize(count)?)
        };
        let context = |e: SourceError| match e {
            SourceError::Library(m) => SourceError::Library(format!("variable '{name}': {m}")),
            other => other,
        };
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
        let v = self.variables.get(var).ok_or_else(|| {
            SourceError::InvalidRequest(format!(
                "variable index {var} out of range ({} variables)",
                self.variables.len()
            ))
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
                    .ok_or_else(|| SourceError::InvalidRequest("region too large".into()))?;
                let mut tmp = vec![0u64; bytes.div_ceil(8)];
                let packed = &mut as_bytes_mut(&mut tmp)[..bytes];
                self.read_native(*loc, &v.name, elem, start, count, packed)?;
                u.apply(packed, out);
                Ok(())
            }
            ReadPlan::Direct(cv) => {
                let file = self.file.as_ref().ok_or_else(|| {
                    SourceError::Library("direct chunk read without the file open".into())
                })?;
                cv.read_region(file, start, count, out)
                    .map_err(|e| with_var(&v.name, e))
            }
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
    Unsupported(String),
}

struct EnumInfo {
    name: String,
    base: ElementType,
    members: Vec<(String, i128)>,
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
    texts: Vec<TextVariable>,
    skipped: Vec<Skipped>,
    candidates: Vec<LabelCandidate>,
    /// Variable names listed in `coordinates` attributes.
    coordinate_refs: HashSet<String>,
    /// Unlimited dimension ids of the groups walked so far (ids are file-wide in netCDF-4).
    unlimited: HashSet<c_int>,
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
            texts: Vec::new(),
            skipped: Vec::new(),
            candidates: Vec::new(),
            coordinate_refs: HashSet::new(),
            unlimited: HashSet::new(),
        }
    }

    /// Records an unmappable item: an error, or a skipped entry under `skip_unsupported`.
    fn unsupported(&mut self, name: String, reason: String) -> Result<()> {
        if self.options.skip_unsupported {
            self.skipped.push(Skipped { name, reason });
            Ok(())
        } else {
            Err(SourceError::unsupported(format!("{name}: {reason}")))
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
                return Err(SourceError::unsupported(format!(
                "netCDF format code {other} (not classic, 64-bit offset, 64-bit data or netCDF-4)"
            )))
            }
        };
        let nc4 = self.model.is_netcdf4();
        let mut stack = vec![(root, String::new())];
        let mut walked = 0usize;
        while let Some((g, path)) = stack.pop() {
            walked += 1;
            if walked > MAX_GROUPS {
                return Err(SourceError::malformed(format!(
                    "more than {MAX_GROUPS} groups"
                )));
            }
            let attrs = self.attrs(g, nc::NC_GLOBAL, &path)?;
            if path.is_empty() {
                self.globals = attrs;
            } else {
                self.globals
                    .extend(attrs.into_iter().map(|(k, v)| (join(&path, &k), v)));
            }
            self.unlimited.extend(ffi::unlimdims(g)?);
            let own_dims = if nc4 { Some(ffi::own_dimids(g)?) } else { None };
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
        let labels = self.resolve_labels();
        Ok(Parts {
            model: self.model,
            variables: self.variables,
            plans: self.plans,
            globals: self.globals,
            texts: self.texts,
            labels,
            skipped: self.skipped,
        })
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

    /// The attributes of `varid` (`NC_GLOBAL`: of group `ncid`), hidden ones left out.
    fn attrs(&mut self, ncid: c_int, varid: c_int, owner: &str) -> Result<Attrs> {
        let n = ffi::natts(ncid, varid)?;
        let mut out = Vec::new();
        for i in 0..n {
            let (name, cname) = ffi::att_name(ncid, varid, i)?;
            if is_hidden_attr(&name) {
                continue;
            }
            let (xtype, len) = ffi::att_info(ncid, varid, &cname)?;
            match self.attr_value(ncid, varid, &cname, xtype, len, &name, owner)? {
                Ok(v) => out.push((name, v)),
                Err(reason) => {
                    let who = if owner.is_empty() {
                        format!("global attribute '{name}'")
                    } else if varid == nc::NC_GLOBAL {
                        format!("attribute '{name}' of group '{owner}'")
                    } else {
                        format!("attribute '{name}' of '{owner}'")
                    };
                    self.unsupported(who, reason)?;
                }
            }
        }
        Ok(out)
    }

    /// One attribute's value; the inner `Err` is the reason it has no form here.
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
    ) -> Result<std::result::Result<AttrValue, String>> {
        // Attribute values are stored uncompressed in the file: a count the file cannot hold
        // is corrupt, and is refused before anything is allocated for it.
        let unit = match xtype {
            nc::NC_CHAR | nc::NC_STRING => 1,
            t => atomic(t).map_or(1, |e| e.size() as u64),
        };
        if (len as u128) * u128::from(unit) > u128::from(self.file_len.max(64)) {
            return Err(SourceError::malformed(format!(
                "attribute '{name}' of '{owner}' claims {len} values, more than the file holds"
            )));
        }
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
            return Ok(Ok(AttrValue::Text(decode_text(bytes))));
        }
        if xtype == nc::NC_STRING {
            let mut v: Vec<String> = ffi::get_att_strings(ncid, varid, cname, len)?
                .into_iter()
                .map(|s| s.map(|b| decode_text(&b)).unwrap_or_default())
                .collect();
            return Ok(Ok(if v.len() == 1 {
                AttrValue::Text(v.remove(0))
            } else {
                AttrValue::TextList(v)
            }));
        }
        let t = match atomic(xtype) {
            Some(t) => t,
            None => match self.kind(ncid, xtype)? {
                Kind::Enum(e) => e.base,
                Kind::Unsupported(reason) => return Ok(Err(reason)),
                _ => return Ok(Err(format!("attribute type {xtype} has no form"))),
            },
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
        Ok(Ok(match t {
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
            other => return Ok(Err(format!("attribute type {other} has no form"))),
        }))
    }

    /// The kind of type `xtype` (looked up from group `ncid`).
    fn kind(&mut self, ncid: c_int, xtype: c_int) -> Result<Kind> {
        if let Some(t) = atomic(xtype) {
            return Ok(Kind::Numeric(t));
        }
        match xtype {
            nc::NC_CHAR => return Ok(Kind::Char),
            nc::NC_STRING => return Ok(Kind::Str),
            t if t < nc::NC_FIRSTUSERTYPEID => {
                return Ok(Kind::Unsupported(format!("unknown netCDF type code {t}")))
            }
            _ => {}
        }
        let u = ffi::user_type(ncid, xtype)?;
        Ok(match u.class {
            nc::NC_ENUM => {
                let Some(base) =
                    atomic(u.base).filter(|b| !matches!(b, ElementType::F32 | ElementType::F64))
                else {
                    return Ok(Kind::Unsupported(format!(
                        "enum type '{}' has a non-integer base type {}",
                        u.name, u.base
                    )));
                };
                let n = ffi::enum_len(ncid, xtype)?;
                if n as u64 > self.file_len.max(64) {
                    return Err(SourceError::malformed(format!(
                        "enum type '{}' claims {n} members",
                        u.name
                    )));
                }
                let mut members = Vec::with_capacity(n);
                for i in 0..n {
                    let (name, value) = ffi::enum_member(ncid, xtype, i)?;
                    members.push((name, int_from_ne(base, &value)));
                }
                Kind::Enum(EnumInfo {
                    name: u.name,
                    base,
                    members,
                })
            }
            nc::NC_COMPOUND => Kind::Unsupported(format!(
                "compound type '{}' ({} bytes) has no tensor form",
                u.name, u.size
            )),
            nc::NC_VLEN => Kind::Unsupported(format!(
                "variable-length (vlen) type '{}' has no tensor form",
                u.name
            )),
            nc::NC_OPAQUE => Kind::Unsupported(format!(
                "opaque type '{}' ({} bytes) has no tensor form",
                u.name, u.size
            )),
            c => Kind::Unsupported(format!("user type '{}' of unknown class {c}", u.name)),
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
        let full = join(path, &info.name);
        let mut dim_names = Vec::with_capacity(info.dimids.len());
        let mut shape = Vec::with_capacity(info.dimids.len());
        for &d in &info.dimids {
            let (name, len) = ffi::dim(g, d)?;
            dim_names.push(name);
            shape.push(len);
        }
        let attrs = self.attrs(g, varid, &full)?;
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
            Kind::Unsupported(reason) => self.unsupported(v.full, reason),
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
        let mut v = Variable::new(p.full.clone(), t, p.shape);
        v.attrs = p.attrs;
        if !loc.scalar {
            v.dims = Some(p.dim_names);
        }
        if p.coordinate {
            v.role = Role::Coordinate;
        }
        if !p.unlimited.is_empty() {
            v.facts.push(Fact::UnlimitedDims(p.unlimited));
        }
        if self.model.is_netcdf4() && !loc.scalar {
            v.layout = match self.layout(loc, ndims, &p.full)? {
                Some(l) => l,
                None => return Ok(()), // unsupported filter, recorded
            };
        }
        if let Some(e) = enum_info {
            v.facts.push(Fact::EnumType(e.name.clone()));
            v.facts.push(Fact::EnumMapping(e.members.clone()));
            v.notes.push(format!(
                "netCDF enum '{}': stored as its underlying {} codes; names in enum_mapping",
                e.name, e.base
            ));
            self.push(v, ReadPlan::Native(loc));
            return Ok(());
        }
        if self.options.unpack {
            let fill_on = ffi::var_fill_on(loc.ncid, loc.varid).unwrap_or(true);
            match Unpacking::plan(t, &v.attrs, fill_on) {
                Ok(None) => {}
                Ok(Some(u)) => {
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
        self.push(v, ReadPlan::Native(loc));
        Ok(())
    }

    fn push(&mut self, v: Variable, plan: ReadPlan) {
        self.variables.push(v);
        self.plans.push(plan);
    }

    /// Storage facts of a netCDF-4 variable; `None` when it uses a filter this library cannot
    /// decode (then recorded as unsupported).
    fn layout(&mut self, loc: VarLoc, ndims: usize, name: &str) -> Result<Option<SourceLayout>> {
        let chunk_shape = ffi::var_chunking(loc.ncid, loc.varid, ndims)?;
        let f = ffi::var_filters(loc.ncid, loc.varid)?;
        let mut filters = Vec::new();
        if f.shuffle {
            filters.push("shuffle".to_string());
        }
        let mut compressed = false;
        for (id, params, available) in &f.filters {
            if !available {
                self.unsupported(
                    name.to_string(),
                    format!(
                        "compressed with HDF5 filter {id} ({}), which this netCDF/HDF5 library cannot decode",
                        filter_name(*id, params)
                    ),
                )?;
                return Ok(None);
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
        Ok(Some(SourceLayout {
            chunk_shape,
            compressed,
            filters,
        }))
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
            return self.unsupported(p.full, "text variable size overflows".into());
        };
        if units > TEXT_LIMIT || values_n > TEXT_LIMIT {
            return self.unsupported(
                p.full,
                format!(
                    "text variable of {units} {} is too large to keep in the metadata",
                    if is_char { "characters" } else { "strings" }
                ),
            );
        }
        let context = |e: SourceError, name: &str| match e {
            SourceError::Library(m) => SourceError::Library(format!("variable '{name}': {m}")),
            other => other,
        };
        let usize_shape: Vec<usize> = p.shape.iter().map(|&d| d as usize).collect();
        let values: Vec<String> = if is_char {
            let mut buf = vec![0u8; units as usize];
            if units > 0 {
                let start = vec![0usize; usize_shape.len()];
                ffi::get_vara(loc.ncid, loc.varid, &start, &usize_shape, &mut buf)
                    .map_err(|e| context(e, &p.full))?;
            }
            let strlen = usize_shape.last().copied().unwrap_or(1);
            if strlen == 0 {
                vec![String::new(); values_n as usize]
            } else {
                buf.chunks(strlen)
                    .map(|row| decode_text(trim_nuls(row)))
                    .collect()
            }
        } else {
            ffi::get_var_strings(loc.ncid, loc.varid, &usize_shape, values_n as usize)
                .map_err(|e| context(e, &p.full))?
                .into_iter()
                .map(|s| s.map(|b| decode_text(&b)).unwrap_or_default())
                .collect()
        };
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
        self.texts.push(TextVariable {
            name: p.full,
            shape,
            dims: Some(dims),
            values,
            attrs: p.attrs,
            char_axis,
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
    coordinate: bool,
    unlimited: Vec<String>,
}
