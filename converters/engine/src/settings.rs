//! The settings of one conversion: [`Settings`], one serde type that every front end builds —
//! the command line from its flags, a manifest's `[defaults]` and `[[job]]` keys and the batch
//! runner's worker protocol as its serde form, Python's `tet.convert` keyword arguments — and
//! the history params derived from it in one place ([`Settings::recorded_params`], [`FIELDS`]).
//!
//! What is no setting stays out: the inputs and the output (a request's, see
//! [`crate::pipeline::ConvertOptions`]), and the runtime context that is no part of the result
//! (progress, cancellation, storage credentials, the spool folder).
//!
//! Every field is either recorded in the history row (it can change the output's bytes, so a
//! batch re-run compares it) or runtime-only (it never changes the bytes); [`FIELDS`] says which,
//! and a test enumerates the fields through serde so that a new one cannot be forgotten.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::pipeline::CodecChoice;
use crate::planner::{parse_size, PlanError, PlanOptions};
use crate::select::{SelectError, SelectOptions};

/// Every setting of one conversion. Its serde form is the manifest's keys and the worker
/// protocol's options: unknown keys are refused, a key left out takes its default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// `--codec`: `auto`, `raw`, `zstd` or `zstd:LEVEL`.
    #[serde(with = "codec_text")]
    pub codec: CodecChoice,
    /// `--chunk-bytes`: target raw bytes per chunk (a number or a size such as `"4MiB"`).
    #[serde(deserialize_with = "size", skip_serializing_if = "Option::is_none")]
    pub chunk_bytes: Option<u64>,
    /// `--chunk`: extents by dimension (`time=1`) and chunk shapes by dataset (`t:1,721,1440`).
    #[serde(skip_serializing_if = "ChunkExtents::is_empty")]
    pub chunk: ChunkExtents,
    /// `--jobs`: worker threads (`None`: one per core). Never changes the output bytes.
    #[serde(deserialize_with = "jobs", skip_serializing_if = "Option::is_none")]
    pub jobs: Option<usize>,
    /// `--memory-budget`: chunk data in flight at most (`None`: the default budget). Never
    /// changes the output bytes.
    #[serde(deserialize_with = "size", skip_serializing_if = "Option::is_none")]
    pub memory_budget: Option<u64>,
    /// `--skip-unsupported`: report and skip items that have no `.tet` form.
    pub skip_unsupported: bool,
    /// `--unpack`: store CF-packed variables as physical values.
    pub unpack: bool,
    /// `--follow-external`: follow external links inside the input's directory (HDF5).
    pub follow_external: bool,
    /// `--write-through-symlink`: an output that is a symbolic link writes its target.
    pub write_through_symlink: bool,
    /// `--force-extension`: write the output under a name whose extension belongs to another
    /// format (refused otherwise: `tet export` writes those formats).
    pub force_extension: bool,
    /// `--variables`: names or globs of the variables kept (a string with commas or a list).
    #[serde(deserialize_with = "names", skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<String>,
    /// `--exclude`: names or globs of the variables left out.
    #[serde(deserialize_with = "names", skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// `--no-coords`: do not add the coordinate and associated variables of the chosen ones.
    pub no_coords: bool,
    /// `--isel`: `DIM=START:STOP[:STEP]` cuts by index (a string or a list).
    #[serde(
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub isel: Vec<String>,
    /// `--sel`: `DIM=LOW:HIGH` cuts by coordinate value (a string or a list).
    #[serde(
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sel: Vec<String>,
    /// `--concat DIM`: the dimension the inputs of a combined conversion are joined along.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concat: Option<String>,
    /// `--concat-take-first`: take the variables without the dimension from the first input.
    pub concat_take_first: bool,
    /// Checksums in the output (zstd content checksums, chunk and footer digests); off only to
    /// measure their cost (`--no-checksums`, `benches/integrity.py`).
    pub checksums: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            codec: CodecChoice::Auto,
            chunk_bytes: None,
            chunk: ChunkExtents::default(),
            jobs: None,
            memory_budget: None,
            skip_unsupported: false,
            unpack: false,
            follow_external: false,
            write_through_symlink: false,
            force_extension: false,
            variables: Vec::new(),
            exclude: Vec::new(),
            no_coords: false,
            isel: Vec::new(),
            sel: Vec::new(),
            concat: None,
            concat_take_first: false,
            checksums: true,
        }
    }
}

