//! Tensogram (`.tgm`) importer for tet-convert.
//!
//! Tensogram (ECMWF) is a message format for N-dimensional tensors: a file is a sequence of
//! self-describing *messages*, each a preamble, optional header frames (CBOR metadata, an index,
//! hashes), one frame per *data object* (payload + CBOR descriptor: shape, strides, dtype, byte
//! order, encoding → filter → compression pipeline, optional NaN/Inf masks) and optional footer
//! frames, closed by a postamble. Messages written by a streaming encoder have total length 0
//! and carry their index and metadata in the footer. Decoding is done by ECMWF's `tensogram`
//! crate (built with its pure-Rust codecs only); this crate finds the messages, checks them,
//! and maps them.
//!
//! # Mapping
//!
//! * **Variables**: every data object of every message, in file order, is one variable named
//!   `message_<m>/object_<i>` (both 0-based). Element types: `float16` → [`ElementType::F16`],
//!   `bfloat16` → [`ElementType::BF16`] and `int8` → [`ElementType::I8`] (the engine widens
//!   those two), the other integer and float types to the same width, `bitmask` → `U8` (bits
//!   unpacked MSB-first to one 0/1 byte per element, noted), `complex64` / `complex128` → two
//!   variables `<name>/real` and `<name>/imag` (`F32` / `F64`) with the attributes
//!   `complex_part` and `complex_dtype` (`c64` / `c128`), as the NPY importer does. A 0-d object
//!   (shape `[]`) becomes shape `[1]` (noted). Values are delivered little-endian whatever the
//!   object's byte order. Ranks above 8 are delivered as they are (the engine decides).
//! * **Values**: the decoded values. NaN / ±Inf positions recorded in the object's masks are
//!   restored (canonical quiet NaN, ±Inf; noted). Lossy encodings are decoded: `simple_packing`
//!   gives the decoded `f64` values, with the note `lossy encoding simple_packing: values are
//!   the decoded f64` and the packing parameters among the facts.
//! * **Variable attributes**: the object's metadata (`base[i]` of its message) without the
//!   library's `_reserved_` section (tensor shape/strides/dtype, repeated from the descriptor),
//!   flattened to dotted keys with typed values (`{"mars": {"param": "2t"}}` → `mars.param` =
//!   `Text("2t")`; integers → `I64`, floats → `F64`, booleans → `U8` 0/1, arrays of numbers →
//!   typed vectors, arrays of text → `TextList`; see `meta.rs`). The object's `name`, if any, is
//!   the attribute `name`. When the flattening cannot hold everything (null, arrays of maps,
//!   keys with dots…), the whole map is also kept as JSON in the fact `tensogram_metadata_json`.
//! * **Global attributes**: for a file of one message, that message's `_extra_` map (message
//!   level metadata, e.g. `version`, `producer`), flattened the same way (the full JSON goes to
//!   the fact `tensogram_extra_json` of every variable when that is lossy). A file of several
//!   messages has no global attributes; each message's `_extra_` becomes the facts
//!   `tensogram_message_extra.<key>` of its variables.
//! * **Facts** (footer extension metadata, per variable): `tensogram_message`,
//!   `tensogram_object`, `tensogram_dtype`, `tensogram_byte_order`, `tensogram_encoding`,
//!   `tensogram_filter`, `tensogram_compression`, `tensogram_params.<key>` (codec parameters),
//!   `tensogram_masks` (the mask kinds present) and `tensogram_encoder` (name and version of the
//!   writing library; its wall-clock time and uuid are left out: they change on every run).
//! * **Layout**: no source chunking; `compressed` when the object has a compression or an
//!   encoding (so `--codec auto` compresses), `filters` lists the pipeline stages.
//!
//! # What is refused
//!
//! Checked at open, before any value is read:
//!
//! * Truncation and corruption of the message structure: messages must tile the file exactly
//!   (see `scan.rs`), each must parse (frame order, CBOR), hold the metadata / index / hash
//!   frames its preamble declares, with matching xxh3 hashes where the writer stored them, its
//!   index must agree with its data frames, and every data frame must end before the
//!   postamble — `truncated Tensogram message at byte X (file is N bytes)`, `corrupt Tensogram
//!   message at byte X: …`. An uncompressed payload must have exactly the size its shape and
//!   dtype imply; an lz4 payload must declare that size.
//! * Descriptors: `ndim` / strides inconsistent with the shape, a shape whose size overflows,
//!   `simple_packing` on anything but float64, missing codec parameters, masks on a bitmask.
//! * Unsupported (an error unless `skip_unsupported`, then listed in [`Source::skipped`]):
//!   compressions not compiled into this build (`blosc2`, `zfp`, `sz3`, …): `message 0 object
//!   1: compression 'blosc2' is not supported by this build (supported: none, zstd, lz4,
//!   szip)`; likewise unknown encodings and filters, mask methods other than none / rle /
//!   roaring / zstd / lz4, and strides that are not C order.
//! * Wire versions other than 3.
//!
//! At read time the frame's xxh3 hash is verified when the writer stored one; a mismatch (or any
//! decoder error) fails the read with the message and object named.
//!
//! # Memory and threads
//!
//! Files above 1 MiB are memory-mapped (smaller ones are read). Open parses one message at a
//! time; tensogram's parser touches only frame headers, descriptors and metadata, never the
//! payloads, and only the descriptors are kept. A read decodes the object from its data frame
//! alone (a borrowed slice of the map) and keeps the most recently decoded object, so the many
//! chunk regions the engine asks for decode each object once; threads that want an object
//! being decoded wait for it rather than decoding it again. Pages of the map are dropped from
//! the resident set once used. Peak memory is therefore about one or two decoded objects.
//! `read_region` may run on several threads at once; the decoder itself runs single-threaded
//! (the engine owns the parallelism). [`open_bytes`] opens a buffer in memory (the fuzzing
//! entry point). Nothing is allocated from a declared size before it is checked against the
//! file, except the decoded object itself, which the decoder reserves fallibly (a compressed
//! payload may legitimately expand far beyond its size).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use ciborium::Value;
use tensogram::{
    ByteOrder, CompressionBackend, DataObjectDescriptor, DecodeOptions, Dtype, TensogramError,
};
use tet_source::{
    check_region, extension_confidence, AttrValue, Attrs, Confidence, ElementType, Importer,
    OpenOptions, Result, Skipped, Source, SourceError, SourceLayout, Variable,
};

