//! The `THST` footer: history rows and metadata, as a lossless in-memory model and as the JSON
//! the reference reader accepts.
//!
//! The reference-compatible keys (`metadata.file`, `metadata.datasets[name].{attrs, dim_names,
//! coords}`) only ever hold what the reference reader's limits allow (see [`limits`]). Everything
//! else (typed attribute values, strings that are empty or too long, more than 64 attributes or
//! labels, more than 256 dataset entries, global attributes, skipped items, notes) is kept under
//! the extension key [`EXT_KEY`] in `metadata` and in each dataset entry, which the reference
//! reader ignores. A history row has no room for extension keys and holds at most 16 parents
//! and 32 params there: a row with more (a `--concat` of a month of daily files) keeps what fits
//! plus the marker param [`HISTORY_MARKER`], and its complete lists go to
//! `metadata.tet_ext.history` ([`RowExt`]); the decoder puts them back, so the model always has
//! the whole row. `docs/FORMAT.md` documents the schema.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tet_source::{AttrValue, Attrs, Skipped};

/// The extension key, in `metadata` and in each `metadata.datasets` entry.
pub const EXT_KEY: &str = "tet_ext";
/// Version of the extension schema.
pub const EXT_VERSION: u64 = 1;

/// The limits the reference reader enforces.
pub mod limits {
    pub const ATTRS_PER_DATASET: usize = 64;
    pub const MAX_STRING: usize = 1024;
    pub const LABELS_PER_AXIS: usize = 64;
    pub const DATASET_ENTRIES: usize = 256;
    pub const HISTORY_ROWS: usize = 4096;
    pub const PARENTS_PER_ROW: usize = 16;
    pub const PARAMS_PER_ROW: usize = 32;
    /// Inline metadata budget: above this the metadata JSON is spilled.
    pub const INLINE_JSON: usize = 64 * 1024;
}

/// The key of the history extension inside `metadata.tet_ext`: a list of [`RowExt`].
pub const HISTORY_EXT_KEY: &str = "history";
/// The param a history row carries in its reference form when its complete `parents` and
/// `params` are in the history extension; its value says how many there are and where.
pub const HISTORY_MARKER: &str = "tet_ext";

/// The complete parents and params of one history row that exceeds the reference limits (more
/// than 16 parents or 32 params, or a param outside 1..=1024 bytes). The row itself keeps its
/// first parents and the params that fit, with [`HISTORY_MARKER`]; `parents` here starts with
/// the row's and `params` holds every one of the row's except the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowExt {
    /// Index of the row in `history`.
    pub row: usize,
    pub parents: Vec<String>,
    pub params: BTreeMap<String, String>,
}

/// Whether a string fits the reference limit (1..=1024 bytes).
pub fn fits(s: &str) -> bool {
    !s.is_empty() && s.len() <= limits::MAX_STRING
}

/// One provenance row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistoryRow {
    pub op: String,
    pub source: String,
    /// Decimal Unix seconds.
    pub at: String,
    pub parents: Vec<String>,
    pub params: BTreeMap<String, String>,
}

/// Metadata of one dataset.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DatasetMeta {
    /// One name per axis.
    pub dim_names: Option<Vec<String>>,
    /// Per axis name: one label per position.
    pub coords: BTreeMap<String, Vec<String>>,
    /// Typed attributes in source order.
    pub attrs: Attrs,
    /// Other extension facts (source dtype, notes, aliases…), kept as JSON.
    pub extra: Map<String, Value>,
}

impl DatasetMeta {
    pub fn is_empty(&self) -> bool {
        self.dim_names.is_none()
            && self.coords.is_empty()
            && self.attrs.is_empty()
            && self.extra.is_empty()
    }
}

/// The whole footer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Footer {
    pub history: Vec<HistoryRow>,
    /// `metadata.file`: tool, library_version, created_at, …
    pub file: BTreeMap<String, String>,
    /// Global (file-level) attributes.
    pub global_attrs: Attrs,
    /// Per dataset name.
    pub datasets: BTreeMap<String, DatasetMeta>,
    /// Source items that have no `.tet` form.
    pub skipped: Vec<Skipped>,
    /// Other file-level extension facts.
    pub extra: Map<String, Value>,
}

