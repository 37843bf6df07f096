//! Zarr v3 export: a directory store with one group per `/` level, one array per planned array.
//!
//! Each array's chunk grid is the `.tet` chunk shape, its chunk keys the default encoding
//! (`c/i/j/…`, `c` for a 0-d array), its codecs `bytes` (little-endian) then `zstd` (or `bytes`
//! alone with `--compress none`). When a `.tet` chunk is already a zstd frame of exactly the
//! bytes Zarr stores (a full, interior chunk whose values need no restoring), the frame is copied
//! verbatim: Zarr's zstd codec stores one standard frame per chunk, and any level decodes the
//! same way. A copied frame is not decoded (only its declared content size is checked), so a
//! damaged frame would be copied as it is: `tet verify --deep` checks every frame. Edge chunks
//! are padded to the full chunk shape with the fill value (0) and re-encoded, as Zarr chunks
//! always have the full shape. Attributes are JSON (typed values
//! become numbers, lists or strings; non-finite floats the strings `NaN`, `Infinity`,
//! `-Infinity`, as in Zarr fill values), `dimension_names` come from the `.tet` dims, global
//! attributes go to the root group (a global attribute named `group/name`, as the NetCDF importer
//! records group attributes, to that group). Metadata JSON has sorted keys, so the same `.tet`
//! file always gives the same bytes. String variables (`tet_ext.text_variables`) become `string`
//! arrays (zarr-python 3's type) of one chunk with the `vlen-utf8` codec.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{json, Map, Value};
use tet_source::{AttrValue, Attrs};

