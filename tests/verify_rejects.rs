//! `tet verify` rejects every kind of broken file, naming the dataset and chunk, and the files
//! are built byte by byte here so the writer's own checks cannot hide a reader gap.

use tet::format::verify::{verify_bytes, Depth, Report};

struct Ds {
    name: &'static str,
    dtype: u32,
    shape: Vec<u64>,
    chunk: Vec<u64>,
}

struct Row {
    ds: u64,
    coords: Vec<u64>,
    payload: Vec<u8>,
    raw_len: u64,
    codec: u32,
}

fn row(ds: u64, coords: &[u64], payload: Vec<u8>) -> Row {
    Row {
        ds,
        coords: coords.to_vec(),
        raw_len: payload.len() as u64,
        payload,
        codec: 0,
    }
}

/// Lays out a file: superblock, directory, index, payloads in row order, optional footer.
fn build(ds: &[Ds], rows: &[Row], footer: Option<&str>, flags: u32) -> Vec<u8> {
    let mut blob = Vec::new();
    for d in ds {
        blob.extend((d.name.len() as u32).to_le_bytes());
        blob.extend(d.dtype.to_le_bytes());
        blob.extend((d.shape.len() as u32).to_le_bytes());
        blob.extend(0u32.to_le_bytes());
        blob.extend(d.name.as_bytes());
        while blob.len() % 8 != 0 {
            blob.push(0);
        }
        for v in d.shape.iter().chain(&d.chunk) {
            blob.extend(v.to_le_bytes());
        }
    }
    let index_off = (40 + blob.len() as u64).div_ceil(8) * 8;
    let index_len = 32 + 104 * rows.len() as u64;
    let mut f = Vec::new();
    f.extend(b"TETR");
    f.extend(1u32.to_le_bytes());
    f.extend((ds.len() as u32).to_le_bytes());
    f.extend(flags.to_le_bytes());
    f.extend(index_off.to_le_bytes());
    f.extend(index_len.to_le_bytes());
    f.extend((blob.len() as u64).to_le_bytes());
    f.extend(&blob);
    f.resize(index_off as usize, 0);
    f.extend(b"TIDX");
    f.extend(1u32.to_le_bytes());
    f.extend((rows.len() as u64).to_le_bytes());
    f.extend([0u8; 16]);
    let mut off = index_off + index_len;
    for r in rows {
        f.extend(r.ds.to_le_bytes());
        for k in 0..8 {
            f.extend(r.coords.get(k).copied().unwrap_or(0).to_le_bytes());
        }
        f.extend(off.to_le_bytes());
        f.extend(r.raw_len.to_le_bytes());
        f.extend((r.payload.len() as u64).to_le_bytes());
        f.extend(r.codec.to_le_bytes());
        f.extend(0u32.to_le_bytes());
        off += r.payload.len() as u64;
    }
    for r in rows {
        f.extend(&r.payload);
    }
    if let Some(j) = footer {
        f.extend(j.as_bytes());
        f.extend((j.len() as u64).to_le_bytes());
        f.extend(1u32.to_le_bytes());
        f.extend(b"THST");
    }
    f
}

