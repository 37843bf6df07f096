//! Tensogram (`.tgm`) importer for tet-convert.
//!
//! Tensogram (ECMWF) is a message format for N-dimensional tensors: a file is a sequence of
//! self-describing *messages*, each a preamble, optional header frames (CBOR metadata, an index,
//! hashes), one frame per *data object* (payload + CBOR descriptor: shape, strides, dtype, byte
//! order, encoding → filter → compression pipeline, optional NaN/Inf masks) and optional footer
//! frames, closed by a postamble. Messages written by a streaming encoder have total length 0
//! and carry their index and metadata in the footer. Decoding is done by ECMWF's `tensogram`
//! crate (built with zstd, lz4 and szip — pure Rust — and zfp and sz3, which build vendored
//! C/C++ libraries); blosc2 payloads and masks are decompressed by `tet-blosc2`, the
//! workspace's own Blosc2 frame decoder (c-blosc2's bundled zstd collides with zstd-sys at link
//! time), then handed to tensogram for the rest of the pipeline (see `blosc2.rs`). This crate
//! finds the messages, checks them, and maps them.
//!
//! # Mapping
//!
//! * **Variables**: every data object of every message, in file order, is one variable named
//!   `message_<m>/object_<i>` (both 0-based). Element types: `float16` → `ElementType::F16`,
//!   `bfloat16` → `ElementType::BF16` and `int8` → `ElementType::I8` (the engine widens
//!   those two), the other integer and float types to the same width, `bitmask` → `U8` (bits
//!   unpacked MSB-first to one 0/1 byte per element, noted), `complex64` / `complex128` →
//!   `ElementType::C64` / `ElementType::C128` (interleaved real and imaginary parts; the
//!   engine splits them). A 0-d object (shape `[]`) is a 0-d variable. Values are delivered
//!   little-endian whatever the object's byte order (each part of a complex value swapped on
//!   its own). Ranks above 8 are delivered as they are (the engine decides).
//! * **Values**: the decoded values, exactly as tensogram's decoder returns them. NaN / ±Inf
//!   positions recorded in the object's masks are restored (canonical quiet NaN, ±Inf; noted).
//!   Lossy stages are decoded and recorded as such: `simple_packing` gives the decoded `f64`
//!   values, with the note `lossy encoding simple_packing: values are the decoded f64`; the
//!   lossy compressors `zfp` and `sz3` give the decoded `f64` values, with the note `lossy
//!   compression zfp(mode=fixed_rate, rate=16.0): values are the decoded f64` (the codec and
//!   its parameters). Either way the fact `tensogram_lossy` names the lossy stage and its
//!   parameters in the same form (`sz3(error_bound=0.001, error_bound_mode=abs)`,
//!   `simple_packing(binary_scale_factor=-5, bits_per_value=12, …)`), and the parameters are
//!   also among the `tensogram_params.<key>` facts. `blosc2` (any of its inner codecs) is
//!   lossless; its objects carry the note `blosc2 decoded by tet-blosc2 (…)`.
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
//!   `tensogram_lossy` (the lossy stage, above), `tensogram_masks` (the mask kinds present)
//!   and `tensogram_encoder` (name and version of the
//!   writing library; its wall-clock time and uuid are left out: they change on every run).
//!   None of them is one of the typed facts of `tet_source`: all are [`Fact::Private`] facts of
//!   the `tgm` format.
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
//!   `simple_packing` on anything but float64, missing or mistyped codec parameters (szip's
//!   integers, zfp's mode and its rate / precision / tolerance, sz3's error-bound mode and
//!   bound, blosc2's codec name and level when present), masks on a bitmask.
//! * Unsupported (an error unless `skip_unsupported`, then listed in [`Source::skipped`]), one
//!   line naming the object and the reason:
//!   - compressions this build does not decode: `message 0 object 1: compression 'brotli' is
//!     not supported by this build (supported: none, zstd, lz4, szip, blosc2, zfp, sz3)`
//!     likewise blosc2 inner codecs, zfp modes and sz3 error-bound modes tensogram does not
//!     know, unknown encodings and filters, mask methods other than none / rle / roaring /
//!     zstd / lz4 / blosc2, and strides that lay the elements out in no axis order (gapped or
//!     overlapping; Fortran order and other axis permutations are read, transposed to C order
//!     when the object is decoded, with a note). A blosc2 frame using a variant
//!     tet-blosc2 does not implement (none that tensogram writes) fails its read as
//!     unsupported, naming it (`blosc2: codec snappy is not supported`);
//!   - `zfp` or `sz3` on anything but a plain float64 object (another dtype, or after an
//!     encoding or a filter): tensogram's compressors read their input as native `f64` values
//!     whatever the dtype, so such an object does not decode to what was written (tensogram
//!     itself returns bytes of the wrong size, or values scrambled beyond the error bound):
//!     `message 0 object 1: compression 'zfp' on a float32 object: tensogram's zfp codec
//!     compresses its input as float64 values, so only plain float64 objects decode to their
//!     values`.
//! * Wire versions other than 3.
//!
//! A message with no data object is valid (it contributes no variable and nothing is
//! skipped): tensogram's streaming encoder, finished before any object, writes one whose
//! preamble declares a footer hash frame it then leaves out (there is nothing to hash), so a
//! declared but absent hash frame is accepted in a message without data objects only.
//!
//! At read time the frame's xxh3 hash is verified when the writer stored one (tensogram's
//! default), before the payload reaches a decoder; a mismatch (or any decoder error) fails the
//! read with the message and object named.
//!
//! **Known limitation**: the sz3 decoder is C++ (SZ3) and trusts its input more than the rest
//! of this importer. A payload that was damaged or crafted *and* still carries a matching frame
//! hash (or none) can crash the process inside it (SIGABRT when SZ3 throws a C++ exception
//! through tensogram's FFI), which no importer can catch in-process. `tet-convert` converts
//! every input in a supervised worker process, so such a file costs one failed row; embedders
//! opening untrusted `.tgm` files with sz3 should do the same. zfp, blosc2 (tet-blosc2, safe
//! Rust) and every pure-Rust codec hold up.
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
//! entry point). [`open_ranged`] reads an object in a store by ranges: the message structure
//! and each message (one at a time) at open, then each object's data frame when it is first
//! read (decoded once, as from a file); a plain object whose frame carries no hash is read as
//! element ranges of its payload instead, never whole. Nothing is allocated from a declared
//! size before it is checked against the file, except the decoded object itself, which the
//! decoder reserves fallibly (a compressed payload may legitimately expand far beyond its size).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use tet_source::byte_source::ByteSource;

