//! A moto S3 server for the object storage tests (issue 22): moto's server mode, started on a
//! free port of 127.0.0.1 from the Python environment `.ci/s3-setup` prepares (TET_PYTHON, else
//! python/.venv/bin/python, else python3), killed when dropped; boto3 (the standard client) makes
//! and reads back buckets and objects; a TCP [`Proxy`] in front of it records the requests and
//! can cut, hold, deny or fail some. A test that cannot start moto is skipped with a printed
//! reason ([`moto_or_skip!`](crate::moto_or_skip)).

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The started [`Moto`] (or the result of the expression given), or a return from the test with
/// the printed reason moto cannot start.
#[macro_export]
macro_rules! moto_or_skip {
    () => {
        $crate::moto_or_skip!($crate::common::s3::Moto::start())
    };
    ($start:expr) => {
        match $start {
            Ok(m) => m,
            Err(why) => {
                eprintln!("skipped: no S3 server: {why}");
                return;
            }
        }
    };
}

/// The boto3 side of the tests: `python -c HELPER CMD ARGS…` against the server in
/// `AWS_ENDPOINT_URL`. `put` of a folder uploads every file under it below the key.
pub const HELPER: &str = r#"
import os, sys, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "mb":
    s3.create_bucket(Bucket=args[0])
elif cmd == "put":
    bucket, key, path = args
    if os.path.isdir(path):
        for root, _, files in os.walk(path):
            for f in files:
                full = os.path.join(root, f)
                rel = os.path.relpath(full, path)
                s3.upload_file(full, bucket, key.rstrip("/") + "/" + rel)
    else:
        s3.upload_file(path, bucket, key)
elif cmd == "get":
    bucket, key, path = args
    s3.download_file(bucket, key, path)
elif cmd == "ls":
    bucket, prefix = args
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            print(o["Key"])
elif cmd == "uploads":
    bucket = args[0]
    for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
        print(u["Key"])
