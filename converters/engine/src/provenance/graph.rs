//! The lineage as a Graphviz picture: `tet audit --graph lineage.svg FILE…`.
//!
//! [`dot`] writes the DOT text: left to right, entities as notes (inputs), boxes
//! (intermediate `.tet` files) and 3-D boxes (results), activities as rounded boxes (blue for a
//! combine, green for a selection) labelled with their kind, source format, time, tool and
//! options. A changed input is red and filled, labelled `CHANGED`; a missing one dashed orange,
//! `MISSING`; an unreadable one `UNREADABLE`. Every node carries a `class` (`input`, `changed`,
//! `activity combine`, …), which Graphviz copies into the SVG. [`render`] hands the text to
//! Graphviz's `dot` for `.svg`, `.png`, `.pdf`, or writes it as it is for `.dot`/`.gv` — and
//! beside the asked path, as `.dot`, when `dot` is not installed.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::check::SigStatus;
use super::lineage::{Activity, Entity, EntityKind, Lineage};
use crate::meta::inputs::InputStatus;
use crate::meta::unix_iso;

/// Why a picture could not be written.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Graphviz's dot failed to render {path}: {reason}")]
    Dot { path: PathBuf, reason: String },
}

/// What [`render`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendered {
    /// The picture, by `dot` (or DOT text for `.dot`/`.gv`), at the asked path.
    Written(PathBuf),
    /// `dot` is not installed: the DOT text, at this path.
    DotOnly(PathBuf),
}

/// A DOT string literal.
fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if c.is_control() => {}
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn short(digest: &str) -> String {
    match digest.split_once(':') {
        Some((alg, hex)) if hex.len() > 12 => format!("{alg}:{}…", &hex[..12]),
        _ => digest.to_string(),
    }
}

/// A file name without its directories (the label; the full path is in the tooltip).
fn base(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}

fn entity_node(e: &Entity) -> String {
    let mut label = String::new();
    let mut class = vec![e.kind().name()];
    let mut attrs = match e.kind() {
        EntityKind::Input => vec!["shape=note"],
        EntityKind::Intermediate => vec!["shape=box"],
        EntityKind::Output => vec!["shape=box3d", "penwidth=2"],
    };
    match e.status {
        Some(InputStatus::Changed) => {
            label.push_str("CHANGED ");
            class.push("changed");
            attrs.extend([
                "color=\"#c00000\"",
                "fontcolor=\"#c00000\"",
                "style=filled",
                "fillcolor=\"#ffe0e0\"",
            ]);
        }
        Some(InputStatus::Missing) => {
            label.push_str("MISSING ");
            class.push("missing");
            attrs.extend(["color=\"#d07000\"", "style=dashed"]);
        }
        Some(InputStatus::Unreadable) => {
            label.push_str("UNREADABLE ");
            class.push("unreadable");
            attrs.extend(["color=\"#d07000\"", "style=dashed"]);
        }
        _ => {}
    }
    label.push_str(base(e.name()));
    if let Some(d) = &e.digest {
        let _ = write!(label, "\n{}", short(d));
    }
    if let Some(s) = &e.signatures {
        for c in &s.signatures {
            let _ = match c.status {
                SigStatus::Invalid => write!(label, "\nINVALID SIGNATURE #{}", c.index),
                _ => write!(label, "\nsigned by {}", c.signer()),
            };
        }
    }
    format!(
        "label={}, class={}, tooltip={}, {}",
        quote(&label),
        quote(&class.join(" ")),
        quote(&e.names.join("\n")),
        attrs.join(", ")
    )
}