mod meta;
mod scan;

use scan::{Backing, Span};

/// The compressions this build decodes (for the error message; `rle` and `roaring` are also
/// accepted on bitmask objects).
const SUPPORTED_COMPRESSIONS: &str = "none, zstd, lz4, szip";
/// Mask methods this build decodes.
const SUPPORTED_MASK_METHODS: &str = "none, rle, roaring, zstd, lz4";

/// The Tensogram importer plug-in (`tgm`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TgmImporter;

impl Importer for TgmImporter {
    fn id(&self) -> &'static str {
        "tgm"
    }

    fn name(&self) -> &'static str {
        "Tensogram"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["tgm"]
    }

    fn identify(&self, path: &Path, head: &[u8]) -> Confidence {
        if head.starts_with(scan::MAGIC) {
            Confidence::Magic
        } else {
            extension_confidence(path, self.extensions())
        }
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Box<dyn Source>> {
        Ok(Box::new(open_path(path, options)?))
    }
}

/// Files smaller than this are read into memory; larger ones are memory-mapped.
const MMAP_THRESHOLD: u64 = 1 << 20;

/// Opens a `.tgm` file (memory-mapped when larger than 1 MiB).
pub fn open_path(path: &Path, options: &OpenOptions) -> Result<TgmSource> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let backing = if len < MMAP_THRESHOLD {
        let mut buf = Vec::with_capacity(len as usize);
        std::io::Read::read_to_end(&mut file, &mut buf)?;
        Backing::Owned(buf)
    } else {
        // SAFETY: the map is read-only and private to this source. As with every memory-mapped
        // reader, the file must not be truncated by another process while it is open; all
        // accesses are bounds-checked against the length fixed at open time.
        Backing::Mapped(unsafe { memmap2::Mmap::map(&file)? })
    };
    TgmSource::new(backing, options)
}

/// Opens a `.tgm` held in memory (the file-system-free entry point used by fuzzing).
pub fn open_bytes(bytes: Vec<u8>, options: &OpenOptions) -> Result<TgmSource> {
    TgmSource::new(Backing::Owned(bytes), options)
}

/// One message of the file, as found at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageInfo {
    /// Byte offset of the message in the file.
    pub offset: u64,
    /// Length in bytes (for a streamed message, as found by walking its frames).
    pub length: u64,
    /// Written in streaming mode (`total_length` 0 in the preamble).
    pub streaming: bool,
    /// The preamble flags.
    pub preamble_flags: u16,
    /// Number of data objects.
    pub object_count: usize,
}

/// Where one data object's frame lies and what its decoded bytes look like.
#[derive(Debug, Clone)]
struct ObjectInfo {
    message: usize,
    object: usize,
    /// Absolute offset and length of the data frame.
    frame_offset: u64,
    frame_len: u64,
    /// The frame carries an xxh3 hash: verify it.
    verify_hash: bool,
    /// The decoded bytes are big-endian in units of this many bytes (1: nothing to swap).
    swap_unit: usize,
    /// Exact length of the decoded bytes.
    decoded_len: usize,
    /// Stored as plain elements (no encoding, filter or compression): regions are read straight
    /// from the payload with `decode_range_from_frame`, never the whole object.
    ranged: bool,
}

impl ObjectInfo {
    fn label(&self) -> String {
        format!("message {} object {}", self.message, self.object)
    }
}

/// How a variable's values come out of its object's decoded bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// The elements as they are.
    Whole,
    /// Component `index` (0 real, 1 imaginary) of `size`-byte components of complex elements.
    Component { index: usize, size: usize },
    /// Bit `7 - i % 8` of byte `i / 8`, as a 0/1 byte.
    Bits,
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    object: usize,
    part: Part,
}

/// The most recently decoded object, and the objects being decoded right now.
#[derive(Debug, Default)]
struct Cache {
    current: Option<(usize, Arc<Vec<u8>>)>,
    loading: Vec<usize>,
    /// The last object that failed to decode, with its error (not decoded again).
    failed: Option<(usize, String)>,
}

/// An opened Tensogram file.
#[derive(Debug)]
pub struct TgmSource {
    backing: Backing,
    messages: Vec<MessageInfo>,
    objects: Vec<ObjectInfo>,
    variables: Vec<Variable>,
    plans: Vec<Plan>,
    global_attrs: Attrs,
    skipped: Vec<Skipped>,
    cache: Mutex<Cache>,
    decoded: Condvar,
    /// Per object: the outcome of its frame-hash check, made once before the first ranged read
    /// (a ranged read does not see the whole frame, so it cannot check the hash itself).
    verified: Vec<OnceLock<std::result::Result<(), String>>>,
}

/// Why an object cannot be delivered.
enum Problem {
    Malformed(String),
    Unsupported(String),
}

/// What an object becomes.
struct ObjectPlan {
    /// One entry per variable: name suffix, element type, part.
    outputs: Vec<(Option<&'static str>, ElementType, Part)>,
    swap_unit: usize,
    decoded_len: usize,
    notes: Vec<String>,
    filters: Vec<String>,
}

/// What `framing::decode_message` tells about one message, owned.
struct ParsedMessage {
    base: Vec<std::collections::BTreeMap<String, Value>>,
    extra: std::collections::BTreeMap<String, Value>,
    encoder: Option<String>,
    /// Descriptor, payload length, frame offset in the message, first (up to) 4 payload bytes.
    objects: Vec<(DataObjectDescriptor, usize, usize, Vec<u8>)>,
    index: Option<(Vec<u64>, Vec<u64>)>,
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Runs a `tensogram` call on untrusted bytes, turning a panic into an error.
fn guarded<T>(f: impl FnOnce() -> tensogram::Result<T>) -> std::result::Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(p) => Err(format!(
            "the tensogram decoder panicked: {}",
            panic_text(&*p)
        )),
    }
}

