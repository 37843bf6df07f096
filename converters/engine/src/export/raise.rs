//! Raising: from what a `.tet` file stores back to what the file held ([`Model`]), as far as the
//! target can hold it ([`Capabilities`]). The inverse of `crate::lower`, read from the footer
//! alone (no data):
//!
//! | `.tet` stores                                      | raised to                                |
//! |----------------------------------------------------|------------------------------------------|
//! | `source_dtype` i8 in `I16`                          | `I8` (narrowed per chunk, range-checked) |
//! | `source_dtype` bool in `U8`                         | `Bool` (values checked to be 0/1); a target without bool gets `U8` with [`Array::bool_as_u8`] |
//! | `source_dtype` bf16 in `F32`                        | stays `F32`, with a warning              |
//! | `<x>/real` + `<x>/imag` with [`Fact::ComplexPart`] | one `C64` / `C128` array `<x>`, where the target has complex numbers |
//! | shape `[1]` with `source_shape: []` (or the note)  | a 0-d array                              |
//!
//! Dimension names, typed attributes, the coordinate role and the unlimited dimensions
//! ([`Fact::UnlimitedDims`]) come from the dataset's metadata; `--dataset` selects arrays by
//! their raised name, a group prefix, or a stored dataset's name.

use tet_source::export::{Array, Capabilities, Model, TextEntry};
use tet_source::{AttrValue, ElementType, Fact, Role};

use super::{history_lines, ExportError, FooterUnreadable, Result};
use crate::format::footer::{RecordedRole, TextVariableRecord};
use crate::format::schema::{text_record_name, Lenient};
use crate::format::{DType, DatasetMeta, Footer, TetFile};
use crate::tet_input::element_type;

/// How an output array's values come from the stored ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restore {
    /// The stored bytes as they are.
    Same,
    /// i16 → i8 (the importer's i8 was widened).
    I16ToI8,
    /// u8 0/1 → bool.
    U8ToBool,
    /// The real and imaginary datasets interleaved.
    Complex,
}

/// Where one output array's values are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored {
    /// The `.tet` dataset (the real part of a complex array).
    pub ds: usize,
    /// The imaginary part's dataset.
    pub imag: Option<usize>,
    pub restore: Restore,
    /// A 0-d array, stored as shape `[1]`.
    pub scalar: bool,
}

/// Everything an export writes, decided from the footer alone: the model the exporter gets,
/// where each of its arrays is stored, and what the raise could not undo.
#[derive(Debug, Clone)]
pub struct Plan {
    pub model: Model,
    pub(crate) stored: Vec<Stored>,
    /// What the export could not keep as it was (printed as warnings).
    pub warnings: Vec<String>,
}

fn text_of<'a>(list: &'a [(String, AttrValue)], key: &str) -> Option<&'a str> {
    list.iter().find_map(|(k, v)| match v {
        AttrValue::Text(s) if k == key => Some(s.as_str()),
        _ => None,
    })
}

/// The typed facts of a dataset (`tet_ext.source_facts`).
fn facts(meta: &DatasetMeta) -> &[Fact] {
    meta.ext.facts()
}

/// Which complex part a dataset is (`Some(true)`: the imaginary one): its
/// [`Fact::ComplexPart`], or, as the NPY and Tensogram importers recorded it before facts were
/// typed, its `complex_part` attribute.
fn complex_part(meta: &DatasetMeta) -> Option<bool> {
    facts(meta)
        .iter()
        .find_map(|f| match f {
            Fact::ComplexPart { imag, .. } => Some(*imag),
            _ => None,
        })
        .or_else(|| match text_of(&meta.attrs, "complex_part") {
            Some("real") => Some(false),
            Some("imag") => Some(true),
            _ => None,
        })
}

