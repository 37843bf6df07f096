//! The `THST` footer as a lossless in-memory model ([`Footer`]), and its encoding to and from
//! the JSON the reference reader accepts, whose form [`super::schema`] describes as serde types.
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

use serde_json::Value;
use tet_source::{AttrValue, Attrs, Skipped};

use super::schema::{
    ChunkDigests, CoordAxis, DatasetEntry, DatasetExt, FooterDoc, GlobalExt, Lenient, Metadata,
    MetadataRef, Row, RowObject, Scalar, SchemaError, SkippedRecord, TypedAttrs, TypedValue,
};
pub use super::schema::{
    FileRecord, RecordedRole, RowExt, SourceRecord, TextVariableRecord, EXT_KEY, EXT_VERSION,
};

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

/// Whether a string fits the reference limit (1..=1024 bytes).
pub fn fits(s: &str) -> bool {
    !s.is_empty() && s.len() <= limits::MAX_STRING
}

/// Why a footer cannot be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub enum FooterError {
    /// The JSON does not have the schema's form.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error("footer JSON has no `history`")]
    NoHistory,
    #[error("history row {row}: a legacy row must be [\"op\", \"source\", \"at\"]")]
    LegacyRow { row: usize },
    #[error("{rows} history rows exceed the limit of {}", limits::HISTORY_ROWS)]
    TooManyRows { rows: usize },
    #[error("history row {row}: `{field}` must be 1..=1024 bytes")]
    RowField { row: usize, field: &'static str },
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
    /// What the dataset was in the source (source dtype, role, notes, facts…) and extension
    /// keys this version does not describe.
    pub ext: SourceRecord,
}