// ---------------------------------------------------------------------------------------------
// Typed attribute values <-> JSON

fn float_json(v: f64) -> Value {
    tet_source::json_text::float_value(v)
}

/// f32 as the f64 nearest to its shortest decimal form, so the JSON shows `0.1`, not
/// `0.10000000149011612`, and still reads back to the same f32.
fn f32_json(v: f32) -> Value {
    if !v.is_finite() {
        return float_json(v as f64);
    }
    float_json(v.to_string().parse::<f64>().unwrap_or(v as f64))
}

fn json_float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => tet_source::json_text::parse_non_finite(s),
        _ => None,
    }
}

/// `{"<type>": value(s)}` — the typed, lossless JSON form of an attribute value.
pub fn attr_to_json(v: &AttrValue) -> Value {
    fn ints<T: Copy + Into<Value>>(t: &str, xs: &[T]) -> Value {
        json!({ t: xs.iter().map(|&x| x.into()).collect::<Vec<Value>>() })
    }
    match v {
        AttrValue::Text(s) => json!({ "text": s }),
        AttrValue::TextList(s) => json!({ "text_list": s }),
        AttrValue::I8(x) => ints("i8", x),
        AttrValue::U8(x) => ints("u8", x),
        AttrValue::I16(x) => ints("i16", x),
        AttrValue::U16(x) => ints("u16", x),
        AttrValue::I32(x) => ints("i32", x),
        AttrValue::U32(x) => ints("u32", x),
        AttrValue::I64(x) => ints("i64", x),
        AttrValue::U64(x) => ints("u64", x),
        AttrValue::F32(x) => json!({ "f32": x.iter().map(|&v| f32_json(v)).collect::<Vec<_>>() }),
        AttrValue::F64(x) => json!({ "f64": x.iter().map(|&v| float_json(v)).collect::<Vec<_>>() }),
    }
}

/// Inverse of [`attr_to_json`]; `None` for anything malformed.
pub fn attr_from_json(v: &Value) -> Option<AttrValue> {
    let obj = v.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    let (t, val) = obj.iter().next()?;
    fn list<T>(val: &Value, f: impl Fn(&Value) -> Option<T>) -> Option<Vec<T>> {
        val.as_array()?.iter().map(f).collect()
    }
    fn int<T: TryFrom<i64>>(v: &Value) -> Option<T> {
        T::try_from(v.as_i64()?).ok()
    }
    Some(match t.as_str() {
        "text" => AttrValue::Text(val.as_str()?.to_string()),
        "text_list" => AttrValue::TextList(list(val, |x| x.as_str().map(str::to_string))?),
        "i8" => AttrValue::I8(list(val, int)?),
        "u8" => AttrValue::U8(list(val, int)?),
        "i16" => AttrValue::I16(list(val, int)?),
        "u16" => AttrValue::U16(list(val, int)?),
        "i32" => AttrValue::I32(list(val, int)?),
        "u32" => AttrValue::U32(list(val, int)?),
        "i64" => AttrValue::I64(list(val, |x| x.as_i64())?),
        "u64" => AttrValue::U64(list(val, |x| x.as_u64())?),
        "f32" => AttrValue::F32(list(val, |x| json_float(x).map(|f| f as f32))?),
        "f64" => AttrValue::F64(list(val, json_float)?),
        _ => return None,
    })
}

fn float_text(v: f64) -> String {
    tet_source::json_text::float_label(v)
}

