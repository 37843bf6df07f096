//! OpenLineage run events from the batch runner: `tet-convert --openlineage FILE|URL`.
//!
//! Every job of a run (a single conversion, each input of a batch, each combine) is one
//! OpenLineage *run*: a `START` event when it is handed to a worker, then `COMPLETE` (converted,
//! or up to date and skipped), `FAIL` (with the standard `errorMessage` run facet) or `ABORT`
//! (stopped by a signal). A job refused before it started gets its `START` and `FAIL` together.
//! Events follow spec 2-0-2 (`schemaURL`); docs/guide/provenance.md shows them.
//!
//! - **Run id**: a UUID (version 8, RFC 9562's name-based form with SHA-256) of the ledger's
//!   run id and the job's output. Both events of a job are derived from it where they are
//!   made, with no table to keep in step, and an auditor holding the `--report` ledger can
//!   compute the id of any row's OpenLineage run from the row (`run` + `output`).
//! - **Job**: namespace `$OPENLINEAGE_NAMESPACE` (the variable OpenLineage's clients read;
//!   default `tet-convert`), name the output (what a nightly run re-makes, so the runs of one
//!   output group under one job).
//! - **Datasets**: a local path as namespace `file` and its absolute path as name; an object URL
//!   as `scheme://bucket` and the key (OpenLineage's naming conventions).
//! - **Facets** (`tet_conversion` on the run, `tet_input` on each input, each with `_producer`
//!   and `_schemaURL`): `START` carries the job's parameters as the history row will record
//!   them; `COMPLETE` the output's last history row as written (its parameters and input
//!   digests, read back from the file) and the ledger row's status, so the event and the
//!   ledger row say the same.
//!
//! Transport: a FILE gets one JSON line per event, appended; an `http://` or `https://` URL gets
//! each event POSTed as JSON, as OpenLineage's HTTP transport does, to `{url}/api/v1/lineage`
//! (or to the URL as given when it has a path), with `Authorization: Bearer
//! $OPENLINEAGE_API_KEY` when that variable is set. A POST that fails (no connection, a
//! timeout, a 5xx or 429 status) is tried 3 times in all, 0.5 s then 1 s apart; a 4xx is not
//! retried. After an event could not be delivered the endpoint is taken as down: later events
//! are counted, not sent. Conversions never wait on lineage and are never undone by it: the
//! outputs and the ledger are kept, one line on stderr says how many events were not delivered
//! and why, and the run exits 1 (if it would have exited 0), so that a scheduler sees it.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use super::job::{Outcome, WireJob};
use super::ledger::{InputRow, RecordedPath, Status};

/// OpenLineage's run event schema this module writes.
pub const SCHEMA_URL: &str = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";
/// The standard error message run facet.
const ERROR_FACET_URL: &str =
    "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet";
/// The default job namespace (`$OPENLINEAGE_NAMESPACE` overrides it).
pub const DEFAULT_NAMESPACE: &str = "tet-convert";
/// POST attempts per event.
const ATTEMPTS: u32 = 3;

/// `--openlineage`: flattened into `tet-convert`'s arguments.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OpenLineageArgs {
    /// Emit OpenLineage run events for every job (START, then COMPLETE, FAIL or ABORT): appended
    /// as JSON lines to FILE, or POSTed to an http(s) URL as OpenLineage's HTTP transport does
    /// (`{URL}/api/v1/lineage` unless the URL has a path; `Authorization: Bearer
    /// $OPENLINEAGE_API_KEY` when set; job namespace `$OPENLINEAGE_NAMESPACE`, default
    /// tet-convert). Events that cannot be delivered are reported in one line and make the run
    /// exit 1; the conversions are kept.
    #[arg(long, value_name = "FILE|URL", value_parser = parse_target)]
    pub openlineage: Option<Target>,
}

/// Where the events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    File(PathBuf),
    /// The endpoint the events are POSTed to.
    Http(String),
}

/// The target named on the command line. The batch runner reads it from here: the run loop
/// ([`super::run::run`]) is handed no command-line arguments, and this keeps the front end's
/// part to the one flattened field.
static CONFIGURED: OnceLock<Target> = OnceLock::new();

/// Parses `--openlineage` and keeps it for the run ([`Emitter::configured`]).
fn parse_target(s: &str) -> Result<Target, String> {
    let t = target(s)?;
    let _ = CONFIGURED.set(t.clone());
    Ok(t)
}

