//! Corrupt inputs: malformed metadata, truncated and garbage chunks, corrupt shard indexes,
//! zstd headers claiming huge sizes. Every one gives an error (or, for value bytes that
//! decode either way, values), never a panic or an abort.

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tet_source::{OpenOptions, Source, SourceError};
use tet_testkit::{copy_tree, corpus_dir, files_below};
use tet_zarr::open_store;

use common::{bytes, store, write_meta};

/// Opens and reads every variable of the store: their values, or the first error.
fn open_and_read(root: &Path) -> Result<Vec<Vec<u8>>, SourceError> {
    let src = open_store(root, &OpenOptions::default())?;
    let mut values = Vec::new();
    for (i, v) in src.variables().iter().enumerate() {
        let n = v.byte_len().unwrap() as usize;
        let mut out = vec![0u8; n];
        let start = vec![0; v.shape.len()];
        src.read_region(i, &start, &v.shape, &mut out)?;
        // A sub-region inside the first chunk takes the partial-decoding path.
        let count: Vec<u64> = v.shape.iter().map(|&d| d.min(1)).collect();
        let m: u64 = count.iter().product();
        let mut one = vec![0u8; m as usize * v.dtype.size()];
        src.read_region(i, &start, &count, &mut one)?;
        values.push(out);
    }
    Ok(values)
}

fn one_line(e: &SourceError) {
    let s = e.to_string();
    assert!(!s.is_empty() && !s.contains('\n'), "not one line: {s:?}");
}

/// A store `<name>.zarr` in `dir` whose only node is the root's `zarr.json` holding `text`:
/// opening and reading it must fail, with one line, which is returned with the store.
fn refusal(dir: &Path, name: &str, text: &str) -> (PathBuf, SourceError) {
    let root = dir.join(format!("{name}.zarr"));
    write_meta(&root, "", "zarr.json", text);
    let e = open_and_read(&root).expect_err(text);
    one_line(&e);
    eprintln!("{name}: {e}");
    (root, e)
}

fn array_meta(extra: Value) -> String {
    let mut m = json!({
        "zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    });
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            m.as_object_mut().unwrap().remove(k);
        } else {
            m[k] = v.clone();
        }
    }
    m.to_string()
}

