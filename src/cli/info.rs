//! `tet info FILE`: datasets, metadata and history, as a table or as JSON (`tet-info/1`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::{json, Map, Value};

use super::{fail, human_bytes, out, outln, EXIT_OK};
use tet::format::footer::{attr_to_json, attr_to_text, Footer};
use tet::format::integrity::{ChunkCheck, FooterDigest};
use tet::format::{Codec, TetFile};

/// The end of `tet info --help`.
const EXAMPLES: &str = "\
Examples:
  tet info out.tet                    datasets, checksums, the first attributes, history
  tet info out.tet --metadata         every attribute and coordinate label
  tet info out.tet --chunks -n 0      every row of the chunk index
  tet info out.tet --json | jq .datasets[].name

Exit status: 0 shown, 1 the file cannot be read or is damaged (the reason on stderr).";

#[derive(Args, Debug)]
#[command(after_long_help = EXAMPLES)]
pub struct InfoArgs {
    /// The .tet file.
    file: PathBuf,
    /// Print one JSON object (schema `tet-info/1`, see docs/FORMAT.md).
    #[arg(long)]
    json: bool,
    /// List the chunk index rows.
    #[arg(long)]
    chunks: bool,
    /// With --chunks: how many rows (0 = all).
    #[arg(short = 'n', default_value_t = 32)]
    n: usize,
    /// Show every history row with its parents and params.
    #[arg(long)]
    history: bool,
    /// Show all metadata: every attribute, every coordinate label, extension facts.
    #[arg(long)]
    metadata: bool,
    #[command(flatten)]
    storage: super::StorageArgs,
}

/// Per-dataset chunk statistics.
#[derive(Default)]
struct Stats {
    chunks: u64,
    raw: u64,
    stored: u64,
    codecs: BTreeMap<String, u64>,
}

fn stats(f: &TetFile) -> Vec<Stats> {
    let mut out: Vec<Stats> = (0..f.datasets.len()).map(|_| Stats::default()).collect();
    for e in &f.entries {
        if let Some(s) = usize::try_from(e.dataset_id)
            .ok()
            .and_then(|d| out.get_mut(d))
        {
            s.chunks += 1;
            s.raw = s.raw.saturating_add(e.raw_byte_len);
            s.stored = s.stored.saturating_add(e.stored_byte_len);
            let name = e
                .codec()
                .map(|c| c.name().to_string())
                .unwrap_or_else(|| format!("codec{}", e.codec_id));
            *s.codecs.entry(name).or_default() += 1;
        }
    }
    out
}

/// What the file's checksums cover (nothing is hashed but the footer digest's bytes).
struct Checksums {
    footer: &'static str,
    digests: u64,
    zstd: u64,
    none: u64,
}

fn checksums(f: &TetFile) -> Checksums {
    let mut c = Checksums {
        footer: match f.footer_digest() {
            FooterDigest::Absent => "absent",
            FooterDigest::Ok(_) => "ok",
            FooterDigest::Mismatch { .. } => "mismatch",
            FooterDigest::Malformed(_) => "malformed",
        },
        digests: 0,
        zstd: 0,
        none: 0,
    };
    for i in 0..f.entries.len() {
        match f.chunk_check(i) {
            ChunkCheck::Digest(_) => c.digests += 1,
            ChunkCheck::ZstdChecksum => c.zstd += 1,
            ChunkCheck::None => c.none += 1,
        }
    }
    c
}

