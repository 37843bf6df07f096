//! Choosing and cutting while converting: `--variables`/`--exclude` (names or globs),
//! `--isel DIM=START:STOP[:STEP]` (by index, numpy slice semantics) and `--sel DIM=LOW:HIGH`
//! (by coordinate value, inclusive; ISO 8601 dates on CF time axes).
//!
//! [`Selected`] is a [`Source`] over the importer's source, as [`crate::lower::Lowered`] is: the
//! pipeline only wraps the opened source ([`apply`]) and sees fewer variables, cut shapes, cut
//! text variables and cut dimension labels. A region of a cut variable is mapped to the source
//! region it comes from, so a chunked source reads only the chunks that intersect the cut; with a
//! step the covering region is read and picked from when it is at most a few times the region
//! (else the region is split along its outermost axis), so memory stays bounded by the chunk.
//! The fast paths are mapped where that is exact (a plain cut along the first axis is still one
//! file extent; a step-1 cut still finds whole stored zstd frames, which the source only hands
//! out for exactly one stored chunk) and are off otherwise.
//!
//! Coordinate variables of what is chosen come along, and the variables its `coordinates`,
//! `bounds` and `ancillary_variables` attributes name (NCO's convention), unless `no_coords`;
//! an explicit `--exclude` wins. A variable without dimension names has the dims `dim_0`,
//! `dim_1`, … here (xarray's names).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use tet_source::{
    AttrValue, DimLabels, Fact, FileExtent, Result, Role, Skipped, Source, SourceError,
    TextVariable, Variable,
};

/// What to keep of a source: the options of the command line, as given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SelectOptions {
    /// Names or globs of the variables to keep (empty: all).
    pub variables: Vec<String>,
    /// Names or globs of the variables to leave out.
    pub exclude: Vec<String>,
    /// Do not add coordinate and associated variables of the chosen ones.
    pub no_coords: bool,
    /// `DIM=START:STOP[:STEP]` cuts by index.
    pub isel: Vec<String>,
    /// `DIM=LOW:HIGH` cuts by coordinate value.
    pub sel: Vec<String>,
}

/// Why a selection cannot be made: a specification that does not parse, or one that does not
/// fit the input (each message names the flag or the variable it is about).
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// `--variables a,,b`.
    #[error("empty name in {list:?}")]
    EmptyName { list: String },
    /// A cut without `DIM=`.
    #[error("{flag} {spec:?}: expected DIM=…")]
    NoDimension { flag: &'static str, spec: String },
    /// An `--isel` that is not `DIM=START:STOP[:STEP]`.
    #[error("--isel {spec:?}: expected DIM=START:STOP[:STEP] (integers, each optional)")]
    IselSyntax { spec: String },
    /// `--isel DIM=::0`.
    #[error("--isel {spec:?}: the step cannot be zero")]
    ZeroStep { spec: String },
    /// A `--sel` that is not `DIM=LOW:HIGH`.
    #[error(
        "--sel {spec:?}: expected DIM=LOW:HIGH (numbers or ISO 8601 dates; LOW..HIGH also works)"
    )]
    SelSyntax { spec: String },
    /// A name, glob or dimension that matches nothing in the input; `closest`: the names
    /// nearest to it (at most three).
    #[error("{what} '{name}' matches nothing ({})", closest_text(.closest))]
    Unknown {
        what: String,
        name: String,
        closest: Vec<String>,
    },
    /// `--exclude` takes every variable chosen.
    #[error("the selection leaves no variable")]
    NothingLeft,
    /// An `--isel` that takes no position of its dimension.
    #[error("--isel {spec}: selects no position of {dim} (length {len})")]
    EmptyCut { spec: String, dim: String, len: u64 },
    /// Two cuts of one dimension.
    #[error("dimension {dim} is cut twice (--isel/--sel)")]
    CutTwice { dim: String },
    /// A `--sel` that does not fit its coordinate (the cause says how).
    #[error("--sel {spec}: {source}")]
    Sel {
        spec: String,
        #[source]
        source: Box<SelectError>,
    },
    /// `--sel` of a dimension with no coordinate variable.
    #[error("dimension {dim} has no coordinate variable (use --isel)")]
    NoCoordinate { dim: String },
    /// A coordinate variable too large to read into memory.
    #[error("coordinate {name} too large")]
    CoordinateTooLarge { name: String },
    /// Reading a coordinate variable failed.
    #[error("reading coordinate {name}: {source}")]
    ReadCoordinate {
        name: String,
        #[source]
        source: SourceError,
    },
    /// A bound that is not a number, on an axis that is not a CF time axis.
    #[error("{bound:?} is not a number and {dim} is not a CF time axis")]
    NotANumber { bound: String, dim: String },
    /// No coordinate value lies between the bounds; `range`: the first and last values.
    #[error("no position of {dim} lies in [{lo}, {hi}]{}", range_text(.range))]
    NoPosition {
        dim: String,
        lo: String,
        hi: String,
        range: Option<(f64, f64)>,
    },
    /// The positions between the bounds are not one run.
    #[error(
        "the coordinate {name} is not monotonic: the positions in [{lo}, {hi}] are not one run"
    )]
    NotMonotonic {
        name: String,
        lo: String,
        hi: String,
    },
    /// A cut dimension shorter in one variable than the cut reaches.
    #[error(
        "variable {variable}: dimension {dim} has {len} positions here, fewer than the cut \
         reaches (another variable gives {dim} another length)"
    )]
    ShortDimension {
        variable: String,
        dim: String,
        len: u64,
    },
    /// Labels (of a dimension, or a carried `.tet` footer's) shorter than the cut.
    #[error("labels shorter than the cut {cut}")]
    ShortLabels { cut: String },
    /// A text variable whose values do not fill its shape.
    #[error("text variable {name} has fewer values than its shape")]
    ShortText { name: String },
}