/// `FILE` or an `http(s)://` URL; an URL without a path gets OpenLineage's `/api/v1/lineage`.
pub fn target(s: &str) -> Result<Target, String> {
    if s.is_empty() {
        return Err("give a file or an http(s) URL".into());
    }
    let lower = s.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        if lower.contains("://") {
            return Err(format!(
                "{s}: events go to a local file or an http(s) URL, not an object URL"
            ));
        }
        return Ok(Target::File(PathBuf::from(s)));
    }
    let mut url = url::Url::parse(s).map_err(|e| format!("{s}: {e}"))?;
    if url.path().is_empty() || url.path() == "/" {
        url.set_path("/api/v1/lineage");
    }
    Ok(Target::Http(url.to_string()))
}

enum Sink {
    File {
        path: PathBuf,
        file: Option<std::fs::File>,
    },
    Http {
        url: String,
        client: reqwest::blocking::Client,
        key: Option<String>,
    },
}

/// Emits the events of one run (a no-op when `--openlineage` was not given).
pub struct Emitter {
    sink: Option<Sink>,
    namespace: String,
    /// The ledger's run id.
    run: String,
    /// The run ids of the `START` events sent.
    started: BTreeSet<String>,
    sent: usize,
    /// Events not delivered, and the first reason.
    undelivered: usize,
    first_error: Option<String>,
}

impl Emitter {
    /// The emitter of the run `run` (the ledger's run id), for the `--openlineage` target given.
    pub fn configured(run: &str) -> Emitter {
        Emitter::new(CONFIGURED.get().cloned(), run)
    }

