//! Zarr v3 export (the other direction of this crate): a directory store with one group per `/`
//! level, one array per [`Model`] array, written through the `zarrs` crate (`FilesystemStore`,
//! `GroupBuilder`, `ArrayBuilder`, `Array::store_metadata_opt` / `store_chunk_opt` /
//! `store_chunk_subset_opt` / `store_encoded_chunk`): no Zarr JSON or chunk file is written by
//! hand.
//!
//! Each array's chunk grid is the model's chunk shape, its chunk keys the default encoding
//! (`c/i/j/…`, `c` for a 0-d array), its codecs `bytes` (little-endian) then `zstd` (or `bytes`
//! alone with `--compress none`). When a chunk is stored as a zstd frame of exactly the bytes
//! Zarr stores (a full, interior chunk: [`ChunkSource::zstd_frame`], which checks the frame
//! against its recorded checksum first and refuses one that fails, naming the chunk), the frame
//! is copied verbatim with `store_encoded_chunk`: Zarr's zstd codec stores one standard frame per
//! chunk, and any level decodes the same way. Other chunks are encoded by zarrs, one at a time;
//! an edge chunk is stored as a chunk subset, which zarrs pads to the full chunk shape with the
//! fill value (0), as Zarr chunks always have the full shape. Every chunk is written, even one
//! equal to the fill value (`store_empty_chunks`).
//!
//! Attributes are JSON (typed values become numbers, lists or strings; non-finite floats the
//! strings `NaN`, `Infinity`, `-Infinity`, as in Zarr fill values), except an array's
//! `_FillValue`, written as xarray's Zarr backend reads it for a v3 array: for a float array the
//! base64 text of the value's little-endian f64 bytes (`NaN` included), for integers and
//! booleans the number; a complex array's, which xarray cannot read, is left out with a
//! warning. The importer reads the base64 form back as the number. `dimension_names` come from
//! the model's dims, global attributes go to the root group (a global attribute named
//! `group/name` to that group, [`Model::attr_owner`]: an HDF5 root attribute `a/b` stays `a/b`
//! of the root, a group `g`'s `c/d` is `c/d` of `g`). zarrs writes the metadata in its own
//! field order (empty `attributes` left out) without its `_zarrs` version attribute;
//! attributes are given with sorted keys, so the same model always gives the same bytes. String
//! variables become `string` arrays (zarr-python 3's type) of one chunk with the `vlen-utf8`
//! codec, encoded by zarrs too; malformed string variable records are left out.
//!
//! Node names must be Zarr v3 node names: a name with an empty, all-dots or `__`-prefixed part
//! (reserved by the spec, refused by zarrs) or a `\` is refused before anything is written.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::prelude::{Engine as _, BASE64_STANDARD};
use serde_json::{json, Map, Value};
use tet_source::export::{
    io_err, split_group, Array, Capabilities, ChunkSource, Compression, ExportError, Model, Output,
    Result, TextEntry, Written, WrittenArray,
};
use tet_source::json_text::canonical;
use tet_source::{AttrValue, Attrs, ElementType, TextVariable};
use zarrs::array::codec::{BytesCodec, VlenUtf8Codec, ZstdCodec};
use zarrs::array::{
    ArrayBuilder, ArrayBytes, ArrayMetadataOptions, ArraySubset, BytesToBytesCodecTraits,
    CodecOptions, FillValueMetadata,
};
use zarrs::filesystem::FilesystemStore;
use zarrs::group::GroupBuilder;
use zarrs::storage::Bytes;

/// The CF fill value attribute, written as xarray's Zarr backend reads it.
const FILL_VALUE: &str = "_FillValue";

/// What Zarr v3 holds: booleans and complex numbers.
pub const CAPABILITIES: Capabilities = Capabilities {
    has_bool: true,
    has_complex: true,
};

/// The Zarr v3 data type of an element type (`None` for bfloat16, which is no core type).
fn data_type(e: ElementType) -> Option<&'static str> {
    Some(match e {
        ElementType::Bool => "bool",
        ElementType::I8 => "int8",
        ElementType::U8 => "uint8",
        ElementType::I16 => "int16",
        ElementType::U16 => "uint16",
        ElementType::I32 => "int32",
        ElementType::U32 => "uint32",
        ElementType::I64 => "int64",
        ElementType::U64 => "uint64",
        ElementType::F16 => "float16",
        ElementType::F32 => "float32",
        ElementType::F64 => "float64",
        ElementType::C64 => "complex64",
        ElementType::C128 => "complex128",
        ElementType::BF16 => return None,
    })
}

