//! NPY / NPZ importer for tet-convert.
//!
//! Two [`Importer`]s: [`NpyImporter`] (a single NumPy `.npy` array) and [`NpzImporter`] (a
//! `.npz`, i.e. a zip archive of `.npy` members as written by `np.savez` /
//! `np.savez_compressed`). Both produce an [`NpySource`]; [`open_npy_bytes`] and
//! [`open_npz_bytes`] open the same from a byte buffer (for fuzzing and tests).
//!
//! # What becomes what
//!
//! - Dataset name: the file stem of a `.npy`; the member name without `.npy` for a `.npz`
//!   member (members in sub-folders keep their `/` path). Members not ending in `.npy` are
//!   listed in [`Source::skipped`]; directory entries are ignored.
//! - Numeric dtypes `i1 i2 i4 i8 u1 u2 u4 u8 f2 f4 f8` and `b1` map to the [`ElementType`] of the
//!   same width (`i1` → [`ElementType::I8`], `b1` → [`ElementType::Bool`]: the engine widens
//!   those, not this crate). Big-endian data is byte-swapped; bool bytes are delivered as 0/1.
//! - `datetime64[u]` / `timedelta64[u]` → `I64` with a `units` attribute (`"seconds since
//!   1970-01-01"`, `"seconds"`; datetimes also get `calendar = "proleptic_gregorian"`).
//! - Complex `c8` / `c16` (whole arrays or record fields) → one variable of
//!   [`ElementType::C64`] / [`ElementType::C128`], delivered as interleaved (real, imaginary)
//!   little-endian pairs (a big-endian value has each part byte-swapped); the engine splits it.
//! - Record (structured) dtypes → one variable per field, `<name>/<field>`, nested records
//!   joined with `/`; sub-array fields (`('x', '<f4', (3,))`) add trailing axes; unnamed
//!   `|V` padding fields are ignored.
//!   Multiplied units (`[10ms]`, `[15m]`) keep the stored counts, with the multiplier in the
//!   units (`"10 milliseconds since 1970-01-01"`, the UDUNITS spelling of a scaled unit).
//! - Byte order: `<`, `>`, and also `=` (native) and `|` on a multi-byte type, which numpy reads
//!   as this machine's order, as numpy does; a type string with no byte-order character is
//!   native too.
//! - Fixed-length strings, unicode `U<n>` and bytes `S<n>` (whole arrays, or record fields),
//!   become [`TextVariable`]s (values in C order, trailing NULs removed as numpy removes them;
//!   bytes decoded as UTF-8 where valid, else one Latin-1 character per byte; an `S<n>` keeps
//!   its length as the text variable's character axis `<field>_strlen`). Their values are held
//!   in the footer: over [`MAX_TEXT_BYTES`] stored bytes or [`MAX_TEXT_VALUES`] values, or with
//!   a `U` value holding a code point that is not a Unicode scalar value (a surrogate), the
//!   array is unsupported.
//! - A record field with an empty name (not padding) is named `f<position>`, as numpy names
//!   unnamed fields (with a note).
//! - Raw void (`|V<n>` arrays and named `V` fields) is opaque: `u8` with a trailing axis of
//!   `n` bytes, with [`tet_source::Fact::Opaque`] (an NPY export writes `|V<n>` again).
//! - `f16`/`c32` (extended precision) and object arrays have no numeric form:
//!   [`SourceError::Unsupported`], or listed in [`Source::skipped`] when
//!   [`OpenOptions::skip_unsupported`] is set.
//! - A 0-d array becomes a 0-d variable (empty shape; a sub-array field of a 0-d record has just
//!   the sub-array's axes); a Fortran-order array is delivered in C order (same shape, same
//!   values), which is recorded in [`Variable::notes`]. Empty arrays are fine.
//! - The format has no attributes: no global attributes, none per variable beyond the above.
//!
//! # Storage
//!
//! Files are memory-mapped. A `.npy` and a *stored* `.npz` member are read in place. A
//! *compressed* `.npz` member (deflate as `np.savez_compressed` writes, or bzip2 or LZMA as
//! Python's `zipfile` can write; decoded by the `zip` crate) cannot be read at random: on
//! first use it is inflated once (thread
//! safe, `OnceLock`) into an anonymous temporary file, which is then mapped, so memory stays
//! bounded. [`Source::contiguous_bytes`] lends a plain (non-record) C-order little-endian or
//! single-byte variable whole: in place for stored data, from the inflated file for a deflated
//! member (inflating it if needed); a bool variable only when all its bytes are 0 or 1. The
//! CRC-32 of a member is checked on first use (a stored member's by one pass over the mapped
//! bytes, a deflated one's while inflating); a mismatch fails every read of it.
//!
//! An input read by ranges ([`open_npy_ranged`], [`open_npz_ranged`]: an object in a store, a
//! [`ByteSource`]) is never held whole: the header (and a `.npz`'s zip directory) is read at
//! open; a region fetches the bytes it spans when they are dense enough (it copies at least a
//! quarter of them), else it is cut until its parts are; a stored member's CRC-32 is checked by
//! one streamed pass on first use; a compressed member is inflated into a temporary file as
//! above. Nothing is lent ([`Source::contiguous_bytes`], [`Source::file_extent`]).
//!
//! The header dict is parsed by this crate (a bounded parser, see `header.rs`); element types
//! are described with `npyz`'s `DType` / `TypeStr`, whose type-string parser validates them.
//!
//! # Validation
//!
//! Data shorter than the header declares is refused at open (`truncated .npy: header declares
//! 1000 f64 (8000 bytes) but only 6999 data bytes follow`). Extra bytes after the data are
//! accepted and noted on each variable of that array. All size arithmetic is checked, headers
//! are bounded (1 MiB of header text at most, nested 32 deep at most), and nothing is allocated
//! from a declared size that the input does not actually hold.