/// Walks the frames of a message the way `framing::decode_message` does, verifying the inline
/// xxh3 hash of every frame except the data frames (whose hashes are checked when they are
/// decoded), so that corrupt metadata, index or hash frames are refused at open. Also requires
/// every metadata, index and hash frame the preamble flags declare to be there: a frame whose
/// type was damaged (an index read as metadata, say) would otherwise pass unnoticed, since the
/// hash does not cover the frame header.
fn walk_frames(bytes: &[u8]) -> std::result::Result<(), String> {
    use tensogram::wire::{FrameHeader, FrameType};
    let declared = be_u16(bytes, 10).unwrap_or(0);
    let mut observed = 0u16;
    let end = bytes.len().saturating_sub(24);
    let mut pos = 24;
    while pos + 16 <= end {
        if &bytes[pos..pos + 2] != b"FR" {
            pos += 1;
            continue;
        }
        let header = guarded(|| FrameHeader::read_from(&bytes[pos..]))?;
        let frame_end = usize::try_from(header.total_length)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|&e| e <= end && e >= pos + 16)
            .ok_or_else(|| format!("the frame at message byte {pos} runs past the postamble"))?;
        observed |= match header.frame_type {
            FrameType::HeaderMetadata => 1,
            FrameType::FooterMetadata => 2,
            FrameType::HeaderIndex => 4,
            FrameType::FooterIndex => 8,
            FrameType::HeaderHash => 0x10,
            FrameType::FooterHash => 0x20,
            FrameType::PrecederMetadata | FrameType::NTensorFrame => 0,
        };
        if header.frame_type != FrameType::NTensorFrame {
            let frame = &bytes[pos..frame_end];
            guarded(|| tensogram::hash::check_frame_hash(frame, header.frame_type))
                .map_err(|e| format!("{:?} frame at message byte {pos}: {e}", header.frame_type))?;
        }
        // Padding to the next 8-byte boundary of the frame, as tensogram's reader skips it.
        pos += (frame_end - pos).div_ceil(8) * 8;
    }
    let missing = declared & 0x3f & !observed;
    if missing != 0 {
        let names: Vec<&str> = [
            "header metadata",
            "footer metadata",
            "header index",
            "footer index",
            "header hash",
            "footer hash",
        ]
        .iter()
        .enumerate()
        .filter(|(bit, _)| missing & (1 << bit) != 0)
        .map(|(_, n)| *n)
        .collect();
        return Err(format!(
            "the preamble declares {} frame(s) that the message does not hold",
            names.join(", ")
        ));
    }
    Ok(())
}

fn parse_message(bytes: &[u8]) -> std::result::Result<ParsedMessage, String> {
    let msg = guarded(|| tensogram::framing::decode_message(bytes))?;
    walk_frames(bytes)?;
    let encoder = match msg.global_metadata.reserved.get("encoder") {
        Some(Value::Map(m)) => {
            let field = |name: &str| {
                m.iter().find_map(|(k, v)| match (k, v) {
                    (Value::Text(k), Value::Text(v)) if k == name => Some(v.clone()),
                    _ => None,
                })
            };
            match (field("name"), field("version")) {
                (Some(n), Some(v)) => Some(format!("{n} {v}")),
                (Some(n), None) => Some(n),
                _ => None,
            }
        }
        _ => None,
    };
    Ok(ParsedMessage {
        base: msg.global_metadata.base,
        extra: msg.global_metadata.extra,
        encoder,
        objects: msg
            .objects
            .into_iter()
            .map(|(d, payload, _, off)| {
                let head = payload[..payload.len().min(4)].to_vec();
                (d, payload.len(), off, head)
            })
            .collect(),
        index: msg.index.map(|i| (i.offsets, i.lengths)),
    })
}

fn be_u16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_be_bytes(a))
}

fn is_int(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Integer(_)))
}

fn int_param(desc: &DataObjectDescriptor, key: &str) -> Option<i128> {
    match desc.params.get(key) {
        Some(Value::Integer(i)) => Some(i128::from(*i)),
        _ => None,
    }
}

/// Requires integer parameters `keys` of a pipeline stage.
fn require_ints(
    desc: &DataObjectDescriptor,
    stage: &str,
    keys: &[&str],
) -> std::result::Result<(), Problem> {
    for k in keys {
        if !is_int(desc.params.get(*k)) {
            return Err(Problem::Malformed(format!(
                "{stage} needs the integer parameter '{k}', which is missing or not an integer"
            )));
        }
    }
    Ok(())
}

