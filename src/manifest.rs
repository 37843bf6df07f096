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
//! Options: `codec`, `chunk_bytes`, `chunk`, `unpack`, `skip_unsupported`, `follow_external`,
//! `write_through_symlink`, with the meaning of the command-line flags of the same name. A job's
//! own keys win over `[defaults]`, which win over the command line. An unknown key, a wrong type
//! or two jobs writing one output is an error naming the job: a typo never silently changes what
//! gets written. Jobs run in the manifest's order; a shard takes the jobs whose input path
//! hashes to it (see [`crate::batch::shard`]).

use std::path::{Path, PathBuf};

use toml::{Table, Value};

use crate::pipeline::ConvertOptions;
use crate::planner::{parse_size, PlanOptions};

/// One conversion of a manifest.
#[derive(Debug, Clone)]
pub struct Job {
    pub input: PathBuf,
    pub output: PathBuf,
    pub opts: ConvertOptions,
}

/// The option keys a `[defaults]` table or a `[[job]]` may hold.
const OPTION_KEYS: &[&str] = &[
    "codec",
    "chunk_bytes",
    "chunk",
    "unpack",
    "skip_unsupported",
    "follow_external",
    "write_through_symlink",
];

/// Reads and parses a manifest file.
pub fn load(path: &Path, base: &ConvertOptions) -> Result<Vec<Job>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let dir = path.parent().unwrap_or(Path::new(""));
    parse(&text, dir, base)
}

/// Parses a manifest whose relative paths are relative to `dir`; `base` holds the command line's
/// options.
pub fn parse(text: &str, dir: &Path, base: &ConvertOptions) -> Result<Vec<Job>, String> {
    let doc: Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("not a valid TOML manifest: {}", e.message()))?;
    for key in doc.keys() {
        if key != "defaults" && key != "job" {
            return Err(format!(
                "unknown top-level key `{key}` (expected [defaults] and [[job]])"
            ));
        }
    }
    let mut defaults = base.clone();
    if let Some(d) = doc.get("defaults") {
        let t = d.as_table().ok_or("`defaults` must be a table")?;
        apply(t, &mut defaults, &[]).map_err(|e| format!("[defaults]: {e}"))?;
    }
    let entries = match doc.get("job") {
        Some(Value::Array(a)) => a.as_slice(),
        Some(_) => return Err("`job` must be an array of tables ([[job]])".into()),
        None => &[],
    };
    if entries.is_empty() {
        return Err("the manifest lists no [[job]]".into());
    }
    let mut jobs: Vec<Job> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let at = |e: String| format!("job {}: {e}", i + 1);
        let t = entry.as_table().ok_or_else(|| at("not a table".into()))?;
        let path = |key: &str| -> Result<PathBuf, String> {
            match t.get(key) {
                Some(Value::String(s)) if !s.is_empty() => Ok(dir.join(s)),
                Some(_) => Err(at(format!("`{key}` must be a non-empty string"))),
                None => Err(at(format!("`{key}` is missing"))),
            }
        };
        let (input, output) = (path("input")?, path("output")?);
        let mut opts = defaults.clone();
        apply(t, &mut opts, &["input", "output"]).map_err(at)?;
        if let Some(other) = jobs.iter().position(|j| j.output == output) {
            return Err(at(format!(
                "writes {} like job {}",
                output.display(),
                other + 1
            )));
        }
        jobs.push(Job {
            input,
            output,
            opts,
        });
    }
    Ok(jobs)
}

/// Applies the option keys of `t` to `opts`; `also` lists the other keys `t` may hold.
fn apply(t: &Table, opts: &mut ConvertOptions, also: &[&str]) -> Result<(), String> {
    for (key, v) in t {
        let k = key.as_str();
        if !OPTION_KEYS.contains(&k) && !also.contains(&k) {
            return Err(format!(
                "unknown key `{k}` (options: {})",
                OPTION_KEYS.join(", ")
            ));
        }
        let flag = || v.as_bool().ok_or(format!("`{k}` must be true or false"));
        match k {
            "codec" => {
                opts.codec = v.as_str().ok_or("`codec` must be a string")?.parse()?;
            }
            "chunk_bytes" => {
                let n = match v {
                    Value::Integer(n) => u64::try_from(*n)
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or("`chunk_bytes` must be positive")?,
                    Value::String(s) => parse_size(s)?,
                    _ => return Err("`chunk_bytes` must be a size (\"4MiB\") or a number".into()),
                };
                opts.plan.target_bytes = Some(n);
            }
            "chunk" => {
                // A job's `chunk` replaces the inherited chunk extents, it does not add to them.
                let mut plan = PlanOptions {
                    target_bytes: opts.plan.target_bytes,
                    ..PlanOptions::default()
                };
                let specs: Vec<&str> = match v {
                    Value::String(s) => vec![s.as_str()],
                    Value::Array(a) => a
                        .iter()
                        .map(|x| x.as_str().ok_or("`chunk` entries must be strings"))
                        .collect::<Result<_, _>>()?,
                    _ => return Err("`chunk` must be a string or a list of strings".into()),
                };
                for s in specs {
                    plan.add_spec(s)?;
                }
                opts.plan = plan;
            }
            "unpack" => opts.open.unpack = flag()?,
            "skip_unsupported" => opts.open.skip_unsupported = flag()?,
            "follow_external" => opts.open.follow_external = flag()?,
            "write_through_symlink" => opts.write_through_symlink = flag()?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::CodecChoice;

    fn jobs(text: &str) -> Result<Vec<Job>, String> {
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
    fn mistakes_are_errors_naming_the_job() {
        let one = |extra: &str| jobs(&format!("[[job]]\ninput = \"a\"\noutput = \"b\"\n{extra}"));
        for (extra, msg) in [
            ("codek = \"raw\"", "job 1: unknown key `codek`"),
            ("codec = \"lz4\"", "codec \"lz4\""),
            ("unpack = \"yes\"", "`unpack` must be true or false"),
            ("chunk_bytes = -1", "`chunk_bytes` must be positive"),
            ("chunk_bytes = \"4 parsecs\"", "unknown unit"),
            ("chunk = 3", "`chunk` must be a string"),
            ("chunk = [\"time=0\"]", "not a positive integer"),
            (
                "[[job]]\ninput = \"c\"\noutput = \"b\"",
                "job 2: writes /m/b like job 1",
            ),
            ("[[job]]\noutput = \"c\"", "job 2: `input` is missing"),
        ] {
            let e = one(extra).unwrap_err();
            assert!(e.contains(msg), "{extra}: {e}");
        }
        assert!(jobs("").unwrap_err().contains("no [[job]]"));
        assert!(jobs("[job]\ninput = \"a\"")
            .unwrap_err()
            .contains("array of tables"));
        assert!(jobs("jobs = 1")
            .unwrap_err()
            .contains("unknown top-level key `jobs`"));
        assert!(jobs("[[job]\n").unwrap_err().contains("not a valid TOML"));
        assert!(
            jobs("[defaults]\ncodec = 1\n[[job]]\ninput = \"a\"\noutput = \"b\"")
                .unwrap_err()
                .starts_with("[defaults]: ")
        );
    }
}
