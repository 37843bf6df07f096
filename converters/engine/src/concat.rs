//! Combining inputs along a dimension (issue 24, `tet-convert --concat DIM IN… OUT`): [`Concat`]
//! is a [`Source`] over several opened sources whose variables agree on names, element types,
//! dims and attributes, and on shapes except along the dimension; [`combine`] joins the
//! opened inputs and converts the result, every input a parent in the history row (`input`,
//! `input.1`, … in the combined order, which `tet audit` re-checks; past the reference's 16
//! parents and 32 params per row the footer keeps the complete lists in its history extension).
//!
//! The inputs are put in the order of their first value of the dimension's coordinate variable
//! (their given order when there is none). A coordinate whose CF time `units` differ from the
//! first input's is rebased into them, exactly (`meta::cftime::Rebase`, as `ncrcat` does:
//! `hours since 2024-02-02` → 24.. in `hours since 2024-02-01`), its `units` then not compared;
//! units that cannot be rebased exactly (`months since …`, a value the type cannot hold) are
//! refused ("units differ", naming both units). Overlapping or unordered values, a missing
//! variable, another type, other dims, other attributes, another shape (another grid)
//! and a variable without the dimension whose values differ are refused with one line naming
//! both inputs and what differs — before anything is read for the output. Variables without the
//! dimension come from the first input (`take_first` skips the equality check). A region of a
//! combined variable is read from the inputs it spans, so memory stays bounded by the region.
//! The inputs arrive opened ([`OpenedInput`]: local files, objects; [`crate::request`] opens
//! them); [`combine`] is the step that joins and converts them.
//! `.tet` inputs (with `.tet` inputs only) carry their footers over as one `.tet` input does:
//! `combine_footers` keeps every input's history rows as ancestry and joins the labels.

use std::path::Path;
use std::time::Instant;

use tet_source::{
    AttrValue, DimLabels, Fact, Result, Skipped, Source, SourceError, TextVariable, Variable,
};

use crate::meta::cftime;
use crate::pipeline::{ConvertError, ConvertOptions, ConvertReport, Opened};

/// Why inputs cannot be combined: each names the inputs (as the caller named them) and what
/// differs.
#[derive(Debug, thiserror::Error)]
pub enum ConcatError {
    #[error("no input to combine")]
    NoInputs,
    /// `--concat DIM` of a dimension an input does not have (a typo, most often): the closest
    /// dimensions it has.
    #[error("{input}: --concat: no dimension `{dim}` {}", crate::select::closest_note(.closest))]
    NoDimension {
        input: String,
        dim: String,
        closest: Vec<String>,
    },
    #[error("{input}: reading the {dim} coordinate")]
    Coordinate {
        input: String,
        dim: String,
        #[source]
        source: SourceError,
    },
    #[error("{first} and {other}: {dim} values overlap or are unordered ({}..{} and {}..{})", .ranges.0, .ranges.1, .ranges.2, .ranges.3)]
    Overlap {
        first: String,
        other: String,
        dim: String,
        ranges: (f64, f64, f64, f64),
    },
    /// CF time units that cannot be rebased exactly into the first input's (`months since …`,
    /// a value the target units cannot hold exactly).
    #[error(transparent)]
    UnitsDiffer(Box<UnitsDiffer>),
    #[error("{first} and {other}: variable {var} is missing from {missing_from}")]
    MissingVariable {
        first: String,
        other: String,
        var: String,
        missing_from: String,
    },
    #[error("{first} and {other}: {var} {what}")]
    Differs {
        first: String,
        other: String,
        var: String,
        what: Box<Difference>,
    },
    #[error("combined shape overflows")]
    Overflow,
    #[error("variable {0} is too large")]
    TooLarge(String),
    #[error("{input}: no variable {var}")]
    NoVariable { input: String, var: String },
    #[error("{input}: {var}")]
    Read {
        input: String,
        var: String,
        #[source]
        source: SourceError,
    },
    #[error("{first} and {other}: variable {var} differs (it has no {dim} dimension; --concat-take-first takes the first input's)")]
    ValuesDiffer {
        first: String,
        other: String,
        var: String,
        dim: String,
    },
    #[error("{first} and {other}: text variable {var} is missing from {other}")]
    MissingText {
        first: String,
        other: String,
        var: String,
    },
    #[error("{first} and {other}: text variable {var} cannot be combined along {dim}")]
    TextAxis {
        first: String,
        other: String,
        var: String,
        dim: String,
    },
    #[error("{first} and {other}: text variable {var} differs")]
    TextDiffers {
        first: String,
        other: String,
        var: String,
    },
    #[error("{first} and {other}: the labels of {dim} differ")]
    Labels {
        first: String,
        other: String,
        dim: String,
    },
}