use std::io::{self, Cursor, Read, Seek, Write};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use tet_source::byte_source::{ByteReader, ByteSource};
use tet_source::mapped::FileBytes;
use tet_source::numpy;
use tet_source::{
    extension_confidence, CharAxis, Confidence, ElementType, Fact, Feature, FileExtent, Importer,
    OpenOptions, Part, Request, Result, Skipped, Source, SourceError, SourceLayout, TextVariable,
    Variable,
};

pub mod export;
mod fields;
mod gather;
mod header;

use fields::{Leaf, LeafKind};
use header::{Dtype, Header};
use tet_source::record::{Fix, Strided};

/// Largest string array (stored bytes) kept as a text variable: its values live in the footer.
pub const MAX_TEXT_BYTES: u64 = 64 << 20;
/// Most values of a string array kept as a text variable (they are held in memory).
pub const MAX_TEXT_VALUES: u64 = 1 << 24;

/// Importer for a single NumPy `.npy` array.
#[derive(Debug, Clone, Copy, Default)]
pub struct NpyImporter;

/// Importer for a NumPy `.npz` archive (zip of `.npy` members: stored, deflated, bzip2 or
/// LZMA).
#[derive(Debug, Clone, Copy, Default)]
pub struct NpzImporter;

impl Importer for NpyImporter {
    fn id(&self) -> &'static str {
        "npy"
    }

    fn name(&self) -> &'static str {
        "NumPy .npy"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["npy"]
    }

    fn identify(&self, path: &Path, head: &[u8]) -> Confidence {
        if head.starts_with(header::MAGIC) {
            Confidence::Magic
        } else {
            extension_confidence(path, self.extensions())
        }
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Box<dyn Source>> {
        let bytes = map_file(path)?;
        Ok(Box::new(open_npy(&array_name(path), bytes, options)?))
    }

    fn opens_bytes(&self) -> bool {
        true
    }

    fn open_bytes(
        &self,
        name: &Path,
        bytes: Arc<dyn ByteSource>,
        options: &OpenOptions,
    ) -> Result<Box<dyn Source>> {
        Ok(Box::new(open_npy_ranged(
            &array_name(name),
            bytes,
            options,
        )?))
    }
}

/// The dataset name of a `.npy`: its file stem, else `array`.
fn array_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "array".to_string())
}

impl Importer for NpzImporter {
    fn id(&self) -> &'static str {
        "npz"
    }

    fn name(&self) -> &'static str {
        "NumPy .npz"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["npz"]
    }

    fn identify(&self, path: &Path, head: &[u8]) -> Confidence {
        let by_ext = extension_confidence(path, self.extensions());
        if head.starts_with(b"PK\x03\x04") {
            // The first local header's file name sits at offset 30.
            let first_is_npy = head.get(26..28).is_some_and(|b| {
                let n = usize::from(u16::from_le_bytes([b[0], b[1]]));
                head.get(30..30 + n)
                    .is_some_and(|name| name.ends_with(b".npy"))
            });
            if first_is_npy || by_ext == Confidence::Extension {
                return Confidence::Magic;
            }
            return Confidence::No;
        }
        by_ext
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Box<dyn Source>> {
        let bytes = map_file(path)?;
        Ok(Box::new(open_npz(bytes, options)?))
    }

    fn opens_bytes(&self) -> bool {
        true
    }

    fn open_bytes(
        &self,
        _name: &Path,
        bytes: Arc<dyn ByteSource>,
        options: &OpenOptions,
    ) -> Result<Box<dyn Source>> {
        Ok(Box::new(open_npz_ranged(bytes, options)?))
    }
}

/// Opens a `.npy` held in memory; `name` is the dataset name (what the file stem would be).
pub fn open_npy_bytes(
    name: &str,
    bytes: impl Into<Arc<[u8]>>,
    options: &OpenOptions,
) -> Result<NpySource> {
    open_npy(name, Bytes::Mem(bytes.into()), options)
}

/// Opens a `.npz` held in memory. Deflated members are still inflated into temporary files on
/// first use.
pub fn open_npz_bytes(bytes: impl Into<Arc<[u8]>>, options: &OpenOptions) -> Result<NpySource> {
    open_npz(Bytes::Mem(bytes.into()), options)
}

/// Opens a `.npy` read by ranges from `bytes` (an object in a store): the header at open,
/// then only the bytes each region spans. A source that lends its bytes whole (a local file)
/// is read in place instead.
pub fn open_npy_ranged(
    name: &str,
    bytes: Arc<dyn ByteSource>,
    options: &OpenOptions,
) -> Result<NpySource> {
    open_npy(name, Bytes::Ranged(bytes), options)
}

/// Opens a `.npz` read by ranges from `bytes`: the zip directory and each member's header at
/// open; a stored member's regions by ranges (its CRC-32 checked once, streamed); a compressed
/// member inflated on first use into a temporary file, as from a local file.
pub fn open_npz_ranged(bytes: Arc<dyn ByteSource>, options: &OpenOptions) -> Result<NpySource> {
    open_npz(Bytes::Ranged(bytes), options)
}

/// An opened `.npy` or `.npz`. `Send + Sync`; regions may be read from several threads.
pub struct NpySource {
    container: Bytes,
    payloads: Vec<Payload>,
    vars: Vec<Variable>,
    maps: Vec<VarMap>,
    skipped: Vec<Skipped>,
    texts: Vec<TextVariable>,
}

impl std::fmt::Debug for NpySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NpySource")
            .field("variables", &self.vars)
            .field("skipped", &self.skipped)
            .field("texts", &self.texts)
            .finish_non_exhaustive()
    }
}

/// The bytes of a file: mapped (with the file kept open for file-to-file copies), in memory,
/// or read by ranges (an object in a store; never held whole).
enum Bytes {
    Map(FileBytes, std::fs::File),
    Mem(Arc<[u8]>),
    Ranged(Arc<dyn ByteSource>),
}

impl Bytes {
    /// All the bytes, when they are mapped or in memory (also a ranged source that lends them).
    fn whole(&self) -> Option<&[u8]> {
        match self {
            Bytes::Map(m, _) => Some(m),
            Bytes::Mem(b) => Some(b),
            Bytes::Ranged(r) => r.as_slice(),
        }
    }

