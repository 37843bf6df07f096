//! HDF5 (`.h5`, `.hdf5`, `.he5`, `.hdf`) importer for tet-convert, on the system libhdf5 through
//! hdf5-metno.
//!
//! An HDF5 file is a graph of groups and datasets joined by links. This importer walks it from
//! the root group by *links* (never following soft or external links while walking) and maps:
//!
//! # Mapping
//!
//! * **Variables**: one per dataset reached by a hard link, named by its path without the leading
//!   `/` (`grid/temperature`), in the order of a depth-first walk with links sorted by name. The
//!   first hard link to an object names it; later hard links to the same object are aliases.
//!   A 0-d (scalar dataspace) dataset becomes a 0-d variable (empty shape; the engine stores
//!   and records it), a 0-d string dataset a text variable of one value (shape `[1]`).
//! * **Element types**, delivered little-endian whatever the file's byte order (the bytes are read
//!   in the file's own type, never converted by the library, and byte-swapped here):
//!   every integer size and sign, IEEE f16/f32/f64 and bfloat16 (checked bit layouts; other float
//!   layouts are unsupported); bitfields as unsigned integers; h5py's bool (an enum `FALSE=0,
//!   TRUE=1` over int8) as [`ElementType::Bool`](tet_source::ElementType::Bool); other enums as
//!   their base integer type with the `NAME=value` pairs in the variable's facts
//!   (`enum_mapping`). The engine widens i8, bool and bf16 itself.
//! * **Compound types**: one variable per field, `<dataset>/<field>` (nested compounds join with
//!   `/`); each carries a note saying what it was cut from. A compound of exactly two f32 or two
//!   f64 fields of one type named `r`/`i` or `real`/`imag` (either order, as h5py writes complex
//!   numbers) is a complex number: one variable of
//!   [`ElementType::C64`](tet_source::ElementType::C64) / `C128` (the whole dataset, or the
//!   field's variable when it is a field of a larger compound), read as little-endian (real,
//!   imaginary) pairs whatever the stored order, byte order or padding of the parts; the engine
//!   stores the parts. **Array types** (`H5T_ARRAY`) add trailing axes.
//! * **Opaque** datasets (`H5T_OPAQUE`, h5py's `|V<n>`) are `u8` with a trailing axis of the
//!   blob size and [`Fact::Opaque`] naming the tag (as fields of a compound: `u8` arrays);
//!   opaque attributes are skipped.
//! * **Variable-length sequences** of numbers (`H5T_VLEN`: h5py's `vlen_dtype`, PyTables'
//!   VLArray) are CF contiguous ragged arrays (module `ragged`, `tet_source::ragged`): the
//!   values under the dataset's name and `<name>_count` (`i64`, one per element, with
//!   `sample_dimension`), gathered at open (at most 256 MiB).
//! * **Strings** (fixed or variable length, ASCII or UTF-8, also as compound fields) become
//!   [`TextVariable`]s (values in C order; fixed strings lose their NUL/space padding). A 1-D
//!   string dimension scale also gives [`DimLabels`].
//! * **Unsupported** (an error, or with `skip_unsupported` an entry in [`Source::skipped`]):
//!   references, sequences of anything but numbers, non-IEEE floats, virtual datasets
//!   whose sources cannot be checked (below), datasets with external raw-data files, filters neither this crate nor libhdf5 (with the
//!   plugins it finds in `HDF5_PLUGIN_PATH`) can decode (named in the message, with the plugin
//!   directories searched), compound datasets whose field names collide once `/` becomes `_`
//!   (`a/b` and `a_b`).
//! * **N-bit integers** (padding bits: e.g. 12 bits at bit offset 2 of a 16-bit container) are
//!   read through libhdf5's conversion to the full-width container type (sign-extended), with
//!   the fact `hdf5_nbit` (`precision=12 offset=2`) and a note. **HDF5 time** (`H5T_TIME`,
//!   `H5T_UNIX_D32*`/`D64*`) is delivered as its stored signed integer, with the fact
//!   `hdf5_time` (`H5T_UNIX_D32`) and a note.
//!   Also objects libhdf5 cannot open — a dataset, group or group member list written by a
//!   newer libhdf5 (e.g. h5py with `libver='latest'`: "bad version number for layout message")
//!   or damaged —: their data would be lost, so the message names the object and the library
//!   version (`dataset 'x' cannot be opened by libhdf5 1.10.8: …`).
//! * **Always listed in [`Source::skipped`]** (never an error): null-dataspace datasets ("null
//!   dataspace"), dangling soft links, soft links to groups, named datatypes, external links
//!   that are not followed, netCDF's data-less dimension datasets, unreadable attributes.
//! * **Links**: a soft link to a converted dataset adds its name to the target variable's
//!   `aliases` fact (and a note). External links are reported as skipped ("external link to
//!   `<file>:<path>` not followed (use --follow-external)"); with
//!   [`OpenOptions::follow_external`] a link whose file resolves (canonically) inside the input
//!   file's directory is followed and its dataset (or group) is converted under the link's name.
//! * **Virtual datasets** (VDS, [`vds`]): read through libhdf5 once every source is checked —
//!   sources in the same file (`"."`) always; source files with
//!   [`OpenOptions::follow_external`], when each resolves canonically inside the input's
//!   directory beside the VDS file (where libhdf5 is made to look first, whatever the working
//!   directory or a symbolic link's directory), opens, and holds its source dataset. Regions no
//!   source maps read as the fill value (a note counts them); a missing, outside or unopenable
//!   source file, a missing or too small source dataset, a nested VDS, unlimited mappings and
//!   printf-style (`%b`) source names are unsupported, never filled. The sources are recorded
//!   in the private fact `vds_sources` (`<file as stored>:<dataset>`) and a note.
//! * **Dimension scales**: a dataset with `CLASS = "DIMENSION_SCALE"` is a
//!   [`Role::Coordinate`] (when 1-D) whose dimension is its `NAME` attribute (or its own name).
//!   A dataset with `DIMENSION_LIST` takes its `dims` from the attached scales (the first scale
//!   per axis), else from `DIMENSION_LABELS`; axes still unnamed become `<name>_dim<axis>`. The
//!   bookkeeping attributes (`CLASS`, `NAME` of scales, `REFERENCE_LIST`, `DIMENSION_LIST`,
//!   `DIMENSION_LABELS`, netCDF's `_Netcdf4*`, `_nc3_strict`, `_NCProperties`) are not copied.
//! * **Attributes**: numbers typed (arrays of any rank flattened in C order; f16 as f32),
//!   strings as `Text` (scalar) or `TextList`, bool/enum as their integers, compound values as
//!   JSON `Text` with a note. Root-group attributes are the global attributes; attributes of
//!   other groups are global attributes named `<group path>/<name>`; one whose own name holds a
//!   `/` (h5py writes `a/b`) also gets a [`Fact::AttrGroup`] naming its group. `CLASS` and `NAME` are
//!   ordinary attributes (PyTables' node classes on every group and leaf, in file order)
//!   except on a dimension scale.
//! * **Layout**: `chunk_shape` = the HDF5 chunk shape (plus any array axes), `filters` = labels
//!   such as `shuffle`, `deflate(4)`, `lzf`, `compressed` when any filter compresses.
//!
//! # Reading
//!
//! * Chunked datasets whose filters are all deflate, shuffle, fletcher32, LZF, Blosc, zstd,
//!   bzip2 or LZ4 are read by
//!   [`chunks::ChunkedVar`]: for up to 4096 stored chunks the chunk table (addresses, sizes,
//!   filter masks) is built at open under the HDF5 lock, then every read is a positioned read of
//!   the file plus decoding in Rust — no HDF5 call, no lock. Datasets with more chunks fetch each
//!   chunk's stored bytes with `H5Dread_chunk` under the lock (listing chunks is O(n²) in HDF5
//!   1.10) and decode them outside it. Either way the engine's workers decompress in parallel
//!   ([`Source::parallel_reads`] is `true`).
//! * Contiguous datasets are read with positioned reads at the dataset's file offset (and are
//!   offered to the engine as a [`FileExtent`] when no byte swap or reordering is needed).
//! * Everything else (compact layout, other filters such as szip or those of plugins found in
//!   `HDF5_PLUGIN_PATH`, unallocated storage, types with variable-length parts, N-bit integers)
//!   is read with `H5Dread` hyperslabs in the file's own type (N-bit integers: their container
//!   type), under the library lock.
//!
//! # Robustness
//!
//! libhdf5 parses the file's metadata; this crate checks what it is given before using it: chunk
//! and contiguous-data addresses are checked against the file length, decoded chunks against the
//! chunk size, datatype sizes against their parts, attribute and string sizes against fixed
//! limits. libhdf5 1.10.8 itself crashes (SIGSEGV) or hangs on some corrupt metadata, which no
//! caller can guard against without parsing the file itself: in the byte-flip test about 3 % of
//! the mutated corpus files hit one of two library bugs — iterating a damaged attribute table
//! (`H5Aiterate2` → `H5A__attr_release_table` → `H5A__close`), and reading variable-length
//! strings from a damaged global heap (`H5Aread` → `H5T__conv_vlen` → `H5HG_read`, a `memcpy`
//! out of bounds or an endless loop in `H5HG__protect`). Truncated files are refused cleanly.
//! Skipped attributes are named `<object>/@<attribute>` (`@<attribute>` for the root group).

pub mod chunks;
pub mod filters;
mod ragged;
mod types;
pub mod vds;

/// The hdf5-metno and hdf5-metno-sys crates this importer is built on (for callers of
/// [`chunks::ChunkedVar::from_dataset`]).
pub use ::hdf5;
pub use ::hdf5_sys;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use hdf5::types::VarLenArray;
use hdf5::{IndexType, IterationOrder, LinkType, LocationType, ObjectReference, ObjectReference1};
use hdf5_sys::h5d::{H5D_layout_t, H5Dread, H5Dvlen_reclaim};
use hdf5_sys::h5p::{H5Pget_external_count, H5Pget_layout, H5P_DEFAULT};
use hdf5_sys::h5s::{
    H5S_class_t, H5S_seloper_t, H5Sclose, H5Screate, H5Screate_simple, H5Sget_simple_extent_type,
    H5Sselect_hyperslab, H5S_ALL,
};
use tet_source::{
    check_region, extension_confidence, AttrValue, Attrs, Confidence, DimLabels, Fact, Feature,
    FileExtent, Importer, Lib, OpenOptions, Part, PathIssue, Request, Result, Role, Skipped,
    Source, SourceError, SourceLayout, TextVariable, Variable,
};

use chunks::{ChunkAccess, ChunkedVar};
use filters::FilterSpec;
use types::{AttrOutcome, Kind, Leaf, LeafKind, TypeInfo};

