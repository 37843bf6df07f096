//! The lineage as W3C PROV-JSON (the JSON serialization of PROV-DM that the `prov` Python
//! package, ProvToolbox and ProvStore read): `tet audit --prov`.
//!
//! - **entities** `tet:sha256-<hex>` (an intermediate without a recorded digest:
//!   `tet:intermediate-<n>`): `prov:label` (the first name), `tet:digest`, `tet:kind` (`input`,
//!   `intermediate`, `output`), `tet:paths` (every name, joined by newlines), `tet:status` (what
//!   the recorded-input check found: `unchanged`, `changed`, `missing`, …), and for a signed
//!   file `tet:content_digest` (the message its signatures sign);
//! - **activities** `tet:step-<n>`, one per history row: `prov:startTime` (the row's `at`, UTC),
//!   `prov:label`, `tet:op`, `tet:source`, `tet:kind` (`combine`, `select`, or the op), `tet:at`
//!   as recorded, `tet:tool`, and each param as `tet:param-<key>`;
//! - **agents**: the tool of each row (`tet:tool-<n>`, `prov:type` `prov:SoftwareAgent`) and
//!   each signer (`tet:signer-<n>`: `tet:fingerprint`, `tet:principal` when the allowed signers
//!   name it);
//! - **relations**: `used` (step → its parents), `wasGeneratedBy` (its result → step),
//!   `wasDerivedFrom` (result → each parent, with the step), `wasAssociatedWith` (step → tool),
//!   `wasAttributedTo` (a signed file → each signer whose signature is valid over its content,
//!   with `tet:signature` = `trusted`, `valid` or `unknown-key`).
//!
//! Identifiers are numbered in the order of the lineage (the files as named, their rows in
//! order): the same files give the same document.

use serde_json::{json, Map, Value};

use super::check::SigStatus;
use super::lineage::{Entity, Lineage};
use crate::meta::unix_iso;

/// The namespace of our identifiers and attributes.
pub const NAMESPACE_URI: &str = "https://example.invalid/tet-convert/prov#";

fn entity_id(l: &Lineage, i: usize) -> String {
    match &l.entities[i].digest {
        Some(d) => format!("tet:{}", d.replace(':', "-")),
        None => format!("tet:intermediate-{i}"),
    }
}

fn entity_json(e: &Entity) -> Value {
    let mut m = Map::new();
    m.insert("prov:label".into(), json!(e.name()));
    m.insert("tet:kind".into(), json!(e.kind().name()));
    if let Some(d) = &e.digest {
        m.insert("tet:digest".into(), json!(d));
    }
    if !e.names.is_empty() {
        m.insert("tet:paths".into(), json!(e.names.join("\n")));
    }
    if let Some(s) = e.status {
        m.insert("tet:status".into(), json!(s.name()));
    }
    if let Some(s) = &e.signatures {
        if !s.signatures.is_empty() {
            m.insert("tet:content_digest".into(), json!(s.content_digest));
        }
    }
    Value::Object(m)
}

/// A PROV-JSON relation section: `{"_:<tag><n>": {...}}` in order.
fn relations(tag: &str, items: Vec<Value>) -> Value {
    let m: Map<String, Value> = items
        .into_iter()
        .enumerate()
        .map(|(i, v)| (format!("_:{tag}{}", i + 1), v))
        .collect();
    Value::Object(m)
}