    pub fn new(target: Option<Target>, run: &str) -> Emitter {
        let sink = target.map(|t| match t {
            Target::File(path) => Sink::File { path, file: None },
            Target::Http(url) => Sink::Http {
                url,
                client: reqwest::blocking::Client::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .timeout(Duration::from_secs(10))
                    .build()
                    .unwrap_or_default(),
                key: std::env::var("OPENLINEAGE_API_KEY")
                    .ok()
                    .filter(|k| !k.is_empty()),
            },
        });
        Emitter {
            sink,
            namespace: std::env::var("OPENLINEAGE_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| DEFAULT_NAMESPACE.into()),
            run: run.to_string(),
            started: BTreeSet::new(),
            sent: 0,
            undelivered: 0,
            first_error: None,
        }
    }

    /// `START` of a job about to run.
    pub fn start(&mut self, job: &WireJob) {
        if self.sink.is_none() {
            return;
        }
        let Ok(output) = job.output.path() else {
            return;
        };
        let inputs: Vec<PathBuf> = match job.inputs.is_empty() {
            true => job.input.path().into_iter().collect(),
            false => job.inputs.iter().filter_map(|i| i.path().ok()).collect(),
        };
        let facet = json!({
            "_producer": producer(),
            "_schemaURL": facet_url("TetConversionRunFacet"),
            "ledgerRun": self.run,
            "parameters": job.settings.recorded_params(),
        });
        let inputs: Vec<Value> = inputs.iter().map(|p| dataset(p, None)).collect();
        let event = self.event("START", &output, json!({"tet_conversion": facet}), inputs);
        self.started.insert(run_id(&self.run, &output));
        self.send(&event);
    }

    /// `COMPLETE`, `FAIL` or `ABORT` of a job, from the outcome the ledger recorded (with a
    /// `START` first when the job never started).
    pub fn done(&mut self, o: &Outcome) {
        if self.sink.is_none() {
            return;
        }
        let row = &o.row;
        let output = RecordedPath {
            text: row.output.clone(),
            hex: row.output_hex.clone(),
        }
        .path();
        let recorded = recorded_row(&output);
        let inputs = input_datasets(row, recorded.as_ref());
        if !self.started.contains(&run_id(&self.run, &output)) {
            let facet = json!({
                "_producer": producer(),
                "_schemaURL": facet_url("TetConversionRunFacet"),
                "ledgerRun": self.run,
            });
            let start = self.event(
                "START",
                &output,
                json!({"tet_conversion": facet}),
                inputs.clone(),
            );
            self.send(&start);
        }
        let status = row.status();
        let kind = match (status, o.interrupted_by) {
            (_, Some(_)) | (Status::Interrupted, _) => "ABORT",
            (Status::Ok | Status::Skipped, _) => "COMPLETE",
            _ => "FAIL",
        };
        let mut facet = json!({
            "_producer": producer(),
            "_schemaURL": facet_url("TetConversionRunFacet"),
            "ledgerRun": self.run,
            "status": serde_json::to_value(status).unwrap_or(Value::Null),
        });
        if let Some(r) = &row.reason {
            facet["reason"] = r.clone().into();
        }
        if let (Some(h), "COMPLETE") = (&recorded, kind) {
            facet["parameters"] = json!(h.params);
            facet["inputDigests"] = json!(h.parents);
            facet["recordedAt"] = h.at.clone().into();
        }
        let mut facets = json!({"tet_conversion": facet});
        if kind == "FAIL" {
            facets["errorMessage"] = json!({
                "_producer": producer(),
                "_schemaURL": ERROR_FACET_URL,
                "message": row.reason.clone().unwrap_or_else(|| "failed".into()),
                "programmingLanguage": "Rust",
            });
        }
        let mut event = self.event(kind, &output, facets, inputs);
        if kind != "COMPLETE" {
            event["outputs"] = json!([]);
        }
        self.send(&event);
    }

    /// Ends the run: `Err(one line)` when some events were not delivered.
    pub fn finish(&mut self) -> Result<(), String> {
        if let Some(Sink::File { file: Some(f), .. }) = &mut self.sink {
            if let Err(e) = f.sync_data() {
                self.first_error.get_or_insert(e.to_string());
                self.undelivered = self.undelivered.max(1);
            }
        }
        if self.undelivered == 0 {
            return Ok(());
        }
        let to = match &self.sink {
            Some(Sink::File { path, .. }) => path.display().to_string(),
            Some(Sink::Http { url, .. }) => url.clone(),
            None => String::new(),
        };
        Err(format!(
            "--openlineage {to}: {} of {} events not delivered ({}); the conversions are kept",
            self.undelivered,
            self.undelivered + self.sent,
            self.first_error.as_deref().unwrap_or("?")
        ))
    }

    /// A run event for the job writing `output`.
    fn event(&self, kind: &str, output: &Path, run_facets: Value, inputs: Vec<Value>) -> Value {
        let out = dataset(output, None);
        json!({
            "eventType": kind,
            "eventTime": now(),
            "producer": producer(),
            "schemaURL": SCHEMA_URL,
            "run": {"runId": run_id(&self.run, output), "facets": run_facets},
            "job": {"namespace": self.namespace, "name": job_name(output)},
            "inputs": inputs,
            "outputs": [out],
        })
    }

    fn send(&mut self, event: &Value) {
        if self.undelivered > 0 {
            // The target failed once: counted, not tried again.
            self.undelivered += 1;
            return;
        }
        let result = match &mut self.sink {
            None => return,
            Some(Sink::File { path, file }) => append_line(path, file, event),
            Some(Sink::Http { url, client, key }) => post(client, url, key.as_deref(), event),
        };
        match result {
            Ok(()) => self.sent += 1,
            Err(e) => {
                self.undelivered += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }
}

fn append_line(path: &Path, file: &mut Option<std::fs::File>, event: &Value) -> Result<(), String> {
    if file.is_none() {
        *file = Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| e.to_string())?,
        );
    }
    let f = file.as_mut().ok_or("not open")?;
    // One write per event: lines of concurrent writers never interleave.
    f.write_all(format!("{event}\n").as_bytes())
        .map_err(|e| e.to_string())
}

fn post(
    client: &reqwest::blocking::Client,
    url: &str,
    key: Option<&str>,
    event: &Value,
) -> Result<(), String> {
    let body = event.to_string();
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(500 << (attempt - 1)));
        }
        let mut req = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        match req.send() {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => {
                let s = r.status();
                last = format!("HTTP {s}");
                if !(s.is_server_error() || s.as_u16() == 429) {
                    return Err(last);
                }
            }
            Err(e) => last = one_line(&e),
        }
    }
    Err(last)
}

/// An error and its causes on one line.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// The last history row of the written output (for `COMPLETE`): what the file records.
fn recorded_row(output: &Path) -> Option<tet::format::footer::HistoryRow> {
    if tet::storage::is_url(output) {
        return None;
    }
    let f = tet::format::TetFile::open(output).ok()?;
    let footer = f.footer().ok().flatten()?;
    footer.history.last().cloned()
}