fn activity_node(a: &Activity) -> String {
    let kind = a.kind();
    let mut label = format!("{kind} ({})", a.row.source);
    if let Some(t) = unix_iso(&a.row.at) {
        let _ = write!(label, "\n{t}");
    }
    if let Some(t) = a.tool() {
        let _ = write!(label, "\n{t}");
    }
    let options: Vec<String> = a.options().map(|(k, v)| format!("{k}={v}")).collect();
    // A handful of options per line, at most three lines.
    for chunk in options.chunks(3).take(3) {
        let _ = write!(label, "\n{}", chunk.join(" "));
    }
    if options.len() > 9 {
        let _ = write!(label, "\n(+{} more)", options.len() - 9);
    }
    let fill = match kind {
        "combine" => "#dde8ff",
        "select" => "#ddf5dd",
        _ => "#eeeeee",
    };
    format!(
        "label={}, class={}, shape=box, style=\"rounded,filled\", fillcolor=\"{fill}\"",
        quote(&label),
        quote(&format!("activity {kind}")),
    )
}

/// The DOT text of a lineage: nodes `e<N>` (entities) and `a<N>` (activities), one per line,
/// then the edges, one per line.
pub fn dot(l: &Lineage) -> String {
    let mut o = String::new();
    let changed = l.count(InputStatus::Changed);
    let missing = l.count(InputStatus::Missing) + l.count(InputStatus::Unreadable);
    let files = l.entities.iter().filter(|e| e.given).count();
    let title = format!(
        "lineage of {files} file(s): {} steps, {changed} changed and {missing} missing inputs",
        l.activities.len()
    );
    let _ = writeln!(o, "digraph lineage {{");
    let _ = writeln!(
        o,
        "  graph [rankdir=LR, fontname=\"Helvetica\", labelloc=t, label={}];",
        quote(&title)
    );
    let _ = writeln!(o, "  node [fontname=\"Helvetica\", fontsize=10];");
    let _ = writeln!(o, "  edge [color=\"#555555\"];");
    for (i, e) in l.entities.iter().enumerate() {
        let _ = writeln!(o, "  e{i} [{}];", entity_node(e));
    }
    for (i, a) in l.activities.iter().enumerate() {
        let _ = writeln!(o, "  a{i} [{}];", activity_node(a));
    }
    for &(a, e) in &l.used {
        let _ = writeln!(o, "  e{e} -> a{a};");
    }
    for &(e, a) in &l.generated {
        let _ = writeln!(o, "  a{a} -> e{e};");
    }
    let _ = writeln!(o, "}}");
    o
}

/// Writes `dot_text` to `path`: as it is for `.dot`/`.gv` (or any path without an extension),
/// else rendered by `dot -T<extension>`; when `dot` is not installed, the text goes to `path`
/// with the extension `.dot` instead ([`Rendered::DotOnly`]).
pub fn render(dot_text: &str, path: &Path) -> Result<Rendered, GraphError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let write = |p: &Path| {
        std::fs::write(p, dot_text).map_err(|source| GraphError::Write {
            path: p.to_path_buf(),
            source,
        })
    };
    let format = match ext.as_deref() {
        None | Some("dot" | "gv") => {
            write(path)?;
            return Ok(Rendered::Written(path.to_path_buf()));
        }
        Some(f) => f.to_string(),
    };
    let child = Command::new("dot")
        .arg(format!("-T{format}"))
        .arg("-o")
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let p = path.with_extension("dot");
            write(&p)?;
            return Ok(Rendered::DotOnly(p));
        }
        Err(e) => {
            return Err(GraphError::Dot {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })
        }
    };
    let fed = child
        .stdin
        .take()
        .map(|mut s| s.write_all(dot_text.as_bytes()));
    let out = child.wait_with_output().map_err(|e| GraphError::Dot {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    if !out.status.success() || !matches!(fed, Some(Ok(()))) {
        let _ = std::fs::remove_file(path);
        return Err(GraphError::Dot {
            path: path.to_path_buf(),
            reason: format!(
                "{} ({})",
                String::from_utf8_lossy(&out.stderr).trim(),
                out.status
            ),
        });
    }
    Ok(Rendered::Written(path.to_path_buf()))
}
