//! What a new user meets first (issue 33): a closed pipe ends every printing command quietly,
//! a cut file is described in words, `tet audit`'s exit codes tell unchanged, changed and
//! could-not-check apart, `tet export` errors name the user's output, and the man pages and
//! completions come from the CLI definition.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use super::{common, run, tet, tet_convert};

/// 128 + SIGPIPE: what a command whose standard output was closed early exits with.
const PIPE_CLOSED: i32 = 141;

/// A `.tet` of `rows` × 4096 f32 (zstd:1, `chunk_bytes` per chunk) converted from an `.npy` in
/// `dir`; returns (the .npy, the .tet).
fn converted(dir: &Path, name: &str, rows: usize, chunk_bytes: &str) -> (PathBuf, PathBuf) {
    let npy = dir.join(format!("{name}.npy"));
    common::write_npy(&npy, rows);
    let out = dir.join(format!("{name}.tet"));
    let o = run(tet_convert().arg(&npy).arg(&out).args([
        "-q",
        "--codec",
        "zstd:1",
        "--chunk-bytes",
        chunk_bytes,
    ]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (npy, out)
}

/// Runs `c` with a standard output whose reader is gone before it starts (every write is
/// EPIPE), standard error captured.
fn with_stdout_closed(c: &mut Command) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    c.stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn no_panic(o: &Output, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe") && o.status.code() != Some(101),
        "{what}: {o:?}"
    );
}

/// Every command that prints, its standard output closed: no panic, no message, exit 141 (as
/// if killed by SIGPIPE); what a command writes besides stdout is complete.
#[test]
fn a_closed_stdout_ends_every_printing_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let (npy, a) = converted(dir.path(), "a", 8, "16KiB");
    let (_, b) = converted(dir.path(), "b", 4, "16KiB");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (a, b, npy) = (s(&a), s(&b), s(&npy));
    let out = |n: &str| s(&dir.path().join(n));
    let tet_runs: Vec<Vec<String>> = [
        vec!["--help"],
        vec!["--version"],
        vec!["info", "--help"],
        vec!["info", &a],
        vec!["info", "--json", &a],
        vec!["info", "--metadata", &a],
        vec!["info", "--history", "--chunks", "-n", "0", &a],
        vec!["verify", &a],
        vec!["verify", "--json", &a, &b],
        vec!["verify", "--deep", &a, &b],
        vec!["audit", &a],
        vec!["audit", "--json", &a, &b],
        vec!["audit", &a, &b],
        vec!["audit", &a, "--source", &npy],
        vec!["export", &a, &out("e1.npz")],
        vec!["export", "--json", &a, &out("e2.npy")],
        vec!["generate", "man", &out("man")],
        vec!["generate", "completions", "bash", &out("comp")],
    ]
    .iter()
    .map(|v| v.iter().map(|s| s.to_string()).collect())
    .collect();
    for args in &tet_runs {
        let o = with_stdout_closed(tet().args(args));
        no_panic(&o, &format!("tet {args:?}"));
        assert_eq!(o.status.code(), Some(PIPE_CLOSED), "tet {args:?}: {o:?}");
        assert!(o.stderr.is_empty(), "tet {args:?}: {o:?}");
    }
    // The exports are whole files, nothing staged is left beside them.
    for e in ["e1.npz", "e2.npy"] {
        let o = run(tet().args(["export", &a, &out(&format!("again.{e}"))]));
        assert!(o.status.success(), "{o:?}");
        assert_eq!(
            std::fs::read(out(e)).unwrap(),
            std::fs::read(out(&format!("again.{e}"))).unwrap(),
            "{e}"
        );
    }
    let batch = out("batch");
    std::fs::create_dir(&batch).unwrap();
    let convert_runs: Vec<Vec<String>> = vec![
        vec!["--help".into()],
        vec!["--formats".into()],
        vec!["--formats".into(), "--json".into()],
        vec![npy.clone(), out("c.tet"), "--json".into()],
        vec![
            npy.clone(),
            "--out-dir".into(),
            batch.clone(),
            "--json".into(),
        ],
    ];
    for args in &convert_runs {
        let o = with_stdout_closed(tet_convert().args(args));
        no_panic(&o, &format!("tet-convert {args:?}"));
        assert_eq!(
            o.status.code(),
            Some(PIPE_CLOSED),
            "tet-convert {args:?}: {o:?}"
        );
    }
    // A conversion goes on to its end: its outputs are whole and verify.
    for t in [out("c.tet"), format!("{batch}/a.tet")] {
        let o = run(tet().args(["verify", "--deep", &t]));
        assert!(o.status.success(), "{t}: {o:?}");
    }

    // Standard error closed too (`2>&1 | head -1`): the batch summary and -v lines.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    std::fs::create_dir(out("batch2")).unwrap();
    let o = tet_convert()
        .args([&npy, "--out-dir", &out("batch2"), "-v"])
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(PIPE_CLOSED), "{o:?}");

    // A command that fails keeps its own exit code.
    let o = with_stdout_closed(tet().args(["verify", "/nonexistent/x.tet"]));
    no_panic(&o, "verify of a missing file");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
}

