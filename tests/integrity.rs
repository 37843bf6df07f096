//! Integrity (issue 13): every stored byte of a converted file is covered by a checksum, `tet
//! verify --deep` finds any one damaged byte and names where it is, files without checksums
//! still verify (and say what could not be checked), `verify`/`audit` take many files, `audit`
//! without `--source` re-checks the recorded inputs, legacy history rows are read and carried,
//! and `tet export` refuses a damaged chunk.
//!
//! No build of the reference reader exists on this machine; what it requires of our files is
//! what `verify` checks (the footer schema and limits of FORMAT-NOTES), plus what is asserted
//! here: the checksums live only where the reference ignores unknown keys (`metadata.tet_ext`
//! and a top-level footer key) and every zstd frame is a standard one any decoder reads.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use tet::format::integrity::{self, ChunkCheck};
use tet::format::verify::{verify, Depth};
use tet::format::{deep_verify, Codec, DeepVerifyError, TetFile};

use common::with_footer;

fn bin(name: &str) -> Command {
    let mut c = Command::new(match name {
        "tet" => env!("CARGO_BIN_EXE_tet"),
        _ => env!("CARGO_BIN_EXE_tet-convert"),
    });
    c.env("SOURCE_DATE_EPOCH", "1700000000");
    c
}

fn run(c: &mut Command) -> Output {
    c.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The lines of `text`, which must be one for each of the `files` files a command was given.
fn one_line_each(text: &str, files: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), files, "{text}");
    lines
}

fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "exit {:?}: {}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// A little-endian f32 C-order `.npy` of `shape` with a smooth field (zstd compresses it well).
fn write_npy(path: &Path, shape: &[u64]) {
    let dims: Vec<String> = shape.iter().map(|d| format!("{d}, ")).collect();
    let header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}",
        dims.concat()
    );
    let n: u64 = shape.iter().product();
    let data: Vec<u8> = (0..n)
        .flat_map(|i| {
            let v = ((i % 997) as f32 * 0.01).sin() * 100.0;
            ((v * 4.0).round() / 4.0).to_le_bytes()
        })
        .collect();
    std::fs::write(path, common::npy_bytes(&header, &data)).unwrap();
}

/// Converts `input` to `output` with `codec` and 8 KiB chunks.
fn convert(input: &Path, output: &Path, codec: &str) {
    ok(run(bin("tet-convert").arg(input).arg(output).args([
        "-q",
        "--codec",
        codec,
        "--chunk-bytes",
        "8KiB",
    ])));
}

/// A raw and a zstd output of one 64 KiB input (8 chunks each), in `dir`.
fn outputs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let input = dir.join("field.npy");
    write_npy(&input, &[64, 256]);
    let raw = dir.join("raw.tet");
    let zst = dir.join("zstd.tet");
    convert(&input, &raw, "raw");
    convert(&input, &zst, "zstd:3");
    (input, raw, zst)
}

fn verify_deep(path: &Path) -> Output {
    run(bin("tet").args(["verify", "--deep"]).arg(path))
}

