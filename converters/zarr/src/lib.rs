//! Zarr (v2 and v3 directory stores) importer for tet-convert.
//!
//! A Zarr store is a directory tree: every group or array is a directory holding its metadata
//! (`zarr.json` in Zarr v3; `.zgroup` or `.zarray` plus an optional `.zattrs` in Zarr v2) and,
//! for an array, its chunks as files. The hierarchy is walked here (file system only, in sorted
//! order, never from consolidated metadata, which may be stale), the metadata is parsed with the
//! types of [`zarrs`], and every array is opened and read through `zarrs` (codecs — zstd, gzip,
//! zlib, bz2, blosc with every compressor and shuffle mode, crc32c, adler32, fletcher32,
//! pcodec, transpose, sharding —, chunk keys, fill values, byte order), under their v3 names
//! and the `numcodecs.*` names zarr-python 3 writes (`numcodecs.zstd`, `numcodecs.gzip`,
//! `numcodecs.blosc`, `numcodecs.crc32c`, `numcodecs.pcodec`, …). numcodecs' `lz4`, `lzma`,
//! `crc32`, `jenkins_lookup3` and `zfpy`, which zarrs lacks, are decoded by [`compressors`].
//! numcodecs' `fixedscaleoffset` filter is decoded by [`scaleoffset`] (not by zarrs, which
//! computes in `f32`), bit for bit as numcodecs does; the filters `delta`, `astype`,
//! `bitround`, `quantize`, `packbits` and `categorize` by [`filters`], as numcodecs decodes
//! them. Zarr v2 `datetime64`/`timedelta64` types are read
//! as the v3 ones ([`datetime`]).
//!
//! # Mapping
//!
//! * **Variables**: one per array, named by its path from the store root without the leading
//!   slash (`temperature`, `station/counts`), sorted by name. A store whose root is itself an
//!   array gives one variable named after the directory (`x.zarr` → `x`). A 0-d array is a 0-d
//!   variable (empty shape; a 0-d string array is a text variable of shape `[1]`).
//! * **Element types**: `bool` → [`ElementType::Bool`] (bytes normalised to 0/1), `int8` →
//!   `I8`, `int16`…`int64`, `uint8`…`uint64`, `float16` → `F16`, `bfloat16` → `BF16`,
//!   `float32`, `float64` as they are (the engine widens i8, bool and bf16). `int2`/`int4`
//!   (`uint2`/`uint4`) are delivered one value per byte as `I8` (`U8`), `numpy.datetime64` /
//!   `numpy.timedelta64` as their `I64` counts; both with a note and the data type in the facts.
//!   `complex64` / `complex_float32` and `complex128` / `complex_float64` → [`ElementType::C64`]
//!   / [`ElementType::C128`] (interleaved real and imaginary parts, as zarrs decodes them; the
//!   engine splits them). `complex_float16` and `complex_bfloat16`, whose parts have no complex
//!   element type, become two variables `<name>/real` and `<name>/imag` of the part type, with
//!   a note and the data type in the facts. Big-endian data (`"endian": "big"`, v2 `">f8"`) is
//!   read through zarrs, which returns native (little-endian) bytes.
//! * **Strings**: `string` (v3, v2 `|O` with `vlen-utf8`) and `fixed_length_utf32` (v2 `<U*`,
//!   trailing NULs removed) arrays become [`TextVariable`]s, values in C order. v2 fixed-length
//!   bytes `|S<n>` (which zarrs does not read) are read as records of one `S` field and become
//!   text as NPY `S` values do (trailing NULs removed; UTF-8, else Latin-1, one character per
//!   byte).
//! * **Raw bits** (`r<bits>`, v2 raw void `|V<n>`, v3 `raw_bytes`) are opaque blobs: `u8` with a trailing axis
//!   of the blob size and [`Fact::Opaque`] (`tet_source::ragged::opaque_variable`). Other data
//!   types (sub-byte floats, `optional`, …) are unsupported. zarr-python 3's
//!   `raw_bytes` (numpy `|V<n>`) is read as the raw bits it is.
//! * **Variable-length bytes** (`bytes`, zarr-python 3's `variable_length_bytes` with the
//!   `vlen-bytes` codec) as NPY `S` data: a text variable when every value is UTF-8, else a CF
//!   contiguous ragged array of `u8` (`<name>` + `<name>_count`, [`Fact::Ragged`]), read whole
//!   at open (`vlen_bytes`).
//! * **Records** (structured data types: v2 `dtype` lists, the v3 `structured` type of
//!   zarr-python 3): one variable per field, `<array>/<field>`, nested records joined with `/`,
//!   sub-array fields as trailing axes, unnamed raw (padding) fields ignored, empty names as
//!   `f<position>`, string fields as text variables, as the NPY importer splits records; values
//!   as zarr-python reads `arr[...][field]` (v3 fields little-endian, as zarr-python reads them
//!   whatever the `bytes` codec says). See [`structured`] (the types, and how zarrs is made to
//!   decode them) and `records.rs` (the variables and their reads).
//! * **Dimensions**: v3 `dimension_names` when every axis is named; else the xarray attribute
//!   `_ARRAY_DIMENSIONS` (a list of one string per axis), which is then not repeated as an
//!   attribute. Partial v3 names leave `dims` unset and are kept in the facts
//!   (`zarr_dimension_names`).
//! * **Coordinates** (xarray convention): a 1-D array whose last path component equals its one
//!   dimension name is a [`Role::Coordinate`].
//! * **Attributes**: JSON → typed values as [`attrs`] describes (string → `Text`, integer →
//!   `I64` or `U64`, number → `F64`, bool → `U8` 0/1, arrays of numbers / strings → vectors /
//!   `TextList`, anything else → `Text` holding the compact JSON, in file order).
//! * **Global attributes**: the root group's attributes, then every sub-group's attributes
//!   prefixed with the group path (`station/network`), groups in sorted order.
//! * **Layout hint**: `chunk_shape` is the regular chunk shape, or for a sharded array the inner
//!   chunk shape (zarrs decodes a shard by inner chunks: a region read touches only those), each
//!   clipped to the array shape; `compressed` when any codec (inside shards too) compresses;
//!   `filters` lists the codecs (`zstd(level=3,checksum=false)`, `inner:gzip(level=5)`, …).
//! * **Facts**: `zarr_fill_value` (the JSON fill value, which missing chunks read as).
//!
//! # Reading
//!
//! [`Source::read_region`] decodes with `retrieve_array_subset_into_opt` straight into the
//! caller's buffer, with zarrs' own concurrency limited to one chunk at a time (the engine
//! parallelises across regions, which may be read from several threads at once). Missing
//! chunks read as the fill value. A field of an array of records is read by decoding the
//! region's whole records (in slabs of its first axis of at most 16 MiB) and cutting the
//! field out; each field decodes the chunks again (no cache is shared between fields).
//!
//! # What is refused
//!
//! * [`SourceError::Malformed`]: no metadata at the root, invalid JSON, array metadata that
//!   lacks a field the specification requires or has it of the wrong JSON kind (with the file
//!   named), a shape whose element count overflows, chunk data that does not decode (bad
//!   zstd/gzip stream, crc32c mismatch, wrong decoded size, a shard index pointing outside its
//!   file), a group that is a symlink to one of its ancestors, a hierarchy deeper than 64 levels.
//! * [`SourceError::Unsupported`] (or, with `skip_unsupported`, an entry in
//!   [`Source::skipped`]): codecs this build lacks (e.g. `codec gdeflate is not supported`;
//!   numcodecs `lzma` with a raw filter chain), unmappable data types, unknown `must_understand` metadata fields, array metadata that is
//!   well-formed but that zarrs cannot parse, record (structured) data types with a field of
//!   no fixed size or an unknown type, or a fill value that is not the record's bytes (a field
//!   of no numeric or text form is unsupported alone: the array's other fields stay), chunks
//!   that would decode to more than 2 GiB at once, shards of more than 2^24 inner chunks,
//!   directories whose name is not UTF-8.
//!
//! zarrs trusts sizes inside chunk files in a few places, and skips crc32c checks on partial
//! reads; the [`guard`] module bounds the sizes and forces the checks, so that corrupt chunks
//! give errors, not huge allocations or wrong values. As a last line of defence a panic inside
//! zarrs while decoding is caught and reported as an error.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};
use tet_source::{
    extension_confidence, AttrValue, Attrs, Confidence, ElementType, Fact, Feature, Importer, Lib,
    OpenOptions, Part, Request, Result, Role, Skipped, Source, SourceError, SourceLayout,
    TextVariable, Variable,
};
use unsafe_cell_slice::UnsafeCellSlice;
use zarrs::array::{
    Array, ArrayBytesDecodeIntoTarget, ArrayBytesFixedDisjointView, ArrayCreateError,
    ArrayMetadata, ArrayShardedExt, ArraySubset, CodecOptions,
};
use zarrs::filesystem::FilesystemStore;
use zarrs::metadata::v2::{ArrayMetadataV2, GroupMetadataV2};
use zarrs::metadata::v3::{ArrayMetadataV3, GroupMetadataV3};
use zarrs::plugin::{ExtensionName, PluginCreateError};