/// The stable JSON view.
fn to_json(f: &TetFile, a: &InfoArgs) -> Value {
    let st = stats(f);
    let footer = f.footer();
    let empty = Footer::default();
    let meta: &Footer = match &footer {
        Ok(Some(m)) => m,
        _ => &empty,
    };
    let datasets: Vec<Value> = f
        .datasets
        .iter()
        .zip(&st)
        .map(|(d, s)| {
            let m = meta.datasets.get(&d.name);
            let attrs: Map<String, Value> = m
                .map(|m| {
                    m.attrs
                        .iter()
                        .map(|(k, v)| (k.clone(), attr_to_json(v)))
                        .collect()
                })
                .unwrap_or_default();
            json!({
                "name": d.name,
                "dtype": d.dtype.name(),
                "shape": d.shape,
                "chunk_shape": d.chunk_shape,
                "chunk_grid": d.grid.counts,
                "chunks": s.chunks,
                "raw_bytes": s.raw,
                "stored_bytes": s.stored,
                "codecs": s.codecs,
                "dim_names": m.and_then(|m| m.dim_names.clone()),
                "coords": m.map(|m| json!(m.coords)).unwrap_or(json!({})),
                "attrs": attrs,
                "extra": m.map(|m| Value::Object(m.ext.to_json_map())).unwrap_or(json!({})),
            })
        })
        .collect();
    let history: Vec<Value> = meta
        .history
        .iter()
        .map(|h| json!({"op": h.op, "source": h.source, "at": h.at, "parents": h.parents, "params": h.params}))
        .collect();
    let sums = checksums(f);
    let mut v = json!({
        "schema": "tet-info/1",
        "file": f_display(a),
        "file_bytes": f.file_len(),
        "layout_version": 1,
        "flags": f.flags,
        "datasets": datasets,
        "file_metadata": meta.file,
        "global_attrs": meta.global_attrs.iter().map(|(k, v)| json!([k, attr_to_json(v)])).collect::<Vec<_>>(),
        "skipped": meta.skipped.iter().map(|s| json!({"name": s.name, "reason": s.reason})).collect::<Vec<_>>(),
        "extra": Value::Object(meta.ext.to_json_map()),
        "history": history,
        "footer_error": footer.as_ref().err().map(|e| e.to_string()),
        "checksums": {
            "footer_digest": sums.footer,
            "chunk_digests": sums.digests,
            "zstd_checksums": sums.zstd,
            "without_checksum": sums.none,
        },
    });
    if a.chunks {
        let rows: Vec<Value> = f
            .entries
            .iter()
            .take(if a.n == 0 { usize::MAX } else { a.n })
            .map(|e| {
                let rank = usize::try_from(e.dataset_id)
                    .ok()
                    .and_then(|d| f.datasets.get(d))
                    .map(|d| d.shape.len())
                    .unwrap_or(8);
                json!({
                    "dataset_id": e.dataset_id,
                    "coords": &e.coords[..rank],
                    "offset": e.payload_offset,
                    "raw_bytes": e.raw_byte_len,
                    "stored_bytes": e.stored_byte_len,
                    "codec": e.codec().map(|c| c.name().to_string()).unwrap_or_else(|| e.codec_id.to_string()),
                })
            })
            .collect();
        v["chunks"] = Value::Array(rows);
        v["chunk_count"] = json!(f.entries.len());
    }
    v
}

fn f_display(a: &InfoArgs) -> String {
    a.file.display().to_string()
}

fn dims(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join("×")
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let t: String = s.chars().take(max.saturating_sub(1)).collect();
        format!("{t}…")
    }
}

/// ".tet v1", or, for a file with chunks in extension codecs (docs/FORMAT.md), which of them:
/// the reference reader refuses such a file, so `tet info` must not call it plain v1.
fn format_line(f: &TetFile) -> String {
    let mut ext: Vec<&str> = f
        .entries
        .iter()
        .filter_map(|e| e.codec())
        .filter(|c| !c.is_v1())
        .map(|c| c.name())
        .collect();
    ext.sort_unstable();
    ext.dedup();
    if ext.is_empty() {
        ".tet v1".to_string()
    } else {
        format!(
            ".tet v1 with extension codecs ({}; the reference reader refuses them, \
             `tet-convert --codec zstd` rewrites it as plain v1)",
            ext.join(", ")
        )
    }
}