/// As a shell runs it: `tet info --chunks -n 0 big.tet | head -1` (the output is far larger
/// than a pipe holds, so the writer meets the closed pipe whatever the timing).
#[test]
fn head_after_a_pipe_ends_the_command_with_141() {
    let dir = tempfile::tempdir().unwrap();
    let (_, big) = converted(dir.path(), "big", 256, "1KiB");
    for cmd in [
        "info --chunks -n 0",
        "info --json --chunks -n 0",
        "verify --json",
    ] {
        let script = format!(
            "\"$TET\" {cmd} \"$FILE\" | head -c 10 >/dev/null; echo \"${{PIPESTATUS[0]}}\""
        );
        let o = run(Command::new("bash")
            .args(["-c", &script])
            .env("TET", env!("CARGO_BIN_EXE_tet"))
            .env("FILE", &big));
        let status = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.is_empty(), "{cmd}: {err}");
        // verify --json prints one short line: it may all fit before head exits.
        if cmd.starts_with("verify") {
            assert!(status == "0" || status == "141", "{cmd}: {status}");
        } else {
            assert_eq!(status, "141", "{cmd}");
        }
    }
}

/// The byte where a file's data ends (its index, then the last payload).
fn data_end(p: &Path) -> u64 {
    let f = tet::format::TetFile::open(p).unwrap();
    f.entries
        .iter()
        .map(|e| e.payload_offset + e.stored_byte_len)
        .fold(f.chunk_index_offset + f.chunk_index_length, u64::max)
}

fn cut(from: &Path, to: &Path, len: u64) {
    let b = std::fs::read(from).unwrap();
    std::fs::write(to, &b[..len as usize]).unwrap();
}

/// A cut file, wherever it is cut, is described by what is missing and how much; `tet info`
/// exits 1; nothing blames the tools that wrote it.
#[test]
fn a_truncated_file_is_described_in_words_and_info_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (_, whole) = converted(dir.path(), "w", 2, "4KiB");
    let size = std::fs::metadata(&whole).unwrap().len();
    let end = data_end(&whole);
    let chunks = tet::format::TetFile::open(&whole).unwrap().entries.len();
    assert!(end < size && end > 2000, "{end} {size}");

    // Cut inside the data: what it has, what the data needs, how much is missing.
    let mid = dir.path().join("mid.tet");
    let at = end - 1500;
    cut(&whole, &mid, at);
    let o = run(tet().arg("info").arg(&mid));
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    // Sizes in bytes, and over 10 KiB in KiB too: "14670 bytes (14.3 KiB)".
    let start = format!(
        "tet: {}: file is truncated: it has {at} bytes",
        mid.display()
    );
    for part in [
        start.as_str(),
        &format!(" where its data needs {end} bytes"),
        "; the last 1500 bytes or more are missing (",
    ] {
        assert!(err.contains(part), "{part:?} not in {err}");
    }
    assert!(err.starts_with(&start), "{err}");
    assert!(
        err.contains(&format!("of {chunks} chunks cut off, and the footer")),
        "{err}"
    );
    let o = run(tet().args(["verify", "--json"]).arg(&mid));
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["failures"][0]["code"], "truncated", "{v}");
    assert!(
        v["failures"][0]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("it has {at} bytes")),
        "{v}"
    );
    assert!(!v.to_string().contains("reference tools"), "{v}");
    let o = run(tet().arg("verify").arg(&mid));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("FAIL ") && text.contains("[truncated] file is truncated"),
        "{text}"
    );
    assert!(!text.contains("reference tools"), "{text}");

    // Cut inside the footer: the data is complete, the footer's end is missing.
    let tail = dir.path().join("tail.tet");
    cut(&whole, &tail, size - 9);
    let o = run(tet().arg("info").arg(&tail));
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "file is truncated: it ends inside its footer (the metadata and history): {} bytes \
             of the footer are there",
            size - 9 - end
        )) && err.contains(&format!("the data of all {chunks} chunks is complete")),
        "{err}"
    );
    let o = run(tet().arg("verify").arg(&tail));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text.contains("[truncated]") && !text.contains("reference tools"),
        "{text}"
    );
    // audit: could not check (2), with the same words.
    let o = run(tet().arg("audit").arg(&tail));
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("ends inside its footer"));

    // Cut inside the index: refused at open, in the same words.
    let head = dir.path().join("head.tet");
    let f = tet::format::TetFile::open(&whole).unwrap();
    let index_end = f.chunk_index_offset + f.chunk_index_length;
    cut(&whole, &head, index_end - 8);
    let o = run(tet().arg("info").arg(&head));
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "file is truncated: it has {} bytes where its index needs {index_end}",
            index_end - 8
        )),
        "{err}"
    );
    let o = run(tet().arg("info").arg(&head).arg("--json"));
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());

    // The whole file: exit 0, nothing on stderr.
    let o = run(tet().arg("info").arg(&whole));
    assert!(o.status.success() && o.stderr.is_empty(), "{o:?}");
}