elif cmd == "corrupt":
    bucket, key = args
    o = s3.get_object(Bucket=bucket, Key=key)
    b = bytearray(o["Body"].read())
    b[len(b) // 3] ^= 0xFF
    s3.put_object(Bucket=bucket, Key=key, Body=bytes(b), Metadata=o["Metadata"])
"#;

/// The variables that could point a client at a store or give it credentials.
pub const AWS_VARS: &[&str] = &[
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

/// The Python with moto and boto3: TET_PYTHON, else python/.venv/bin/python, else python3.
pub fn python() -> PathBuf {
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

/// A moto server on a free port of 127.0.0.1, killed when dropped; with
/// [`Moto::start_recorded`], a recording [`Proxy`] in front of it that the tools run through.
pub struct Moto {
    child: Child,
    /// The server's own endpoint (`http://127.0.0.1:PORT`).
    pub endpoint: String,
    python: PathBuf,
    recorder: Option<Proxy>,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// The server, or why it cannot start (the test is then skipped).
    pub fn start() -> Result<Moto, String> {
        Moto::launch(false)
    }

    /// [`Moto::start`] with a recording proxy in front: [`Moto::run`] and [`Moto::command`] go
    /// through it (boto3 does not), [`Moto::take`] returns what it recorded.
    pub fn start_recorded() -> Result<Moto, String> {
        Moto::launch(true)
    }

    fn launch(recorded: bool) -> Result<Moto, String> {
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
        let mut moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            python,
            recorder: None,
        };
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if t.elapsed() > Duration::from_secs(30) {
                return Err("moto did not listen within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if recorded {
            moto.recorder = Some(Proxy::start(&moto.endpoint, None, None));
        }
        Ok(moto)
    }

    /// The endpoint the tools are given: the recording proxy's, else the server's.
    fn tools_endpoint(&self) -> &str {
        self.recorder
            .as_ref()
            .map_or(self.endpoint.as_str(), |p| p.endpoint.as_str())
    }

    /// The test credentials, region and plain HTTP, with the tools' endpoint.
    pub fn env(&self, c: &mut Command) {
        self.env_at(c, self.tools_endpoint());
    }

    /// The test credentials, region and plain HTTP, with this endpoint (a proxy's).
    pub fn env_at(&self, c: &mut Command, endpoint: &str) {
        c.env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "verysecretvalue")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ENDPOINT_URL", endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_PROFILE");
    }

    /// Runs [`HELPER`] with these arguments against the server itself (never the proxy); its
    /// stdout.
    pub fn helper(&self, args: &[&str]) -> String {
        let mut c = Command::new(&self.python);
        c.arg("-c").arg(HELPER).args(args);
        self.env_at(&mut c, &self.endpoint);
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "helper {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `bin args…` with [`Moto::env`].
    pub fn command(&self, bin: &str, args: &[&str]) -> Command {
        let mut c = Command::new(bin);
        c.args(args);
        self.env(&mut c);
        c
    }

    /// Runs [`Moto::command`] to its end.
    pub fn run(&self, bin: &str, args: &[&str]) -> Output {
        self.command(bin, args).output().unwrap()
    }

    /// The keys under `prefix` of `bucket`.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let listed = self.helper(&["ls", bucket, prefix]);
        listed.lines().map(str::to_string).collect()
    }

    /// The keys of `bucket` with a multipart upload in progress.
    pub fn uploads(&self, bucket: &str) -> Vec<String> {
        let listed = self.helper(&["uploads", bucket]);
        listed.lines().map(str::to_string).collect()
    }

    /// Downloads `key` of `bucket` to `to`; its bytes.
    pub fn get(&self, bucket: &str, key: &str, to: &Path) -> Vec<u8> {
        self.helper(&["get", bucket, key, to.to_str().unwrap()]);
        std::fs::read(to).unwrap()
    }

    /// What the recording proxy of [`Moto::start_recorded`] saw since the last call (see
    /// [`Proxy::take`]).
    pub fn take(&self) -> Vec<String> {
        self.recorder
            .as_ref()
            .expect("a server started with Moto::start_recorded")
            .take()
    }
}

/// A TCP proxy in front of the server that records every request line (`GET /bucket/key …`)
/// and each Range header (`RANGE bytes=A-B <its request line>`), and can cut the response to
/// requests whose line contains `cut` after 64 KiB (a server dying mid-download), hold (never
/// forward) a request, deny one or fail some with 503 SlowDown.
pub struct Proxy {
    pub endpoint: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// A proxy that cuts responses to GETs whose line contains `cut` and holds the request whose
    /// line contains `stall` and everything after it on that connection.
    pub fn start(upstream: &str, cut: Option<&'static str>, stall: Option<&'static str>) -> Proxy {
        Proxy::start_denying(upstream, cut, stall, None)
    }

    /// [`Proxy::start`] that also answers requests whose line contains `deny` with S3's
    /// 403 AccessDenied itself.
    pub fn start_denying(
        upstream: &str,
        cut: Option<&'static str>,
        stall: Option<&'static str>,
        deny: Option<&'static str>,
    ) -> Proxy {
        Proxy::start_faulty(upstream, cut, stall, deny, None, usize::MAX)
    }

    /// A proxy that cuts the response to the first GET whose line contains `pattern` after
    /// 64 KiB, once: the next requests are forwarded whole (a body stream that breaks once).
    pub fn start_cut_once(upstream: &str, pattern: &'static str) -> Proxy {
        Proxy::start_faulty(upstream, Some(pattern), None, None, None, 1)
    }

    /// A proxy that answers the first `n` requests whose line contains `pattern` with S3's
    /// 503 SlowDown itself (a transient failure the client retries), and forwards the rest.
    pub fn start_flaky(upstream: &str, pattern: &'static str, n: usize) -> Proxy {
        let left = Arc::new(std::sync::atomic::AtomicUsize::new(n));
        Proxy::start_faulty(
            upstream,
            None,
            None,
            None,
            Some((pattern, left)),
            usize::MAX,
        )
    }

    fn start_faulty(
        upstream: &str,
        cut: Option<&'static str>,
        stall: Option<&'static str>,
        deny: Option<&'static str>,
        flaky: Option<(&'static str, std::sync::Arc<std::sync::atomic::AtomicUsize>)>,
        cuts: usize,
    ) -> Proxy {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = lines.clone();
        // Once a response was cut, the server is "dead" for that key: later GETs get nothing.
        let dead = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // How many responses may still be cut.
        let cuts = Arc::new(std::sync::atomic::AtomicUsize::new(cuts));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let Ok(mut server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let cutting = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let cut_flag = cutting.clone();
                let seen = seen.clone();
                let dead = dead.clone();
                let mut denier = client.try_clone().unwrap();
                let flaky = flaky.clone();
                let cuts = cuts.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    let mut pending = Vec::new();
                    // A stalled request is never forwarded (the server waits for its body).
                    let mut stalled = false;
                    // The request line a `Range` header belongs to (recorded as `RANGE …`).
                    let mut request = String::new();
                    loop {
                        let n = match client.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        pending.extend_from_slice(&buf[..n]);
                        while let Some(i) = pending.windows(2).position(|w| w == b"\r\n") {
                            let line = String::from_utf8_lossy(&pending[..i]).into_owned();
                            pending.drain(..i + 2);
                            let verb = ["GET ", "HEAD ", "PUT ", "POST ", "DELETE "];
                            if stall.is_some_and(|p| line.contains(p)) {
                                stalled = true;
                            }
                            let fail_now = flaky.as_ref().is_some_and(|(p, left)| {
                                line.contains(p)
                                    && left
                                        .fetch_update(
                                            std::sync::atomic::Ordering::SeqCst,
                                            std::sync::atomic::Ordering::SeqCst,
                                            |n| n.checked_sub(1),
                                        )
                                        .is_ok()
                            });
                            let refusal = if deny.is_some_and(|p| line.contains(p)) {
                                Some(("403 Forbidden", "AccessDenied", "Access Denied"))
                            } else if fail_now {
                                let m = "Please reduce your request rate.";
                                Some(("503 Slow Down", "SlowDown", m))
                            } else {
                                None
                            };
                            if let Some((status, code, message)) = refusal {
                                let body = format!(
                                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
                                     <Error><Code>{code}</Code>\
                                     <Message>{message}</Message></Error>"
                                );
                                let head = if line.starts_with("HEAD ") { "" } else { &body };
                                let answer = format!(
                                    "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\n\
                                     Content-Length: {}\r\nConnection: close\r\n\r\n{head}",
                                    head.len()
                                );
                                seen.lock().unwrap().push(line);
                                let _ = denier.write_all(answer.as_bytes());
                                let _ = denier.shutdown(std::net::Shutdown::Both);
                                let _ = server.shutdown(std::net::Shutdown::Both);
                                return;
                            }
                            if verb.iter().any(|v| line.starts_with(v)) {
                                let take = |n: usize| n.checked_sub(1);
                                let seq = std::sync::atomic::Ordering::SeqCst;
                                if cut.is_some_and(|c| line.starts_with("GET ") && line.contains(c))
                                    && cuts.fetch_update(seq, seq, take).is_ok()
                                {
                                    cut_flag.store(true, std::sync::atomic::Ordering::SeqCst);
                                }
                                request.clone_from(&line);
                                seen.lock().unwrap().push(line);
                            } else if let Some(range) = line
                                .get(..6)
                                .filter(|h| h.eq_ignore_ascii_case("range:"))
                                .map(|_| line[6..].trim())
                            {
                                seen.lock()
                                    .unwrap()
                                    .push(format!("RANGE {range} {request}"));
                            }
                        }
                        if pending.len() > 1 << 20 {
                            pending.clear();
                        }
                        if stalled {
                            continue;
                        }
                        if server.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = server.shutdown(std::net::Shutdown::Both);
                });
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    let mut sent = 0usize;
                    loop {
                        let n = match s2.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if cutting.load(std::sync::atomic::Ordering::SeqCst) {
                            sent += n;
                            if sent > 64 << 10 || dead.load(std::sync::atomic::Ordering::SeqCst) {
                                dead.store(true, std::sync::atomic::Ordering::SeqCst);
                                break;
                            }
                        }
                        if c2.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = c2.shutdown(std::net::Shutdown::Both);
                    let _ = s2.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Proxy { endpoint, lines }
    }

    /// The lines recorded since the last call.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.lines.lock().unwrap())
    }

    /// Whether a recorded line contains `pattern`.
    pub fn saw(&self, pattern: &str) -> bool {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(pattern))
    }
}

/// Spawns `c` (stderr piped) through `proxy`, waits (at most `within`) until the proxy saw a
/// line containing `pattern` (a request it holds), lets the run settle 300 ms, sends it
/// `kill -SIG` (`sig` as `TERM` or `KILL`) and returns what it left.
pub fn signal_when_seen(
    proxy: &Proxy,
    mut c: Command,
    pattern: &str,
    within: Duration,
    sig: &str,
) -> Output {
    let child = c.stderr(Stdio::piped()).spawn().unwrap();
    let t = Instant::now();
    while !proxy.saw(pattern) {
        assert!(t.elapsed() < within, "no {pattern} request");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let killed = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait_with_output().unwrap()
}

/// The bytes the `RANGE bytes=A-B …` lines of a [`Proxy`] asked for.
pub fn ranged_bytes(lines: &[String]) -> u64 {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("RANGE bytes="))
        .filter_map(|r| {
            let (a, b) = r.split_whitespace().next()?.split_once('-')?;
            Some(b.parse::<u64>().ok()? + 1 - a.parse::<u64>().ok()?)
        })
        .sum()
}