pub mod attrs;
pub mod compressors;
pub mod datetime;
pub mod export;
pub mod filters;
pub mod guard;
mod listed;
mod records;
pub mod scaleoffset;
pub mod structured;
mod vlen_bytes;

use structured::RecordError;

pub use attrs::json_to_attr;
use guard::{GuardedStore, ShardIndex, MAX_DECODED_CHUNK};
pub use listed::open_storage;
use listed::NodeDir;

/// Metadata files larger than this are refused.
const MAX_METADATA_BYTES: u64 = 64 << 20;
/// Deepest group nesting walked (guards against symlink loops).
const MAX_DEPTH: usize = 64;
/// Most inner chunks one shard may have (its index is 16 bytes per inner chunk).
const MAX_CHUNKS_PER_SHARD: u64 = 1 << 24;
/// Most elements of a string array (its values are held in memory).
const MAX_TEXT_ELEMENTS: u64 = 1 << 24;

/// Codec names (after a `numcodecs.` prefix) that compress.
const COMPRESSORS: &[&str] = &[
    "zstd", "gzip", "blosc", "zlib", "bz2", "lz4", "lzma", "gdeflate", "pcodec", "zfp", "zfpy",
];

/// The storage the arrays of a source read from: a directory ([`FilesystemStore`]) or any
/// zarrs storage ([`open_storage`]).
pub type Backing = dyn zarrs::storage::ReadableStorageTraits;

/// The storage every array reads through.
type Store = GuardedStore<Backing>;

/// The Zarr importer plug-in (`zarr`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ZarrImporter;

impl Importer for ZarrImporter {
    fn id(&self) -> &'static str {
        "zarr"
    }

    fn name(&self) -> &'static str {
        "Zarr v2/v3"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["zarr"]
    }

    fn identify(&self, path: &Path, _head: &[u8]) -> Confidence {
        if path.is_dir()
            && ["zarr.json", ".zgroup", ".zarray"]
                .iter()
                .any(|f| path.join(f).is_file())
        {
            Confidence::Magic
        } else {
            extension_confidence(path, self.extensions())
        }
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> Result<Box<dyn Source>> {
        Ok(Box::new(open_store(path, options)?))
    }
}

/// Opens a Zarr directory store.
pub fn open_store(path: &Path, options: &OpenOptions) -> Result<ZarrSource> {
    register();
    if !path.is_dir() {
        return Err(Feature::Layout.unsupported(
            "not a directory: only Zarr directory stores are supported (no zip or remote stores)",
        ));
    }
    let root = read_node(path, "")?.ok_or_else(|| {
        Part::Header.malformed("no zarr.json, .zgroup or .zarray at the top: not a Zarr store")
    })?;
    let mut nodes = Vec::new();
    let mut skipped = Vec::new();
    let root_is_group = matches!(root, NodeMeta::Group(_));
    nodes.push(Node {
        path: String::new(),
        meta: root,
    });
    if root_is_group {
        let mut ancestors = vec![std::fs::canonicalize(path)?];
        walk(path, "", &mut ancestors, &mut nodes, &mut skipped, options)?;
    }
    nodes.sort_by(|a, b| a.path.cmp(&b.path));

    let fs = FilesystemStore::new(path)
        .map_err(|e| SourceError::library(Lib::Zarrs, "cannot open the directory store", e))?;
    let fs: Arc<Backing> = Arc::new(fs);
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty())
        .unwrap_or("data")
        .to_string();
    from_nodes(nodes, skipped, &fs, stem, options)
}

/// The codecs and data types this importer adds to zarrs' (once per process).
fn register() {
    guard::register_plugins();
    scaleoffset::register();
    filters::register();
    compressors::register();
    datetime::register();
}

/// The source of a hierarchy's `nodes` (sorted by path; `skipped`: what the walk left out),
/// whose arrays read through `fs`; `stem` names a root array.
fn from_nodes(
    nodes: Vec<Node>,
    skipped: Vec<Skipped>,
    fs: &Arc<Backing>,
    stem: String,
    options: &OpenOptions,
) -> Result<ZarrSource> {
    let codec_options = CodecOptions::default()
        .with_concurrent_target(1)
        .with_chunk_concurrent_minimum(1);

    let mut src = ZarrSource {
        variables: Vec::new(),
        readers: Vec::new(),
        arrays: Vec::new(),
        global_attrs: Vec::new(),
        skipped,
        text_variables: Vec::new(),
        frames: Vec::new(),
        fields: Vec::new(),
        memory: Vec::new(),
        codec_options,
    };
    for node in nodes {
        match node.meta {
            NodeMeta::Group(attrs) => {
                for (k, v) in attrs::map_to_attrs(&attrs, &[]) {
                    let key = if node.path.is_empty() {
                        k
                    } else {
                        format!("{}/{k}", node.path)
                    };
                    src.global_attrs.push((key, v));
                }
            }
            meta @ (NodeMeta::Array(..) | NodeMeta::Unreadable(..)) => {
                let name = if node.path.is_empty() {
                    stem.clone()
                } else {
                    node.path.clone()
                };
                let added = match meta {
                    NodeMeta::Array(meta, None) => src.add_array(fs, &node.path, &name, *meta),
                    NodeMeta::Array(meta, Some(s)) => {
                        src.add_structured(fs, &node.path, &name, *meta, *s, options)
                    }
                    _ => Err(match meta {
                        NodeMeta::Unreadable(feature, reason) => {
                            Problem::Unsupported(feature, reason)
                        }
                        _ => Problem::Unsupported(Feature::DataType, String::new()),
                    }),
                };
                match added {
                    Ok(()) => {}
                    Err(Problem::Unsupported(_, reason)) if options.skip_unsupported => {
                        src.skipped.push(Skipped { name, reason });
                    }
                    Err(Problem::Unsupported(feature, reason)) => {
                        return Err(feature.unsupported(format!("array '{name}': {reason}")))
                    }
                    Err(Problem::Error(e)) => return Err(e),
                }
            }
        }
    }
    Ok(src)
}

/// One node of the hierarchy: path from the root without leading slash (`""` for the root).
struct Node {
    path: String,
    meta: NodeMeta,
}

enum NodeMeta {
    /// A group and its attributes.
    Group(Map<String, Value>),
    /// An array's metadata, and for an array of records what its fields are (the metadata then
    /// has raw bytes of the record's size as its data type).
    Array(Box<ArrayMetadata>, Option<Box<StructuredMeta>>),
    /// An array whose metadata is valid JSON naming an array, but that zarrs cannot parse
    /// (e.g. a data type it has no model for): an unsupported item, not a broken store.
    Unreadable(Feature, String),
}

fn key_of(rel: &str, file: &str) -> String {
    if rel.is_empty() {
        file.to_string()
    } else {
        format!("{rel}/{file}")
    }
}

/// Reads a metadata file if present (size-checked), as JSON.
fn read_json<D: NodeDir + ?Sized>(
    dir: &D,
    rel: &str,
    file: &str,
) -> Result<Option<(Vec<u8>, Value)>> {
    let Some(len) = dir.size(rel, file)? else {
        return Ok(None);
    };
    let key = key_of(rel, file);
    if len > MAX_METADATA_BYTES {
        return Err(Part::Metadata.malformed(format!(
            "{key} is {len} bytes: metadata larger than {MAX_METADATA_BYTES} bytes is refused",
        )));
    }
    let bytes = dir.read(rel, file)?;
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| Part::Metadata.malformed_by(format!("{key}: invalid JSON"), e))?;
    Ok(Some((bytes, value)))
}

/// A v2 `.zattrs` object (empty when absent).
fn read_zattrs<D: NodeDir + ?Sized>(dir: &D, rel: &str) -> Result<Map<String, Value>> {
    match read_json(dir, rel, ".zattrs")? {
        None => Ok(Map::new()),
        Some((_, Value::Object(m))) => Ok(m),
        Some(_) => Err(Part::Attribute.malformed(format!(
            "{}: attributes must be a JSON object",
            key_of(rel, ".zattrs")
        ))),
    }
}

/// The length of a v3 `raw_bytes` data type (`{"name": "raw_bytes", "configuration":
/// {"length_bytes": n}}`), when the array has one.
fn raw_bytes_len(obj: &Map<String, Value>) -> Option<u64> {
    let dt = obj.get("data_type")?;
    (dt.get("name")?.as_str()? == "raw_bytes")
        .then(|| dt.get("configuration")?.get("length_bytes")?.as_u64())
        .flatten()
        .filter(|&n| n > 0)
}

