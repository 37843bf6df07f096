//! Metadata and provenance mapping shared by every importer: element types that `.tet` has no
//! tag for (widened and recorded), dimension names, coordinate labels (numbers, CF time →
//! ISO 8601, importer-supplied labels), attributes, and the history row with the input digest.

pub mod cftime;
pub mod inputs;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};
use tet_source::{AttrValue, ElementType, Role, TextVariable, Variable};

use crate::format::footer::{DatasetMeta, HistoryRow, RecordedRole, TextVariableRecord};
use crate::format::schema::{Facts, Lenient};

pub use crate::lower::{storage_type, Widen};

fn text_attr<'a>(attrs: &'a [(String, AttrValue)], key: &str) -> Option<&'a str> {
    attrs.iter().find_map(|(k, v)| match v {
        AttrValue::Text(s) if k == key => Some(s.as_str()),
        _ => None,
    })
}

/// Formats the values of a 1-D coordinate (source element bytes) as labels: ISO 8601 for CF
/// time (`units` "… since …" with a known `calendar`), else the shortest exact decimal form.
pub fn coordinate_labels(
    bytes: &[u8],
    dtype: ElementType,
    attrs: &[(String, AttrValue)],
) -> Vec<String> {
    let values: Vec<f64> = element_values(bytes, dtype);
    let time = text_attr(attrs, "units").and_then(cftime::parse_units);
    let cal = cftime::Calendar::parse(text_attr(attrs, "calendar").unwrap_or("standard"));
    if let (Some(units), Some(cal)) = (time, cal) {
        let labels: Option<Vec<String>> = values
            .iter()
            .map(|&v| cftime::label(v, &units, cal))
            .collect();
        if let Some(l) = labels {
            return l;
        }
    }
    number_labels(bytes, dtype)
}

/// Element values as f64 (for time arithmetic; integers beyond 2^53 lose precision there only).
pub(crate) fn element_values(b: &[u8], t: ElementType) -> Vec<f64> {
    macro_rules! conv {
        ($ty:ty, $n:expr) => {
            b.chunks_exact($n)
                .map(|c| <$ty>::from_le_bytes(c.try_into().unwrap_or([0; $n])) as f64)
                .collect()
        };
    }
    match t {
        ElementType::Bool | ElementType::U8 => b.iter().map(|&v| v as f64).collect(),
        ElementType::I8 => b.iter().map(|&v| v as i8 as f64).collect(),
        ElementType::I16 => conv!(i16, 2),
        ElementType::U16 => conv!(u16, 2),
        ElementType::I32 => conv!(i32, 4),
        ElementType::U32 => conv!(u32, 4),
        ElementType::I64 => conv!(i64, 8),
        ElementType::U64 => conv!(u64, 8),
        // Complex variables reach the engine's metadata as their parts only (see `lower`).
        ElementType::F32 | ElementType::C64 => conv!(f32, 4),
        ElementType::F64 | ElementType::C128 => conv!(f64, 8),
        ElementType::F16 => b
            .chunks_exact(2)
            .map(|c| f16_to_f64(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
        ElementType::BF16 => b
            .chunks_exact(2)
            .map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16) as f64)
            .collect(),
    }
}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let man = (h & 0x3ff) as f64;
    sign * match exp {
        0 => man * 2f64.powi(-24),
        31 if man == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
    }
}

fn float_label(v: f64) -> String {
    tet_source::json_text::float_label(v)
}

/// Shortest exact decimal labels of the values.
pub fn number_labels(b: &[u8], t: ElementType) -> Vec<String> {
    macro_rules! ints {
        ($ty:ty, $n:expr) => {
            b.chunks_exact($n)
                .map(|c| <$ty>::from_le_bytes(c.try_into().unwrap_or([0; $n])).to_string())
                .collect()
        };
    }
    match t {
        ElementType::Bool | ElementType::U8 => b.iter().map(u8::to_string).collect(),
        ElementType::I8 => b.iter().map(|&v| (v as i8).to_string()).collect(),
        ElementType::I16 => ints!(i16, 2),
        ElementType::U16 => ints!(u16, 2),
        ElementType::I32 => ints!(i32, 4),
        ElementType::U32 => ints!(u32, 4),
        ElementType::I64 => ints!(i64, 8),
        ElementType::U64 => ints!(u64, 8),
        ElementType::F32 => b
            .chunks_exact(4)
            .map(|c| {
                let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                if v.is_finite() {
                    v.to_string()
                } else {
                    float_label(v as f64)
                }
            })
            .collect(),
        ElementType::F64
        | ElementType::F16
        | ElementType::BF16
        | ElementType::C64
        | ElementType::C128 => element_values(b, t).into_iter().map(float_label).collect(),
    }
}

