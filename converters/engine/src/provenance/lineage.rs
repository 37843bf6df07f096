//! The lineage of several `.tet` files as one graph: entities (inputs, intermediate `.tet`
//! files, the files named) and activities (history rows), joined by digest.
//!
//! Each history row is an activity; it *used* its parents (digests, named by the recorded
//! `input`, `input.1`, … params) and *generated* the next row's single `.tet` parent when the
//! next row converted a `.tet` (`source` = `tet`), the file itself when it is the last row, and
//! an unnamed intermediate otherwise. Entities are identified by digest, so a `.tet` named on
//! the command line that another named file was converted from is one node (an intermediate),
//! and a row both files carry (a `.tet → .tet` conversion keeps its input's rows) is one
//! activity.

use std::collections::{BTreeMap, BTreeSet};

use super::check::Signatures;
use crate::format::footer::HistoryRow;
use crate::meta::inputs::{InputCheck, InputStatus};

/// What is known of one file named on the command line.
#[derive(Debug, Clone)]
pub struct FileRecord {
    /// As named.
    pub path: String,
    /// SHA-256 of its bytes (`sha256:<hex>`), as a conversion from it records its parent.
    pub digest: Option<String>,
    pub history: Vec<HistoryRow>,
    /// Its recorded inputs checked now ([`crate::meta::inputs::recheck`]).
    pub inputs: Vec<InputCheck>,
    /// Its signatures, checked (`None`: none could be read).
    pub signatures: Option<Signatures>,
}

/// What part an entity plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntityKind {
    /// Used, never generated here: a source file (or a `.tet` whose making is not recorded).
    Input,
    /// Generated and used again: an intermediate `.tet`.
    Intermediate,
    /// Generated and not used again: a result.
    Output,
}

impl EntityKind {
    pub fn name(self) -> &'static str {
        match self {
            EntityKind::Input => "input",
            EntityKind::Intermediate => "intermediate",
            EntityKind::Output => "output",
        }
    }
}

/// A file (or object) in the lineage.
#[derive(Debug, Clone, Default)]
pub struct Entity {
    /// `sha256:<hex>`, or `None` for an intermediate no row records the digest of.
    pub digest: Option<String>,
    /// Paths it was recorded or named under, in order of appearance.
    pub names: Vec<String>,
    /// Named on the command line.
    pub given: bool,
    pub generated: bool,
    pub used: bool,
    /// The worst status a recorded-input check gave it.
    pub status: Option<InputStatus>,
    /// Its signatures (a file named on the command line).
    pub signatures: Option<Signatures>,
}

impl Entity {
    pub fn kind(&self) -> EntityKind {
        match (self.generated || self.given, self.used) {
            (false, _) => EntityKind::Input,
            (true, true) => EntityKind::Intermediate,
            (true, false) => EntityKind::Output,
        }
    }

    /// The first name, or `intermediate`.
    pub fn name(&self) -> &str {
        self.names.first().map_or("intermediate", String::as_str)
    }
}

/// A history row as an activity.
#[derive(Debug, Clone)]
pub struct Activity {
    pub row: HistoryRow,
    /// The files named on the command line whose history holds the row.
    pub files: Vec<String>,
}

/// History params a selection records (`--variables`, `--exclude`, `--no-coords`, `--isel`,
/// `--sel`: docs/guide/selection.md).
pub const SELECT_PARAMS: &[&str] = &["variables", "exclude", "no_coords", "isel", "sel"];

/// History params that describe the run rather than the step (not shown as its options).
pub const RUN_PARAMS: &[&str] = &["tool", "version", "cwd", "input_bytes", "input_mtime"];

impl Activity {
    /// `combine` (several parents, or a `concat` param), `select` (a selection param), or the
    /// row's `op`.
    pub fn kind(&self) -> &str {
        if self.row.parents.len() > 1 || self.row.params.contains_key("concat") {
            "combine"
        } else if SELECT_PARAMS
            .iter()
            .any(|k| self.row.params.contains_key(*k))
        {
            "select"
        } else {
            &self.row.op
        }
    }

    /// `tet-convert 0.1.0`, or `None` when the row records no tool.
    pub fn tool(&self) -> Option<String> {
        let p = &self.row.params;
        p.get("tool").map(|t| match p.get("version") {
            Some(v) => format!("{t} {v}"),
            None => t.clone(),
        })
    }