/// The metadata of the node in directory `dir` (`rel` from the root), `None` if it has none.
fn read_node<D: NodeDir + ?Sized>(dir: &D, rel: &str) -> Result<Option<NodeMeta>> {
    if let Some((bytes, value)) = read_json(dir, rel, "zarr.json")? {
        let key = key_of(rel, "zarr.json");
        let bad = |what: String| Part::Metadata.malformed(format!("{key}: {what}"));
        let obj = value
            .as_object()
            .ok_or_else(|| bad("metadata must be a JSON object".into()))?;
        match obj.get("zarr_format") {
            Some(Value::Number(n)) if n.as_u64() == Some(3) => {}
            Some(other) => return Err(bad(format!("zarr_format is {other}, expected 3"))),
            None => return Err(bad("no zarr_format".into())),
        }
        return match obj.get("node_type").and_then(Value::as_str) {
            Some("array") if structured::is_v3_structured(obj) => Ok(Some(structured_node(
                obj,
                &key,
                true,
                v3_array_shape_ok(obj),
            )?)),
            // zarr-python 3's `raw_bytes` (numpy `|V<n>`), which zarrs does not know: read as
            // the raw bits `r<8n>` it is.
            Some("array") if raw_bytes_len(obj).is_some() => {
                let n = raw_bytes_len(obj).unwrap_or_default();
                let mut m = obj.clone();
                let bits = n
                    .checked_mul(8)
                    .ok_or_else(|| bad("raw_bytes too long".into()))?;
                m.insert("data_type".into(), Value::String(format!("r{bits}")));
                let fill = structured::raw_fill(obj.get("fill_value"), n)
                    .map_err(|e| Part::Metadata.malformed_by(key.clone(), e))?;
                m.insert("fill_value".into(), fill);
                let v = Value::Object(m);
                let b = serde_json::to_vec(&v).map_err(|e| Part::Metadata.malformed_by(&key, e))?;
                Ok(Some(match v3_array_metadata(&b, &v) {
                    Ok(m) => NodeMeta::Array(Box::new(ArrayMetadata::V3(m)), None),
                    Err(e) => NodeMeta::Unreadable(
                        Feature::DataType,
                        format!("{key}: array metadata zarrs cannot read: {e}"),
                    ),
                }))
            }
            Some("array") => match v3_array_metadata(&bytes, &value) {
                Ok(m) => Ok(Some(NodeMeta::Array(Box::new(ArrayMetadata::V3(m)), None))),
                // Well-formed by the specification, but not something zarrs models (e.g. a
                // data type given as an object it does not know): that array is unsupported.
                Err(e) if v3_array_shape_ok(obj) => Ok(Some(NodeMeta::Unreadable(
                    Feature::DataType,
                    format!("{key}: array metadata zarrs cannot read: {e}"),
                ))),
                Err(e) => {
                    Err(Part::Metadata.malformed_by(format!("{key}: invalid array metadata"), e))
                }
            },
            Some("group") => {
                let m: GroupMetadataV3 = serde_json::from_slice(&bytes).map_err(|e| {
                    Part::Metadata.malformed_by(format!("{key}: invalid group metadata"), e)
                })?;
                Ok(Some(NodeMeta::Group(m.attributes)))
            }
            Some(other) => Err(bad(format!(
                "node_type is '{other}', expected 'array' or 'group'"
            ))),
            None => Err(bad("no node_type".into())),
        };
    }
    if let Some((_, mut value)) = read_json(dir, rel, ".zarray")? {
        let key = key_of(rel, ".zarray");
        if !value.is_object() {
            return Err(Part::Metadata.malformed(format!("{key}: metadata must be a JSON object")));
        }
        numcodecs_v2_defaults(&mut value);
        vlen_bytes::v2_object_bytes(&mut value);
        let shape_ok = value.as_object().is_some_and(v2_array_shape_ok);
        let fixed_bytes = value.as_object().and_then(fixed_bytes_len);
        if let Some(obj) = value
            .as_object()
            .filter(|o| o.get("dtype").is_some_and(Value::is_array) || fixed_bytes.is_some())
        {
            let node = match fixed_bytes {
                Some(n) => fixed_bytes_node(obj, &key, n, shape_ok)?,
                None => structured_node(obj, &key, false, shape_ok)?,
            };
            return Ok(Some(match node {
                NodeMeta::Array(mut m, s) => {
                    if let ArrayMetadata::V2(m) = m.as_mut() {
                        m.attributes = read_zattrs(dir, rel)?;
                    }
                    NodeMeta::Array(m, s)
                }
                other => other,
            }));
        }
        let mut m: ArrayMetadataV2 = match serde_json::from_value(value) {
            Ok(m) => m,
            Err(e) if shape_ok => {
                return Ok(Some(NodeMeta::Unreadable(
                    Feature::DataType,
                    format!("{key}: array metadata zarrs cannot read: {e}"),
                )))
            }
            Err(e) => {
                return Err(Part::Metadata.malformed_by(format!("{key}: invalid array metadata"), e))
            }
        };
        m.attributes = read_zattrs(dir, rel)?;
        return Ok(Some(NodeMeta::Array(Box::new(ArrayMetadata::V2(m)), None)));
    }
    if let Some((bytes, _)) = read_json(dir, rel, ".zgroup")? {
        let key = key_of(rel, ".zgroup");
        serde_json::from_slice::<GroupMetadataV2>(&bytes).map_err(|e| {
            Part::Metadata.malformed_by(format!("{key}: invalid group metadata"), e)
        })?;
        return Ok(Some(NodeMeta::Group(read_zattrs(dir, rel)?)));
    }
    Ok(None)
}

/// Parses v3 array metadata; a `numcodecs.zfpy` codec (zarr-python's array-to-bytes wrapper)
/// gets a little-endian `bytes` codec before it, so that zarrs hands its chunk bytes to the
/// bytes-to-bytes decoder of [`compressors`] (what zarrs' own v2 conversion does for a `zfpy`
/// compressor).
fn v3_array_metadata(
    bytes: &[u8],
    value: &Value,
) -> std::result::Result<ArrayMetadataV3, serde_json::Error> {
    let is_zfpy = |c: &Value| {
        c.get("name").and_then(Value::as_str) == Some(compressors::ZFPY_V3)
            || c.as_str() == Some(compressors::ZFPY_V3)
    };
    let codecs = value.get("codecs").and_then(Value::as_array);
    let Some(at) = codecs.and_then(|c| c.iter().position(is_zfpy)) else {
        return serde_json::from_slice(bytes);
    };
    let mut patched = value.clone();
    if let Some(Value::Array(codecs)) = patched.get_mut("codecs") {
        codecs.insert(
            at,
            serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}}),
        );
    }
    serde_json::from_value(patched)
}

/// The node of an array whose data type is a record (v3 `structured`, v2 a `dtype` list): its
/// metadata with the data type replaced by raw bytes of the record's size (v3 `r<bits>`, v2
/// `|V<bytes>`) and the fill value by what raw bytes take, and the record. Metadata that is
/// complete (`shape_ok`) but cannot be read this way is an unsupported item; incomplete
/// metadata is malformed.
fn structured_node(
    obj: &Map<String, Value>,
    key: &str,
    v3: bool,
    shape_ok: bool,
) -> Result<NodeMeta> {
    let dtype_key = if v3 { "data_type" } else { "dtype" };
    let original = obj.get(dtype_key).cloned().unwrap_or_default();
    let rewritten = (|| -> std::result::Result<(Value, structured::Record), RecordError> {
        let record = if v3 {
            structured::parse_v3(&original)?
        } else {
            structured::parse_v2(&original)?
        };
        let size = record.size;
        let mut m = obj.clone();
        let raw = if v3 {
            Value::String(format!(
                "r{}",
                size.checked_mul(8)
                    .ok_or_else(|| { RecordError::Malformed("record size overflows".into()) })?
            ))
        } else {
            Value::String(format!("|V{size}"))
        };
        m.insert(dtype_key.into(), raw);
        let fill = structured::raw_fill(obj.get("fill_value"), size)?;
        m.insert("fill_value".into(), fill);
        Ok((Value::Object(m), record))
    })();
    let parsed = rewritten.and_then(|(value, record)| {
        let meta = if v3 {
            serde_json::from_value::<ArrayMetadataV3>(value).map(ArrayMetadata::V3)
        } else {
            serde_json::from_value::<ArrayMetadataV2>(value).map(ArrayMetadata::V2)
        };
        meta.map(|m| (m, record))
            .map_err(|e| RecordError::Unsupported(format!("array metadata zarrs cannot read: {e}")))
    });
    match parsed {
        Ok((meta, record)) => Ok(NodeMeta::Array(
            Box::new(meta),
            Some(Box::new(StructuredMeta {
                record,
                dt_json: serde_json::to_string(&original).unwrap_or_default(),
            })),
        )),
        Err(e) if shape_ok => Ok(NodeMeta::Unreadable(
            Feature::DataType,
            format!("{key}: structured (record) data type: {e}"),
        )),
        Err(e) => Err(Part::Metadata.malformed(format!("{key}: invalid array metadata: {e}"))),
    }
}