fn closest_text(closest: &[String]) -> String {
    if closest.is_empty() {
        "the input has none".into()
    } else {
        format!("closest: {}", closest.join(", "))
    }
}

fn range_text(range: &Option<(f64, f64)>) -> String {
    range.map_or_else(String::new, |(a, b)| {
        format!(" (values run from {a} to {b})")
    })
}

impl SelectOptions {
    /// Whether nothing is chosen or cut.
    pub fn is_empty(&self) -> bool {
        self.variables.is_empty()
            && self.exclude.is_empty()
            && !self.no_coords
            && self.isel.is_empty()
            && self.sel.is_empty()
    }

    /// Adds a comma-separated list of names or globs to `list` (`--variables a,b`).
    pub fn add_names(list: &mut Vec<String>, arg: &str) -> Result<(), SelectError> {
        for n in arg.split(',').map(str::trim) {
            if n.is_empty() {
                return Err(SelectError::EmptyName { list: arg.into() });
            }
            list.push(n.to_string());
        }
        Ok(())
    }

    /// Checks the cut specifications (what can be checked without the input).
    pub fn validate(&self) -> Result<(), SelectError> {
        for s in &self.isel {
            parse_isel(s)?;
        }
        for s in &self.sel {
            parse_sel(s)?;
        }
        Ok(())
    }
}

/// `source` as `opts` chooses and cuts it (`source` itself when `opts` is empty), with what a
/// carried `.tet` footer must be told of it.
pub fn apply(
    source: Box<dyn Source>,
    opts: &SelectOptions,
) -> Result<(Box<dyn Source>, Cuts), SelectError> {
    if opts.is_empty() {
        return Ok((source, Cuts::default()));
    }
    let s = Selected::new(source, opts)?;
    let cuts = Cuts {
        active: true,
        dims: s.dim_cuts.clone(),
    };
    Ok((Box::new(s), cuts))
}

/// The dimensions a selection cut, for the footer a `.tet` input carries over.
#[derive(Debug, Clone, Default)]
pub struct Cuts {
    active: bool,
    dims: BTreeMap<String, Cut>,
}