/// A coordinate's CF time units that cannot be rebased exactly into the first input's.
#[derive(Debug, thiserror::Error)]
#[error("{first} and {other}: {dim} units differ (`{units}` and `{other_units}`) and cannot be rebased exactly: {why}")]
pub struct UnitsDiffer {
    first: String,
    other: String,
    dim: String,
    units: String,
    other_units: String,
    why: String,
}

/// How a variable of another input differs from the first input's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Difference {
    #[error("is {0} and {1}")]
    Dtype(tet_source::ElementType, tet_source::ElementType),
    #[error("has dims ({0}) and ({1})")]
    Dims(String, String),
    #[error("has another attribute {0}")]
    Attribute(String),
    #[error("has shape {0:?} and {1:?} (another grid)")]
    Shape(Vec<u64>, Vec<u64>),
}

/// An input of a combined conversion, opened (a local file, an object read by ranges, a
/// spooled copy, a Zarr prefix).
pub struct OpenedInput {
    /// What the history row and the errors name it (a URL, a path), and how its digest is had.
    pub parent: crate::pipeline::Parent,
    /// Its format.
    pub importer: &'static dyn tet_source::Importer,
    pub source: Box<dyn Source>,
    /// A `.tet` input's footer, carried over as one `.tet` input's is.
    pub footer: Option<crate::format::Footer>,
}

/// Combines the opened `inputs` along `opts.settings.concat`'s dimension (then chosen and cut
/// by the selection) and converts the combination into `output`: every input a parent of the
/// history row (`input`, `input.1`, … in the combined order; `input_params` beside them), the
/// report's `order` the index in `inputs` of each, in turn. Every disagreement is refused
/// before anything is written.
pub fn combine(
    inputs: Vec<OpenedInput>,
    input_params: std::collections::BTreeMap<String, String>,
    output: &Path,
    opts: &ConvertOptions,
    started: Instant,
) -> Result<ConvertReport, ConvertError> {
    let refused = |m: String| ConvertError::Refused(m);
    let dim = opts
        .settings
        .concat
        .as_deref()
        .ok_or_else(|| refused("no dimension to combine along".into()))?;
    if inputs.len() < 2 {
        return Err(refused("--concat needs at least two inputs".into()));
    }
    let first = inputs.first().map(|i| i.importer.id());
    let is_tet = |f: &str| f == crate::tet_input::ID;
    if let Some(other) = inputs
        .iter()
        .find(|i| first.is_some_and(|f| is_tet(f) != is_tet(i.importer.id())))
    {
        return Err(refused(format!(
            "{} and {}: .tet inputs are combined with .tet inputs only",
            inputs[0].parent.name.display(),
            other.parent.name.display()
        )));
    }
    let mut parts = Vec::with_capacity(inputs.len());
    let mut footers = Vec::new();
    let mut parents = Vec::with_capacity(inputs.len());
    for i in inputs {
        parts.push((i.parent.name.display().to_string(), i.source));
        footers.extend(i.footer);
        parents.push(Some(i.parent));
    }
    let concat = Concat::new(parts, dim, opts.settings.concat_take_first)
        .map_err(|e| refused(crate::format::schema::error_chain(&e)))?;
    let order = concat.order.clone();
    let mut carried = combine_footers(footers, &order, dim);
    let (source, cuts) = crate::select::apply(Box::new(concat), &opts.settings.select())?;
    if let Some(f) = carried.as_mut() {
        cuts.cut_carried(f)?;
    }
    let parents = order
        .iter()
        .map(|&i| parents.get_mut(i).and_then(Option::take))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| refused("the combined order lost an input".into()))?;
    let opened = Opened {
        source: source.as_ref(),
        format: first.unwrap_or("concat"),
        parents,
        input_params,
        carried,
        started,
    };
    let mut report = crate::pipeline::convert_source(opened, output, opts)?;
    report.order = order;
    Ok(report)
}

/// The footer a combination of `.tet` inputs carries over (`None` for other inputs): the first
/// input's (in the combined `order`), with every input's history rows in that order (each one's
/// ancestry, as a single `.tet` input keeps its rows) and the dimension labels along `dim`
/// joined. Text variables are not combined: listed as skipped.
fn combine_footers(
    footers: Vec<crate::format::Footer>,
    order: &[usize],
    dim: &str,
) -> Option<crate::format::Footer> {
    let mut footers: Vec<Option<crate::format::Footer>> = footers.into_iter().map(Some).collect();
    let mut ordered = order.iter().filter_map(|&i| footers.get_mut(i)?.take());
    let mut first = ordered.next()?;
    for f in ordered {
        first.history.extend(f.history);
        for (name, meta) in &mut first.datasets {
            let theirs = f.datasets.get(name).and_then(|m| m.coords.get(dim));
            if let (Some(ours), Some(theirs)) = (meta.coords.get_mut(dim), theirs) {
                ours.extend(theirs.iter().cloned());
            }
        }
    }
    if first.ext.text_variables.take().is_some() {
        first.skipped.push(Skipped {
            name: "text_variables".into(),
            reason: "text variables of .tet inputs are not combined yet".into(),
        });
    }
    Some(first)
}