/// The length `n` of a v2 fixed-length bytes data type (`|S<n>`, numpy `S`), which zarrs
/// does not read.
fn fixed_bytes_len(obj: &Map<String, Value>) -> Option<u64> {
    let s = obj.get("dtype")?.as_str()?;
    let n = s.strip_prefix("|S").or_else(|| s.strip_prefix("S"))?;
    n.parse::<u64>().ok().filter(|n| *n > 0)
}

/// The node of a v2 `|S<n>` array: read as a record of one text field of `n` bytes, which
/// is the array itself (the leaf's path is empty), so its values are text as NPY `S` values
/// are (`tet_source::numpy::decode_bytes`: trailing NULs removed, UTF-8, else Latin-1). Its
/// fill value `""` (zarr-python 3) is `n` zero bytes; base64 (zarr-python 2) stays.
fn fixed_bytes_node(
    obj: &Map<String, Value>,
    key: &str,
    n: u64,
    shape_ok: bool,
) -> Result<NodeMeta> {
    let mut m = obj.clone();
    m.insert("dtype".into(), Value::String(format!("|V{n}")));
    let fill = match obj.get("fill_value") {
        Some(Value::String(f)) if f.is_empty() => None,
        other => other,
    };
    let fill = structured::raw_fill(fill, n).map_err(|e| Part::Metadata.malformed(e.to_string()));
    let parsed = fill.and_then(|f| {
        m.insert("fill_value".into(), f);
        serde_json::from_value::<ArrayMetadataV2>(Value::Object(m))
            .map_err(|e| Part::Metadata.malformed_by(format!("{key}: invalid array metadata"), e))
    });
    let meta = match parsed {
        Ok(meta) => meta,
        Err(e) if shape_ok => {
            return Ok(NodeMeta::Unreadable(
                Feature::DataType,
                format!("{key}: fixed-length bytes |S{n}: {e}"),
            ))
        }
        Err(e) => return Err(e),
    };
    let record = structured::Record {
        size: n,
        leaves: vec![structured::Leaf {
            path: Vec::new(),
            place: tet_source::record::Place::whole(),
            kind: structured::LeafKind::Text {
                utf32: false,
                chars: n,
                swap: false,
            },
            notes: Vec::new(),
        }],
    };
    Ok(NodeMeta::Array(
        Box::new(ArrayMetadata::V2(meta)),
        Some(Box::new(StructuredMeta {
            record,
            dt_json: serde_json::to_string(&Value::String(format!("|S{n}"))).unwrap_or_default(),
        })),
    ))
}

/// What an array of a record data type keeps besides its rewritten metadata.
struct StructuredMeta {
    record: structured::Record,
    /// The data type as the metadata has it.
    dt_json: String,
}

/// A list of non-negative integers.
fn is_extents(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array)
        .is_some_and(|a| a.iter().all(|d| d.as_u64().is_some()))
}

/// A v3 extension point: a name, or an object with a string `name`.
fn is_extension(v: Option<&Value>) -> bool {
    match v {
        Some(Value::String(_)) => true,
        Some(Value::Object(o)) => o.get("name").is_some_and(Value::is_string),
        _ => false,
    }
}

/// Whether v3 array metadata has every field the specification requires, of the right JSON
/// kind: then a failure to parse it is zarrs not knowing something (unsupported), not a
/// broken store (malformed).
fn v3_array_shape_ok(obj: &Map<String, Value>) -> bool {
    is_extents(obj.get("shape"))
        && is_extension(obj.get("data_type"))
        && is_extension(obj.get("chunk_grid"))
        && is_extension(obj.get("chunk_key_encoding"))
        && obj.contains_key("fill_value")
        && obj
            .get("codecs")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty() && c.iter().all(|x| is_extension(Some(x))))
}

/// As [`v3_array_shape_ok`], for v2 `.zarray` metadata (`dtype` a type string or a list of
/// fields).
fn v2_array_shape_ok(obj: &Map<String, Value>) -> bool {
    let codec = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(o)) => o.get("id").is_some_and(Value::is_string),
        _ => false,
    };
    is_extents(obj.get("shape"))
        && is_extents(obj.get("chunks"))
        && matches!(obj.get("dtype"), Some(Value::String(_) | Value::Array(_)))
        && obj.contains_key("fill_value")
        && matches!(obj.get("order").and_then(Value::as_str), Some("C" | "F"))
        && codec(obj.get("compressor"))
        && match obj.get("filters") {
            None | Some(Value::Null) => true,
            Some(Value::Array(f)) => f.iter().all(|x| codec(Some(x))),
            _ => false,
        }
}

/// Fills in, in v2 `.zarray` metadata, the defaults numcodecs and zarr-python leave out and
/// zarrs requires: `crc32c`'s checksum `location` (numcodecs' `CRC32C.location` is `end`),
/// `blosc`'s and `bz2`'s numcodecs defaults ([`compressors::numcodecs_defaults`]), and
/// a `null` fill value of a datetime64/timedelta64 array, which zarr-python reads as NaT
/// (`i64::MIN`).
fn numcodecs_v2_defaults(value: &mut Value) {
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    let time = obj
        .get("dtype")
        .and_then(Value::as_str)
        .is_some_and(|d| matches!(d.get(1..3), Some("M8" | "m8")));
    if time && obj.get("fill_value").is_some_and(Value::is_null) {
        obj.insert("fill_value".into(), Value::from(i64::MIN));
    }
    let fix = |c: &mut Value| {
        if let Some(c) = c.as_object_mut() {
            match c.get("id").and_then(Value::as_str) {
                Some("crc32c") => {
                    c.entry("location")
                        .or_insert_with(|| Value::String("end".into()));
                }
                Some(id @ ("blosc" | "bz2")) => {
                    let id = id.to_string();
                    compressors::numcodecs_defaults(&id, c);
                }
                _ => {}
            }
        }
    };
    if let Some(c) = obj.get_mut("compressor") {
        fix(c);
    }
    if let Some(Value::Array(filters)) = obj.get_mut("filters") {
        filters.iter_mut().for_each(fix);
    }
}

/// Whether a directory holds Zarr metadata.
fn has_metadata(dir: &Path) -> bool {
    ["zarr.json", ".zarray", ".zgroup"]
        .iter()
        .any(|f| dir.join(f).is_file())
}

/// Adds the nodes below group `rel` (directory `root/rel`, whose canonical path and those of
/// its ancestors are `ancestors`), depth first.
fn walk(
    root: &Path,
    rel: &str,
    ancestors: &mut Vec<PathBuf>,
    nodes: &mut Vec<Node>,
    skipped: &mut Vec<Skipped>,
    options: &OpenOptions,
) -> Result<()> {
    if ancestors.len() > MAX_DEPTH {
        return Err(Part::Metadata.malformed(format!(
            "group '{rel}' is nested deeper than {MAX_DEPTH} levels (a symlink loop?)"
        )));
    }
    let dir: PathBuf = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let mut children: Vec<(std::ffi::OsString, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let p = entry.path();
        if p.is_dir() {
            children.push((entry.file_name(), p));
        }
    }
    children.sort();
    for (os_name, p) in children {
        let Some(name) = os_name.to_str() else {
            if has_metadata(&p) {
                let shown = os_name.to_string_lossy().to_string();
                let reason = "directory name is not valid UTF-8".to_string();
                if !options.skip_unsupported {
                    return Err(Feature::Structure.unsupported(format!("node '{shown}': {reason}")));
                }
                skipped.push(Skipped {
                    name: key_of(rel, &shown),
                    reason,
                });
            }
            continue;
        };
        // Zarr node names: not only dots, not the reserved `__` prefix (zarrs' rule).
        if name.starts_with("__") || name.chars().all(|c| c == '.') {
            continue;
        }
        let child_rel = key_of(rel, name);
        // A directory without metadata is not part of the hierarchy (zarrs ignores it too).
        match read_node(&p, &child_rel)? {
            None => {}
            Some(NodeMeta::Group(attrs)) => {
                let canonical = std::fs::canonicalize(&p)?;
                if ancestors.contains(&canonical) {
                    return Err(Part::Metadata.malformed(format!(
                        "group '{child_rel}' links back to a group above it (a symlink loop)"
                    )));
                }
                nodes.push(Node {
                    path: child_rel.clone(),
                    meta: NodeMeta::Group(attrs),
                });
                ancestors.push(canonical);
                walk(root, &child_rel, ancestors, nodes, skipped, options)?;
                ancestors.pop();
            }
            Some(meta) => nodes.push(Node {
                path: child_rel,
                meta,
            }),
        }
    }
    Ok(())
}