/// The HDF5 signature; at offset 0, or at 512, 1024, 2048, … after a user block.
pub const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Largest string dataset read into the footer (bytes of records in memory).
const MAX_TEXT_BYTES: u64 = 256 << 20;
/// Largest attribute read (bytes).
const MAX_ATTR_BYTES: u64 = 64 << 20;
/// Deepest group nesting / external-link chain followed.
const MAX_DEPTH: usize = 64;
const MAX_EXTERNAL_DEPTH: usize = 8;

/// Whether `head` carries the HDF5 signature at 0 or at a user-block boundary.
pub fn has_signature(head: &[u8]) -> bool {
    let mut off = 0usize;
    loop {
        match head.get(off..off + 8) {
            Some(s) if s == SIGNATURE => return true,
            Some(_) => {}
            None => return false,
        }
        off = if off == 0 { 512 } else { off * 2 };
    }
}

/// What the first bytes of a file say about its HDF5 superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuperblockEnd {
    /// Where the file ends as its superblock records it (the end-of-file address, which
    /// libhdf5 stores as an absolute offset).
    At(u64),
    /// The bytes end inside the superblock's fixed fields.
    CutOff,
    /// No signature, a version other than 0–3, addresses not 8 bytes wide, or an undefined
    /// end-of-file address: nothing to check.
    Unknown,
}

/// Reads the end-of-file address of the HDF5 superblock in `head` (the first bytes of the file;
/// the superblock is at 0, 512, 1024, … after a user block).
pub fn superblock_end_of_file(head: &[u8]) -> SuperblockEnd {
    let mut off = 0usize;
    loop {
        match head.get(off..off + 8) {
            Some(s) if s == SIGNATURE => break,
            Some(_) => {}
            None => return SuperblockEnd::Unknown,
        }
        off = if off == 0 { 512 } else { off * 2 };
    }
    let sb = &head[off..];
    let Some(&version) = sb.get(8) else {
        return SuperblockEnd::CutOff;
    };
    // Where the addresses (base, free space or extension, end of file, …) start, and where the
    // size of an address is.
    let (addresses, size_at) = match version {
        0 => (24, 13),
        1 => (28, 13),
        2 | 3 => (12, 9),
        _ => return SuperblockEnd::Unknown,
    };
    let Some(&size_of_offsets) = sb.get(size_at) else {
        return SuperblockEnd::CutOff;
    };
    if size_of_offsets != 8 {
        return SuperblockEnd::Unknown;
    }
    let addr = |k: usize| -> Option<u64> {
        let at = addresses + 8 * k;
        Some(u64::from_le_bytes(sb.get(at..at + 8)?.try_into().ok()?))
    };
    let Some(eof) = addr(2) else {
        return SuperblockEnd::CutOff;
    };
    if eof == u64::MAX {
        return SuperblockEnd::Unknown;
    }
    SuperblockEnd::At(eof)
}

/// Refuses a file shorter than its HDF5 superblock says it is, before libhdf5 parses it. This is
/// libhdf5's own test (`H5F__super_read`: the file's size against the stored end-of-file
/// address), done first so that the error is clear (netCDF-C reports it as "HDF error") and a
/// cut file never reaches the library's parsers (libhdf5 1.10.8 handles some damaged files
/// badly). `head` is the first bytes of the file (up to 64 KiB), `len` its length, `what` the
/// format for the message (`HDF5`, `netCDF-4`).
pub fn check_not_truncated(head: &[u8], len: u64, what: &str) -> Result<()> {
    match superblock_end_of_file(head) {
        SuperblockEnd::At(end) if end > len => Err(Part::Header.malformed(format!(
            "truncated {what} file: its superblock says it ends at byte {end}, the file has {len} bytes"
        ))),
        SuperblockEnd::CutOff if head.len() as u64 == len => Err(Part::Header.malformed(format!(
            "truncated {what} file: it ends inside its superblock ({len} bytes)"
        ))),
        _ => Ok(()),
    }
}

/// The HDF5 importer plug-in (`h5`).
#[derive(Debug, Clone, Copy, Default)]
pub struct H5Importer;

impl Importer for H5Importer {
    fn id(&self) -> &'static str {
        "h5"
    }

    fn name(&self) -> &'static str {
        "HDF5"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["h5", "hdf5", "he5", "hdf"]
    }

    fn identify(&self, path: &Path, head: &[u8]) -> Confidence {
        if has_signature(head) {
            Confidence::Magic
        } else {
            extension_confidence(path, self.extensions())
        }
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Box<dyn Source>> {
        Ok(Box::new(open_path(path, options)?))
    }
}

fn lib_err(context: impl std::fmt::Display, e: hdf5::Error) -> SourceError {
    SourceError::library(Lib::Hdf5, context.to_string(), e)
}

/// One HDF5 file opened by the source (the input, and files reached by followed external links).
struct OpenFile {
    /// Keeps the HDF5 file open for the datasets below (shared with every other open of the same
    /// file in this process, see [`OpenFiles`]).
    h5: std::sync::Arc<hdf5::File>,
    os: File,
    len: u64,
    dir: PathBuf,
    canonical: PathBuf,
    /// Added to `H5Dget_chunk_info` addresses.
    chunk_base: u64,
}

enum Access {
    Direct(ChunkedVar),
    /// Absolute file offset of the records.
    Contiguous(u64),
    Library,
    /// Values gathered at open (a vlen dataset's values or counts), little-endian.
    Memory(tet_source::ragged::InMemory),
}

/// A dataset as read: its records, and how to get them.
struct Entry {
    name: String,
    file: usize,
    ds: hdf5::Dataset,
    /// The dataset's own type (memory form): reads never convert.
    dtype: hdf5::Datatype,
    record: usize,
    /// Dataspace dimensions; empty for a scalar dataspace.
    outer: Vec<u64>,
    /// Variable-length parts: library reads only, reclaimed after use.
    indirect: bool,
    access: Access,
}

struct Plan {
    entry: usize,
    leaf: Leaf,
}

/// An opened HDF5 file.
pub struct H5Source {
    files: Vec<OpenFile>,
    entries: Vec<Entry>,
    plans: Vec<Plan>,
    variables: Vec<Variable>,
    text_variables: Vec<TextVariable>,
    dim_labels: Vec<DimLabels>,
    global_attrs: Attrs,
    global_facts: Vec<Fact>,
    skipped: Vec<Skipped>,
    parallel: bool,
}

impl Drop for H5Source {
    /// Closes every handle in one step under the library lock, datasets before their files: a
    /// file whose handle is gone but whose datasets are still open would let another thread's
    /// fresh open share those datasets' cached state (see [`OpenFiles`]).
    fn drop(&mut self) {
        hdf5::sync::sync(|| {
            self.plans.clear();
            self.entries.clear();
            self.files.clear();
        });
    }
}

impl std::fmt::Debug for H5Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H5Source")
            .field("files", &self.files.len())
            .field("variables", &self.variables.len())
            .field("text_variables", &self.text_variables.len())
            .field("skipped", &self.skipped)
            .finish()
    }
}

/// Opens an HDF5 file.
pub fn open_path(path: &Path, options: &OpenOptions) -> Result<H5Source> {
    // The whole walk holds the library lock (it is reentrant, so the crate's own per-call locking
    // nests). libhdf5 caches a variable-length datatype's file pointer on the dataset it shares
    // between handles of the same file; walks of one file interleaved call by call from two
    // threads can leave one walk with the other's closed handle and crash inside the library
    // (fill-value conversion of a vlen-string dataset, seen with 1.10.8). One walk at a time
    // keeps each walk's handles consistent.
    hdf5::sync::sync(|| open_path_locked(path, options))
}

fn open_path_locked(path: &Path, options: &OpenOptions) -> Result<H5Source> {
    let mut w = Walker {
        opts: options,
        files: Vec::new(),
        found: Vec::new(),
        by_key: HashMap::new(),
        aliases: Vec::new(),
        global_attrs: Vec::new(),
        global_facts: Vec::new(),
        skipped: Vec::new(),
        followed: HashSet::new(),
    };
    let root = w.open_file(path)?;
    let root_dir = w.files[root].dir.clone();
    let g: hdf5::Group = (**w.files[root].h5).clone();
    let attrs = w.read_attrs(root, &g, "");
    w.add_group_attrs("", attrs);
    w.walk_group(root, &g, "", 0, &root_dir)?;
    w.finish()
}

/// One shared handle per file per process, by (device, inode): a second open of a file gets the
/// first one's handle while it is alive. libhdf5 caches a variable-length datatype's file pointer
/// on the dataset state it shares between all handles of one file; with two handles, closing the
/// one the type points at leaves the other reading freed memory (seen with HDF5 1.10.8 as crashes
/// in the fill-value conversion of vlen-string datasets when threads opened one file
/// concurrently). Used for this crate's `hdf5::File`s and for tet-netcdf's netCDF handles.
pub struct OpenFiles<T>(std::sync::Mutex<Vec<OpenEntry<T>>>);

/// (device, inode) and the shared handle.
type OpenEntry<T> = ((u64, u64), std::sync::Weak<T>);

impl<T> OpenFiles<T> {
    pub const fn new() -> Self {
        OpenFiles(std::sync::Mutex::new(Vec::new()))
    }

    /// The live handle of the file at `path`, or the one `open` makes (then remembered).
    /// Callers hold the library lock, so no other thread opens or closes the file meanwhile.
    pub fn get_or_open(
        &self,
        path: &Path,
        open: impl FnOnce() -> Result<T>,
    ) -> Result<std::sync::Arc<T>> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        let key = (m.dev(), m.ino());
        let mut files = self.0.lock().unwrap_or_else(|e| e.into_inner());
        files.retain(|(_, h)| h.strong_count() > 0);
        if let Some(h) = files
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, h)| h.upgrade())
        {
            return Ok(h);
        }
        let h = std::sync::Arc::new(open()?);
        files.push((key, std::sync::Arc::downgrade(&h)));
        Ok(h)
    }
}

impl<T> Default for OpenFiles<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The HDF5 files this process has open.
static OPEN_FILES: OpenFiles<hdf5::File> = OpenFiles::new();

type ObjKey = (usize, String);

enum Target {
    Dataset(usize),
    Group(String),
    Other(String),
}

/// A dataset found by the walk, before its variables are made.
struct Found {
    name: String,
    file: usize,
    ds: hdf5::Dataset,
    attrs: Attrs,
    notes: Vec<String>,
    /// The dimension name, when the dataset is a dimension scale.
    scale_name: Option<String>,
    netcdf_dim_only: bool,
    dim_refs: Vec<Option<ObjKey>>,
    dim_label_attr: Vec<String>,
    aliases: Vec<String>,
    attr_shapes: Vec<Fact>,
    /// Other facts of the dataset's variables (a virtual dataset's sources).
    facts: Vec<Fact>,
}