/// How a combined variable is read.
#[derive(Debug, Clone)]
enum Plan {
    /// Along the dimension's axis `axis`: input `k` holds positions `starts[k] .. starts[k + 1]`.
    Along { axis: usize, starts: Vec<u64> },
    /// Without the dimension: the first input's.
    First,
}

/// Several sources seen as one, concatenated along a dimension (see the module docs).
pub struct Concat {
    parts: Vec<Box<dyn Source>>,
    /// The given index of each part, in the combined order.
    order: Vec<usize>,
    vars: Vec<Variable>,
    plans: Vec<Plan>,
    texts: Vec<TextVariable>,
    labels: Vec<DimLabels>,
    /// Per part (in the combined order): how its `dim` coordinate values are rebased into the
    /// first part's units (`None`: kept as they are).
    rebases: Vec<Option<cftime::Rebase>>,
    dim: String,
}

/// The axis of `dim` in a variable's dims (`dim_0`, `dim_1`, … when the source names none).
fn axis_of(dims: Option<&Vec<String>>, rank: usize, dim: &str) -> Option<usize> {
    crate::select::dims_of(dims, rank)
        .iter()
        .position(|d| d == dim)
}

/// Attributes as comparable text, sorted by name (a NaN `_FillValue` equals itself here).
fn sorted(attrs: &[(String, AttrValue)]) -> Vec<String> {
    let mut a: Vec<String> = attrs.iter().map(|x| format!("{x:?}")).collect();
    a.sort();
    a
}

/// The values of `dim`'s coordinate variable in an input, with its `units` and `calendar`.
struct Coord {
    values: Vec<f64>,
    units: Option<String>,
    calendar: String,
    dtype: tet_source::ElementType,
}

impl Coord {
    /// The first and last values.
    fn range(&self) -> Option<(f64, f64)> {
        self.values
            .first()
            .copied()
            .zip(self.values.last().copied())
    }
}

fn text_attr<'a>(v: &'a Variable, name: &str) -> Option<&'a str> {
    v.attrs.iter().find_map(|(k, a)| match a {
        AttrValue::Text(t) if k == name => Some(t.as_str()),
        _ => None,
    })
}

/// `dim`'s coordinate variable in `src` (`None`: no coordinate, or an empty one); an error
/// when the values are not strictly increasing.
fn coordinate(src: &dyn Source, dim: &str) -> Result<Option<Coord>> {
    let Some((i, v)) = src
        .variables()
        .iter()
        .enumerate()
        .find(|(_, v)| v.name == dim && v.shape.len() == 1)
    else {
        return Ok(None);
    };
    let n = v.shape[0];
    if n == 0 {
        return Ok(None);
    }
    // A coordinate is 1-D: read whole, it is small beside the variables it labels.
    let len = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_mul(v.dtype.size()))
        .ok_or(tet_source::Request::TooLarge)?;
    let mut buf = vec![0u8; len];
    src.read_region(i, &[0], &[n], &mut buf)?;
    let values = crate::meta::element_values(&buf, v.dtype);
    if let Some(w) = values.windows(2).find(|w| w[1] <= w[0] || w[0].is_nan()) {
        return Err(tet_source::Part::Values.malformed(format!(
            "{dim} values are not increasing ({} then {})",
            w[0], w[1]
        )));
    }
    Ok(Some(Coord {
        values,
        units: text_attr(v, "units").map(String::from),
        calendar: text_attr(v, "calendar").unwrap_or("standard").to_string(),
        dtype: v.dtype,
    }))
}

/// A rebased value `x` written as element type `t` (little-endian) into `out`; `false` when
/// `t` cannot hold it exactly.
fn put_value(x: f64, t: tet_source::ElementType, out: &mut [u8]) -> bool {
    use tet_source::ElementType as E;
    macro_rules! put {
        ($ty:ty) => {{
            let y = x as $ty;
            if y as f64 != x {
                return false;
            }
            out.copy_from_slice(&y.to_le_bytes());
            true
        }};
    }
    match t {
        E::I8 => put!(i8),
        E::U8 => put!(u8),
        E::I16 => put!(i16),
        E::U16 => put!(u16),
        E::I32 => put!(i32),
        E::U32 => put!(u32),
        E::I64 => put!(i64),
        E::U64 => put!(u64),
        E::F32 => put!(f32),
        E::F64 => put!(f64),
        _ => false,
    }
}