/// How a field of [`Settings`] reaches the history row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Recorded under this history param (it can change the output's bytes).
    Recorded(&'static str),
    /// Never changes the output's bytes, so never recorded (the reason).
    RuntimeOnly(&'static str),
}

/// Every field of [`Settings`] and how it is kept (`tests`: exactly the fields serde knows).
pub const FIELDS: &[(&str, Kept)] = &[
    ("codec", Kept::Recorded("codec")),
    ("chunk_bytes", Kept::Recorded("chunk")),
    ("chunk", Kept::Recorded("chunk")),
    (
        "jobs",
        Kept::RuntimeOnly("threads share the work, the bytes are the same"),
    ),
    (
        "memory_budget",
        Kept::RuntimeOnly("workers wait for memory, the bytes are the same"),
    ),
    ("skip_unsupported", Kept::Recorded("skip_unsupported")),
    ("unpack", Kept::Recorded("unpack")),
    ("follow_external", Kept::Recorded("follow_external")),
    (
        "write_through_symlink",
        Kept::RuntimeOnly("where the output is written, not what"),
    ),
    (
        "force_extension",
        Kept::RuntimeOnly("the output's name, not its bytes"),
    ),
    ("variables", Kept::Recorded("variables")),
    ("exclude", Kept::Recorded("exclude")),
    ("no_coords", Kept::Recorded("no_coords")),
    ("isel", Kept::Recorded("isel")),
    ("sel", Kept::Recorded("sel")),
    ("concat", Kept::Recorded("concat")),
    ("concat_take_first", Kept::Recorded("concat_take_first")),
    ("checksums", Kept::Recorded("checksums")),
];

/// Whether a history param records a setting (so that outputs converted under another value of
/// it are not up to date); the others (`input`, `input_bytes`, `tool`, …) describe the run.
pub fn is_recorded_key(key: &str) -> bool {
    FIELDS
        .iter()
        .any(|(_, k)| matches!(k, Kept::Recorded(p) if *p == key))
}

/// The history params of [`FIELDS`]' recorded fields, each once, in order.
pub fn recorded_keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = Vec::new();
    for (_, k) in FIELDS {
        if let Kept::Recorded(p) = k {
            if !keys.contains(p) {
                keys.push(p);
            }
        }
    }
    keys
}

/// The names of the fields of [`Settings`] as serde knows them (what a manifest, the worker
/// protocol and Python's keyword arguments accept).
pub fn field_names() -> &'static [&'static str] {
    introspect::fields::<Settings>()
}

/// A setting that does not hold together (found without the input).
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(transparent)]
    Select(#[from] SelectError),
    /// `concat_take_first` without `concat`.
    #[error("--concat-take-first needs --concat DIM")]
    TakeFirstWithoutConcat,
    /// `concat` of an empty name.
    #[error("--concat needs a dimension name")]
    EmptyConcat,
    /// `jobs = 0`.
    #[error("--jobs must be at least 1")]
    NoJobs,
}

impl Settings {
    /// Checks what can be checked without the input: the cuts' syntax, the combine's keys.
    pub fn check(&self) -> Result<(), SettingsError> {
        self.select().validate()?;
        if self.concat_take_first && self.concat.is_none() {
            return Err(SettingsError::TakeFirstWithoutConcat);
        }
        if self.concat.as_deref() == Some("") {
            return Err(SettingsError::EmptyConcat);
        }
        if self.jobs == Some(0) {
            return Err(SettingsError::NoJobs);
        }
        Ok(())
    }