fn audit(args: &[&Path]) -> (Option<i32>, String) {
    let o = run(tet().arg("audit").args(args));
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// 0 unchanged, 1 changed, 2 could not check; over several files the worst, changed first.
#[test]
fn audit_exit_codes_tell_unchanged_changed_and_could_not_check_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (npy_a, a) = converted(dir.path(), "a", 2, "16KiB");
    let (npy_b, b) = converted(dir.path(), "b", 2, "16KiB");
    let (npy_c, c) = converted(dir.path(), "c", 2, "16KiB");
    assert_eq!(audit(&[&a, &b, &c]).0, Some(0));

    // b's input missing: could not check.
    std::fs::rename(&npy_b, dir.path().join("b.moved")).unwrap();
    let (code, text) = audit(&[&b]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("missing row 0"), "{text}");
    let (code, text) = audit(&[&a, &b]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains(": NOT CHECKED ("), "{text}");
    let o = run(tet().args(["audit", "--json"]).arg(&b));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["verdict"].as_str(), v["ok"].as_bool()),
        (Some("unchecked"), Some(false))
    );

    // c's input changed: changed, and it outranks could-not-check.
    let mut bytes = std::fs::read(&npy_c).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 1;
    std::fs::write(&npy_c, bytes).unwrap();
    assert_eq!(audit(&[&c]).0, Some(1));
    let (code, text) = audit(&[&a, &b, &c]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains(": CHANGED ("), "{text}");

    // --source: a recorded parent 0, another file 1, an unreadable source 2.
    let src = |s: &Path| {
        run(tet().arg("audit").arg(&a).arg("--source").arg(s))
            .status
            .code()
    };
    assert_eq!(src(&npy_a), Some(0));
    assert_eq!(src(&npy_c), Some(1));
    assert_eq!(src(&dir.path().join("nothing.npy")), Some(2));
    // A .tet that cannot be read: could not check.
    assert_eq!(audit(&[&dir.path().join("nothing.tet")]).0, Some(2));

    // Documented in --help.
    let o = run(tet().args(["audit", "--help"]));
    let help = String::from_utf8_lossy(&o.stdout);
    for line in ["0  unchanged", "1  changed", "2  could not check"] {
        assert!(help.contains(line), "{help}");
    }
}