/// The job's inputs as datasets, each with its digest (the output's record, else the ledger's).
fn input_datasets(
    row: &InputRow,
    recorded: Option<&tet::format::footer::HistoryRow>,
) -> Vec<Value> {
    let paths: Vec<PathBuf> = match row.inputs.is_empty() {
        true => vec![RecordedPath {
            text: row.input.clone(),
            hex: row.input_hex.clone(),
        }
        .path()],
        false => row.inputs.iter().map(PathBuf::from).collect(),
    };
    paths
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let digest = recorded
                .and_then(|h| h.parents.get(k).cloned())
                .or_else(|| (k == 0).then(|| row.input_digest.clone()).flatten());
            dataset(p, digest)
        })
        .collect()
}

/// A dataset: `file` + absolute path, or `scheme://bucket` + key; with its digest when known.
pub fn dataset(p: &Path, digest: Option<String>) -> Value {
    let (namespace, name) = naming(p);
    let mut d = json!({"namespace": namespace, "name": name});
    if let Some(digest) = digest {
        d["facets"] = json!({"tet_input": {
            "_producer": producer(),
            "_schemaURL": facet_url("TetInputDatasetFacet"),
            "digest": digest,
        }});
    }
    d
}

/// OpenLineage's naming of a path or object URL: (namespace, name).
pub fn naming(p: &Path) -> (String, String) {
    let text = p.to_string_lossy();
    if tet::storage::is_url(p) {
        if let Some((scheme, rest)) = text.split_once("://") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            return (format!("{scheme}://{bucket}"), key.to_string());
        }
    }
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    ("file".into(), abs.to_string_lossy().into_owned())
}

/// The job's name: its output as a dataset names it.
fn job_name(output: &Path) -> String {
    match naming(output) {
        (ns, name) if ns == "file" => name,
        (ns, name) => format!("{ns}/{name}"),
    }
}

/// The run id of the job writing `output` in the ledger run `run` (see the module docs).
pub fn run_id(run: &str, output: &Path) -> String {
    use sha2::Digest as _;
    use std::os::unix::ffi::OsStrExt;
    let mut h = sha2::Sha256::new();
    h.update(b"tet-convert openlineage run\0");
    h.update(run.as_bytes());
    h.update(b"\0");
    h.update(output.as_os_str().as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    uuid::Uuid::new_v8(b).to_string()
}

fn producer() -> String {
    format!(
        "{}/tree/v{}",
        env!("CARGO_PKG_REPOSITORY"),
        env!("CARGO_PKG_VERSION")
    )
}

/// Where our facets are described.
fn facet_url(name: &str) -> String {
    format!(
        "{}/blob/v{}/docs/guide/provenance.md#{}",
        env!("CARGO_PKG_REPOSITORY"),
        env!("CARGO_PKG_VERSION"),
        name.to_ascii_lowercase()
    )
}

/// Now, RFC 3339 UTC with milliseconds.
fn now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let s = super::ledger::rfc3339(d.as_secs());
    // `…:SSZ` → `…:SS.mmmZ`.
    match s.strip_suffix('Z') {
        Some(base) => format!("{base}.{:03}Z", d.subsec_millis()),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_names() {
        assert_eq!(
            target("http://h:5000").unwrap(),
            Target::Http("http://h:5000/api/v1/lineage".into())
        );
        assert_eq!(
            target("https://h/x/events").unwrap(),
            Target::Http("https://h/x/events".into())
        );
        assert_eq!(target("ev.jsonl").unwrap(), Target::File("ev.jsonl".into()));
        assert!(target("s3://b/k").is_err());
        assert_eq!(
            naming(Path::new("s3://bucket/a/b.nc")),
            ("s3://bucket".into(), "a/b.nc".into())
        );
        assert_eq!(
            naming(Path::new("/d/x.nc")),
            ("file".into(), "/d/x.nc".into())
        );
        let id = run_id("r1", Path::new("/o.tet"));
        assert_eq!(id, run_id("r1", Path::new("/o.tet")));
        assert_ne!(id, run_id("r2", Path::new("/o.tet")));
        assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 8);
    }
}