/// The rebase of each input's coordinate (in the combined order) into the first's units, the
/// values checked exact and held by the coordinate's type; the rebased ranges. Inputs whose
/// units equal the first's keep their values (`None`).
#[allow(clippy::type_complexity)]
fn rebase_all(
    coords: &[Option<Coord>],
    names: &[String],
    dim: &str,
) -> Result<(Vec<Option<cftime::Rebase>>, Vec<Option<(f64, f64)>>), ConcatError> {
    let target = coords.iter().flatten().next();
    let mut rebases = Vec::with_capacity(coords.len());
    let mut ranges = Vec::with_capacity(coords.len());
    for (k, c) in coords.iter().enumerate() {
        let (Some(c), Some(t)) = (c, target) else {
            rebases.push(None);
            ranges.push(c.as_ref().and_then(Coord::range));
            continue;
        };
        if c.units == t.units || c.units.is_none() || t.units.is_none() {
            rebases.push(None);
            ranges.push(c.range());
            continue;
        }
        let (from, to) = (
            c.units.as_deref().unwrap_or(""),
            t.units.as_deref().unwrap_or(""),
        );
        let refuse = |why: String| {
            ConcatError::UnitsDiffer(Box::new(UnitsDiffer {
                first: names[0].clone(),
                other: names[k].clone(),
                dim: dim.to_string(),
                units: to.to_string(),
                other_units: from.to_string(),
                why,
            }))
        };
        let r = cftime::Rebase::new(from, to, &t.calendar).ok_or_else(|| {
            refuse(format!(
                "not both CF time units of a fixed length in the {} calendar",
                t.calendar
            ))
        })?;
        let integer = !matches!(
            c.dtype,
            tet_source::ElementType::F32 | tet_source::ElementType::F64
        );
        let mut scratch = [0u8; 8];
        let mut rebased = Vec::with_capacity(c.values.len());
        for &v in &c.values {
            let x = r
                .apply(v, integer)
                .filter(|&x| put_value(x, c.dtype, &mut scratch[..c.dtype.size().min(8)]))
                .ok_or_else(|| refuse(format!("{v} has no exact {} value", c.dtype)))?;
            rebased.push(x);
        }
        ranges.push(rebased.first().copied().zip(rebased.last().copied()));
        rebases.push(Some(r));
    }
    Ok((rebases, ranges))
}

/// The instant of an input's first value in `target`'s units, approximately (for ordering
/// inputs whose units differ); the raw first value when either has no CF time units.
fn order_key(c: Option<&Coord>, target: Option<&Coord>) -> f64 {
    let Some(c) = c else { return f64::NAN };
    let first = c.values.first().copied().unwrap_or(f64::NAN);
    match (c.units.as_deref(), target.and_then(|t| t.units.as_deref())) {
        (Some(from), Some(to)) if from != to => target
            .and_then(|t| cftime::Rebase::new(from, to, &t.calendar))
            .map_or(first, |r| r.approx(first)),
        _ => first,
    }
}