/// The footer metadata of one dataset made from a (lowered) source variable; `source_shape` is
/// the shape the importer gave when lowering changed it (see [`crate::lower`]).
pub fn dataset_meta(
    var: &Variable,
    widen: Widen,
    source_shape: Option<&[u64]>,
    labels: &BTreeMap<String, Vec<String>>,
) -> DatasetMeta {
    let mut m = DatasetMeta {
        attrs: var.attrs.clone(),
        ..DatasetMeta::default()
    };
    if let Some(dims) = var.dims.as_ref().filter(|d| d.len() == var.shape.len()) {
        m.dim_names = Some(dims.clone());
        for (axis, d) in dims.iter().enumerate() {
            if let Some(l) = labels.get(d) {
                if l.len() as u64 == var.shape[axis] {
                    m.coords.insert(d.clone(), l.clone());
                }
            }
        }
    }
    let r = &mut m.ext;
    r.source_shape = source_shape.map(<[u64]>::to_vec);
    if let Some(w) = widen.describe() {
        r.source_dtype = Some(var.dtype.name().to_string());
        r.widened = Some(w.to_string());
    }
    if var.role == Role::Coordinate {
        r.role = Some(RecordedRole::Coordinate);
    }
    r.source_chunks = var.layout.chunk_shape.clone();
    r.source_filters = (!var.layout.filters.is_empty()).then(|| var.layout.filters.clone());
    r.notes = (!var.notes.is_empty()).then(|| var.notes.clone());
    r.source_facts = (!var.facts.is_empty()).then(|| Facts(var.facts.clone()));
    m
}

/// The footer's record of string variables (`tet_ext.text_variables`).
pub fn text_variable_records(vars: &[TextVariable]) -> Vec<Lenient<TextVariableRecord>> {
    vars.iter()
        .map(|t| Lenient::Typed(TextVariableRecord::new(t)))
        .collect()
}

/// A history row's `at` (decimal Unix seconds) as ISO 8601 UTC (`2026-11-22T18:00:00Z`), when
/// it parses.
pub fn unix_iso(at: &str) -> Option<String> {
    let secs: i64 = at.trim().parse().ok()?;
    let units = cftime::parse_units("seconds since 1970-01-01 00:00:00")?;
    cftime::label(secs as f64, &units, cftime::Calendar::Standard).map(|s| format!("{s}Z"))
}

/// `SOURCE_DATE_EPOCH` when set (and a valid integer), else the current Unix time.
pub fn timestamp() -> String {
    if let Ok(s) = std::env::var("SOURCE_DATE_EPOCH") {
        if let Ok(v) = s.trim().parse::<u64>() {
            return v.to_string();
        }
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        .to_string()
}

/// SHA-256 of the input: the file's bytes, or for a directory store every regular file below
/// it in sorted path order, each as `path NUL length NUL bytes`. Returns (`sha256:<hex>`, bytes).
pub fn digest_input(path: &Path) -> std::io::Result<(String, u64)> {
    digest_input_and_ranges(path, &[]).map(|(d, n, _)| (d, n))
}

/// [`digest_input`] of a file input, and in the same pass over its bytes the xxh3-64 digest
/// ([`crate::format::integrity::digest`]) of each byte range `(offset, len)` of `ranges`, which
/// must be sorted by offset and must not overlap. The raw chunks copied file to file get their
/// digests here: their bytes are read once, for both digests, while they are in the CPU cache.
/// Fails when a range lies beyond the end of the file (or `ranges` is given for a directory).
pub fn digest_input_and_ranges(
    path: &Path,
    ranges: &[(u64, u64)],
) -> std::io::Result<(String, u64, Vec<u64>)> {
    let mut ranged = RangeHasher::new(ranges)?;
    let mut h = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let mut hash_file = |h: &mut Sha256,
                         p: &Path,
                         total: &mut u64,
                         mut ranged: Option<&mut RangeHasher>|
     -> std::io::Result<()> {
        let mut f = std::fs::File::open(p)?;
        let mut pos = 0u64;
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            h.update(&buf[..n]);
            if let Some(r) = ranged.as_deref_mut() {
                r.feed(pos, &buf[..n]);
            }
            pos += n as u64;
            *total += n as u64;
        }
    };
    if path.is_dir() {
        let mut files = Vec::new();
        let mut stack = vec![path.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d)? {
                let e = e?;
                let ft = e.file_type()?;
                if ft.is_dir() {
                    stack.push(e.path());
                } else if ft.is_file() {
                    files.push(e.path());
                }
            }
        }
        files.sort();
        for f in files {
            let rel = f
                .strip_prefix(path)
                .unwrap_or(&f)
                .to_string_lossy()
                .into_owned();
            let len = std::fs::metadata(&f)?.len();
            h.update(rel.as_bytes());
            h.update([0]);
            h.update(len.to_string().as_bytes());
            h.update([0]);
            hash_file(&mut h, &f, &mut total, None)?;
        }
        if !ranges.is_empty() {
            return Err(std::io::Error::other("byte ranges of a directory input"));
        }
    } else if !hash_mapped(&mut h, path, &mut total, &mut ranged)? {
        hash_file(&mut h, path, &mut total, Some(&mut ranged))?;
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((format!("sha256:{hex}"), total, ranged.finish()?))
}