/// Checks a descriptor and works out what it becomes.
fn plan_object(
    desc: &DataObjectDescriptor,
    payload_len: usize,
) -> std::result::Result<ObjectPlan, Problem> {
    let shape = &desc.shape;
    if desc.ndim != shape.len() as u64 {
        return Err(Problem::Malformed(format!(
            "ndim {} does not match shape {shape:?}",
            desc.ndim
        )));
    }
    let n = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Problem::Malformed(format!("shape {shape:?} has too many elements")))?;
    if desc.strides.len() != shape.len() {
        return Err(Problem::Malformed(format!(
            "strides {:?} do not match shape {shape:?}",
            desc.strides
        )));
    }
    if n > 0 {
        // C-order element strides; an axis of length 1 may have any stride.
        let mut expected = vec![1u64; shape.len()];
        for k in (0..shape.len().saturating_sub(1)).rev() {
            expected[k] = expected[k + 1].saturating_mul(shape[k + 1]);
        }
        let c_order = (0..shape.len()).all(|k| shape[k] <= 1 || desc.strides[k] == expected[k]);
        if !c_order {
            return Err(Problem::Unsupported(format!(
                "strides {:?} are not C order (expected {expected:?} for shape {shape:?}); only \
                 C-contiguous objects are supported",
                desc.strides
            )));
        }
    }

    let dtype = desc.dtype;
    let mut notes = Vec::new();
    let mut filters = Vec::new();

    // Encoding.
    let simple_packing = match desc.encoding.as_str() {
        "none" => false,
        "simple_packing" => true,
        other => {
            return Err(Problem::Unsupported(format!(
                "encoding '{other}' is not supported by this build (supported: none, \
                 simple_packing)"
            )))
        }
    };
    let mut bits_per_value = 0u64;
    if simple_packing {
        if dtype != Dtype::Float64 {
            return Err(Problem::Malformed(format!(
                "simple_packing applies to float64 objects only, this one is {dtype}"
            )));
        }
        require_ints(
            desc,
            "simple_packing",
            &[
                "sp_binary_scale_factor",
                "sp_decimal_scale_factor",
                "sp_bits_per_value",
            ],
        )?;
        if !matches!(
            desc.params.get("sp_reference_value"),
            Some(Value::Float(_) | Value::Integer(_))
        ) {
            return Err(Problem::Malformed(
                "simple_packing needs the number parameter 'sp_reference_value'".to_string(),
            ));
        }
        bits_per_value = match int_param(desc, "sp_bits_per_value") {
            Some(b @ 0..=64) => b as u64,
            other => {
                return Err(Problem::Malformed(format!(
                    "simple_packing bits per value {other:?} is outside 0..=64"
                )))
            }
        };
        filters.push(format!("simple_packing({bits_per_value} bits)"));
        notes.push("lossy encoding simple_packing: values are the decoded f64".to_string());
    }

    // Filter.
    match desc.filter.as_str() {
        "none" => {}
        "shuffle" => {
            require_ints(desc, "the shuffle filter", &["shuffle_element_size"])?;
            filters.push("shuffle".to_string());
        }
        other => {
            return Err(Problem::Unsupported(format!(
                "filter '{other}' is not supported by this build (supported: none, shuffle)"
            )))
        }
    }

    // Compression.
    let compression = desc.compression.as_str();
    match compression {
        "none" => {}
        "zstd" => filters.push(match int_param(desc, "zstd_level") {
            Some(l) => format!("zstd({l})"),
            None => "zstd".to_string(),
        }),
        "lz4" => filters.push("lz4".to_string()),
        "szip" => {
            require_ints(desc, "szip", &["szip_rsi", "szip_block_size", "szip_flags"])?;
            filters.push("szip".to_string());
        }
        "rle" | "roaring" => {
            if dtype != Dtype::Bitmask {
                return Err(Problem::Malformed(format!(
                    "compression '{compression}' applies to bitmask objects only, this one is \
                     {dtype}"
                )));
            }
            filters.push(compression.to_string());
        }
        other => {
            return Err(Problem::Unsupported(format!(
                "compression '{other}' is not supported by this build (supported: \
                 {SUPPORTED_COMPRESSIONS})"
            )))
        }
    }

    // Masks.
    if let Some(masks) = &desc.masks {
        let present: Vec<(&str, &tensogram::MaskDescriptor)> = [
            ("nan", masks.nan.as_ref()),
            ("inf+", masks.pos_inf.as_ref()),
            ("inf-", masks.neg_inf.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, m)| m.map(|m| (k, m)))
        .collect();
        for (kind, m) in &present {
            if !matches!(
                m.method.as_str(),
                "none" | "rle" | "roaring" | "zstd" | "lz4"
            ) {
                return Err(Problem::Unsupported(format!(
                    "{kind} mask method '{}' is not supported by this build (supported: \
                     {SUPPORTED_MASK_METHODS})",
                    m.method
                )));
            }
        }
        if !present.is_empty() {
            if dtype == Dtype::Bitmask {
                return Err(Problem::Malformed(
                    "NaN/Inf masks on a bitmask object".to_string(),
                ));
            }
            let kinds: Vec<&str> = present.iter().map(|(k, _)| *k).collect();
            notes.push(format!(
                "non-finite values restored from the tensogram masks ({}): canonical quiet \
                 NaN and ±Inf",
                kinds.join(", ")
            ));
        }
    }

    // Sizes: the encoded stream (before compression) and the decoded bytes.
    let too_big = || Problem::Malformed(format!("shape {shape:?} of {dtype} is too large"));
    let width = dtype.byte_width() as u64;
    let encoded_len: u64 = if simple_packing {
        n.checked_mul(bits_per_value)
            .ok_or_else(too_big)?
            .div_ceil(8)
    } else if dtype == Dtype::Bitmask {
        n.div_ceil(8)
    } else {
        n.checked_mul(width).ok_or_else(too_big)?
    };
    let decoded_len: u64 = if simple_packing {
        n.checked_mul(8).ok_or_else(too_big)?
    } else {
        encoded_len
    };
    let decoded_len = usize::try_from(decoded_len).map_err(|_| too_big())?;
    match compression {
        "none" if payload_len as u64 != encoded_len => {
            return Err(Problem::Malformed(format!(
                "the payload is {payload_len} bytes, shape {shape:?} of {dtype} needs \
                 {encoded_len}"
            )));
        }
        // tensogram's lz4 stream starts with the decoded size (u32, little-endian), checked
        // against the descriptor by `check_lz4_prefix`.
        "lz4" if payload_len < 4 => {
            return Err(Problem::Malformed(format!(
                "the lz4 payload is {payload_len} bytes, too short for its size prefix"
            )));
        }
        _ => {}
    }

    let mut outputs = Vec::new();
    let swap_unit = match dtype {
        Dtype::Complex64 | Dtype::Complex128 => {
            let (et, size, short) = if dtype == Dtype::Complex64 {
                (ElementType::F32, 4, "complex64")
            } else {
                (ElementType::F64, 8, "complex128")
            };
            outputs.push((Some("real"), et, Part::Component { index: 0, size }));
            outputs.push((Some("imag"), et, Part::Component { index: 1, size }));
            notes.push(format!(
                "{short} object split into its real and imaginary parts"
            ));
            size
        }
        Dtype::Bitmask => {
            outputs.push((None, ElementType::U8, Part::Bits));
            notes.push("bitmask unpacked MSB-first to one u8 (0 or 1) per element".to_string());
            1
        }
        _ => {
            let et = if simple_packing {
                ElementType::F64
            } else {
                match dtype {
                    Dtype::Float16 => ElementType::F16,
                    Dtype::Bfloat16 => ElementType::BF16,
                    Dtype::Float32 => ElementType::F32,
                    Dtype::Float64 => ElementType::F64,
                    Dtype::Int8 => ElementType::I8,
                    Dtype::Int16 => ElementType::I16,
                    Dtype::Int32 => ElementType::I32,
                    Dtype::Int64 => ElementType::I64,
                    Dtype::Uint8 => ElementType::U8,
                    Dtype::Uint16 => ElementType::U16,
                    Dtype::Uint32 => ElementType::U32,
                    Dtype::Uint64 => ElementType::U64,
                    // Handled above.
                    Dtype::Complex64 | Dtype::Complex128 | Dtype::Bitmask => ElementType::U8,
                }
            };
            outputs.push((None, et, Part::Whole));
            et.size()
        }
    };
    let swap_unit = if desc.byte_order == ByteOrder::Big {
        swap_unit
    } else {
        1
    };
    Ok(ObjectPlan {
        outputs,
        swap_unit,
        decoded_len,
        notes,
        filters,
    })
}