    /// The chunk planner's options.
    pub fn plan(&self) -> PlanOptions {
        PlanOptions {
            target_bytes: self.chunk_bytes,
            by_dim: self.chunk.by_dim.clone(),
            by_dataset: self.chunk.by_dataset.clone(),
        }
    }

    /// What the importers are told when they open the input.
    pub fn open(&self) -> tet_source::OpenOptions {
        tet_source::OpenOptions {
            skip_unsupported: self.skip_unsupported,
            unpack: self.unpack,
            follow_external: self.follow_external,
        }
    }

    /// The variables chosen and the dimensions cut.
    pub fn select(&self) -> SelectOptions {
        SelectOptions {
            variables: self.variables.clone(),
            exclude: self.exclude.clone(),
            no_coords: self.no_coords,
            isel: self.isel.clone(),
            sel: self.sel.clone(),
        }
    }

    /// Worker threads (≥ 1; one per core unless set).
    pub fn threads(&self) -> usize {
        self.jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }

    /// The memory budget in bytes.
    pub fn memory_budget_bytes(&self) -> u64 {
        self.memory_budget
            .unwrap_or(crate::format::DEFAULT_MEMORY_BUDGET)
    }

    /// The history params of the recorded settings ([`FIELDS`]): each one written the way
    /// outputs have always recorded it, and a setting at its default left out where outputs
    /// written before it existed have no param for it.
    pub fn recorded_params(&self) -> BTreeMap<String, String> {
        let mut p = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            p.insert(k.to_string(), v);
        };
        put("codec", self.codec.to_string());
        let mut chunk = self.plan().describe();
        if self.chunk_bytes == Some(crate::planner::DEFAULT_CHUNK_BYTES) {
            // Given, the default target re-chunks a `.tet` input (which keeps its chunks
            // without it): recorded apart from no `chunk_bytes`.
            let at = chunk.find(';').unwrap_or(chunk.len());
            chunk.insert_str(at, GIVEN_TARGET);
        }
        put("chunk", chunk);
        put("skip_unsupported", self.skip_unsupported.to_string());
        let flag = |on: bool| on.then(|| "true".to_string());
        let list = |l: &[String], sep: &str| (!l.is_empty()).then(|| join_list(l, sep));
        for (k, v) in [
            ("unpack", flag(self.unpack)),
            ("follow_external", flag(self.follow_external)),
            ("variables", list(&self.variables, ",")),
            ("exclude", list(&self.exclude, ",")),
            ("no_coords", flag(self.no_coords)),
            ("isel", list(&self.isel, ";")),
            ("sel", list(&self.sel, ";")),
            ("concat", self.concat.clone()),
            (
                "concat_take_first",
                flag(self.concat.is_some() && self.concat_take_first),
            ),
            ("checksums", (!self.checksums).then(|| "false".to_string())),
        ] {
            if let Some(v) = v {
                put(k, v);
            }
        }
        p
    }
}

/// What follows a recorded `chunk` target given explicitly and equal to the default.
const GIVEN_TARGET: &str = " (given)";

/// A recorded list: joined by `sep` (as outputs have always recorded it), or as a JSON array
/// when an item holds `sep` (a variable named `a,b`, a cut `time=a;b`) or the joined text
/// would read as one (it starts with `[`).
fn join_list(l: &[String], sep: &str) -> String {
    let joined = l.join(sep);
    if l.iter().any(|x| x.contains(sep)) || joined.starts_with('[') {
        return serde_json::to_string(l).unwrap_or(joined);
    }
    joined
}

/// A recorded list back ([`join_list`]): a JSON array of strings, else split at `sep`.
fn split_list(v: &str, sep: char) -> Vec<String> {
    if v.starts_with('[') {
        if let Ok(l) = serde_json::from_str::<Vec<String>>(v) {
            return l;
        }
    }
    v.split(sep).map(str::to_string).collect()
}

