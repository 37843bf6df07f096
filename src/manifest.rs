//! `tet-convert --manifest jobs.toml`: a list of conversions, each input → output with its own
//! options, for scheduled ETL runs.
//!
//! ```toml
//! [defaults]                 # optional: options for every job
//! codec = "zstd:3"
//!
//! [[job]]
//! input = "raw/ocean.nc"     # relative paths are relative to the manifest's folder
//! output = "tet/ocean.tet"
//! unpack = true
//! chunk = ["time=1"]         # a string or a list, as --chunk
//!
//! [[job]]
//! input = "raw/run.h5"
//! output = "tet/run.tet"
//! chunk_bytes = "1MiB"       # or a number of bytes
//! skip_unsupported = true
//! ```
//!
//! A job that combines inputs along a dimension (as `tet-convert --concat DIM IN… OUT`) lists
//! them in `inputs` instead of `input` and names the dimension in `concat`:
//!
//! ```toml
//! [[job]]
//! inputs = ["daily/day01.nc", "daily/day02.nc"]   # two or more, any order
//! concat = "time"
//! concat_take_first = false  # optional, as --concat-take-first
//! output = "monthly/2024-01.tet"
//! ```
//!
//! Options: the fields of [`tet::settings::Settings`] in their serde form — `codec`,
//! `chunk_bytes`, `chunk`, `jobs`, `memory_budget`, `unpack`, `skip_unsupported`,
//! `follow_external`, `write_through_symlink`, `force_extension`, `variables`, `exclude` (a
//! string or a list), `no_coords`, `isel`, `sel` (a string or a list, as the repeated flags),
//! `concat_take_first`, `checksums` — with the meaning of the command-line flags of the same
//! name. A job's own keys win over `[defaults]`, which win over the command line (the command
//! line's settings, their serde form, under the manifest's tables). An unknown key, a wrong type
//! or two jobs writing one output is an error naming the job: a typo never silently changes what
//! gets written. Jobs run in the manifest's order; a shard takes the jobs whose input path
//! hashes to it (see [`crate::batch::shard`]).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Table;

use tet::settings::{Settings, SettingsError};