#[test]
fn one_flipped_byte_in_any_chunk_fails_deep_verify() {
    let dir = tempfile::tempdir().unwrap();
    let (_, raw, zst) = outputs(dir.path());
    let mut cases = 0;
    for (path, codec) in [(&raw, Codec::Raw), (&zst, Codec::Zstd)] {
        // Intact: ok, every chunk checked, no warnings or notes.
        let o = ok(verify_deep(path));
        let text = stdout(&o);
        assert_eq!(text.lines().count(), 1, "{text}");
        let f = TetFile::open(path).unwrap();
        assert!(f.entries.len() >= 8, "{} chunks", f.entries.len());
        let r = verify(&f, Depth::Deep);
        assert!(
            r.ok() && r.warnings.is_empty() && r.notes.is_empty(),
            "{r:?}"
        );
        assert_eq!(r.checked, f.entries.len() as u64);
        assert_eq!(r.footer_digest, "ok");
        let info = deep_verify(path).unwrap();
        assert!(info.has_checksums && info.checked == info.chunks);
        for (i, e) in f.entries.iter().enumerate() {
            assert_eq!(e.codec(), Some(codec), "chunk {i}");
            let stored: &[u8] = &f.stored_bytes(e).unwrap();
            // Ours: every chunk has a digest of its stored bytes, zstd frames their own
            // checksum as well.
            assert_eq!(
                f.chunk_check(i),
                ChunkCheck::Digest(integrity::digest(stored))
            );
            match codec {
                Codec::Raw => {}
                _ => {
                    assert_eq!(integrity::zstd_has_checksum(stored), Some(true));
                    // A standard frame: any zstd decoder reads it.
                    let plain = zstd::decode_all(stored).unwrap();
                    assert_eq!(plain.len() as u64, e.raw_byte_len);
                }
            }
        }
        let bytes = std::fs::read(path).unwrap();
        let ds = &f.datasets[0];
        for e in &f.entries {
            for flip in [0x01u8, 0xff] {
                let at = e.payload_offset + e.stored_byte_len / 2;
                let mut b = bytes.clone();
                b[at as usize] ^= flip;
                let bad = dir.path().join("bad.tet");
                std::fs::write(&bad, &b).unwrap();
                let o = verify_deep(&bad);
                let text = stdout(&o);
                assert_eq!(o.status.code(), Some(1), "byte {at} ^ {flip:#x}: {text}");
                let coords = format!("{:?}", &e.coords[..ds.shape.len()]);
                let range = format!(
                    "bytes {}..{}",
                    e.payload_offset,
                    e.payload_offset + e.stored_byte_len
                );
                let line = text
                    .lines()
                    .find(|l| l.starts_with("FAIL ") && l.contains("[chunk-"))
                    .unwrap_or_else(|| panic!("no chunk failure for byte {at}: {text}"));
                assert!(
                    line.contains(&format!("dataset `{}` chunk {coords}", ds.name))
                        && line.contains(&range),
                    "byte {at}: {line}"
                );
                // The library call says the same.
                match deep_verify(&bad) {
                    Err(DeepVerifyError::Failed { failures, .. }) => {
                        assert!(failures.iter().any(|x| x.message.contains(&range)))
                    }
                    other => panic!("byte {at}: {other:?}"),
                }
                // Without the digest, zstd's own checksum (which every decoder checks, the
                // reference reader's included) refuses the damaged frame as well.
                if codec == Codec::Zstd {
                    let frame = &b[e.payload_offset as usize..][..e.stored_byte_len as usize];
                    assert!(
                        zstd::bulk::decompress(frame, e.raw_byte_len as usize).is_err(),
                        "byte {at} ^ {flip:#x} decodes"
                    );
                }
                // Reading the chunk is refused too.
                let t = TetFile::open(&bad).unwrap();
                let err = t.read_dataset(0).unwrap_err().to_string();
                assert!(err.contains(&coords) && err.contains(&range), "{err}");
                cases += 1;
            }
        }
    }
    eprintln!("integrity: {cases} damaged copies, every one refused by verify --deep");
}

#[test]
fn checksums_stay_where_the_reference_reader_ignores_them() {
    let dir = tempfile::tempdir().unwrap();
    let (_, raw, zst) = outputs(dir.path());
    for path in [raw, zst] {
        let f = TetFile::open(&path).unwrap();
        let (top, spilled) = f.footer_json();
        let top = top.unwrap().as_object().unwrap();
        let keys: Vec<&str> = top.keys().map(String::as_str).collect();
        assert_eq!(keys, ["history", "metadata", "tet_footer_digest"]);
        let md = spilled.or(top.get("metadata")).unwrap();
        assert!(md["tet_ext"]["chunk_digests"]["digests"].is_array());
        assert_eq!(md["tet_ext"]["chunk_digests"]["algorithm"], "xxh3-64");
        // The text ends with the digest key, as the format page says.
        let text = std::fs::read(&path).unwrap();
        let l = f.footer_layout().unwrap();
        let json = &text[l.json_offset as usize..(l.json_offset + l.json_len) as usize];
        let tail = String::from_utf8_lossy(&json[json.len() - 48..]).into_owned();
        assert!(tail.contains(",\"tet_footer_digest\":\"xxh3-64:") && tail.ends_with("\"}"));
        // History rows keep exactly the keys the reference allows.
        for row in top["history"].as_array().unwrap() {
            for k in row.as_object().unwrap().keys() {
                assert!(["op", "source", "at", "parents", "params"].contains(&k.as_str()));
            }
        }
    }
}