impl Concat {
    /// Combines `parts` (each with the name errors give it) along `dim`; `take_first` takes the
    /// variables without `dim` from the first input without checking that the others agree.
    pub fn new(
        parts: Vec<(String, Box<dyn Source>)>,
        dim: &str,
        take_first: bool,
    ) -> Result<Concat, ConcatError> {
        if parts.is_empty() {
            return Err(ConcatError::NoInputs);
        }
        let mut keyed = Vec::with_capacity(parts.len());
        for (i, (name, src)) in parts.into_iter().enumerate() {
            let dims: std::collections::BTreeSet<String> = src
                .variables()
                .iter()
                .flat_map(|v| crate::select::dims_of(v.dims.as_ref(), v.shape.len()))
                .collect();
            if !dims.contains(dim) {
                return Err(ConcatError::NoDimension {
                    closest: crate::select::closest(dim, dims.iter().map(String::as_str)),
                    input: name,
                    dim: dim.to_string(),
                });
            }
            let coord =
                coordinate(src.as_ref(), dim).map_err(|source| ConcatError::Coordinate {
                    input: name.clone(),
                    dim: dim.to_string(),
                    source,
                })?;
            keyed.push((coord, i, name, src));
        }
        // Coordinate order (instants, when units differ), input order as the tie-break (and
        // without a coordinate).
        let keys: Vec<f64> = {
            let target = keyed.iter().find_map(|k| k.0.as_ref());
            keyed
                .iter()
                .map(|k| order_key(k.0.as_ref(), target))
                .collect()
        };
        let mut keyed: Vec<_> = keyed.into_iter().zip(keys).collect();
        keyed.sort_by(|(a, ka), (b, kb)| {
            ka.partial_cmp(kb)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.1.cmp(&b.1))
        });
        let mut keyed: Vec<_> = keyed.into_iter().map(|(k, _)| k).collect();
        let names: Vec<String> = keyed.iter().map(|k| k.2.clone()).collect();
        let coords: Vec<Option<Coord>> = keyed.iter_mut().map(|k| k.0.take()).collect();
        let (rebases, ranges) = rebase_all(&coords, &names, dim)?;
        for (k, w) in ranges.windows(2).enumerate() {
            if let (Some(a), Some(b)) = (w[0], w[1]) {
                if b.0 <= a.1 {
                    return Err(ConcatError::Overlap {
                        first: names[k].clone(),
                        other: names[k + 1].clone(),
                        dim: dim.to_string(),
                        ranges: (a.0, a.1, b.0, b.1),
                    });
                }
            }
        }
        let order: Vec<usize> = keyed.iter().map(|k| k.1).collect();
        let parts: Vec<Box<dyn Source>> = keyed.into_iter().map(|k| k.3).collect();
        let rebased = rebases.iter().any(|r| r.is_some_and(|r| !r.is_identity()));
        let (vars, plans) = combine_variables(&parts, &names, dim, rebased)?;
        let texts = combine_texts(&parts, &names, dim)?;
        let labels = combine_labels(&parts, &names, dim)?;
        let c = Concat {
            parts,
            order,
            vars,
            plans,
            texts,
            labels,
            rebases,
            dim: dim.to_string(),
        };
        if !take_first {
            c.check_equal(&names, dim)?;
        }
        Ok(c)
    }

    /// Checks that every variable without the dimension holds the same values in every input,
    /// one bounded slab at a time.
    fn check_equal(&self, names: &[String], dim: &str) -> Result<(), ConcatError> {
        const SLAB: u64 = 4 << 20;
        for (v, plan) in self.vars.iter().zip(&self.plans) {
            if !matches!(plan, Plan::First) || v.shape.is_empty() {
                continue;
            }
            let row = v.shape[1..]
                .iter()
                .try_fold(v.dtype.size() as u64, |acc, &n| acc.checked_mul(n))
                .ok_or_else(|| ConcatError::TooLarge(v.name.clone()))?;
            let rows = (SLAB / row.max(1)).max(1);
            let mut start = 0u64;
            while start < v.shape[0] {
                let n = rows.min(v.shape[0] - start);
                let mut s = vec![0u64; v.shape.len()];
                s[0] = start;
                let mut c = v.shape.clone();
                c[0] = n;
                let len = n
                    .checked_mul(row)
                    .and_then(|b| usize::try_from(b).ok())
                    .ok_or_else(|| ConcatError::TooLarge(v.name.clone()))?;
                let read = |k: usize| -> Result<Vec<u8>, ConcatError> {
                    let mut b = vec![0u8; len];
                    let i = index_of(self.parts[k].as_ref(), &v.name).ok_or_else(|| {
                        ConcatError::NoVariable {
                            input: names[k].clone(),
                            var: v.name.clone(),
                        }
                    })?;
                    self.parts[k]
                        .read_region(i, &s, &c, &mut b)
                        .map_err(|source| ConcatError::Read {
                            input: names[k].clone(),
                            var: v.name.clone(),
                            source,
                        })?;
                    Ok(b)
                };
                let first = read(0)?;
                for k in 1..self.parts.len() {
                    if read(k)? != first {
                        return Err(ConcatError::ValuesDiffer {
                            first: names[0].clone(),
                            other: names[k].clone(),
                            var: v.name.clone(),
                            dim: dim.to_string(),
                        });
                    }
                }
                start += n;
            }
        }
        Ok(())
    }
}

fn dim_name(v: &Variable) -> String {
    v.dims.as_ref().map(|d| d.join(",")).unwrap_or_default()
}

fn index_of(src: &dyn Source, name: &str) -> Option<usize> {
    src.variables().iter().position(|v| v.name == name)
}