    fn len(&self) -> u64 {
        match self {
            Bytes::Ranged(r) => r.len(),
            other => other.whole().map_or(0, |b| b.len() as u64),
        }
    }

    /// The `.npy` header of the payload at `start` (of `len` bytes): read from the bytes in
    /// place, or by ranges (the fixed preamble, then the header it announces).
    fn header_at(&self, start: u64, len: u64) -> Result<Header> {
        if let Some(all) = self.whole() {
            let payload = usize::try_from(start)
                .ok()
                .zip(usize::try_from(len).ok())
                .and_then(|(s, l)| all.get(s..s.checked_add(l)?))
                .ok_or_else(|| Part::Index.malformed("member lies outside the archive"))?;
            return header::parse_header(payload);
        }
        let Bytes::Ranged(r) = self else {
            return Err(Part::Header.malformed("no bytes"));
        };
        let pre = len.min(header::PREAMBLE_LEN as u64);
        let head = r.read_vec(start, pre)?;
        let (extent, _) = header::header_extent(&head)?;
        let head = r.read_vec(start, len.min(extent as u64))?;
        header::parse_header(&head)
    }
}

fn map_file(path: &Path) -> Result<Bytes> {
    let file = std::fs::File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Ok(Bytes::Mem(Arc::from(&[][..])));
    }
    Ok(Bytes::Map(FileBytes::map(&file)?, file))
}

/// The bytes of one `.npy` (the whole file, or one `.npz` member).
enum Payload {
    /// `container[start .. start + len]`; `crc` is the zip member's CRC-32, checked once.
    InPlace {
        start: usize,
        len: usize,
        crc: Option<(u32, CrcCheck)>,
    },
    /// A compressed zip member (deflate, bzip2 or LZMA), decompressed on first use. `needed`
    /// is how many leading bytes the header requires (header + data); only those are kept.
    Compressed {
        index: usize,
        member: String,
        needed: u64,
        cell: OnceLock<Result<Bytes, Arc<MemberError>>>,
    },
}

/// Where one variable's elements are.
struct VarMap {
    payload: usize,
    layout: Strided,
    /// The variable's bytes are one C-order little-endian run (possibly a bool array, whose
    /// bytes must still be checked to be 0/1).
    lendable: bool,
    /// For a lendable bool variable: whether all its bytes are 0 or 1.
    bool_clean: OnceLock<bool>,
}

impl NpySource {
    fn payload_bytes(&self, p: usize) -> Result<&[u8]> {
        match &self.payloads[p] {
            Payload::InPlace { start, len, crc } => {
                let bytes = self
                    .container
                    .whole()
                    .ok_or_else(|| SourceError::from(Request::NotWhole))?
                    .get(*start..start.saturating_add(*len))
                    .ok_or_else(|| Part::Index.malformed("member lies outside the archive"))?;
                if let Some((want, checked)) = crc {
                    let ok = checked.get_or_init(|| {
                        let got = crc32fast::hash(bytes);
                        if got == *want {
                            Ok(())
                        } else {
                            Err(Arc::new(MemberError::Crc { got, want: *want }))
                        }
                    });
                    ok.clone().map_err(|e| Part::Chunk.malformed_from(e))?;
                }
                Ok(bytes)
            }
            Payload::Compressed {
                index,
                member,
                needed,
                cell,
            } => {
                let r = cell.get_or_init(|| inflate(&self.container, *index, member, *needed));
                match r {
                    // Always a mapped temporary file.
                    Ok(b) => b
                        .whole()
                        .ok_or_else(|| Part::Chunk.malformed("inflated member not mapped")),
                    Err(e) => Err(Part::Chunk.malformed_from(Arc::clone(e))),
                }
            }
        }
    }

    /// For a payload in place in a container read by ranges: the source, the payload's offset
    /// and length (its CRC-32 checked first, once, by one streamed pass). `None` when the
    /// payload's bytes are in memory or mapped ([`NpySource::payload_bytes`]).
    fn ranged_payload(&self, p: usize) -> Result<Option<(&dyn ByteSource, u64, u64)>> {
        let (Bytes::Ranged(src), Payload::InPlace { start, len, crc }) =
            (&self.container, &self.payloads[p])
        else {
            return Ok(None);
        };
        if src.as_slice().is_some() {
            return Ok(None);
        }
        let (at, len) = (*start as u64, *len as u64);
        if let Some((want, checked)) = crc {
            let ok = checked.get_or_init(|| {
                let got = crc_of(src.as_ref(), at, len)
                    .map_err(|e| Arc::new(MemberError::Read(Box::new(e))))?;
                if got == *want {
                    Ok(())
                } else {
                    Err(Arc::new(MemberError::Crc { got, want: *want }))
                }
            });
            ok.clone().map_err(|e| Part::Chunk.malformed_from(e))?;
        }
        Ok(Some((src.as_ref(), at, len)))
    }

    fn map(&self, var: usize) -> Result<&VarMap> {
        self.maps.get(var).ok_or_else(|| {
            Request::NoVariable {
                var,
                count: self.maps.len(),
            }
            .into()
        })
    }
}

impl NpySource {
    /// After a dense region was copied out of a memory map, drops its whole pages from the
    /// resident set (they stay in the page cache): resident memory then stays bounded however
    /// large the input is. Sparse (strided) regions are left alone: their pages are shared
    /// with neighbouring regions.
    fn release(&self, map: &VarMap, data: &[u8], start: &[u64], count: &[u64], out_len: usize) {
        let mapped: &FileBytes = match &self.payloads[map.payload] {
            Payload::InPlace { .. } => match &self.container {
                Bytes::Map(m, _) => m,
                Bytes::Mem(_) | Bytes::Ranged(_) => return,
            },
            Payload::Compressed { cell, .. } => match cell.get() {
                Some(Ok(Bytes::Map(m, _))) => m,
                _ => return,
            },
        };
        let l = &map.layout;
        let lo = start
            .iter()
            .zip(&l.strides)
            .try_fold(l.base, |acc, (&s, &st)| acc.checked_add(s.checked_mul(st)?));
        let hi = start
            .iter()
            .zip(count)
            .zip(&l.strides)
            .try_fold(l.base + l.esize as u64, |acc, ((&s, &c), &st)| {
                acc.checked_add((s + c - 1).checked_mul(st)?)
            });
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return;
        };
        // Dense enough: at least a quarter of the spanned bytes were copied.
        if hi <= lo || (hi - lo) > 4 * out_len as u64 {
            return;
        }
        let (Ok(lo), Ok(hi)) = (usize::try_from(lo), usize::try_from(hi)) else {
            return;
        };
        let Some(sub) = data.get(lo..hi) else { return };
        mapped.release(sub);
    }
}