    /// The step's options: params other than the run's and the inputs.
    pub fn options(&self) -> impl Iterator<Item = (&String, &String)> {
        self.row.params.iter().filter(|(k, _)| {
            !RUN_PARAMS.contains(&k.as_str()) && *k != "input" && !k.starts_with("input.")
        })
    }
}

/// Entities, activities and the edges between them.
#[derive(Debug, Clone, Default)]
pub struct Lineage {
    pub entities: Vec<Entity>,
    pub activities: Vec<Activity>,
    /// (activity, entity): the activity used the entity.
    pub used: BTreeSet<(usize, usize)>,
    /// (entity, activity): the entity was generated by the activity.
    pub generated: BTreeSet<(usize, usize)>,
    by_key: BTreeMap<String, usize>,
    by_row: BTreeMap<String, usize>,
}

fn status_rank(s: InputStatus) -> u8 {
    match s {
        InputStatus::NotRecorded => 0,
        InputStatus::Unchanged => 1,
        InputStatus::Missing => 2,
        InputStatus::Unreadable => 3,
        InputStatus::Changed => 4,
    }
}

/// The name a row records for its parent `k` (`input`, `input.1`, …).
fn parent_name(row: &HistoryRow, k: usize) -> Option<&String> {
    if k == 0 {
        row.params.get("input")
    } else {
        row.params.get(&format!("input.{k}"))
    }
}

impl Lineage {
    /// The lineage of `files`, joined by digest.
    pub fn build(files: &[FileRecord]) -> Lineage {
        let mut l = Lineage::default();
        for f in files {
            l.add_file(f);
        }
        l
    }

    fn entity(&mut self, key: &str, digest: Option<&str>) -> usize {
        if let Some(&i) = self.by_key.get(key) {
            return i;
        }
        self.entities.push(Entity {
            digest: digest.map(str::to_string),
            ..Entity::default()
        });
        let i = self.entities.len() - 1;
        self.by_key.insert(key.to_string(), i);
        i
    }

    fn name(&mut self, e: usize, name: &str) {
        let names = &mut self.entities[e].names;
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }

    fn activity(&mut self, row: &HistoryRow, file: &str) -> usize {
        let key = serde_json::json!([row.op, row.source, row.at, row.parents, row.params]);
        let key = key.to_string();
        let i = match self.by_row.get(&key) {
            Some(&i) => i,
            None => {
                self.activities.push(Activity {
                    row: row.clone(),
                    files: Vec::new(),
                });
                self.by_row.insert(key, self.activities.len() - 1);
                self.activities.len() - 1
            }
        };
        if !self.activities[i].files.iter().any(|f| f == file) {
            self.activities[i].files.push(file.to_string());
        }
        i
    }

    fn add_file(&mut self, f: &FileRecord) {
        let own_key = f
            .digest
            .clone()
            .unwrap_or_else(|| format!("file:{}", f.path));
        let own = self.entity(&own_key, f.digest.as_deref());
        self.name(own, &f.path);
        self.entities[own].given = true;
        self.entities[own].signatures = f.signatures.clone();
        let n = f.history.len();
        for (i, row) in f.history.iter().enumerate() {
            let act = self.activity(row, &f.path);
            for (k, p) in row.parents.iter().enumerate() {
                let e = self.entity(p, Some(p));
                if let Some(name) = parent_name(row, k) {
                    self.name(e, name);
                }
                self.entities[e].used = true;
                self.used.insert((act, e));
            }
            let out = if i + 1 == n {
                own
            } else {
                match f.history.get(i + 1) {
                    Some(next) if next.source == "tet" && next.parents.len() == 1 => {
                        let p = next.parents[0].clone();
                        self.entity(&p, Some(&p))
                    }
                    _ => self.entity(&format!("{}#row{i}", f.path), None),
                }
            };
            self.entities[out].generated = true;
            self.generated.insert((out, act));
        }
        for c in &f.inputs {
            let Some(d) = &c.recorded_digest else {
                continue;
            };
            if let Some(&e) = self.by_key.get(d) {
                let old = self.entities[e].status;
                if old.is_none_or(|o| status_rank(c.status) > status_rank(o)) {
                    self.entities[e].status = Some(c.status);
                }
            }
        }
    }

    /// The entities counted by status (changed, missing, unreadable).
    pub fn count(&self, s: InputStatus) -> usize {
        self.entities.iter().filter(|e| e.status == Some(s)).count()
    }
}
