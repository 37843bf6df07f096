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
//! Options: `codec`, `chunk_bytes`, `chunk`, `unpack`, `skip_unsupported`, `follow_external`,
//! `write_through_symlink`, `variables`, `exclude` (a string or a list), `no_coords`, `isel`,
//! `sel` (a string or a list, as the repeated flags), with the meaning of the command-line flags of the same name. A job's
//! own keys win over `[defaults]`, which win over the command line. An unknown key, a wrong type
//! or two jobs writing one output is an error naming the job: a typo never silently changes what
//! gets written. Jobs run in the manifest's order; a shard takes the jobs whose input path
//! hashes to it (see [`crate::batch::shard`]).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Table;

use crate::pipeline::{CodecError, ConvertOptions};
use crate::planner::{parse_size, PlanError, PlanOptions, SizeError};
use crate::select::SelectError;

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
    /// `chunk_bytes` zero or negative.
    #[error("`chunk_bytes` must be positive")]
    ChunkBytesNotPositive,
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error(transparent)]
    Size(#[from] SizeError),
    #[error(transparent)]
    Chunk(#[from] PlanError),
    #[error(transparent)]
    Select(#[from] SelectError),
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

/// The one line of a table that does not decode as an entry, naming the key it is about.
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
    pub input: PathBuf,
    pub output: PathBuf,
    pub opts: ConvertOptions,
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

/// A `[[job]]` table, or `[defaults]` (which may not hold `input`/`inputs`/`output`/`concat`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Entry {
    input: Option<String>,
    /// The inputs of a combined job (with `concat`).
    inputs: Option<Vec<String>>,
    concat: Option<String>,
    concat_take_first: Option<bool>,
    output: Option<String>,
    codec: Option<String>,
    chunk_bytes: Option<ChunkBytes>,
    chunk: Option<OneOrMany>,
    unpack: Option<bool>,
    skip_unsupported: Option<bool>,
    follow_external: Option<bool>,
    write_through_symlink: Option<bool>,
    variables: Option<OneOrMany>,
    exclude: Option<OneOrMany>,
    no_coords: Option<bool>,
    isel: Option<OneOrMany>,
    sel: Option<OneOrMany>,
}

/// `chunk_bytes`: a number of bytes or a size with a unit (`"4MiB"`).
#[derive(Deserialize)]
#[serde(untagged, expecting = "a size (\"4MiB\") or a number of bytes")]
enum ChunkBytes {
    Bytes(i64),
    Size(String),
}

/// `chunk`: one `--chunk` spec or a list of them.
#[derive(Deserialize)]
#[serde(untagged, expecting = "a string or a list of strings")]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// Reads and parses a manifest file.
pub fn load(path: &Path, base: &ConvertOptions) -> Result<Vec<Job>, ManifestError> {
    let text = std::fs::read_to_string(path).map_err(ManifestError::Read)?;
    let dir = path.parent().unwrap_or(Path::new(""));
    parse(&text, dir, base)
}

/// Decodes one table as an [`Entry`]; an error names the key it is about.
fn entry(t: Table) -> Result<Entry, ManifestError> {
    serde_path_to_error::deserialize(toml::Value::Table(t)).map_err(ManifestError::Entry)
}

/// Parses a manifest whose relative paths are relative to `dir`; `base` holds the command line's
/// options.
pub fn parse(text: &str, dir: &Path, base: &ConvertOptions) -> Result<Vec<Job>, ManifestError> {
    let doc: Document = serde_path_to_error::deserialize(toml::Deserializer::new(text))
        .map_err(ManifestError::Document)?;
    let mut defaults = base.clone();
    if let Some(d) = doc.defaults {
        let in_defaults = |e: ManifestError| ManifestError::InDefaults(Box::new(e));
        let d = entry(d).map_err(in_defaults)?;
        if d.input.is_some() || d.output.is_some() || d.inputs.is_some() || d.concat.is_some() {
            return Err(in_defaults(ManifestError::JobKeyInDefaults));
        }
        d.apply(&mut defaults).map_err(in_defaults)?;
    }
    if doc.job.is_empty() {
        return Err(ManifestError::NoJobs);
    }
    let mut jobs: Vec<Job> = Vec::with_capacity(doc.job.len());
    for (i, t) in doc.job.into_iter().enumerate() {
        let at = |e: ManifestError| ManifestError::InJob {
            index: i + 1,
            source: Box::new(e),
        };
        let e = entry(t).map_err(at)?;
        let path = |key: &'static str, v: &Option<String>| -> Result<PathBuf, ManifestError> {
            match v.as_deref() {
                Some("") => Err(at(ManifestError::EmptyPath(key))),
                // An object URL is taken as it is (never relative to the manifest's folder).
                Some(s) if crate::storage::is_url(Path::new(s)) => Ok(PathBuf::from(s)),
                Some(s) => Ok(dir.join(s)),
                None => Err(at(ManifestError::Missing(key))),
            }
        };
        let output = path("output", &e.output)?;
        let mut opts = defaults.clone();
        let input = match e.combine(dir).map_err(|m| at(m.into()))? {
            Some(c) => {
                let first = c.inputs[0].clone();
                opts.combine = Some(c);
                first
            }
            None => path("input", &e.input)?,
        };
        e.apply(&mut opts).map_err(at)?;
        if let Some(other) = jobs.iter().position(|j| j.output == output) {
            return Err(at(ManifestError::SameOutput {
                output,
                other: other + 1,
            }));
        }
        jobs.push(Job {
            input,
            output,
            opts,
        });
    }
    Ok(jobs)
}

impl Entry {
    /// A combined job's inputs and dimension (`inputs` and `concat`, both or neither; `None`
    /// for a job of one `input`).
    fn combine(&self, dir: &Path) -> Result<Option<crate::concat::Combine>, CombineMistake> {
        match (&self.inputs, &self.concat) {
            (None, None) => {
                if self.concat_take_first.is_some() {
                    return Err(CombineMistake::TakeFirstWithoutConcat);
                }
                Ok(None)
            }
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
                Ok(Some(crate::concat::Combine {
                    dim: dim.clone(),
                    take_first: self.concat_take_first.unwrap_or(false),
                    inputs: inputs.iter().map(|i| dir.join(i)).collect(),
                }))
            }
        }
    }

    /// Applies the options this entry sets to `opts` (what it leaves unset is inherited).
    fn apply(self, opts: &mut ConvertOptions) -> Result<(), ManifestError> {
        if let Some(c) = self.codec {
            opts.codec = c.parse()?;
        }
        if let Some(b) = self.chunk_bytes {
            opts.plan.target_bytes = Some(match b {
                ChunkBytes::Bytes(n) => u64::try_from(n)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(ManifestError::ChunkBytesNotPositive)?,
                ChunkBytes::Size(s) => parse_size(&s)?,
            });
        }
        if let Some(c) = self.chunk {
            // A job's `chunk` replaces the inherited chunk extents, it does not add to them.
            let mut plan = PlanOptions {
                target_bytes: opts.plan.target_bytes,
                ..PlanOptions::default()
            };
            let specs = match c {
                OneOrMany::One(s) => vec![s],
                OneOrMany::Many(l) => l,
            };
            for s in &specs {
                plan.add_spec(s)?;
            }
            opts.plan = plan;
        }
        let set = |flag: Option<bool>, to: &mut bool| {
            if let Some(f) = flag {
                *to = f;
            }
        };
        set(self.unpack, &mut opts.open.unpack);
        set(self.skip_unsupported, &mut opts.open.skip_unsupported);
        set(self.follow_external, &mut opts.open.follow_external);
        set(self.write_through_symlink, &mut opts.write_through_symlink);
        set(self.no_coords, &mut opts.select.no_coords);
        // A job's list replaces the inherited one, as `chunk` does.
        let list = |l: OneOrMany| match l {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(l) => l,
        };
        if let Some(v) = self.variables {
            opts.select.variables.clear();
            for s in list(v) {
                crate::select::SelectOptions::add_names(&mut opts.select.variables, &s)?;
            }
        }
        if let Some(v) = self.exclude {
            opts.select.exclude.clear();
            for s in list(v) {
                crate::select::SelectOptions::add_names(&mut opts.select.exclude, &s)?;
            }
        }
        if let Some(v) = self.isel {
            opts.select.isel = list(v);
        }
        if let Some(v) = self.sel {
            opts.select.sel = list(v);
        }
        opts.select.validate()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::CodecChoice;

    fn jobs(text: &str) -> Result<Vec<Job>, ManifestError> {
        parse(text, Path::new("/m"), &ConvertOptions::default())
    }

    #[test]
    fn options_layer_job_over_defaults_over_command_line() {
        let base = ConvertOptions {
            codec: CodecChoice::Raw,
            ..ConvertOptions::default()
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
        assert_eq!(j[0].opts.codec, CodecChoice::Raw);
        assert_eq!(j[0].opts.plan.target_bytes, Some(1 << 20));
        assert!(j[0].opts.open.unpack);
        let b = &j[1].opts;
        assert_eq!(j[1].output, Path::new("/m/out/b.tet"));
        assert_eq!(b.codec, CodecChoice::Zstd(9));
        assert_eq!(b.plan.describe(), "4096;time=1;x:1,2");
        assert!(!b.open.unpack && b.open.skip_unsupported && b.open.follow_external);
        assert!(b.write_through_symlink);
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
        let a = &j[0].opts.select;
        assert_eq!(a.variables, ["temp", "precip"]);
        assert_eq!(a.isel, ["time=0:10"]);
        let b = &j[1].opts.select;
        assert_eq!(b.variables, ["t*", "lat"]);
        assert_eq!(b.exclude, ["time_bnds"]);
        assert!(b.no_coords && b.isel.is_empty());
        assert_eq!(b.sel.len(), 2);
        let bad = jobs("[[job]]\ninput = \"a\"\noutput = \"b\"\nisel = \"time=3\"\n");
        let e = bad.unwrap_err();
        assert!(
            matches!(&e, ManifestError::InJob { index: 1, source } if matches!(**source, ManifestError::Select(SelectError::IselSyntax { .. }))),
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
        let c = j[0].opts.combine.as_ref().unwrap();
        assert_eq!(c.dim, "time");
        assert!(!c.take_first);
        assert_eq!(
            c.inputs,
            [Path::new("/m/d/day2.nc"), Path::new("/m/d/day1.nc")]
        );
        assert_eq!(j[0].input, Path::new("/m/d/day2.nc"));
        assert_eq!(j[0].opts.select.variables, ["temp"]);
        let c = j[1].opts.combine.as_ref().unwrap();
        assert!(c.take_first);
        assert_eq!(c.inputs[1], Path::new("/abs/b.npy"));
        assert!(j[2].opts.combine.is_none());
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
            ("chunk_bytes = -1", "`chunk_bytes` must be positive"),
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
}