/// `--chunk` settings: fixed extents by dimension name and whole chunk shapes by dataset name.
/// Their serde form is the list of `--chunk` specs (`"time=1"`, `"temp:1,721,1440"`); a single
/// string is one spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkExtents {
    /// Fixed extents by dimension name (`--chunk time=1,lat=100`).
    pub by_dim: BTreeMap<String, u64>,
    /// Whole chunk shapes by dataset name (`--chunk temperature:1,721,1440`).
    pub by_dataset: BTreeMap<String, Vec<u64>>,
}

impl ChunkExtents {
    pub fn is_empty(&self) -> bool {
        self.by_dim.is_empty() && self.by_dataset.is_empty()
    }

    /// Adds one `--chunk` spec: `dim=N[,dim=N…]` or `dataset:N,N,…`.
    pub fn add_spec(&mut self, spec: &str) -> Result<(), PlanError> {
        let mut plan = PlanOptions::default();
        plan.add_spec(spec)?;
        self.by_dim.extend(plan.by_dim);
        self.by_dataset.extend(plan.by_dataset);
        Ok(())
    }

    /// The specs, one per dimension and per dataset (what [`ChunkExtents::add_spec`] reads).
    pub fn specs(&self) -> Vec<String> {
        let dims = self.by_dim.iter().map(|(d, n)| format!("{d}={n}"));
        let sets = self.by_dataset.iter().map(|(d, c)| {
            let c: Vec<String> = c.iter().map(u64::to_string).collect();
            format!("{d}:{}", c.join(","))
        });
        dims.chain(sets).collect()
    }
}

impl Serialize for ChunkExtents {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.specs().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ChunkExtents {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut c = ChunkExtents::default();
        for spec in one_or_many(d)? {
            c.add_spec(&spec).map_err(serde::de::Error::custom)?;
        }
        Ok(c)
    }
}

/// A string or a list of strings.
#[derive(Deserialize)]
#[serde(untagged, expecting = "a string or a list of strings")]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(l) => l,
    })
}

/// Names or globs, each string comma-separated (`"temp,precip"` or `["t*", "lat"]`).
fn names<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let mut out = Vec::new();
    for s in one_or_many(d)? {
        SelectOptions::add_names(&mut out, &s).map_err(serde::de::Error::custom)?;
    }
    Ok(out)
}

/// A size: a positive number of bytes or a size with a unit (`"4MiB"`).
#[derive(Deserialize)]
#[serde(untagged, expecting = "a size (\"4MiB\") or a number of bytes")]
enum SizeText {
    Bytes(u64),
    Negative(i64),
    Text(String),
}

fn size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    match SizeText::deserialize(d)? {
        SizeText::Bytes(n) if n > 0 => Ok(Some(n)),
        SizeText::Bytes(n) => Err(D::Error::custom(format!("must be positive, not {n}"))),
        SizeText::Negative(n) => Err(D::Error::custom(format!("must be positive, not {n}"))),
        SizeText::Text(s) => parse_size(&s).map(Some).map_err(D::Error::custom),
    }
}

fn jobs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    match usize::deserialize(d)? {
        0 => Err(serde::de::Error::custom("must be at least 1")),
        n => Ok(Some(n)),
    }
}

/// [`CodecChoice`] as its text (`"zstd:3"`).
mod codec_text {
    use super::*;

    pub fn serialize<S: Serializer>(c: &CodecChoice, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(c)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<CodecChoice, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The field names of a struct, as its `Deserialize` implementation hands them to the
/// deserializer (so that a test enumerates exactly what serde accepts).
mod introspect {
    use serde::de::{self, Deserialize, Deserializer, Visitor};

    struct Fields<'a>(&'a mut &'static [&'static str]);