/// The combined variables and how each is read; an error names both inputs and what differs.
fn combine_variables(
    parts: &[Box<dyn Source>],
    names: &[String],
    dim: &str,
    rebased: bool,
) -> Result<(Vec<Variable>, Vec<Plan>), ConcatError> {
    let first = parts[0].variables();
    let mut vars = Vec::with_capacity(first.len());
    let mut plans = Vec::with_capacity(first.len());
    for (k, p) in parts.iter().enumerate().skip(1) {
        if let Some(extra) = p
            .variables()
            .iter()
            .find(|v| index_of(parts[0].as_ref(), &v.name).is_none())
        {
            return Err(ConcatError::MissingVariable {
                first: names[0].clone(),
                other: names[k].clone(),
                var: extra.name.clone(),
                missing_from: names[0].clone(),
            });
        }
    }
    for v in first {
        let axis = axis_of(v.dims.as_ref(), v.shape.len(), dim);
        let mut combined = v.clone();
        let mut starts = vec![0u64];
        for (k, p) in parts.iter().enumerate() {
            let other = p
                .variables()
                .iter()
                .find(|w| w.name == v.name)
                .ok_or_else(|| ConcatError::MissingVariable {
                    first: names[0].clone(),
                    other: names[k].clone(),
                    var: v.name.clone(),
                    missing_from: names[k].clone(),
                })?;
            let differs = |what: Difference| ConcatError::Differs {
                first: names[0].clone(),
                other: names[k].clone(),
                var: v.name.clone(),
                what: Box::new(what),
            };
            if other.dtype != v.dtype {
                return Err(differs(Difference::Dtype(v.dtype, other.dtype)));
            }
            if other.dims != v.dims {
                return Err(differs(Difference::Dims(dim_name(v), dim_name(other))));
            }
            // A rebased coordinate takes the first input's units (checked in `rebase_all`).
            let keep = |attrs: &[(String, AttrValue)]| -> Vec<String> {
                let coord = rebased && v.name == dim && v.shape.len() == 1;
                let kept: Vec<_> = attrs
                    .iter()
                    .filter(|(k, _)| !(coord && k == "units"))
                    .cloned()
                    .collect();
                sorted(&kept)
            };
            let (mine, theirs) = (keep(&v.attrs), keep(&other.attrs));
            if mine != theirs {
                let name = |t: &String| {
                    t.trim_start_matches("(\"")
                        .split('"')
                        .next()
                        .map(String::from)
                };
                let key = mine
                    .iter()
                    .find(|a| !theirs.contains(a))
                    .or_else(|| theirs.iter().find(|a| !mine.contains(a)))
                    .and_then(name)
                    .unwrap_or_default();
                return Err(differs(Difference::Attribute(key)));
            }
            let same_shape = other.shape.len() == v.shape.len()
                && (0..v.shape.len()).all(|a| Some(a) == axis || other.shape[a] == v.shape[a]);
            if !same_shape {
                return Err(differs(Difference::Shape(
                    v.shape.clone(),
                    other.shape.clone(),
                )));
            }
            if let Some(a) = axis {
                let end = starts[k]
                    .checked_add(other.shape[a])
                    .ok_or(ConcatError::Overflow)?;
                starts.push(end);
            }
        }
        let plan = match axis {
            Some(a) => {
                combined.shape[a] = *starts.last().unwrap_or(&0);
                // Source chunks do not tile the combined axis: no hint along it.
                if let Some(c) = &mut combined.layout.chunk_shape {
                    if let Some(x) = c.get_mut(a) {
                        *x = (*x).min(combined.shape[a]).max(1);
                    }
                }
                Plan::Along { axis: a, starts }
            }
            None => Plan::First,
        };
        vars.push(combined);
        plans.push(plan);
    }
    Ok((vars, plans))
}

/// Text variables: those along the dimension (as their first axis) concatenated, the others
/// the first input's, which the others must equal.
fn combine_texts(
    parts: &[Box<dyn Source>],
    names: &[String],
    dim: &str,
) -> Result<Vec<TextVariable>, ConcatError> {
    let mut out = Vec::new();
    for t in parts[0].text_variables() {
        let mut c = t.clone();
        let axis = axis_of(t.dims.as_ref(), t.shape.len(), dim);
        for (k, p) in parts.iter().enumerate().skip(1) {
            let o = p
                .text_variables()
                .iter()
                .find(|o| o.name == t.name)
                .ok_or_else(|| ConcatError::MissingText {
                    first: names[0].clone(),
                    other: names[k].clone(),
                    var: t.name.clone(),
                })?;
            match axis {
                Some(0) if o.dims == t.dims && o.shape[1..] == t.shape[1..] => {
                    c.values.extend(o.values.iter().cloned());
                    c.shape[0] = c.shape[0]
                        .checked_add(o.shape[0])
                        .ok_or(ConcatError::Overflow)?;
                }
                Some(_) => {
                    return Err(ConcatError::TextAxis {
                        first: names[0].clone(),
                        other: names[k].clone(),
                        var: t.name.clone(),
                        dim: dim.to_string(),
                    })
                }
                None if o.values != t.values || o.dims != t.dims => {
                    return Err(ConcatError::TextDiffers {
                        first: names[0].clone(),
                        other: names[k].clone(),
                        var: t.name.clone(),
                    })
                }
                None => {}
            }
        }
        out.push(c);
    }
    Ok(out)
}

/// Dimension labels: the dimension's concatenated, the others the first input's (which the
/// others must equal).
fn combine_labels(
    parts: &[Box<dyn Source>],
    names: &[String],
    dim: &str,
) -> Result<Vec<DimLabels>, ConcatError> {
    let mut out = Vec::new();
    for l in parts[0].dim_labels() {
        let mut c = l.clone();
        for (k, p) in parts.iter().enumerate().skip(1) {
            let o = p.dim_labels().iter().find(|o| o.dim == l.dim);
            match o {
                Some(o) if l.dim == dim => c.labels.extend(o.labels.iter().cloned()),
                Some(o) if o.labels == l.labels => {}
                _ => {
                    return Err(ConcatError::Labels {
                        first: names[0].clone(),
                        other: names[k].clone(),
                        dim: l.dim.clone(),
                    })
                }
            }
        }
        out.push(c);
    }
    Ok(out)
}

impl Source for Concat {
    fn variables(&self) -> &[Variable] {
        &self.vars
    }