/// Attributes of one object, with the dimension-scale bookkeeping set apart.
#[derive(Default)]
struct ObjAttrs {
    attrs: Attrs,
    /// The shapes of the multi-dimensional attributes (their values flattened).
    shapes: Vec<Fact>,
    notes: Vec<String>,
    /// The text of a `CLASS` / `NAME` attribute (also kept in `attrs`, in file order: only a
    /// dimension scale's are bookkeeping, removed by [`Walker::add_dataset`]).
    class: Option<String>,
    name: Option<String>,
    dim_list: Option<Vec<Option<ObjKey>>>,
    labels: Option<Vec<String>>,
}

struct Walker<'a> {
    opts: &'a OpenOptions,
    files: Vec<OpenFile>,
    found: Vec<Found>,
    by_key: HashMap<ObjKey, Target>,
    /// (alias name, target key, target path as the link states it)
    aliases: Vec<(String, ObjKey, String)>,
    global_attrs: Attrs,
    global_facts: Vec<Fact>,
    skipped: Vec<Skipped>,
    followed: HashSet<(PathBuf, String)>,
}

/// Opens the HDF5 file at `path` as one of `files` (once: an open file's index is returned).
fn open_file(files: &mut Vec<OpenFile>, path: &Path) -> Result<usize> {
    let os = File::open(path)?;
    let len = os.metadata()?.len();
    let canonical = std::fs::canonicalize(path)?;
    if let Some(i) = files.iter().position(|f| f.canonical == canonical) {
        return Ok(i);
    }
    // The superblock is at 0, 512, 1024, … (after a user block): look in the first 64 KiB.
    let mut head = vec![0u8; len.min(64 << 10) as usize];
    if len < 8 || os.read_exact_at(&mut head, 0).is_err() {
        return Err(Part::Header.malformed(format!("file of {len} bytes is too short for HDF5")));
    }
    check_not_truncated(&head, len, "HDF5")?;
    if path.to_str().is_none() {
        return Err(Request::Path {
            path: path.to_path_buf(),
            issue: PathIssue::NotUnicode,
        }
        .into());
    }
    let h5 = OPEN_FILES.get_or_open(path, || {
        hdf5::File::open(path)
            .map_err(|e| SourceError::library(Lib::Hdf5, "not a readable HDF5 file", e))
    })?;
    let chunk_base = chunks::chunk_address_base(h5.userblock());
    let dir = canonical
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    files.push(OpenFile {
        h5,
        os,
        len,
        dir,
        canonical,
        chunk_base,
    });
    Ok(files.len() - 1)
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

fn short_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn text_of(v: &AttrValue) -> Option<String> {
    match v {
        AttrValue::Text(s) => Some(s.clone()),
        AttrValue::TextList(l) if l.len() == 1 => Some(l[0].clone()),
        _ => None,
    }
}

const NETCDF_DIM_ONLY: &str = "This is a netCDF dimension but not a netCDF variable";

impl Walker<'_> {
    fn skip(&mut self, name: impl Into<String>, reason: impl Into<String>) {
        self.skipped.push(Skipped {
            name: name.into(),
            reason: reason.into(),
        });
    }

    /// An unmappable item: an error, or skipped with `skip_unsupported`.
    fn unsupported(
        &mut self,
        name: &str,
        feature: Feature,
        reason: impl Into<String>,
    ) -> Result<()> {
        let reason = reason.into();
        if self.opts.skip_unsupported {
            self.skip(name, reason);
            Ok(())
        } else {
            Err(feature.unsupported(format!("dataset '{name}': {reason}")))
        }
    }

    /// An object libhdf5 cannot open (written by a newer libhdf5 — e.g. `libver='latest'`
    /// layout messages —, or damaged): its data would be lost, so it is refused like any
    /// unsupported item, or skipped (and reported) with `skip_unsupported`.
    fn unreadable(&mut self, what: &str, name: &str, e: impl std::fmt::Display) -> Result<()> {
        let (major, minor, patch) = hdf5::library_version();
        let reason = format!("cannot be opened by libhdf5 {major}.{minor}.{patch}: {e}");
        let shown = if name.is_empty() { "/" } else { name };
        if self.opts.skip_unsupported {
            self.skip(shown, format!("{what} {reason}"));
            Ok(())
        } else {
            Err(Feature::Version.unsupported(format!("{what} '{shown}' {reason}")))
        }
    }

    fn open_file(&mut self, path: &Path) -> Result<usize> {
        open_file(&mut self.files, path)
    }

    fn walk_group(
        &mut self,
        file: usize,
        group: &hdf5::Group,
        prefix: &str,
        depth: usize,
        root_dir: &Path,
    ) -> Result<()> {
        if depth > MAX_DEPTH {
            self.skip(
                prefix,
                format!("group nested deeper than {MAX_DEPTH} levels"),
            );
            return Ok(());
        }
        let links = match group.links(IndexType::Name, IterationOrder::Increasing) {
            Ok(l) => l,
            Err(e) => return self.unreadable("group (its members)", prefix, e),
        };
        for (lname, info) in links {
            let path = join(prefix, &lname);
            match info.link_type {
                LinkType::Hard => self.hard_link(file, group, &lname, &path, depth, root_dir)?,
                LinkType::Soft => {
                    let target = link_value(group, &lname)
                        .map(|v| String::from_utf8_lossy(&v).into_owned())
                        .unwrap_or_else(|| "?".into());
                    match group.loc_info_by_name(&lname) {
                        Ok(li) => {
                            let key = (file, format!("{:?}", li.token));
                            self.aliases.push((path, key, target));
                        }
                        Err(_) => self.skip(path, format!("dangling soft link to '{target}'")),
                    }
                }
                LinkType::External => {
                    let Some((efile, eobj)) = external_value(group, &lname) else {
                        self.skip(path, "external link with an unreadable target");
                        continue;
                    };
                    if !self.opts.follow_external {
                        self.skip(
                            path,
                            format!(
                                "external link to {efile}:{eobj} not followed (use --follow-external)"
                            ),
                        );
                        continue;
                    }
                    self.follow_external(file, &path, &efile, &eobj, depth, root_dir)?;
                }
            }
        }
        Ok(())
    }

    fn hard_link(
        &mut self,
        file: usize,
        group: &hdf5::Group,
        lname: &str,
        path: &str,
        depth: usize,
        root_dir: &Path,
    ) -> Result<()> {
        let li = match group.loc_info_by_name(lname) {
            Ok(li) => li,
            Err(e) => return self.unreadable("object", path, e),
        };
        let key = (file, format!("{:?}", li.token));
        if let Some(t) = self.by_key.get(&key) {
            match t {
                Target::Dataset(_) => {
                    let first = path.to_string();
                    self.aliases.push((first.clone(), key, first));
                }
                Target::Group(g) => {
                    let g = g.clone();
                    self.skip(path, format!("hard link to group '{g}', already converted"));
                }
                Target::Other(o) => {
                    let o = o.clone();
                    self.skip(path, format!("hard link to '{o}'"));
                }
            }
            return Ok(());
        }
        match li.loc_type {
            LocationType::Group => {
                self.by_key.insert(key, Target::Group(path.to_string()));
                match group.group(lname) {
                    Ok(g) => {
                        let a = self.read_attrs(file, &g, path);
                        self.add_group_attrs(path, a);
                        self.walk_group(file, &g, path, depth + 1, root_dir)?;
                    }
                    Err(e) => self.unreadable("group", path, e)?,
                }
            }
            LocationType::Dataset => match group.dataset(lname) {
                Ok(ds) => {
                    self.by_key.insert(key, Target::Dataset(self.found.len()));
                    self.add_dataset(file, ds, path, Vec::new());
                }
                Err(e) => self.unreadable("dataset", path, e)?,
            },
            _ => {
                self.by_key.insert(key, Target::Other(path.to_string()));
                self.skip(path, "named datatype (a type definition, no data)");
            }
        }
        Ok(())
    }

    fn follow_external(
        &mut self,
        parent: usize,
        path: &str,
        efile: &str,
        eobj: &str,
        depth: usize,
        root_dir: &Path,
    ) -> Result<()> {
        let what = format!("external link to {efile}:{eobj}");
        let p = Path::new(efile);
        let candidate = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.files[parent].dir.join(p)
        };
        let Ok(canon) = std::fs::canonicalize(&candidate) else {
            self.skip(path, format!("{what}: target file not found"));
            return Ok(());
        };
        if !canon.starts_with(root_dir) {
            self.skip(
                path,
                format!("{what} points outside the input's directory (not followed)"),
            );
            return Ok(());
        }
        if depth > MAX_EXTERNAL_DEPTH || !self.followed.insert((canon.clone(), eobj.to_string())) {
            self.skip(path, format!("{what}: link cycle (not followed again)"));
            return Ok(());
        }
        let fi = match self.open_file(&canon) {
            Ok(i) => i,
            Err(e) => {
                self.skip(path, format!("{what}: {e}"));
                return Ok(());
            }
        };
        let root: hdf5::Group = (**self.files[fi].h5).clone();
        let info = match root.loc_info_by_name(eobj) {
            Ok(i) => i,
            Err(_) => {
                self.skip(path, format!("{what}: target object not found"));
                return Ok(());
            }
        };
        let key = (fi, format!("{:?}", info.token));
        if let Some(Target::Dataset(_)) = self.by_key.get(&key) {
            self.aliases.push((path.to_string(), key, what));
            return Ok(());
        }
        let note = format!("followed {what}");
        match info.loc_type {
            LocationType::Dataset => match root.dataset(eobj) {
                Ok(ds) => {
                    self.by_key.insert(key, Target::Dataset(self.found.len()));
                    self.add_dataset(fi, ds, path, vec![note]);
                }
                Err(e) => self.unreadable("dataset", path, format!("({what}) {e}"))?,
            },
            LocationType::Group => match root.group(eobj) {
                Ok(g) => {
                    self.by_key.insert(key, Target::Group(path.to_string()));
                    let a = self.read_attrs(fi, &g, path);
                    self.add_group_attrs(path, a);
                    self.walk_group(fi, &g, path, depth + 1, root_dir)?;
                }
                Err(e) => self.unreadable("group", path, format!("({what}) {e}"))?,
            },
            _ => self.skip(path, format!("{what}: target is a named datatype")),
        }
        Ok(())
    }

    fn add_dataset(&mut self, file: usize, ds: hdf5::Dataset, path: &str, mut notes: Vec<String>) {
        let a = self.read_attrs(file, &ds, path);
        notes.extend(a.notes);
        let mut attrs = a.attrs;
        let mut shapes = a.shapes;
        let is_scale = a.class.as_deref() == Some("DIMENSION_SCALE");
        let mut scale_name = None;
        let mut netcdf_dim_only = false;
        if is_scale {
            // A scale's CLASS and NAME are bookkeeping (its role and dimension name).
            let bookkeeping = |k: &str| k == "CLASS" || k == "NAME";
            attrs.retain(|(k, _)| !bookkeeping(k));
            shapes.retain(|f| !matches!(f, Fact::AttrShape { attr, .. } if bookkeeping(attr)));
            let nm = a.name.clone().filter(|s| !s.is_empty());
            match nm {
                Some(s) if s.starts_with(NETCDF_DIM_ONLY) => netcdf_dim_only = true,
                Some(s) => scale_name = Some(s),
                None => {}
            }
            if scale_name.is_none() {
                scale_name = Some(short_name(path).to_string());
            }
        }
        // CLASS / NAME of other conventions (PyTables, …) are ordinary attributes, in place.
        self.found.push(Found {
            name: path.to_string(),
            file,
            ds,
            attrs,
            notes,
            scale_name,
            netcdf_dim_only,
            dim_refs: a.dim_list.unwrap_or_default(),
            dim_label_attr: a.labels.unwrap_or_default(),
            aliases: Vec::new(),
            attr_shapes: shapes,
            facts: Vec::new(),
        });
    }

    /// The attributes of the group at `path` become global attributes named `path/name`; one
    /// whose own name holds a `/` gets a [`Fact::AttrGroup`] saying where `path` ends.
    fn add_group_attrs(&mut self, path: &str, a: ObjAttrs) {
        let owned: Vec<Fact> = a
            .attrs
            .iter()
            .filter_map(|(k, _)| Fact::attr_group(path, k))
            .collect();
        self.global_attrs
            .extend(a.attrs.into_iter().map(|(k, v)| (join(path, &k), v)));
        self.global_facts
            .extend(a.shapes.into_iter().map(|f| match f {
                Fact::AttrShape { attr, shape } => Fact::AttrShape {
                    attr: join(path, &attr),
                    shape,
                },
                other => other,
            }));
        self.global_facts.extend(owned);
    }

    fn read_attrs(&mut self, file: usize, loc: &hdf5::Location, owner: &str) -> ObjAttrs {
        let mut out = ObjAttrs::default();
        let label = |n: &str| {
            if owner.is_empty() {
                format!("@{n}")
            } else {
                format!("{owner}/@{n}")
            }
        };
        let names = match loc.attr_names() {
            Ok(n) => n,
            Err(e) => {
                let o = if owner.is_empty() { "/" } else { owner };
                self.skip(o, format!("attributes unreadable: {e}"));
                return out;
            }
        };
        for name in names {
            if name == "REFERENCE_LIST"
                || name.starts_with("_Netcdf4")
                || name == "_nc3_strict"
                || name == "_NCProperties"
            {
                continue;
            }
            let attr = match loc.attr(&name) {
                Ok(a) => a,
                Err(e) => {
                    self.skip(label(&name), format!("attribute unreadable: {e}"));
                    continue;
                }
            };
            if name == "DIMENSION_LIST" {
                out.dim_list = Some(self.dim_list(file, &attr));
                continue;
            }
            let outcome = decode_attribute(&attr);
            match (name.as_str(), outcome) {
                ("DIMENSION_LABELS", AttrOutcome::Value(v, _)) => {
                    out.labels = Some(match v {
                        AttrValue::Text(s) => vec![s],
                        AttrValue::TextList(l) => l,
                        _ => Vec::new(),
                    });
                }
                ("DIMENSION_LABELS", AttrOutcome::Skip(_)) => {}
                (_, AttrOutcome::Value(v, note)) => {
                    // Kept as attributes, and noted for dimension scales (see add_dataset).
                    match name.as_str() {
                        "CLASS" => out.class = text_of(&v),
                        "NAME" => out.name = text_of(&v),
                        _ => {}
                    }
                    if let Some(n) = note {
                        out.notes.push(format!("attribute '{name}': {n}"));
                    }
                    let shape = attr.shape();
                    if shape.len() > 1 {
                        let extents = shape.iter().map(|&d| d as u64).collect();
                        out.shapes.push(Fact::AttrShape {
                            attr: name.clone(),
                            shape: extents,
                        });
                    }
                    out.attrs.push((name.clone(), v));
                }
                (_, AttrOutcome::Skip(reason)) => self.skip(label(&name), reason),
            }
        }
        out
    }

    /// The first dimension scale attached to each axis.
    fn dim_list(&mut self, file: usize, attr: &hdf5::Attribute) -> Vec<Option<ObjKey>> {
        let refs = match attr.read_raw::<VarLenArray<ObjectReference1>>() {
            Ok(r) => r,
            Err(_) => return Vec::new(),
        };
        let root: &hdf5::Location = &self.files[file].h5;
        refs.iter()
            .map(|axis| {
                let r = axis.first()?;
                match r.dereference(root).ok()? {
                    hdf5::ReferencedObject::Dataset(d) => {
                        let info = d.loc_info().ok()?;
                        Some((file, format!("{:?}", info.token)))
                    }
                    _ => None,
                }
            })
            .collect()
    }

    fn finish(mut self) -> Result<H5Source> {
        // Aliases (soft links, extra hard links, external links to converted datasets).
        for (alias, key, target) in std::mem::take(&mut self.aliases) {
            match self.by_key.get(&key) {
                Some(Target::Dataset(i)) => {
                    let i = *i;
                    self.found[i].aliases.push(alias);
                }
                Some(Target::Group(g)) => {
                    let g = g.clone();
                    self.skip(
                        alias,
                        format!("soft link to group '{g}' (its members are converted under their own names)"),
                    );
                }
                _ => self.skip(alias, format!("link to '{target}', which is not converted")),
            }
        }
        // Dimension names of scales, by object.
        let scale_of: HashMap<usize, String> = self
            .found
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.scale_name.clone().map(|s| (i, s)))
            .collect();
        let mut src = H5Source {
            files: Vec::new(),
            entries: Vec::new(),
            plans: Vec::new(),
            variables: Vec::new(),
            text_variables: Vec::new(),
            dim_labels: Vec::new(),
            global_attrs: std::mem::take(&mut self.global_attrs),
            global_facts: std::mem::take(&mut self.global_facts),
            skipped: Vec::new(),
            parallel: false,
        };
        src.files = std::mem::take(&mut self.files);
        let found = std::mem::take(&mut self.found);
        for f in found {
            let n_axes = f.dim_refs.len().max(f.dim_label_attr.len());
            let dims: Vec<Option<String>> = (0..n_axes)
                .map(|axis| {
                    let scale = match f
                        .dim_refs
                        .get(axis)
                        .and_then(Option::as_ref)
                        .and_then(|k| self.by_key.get(k))
                    {
                        Some(Target::Dataset(i)) => scale_of.get(i).cloned(),
                        _ => None,
                    };
                    scale.or_else(|| {
                        f.dim_label_attr
                            .get(axis)
                            .filter(|s| !s.is_empty())
                            .cloned()
                    })
                })
                .collect();
            self.make_variables(&mut src, f, dims)?;
        }
        src.skipped = std::mem::take(&mut self.skipped);
        src.parallel = src
            .entries
            .iter()
            .any(|e| !matches!(e.access, Access::Library));
        Ok(src)
    }

    /// Makes the variables (numeric, text) of one found dataset, or reports it skipped.
    fn make_variables(
        &mut self,
        src: &mut H5Source,
        f: Found,
        dim_names: Vec<Option<String>>,
    ) -> Result<()> {
        if f.netcdf_dim_only {
            self.skip(&f.name, "netCDF dimension without a variable (no data)");
            return Ok(());
        }
        let virt = vds::is_virtual(&f.ds)
            .map_err(|e| SourceError::library(Lib::Hdf5, format!("dataset '{}'", f.name), e))?;
        let f = match virt {
            true => match self.virtual_dataset(src, f)? {
                Some(f) => f,
                None => return Ok(()),
            },
            false => f,
        };
        let name = f.name.as_str();
        let dtype =
            f.ds.dtype()
                .map_err(|e| lib_err(format!("dataset '{name}': datatype"), e))?;
        let Some((scalar, outer)) = self.dataspace(&f)? else {
            return Ok(());
        };
        if let Some(base) = types::vlen_base(dtype.id()) {
            return self.vlen_dataset(src, &f, &dtype, &base, &outer, &dim_names);
        }
        let info = types::analyze(dtype.id());
        let opaque = types::opaque_tag(dtype.id());
        let leaves = types::flatten(&info);
        // Two leaves with one name (fields `a/b` and `a_b`: `/` becomes `_`; an unnamed field
        // and one named `field_<i>`) cannot both be variables: this dataset is an unsupported
        // item, the rest of the file converts.
        let mut seen = HashSet::new();
        if let Some(dup) = leaves.iter().find(|l| !seen.insert(l.suffix.as_str())) {
            return self.unsupported(
                name,
                Feature::DataType,
                format!(
                    "compound fields collide as '{name}{}' once '/' in field names becomes '_'",
                    dup.suffix
                ),
            );
        }
        let Some(dtype) = self.read_type(name, dtype, &info)? else {
            return Ok(());
        };
        let n_records = outer
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| Part::Shape.malformed(format!("dataset '{name}': shape overflows")))?;
        let record = info.size;
        let nbit = types::has_nbit(&info);
        let Some(storage) = self.storage(src, &f, &dtype, record, n_records, nbit)? else {
            return Ok(());
        };
        let entry = src.entries.len();
        src.entries.push(Entry {
            name: name.to_string(),
            file: f.file,
            ds: f.ds.clone(),
            dtype,
            record,
            outer: outer.clone(),
            indirect: storage.indirect,
            access: storage.access,
        });
        let all_named = !dim_names.is_empty()
            && dim_names.len() == outer.len()
            && dim_names.iter().any(Option::is_some);
        let mut d = DatasetVars {
            f: &f,
            info: &info,
            leaves: &leaves,
            outer: &outer,
            scalar,
            n_records,
            record,
            entry,
            chunk_shape: storage.chunk_shape,
            filters: storage.specs.iter().map(FilterSpec::label).collect(),
            compressed: storage.specs.iter().any(FilterSpec::is_compression),
            dim_names: all_named.then_some(dim_names),
            texts: None,
        };
        let before = src.variables.len();
        for (li, leaf) in leaves.iter().enumerate() {
            self.add_leaf(src, &mut d, li, leaf)?;
        }
        // An opaque dataset is `u8` with a trailing axis of the blob size: recorded as such.
        if let (Some(tag), Some(v)) = (opaque, src.variables.get_mut(before)) {
            v.notes.push(format!(
                "HDF5 opaque type{} of {record} bytes: u8 along the trailing axis",
                if tag.is_empty() {
                    String::new()
                } else {
                    format!(" (tag '{tag}')")
                }
            ));
            v.facts.push(Fact::Opaque { type_name: tag });
        }
        Ok(())
    }

    /// A variable-length sequence dataset of numbers: a CF contiguous ragged array (module
    /// `ragged`), its values and counts gathered now.
    fn vlen_dataset(
        &mut self,
        src: &mut H5Source,
        f: &Found,
        dtype: &hdf5::Datatype,
        base: &TypeInfo,
        outer: &[u64],
        dim_names: &[Option<String>],
    ) -> Result<()> {
        let name = f.name.as_str();
        let Some((et, be)) = types::numeric_type(base) else {
            let why = format!(
                "variable-length sequence of {} has no tensor form (sequences of numbers \
                 become ragged arrays)",
                types::describe(base)
            );
            return self.unsupported(name, Feature::DataType, why);
        };
        let n = outer
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| Part::Shape.malformed(format!("dataset '{name}': shape overflows")))?;
        let gathered = match ragged::read_sequences(f.ds.id(), dtype.id(), n, et, be, name) {
            Err(SourceError::Unsupported { feature, detail }) => {
                return self.unsupported(name, feature, detail)
            }
            r => r?,
        };
        let mut v = Variable::new(name, et, outer.to_vec());
        v.attrs = f.attrs.clone();
        v.notes = f.notes.clone();
        v.facts = f.attr_shapes.iter().chain(&f.facts).cloned().collect();
        if let Kind::Enum { members, .. } = &base.kind {
            v.facts.push(Fact::EnumMapping(members.clone()));
        }
        if !outer.is_empty()
            && dim_names.len() == outer.len()
            && dim_names.iter().any(Option::is_some)
        {
            let short = short_name(name);
            v.dims = Some(
                dim_names
                    .iter()
                    .enumerate()
                    .map(|(k, d)| d.clone().unwrap_or_else(|| format!("{short}_dim{k}")))
                    .collect(),
            );
        }
        let ((values, vdata), (count, cdata)) = gathered.into_variables(v, "")?;
        for (var, data) in [(values, vdata), (count, cdata)] {
            let size = var.dtype.size();
            src.entries.push(Entry {
                name: var.name.clone(),
                file: f.file,
                ds: f.ds.clone(),
                dtype: dtype.clone(),
                record: size,
                outer: var.shape.clone(),
                indirect: false,
                access: Access::Memory(data),
            });
            src.plans.push(Plan {
                entry: src.entries.len() - 1,
                leaf: types::le_leaf(var.dtype),
            });
            src.variables.push(var);
        }
        Ok(())
    }

    /// The dataspace of a found dataset: whether it is scalar and its extents (none for a
    /// scalar); `None` for a null dataspace, which is reported as skipped.
    fn dataspace(&mut self, f: &Found) -> Result<Option<(bool, Vec<u64>)>> {
        let name = &f.name;
        let space =
            f.ds.space()
                .map_err(|e| lib_err(format!("dataset '{name}': dataspace"), e))?;
        // SAFETY: a by-value query of an open dataspace id under the library lock (libhdf5
        // checks the id).
        let class = hdf5::sync::sync(|| unsafe { H5Sget_simple_extent_type(space.id()) });
        match class {
            H5S_class_t::H5S_NULL => {
                self.skip(name, "null dataspace");
                Ok(None)
            }
            H5S_class_t::H5S_SCALAR => Ok(Some((true, Vec::new()))),
            H5S_class_t::H5S_SIMPLE => Ok(Some((
                false,
                space.shape().iter().map(|&d| d as u64).collect(),
            ))),
            _ => Err(Part::Shape.malformed(format!("dataset '{name}': bad dataspace"))),
        }
    }

    /// The type a dataset is read in: its own, or for N-bit integers the full-width memory type
    /// libhdf5 converts them to; `None` when libhdf5 refuses that type (reported as
    /// unsupported).
    fn read_type(
        &mut self,
        name: &str,
        dtype: hdf5::Datatype,
        info: &TypeInfo,
    ) -> Result<Option<hdf5::Datatype>> {
        if !types::has_nbit(info) {
            return Ok(Some(dtype));
        }
        let mem = types::memory_type(dtype.id()).map(|id| {
            // SAFETY: `memory_type` returns a fresh datatype id this code owns; the handle takes
            // over its one reference (and closes it).
            unsafe { hdf5::from_id::<hdf5::Datatype>(id) }
        });
        match mem {
            Some(Ok(t)) => Ok(Some(t)),
            _ => self
                .unsupported(
                    name,
                    Feature::DataType,
                    format!(
                        "integers with padding bits ({}) that libhdf5 cannot convert",
                        types::describe(info)
                    ),
                )
                .map(|()| None),
        }
    }

    /// How a dataset is stored and will be read; `None` when it cannot be read (external raw
    /// data, filters nobody decodes: reported as unsupported). A virtual dataset (checked by
    /// [`Walker::virtual_dataset`]) is read through the library.
    fn storage(
        &mut self,
        src: &H5Source,
        f: &Found,
        dtype: &hdf5::Datatype,
        record: usize,
        n_records: u64,
        nbit: bool,
    ) -> Result<Option<Storage>> {
        let name = f.name.as_str();
        let dcpl =
            f.ds.dcpl()
                .map_err(|e| lib_err(format!("dataset '{name}': creation properties"), e))?;
        // SAFETY: by-value queries of an open property list under the library lock.
        let (layout, n_external) = hdf5::sync::sync(|| unsafe {
            (H5Pget_layout(dcpl.id()), H5Pget_external_count(dcpl.id()))
        });
        if layout == H5D_layout_t::H5D_VIRTUAL {
            return Ok(Some(Storage {
                access: Access::Library,
                chunk_shape: None,
                specs: Vec::new(),
                indirect: chunks::type_has_indirection(dtype.id()),
            }));
        }
        if n_external > 0 {
            return self
                .unsupported(
                    name,
                    Feature::Layout,
                    "raw data stored in external files is not read",
                )
                .map(|()| None);
        }
        let chunked = layout == H5D_layout_t::H5D_CHUNKED;
        let specs = if chunked {
            filters::read_pipeline(dcpl.id())?
        } else {
            Vec::new()
        };
        let Some(ours_only) = self.ours_only_filters(name, &specs, record)? else {
            return Ok(None);
        };
        let indirect = chunks::type_has_indirection(dtype.id());
        let (chunk_base, file_len) = (src.files[f.file].chunk_base, src.files[f.file].len);
        let mut chunk_shape = None;
        let access = if indirect || nbit {
            if !ours_only.is_empty() {
                return self.unsupported(
                    name,
                    Feature::Codec,
                    format!(
                        "{} chunks of a type with variable-length parts or N-bit integers: libhdf5 has no plugin for the filter (HDF5_PLUGIN_PATH) and direct decoding needs records as stored",
                        ours_only.join(", ")
                    ),
                ).map(|()| None);
            }
            Access::Library
        } else if chunked {
            match self.chunked_access(f, chunk_base, file_len, &ours_only)? {
                Some((access, direct_chunk)) => {
                    chunk_shape = direct_chunk;
                    access
                }
                None => return Ok(None),
            }
        } else if layout == H5D_layout_t::H5D_CONTIGUOUS {
            contiguous_access(f, n_records, record, file_len)?
        } else {
            Access::Library
        };
        if chunk_shape.is_none() && chunked {
            chunk_shape = f.ds.chunk().map(|c| c.iter().map(|&d| d as u64).collect());
        }
        Ok(Some(Storage {
            access,
            chunk_shape,
            specs,
            indirect,
        }))
    }

    /// The filters of `specs` only this crate decodes (libhdf5 has no plugin for them): the
    /// dataset must then be read by direct chunk access, never by `H5Dread`. `None` when a
    /// filter can be decoded by neither (reported as unsupported).
    fn ours_only_filters(
        &mut self,
        name: &str,
        specs: &[FilterSpec],
        record: usize,
    ) -> Result<Option<Vec<String>>> {
        let mut ours_only: Vec<String> = Vec::new();
        for s in specs {
            let ours = s.decoder(record).is_some();
            // H5Zfilter_avail also loads a plugin for the id from HDF5_PLUGIN_PATH.
            // SAFETY: a by-value query of a filter id under the library lock.
            let avail = hdf5::sync::sync(|| unsafe { hdf5_sys::h5z::H5Zfilter_avail(s.id) }) > 0;
            if !ours && !avail {
                return self
                    .unsupported(name, Feature::Codec, filter_unavailable(s))
                    .map(|()| None);
            }
            if !avail {
                ours_only.push(s.label());
            }
        }
        Ok(Some(ours_only))
    }

    /// Direct chunk access to a chunked dataset (with its chunk shape) when its pipeline and
    /// type allow, else the library; `None` when only direct access could decode its filters
    /// (`ours_only`) and it is not possible (reported as unsupported).
    fn chunked_access(
        &mut self,
        f: &Found,
        chunk_base: u64,
        file_len: u64,
        ours_only: &[String],
    ) -> Result<Option<(Access, Option<Vec<u64>>)>> {
        match ChunkedVar::from_dataset(&f.ds, &f.name, chunk_base, file_len)? {
            ChunkAccess::Direct(cv) => {
                let chunk_shape = Some(cv.chunk_shape().to_vec());
                Ok(Some((Access::Direct(cv), chunk_shape)))
            }
            ChunkAccess::Library(why) => {
                if !ours_only.is_empty() {
                    return self.unsupported(
                        &f.name,
                        Feature::Codec,
                        format!(
                            "{}-compressed, but its chunks cannot be read directly ({why}) and libhdf5 has no plugin for the filter (HDF5_PLUGIN_PATH)",
                            ours_only.join(", ")
                        ),
                    ).map(|()| None);
                }
                Ok(Some((Access::Library, None)))
            }
        }
    }

    /// Makes the variable of one leaf of a dataset (or reports it unsupported).
    fn add_leaf(
        &mut self,
        src: &mut H5Source,
        d: &mut DatasetVars<'_>,
        li: usize,
        leaf: &Leaf,
    ) -> Result<()> {
        let name = format!("{}{}", d.f.name, leaf.suffix);
        let inner: Vec<u64> = leaf.inner.iter().map(|&(n, _)| n).collect();
        let shape: Vec<u64> = d.outer.iter().chain(&inner).copied().collect();
        let mut notes: Vec<String> = leaf.notes.clone();
        notes.extend(d.f.notes.iter().cloned());
        if d.scalar && !shape.is_empty() {
            notes.push("0-d dataset of an array type: the array's axes only".into());
        }
        let dims = d.dims(&name, inner.len());
        let v = LeafVar {
            name,
            inner,
            shape,
            dims,
            notes,
        };
        match &leaf.kind {
            LeafKind::Numeric { .. } => {
                src.push_numeric(d, leaf, v);
                Ok(())
            }
            LeafKind::Text => self.add_text(src, d, li, v),
            LeafKind::Unsupported(why) => self.unsupported(
                &v.name,
                Feature::DataType,
                format!("{why} (HDF5 type {})", types::describe(d.info)),
            ),
        }
    }

    /// Makes the text variable of a string leaf (and the dimension labels of a string scale).
    fn add_text(
        &mut self,
        src: &mut H5Source,
        d: &mut DatasetVars<'_>,
        li: usize,
        v: LeafVar,
    ) -> Result<()> {
        let bytes = d.n_records.saturating_mul(d.record as u64);
        if bytes > MAX_TEXT_BYTES {
            return self.unsupported(
                &v.name,
                Feature::Size,
                format!("string dataset of {bytes} bytes is too large for the footer"),
            );
        }
        if d.texts.is_none() {
            d.texts = Some(src.read_texts(d.entry, d.leaves)?);
        }
        let values = d
            .texts
            .as_ref()
            .and_then(|t| t.get(li))
            .cloned()
            .unwrap_or_default();
        if d.is_coordinate(v.inner.len()) {
            if let Some(dim) = &d.f.scale_name {
                src.dim_labels.push(DimLabels {
                    dim: dim.clone(),
                    labels: values.clone(),
                });
            }
        }
        for a in &d.f.aliases {
            self.skip(
                a,
                format!("link to string dataset '{}' (kept once)", d.f.name),
            );
        }
        // A 0-d string dataset is one string: text variables have no 0-d form.
        let shape = if v.shape.is_empty() { vec![1] } else { v.shape };
        src.text_variables.push(TextVariable {
            name: v.name,
            shape,
            dims: v.dims,
            values,
            attrs: d.f.attrs.clone(),
            char_axis: None,
            facts: Vec::new(),
        });
        Ok(())
    }
}