/// The declared decoded size at the start of an lz4 payload must match the descriptor.
fn check_lz4_prefix(
    desc: &DataObjectDescriptor,
    payload: &[u8],
) -> std::result::Result<(), String> {
    let Some(p) = payload.get(..4) else {
        return Ok(());
    };
    let declared = u64::from(u32::from_le_bytes([p[0], p[1], p[2], p[3]]));
    let n = desc
        .shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .unwrap_or(u64::MAX);
    let expected = if desc.encoding == "simple_packing" {
        let bits = int_param(desc, "sp_bits_per_value")
            .unwrap_or(0)
            .clamp(0, 64) as u64;
        n.checked_mul(bits).map(|b| b.div_ceil(8))
    } else if desc.dtype == Dtype::Bitmask {
        Some(n.div_ceil(8))
    } else {
        n.checked_mul(desc.dtype.byte_width() as u64)
    };
    if expected != Some(declared) {
        return Err(format!(
            "the lz4 payload declares {declared} decoded bytes, shape {:?} of {} needs {}",
            desc.shape,
            desc.dtype,
            expected.map_or("more than 2^64".to_string(), |e| e.to_string())
        ));
    }
    Ok(())
}

impl TgmSource {
    fn new(backing: Backing, options: &OpenOptions) -> Result<TgmSource> {
        let spans = scan::scan(&backing)?;
        let single = spans.len() == 1;
        let mut messages = Vec::with_capacity(spans.len());
        let mut objects: Vec<ObjectInfo> = Vec::new();
        let mut variables: Vec<Variable> = Vec::new();
        let mut plans: Vec<Plan> = Vec::new();
        let mut skipped: Vec<Skipped> = Vec::new();
        let mut global_attrs: Attrs = Vec::new();

        for (m, span) in spans.iter().enumerate() {
            let Span {
                offset,
                length,
                streaming,
                flags,
            } = *span;
            let bytes = backing.read(offset, length)?;
            let corrupt = |detail: String| {
                SourceError::malformed(format!(
                    "corrupt Tensogram message {m} at byte {offset}: {detail}"
                ))
            };
            let parsed = parse_message(bytes).map_err(corrupt)?;

            // Every data frame must end before the postamble; the index must list them.
            let mut frames = Vec::with_capacity(parsed.objects.len());
            for (i, (_, _, off, _)) in parsed.objects.iter().enumerate() {
                let (fflags, flen) = match (be_u16(bytes, off + 6), be_u64(bytes, off + 8)) {
                    (Some(f), Some(l)) => (f, l),
                    _ => return Err(corrupt(format!("object {i}: frame header cut short"))),
                };
                let end = (*off as u64).checked_add(flen);
                if end.is_none_or(|e| e > length - 24) {
                    return Err(corrupt(format!(
                        "object {i}: its data frame at message byte {off} runs into the postamble"
                    )));
                }
                frames.push((*off as u64, flen, fflags & 2 != 0));
            }
            if let Some((offs, lens)) = &parsed.index {
                let ours: Vec<u64> = frames.iter().map(|f| f.0).collect();
                let our_lens: Vec<u64> = frames.iter().map(|f| f.1).collect();
                if *offs != ours || *lens != our_lens {
                    return Err(corrupt(format!(
                        "its index lists data frames at {offs:?} (lengths {lens:?}), the \
                         message holds them at {ours:?} (lengths {our_lens:?})"
                    )));
                }
            }

            let extra = parsed.extra.iter().map(|(k, v)| (k.as_str(), v));
            let mut message_facts: Attrs = Vec::new();
            if single {
                if meta::flatten_entries("", extra.clone(), &mut global_attrs) {
                    message_facts.push((
                        "tensogram_extra_json".into(),
                        AttrValue::Text(meta::json_entries(extra)),
                    ));
                }
            } else {
                let lossy = meta::flatten_entries(
                    "tensogram_message_extra",
                    extra.clone(),
                    &mut message_facts,
                );
                if lossy {
                    message_facts.push((
                        "tensogram_message_extra_json".into(),
                        AttrValue::Text(meta::json_entries(extra)),
                    ));
                }
            }
            if let Some(e) = &parsed.encoder {
                message_facts.push(("tensogram_encoder".into(), AttrValue::Text(e.clone())));
            }

            for (i, (desc, payload_len, _, payload_head)) in parsed.objects.iter().enumerate() {
                let name = format!("message_{m}/object_{i}");
                let plan = match plan_object(desc, *payload_len).and_then(|p| {
                    if desc.compression == "lz4" {
                        check_lz4_prefix(desc, payload_head).map_err(Problem::Malformed)?;
                    }
                    Ok(p)
                }) {
                    Ok(p) => p,
                    Err(Problem::Malformed(why)) => {
                        return Err(corrupt(format!("object {i}: {why}")));
                    }
                    Err(Problem::Unsupported(why)) => {
                        if options.skip_unsupported {
                            skipped.push(Skipped { name, reason: why });
                            continue;
                        }
                        return Err(SourceError::unsupported(format!(
                            "message {m} object {i}: {why}"
                        )));
                    }
                };

                let (frame_off, frame_len, verify_hash) = frames[i];
                let object_index = objects.len();
                objects.push(ObjectInfo {
                    message: m,
                    object: i,
                    frame_offset: offset + frame_off,
                    frame_len,
                    verify_hash,
                    swap_unit: plan.swap_unit,
                    decoded_len: plan.decoded_len,
                    ranged: desc.encoding == "none"
                        && desc.filter == "none"
                        && desc.compression == "none"
                        && desc.dtype != Dtype::Bitmask
                        && desc.dtype.byte_width() > 0,
                });

                // Attributes: the object's metadata without `_reserved_`.
                let entry = parsed.base.get(i);
                let entries = entry
                    .into_iter()
                    .flatten()
                    .filter(|(k, _)| k.as_str() != tensogram::RESERVED_KEY)
                    .map(|(k, v)| (k.as_str(), v));
                let mut attrs: Attrs = Vec::new();
                let lossy = meta::flatten_entries("", entries.clone(), &mut attrs);

                let mut facts: Attrs = vec![
                    ("tensogram_message".into(), AttrValue::I64(vec![m as i64])),
                    ("tensogram_object".into(), AttrValue::I64(vec![i as i64])),
                    (
                        "tensogram_dtype".into(),
                        AttrValue::Text(desc.dtype.to_string()),
                    ),
                    (
                        "tensogram_byte_order".into(),
                        AttrValue::Text(
                            match desc.byte_order {
                                ByteOrder::Big => "big",
                                ByteOrder::Little => "little",
                            }
                            .into(),
                        ),
                    ),
                    (
                        "tensogram_encoding".into(),
                        AttrValue::Text(desc.encoding.clone()),
                    ),
                    (
                        "tensogram_filter".into(),
                        AttrValue::Text(desc.filter.clone()),
                    ),
                    (
                        "tensogram_compression".into(),
                        AttrValue::Text(desc.compression.clone()),
                    ),
                ];
                meta::flatten_entries(
                    "tensogram_params",
                    desc.params.iter().map(|(k, v)| (k.as_str(), v)),
                    &mut facts,
                );
                if let Some(masks) = &desc.masks {
                    let kinds: Vec<String> = [
                        ("nan", masks.nan.is_some()),
                        ("inf+", masks.pos_inf.is_some()),
                        ("inf-", masks.neg_inf.is_some()),
                    ]
                    .into_iter()
                    .filter(|(_, p)| *p)
                    .map(|(k, _)| k.to_string())
                    .collect();
                    if !kinds.is_empty() {
                        facts.push(("tensogram_masks".into(), AttrValue::TextList(kinds)));
                    }
                }
                if lossy {
                    facts.push((
                        "tensogram_metadata_json".into(),
                        AttrValue::Text(meta::json_entries(entries)),
                    ));
                }
                facts.extend(message_facts.iter().cloned());

                let mut notes = Vec::new();
                let shape = if desc.shape.is_empty() {
                    notes.push("0-d scalar stored as shape [1]".to_string());
                    vec![1]
                } else {
                    desc.shape.clone()
                };
                notes.extend(plan.notes.iter().cloned());
                let layout = SourceLayout {
                    chunk_shape: None,
                    compressed: desc.compression != "none" || desc.encoding != "none",
                    filters: plan.filters.clone(),
                };
                for (suffix, dtype, part) in &plan.outputs {
                    let mut attrs = attrs.clone();
                    let name = match suffix {
                        Some(s) => {
                            attrs.push(("complex_part".into(), AttrValue::Text(s.to_string())));
                            attrs.push((
                                "complex_dtype".into(),
                                AttrValue::Text(
                                    if desc.dtype == Dtype::Complex64 {
                                        "c64"
                                    } else {
                                        "c128"
                                    }
                                    .into(),
                                ),
                            ));
                            format!("{name}/{s}")
                        }
                        None => name.clone(),
                    };
                    variables.push(Variable {
                        name,
                        dtype: *dtype,
                        shape: shape.clone(),
                        dims: None,
                        attrs,
                        layout: layout.clone(),
                        role: tet_source::Role::Data,
                        notes: notes.clone(),
                        facts: facts.clone(),
                    });
                    plans.push(Plan {
                        object: object_index,
                        part: *part,
                    });
                }
            }

            backing.release(bytes);
            messages.push(MessageInfo {
                offset,
                length,
                streaming,
                preamble_flags: flags,
                object_count: parsed.objects.len(),
            });
        }

        let verified = (0..objects.len()).map(|_| OnceLock::new()).collect();
        Ok(TgmSource {
            backing,
            messages,
            objects,
            variables,
            plans,
            global_attrs,
            skipped,
            cache: Mutex::new(Cache::default()),
            verified,
            decoded: Condvar::new(),
        })
    }