    fn global_attrs(&self) -> &[(String, AttrValue)] {
        self.parts[0].global_attrs()
    }

    fn global_facts(&self) -> &[Fact] {
        self.parts[0].global_facts()
    }

    fn skipped(&self) -> &[Skipped] {
        self.parts[0].skipped()
    }

    fn text_variables(&self) -> &[TextVariable] {
        &self.texts
    }

    fn dim_labels(&self) -> &[DimLabels] {
        &self.labels
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        let (v, _) = self.region_of(var, start, count, out.len())?;
        let missing = || {
            SourceError::from(tet_source::Request::NotReadable {
                name: v.name.clone(),
                why: "vanished from an input",
            })
        };
        let (axis, starts) = match &self.plans[var] {
            Plan::First => {
                let i = index_of(self.parts[0].as_ref(), &v.name).ok_or_else(missing)?;
                return self.parts[0].read_region(i, start, count, out);
            }
            Plan::Along { axis, starts } => (*axis, starts),
        };
        let elem = v.dtype.size();
        let outer: usize = count[..axis].iter().product::<u64>() as usize;
        let inner: usize = count[axis + 1..].iter().product::<u64>() as usize * elem;
        let (lo, hi) = (start[axis], start[axis] + count[axis]);
        for (k, w) in starts.windows(2).enumerate() {
            let (p0, p1) = (w[0].max(lo), w[1].min(hi));
            if p0 >= p1 {
                continue;
            }
            let i = index_of(self.parts[k].as_ref(), &v.name).ok_or_else(missing)?;
            let mut s = start.to_vec();
            let mut c = count.to_vec();
            s[axis] = p0 - w[0];
            c[axis] = p1 - p0;
            let n = (p1 - p0) as usize;
            let mut buf = vec![0u8; outer * n * inner];
            self.parts[k].read_region(i, &s, &c, &mut buf)?;
            if let Some(r) = self.rebases.get(k).copied().flatten() {
                if v.name == self.dim && v.shape.len() == 1 {
                    rebase_values(&r, v, &mut buf)?;
                }
            }
            // Scatter: each outer index holds `n` positions of the axis in a row.
            let at = (p0 - lo) as usize;
            let full = count[axis] as usize;
            for o in 0..outer {
                let src = &buf[o * n * inner..(o + 1) * n * inner];
                let dst = (o * full + at) * inner;
                out[dst..dst + n * inner].copy_from_slice(src);
            }
        }
        Ok(())
    }

    fn parallel_reads(&self) -> bool {
        self.parts.iter().all(|p| p.parallel_reads())
    }
}