/// How a found dataset is stored and will be read.
struct Storage {
    access: Access,
    /// The source chunk shape (of the dataset's own axes).
    chunk_shape: Option<Vec<u64>>,
    /// The filter pipeline.
    specs: Vec<FilterSpec>,
    /// The type has variable-length parts.
    indirect: bool,
}

/// What the variables of one dataset share while [`Walker::make_variables`] makes them.
struct DatasetVars<'a> {
    f: &'a Found,
    info: &'a TypeInfo,
    leaves: &'a [Leaf],
    /// The dataset's extents (none for a scalar).
    outer: &'a [u64],
    scalar: bool,
    n_records: u64,
    /// Bytes per record.
    record: usize,
    /// Index of the dataset's [`Entry`].
    entry: usize,
    chunk_shape: Option<Vec<u64>>,
    filters: Vec<String>,
    compressed: bool,
    /// One name per axis (`None`: unnamed), when the dataset names at least one of them.
    dim_names: Option<Vec<Option<String>>>,
    /// The values of every text leaf, read once for the first.
    texts: Option<Vec<Vec<String>>>,
}

impl DatasetVars<'_> {
    /// Whether the leaf with `inner_axes` array axes is a coordinate: the whole record of a
    /// 1-D dimension scale.
    fn is_coordinate(&self, inner_axes: usize) -> bool {
        self.f.scale_name.is_some() && self.outer.len() == 1 && inner_axes == 0
    }

    /// The dimension names of the variable `name` with `inner_axes` array axes: a scale's own
    /// dimension, or the dataset's named axes (unnamed ones `<dataset>_dim<axis>`) followed by
    /// `<variable>_dim<axis>` for the array axes; `None` when the dataset names no axis.
    fn dims(&self, name: &str, inner_axes: usize) -> Option<Vec<String>> {
        if self.is_coordinate(inner_axes) {
            return self.f.scale_name.clone().map(|s| vec![s]);
        }
        let named = self.dim_names.as_ref()?;
        let short = short_name(&self.f.name);
        let mut d: Vec<String> = named
            .iter()
            .enumerate()
            .map(|(a, n)| n.clone().unwrap_or_else(|| format!("{short}_dim{a}")))
            .collect();
        let leaf_short = short_name(name);
        let outer = self.outer.len();
        d.extend((0..inner_axes).map(|k| format!("{leaf_short}_dim{}", outer + k)));
        Some(d)
    }
}

