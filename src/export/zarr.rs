//! Zarr v3 export: a directory store with one group per `/` level, one array per planned array,
//! written through the `zarrs` crate (`FilesystemStore`, `GroupBuilder`, `ArrayBuilder`,
//! `Array::store_metadata_opt` / `store_chunk_opt` / `store_chunk_subset_opt` /
//! `store_encoded_chunk`): no Zarr JSON or chunk file is written by hand.
//!
//! Each array's chunk grid is the `.tet` chunk shape (clamped to the axis length), its chunk
//! keys the default encoding (`c/i/j/…`, `c` for a 0-d array), its codecs `bytes`
//! (little-endian) then `zstd` (or `bytes` alone with `--compress none`). When a `.tet` chunk is
//! already a zstd frame of exactly the bytes Zarr stores (a full, interior chunk whose values
//! need no restoring), the frame is copied verbatim with `store_encoded_chunk`: Zarr's zstd
//! codec stores one standard frame per chunk, and any level decodes the same way. A frame is
//! checked before it is copied: against its recorded digest, or, when it carries zstd's content
//! checksum, by decoding it into a scratch buffer (still far cheaper than encoding it again); a
//! frame that fails is refused, naming the chunk and its bytes. Other chunks are encoded by zarrs,
//! one at a time; an edge chunk is stored as a chunk subset, which zarrs pads to the full chunk
//! shape with the fill value (0), as Zarr chunks always have the full shape. Every chunk is
//! written, even one equal to the fill value (`store_empty_chunks`), as the `.tet` file has it.
//!
//! Attributes are JSON (typed values become numbers, lists or strings; non-finite floats the
//! strings `NaN`, `Infinity`, `-Infinity`, as in Zarr fill values), `dimension_names` come from
//! the `.tet` dims, global attributes go to the root group (a global attribute named
//! `group/name`, as the NetCDF importer records group attributes, to that group). zarrs writes
//! the metadata in its own field order (empty `attributes` left out) without its `_zarrs`
//! version attribute; attributes are given with sorted keys, so the same `.tet` file always
//! gives the same bytes. String variables (`tet_ext.text_variables`) become `string` arrays
//! (zarr-python 3's type) of one chunk with the `vlen-utf8` codec, encoded by zarrs too.
//!
//! Node names must be Zarr v3 node names: a name with an empty, all-dots or `__`-prefixed part
//! (reserved by the spec, refused by zarrs) or a `\` is refused before anything is written. The
//! store is built under a temporary directory beside the output and committed (fsync, rename)
//! by [`super::commit`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Map, Value};
use tet_source::{AttrValue, Attrs, TextVariable};
use zarrs::array::codec::{BytesCodec, VlenUtf8Codec, ZstdCodec};
use zarrs::array::{
    ArrayBuilder, ArrayBytes, ArrayMetadataOptions, ArraySubset, BytesToBytesCodecTraits,
    CodecOptions, FillValueMetadata,
};
use zarrs::filesystem::FilesystemStore;
use zarrs::group::GroupBuilder;
use zarrs::storage::Bytes;

use super::{
    commit, grid_coords, io_err, parent_dir, split_group, ChunkSource, Compression, Elem,
    ExportError, Plan, Restore, Result,
};
use crate::format::footer::canonical;
use crate::format::{Codec, TetFile};

fn data_type(e: Elem) -> &'static str {
    match e {
        Elem::Bool => "bool",
        Elem::I8 => "int8",
        Elem::U8 => "uint8",
        Elem::I16 => "int16",
        Elem::U16 => "uint16",
        Elem::I32 => "int32",
        Elem::U32 => "uint32",
        Elem::I64 => "int64",
        Elem::U64 => "uint64",
        Elem::F16 => "float16",
        Elem::F32 => "float32",
        Elem::F64 => "float64",
        Elem::C64 => "complex64",
        Elem::C128 => "complex128",
    }
}

fn fill_value(e: Elem) -> Value {
    match e {
        Elem::Bool => json!(false),
        Elem::F16 | Elem::F32 | Elem::F64 => json!(0.0),
        Elem::C64 | Elem::C128 => json!([0.0, 0.0]),
        _ => json!(0),
    }
}