/// The coordinate values in `buf` rebased in place (checked exact when the inputs were
/// compared; an input that changed since is an error, not other values).
fn rebase_values(r: &cftime::Rebase, v: &Variable, buf: &mut [u8]) -> Result<()> {
    let t = v.dtype;
    let integer = !matches!(
        t,
        tet_source::ElementType::F32 | tet_source::ElementType::F64
    );
    let size = t.size();
    for cell in buf.chunks_exact_mut(size) {
        let x = crate::meta::element_values(cell, t)
            .first()
            .copied()
            .and_then(|x| r.apply(x, integer));
        if !x.is_some_and(|x| put_value(x, t, cell)) {
            return Err(tet_source::Part::Values.malformed(format!(
                "{} changed: a value has no exact rebased value",
                v.name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tet_source::{ElementType, Role};

    /// One input: `time` (hours `t0..t0+n`) and `v[time, 2]` = 10 × hour + column, plus `grid[2]`.
    struct Part {
        vars: Vec<Variable>,
        t0: u64,
        grid: [f32; 2],
    }

    fn part(t0: u64, n: u64, units: &str, grid: [f32; 2]) -> Box<dyn Source> {
        let mut time = Variable::new("time", ElementType::F64, vec![n]);
        time.dims = Some(vec!["time".into()]);
        time.role = Role::Coordinate;
        time.attrs = vec![("units".into(), AttrValue::Text(units.into()))];
        let mut v = Variable::new("v", ElementType::F32, vec![n, 2]);
        v.dims = Some(vec!["time".into(), "x".into()]);
        let mut g = Variable::new("grid", ElementType::F32, vec![2]);
        g.dims = Some(vec!["x".into()]);
        Box::new(Part {
            vars: vec![time, v, g],
            t0,
            grid,
        })
    }

    impl Source for Part {
        fn variables(&self) -> &[Variable] {
            &self.vars
        }
        fn read_region(
            &self,
            var: usize,
            start: &[u64],
            count: &[u64],
            out: &mut [u8],
        ) -> Result<()> {
            self.region_of(var, start, count, out.len())?;
            match var {
                0 => {
                    for (i, o) in out.chunks_exact_mut(8).enumerate() {
                        let t = (self.t0 + start[0] + i as u64) as f64;
                        o.copy_from_slice(&t.to_le_bytes());
                    }
                }
                1 => {
                    let mut i = 0;
                    for t in start[0]..start[0] + count[0] {
                        for x in start[1]..start[1] + count[1] {
                            let val = ((self.t0 + t) * 10 + x) as f32;
                            out[i..i + 4].copy_from_slice(&val.to_le_bytes());
                            i += 4;
                        }
                    }
                }
                _ => {
                    for (o, g) in out.chunks_exact_mut(4).zip(&self.grid[start[0] as usize..]) {
                        o.copy_from_slice(&g.to_le_bytes());
                    }
                }
            }
            Ok(())
        }
    }

    const H: &str = "hours since 2000-01-01";

    fn named(parts: Vec<Box<dyn Source>>) -> Vec<(String, Box<dyn Source>)> {
        parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| (format!("in{i}.nc"), p))
            .collect()
    }

    #[test]
    fn inputs_are_combined_in_coordinate_order() {
        // Given out of order: 5..8, 0..5, 8..10.
        let parts = named(vec![
            part(5, 3, H, [1., 2.]),
            part(0, 5, H, [1., 2.]),
            part(8, 2, H, [1., 2.]),
        ]);
        let c = Concat::new(parts, "time", false).unwrap();
        assert_eq!(c.variables()[1].shape, [10, 2]);
        // A region across all three inputs, one column.
        let mut out = vec![0u8; 8 * 4];
        c.read_region(1, &[1, 1], &[8, 1], &mut out).unwrap();
        let got: Vec<f32> = out
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let want: Vec<f32> = (1..9).map(|t| (t * 10 + 1) as f32).collect();
        assert_eq!(got, want);
        let mut t = vec![0u8; 80];
        c.read_region(0, &[0], &[10], &mut t).unwrap();
        assert_eq!(f64::from_le_bytes(t[72..80].try_into().unwrap()), 9.0);
    }

    #[test]
    fn disagreements_name_both_inputs() {
        let err = |parts: Vec<Box<dyn Source>>| {
            Concat::new(named(parts), "time", false)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let e = err(vec![part(0, 5, H, [1., 2.]), part(3, 5, H, [1., 2.])]);
        assert!(
            e.contains("in0.nc and in1.nc") && e.contains("overlap"),
            "{e}"
        );
        let e = err(vec![
            part(0, 5, H, [1., 2.]),
            part(5, 5, "months since 2000-01-01", [1., 2.]),
        ]);
        assert!(
            e.contains("in0.nc and in1.nc: time units differ")
                && e.contains(H)
                && e.contains("months since 2000-01-01"),
            "{e}"
        );
        // Days into hours: rebased (5 days = 120 hours), ordered by instant.
        let c = Concat::new(
            named(vec![
                part(5, 5, "days since 2000-01-01", [1., 2.]),
                part(0, 5, H, [1., 2.]),
            ]),
            "time",
            false,
        )
        .unwrap();
        let mut t = vec![0u8; 80];
        c.read_region(0, &[0], &[10], &mut t).unwrap();
        let at = |k: usize| f64::from_le_bytes(t[k * 8..k * 8 + 8].try_into().unwrap());
        assert_eq!((at(4), at(5), at(9)), (4.0, 120.0, 216.0));
        // Hours that no whole day holds, in an integer... here f64 days: 1/3 day is no f64.
        let e = err(vec![
            part(0, 5, "days since 2000-01-01", [1., 2.]),
            part(200, 5, H, [1., 2.]),
        ]);
        assert!(e.contains("units differ") && e.contains("exact"), "{e}");
        let e = err(vec![part(0, 5, H, [1., 2.]), part(5, 5, H, [1., 3.])]);
        assert!(e.contains("grid differs"), "{e}");
        let r = Concat::new(
            named(vec![part(0, 5, H, [1., 2.]), part(5, 5, H, [1., 3.])]),
            "time",
            false,
        );
        assert!(
            matches!(&r, Err(ConcatError::ValuesDiffer { first, other, var, .. })
                if first == "in0.nc" && other == "in1.nc" && var == "grid"),
            "{:?}",
            r.err()
        );
        assert!(Concat::new(
            named(vec![part(0, 5, H, [1., 2.]), part(5, 5, H, [1., 3.])]),
            "time",
            true
        )
        .is_ok());
        // A variable missing from the second input.
        struct Less(Box<dyn Source>);
        impl Source for Less {
            fn variables(&self) -> &[Variable] {
                &self.0.variables()[..2]
            }
            fn read_region(&self, v: usize, s: &[u64], c: &[u64], o: &mut [u8]) -> Result<()> {
                self.0.read_region(v, s, c, o)
            }
        }
        let short: Box<dyn Source> = Box::new(Less(part(5, 5, H, [1., 2.])));
        let e = err(vec![part(0, 5, H, [1., 2.]), short]);
        assert!(e.contains("grid is missing from in1.nc"), "{e}");
    }
}