/// One leaf's variable as far as every kind of leaf shares it.
struct LeafVar {
    name: String,
    /// The array type's axes (trailing).
    inner: Vec<u64>,
    shape: Vec<u64>,
    dims: Option<Vec<String>>,
    notes: Vec<String>,
}

/// The access to a contiguous dataset: positioned reads at its records' file offset when its
/// storage is allocated (and inside the file), else the library (nothing written yet).
fn contiguous_access(f: &Found, n_records: u64, record: usize, file_len: u64) -> Result<Access> {
    let name = &f.name;
    // HDF5 1.10 adds the user block to an undefined address of unallocated storage, so the
    // offset counts only when the storage is allocated.
    let allocated = |_: &u64| {
        n_records
            .checked_mul(record as u64)
            .is_some_and(|n| n > 0 && f.ds.storage_size() >= n)
    };
    let Some(off) = f.ds.offset().filter(allocated) else {
        return Ok(Access::Library);
    };
    let end = n_records
        .checked_mul(record as u64)
        .and_then(|n| n.checked_add(off));
    match end {
        Some(e) if e <= file_len => Ok(Access::Contiguous(off)),
        _ => Err(Part::Index.malformed(format!(
            "dataset '{name}': contiguous data at byte {off} runs past the end of the file ({file_len} bytes)"
        ))),
    }
}