/// The footer digest covers the superblock, directory, index, metadata and history.
#[test]
fn damage_outside_the_payloads_fails_the_footer_digest() {
    let dir = tempfile::tempdir().unwrap();
    let (_, raw, _) = outputs(dir.path());
    let bytes = std::fs::read(&raw).unwrap();
    let f = TetFile::open(&raw).unwrap();
    let l = f.footer_layout().unwrap().clone();
    let json = String::from_utf8(
        bytes[l.json_offset as usize..(l.json_offset + l.json_len) as usize].to_vec(),
    )
    .unwrap();
    // The reserved field of an index row (before: only a warning), a byte of the directory's
    // padding, and one letter of the history (valid JSON either way).
    let reserved = f.chunk_index_offset + 32 + 100;
    let tool = l.json_offset + json.find("tet-convert").unwrap() as u64;
    for at in [reserved, tool] {
        let mut b = bytes.clone();
        b[at as usize] ^= 0x01;
        let bad = dir.path().join("bad.tet");
        std::fs::write(&bad, &b).unwrap();
        let o = run(bin("tet").arg("verify").arg(&bad));
        assert_eq!(o.status.code(), Some(1), "byte {at}");
        assert!(stdout(&o).contains("[footer-digest]"), "{}", stdout(&o));
        // Export refuses what the footer digest disowns (a reader would write it out as it is),
        // and writes nothing.
        let out = dir.path().join(format!("bad-{at}.npz"));
        let o = run(bin("tet").arg("export").arg(&bad).arg(&out));
        assert_eq!(o.status.code(), Some(1), "export of byte {at}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("but the footer records"), "{err}");
        assert!(!out.exists());
        // So does a conversion of it (a `.tet` input): nothing it disowns is carried on.
        let again = dir.path().join(format!("again-{at}.tet"));
        let o = run(bin("tet-convert").arg(&bad).arg(&again));
        assert_eq!(o.status.code(), Some(1), "conversion of byte {at}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("but the footer records"), "{err}");
        assert!(!again.exists());
    }
    // A footer rewritten by another tool (digest not in its place, or removed while the chunk
    // digests stay) cannot pass either.
    let edits: [fn(&mut Value); 2] = [
        |v| v["tet_footer_digest"] = "crc32:0".into(),
        |v| {
            v.as_object_mut().unwrap().remove("tet_footer_digest");
        },
    ];
    for edit in edits {
        let bad = dir.path().join("bad.tet");
        std::fs::write(&bad, with_footer(&bytes, edit)).unwrap();
        let r = verify(&TetFile::open(&bad).unwrap(), Depth::Sample);
        assert!(
            r.failures.iter().any(|x| x.code == "footer-digest"),
            "{r:?}"
        );
    }
}

#[test]
fn files_without_checksums_verify_and_say_what_was_not_checked() {
    let old = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/small-v0.tet");
    let mut files = vec![old];
    for n in ["sample.tet", "multichunk_u8.tet", "converted_small_cf.tet"] {
        files.push(common::reference(n));
    }
    for p in &files {
        let f = TetFile::open(p).unwrap();
        assert!(!f.has_checksums());
        let r = verify(&f, Depth::Deep);
        assert!(r.ok() && r.warnings.is_empty(), "{}: {r:?}", p.display());
        assert_eq!(r.notes.len(), 1);
        assert_eq!(r.notes[0].code, "no-checksums");
        assert_eq!(r.footer_digest, "absent");
        let v = deep_verify(p).unwrap();
        assert!(!v.has_checksums && v.checked == 0);
        let o = ok(verify_deep(p));
        assert!(
            stdout(&o).contains("could not be checked against digests"),
            "{}",
            stdout(&o)
        );
    }
}

#[test]
fn verify_takes_many_files_one_line_each() {
    let dir = tempfile::tempdir().unwrap();
    let (_, raw, zst) = outputs(dir.path());
    let mut b = std::fs::read(&zst).unwrap();
    let f = TetFile::open(&zst).unwrap();
    let e = f.entries[3];
    b[(e.payload_offset + e.stored_byte_len / 2) as usize] ^= 0x10;
    let bad = dir.path().join("bad.tet");
    std::fs::write(&bad, b).unwrap();
    let sample = common::reference("sample.tet");

    let o = ok(run(bin("tet")
        .args(["verify", "--deep"])
        .arg(&raw)
        .arg(&zst)
        .arg(&sample)));
    let text = stdout(&o);
    let lines = one_line_each(&text, 3);
    assert!(lines[0].starts_with(&format!("{}: ok (", raw.display())));
    assert!(lines[2].contains("no checksums"), "{text}");

    let o = run(bin("tet")
        .args(["verify", "--deep"])
        .arg(&raw)
        .arg(&bad)
        .arg(&zst));
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    let lines = one_line_each(&text, 3);
    assert!(
        lines[1].starts_with(&format!("{}: FAILED [chunk-", bad.display())),
        "{text}"
    );
    assert!(lines[1].contains("chunk [3, 0]") || lines[1].contains("chunk [3]"));

    let o = run(bin("tet")
        .args(["verify", "--deep", "--json"])
        .arg(&raw)
        .arg(&bad)
        .arg("/nonexistent/x.tet"));
    assert_eq!(o.status.code(), Some(1));
    let rows: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["schema"], "tet-verify/1");
    assert_eq!(rows[0]["ok"], true);
    assert_eq!(rows[0]["checksums"]["footer_digest"], "ok");
    assert_eq!(rows[0]["checksums"]["chunks_checked"], rows[0]["chunks"]);
    assert_eq!(rows[1]["ok"], false);
    assert_eq!(rows[2]["failures"][0]["code"], "structure");
}

fn audit_json(files: &[&Path], cwd: Option<&Path>) -> (Option<i32>, Vec<Value>) {
    let mut c = bin("tet");
    c.args(["audit", "--json"]).args(files);
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    let o = run(&mut c);
    let rows = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (o.status.code(), rows)
}

#[test]
fn audit_without_source_rechecks_the_recorded_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    write_npy(&work.join("in.npy"), &[16, 64]);
    // A relative input from its own directory: the working directory is recorded.
    ok(run(bin("tet-convert")
        .args(["in.npy", "out.tet", "-q"])
        .current_dir(&work)));
    let out = work.join("out.tet");
    let f = TetFile::open(&out).unwrap();
    let row = &f.footer().unwrap().unwrap().history[0];
    assert_eq!(row.params["input"], "in.npy");
    assert_eq!(
        Path::new(&row.params["cwd"]).canonicalize().unwrap(),
        work.canonicalize().unwrap()
    );
    assert!(row.params["input_mtime"].contains('.'));
    let size = std::fs::metadata(work.join("in.npy")).unwrap().len();
    assert_eq!(row.params["input_bytes"], size.to_string());

    // Unchanged, audited from elsewhere (the recorded cwd resolves the relative path).
    let (code, rows) = audit_json(&[&out], Some(dir.path()));
    assert_eq!(code, Some(0), "{rows:?}");
    let input = &rows[0]["inputs"][0];
    assert_eq!(input["status"], "unchanged", "{input}");
    assert_eq!(input["resolved_against"], "recorded-cwd");
    assert_eq!(input["digest"], input["recorded_digest"]);
    assert_eq!(rows[0]["sources"], serde_json::json!([]));
    let o = ok(run(bin("tet").arg("audit").arg(&out)));
    assert!(
        stdout(&o).contains("unchanged since conversion"),
        "{}",
        stdout(&o)
    );

    // Changed in place, same size.
    let p = work.join("in.npy");
    let mut b = std::fs::read(&p).unwrap();
    let n = b.len();
    b[n - 3] ^= 0x40;
    std::fs::write(&p, &b).unwrap();
    let (code, rows) = audit_json(&[&out], None);
    assert_eq!(code, Some(1));
    let input = &rows[0]["inputs"][0];
    assert_eq!(input["status"], "changed", "{input}");
    assert_eq!(input["recorded_bytes"], size);
    assert_eq!(input["bytes"], size);
    assert!(input["recorded_mtime"].is_string() && input["mtime"].is_string());
    assert_eq!(rows[0]["ok"], false);
    let o = run(bin("tet").arg("audit").arg(&out));
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(
        text.contains("CHANGED row 0") && text.contains(&format!("size {size} -> {size} bytes")),
        "{text}"
    );

    // Moved away: missing, so not confirmed: exit 2 ("could not check"), not 0 or 1.
    std::fs::rename(&p, dir.path().join("elsewhere.npy")).unwrap();
    let (code, rows) = audit_json(&[&out], None);
    assert_eq!(code, Some(2));
    assert_eq!(rows[0]["inputs"][0]["status"], "missing");
    assert_eq!(rows[0]["verdict"], "unchecked");
    assert_eq!(rows[0]["ok"], false);
    let o = run(bin("tet").arg("audit").arg(&out));
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("missing row 0"), "{}", stdout(&o));

    // --source as before (the moved file is the changed one: no recorded parent).
    let o = run(bin("tet")
        .arg("audit")
        .arg(&out)
        .arg("--source")
        .arg(dir.path().join("elsewhere.npy")));
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(
        text.contains("MISMATCH") && !text.contains("row 0 input"),
        "{text}"
    );
}