/// Why an array could not be added.
enum Problem {
    /// Valid but unmappable (skippable): what kind of thing, and the reason.
    Unsupported(Feature, String),
    Error(SourceError),
}

impl From<SourceError> for Problem {
    fn from(e: SourceError) -> Self {
        Problem::Error(e)
    }
}

/// How a variable's bytes come out of its array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadKind {
    /// The array's bytes as they are.
    Direct,
    /// Bytes normalised to 0/1.
    Bool,
    /// Part 0 (real) or 1 (imaginary) of an array of complex numbers whose parts have no
    /// complex element type (`complex_float16`, `complex_bfloat16`).
    Part(usize),
    /// A field of an array of records: its layout is `ZarrSource::fields[i]`.
    Field(usize),
    /// Raw bits of this many bytes per element (`r*`, v2 `|V*`), delivered as `u8` along a
    /// trailing axis.
    Opaque(usize),
    /// Values gathered at open: `ZarrSource::memory[i]` (ragged `bytes` arrays).
    Memory(usize),
}

#[derive(Debug, Clone, Copy)]
struct Reader {
    array: usize,
    kind: ReadKind,
}

/// What a Zarr data type becomes.
enum Mapped {
    Numeric(ElementType, Option<String>),
    Bool,
    Complex(ElementType),
    Text {
        utf32: bool,
    },
    /// Raw bits (`r<bits>`, v2 `|V<bytes>`): blobs of this many bytes.
    Opaque(usize),
    /// Variable-length bytes: text when every value is UTF-8, else ragged `u8`.
    Bytes,
}

fn map_data_type(name: &str) -> Option<Mapped> {
    use ElementType as E;
    let num = |t| Some(Mapped::Numeric(t, None));
    let widened = |t, what: &str| {
        Some(Mapped::Numeric(
            t,
            Some(format!("Zarr {name} values delivered {what}")),
        ))
    };
    match name {
        "bool" => Some(Mapped::Bool),
        "int8" => num(E::I8),
        "int16" => num(E::I16),
        "int32" => num(E::I32),
        "int64" => num(E::I64),
        "uint8" => num(E::U8),
        "uint16" => num(E::U16),
        "uint32" => num(E::U32),
        "uint64" => num(E::U64),
        "float16" => num(E::F16),
        "bfloat16" => num(E::BF16),
        "float32" => num(E::F32),
        "float64" => num(E::F64),
        "int2" | "int4" => widened(E::I8, "one per byte as int8"),
        "uint2" | "uint4" => widened(E::U8, "one per byte as uint8"),
        "numpy.datetime64" | "numpy.timedelta64" => widened(
            E::I64,
            "as int64 counts of the unit in facts.zarr_data_type",
        ),
        "complex64" | "complex_float32" => Some(Mapped::Complex(E::F32)),
        "complex128" | "complex_float64" => Some(Mapped::Complex(E::F64)),
        "complex_float16" => Some(Mapped::Complex(E::F16)),
        "complex_bfloat16" => Some(Mapped::Complex(E::BF16)),
        "string" => Some(Mapped::Text { utf32: false }),
        "fixed_length_utf32" => Some(Mapped::Text { utf32: true }),
        "bytes" | "binary" | "variable_length_bytes" => Some(Mapped::Bytes),
        raw => raw
            .strip_prefix('r')
            .and_then(|b| b.parse::<usize>().ok())
            .filter(|b| *b > 0 && b.is_multiple_of(8))
            .map(|b| Mapped::Opaque(b / 8)),
    }
}

/// Whether an array-creation error means "valid but not supported by this build".
fn unsupported_feature(e: &ArrayCreateError) -> Option<Feature> {
    let plugin = |p: &PluginCreateError, f: Feature| {
        matches!(p, PluginCreateError::Unsupported(_)).then_some(f)
    };
    match e {
        ArrayCreateError::DataTypeCreateError(p) => plugin(p, Feature::DataType),
        ArrayCreateError::CodecsCreateError(p) => plugin(p, Feature::Codec),
        ArrayCreateError::StorageTransformersCreateError(p)
        | ArrayCreateError::ChunkGridCreateError(p)
        | ArrayCreateError::ChunkKeyEncodingCreateError(p) => plugin(p, Feature::Layout),
        ArrayCreateError::UnsupportedZarrV2Array(_)
        | ArrayCreateError::AdditionalFieldUnsupportedError(_) => Some(Feature::Version),
        _ => None,
    }
}

/// Short text of one codec's JSON metadata (`{"name": …, "configuration": {…}}` in v3,
/// `{"id": …, …}` in v2), pushed with its inner codecs (sharding) to `out`.
fn describe_codecs(codecs: &[Value], prefix: &str, out: &mut Vec<String>, compressed: &mut bool) {
    for c in codecs {
        let empty = Map::new();
        let obj = match c {
            Value::Object(o) => o,
            Value::String(_) => &empty,
            _ => continue,
        };
        let (name, config): (String, Map<String, Value>) = if let Value::String(n) = c {
            (n.clone(), Map::new())
        } else if let Some(n) = obj.get("name").and_then(Value::as_str) {
            let conf = obj
                .get("configuration")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            (n.to_string(), conf)
        } else if let Some(n) = obj.get("id").and_then(Value::as_str) {
            let mut conf = obj.clone();
            conf.remove("id");
            (n.to_string(), conf)
        } else {
            continue;
        };
        let short = name.strip_prefix("numcodecs.").unwrap_or(&name);
        if COMPRESSORS.contains(&short) {
            *compressed = true;
        }
        let params: Vec<String> = config
            .iter()
            .filter(|(k, _)| *k != "codecs" && *k != "index_codecs")
            .map(|(k, v)| format!("{k}={}", serde_json::to_string(v).unwrap_or_default()))
            .collect();
        if params.is_empty() {
            out.push(format!("{prefix}{name}"));
        } else {
            out.push(format!("{prefix}{name}({})", params.join(",")));
        }
        if let Some(Value::Array(inner)) = config.get("codecs") {
            describe_codecs(inner, "inner:", out, compressed);
        }
    }
}

/// Codec descriptions and whether any compresses.
fn codec_summary(meta: &ArrayMetadata) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    let mut compressed = false;
    match meta {
        ArrayMetadata::V3(m) => {
            let codecs: Vec<Value> = m
                .codecs
                .iter()
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect();
            describe_codecs(&codecs, "", &mut out, &mut compressed);
        }
        ArrayMetadata::V2(m) => {
            let mut codecs: Vec<Value> = m
                .filters
                .iter()
                .flatten()
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect();
            codecs.extend(
                m.compressor
                    .iter()
                    .filter_map(|c| serde_json::to_value(c).ok()),
            );
            describe_codecs(&codecs, "", &mut out, &mut compressed);
            if let Ok(Value::String(order)) = serde_json::to_value(m.order) {
                if order == "F" {
                    out.push("order=F".to_string());
                }
            }
        }
    }
    (out, compressed)
}

/// Whether the array's stored chunks are each one zstd frame of the chunk's little-endian,
/// C-order bytes and nothing else: v3 codecs exactly `bytes` (little-endian) then `zstd` (or
/// `numcodecs.zstd`), no storage transformer; v2 a `zstd` compressor, no filters, C order and a
/// little-endian (or one-byte) dtype.
fn zstd_frames_only(meta: &ArrayMetadata) -> bool {
    let name_conf = |v: &Value| -> Option<(String, Map<String, Value>)> {
        match v {
            Value::String(n) => Some((n.clone(), Map::new())),
            Value::Object(o) => {
                let n = o.get("name").and_then(Value::as_str)?.to_string();
                let c = o
                    .get("configuration")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                Some((n, c))
            }
            _ => None,
        }
    };
    let is_zstd = |n: &str| n == "zstd" || n == "numcodecs.zstd";
    match meta {
        ArrayMetadata::V3(m) => {
            let codecs: Vec<Value> = m
                .codecs
                .iter()
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect();
            let [bytes, zstd] = codecs.as_slice() else {
                return false;
            };
            let (Some((b, bconf)), Some((z, _))) = (name_conf(bytes), name_conf(zstd)) else {
                return false;
            };
            let little = bconf
                .get("endian")
                .is_none_or(|e| e.as_str() == Some("little"));
            m.storage_transformers.is_empty() && b == "bytes" && little && is_zstd(&z)
        }
        ArrayMetadata::V2(m) => {
            let no_filters = m.filters.as_ref().is_none_or(|f| f.is_empty());
            let zstd = m
                .compressor
                .as_ref()
                .and_then(|c| serde_json::to_value(c).ok())
                .is_some_and(|c| c.get("id").and_then(Value::as_str).is_some_and(is_zstd));
            let c_order = serde_json::to_value(m.order).is_ok_and(|o| o == "C");
            let dtype_le = serde_json::to_value(&m.dtype).is_ok_and(|d| {
                d.as_str()
                    .is_some_and(|d| d.starts_with('<') || d.starts_with('|'))
            });
            no_filters && zstd && c_order && dtype_le
        }
    }
}