/// The text form of `tet info`: summary, checksums, dataset table, metadata and history, and
/// with --chunks the chunk index.
fn render(f: &TetFile, a: &InfoArgs) -> String {
    let st = stats(f);
    let mut o = String::new();
    let raw_total: u64 = st.iter().map(|s| s.raw).sum();
    let stored_total: u64 = st.iter().map(|s| s.stored).sum();
    let _ = writeln!(
        o,
        "{}: {}, {} ({} datasets, {} chunks, data {} stored / {} raw)",
        a.file.display(),
        format_line(f),
        human_bytes(f.file_len()),
        f.datasets.len(),
        f.entries.len(),
        human_bytes(stored_total),
        human_bytes(raw_total)
    );
    let c = checksums(f);
    let _ = if c.footer == "absent" && c.digests == 0 && c.zstd == 0 {
        writeln!(
            o,
            "checksums: none (payloads cannot be checked against digests)"
        )
    } else {
        writeln!(
            o,
            "checksums: footer digest {}, {} chunks with an xxh3-64 digest, {} with a zstd \
             checksum, {} without (tet verify --deep checks them)",
            c.footer, c.digests, c.zstd, c.none
        )
    };
    render_dataset_table(&mut o, f, &st);

    match f.footer() {
        Err(e) => {
            let _ = writeln!(
                o,
                "\nfooter: UNREADABLE ({e}); the datasets above are still readable"
            );
        }
        Ok(None) => {
            let _ = writeln!(o, "\nno footer (no metadata, no history)");
        }
        Ok(Some(m)) => render_meta(&mut o, f, m, a),
    }

    if a.chunks {
        render_chunk_index(&mut o, f, a.n);
    }
    o
}