#[test]
fn malformed_metadata_is_refused() {
    let cases: Vec<(String, &str)> = vec![
        (String::new(), "invalid JSON"),
        ("{".into(), "invalid JSON"),
        ("[]".into(), "JSON object"),
        (
            r#"{"zarr_format": 2, "node_type": "group"}"#.into(),
            "zarr_format",
        ),
        (
            r#"{"zarr_format": "3", "node_type": "group"}"#.into(),
            "zarr_format",
        ),
        (r#"{"zarr_format": 3}"#.into(), "node_type"),
        (
            r#"{"zarr_format": 3, "node_type": "folder"}"#.into(),
            "node_type",
        ),
        (
            r#"{"zarr_format": 3, "node_type": "array"}"#.into(),
            "invalid array metadata",
        ),
        (
            r#"{"zarr_format": 3, "node_type": "group", "attributes": 5}"#.into(),
            "group",
        ),
        (array_meta(json!({"shape": "x"})), "invalid array metadata"),
        (
            array_meta(json!({"shape": [-1, 4]})),
            "invalid array metadata",
        ),
        (array_meta(json!({"shape": [4]})), ""),
        (array_meta(json!({"fill_value": "abc"})), "fill value"),
        (
            array_meta(json!({"dimension_names": ["a"]})),
            "dimension names",
        ),
        (
            array_meta(json!({"chunk_grid": {"name": "regular",
                                          "configuration": {"chunk_shape": [0, 2]}}})),
            "",
        ),
        (array_meta(json!({"codecs": []})), ""),
        (
            array_meta(json!({"codecs": null})),
            "invalid array metadata",
        ),
        (
            array_meta(json!({"shape": [1u64 << 40, 1u64 << 40]})),
            "too many",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let (_, e) = refusal(dir.path(), &format!("malformed{i}"), text);
        assert!(e.to_string().contains(want), "case {i} {text}: {e}");
        assert!(
            !matches!(e, SourceError::Unsupported { .. }),
            "case {i}: {e}"
        );
    }
}

#[test]
fn unsupported_metadata_is_named() {
    let cases = [
        (
            array_meta(json!({"data_type": "float8_e4m3", "fill_value": "0x00"})),
            "float8_e4m3",
        ),
        (
            array_meta(
                json!({"codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                      {"name": "lz4_magic"}]}),
            ),
            "lz4_magic",
        ),
        (
            array_meta(json!({"future_thing": {"x": 1}})),
            "future_thing",
        ),
        (
            array_meta(json!({"chunk_grid": {"name": "hexagonal"}})),
            "hexagonal",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let (root, e) = refusal(dir.path(), &format!("unsupported{i}"), text);
        assert!(
            matches!(e, SourceError::Unsupported { .. }),
            "case {i}: {e}"
        );
        assert!(e.to_string().contains(want), "case {i}: {e}");
        // With skip_unsupported the array is listed as skipped instead.
        let src = open_store(
            &root,
            &OpenOptions {
                skip_unsupported: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(src.variables().is_empty());
        assert_eq!(src.skipped().len(), 1);
    }
    // An optional extension field (must_understand: false) is fine.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ok.zarr");
    write_meta(
        &root,
        "",
        "zarr.json",
        &array_meta(json!({"future_thing": {"must_understand": false}})),
    );
    open_and_read(&root).unwrap();
}

#[test]
fn malformed_child_metadata_names_the_file() {
    let src = corpus_dir("zarr").join("climate.zarr");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("c.zarr");
    copy_tree(&src, &root);
    std::fs::write(
        root.join("station/counts/zarr.json"),
        "{\"zarr_format\": 3, \"node",
    )
    .unwrap();
    let e = open_and_read(&root).unwrap_err();
    one_line(&e);
    assert!(e.to_string().contains("station/counts/zarr.json"), "{e}");
    // v2: .zattrs that is not an object.
    let root = dir.path().join("v2.zarr");
    write_meta(&root, "", ".zgroup", r#"{"zarr_format": 2}"#);
    write_meta(&root, "", ".zattrs", "[1, 2]");
    let e = open_and_read(&root).unwrap_err();
    assert!(e.to_string().contains(".zattrs"), "{e}");
    // No metadata at all.
    let root = dir.path().join("empty.zarr");
    std::fs::create_dir_all(&root).unwrap();
    let e = open_and_read(&root).unwrap_err();
    assert!(e.to_string().contains("not a Zarr store"), "{e}");
    // A file is not a directory store.
    let e = open_and_read(&root.join("nothing")).unwrap_err();
    assert!(matches!(e, SourceError::Unsupported { .. }), "{e}");
}

#[cfg(unix)]
#[test]
fn symlink_loops_end() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("loop.zarr");
    write_meta(
        &root,
        "",
        "zarr.json",
        r#"{"zarr_format": 3, "node_type": "group"}"#,
    );
    write_meta(
        &root,
        "g",
        "zarr.json",
        r#"{"zarr_format": 3, "node_type": "group"}"#,
    );
    std::os::unix::fs::symlink(root.join("g"), root.join("g/again")).unwrap();
    let e = open_and_read(&root).unwrap_err();
    one_line(&e);
    assert!(e.to_string().contains("symlink loop"), "{e}");
}

/// A store with one array per codec chain, all chunks present.
fn codec_store(root: &Path) {
    let b = json!({"name": "bytes", "configuration": {"endian": "little"}});
    let chains = [
        ("raw", vec![b.clone()]),
        (
            "zstd",
            vec![
                b.clone(),
                json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}}),
            ],
        ),
        (
            "zstdck",
            vec![
                b.clone(),
                json!({"name": "zstd", "configuration": {"level": 3, "checksum": true}}),
            ],
        ),
        (
            "gzip",
            vec![
                b.clone(),
                json!({"name": "gzip", "configuration": {"level": 5}}),
            ],
        ),
        ("crc", vec![b.clone(), json!({"name": "crc32c"})]),
        (
            "shard",
            vec![json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 3], "codecs": [b.clone()],
            "index_codecs": [b.clone(), {"name": "crc32c"}]}})],
        ),
        (
            "shardnocrc",
            vec![json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 3], "codecs": [b.clone(), {"name": "zstd", "configuration": {"level": 1, "checksum": false}}],
            "index_codecs": [b.clone()]}})],
        ),
    ];
    write_meta(
        root,
        "",
        "zarr.json",
        r#"{"zarr_format": 3, "node_type": "group"}"#,
    );
    for (i, (name, codecs)) in chains.into_iter().enumerate() {
        let m = json!({
            "zarr_format": 3, "node_type": "array", "shape": [8, 9], "data_type": "uint16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": codecs,
        });
        write_meta(root, name, "zarr.json", &m.to_string());
        store(
            root,
            name,
            &[0, 0],
            &[8, 9],
            bytes(100 + i as u64, 8 * 9 * 2),
        );
    }
}

#[test]
fn truncated_and_garbage_chunks_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.zarr");
    codec_store(&clean);
    let good = open_and_read(&clean).unwrap();
    let chunks: Vec<_> = files_below(&clean)
        .into_iter()
        .filter(|p| p.file_name().unwrap() != "zarr.json")
        .collect();
    assert!(chunks.len() >= 20);
    let work = dir.path().join("work.zarr");
    copy_tree(&clean, &work);
    let mut n = 0;
    for chunk in &chunks {
        let rel = chunk.strip_prefix(&clean).unwrap();
        let orig = std::fs::read(chunk).unwrap();
        let mut variants: Vec<Vec<u8>> = [0, 1, orig.len() / 2, orig.len() - 1]
            .iter()
            .map(|&l| orig[..l].to_vec())
            .collect();
        variants.push(b"this is not a chunk at all".to_vec());
        variants.push(bytes(7, orig.len()));
        for bad in variants {
            n += 1;
            std::fs::write(work.join(rel), &bad).unwrap();
            let res = open_and_read(&work);
            if rel.starts_with("raw") {
                // Random bytes of the right length are valid raw data; a cut that only loses
                // the padding of an edge chunk loses nothing. Otherwise: an error, never
                // wrong values.
                match res {
                    Ok(v) => assert!(bad.len() == orig.len() || v == good, "{}", rel.display()),
                    Err(e) => one_line(&e),
                }
            } else {
                let e = res.expect_err(&format!(
                    "{} ({} bytes) must fail",
                    rel.display(),
                    bad.len()
                ));
                one_line(&e);
                if bad.len() == orig.len() / 2 || bad.len() == 26 {
                    eprintln!("{}: {e}", rel.display());
                }
                assert!(matches!(e, SourceError::Malformed { .. }), "{e}");
            }
        }
        std::fs::write(work.join(rel), &orig).unwrap();
    }
    assert!(n > 100);
}