/// The regular chunk shape from the metadata (`None` for other chunk grids).
fn regular_chunk_shape(meta: &ArrayMetadata) -> Option<Vec<u64>> {
    match meta {
        ArrayMetadata::V3(m) => {
            if m.chunk_grid.name() != "regular" {
                return None;
            }
            m.chunk_grid
                .configuration()?
                .get("chunk_shape")?
                .as_array()?
                .iter()
                .map(Value::as_u64)
                .collect()
        }
        ArrayMetadata::V2(m) => Some(m.chunks.iter().map(|c| c.get()).collect()),
    }
}

fn product(v: &[u64]) -> Option<u64> {
    v.iter().try_fold(1u64, |a, &b| a.checked_mul(b))
}

/// Valid `_ARRAY_DIMENSIONS`: one string per axis.
fn xarray_dims(attrs: &Map<String, Value>, rank: usize) -> Option<Vec<String>> {
    let list = attrs.get("_ARRAY_DIMENSIONS")?.as_array()?;
    if list.len() != rank {
        return None;
    }
    list.iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// An opened Zarr store.
pub struct ZarrSource {
    variables: Vec<Variable>,
    readers: Vec<Reader>,
    arrays: Vec<Array<Store>>,
    global_attrs: Attrs,
    skipped: Vec<Skipped>,
    text_variables: Vec<TextVariable>,
    codec_options: CodecOptions,
    /// Per variable: the chunk shape when every stored chunk is one zstd frame of exactly the
    /// chunk's little-endian C-order bytes ([`zstd_frames_only`]).
    frames: Vec<Option<Vec<u64>>>,
    /// Where the fields of arrays of records sit in their records ([`ReadKind::Field`]).
    fields: Vec<structured::FieldLayout>,
    /// Variables read whole at open ([`ReadKind::Memory`]).
    memory: Vec<tet_source::ragged::InMemory>,
}

impl std::fmt::Debug for ZarrSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrSource")
            .field("variables", &self.variables)
            .field("skipped", &self.skipped)
            .field("text_variables", &self.text_variables.len())
            .finish()
    }
}

/// What `add_array` knows of an array before it is opened with zarrs.
struct ArrayMeta {
    /// Codec descriptions and whether any of them compresses.
    filters: Vec<String>,
    compressed: bool,
    /// The JSON fill value.
    fill_json: String,
    /// The JSON data type.
    dt_json: String,
    /// The regular chunk shape.
    grid_chunks: Option<Vec<u64>>,
    /// The chunk shape when every stored chunk is one plain zstd frame.
    frames: Option<Vec<u64>>,
    /// The configuration of the sharding codec (v3).
    sharding: Option<Map<String, Value>>,
}

impl ArrayMeta {
    fn of(meta: &ArrayMetadata) -> Self {
        let (filters, compressed) = codec_summary(meta);
        let (fill_json, dt_json) = match meta {
            ArrayMetadata::V3(m) => (
                serde_json::to_string(&m.fill_value).unwrap_or_default(),
                serde_json::to_string(&m.data_type).unwrap_or_default(),
            ),
            ArrayMetadata::V2(m) => (
                serde_json::to_string(&m.fill_value).unwrap_or_default(),
                serde_json::to_string(&m.dtype).unwrap_or_default(),
            ),
        };
        let grid_chunks = regular_chunk_shape(meta);
        let frames = grid_chunks.clone().filter(|_| zstd_frames_only(meta));
        let sharding = match meta {
            ArrayMetadata::V3(m) => m
                .codecs
                .iter()
                .find(|c| c.name() == "sharding_indexed")
                .and_then(|c| c.configuration())
                .map(|c| serde_json::Map::clone(c)),
            ArrayMetadata::V2(_) => None,
        };
        ArrayMeta {
            filters,
            compressed,
            fill_json,
            dt_json,
            grid_chunks,
            frames,
            sharding,
        }
    }
}

/// Refuses metadata fields that must be understood (v3), which no reader here understands.
fn check_must_understand(meta: &ArrayMetadata) -> std::result::Result<(), Problem> {
    if let ArrayMetadata::V3(m) = meta {
        if let Some((field, _)) = m
            .additional_fields
            .iter()
            .find(|(_, f)| f.must_understand())
        {
            return Err(Problem::Unsupported(
                Feature::Version,
                format!("metadata field '{field}' is not understood (must_understand)"),
            ));
        }
    }
    Ok(())
}

/// The v3 name of the array's data type, and its JSON as recorded (a v2 datetime64 /
/// timedelta64, see [`datetime`], is recorded as the v3 data type is).
fn data_type_of(array: &Array<Store>, meta_is_v2: bool, dt_json: String) -> (String, String) {
    let type_name = array
        .data_type()
        .name_v3()
        .map(|c| c.into_owned())
        .unwrap_or_else(|| array.data_type().to_string());
    let dt_json = match (meta_is_v2, type_name.as_str()) {
        (true, "numpy.datetime64" | "numpy.timedelta64") => serde_json::json!({
            "name": type_name,
            "configuration": Value::Object(
                array.data_type().configuration(zarrs::plugin::ZarrVersion::V3).into()
            ),
        })
        .to_string(),
        _ => dt_json,
    };
    (type_name, dt_json)
}

/// The dimension names, the attributes, and the facts every variable of the array shares (fill
/// value, partial v3 dimension names).
fn dims_attrs_facts(
    array: &Array<Store>,
    rank: usize,
    fill_json: String,
) -> (Option<Vec<String>>, Attrs, Vec<Fact>) {
    let raw_attrs = array.attributes();
    let xr_dims = xarray_dims(raw_attrs, rank);
    let mut facts: Vec<Fact> = vec![Fact::private(
        "zarr",
        "zarr_fill_value",
        AttrValue::Text(fill_json),
    )];
    let named: Option<Vec<String>> = match array.dimension_names() {
        Some(names) => {
            let all: Option<Vec<String>> = names.iter().cloned().collect();
            if all.is_none() && names.iter().any(Option::is_some) {
                facts.push(Fact::private(
                    "zarr",
                    "zarr_dimension_names",
                    AttrValue::Text(serde_json::to_string(names).unwrap_or_default()),
                ));
            }
            all
        }
        None => None,
    };
    let dims = named.or_else(|| xr_dims.clone()).filter(|d| !d.is_empty());
    let skip: &[&str] = if xr_dims.is_some() && (dims == xr_dims || rank == 0) {
        &["_ARRAY_DIMENSIONS"]
    } else {
        &[]
    };
    let attrs = attrs::map_to_attrs(raw_attrs, skip);
    (dims, attrs, facts)
}