/// The CRC-32 of `len` bytes at `at` of `src`, read a few MiB at a time.
fn crc_of(src: &dyn ByteSource, at: u64, len: u64) -> io::Result<u32> {
    const PIECE: u64 = 8 << 20;
    let mut h = crc32fast::Hasher::new();
    let mut buf = Vec::new();
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(PIECE);
        buf.resize(n as usize, 0);
        src.read_at(at + done, &mut buf)?;
        h.update(&buf);
        done += n;
    }
    Ok(h.finalize())
}

/// Inflates the first `needed` bytes of compressed member `index` into a mapped temporary file,
/// then reads the rest of the member (discarding it) so that the CRC-32 is verified.
fn inflate(
    container: &Bytes,
    index: usize,
    member: &str,
    needed: u64,
) -> Result<Bytes, Arc<MemberError>> {
    match (container.whole(), container) {
        (Some(all), _) => inflate_from(Cursor::new(all), index, member, needed),
        (None, Bytes::Ranged(r)) => {
            let reader = io::BufReader::with_capacity(1 << 20, ByteReader::new(r.clone()));
            inflate_from(reader, index, member, needed)
        }
        (None, _) => Err(Arc::new(MemberError::NoBytes(member.to_string()))),
    }
}

/// A member's CRC-32 check, made once.
type CrcCheck = OnceLock<Result<(), Arc<MemberError>>>;

/// Why a zip member cannot be used (kept once per member, shared by later reads).
#[derive(Debug, thiserror::Error)]
enum MemberError {
    /// Its CRC-32 is not the archive's.
    #[error("corrupt .npz member: CRC-32 is {got:08x}, the archive says {want:08x}")]
    Crc {
        /// Computed.
        got: u32,
        /// The archive's.
        want: u32,
    },
    /// Its bytes could not be read.
    #[error(transparent)]
    Read(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The archive has no bytes to inflate it from.
    #[error("cannot inflate .npz member '{0}': no bytes")]
    NoBytes(String),
    /// zip, the decompressor or the temporary file failed (their error, kept).
    #[error("cannot inflate .npz member '{member}': {source}")]
    Inflate {
        /// The member.
        member: String,
        /// The failure.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// It inflates to fewer bytes than its header needs.
    #[error(
        "truncated .npz member '{member}': it inflates to {got} bytes but its header needs \
         {needed}"
    )]
    Short {
        /// The member.
        member: String,
        /// Bytes it inflates to.
        got: u64,
        /// Bytes its header needs.
        needed: u64,
    },
}

/// `e` as the failure to inflate `member`.
fn inflate_failed(
    member: &str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> Arc<MemberError> {
    Arc::new(MemberError::Inflate {
        member: member.to_string(),
        source: Box::new(e),
    })
}

/// [`inflate`] from the archive that `reader` reads.
fn inflate_from(
    reader: impl Read + Seek,
    index: usize,
    member: &str,
    needed: u64,
) -> Result<Bytes, Arc<MemberError>> {
    let err = |e| inflate_failed(member, e);
    let mut archive = zip::ZipArchive::new(reader).map_err(|e| inflate_failed(member, e))?;
    let mut file = archive
        .by_index(index)
        .map_err(|e| inflate_failed(member, e))?;
    let tmp = tempfile::tempfile().map_err(err)?;
    let mut w = io::BufWriter::with_capacity(1 << 20, tmp);
    let got = io::copy(&mut (&mut file).take(needed), &mut w).map_err(err)?;
    if got < needed {
        return Err(Arc::new(MemberError::Short {
            member: member.to_string(),
            got,
            needed,
        }));
    }
    io::copy(&mut file, &mut io::sink()).map_err(err)?;
    let tmp = w.into_inner().map_err(|e| err(e.into_error()))?;
    let mut tmp = tmp;
    tmp.flush().map_err(err)?;
    // The temporary file is anonymous (already unlinked, so no other process can open it) and
    // owned here; nothing writes to it after this point, as `FileBytes::map` requires.
    let map = FileBytes::map(&tmp).map_err(err)?;
    Ok(Bytes::Map(map, tmp))
}

impl Source for NpySource {
    fn variables(&self) -> &[Variable] {
        &self.vars
    }

    fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    fn text_variables(&self) -> &[TextVariable] {
        &self.texts
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let (_, n) = self.region_of(var, start, count, out.len())?;
        let map = self.map(var)?;
        if n == 0 {
            return Ok(());
        }
        if let Some((src, at, len)) = self.ranged_payload(map.payload)? {
            return gather::gather_ranged(src, at, len, &map.layout, start, count, out);
        }
        let data = self.payload_bytes(map.payload)?;
        gather::gather(data, &map.layout, start, count, out)?;
        self.release(map, data, start, count, out.len());
        Ok(())
    }

    fn file_extent(&self, var: usize) -> Option<FileExtent<'_>> {
        let map = self.maps.get(var)?;
        // Only runs whose stored bytes are already the output bytes (not bools: numpy allows
        // any non-zero byte there, the engine wants 0/1).
        if !map.lendable || map.layout.fix != Fix::None {
            return None;
        }
        // Checks the member's CRC first, like every other read.
        self.payload_bytes(map.payload).ok()?;
        let (file, start) = match &self.payloads[map.payload] {
            Payload::InPlace { start, .. } => match &self.container {
                Bytes::Map(_, f) => (f, *start as u64),
                Bytes::Mem(_) | Bytes::Ranged(_) => return None,
            },
            Payload::Compressed { cell, .. } => match cell.get() {
                Some(Ok(Bytes::Map(_, f))) => (f, 0),
                _ => return None,
            },
        };
        Some(FileExtent {
            file,
            offset: start.checked_add(map.layout.base)?,
        })
    }

    fn contiguous_bytes(&self, var: usize) -> Option<&[u8]> {
        let map = self.maps.get(var)?;
        if !map.lendable {
            return None;
        }
        let len = usize::try_from(self.vars[var].byte_len()?).ok()?;
        let base = usize::try_from(map.layout.base).ok()?;
        let data = self.payload_bytes(map.payload).ok()?;
        let bytes = data.get(base..base.checked_add(len)?)?;
        if map.layout.fix == Fix::Bool
            && !*map.bool_clean.get_or_init(|| bytes.iter().all(|&b| b <= 1))
        {
            return None;
        }
        Some(bytes)
    }
}

