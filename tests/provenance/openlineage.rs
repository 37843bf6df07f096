//! `tet-convert --openlineage FILE|URL` (issue 36, acceptance 3): the run events of a batch with
//! a failing input and of a combine, validated against OpenLineage's JSON schema
//! (`../shared/openlineage/OpenLineage.json`, with Python's `jsonschema`), written to a file and
//! POSTed to a small HTTP server in the test; a job that fails gives FAIL with its error, and
//! an endpoint that is down is reported and fails the run with the outputs kept.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{common, s};

fn tet_convert(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tet-convert"));
    c.current_dir(dir)
        .args(args)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .env_remove("OPENLINEAGE_API_KEY")
        .env_remove("OPENLINEAGE_NAMESPACE");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// Every event valid under OpenLineage's schema (formats checked where `jsonschema` can).
fn validate(events: &[Value]) {
    let Some(py) = common::python_with("jsonschema") else {
        return;
    };
    let schema = common::shared().join("openlineage/OpenLineage.json");
    let d = tempfile::tempdir().unwrap();
    let lines = d.path().join("events.jsonl");
    let text: String = events.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(&lines, text).unwrap();
    let script = r#"
import json, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
v = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
n = 0
for line in open(sys.argv[2]):
    event = json.loads(line)
    for e in v.iter_errors(event):
        print("invalid:", e.message, list(e.absolute_path)); sys.exit(1)
    # A wrong type is caught too (the schema is not vacuous).
    assert list(v.iter_errors(dict(event, eventTime=5)))
    n += 1
print(n)
"#;
    let o = Command::new(py)
        .args(["-c", script, s(&schema), s(&lines)])
        .output()
        .unwrap();
    let out = common::ok(&o, "jsonschema");
    assert_eq!(out.trim(), events.len().to_string());
}

fn read_lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The ledger's input rows by output name.
fn ledger_rows(p: &Path) -> BTreeMap<String, Value> {
    read_lines(p)
        .into_iter()
        .filter(|r| r["kind"] == "input")
        .map(|r| (r["output"].as_str().unwrap().to_string(), r))
        .collect()
}

/// The events of each run id, in order.
fn by_run(events: &[Value]) -> BTreeMap<String, Vec<Value>> {
    let mut m: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in events {
        let id = e["run"]["runId"].as_str().unwrap().to_string();
        m.entry(id).or_default().push(e.clone());
    }
    m
}

/// A batch of two good inputs and a broken one (`--keep-going`) with events to a file.
#[test]
fn openlineage_file_events_of_a_batch_with_a_failure() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().canonicalize().unwrap();
    std::fs::create_dir(dir.join("in")).unwrap();
    common::write_npy(&dir.join("in/a.npy"), 3);
    common::write_npy(&dir.join("in/b.npy"), 5);
    std::fs::write(dir.join("in/bad.npy"), b"\x93NUMPY not really").unwrap();
    let o = tet_convert(
        &dir,
        &[
            "-q",
            "--keep-going",
            "--out-dir",
            "out",
            "--report",
            "ledger.jsonl",
            "--openlineage",
            "events.jsonl",
            "in",
        ],
        &[("OPENLINEAGE_NAMESPACE", "nightly")],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let events = read_lines(&dir.join("events.jsonl"));
    assert_eq!(events.len(), 6, "{events:#?}");
    validate(&events);
    let rows = ledger_rows(&dir.join("ledger.jsonl"));
    assert_eq!(rows.len(), 3, "{rows:#?}");
    let runs = by_run(&events);
    assert_eq!(runs.len(), 3);
    let mut kinds = Vec::new();
    for evs in runs.values() {
        let [start, end] = evs.as_slice() else {
            panic!("{evs:#?}")
        };
        assert_eq!(start["eventType"], "START");
        assert_eq!(start["job"], end["job"]);
        assert_eq!(start["job"]["namespace"], "nightly");
        assert_eq!(start["producer"], end["producer"]);
        let out = end["outputs"][0]["name"].as_str().unwrap_or("");
        let out = start["outputs"][0]["name"]
            .as_str()
            .unwrap_or(out)
            .to_string();
        assert_eq!(start["outputs"][0]["namespace"], "file");
        assert!(Path::new(&out).is_absolute(), "{out}");
        assert_eq!(start["job"]["name"], out.as_str());
        // The ledger row of this job, and the event that ends it, agree.
        let rel = Path::new(&out).strip_prefix(&dir).unwrap();
        let row = rows
            .iter()
            .find(|(k, _)| Path::new(k).ends_with(rel))
            .map(|(_, r)| r)
            .unwrap_or_else(|| panic!("no ledger row for {out}: {rows:#?}"));
        let input = &end["inputs"][0];
        assert_eq!(input["namespace"], "file");
        assert_eq!(
            Path::new(input["name"].as_str().unwrap()),
            dir.join(row["input"].as_str().unwrap())
        );
        let facet = &end["run"]["facets"]["tet_conversion"];
        assert_eq!(facet["status"], row["status"]);
        assert_eq!(facet["ledgerRun"], row["run"]);
        assert!(facet["_producer"].is_string() && facet["_schemaURL"].is_string());
        match end["eventType"].as_str().unwrap() {
            "COMPLETE" => {
                assert_eq!(row["status"], "ok");
                assert_eq!(
                    input["facets"]["tet_input"]["digest"], row["input_digest"],
                    "{end:#}"
                );
                // What the written file records.
                let f = tet::format::TetFile::open(Path::new(&out)).unwrap();
                let h = f.footer().unwrap().unwrap().history.last().unwrap().clone();
                assert_eq!(facet["inputDigests"], serde_json::json!(h.parents));
                assert_eq!(facet["parameters"], serde_json::json!(h.params));
                assert_eq!(facet["parameters"]["codec"], "auto");
                assert_eq!(
                    start["run"]["facets"]["tet_conversion"]["parameters"]["codec"],
                    "auto"
                );
                assert_eq!(end["outputs"][0]["name"], out.as_str());
            }
            "FAIL" => {
                assert_eq!(row["status"], "failed");
                let err = &end["run"]["facets"]["errorMessage"];
                assert_eq!(err["message"], row["reason"]);
                assert!(!err["message"].as_str().unwrap().is_empty());
                assert_eq!(err["programmingLanguage"], "Rust");
                assert!(out.ends_with("bad.tet"), "{out}");
                assert!(!Path::new(&out).exists());
            }
            other => panic!("{other}: {end:#}"),
        }
        kinds.push(end["eventType"].as_str().unwrap().to_string());
    }
    kinds.sort();
    assert_eq!(kinds, ["COMPLETE", "COMPLETE", "FAIL"]);
    // Appended: a second run adds its events (the outputs are up to date: COMPLETE, skipped).
    let o = tet_convert(
        &dir,
        &[
            "-q",
            "--out-dir",
            "out",
            "--openlineage",
            "events.jsonl",
            "in/a.npy",
        ],
        &[],
    );
    common::ok(&o, "second run");
    let again = read_lines(&dir.join("events.jsonl"));
    assert_eq!(again.len(), 8);
    assert_eq!(again[..6], events[..]);
    assert_eq!(again[7]["eventType"], "COMPLETE");
    assert_eq!(
        again[7]["run"]["facets"]["tet_conversion"]["status"],
        "skipped"
    );
    assert_eq!(again[7]["job"]["namespace"], "tet-convert");
    assert_ne!(again[7]["run"]["runId"], events[0]["run"]["runId"]);
}

/// What the test's HTTP server received: (request line, headers lower-cased, body).
type Received = Arc<Mutex<Vec<(String, BTreeMap<String, String>, String)>>>;

/// A small HTTP/1.1 server on 127.0.0.1 that answers 200 to every request (keep-alive too)
/// and keeps what it received.
fn serve() -> (String, Received) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let got: Received = Arc::default();
    let keep = got.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            let keep = keep.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut headers = BTreeMap::new();
                    loop {
                        let mut h = String::new();
                        r.read_line(&mut h).unwrap();
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        let (k, v) = h.split_once(':').unwrap();
                        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                    }
                    let n: usize = headers
                        .get("content-length")
                        .map_or(0, |v| v.parse().unwrap());
                    let mut body = vec![0; n];
                    r.read_exact(&mut body).unwrap();
                    keep.lock().unwrap().push((
                        line.trim_end().to_string(),
                        headers,
                        String::from_utf8(body).unwrap(),
                    ));
                    conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                        .unwrap();
                }
            });
        }
    });
    (url, got)
}

