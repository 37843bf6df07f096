//! `tet export` to an object URL and `--storage-option` on `tet info`, `verify`, `audit` and
//! `export` (issue 22), against a real S3 server: moto's server mode on a free port of
//! 127.0.0.1, from the Python environment `.ci/s3-setup` prepares (TET_PYTHON, else
//! python/.venv/bin/python, else python3), as in `tests/object_store.rs` and
//! `tests/ranged_tet.rs`. Skipped with a printed reason only when moto cannot start.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CONVERT: &str = env!("CARGO_BIN_EXE_tet-convert");
const TET: &str = env!("CARGO_BIN_EXE_tet");

/// boto3: `python -c HELPER CMD ARGS…` against the server in `AWS_ENDPOINT_URL`.
const HELPER: &str = r#"
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "mb":
    s3.create_bucket(Bucket=args[0])
elif cmd == "put":
    s3.upload_file(args[2], args[0], args[1])
elif cmd == "get":
    s3.download_file(args[0], args[1], args[2])
elif cmd == "ls":
    for o in s3.list_objects_v2(Bucket=args[0], Prefix=args[1]).get("Contents", []):
        print(o["Key"])
elif cmd == "uploads":
    for u in s3.list_multipart_uploads(Bucket=args[0]).get("Uploads", []):
        print(u["Key"])
"#;

/// The variables that could point a client at a store or give it credentials.
const AWS_VARS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT",
    "AWS_ALLOW_HTTP",
    "AWS_PROFILE",
];