/// The notes (appended to `notes`) and the facts of a numeric leaf.
fn numeric_notes_and_facts(d: &DatasetVars<'_>, leaf: &Leaf, notes: &mut Vec<String>) -> Vec<Fact> {
    let mut facts: Vec<Fact> = Vec::new();
    let LeafKind::Numeric {
        dtype: et,
        be,
        enum_mapping,
    } = &leaf.kind
    else {
        return facts;
    };
    if *be && et.size() > 1 {
        notes.push("big-endian on disk; stored little-endian".into());
    }
    if let Kind::Enum { is_bool: true, .. } = leaf.ty.kind {
        notes.push("h5py bool: HDF5 enum {FALSE:0, TRUE:1} over int8".into());
    }
    if let Kind::Int { bitfield: true, .. } = leaf.ty.kind {
        notes.push("HDF5 bitfield delivered as an unsigned integer".into());
    }
    if let Kind::Int {
        nbit: Some((prec, off)),
        ..
    } = leaf.ty.kind
    {
        let bytes = leaf.ty.size;
        notes.push(format!(
            "N-bit integer: {prec} bits at bit offset {off} of a {bytes}-byte container, delivered as the container type ({}; libhdf5's conversion, sign-extended when signed)",
            et.name()
        ));
        facts.push(Fact::private(
            "h5",
            "hdf5_nbit",
            AttrValue::Text(format!("precision={prec} offset={off}")),
        ));
    }
    if let Kind::Int { time: true, .. } = leaf.ty.kind {
        notes.push(format!(
            "HDF5 time type (H5T_TIME, {}-bit): delivered as its stored integer (seconds since the Unix epoch by HDF5's definition)",
            leaf.ty.size * 8
        ));
        facts.push(Fact::private(
            "h5",
            "hdf5_time",
            AttrValue::Text(format!("H5T_UNIX_D{}", leaf.ty.size * 8)),
        ));
    }
    if let Some(m) = enum_mapping {
        notes.push(
            "HDF5 enum: stored as the underlying integer codes; mapping in enum_mapping".into(),
        );
        facts.push(Fact::EnumMapping(m.clone()));
    }
    let f = d.f;
    if !f.aliases.is_empty() {
        for a in &f.aliases {
            notes.push(format!("also reachable as '{a}' (link)"));
        }
        facts.push(Fact::Aliases(f.aliases.clone()));
    }
    if d.leaves.len() > 1 || !leaf.suffix.is_empty() {
        facts.push(Fact::SourceDataset(f.name.clone()));
    }
    facts.extend(f.attr_shapes.iter().cloned());
    facts.extend(f.facts.iter().cloned());
    facts
}

impl H5Source {
    /// Adds the variable of a numeric leaf (and its read plan).
    fn push_numeric(&mut self, d: &DatasetVars<'_>, leaf: &Leaf, v: LeafVar) {
        let LeafKind::Numeric { dtype, .. } = leaf.kind else {
            return;
        };
        let mut notes = v.notes;
        let facts = numeric_notes_and_facts(d, leaf, &mut notes);
        let role = if d.is_coordinate(v.inner.len()) {
            Role::Coordinate
        } else {
            Role::Data
        };
        let layout = SourceLayout {
            chunk_shape: d.chunk_shape.as_ref().map(|c| {
                let mut c = c.clone();
                c.extend(&v.inner);
                c
            }),
            compressed: d.compressed,
            filters: d.filters.clone(),
        };
        self.variables.push(Variable {
            name: v.name,
            dtype,
            shape: v.shape,
            dims: v.dims,
            attrs: d.f.attrs.clone(),
            layout,
            role,
            notes,
            facts,
        });
        self.plans.push(Plan {
            entry: d.entry,
            leaf: leaf.clone(),
        });
    }
}

/// Why a filter can be decoded neither here nor by libhdf5: names the filter once (`filter
/// blosc2 (id 32026)`, `filter sz (id 32017)`) and where libhdf5 looked for a plugin.
fn filter_unavailable(s: &FilterSpec) -> String {
    let mut named = s.named();
    if s.id == filters::FILTER_BLOSC2 {
        if let Some(why) = filters::blosc2::unsupported_variant(&s.cd_values) {
            named = format!("{named} with {why}");
        }
    }
    let (major, minor, patch) = hdf5::library_version();
    let paths = plugin_paths();
    let searched = if paths.is_empty() {
        "no plugin directories".to_string()
    } else {
        paths.join(":")
    };
    format!(
        "filter {named} has no decoder here and libhdf5 {major}.{minor}.{patch} found no plugin for it (searched {searched}; set HDF5_PLUGIN_PATH to the directory of the filter's plugin, e.g. hdf5plugin's)"
    )
}