/// Collects variables while opening.
struct Builder<'o> {
    options: &'o OpenOptions,
    payloads: Vec<Payload>,
    vars: Vec<Variable>,
    maps: Vec<VarMap>,
    skipped: Vec<Skipped>,
    texts: Vec<PendingText>,
}

/// A string array (or field) whose values are read once the payloads are in place.
struct PendingText {
    name: String,
    payload: usize,
    /// `esize` is the bytes of one string; no fix-up.
    layout: Strided,
    /// The shape the text variable has (empty for a 0-d array).
    shape: Vec<u64>,
    utf32: bool,
    chars: u64,
    swap: bool,
}

/// Facts about the payload an array comes from.
struct Origin<'a> {
    /// `".npy"` or `".npy member 'x.npy'"`, for messages.
    what: &'a str,
    payload: usize,
    /// Bytes the payload holds (header included).
    available: u64,
    compressed: bool,
}

impl<'o> Builder<'o> {
    fn new(options: &'o OpenOptions) -> Self {
        Builder {
            options,
            payloads: Vec::new(),
            vars: Vec::new(),
            maps: Vec::new(),
            skipped: Vec::new(),
            texts: Vec::new(),
        }
    }

    /// The source, with the values of its string arrays read.
    fn finish(self, container: Bytes) -> Result<NpySource> {
        let skip = self.options.skip_unsupported;
        let mut src = NpySource {
            container,
            payloads: self.payloads,
            vars: self.vars,
            maps: self.maps,
            skipped: self.skipped,
            texts: Vec::new(),
        };
        for t in self.texts {
            match read_text(&src, &t) {
                Ok(v) => src.texts.push(v),
                Err(SourceError::Unsupported { detail, .. }) if skip => src.skipped.push(Skipped {
                    name: t.name,
                    reason: detail,
                }),
                Err(SourceError::Unsupported { feature, detail }) => {
                    return Err(feature.unsupported(format!("'{}': {detail}", t.name)))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(src)
    }

    /// Skips `name` (with `skip_unsupported`) or fails.
    fn unsupported(&mut self, feature: Feature, name: String, reason: String) -> Result<()> {
        if self.options.skip_unsupported {
            self.skipped.push(Skipped { name, reason });
            Ok(())
        } else {
            Err(feature.unsupported(format!("'{name}': {reason}")))
        }
    }

    fn name_taken(&self, name: &str) -> bool {
        self.vars.iter().any(|v| v.name == name)
            || self.skipped.iter().any(|s| s.name == name)
            || self.texts.iter().any(|t| t.name == name)
    }

    /// Checks the header against the payload size; the bytes needed (header + data).
    fn required(&self, h: &Header, from: &Origin) -> Result<Option<(u64, u64)>> {
        let overflow =
            || Part::Shape.malformed(format!("{}: the shape {:?} overflows", from.what, h.shape));
        // Every partial product of the shape must fit, whatever zeros it has.
        h.shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d.max(1)))
            .ok_or_else(overflow)?;
        let count: u64 = h.shape.iter().product();
        let Some(record) = h.dtype.num_bytes() else {
            return Ok(None);
        };
        let data_bytes = count.checked_mul(record as u64).ok_or_else(overflow)?;
        let avail = from.available.saturating_sub(h.data_offset as u64);
        if avail < data_bytes {
            return Err(Part::Shape.malformed(format!(
                "truncated {}: header declares {count} {} ({data_bytes} bytes) but only {avail} data bytes follow",
                from.what,
                fields::describe(&h.dtype),
            )));
        }
        Ok(Some((data_bytes, avail - data_bytes)))
    }

    /// Adds the variables of one array.
    fn add_array(&mut self, name: &str, h: &Header, from: &Origin) -> Result<()> {
        let Some((_, trailing)) = self.required(h, from)? else {
            let reason = fields::leaves(&h.dtype).err().map_or_else(
                || format!("dtype {} has no fixed size", h.descr_text),
                |e| e.to_string(),
            );
            return self.unsupported(Feature::DataType, name.to_string(), reason);
        };
        let leaves = match fields::leaves(&h.dtype) {
            Ok(l) => l,
            Err(reason) => {
                return self.unsupported(Feature::DataType, name.to_string(), reason.to_string())
            }
        };
        if leaves.is_empty() {
            // A record of unnamed raw-void fields only (numpy's padding) or of no fields: numpy
            // gives no value of it, and leaving the array out without a word was a silent drop.
            return self.unsupported(
                Feature::DataType,
                name.to_string(),
                format!(
                    "record dtype {} has no named field, only unnamed raw-byte padding: no values \
                     to convert",
                    h.descr_text
                ),
            );
        }
        let record = h.dtype.num_bytes().unwrap_or(0) as u64;
        let array = ArrayCtx {
            name,
            h,
            from,
            strides: axis_strides(&h.shape, record, h.fortran_order),
            record,
            trailing,
        };
        for leaf in leaves {
            let full = leaf.name_under(name);
            match &leaf.kind {
                LeafKind::Unsupported(reason) => {
                    self.unsupported(Feature::DataType, full, reason.clone())?
                }
                _ if self.name_taken(&full) => self.unsupported(
                    Feature::Structure,
                    full.clone(),
                    format!("another dataset is already named '{full}'"),
                )?,
                LeafKind::Text { utf32, chars, swap } => {
                    self.add_text(&array, full, &leaf, *utf32, *chars, *swap)?;
                }
                LeafKind::Numeric { .. } => self.add_numeric(&array, full, leaf)?,
                LeafKind::Opaque { .. } => self.add_opaque(&array, full, leaf)?,
            }
        }
        Ok(())
    }

    /// Adds a raw-void leaf (`|V<size>`) as `u8` with a trailing axis of its size, recorded as
    /// [`Fact::Opaque`].
    fn add_opaque(&mut self, array: &ArrayCtx, full: String, mut leaf: Leaf) -> Result<()> {
        let LeafKind::Opaque { size } = leaf.kind else {
            return Ok(());
        };
        leaf.place.inner.push((size, 1));
        leaf.kind = LeafKind::Numeric {
            elem: ElementType::U8,
            swap: false,
            attrs: Vec::new(),
        };
        leaf.notes.push(format!(
            "numpy raw void |V{size}: opaque blobs of {size} bytes, u8 along the trailing axis"
        ));
        self.add_numeric(array, full, leaf)?;
        if let Some(v) = self.vars.last_mut() {
            v.facts.push(Fact::Opaque {
                type_name: String::new(),
            });
        }
        Ok(())
    }

    /// Adds a string leaf (a whole `S`/`U` array or such a field) as a pending text variable.
    fn add_text(
        &mut self,
        array: &ArrayCtx,
        full: String,
        leaf: &Leaf,
        utf32: bool,
        chars: u64,
        swap: bool,
    ) -> Result<()> {
        let mut tshape = array.h.shape.clone();
        let mut tstrides = array.strides.clone();
        for &(n, st) in &leaf.place.inner {
            tshape.push(n);
            tstrides.push(st);
        }
        let esize = chars.checked_mul(if utf32 { 4 } else { 1 });
        let total = tshape
            .iter()
            .try_fold(esize.unwrap_or(u64::MAX), |a, &d| a.checked_mul(d));
        let values = tshape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let fits = total.is_some_and(|t| t <= MAX_TEXT_BYTES)
            && values.is_some_and(|n| n <= MAX_TEXT_VALUES);
        if !fits {
            let strings = values.map_or("too many".to_string(), |n| n.to_string());
            return self.unsupported(
                Feature::Size,
                full,
                format!(
                    "string array of {strings} values of {chars} characters is over what the \
                     .tet footer keeps as text ({} MiB, {MAX_TEXT_VALUES} values)",
                    MAX_TEXT_BYTES >> 20
                ),
            );
        }
        let base = (array.h.data_offset as u64)
            .checked_add(leaf.place.offset)
            .ok_or_else(|| Part::Shape.malformed("offset overflows"))?;
        self.texts.push(PendingText {
            name: full,
            payload: array.from.payload,
            layout: Strided {
                base,
                strides: tstrides,
                esize: usize::try_from(esize.unwrap_or(0)).unwrap_or(0),
                fix: Fix::None,
            },
            shape: tshape,
            utf32,
            chars,
            swap,
        });
        Ok(())
    }

    /// Adds a numeric leaf as a variable (of the array's shape plus the leaf's sub-array axes;
    /// empty for a 0-d array of a plain type).
    fn add_numeric(&mut self, array: &ArrayCtx, full: String, leaf: Leaf) -> Result<()> {
        let leaf_notes = leaf.notes;
        let LeafKind::Numeric { elem, swap, attrs } = leaf.kind else {
            return Ok(());
        };
        let mut vshape = array.h.shape.clone();
        let mut vstrides = array.strides.clone();
        for &(n, st) in &leaf.place.inner {
            vshape.push(n);
            vstrides.push(st);
        }
        let esize = elem.size() as u64;
        vshape
            .iter()
            .try_fold(esize, |a, &d| a.checked_mul(d.max(1)))
            .ok_or_else(|| {
                Part::Shape.malformed(format!(
                    "{}: '{full}' of shape {vshape:?} overflows",
                    array.from.what
                ))
            })?;
        let mut notes = array.notes_for(&full, &leaf.place.inner);
        notes.extend(leaf_notes);
        if array.trailing > 0 {
            notes.push(format!(
                "{} bytes after the array data in the {} were ignored",
                array.trailing, array.from.what
            ));
        }
        let base = (array.h.data_offset as u64)
            .checked_add(leaf.place.offset)
            .ok_or_else(|| Part::Shape.malformed("offset overflows"))?;
        let fix = Fix::numbers(elem, swap);
        let lendable = leaf.path.is_empty()
            && leaf.place.inner.is_empty()
            && array.record == esize
            && !swap
            && is_c_contiguous(&vshape, &vstrides, esize);
        self.maps.push(VarMap {
            payload: array.from.payload,
            layout: Strided {
                base,
                strides: vstrides,
                esize: esize as usize,
                fix,
            },
            lendable,
            bool_clean: OnceLock::new(),
        });
        let compressed = array.from.compressed;
        self.vars.push(Variable {
            name: full,
            dtype: elem,
            shape: vshape,
            dims: None,
            attrs,
            layout: SourceLayout {
                chunk_shape: None,
                compressed,
                filters: if compressed {
                    vec!["deflate".to_string()]
                } else {
                    Vec::new()
                },
            },
            role: tet_source::Role::Data,
            notes,
            facts: Vec::new(),
        });
        Ok(())
    }
}

/// One array being added: what all its leaves share.
struct ArrayCtx<'a> {
    /// The array's name (the leaves' names extend it).
    name: &'a str,
    h: &'a Header,
    from: &'a Origin<'a>,
    /// Byte stride of each array axis (none for a 0-d array).
    strides: Vec<u64>,
    /// Bytes of one array element (record).
    record: u64,
    /// Bytes after the array data in its payload.
    trailing: u64,
}