#[test]
fn audit_takes_many_files_one_line_each() {
    let dir = tempfile::tempdir().unwrap();
    let (input, raw, zst) = outputs(dir.path());
    let sample = common::reference("converted_small_cf.tet");
    let o = ok(run(bin("tet")
        .arg("audit")
        .arg(&raw)
        .arg(&zst)
        .arg(&sample)));
    let text = stdout(&o);
    let lines = one_line_each(&text, 3);
    assert!(
        lines[0].starts_with(&format!(
            "{}: ok (1 history rows; inputs: 1 unchanged",
            raw.display()
        )),
        "{text}"
    );
    assert!(lines[2].contains("1 not recorded"), "{text}");

    // A file that cannot be read: could not check (2).
    let (code, rows) = audit_json(&[&raw, &zst, Path::new("/nonexistent.tet")], None);
    assert_eq!(code, Some(2));
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|r| r["schema"] == "tet-audit/1" && r["ok"] == true));

    // --source with many files: each file checked against the sources.
    let o = run(bin("tet")
        .arg("audit")
        .arg(&raw)
        .arg(&sample)
        .arg("--source")
        .arg(&input));
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(text.lines().next().unwrap().contains(": ok ("), "{text}");
    assert!(text.lines().nth(1).unwrap().contains("CHANGED"), "{text}");
}

