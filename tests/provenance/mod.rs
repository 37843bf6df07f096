//! Signatures checked with the real `ssh-keygen` both ways (ours verified by `ssh-keygen -Y
//! verify` over the message the docs' coreutils recipe computes, `ssh-keygen -Y sign`'s
//! attached and verified by `tet verify --signers`); flips anywhere in a signed file, a
//! signature grafted onto another file and a key not in `allowed_signers` fail; a signed file
//! still passes the v1 rules. And the lineage picture of a month of combined dailies plus a
//! selection, one input changed, rendered by Graphviz's `dot`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tet::format::integrity;
use tet::format::verify::{verify, Depth};
use tet::format::TetFile;

use super::common;

// `tet audit --reproduce` over every corpus and fixture output (acceptance 1).
mod coverage;
// `tet-convert --openlineage` (acceptance 3).
mod openlineage;

const NS: &str = "tet-convert@file-content";

fn tet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tet"))
        .args(args)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap()
}

fn tet_in(dir: &Path, program: &str, args: &[&str]) -> Output {
    let exe = match program {
        "tet" => env!("CARGO_BIN_EXE_tet"),
        _ => env!("CARGO_BIN_EXE_tet-convert"),
    };
    Command::new(exe)
        .current_dir(dir)
        .args(args)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Whether a command runs at all (`--help`-like probe).
fn have(program: &str, probe: &[&str]) -> bool {
    Command::new(program)
        .args(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// A fresh ed25519 key without passphrase: (private key path, public key line).
fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let o = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .unwrap();
    common::ok(&o, "ssh-keygen -t ed25519");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_string())
}

/// `ssh-keygen -Y verify` of `sig` over `message` for `principal`: whether it accepts.
fn ssh_verify(allowed: &Path, principal: &str, sig: &Path, message: &[u8]) -> bool {
    let mut child = Command::new("ssh-keygen")
        .args([
            "-Y",
            "verify",
            "-f",
            s(allowed),
            "-I",
            principal,
            "-n",
            NS,
            "-s",
            s(sig),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(message).unwrap();
    child.wait_with_output().unwrap().status.success()
}

/// The message by the recipe of docs/FORMAT.md ("Signatures"): grep, head, sha256sum.
fn coreutils_message(file: &Path) -> String {
    let script = "P=$(grep -abo ',\"tet_signatures\":' \"$1\" | tail -n1 | cut -d: -f1); \
                  printf 'sha256:%s' \"$(head -c \"$P\" \"$1\" | sha256sum | cut -d' ' -f1)\"";
    let o = Command::new("sh")
        .args(["-c", script, "sh", s(file)])
        .output()
        .unwrap();
    common::ok(&o, "the coreutils recipe")
}

/// `tet verify --signers --json`: (passed, failure codes, the whole text).
fn verify_signed(allowed: &Path, file: &Path) -> (bool, Vec<String>, String) {
    let o = tet(&["verify", "--json", "--signers", s(allowed), s(file)]);
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    let codes = serde_json::from_slice::<Value>(&o.stdout)
        .map(|v| {
            v["failures"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["code"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    (o.status.success(), codes, text)
}

/// Two small converted files, `a.tet` and `b.tet`.
fn two_files(dir: &Path) -> (PathBuf, PathBuf) {
    let mut out = Vec::new();
    for (name, rows) in [("a", 3), ("b", 5)] {
        let npy = dir.join(format!("{name}.npy"));
        common::write_npy(&npy, rows);
        let t = dir.join(format!("{name}.tet"));
        common::ok(
            &tet_in(
                dir,
                "tet-convert",
                &["-q", "--chunk-bytes", "16384", s(&npy), s(&t)],
            ),
            "convert",
        );
        out.push(t);
    }
    (out[0].clone(), out[1].clone())
}

fn footer_text(bytes: &[u8]) -> (usize, &[u8]) {
    let n = bytes.len();
    let len = u64::from_le_bytes(bytes[n - 16..n - 8].try_into().unwrap()) as usize;
    (n - 16 - len, &bytes[n - 16 - len..n - 16])
}

/// `target` with `donor`'s signatures member put into its footer, the footer digest computed
/// again: a well-formed file whose only fault is a signature of other content.
fn graft(donor: &[u8], target: &[u8]) -> Vec<u8> {
    let (_, dtext) = footer_text(donor);
    let dtext = std::str::from_utf8(dtext).unwrap();
    let member = &dtext[dtext.find(",\"tet_signatures\":").unwrap()
        ..dtext.rfind(",\"tet_footer_digest\"").unwrap()];
    let (start, ttext) = footer_text(target);
    let ttext = std::str::from_utf8(ttext).unwrap();
    let prefix = &ttext[..ttext.rfind(",\"tet_footer_digest\"").unwrap()];
    let mut text = format!("{prefix}{member}{}", integrity::FOOTER_DIGEST_PREFIX);
    let f = TetFile::from_bytes(target.to_vec()).unwrap();
    let head_end = (f.chunk_index_offset + f.chunk_index_length) as usize;
    let mut h = integrity::Hasher::default();
    h.update(&target[..head_end]);
    h.update(text.as_bytes());
    text.push_str(&integrity::hex(h.finish()));
    text.push_str(integrity::FOOTER_DIGEST_END);
    let mut out = target[..start].to_vec();
    out.extend(text.as_bytes());
    out.extend((text.len() as u64).to_le_bytes());
    out.extend(&target[target.len() - 8..]);
    out
}

#[test]
fn signatures_round_trip_with_ssh_keygen() {
    if !have("ssh-keygen", &["-?"]) {
        eprintln!("skipped: ssh-keygen (Debian openssh-client) is not installed");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let (a, b) = two_files(dir);
    let (alice, alice_pub) = keygen(dir, "alice");
    let (bob, bob_pub) = keygen(dir, "bob");
    let allowed = dir.join("allowed_signers");
    std::fs::write(
        &allowed,
        format!(
            "# who may sign\nalice@example.org namespaces=\"{NS}\" {alice_pub}\n\
             \"bob@example.org,robert@example.org\" {bob_pub}\n"
        ),
    )
    .unwrap();
    let before = TetFile::open(&a).unwrap();
    let warnings_before = verify(&before, Depth::Deep).warnings.len();
    let unsigned_message = common::ok(&tet(&["sign", "--message", s(&a)]), "message");
    drop(before);

    // Ours, checked by ssh-keygen over the message the docs' recipe computes.
    let o = tet(&["sign", "--key", s(&alice), s(&a)]);
    let said = common::ok(&o, "tet sign");
    assert!(said.contains("signed by SHA256:"), "{said}");
    let message = coreutils_message(&a);
    assert_eq!(message, unsigned_message, "signing keeps the content");
    assert_eq!(message.len(), "sha256:".len() + 64);
    let sig = dir.join("a.sig");
    std::fs::write(
        &sig,
        common::ok(&tet(&["sign", "--extract=1", s(&a)]), "extract"),
    )
    .unwrap();
    assert!(ssh_verify(
        &allowed,
        "alice@example.org",
        &sig,
        message.as_bytes()
    ));
    assert!(!ssh_verify(
        &allowed,
        "bob@example.org",
        &sig,
        message.as_bytes()
    ));
    let other = coreutils_message(&b);
    assert!(!ssh_verify(
        &allowed,
        "alice@example.org",
        &sig,
        other.as_bytes()
    ));

    // ssh-keygen's, attached and checked by us.
    let msg = dir.join("msg");
    std::fs::write(&msg, &message).unwrap();
    let o = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-f", s(&bob), "-n", NS, s(&msg)])
        .output()
        .unwrap();
    common::ok(&o, "ssh-keygen -Y sign");
    common::ok(
        &tet(&["sign", "--signature", s(&dir.join("msg.sig")), s(&a)]),
        "attach",
    );
    let (passed, codes, text) = verify_signed(&allowed, &a);
    assert!(passed, "{codes:?} {text}");
    let audit = common::ok(&tet(&["audit", "--signers", s(&allowed), s(&a)]), "audit");
    assert!(
        audit.contains("signed by alice@example.org (SHA256:"),
        "{audit}"
    );
    assert!(
        audit.contains("signed by bob@example.org,robert@example.org (SHA256:"),
        "{audit}"
    );
    // Attached, it reads back as ssh-keygen wrote it.
    let stored = common::ok(&tet(&["sign", "--extract=2", s(&a)]), "extract 2");
    assert_eq!(
        stored.trim(),
        std::fs::read_to_string(dir.join("msg.sig")).unwrap().trim()
    );

    // Still a v1 file: our verify (deep) passes with no new warning; the content is unchanged.
    let f = TetFile::open(&a).unwrap();
    let r = verify(&f, Depth::Deep);
    assert!(r.ok(), "{:?}", r.failures);
    assert_eq!(r.warnings.len(), warnings_before, "{:?}", r.warnings);
    assert_eq!(coreutils_message(&a), message);
    let o = tet(&["audit", "--json", "--signers", s(&allowed), s(&a)]);
    let v: Value = serde_json::from_str(&common::ok(&o, "audit --json")).unwrap();
    assert_eq!(v["signatures"]["content_digest"], message.as_str());
    let status: Vec<&str> = v["signatures"]["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["trusted", "trusted"]);
    // A conversion of a signed file is new content: no signature comes along.
    let a2 = dir.join("a2.tet");
    common::ok(&tet(&["convert", "-q", s(&a), s(&a2)]), "convert a.tet");
    let text = String::from_utf8_lossy(&std::fs::read(&a2).unwrap()).into_owned();
    assert!(!text.contains("tet_signatures"));
    // Signing again with the same key gives the same bytes.
    let bytes = std::fs::read(&a).unwrap();
    common::ok(&tet(&["sign", "--key", s(&alice), s(&a)]), "sign again");
    assert_eq!(std::fs::read(&a).unwrap(), bytes);

    // Refused: another namespace, a signature of other content.
    let git = dir.join("git-msg");
    std::fs::write(&git, &message).unwrap();
    let o = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-f", s(&bob), "-n", "git", s(&git)])
        .output()
        .unwrap();
    common::ok(&o, "ssh-keygen -Y sign -n git");
    let o = tet(&["sign", "--signature", s(&dir.join("git-msg.sig")), s(&a)]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("namespace"),
        "{o:?}"
    );
    let o = tet(&["sign", "--signature", s(&sig), s(&b)]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("does not verify"),
        "{o:?}"
    );
    tamper_checks(dir, &allowed, &a, &b);
}

/// Flips, a grafted signature, an unknown key and an unsigned file all fail `--signers`.
fn tamper_checks(dir: &Path, allowed: &Path, a: &Path, b: &Path) {
    let bytes = std::fs::read(a).unwrap();
    let f = TetFile::from_bytes(bytes.clone()).unwrap();
    let payload = f.entries[0].payload_offset as usize;
    let index = f.chunk_index_offset as usize + 40;
    let (start, text) = footer_text(&bytes);
    let text = std::str::from_utf8(text).unwrap();
    let tool = start + text.find("\"tool\":\"tet-convert\"").unwrap() + 10;
    let sig_at = start + text.find("BEGIN SSH SIGNATURE-----\\n").unwrap() + 40;
    let digest_at = bytes.len() - 16 - 4;
    let flipped = dir.join("flipped.tet");
    // (what, where, whether the signature check itself must say so: the content's bytes and
    // the signature; the footer digest and the trailer break the footer instead).
    for (what, at, covered) in [
        ("superblock", 12, true),
        ("chunk index", index, true),
        ("payload", payload, true),
        ("footer history", tool, true),
        ("signature", sig_at, true),
        ("footer digest", digest_at, false),
        ("trailer", bytes.len() - 2, false),
    ] {
        let mut m = bytes.clone();
        m[at] ^= 0x04;
        std::fs::write(&flipped, &m).unwrap();
        let (passed, codes, text) = verify_signed(allowed, &flipped);
        assert!(!passed, "a flip in the {what} at {at} passed: {text}");
        // A file whose structure no longer reads fails as `structure` alone.
        if covered && TetFile::from_bytes(m).is_ok() {
            assert!(
                codes.iter().any(|c| c == "signature"),
                "{what}: {codes:?} {text}"
            );
        }
    }
    // ssh-keygen agrees on a payload flip: the stored signature no longer fits the content.
    let mut m = bytes.clone();
    m[payload] ^= 0x04;
    std::fs::write(&flipped, &m).unwrap();
    let sig = dir.join("a.sig");
    assert!(!ssh_verify(
        allowed,
        "alice@example.org",
        &sig,
        coreutils_message(&flipped).as_bytes()
    ));

    // a's signatures grafted onto b (a well-formed footer otherwise): made over other content.
    let grafted = dir.join("grafted.tet");
    std::fs::write(&grafted, graft(&bytes, &std::fs::read(b).unwrap())).unwrap();
    let (passed, codes, text) = verify_signed(allowed, &grafted);
    assert!(!passed, "{text}");
    assert_eq!(codes, vec!["signature", "signature"], "{text}");
    assert!(text.contains("copied from another file"), "{text}");
    assert!(tet(&["verify", "--deep", "-q", s(&grafted)])
        .status
        .success());

    // A key not in allowed_signers; a file not signed at all.
    let (mallory, _) = keygen(dir, "mallory");
    common::ok(&tet(&["sign", "--key", s(&mallory), s(b)]), "sign b");
    let (passed, codes, text) = verify_signed(allowed, b);
    assert!(!passed, "{text}");
    assert_eq!(codes, vec!["signature"], "{text}");
    assert!(text.contains("not in the allowed signers"), "{text}");
    let c = dir.join("c.tet");
    common::ok(
        &tet(&["convert", "-q", s(&dir.join("a.npy")), s(&c)]),
        "convert c",
    );
    let (passed, _, text) = verify_signed(allowed, &c);
    assert!(!passed && text.contains("not signed"), "{text}");
}

/// A month of daily files (fixtures/concat/month) combined, then a selection of the result; day
/// 23 changed and day 5 deleted afterwards. The picture has every input, the intermediate and
/// the result, the two steps, and days 23 and 5 marked.
#[cfg(feature = "netcdf")]
#[test]
fn lineage_graph_of_a_month() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/concat/month");
    let days: Vec<String> = (1..=31).map(|n| format!("day{n:02}.nc")).collect();
    for day in &days {
        std::fs::copy(src.join(day), dir.join(day)).unwrap();
    }
    let mut args = vec!["-q", "--concat", "time"];
    args.extend(days.iter().map(String::as_str));
    args.push("month.tet");
    common::ok(&tet_in(dir, "tet-convert", &args), "concat");
    let sel = ["-q", "--isel", "time=0:8", "month.tet", "week.tet"];
    common::ok(&tet_in(dir, "tet-convert", &sel), "select");
    let mut b = std::fs::read(dir.join("day23.nc")).unwrap();
    b.push(0);
    std::fs::write(dir.join("day23.nc"), b).unwrap();
    std::fs::remove_file(dir.join("day05.nc")).unwrap();

    let o = tet_in(
        dir,
        "tet",
        &["audit", "--graph", "lineage.dot", "month.tet", "week.tet"],
    );
    assert_eq!(o.status.code(), Some(1), "a changed input: exit 1 ({o:?})");
    let dot = std::fs::read_to_string(dir.join("lineage.dot")).unwrap();
    let nodes: Vec<&str> = dot
        .lines()
        .filter(|l| l.trim_start().starts_with(['e', 'a']) && l.contains(" [label="))
        .collect();
    let edges = dot.lines().filter(|l| l.contains(" -> ")).count();
    // 31 days, month.tet, week.tet; the combine and the selection.
    assert_eq!(nodes.len(), 35, "{dot}");
    assert_eq!(edges, 31 + 1 + 2, "{dot}");
    let changed: Vec<&&str> = nodes
        .iter()
        .filter(|l| l.contains("class=\"input changed\""))
        .collect();
    assert_eq!(changed.len(), 1, "{dot}");
    assert!(changed[0].contains("CHANGED day23.nc"), "{dot}");
    let missing: Vec<&&str> = nodes
        .iter()
        .filter(|l| l.contains("class=\"input missing\""))
        .collect();
    assert_eq!(missing.len(), 1, "{dot}");
    assert!(missing[0].contains("MISSING day05.nc"), "{dot}");
    assert!(dot.contains("1 changed and 1 missing inputs"), "{dot}");
    assert!(dot.contains("class=\"activity combine\""), "{dot}");
    assert!(dot.contains("class=\"activity select\""), "{dot}");
    assert_eq!(dot.matches("class=\"intermediate\"").count(), 1, "{dot}");
    assert_eq!(dot.matches("class=\"output\"").count(), 1, "{dot}");

    if !have("dot", &["-V"]) {
        eprintln!("skipped the SVG: Graphviz's dot is not installed (Debian package graphviz)");
        let o = tet_in(
            dir,
            "tet",
            &["audit", "--graph", "lineage.svg", "month.tet", "week.tet"],
        );
        assert_eq!(o.status.code(), Some(1));
        assert!(dir.join("lineage.dot").exists());
        return;
    }
    let o = tet_in(
        dir,
        "tet",
        &["audit", "--graph", "lineage.svg", "month.tet", "week.tet"],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let svg = std::fs::read_to_string(dir.join("lineage.svg")).unwrap();
    assert!(svg.contains("<svg"), "{svg}");
    assert_eq!(svg.matches("<g id=\"node").count(), 35);
    assert_eq!(svg.matches("<g id=\"edge").count(), 34);
    assert!(svg.contains("CHANGED day23.nc"));
}

// ---- `tet audit --reproduce` (issue 36: a file re-made from its footer and compared) ----

/// `tet audit --reproduce ARGS…` in `dir`: (exit code, stdout).
fn reproduce(dir: &Path, args: &[&str]) -> (i32, String) {
    let mut all = vec!["audit", "--reproduce"];
    all.extend_from_slice(args);
    // Another time than the conversions': the recorded one is what counts.
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tet"))
        .current_dir(dir)
        .args(&all)
        .env("SOURCE_DATE_EPOCH", "1800000000")
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    // Nothing left behind.
    assert_eq!(common::only_files(tmp.path()), Vec::<String>::new());
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap(), format!("{text}{err}"))
}

/// Asserts that every named file reproduces byte for byte, each step on its own line.
fn assert_reproduced(dir: &Path, files: &[&str], steps: usize) {
    let (code, text) = reproduce(dir, files);
    assert_eq!(code, 0, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), steps, "{text}");
    for l in &lines {
        assert!(l.ends_with(": reproduced: byte for byte"), "{text}");
    }
    for f in files {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{f}: "))),
            "{text}"
        );
    }
}

fn convert_in(dir: &Path, args: &[&str]) {
    let mut all = vec!["-q"];
    all.extend_from_slice(args);
    common::ok(&tet_in(dir, "tet-convert", &all), "tet-convert");
}

#[test]
fn reproduce_fixture_outputs_byte_for_byte() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    common::write_npy(&dir.join("x.npy"), 7);
    convert_in(dir, &["x.npy", "x.tet"]);
    convert_in(
        dir,
        &[
            "--codec",
            "zstd:3",
            "--chunk-bytes",
            "64",
            "x.npy",
            "x3.tet",
        ],
    );
    let mut files = vec!["x.tet", "x3.tet"];
    let corpus = common::shared().join("corpus/public");
    if cfg!(feature = "netcdf") {
        let nc = corpus.join("netcdf/nc4_classic_chunked.nc");
        convert_in(dir, &[s(&nc), "nc.tet"]);
        let packed = corpus.join("netcdf/nc3_64bit_offset_packed.nc");
        convert_in(
            dir,
            &[
                "--unpack",
                "--chunk-bytes",
                "1KiB",
                s(&packed),
                "packed.tet",
            ],
        );
        files.extend(["nc.tet", "packed.tet"]);
    }
    if cfg!(feature = "hdf5") {
        let h5 = corpus.join("hdf5/structure.h5");
        convert_in(dir, &["--codec", "zstd:5", s(&h5), "h5.tet"]);
        files.push("h5.tet");
    }
    let n = files.len();
    assert_reproduced(dir, &files, n);
    let before = common::only_files(dir);
    let (_, json) = reproduce(dir, &["--json", "x.tet"]);
    let v: Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["schema"], "tet-reproduce/1");
    assert_eq!(v["verdict"], "reproduced");
    assert_eq!(common::only_files(dir), before);
}

/// A combine of five dailies, a selection of it (a two-step lineage through the combined
/// `.tet`), a selection of a netCDF file, and `.nc → .tet → re-chunked .tet`.
#[cfg(feature = "netcdf")]
#[test]
fn reproduce_combines_selections_and_lineages() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let days = ["day1.nc", "day2.nc", "day3.nc", "day4.nc", "day5.nc"];
    for day in days {
        std::fs::copy(fixtures.join("concat").join(day), dir.join(day)).unwrap();
    }
    // Given out of order: the combined order is recorded.
    let mut args = vec![
        "--concat", "time", "day3.nc", "day1.nc", "day2.nc", "day5.nc",
    ];
    args.extend(["day4.nc", "week.tet"]);
    convert_in(dir, &args);
    convert_in(
        dir,
        &[
            "--isel",
            "time=1:4",
            "--variables",
            "t*",
            "week.tet",
            "cut.tet",
        ],
    );
    let sel = fixtures.join("select/select.nc");
    convert_in(
        dir,
        &[
            "--variables",
            "temp",
            "--sel",
            "time=2000-01-03:2000-01-03T12",
            "--isel",
            "lon=::4",
            s(&sel),
            "sel.tet",
        ],
    );
    convert_in(dir, &[s(&sel), "a.tet"]);
    convert_in(
        dir,
        &["--chunk-bytes", "1KiB", "--codec", "raw", "a.tet", "b.tet"],
    );
    // The default target given explicitly re-chunks a `.tet` (no flag keeps its chunks); the
    // history row records both alike.
    convert_in(dir, &["--chunk-bytes", "4MiB", "b.tet", "c.tet"]);
    assert_reproduced(dir, &["week.tet"], 1);
    assert_reproduced(dir, &["sel.tet"], 1);
    // Two steps each: the parent `.tet` first, then the file.
    assert_reproduced(dir, &["cut.tet"], 2);
    assert_reproduced(dir, &["b.tet"], 2);
    // Three steps: a.tet, b.tet, then c.tet. (When the re-run without `--chunk-bytes`
    // differed, the explicit default target was tried too, and said.)
    let (code, text) = reproduce(dir, &["c.tet"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(text.lines().count(), 3, "{text}");
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("c.tet: reproduced: byte for byte"),
        "{text}"
    );
    let (_, text) = reproduce(dir, &["b.tet"]);
    assert!(
        text.starts_with(&format!("{} (step of b.tet)", dir.join("a.tet").display())),
        "{text}"
    );

    // A daily changed: the combine cannot be tried, the input named.
    let mut b = std::fs::read(dir.join("day4.nc")).unwrap();
    b.push(0);
    std::fs::write(dir.join("day4.nc"), b).unwrap();
    let (code, text) = reproduce(dir, &["week.tet"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("cannot be tried: input day4.nc"), "{text}");
    assert!(text.contains("changed since conversion"), "{text}");
}

/// `bytes` with the footer text edited by `edit` and the footer digest computed again.
fn edit_footer(bytes: &[u8], edit: impl FnOnce(&str) -> String) -> Vec<u8> {
    let (start, text) = footer_text(bytes);
    let text = std::str::from_utf8(text).unwrap();
    let cut = text.rfind(",\"tet_footer_digest\"").unwrap();
    let mut text = edit(&text[..cut]) + integrity::FOOTER_DIGEST_PREFIX;
    let f = TetFile::from_bytes(bytes.to_vec()).unwrap();
    let head_end = (f.chunk_index_offset + f.chunk_index_length) as usize;
    let mut h = integrity::Hasher::default();
    h.update(&bytes[..head_end]);
    h.update(text.as_bytes());
    text.push_str(&integrity::hex(h.finish()));
    text.push_str(integrity::FOOTER_DIGEST_END);
    let mut out = bytes[..start].to_vec();
    out.extend(text.as_bytes());
    out.extend((text.len() as u64).to_le_bytes());
    out.extend(&bytes[bytes.len() - 8..]);
    out
}

#[test]
fn reproduce_names_what_differs_or_why_it_cannot_be_tried() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    common::write_npy(&dir.join("x.npy"), 9);
    convert_in(dir, &["--chunk-bytes", "64", "x.npy", "x.tet"]);
    let good = std::fs::read(dir.join("x.tet")).unwrap();

    // A hand-edited footer param (its digest made right): re-made under it, it differs.
    let edited = edit_footer(&good, |t| {
        assert!(t.contains("\"chunk\":\"64\""), "{t}");
        t.replace("\"chunk\":\"64\"", "\"chunk\":\"32\"")
    });
    std::fs::write(dir.join("edited.tet"), &edited).unwrap();
    assert!(verify(
        &TetFile::open(&dir.join("edited.tet")).unwrap(),
        Depth::Deep
    )
    .ok());
    let (code, text) = reproduce(dir, &["edited.tet"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.starts_with("edited.tet: DIFFERS: differs first at dataset `"),
        "{text}"
    );
    assert!(text.contains("re-made as"), "{text}");

    // A footer key edited that the re-run makes otherwise: named.
    let later = edit_footer(&good, |t| {
        t.replace(
            "\"created_at\":\"1700000000\"",
            "\"created_at\":\"1700000001\"",
        )
    });
    std::fs::write(dir.join("later.tet"), &later).unwrap();
    let (code, text) = reproduce(dir, &["later.tet"]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(
        text.trim(),
        "later.tet: DIFFERS: differs first at footer key metadata.file.created_at: \
         \"1700000001\" re-made as \"1700000000\""
    );

    // A payload flip.
    let f = TetFile::open(&dir.join("x.tet")).unwrap();
    let e = f.entries[1];
    let ds = &f.datasets[e.dataset_id as usize];
    let (name, coords) = (ds.name.clone(), e.coords[..ds.shape.len()].to_vec());
    drop(f);
    let mut flipped = good.clone();
    flipped[e.payload_offset as usize] ^= 0x10;
    std::fs::write(dir.join("flipped.tet"), &flipped).unwrap();
    let (code, text) = reproduce(dir, &["flipped.tet"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "DIFFERS: differs first at dataset `{name}` chunk {coords:?}: its stored bytes differ"
        )),
        "{text}"
    );

    // Another tool version: not tried, both named; allowed, the values are compared.
    let version = env!("CARGO_PKG_VERSION");
    let older = edit_footer(&good, |t| {
        t.replace(
            &format!("\"version\":\"{version}\""),
            "\"version\":\"0.0.1\"",
        )
    });
    std::fs::write(dir.join("older.tet"), &older).unwrap();
    let (code, text) = reproduce(dir, &["older.tet"]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains(&format!(
            "recorded by tet-convert 0.0.1, this is tet-convert {version}"
        )),
        "{text}"
    );
    let (code, text) = reproduce(dir, &["--allow-version-drift", "older.tet"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("reproduced: the same values and footer"),
        "{text}"
    );

    // The input touched (same bytes): reproduced, the stamp being expected to differ.
    let t = std::fs::File::options()
        .append(true)
        .open(dir.join("x.npy"))
        .unwrap();
    t.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30))
        .unwrap();
    drop(t);
    let (code, text) = reproduce(dir, &["x.tet"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(
            "but for the parts expected to differ (history[0].params.input_mtime, tet_footer_digest)"
        ),
        "{text}"
    );

    // A modified input, then a missing one: not tried, the input named.
    let mut b = std::fs::read(dir.join("x.npy")).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(dir.join("x.npy"), b).unwrap();
    let (code, text) = reproduce(dir, &["x.tet"]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("x.tet: cannot be tried: input x.npy"),
        "{text}"
    );
    assert!(text.contains("changed since conversion (sha256:"), "{text}");
    std::fs::remove_file(dir.join("x.npy")).unwrap();
    let (code, text) = reproduce(dir, &["x.tet"]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("x.tet: cannot be tried: input x.npy"),
        "{text}"
    );
    assert!(text.contains("is missing"), "{text}");
}

/// An object input (moto's S3 server): re-fetched by its recorded URL, checked, reproduced.
#[test]
fn reproduce_an_object_input_conversion() {
    let moto = crate::moto_or_skip!();
    moto.helper(&["mb", "inbox"]);
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let npy = dir.join("x.npy");
    common::write_npy(&npy, 5);
    moto.helper(&["put", "inbox", "data/x.npy", s(&npy)]);
    let out = dir.join("x.tet");
    let o = moto.run(
        env!("CARGO_BIN_EXE_tet-convert"),
        &[
            "-q",
            "--chunk-bytes",
            "16KiB",
            "s3://inbox/data/x.npy",
            s(&out),
        ],
    );
    common::ok(&o, "convert an object");
    let o = moto.run(
        env!("CARGO_BIN_EXE_tet"),
        &["audit", "--reproduce", s(&out)],
    );
    let text = common::ok(&o, "reproduce");
    assert_eq!(
        text.trim(),
        format!("{}: reproduced: byte for byte", s(&out))
    );
    // The object replaced by other bytes: not tried, the URL named.
    let mut b = std::fs::read(&npy).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(&npy, b).unwrap();
    moto.helper(&["put", "inbox", "data/x.npy", s(&npy)]);
    let o = moto.run(
        env!("CARGO_BIN_EXE_tet"),
        &["audit", "--reproduce", s(&out)],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("cannot be tried: input s3://inbox/data/x.npy"),
        "{text}"
    );
}

/// `tet-convert --sign-key`: a single output and every output of a batch signed as they are
/// written (ssh-keygen and `tet verify --signers` accept them, the content is the unsigned
/// conversion's), a re-run skips the signed outputs untouched, and a missing key fails before
/// any conversion, leaving no output.
#[test]
fn convert_signs_as_it_writes() {
    if !have("ssh-keygen", &["-?"]) {
        eprintln!("skipped: ssh-keygen (Debian openssh-client) is not installed");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let (alice, alice_pub) = keygen(dir, "alice");
    let allowed = dir.join("allowed_signers");
    std::fs::write(&allowed, format!("alice@example.org {alice_pub}\n")).unwrap();
    let inbox = dir.join("in");
    std::fs::create_dir(&inbox).unwrap();
    for (name, rows) in [("x", 3), ("y", 5)] {
        common::write_npy(&inbox.join(format!("{name}.npy")), rows);
    }
    let npy = inbox.join("x.npy");
    let convert = |args: &[&str]| tet_in(dir, "tet-convert", args);

    // One output: signed, and its content is the unsigned conversion's.
    let (plain, signed) = (dir.join("plain.tet"), dir.join("signed.tet"));
    common::ok(&convert(&["-q", s(&npy), s(&plain)]), "convert");
    let o = convert(&["-q", "--sign-key", s(&alice), s(&npy), s(&signed)]);
    common::ok(&o, "convert --sign-key");
    let (passed, codes, text) = verify_signed(&allowed, &signed);
    assert!(passed && codes.is_empty(), "{text}");
    let unsigned_message = common::ok(&tet(&["sign", "--message", s(&plain)]), "message");
    let message = coreutils_message(&signed);
    assert_eq!(message, unsigned_message, "signing keeps the content");
    let sig = dir.join("signed.sig");
    let armored = common::ok(&tet(&["sign", "--extract=1", s(&signed)]), "extract");
    std::fs::write(&sig, armored).unwrap();
    assert!(ssh_verify(
        &allowed,
        "alice@example.org",
        &sig,
        message.as_bytes()
    ));
    // The plain file has no signature: `--signers` fails it.
    assert!(!verify_signed(&allowed, &plain).0);

    // A batch: every output signed; a re-run skips them all and leaves their bytes alone.
    let out = dir.join("out");
    let batch = [
        "-q",
        "--sign-key",
        s(&alice),
        "--out-dir",
        s(&out),
        s(&inbox),
    ];
    common::ok(&convert(&batch), "batch --sign-key");
    let mut outputs: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    outputs.sort();
    assert_eq!(outputs, [out.join("x.tet"), out.join("y.tet")]);
    let before: Vec<Vec<u8>> = outputs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    for p in &outputs {
        let (passed, codes, text) = verify_signed(&allowed, p);
        assert!(passed && codes.is_empty(), "{}: {text}", p.display());
    }
    let mut again = batch.to_vec();
    again.push("--json");
    let rows = common::ok(&convert(&again), "batch re-run");
    let statuses: Vec<String> = rows
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["status"].to_string())
        .collect();
    assert_eq!(statuses, ["\"skipped\"", "\"skipped\""], "{rows}");
    for (p, b) in outputs.iter().zip(&before) {
        assert_eq!(&std::fs::read(p).unwrap(), b, "{}", p.display());
    }
    // An unsigned output of an earlier run, up to date: the re-run with the key signs it.
    common::ok(
        &convert(&["-q", "--out-dir", s(&out), s(&inbox), "--force"]),
        "unsigned",
    );
    assert!(!verify_signed(&allowed, &outputs[0]).0);
    common::ok(&convert(&batch), "sign the up-to-date outputs");
    for (p, b) in outputs.iter().zip(&before) {
        assert_eq!(&std::fs::read(p).unwrap(), b, "{}", p.display());
    }

    // A missing key: one line naming it, exit 2, nothing converted.
    let missing = dir.join("no-such-key");
    for args in [
        vec![s(&npy), "never.tet"],
        vec!["--out-dir", "never", s(&inbox)],
    ] {
        let mut args = args.clone();
        args.extend(["--sign-key", s(&missing)]);
        let o = convert(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(s(&missing)), "{err}");
        assert!(!dir.join("never.tet").exists() && !dir.join("never").exists());
    }
}