/// The PROV-JSON document of a lineage.
pub fn document(l: &Lineage) -> Value {
    let mut entities = Map::new();
    for (i, e) in l.entities.iter().enumerate() {
        entities.insert(entity_id(l, i), entity_json(e));
    }
    let mut activities = Map::new();
    let mut agents = Map::new();
    let mut tools: Vec<String> = Vec::new();
    let mut associated = Vec::new();
    for (i, a) in l.activities.iter().enumerate() {
        let id = format!("tet:step-{i}");
        let mut m = Map::new();
        let tool = a.tool();
        let label = format!("{} ({})", a.kind(), a.row.source);
        m.insert("prov:label".into(), json!(label));
        if let Some(t) = unix_iso(&a.row.at) {
            m.insert("prov:startTime".into(), json!(t));
        }
        m.insert("tet:op".into(), json!(a.row.op));
        m.insert("tet:source".into(), json!(a.row.source));
        m.insert("tet:kind".into(), json!(a.kind()));
        m.insert("tet:at".into(), json!(a.row.at));
        for (k, v) in &a.row.params {
            m.insert(format!("tet:param-{k}"), json!(v));
        }
        if let Some(t) = &tool {
            m.insert("tet:tool".into(), json!(t));
            let n = match tools.iter().position(|x| x == t) {
                Some(n) => n,
                None => {
                    tools.push(t.clone());
                    agents.insert(
                        format!("tet:tool-{}", tools.len() - 1),
                        json!({"prov:type": {"$": "prov:SoftwareAgent", "type": "prov:QUALIFIED_NAME"},
                               "prov:label": t}),
                    );
                    tools.len() - 1
                }
            };
            associated.push(json!({"prov:activity": id, "prov:agent": format!("tet:tool-{n}")}));
        }
        activities.insert(id, Value::Object(m));
    }
    let used: Vec<Value> = l
        .used
        .iter()
        .map(|&(a, e)| json!({"prov:activity": format!("tet:step-{a}"), "prov:entity": entity_id(l, e)}))
        .collect();
    let generated: Vec<Value> = l
        .generated
        .iter()
        .map(|&(e, a)| json!({"prov:entity": entity_id(l, e), "prov:activity": format!("tet:step-{a}")}))
        .collect();
    let mut derived = Vec::new();
    for &(out, a) in &l.generated {
        for &(_, input) in l.used.range((a, 0)..=(a, usize::MAX)) {
            derived.push(json!({
                "prov:generatedEntity": entity_id(l, out),
                "prov:usedEntity": entity_id(l, input),
                "prov:activity": format!("tet:step-{a}"),
            }));
        }
    }
    let attributed = signers(l, &mut agents);
    let mut doc = Map::new();
    doc.insert(
        "prefix".into(),
        json!({ "tet": NAMESPACE_URI, "xsd": "http://www.w3.org/2001/XMLSchema#" }),
    );
    doc.insert("entity".into(), Value::Object(entities));
    doc.insert("activity".into(), Value::Object(activities));
    doc.insert("agent".into(), Value::Object(agents));
    for (key, tag, items) in [
        ("used", "u", used),
        ("wasGeneratedBy", "g", generated),
        ("wasDerivedFrom", "d", derived),
        ("wasAssociatedWith", "w", associated),
        ("wasAttributedTo", "a", attributed),
    ] {
        if !items.is_empty() {
            doc.insert(key.into(), relations(tag, items));
        }
    }
    Value::Object(doc)
}

/// The signer agents (added to `agents`) and the `wasAttributedTo` relations of signed files.
fn signers(l: &Lineage, agents: &mut Map<String, Value>) -> Vec<Value> {
    let mut keys: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (i, e) in l.entities.iter().enumerate() {
        let Some(sigs) = &e.signatures else {
            continue;
        };
        for s in sigs
            .signatures
            .iter()
            .filter(|s| s.status != SigStatus::Invalid)
        {
            let Some(fp) = &s.fingerprint else {
                continue;
            };
            let n = match keys.iter().position(|k| k == fp) {
                Some(n) => n,
                None => {
                    keys.push(fp.clone());
                    let mut m = Map::new();
                    m.insert("prov:label".into(), json!(s.signer()));
                    m.insert("tet:fingerprint".into(), json!(fp));
                    if let Some(p) = &s.principal {
                        m.insert("tet:principal".into(), json!(p));
                    }
                    agents.insert(format!("tet:signer-{}", keys.len() - 1), Value::Object(m));
                    keys.len() - 1
                }
            };
            out.push(json!({
                "prov:entity": entity_id(l, i),
                "prov:agent": format!("tet:signer-{n}"),
                "tet:signature": s.status.name(),
            }));
        }
    }
    out
}