impl DatasetMeta {
    pub fn is_empty(&self) -> bool {
        self.dim_names.is_none()
            && self.coords.is_empty()
            && self.attrs.is_empty()
            && self.ext.is_empty()
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
    /// File-level extension facts (global facts, text variables) and extension keys this
    /// version does not describe.
    pub ext: FileRecord,
}

// ---------------------------------------------------------------------------------------------
// Typed attribute values

/// `{"<type>": value(s)}` — the typed, lossless JSON form of an attribute value.
pub fn attr_to_json(v: &AttrValue) -> Value {
    serde_json::to_value(TypedValue(v)).unwrap_or(Value::Null)
}

/// Inverse of [`attr_to_json`]; `None` for anything malformed.
pub fn attr_from_json(v: &Value) -> Option<AttrValue> {
    super::schema::read_typed_value(v).ok()
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
    serde_json::to_value(TypedAttrs(attrs.to_vec())).unwrap_or(Value::Null)
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// The footer as documents of the schema: the history rows and the metadata (inline or to be
/// spilled), ready to be written as canonical JSON.
#[derive(Debug, Clone)]
pub struct EncodedFooter {
    pub history: Vec<Row>,
    pub metadata: Metadata,
}

pub use tet_source::json_text::canonical;

impl EncodedFooter {
    fn text(doc: &FooterDoc) -> String {
        // The schema's types always serialize (string keys, finite or named floats).
        super::schema::to_canonical_json(doc).unwrap_or_default()
    }

    /// The footer JSON text with metadata inline.
    pub fn inline_json(&self) -> String {
        EncodedFooter::text(&FooterDoc {
            history: Some(self.history.clone()),
            metadata: Some(self.metadata.clone()),
            ..FooterDoc::default()
        })
    }

    /// The footer JSON text pointing at a metadata spill at `offset` of `len` bytes.
    pub fn spilled_json(&self, offset: u64, len: u64) -> String {
        EncodedFooter::text(&FooterDoc {
            history: Some(self.history.clone()),
            metadata_ref: Some(MetadataRef { offset, len }),
            ..FooterDoc::default()
        })
    }

    /// The metadata JSON text, for a spill.
    pub fn metadata_json(&self) -> String {
        super::schema::to_canonical_json(&self.metadata).unwrap_or_default()
    }

    /// Records the chunk digests (`metadata.tet_ext.chunk_digests`).
    pub fn set_chunk_digests(&mut self, digests: ChunkDigests) {
        let ext = self.metadata.ext.get_or_insert_with(GlobalExt::default);
        ext.chunk_digests = Some(Lenient::Typed(digests));
        ext.version = Some(EXT_VERSION);
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

/// The history rows in the reference's form, and the complete lists of the rows it shortened.
fn encode_history(rows: &[HistoryRow]) -> Result<(Vec<Row>, Vec<RowExt>), FooterError> {
    if rows.len() > limits::HISTORY_ROWS {
        return Err(FooterError::TooManyRows { rows: rows.len() });
    }
    let mut out = Vec::with_capacity(rows.len());
    let mut ext = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        for (field, s) in [("op", &r.op), ("source", &r.source), ("at", &r.at)] {
            if !fits(s) {
                return Err(FooterError::RowField { row: i, field });
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
        out.push(Row::Object(RowObject {
            op: r.op.clone(),
            source: r.source.clone(),
            at: r.at.clone(),
            parents: (!parents.is_empty()).then(|| parents.to_vec()),
            params: (!params.is_empty()).then_some(params),
            other: Default::default(),
        }));
    }
    Ok((out, ext))
}

/// Puts the complete lists of `metadata.tet_ext.history` back into the rows they belong to: a
/// row that carries the marker and whose parents and params agree with the entry (a tool that
/// rewrote the history without knowing the extension leaves rows that do not; they stay as
/// written). A malformed extension is ignored, as the reference reader ignores the key.
fn restore_history(rows: &mut [HistoryRow], entries: &Lenient<Vec<RowExt>>) {
    let Some(entries) = entries.typed() else {
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
            r.parents = e.parents.clone();
            r.params = e.params.clone();
        }
    }
}

fn coord_axis(labels: &[String]) -> CoordAxis {
    CoordAxis {
        labels: labels.to_vec(),
        other: Default::default(),
    }
}

/// Splits one dataset's metadata into the reference-compatible entry and its extension.
fn encode_dataset(meta: &DatasetMeta) -> (DatasetEntry, DatasetExt) {
    let mut entry = DatasetEntry::default();
    let mut ext = DatasetExt {
        record: meta.ext.clone(),
        ..DatasetExt::default()
    };

    // attrs: the reference gets the string view of those that fit; the typed list is always
    // kept in the extension so types survive.
    let mut plain = BTreeMap::new();
    let mut left_out = Vec::new();
    for (k, v) in &meta.attrs {
        let text = attr_to_text(v);
        if plain.len() < limits::ATTRS_PER_DATASET
            && fits(k)
            && fits(&text)
            && !plain.contains_key(k)
        {
            plain.insert(k.clone(), text);
        } else {
            left_out.push(k.clone());
        }
    }
    entry.attrs = (!plain.is_empty()).then_some(plain);
    ext.attrs = (!meta.attrs.is_empty()).then(|| TypedAttrs(meta.attrs.clone()));
    ext.attrs_not_in_reference = (!left_out.is_empty()).then_some(left_out);

    if let Some(dims) = &meta.dim_names {
        if dims.iter().all(|d| fits(d)) {
            entry.dim_names = Some(dims.clone());
        } else {
            ext.dim_names = Some(dims.clone());
        }
    }

    let mut coords = BTreeMap::new();
    let mut ext_coords = BTreeMap::new();
    for (axis, labels) in &meta.coords {
        let ok =
            fits(axis) && labels.len() <= limits::LABELS_PER_AXIS && labels.iter().all(|l| fits(l));
        let target = if ok { &mut coords } else { &mut ext_coords };
        target.insert(axis.clone(), coord_axis(labels));
    }
    entry.coords = (!coords.is_empty()).then_some(coords);
    ext.coords = (!ext_coords.is_empty()).then_some(ext_coords);
    (entry, ext)
}

impl Footer {
    /// Encodes the footer. Fails only on more than 4096 history rows or a row whose `op`,
    /// `source` or `at` is outside 1..=1024 bytes (parents and params that do not fit a row go
    /// to the history extension).
    pub fn encode(&self) -> Result<EncodedFooter, FooterError> {
        let (history, history_ext) = encode_history(&self.history)?;
        let mut metadata = self.metadata();
        if let Some(ext) = &mut metadata.ext {
            if !history_ext.is_empty() {
                ext.history = Some(Lenient::Typed(history_ext));
            }
        } else if !history_ext.is_empty() {
            metadata.ext = Some(GlobalExt {
                history: Some(Lenient::Typed(history_ext)),
                version: Some(EXT_VERSION),
                ..GlobalExt::default()
            });
        }
        Ok(EncodedFooter { history, metadata })
    }

    /// The `metadata` document (without the history extension).
    fn metadata(&self) -> Metadata {
        let string_map = |keep: bool| -> BTreeMap<String, Scalar> {
            self.file
                .iter()
                .filter(|(k, v)| (fits(k) && fits(v)) == keep)
                .map(|(k, v)| (k.clone(), Scalar::Text(v.clone())))
                .collect()
        };
        let mut ext = GlobalExt {
            record: self.ext.clone(),
            ..GlobalExt::default()
        };
        let file_overflow = string_map(false);
        ext.file = (!file_overflow.is_empty()).then_some(file_overflow);

        let mut datasets = BTreeMap::new();
        let mut ext_datasets = BTreeMap::new();
        for (name, meta) in &self.datasets {
            if meta.is_empty() {
                continue;
            }
            let (mut entry, dext) = encode_dataset(meta);
            if dext != DatasetExt::default() {
                entry.ext = Some(dext);
            }
            if datasets.len() < limits::DATASET_ENTRIES && fits(name) {
                datasets.insert(name.clone(), entry);
            } else {
                // Past the reference's entry limit: keep everything in the extension.
                ext_datasets.insert(name.clone(), entry);
            }
        }
        ext.datasets = (!ext_datasets.is_empty()).then_some(ext_datasets);
        ext.global_attrs =
            (!self.global_attrs.is_empty()).then(|| TypedAttrs(self.global_attrs.clone()));
        ext.skipped = (!self.skipped.is_empty()).then(|| {
            self.skipped
                .iter()
                .map(|s| {
                    Lenient::Typed(SkippedRecord {
                        name: s.name.clone(),
                        reason: s.reason.clone(),
                        other: Default::default(),
                    })
                })
                .collect()
        });
        let ext = (ext != GlobalExt::default()).then_some(GlobalExt {
            version: Some(EXT_VERSION),
            ..ext
        });
        Metadata {
            file: Some(string_map(true)),
            datasets: Some(datasets),
            ext,
            other: Default::default(),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Decoding (lenient: `verify` reports rule breaks, the reader keeps what it can)

    /// The model of a footer document; `spilled` is the metadata read from the spill when the
    /// document has `metadata_ref`.
    pub fn from_doc(doc: &FooterDoc, spilled: Option<&Metadata>) -> Result<Footer, FooterError> {
        let rows = doc.history.as_deref().ok_or(FooterError::NoHistory)?;
        let history = Footer::decode_rows(rows)?;
        Ok(Footer::decode(history, spilled.or(doc.metadata.as_ref())))
    }

    /// The footer JSON (and the spilled metadata JSON) read through the schema.
    pub fn from_json(top: &Value, spilled: Option<&Value>) -> Result<Footer, FooterError> {
        let doc: FooterDoc = super::schema::from_value(top)?;
        let spilled: Option<Metadata> = spilled.map(super::schema::from_value).transpose()?;
        Footer::from_doc(&doc, spilled.as_ref())
    }

    /// The history rows. Rows are objects with `op`, `source`, `at` (optional `parents` and
    /// `params`), or the compact legacy form `["op", "source", "at"]`, which the format allows
    /// and which reads as the object form without parents or params (and is written back in
    /// the object form).
    pub fn decode_rows(rows: &[Row]) -> Result<Vec<HistoryRow>, FooterError> {
        rows.iter()
            .enumerate()
            .map(|(i, r)| match r {
                Row::Legacy(l) => match l.as_slice() {
                    [op, source, at] => Ok(HistoryRow {
                        op: op.clone(),
                        source: source.clone(),
                        at: at.clone(),
                        ..HistoryRow::default()
                    }),
                    _ => Err(FooterError::LegacyRow { row: i }),
                },
                Row::Object(o) => Ok(HistoryRow {
                    op: o.op.clone(),
                    source: o.source.clone(),
                    at: o.at.clone(),
                    parents: o.parents.clone().unwrap_or_default(),
                    params: o.params.clone().unwrap_or_default(),
                }),
            })
            .collect()
    }

    /// Builds the model from the history rows and the metadata document.
    pub fn decode(history: Vec<HistoryRow>, metadata: Option<&Metadata>) -> Footer {
        let mut footer = Footer {
            history,
            ..Footer::default()
        };
        let Some(md) = metadata else {
            return footer;
        };
        for (k, v) in md.file.iter().flatten() {
            let text = match v {
                Scalar::Text(s) => s.clone(),
                Scalar::Other(v) => v.to_string(),
            };
            footer.file.insert(k.clone(), text);
        }
        for (name, entry) in md.datasets.iter().flatten() {
            footer.datasets.insert(name.clone(), decode_dataset(entry));
        }
        let Some(ext) = &md.ext else {
            return footer;
        };
        // `version` and the checksums (which describe this file's bytes: the reader checks
        // them, a conversion writes its own) are not part of the model.
        for (k, v) in ext.file.iter().flatten() {
            if let Scalar::Text(s) = v {
                footer.file.insert(k.clone(), s.clone());
            }
        }
        for (name, entry) in ext.datasets.iter().flatten() {
            footer.datasets.insert(name.clone(), decode_dataset(entry));
        }
        if let Some(h) = &ext.history {
            restore_history(&mut footer.history, h);
        }
        if let Some(a) = &ext.global_attrs {
            footer.global_attrs = a.0.clone();
        }
        footer.skipped = ext
            .skipped
            .iter()
            .flatten()
            .filter_map(Lenient::typed)
            .map(|s| Skipped {
                name: s.name.clone(),
                reason: s.reason.clone(),
            })
            .collect();
        footer.ext = ext.record.clone();
        footer
    }
}

fn decode_dataset(entry: &DatasetEntry) -> DatasetMeta {
    let mut meta = DatasetMeta {
        dim_names: entry.dim_names.clone(),
        ..DatasetMeta::default()
    };
    let mut coords = |c: &Option<BTreeMap<String, CoordAxis>>| {
        for (axis, a) in c.iter().flatten() {
            meta.coords.insert(axis.clone(), a.labels.clone());
        }
    };
    coords(&entry.coords);
    if let Some(ext) = &entry.ext {
        coords(&ext.coords);
    }
    meta.attrs = entry
        .attrs
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), AttrValue::Text(v.clone())))
        .collect();
    if let Some(ext) = &entry.ext {
        if let Some(a) = &ext.attrs {
            meta.attrs = a.0.clone();
        }
        if let Some(d) = &ext.dim_names {
            meta.dim_names = Some(d.clone());
        }
        meta.ext = ext.record.clone();
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let md = &serde_json::to_value(&enc.metadata).unwrap();
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
        let back = Footer::from_json(&v, None).unwrap();
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
        let back = Footer::from_json(&v, None).unwrap();
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
        let back = Footer::from_json(&v, None).unwrap();
        assert_eq!(back.history[0].parents.len(), 16);
        assert!(back.history[0].params.contains_key(HISTORY_MARKER));
        // Malformed extension entries are ignored, not fatal.
        v["metadata"][EXT_KEY][HISTORY_EXT_KEY] = json!([{"row": "x"}]);
        assert!(Footer::from_json(&v, None).is_ok());
    }
}