use ciborium::Value;
use tensogram::{
    ByteOrder, CompressionBackend, DataObjectDescriptor, DecodeOptions, Dtype, TensogramError,
};
use tet_source::{
    extension_confidence, AttrValue, Attrs, Confidence, Fact, Feature, Importer, OpenOptions,
    Request, Result, Skipped, Source, SourceError, SourceLayout, Variable,
};

mod blosc2;
mod frames;
mod meta;
mod plan;
mod region;
mod scan;

use blosc2::Blosc2Plan;
use frames::{be_u16, be_u64, parse_message, ParsedMessage};
use plan::{check_lz4_prefix, plan_object, ObjectPlan, Part, Problem};
use region::{copy_region, region_runs, to_c_order, MAX_RUNS};
use tet_source::panic_text;

use scan::{Backing, ReadAt, Span};

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

    fn opens_bytes(&self) -> bool {
        true
    }

    fn open_bytes(
        &self,
        _name: &Path,
        bytes: Arc<dyn ByteSource>,
        options: &OpenOptions,
    ) -> Result<Box<dyn Source>> {
        Ok(Box::new(open_ranged(bytes, options)?))
    }
}

/// Files smaller than this are read into memory; larger ones are memory-mapped.
const MMAP_THRESHOLD: u64 = 1 << 20;