fn python() -> PathBuf {
    if let Ok(p) = std::env::var("TET_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/.venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// A moto server on a free port of 127.0.0.1, killed when dropped.
struct Moto {
    child: Child,
    endpoint: String,
    python: PathBuf,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// The server, or why it cannot start (the test is then skipped).
    fn start() -> Result<Moto, String> {
        let python = python();
        let ok = Command::new(&python)
            .args(["-c", "import moto.server, boto3"])
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("{}: {e}", python.display()))?;
        if !ok.success() {
            return Err(format!(
                "{} has no moto[server] (run .ci/s3-setup)",
                python.display()
            ));
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let child = Command::new(&python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            python,
        };
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if t.elapsed() > Duration::from_secs(30) {
                return Err("moto did not listen within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(moto)
    }

    /// The settings from the environment, with this endpoint.
    fn env(&self, c: &mut Command, endpoint: &str) {
        c.env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "verysecretvalue")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ENDPOINT_URL", endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_PROFILE");
    }

    fn helper(&self, args: &[&str]) -> String {
        let mut c = Command::new(&self.python);
        c.arg("-c").arg(HELPER).args(args);
        self.env(&mut c, &self.endpoint);
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "helper {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn command(&self, bin: &str, args: &[&str]) -> Command {
        let mut c = Command::new(bin);
        c.args(args);
        self.env(&mut c, &self.endpoint);
        c
    }

    fn run(&self, bin: &str, args: &[&str]) -> Output {
        self.command(bin, args).output().unwrap()
    }

    /// The keys under `prefix` of `bucket`.
    fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let listed = self.helper(&["ls", bucket, prefix]);
        listed.lines().map(str::to_string).collect()
    }

    /// The keys of `bucket` with a multipart upload in progress.
    fn uploads(&self, bucket: &str) -> Vec<String> {
        let listed = self.helper(&["uploads", bucket]);
        listed.lines().map(str::to_string).collect()
    }

    fn get(&self, bucket: &str, key: &str, to: &Path) -> Vec<u8> {
        self.helper(&["get", bucket, key, to.to_str().unwrap()]);
        std::fs::read(to).unwrap()
    }
}

macro_rules! moto_or_skip {
    () => {
        match Moto::start() {
            Ok(m) => m,
            Err(why) => {
                eprintln!("skipped: no S3 server: {why}");
                return;
            }
        }
    };
}

/// A TCP proxy in front of the server that records request lines and holds (never forwards)
/// the request whose line contains `stall`, and everything after it on that connection.
struct StallingProxy {
    endpoint: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl StallingProxy {
    fn start(upstream: &str, stall: &'static str) -> StallingProxy {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = lines.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let Ok(mut server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    let mut pending = Vec::new();
                    let mut stalled = false;
                    while let Ok(n @ 1..) = client.read(&mut buf) {
                        pending.extend_from_slice(&buf[..n]);
                        while let Some(i) = pending.windows(2).position(|w| w == b"\r\n") {
                            let line = String::from_utf8_lossy(&pending[..i]).into_owned();
                            pending.drain(..i + 2);
                            let verb = ["GET ", "HEAD ", "PUT ", "POST ", "DELETE "];
                            if verb.iter().any(|v| line.starts_with(v)) {
                                stalled |= line.contains(stall);
                                seen.lock().unwrap().push(line);
                            }
                        }
                        if pending.len() > 1 << 20 {
                            pending.clear();
                        }
                        if !stalled && server.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = server.shutdown(std::net::Shutdown::Both);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s2, &mut c2);
                    let _ = c2.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        StallingProxy { endpoint, lines }
    }

    fn saw(&self, pattern: &str) -> bool {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(pattern))
    }
}

fn ok(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A failure: not a success, and exactly one line on stderr, which is returned.
fn one_line_failure(o: &Output, what: &str) -> String {
    assert!(!o.status.success(), "{what}: succeeded");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
    err
}

/// What is in a folder (the spool), sorted.
fn entries(dir: &Path) -> Vec<String> {
    common::only_files(dir)
}

/// The golden `.tet` fixture (three datasets, one in a group, one empty).
fn small_tet() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/small.tet")
}

#[test]
fn an_export_to_an_object_equals_the_local_export() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "tets"]);
    moto.helper(&["mb", "out"]);
    let tmp = tempfile::tempdir().unwrap();
    let spool = tmp.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    let tet = small_tet();
    moto.helper(&["put", "tets", "x.tet", tet.to_str().unwrap()]);
    let sp = spool.to_str().unwrap();
    for (ext, extra) in [
        ("nc", &[][..]),
        ("npz", &[][..]),
        ("npy", &["--dataset", "temperature"][..]),
    ] {
        let local = tmp.path().join(format!("local.{ext}"));
        let mut args = vec![
            "export",
            tet.to_str().unwrap(),
            local.to_str().unwrap(),
            "-q",
        ];
        args.extend(extra);
        ok(&moto.run(TET, &args), "local export");
        let want = std::fs::read(&local).unwrap();
        // From an object and from a local file, to an object.
        for (input, key) in [
            ("s3://tets/x.tet", format!("from-s3.{ext}")),
            (tet.to_str().unwrap(), format!("from-file.{ext}")),
        ] {
            let url = format!("s3://out/{key}");
            let mut args = vec!["export", input, &url, "--spool-dir", sp, "--json"];
            args.extend(extra);
            let out = ok(&moto.run(TET, &args), &url);
            let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
            assert_eq!(report["output"], url.as_str());
            assert_eq!(report["input"], input);
            let got = moto.get("out", &key, &tmp.path().join("got"));
            assert!(got == want, "{url}: differs from the local export");
            assert!(entries(&spool).is_empty(), "{url}: {:?}", entries(&spool));
        }
    }
    // No markers or uploads left beside the outputs.
    let mut keys = moto.keys("out", "");
    keys.sort();
    assert_eq!(
        keys,
        [
            "from-file.nc",
            "from-file.npy",
            "from-file.npz",
            "from-s3.nc",
            "from-s3.npy",
            "from-s3.npz"
        ]
    );
    assert!(moto.uploads("out").is_empty());

    // An existing object is refused as an existing file is, and kept; --force replaces it.
    let url = "s3://out/from-s3.npz";
    let o = moto.run(
        TET,
        &["export", "s3://tets/x.tet", url, "--dataset", "temperature"],
    );
    let err = one_line_failure(&o, "existing");
    assert!(
        err.contains(&format!("{url}: exists (use --force to replace it)")),
        "{err}"
    );
    let before = moto.get("out", "from-s3.npz", &tmp.path().join("got"));
    assert_eq!(before, std::fs::read(tmp.path().join("local.npz")).unwrap());
    let args = [
        "export",
        "s3://tets/x.tet",
        url,
        "--dataset",
        "temperature",
        "--force",
        "-q",
    ];
    ok(&moto.run(TET, &args), "--force");
    let after = moto.get("out", "from-s3.npz", &tmp.path().join("got"));
    assert_ne!(after, before, "--force replaced nothing");
    let local = tmp.path().join("one.npz");
    let args = [
        "export",
        tet.to_str().unwrap(),
        local.to_str().unwrap(),
        "--dataset",
        "temperature",
    ];
    ok(&moto.run(TET, &args), "local one-array npz");
    assert_eq!(after, std::fs::read(&local).unwrap());

    // A Zarr store or a directory of .npy files is many objects: refused before anything.
    for (out, to) in [
        ("s3://out/x.zarr", None),
        ("s3://out/arrays", Some("npy")),
        ("s3://out/x.nc", Some("zarr")),
    ] {
        let mut args = vec!["export", "s3://tets/x.tet", out];
        if let Some(t) = to {
            args.extend(["--to", t]);
        }
        let err = one_line_failure(&moto.run(TET, &args), out);
        assert!(err.starts_with(&format!("tet: {out}: a ")), "{err}");
        assert!(err.contains("cannot be published"), "{err}");
    }
    assert_eq!(moto.keys("out", "x").len(), 0);
    assert_eq!(moto.keys("out", "arrays").len(), 0);
}