    /// The messages of the file, in order.
    pub fn messages(&self) -> &[MessageInfo] {
        &self.messages
    }

    fn lock(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The decoded little-endian bytes of object `obj`: from the cache, or decoded now (once,
    /// however many threads ask at the same time).
    fn object_bytes(&self, obj: usize) -> Result<Arc<Vec<u8>>> {
        let mut cache = self.lock();
        loop {
            if let Some((o, bytes)) = &cache.current {
                if *o == obj {
                    return Ok(Arc::clone(bytes));
                }
            }
            if let Some((o, why)) = &cache.failed {
                if *o == obj {
                    return Err(SourceError::malformed(why.clone()));
                }
            }
            if !cache.loading.contains(&obj) {
                break;
            }
            cache = self.decoded.wait(cache).unwrap_or_else(|e| e.into_inner());
        }
        cache.loading.push(obj);
        // The cache lets go of the previous object before this one is decoded: readers still
        // using it hold their own reference, and a finished one is freed now rather than after
        // the next decode (resident memory stays near one decoded object per worker).
        cache.current = None;
        drop(cache);

        let result = self.decode(obj).map(Arc::new);

        let mut cache = self.lock();
        cache.loading.retain(|&o| o != obj);
        match &result {
            Ok(bytes) => cache.current = Some((obj, Arc::clone(bytes))),
            Err(SourceError::Malformed(why)) => cache.failed = Some((obj, why.clone())),
            Err(_) => {}
        }
        drop(cache);
        self.decoded.notify_all();
        result
    }

    /// Checks the frame hash of object `obj` once (a no-op when the frame carries none).
    fn verify_once(&self, obj: usize) -> Result<()> {
        let info = &self.objects[obj];
        if !info.verify_hash {
            return Ok(());
        }
        let outcome = self.verified[obj].get_or_init(|| {
            let frame = self
                .backing
                .read(info.frame_offset, info.frame_len)
                .map_err(|e| e.to_string())?;
            let checked = catch_unwind(AssertUnwindSafe(|| {
                let header = tensogram::wire::FrameHeader::read_from(frame)?;
                tensogram::hash::check_frame_hash(frame, header.frame_type)
            }));
            self.backing.release(frame);
            match checked {
                Ok(Ok(true)) => Ok(()),
                Ok(Ok(false)) => Err("the frame is flagged as hashed but has no hash".into()),
                Ok(Err(e)) => Err(format!("the data frame is corrupt ({e})")),
                Err(p) => Err(format!("the hash check panicked: {}", panic_text(&*p))),
            }
        });
        outcome
            .clone()
            .map_err(|why| SourceError::malformed(format!("{}: {why}", info.label())))
    }

    /// Reads element runs `(offset, count)` of a plain object straight from its payload into
    /// `out`, in order, little-endian.
    fn read_runs(&self, obj: usize, runs: &[(u64, u64)], out: &mut [u8]) -> Result<()> {
        self.verify_once(obj)?;
        let info = &self.objects[obj];
        let frame = self.backing.read(info.frame_offset, info.frame_len)?;
        let options = DecodeOptions {
            native_byte_order: false,
            compression_backend: CompressionBackend::Ffi,
            threads: 1,
            restore_non_finite: true,
            verify_hash: false,
            ..DecodeOptions::default()
        };
        let decoded = catch_unwind(AssertUnwindSafe(|| {
            tensogram::decode::decode_range_from_frame(frame, runs, &options)
        }));
        self.backing.release(frame);
        let parts = match decoded {
            Ok(Ok((_, parts))) => parts,
            Ok(Err(TensogramError::Io(e))) => return Err(SourceError::Io(e)),
            Ok(Err(e)) => return Err(SourceError::malformed(format!("{}: {e}", info.label()))),
            Err(p) => {
                return Err(SourceError::malformed(format!(
                    "{}: the tensogram decoder panicked: {}",
                    info.label(),
                    panic_text(&*p)
                )))
            }
        };
        let total: usize = parts.iter().map(Vec::len).sum();
        if total != out.len() {
            return Err(SourceError::malformed(format!(
                "{}: a region decoded to {total} bytes, {} expected",
                info.label(),
                out.len()
            )));
        }
        let mut at = 0;
        for part in &parts {
            out[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        if info.swap_unit > 1 {
            for c in out.chunks_exact_mut(info.swap_unit) {
                c.reverse();
            }
        }
        Ok(())
    }

    /// Decodes one object from its data frame alone.
    fn decode(&self, obj: usize) -> Result<Vec<u8>> {
        let info = self
            .objects
            .get(obj)
            .ok_or_else(|| SourceError::InvalidRequest(format!("no object {obj}")))?;
        let frame = self.backing.read(info.frame_offset, info.frame_len)?;
        let options = DecodeOptions {
            // Bytes in the object's own byte order: swapped to little-endian below, on any host.
            native_byte_order: false,
            // Explicit, so that TENSOGRAM_COMPRESSION_BACKEND / TENSOGRAM_THREADS cannot interfere.
            compression_backend: CompressionBackend::Ffi,
            threads: 1,
            restore_non_finite: true,
            verify_hash: info.verify_hash,
            ..DecodeOptions::default()
        };
        let decoded = catch_unwind(AssertUnwindSafe(|| {
            tensogram::decode::decode_object_from_frame(frame, &options)
        }));
        self.backing.release(frame);
        let mut data = match decoded {
            Ok(Ok((_, data))) => data,
            Ok(Err(TensogramError::Io(e))) => return Err(SourceError::Io(e)),
            Ok(Err(e @ TensogramError::HashMismatch { .. })) => {
                return Err(SourceError::malformed(format!(
                    "{}: the data frame is corrupt ({e})",
                    info.label()
                )))
            }
            Ok(Err(e)) => {
                return Err(SourceError::malformed(format!("{}: {e}", info.label())));
            }
            Err(p) => {
                return Err(SourceError::malformed(format!(
                    "{}: the tensogram decoder panicked: {}",
                    info.label(),
                    panic_text(&*p)
                )))
            }
        };
        if data.len() != info.decoded_len {
            return Err(SourceError::malformed(format!(
                "{}: decoded to {} bytes, the descriptor implies {}",
                info.label(),
                data.len(),
                info.decoded_len
            )));
        }
        if info.swap_unit > 1 {
            for c in data.chunks_exact_mut(info.swap_unit) {
                c.reverse();
            }
        }
        Ok(data)
    }
}

/// Above this many element runs a region is read by decoding the whole object instead.
const MAX_RUNS: usize = 4096;

/// The region `start .. start + count` of a C-order array of `shape` as runs of consecutive
/// elements `(offset, count)`, in C order; `None` when there would be more than `max` runs.
/// The region is non-empty and inside the shape (checked by the caller).
fn region_runs(shape: &[u64], start: &[u64], count: &[u64], max: usize) -> Option<Vec<(u64, u64)>> {
    let rank = shape.len();
    if rank == 0 {
        return Some(vec![(0, 1)]);
    }
    let mut strides = vec![1u64; rank];
    for k in (0..rank - 1).rev() {
        strides[k] = strides[k + 1].checked_mul(shape[k + 1])?;
    }
    // The run: the innermost axes the region covers whole, plus the next one.
    let mut axis = rank - 1;
    let mut run = count[axis];
    while axis > 0 && count[axis] == shape[axis] {
        axis -= 1;
        run = run.checked_mul(count[axis])?;
    }
    let n_runs = count[..axis]
        .iter()
        .try_fold(1u64, |a, &c| a.checked_mul(c))?;
    if n_runs > max as u64 {
        return None;
    }
    let mut runs = Vec::with_capacity(n_runs as usize);
    let mut idx = vec![0u64; axis];
    loop {
        let mut off = start[axis] * strides[axis];
        for k in 0..axis {
            off += (start[k] + idx[k]) * strides[k];
        }
        for k in axis + 1..rank {
            off += start[k] * strides[k];
        }
        runs.push((off, run));
        // Next outer index (odometer over axes 0..axis, last fastest).
        let mut k = axis;
        loop {
            if k == 0 {
                return Some(runs);
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < count[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// Copies the region `start .. start + count` of a C-order array of `shape` out of `data`
/// (the decoded object) into `out` (`size` bytes per output element), by runs of consecutive
/// elements.
fn copy_region(
    data: &[u8],
    shape: &[u64],
    start: &[u64],
    count: &[u64],
    part: Part,
    size: usize,
    out: &mut [u8],
) -> Result<()> {
    let rank = shape.len();
    if rank == 0 || count.contains(&0) {
        return Ok(());
    }
    // Element strides of the whole array.
    let mut strides = vec![1u64; rank];
    for k in (0..rank - 1).rev() {
        strides[k] = strides[k + 1] * shape[k + 1];
    }
    // The run: the innermost axes the region covers whole, plus the next one.
    let mut axis = rank - 1;
    let mut run = count[axis];
    while axis > 0 && count[axis] == shape[axis] {
        axis -= 1;
        run *= count[axis];
    }
    let outside = || SourceError::malformed("decoded object is shorter than its shape");
    let mut idx = vec![0u64; axis];
    let mut dst = 0u64;
    loop {
        let mut src = start[axis] * strides[axis];
        for (k, &i) in idx.iter().enumerate() {
            src += (start[k] + i) * strides[k];
        }
        let d0 = dst as usize;
        match part {
            Part::Whole => {
                let a = src as usize * size;
                let len = run as usize * size;
                let from = data.get(a..a + len).ok_or_else(outside)?;
                out[d0 * size..d0 * size + len].copy_from_slice(from);
            }
            Part::Component { index, size: cs } => {
                let a = src as usize * 2 * cs;
                let from = data.get(a..a + run as usize * 2 * cs).ok_or_else(outside)?;
                let to = &mut out[d0 * cs..(d0 + run as usize) * cs];
                for (o, e) in to.chunks_exact_mut(cs).zip(from.chunks_exact(2 * cs)) {
                    o.copy_from_slice(&e[index * cs..(index + 1) * cs]);
                }
            }
            Part::Bits => {
                let last = (src + run - 1) as usize / 8;
                if last >= data.len() {
                    return Err(outside());
                }
                for (e, o) in out[d0..d0 + run as usize].iter_mut().enumerate() {
                    let i = src as usize + e;
                    *o = (data[i / 8] >> (7 - i % 8)) & 1;
                }
            }
        }
        dst += run;
        // Next position of the outer axes (odometer), last axis fastest.
        let mut k = axis;
        loop {
            if k == 0 {
                return Ok(());
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < count[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

impl Source for TgmSource {
    fn variables(&self) -> &[Variable] {
        &self.variables
    }

    fn global_attrs(&self) -> &[(String, AttrValue)] {
        &self.global_attrs
    }

    fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let (v, plan) = self
            .variables
            .get(var)
            .zip(self.plans.get(var))
            .ok_or_else(|| SourceError::InvalidRequest(format!("no variable {var}")))?;
        let n = check_region(&v.shape, start, count, v.dtype.size(), out.len())?;
        if n == 0 {
            return Ok(());
        }
        if plan.part == Part::Whole && self.objects[plan.object].ranged {
            if let Some(runs) = region_runs(&v.shape, start, count, MAX_RUNS) {
                return self.read_runs(plan.object, &runs, out);
            }
        }
        let data = self.object_bytes(plan.object)?;
        copy_region(
            &data,
            &v.shape,
            start,
            count,
            plan.part,
            v.dtype.size(),
            out,
        )
    }

    fn parallel_reads(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Element runs cover exactly the region, in C order: gathering them from an array of
        /// its own indices gives what `copy_region` copies.
        #[test]
        fn runs_match_region_copy(
            dims in proptest::collection::vec((1u64..6, 0u64..6, 0u64..6), 1..5),
        ) {
            let shape: Vec<u64> = dims.iter().map(|d| d.0).collect();
            let start: Vec<u64> = dims.iter().map(|d| d.1 % d.0).collect();
            let count: Vec<u64> =
                dims.iter().zip(&start).map(|(d, &s)| 1 + d.2 % (d.0 - s)).collect();
            let n: u64 = shape.iter().product();
            let data: Vec<u8> = (0..n as u32).flat_map(|x| x.to_le_bytes()).collect();
            let m: u64 = count.iter().product();
            let mut want = vec![0u8; m as usize * 4];
            copy_region(&data, &shape, &start, &count, Part::Whole, 4, &mut want).unwrap();
            let runs = region_runs(&shape, &start, &count, usize::MAX).unwrap();
            let mut got = Vec::new();
            for (off, len) in runs {
                got.extend_from_slice(&data[off as usize * 4..(off + len) as usize * 4]);
            }
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn runs_above_the_limit_fall_back() {
        assert_eq!(region_runs(&[4, 4], &[0, 0], &[4, 2], 3), None);
        assert_eq!(
            region_runs(&[4, 4], &[0, 0], &[4, 4], 1),
            Some(vec![(0, 16)])
        );
        assert_eq!(
            region_runs(&[4, 4], &[1, 1], &[2, 2], 2),
            Some(vec![(5, 2), (9, 2)])
        );
    }

    #[test]
    fn region_copy_by_runs() {
        // 3 × 4 array of u16 0..12.
        let data: Vec<u8> = (0u16..12).flat_map(|x| x.to_le_bytes()).collect();
        let shape = [3, 4];
        let mut out = vec![0u8; 2 * 2 * 2];
        copy_region(&data, &shape, &[1, 1], &[2, 2], Part::Whole, 2, &mut out).unwrap();
        let got: Vec<u16> = out
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(got, vec![5, 6, 9, 10]);
        // Whole rows merge into one run.
        let mut out = vec![0u8; 2 * 4 * 2];
        copy_region(&data, &shape, &[1, 0], &[2, 4], Part::Whole, 2, &mut out).unwrap();
        assert_eq!(&out[..], &data[8..]);
    }

    #[test]
    fn region_copy_components_and_bits() {
        // Two complex64-like elements: (1, 2), (3, 4) as u32 components.
        let data: Vec<u8> = [1u32, 2, 3, 4]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let mut out = vec![0u8; 8];
        let part = Part::Component { index: 1, size: 4 };
        copy_region(&data, &[2], &[0], &[2], part, 4, &mut out).unwrap();
        assert_eq!(
            out,
            [2u32, 4]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<_>>()
        );
        let bits = [0b1010_0000u8, 0b1000_0000];
        let mut out = vec![0u8; 7];
        copy_region(&bits, &[9], &[2], &[7], Part::Bits, 1, &mut out).unwrap();
        assert_eq!(out, vec![1, 0, 0, 0, 0, 0, 1]);
        assert!(copy_region(&bits[..1], &[9], &[2], &[7], Part::Bits, 1, &mut out).is_err());
    }
}