/// `.ci/install-docs` puts what `tet generate` writes where man and bash find it; here: every
/// page renders with `man -l`, and bash completes `tet ver` to `tet verify` and `tet-convert
/// --form` to `--formats`.
#[test]
fn man_pages_render_and_bash_completes_from_the_cli_definition() {
    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man1");
    let o = run(tet().args(["generate", "man"]).arg(&man));
    assert!(o.status.success(), "{o:?}");
    let mut pages: Vec<String> = std::fs::read_dir(&man)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    // A page for tet, one per command of tet's (the hidden `generate` has none), tet-convert.
    let mut want: Vec<String> = tet_commands()
        .iter()
        .map(|c| format!("tet-{c}.1"))
        .chain(["tet.1".to_string()])
        .collect();
    want.sort();
    assert_eq!(pages, want);
    for p in ["tet-audit.1", "tet-convert.1", "tet-info.1", "tet-verify.1"] {
        assert!(pages.iter().any(|x| x == p), "{pages:?}");
    }
    let listed: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().collect();
    assert_eq!(listed.len(), pages.len(), "{listed:?}");
    let needles = [
        ("tet.1", "tet-verify(1)"),
        ("tet-audit.1", "could not check"),
        ("tet-verify.1", "--deep"),
        ("tet-convert.1", "--formats"),
        ("tet-export.1", "Examples"),
    ];
    for page in &pages {
        // man renders the page as a reader sees it (no pager, wide lines, so that the words
        // looked for are not hyphenated), without a warning.
        let o = run(Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(man.join(page))
            .env("MANWIDTH", "200")
            .env("LC_ALL", "C.UTF-8"));
        assert!(o.status.success(), "{page}: {o:?}");
        let text = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.trim().is_empty(), "{page}: {err}");
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{page}: {text}"
        );
        for (_, needle) in needles.iter().filter(|(p, _)| p == page) {
            assert!(text.contains(needle), "{page}: no {needle:?} in\n{text}");
        }
    }

    let comp = dir.path().join("completions");
    let o = run(tet().args(["generate", "completions", "bash"]).arg(&comp));
    assert!(o.status.success(), "{o:?}");
    for (script, words, want) in [
        ("tet.bash", "tet ver", "verify"),
        ("tet.bash", "tet audit --js", "--json"),
        ("tet-convert.bash", "tet-convert --form", "--formats"),
    ] {
        let words: Vec<&str> = words.split(' ').collect();
        let cword = words.len() - 1;
        // The function the script registers for the program (`complete -F FUNC PROGRAM`),
        // called as bash calls it: COMP_WORDS, COMP_CWORD, and (program, word, previous word).
        let bash = format!(
            "source \"$SCRIPT\"; f=$(complete -p {prog} | sed -E 's/.*-F ([^ ]+).*/\\1/'); \
             COMP_WORDS=({line}); COMP_CWORD={cword}; COMP_LINE=\"{line}\"; \
             COMP_POINT=${{#COMP_LINE}}; \"$f\" {prog} {cur} {prev}; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            prog = words[0],
            line = words.join(" "),
            cur = words[cword],
            prev = words[cword - 1]
        );
        let o = run(Command::new("bash")
            .args(["-c", &bash])
            .env("SCRIPT", comp.join(script)));
        assert!(o.status.success(), "{words:?}: {o:?}");
        let replies: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().collect();
        assert_eq!(replies, [want], "{words:?}");
    }
}