impl Cuts {
    /// Cuts the per-position labels of a carried `.tet` footer's datasets as the dimensions are
    /// cut, and drops its text variables (the source's, chosen and cut, replace them).
    pub fn cut_carried(
        &self,
        footer: &mut crate::format::footer::Footer,
    ) -> Result<(), SelectError> {
        if !self.active {
            return Ok(());
        }
        for meta in footer.datasets.values_mut() {
            for (dim, labels) in meta.coords.iter_mut() {
                if let Some(&c) = self.dims.get(dim) {
                    *labels = pick_labels(labels, c)?;
                }
            }
        }
        footer.ext.text_variables = None;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Specifications

/// One parsed `--isel`: a numpy slice of a dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slice {
    start: Option<i64>,
    stop: Option<i64>,
    step: i64,
}

fn split_dim(spec: &str, flag: &'static str) -> Result<(String, String), SelectError> {
    let (dim, rest) = spec
        .split_once('=')
        .filter(|(d, _)| !d.trim().is_empty())
        .ok_or_else(|| SelectError::NoDimension {
            flag,
            spec: spec.into(),
        })?;
    Ok((dim.trim().to_string(), rest.trim().to_string()))
}

fn parse_isel(spec: &str) -> Result<(String, Slice), SelectError> {
    let (dim, rest) = split_dim(spec, "--isel")?;
    let bad = || SelectError::IselSyntax { spec: spec.into() };
    let parts: Vec<&str> = rest.split(':').map(str::trim).collect();
    if parts.len() < 2 || parts.len() > 3 {
        return Err(bad());
    }
    let int = |s: &str| -> Result<Option<i64>, SelectError> {
        if s.is_empty() {
            Ok(None)
        } else {
            s.parse::<i64>().map(Some).map_err(|_| bad())
        }
    };
    let step = match parts.get(2) {
        Some(s) => int(s)?.unwrap_or(1),
        None => 1,
    };
    if step == 0 {
        return Err(SelectError::ZeroStep { spec: spec.into() });
    }
    Ok((
        dim,
        Slice {
            start: int(parts[0])?,
            stop: int(parts[1])?,
            step,
        },
    ))
}

/// Whether `s` can be one bound of a `--sel`: empty, a number, or an ISO 8601 date or date-time
/// (`YYYY-MM[-DD[(T| )hh[:mm[:ss[.f]]]]]`).
fn is_bound(s: &str) -> bool {
    if s.is_empty() || s.parse::<f64>().is_ok() {
        return true;
    }
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    if !(digits(0..4) && b.get(4) == Some(&b'-') && digits(5..7)) {
        return false;
    }
    let mut i = 7;
    if b.len() == i {
        return true;
    }
    if !(b.get(i) == Some(&b'-') && digits(i + 1..i + 3)) {
        return false;
    }
    i += 3;
    if b.len() == i {
        return true;
    }
    if !matches!(b.get(i), Some(b'T' | b' ')) || !digits(i + 1..i + 3) {
        return false;
    }
    i += 3;
    for _ in 0..2 {
        if b.len() == i {
            return true;
        }
        if !(b.get(i) == Some(&b':') && digits(i + 1..i + 3)) {
            return false;
        }
        i += 3;
    }
    b.len() == i || (b.get(i) == Some(&b'.') && digits(i + 1..b.len()) && b.len() > i + 1)
}

fn parse_sel(spec: &str) -> Result<(String, String, String), SelectError> {
    let (dim, rest) = split_dim(spec, "--sel")?;
    if let Some((lo, hi)) = rest.split_once("..") {
        if is_bound(lo.trim()) && is_bound(hi.trim()) {
            return Ok((dim, lo.trim().into(), hi.trim().into()));
        }
    }
    // ISO times hold colons too: the separator is the one colon with a bound on either side.
    let splits: Vec<(&str, &str)> = rest
        .match_indices(':')
        .map(|(i, _)| (rest[..i].trim(), rest[i + 1..].trim()))
        .filter(|(lo, hi)| is_bound(lo) && is_bound(hi))
        .collect();
    match splits.as_slice() {
        [(lo, hi)] => Ok((dim, lo.to_string(), hi.to_string())),
        _ => Err(SelectError::SelSyntax { spec: spec.into() }),
    }
}

/// The positions `slice` takes of an axis of `len` (Python's `slice.indices`): first, step, count.
fn slice_positions(s: Slice, len: u64) -> Option<Cut> {
    let len = i128::from(len);
    let step = i128::from(s.step);
    let (lower, upper) = if step > 0 { (0, len) } else { (-1, len - 1) };
    let norm = |v: Option<i64>, default: i128| match v {
        None => default,
        Some(v) if v < 0 => (i128::from(v) + len).max(lower),
        Some(v) => i128::from(v).min(upper),
    };
    let start = norm(s.start, if step > 0 { lower } else { upper });
    let stop = norm(s.stop, if step > 0 { upper } else { lower });
    let count = if step > 0 && stop > start {
        (stop - start - 1) / step + 1
    } else if step < 0 && start > stop {
        (start - stop - 1) / (-step) + 1
    } else {
        0
    };
    Some(Cut {
        start: u64::try_from(start.max(0)).ok()?,
        step: s.step,
        len: u64::try_from(count).ok()?,
    })
}

// ---------------------------------------------------------------------------------------------
// Names

/// Whether `name` matches the glob `pat` (`*`, `?`, `[abc]`, `[a-z]`, `[!abc]`).
fn glob_match(pat: &[char], name: &[char]) -> bool {
    match pat.first() {
        None => name.is_empty(),
        Some('*') => (0..=name.len()).any(|i| glob_match(&pat[1..], &name[i..])),
        Some('?') => !name.is_empty() && glob_match(&pat[1..], &name[1..]),
        Some('[') => {
            let Some(close) = pat.iter().skip(2).position(|&c| c == ']').map(|p| p + 2) else {
                return name.first() == Some(&'[') && glob_match(&pat[1..], &name[1..]);
            };
            let Some(&c) = name.first() else {
                return false;
            };
            let (negate, set) = match pat[1] {
                '!' | '^' => (true, &pat[2..close]),
                _ => (false, &pat[1..close]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == '-' {
                    hit |= set[i] <= c && c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != negate && glob_match(&pat[close + 1..], &name[1..])
        }
        Some(&p) => name.first() == Some(&p) && glob_match(&pat[1..], &name[1..]),
    }
}

fn matches(pat: &str, name: &str) -> bool {
    if !pat.contains(['*', '?', '[']) {
        return pat == name;
    }
    let p: Vec<char> = pat.chars().collect();
    let n: Vec<char> = name.chars().collect();
    glob_match(&p, &n)
}

/// Edit distance (insertions, deletions, substitutions).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The names of `known` nearest to `name` (edit distance), at most three: what an error about
/// a name that matches nothing suggests (`--variables`, `--chunk`, `--concat`).
pub(crate) fn closest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut known: Vec<(usize, &str)> = known.map(|k| (distance(name, k), k)).collect();
    known.sort();
    known.dedup();
    known.iter().take(3).map(|k| k.1.to_string()).collect()
}

/// `(closest: a, b, c)` of [`closest`]'s names, or `(the input has none)`.
pub(crate) fn closest_note(closest: &[String]) -> String {
    format!("({})", closest_text(closest))
}

/// `what 'name' matches nothing (closest: a, b, c)`.
fn unknown<'a>(what: &str, name: &str, known: impl Iterator<Item = &'a str>) -> SelectError {
    SelectError::Unknown {
        what: what.into(),
        name: name.into(),
        closest: closest(name, known),
    }
}

/// The dims of a variable by name (`dim_0`, `dim_1`, … when the source names none).
pub(crate) fn dims_of(dims: Option<&Vec<String>>, rank: usize) -> Vec<String> {
    match dims {
        Some(d) if d.len() == rank => d.clone(),
        _ => (0..rank).map(|i| format!("dim_{i}")).collect(),
    }
}

/// Names a variable's attribute `key` lists (space separated), resolved against `known`: as
/// given, or in the variable's own group.
fn named_by(
    var_name: &str,
    attrs: &[(String, AttrValue)],
    known: &BTreeSet<String>,
) -> Vec<String> {
    let group = var_name.rsplit_once('/').map(|(g, _)| g);
    let mut out = Vec::new();
    for key in ["coordinates", "bounds", "ancillary_variables"] {
        let Some((_, AttrValue::Text(t))) = attrs.iter().find(|(k, _)| k == key) else {
            continue;
        };
        for n in t.split_whitespace() {
            let n = n.trim_start_matches('/');
            let in_group = group.map(|g| format!("{g}/{n}"));
            if let Some(found) = in_group.filter(|g| known.contains(g)) {
                out.push(found);
            } else if known.contains(n) {
                out.push(n.to_string());
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The source

/// The positions a cut takes of one axis: `start`, `start + step`, … (`len` of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cut {
    start: u64,
    step: i64,
    len: u64,
}

impl Cut {
    fn whole(len: u64) -> Cut {
        Cut {
            start: 0,
            step: 1,
            len,
        }
    }

    /// The source position of position `i` of the cut.
    fn at(self, i: u64) -> Option<u64> {
        let off = i128::from(i).checked_mul(i128::from(self.step))?;
        u64::try_from(i128::from(self.start).checked_add(off)?).ok()
    }

    fn describe(self) -> String {
        format!("{}+{}×{}", self.start, self.len, self.step)
    }
}

/// A kept variable: its source index and the cut of each axis (`None`: not cut).
#[derive(Debug, Clone)]
struct Kept {
    src: usize,
    cuts: Option<Vec<Cut>>,
}

/// A source with some variables left out and some dimensions cut (see the module docs).
pub struct Selected {
    inner: Box<dyn Source>,
    vars: Vec<Variable>,
    kept: Vec<Kept>,
    texts: Vec<TextVariable>,
    labels: Vec<DimLabels>,
    /// The cut of each cut dimension, by name.
    dim_cuts: BTreeMap<String, Cut>,
}

impl Selected {
    /// Chooses and cuts `inner` as `opts` says; an error names what matches nothing.
    pub fn new(inner: Box<dyn Source>, opts: &SelectOptions) -> Result<Selected, SelectError> {
        let keep = choose(inner.as_ref(), opts)?;
        let dim_cuts = dimension_cuts(inner.as_ref(), opts)?;
        let mut vars = Vec::new();
        let mut kept = Vec::new();
        for (i, v) in inner.variables().iter().enumerate() {
            if !keep.contains(&v.name) {
                continue;
            }
            let (var, cuts) = cut_variable(v, &dim_cuts)?;
            vars.push(var);
            kept.push(Kept { src: i, cuts });
        }
        let texts = inner
            .text_variables()
            .iter()
            .filter(|t| keep.contains(&t.name))
            .map(|t| cut_text(t, &dim_cuts))
            .collect::<Result<Vec<_>, SelectError>>()?;
        let labels = inner
            .dim_labels()
            .iter()
            .map(|l| match dim_cuts.get(&l.dim) {
                Some(&c) => pick_labels(&l.labels, c).map(|labels| DimLabels {
                    dim: l.dim.clone(),
                    labels,
                }),
                None => Ok(l.clone()),
            })
            .collect::<Result<Vec<_>, SelectError>>()?;
        Ok(Selected {
            inner,
            vars,
            kept,
            texts,
            labels,
            dim_cuts,
        })
    }

    fn kept(&self, var: usize) -> Result<&Kept> {
        self.kept.get(var).ok_or_else(|| {
            tet_source::Request::NoVariable {
                var,
                count: self.kept.len(),
            }
            .into()
        })
    }

    /// Reads the source positions `first + i × step` (`count` per axis) of source variable
    /// `src` into `out`, C order.
    fn read_mapped(
        &self,
        src: usize,
        first: &[u64],
        step: &[i64],
        count: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        if step.iter().all(|&s| s == 1) {
            return self.inner.read_region(src, first, count, out);
        }
        if count.contains(&0) {
            return Ok(());
        }
        let elem = self.inner.variables()[src].dtype.size() as u64;
        let overflow = || SourceError::from(tet_source::Request::TooLarge);
        // The covering region: lowest position and span per axis.
        let mut lo = Vec::with_capacity(first.len());
        let mut span = Vec::with_capacity(first.len());
        for a in 0..first.len() {
            let reach = (count[a] - 1)
                .checked_mul(step[a].unsigned_abs())
                .ok_or_else(overflow)?;
            let low = if step[a] > 0 {
                first[a]
            } else {
                first[a].checked_sub(reach).ok_or_else(overflow)?
            };
            lo.push(low);
            span.push(reach.checked_add(1).ok_or_else(overflow)?);
        }
        let cover = span
            .iter()
            .try_fold(elem, |acc, &s| acc.checked_mul(s))
            .ok_or_else(overflow)?;
        let cap = (out.len() as u64).saturating_mul(4).max(1 << 20);
        if cover <= cap {
            let mut buf = vec![0u8; usize::try_from(cover).map_err(|_| overflow())?];
            self.inner.read_region(src, &lo, &span, &mut buf)?;
            pick(&buf, &span, first, &lo, step, count, elem as usize, out);
            return Ok(());
        }
        // Too sparse to cover: one slab of the outermost axis with more than one position at a
        // time (earlier axes have one position, so each slab is contiguous in `out`).
        let Some(a) = count.iter().position(|&c| c > 1) else {
            return Err(overflow());
        };
        let slab = out.len() / count[a] as usize;
        let mut f = first.to_vec();
        let mut c = count.to_vec();
        c[a] = 1;
        for (i, chunk) in out.chunks_exact_mut(slab).enumerate() {
            let off = i128::from(i as u64) * i128::from(step[a]);
            f[a] = u64::try_from(i128::from(first[a]) + off).map_err(|_| overflow())?;
            self.read_mapped(src, &f, step, &c, chunk)?;
        }
        Ok(())
    }

    /// The cut of variable `var` when it is a plain cut along its first axis only (one run of
    /// the source's C-order bytes): the byte offset of the run inside the source variable.
    fn first_axis_run(&self, var: usize) -> Option<(usize, u64)> {
        let k = self.kept.get(var)?;
        let Some(cuts) = &k.cuts else {
            return Some((k.src, 0));
        };
        let v = &self.inner.variables()[k.src];
        let whole_after = cuts
            .iter()
            .zip(&v.shape)
            .skip(1)
            .all(|(c, &n)| *c == Cut::whole(n));
        if !whole_after || cuts.first()?.step != 1 {
            return None;
        }
        let row = v.shape[1..]
            .iter()
            .try_fold(v.dtype.size() as u64, |acc, &n| acc.checked_mul(n))?;
        Some((k.src, cuts[0].start.checked_mul(row)?))
    }

    /// The source region behind a region of a step-1 cut variable.
    fn step1_region(&self, var: usize, start: &[u64]) -> Option<(usize, Vec<u64>)> {
        let k = self.kept.get(var)?;
        match &k.cuts {
            None => Some((k.src, start.to_vec())),
            Some(cuts) if cuts.iter().all(|c| c.step == 1) && cuts.len() == start.len() => {
                let s = cuts
                    .iter()
                    .zip(start)
                    .map(|(c, &s)| c.start.checked_add(s))
                    .collect::<Option<Vec<u64>>>()?;
                Some((k.src, s))
            }
            Some(_) => None,
        }
    }
}

/// Copies the positions `first + i × step` out of the covering region `buf` (shape `span`,
/// origin `lo`) into `out`.
#[allow(clippy::too_many_arguments)]
fn pick(
    buf: &[u8],
    span: &[u64],
    first: &[u64],
    lo: &[u64],
    step: &[i64],
    count: &[u64],
    elem: usize,
    out: &mut [u8],
) {
    let rank = count.len();
    // Element strides of the covering region.
    let mut stride = vec![1i128; rank];
    for a in (0..rank.saturating_sub(1)).rev() {
        stride[a] = stride[a + 1] * i128::from(span[a + 1]);
    }
    let base: i128 = (0..rank)
        .map(|a| i128::from(first[a] - lo[a]) * stride[a])
        .sum();
    let delta: Vec<i128> = (0..rank).map(|a| i128::from(step[a]) * stride[a]).collect();
    let mut idx = vec![0u64; rank];
    let mut at = base;
    for o in out.chunks_exact_mut(elem) {
        let from = at as usize * elem;
        o.copy_from_slice(&buf[from..from + elem]);
        // Odometer over the output positions, C order.
        for a in (0..rank).rev() {
            idx[a] += 1;
            at += delta[a];
            if idx[a] < count[a] {
                break;
            }
            at -= delta[a] * i128::from(count[a]);
            idx[a] = 0;
        }
    }
}

fn pick_labels(labels: &[String], c: Cut) -> Result<Vec<String>, SelectError> {
    (0..c.len)
        .map(|i| {
            c.at(i)
                .and_then(|p| labels.get(p as usize))
                .cloned()
                .ok_or_else(|| SelectError::ShortLabels { cut: c.describe() })
        })
        .collect()
}

/// The names of the variables to keep.
fn choose(src: &dyn Source, opts: &SelectOptions) -> Result<BTreeSet<String>, SelectError> {
    let all: Vec<&str> = src
        .variables()
        .iter()
        .map(|v| v.name.as_str())
        .chain(src.text_variables().iter().map(|t| t.name.as_str()))
        .collect();
    let matching = |flag: &str, pats: &[String]| -> Result<BTreeSet<String>, SelectError> {
        let mut set = BTreeSet::new();
        for p in pats {
            let hits: Vec<&str> = all.iter().copied().filter(|n| matches(p, n)).collect();
            if hits.is_empty() {
                return Err(unknown(flag, p, all.iter().copied()));
            }
            set.extend(hits.into_iter().map(String::from));
        }
        Ok(set)
    };
    let excluded = matching("--exclude", &opts.exclude)?;
    let mut keep = if opts.variables.is_empty() {
        all.iter().map(|s| s.to_string()).collect()
    } else {
        matching("--variables", &opts.variables)?
    };
    keep.retain(|n| !excluded.contains(n));
    if !opts.no_coords {
        let known: BTreeSet<String> = all.iter().map(|s| s.to_string()).collect();
        // Coordinates of the dims, and what attributes name, until nothing more comes along.
        let mut todo: Vec<String> = keep.iter().cloned().collect();
        while let Some(name) = todo.pop() {
            for extra in associated(src, &name, &known) {
                if !excluded.contains(&extra) && keep.insert(extra.clone()) {
                    todo.push(extra);
                }
            }
        }
    }
    if keep.is_empty() {
        return Err(SelectError::NothingLeft);
    }
    Ok(keep)
}

/// The coordinate variables of `name`'s dims and the variables its attributes name.
fn associated(src: &dyn Source, name: &str, known: &BTreeSet<String>) -> Vec<String> {
    let (dims, attrs) = if let Some(v) = src.variables().iter().find(|v| v.name == name) {
        (v.dims.clone().unwrap_or_default(), &v.attrs)
    } else if let Some(t) = src.text_variables().iter().find(|t| t.name == name) {
        (t.dims.clone().unwrap_or_default(), &t.attrs)
    } else {
        return Vec::new();
    };
    let group = name.rsplit_once('/').map(|(g, _)| g);
    let mut out = named_by(name, attrs, known);
    for d in dims {
        let candidates = [group.map(|g| format!("{g}/{d}")), Some(d.clone())];
        let coord = candidates.into_iter().flatten().find(|c| {
            src.variables().iter().any(|v| {
                &v.name == c
                    && v.shape.len() == 1
                    && (v.role == Role::Coordinate || v.dims.as_ref().is_some_and(|x| x[0] == d))
            }) || src
                .text_variables()
                .iter()
                .any(|t| &t.name == c && t.shape.len() == 1)
        });
        out.extend(coord);
    }
    out
}

/// Every dimension's length, by name, as the variables give it.
fn dimension_lengths(src: &dyn Source) -> BTreeMap<String, u64> {
    let mut lens = BTreeMap::new();
    for v in src.variables() {
        for (d, &n) in dims_of(v.dims.as_ref(), v.shape.len())
            .into_iter()
            .zip(&v.shape)
        {
            lens.entry(d).or_insert(n);
        }
    }
    for t in src.text_variables() {
        for (d, &n) in dims_of(t.dims.as_ref(), t.shape.len())
            .into_iter()
            .zip(&t.shape)
        {
            lens.entry(d).or_insert(n);
        }
    }
    lens
}

/// The cut of every dimension `--isel`/`--sel` names.
fn dimension_cuts(
    src: &dyn Source,
    opts: &SelectOptions,
) -> Result<BTreeMap<String, Cut>, SelectError> {
    let lens = dimension_lengths(src);
    let mut cuts = BTreeMap::new();
    let len_of = |dim: &str, flag: &str| {
        lens.get(dim).copied().ok_or_else(|| {
            unknown(
                &format!("{flag} dimension"),
                dim,
                lens.keys().map(String::as_str),
            )
        })
    };
    for spec in &opts.isel {
        let (dim, s) = parse_isel(spec)?;
        let len = len_of(&dim, "--isel")?;
        let cut = slice_positions(s, len)
            .filter(|c| c.len > 0)
            .ok_or_else(|| SelectError::EmptyCut {
                spec: spec.clone(),
                dim: dim.clone(),
                len,
            })?;
        if cuts.insert(dim.clone(), cut).is_some() {
            return Err(SelectError::CutTwice { dim });
        }
    }
    for spec in &opts.sel {
        let (dim, lo, hi) = parse_sel(spec)?;
        len_of(&dim, "--sel")?;
        let cut = value_cut(src, &dim, &lo, &hi).map_err(|e| SelectError::Sel {
            spec: spec.clone(),
            source: Box::new(e),
        })?;
        if cuts.insert(dim.clone(), cut).is_some() {
            return Err(SelectError::CutTwice { dim });
        }
    }
    Ok(cuts)
}

/// The positions of `dim` whose coordinate value lies between `lo` and `hi` (inclusive, either
/// open when empty): numbers compare as numbers; on a CF time axis ISO 8601 bounds compare with
/// the positions' dates as far as the bound is written (`2000-01-02` takes the whole day).
fn value_cut(src: &dyn Source, dim: &str, lo: &str, hi: &str) -> Result<Cut, SelectError> {
    let (i, v) = src
        .variables()
        .iter()
        .enumerate()
        .find(|(_, v)| {
            v.shape.len() == 1
                && (v.name == dim || v.name.rsplit('/').next() == Some(dim))
                && v.dims.as_ref().is_none_or(|d| d[0] == dim)
        })
        .ok_or_else(|| SelectError::NoCoordinate { dim: dim.into() })?;
    let n = v.shape[0];
    let bytes = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_mul(v.dtype.size()))
        .ok_or_else(|| SelectError::CoordinateTooLarge {
            name: v.name.clone(),
        })?;
    let mut buf = vec![0u8; bytes];
    src.read_region(i, &[0], &[n], &mut buf)
        .map_err(|source| SelectError::ReadCoordinate {
            name: v.name.clone(),
            source,
        })?;
    let values = crate::meta::element_values(&buf, v.dtype);
    let numeric = |s: &str| -> Result<Option<f64>, SelectError> {
        if s.is_empty() {
            return Ok(None);
        }
        s.parse::<f64>()
            .map(Some)
            .map_err(|_| SelectError::NotANumber {
                bound: s.into(),
                dim: dim.into(),
            })
    };
    let iso = |s: &str| s.is_empty() || s.parse::<f64>().is_err();
    let inside: Vec<bool> = if iso(lo) && iso(hi) && time_axis(v) {
        let labels = crate::meta::coordinate_labels(&buf, v.dtype, &v.attrs);
        labels
            .iter()
            .map(|l| {
                let low_ok = lo.is_empty() || l.get(..lo.len()).unwrap_or(l) >= lo;
                let high_ok = hi.is_empty() || l.get(..hi.len()).unwrap_or(l) <= hi;
                low_ok && high_ok
            })
            .collect()
    } else {
        let (a, b) = (numeric(lo)?, numeric(hi)?);
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) if a > b => (Some(b), Some(a)),
            other => other,
        };
        values
            .iter()
            .map(|&x| a.is_none_or(|a| x >= a) && b.is_none_or(|b| x <= b))
            .collect()
    };
    let first = inside.iter().position(|&b| b);
    let last = inside.iter().rposition(|&b| b);
    let (Some(first), Some(last)) = (first, last) else {
        return Err(SelectError::NoPosition {
            dim: dim.into(),
            lo: lo.into(),
            hi: hi.into(),
            range: values.first().copied().zip(values.last().copied()),
        });
    };
    if inside[first..=last].iter().any(|&b| !b) {
        return Err(SelectError::NotMonotonic {
            name: v.name.clone(),
            lo: lo.into(),
            hi: hi.into(),
        });
    }
    Ok(Cut {
        start: first as u64,
        step: 1,
        len: (last - first + 1) as u64,
    })
}

fn time_axis(v: &Variable) -> bool {
    v.attrs.iter().any(|(k, a)| {
        k == "units"
            && matches!(a, AttrValue::Text(t) if crate::meta::cftime::parse_units(t).is_some())
    })
}

/// `v` with its cut dims cut: the new variable and the cut of each axis (`None`: none cut).
fn cut_variable(
    v: &Variable,
    dim_cuts: &BTreeMap<String, Cut>,
) -> Result<(Variable, Option<Vec<Cut>>), SelectError> {
    let cuts = axis_cuts(&v.name, v.dims.as_ref(), &v.shape, dim_cuts)?;
    if cuts.iter().zip(&v.shape).all(|(c, &n)| *c == Cut::whole(n)) {
        return Ok((v.clone(), None));
    }
    let mut out = v.clone();
    out.shape = cuts.iter().map(|c| c.len).collect();
    if let Some(chunks) = &mut out.layout.chunk_shape {
        for (c, cut) in chunks.iter_mut().zip(&cuts) {
            let per = c.div_ceil(cut.step.unsigned_abs().max(1));
            *c = per.clamp(1, cut.len.max(1));
        }
    }
    Ok((out, Some(cuts)))
}

/// The cut of each axis of a variable (whole where its dim is not cut); an error when a cut
/// dim is shorter here than the cut reaches (two variables giving one dim name two lengths).
fn axis_cuts(
    name: &str,
    dims: Option<&Vec<String>>,
    shape: &[u64],
    dim_cuts: &BTreeMap<String, Cut>,
) -> Result<Vec<Cut>, SelectError> {
    dims_of(dims, shape.len())
        .iter()
        .zip(shape)
        .map(|(d, &n)| match dim_cuts.get(d) {
            None => Ok(Cut::whole(n)),
            Some(&c) => {
                let fits = [0, c.len.saturating_sub(1)]
                    .iter()
                    .all(|&i| c.at(i).is_some_and(|p| p < n));
                if fits {
                    Ok(c)
                } else {
                    Err(SelectError::ShortDimension {
                        variable: name.into(),
                        dim: d.clone(),
                        len: n,
                    })
                }
            }
        })
        .collect()
}

/// A text variable with its cut dims cut.
fn cut_text(
    t: &TextVariable,
    dim_cuts: &BTreeMap<String, Cut>,
) -> Result<TextVariable, SelectError> {
    let cuts = axis_cuts(&t.name, t.dims.as_ref(), &t.shape, dim_cuts)?;
    let short = || SelectError::ShortText {
        name: t.name.clone(),
    };
    let mut out = t.clone();
    out.shape = cuts.iter().map(|c| c.len).collect();
    let total = out
        .shape
        .iter()
        .try_fold(1u64, |acc, &n| acc.checked_mul(n))
        .filter(|&n| n <= t.values.len() as u64)
        .ok_or_else(short)?;
    let mut values = Vec::with_capacity(total as usize);
    let mut idx = vec![0u64; cuts.len()];
    for _ in 0..total {
        let mut flat = 0u64;
        for (a, c) in cuts.iter().enumerate() {
            flat = c
                .at(idx[a])
                .and_then(|p| flat.checked_mul(t.shape[a])?.checked_add(p))
                .ok_or_else(short)?;
        }
        let value = usize::try_from(flat).ok().and_then(|f| t.values.get(f));
        values.push(value.cloned().ok_or_else(short)?);
        for a in (0..cuts.len()).rev() {
            idx[a] += 1;
            if idx[a] < cuts[a].len {
                break;
            }
            idx[a] = 0;
        }
    }
    out.values = values;
    Ok(out)
}

impl Source for Selected {
    fn variables(&self) -> &[Variable] {
        &self.vars
    }

    fn global_attrs(&self) -> &[(String, AttrValue)] {
        self.inner.global_attrs()
    }

    fn global_facts(&self) -> &[Fact] {
        self.inner.global_facts()
    }

    fn skipped(&self) -> &[Skipped] {
        self.inner.skipped()
    }

    fn text_variables(&self) -> &[TextVariable] {
        &self.texts
    }

    fn dim_labels(&self) -> &[DimLabels] {
        &self.labels
    }

    fn read_region(&self, var: usize, start: &[u64], count: &[u64], out: &mut [u8]) -> Result<()> {
        self.region_of(var, start, count, out.len())?;
        let k = self.kept(var)?;
        let Some(cuts) = &k.cuts else {
            return self.inner.read_region(k.src, start, count, out);
        };
        let first = cuts
            .iter()
            .zip(start)
            .map(|(c, &s)| c.at(s))
            .collect::<Option<Vec<u64>>>()
            .ok_or(tet_source::Request::TooLarge)?;
        let step: Vec<i64> = cuts.iter().map(|c| c.step).collect();
        self.read_mapped(k.src, &first, &step, count, out)
    }

    fn parallel_reads(&self) -> bool {
        self.inner.parallel_reads()
    }

    fn file_extent(&self, var: usize) -> Option<FileExtent<'_>> {
        let (src, off) = self.first_axis_run(var)?;
        let ext = self.inner.file_extent(src)?;
        Some(FileExtent {
            file: ext.file,
            offset: ext.offset.checked_add(off)?,
        })
    }

    fn zstd_frames(&self, var: usize) -> bool {
        self.step1_region(
            var,
            &vec![0; self.vars.get(var).map_or(0, |v| v.shape.len())],
        )
        .is_some_and(|(src, _)| self.inner.zstd_frames(src))
    }

    fn zstd_frame(&self, var: usize, start: &[u64], count: &[u64]) -> Result<Option<Vec<u8>>> {
        match self.step1_region(var, start) {
            Some((src, s)) => self.inner.zstd_frame(src, &s, count),
            None => Ok(None),
        }
    }

    fn contiguous_bytes(&self, var: usize) -> Option<&[u8]> {
        let (src, off) = self.first_axis_run(var)?;
        let bytes = self.inner.contiguous_bytes(src)?;
        let len = self.vars.get(var)?.byte_len()?;
        let off = usize::try_from(off).ok()?;
        bytes.get(off..off.checked_add(usize::try_from(len).ok()?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_follow_python() {
        let s = |start, stop, step| Slice { start, stop, step };
        let pos = |sl, n| slice_positions(sl, n).map(|c| (c.start, c.step, c.len));
        assert_eq!(pos(s(None, None, 1), 10), Some((0, 1, 10)));
        assert_eq!(pos(s(Some(-3), None, 1), 10), Some((7, 1, 3)));
        assert_eq!(pos(s(Some(2), Some(9), 3), 10), Some((2, 3, 3)));
        assert_eq!(pos(s(None, None, -1), 10), Some((9, -1, 10)));
        assert_eq!(pos(s(Some(8), Some(2), -2), 10), Some((8, -2, 3)));
        assert_eq!(pos(s(Some(20), Some(30), 1), 10).map(|p| p.2), Some(0));
        assert_eq!(pos(s(Some(-20), Some(3), 1), 10), Some((0, 1, 3)));
    }

    #[test]
    fn specs_parse() {
        assert_eq!(
            parse_isel("time=1:-1:2").unwrap().1,
            Slice {
                start: Some(1),
                stop: Some(-1),
                step: 2
            }
        );
        assert!(parse_isel("time=5").is_err());
        assert!(parse_isel("time=::0").is_err());
        assert_eq!(
            parse_sel("time=2000-01-01T06:00:2000-01-02").unwrap(),
            (
                "time".into(),
                "2000-01-01T06:00".into(),
                "2000-01-02".into()
            )
        );
        assert_eq!(
            parse_sel("lat=-10.5:20").unwrap(),
            ("lat".into(), "-10.5".into(), "20".into())
        );
        assert_eq!(
            parse_sel("x=:3").unwrap(),
            ("x".into(), String::new(), "3".into())
        );
        assert!(parse_sel("x=a:b").is_err());
    }

    #[test]
    fn globs_and_distance() {
        assert!(matches("t*", "temp"));
        assert!(matches("t?mp", "temp"));
        assert!(matches("[st]emp", "temp"));
        assert!(!matches("[!t]emp", "temp"));
        assert!(matches("g/*", "g/x"));
        assert!(!matches("temp", "temp2"));
        assert_eq!(distance("tmep", "temp"), 2);
        let e = unknown("--variables", "tmep", ["temp", "lat", "time"].into_iter());
        assert_eq!(
            e.to_string(),
            "--variables 'tmep' matches nothing (closest: temp, time, lat)"
        );
        let e = unknown("--isel dimension", "x", std::iter::empty());
        assert_eq!(
            e.to_string(),
            "--isel dimension 'x' matches nothing (the input has none)"
        );
    }

    #[test]
    fn pick_strided_and_reversed() {
        // A 3×3 covering region (origin [0, 1]) of u8 values 0..9: rows 2, 0 (step -2) of
        // columns 1, 3 (step 2) are covering positions (2, 0), (2, 2), (0, 0), (0, 2).
        let buf: Vec<u8> = (0..9).collect();
        let mut out = [0u8; 4];
        pick(
            &buf,
            &[3, 3],
            &[2, 1],
            &[0, 1],
            &[-2, 2],
            &[2, 2],
            1,
            &mut out,
        );
        let want = [6, 8, 0, 2];
        assert_eq!(out, want);
    }
}