use super::{
    commit, for_each_run, grid_coords, io_err, parent_dir, split_group, ChunkSource, Compression,
    Elem, ExportError, Plan, Restore, Result,
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

fn write_json(path: &Path, v: &Value) -> Result<()> {
    let mut text = serde_json::to_string_pretty(&canonical(v))
        .map_err(|e| ExportError::Target(format!("{}: {e}", path.display())))?;
    text.push('\n');
    std::fs::write(path, text).map_err(io_err(path))
}

/// A string variable of the footer (`tet_ext.text_variables`).
struct TextArray {
    name: String,
    shape: Vec<u64>,
    dims: Option<Vec<String>>,
    values: Vec<String>,
    attrs: Attrs,
}

/// The footer entry as a [`TextArray`]; `None` when malformed (it is then left out, as it
/// would be by any reader of the footer).
fn text_array(t: &Value) -> Option<TextArray> {
    let name = t.get("name")?.as_str()?.to_string();
    let shape: Vec<u64> = t
        .get("shape")?
        .as_array()?
        .iter()
        .map(Value::as_u64)
        .collect::<Option<_>>()?;
    let values: Vec<String> = t
        .get("values")?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect::<Option<_>>()?;
    let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
    if n != values.len() as u64 {
        return None;
    }
    let dims = t
        .get("dims")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .map(|d| d.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
        })
        .filter(|d| d.len() == shape.len() && !d.is_empty());
    let attrs = t
        .get("attrs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    let p = p.as_array()?;
                    Some((
                        p.first()?.as_str()?.to_string(),
                        crate::format::footer::attr_from_json(p.get(1)?)?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Some(TextArray {
        name,
        shape,
        dims,
        values,
        attrs,
    })
}

/// Writes a string variable as a Zarr v3 `string` array in one chunk, encoded with the
/// `vlen-utf8` codec (item count, then each item's byte length and UTF-8 bytes, all lengths u32
/// little-endian).
fn write_text(
    root: &Path,
    t: &TextArray,
    level: Option<i32>,
    zctx: &mut zstd::bulk::Compressor,
) -> Result<()> {
    let dir = root.join(&t.name);
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let mut codecs = vec![json!({"name": "vlen-utf8", "configuration": {}})];
    if let Some(l) = level {
        codecs.push(json!({"name": "zstd", "configuration": {"level": l, "checksum": false}}));
    }
    let chunk: Vec<u64> = t.shape.iter().map(|&d| d.max(1)).collect();
    let mut meta = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": t.shape,
        "data_type": "string",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunk}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": "",
        "codecs": codecs,
        "attributes": attrs_json(&t.attrs),
    });
    if let Some(d) = &t.dims {
        meta["dimension_names"] = json!(d);
    }
    write_json(&dir.join("zarr.json"), &meta)?;
    if t.values.is_empty() {
        return Ok(());
    }
    let too_long = || ExportError::Invalid(format!("string variable `{}` is too large", t.name));
    let mut bytes = Vec::new();
    bytes.extend_from_slice(
        &u32::try_from(t.values.len())
            .map_err(|_| too_long())?
            .to_le_bytes(),
    );
    for v in &t.values {
        bytes.extend_from_slice(
            &u32::try_from(v.len())
                .map_err(|_| too_long())?
                .to_le_bytes(),
        );
        bytes.extend_from_slice(v.as_bytes());
    }
    let mut key = dir.join("c");
    if !t.shape.is_empty() {
        std::fs::create_dir_all(&key).map_err(io_err(&key))?;
        for _ in &t.shape {
            key.push("0");
        }
        if let Some(p) = key.parent() {
            std::fs::create_dir_all(p).map_err(io_err(p))?;
        }
    }
    let data = match level {
        Some(_) => zctx
            .compress(&bytes)
            .map_err(|e| ExportError::Target(format!("zstd: {e}")))?,
        None => bytes,
    };
    std::fs::write(&key, data).map_err(io_err(&key))
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
    let texts: Vec<TextArray> = plan.text_variables.iter().filter_map(text_array).collect();
    // Names come from the file: each must stay a path below the store.
    let names: Vec<&str> = plan
        .arrays
        .iter()
        .map(|a| a.name.as_str())
        .chain(texts.iter().map(|t| t.name.as_str()))
        .collect();
    for name in &names {
        if name
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == ".." || c.contains('\\'))
        {
            return Err(ExportError::Invalid(format!(
                "dataset name `{name}` is not a Zarr node path (empty, `.` or `..` part, or `\\`)"
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
    for (g, attrs) in &groups {
        if array_names.contains(g.as_str()) {
            return Err(ExportError::Invalid(format!(
                "`{g}` is both an array and a group"
            )));
        }
        let dir = root.join(g);
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        write_json(
            &dir.join("zarr.json"),
            &json!({"zarr_format": 3, "node_type": "group", "attributes": attrs}),
        )?;
    }
    let mut src = ChunkSource::new(tet);
    let mut reused = 0;
    let mut padded = Vec::new();
    let mut zctx = zstd::bulk::Compressor::new(level.unwrap_or(3))
        .map_err(|e| ExportError::Target(format!("zstd: {e}")))?;
    for a in &plan.arrays {
        let dir = root.join(&a.name);
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
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
        let mut codecs = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
        if let Some(l) = level {
            codecs.push(json!({"name": "zstd", "configuration": {"level": l, "checksum": false}}));
        }
        let mut meta = json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": a.shape,
            "data_type": data_type(a.elem),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunk_shape}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill_value(a.elem),
            "codecs": codecs,
            "attributes": attrs_json(&a.attrs),
        });
        if let Some(d) = &a.dims {
            meta["dimension_names"] = json!(d);
        }
        write_json(&dir.join("zarr.json"), &meta)?;
        let full = grid_chunk
            .iter()
            .try_fold(a.elem.size() as u64, |acc, &c| acc.checked_mul(c))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| ExportError::Invalid(format!("`{}`: chunk too large", a.name)))?;
        for coords in grid_coords(tet, a.ds) {
            let key = if scalar {
                dir.join("c")
            } else {
                let mut p = dir.join("c");
                for c in &coords {
                    p.push(c.to_string());
                }
                p
            };
            if let Some(parent) = key.parent() {
                std::fs::create_dir_all(parent).map_err(io_err(parent))?;
            }
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
                            std::fs::write(&key, frame).map_err(io_err(&key))?;
                            tet.release(e.payload_offset, e.stored_byte_len);
                            reused += 1;
                            continue;
                        }
                    }
                }
            }
            let c = src.chunk(a, &coords)?;
            let bytes: &[u8] = if interior {
                c.bytes
            } else {
                padded.clear();
                padded.resize(full, 0);
                let block = c.bytes;
                for_each_run(
                    &grid_chunk,
                    &vec![0; c.count.len()],
                    &c.count,
                    a.elem.size(),
                    |dst, s, len| {
                        let (d, s, l) = (dst as usize, s as usize, len as usize);
                        padded[d..d + l].copy_from_slice(&block[s..s + l]);
                        Ok(())
                    },
                )?;
                &padded
            };
            if level.is_some() {
                let z = zctx
                    .compress(bytes)
                    .map_err(|e| ExportError::Target(format!("zstd: {e}")))?;
                std::fs::write(&key, z).map_err(io_err(&key))?;
            } else {
                std::fs::write(&key, bytes).map_err(io_err(&key))?;
            }
        }
    }
    for t in &texts {
        write_text(&root, t, level, &mut zctx)?;
    }
    commit(&root, output)?;
    Ok(reused)
}