impl ArrayCtx<'_> {
    /// The notes every variable of the array gets, before its leaf's own: Fortran order,
    /// record field, sub-array axes.
    fn notes_for(&self, full: &str, sub_axes: &[(u64, u64)]) -> Vec<String> {
        let mut notes = Vec::new();
        if self.h.fortran_order && self.h.shape.len() > 1 {
            notes.push(
                "Fortran-order (column-major) array delivered in C order; shape and values unchanged"
                    .to_string(),
            );
        }
        if matches!(self.h.dtype, Dtype::Record(_)) {
            let field = full
                .strip_prefix(self.name)
                .unwrap_or(full)
                .trim_start_matches('/');
            notes.push(format!(
                "field '{field}' of the record (structured) array '{}', split into one dataset per field",
                self.name
            ));
        }
        if !sub_axes.is_empty() {
            let dims: Vec<String> = sub_axes.iter().map(|(n, _)| n.to_string()).collect();
            notes.push(format!(
                "sub-array field of shape ({},) stored as trailing axes",
                dims.join(", ")
            ));
        }
        notes
    }
}

/// Byte stride of each axis of an array of `shape` whose elements are `record` bytes, in C or
/// Fortran order. Saturating is harmless: an array whose strides saturate is empty, and an
/// empty array is never read.
fn axis_strides(shape: &[u64], record: u64, fortran: bool) -> Vec<u64> {
    let mut strides = vec![0u64; shape.len()];
    let mut acc = record;
    if fortran {
        for (s, &d) in strides.iter_mut().zip(shape) {
            *s = acc;
            acc = acc.saturating_mul(d);
        }
    } else {
        for (s, &d) in strides.iter_mut().zip(shape).rev() {
            *s = acc;
            acc = acc.saturating_mul(d);
        }
    }
    strides
}