/// The directories libhdf5 searches for filter plugins (`HDF5_PLUGIN_PATH`, or its default).
fn plugin_paths() -> Vec<String> {
    use hdf5_sys::h5pl::{H5PLget, H5PLsize};
    hdf5::sync::sync(|| {
        let mut n: std::os::raw::c_uint = 0;
        // SAFETY: H5PLsize writes one unsigned int into `n`; under the library lock.
        if unsafe { H5PLsize(&mut n) } < 0 {
            return Vec::new();
        }
        (0..n.min(64))
            .filter_map(|i| {
                let mut buf = vec![0u8; 4096];
                // SAFETY: `buf` has `buf.len()` writable bytes; libhdf5 writes at most that many,
                // NUL included, and returns the path's length; under the library lock.
                let len = unsafe { H5PLget(i, buf.as_mut_ptr().cast(), buf.len()) };
                let len = usize::try_from(len).ok()?.min(buf.len());
                buf.truncate(len);
                if let Some(p) = buf.iter().position(|&b| b == 0) {
                    buf.truncate(p);
                }
                Some(String::from_utf8_lossy(&buf).into_owned())
            })
            .collect()
    })
}

/// The raw value of a soft or external link.
fn link_value(group: &hdf5::Group, name: &str) -> Option<Vec<u8>> {
    use hdf5_sys::h5l::{H5L_info1_t, H5Lget_info1, H5Lget_val};
    let cname = std::ffi::CString::new(name).ok()?;
    hdf5::sync::sync(|| {
        let mut info = H5L_info1_t::default();
        // SAFETY: under the library lock; `cname` is a live NUL-terminated string and libhdf5
        // writes one `H5L_info1_t` into `info`.
        if unsafe { H5Lget_info1(group.id(), cname.as_ptr(), &mut info, H5P_DEFAULT) } < 0 {
            return None;
        }
        // SAFETY: `val_size` points at the union's 8-byte storage inside `info` (live, aligned
        // for a `size_t`); libhdf5 set that member for soft and external links, the only kinds
        // this is called for, and any bit pattern is a valid `size_t`.
        let size = unsafe { *info.u.val_size() };
        if size == 0 || size > 1 << 20 {
            return None;
        }
        let mut buf = vec![0u8; size];
        // SAFETY: under the library lock; libhdf5 writes at most `size` bytes (the size passed)
        // into `buf`, which is `size` bytes long; `cname` as above.
        let rc = unsafe {
            H5Lget_val(
                group.id(),
                cname.as_ptr(),
                buf.as_mut_ptr().cast(),
                size,
                H5P_DEFAULT,
            )
        };
        if rc < 0 {
            return None;
        }
        let mut v = buf;
        if let Some(p) = v.iter().position(|&b| b == 0) {
            if !matches!(info.type_, hdf5_sys::h5l::H5L_type_t::H5L_TYPE_EXTERNAL) {
                v.truncate(p);
            }
        }
        Some(v)
    })
}

/// The (file, object path) of an external link.
fn external_value(group: &hdf5::Group, name: &str) -> Option<(String, String)> {
    use hdf5_sys::h5l::H5Lunpack_elink_val;
    let v = link_value(group, name)?;
    let len = v.len();
    hdf5::sync::sync(|| {
        let mut flags = 0u32;
        let mut file: *const std::os::raw::c_char = std::ptr::null();
        let mut obj: *const std::os::raw::c_char = std::ptr::null();
        // SAFETY: under the library lock; libhdf5 reads `len` bytes of `v` (its length) and
        // writes one value into each of `flags`, `file` and `obj`.
        let rc =
            unsafe { H5Lunpack_elink_val(v.as_ptr().cast(), len, &mut flags, &mut file, &mut obj) };
        if rc < 0 || file.is_null() || obj.is_null() {
            return None;
        }
        // SAFETY: on success `file` and `obj` point into `v`, which outlives this closure, at
        // NUL-terminated strings: libhdf5 refuses a value whose last byte is not NUL, so both
        // strings end inside `v`.
        let (f, o) = unsafe {
            (
                std::ffi::CStr::from_ptr(file)
                    .to_string_lossy()
                    .into_owned(),
                std::ffi::CStr::from_ptr(obj).to_string_lossy().into_owned(),
            )
        };
        Some((f, o))
    })
}

/// Reads and decodes one attribute in its own type.
fn decode_attribute(attr: &hdf5::Attribute) -> AttrOutcome {
    let (space, dtype) = match (attr.space(), attr.dtype()) {
        (Ok(s), Ok(t)) => (s, t),
        (Err(e), _) | (_, Err(e)) => {
            return AttrOutcome::Skip(format!("attribute unreadable: {e}"))
        }
    };
    // SAFETY: a by-value query of an open dataspace id under the library lock.
    let class = hdf5::sync::sync(|| unsafe { H5Sget_simple_extent_type(space.id()) });
    let scalar = match class {
        H5S_class_t::H5S_NULL => {
            return AttrOutcome::Skip("empty attribute (null dataspace, no value)".into())
        }
        H5S_class_t::H5S_SCALAR => true,
        H5S_class_t::H5S_SIMPLE => false,
        _ => return AttrOutcome::Skip("attribute with a bad dataspace".into()),
    };
    let n = if scalar {
        Some(1u64)
    } else {
        space
            .shape()
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
    };
    let info = types::analyze(dtype.id());
    if types::opaque_tag(dtype.id()).is_some() {
        return AttrOutcome::Skip("opaque bytes attribute".into());
    }
    let bytes = n
        .and_then(|n| n.checked_mul(info.size as u64))
        .filter(|&b| b <= MAX_ATTR_BYTES);
    let (Some(n), Some(bytes)) = (n, bytes) else {
        return AttrOutcome::Skip("attribute too large".into());
    };
    if let Kind::Other(what) = &info.kind {
        return AttrOutcome::Skip(format!("{what} attribute"));
    }
    // N-bit integers: read converted to their container type (as datasets are).
    let dtype = if types::has_nbit(&info) {
        let mem = types::memory_type(dtype.id()).map(|id| {
            // SAFETY: `memory_type` returns a fresh datatype id this code owns; the handle takes
            // over its one reference (and closes it).
            unsafe { hdf5::from_id::<hdf5::Datatype>(id) }
        });
        match mem {
            Some(Ok(t)) => t,
            _ => return AttrOutcome::Skip("N-bit integer attribute libhdf5 cannot convert".into()),
        }
    } else {
        dtype
    };
    let indirect = chunks::type_has_indirection(dtype.id());
    let mut buf = vec![0u8; (bytes as usize).max(1)];
    hdf5::sync::sync(|| {
        if n > 0 {
            // SAFETY: under the library lock; libhdf5 writes the attribute's `n` elements in
            // `dtype` (the attribute's own type, or its N-bit memory type of the same size:
            // `info.size` bytes each) into `buf`, which holds `n * info.size` bytes.
            let rc =
                unsafe { hdf5_sys::h5a::H5Aread(attr.id(), dtype.id(), buf.as_mut_ptr().cast()) };
            if let Err(e) = hdf5::h5check(rc) {
                return AttrOutcome::Skip(format!("attribute unreadable: {e}"));
            }
        }
        // SAFETY: `buf` holds `n` records of `info`'s type just read by libhdf5 (or nothing
        // when `n` is 0); their variable-length parts are reclaimed only below.
        let out = unsafe { types::decode_attr(&info, &buf, n as usize, scalar) };
        if indirect && n > 0 {
            // SAFETY: under the library lock; `buf` holds the elements `H5Aread` just wrote in
            // `dtype` over `space`, whose variable-length parts libhdf5 frees once, here; `buf`
            // is not read afterwards.
            unsafe {
                H5Dvlen_reclaim(dtype.id(), space.id(), H5P_DEFAULT, buf.as_mut_ptr().cast())
            };
        }
        out
    })
}

impl H5Source {
    /// Reads all records of a dataset whose type has string leaves and decodes every text leaf
    /// (index = leaf index; non-text leaves get an empty list).
    fn read_texts(&self, entry: usize, leaves: &[Leaf]) -> Result<Vec<Vec<String>>> {
        let e = &self.entries[entry];
        let start = vec![0u64; e.outer.len()];
        let count = e.outer.clone();
        self.with_records(e, &start, &count, |recs| {
            let mut lossy = false;
            let out = leaves
                .iter()
                .map(|leaf| {
                    if leaf.kind != LeafKind::Text {
                        return Vec::new();
                    }
                    let dims: Vec<u64> = leaf.inner.iter().map(|&(d, _)| d).collect();
                    let zeros = vec![0u64; dims.len()];
                    let mut vals = Vec::new();
                    for rec in recs.chunks_exact(e.record.max(1)) {
                        types::for_each_inner(leaf, &zeros, &dims, |off| {
                            // SAFETY: `recs` comes from a library read in the dataset's own type
                            // (vlen pointers live until `with_records` reclaims them).
                            vals.push(unsafe { types::string_at(&leaf.ty, rec, off, &mut lossy) });
                        });
                    }
                    vals
                })
                .collect();
            Ok(out)
        })
    }

    /// Reads the records of `start..start+count` (dataset coordinates) and calls `f` on them
    /// while they are valid (variable-length parts are reclaimed afterwards).
    fn with_records<T>(
        &self,
        e: &Entry,
        start: &[u64],
        count: &[u64],
        f: impl FnOnce(&[u8]) -> Result<T>,
    ) -> Result<T> {
        let n = count.iter().try_fold(1u64, |a, &c| a.checked_mul(c));
        let bytes = n
            .and_then(|n| n.checked_mul(e.record as u64))
            .filter(|&b| b <= isize::MAX as u64)
            .ok_or(Request::TooLarge)?;
        let mut buf = vec![0u8; bytes as usize];
        if n == Some(0) {
            return f(&buf);
        }
        if e.indirect || matches!(e.access, Access::Library) {
            hdf5::sync::sync(|| {
                self.h5_read(e, start, count, &mut buf)?;
                let r = f(&buf);
                if e.indirect {
                    // SAFETY: `buf` holds the records of `count` that `h5_read` just read in
                    // `e.dtype` (it succeeded), not yet reclaimed; `f` is done with them and
                    // nothing reads them afterwards.
                    unsafe { Self::reclaim(e, count, &mut buf) };
                }
                r
            })
        } else {
            self.read_records_into(e, start, count, &mut buf)?;
            f(&buf)
        }
    }

    /// Frees the variable-length parts (strings, sequences) of records read by libhdf5.
    ///
    /// # Safety
    /// `buf` must hold the records of the region `count` of `e` as [`H5Source::h5_read`] read
    /// them (in `e.dtype`), not yet reclaimed; nothing may read their variable-length parts
    /// afterwards.
    unsafe fn reclaim(e: &Entry, count: &[u64], buf: &mut [u8]) {
        hdf5::sync::sync(|| {
            // SAFETY: under the library lock; libhdf5 reads `count.len()` extents from `count`.
            // The new dataspace id is closed below.
            let space = unsafe {
                if e.outer.is_empty() {
                    H5Screate(H5S_class_t::H5S_SCALAR)
                } else {
                    H5Screate_simple(count.len() as i32, count.as_ptr(), std::ptr::null())
                }
            };
            if space >= 0 {
                // SAFETY: `buf` holds the records of `space` in `e.dtype` as libhdf5 read them
                // (this function's contract), whose variable-length parts libhdf5 frees once;
                // `space` was created above and is closed once. Under the library lock.
                unsafe {
                    H5Dvlen_reclaim(e.dtype.id(), space, H5P_DEFAULT, buf.as_mut_ptr().cast());
                    H5Sclose(space);
                }
            }
        })
    }