/// Opens a `.tgm` file (memory-mapped when larger than 1 MiB).
pub fn open_path(path: &Path, options: &OpenOptions) -> Result<TgmSource> {
    let backing = Backing::open(&mut std::fs::File::open(path)?, MMAP_THRESHOLD)?;
    TgmSource::new(backing, options)
}

/// Opens a `.tgm` held in memory (the file-system-free entry point used by fuzzing).
pub fn open_bytes(bytes: Vec<u8>, options: &OpenOptions) -> Result<TgmSource> {
    TgmSource::new(
        Backing::Local(tet_source::mapped::FileBytes::Owned(bytes)),
        options,
    )
}

/// Opens a `.tgm` read by ranges from `bytes` (an object in a store): at open the message
/// structure (preambles, frame headers, postambles) and each message whole, one at a time; at
/// read time each object's data frame (decoded once, as from a file), except for plain objects
/// whose frame carries no hash, whose regions are read as element ranges of the payload.
pub fn open_ranged(bytes: Arc<dyn ByteSource>, options: &OpenOptions) -> Result<TgmSource> {
    TgmSource::new(Backing::Ranged(bytes), options)
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
    /// Absolute offset of the payload and bytes per element, for plain objects read by
    /// ranges (element runs fetched without the rest of the frame).
    payload: Option<(u64, u64)>,
    /// Compressed with blosc2, or with a blosc2 mask: decoded by [`blosc2`].
    blosc2: Option<Blosc2Plan>,
    /// Not C order: the shape and element strides of the payload, transposed to C order
    /// after decoding.
    strided: Option<(Vec<u64>, Vec<u64>)>,
}

impl ObjectInfo {
    fn label(&self) -> String {
        format!("message {} object {}", self.message, self.object)
    }
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
    verified: Vec<OnceLock<std::result::Result<(), Arc<HashCheck>>>>,
}

/// Why a data frame's hash check failed (kept once per object, shared by later reads).
#[derive(Debug, thiserror::Error)]
enum HashCheck {
    /// The frame could not be read.
    #[error(transparent)]
    Read(SourceError),
    /// The frame says it is hashed but carries no hash.
    #[error("the frame is flagged as hashed but has no hash")]
    NoHash,
    /// tensogram found it corrupt (its error, kept).
    #[error("the data frame is corrupt ({0})")]
    Corrupt(#[source] tensogram::TensogramError),
    /// tensogram's check panicked (the panic's text).
    #[error("the hash check panicked: {0}")]
    Panicked(String),
}

/// The parts of a [`TgmSource`] collected while its messages are opened.
struct Opening<'o> {
    options: &'o OpenOptions,
    /// The file holds one message (whose `_extra_` becomes the global attributes).
    single: bool,
    messages: Vec<MessageInfo>,
    objects: Vec<ObjectInfo>,
    variables: Vec<Variable>,
    plans: Vec<Plan>,
    skipped: Vec<Skipped>,
    global_attrs: Attrs,
}

/// Facts of the Tensogram format: none is one of the typed [`Fact`]s (they describe the
/// message, the object and its pipeline), so all are the importer's own.
fn tgm_facts(entries: Attrs) -> impl Iterator<Item = Fact> {
    entries.into_iter().map(|(k, v)| Fact::private("tgm", k, v))
}

/// The data frames of a parsed message as `(offset in the message, length, hashed)`: each
/// must end before the postamble, and the index, when there is one, must list exactly them.
fn data_frames(
    parsed: &ParsedMessage,
    bytes: &[u8],
    length: u64,
    corrupt: impl Fn(String) -> SourceError,
) -> Result<Vec<(u64, u64, bool)>> {
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
                "its index lists data frames at {offs:?} (lengths {lens:?}), the message holds \
                 them at {ours:?} (lengths {our_lens:?})"
            )));
        }
    }
    Ok(frames)
}