/// Reads and decodes the values of a string array.
fn read_text(src: &NpySource, t: &PendingText) -> Result<TextVariable> {
    // Checked against MAX_TEXT_BYTES when the array was added.
    let count: u64 = t.shape.iter().product();
    let n = usize::try_from(count).map_err(|_| Part::Shape.malformed("string array too large"))?;
    let esize = t.layout.esize;
    let mut values = Vec::with_capacity(n);
    if esize == 0 {
        values.resize(n, String::new());
    } else if n > 0 {
        let len = n
            .checked_mul(esize)
            .ok_or_else(|| Part::Shape.malformed("string array too large"))?;
        let mut buf = vec![0u8; len];
        // A 0-d array is read as one element.
        let (start, count): (Vec<u64>, Vec<u64>) = if t.layout.strides.is_empty() {
            (vec![0], vec![1])
        } else {
            (vec![0; t.shape.len()], t.shape.clone())
        };
        let layout = if t.layout.strides.is_empty() {
            Strided {
                strides: vec![0],
                ..t.layout.clone()
            }
        } else {
            t.layout.clone()
        };
        match src.ranged_payload(t.payload)? {
            Some((bytes, at, plen)) => {
                gather::gather_ranged(bytes, at, plen, &layout, &start, &count, &mut buf)?
            }
            None => gather::gather(
                src.payload_bytes(t.payload)?,
                &layout,
                &start,
                &count,
                &mut buf,
            )?,
        }
        for s in buf.chunks_exact(esize) {
            values.push(if t.utf32 {
                numpy::decode_ucs4(s, t.swap)
                    .map_err(|e| Feature::DataType.unsupported(e.to_string()))?
            } else {
                numpy::decode_bytes(s)
            });
        }
    }
    let char_axis = (!t.utf32).then(|| CharAxis {
        dim: format!("{}_strlen", t.name.rsplit('/').next().unwrap_or(&t.name)),
        len: t.chars,
    });
    Ok(TextVariable {
        name: t.name.clone(),
        shape: t.shape.clone(),
        dims: None,
        values,
        attrs: Vec::new(),
        char_axis,
        facts: Vec::new(),
    })
}

/// Whether `strides` are the C-order strides of `shape` (axes of length 1 do not matter).
fn is_c_contiguous(shape: &[u64], strides: &[u64], esize: u64) -> bool {
    let mut want = esize;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d > 1 && s != want {
            return false;
        }
        want = want.saturating_mul(d);
    }
    true
}

/// Runs `f`; with `skip_unsupported`, an `Unsupported` error skips `name` instead.
fn skip_or_fail(b: &mut Builder, name: &str, r: Result<()>) -> Result<()> {
    match r {
        Err(SourceError::Unsupported { detail: reason, .. }) if b.options.skip_unsupported => {
            b.skipped.push(Skipped {
                name: name.to_string(),
                reason,
            });
            Ok(())
        }
        other => other,
    }
}

fn open_npy(name: &str, bytes: Bytes, options: &OpenOptions) -> Result<NpySource> {
    let mut b = Builder::new(options);
    let total = bytes.len();
    b.payloads.push(Payload::InPlace {
        start: 0,
        len: usize::try_from(total).map_err(|_| Part::Shape.malformed(".npy too large"))?,
        crc: None,
    });
    let from = Origin {
        what: ".npy",
        payload: 0,
        available: total,
        compressed: false,
    };
    let r = bytes
        .header_at(0, total)
        .and_then(|h| b.add_array(name, &h, &from));
    skip_or_fail(&mut b, name, r)?;
    b.finish(bytes)
}

/// Deflate's largest expansion: at best a 1-bit length code (258 bytes) and a 1-bit distance
/// code, 2 bits per 258 output bytes, so 1032 output bytes per input byte.
const DEFLATE_MAX_RATIO: u64 = 1032;

fn zip_err(e: zip::result::ZipError) -> SourceError {
    Part::Header.malformed_by("not a valid .npz (zip) archive", e)
}