fn fill_value(e: ElementType) -> Value {
    match e {
        ElementType::Bool => json!(false),
        ElementType::F16 | ElementType::BF16 | ElementType::F32 | ElementType::F64 => json!(0.0),
        ElementType::C64 | ElementType::C128 => json!([0.0, 0.0]),
        _ => json!(0),
    }
}

fn float(v: f64) -> Value {
    tet_source::json_text::float_value(v)
}

/// A typed attribute as a JSON value: one number as a number, several as a list.
fn attr_json(v: &AttrValue) -> Value {
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
                .map(|&v| float(v.to_string().parse::<f64>().unwrap_or(f64::from(v))))
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

/// The one number of a `_FillValue` attribute as f64 (`None`: not one number, or an integer
/// f64 does not hold exactly).
fn one_number(v: &AttrValue) -> Option<f64> {
    fn exact<T: Copy + Into<i128>>(x: &[T]) -> Option<f64> {
        let [i] = x else { return None };
        let i: i128 = (*i).into();
        let f = i as f64;
        (f as i128 == i).then_some(f)
    }
    match v {
        AttrValue::F32(x) => match x.as_slice() {
            [x] => Some(f64::from(*x)),
            _ => None,
        },
        AttrValue::F64(x) => match x.as_slice() {
            [x] => Some(*x),
            _ => None,
        },
        AttrValue::I8(x) => exact(x),
        AttrValue::U8(x) => exact(x),
        AttrValue::I16(x) => exact(x),
        AttrValue::U16(x) => exact(x),
        AttrValue::I32(x) => exact(x),
        AttrValue::U32(x) => exact(x),
        AttrValue::I64(x) => exact(x),
        AttrValue::U64(x) => exact(x),
        AttrValue::Text(_) | AttrValue::TextList(_) => None,
    }
}

/// An array's attributes as JSON, its `_FillValue` in the form xarray's Zarr backend reads
/// for a Zarr v3 array of element type `e` (`FillValueCoder`): for floats the base64 text of
/// the value's little-endian f64 bytes (NaN and ±infinity included; an f32 fill value is
/// widened exactly), integers and booleans as JSON numbers and booleans. A complex array's
/// `_FillValue`, which xarray cannot read from Zarr v3 at all, is left out with a warning.
fn array_attrs_json(
    name: &str,
    e: ElementType,
    attrs: &Attrs,
    warnings: &mut Vec<String>,
) -> Map<String, Value> {
    let mut m = attrs_json(attrs);
    let Some(fill) = attrs.iter().find(|(k, _)| k == FILL_VALUE).map(|(_, v)| v) else {
        return m;
    };
    let encoded = match e {
        ElementType::F16 | ElementType::BF16 | ElementType::F32 | ElementType::F64 => {
            one_number(fill).map(|x| json!(BASE64_STANDARD.encode(x.to_le_bytes())))
        }
        ElementType::Bool => one_number(fill).map(|x| json!(x != 0.0)),
        ElementType::C64 | ElementType::C128 => {
            m.remove(FILL_VALUE);
            warnings.push(format!(
                "`{name}`: `_FillValue` of a complex array left out (xarray reads none from Zarr v3)"
            ));
            return m;
        }
        // Integers: the JSON number `attr_json` wrote.
        _ => None,
    };
    if let Some(v) = encoded {
        m.insert(FILL_VALUE.into(), v);
    }
    m
}

/// zarrs' errors as an [`ExportError::Library`] naming the node, zarrs' error kept.
fn zerr<E: std::error::Error + Send + Sync + 'static>(
    node: &str,
) -> impl FnOnce(E) -> ExportError + '_ {
    move |e| ExportError::Library {
        lib: tet_source::Lib::Zarrs,
        context: format!("zarr `{node}`"),
        source: Box::new(e),
    }
}

/// Attributes as a JSON object with sorted keys (zarrs keeps insertion order), so the same
/// model always gives the same metadata bytes.
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

/// Refuses names that are no Zarr v3 node path (they come from the file: each must stay a path
/// below the store) and two nodes of one name.
fn check_names(names: &[&str]) -> Result<()> {
    for name in names {
        if name.split('/').any(|c| {
            c.is_empty() || c.chars().all(|ch| ch == '.') || c.contains('\\') || c.starts_with("__")
        }) {
            return Err(ExportError::Invalid(format!(
                "dataset name `{name}` is not a Zarr node path (empty, `.` or `..` part, `__` prefix, or `\\`)"
            )));
        }
    }
    Ok(())
}