fn f32b(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The sample: f32 [2,3] chunks [2,2], values 1..6.
fn sample_ds() -> Vec<Ds> {
    vec![Ds {
        name: "temperature",
        dtype: 1,
        shape: vec![2, 3],
        chunk: vec![2, 2],
    }]
}

fn good_rows() -> Vec<Row> {
    vec![
        row(0, &[0, 0], f32b(&[1., 2., 4., 5.])),
        row(0, &[0, 1], f32b(&[3., 6.])),
    ]
}

fn check(bytes: Vec<u8>) -> Report {
    verify_bytes(bytes, Depth::Deep)
}

fn assert_fails(r: &Report, code: &str, needle: &str) {
    assert!(
        r.failures
            .iter()
            .any(|f| f.code == code && f.message.contains(needle)),
        "expected failure [{code}] containing {needle:?}, got {:?}",
        r.failures
    );
}

const FOOTER_OK: &str = r#"{"history":[{"op":"convert","source":"nc","at":"1"}],"metadata":{"file":{"tool":"t"},"datasets":{"temperature":{"dim_names":["a","b"],"attrs":{"units":"K"}}}}}"#;

#[test]
fn the_good_file_passes() {
    let r = check(build(&sample_ds(), &good_rows(), Some(FOOTER_OK), 1));
    assert!(r.ok(), "{:?}", r.failures);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let r = check(build(&sample_ds(), &good_rows(), None, 0));
    assert!(r.ok(), "{:?}", r.failures);
}

#[test]
fn padded_edge_chunk() {
    let mut rows = good_rows();
    rows[1] = row(0, &[0, 1], f32b(&[3., 0., 6., 0.]));
    let r = check(build(&sample_ds(), &rows, None, 0));
    assert_fails(&r, "chunk-raw-len", "dataset `temperature` chunk [0, 1]");
    assert_fails(&r, "chunk-raw-len", "padded edge chunk");
}

#[test]
fn missing_and_duplicate_chunks() {
    let rows = vec![row(0, &[0, 0], f32b(&[1., 2., 4., 5.]))];
    let r = check(build(&sample_ds(), &rows, None, 0));
    assert_fails(&r, "chunk-missing", "dataset `temperature`: 1 of 2 chunks");
    assert_fails(&r, "chunk-missing", "first missing [0, 1]");

    let mut rows = good_rows();
    rows.push(row(0, &[0, 1], f32b(&[3., 6.])));
    let r = check(build(&sample_ds(), &rows, None, 0));
    assert_fails(&r, "chunk-duplicate", "dataset `temperature` chunk [0, 1]");

    let mut rows = good_rows();
    rows[1].coords = vec![0, 2];
    let r = check(build(&sample_ds(), &rows, None, 0));
    assert_fails(&r, "chunk-coords", "chunk [0, 2]: outside the chunk grid");
}

#[test]
fn payloads_outside_their_region() {
    // Past the end of the file.
    let mut bytes = build(&sample_ds(), &good_rows(), None, 0);
    let len = bytes.len();
    bytes.truncate(len - 4);
    let r = check(bytes);
    assert_fails(
        &r,
        "chunk-payload-bounds",
        "dataset `temperature` chunk [0, 1]",
    );

    // Pointing into the chunk index.
    let mut bytes = build(&sample_ds(), &good_rows(), None, 0);
    let row1 = 104 + 32 + 104; // index at 104, second row
    bytes[row1 + 72..row1 + 80].copy_from_slice(&(120u64).to_le_bytes());
    let r = check(bytes);
    assert_fails(
        &r,
        "chunk-payload-region",
        "dataset `temperature` chunk [0, 1]",
    );

    // Overlapping the footer.
    let mut bytes = build(&sample_ds(), &good_rows(), Some(FOOTER_OK), 1);
    let fpos = bytes.len() - 16 - FOOTER_OK.len();
    bytes[row1 + 72..row1 + 80].copy_from_slice(&(fpos as u64 - 4).to_le_bytes());
    let r = check(bytes);
    assert_fails(&r, "chunk-payload-region", "chunk [0, 1]");
}

#[test]
fn zstd_size_mismatch_and_garbage() {
    let mut rows = good_rows();
    let raw = f32b(&[3., 6.]);
    rows[1] = Row {
        ds: 0,
        coords: vec![0, 1],
        payload: zstd::bulk::compress(&f32b(&[3., 6., 7.]), 3).unwrap(),
        raw_len: raw.len() as u64,
        codec: 1,
    };
    let r = check(build(&sample_ds(), &rows, None, 0));
    assert_fails(&r, "chunk-zstd", "dataset `temperature` chunk [0, 1]");

    // A frame without a content size that decodes to the wrong length.
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_contentsize(false).unwrap();
    std::io::Write::write_all(&mut enc, &f32b(&[3.])).unwrap();
    rows[1].payload = enc.finish().unwrap();
    let r = check(build(&sample_ds(), &rows, None, 0));
    assert_fails(&r, "chunk-zstd", "decodes to 4 bytes, raw_byte_len is 8");

    rows[1].payload = vec![1, 2, 3, 4, 5, 6, 7, 8];
    let r = check(build(&sample_ds(), &rows, None, 0));
    assert_fails(&r, "chunk-zstd", "chunk [0, 1]");

    // The right frame verifies.
    rows[1].payload = zstd::bulk::compress(&raw, 3).unwrap();
    let r = check(build(&sample_ds(), &rows, None, 0));
    assert!(r.ok(), "{:?}", r.failures);
    assert_eq!(r.decoded, 1);
}

#[test]
fn unknown_dtype_codec_flags() {
    let mut ds = sample_ds();
    ds[0].dtype = 11;
    let r = check(build(&ds, &good_rows(), None, 0));
    assert_fails(
        &r,
        "structure",
        "dataset `temperature`: unknown dtype tag 11",
    );

    let mut rows = good_rows();
    rows[0].codec = 7;
    let r = check(build(&sample_ds(), &rows, None, 0));
    assert_fails(
        &r,
        "chunk-codec",
        "dataset `temperature` chunk [0, 0]: unknown codec 7",
    );

    let r = check(build(&sample_ds(), &good_rows(), None, 4));
    assert_fails(&r, "flags-unknown", "0x4");

    // A 0 in chunk_shape is refused, not divided by.
    let mut ds = sample_ds();
    ds[0].chunk = vec![2, 0];
    let r = check(build(&ds, &good_rows(), None, 0));
    assert_fails(&r, "structure", "chunk_shape[1] is 0");
}

fn with_footer(json: &str) -> Report {
    check(build(&sample_ds(), &good_rows(), Some(json), 1))
}

#[test]
fn footer_limit_violations() {
    let attrs: Vec<String> = (0..65).map(|i| format!("\"a{i}\":\"v\"")).collect();
    let j = format!(
        r#"{{"history":[],"metadata":{{"datasets":{{"temperature":{{"attrs":{{{}}}}}}}}}}}"#,
        attrs.join(",")
    );
    assert_fails(&with_footer(&j), "footer-limit", "65 attrs");

    let j = r#"{"history":[],"metadata":{"datasets":{"temperature":{"attrs":{"units":""}}}}}"#;
    assert_fails(&with_footer(j), "footer-limit", "attr `units`");

    let j = r#"{"history":[],"metadata":{"datasets":{"temperature":{"attrs":{"n":3}}}}}"#;
    let r = with_footer(j);
    assert!(!r.ok());

    let labels: Vec<String> = (0..65).map(|i| format!("\"{i}\"")).collect();
    let j = format!(
        r#"{{"history":[],"metadata":{{"datasets":{{"temperature":{{"dim_names":["a","b"],"coords":{{"b":{{"labels":[{}]}}}}}}}}}}}}"#,
        labels.join(",")
    );
    assert_fails(&with_footer(&j), "footer-limit", "65 labels");

    let j = r#"{"history":[],"metadata":{"datasets":{"temperature":{"dim_names":["a","b"],"coords":{"b":{"labels":["x","y"]}}}}}}"#;
    assert_fails(&with_footer(j), "footer-schema", "2 labels for 3 positions");

    let j = r#"{"history":[{"op":"convert","source":"nc","at":"1","who":"me"}]}"#;
    assert_fails(&with_footer(j), "footer-schema", "unknown key `who`");

    let parents: Vec<String> = (0..17).map(|i| format!("\"p{i}\"")).collect();
    let j = format!(
        r#"{{"history":[{{"op":"convert","source":"nc","at":"1","parents":[{}]}}]}}"#,
        parents.join(",")
    );
    assert_fails(&with_footer(&j), "footer-limit", "17 parents");

    let params: Vec<String> = (0..33).map(|i| format!("\"k{i}\":\"v\"")).collect();
    let j = format!(
        r#"{{"history":[{{"op":"convert","source":"nc","at":"1","params":{{{}}}}}]}}"#,
        params.join(",")
    );
    assert_fails(&with_footer(&j), "footer-limit", "33 params");

    let entries: Vec<String> = (0..257).map(|i| format!("\"d{i}\":{{}}")).collect();
    let j = format!(
        r#"{{"history":[],"metadata":{{"datasets":{{{}}}}}}}"#,
        entries.join(",")
    );
    assert_fails(&with_footer(&j), "footer-limit", "257 entries");

    let j = r#"{"history":[],"metadata":{"datasets":{"temperature":{"dim_names":["a"]}}}}"#;
    assert_fails(&with_footer(j), "footer-schema", "1 dim_names for rank 2");

    assert_fails(&with_footer("XXXX"), "footer", "not valid JSON");
}

/// The byte shuffle, written out here (byte `k` of every element, for each `k`).
fn shuffled(elem: usize, b: &[u8]) -> Vec<u8> {
    let n = b.len() / elem;
    (0..elem)
        .flat_map(|k| (0..n).map(move |i| b[i * elem + k]))
        .collect()
}

/// An extension codec (128, zstd over byte-shuffled elements) is read and checked like zstd, with
/// a warning that readers of v1 refuse it; a codec id a reader does not know — what ids 128–131
/// are to a v1 reader such as the reference's — fails that chunk's `chunk-codec` check and
/// nothing else, and the other chunks still read.
#[test]
fn extension_codecs_pass_with_a_warning_and_unknown_ids_fail_only_their_chunk() {
    let mut rows = good_rows();
    // The last row: a raw payload after a frame would be unaligned (a warning of its own).
    let raw = rows[1].payload.clone();
    rows[1].payload = zstd::bulk::compress(&shuffled(4, &raw), 3).unwrap();
    rows[1].raw_len = raw.len() as u64;
    rows[1].codec = 128;
    let bytes = build(&sample_ds(), &rows, Some(FOOTER_OK), 1);
    let r = check(bytes.clone());
    assert!(r.ok(), "{:?}", r.failures);
    assert_eq!(r.decoded, 1);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert_eq!(r.warnings[0].code, "chunk-codec-extension");
    assert!(
        r.warnings[0]
            .message
            .contains("1 chunks use codec 128 (zstd-shuffle)"),
        "{}",
        r.warnings[0].message
    );
    let f = tet::format::TetFile::from_bytes(bytes).unwrap();
    assert_eq!(f.read_dataset(0).unwrap(), f32b(&[1., 2., 3., 4., 5., 6.]));

    for id in [132u32, 255, 0x8000_0000] {
        let mut rows2 = good_rows();
        rows2[1].payload = rows[1].payload.clone();
        rows2[1].raw_len = rows[1].raw_len;
        rows2[1].codec = id;
        let bytes = build(&sample_ds(), &rows2, Some(FOOTER_OK), 1);
        let r = check(bytes.clone());
        let codes: Vec<&str> = r.failures.iter().map(|f| f.code).collect();
        assert_eq!(codes, ["chunk-codec"], "{:?}", r.failures);
        assert_fails(
            &r,
            "chunk-codec",
            &format!("dataset `temperature` chunk [0, 1]: unknown codec {id}"),
        );
        let f = tet::format::TetFile::from_bytes(bytes).unwrap();
        let e = f.read_dataset(0).unwrap_err().to_string();
        assert!(e.contains(&format!("unknown codec {id}")), "{e}");
        // The chunk with a v1 codec reads.
        let other = f.find_chunk(0, &[0, 0]).unwrap();
        let mut out = vec![0u8; 16];
        f.read_chunk_into(other, &mut out).unwrap();
        assert_eq!(out, f32b(&[1., 2., 4., 5.]));
    }
}