/// The imaginary partner of every real part (by dataset id), when the target has complex
/// numbers; `used[i]`: dataset `i` is some array's imaginary part.
fn complex_pairs(
    tet: &TetFile,
    footer: &Footer,
    caps: Capabilities,
) -> (Vec<Option<usize>>, Vec<bool>) {
    let no_meta = DatasetMeta::default();
    let meta = |name: &str| footer.datasets.get(name).unwrap_or(&no_meta);
    let mut partner_of = vec![None; tet.datasets.len()];
    let mut used = vec![false; tet.datasets.len()];
    if !caps.has_complex {
        return (partner_of, used);
    }
    // Whatever the dataset order: real part id → imaginary part id.
    for (id, d) in tet.datasets.iter().enumerate() {
        if !matches!(d.dtype, DType::F32 | DType::F64) || complex_part(meta(&d.name)) != Some(false)
        {
            continue;
        }
        let Some(base) = d.name.strip_suffix("/real") else {
            continue;
        };
        let iname = format!("{base}/imag");
        let partner = tet.dataset_id(&iname).filter(|&i| {
            let di = &tet.datasets[i];
            !used[i]
                && di.dtype == d.dtype
                && di.shape == d.shape
                && complex_part(meta(&iname)) == Some(true)
        });
        if let Some(i) = partner {
            partner_of[id] = Some(i);
            used[i] = true;
        }
    }
    (partner_of, used)
}