    /// `H5Dread` of a hyperslab in the dataset's own type (no conversion) into `buf`, which
    /// must hold exactly the region's records.
    fn h5_read(&self, e: &Entry, start: &[u64], count: &[u64], buf: &mut [u8]) -> Result<()> {
        let err = |what: String| {
            SourceError::library_status(Lib::Hdf5, format!("dataset '{}'", e.name), what)
        };
        let rank = e.outer.len();
        let bytes = count
            .iter()
            .try_fold(e.record as u64, |a, &c| a.checked_mul(c));
        let wrong = if start.len() != rank || count.len() != rank {
            Some(Request::Rank {
                start: start.len(),
                count: count.len(),
                rank,
            })
        } else if bytes != Some(buf.len() as u64) {
            Some(Request::BufferSize {
                expected: bytes.unwrap_or(u64::MAX),
                got: buf.len() as u64,
            })
        } else {
            None
        };
        if let Some(wrong) = wrong {
            return Err(SourceError::in_variable(&e.name, wrong.into()));
        }
        hdf5::sync::sync(|| {
            if rank == 0 {
                // SAFETY: under the library lock; the dataspace is scalar, so libhdf5 writes
                // one record of `e.dtype` (`e.record` bytes: `buf`'s length, checked above).
                let rc = unsafe {
                    H5Dread(
                        e.ds.id(),
                        e.dtype.id(),
                        H5S_ALL,
                        H5S_ALL,
                        H5P_DEFAULT,
                        buf.as_mut_ptr().cast(),
                    )
                };
                return hdf5::h5check(rc).map(|_| ()).map_err(|x| {
                    SourceError::library(Lib::Hdf5, format!("dataset '{}': read", e.name), x)
                });
            }
            // SAFETY: a by-value call on an open dataset under the library lock; the new
            // dataspace id is closed below.
            let fspace = unsafe { hdf5_sys::h5d::H5Dget_space(e.ds.id()) };
            if fspace < 0 {
                return Err(err("cannot get its dataspace".into()));
            }
            // SAFETY: under the library lock; libhdf5 reads `rank` extents from `count` (its
            // length, checked above). The new dataspace id is closed below.
            let mspace = unsafe { H5Screate_simple(rank as i32, count.as_ptr(), std::ptr::null()) };
            let mut rc = if mspace < 0 { -1 } else { 0 };
            if rc >= 0 {
                // SAFETY: under the library lock; libhdf5 reads one value per axis of `fspace`
                // (the dataset's rank) from `start` and `count`, both that long (checked
                // above); null stride and block mean 1.
                rc = unsafe {
                    H5Sselect_hyperslab(
                        fspace,
                        H5S_seloper_t::H5S_SELECT_SET,
                        start.as_ptr(),
                        std::ptr::null(),
                        count.as_ptr(),
                        std::ptr::null(),
                    )
                };
            }
            let result = if rc < 0 {
                Err(err("cannot select the region".into()))
            } else {
                // SAFETY: under the library lock; libhdf5 writes the selected records (those of
                // `count`, in `e.dtype`: `e.record` bytes each) into `buf`, which holds exactly
                // that many bytes (checked above).
                let rc = unsafe {
                    H5Dread(
                        e.ds.id(),
                        e.dtype.id(),
                        mspace,
                        fspace,
                        H5P_DEFAULT,
                        buf.as_mut_ptr().cast(),
                    )
                };
                hdf5::h5check(rc)
                    .map(|_| ())
                    .map_err(|x| err(format!("read failed: {x}")))
            };
            // SAFETY: the dataspaces opened above, each closed once, under the library lock.
            unsafe {
                if mspace >= 0 {
                    H5Sclose(mspace);
                }
                H5Sclose(fspace);
            }
            result
        })
    }

    /// Raw records of a fixed-size type into `out` (which holds exactly the region).
    fn read_records_into(
        &self,
        e: &Entry,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        match &e.access {
            Access::Direct(cv) => cv.read_region_raw(&self.files[e.file].os, start, count, out),
            Access::Contiguous(off) => {
                let rs = e.record as u64;
                let file = &self.files[e.file].os;
                let mut res = Ok(());
                chunks::for_each_run(
                    &e.outer,
                    &vec![0; e.outer.len()],
                    count,
                    start,
                    start,
                    &start
                        .iter()
                        .zip(count)
                        .map(|(s, c)| s + c)
                        .collect::<Vec<_>>(),
                    |s, d, n| {
                        if res.is_err() {
                            return;
                        }
                        let (d, n) = ((d * rs) as usize, (n * rs) as usize);
                        if let Err(x) = file.read_exact_at(&mut out[d..d + n], off + s * rs) {
                            res = Err(Part::Chunk.malformed_by(
                                format!(
                                    "dataset '{}': reading {n} bytes at byte {}",
                                    e.name,
                                    off + s * rs
                                ),
                                x,
                            ));
                        }
                    },
                );
                res
            }
            Access::Library => self.h5_read(e, start, count, out),
            Access::Memory(m) => m.read_region(start, count, out),
        }
    }
}

impl Source for H5Source {
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
        &self.text_variables
    }

    fn dim_labels(&self) -> &[DimLabels] {
        &self.dim_labels
    }

    fn parallel_reads(&self) -> bool {
        self.parallel
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let v = self.variables.get(var).ok_or(Request::NoVariable {
            var,
            count: self.variables.len(),
        })?;
        check_region(&v.shape, start, count, v.dtype.size(), out.len())?;
        if count.contains(&0) {
            return Ok(());
        }
        let plan = &self.plans[var];
        let e = &self.entries[plan.entry];
        let leaf = &plan.leaf;
        let orank = e.outer.len();
        let (ostart, ocount, istart, icount): (&[u64], &[u64], &[u64], &[u64]) = if orank == 0 {
            if leaf.inner.is_empty() {
                (&[], &[], &[], &[])
            } else {
                (&[], &[], start, count)
            }
        } else {
            (
                &start[..orank],
                &count[..orank],
                &start[orank..],
                &count[orank..],
            )
        };
        let es = match &leaf.kind {
            LeafKind::Numeric { dtype, .. } => dtype.size(),
            _ => {
                return Err(Request::NotReadable {
                    name: v.name.clone(),
                    why: "has no numeric values",
                }
                .into())
            }
        };
        if leaf.is_whole(e.record) && !e.indirect {
            self.read_records_into(e, ostart, ocount, out)?;
            chunks::swap_in_place(out, leaf.swap_width());
            return Ok(());
        }
        // Element by element: compound fields, array axes, complex parts out of order.
        self.with_records(e, ostart, ocount, |recs| {
            let mut o = 0usize;
            for rec in recs.chunks_exact(e.record.max(1)) {
                types::for_each_inner(leaf, istart, icount, |off| {
                    leaf.copy_element(rec, off, &mut out[o..o + es]);
                    o += es;
                });
            }
            Ok(())
        })
    }

    fn zstd_frames(&self, var: usize) -> bool {
        self.direct_whole(var)
            .is_some_and(|(cv, _)| cv.zstd_frames())
    }

    fn zstd_frame(&self, var: usize, start: &[u64], count: &[u64]) -> Result<Option<Vec<u8>>> {
        let Some((cv, file)) = self.direct_whole(var) else {
            return Ok(None);
        };
        cv.zstd_frame_of_region(&self.files[file].os, start, count)
    }

    fn file_extent(&self, var: usize) -> Option<FileExtent<'_>> {
        let plan = self.plans.get(var)?;
        let e = &self.entries[plan.entry];
        let Access::Contiguous(off) = &e.access else {
            return None;
        };
        let off = *off;
        match plan.leaf.kind {
            LeafKind::Numeric { .. } if plan.leaf.swap_width() == 0 => {}
            _ => return None,
        }
        if !plan.leaf.is_whole(e.record) || e.indirect {
            return None;
        }
        Some(FileExtent {
            file: &self.files[e.file].os,
            offset: off,
        })
    }
}

impl H5Source {
    /// The directly read chunked dataset behind variable `var` (and its file) when the
    /// variable is the whole plain numeric record of it, stored little-endian: what a stored
    /// chunk holds is exactly the variable's chunk.
    fn direct_whole(&self, var: usize) -> Option<(&ChunkedVar, usize)> {
        let plan = self.plans.get(var)?;
        let e = &self.entries[plan.entry];
        let Access::Direct(cv) = &e.access else {
            return None;
        };
        let LeafKind::Numeric { .. } = plan.leaf.kind else {
            return None;
        };
        let whole = plan.leaf.is_whole(e.record) && plan.leaf.swap_width() == 0;
        (whole && !e.indirect && e.outer == cv.shape()).then_some((cv, e.file))
    }

    /// The names of the variables read through the library (not by direct chunk or contiguous
    /// access) — for diagnostics and tests.
    pub fn library_read_variables(&self) -> Vec<&str> {
        self.plans
            .iter()
            .zip(&self.variables)
            .filter(|(p, _)| matches!(self.entries[p.entry].access, Access::Library))
            .map(|(_, v)| v.name.as_str())
            .collect()
    }

    /// The names of the variables read by direct chunk access.
    pub fn direct_chunk_variables(&self) -> Vec<&str> {
        self.plans
            .iter()
            .zip(&self.variables)
            .filter(|(p, _)| matches!(self.entries[p.entry].access, Access::Direct(_)))
            .map(|(_, v)| v.name.as_str())
            .collect()
    }

    /// Reads a region of a variable through `H5Dread` whatever its fast path (for comparisons).
    pub fn read_region_via_library(
        &self,
        var: usize,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        let v = self.variables.get(var).ok_or(Request::NoVariable {
            var,
            count: self.variables.len(),
        })?;
        check_region(&v.shape, start, count, v.dtype.size(), out.len())?;
        let plan = &self.plans[var];
        let e = &self.entries[plan.entry];
        if !plan.leaf.is_whole(e.record) || e.outer.is_empty() {
            return Err(Request::NotReadable {
                name: v.name.clone(),
                why: "is not a whole record of a simple dataset",
            }
            .into());
        }
        if count.contains(&0) {
            return Ok(());
        }
        self.h5_read(e, start, count, out)?;
        chunks::swap_in_place(out, plan.leaf.swap_width());
        Ok(())
    }
}