#[test]
fn a_failed_export_to_an_object_leaves_no_object_and_no_staging_file() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "tets"]);
    let tmp = tempfile::tempdir().unwrap();
    let spool = tmp.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    let sp = spool.to_str().unwrap();
    let tet = small_tet();
    moto.helper(&["put", "tets", "x.tet", tet.to_str().unwrap()]);
    // No such dataset: the export fails, nothing staged or uploaded.
    for input in ["s3://tets/x.tet", tet.to_str().unwrap()] {
        let o = moto.run(
            TET,
            &[
                "export",
                input,
                "s3://tets/y.nc",
                "--dataset",
                "nosuch",
                "--spool-dir",
                sp,
            ],
        );
        let err = one_line_failure(&o, "nosuch");
        assert!(err.contains("nosuch"), "{err}");
        assert!(err.starts_with(&format!("tet: {input}: ")), "{err}");
        assert!(moto.keys("tets", "y").is_empty());
        assert!(moto.keys("tets", ".y").is_empty());
        assert!(moto.uploads("tets").is_empty());
        assert!(entries(&spool).is_empty(), "{:?}", entries(&spool));
    }
    // A missing input object, a missing output bucket: one line naming the URL.
    let o = moto.run(TET, &["export", "s3://tets/none.tet", "s3://tets/y.nc"]);
    let err = one_line_failure(&o, "missing input");
    assert_eq!(err.trim(), "tet: s3://tets/none.tet: no such key");
    let o = moto.run(
        TET,
        &[
            "export",
            "s3://tets/x.tet",
            "s3://nobucket/y.nc",
            "--spool-dir",
            sp,
        ],
    );
    let err = one_line_failure(&o, "missing bucket");
    assert!(err.starts_with("tet: s3://nobucket/y.nc: "), "{err}");
    assert!(entries(&spool).is_empty(), "{:?}", entries(&spool));
    assert!(moto.keys("tets", "y").is_empty());
}