/// The facts of one object, before those of its message: position, pipeline, codec
/// parameters, masks, and the metadata as JSON when `lossy` (its flattening lost something).
fn object_facts<'v>(
    m: usize,
    i: usize,
    desc: &DataObjectDescriptor,
    lossy: bool,
    metadata: impl IntoIterator<Item = (&'v str, &'v Value)>,
) -> Vec<Fact> {
    let text = |s: &str| AttrValue::Text(s.to_string());
    let byte_order = match desc.byte_order {
        ByteOrder::Big => "big",
        ByteOrder::Little => "little",
    };
    let mut facts: Attrs = vec![
        ("tensogram_message".into(), AttrValue::I64(vec![m as i64])),
        ("tensogram_object".into(), AttrValue::I64(vec![i as i64])),
        ("tensogram_dtype".into(), text(&desc.dtype.to_string())),
        ("tensogram_byte_order".into(), text(byte_order)),
        ("tensogram_encoding".into(), text(&desc.encoding)),
        ("tensogram_filter".into(), text(&desc.filter)),
        ("tensogram_compression".into(), text(&desc.compression)),
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
            AttrValue::Text(meta::json_entries(metadata)),
        ));
    }
    tgm_facts(facts).collect()
}

impl Opening<'_> {
    /// Adds the objects of message `m` (whose bytes are `bytes`).
    fn add_message(&mut self, m: usize, span: &Span, bytes: &[u8]) -> Result<()> {
        let Span {
            offset,
            length,
            streaming,
            flags,
        } = *span;
        let corrupt = |detail: String| {
            tet_source::Part::Index.malformed(format!(
                "corrupt Tensogram message {m} at byte {offset}: {detail}"
            ))
        };
        let parsed = parse_message(bytes).map_err(|e| {
            tet_source::Part::Index
                .malformed_by(format!("corrupt Tensogram message {m} at byte {offset}"), e)
        })?;
        let frames = data_frames(&parsed, bytes, length, corrupt)?;
        let message_facts = self.message_facts(&parsed);
        for (i, (desc, payload_len, _, payload_head)) in parsed.objects.iter().enumerate() {
            let payload_at = parsed.payload_offsets.get(i).copied().flatten();
            let name = format!("message_{m}/object_{i}");
            let plan = match plan_object(desc, *payload_len).and_then(|p| {
                if desc.compression == "lz4" {
                    check_lz4_prefix(desc, payload_head)?;
                }
                Ok(p)
            }) {
                Ok(p) => p,
                Err(Problem::Malformed(why)) => {
                    return Err(corrupt(format!("object {i}: {why}")));
                }
                Err(Problem::Unsupported(why)) => {
                    if self.options.skip_unsupported {
                        self.skipped.push(Skipped { name, reason: why });
                        continue;
                    }
                    return Err(
                        Feature::DataType.unsupported(format!("message {m} object {i}: {why}"))
                    );
                }
            };
            let (frame_off, frame_len, verify_hash) = frames[i];
            self.objects.push(ObjectInfo {
                message: m,
                object: i,
                frame_offset: offset + frame_off,
                frame_len,
                verify_hash,
                swap_unit: plan.swap_unit,
                decoded_len: plan.decoded_len,
                blosc2: plan.blosc2,
                strided: plan.strides.clone().map(|st| (desc.shape.clone(), st)),
                payload: payload_at.map(|p| (offset + p, desc.dtype.byte_width() as u64)),
                ranged: plan.blosc2.is_none()
                    && plan.strides.is_none()
                    && desc.encoding == "none"
                    && desc.filter == "none"
                    && desc.compression == "none"
                    && desc.dtype != Dtype::Bitmask
                    && desc.dtype.byte_width() > 0,
            });
            self.add_variable(name, (m, i), desc, &parsed, plan, &message_facts);
        }
        self.messages.push(MessageInfo {
            offset,
            length,
            streaming,
            preamble_flags: flags,
            object_count: parsed.objects.len(),
        });
        Ok(())
    }

    /// The facts every variable of a message shares: its `_extra_` map (flattened, unless the
    /// file has one message, whose `_extra_` is the global attributes) and the encoder.
    fn message_facts(&mut self, parsed: &ParsedMessage) -> Vec<Fact> {
        let extra = parsed.extra.iter().map(|(k, v)| (k.as_str(), v));
        let mut facts: Attrs = Vec::new();
        if self.single {
            if meta::flatten_entries("", extra.clone(), &mut self.global_attrs) {
                facts.push((
                    "tensogram_extra_json".into(),
                    AttrValue::Text(meta::json_entries(extra)),
                ));
            }
        } else if meta::flatten_entries("tensogram_message_extra", extra.clone(), &mut facts) {
            facts.push((
                "tensogram_message_extra_json".into(),
                AttrValue::Text(meta::json_entries(extra)),
            ));
        }
        if let Some(e) = &parsed.encoder {
            facts.push(("tensogram_encoder".into(), AttrValue::Text(e.clone())));
        }
        tgm_facts(facts).collect()
    }

    /// Adds the variable of object `i` of message `m` (the object just added).
    fn add_variable(
        &mut self,
        name: String,
        (m, i): (usize, usize),
        desc: &DataObjectDescriptor,
        parsed: &ParsedMessage,
        plan: ObjectPlan,
        message_facts: &[Fact],
    ) {
        // Attributes: the object's metadata without `_reserved_`.
        let entries = parsed
            .base
            .get(i)
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != tensogram::RESERVED_KEY)
            .map(|(k, v)| (k.as_str(), v));
        let mut attrs: Attrs = Vec::new();
        let lossy = meta::flatten_entries("", entries.clone(), &mut attrs);
        let mut facts = object_facts(m, i, desc, lossy, entries);
        if let Some(stage) = &plan.lossy {
            // The values are a lossy stage's decoded output: which stage, with its parameters.
            facts.extend(tgm_facts(vec![(
                "tensogram_lossy".into(),
                AttrValue::Text(stage.clone()),
            )]));
        }
        facts.extend_from_slice(message_facts);
        self.variables.push(Variable {
            name,
            dtype: plan.elem,
            shape: desc.shape.clone(),
            dims: None,
            attrs,
            layout: SourceLayout {
                chunk_shape: None,
                compressed: desc.compression != "none" || desc.encoding != "none",
                filters: plan.filters,
            },
            role: tet_source::Role::Data,
            notes: plan.notes,
            facts,
        });
        self.plans.push(Plan {
            object: self.objects.len() - 1,
            part: plan.part,
        });
    }
}