/// The commands `tet -h` lists (all but `help`).
fn tet_commands() -> Vec<String> {
    let o = run(tet().arg("-h"));
    String::from_utf8_lossy(&o.stdout)
        .split("Commands:\n")
        .nth(1)
        .unwrap()
        .lines()
        .map_while(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// Every command's `--help` (every command `tet -h` lists, and `tet-convert`) ends with
/// examples.
#[test]
fn every_help_has_an_example() {
    let commands = tet_commands();
    assert!(commands.len() >= 5, "{commands:?}");
    for c in [vec![]]
        .into_iter()
        .chain(commands.iter().map(|c| vec![c.as_str()]))
    {
        let o = run(tet().args(&c).arg("--help"));
        assert!(o.status.success(), "{c:?}");
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(help.contains("Examples:\n  tet"), "{c:?}: {help}");
    }
    let o = run(tet_convert().arg("--help"));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Examples:\n  tet-convert "));
}

/// An export that fails while writing (here: past the file size limit, `ulimit -f`, as a full
/// disk would) names the output the user gave, never the staging folder, and leaves nothing.
#[test]
fn export_errors_name_the_users_output_not_a_temporary_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_, tet_file) = converted(dir.path(), "big", 128, "64KiB");
    // A directory of .npy files, one .npy, an .npz, a Zarr store (uncompressed: every chunk
    // file is over the limit).
    for (out, extra) in [
        ("dir_of_npy", "--to npy"),
        ("o.npy", ""),
        ("o.npz", ""),
        ("o.zarr", "--compress none"),
    ] {
        let out = dir.path().join(out);
        // SIGXFSZ ignored: a write past 16 KiB fails with EFBIG instead of killing.
        let script = "trap '' XFSZ; ulimit -f 16; exec \"$TET\" export \"$IN\" \"$OUT\" $EXTRA";
        let o = run(Command::new("bash")
            .args(["-c", script])
            .env("TET", env!("CARGO_BIN_EXE_tet"))
            .env("IN", &tet_file)
            .env("OUT", &out)
            .env("EXTRA", extra));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{}: {o:?}", out.display());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&out.display().to_string()), "{err}");
        assert!(err.contains("File too large"), "{err}");
        assert!(!err.contains(".tet-export-"), "{err}");
        assert!(!out.exists(), "{}", out.display());
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "big.npy" && n != "big.tet")
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

/// A file of a format tet-convert reads, given to `tet info`, `verify` or `export` by mistake,
/// is named for what it is, with the command that converts it.
#[test]
fn a_file_of_another_format_is_named_for_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("x.npy");
    common::write_npy(&npy, 1);
    let want = "not a .tet file but a NumPy .npy file (tet-convert FILE OUT.tet converts it)";
    for args in [vec!["info"], vec!["verify"], vec!["export"]] {
        let mut c = tet();
        c.args(&args).arg(&npy);
        if args[0] == "export" {
            c.arg(dir.path().join("out.npz"));
        }
        let o = run(&mut c);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {o:?}");
        let text = String::from_utf8_lossy(if args[0] == "verify" {
            &o.stdout
        } else {
            &o.stderr
        });
        assert!(text.contains(want), "{args:?}: {text}");
    }
    assert!(!dir.path().join("out.npz").exists());
}

/// `tet info --metadata` tells the recorded facts in words (what the demo shows first), and
/// `--json` keeps their machine form.
#[cfg(feature = "netcdf")]
#[test]
fn info_metadata_reads_as_words() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ocean.tet");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sample/ocean.nc");
    let o = run(tet_convert().arg(&sample).arg(&out).arg("-q"));
    assert!(o.status.success(), "{o:?}");
    let o = run(tet().args(["info", "--metadata"]).arg(&out));
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("  unlimited dimension: time\n"), "{text}");
    assert!(text.contains("  role: coordinate variable\n"), "{text}");
    assert!(
        text.contains("  source filters: shuffle, deflate(4)\n"),
        "{text}"
    );
    assert!(text.contains("  source chunks: 1 × 90 × 180\n"), "{text}");
    for jargon in ["[source_facts]", "text_list", "[role]", "\"coordinate\""] {
        assert!(!text.contains(jargon), "{jargon} in: {text}");
    }
    let o = run(tet().args(["info", "--json", "--metadata"]).arg(&out));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.to_string().contains("\"text_list\":[\"time\"]"), "{v}");
}

/// A file with extension codecs is not called plain ".tet v1" (the reference reader refuses it):
/// `tet info` names the extension codecs; a `--codec zstd` file stays ".tet v1".
#[test]
fn info_names_extension_codecs() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("field.npy");
    common::write_npy(&npy, 64);
    let first_line = |codec: &str| {
        let out = dir.path().join(format!("{codec}.tet"));
        let o = run(tet_convert()
            .arg(&npy)
            .arg(&out)
            .args(["-q", "--codec", codec]));
        assert!(o.status.success(), "{o:?}");
        let o = run(tet().arg("info").arg(&out));
        assert!(o.status.success(), "{o:?}");
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.lines().next().unwrap_or_default().to_string()
    };
    let plain = first_line("zstd");
    assert!(plain.contains(": .tet v1, "), "{plain}");
    let ext = first_line("zstd-bitshuffle");
    assert!(
        ext.contains(".tet v1 with extension codecs (zstd-bitshuffle;"),
        "{ext}"
    );
}