impl ZarrSource {
    fn add_array(
        &mut self,
        fs: &Arc<Backing>,
        rel: &str,
        name: &str,
        meta: ArrayMetadata,
    ) -> std::result::Result<(), Problem> {
        check_must_understand(&meta)?;
        let am = ArrayMeta::of(&meta);
        let meta_is_v2 = matches!(meta, ArrayMetadata::V2(_));
        let node_path = format!("/{rel}");
        let store = Arc::new(GuardedStore::new(fs.clone(), None));
        let array =
            Array::new_with_metadata(store, &node_path, meta).map_err(
                |e| match unsupported_feature(&e) {
                    Some(feature) => Problem::Unsupported(feature, e.to_string()),
                    None => {
                        Problem::Error(Part::Metadata.malformed_by(format!("array '{name}'"), e))
                    }
                },
            )?;
        let malformed =
            |msg: String| Problem::Error(Part::Shape.malformed(format!("array '{name}': {msg}")));
        let (type_name, dt_json) = data_type_of(&array, meta_is_v2, am.dt_json);
        let mapped = map_data_type(&type_name).ok_or_else(|| {
            Problem::Unsupported(
                Feature::DataType,
                format!("data type {type_name} has no .tet form"),
            )
        })?;

        let shape = array.shape().to_vec();
        let rank = shape.len();
        let count = product(&shape)
            .ok_or_else(|| malformed(format!("shape {shape:?} has too many elements")))?;
        let elem = array.data_type().fixed_size();
        if let Some(size) = elem {
            count
                .checked_mul(size as u64)
                .ok_or_else(|| malformed(format!("shape {shape:?} has too many bytes")))?;
        }
        let (array, chunk_shape) = decode_chunk_shape(
            fs,
            array,
            am.grid_chunks,
            am.sharding.as_ref(),
            elem,
            &shape,
        )?;
        let (dims, mut attrs, facts) = dims_attrs_facts(&array, rank, am.fill_json);
        attrs::decode_xarray_fill(&mut attrs, &type_name);
        if let Mapped::Text { utf32 } = mapped {
            if count > MAX_TEXT_ELEMENTS {
                return Err(Problem::Unsupported(Feature::Size, format!(
                    "{type_name} array of {count} strings is more than the {MAX_TEXT_ELEMENTS} held in memory"
                )));
            }
            let values = read_text(&array, name, utf32, &self.codec_options)?;
            if values.len() as u64 != count {
                return Err(Problem::Error(Part::Values.malformed(format!(
                    "array '{name}': {} strings read, {count} expected",
                    values.len()
                ))));
            }
            self.text_variables.push(TextVariable {
                name: name.to_string(),
                // A 0-d string array keeps the shape [1] it always had here.
                shape: if rank == 0 { vec![1] } else { shape },
                dims,
                values,
                attrs,
                char_axis: None,
                facts: Vec::new(),
            });
            return Ok(());
        }
        let basename = name.rsplit('/').next().unwrap_or(name);
        if matches!(mapped, Mapped::Bytes) {
            let base = Variable {
                name: name.to_string(),
                dtype: ElementType::U8,
                shape,
                dims,
                attrs,
                layout: SourceLayout::default(),
                role: Role::Data,
                notes: Vec::new(),
                facts,
            };
            return self.add_bytes(array, base, count, &dt_json);
        }
        let role = match &dims {
            Some(d) if rank == 1 && d[0] == basename => Role::Coordinate,
            _ => Role::Data,
        };
        let base = Variable {
            name: name.to_string(),
            dtype: ElementType::U8,
            shape,
            dims,
            attrs,
            layout: SourceLayout {
                chunk_shape,
                compressed: am.compressed,
                filters: am.filters,
            },
            role,
            notes: Vec::new(),
            facts,
        };
        let index = self.arrays.len();
        let new_vars = mapped_variables(mapped, base, &type_name, dt_json, elem)?;
        if matches!(mapped_size(&new_vars), Some(s) if elem.is_some_and(|e| e != s)) {
            return Err(Problem::Unsupported(
                Feature::DataType,
                format!(
                    "data type {type_name} is {elem:?} bytes per element, expected {:?}",
                    mapped_size(&new_vars)
                ),
            ));
        }
        self.arrays.push(array);
        for (v, kind) in new_vars {
            // A 0-d array's one chunk is not offered as a frame.
            let whole_frames = matches!(kind, ReadKind::Direct) && rank > 0;
            self.frames.push(am.frames.clone().filter(|_| whole_frames));
            self.variables.push(v);
            self.readers.push(Reader { array: index, kind });
        }
        Ok(())
    }

    /// Adds the variable-length `bytes` array `array` (see [`vlen_bytes`]): a text variable
    /// when every value is UTF-8, else the values and count variables of a ragged array.
    fn add_bytes(
        &mut self,
        array: Array<Store>,
        base: Variable,
        count: u64,
        dt_json: &str,
    ) -> std::result::Result<(), Problem> {
        if count > MAX_TEXT_ELEMENTS {
            return Err(Problem::Unsupported(
                Feature::Size,
                format!(
                "bytes array of {count} values is more than the {MAX_TEXT_ELEMENTS} held in memory"
            ),
            ));
        }
        let name = base.name.clone();
        let form = vlen_bytes::read(&array, &self.codec_options, base.clone(), count, dt_json)
            .map_err(|e| match e {
                SourceError::Unsupported { feature, detail } => {
                    Problem::Unsupported(feature, detail)
                }
                e => Problem::Error(e),
            })?;
        match form {
            vlen_bytes::BytesForm::Text(values) => {
                self.text_variables.push(TextVariable {
                    name,
                    // A 0-d array keeps the shape [1], as 0-d string arrays do.
                    shape: if base.shape.is_empty() {
                        vec![1]
                    } else {
                        base.shape
                    },
                    dims: base.dims,
                    values,
                    attrs: base.attrs,
                    char_axis: None,
                    facts: vec![Fact::private(
                        "zarr",
                        "zarr_data_type",
                        AttrValue::Text(dt_json.to_string()),
                    )],
                });
            }
            vlen_bytes::BytesForm::Ragged(vars) => {
                let index = self.arrays.len();
                self.arrays.push(array);
                let ((values, vdata), (counts, cdata)) = *vars;
                for (v, data) in [(values, vdata), (counts, cdata)] {
                    self.frames.push(None);
                    self.variables.push(v);
                    self.readers.push(Reader {
                        array: index,
                        kind: ReadKind::Memory(self.memory.len()),
                    });
                    self.memory.push(data);
                }
            }
        }
        Ok(())
    }

    /// The underlying zarrs array of variable `var` (for inspection).
    pub fn array(&self, var: usize) -> Option<&Array<Store>> {
        self.readers.get(var).and_then(|r| self.arrays.get(r.array))
    }

    /// The region `start`/`count` of raw-bits variable (its axes, then the byte axis) into
    /// `out`: the blobs of the outer region decoded, the byte range of each copied out.
    fn read_opaque(
        &self,
        array: &Array<Store>,
        size: usize,
        start: &[u64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        let r = start.len().saturating_sub(1);
        let (bs, bc) = (start[r] as usize, count[r] as usize);
        let subset = ArraySubset::new_with_start_shape(start[..r].to_vec(), count[..r].to_vec())
            .map_err(|e| SourceError::library(Lib::Zarrs, "region", e))?;
        let blobs = out.len() / bc.max(1);
        let mut tmp = vec![0u8; blobs.checked_mul(size).ok_or(Request::TooLarge)?];
        self.decode_into(array, &subset, &mut tmp, size)?;
        for (o, b) in out.chunks_exact_mut(bc).zip(tmp.chunks_exact(size)) {
            o.copy_from_slice(&b[bs..bs + bc]);
        }
        Ok(())
    }

    /// Decodes `subset` of `array` into `out` (C order, native = little-endian bytes).
    fn decode_into(
        &self,
        array: &Array<Store>,
        subset: &ArraySubset,
        out: &mut [u8],
        elem: usize,
    ) -> Result<()> {
        let shape: Vec<u64> = subset.shape().to_vec();
        let whole = ArraySubset::new_with_shape(shape.clone());
        let cells = UnsafeCellSlice::new(out);
        // SAFETY: this is the only view of `out`, which is borrowed exclusively for the call,
        // so no other view can overlap it. Its length equals the subset's bytes (checked by
        // the caller), which `new` verifies again.
        let mut view = unsafe { ArrayBytesFixedDisjointView::new(cells, elem, &shape, whole) }
            .map_err(|e| SourceError::library(Lib::Zarrs, "zarrs output view", e))?;
        let target = ArrayBytesDecodeIntoTarget::Fixed(&mut view);
        let name = array.path().as_str().trim_start_matches('/').to_string();
        let result = catch_unwind(AssertUnwindSafe(|| {
            array.retrieve_array_subset_into_opt(subset, target, &self.codec_options)
        }));
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                Err(Part::Chunk.malformed_by(format!("array '{name}': cannot decode {subset}"), e))
            }
            Err(panic) => {
                let msg = tet_source::panic_text(&*panic);
                Err(Part::Chunk.malformed(format!(
                    "array '{name}': zarrs failed decoding {subset} (corrupt chunk?): {msg}"
                )))
            }
        }
    }
}