#[test]
fn zstd_header_bomb_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bomb.zarr");
    codec_store(&root);
    // A frame header claiming 2^50 (then 2^62) bytes of content.
    for shift in [50u32, 62] {
        let mut bomb = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
        bomb.extend_from_slice(&(1u64 << shift).to_le_bytes());
        bomb.extend_from_slice(&[0x01, 0x00, 0x00]);
        std::fs::write(root.join("zstd/c/0/0"), &bomb).unwrap();
        let e = open_and_read(&root).unwrap_err();
        assert!(e.to_string().contains("zstd"), "{e}");
    }
}

#[test]
fn corrupt_shard_index_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.zarr");
    codec_store(&clean);
    let shard = clean.join("shardnocrc/c/0/0");
    let orig = std::fs::read(&shard).unwrap();
    // Index at the end: 2x2 inner chunks, (offset, nbytes) u64 pairs.
    let index_len = 4 * 16;
    let base = orig.len() - index_len;
    let patches: Vec<(usize, u64)> = vec![
        (0, 1 << 40),      // offset far beyond the file
        (8, 1 << 40),      // length far beyond the file
        (0, u64::MAX - 1), // offset + length overflows
        (8, u64::MAX - 1),
        (16, orig.len() as u64), // chunk starting at the end
    ];
    for (i, (at, value)) in patches.into_iter().enumerate() {
        let work = dir.path().join(format!("s{i}.zarr"));
        copy_tree(&clean, &work);
        let mut bad = orig.clone();
        bad[base + at..base + at + 8].copy_from_slice(&value.to_le_bytes());
        std::fs::write(work.join("shardnocrc/c/0/0"), &bad).unwrap();
        let src = open_store(&work, &OpenOptions::default()).unwrap();
        let v = src
            .variables()
            .iter()
            .position(|v| v.name == "shardnocrc")
            .unwrap();
        // The whole shard (one decode) and one inner chunk (partial decode).
        let mut whole = vec![0u8; 4 * 6 * 2];
        let e = src
            .read_region(v, &[0, 0], &[4, 6], &mut whole)
            .unwrap_err();
        one_line(&e);
        eprintln!("shard index patch {i}: {e}");
        // Caught by the checks, not by the last-resort panic guard.
        assert!(!e.to_string().contains("zarrs failed"), "{e}");
        let mut part = vec![0u8; 2];
        let _ = src.read_region(v, &[0, 0], &[1, 1], &mut part);
        let _ = src.read_region(v, &[2, 3], &[1, 1], &mut part);
        let mut all = vec![0u8; 8 * 9 * 2];
        assert!(src.read_region(v, &[0, 0], &[8, 9], &mut all).is_err());
    }
}

/// Every file of the corpus store cut short, and bytes flipped all over it: open and read
/// either work or fail cleanly.
#[test]
fn corpus_truncations_and_flips_never_panic() {
    let src = corpus_dir("zarr").join("climate.zarr");
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.zarr");
    copy_tree(&src, &clean);
    let files = files_below(&clean);
    let work = dir.path().join("work.zarr");
    copy_tree(&clean, &work);
    let mut n = 0;
    let mut errors = 0;
    for f in &files {
        let rel = f.strip_prefix(&clean).unwrap().to_path_buf();
        let orig = std::fs::read(f).unwrap();
        let mut variants: Vec<Vec<u8>> = Vec::new();
        for l in [
            0,
            1,
            7,
            orig.len() / 3,
            orig.len() / 2,
            orig.len().saturating_sub(1),
        ] {
            variants.push(orig[..l.min(orig.len())].to_vec());
        }
        let noise = bytes(n as u64 + 1, 64);
        for k in 0..12 {
            let mut b = orig.clone();
            if b.is_empty() {
                break;
            }
            let pos =
                (noise[k * 2] as usize * 131 + noise[k * 2 + 1] as usize * 7 + k * 17) % b.len();
            b[pos] ^= 1 << (noise[k + 20] % 8);
            variants.push(b);
        }
        for bad in variants {
            n += 1;
            std::fs::write(work.join(&rel), &bad).unwrap();
            if let Err(e) = open_and_read(&work) {
                one_line(&e);
                errors += 1;
            }
        }
        std::fs::write(work.join(&rel), &orig).unwrap();
    }
    assert!(errors > 0 && errors < n, "{errors} of {n}");
}