/// Writes the groups: every prefix of a node name, with their attributes from the global
/// attributes (`group/name` to that group).
fn write_groups(model: &Model, names: &[&str], store: &Arc<FilesystemStore>) -> Result<()> {
    let mut groups: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    groups.insert(String::new(), Map::new());
    for name in names {
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
    for (k, v) in &model.global_attrs {
        let (g, short) = model.attr_owner(k);
        let into = if !g.is_empty() && groups.contains_key(g) {
            (g.to_string(), short.to_string())
        } else if !g.is_empty() && model.subset {
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
    Ok(())
}

/// The extent of the chunk at `coords` (clipped at the array's end).
fn chunk_count(a: &Array, coords: &[u64]) -> Vec<u64> {
    a.shape
        .iter()
        .zip(&a.chunk_shape)
        .zip(coords)
        .map(|((&s, &c), &i)| c.min(s.saturating_sub(i.saturating_mul(c))))
        .collect()
}

/// Writes array `i`; returns the number of chunks whose zstd frames were copied verbatim.
fn write_array(
    store: &Arc<FilesystemStore>,
    chunks: &mut dyn ChunkSource,
    i: usize,
    a: &Array,
    level: Option<i32>,
    copts: &CodecOptions,
    warnings: &mut Vec<String>,
) -> Result<u64> {
    let dtype = data_type(a.dtype).ok_or_else(|| {
        ExportError::Invalid(format!("`{}`: Zarr has no {} type", a.name, a.dtype))
    })?;
    let fill: FillValueMetadata =
        serde_json::from_value(fill_value(a.dtype)).map_err(zerr(&a.name))?;
    let array = ArrayBuilder::new(a.shape.clone(), a.chunk_shape.clone(), dtype, fill)
        .array_to_bytes_codec(Arc::new(BytesCodec::little()))
        .bytes_to_bytes_codecs(zstd_codecs(level))
        .dimension_names(a.dims.clone())
        .attributes(sorted(array_attrs_json(
            &a.name, a.dtype, &a.attrs, warnings,
        )))
        .build(store.clone(), &format!("/{}", a.name))
        .map_err(zerr(&a.name))?;
    array
        .store_metadata_opt(&metadata_options())
        .map_err(zerr(&a.name))?;
    // Zarr chunks are stored whole: the bytes of a full chunk.
    a.chunk_shape
        .iter()
        .try_fold(a.dtype.size() as u64, |acc, &c| acc.checked_mul(c))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| ExportError::Invalid(format!("`{}`: chunk too large", a.name)))?;
    let mut reused = 0;
    for coords in a.chunk_coords() {
        let count = chunk_count(a, &coords);
        let interior = count == a.chunk_shape;
        // Reuse the stored frame when it holds exactly this chunk's Zarr bytes.
        if level.is_some() && interior {
            if let Some(frame) = chunks.zstd_frame(i, &coords)? {
                let frame = Bytes::copy_from_slice(frame);
                // SAFETY: (an encoding contract, not memory safety) the frame is one standard
                // zstd frame of exactly this full chunk's C-order little-endian bytes (what
                // `zstd_frame` promises: the values `chunk` would deliver), which is what this
                // array's `bytes`(little) + `zstd` chain stores for it; zstd decodes the same
                // whatever level encoded the frame.
                unsafe { array.store_encoded_chunk(&coords, frame) }.map_err(zerr(&a.name))?;
                reused += 1;
                continue;
            }
        }
        let c = chunks.chunk(i, &coords)?;
        let bytes = ArrayBytes::new_flen(c.bytes);
        if interior {
            array.store_chunk_opt(&coords, bytes, copts)
        } else {
            // An edge chunk: zarrs pads it to the full chunk shape with the fill value.
            let region = ArraySubset::new_with_shape(c.count.clone());
            array.store_chunk_subset_opt(&coords, &region, bytes, copts)
        }
        .map_err(zerr(&a.name))?;
    }
    Ok(reused)
}

/// Writes the model as a Zarr v3 store at `out.staging`.
pub fn write(
    model: &Model,
    chunks: &mut dyn ChunkSource,
    out: Output<'_>,
    compression: Compression,
) -> Result<Written> {
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
    let texts: Vec<&TextVariable> = model
        .text_variables
        .iter()
        .filter_map(|t| match t {
            TextEntry::Variable(v) => Some(v),
            TextEntry::Malformed { .. } => None,
        })
        .collect();
    let names: Vec<&str> = model
        .arrays
        .iter()
        .map(|a| a.name.as_str())
        .chain(texts.iter().map(|t| t.name.as_str()))
        .collect();
    check_names(&names)?;
    let root = out.staging;
    std::fs::create_dir(root).map_err(io_err(root))?;
    let store = Arc::new(FilesystemStore::new(root).map_err(zerr("/"))?);
    // Every chunk is written, even one holding only the fill value.
    let copts = CodecOptions::default().with_store_empty_chunks(true);
    write_groups(model, &names, &store)?;
    let mut reused = 0;
    let mut warnings = Vec::new();
    for (i, a) in model.arrays.iter().enumerate() {
        reused += write_array(&store, chunks, i, a, level, &copts, &mut warnings)?;
    }
    for t in texts {
        write_text(&store, t, level, &copts)?;
    }
    Ok(Written {
        arrays: model.arrays.iter().map(WrittenArray::of).collect(),
        reused_chunks: reused,
        warnings,
    })
}

/// The Zarr v3 target of the engine's driver registry.
pub struct ZarrExporter;

impl tet_source::export::Exporter for ZarrExporter {
    fn name(&self) -> &'static str {
        "zarr"
    }
    fn extensions(&self) -> &'static [&'static str] {
        &["zarr"]
    }
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }
    fn write(
        &self,
        model: &Model,
        chunks: &mut dyn ChunkSource,
        out: Output<'_>,
        compression: Compression,
    ) -> Result<Written> {
        write(model, chunks, out, compression)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_as_json() {
        assert_eq!(attr_json(&AttrValue::F32(vec![0.1])), json!(0.1));
        assert_eq!(
            attr_json(&AttrValue::F64(vec![f64::NAN, 1.0])),
            json!(["NaN", 1.0])
        );
        assert_eq!(attr_json(&AttrValue::I16(vec![-3])), json!(-3));
        assert_eq!(
            attr_json(&AttrValue::TextList(vec!["a".into()])),
            json!(["a"])
        );
    }

    #[test]
    fn fill_values_as_xarray_reads_them() {
        let one = |e: ElementType, v: AttrValue| {
            let mut w = Vec::new();
            let m = array_attrs_json("x", e, &vec![(FILL_VALUE.to_string(), v)], &mut w);
            (m.get(FILL_VALUE).cloned(), w.len())
        };
        // base64 of the little-endian f64 bytes (what `struct.pack("<d", x)` gives).
        assert_eq!(
            one(ElementType::F32, AttrValue::F32(vec![f32::NAN])),
            (Some(json!("AAAAAAAA+H8=")), 0)
        );
        assert_eq!(
            one(ElementType::F64, AttrValue::F64(vec![f64::INFINITY])),
            (Some(json!("AAAAAAAA8H8=")), 0)
        );
        assert_eq!(
            one(ElementType::F64, AttrValue::F64(vec![f64::NEG_INFINITY])),
            (Some(json!("AAAAAAAA8P8=")), 0)
        );
        assert_eq!(
            one(ElementType::F32, AttrValue::F32(vec![9.96921e36])),
            (
                Some(json!(
                    BASE64_STANDARD.encode(f64::from(9.96921e36f32).to_le_bytes())
                )),
                0
            )
        );
        assert_eq!(
            one(ElementType::I16, AttrValue::I16(vec![-999])),
            (Some(json!(-999)), 0)
        );
        assert_eq!(
            one(ElementType::Bool, AttrValue::U8(vec![1])),
            (Some(json!(true)), 0)
        );
        assert_eq!(one(ElementType::C64, AttrValue::F32(vec![0.0])), (None, 1));
        // Several values, or text: left as written.
        assert_eq!(
            one(ElementType::F64, AttrValue::F64(vec![1.0, 2.0])),
            (Some(json!([1.0, 2.0])), 0)
        );
    }

    #[test]
    fn node_names_are_checked() {
        assert!(check_names(&["a/b", "c"]).is_ok());
        for bad in ["a//b", "..", "a/__x", "a\\b", ""] {
            assert!(check_names(&[bad]).is_err(), "{bad}");
        }
    }
}
