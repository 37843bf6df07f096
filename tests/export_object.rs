//! `tet export` to an object URL and `--storage-option` on `tet info`, `verify`, `audit` and
//! `export` (issue 22), against a real S3 server: moto's server mode on a free port of
//! 127.0.0.1, from the Python environment `.ci/s3-setup` prepares (TET_PYTHON, else
//! python/.venv/bin/python, else python3), as in `tests/object_store.rs` and
//! `tests/ranged_tet.rs` (the server, the boto3 helper and the proxy are `tests/common/s3.rs`).
//! Skipped with a printed reason only when moto cannot start.

use crate::common;
// `#[macro_export]` puts the macro at the test crate's root (tests/common/s3.rs).
use crate::moto_or_skip;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::ok;
use common::s3::{self, Proxy, AWS_VARS};

const CONVERT: &str = env!("CARGO_BIN_EXE_tet-convert");
const TET: &str = env!("CARGO_BIN_EXE_tet");

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
        let proxy = Proxy::start(&moto.endpoint, None, Some("partNumber=2"));
        let mut c = Command::new(TET);
        c.args(args);
        moto.env_at(&mut c, &proxy.endpoint);
        let within = Duration::from_secs(120);
        let o = s3::signal_when_seen(&proxy, c, "partNumber=2", within, sig);
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
    assert!(
        err.trim().starts_with(
            "tet: s3://opts/x.tet: unknown storage option no_such_key for this kind of URL \
             (closest: "
        ),
        "{err}"
    );
    // A recorded object input audited without the options cannot be read.
    let o = bare(&["audit", xs, "--json"], &wrong);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains(secret), "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_ne!(v["inputs"][0]["status"], "unchanged", "{v}");
}