/// The xxh3 digests of sorted, disjoint byte ranges of one file, fed its bytes in order.
struct RangeHasher<'r> {
    ranges: &'r [(u64, u64)],
    /// The range being hashed (all before it are done).
    at: usize,
    current: crate::format::integrity::Hasher,
    done: Vec<u64>,
}

impl<'r> RangeHasher<'r> {
    fn new(ranges: &'r [(u64, u64)]) -> std::io::Result<Self> {
        let ends = ranges.iter().map(|&(o, l)| o.checked_add(l));
        if ends.clone().any(|e| e.is_none())
            || ranges
                .windows(2)
                .any(|w| w[0].0 + w[0].1 > w[1].0 || w[0].0 > w[1].0)
        {
            return Err(std::io::Error::other(
                "byte ranges overlap or are not sorted",
            ));
        }
        Ok(RangeHasher {
            ranges,
            at: 0,
            current: Default::default(),
            done: Vec::with_capacity(ranges.len()),
        })
    }

    /// The file's bytes `bytes`, starting at file offset `pos`, in order.
    fn feed(&mut self, pos: u64, bytes: &[u8]) {
        let end = pos + bytes.len() as u64;
        while let Some(&(off, len)) = self.ranges.get(self.at) {
            let stop = off + len;
            let (a, b) = (off.max(pos), stop.min(end));
            if a < b {
                self.current
                    .update(&bytes[(a - pos) as usize..(b - pos) as usize]);
            }
            if stop > end {
                return; // continues in the next bytes
            }
            self.done.push(self.current.finish());
            self.current = Default::default();
            self.at += 1;
        }
    }

    fn finish(self) -> std::io::Result<Vec<u64>> {
        if self.at < self.ranges.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "a chunk's byte range lies beyond the end of the input",
            ));
        }
        Ok(self.done)
    }
}

/// Hashes a regular file through a memory map, dropping each block's pages once hashed: no
/// copy into a buffer, and resident memory stays at one block. Returns false (hashing nothing)
/// when the file cannot be mapped.
fn hash_mapped(
    h: &mut Sha256,
    path: &Path,
    total: &mut u64,
    ranged: &mut RangeHasher,
) -> std::io::Result<bool> {
    const BLOCK: usize = 8 << 20;
    // Both digests of a piece while it is in the CPU cache.
    const PIECE: usize = 256 << 10;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok(false);
    }
    // SAFETY: read-only map; like every mmap reader we rely on the input not being truncated
    // while it is converted.
    let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
        return Ok(false);
    };
    let _ = map.advise(memmap2::Advice::Sequential);
    let mut off = 0usize;
    while off < map.len() {
        let end = (off + BLOCK).min(map.len());
        let mut p = off;
        while p < end {
            let q = (p + PIECE).min(end);
            h.update(&map[p..q]);
            ranged.feed(p as u64, &map[p..q]);
            p = q;
        }
        // SAFETY: read-only file-backed mapping: dropped pages read back unchanged.
        unsafe {
            let _ = map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, off, end - off);
        }
        off = end;
    }
    *total += map.len() as u64;
    Ok(true)
}