    #[derive(Debug)]
    struct Stop;

    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("fields taken")
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Stop
        }
    }

    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            *self.0 = fields;
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    /// The fields `T` deserializes from (empty when `T` is no struct).
    pub fn fields<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
        let mut f: &'static [&'static str] = &[];
        let _ = T::deserialize(Fields(&mut f));
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value of every field other than its default, in serde form.
    fn every_field_set() -> serde_json::Value {
        serde_json::json!({
            "codec": "zstd:7",
            "chunk_bytes": "1MiB",
            "chunk": ["time=1", "t:1,2"],
            "jobs": 3,
            "memory_budget": 1 << 20,
            "skip_unsupported": true,
            "unpack": true,
            "follow_external": true,
            "write_through_symlink": true,
            "force_extension": true,
            "variables": "t,u",
            "exclude": ["v"],
            "no_coords": true,
            "isel": "time=0:2",
            "sel": ["lat=-1:1"],
            "concat": "time",
            "concat_take_first": true,
            "checksums": false,
        })
    }

    #[test]
    fn every_field_is_recorded_or_runtime_only() {
        let serde_fields = field_names();
        assert!(serde_fields.len() >= 17, "{serde_fields:?}");
        let kept: Vec<&str> = FIELDS.iter().map(|f| f.0).collect();
        for f in serde_fields {
            assert!(
                kept.contains(f),
                "settings field `{f}` is neither recorded in the history row nor declared \
                 runtime-only (settings::FIELDS)"
            );
        }
        for f in &kept {
            assert!(serde_fields.contains(f), "FIELDS names `{f}`, no field");
        }
        let full = every_field_set();
        let obj = full.as_object().unwrap();
        for f in serde_fields {
            assert!(obj.contains_key(*f), "every_field_set lacks `{f}`");
        }
        let all: Settings = serde_json::from_value(full.clone()).unwrap();
        let params = all.recorded_params();
        let keys: Vec<&str> = params.keys().map(String::as_str).collect();
        let mut want = recorded_keys();
        want.sort_unstable();
        assert_eq!(keys, want);
        // Each field alone: a recorded one changes the params, a runtime-only one never does.
        for (f, kept) in FIELDS {
            let mut one = full.clone();
            one.as_object_mut().unwrap().remove(*f);
            let s: Settings = serde_json::from_value(one).unwrap();
            assert_ne!(s, all, "{f}");
            match kept {
                Kept::Recorded(p) => {
                    let changed = s.recorded_params();
                    assert_ne!(
                        changed.get(*p),
                        params.get(*p),
                        "{f} is not recorded in {p}"
                    );
                }
                Kept::RuntimeOnly(_) => assert_eq!(s.recorded_params(), params, "{f}"),
            }
        }
    }

    #[test]
    fn serde_form_round_trips_and_refuses_unknown_keys() {
        let all: Settings = serde_json::from_value(every_field_set()).unwrap();
        assert_eq!(all.chunk_bytes, Some(1 << 20));
        assert_eq!(all.variables, ["t", "u"]);
        assert_eq!(all.codec, CodecChoice::Zstd(7));
        let text = serde_json::to_string(&all).unwrap();
        assert_eq!(serde_json::from_str::<Settings>(&text).unwrap(), all);
        let d: Settings = serde_json::from_str("{}").unwrap();
        assert_eq!(d, Settings::default());
        let text = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<Settings>(&text).unwrap(), d);
        let e = serde_json::from_str::<Settings>(r#"{"codek": "raw"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `codek`"), "{e}");
        for (bad, msg) in [
            (r#"{"codec": "lz4"}"#, "codec \"lz4\""),
            (r#"{"chunk": ["time=0"]}"#, "not a positive integer"),
            (r#"{"chunk_bytes": -1}"#, "must be positive"),
            (r#"{"jobs": 0}"#, "at least 1"),
            (r#"{"variables": "a,,b"}"#, "empty name"),
        ] {
            let e = serde_json::from_str::<Settings>(bad).unwrap_err();
            assert!(e.to_string().contains(msg), "{bad}: {e}");
        }
    }

    #[test]
    fn default_params_are_the_ones_outputs_always_recorded() {
        let p = Settings::default().recorded_params();
        let want: BTreeMap<String, String> = [
            ("codec", "auto"),
            ("chunk", "4194304"),
            ("skip_unsupported", "false"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(p, want);
        let s = Settings {
            concat_take_first: true,
            ..Settings::default()
        };
        assert!(matches!(
            s.check(),
            Err(SettingsError::TakeFirstWithoutConcat)
        ));
    }
}

/// A history param that does not read back as a setting ([`Settings::from_recorded`]).
#[derive(Debug, thiserror::Error)]
#[error("recorded param {key}={value:?}: {reason}")]
pub struct RecordedParamError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

impl Settings {
    /// The settings a history row's params record: the inverse of
    /// [`Settings::recorded_params`] over the recorded fields (the runtime-only ones take their
    /// defaults). A `chunk` target equal to the default without ` (given)` reads back as no
    /// `chunk_bytes` (outputs written before it was recorded do not tell the two apart). Params that describe the run (`input`, `tool`, …)
    /// are ignored; a recorded param that does not parse is an error.
    pub fn from_recorded(
        params: &BTreeMap<String, String>,
    ) -> Result<Settings, RecordedParamError> {
        let bad = |key: &str, value: &str, reason: String| RecordedParamError {
            key: key.into(),
            value: value.into(),
            reason,
        };
        let get = |k: &str| params.get(k).map(String::as_str);
        let flag = |k: &str| match get(k) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(v) => Err(bad(k, v, "neither true nor false".into())),
        };
        let list = |k: &str, sep: char| -> Vec<String> {
            get(k).map_or(Vec::new(), |v| split_list(v, sep))
        };
        let mut s = Settings {
            skip_unsupported: flag("skip_unsupported")?,
            unpack: flag("unpack")?,
            follow_external: flag("follow_external")?,
            no_coords: flag("no_coords")?,
            concat_take_first: flag("concat_take_first")?,
            checksums: !matches!(get("checksums"), Some("false")),
            variables: list("variables", ','),
            exclude: list("exclude", ','),
            isel: list("isel", ';'),
            sel: list("sel", ';'),
            concat: get("concat").map(str::to_string),
            ..Settings::default()
        };
        if let Some(c) = get("codec") {
            s.codec = c.parse().map_err(|e| bad("codec", c, format!("{e}")))?;
        }
        if let Some(c) = get("chunk") {
            let mut parts = c.split(';');
            let target = parts.next().unwrap_or_default();
            let (target, given) = match target.strip_suffix(GIVEN_TARGET) {
                Some(t) => (t, true),
                None => (target, false),
            };
            let n: u64 = target
                .parse()
                .map_err(|_| bad("chunk", c, "no byte target first".into()))?;
            s.chunk_bytes = (given || n != crate::planner::DEFAULT_CHUNK_BYTES).then_some(n);
            for spec in parts {
                s.chunk
                    .add_spec(spec)
                    .map_err(|e| bad("chunk", c, e.to_string()))?;
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod from_recorded_tests {
    use super::*;

    /// The recorded fields of `s`, as a serde object (the runtime-only ones left out).
    fn recorded_fields(s: &Settings) -> serde_json::Value {
        let mut v = serde_json::to_value(s).unwrap();
        let o = v.as_object_mut().unwrap();
        for (f, kept) in FIELDS {
            if matches!(kept, Kept::RuntimeOnly(_)) {
                o.remove(*f);
            }
        }
        v
    }

    #[test]
    fn from_recorded_gives_back_every_recorded_field() {
        let every = serde_json::json!({
            "codec": "zstd:7", "chunk_bytes": "1MiB", "chunk": ["time=1", "lat=3", "t:1,2"],
            "jobs": 3, "memory_budget": 1 << 20, "skip_unsupported": true, "unpack": true,
            "follow_external": true, "write_through_symlink": true, "force_extension": true,
            "variables": "t,u", "exclude": ["v", "w*"], "no_coords": true,
            "isel": ["time=0:2", "lat=1:5:2"], "sel": ["lat=-1:1"], "concat": "time",
            "concat_take_first": true, "checksums": false,
        });
        let all: Settings = serde_json::from_value(every.clone()).unwrap();
        let mut cases = vec![all.clone(), Settings::default()];
        // Each recorded field alone at its default, the others set.
        for (f, kept) in FIELDS {
            if let Kept::Recorded(_) = kept {
                let mut one = every.clone();
                one.as_object_mut().unwrap().remove(*f);
                cases.push(serde_json::from_value(one).unwrap());
            }
        }
        // (Settings the check refuses — take-first without concat — are never recorded.)
        for s in cases.into_iter().filter(|s| s.check().is_ok()) {
            let mut params = s.recorded_params();
            // Facts of the run beside them are ignored.
            params.insert("input".into(), "a.nc".into());
            params.insert("tool".into(), "tet-convert".into());
            let back = Settings::from_recorded(&params).unwrap();
            assert_eq!(recorded_fields(&back), recorded_fields(&s), "{params:?}");
            assert_eq!(back.recorded_params(), s.recorded_params());
        }
        // The default target given reads back as given, not as none (a `.tet` input keeps
        // its chunks without it, and is re-chunked with it).
        let d = Settings {
            chunk_bytes: Some(crate::planner::DEFAULT_CHUNK_BYTES),
            ..Settings::default()
        };
        let given = d.recorded_params();
        assert_eq!(given["chunk"], "4194304 (given)");
        assert_ne!(given, Settings::default().recorded_params());
        assert_eq!(Settings::from_recorded(&given).unwrap(), d);
        let with_dims = Settings {
            chunk: serde_json::from_value(serde_json::json!(["time=1"])).unwrap(),
            ..d.clone()
        };
        assert_eq!(
            with_dims.recorded_params()["chunk"],
            "4194304 (given);time=1"
        );
        assert_eq!(
            Settings::from_recorded(&with_dims.recorded_params()).unwrap(),
            with_dims
        );
        // Before it was recorded apart: the bare default reads back as no target.
        let old: BTreeMap<String, String> = [("chunk".to_string(), "4194304".to_string())].into();
        assert_eq!(Settings::from_recorded(&old).unwrap().chunk_bytes, None);
    }

    #[test]
    fn names_and_cuts_holding_the_separator_survive_the_params() {
        let s = Settings {
            variables: vec!["a,b".into(), "c".into()],
            exclude: vec!["[xy]*".into()],
            isel: vec!["time=0:2".into()],
            sel: vec!["time=2020-01-01;x:2020-02-01".into(), "lat=0:1".into()],
            ..Settings::default()
        };
        let p = s.recorded_params();
        assert_eq!(p["variables"], r#"["a,b","c"]"#);
        assert_eq!(p["exclude"], r#"["[xy]*"]"#);
        assert_eq!(p["isel"], "time=0:2");
        let back = Settings::from_recorded(&p).unwrap();
        assert_eq!(
            (back.variables, back.exclude, back.isel, back.sel),
            (s.variables, s.exclude, s.isel, s.sel)
        );
        // What outputs recorded before: joined, read back by splitting.
        let old: BTreeMap<String, String> = [
            ("variables".to_string(), "t,u".to_string()),
            ("exclude".to_string(), "[ab]*,c".to_string()),
        ]
        .into();
        let back = Settings::from_recorded(&old).unwrap();
        assert_eq!(back.variables, ["t", "u"]);
        assert_eq!(back.exclude, ["[ab]*", "c"]);
    }

    #[test]
    fn from_recorded_refuses_what_does_not_parse() {
        for (k, v) in [
            ("codec", "lz4"),
            ("chunk", "big"),
            ("chunk", "4194304;time=0"),
            ("unpack", "yes"),
        ] {
            let params: BTreeMap<String, String> = [(k.to_string(), v.to_string())].into();
            let e = Settings::from_recorded(&params).unwrap_err();
            assert_eq!((e.key.as_str(), e.value.as_str()), (k, v));
            assert!(
                e.to_string().starts_with(&format!("recorded param {k}=")),
                "{e}"
            );
        }
    }
}