#[test]
fn a_terminated_export_upload_leaves_no_object_and_a_killed_one_is_aborted_by_the_next_run() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "tets"]);
    let tmp = tempfile::tempdir().unwrap();
    // 40 MiB of f32: an NPZ (stored) of three 16 MiB parts.
    let npy = tmp.path().join("big.npy");
    common::write_npy(&npy, 2560);
    let tet = tmp.path().join("big.tet");
    ok(
        &moto.run(CONVERT, &[npy.to_str().unwrap(), tet.to_str().unwrap()]),
        "convert",
    );
    let spool = tmp.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    let args = [
        "export",
        tet.to_str().unwrap(),
        "s3://tets/big.npz",
        "--spool-dir",
        spool.to_str().unwrap(),
    ];
    for sig in ["TERM", "KILL"] {
        // The second part's upload hangs in the proxy; the signal comes while it does.
        let proxy = StallingProxy::start(&moto.endpoint, "partNumber=2");
        let mut c = Command::new(TET);
        c.args(args);
        moto.env(&mut c, &proxy.endpoint);
        let child = c.stderr(Stdio::piped()).spawn().unwrap();
        let t = Instant::now();
        while !proxy.saw("partNumber=2") {
            assert!(t.elapsed() < Duration::from_secs(120), "no part 2 upload");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        let killed = Command::new("kill")
            .args([format!("-{sig}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let o = child.wait_with_output().unwrap();
        assert!(!o.status.success(), "{sig}");
        assert!(moto.keys("tets", "big.npz").is_empty(), "{sig}: an object");
        if sig == "TERM" {
            // Aborted by the run itself, its marker and staging file removed; 128 + 15.
            assert_eq!(o.status.code(), Some(143));
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(err.trim(), "tet: s3://tets/big.npz: interrupted");
            assert!(moto.uploads("tets").is_empty());
            assert!(moto.keys("tets", ".big.npz").is_empty());
            assert!(entries(&spool).is_empty(), "{:?}", entries(&spool));
        } else {
            // Killed outright: the upload and its marker stay, and the staged file.
            assert_eq!(moto.uploads("tets"), ["big.npz"]);
            assert_eq!(moto.keys("tets", ".big.npz").len(), 1);
            assert_eq!(entries(&spool).len(), 1);
        }
    }
    // The next run aborts the stale upload, removes the dead spool, and publishes.
    ok(&moto.run(TET, &args), "after SIGKILL");
    assert!(moto.uploads("tets").is_empty());
    assert_eq!(moto.keys("tets", ""), ["big.npz"]);
    assert!(entries(&spool).is_empty(), "{:?}", entries(&spool));
    let local = tmp.path().join("local.npz");
    ok(
        &moto.run(
            TET,
            &["export", tet.to_str().unwrap(), local.to_str().unwrap()],
        ),
        "local export",
    );
    let got = moto.get("tets", "big.npz", &tmp.path().join("got.npz"));
    assert!(got == std::fs::read(&local).unwrap(), "differs");
}

#[test]
fn storage_options_reach_the_store_of_every_command_and_no_secret_is_printed() {
    let moto = moto_or_skip!();
    moto.helper(&["mb", "opts"]);
    let tmp = tempfile::tempdir().unwrap();
    // An input object converted to a local .tet (its history names the URL), and that .tet as
    // an object.
    let npy = tmp.path().join("in.npy");
    common::write_npy(&npy, 8);
    moto.helper(&["put", "opts", "in.npy", npy.to_str().unwrap()]);
    let x = tmp.path().join("x.tet");
    let xs = x.to_str().unwrap();
    ok(&moto.run(CONVERT, &["s3://opts/in.npy", xs]), "convert");
    moto.helper(&["put", "opts", "x.tet", xs]);

    // Nothing in the environment: the endpoint and credentials only as --storage-option.
    let secret = "Fake+Secret/Key0123456789";
    let given = |endpoint: &str| -> Vec<String> {
        [
            format!("aws_endpoint={endpoint}"),
            "aws_allow_http=true".into(),
            "aws_access_key_id=testing".into(),
            format!("aws_secret_access_key={secret}"),
            "aws_region=us-east-1".into(),
            "max_retries=0".into(),
        ]
        .into_iter()
        .flat_map(|o| ["--storage-option".to_string(), o])
        .collect()
    };
    let bare = |args: &[&str], opts: &[String]| {
        let mut c = Command::new(TET);
        for v in AWS_VARS {
            c.env_remove(v);
        }
        c.args(args).args(opts).output().unwrap()
    };
    let good = given(&moto.endpoint);
    let nc = tmp.path().join("x.nc");
    let commands: Vec<Vec<&str>> = vec![
        vec!["info", "s3://opts/x.tet"],
        vec!["verify", "--deep", "s3://opts/x.tet"],
        vec!["audit", "s3://opts/x.tet"],
        vec!["audit", xs, "--source", "s3://opts/in.npy"],
        vec!["export", "s3://opts/x.tet", nc.to_str().unwrap()],
        vec!["export", xs, "s3://opts/x.nc"],
    ];
    for args in &commands {
        let out = ok(&bare(args, &good), &args.join(" "));
        assert!(!out.contains(secret), "{args:?}: {out}");
    }
    assert_eq!(moto.keys("opts", "x.nc"), ["x.nc"]);
    let audit = ok(&bare(&["audit", xs, "--json"], &good), "audit --json");
    let v: serde_json::Value = serde_json::from_str(audit.trim()).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["inputs"][0]["input"], "s3://opts/in.npy", "{v}");
    assert_eq!(v["inputs"][0]["status"], "unchanged", "{v}");
    let info = ok(&bare(&["info", "s3://opts/x.tet", "--json"], &good), "info");
    let local = ok(&bare(&["info", xs, "--json"], &[]), "local info");
    let datasets =
        |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap()["datasets"].clone();
    assert_eq!(datasets(&info), datasets(&local));
    assert!(datasets(&info).as_array().is_some_and(|d| !d.is_empty()));

    // A wrong value (an endpoint nothing listens on): one line naming the URL, no secret.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let wrong = given(&format!("http://127.0.0.1:{port}"));
    let gone = tmp.path().join("gone.nc");
    let failing: Vec<(Vec<&str>, &str)> = vec![
        (vec!["info", "s3://opts/x.tet"], "s3://opts/x.tet"),
        (vec!["audit", "s3://opts/x.tet"], "s3://opts/x.tet"),
        (
            vec!["export", "s3://opts/x.tet", gone.to_str().unwrap()],
            "s3://opts/x.tet",
        ),
        (vec!["export", xs, "s3://opts/y.nc"], "s3://opts/y.nc"),
    ];
    for (args, url) in &failing {
        let o = bare(args, &wrong);
        let err = one_line_failure(&o, &args.join(" "));
        assert!(
            err.starts_with(&format!("tet: {url}: endpoint unreachable")),
            "{args:?}: {err}"
        );
        assert!(!err.contains(secret), "{args:?}: {err}");
        assert!(!gone.exists());
    }
    // verify prints its failure as a finding naming the URL.
    let o = bare(&["verify", "s3://opts/x.tet"], &wrong);
    assert!(!o.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(all.contains("s3://opts/x.tet"), "{all}");
    assert!(all.contains("endpoint unreachable"), "{all}");
    assert!(!all.contains(secret), "{all}");
    // A key the store does not take: named, and its value not printed.
    let mut unknown = good.clone();
    unknown.extend(["--storage-option".into(), format!("no_such_key={secret}")]);
    let err = one_line_failure(&bare(&["info", "s3://opts/x.tet"], &unknown), "unknown");
    assert_eq!(
        err.trim(),
        "tet: s3://opts/x.tet: unknown storage option no_such_key for this kind of URL"
    );
    // A recorded object input audited without the options cannot be read.
    let o = bare(&["audit", xs, "--json"], &wrong);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains(secret), "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_ne!(v["inputs"][0]["status"], "unchanged", "{v}");
}