/// Cuts a string to at most 1024 bytes (the reference limit) on a character boundary, marking
/// the cut with `…`.
pub fn fit_1024(s: &str) -> String {
    if s.len() <= 1024 {
        return if s.is_empty() {
            "-".into()
        } else {
            s.to_string()
        };
    }
    let mut end = 1021;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A `convert` history row.
pub fn convert_row(
    source: &str,
    at: &str,
    digest: &str,
    params: BTreeMap<String, String>,
) -> HistoryRow {
    HistoryRow {
        op: "convert".into(),
        source: source.into(),
        at: at.into(),
        parents: vec![digest.into()],
        params: params.into_iter().map(|(k, v)| (k, fit_1024(&v))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::DType;
    use tet_source::Fact;

    #[test]
    fn text_variables_read_back_as_written() {
        let vars = vec![
            TextVariable {
                name: "g/station_name".into(),
                shape: vec![3],
                dims: Some(vec!["station".into()]),
                values: vec!["ALPHA".into(), "".into(), "ü".into()],
                attrs: vec![("long_name".into(), AttrValue::Text("x".into()))],
                char_axis: Some(tet_source::CharAxis {
                    dim: "name_strlen".into(),
                    len: 8,
                }),
                facts: vec![Fact::UnlimitedDims(vec!["station".into()])],
            },
            TextVariable {
                name: "s".into(),
                shape: vec![2, 0],
                dims: None,
                values: vec![],
                attrs: vec![],
                char_axis: None,
                facts: Vec::new(),
            },
        ];
        let records = text_variable_records(&vars);
        let json = serde_json::to_value(&records).unwrap();
        let read: Vec<Lenient<TextVariableRecord>> = serde_json::from_value(json.clone()).unwrap();
        let back: Vec<TextVariable> = read
            .iter()
            .map(|t| t.typed().unwrap().variable().unwrap())
            .collect();
        assert_eq!(back, vars);
        assert_eq!(
            json[0]["char_dim"],
            serde_json::json!({"name": "name_strlen", "len": 8})
        );
        assert!(json[1]["dims"].is_null() && json[1].get("facts").is_none());
        // Malformed: a value count other than the shape's product, a missing field.
        let mut bad = json[0].clone();
        bad["shape"] = serde_json::json!([4]);
        let r: Lenient<TextVariableRecord> = serde_json::from_value(bad).unwrap();
        assert!(r.typed().unwrap().variable().is_none());
        bad = json[0].clone();
        bad.as_object_mut().unwrap().remove("values");
        let r: Lenient<TextVariableRecord> = serde_json::from_value(bad).unwrap();
        assert!(r.typed().is_none());
        assert_eq!(
            crate::format::schema::text_record_name(&r).as_deref(),
            Some("g/station_name")
        );
    }

    #[test]
    fn widening() {
        let mut out = Vec::new();
        Widen::I8ToI16.apply(&[0xff, 0x7f, 0x80], &mut out);
        assert_eq!(out, [0xff, 0xff, 0x7f, 0x00, 0x80, 0xff]);
        // bf16 1.0 = 0x3f80 → f32 0x3f800000
        Widen::Bf16ToF32.apply(&[0x80, 0x3f], &mut out);
        assert_eq!(f32::from_le_bytes(out[..4].try_into().unwrap()), 1.0);
        assert_eq!(
            storage_type(ElementType::Bool),
            (DType::U8, Widen::BoolToU8)
        );
    }

    #[test]
    fn labels() {
        let b: Vec<u8> = [-90.0f32, -84.19355, 90.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            number_labels(&b, ElementType::F32),
            ["-90", "-84.19355", "90"]
        );
        let t: Vec<u8> = [0i64, 1500].iter().flat_map(|v| v.to_le_bytes()).collect();
        let attrs = vec![(
            "units".to_string(),
            AttrValue::Text("milliseconds since 1970-01-01 00:00:00".into()),
        )];
        assert_eq!(
            coordinate_labels(&t, ElementType::I64, &attrs),
            ["1970-01-01T00:00:00", "1970-01-01T00:00:01.500000"]
        );
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(fit_1024(&"é".repeat(600)).len(), 1020 + 3);
    }
}