fn open_npz(bytes: Bytes, options: &OpenOptions) -> Result<NpySource> {
    let mut b = Builder::new(options);
    match (bytes.whole(), &bytes) {
        (Some(all), _) => {
            let mut archive = zip::ZipArchive::new(Cursor::new(all)).map_err(zip_err)?;
            npz_members(&mut archive, &bytes, &mut b)?;
        }
        (None, Bytes::Ranged(r)) => {
            // The zip directory and the members' headers are many small reads.
            let reader = io::BufReader::with_capacity(64 << 10, ByteReader::new(r.clone()));
            let mut archive = zip::ZipArchive::new(reader).map_err(zip_err)?;
            npz_members(&mut archive, &bytes, &mut b)?;
        }
        (None, _) => return Err(Part::Header.malformed("not a valid .npz: no bytes")),
    }
    b.finish(bytes)
}

/// Adds the members of the archive (whose bytes are `bytes`) to `b`.
fn npz_members<R: Read + Seek>(
    archive: &mut zip::ZipArchive<R>,
    bytes: &Bytes,
    b: &mut Builder<'_>,
) -> Result<()> {
    {
        for index in 0..archive.len() {
            let (member, is_dir, encrypted, method, size, csize, crc, data_start) = {
                let f = archive.by_index_raw(index).map_err(zip_err)?;
                (
                    f.name().to_string(),
                    f.is_dir(),
                    f.encrypted(),
                    f.compression(),
                    f.size(),
                    f.compressed_size(),
                    f.crc32(),
                    f.data_start(),
                )
            };
            if is_dir {
                continue;
            }
            let Some(stem) = member.strip_suffix(".npy") else {
                b.skipped.push(Skipped {
                    name: member.clone(),
                    reason: "not a .npy member of the .npz".to_string(),
                });
                continue;
            };
            let name = stem.trim_start_matches('/').to_string();
            if name.is_empty() {
                b.unsupported(
                    Feature::Structure,
                    member.clone(),
                    "member has an empty array name".to_string(),
                )?;
                continue;
            }
            if encrypted {
                b.unsupported(
                    Feature::Structure,
                    name,
                    format!("member '{member}' is encrypted"),
                )?;
                continue;
            }
            let what = format!(".npy member '{member}'");
            let r = match method {
                zip::CompressionMethod::Stored => {
                    let start = data_start.ok_or_else(|| {
                        Part::Index.malformed(format!("{what}: data offset unknown"))
                    })?;
                    let end = start.checked_add(size);
                    if csize != size || end.is_none_or(|e| e > bytes.len()) {
                        return Err(Part::Index.malformed(format!(
                            "truncated .npz: {what} of {size} bytes extends past the end of the archive"
                        )));
                    }
                    let (start, len) = (start as usize, size as usize);
                    let payload = b.payloads.len();
                    b.payloads.push(Payload::InPlace {
                        start,
                        len,
                        crc: Some((crc, OnceLock::new())),
                    });
                    let from = Origin {
                        what: &what,
                        payload,
                        available: size,
                        compressed: false,
                    };
                    bytes
                        .header_at(start as u64, size)
                        .map_err(|e| in_member(e, &member))
                        .and_then(|h| b.add_array(&name, &h, &from))
                }
                zip::CompressionMethod::Deflated
                | zip::CompressionMethod::Bzip2
                | zip::CompressionMethod::Lzma => {
                    // The uncompressed size is only a claim until the member is decompressed
                    // (at conversion time, after the output's chunk index has been laid out
                    // for it). Deflate cannot expand more than DEFLATE_MAX_RATIO, and the
                    // compressed bytes lie inside the archive: a larger claim is a lie. (bzip2
                    // and LZMA have no such useful bound; a member that decompresses to less
                    // than its header needs is a read error either way.)
                    let most = csize.min(bytes.len()).saturating_mul(DEFLATE_MAX_RATIO);
                    if method == zip::CompressionMethod::Deflated && size > most {
                        return Err(Part::Index.malformed(format!(
                            "corrupt .npz: {what} claims {size} uncompressed bytes, more than \
                             deflate can produce from its {csize} compressed bytes"
                        )));
                    }
                    let h = {
                        let f = archive.by_index(index).map_err(zip_err)?;
                        read_header_from(f, &member)
                    };
                    h.and_then(|h| {
                        let from = Origin {
                            what: &what,
                            payload: b.payloads.len(),
                            available: size,
                            compressed: true,
                        };
                        let needed = match b.required(&h, &from)? {
                            Some((data, _)) => (h.data_offset as u64).saturating_add(data),
                            None => 0,
                        };
                        b.payloads.push(Payload::Compressed {
                            index,
                            member: member.clone(),
                            needed,
                            cell: OnceLock::new(),
                        });
                        b.add_array(&name, &h, &from)
                    })
                }
                other => Err(Feature::Codec.unsupported(format!(
                    "member '{member}' uses zip compression {other}; only stored, deflated, bzip2 and LZMA members are read"
                ))),
            };
            skip_or_fail(b, &name, r)?;
        }
    }
    Ok(())
}

/// Prefixes a header error with the member it is about.
fn in_member(e: SourceError, member: &str) -> SourceError {
    let named = |d: String| format!(".npz member '{member}': {d}");
    match e {
        SourceError::Malformed {
            part,
            detail,
            cause,
        } => SourceError::Malformed {
            part,
            detail: named(detail),
            cause,
        },
        SourceError::Unsupported { feature, detail } => feature.unsupported(named(detail)),
        other => other,
    }
}

/// Reads and parses the header at the start of a (decompressing) reader.
fn read_header_from(r: impl Read, member: &str) -> Result<Header> {
    let mut r = r;
    let io_err = |e: io::Error| {
        Part::Chunk.malformed_by(format!("cannot inflate .npz member '{member}'"), e)
    };
    let mut buf = Vec::with_capacity(header::PREAMBLE_LEN);
    (&mut r)
        .take(header::PREAMBLE_LEN as u64)
        .read_to_end(&mut buf)
        .map_err(io_err)?;
    let (extent, _) = header::header_extent(&buf).map_err(|e| in_member(e, member))?;
    if extent > buf.len() {
        (&mut r)
            .take((extent - buf.len()) as u64)
            .read_to_end(&mut buf)
            .map_err(io_err)?;
    }
    header::parse_header(&buf).map_err(|e| in_member(e, member))
}