fn float(v: f64) -> Value {
    if v.is_nan() {
        json!("NaN")
    } else if v.is_infinite() {
        json!(if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// A typed attribute as a JSON value: one number as a number, several as a list.
pub(crate) fn attr_json(v: &AttrValue) -> Value {
    fn one_or_list(mut xs: Vec<Value>) -> Value {
        if xs.len() == 1 {
            xs.remove(0)
        } else {
            Value::Array(xs)
        }
    }
    fn ints<T: Copy + Into<Value>>(xs: &[T]) -> Value {
        one_or_list(xs.iter().map(|&x| x.into()).collect())
    }
    match v {
        AttrValue::Text(s) => json!(s),
        AttrValue::TextList(l) => json!(l),
        AttrValue::I8(x) => ints(x),
        AttrValue::U8(x) => ints(x),
        AttrValue::I16(x) => ints(x),
        AttrValue::U16(x) => ints(x),
        AttrValue::I32(x) => ints(x),
        AttrValue::U32(x) => ints(x),
        AttrValue::I64(x) => ints(x),
        AttrValue::U64(x) => ints(x),
        // f32 through its shortest decimal form, so 0.1f32 shows as 0.1.
        AttrValue::F32(x) => one_or_list(
            x.iter()
                .map(|&v| float(v.to_string().parse::<f64>().unwrap_or(v as f64)))
                .collect(),
        ),
        AttrValue::F64(x) => one_or_list(x.iter().map(|&v| float(v)).collect()),
    }
}

fn attrs_json(attrs: &Attrs) -> Map<String, Value> {
    attrs
        .iter()
        .map(|(k, v)| (k.clone(), attr_json(v)))
        .collect()
}

/// zarrs' errors as a one-line [`ExportError::Target`] naming the node.
fn zerr<E: std::fmt::Display>(node: &str) -> impl FnOnce(E) -> ExportError + '_ {
    move |e| ExportError::Target(format!("zarr `{node}`: {e}"))
}

/// Attributes as a JSON object with sorted keys (zarrs keeps insertion order), so the same
/// `.tet` file always gives the same metadata bytes.
fn sorted(m: Map<String, Value>) -> Map<String, Value> {
    match canonical(&Value::Object(m)) {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The `zstd` bytes-to-bytes codec at `level`, or none.
fn zstd_codecs(level: Option<i32>) -> Vec<Arc<dyn BytesToBytesCodecTraits>> {
    level
        .map(|l| Arc::new(ZstdCodec::new(l, false)) as Arc<dyn BytesToBytesCodecTraits>)
        .into_iter()
        .collect()
}

/// Metadata as the Zarr spec has it: no `_zarrs` version attribute (it would tie the bytes of
/// the output to the zarrs release).
fn metadata_options() -> ArrayMetadataOptions {
    ArrayMetadataOptions::default().with_include_zarrs_metadata(false)
}

/// Writes a string variable as a Zarr v3 `string` array in one chunk, encoded by zarrs with the
/// `vlen-utf8` codec (item count, then each item's byte length and UTF-8 bytes, all lengths u32
/// little-endian).
fn write_text(
    store: &Arc<FilesystemStore>,
    t: &TextVariable,
    level: Option<i32>,
    copts: &CodecOptions,
) -> Result<()> {
    let path = format!("/{}", t.name);
    let chunk: Vec<u64> = t.shape.iter().map(|&d| d.max(1)).collect();
    let array = ArrayBuilder::new(t.shape.clone(), chunk, "string", "")
        .array_to_bytes_codec(Arc::new(VlenUtf8Codec::new()))
        .bytes_to_bytes_codecs(zstd_codecs(level))
        .dimension_names(t.dims.clone().filter(|d| !d.is_empty()))
        .attributes(sorted(attrs_json(&t.attrs)))
        .build(store.clone(), &path)
        .map_err(zerr(&t.name))?;
    array
        .store_metadata_opt(&metadata_options())
        .map_err(zerr(&t.name))?;
    if t.values.is_empty() {
        return Ok(());
    }
    // vlen-utf8 lengths are u32 (zarrs would panic on a longer item): refuse those first.
    if u32::try_from(t.values.len()).is_err()
        || t.values.iter().any(|v| u32::try_from(v.len()).is_err())
    {
        return Err(ExportError::Invalid(format!(
            "string variable `{}` is too large",
            t.name
        )));
    }
    array
        .store_chunk_opt(&vec![0; t.shape.len()], t.values.as_slice(), copts)
        .map_err(zerr(&t.name))
}

/// Writes the plan as a Zarr v3 store at `output`; returns the number of chunks whose zstd
/// frames were reused.
pub(crate) fn write(
    tet: &TetFile,
    plan: &Plan,
    output: &Path,
    compression: Compression,
) -> Result<u64> {
    let level = match compression {
        Compression::Default => Some(3),
        Compression::Zstd(l) => Some(l),
        Compression::None => None,
        Compression::Zlib(_) => {
            return Err(ExportError::Invalid(
                "Zarr export compresses with zstd or none (--compress zstd[:L] | none)".into(),
            ))
        }
    };
    // A malformed footer entry is left out, as it would be by any reader of the footer.
    let texts: Vec<TextVariable> = plan
        .text_variables
        .iter()
        .filter_map(crate::meta::text_variable_from_json)
        .collect();
    // Names come from the file: each must stay a path below the store, and be a Zarr v3 node
    // name (not only dots, no `__` prefix: reserved by the spec, refused by zarrs).
    let names: Vec<&str> = plan
        .arrays
        .iter()
        .map(|a| a.name.as_str())
        .chain(texts.iter().map(|t| t.name.as_str()))
        .collect();
    for name in &names {
        if name.split('/').any(|c| {
            c.is_empty() || c.chars().all(|ch| ch == '.') || c.contains('\\') || c.starts_with("__")
        }) {
            return Err(ExportError::Invalid(format!(
                "dataset name `{name}` is not a Zarr node path (empty, `.` or `..` part, `__` prefix, or `\\`)"
            )));
        }
    }
    let parent = parent_dir(output);
    let tmp = tempfile::Builder::new()
        .prefix(".tet-export-")
        .tempdir_in(&parent)
        .map_err(io_err(&parent))?;
    let root = tmp.path().join("out.zarr");
    std::fs::create_dir(&root).map_err(io_err(&root))?;
    let store = Arc::new(FilesystemStore::new(&root).map_err(zerr("/"))?);
    // Every chunk is written, even one holding only the fill value (as a `.tet` file has them).
    let copts = CodecOptions::default().with_store_empty_chunks(true);

    // Groups: every prefix of an array name; their attributes from `group/name` globals.
    let mut groups: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    groups.insert(String::new(), Map::new());
    for name in &names {
        let mut g = split_group(name).0;
        while !g.is_empty() {
            groups.entry(g.to_string()).or_default();
            g = split_group(g).0;
        }
    }
    let array_names: BTreeSet<&str> = names.iter().copied().collect();
    if array_names.len() != names.len() {
        return Err(ExportError::Invalid(
            "two arrays or string variables have the same name".into(),
        ));
    }
    for (k, v) in &plan.global_attrs {
        let (g, short) = split_group(k);
        let into = if !g.is_empty() && groups.contains_key(g) {
            (g.to_string(), short.to_string())
        } else if !g.is_empty() && plan.subset {
            continue; // an attribute of a group that is not exported
        } else {
            (String::new(), k.clone())
        };
        if let Some(m) = groups.get_mut(&into.0) {
            m.insert(into.1, attr_json(v));
        }
    }
    for (g, attrs) in groups {
        if array_names.contains(g.as_str()) {
            return Err(ExportError::Invalid(format!(
                "`{g}` is both an array and a group"
            )));
        }
        let path = format!("/{g}");
        GroupBuilder::new()
            .attributes(sorted(attrs))
            .build(store.clone(), &path)
            .map_err(zerr(&path))?
            .store_metadata()
            .map_err(zerr(&path))?;
    }
    let mut src = ChunkSource::new(tet);
    let mut reused = 0;
    let mut scratch: Vec<u8> = Vec::new();
    for a in &plan.arrays {
        let scalar = a.shape.is_empty();
        // The .tet chunk shape, but never longer than an axis (a Zarr chunk is stored whole).
        let grid_chunk: Vec<u64> = a
            .chunk_shape
            .iter()
            .zip(&a.tet_shape)
            .map(|(&c, &s)| c.min(s).max(1))
            .collect();
        let chunk_shape: Vec<u64> = if scalar {
            Vec::new()
        } else {
            grid_chunk.clone()
        };
        let fill: FillValueMetadata =
            serde_json::from_value(fill_value(a.elem)).map_err(zerr(&a.name))?;
        let array = ArrayBuilder::new(a.shape.clone(), chunk_shape, data_type(a.elem), fill)
            .array_to_bytes_codec(Arc::new(BytesCodec::little()))
            .bytes_to_bytes_codecs(zstd_codecs(level))
            .dimension_names(a.dims.clone())
            .attributes(sorted(attrs_json(&a.attrs)))
            .build(store.clone(), &format!("/{}", a.name))
            .map_err(zerr(&a.name))?;
        array
            .store_metadata_opt(&metadata_options())
            .map_err(zerr(&a.name))?;
        let full = grid_chunk
            .iter()
            .try_fold(a.elem.size() as u64, |acc, &c| acc.checked_mul(c))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| ExportError::Invalid(format!("`{}`: chunk too large", a.name)))?;
        for coords in grid_coords(tet, a.ds) {
            // A 0-d array has one chunk with no indices (key `c`); the .tet one is at [0].
            let indices: &[u64] = if scalar { &[] } else { &coords };
            // Reuse the stored frame when it holds exactly this chunk's Zarr bytes.
            let (_, count) = tet.datasets[a.ds].grid.chunk_region(&coords);
            let interior = count == grid_chunk;
            if level.is_some() && interior && a.restore == Restore::Same {
                if let Some(e) = tet.find_chunk(a.ds, &coords) {
                    if e.codec() == Some(Codec::Zstd) && e.raw_byte_len == full as u64 {
                        let frame = tet.stored_bytes(e)?;
                        // Only a frame that declares its size: that is what the format requires
                        // and what every Zarr reader can decode in one call.
                        if matches!(zstd::zstd_safe::get_frame_content_size(frame), Ok(Some(n)) if n == full as u64)
                        {
                            // Never pass on a frame that fails its checksum.
                            scratch.resize(64 << 10, 0);
                            tet.verify_chunk(e, &mut scratch).map_err(|err| {
                                ExportError::Data(format!(
                                    "dataset `{}` chunk {coords:?}: {err}",
                                    tet.datasets[a.ds].name
                                ))
                            })?;
                            let frame = Bytes::copy_from_slice(frame);
                            tet.release(e.payload_offset, e.stored_byte_len);
                            // SAFETY (an encoding contract, not memory safety): the frame is
                            // one standard zstd frame of exactly this full chunk's C-order
                            // little-endian bytes (`Restore::Same`: the stored values are the
                            // output values; its declared size is the full chunk's), which is
                            // what this array's `bytes`(little) + `zstd` chain stores for it;
                            // zstd decodes the same whatever level encoded the frame.
                            unsafe { array.store_encoded_chunk(indices, frame) }
                                .map_err(zerr(&a.name))?;
                            reused += 1;
                            continue;
                        }
                    }
                }
            }
            let c = src.chunk(a, &coords)?;
            let bytes = ArrayBytes::new_flen(c.bytes);
            if interior {
                array.store_chunk_opt(indices, bytes, &copts)
            } else {
                // An edge chunk: zarrs pads it to the full chunk shape with the fill value.
                let region = ArraySubset::new_with_shape(c.count.clone());
                array.store_chunk_subset_opt(indices, &region, bytes, &copts)
            }
            .map_err(zerr(&a.name))?;
        }
    }
    for t in &texts {
        write_text(&store, t, level, &copts)?;
    }
    drop(store);
    commit(&root, output)?;
    Ok(reused)
}