/// The shape zarrs decodes at once (the chunk, or the inner chunk of a shard) clipped to the
/// array's shape, after checking that it is not too large; a sharded array whose shards have
/// an index gets a store that checks whole shards against it.
fn decode_chunk_shape(
    fs: &Arc<Backing>,
    mut array: Array<Store>,
    grid_chunks: Option<Vec<u64>>,
    sharding: Option<&Map<String, Value>>,
    elem: Option<usize>,
    shape: &[u64],
) -> std::result::Result<(Array<Store>, Option<Vec<u64>>), Problem> {
    let rank = shape.len();
    let mut decode_unit = grid_chunks.clone();
    if array.is_sharded() {
        let inner: Option<Vec<u64>> = array
            .effective_subchunk_shape()
            .map(|s| s.iter().map(|c| c.get()).collect());
        if let (Some(shard), Some(inner)) = (&grid_chunks, &inner) {
            if shard.len() == inner.len() {
                let per_shard = shard
                    .iter()
                    .zip(inner)
                    .try_fold(1u64, |a, (&s, &i)| a.checked_mul(s.div_ceil(i.max(1))));
                let per_shard = per_shard.filter(|&n| n <= MAX_CHUNKS_PER_SHARD);
                let Some(per_shard) = per_shard else {
                    return Err(Problem::Unsupported(Feature::Layout, format!(
                        "shards of {shard:?} in inner chunks of {inner:?} have more than {MAX_CHUNKS_PER_SHARD} inner chunks"
                    )));
                };
                // Whole shards are checked against their index before zarrs slices them.
                let index = sharding.and_then(|c| ShardIndex::from_configuration(c, per_shard));
                if index.is_some() {
                    array = array.with_storage(Arc::new(GuardedStore::new(fs.clone(), index)));
                }
            }
        }
        decode_unit = inner;
    }
    if let (Some(unit), Some(size)) = (&decode_unit, elem) {
        let bytes = product(unit).and_then(|n| n.checked_mul(size as u64));
        if bytes.is_none_or(|b| b > MAX_DECODED_CHUNK) {
            return Err(Problem::Unsupported(Feature::Size, format!(
                "a chunk of {unit:?} elements decodes to more than {MAX_DECODED_CHUNK} bytes at once"
            )));
        }
    }
    let chunk_shape = decode_unit
        .filter(|c| c.len() == rank && rank > 0)
        .map(|c| {
            c.iter()
                .zip(shape)
                .map(|(&c, &d)| c.min(d.max(1)))
                .collect::<Vec<u64>>()
        });
    Ok((array, chunk_shape))
}

/// The variables a numeric, bool or complex array becomes (`base` with its type, notes and
/// facts completed), each with how it is read.
fn mapped_variables(
    mapped: Mapped,
    base: Variable,
    type_name: &str,
    dt_json: String,
    elem: Option<usize>,
) -> std::result::Result<Vec<(Variable, ReadKind)>, Problem> {
    let typed = |dtype| Variable {
        dtype,
        ..base.clone()
    };
    Ok(match mapped {
        Mapped::Numeric(t, note) => {
            let mut v = typed(t);
            if let Some(note) = note {
                v.notes.push(note);
                v.facts.push(Fact::private(
                    "zarr",
                    "zarr_data_type",
                    AttrValue::Text(dt_json),
                ));
            }
            vec![(v, ReadKind::Direct)]
        }
        Mapped::Bool => vec![(typed(ElementType::Bool), ReadKind::Bool)],
        Mapped::Opaque(n) => {
            let mut v = tet_source::ragged::opaque_variable(typed(ElementType::U8), "", n as u64);
            v.facts.push(Fact::private(
                "zarr",
                "zarr_data_type",
                AttrValue::Text(dt_json),
            ));
            vec![(v, ReadKind::Opaque(n))]
        }
        Mapped::Complex(t) => {
            if elem != Some(2 * t.size()) {
                return Err(Problem::Unsupported(
                    Feature::DataType,
                    format!("complex data type {type_name} of {elem:?} bytes"),
                ));
            }
            match t.complex_of() {
                // complex64 / complex128: one complex variable, as zarrs decodes it.
                Some(c) => vec![(typed(c), ReadKind::Direct)],
                // No complex type of these parts: the real and the imaginary part each.
                None => ["real", "imag"]
                    .iter()
                    .enumerate()
                    .map(|(part, label)| {
                        let mut v = typed(t);
                        v.name = format!("{}/{label}", base.name);
                        v.role = Role::Data;
                        v.notes.push(format!(
                            "{label} part of the {type_name} array '{}'",
                            base.name
                        ));
                        v.facts.push(Fact::private(
                            "zarr",
                            "zarr_data_type",
                            AttrValue::Text(dt_json.clone()),
                        ));
                        (v, ReadKind::Part(part))
                    })
                    .collect(),
            }
        }
        Mapped::Text { .. } | Mapped::Bytes => Vec::new(),
    })
}

/// The element size of the first new variable.
fn mapped_size(vars: &[(Variable, ReadKind)]) -> Option<usize> {
    let (v, kind) = vars.first()?;
    Some(match kind {
        ReadKind::Part(_) => 2 * v.dtype.size(),
        ReadKind::Opaque(n) => *n,
        _ => v.dtype.size(),
    })
}

/// All values of the string array `name`, in C order.
fn read_text(
    array: &Array<Store>,
    name: &str,
    utf32: bool,
    opts: &CodecOptions,
) -> Result<Vec<String>> {
    let what = || format!("array '{name}': cannot read its strings");
    let subset = array.subset_all();
    let got = catch_unwind(AssertUnwindSafe(|| {
        if utf32 {
            let size = array.data_type().fixed_size().unwrap_or(0);
            if size == 0 || !size.is_multiple_of(4) {
                return Err(
                    Part::Type.malformed(format!("{}: fixed_length_utf32 of {size} bytes", what()))
                );
            }
            let bytes = array
                .retrieve_array_subset_opt::<zarrs::array::ArrayBytes<'static>>(&subset, opts)
                .map_err(|e| Part::Chunk.malformed_by(what(), e))?
                .into_fixed()
                .map_err(|e| Part::Chunk.malformed_by(what(), e))?;
            bytes
                .chunks_exact(size)
                .map(|el| {
                    let mut s: String = el
                        .chunks_exact(4)
                        .map(|c| {
                            let u = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                            char::from_u32(u).ok_or_else(|| {
                                Part::Values
                                    .malformed(format!("{}: invalid code point {u:#x}", what()))
                            })
                        })
                        .collect::<Result<String>>()?;
                    let trimmed = s.trim_end_matches('\0').len();
                    s.truncate(trimmed);
                    Ok(s)
                })
                .collect()
        } else {
            array
                .retrieve_array_subset_opt::<Vec<String>>(&subset, opts)
                .map_err(|e| Part::Chunk.malformed_by(what(), e))
        }
    }));
    got.unwrap_or_else(|_| {
        Err(Part::Chunk.malformed(format!(
            "{}: zarrs failed decoding the strings (corrupt chunk?)",
            what()
        )))
    })
}

impl Source for ZarrSource {
    fn variables(&self) -> &[Variable] {
        &self.variables
    }

    fn zstd_frames(&self, var: usize) -> bool {
        self.frames.get(var).is_some_and(Option::is_some)
    }

    fn zstd_frame(&self, var: usize, start: &[u64], count: &[u64]) -> Result<Option<Vec<u8>>> {
        let Some(Some(chunk)) = self.frames.get(var) else {
            return Ok(None);
        };
        // Exactly one whole stored chunk (edge chunks are padded in storage: not this).
        if start.len() != chunk.len() || count != chunk.as_slice() {
            return Ok(None);
        }
        let mut indices = Vec::with_capacity(chunk.len());
        for (&s, &c) in start.iter().zip(chunk) {
            if c == 0 || s % c != 0 {
                return Ok(None);
            }
            indices.push(s / c);
        }
        let array = &self.arrays[self.readers[var].array];
        array.retrieve_encoded_chunk(&indices).map_err(|e| {
            SourceError::library(
                Lib::Zarrs,
                format!("array '{}': chunk {indices:?}", self.variables[var].name),
                e,
            )
        })
    }

    fn global_attrs(&self) -> &[(String, AttrValue)] {
        &self.global_attrs
    }

    fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    fn text_variables(&self) -> &[TextVariable] {
        &self.text_variables
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let (v, n) = self.region_of(var, start, count, out.len())?;
        if n == 0 {
            return Ok(());
        }
        let r = self.readers[var];
        let array = &self.arrays[r.array];
        let subset = if v.shape.is_empty() {
            ArraySubset::new_with_shape(Vec::new())
        } else {
            ArraySubset::new_with_start_shape(start.to_vec(), count.to_vec())
                .map_err(|e| SourceError::library(Lib::Zarrs, "region", e))?
        };
        let size = v.dtype.size();
        match r.kind {
            ReadKind::Direct => self.decode_into(array, &subset, out, size),
            ReadKind::Bool => {
                self.decode_into(array, &subset, out, 1)?;
                for b in out.iter_mut() {
                    *b = u8::from(*b != 0);
                }
                Ok(())
            }
            ReadKind::Part(part) => {
                let mut both = vec![0u8; out.len() * 2];
                self.decode_into(array, &subset, &mut both, 2 * size)?;
                for (dst, src) in out.chunks_exact_mut(size).zip(both.chunks_exact(2 * size)) {
                    dst.copy_from_slice(&src[part * size..(part + 1) * size]);
                }
                Ok(())
            }
            ReadKind::Field(f) => {
                let layout = self.fields.get(f).ok_or(Request::NoEntry {
                    table: "field layout",
                    index: f,
                })?;
                self.read_field(array, layout, start, count, out)
            }
            ReadKind::Opaque(size) => self.read_opaque(array, size, start, count, out),
            ReadKind::Memory(m) => self
                .memory
                .get(m)
                .ok_or(Request::NoEntry {
                    table: "values",
                    index: m,
                })?
                .read_region(start, count, out),
        }
    }
}