/// Other writers may leave a zstd frame with its own checksum without a digest (`null`); that is
/// accepted for such a frame only. The footer digest is left out: these are edited files.
#[test]
fn a_null_digest_is_accepted_only_for_a_frame_with_a_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let (_, raw, zst) = outputs(dir.path());
    for (path, accepted) in [(&zst, true), (&raw, false)] {
        let b = with_footer(&std::fs::read(path).unwrap(), |v| {
            v["metadata"]["tet_ext"]["chunk_digests"]["digests"][1] = Value::Null;
            v.as_object_mut().unwrap().remove("tet_footer_digest");
        });
        let f = TetFile::from_bytes(b).unwrap();
        assert_eq!(
            f.chunk_check(1) == ChunkCheck::ZstdChecksum,
            accepted,
            "{}",
            path.display()
        );
        let r = verify(&f, Depth::Deep);
        let codes: Vec<&str> = r.failures.iter().map(|x| x.code).collect();
        if accepted {
            assert_eq!(codes, ["footer-digest"], "{r:?}");
            assert!(f.read_dataset(0).is_ok());
        } else {
            assert_eq!(codes, ["footer-digest", "chunk-checksum"], "{r:?}");
            assert!(f.read_dataset(0).is_err());
        }
    }
}

#[test]
fn legacy_history_rows_are_read_shown_and_carried() {
    let dir = tempfile::tempdir().unwrap();
    let (_, raw, _) = outputs(dir.path());
    // A file as a tool of the compact era would have written it: one legacy row first, no
    // checksums.
    let legacy = dir.path().join("legacy.tet");
    let b = with_footer(&std::fs::read(&raw).unwrap(), |v| {
        v["history"]
            .as_array_mut()
            .unwrap()
            .insert(0, serde_json::json!(["convert", "nc", "1600000000"]));
        v.as_object_mut().unwrap().remove("tet_footer_digest");
        v["metadata"]["tet_ext"]
            .as_object_mut()
            .unwrap()
            .remove("chunk_digests");
    });
    std::fs::write(&legacy, b).unwrap();

    let f = TetFile::open(&legacy).unwrap();
    let h = &f.footer().unwrap().unwrap().history;
    assert_eq!(h.len(), 2);
    assert_eq!(
        (h[0].op.as_str(), h[0].source.as_str(), h[0].at.as_str()),
        ("convert", "nc", "1600000000")
    );
    assert!(h[0].parents.is_empty() && h[0].params.is_empty());
    let r = verify(&f, Depth::Deep);
    assert!(r.ok() && r.warnings.is_empty(), "{r:?}");

    let o = ok(run(bin("tet").arg("info").arg(&legacy)));
    assert!(
        stdout(&o).contains("0: convert from nc at 1600000000"),
        "{}",
        stdout(&o)
    );
    let o = ok(run(bin("tet").args(["info", "--json"]).arg(&legacy)));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["history"][0]["source"], "nc");
    let o = ok(run(bin("tet").arg("audit").arg(&legacy)));
    let text = stdout(&o);
    assert!(
        text.contains("2 history rows") && text.contains("2020-09-13T12:26:40Z"),
        "{text}"
    );
    assert!(text.contains("- row 0: no input path"), "{text}");

    // Carried over by a tet → tet conversion (written back in the object form).
    let out = dir.path().join("carried.tet");
    convert(&legacy, &out, "zstd:1");
    let g = TetFile::open(&out).unwrap();
    let h2 = &g.footer().unwrap().unwrap().history;
    assert_eq!(h2.len(), 3);
    assert_eq!(h2[0], h[0]);
    assert_eq!(h2[1], h[1]);
    assert_eq!(h2[2].source, "tet");
    let (top, _) = g.footer_json();
    assert_eq!(
        top.unwrap()["history"][0],
        serde_json::json!({"op": "convert", "source": "nc", "at": "1600000000"})
    );
    let r = verify(&g, Depth::Deep);
    assert!(
        r.ok() && r.notes.is_empty() && r.footer_digest == "ok",
        "{r:?}"
    );
}