/// The dataset table: one row per dataset with its chunk statistics `st`, columns aligned.
fn render_dataset_table(o: &mut String, f: &TetFile, st: &[Stats]) {
    let header = [
        "name", "dtype", "shape", "chunk", "chunks", "stored", "raw", "codecs",
    ];
    let rows: Vec<[String; 8]> = f
        .datasets
        .iter()
        .zip(st)
        .map(|(d, s)| {
            [
                d.name.clone(),
                d.dtype.name().to_string(),
                dims(&d.shape),
                dims(&d.chunk_shape),
                s.chunks.to_string(),
                human_bytes(s.stored),
                human_bytes(s.raw),
                s.codecs
                    .iter()
                    .map(|(k, n)| format!("{n} {k}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::from("  ");
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            let pad = w - c.chars().count();
            if (4..7).contains(&i) {
                s += &" ".repeat(pad);
                s += c;
            } else {
                s += c;
                s += &" ".repeat(pad);
            }
            s += "  ";
        }
        s.trim_end().to_string()
    };
    let _ = writeln!(o, "{}", line(&header.map(String::from)));
    for r in &rows {
        let _ = writeln!(o, "{}", line(r));
    }
}

/// The first `n` chunk index rows (all of them when `n` is 0).
fn render_chunk_index(o: &mut String, f: &TetFile, n: usize) {
    let n = if n == 0 {
        f.entries.len()
    } else {
        n.min(f.entries.len())
    };
    let _ = writeln!(o, "\nchunk index ({} of {} rows):", n, f.entries.len());
    let _ = writeln!(
        o,
        "  {:>6}  {:<20}  {:>12}  {:>12}  {:>12}  codec",
        "ds", "coords", "offset", "raw", "stored"
    );
    for e in f.entries.iter().take(n) {
        let rank = usize::try_from(e.dataset_id)
            .ok()
            .and_then(|d| f.datasets.get(d))
            .map(|d| d.shape.len())
            .unwrap_or(8);
        let codec = e
            .codec()
            .map(Codec::name)
            .map(String::from)
            .unwrap_or_else(|| e.codec_id.to_string());
        let _ = writeln!(
            o,
            "  {:>6}  {:<20}  {:>12}  {:>12}  {:>12}  {codec}",
            e.dataset_id,
            format!("{:?}", &e.coords[..rank]),
            e.payload_offset,
            e.raw_byte_len,
            e.stored_byte_len
        );
    }
}

fn render_meta(o: &mut String, f: &TetFile, m: &Footer, a: &InfoArgs) {
    let full = a.metadata;
    let max_attrs = if full { usize::MAX } else { 8 };
    for d in &f.datasets {
        let Some(dm) = m.datasets.get(&d.name) else {
            continue;
        };
        let _ = writeln!(o, "\n{}:", d.name);
        if let Some(dn) = &dm.dim_names {
            let _ = writeln!(o, "  dims: ({})", dn.join(", "));
        }
        for (axis, labels) in &dm.coords {
            let shown: Vec<&str> = labels
                .iter()
                .take(if full { usize::MAX } else { 4 })
                .map(String::as_str)
                .collect();
            let more = if shown.len() < labels.len() {
                ", …"
            } else {
                ""
            };
            let _ = writeln!(
                o,
                "  coords {axis} [{}]: {}{more}",
                labels.len(),
                shown.join(", ")
            );
        }
        for (k, v) in dm.attrs.iter().take(max_attrs) {
            let text = attr_to_text(v);
            let text = if full { text } else { shorten(&text, 70) };
            let _ = writeln!(o, "  {k} = {text}");
        }
        if dm.attrs.len() > max_attrs {
            let _ = writeln!(
                o,
                "  … {} more attributes (--metadata)",
                dm.attrs.len() - max_attrs
            );
        }
        if full {
            for (k, v) in &dm.ext.to_json_map() {
                for line in super::facts_text::describe(k, v) {
                    let _ = writeln!(o, "  {line}");
                }
            }
        }
    }
    if !m.file.is_empty() || !m.global_attrs.is_empty() {
        let _ = writeln!(o, "\nfile:");
        for (k, v) in &m.file {
            let _ = writeln!(o, "  {k}: {v}");
        }
        for (k, v) in m
            .global_attrs
            .iter()
            .take(if full { usize::MAX } else { 12 })
        {
            let text = attr_to_text(v);
            let text = if full { text } else { shorten(&text, 70) };
            let _ = writeln!(o, "  {k} = {text}");
        }
        if !full && m.global_attrs.len() > 12 {
            let _ = writeln!(o, "  … {} more (--metadata)", m.global_attrs.len() - 12);
        }
    }
    if !m.skipped.is_empty() {
        let _ = writeln!(o, "\nskipped from the source:");
        for s in &m.skipped {
            let _ = writeln!(o, "  {}: {}", s.name, s.reason);
        }
    }
    if full && !m.ext.is_empty() {
        let _ = writeln!(o, "\nextension facts:");
        for (k, v) in &m.ext.to_json_map() {
            for line in super::facts_text::describe(k, v) {
                let _ = writeln!(o, "  {line}");
            }
        }
    }
    let _ = writeln!(o, "\nhistory ({} rows):", m.history.len());
    for (i, h) in m.history.iter().enumerate() {
        let _ = writeln!(o, "  {i}: {} from {} at {}", h.op, h.source, h.at);
        if a.history {
            for p in &h.parents {
                let _ = writeln!(o, "       parent {p}");
            }
            for (k, v) in &h.params {
                let _ = writeln!(o, "       {k} = {v}");
            }
        }
    }
}

pub fn run(a: &InfoArgs) -> ExitCode {
    // An object is read by ranges: the head, the chunk index and the footer.
    let f = match super::OpenedTet::open(&a.file, &a.storage.storage_option) {
        Ok(f) => f,
        Err(e) => return fail(&a.file, e),
    };
    if a.json {
        outln!("{}", to_json(&f, a));
    } else {
        out!("{}", render(&f, a));
    }
    // What could be read is shown; a damaged file is still a failure, said in one line.
    match super::damage::describe(&f) {
        Some(d) => fail(&a.file, d),
        None => ExitCode::from(EXIT_OK),
    }
}