impl TgmSource {
    fn new(backing: Backing, options: &OpenOptions) -> Result<TgmSource> {
        let spans = scan::scan(&backing)?;
        let mut opening = Opening {
            options,
            single: spans.len() == 1,
            messages: Vec::with_capacity(spans.len()),
            objects: Vec::new(),
            variables: Vec::new(),
            plans: Vec::new(),
            skipped: Vec::new(),
            global_attrs: Vec::new(),
        };
        for (m, span) in spans.iter().enumerate() {
            let bytes = backing.read(span.offset, span.length)?;
            opening.add_message(m, span, &bytes)?;
            backing.release(&bytes);
        }
        let Opening {
            messages,
            objects,
            variables,
            plans,
            skipped,
            global_attrs,
            ..
        } = opening;
        let verified = (0..objects.len()).map(|_| OnceLock::new()).collect();
        let src = TgmSource {
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
        };
        // An object without elements is never read, so its frame hash would never be checked:
        // a descriptor damaged into an empty shape would pass. Check those frames now.
        for (i, o) in src.objects.iter().enumerate() {
            if o.decoded_len == 0 {
                src.verify_once(i)?;
            }
        }
        Ok(src)
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
                    return Err(tet_source::Part::Chunk.malformed(why.clone()));
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
            Err(e @ SourceError::Malformed { .. }) => cache.failed = Some((obj, e.to_string())),
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
                .map_err(|e| Arc::new(HashCheck::Read(e)))?;
            let checked = catch_unwind(AssertUnwindSafe(|| {
                let header = tensogram::wire::FrameHeader::read_from(&frame)?;
                tensogram::hash::check_frame_hash(&frame, header.frame_type)
            }));
            self.backing.release(&frame);
            match checked {
                Ok(Ok(true)) => Ok(()),
                Ok(Ok(false)) => Err(Arc::new(HashCheck::NoHash)),
                Ok(Err(e)) => Err(Arc::new(HashCheck::Corrupt(e))),
                Err(p) => Err(Arc::new(HashCheck::Panicked(panic_text(&*p)))),
            }
        });
        outcome
            .clone()
            .map_err(|why| tet_source::Part::Chunk.malformed_by(info.label(), why))
    }

    /// Reads element runs `(offset, count)` of a plain object straight from its payload into
    /// `out`, in order, little-endian.
    fn read_runs(&self, obj: usize, runs: &[(u64, u64)], out: &mut [u8]) -> Result<()> {
        self.verify_once(obj)?;
        let info = &self.objects[obj];
        let frame = self.backing.read(info.frame_offset, info.frame_len)?;
        let options = decode_options(false);
        let decoded = catch_unwind(AssertUnwindSafe(|| {
            tensogram::decode::decode_range_from_frame(&frame, runs, &options)
        }));
        self.backing.release(&frame);
        let parts = match decoded {
            Ok(Ok((_, parts))) => parts,
            Ok(Err(TensogramError::Io(e))) => return Err(SourceError::Io(e)),
            Ok(Err(e)) => {
                return Err(tet_source::Part::Chunk.malformed(format!("{}: {e}", info.label())))
            }
            Err(p) => {
                return Err(tet_source::Part::Chunk.malformed(format!(
                    "{}: the tensogram decoder panicked: {}",
                    info.label(),
                    panic_text(&*p)
                )))
            }
        };
        let total: usize = parts.iter().map(Vec::len).sum();
        if total != out.len() {
            return Err(tet_source::Part::Chunk.malformed(format!(
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
        let info = self.objects.get(obj).ok_or(Request::NoEntry {
            table: "object",
            index: obj,
        })?;
        if let Some(plan) = info.blosc2 {
            self.verify_once(obj)?;
            let frame = self.backing.read(info.frame_offset, info.frame_len)?;
            let decoded = blosc2::decode_object(&frame, plan, &info.label());
            self.backing.release(&frame);
            return finish_decoded(info, decoded?);
        }
        let frame = self.backing.read(info.frame_offset, info.frame_len)?;
        let options = decode_options(info.verify_hash);
        let decoded = catch_unwind(AssertUnwindSafe(|| {
            tensogram::decode::decode_object_from_frame(&frame, &options)
        }));
        self.backing.release(&frame);
        drop(frame);
        let data = match decoded {
            Ok(Ok((_, data))) => data,
            Ok(Err(TensogramError::Io(e))) => return Err(SourceError::Io(e)),
            Ok(Err(e @ TensogramError::HashMismatch { .. })) => {
                return Err(tet_source::Part::Chunk
                    .malformed(format!("{}: the data frame is corrupt ({e})", info.label())))
            }
            Ok(Err(e)) => {
                return Err(tet_source::Part::Chunk.malformed(format!("{}: {e}", info.label())));
            }
            Err(p) => {
                return Err(tet_source::Part::Chunk.malformed(format!(
                    "{}: the tensogram decoder panicked: {}",
                    info.label(),
                    panic_text(&*p)
                )))
            }
        };
        finish_decoded(info, data)
    }
}

/// Reads element runs `(offset, count)` of a plain object (elements of `width` bytes from its
/// payload at `at`) from a source read by ranges into `out`, in order, little-endian.
fn read_payload_runs(
    src: &dyn ByteSource,
    info: &ObjectInfo,
    at: u64,
    width: u64,
    runs: &[(u64, u64)],
    out: &mut [u8],
) -> Result<()> {
    let outside = || {
        tet_source::Part::Chunk.malformed(format!(
            "{}: a region lies outside its payload",
            info.label()
        ))
    };
    let mut done = 0usize;
    for &(first, n) in runs {
        let (Some(offset), Some(len)) = (
            first.checked_mul(width).and_then(|o| o.checked_add(at)),
            n.checked_mul(width).and_then(|l| usize::try_from(l).ok()),
        ) else {
            return Err(outside());
        };
        let end = done
            .checked_add(len)
            .filter(|&e| e <= out.len())
            .ok_or_else(outside)?;
        src.read_at(offset, &mut out[done..end])?;
        done = end;
    }
    if done != out.len() {
        return Err(tet_source::Part::Chunk.malformed(format!(
            "{}: a region read {done} bytes, {} expected",
            info.label(),
            out.len()
        )));
    }
    if info.swap_unit > 1 {
        for c in out.chunks_exact_mut(info.swap_unit) {
            c.reverse();
        }
    }
    Ok(())
}

/// Checks the decoded length of an object and swaps big-endian values to little-endian.
fn finish_decoded(info: &ObjectInfo, mut data: Vec<u8>) -> Result<Vec<u8>> {
    if data.len() != info.decoded_len {
        return Err(tet_source::Part::Chunk.malformed(format!(
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
    if let Some((shape, strides)) = &info.strided {
        let n: usize = shape.iter().map(|&d| d as usize).product();
        let size = data.len().checked_div(n).unwrap_or(0);
        data = to_c_order(&data, shape, strides, size);
    }
    Ok(data)
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
        let (v, n) = self.region_of(var, start, count, out.len())?;
        let plan = self.plans.get(var).ok_or(Request::NoVariable {
            var,
            count: self.plans.len(),
        })?;
        if n == 0 {
            return Ok(());
        }
        let info = &self.objects[plan.object];
        if plan.part == Part::Whole && info.ranged {
            match (self.backing.ranged(), info.payload) {
                // Read by ranges: a hashed frame is fetched and decoded once (its hash needs
                // all of it); an unhashed one gives its element runs straight from the payload.
                (Some(src), Some((at, width))) if !info.verify_hash => {
                    if let Some(runs) = region_runs(&v.shape, start, count, MAX_RUNS) {
                        return read_payload_runs(src, info, at, width, &runs, out);
                    }
                }
                (Some(_), _) => {}
                (None, _) => {
                    if let Some(runs) = region_runs(&v.shape, start, count, MAX_RUNS) {
                        return self.read_runs(plan.object, &runs, out);
                    }
                }
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

/// How every object is decoded through the tensogram crate: bytes in the object's own byte
/// order (swapped to little-endian by the caller, on any host), NaN/Inf restored, and the
/// backend and thread count explicit, so that `TENSOGRAM_COMPRESSION_BACKEND` /
/// `TENSOGRAM_THREADS` cannot interfere; the frame hash checked when `verify_hash`.
pub(crate) fn decode_options(verify_hash: bool) -> DecodeOptions {
    DecodeOptions {
        native_byte_order: false,
        compression_backend: CompressionBackend::Ffi,
        threads: 1,
        restore_non_finite: true,
        verify_hash,
        ..DecodeOptions::default()
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
    fn region_copy_complex_scalars_and_bits() {
        // Three complex64 elements (1, 2), (3, 4), (5, 6): copied as (real, imaginary) pairs.
        let data: Vec<u8> = [1f32, 2., 3., 4., 5., 6.]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let mut out = vec![0u8; 16];
        copy_region(&data, &[3], &[1], &[2], Part::Whole, 8, &mut out).unwrap();
        assert_eq!(out, data[8..]);
        // A 0-d object has one element.
        let mut out = vec![0u8; 8];
        copy_region(&data[..8], &[], &[], &[], Part::Whole, 8, &mut out).unwrap();
        assert_eq!(out, data[..8]);
        assert!(copy_region(&data[..4], &[], &[], &[], Part::Whole, 8, &mut out).is_err());
        let bits = [0b1010_0000u8, 0b1000_0000];
        let mut out = vec![0u8; 7];
        copy_region(&bits, &[9], &[2], &[7], Part::Bits, 1, &mut out).unwrap();
        assert_eq!(out, vec![1, 0, 0, 0, 0, 0, 1]);
        assert!(copy_region(&bits[..1], &[9], &[2], &[7], Part::Bits, 1, &mut out).is_err());
    }
}