/// Events POSTed as OpenLineage's HTTP transport does, with the API key; a combine's job has
/// every input; an endpoint that is down fails the run and keeps the outputs.
#[test]
fn openlineage_http_events_received_by_a_server() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().canonicalize().unwrap();
    common::write_npy(&dir.join("a.npy"), 3);
    let (url, got) = serve();
    let o = tet_convert(
        &dir,
        &["-q", "--openlineage", &url, "a.npy", "a.tet"],
        &[("OPENLINEAGE_API_KEY", "k3y")],
    );
    common::ok(&o, "tet-convert --openlineage URL");
    let received = got.lock().unwrap().clone();
    assert_eq!(received.len(), 2, "{received:#?}");
    let mut events = Vec::new();
    for (line, headers, body) in &received {
        assert_eq!(line, "POST /api/v1/lineage HTTP/1.1");
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(headers["authorization"], "Bearer k3y");
        events.push(serde_json::from_str::<Value>(body).unwrap());
    }
    assert_eq!(events[0]["eventType"], "START");
    assert_eq!(events[1]["eventType"], "COMPLETE");
    assert_eq!(events[0]["run"]["runId"], events[1]["run"]["runId"]);
    assert_eq!(events[1]["inputs"][0]["name"], s(&dir.join("a.npy")));
    assert_eq!(events[1]["outputs"][0]["name"], s(&dir.join("a.tet")));
    #[cfg_attr(not(feature = "netcdf"), allow(unused_mut))]
    let mut all = events.clone();

    // A URL with a path is used as given; a combine is one job with every input.
    #[cfg(feature = "netcdf")]
    {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/concat");
        for day in ["day1.nc", "day2.nc"] {
            std::fs::copy(fixtures.join(day), dir.join(day)).unwrap();
        }
        got.lock().unwrap().clear();
        let o = tet_convert(
            &dir,
            &[
                "-q",
                "--openlineage",
                &format!("{url}/custom/events"),
                "--concat",
                "time",
                "day1.nc",
                "day2.nc",
                "week.tet",
            ],
            &[],
        );
        common::ok(&o, "a combine");
        let received = got.lock().unwrap().clone();
        assert_eq!(received.len(), 2);
        assert_eq!(received[0].0, "POST /custom/events HTTP/1.1");
        assert!(!received[0].1.contains_key("authorization"));
        let end: Value = serde_json::from_str(&received[1].2).unwrap();
        let names: Vec<&str> = end["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, [s(&dir.join("day1.nc")), s(&dir.join("day2.nc"))]);
        let f = tet::format::TetFile::open(&dir.join("week.tet")).unwrap();
        let h = f.footer().unwrap().unwrap().history.last().unwrap().clone();
        assert_eq!(h.parents.len(), 2);
        for (k, i) in end["inputs"].as_array().unwrap().iter().enumerate() {
            assert_eq!(i["facets"]["tet_input"]["digest"], h.parents[k].as_str());
        }
        assert_eq!(
            end["run"]["facets"]["tet_conversion"]["parameters"]["concat"],
            "time"
        );
        all.extend(received.iter().map(|r| serde_json::from_str(&r.2).unwrap()));
    }
    validate(&all);

    // Nothing listens: one line says so, the run exits 1, the output is kept.
    let down = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let o = tet_convert(&dir, &["-q", "--openlineage", &down, "a.npy", "b.tet"], &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "--openlineage {down}/api/v1/lineage: 2 of 2 events not delivered"
        )),
        "{err}"
    );
    assert!(err.contains("the conversions are kept"), "{err}");
    let f = tet::format::TetFile::open(&dir.join("b.tet")).unwrap();
    let v = tet::format::verify::verify(&f, tet::format::verify::Depth::Deep);
    assert!(v.failures.is_empty(), "{:?}", v.failures);
}