/// Raises dataset `id` (with its imaginary partner, if any) to one output array.
fn raise(
    tet: &TetFile,
    meta: &DatasetMeta,
    id: usize,
    partner: Option<usize>,
    caps: Capabilities,
    warnings: &mut Vec<String>,
) -> (Array, Stored) {
    let d = &tet.datasets[id];
    let mut dtype = element_type(d.dtype);
    let mut restore = Restore::Same;
    let mut bool_as_u8 = false;
    let mut attrs = meta.attrs.clone();
    match (meta.ext.source_dtype.as_deref(), d.dtype) {
        (Some("i8"), DType::I16) => {
            dtype = ElementType::I8;
            restore = Restore::I16ToI8;
        }
        (Some("bool"), DType::U8) if caps.has_bool => {
            dtype = ElementType::Bool;
            restore = Restore::U8ToBool;
        }
        (Some("bool"), DType::U8) => bool_as_u8 = true,
        (Some("bf16"), _) => warnings.push(format!(
            "`{}`: bfloat16 values exported as the f32 they were widened to",
            d.name
        )),
        _ => {}
    }
    let mut name = d.name.clone();
    if let Some(complex) = partner.and_then(|_| dtype.complex_of()) {
        // A complex pair: `<x>/real` here, `<x>/imag` paired by `complex_pairs`.
        dtype = complex;
        restore = Restore::Complex;
        name = d.name.strip_suffix("/real").unwrap_or(&d.name).to_string();
        attrs.retain(|(k, _)| k != "complex_part" && k != "complex_dtype");
    }
    // A 0-d variable: `source_shape: []` (or, in files written before it was recorded, the
    // lowering's note).
    let was_0d = meta.ext.source_shape.as_ref().is_some_and(|s| s.is_empty());
    let scalar = d.shape == [1]
        && (was_0d
            || meta
                .ext
                .notes()
                .iter()
                .any(|n| n == crate::lower::SCALAR_NOTE))
        && meta.dim_names.as_ref().is_none_or(|n| n.is_empty());
    let (shape, chunk_shape) = if scalar {
        (Vec::new(), Vec::new())
    } else {
        let chunk = d.chunk_shape.iter().zip(&d.shape);
        (
            d.shape.clone(),
            chunk.map(|(&c, &s)| c.min(s).max(1)).collect(),
        )
    };
    let dims = meta
        .dim_names
        .clone()
        .filter(|n| n.len() == shape.len() && !n.is_empty());
    let role = match meta.ext.role {
        Some(RecordedRole::Coordinate) => Role::Coordinate,
        _ => Role::Data,
    };
    let facts = facts(meta).to_vec();
    let unlimited_dims = facts
        .iter()
        .find_map(|f| match f {
            Fact::UnlimitedDims(l) => Some(l.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let array = Array {
        name,
        dtype,
        shape,
        chunk_shape,
        dims,
        attrs,
        role,
        unlimited_dims,
        bool_as_u8,
        facts,
    };
    let stored = Stored {
        ds: id,
        imag: partner,
        restore,
        scalar,
    };
    (array, stored)
}

/// Whether `--dataset s` selects an array: its name, a group prefix of it, or the name of a
/// dataset it is stored in.
fn selected(a: &Array, st: &Stored, tet: &TetFile, s: &str) -> bool {
    let prefix = format!("{s}/");
    a.name == s
        || a.name.starts_with(&prefix)
        || tet.datasets[st.ds].name == s
        || st.imag.is_some_and(|i| tet.datasets[i].name == s)
}

fn text_name(t: &Lenient<TextVariableRecord>) -> String {
    text_record_name(t).unwrap_or_default()
}

fn text_selected(n: &str, s: &str) -> bool {
    n == s || n.starts_with(&format!("{s}/"))
}

/// Keeps the arrays and string variables `select` names (all when it is empty); an entry that
/// names nothing is an error listing what there is.
fn select_items(
    tet: &TetFile,
    select: &[String],
    raised: &mut Vec<(Array, Stored)>,
    all_text: &[Lenient<TextVariableRecord>],
) -> Result<Vec<TextEntry>> {
    for s in select {
        let hit = raised.iter().any(|(a, st)| selected(a, st, tet, s))
            || all_text.iter().any(|t| text_selected(&text_name(t), s));
        if !hit {
            return Err(ExportError::Invalid(format!(
                "no dataset or group `{s}` (have: {})",
                raised
                    .iter()
                    .map(|(a, _)| a.name.clone())
                    .chain(all_text.iter().map(text_name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    if !select.is_empty() {
        raised.retain(|(a, st)| select.iter().any(|s| selected(a, st, tet, s)));
    }
    Ok(all_text
        .iter()
        .filter(|t| {
            let n = text_name(t);
            select.is_empty() || select.iter().any(|s| text_selected(&n, s))
        })
        .map(|t| match t.typed().and_then(TextVariableRecord::variable) {
            Some(v) => TextEntry::Variable(v),
            None => TextEntry::Malformed {
                name: text_record_name(t),
            },
        })
        .collect())
}

impl Plan {
    /// Plans the export of `tet` to a target that holds `caps`, restricted to `select` (empty:
    /// everything).
    pub fn new(tet: &TetFile, caps: Capabilities, select: &[String]) -> Result<Plan> {
        let empty = Footer::default();
        let footer = match tet.footer() {
            Ok(Some(f)) => f,
            Ok(None) => &empty,
            Err(source) => return Err(FooterUnreadable { source }.into()),
        };
        Plan::from_footer(tet, footer, caps, select)
    }

    /// [`Plan::new`] over a given footer (a reader whose file's footer is unreadable plans
    /// over an empty one: the stored datasets as they are).
    pub(super) fn from_footer(
        tet: &TetFile,
        footer: &Footer,
        caps: Capabilities,
        select: &[String],
    ) -> Result<Plan> {
        let no_meta = DatasetMeta::default();
        let mut warnings = Vec::new();
        let (partner_of, used) = complex_pairs(tet, footer, caps);
        let mut raised: Vec<(Array, Stored)> = Vec::new();
        for (id, d) in tet.datasets.iter().enumerate() {
            if used[id] {
                continue;
            }
            let meta = footer.datasets.get(&d.name).unwrap_or(&no_meta);
            raised.push(raise(tet, meta, id, partner_of[id], caps, &mut warnings));
        }
        let all_text = footer.ext.text_variables.as_deref().unwrap_or_default();
        let text_variables = select_items(tet, select, &mut raised, all_text)?;
        let (arrays, stored) = raised.into_iter().unzip();
        Ok(Plan {
            model: Model {
                arrays,
                global_attrs: footer.global_attrs.clone(),
                history: history_lines(&footer.history),
                text_variables,
                subset: !select.is_empty(),
                global_facts: footer
                    .ext
                    .global_facts
                    .as_ref()
                    .map(|f| f.0.clone())
                    .unwrap_or_default(),
            },
            stored,
            warnings,
        })
    }
}