/// What is wrong with a manifest: one line naming the job (or `[defaults]`) and the key.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file cannot be read.
    #[error("cannot read: {0}")]
    Read(#[source] std::io::Error),
    /// Not TOML, or not a document of `[defaults]` and `[[job]]` tables.
    #[error("{}", document_message(.0))]
    Document(#[source] serde_path_to_error::Error<toml::de::Error>),
    /// A key of a job (or of `[defaults]`) that is unknown or of the wrong type.
    #[error("{}", entry_message(.0))]
    Entry(#[source] serde_path_to_error::Error<toml::de::Error>),
    /// The command line's settings have no TOML form (a size past 2^63).
    #[error("the command line's settings: {0}")]
    Base(#[source] toml::ser::Error),
    /// An error in `[defaults]`.
    #[error("[defaults]: {0}")]
    InDefaults(#[source] Box<ManifestError>),
    /// An error in the `index`th `[[job]]` (from 1).
    #[error("job {index}: {source}")]
    InJob {
        index: usize,
        #[source]
        source: Box<ManifestError>,
    },
    /// `[defaults]` holding what only a job can hold.
    #[error("`input`, `inputs`, `concat` and `output` belong in a [[job]]")]
    JobKeyInDefaults,
    /// No `[[job]]` at all.
    #[error("the manifest lists no [[job]]")]
    NoJobs,
    /// A path key that is missing.
    #[error("`{0}` is missing")]
    Missing(&'static str),
    /// A path key that is an empty string.
    #[error("`{0}` must be a non-empty string")]
    EmptyPath(&'static str),
    /// Two jobs writing one output (`other`: the earlier job, from 1).
    #[error("writes {} like job {other}", .output.display())]
    SameOutput { output: PathBuf, other: usize },
    /// `inputs`/`concat`/`concat_take_first` given without their partner, or both `input` and
    /// `inputs`, or fewer than two inputs (the variant says which).
    #[error(transparent)]
    Combine(#[from] CombineMistake),
    /// Settings that do not hold together (a cut's syntax).
    #[error(transparent)]
    Settings(#[from] SettingsError),
}

/// How a combined job's keys do not fit together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CombineMistake {
    #[error("`concat_take_first` needs `concat`")]
    TakeFirstWithoutConcat,
    #[error("`inputs` needs `concat = \"DIM\"` (or use `input`)")]
    InputsWithoutConcat,
    #[error("`concat` needs `inputs = [...]`")]
    ConcatWithoutInputs,
    #[error("give `input` or `inputs`, not both")]
    InputAndInputs,
    #[error("`inputs` must list two or more files")]
    TooFewInputs,
    #[error("`inputs` and `concat` must be non-empty strings")]
    EmptyName,
}

/// The one line of a document that does not decode: what is wrong where, without the TOML
/// parser's multi-line excerpt.
fn document_message(e: &serde_path_to_error::Error<toml::de::Error>) -> String {
    let m = e.inner().message().trim();
    match e.path().to_string().as_str() {
        "job" => "`job` must be an array of tables ([[job]])".to_string(),
        "defaults" => "`defaults` must be a table ([defaults])".to_string(),
        _ if m.starts_with("unknown field") => {
            format!("{m} (a manifest holds [defaults] and [[job]] tables)")
        }
        _ => format!("not a valid TOML manifest: {m}"),
    }
}

/// The one line of a table that does not decode, naming the key it is about.
fn entry_message(e: &serde_path_to_error::Error<toml::de::Error>) -> String {
    let msg = e.inner().message().trim().to_string();
    match e.path().to_string().as_str() {
        "." | "" => msg,
        _ if msg.starts_with("unknown field") => msg,
        key => format!("`{key}`: {msg}"),
    }
}

/// One conversion of a manifest.
#[derive(Debug, Clone)]
pub struct Job {
    /// The input (the first of `inputs` for a combined job).
    pub input: PathBuf,
    pub output: PathBuf,
    /// Every input of a combined job, as listed (empty for a job of one input).
    pub inputs: Vec<PathBuf>,
    pub settings: Settings,
}

/// The manifest document: `[defaults]` and the `[[job]]` tables (each decoded on its own, so
/// that an error names its job).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    defaults: Option<Table>,
    #[serde(default)]
    job: Vec<Table>,
}

/// The keys of a `[[job]]` that are no setting: what it converts, and where to.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Paths {
    input: Option<String>,
    /// The inputs of a combined job (with `concat`).
    inputs: Option<Vec<String>>,
    output: Option<String>,
}

/// The keys of [`Paths`].
const PATH_KEYS: [&str; 3] = ["input", "inputs", "output"];

/// Reads and parses a manifest file.
pub fn load(path: &Path, base: &Settings) -> Result<Vec<Job>, ManifestError> {
    let text = std::fs::read_to_string(path).map_err(ManifestError::Read)?;
    let dir = path.parent().unwrap_or(Path::new(""));
    parse(&text, dir, base)
}

/// Decodes a table (a job's settings over the inherited ones) as [`Settings`]; an error names
/// the key it is about.
fn settings_of(t: Table) -> Result<Settings, ManifestError> {
    let s: Settings =
        serde_path_to_error::deserialize(toml::Value::Table(t)).map_err(ManifestError::Entry)?;
    s.check()?;
    Ok(s)
}

/// `under` with the keys of `over` put over its own.
fn layered(under: &Table, over: Table) -> Table {
    let mut t = under.clone();
    t.extend(over);
    t
}

/// Parses a manifest whose relative paths are relative to `dir`; `base` holds the command line's
/// settings.
pub fn parse(text: &str, dir: &Path, base: &Settings) -> Result<Vec<Job>, ManifestError> {
    let doc: Document = serde_path_to_error::deserialize(toml::Deserializer::new(text))
        .map_err(ManifestError::Document)?;
    let mut defaults = Table::try_from(base).map_err(ManifestError::Base)?;
    if let Some(d) = doc.defaults {
        let in_defaults = |e: ManifestError| ManifestError::InDefaults(Box::new(e));
        if PATH_KEYS
            .iter()
            .chain(&["concat"])
            .any(|k| d.contains_key(*k))
        {
            return Err(in_defaults(ManifestError::JobKeyInDefaults));
        }
        defaults = layered(&defaults, d);
        // `concat_take_first` is about the combined jobs only (checked there).
        let mut alone = defaults.clone();
        alone.remove("concat_take_first");
        settings_of(alone).map_err(in_defaults)?;
    }
    if doc.job.is_empty() {
        return Err(ManifestError::NoJobs);
    }
    let mut jobs: Vec<Job> = Vec::with_capacity(doc.job.len());
    for (i, mut t) in doc.job.into_iter().enumerate() {
        let at = |e: ManifestError| ManifestError::InJob {
            index: i + 1,
            source: Box::new(e),
        };
        let paths: Table = PATH_KEYS
            .iter()
            .filter_map(|k| t.remove(*k).map(|v| (k.to_string(), v)))
            .collect();
        let paths: Paths = serde_path_to_error::deserialize(toml::Value::Table(paths))
            .map_err(|e| at(ManifestError::Entry(e)))?;
        let own_take_first = t.contains_key("concat_take_first");
        let mut merged = layered(&defaults, t);
        if !merged.contains_key("concat") {
            if own_take_first {
                return Err(at(CombineMistake::TakeFirstWithoutConcat.into()));
            }
            // Inherited from `[defaults]`, it is about the combined jobs only.
            merged.remove("concat_take_first");
        }
        let settings = settings_of(merged).map_err(at)?;
        let path = |key: &'static str, v: &Option<String>| -> Result<PathBuf, ManifestError> {
            match v.as_deref() {
                Some("") => Err(at(ManifestError::EmptyPath(key))),
                Some(s) => Ok(beside(dir, s)),
                None => Err(at(ManifestError::Missing(key))),
            }
        };
        let output = path("output", &paths.output)?;
        let inputs = paths
            .combined(settings.concat.as_deref(), dir)
            .map_err(|m| at(m.into()))?;
        let input = match inputs.first() {
            Some(first) => first.clone(),
            None => path("input", &paths.input)?,
        };
        if let Some(other) = jobs.iter().position(|j| j.output == output) {
            return Err(at(ManifestError::SameOutput {
                output,
                other: other + 1,
            }));
        }
        jobs.push(Job {
            input,
            output,
            inputs,
            settings,
        });
    }
    Ok(jobs)
}

/// A path of the manifest: relative to its folder, an object URL as it is.
fn beside(dir: &Path, s: &str) -> PathBuf {
    if tet::storage::is_url(Path::new(s)) {
        PathBuf::from(s)
    } else {
        dir.join(s)
    }
}

impl Paths {
    /// A combined job's inputs (`inputs` and `concat`, both or neither; empty for a job of one
    /// `input`).
    fn combined(&self, concat: Option<&str>, dir: &Path) -> Result<Vec<PathBuf>, CombineMistake> {
        match (&self.inputs, concat) {
            (None, None) => Ok(Vec::new()),
            (Some(_), None) => Err(CombineMistake::InputsWithoutConcat),
            (None, Some(_)) => Err(CombineMistake::ConcatWithoutInputs),
            (Some(inputs), Some(dim)) => {
                if self.input.is_some() {
                    return Err(CombineMistake::InputAndInputs);
                }
                if inputs.len() < 2 {
                    return Err(CombineMistake::TooFewInputs);
                }
                if dim.is_empty() || inputs.iter().any(String::is_empty) {
                    return Err(CombineMistake::EmptyName);
                }
                Ok(inputs.iter().map(|i| beside(dir, i)).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tet::pipeline::CodecChoice;

    fn jobs(text: &str) -> Result<Vec<Job>, ManifestError> {
        parse(text, Path::new("/m"), &Settings::default())
    }

    #[test]
    fn options_layer_job_over_defaults_over_command_line() {
        let base = Settings {
            codec: CodecChoice::Raw,
            jobs: Some(3),
            ..Settings::default()
        };
        let j = parse(
            r#"
            [defaults]
            chunk_bytes = "1MiB"
            unpack = true
            [[job]]
            input = "a.nc"
            output = "/abs/a.tet"
            [[job]]
            input = "b.h5"
            output = "out/b.tet"
            codec = "zstd:9"
            chunk = ["time=1", "x:1,2"]
            chunk_bytes = 4096
            unpack = false
            skip_unsupported = true
            follow_external = true
            write_through_symlink = true
            "#,
            Path::new("/m"),
            &base,
        )
        .unwrap();
        assert_eq!(j.len(), 2);
        assert_eq!(j[0].input, Path::new("/m/a.nc"));
        let u = jobs("[[job]]\ninput = \"s3://b/k.nc\"\noutput = \"gs://o/k.tet\"\n").unwrap();
        assert_eq!(u[0].input, Path::new("s3://b/k.nc"));
        assert_eq!(u[0].output, Path::new("gs://o/k.tet"));
        assert_eq!(j[0].output, Path::new("/abs/a.tet"));
        assert_eq!(j[0].settings.codec, CodecChoice::Raw);
        assert_eq!(j[0].settings.chunk_bytes, Some(1 << 20));
        assert_eq!(j[0].settings.jobs, Some(3));
        assert!(j[0].settings.unpack);
        let b = &j[1].settings;
        assert_eq!(j[1].output, Path::new("/m/out/b.tet"));
        assert_eq!(b.codec, CodecChoice::Zstd(9));
        assert_eq!(b.plan().describe(), "4096;time=1;x:1,2");
        assert!(!b.unpack && b.skip_unsupported && b.follow_external);
        assert!(b.write_through_symlink);
        assert_eq!(b.jobs, Some(3));
    }

    #[test]
    fn selections_layer_and_are_checked() {
        let j = jobs(
            r#"
            [defaults]
            variables = "temp,precip"
            isel = "time=0:10"
            [[job]]
            input = "a.nc"
            output = "a.tet"
            [[job]]
            input = "b.nc"
            output = "b.tet"
            variables = ["t*", "lat"]
            exclude = "time_bnds"
            no_coords = true
            isel = []
            sel = ["time=2000-01-01:2000-01-31", "lat=-10:10"]
            "#,
        )
        .unwrap();
        let a = &j[0].settings;
        assert_eq!(a.variables, ["temp", "precip"]);
        assert_eq!(a.isel, ["time=0:10"]);
        let b = &j[1].settings;
        assert_eq!(b.variables, ["t*", "lat"]);
        assert_eq!(b.exclude, ["time_bnds"]);
        assert!(b.no_coords && b.isel.is_empty());
        assert_eq!(b.sel.len(), 2);
        let bad = jobs("[[job]]\ninput = \"a\"\noutput = \"b\"\nisel = \"time=3\"\n");
        let e = bad.unwrap_err();
        assert!(
            matches!(&e, ManifestError::InJob { index: 1, source } if matches!(**source, ManifestError::Settings(SettingsError::Select(tet::select::SelectError::IselSyntax { .. })))),
            "{e:?}"
        );
        assert!(e.to_string().contains("--isel"));
    }

    #[test]
    fn combined_jobs_list_inputs_and_a_dimension() {
        let j = jobs(
            r#"
            [[job]]
            inputs = ["d/day2.nc", "d/day1.nc"]
            concat = "time"
            variables = "temp"
            output = "m.tet"
            [[job]]
            inputs = ["a.npy", "/abs/b.npy"]
            concat = "dim_0"
            concat_take_first = true
            output = "ab.tet"
            [[job]]
            input = "one.nc"
            output = "one.tet"
            "#,
        )
        .unwrap();
        let c = &j[0].settings;
        assert_eq!(c.concat.as_deref(), Some("time"));
        assert!(!c.concat_take_first);
        assert_eq!(
            j[0].inputs,
            [Path::new("/m/d/day2.nc"), Path::new("/m/d/day1.nc")]
        );
        assert_eq!(j[0].input, Path::new("/m/d/day2.nc"));
        assert_eq!(j[0].settings.variables, ["temp"]);
        assert!(j[1].settings.concat_take_first);
        assert_eq!(j[1].inputs[1], Path::new("/abs/b.npy"));
        assert!(j[2].settings.concat.is_none() && j[2].inputs.is_empty());
        let job = |body: &str| {
            jobs(&format!("[[job]]\noutput = \"o\"\n{body}"))
                .unwrap_err()
                .to_string()
        };
        for (body, msg) in [
            ("inputs = [\"a\", \"b\"]", "job 1: `inputs` needs `concat"),
            ("input = \"a\"\nconcat = \"time\"", "`concat` needs `inputs"),
            ("inputs = [\"a\"]\nconcat = \"time\"", "two or more"),
            (
                "input = \"a\"\ninputs = [\"a\", \"b\"]\nconcat = \"t\"",
                "not both",
            ),
            ("input = \"a\"\nconcat_take_first = true", "needs `concat`"),
            (
                "inputs = \"a\"\nconcat = \"t\"",
                "job 1: `inputs`: invalid type",
            ),
        ] {
            let e = job(body);
            assert!(e.contains(msg), "{body}: {e}");
        }
        let e = jobs("[defaults]\nconcat = \"time\"\n[[job]]\ninput = \"a\"\noutput = \"b\"");
        assert_eq!(
            e.unwrap_err().to_string(),
            "[defaults]: `input`, `inputs`, `concat` and `output` belong in a [[job]]"
        );
    }

    #[test]
    fn mistakes_are_errors_naming_the_job() {
        let one = |extra: &str| jobs(&format!("[[job]]\ninput = \"a\"\noutput = \"b\"\n{extra}"));
        for (extra, msg) in [
            ("codek = \"raw\"", "job 1: unknown field `codek`"),
            ("codec = \"lz4\"", "codec \"lz4\""),
            (
                "unpack = \"yes\"",
                "job 1: `unpack`: invalid type: string \"yes\"",
            ),
            ("chunk_bytes = -1", "job 1: `chunk_bytes`: must be positive"),
            ("chunk_bytes = \"4 parsecs\"", "unknown unit"),
            ("chunk = 3", "job 1: `chunk`: a string or a list of strings"),
            ("chunk_bytes = true", "job 1: `chunk_bytes`: a size"),
            ("chunk = [\"time=0\"]", "not a positive integer"),
            (
                "[[job]]\ninput = \"c\"\noutput = \"b\"",
                "job 2: writes /m/b like job 1",
            ),
            ("[[job]]\noutput = \"c\"", "job 2: `input` is missing"),
        ] {
            let e = one(extra).unwrap_err().to_string();
            assert!(e.contains(msg), "{extra}: {e}");
        }
        let text = |t: &str| jobs(t).unwrap_err().to_string();
        assert_eq!(text(""), "the manifest lists no [[job]]");
        assert!(text("[job]\ninput = \"a\"").contains("array of tables"));
        assert!(text("jobs = 1").contains("unknown field `jobs`"));
        assert!(text("[[job]\n").contains("not a valid TOML"));
        // The parser's own error is kept as the cause.
        let e = jobs("[[job]\n").unwrap_err();
        let cause = std::error::Error::source(&e).expect("the TOML error is kept");
        assert!(cause
            .downcast_ref::<serde_path_to_error::Error<toml::de::Error>>()
            .is_some());
        assert!(
            text("[defaults]\ncodec = 1\n[[job]]\ninput = \"a\"\noutput = \"b\"")
                .starts_with("[defaults]: `codec`: ")
        );
    }

    #[test]
    fn a_job_accepts_exactly_the_settings_fields_and_its_paths() {
        let sample = |f: &str| -> &str {
            match f {
                "codec" => "\"zstd:2\"",
                "chunk_bytes" | "memory_budget" => "\"1MiB\"",
                "chunk" | "variables" | "exclude" => "[\"x=1\"]",
                "isel" => "\"x=0:1\"",
                "sel" => "\"x=0:1\"",
                "jobs" => "2",
                "concat" => "\"x\"",
                _ => "true",
            }
        };
        for f in tet::settings::field_names() {
            let paths = match *f {
                "concat" => "inputs = [\"a\", \"b\"]",
                "concat_take_first" => "inputs = [\"a\", \"b\"]\nconcat = \"x\"",
                _ => "input = \"a\"",
            };
            let body = format!("[[job]]\n{paths}\noutput = \"o\"\n{f} = {}\n", sample(f));
            jobs(&body).unwrap_or_else(|e| panic!("{f}: {e}"));
        }
        let e = jobs("[[job]]\ninput = \"a\"\noutput = \"o\"\nthreads = 2\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `threads`"), "{e}");
    }
}