/// The plain-string view of an attribute value, as the reference's `attrs` hold it: a single
/// value as itself (`-9999`, `0.1`, `K`), several joined with `", "`.
pub fn attr_to_text(v: &AttrValue) -> String {
    fn join<T: ToString>(xs: &[T]) -> String {
        xs.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
    }
    match v {
        AttrValue::Text(s) => s.clone(),
        AttrValue::TextList(s) => s.join(", "),
        AttrValue::I8(x) => join(x),
        AttrValue::U8(x) => join(x),
        AttrValue::I16(x) => join(x),
        AttrValue::U16(x) => join(x),
        AttrValue::I32(x) => join(x),
        AttrValue::U32(x) => join(x),
        AttrValue::I64(x) => join(x),
        AttrValue::U64(x) => join(x),
        AttrValue::F32(x) => x
            .iter()
            .map(|&v| {
                if v.is_finite() {
                    v.to_string()
                } else {
                    float_text(v as f64)
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        AttrValue::F64(x) => x
            .iter()
            .map(|&v| float_text(v))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// A typed attribute list as JSON: `[[name, {"<type>": value}], …]`.
pub fn attrs_to_json(attrs: &[(String, AttrValue)]) -> Value {
    Value::Array(
        attrs
            .iter()
            .map(|(k, v)| json!([k, attr_to_json(v)]))
            .collect(),
    )
}

fn attrs_from_json(v: &Value) -> Option<Attrs> {
    v.as_array()?
        .iter()
        .map(|pair| {
            let p = pair.as_array()?;
            if p.len() != 2 {
                return None;
            }
            Some((p[0].as_str()?.to_string(), attr_from_json(&p[1])?))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// The footer as JSON: the history array and the metadata object (inline or to be spilled).
#[derive(Debug, Clone)]
pub struct EncodedFooter {
    pub history: Value,
    pub metadata: Value,
}

pub use tet_source::json_text::canonical;

impl EncodedFooter {
    /// The footer JSON text with metadata inline.
    pub fn inline_json(&self) -> String {
        canonical(&json!({"history": self.history, "metadata": self.metadata})).to_string()
    }

    /// The footer JSON text pointing at a metadata spill at `offset` of `len` bytes.
    pub fn spilled_json(&self, offset: u64, len: u64) -> String {
        canonical(&json!({"history": self.history, "metadata_ref": {"offset": offset, "len": len}}))
            .to_string()
    }

    /// The metadata JSON text, for a spill.
    pub fn metadata_json(&self) -> String {
        canonical(&self.metadata).to_string()
    }
}

/// A per-input param key (`input.1`, `input_bytes.3`, …): a name, a dot and a decimal index.
fn indexed_key(k: &str) -> Option<(&str, u64)> {
    let (name, n) = k.rsplit_once('.')?;
    Some((name, n.parse().ok()?))
}

/// The reference form of a row's parents and params, and whether it left anything out: the
/// parents up to the 16th (or the first that does not fit), and the params that fit — when they
/// are more than 32, the run-wide ones first, then the per-input ones in input order, 31 in all
/// beside the marker.
fn reference_lists(r: &HistoryRow) -> (&[String], BTreeMap<String, String>, bool) {
    let kept = r
        .parents
        .iter()
        .take(limits::PARENTS_PER_ROW)
        .take_while(|p| fits(p))
        .count();
    let parents = &r.parents[..kept];
    let all_fit = r.params.iter().all(|(k, v)| fits(k) && fits(v));
    if kept == r.parents.len() && all_fit && r.params.len() <= limits::PARAMS_PER_ROW {
        return (parents, r.params.clone(), false);
    }
    let fitting = r
        .params
        .iter()
        .filter(|(k, v)| fits(k) && fits(v) && k.as_str() != HISTORY_MARKER);
    let (mut per_input, run): (Vec<_>, Vec<_>) =
        fitting.partition(|(k, _)| indexed_key(k).is_some());
    per_input.sort_by_key(|(k, _)| indexed_key(k).map(|(name, n)| (n, name)));
    let mut params: BTreeMap<String, String> = run
        .into_iter()
        .chain(per_input)
        .take(limits::PARAMS_PER_ROW - 1)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    params.insert(
        HISTORY_MARKER.into(),
        format!(
            "metadata.{EXT_KEY}.{HISTORY_EXT_KEY} holds all {} parents and {} params",
            r.parents.len(),
            r.params.len()
        ),
    );
    (parents, params, true)
}

/// The history array in the reference's form, and the complete lists of the rows it shortened.
fn encode_history(rows: &[HistoryRow]) -> Result<(Value, Vec<RowExt>), String> {
    if rows.len() > limits::HISTORY_ROWS {
        return Err(format!(
            "{} history rows exceed the limit of {}",
            rows.len(),
            limits::HISTORY_ROWS
        ));
    }
    let mut out = Vec::with_capacity(rows.len());
    let mut ext = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        for (what, s) in [("op", &r.op), ("source", &r.source), ("at", &r.at)] {
            if !fits(s) {
                return Err(format!("history row {i}: `{what}` must be 1..=1024 bytes"));
            }
        }
        let (parents, params, shortened) = reference_lists(r);
        if shortened {
            ext.push(RowExt {
                row: i,
                parents: r.parents.clone(),
                params: r.params.clone(),
            });
        }
        let mut row = Map::new();
        row.insert("op".into(), r.op.clone().into());
        row.insert("source".into(), r.source.clone().into());
        row.insert("at".into(), r.at.clone().into());
        if !parents.is_empty() {
            row.insert("parents".into(), json!(parents));
        }
        if !params.is_empty() {
            row.insert("params".into(), json!(params));
        }
        out.push(Value::Object(row));
    }
    Ok((Value::Array(out), ext))
}

/// Puts the complete lists of `metadata.tet_ext.history` back into the rows they belong to: a
/// row that carries the marker and whose parents and params agree with the entry (a tool that
/// rewrote the history without knowing the extension leaves rows that do not; they stay as
/// written). Malformed entries are ignored, as the reference reader ignores the key.
fn restore_history(rows: &mut [HistoryRow], v: &Value) {
    let Ok(entries) = Vec::<RowExt>::deserialize(v) else {
        return;
    };
    for e in entries {
        let Some(r) = rows.get_mut(e.row) else {
            continue;
        };
        let agrees = r.params.contains_key(HISTORY_MARKER)
            && e.parents.starts_with(&r.parents)
            && r.params
                .iter()
                .all(|(k, v)| k == HISTORY_MARKER || e.params.get(k) == Some(v));
        if agrees {
            r.parents = e.parents;
            r.params = e.params;
        }
    }
}

/// Splits one dataset's metadata into the reference-compatible entry and its extension object.
fn encode_dataset(meta: &DatasetMeta) -> (Map<String, Value>, Map<String, Value>) {
    let mut entry = Map::new();
    let mut ext = meta.extra.clone();

    // attrs: the reference gets the string view of those that fit; the typed list is always
    // kept in the extension so types survive.
    let mut plain = Map::new();
    let mut left_out = Vec::new();
    for (k, v) in &meta.attrs {
        let text = attr_to_text(v);
        if plain.len() < limits::ATTRS_PER_DATASET
            && fits(k)
            && fits(&text)
            && !plain.contains_key(k)
        {
            plain.insert(k.clone(), Value::String(text));
        } else {
            left_out.push(Value::String(k.clone()));
        }
    }
    if !plain.is_empty() {
        entry.insert("attrs".into(), Value::Object(plain));
    }
    if !meta.attrs.is_empty() {
        ext.insert("attrs".into(), attrs_to_json(&meta.attrs));
    }
    if !left_out.is_empty() {
        ext.insert("attrs_not_in_reference".into(), Value::Array(left_out));
    }

    if let Some(dims) = &meta.dim_names {
        if dims.iter().all(|d| fits(d)) {
            entry.insert("dim_names".into(), json!(dims));
        } else {
            ext.insert("dim_names".into(), json!(dims));
        }
    }

    let mut coords = Map::new();
    let mut ext_coords = Map::new();
    for (axis, labels) in &meta.coords {
        let ok =
            fits(axis) && labels.len() <= limits::LABELS_PER_AXIS && labels.iter().all(|l| fits(l));
        let target = if ok { &mut coords } else { &mut ext_coords };
        target.insert(axis.clone(), json!({ "labels": labels }));
    }
    if !coords.is_empty() {
        entry.insert("coords".into(), Value::Object(coords));
    }
    if !ext_coords.is_empty() {
        ext.insert("coords".into(), Value::Object(ext_coords));
    }
    (entry, ext)
}

impl Footer {
    /// Encodes the footer. Fails only on more than 4096 history rows or a row whose `op`,
    /// `source` or `at` is outside 1..=1024 bytes (parents and params that do not fit a row go
    /// to the history extension).
    pub fn encode(&self) -> Result<EncodedFooter, String> {
        let (history, history_ext) = encode_history(&self.history)?;

        let mut metadata = Map::new();
        let file: Map<String, Value> = self
            .file
            .iter()
            .filter(|(k, v)| fits(k) && fits(v))
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let mut ext = self.extra.clone();
        let file_overflow: Map<String, Value> = self
            .file
            .iter()
            .filter(|(k, v)| !(fits(k) && fits(v)))
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        if !file_overflow.is_empty() {
            ext.insert("file".into(), Value::Object(file_overflow));
        }
        metadata.insert("file".into(), Value::Object(file));

        let mut datasets = Map::new();
        let mut ext_datasets = Map::new();
        for (name, meta) in &self.datasets {
            if meta.is_empty() {
                continue;
            }
            let (mut entry, dext) = encode_dataset(meta);
            if datasets.len() < limits::DATASET_ENTRIES && fits(name) {
                if !dext.is_empty() {
                    entry.insert(EXT_KEY.into(), Value::Object(dext));
                }
                datasets.insert(name.clone(), Value::Object(entry));
            } else {
                // Past the reference's entry limit: keep everything in the extension.
                let mut all = entry;
                if !dext.is_empty() {
                    all.insert(EXT_KEY.into(), Value::Object(dext));
                }
                ext_datasets.insert(name.clone(), Value::Object(all));
            }
        }
        metadata.insert("datasets".into(), Value::Object(datasets));
        if !ext_datasets.is_empty() {
            ext.insert("datasets".into(), Value::Object(ext_datasets));
        }
        if !self.global_attrs.is_empty() {
            ext.insert("global_attrs".into(), attrs_to_json(&self.global_attrs));
        }
        if history_ext.is_empty() {
            ext.remove(HISTORY_EXT_KEY);
        } else {
            ext.insert(HISTORY_EXT_KEY.into(), json!(history_ext));
        }
        if !self.skipped.is_empty() {
            ext.insert(
                "skipped".into(),
                Value::Array(
                    self.skipped
                        .iter()
                        .map(|s| json!({"name": s.name, "reason": s.reason}))
                        .collect(),
                ),
            );
        }
        if !ext.is_empty() {
            ext.insert("version".into(), EXT_VERSION.into());
            metadata.insert(EXT_KEY.into(), Value::Object(ext));
        }
        Ok(EncodedFooter {
            history,
            metadata: Value::Object(metadata),
        })
    }

    // -----------------------------------------------------------------------------------------
    // Decoding (lenient: `verify` reports rule breaks, the reader keeps what it can)

    /// Parses the history array. Rows are objects with string `op`, `source`, `at` (optional
    /// `parents` and `params`), or the compact legacy form `["op", "source", "at"]`, which the
    /// format allows and which reads as the object form without parents or params (and is
    /// written back in the object form).
    pub fn decode_history(v: &Value) -> Result<Vec<HistoryRow>, String> {
        let rows = v.as_array().ok_or("`history` is not an array")?;
        rows.iter()
            .enumerate()
            .map(|(i, r)| {
                if let Some(a) = r.as_array() {
                    let s = |k: usize| a.get(k).and_then(Value::as_str).map(str::to_string);
                    return match (a.len(), s(0), s(1), s(2)) {
                        (3, Some(op), Some(source), Some(at)) => Ok(HistoryRow {
                            op,
                            source,
                            at,
                            ..HistoryRow::default()
                        }),
                        _ => Err(format!(
                            "history row {i}: a legacy row must be [\"op\", \"source\", \"at\"]"
                        )),
                    };
                }
                let o = r.as_object().ok_or_else(|| {
                    format!("history row {i} is neither an object nor a legacy row")
                })?;
                let s = |k: &str| -> Result<String, String> {
                    o.get(k)
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .ok_or_else(|| format!("history row {i}: `{k}` missing or not a string"))
                };
                let parents = match o.get("parents") {
                    None => Vec::new(),
                    Some(p) => p
                        .as_array()
                        .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect())
                        .ok_or_else(|| {
                            format!("history row {i}: `parents` is not a string list")
                        })?,
                };
                let params = match o.get("params") {
                    None => BTreeMap::new(),
                    Some(p) => p
                        .as_object()
                        .and_then(|m| {
                            m.iter()
                                .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                                .collect()
                        })
                        .ok_or_else(|| format!("history row {i}: `params` is not a string map"))?,
                };
                Ok(HistoryRow {
                    op: s("op")?,
                    source: s("source")?,
                    at: s("at")?,
                    parents,
                    params,
                })
            })
            .collect()
    }

    /// Builds the model from the history rows and the metadata object.
    pub fn decode(history: Vec<HistoryRow>, metadata: Option<&Value>) -> Result<Footer, String> {
        let mut footer = Footer {
            history,
            ..Footer::default()
        };
        let Some(metadata) = metadata else {
            return Ok(footer);
        };
        let md = metadata.as_object().ok_or("`metadata` is not an object")?;
        if let Some(file) = md.get("file").and_then(Value::as_object) {
            for (k, v) in file {
                let text = v
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string());
                footer.file.insert(k.clone(), text);
            }
        }
        let empty = Map::new();
        let ext = md.get(EXT_KEY).and_then(Value::as_object).unwrap_or(&empty);
        if let Some(ds) = md.get("datasets") {
            let ds = ds
                .as_object()
                .ok_or("`metadata.datasets` is not an object")?;
            for (name, entry) in ds {
                footer.datasets.insert(name.clone(), decode_dataset(entry)?);
            }
        }
        for (k, v) in ext {
            match k.as_str() {
                // Checksums describe this file's bytes: the reader checks them, a conversion
                // writes its own.
                "version" | super::integrity::CHUNK_DIGESTS_KEY => {}
                "file" => {
                    if let Some(o) = v.as_object() {
                        for (fk, fv) in o {
                            if let Some(s) = fv.as_str() {
                                footer.file.insert(fk.clone(), s.to_string());
                            }
                        }
                    }
                }
                "datasets" => {
                    if let Some(o) = v.as_object() {
                        for (name, entry) in o {
                            footer.datasets.insert(name.clone(), decode_dataset(entry)?);
                        }
                    }
                }
                HISTORY_EXT_KEY => restore_history(&mut footer.history, v),
                "global_attrs" => {
                    footer.global_attrs = attrs_from_json(v)
                        .ok_or("`tet_ext.global_attrs` is not a typed attribute list")?;
                }
                "skipped" => {
                    footer.skipped = v
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|s| {
                            Some(Skipped {
                                name: s.get("name")?.as_str()?.to_string(),
                                reason: s.get("reason")?.as_str()?.to_string(),
                            })
                        })
                        .collect();
                }
                _ => {
                    footer.extra.insert(k.clone(), v.clone());
                }
            }
        }
        Ok(footer)
    }
}

fn string_list(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_str().map(str::to_string))
        .collect()
}

fn decode_coords(v: &Value, into: &mut BTreeMap<String, Vec<String>>) -> Result<(), String> {
    let o = v.as_object().ok_or("`coords` is not an object")?;
    for (axis, c) in o {
        let labels = c
            .get("labels")
            .and_then(string_list)
            .ok_or_else(|| format!("coords `{axis}`: `labels` is not a string list"))?;
        into.insert(axis.clone(), labels);
    }
    Ok(())
}

fn decode_dataset(entry: &Value) -> Result<DatasetMeta, String> {
    let o = entry.as_object().ok_or("dataset entry is not an object")?;
    let mut meta = DatasetMeta::default();
    if let Some(d) = o.get("dim_names") {
        meta.dim_names = Some(string_list(d).ok_or("`dim_names` is not a string list")?);
    }
    if let Some(c) = o.get("coords") {
        decode_coords(c, &mut meta.coords)?;
    }
    if let Some(a) = o.get("attrs") {
        let a = a.as_object().ok_or("`attrs` is not an object")?;
        for (k, v) in a {
            let text = v
                .as_str()
                .ok_or_else(|| format!("attr `{k}` is not a string"))?;
            meta.attrs
                .push((k.clone(), AttrValue::Text(text.to_string())));
        }
    }
    if let Some(ext) = o.get(EXT_KEY).and_then(Value::as_object) {
        for (k, v) in ext {
            match k.as_str() {
                "attrs" => {
                    meta.attrs = attrs_from_json(v)
                        .ok_or("`tet_ext.attrs` is not a typed attribute list")?;
                }
                "attrs_not_in_reference" => {}
                "dim_names" => {
                    meta.dim_names =
                        Some(string_list(v).ok_or("`tet_ext.dim_names` is not a string list")?);
                }
                "coords" => decode_coords(v, &mut meta.coords)?,
                _ => {
                    meta.extra.insert(k.clone(), v.clone());
                }
            }
        }
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Footer {
        let mut f = Footer::default();
        f.history.push(HistoryRow {
            op: "convert".into(),
            source: "nc".into(),
            at: "1700000000".into(),
            parents: vec!["sha256:00".into()],
            params: [("codec".to_string(), "zstd:3".to_string())].into(),
        });
        f.file.insert("tool".into(), "tet-convert".into());
        f.global_attrs
            .push(("title".into(), AttrValue::Text("T".into())));
        f.global_attrs
            .push(("ints".into(), AttrValue::I16(vec![-1, 2, 3])));
        let mut d = DatasetMeta {
            dim_names: Some(vec!["time".into(), "x".into()]),
            ..Default::default()
        };
        d.coords.insert("x".into(), vec!["a".into(), "b".into()]);
        d.coords
            .insert("time".into(), (0..100).map(|i| i.to_string()).collect());
        d.attrs.push(("units".into(), AttrValue::Text("K".into())));
        d.attrs.push((
            "scale".into(),
            AttrValue::F32(vec![0.1, f32::NAN, f32::NEG_INFINITY]),
        ));
        d.attrs
            .push(("empty".into(), AttrValue::Text(String::new())));
        d.attrs
            .push(("long".into(), AttrValue::Text("x".repeat(2000))));
        d.attrs.push(("big".into(), AttrValue::U64(vec![u64::MAX])));
        for i in 0..70 {
            d.attrs.push((format!("a{i:02}"), AttrValue::I32(vec![i])));
        }
        f.datasets.insert("temp".into(), d);
        f.skipped.push(Skipped {
            name: "names".into(),
            reason: "strings".into(),
        });
        f
    }

    #[test]
    fn round_trip_is_lossless_and_reference_view_is_within_limits() {
        let f = sample();
        let enc = f.encode().unwrap();
        let md = &enc.metadata;
        let entry = &md["datasets"]["temp"];
        let attrs = entry["attrs"].as_object().unwrap();
        assert_eq!(attrs.len(), 64);
        assert_eq!(attrs["units"], "K");
        assert_eq!(attrs["scale"], "0.1, NaN, -Infinity");
        assert!(!attrs.contains_key("empty") && !attrs.contains_key("long"));
        assert_eq!(entry["coords"]["x"]["labels"], json!(["a", "b"]));
        assert!(entry["coords"].get("time").is_none());
        assert_eq!(entry[EXT_KEY]["coords"]["time"]["labels"][99], "99");

        // Read it back through the text form.
        let text = enc.inline_json();
        let v: Value = serde_json::from_str(&text).unwrap();
        let hist = Footer::decode_history(&v["history"]).unwrap();
        let back = Footer::decode(hist, Some(&v["metadata"])).unwrap();
        // NaN != NaN: compare the text form instead.
        assert_eq!(format!("{back:?}"), format!("{f:?}"));
    }

    #[test]
    fn canonical_sorts_keys_at_every_depth() {
        let v = json!({"b": {"z": 1, "a": [{"y": 0, "x": 0}]}, "a": 0});
        assert_eq!(
            canonical(&v).to_string(),
            r#"{"a":0,"b":{"a":[{"x":0,"y":0}],"z":1}}"#
        );
    }

    #[test]
    fn f32_attrs_print_short() {
        assert_eq!(
            attr_to_json(&AttrValue::F32(vec![0.1])).to_string(),
            r#"{"f32":[0.1]}"#
        );
        assert_eq!(attr_to_text(&AttrValue::F64(vec![-9999.0])), "-9999");
    }

    #[test]
    fn history_limits_are_enforced() {
        let mut f = Footer::default();
        f.history.push(HistoryRow {
            op: String::new(),
            source: "x".into(),
            at: "1".into(),
            ..Default::default()
        });
        assert!(f.encode().is_err());
    }

    /// A combined conversion's row: `n` parents and a param per input beside the run's own.
    fn combined_row(n: usize) -> HistoryRow {
        let mut params: BTreeMap<String, String> = [
            ("tool", "tet-convert"),
            ("version", "0.1.0"),
            ("concat", "time"),
            ("codec", "zstd:3"),
            ("input", "day00.nc"),
            ("input_bytes", "1234"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for k in 1..n {
            params.insert(format!("input.{k}"), format!("day{k:02}.nc"));
        }
        params.insert("long".into(), "p".repeat(1500));
        HistoryRow {
            op: "convert".into(),
            source: "nc".into(),
            at: "1700000000".into(),
            parents: (0..n).map(|k| format!("sha256:{k:064x}")).collect(),
            params,
        }
    }

    fn through_text(f: &Footer) -> (Value, Footer) {
        let v: Value = serde_json::from_str(&f.encode().unwrap().inline_json()).unwrap();
        let hist = Footer::decode_history(&v["history"]).unwrap();
        let back = Footer::decode(hist, Some(&v["metadata"])).unwrap();
        (v, back)
    }

    #[test]
    fn rows_over_the_reference_limits_round_trip_through_the_extension() {
        for n in [31, 100] {
            let mut f = Footer::default();
            f.history.push(HistoryRow {
                op: "convert".into(),
                source: "npy".into(),
                at: "1".into(),
                parents: vec!["sha256:01".into()],
                ..Default::default()
            });
            f.history.push(combined_row(n));
            let (v, back) = through_text(&f);
            assert_eq!(back, f, "{n} parents");
            // The reference view: within the limits, the first 16 parents in order, the
            // run-wide params and the first inputs' paths, and the marker.
            let row = &v["history"][1];
            let parents = row["parents"].as_array().unwrap();
            assert_eq!(parents.len(), 16);
            assert_eq!(parents[15], format!("sha256:{:064x}", 15));
            let params = row["params"].as_object().unwrap();
            assert_eq!(params.len(), 32);
            assert_eq!(params["tool"], "tet-convert");
            assert_eq!(params["input.1"], "day01.nc");
            assert_eq!(params["input.25"], "day25.nc");
            assert!(!params.contains_key("input.26") && !params.contains_key("long"));
            assert_eq!(
                params[HISTORY_MARKER],
                format!(
                    "metadata.tet_ext.history holds all {n} parents and {} params",
                    n + 6
                )
            );
            let ext = &v["metadata"][EXT_KEY][HISTORY_EXT_KEY];
            assert_eq!(ext.as_array().unwrap().len(), 1, "only the long row");
            assert_eq!(ext[0]["row"], 1);
            assert_eq!(ext[0]["parents"].as_array().unwrap().len(), n);
            // Unchanged rows stay as they were: no marker.
            assert!(v["history"][0].get("params").is_none());
            // Same bytes when written again.
            assert_eq!(
                back.encode().unwrap().inline_json(),
                f.encode().unwrap().inline_json()
            );
        }
    }

    #[test]
    fn an_extension_that_disagrees_with_its_row_is_not_applied() {
        let mut f = Footer::default();
        f.history.push(combined_row(20));
        let enc = f.encode().unwrap();
        let mut v: Value = serde_json::from_str(&enc.inline_json()).unwrap();
        // Another tool rewrote the row's first parent but kept the extension.
        v["history"][0]["parents"][0] = json!("sha256:ff");
        let hist = Footer::decode_history(&v["history"]).unwrap();
        let back = Footer::decode(hist, Some(&v["metadata"])).unwrap();
        assert_eq!(back.history[0].parents.len(), 16);
        assert!(back.history[0].params.contains_key(HISTORY_MARKER));
        // Malformed extension entries are ignored, not fatal.
        v["metadata"][EXT_KEY][HISTORY_EXT_KEY] = json!([{"row": "x"}]);
        let hist = Footer::decode_history(&v["history"]).unwrap();
        assert!(Footer::decode(hist, Some(&v["metadata"])).is_ok());
    }
}