#[test]
fn export_refuses_a_damaged_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let (_, raw, zst) = outputs(dir.path());
    // Intact: the Zarr export reuses the stored frames (the verbatim path).
    let z = dir.path().join("ok.zarr");
    let o = ok(run(bin("tet").args(["export", "--json"]).arg(&zst).arg(&z)));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["reused_chunks"].as_u64().unwrap() >= 8, "{v}");

    for (src, target) in [(&raw, "out.npy"), (&zst, "out.npy"), (&zst, "out.zarr")] {
        let f = TetFile::open(src).unwrap();
        let e = f.entries[2];
        let mut b = std::fs::read(src).unwrap();
        b[(e.payload_offset + e.stored_byte_len / 2) as usize] ^= 0x04;
        let bad = dir.path().join("bad.tet");
        std::fs::write(&bad, b).unwrap();
        let out = dir.path().join(target);
        let o = run(bin("tet").arg("export").arg(&bad).arg(&out));
        assert_eq!(o.status.code(), Some(1), "{target}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        let range = format!(
            "bytes {}..{}",
            e.payload_offset,
            e.payload_offset + e.stored_byte_len
        );
        assert!(
            err.lines().count() == 1
                && err.contains("dataset `")
                && err.contains("chunk [2, 0]")
                && err.contains(&range),
            "{target}: {err}"
        );
        assert!(!out.exists(), "{target}: written from a damaged chunk");
    }
}
