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
//!   `sample_dimension`), gathered at open (at most 256 MiB). Sequences of arrays of numbers
//!   keep the arrays' axes after the sample axis; sequences of time values get their units
//!   (module `time`); sequences of strings are ragged text (a [`TextVariable`] of the strings
//!   with `Fact::Ragged`, and the counts).
//! * **Strings** (fixed or variable length, ASCII or UTF-8, also as compound fields) become
//!   [`TextVariable`]s (values in C order; fixed strings lose their NUL/space padding). A 1-D
//!   string dimension scale also gives [`DimLabels`].
//! * **Unsupported** (an error, or with `skip_unsupported` an entry in [`Source::skipped`]):
//!   references, sequences of anything but numbers, arrays of numbers and strings, non-IEEE floats, virtual datasets
//!   whose sources cannot be checked (below), datasets with external raw-data files, filters neither this crate nor libhdf5 (with the
//!   plugins it finds in `HDF5_PLUGIN_PATH`) can decode (named in the message, with the plugin
//!   directories searched), compound datasets whose field names collide once `/` becomes `_`
//!   (`a/b` and `a_b`).
//! * **N-bit integers** (padding bits: e.g. 12 bits at bit offset 2 of a 16-bit container) are
//!   read through libhdf5's conversion to the full-width container type (sign-extended), with
//!   the fact `hdf5_nbit` (`precision=12 offset=2`) and a note. **HDF5 time** (`H5T_TIME`,
//!   PyTables' `Time32`/`Time64`, module `time`): 32 bits as the stored seconds, 64 bits
//!   (seconds and microseconds words) as the exact `i64` count of microseconds since the epoch,
//!   with CF `units`/`calendar`, the fact `hdf5_time` (`H5T_UNIX_D32`) and a note; a 64-bit
//!   value whose low word is no count of microseconds is refused when read.
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
//!   [`tet_source::Role::Coordinate`] (when 1-D) whose dimension is its `NAME` attribute (or its own name).
//!   A dataset with `DIMENSION_LIST` takes its `dims` from the attached scales (the first scale
//!   per axis), else from `DIMENSION_LABELS`; axes still unnamed become `<name>_dim<axis>`. The
//!   bookkeeping attributes (`CLASS`, `NAME` of scales, `REFERENCE_LIST`, `DIMENSION_LIST`,
//!   `DIMENSION_LABELS`, netCDF's `_Netcdf4*`, `_nc3_strict`, `_NCProperties`) are not copied.
//! * **Attributes**: numbers typed (arrays of any rank flattened in C order; f16 as f32),
//!   strings as `Text` (scalar) or `TextList`, bool/enum as their integers, compound values as
//!   JSON `Text` with a note; complex ones (h5py's `{r, i}`) also with their type recorded (the
//!   fact `nc_attr_type:<name>` the netCDF exporter reads: they are exported as that compound,
//!   which h5py reads as complex numbers). Root-group attributes are the global attributes;
//!   attributes of other groups are global attributes named `<group path>/<name>`; one whose
//!   own name holds a `/` (h5py writes `a/b`) also gets a [`Fact::AttrGroup`] naming its group.
//!   `CLASS` and `NAME` are ordinary attributes (PyTables' node classes on every group and leaf, in file order)
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
//!   offered to the engine as a [`tet_source::FileExtent`] when no byte swap or reordering is needed).
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
mod open_files;
mod ragged;
mod read;
mod sniff;
mod time;
mod types;
pub mod vds;
mod walk;

/// The hdf5-metno and hdf5-metno-sys crates this importer is built on (for callers of
/// [`chunks::ChunkedVar::from_dataset`]).
pub use ::hdf5;
pub use ::hdf5_sys;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};

use tet_source::{
    extension_confidence, Attrs, Confidence, DimLabels, Fact, Importer, Lib, OpenOptions, Result,
    Skipped, Source, SourceError, TextVariable, Variable,
};

use chunks::ChunkedVar;
use types::Leaf;

pub use open_files::OpenFiles;
pub use sniff::{
    check_not_truncated, has_signature, superblock_end_of_file, SuperblockEnd, SIGNATURE,
};
use walk::Walker;

/// Largest string dataset read into the footer (bytes of records in memory).
const MAX_TEXT_BYTES: u64 = 256 << 20;
/// Largest attribute read (bytes).
const MAX_ATTR_BYTES: u64 = 64 << 20;
/// Deepest group nesting / external-link chain followed.
const MAX_DEPTH: usize = 64;
const MAX_EXTERNAL_DEPTH: usize = 8;

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

/// The HDF5 files this process has open.
static OPEN_FILES: OpenFiles<hdf5::File> = OpenFiles::new();
