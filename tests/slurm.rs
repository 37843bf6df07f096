//! A real scheduler: a single-node Slurm (Debian's slurm-wlm and munge, started by
//! `tests/slurm/start.sh` with every file in a temporary folder) runs the user guide's array script
//! (`docs/etl/slurm-array.sh`) over a folder of inputs. Every input is converted exactly once,
//! with one report per array task. Where Slurm cannot start, the test says why and passes.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use common::write_npy;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Stops the cluster whatever happens to the test.
struct Cluster(PathBuf);

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo("tests/slurm/stop.sh"))
            .arg(&self.0)
            .status();
    }
}

#[test]
fn readme_array_script_converts_every_input_once_under_slurm() {
    let script = std::fs::read_to_string(repo("docs/etl/slurm-array.sh")).unwrap();
    let readme = std::fs::read_to_string(repo("docs/guide/batch.md")).unwrap();
    assert!(
        readme.contains(script.trim_end()),
        "docs/guide/batch.md must show docs/etl/slurm-array.sh as it is"
    );

    // Slurm's socket paths must stay short: a folder directly under /tmp.
    let d = tempfile::Builder::new()
        .prefix("tslurm")
        .tempdir_in("/tmp")
        .unwrap();
    let cluster_dir = d.path().join("c");
    let start = Command::new(repo("tests/slurm/start.sh"))
        .arg(&cluster_dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&start.stdout).trim().to_string();
    let _cluster = Cluster(cluster_dir.clone());
    if start.status.code() == Some(3) {
        eprintln!("skipped: Slurm cannot start here: {said}");
        return;
    }
    assert!(start.status.success(), "start.sh: {said} {:?}", start);
    let conf = said
        .strip_prefix("export SLURM_CONF=")
        .unwrap_or_else(|| panic!("start.sh said {said:?}"));

    let (input, out, reports) = (
        d.path().join("in"),
        d.path().join("out"),
        d.path().join("rep"),
    );
    for p in [&out, &reports, &d.path().join("log")] {
        std::fs::create_dir_all(p).unwrap();
    }
    let mut names = Vec::new();
    for i in 0..30 {
        let rel = format!("day{}/x{i:02}.npy", i % 3);
        let p = input.join(&rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        write_npy(&p, 1 + i % 2);
        names.push(rel);
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_tet-convert"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("timeout")
        .arg("300")
        .arg("sbatch")
        .arg("--wait")
        .arg(format!("--chdir={}", d.path().display()))
        .arg(format!("--output={}/log/%A_%a.out", d.path().display()))
        .arg(repo("docs/etl/slurm-array.sh"))
        .env("SLURM_CONF", conf)
        .env("PATH", path)
        .env("IN_DIR", &input)
        .env("OUT_DIR", &out)
        .env("REPORT_DIR", &reports)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap();
    let logs: String = std::fs::read_dir(d.path().join("log"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect();
    assert!(o.status.success(), "sbatch: {o:?}\n{logs}");

    // One report per array task, each a complete run of its shard.
    let mut files: Vec<PathBuf> = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "{files:?}\n{logs}");
    let mut converted: BTreeMap<String, usize> = BTreeMap::new();
    let mut shards = Vec::new();
    for f in &files {
        let rows: Vec<Value> = std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.first().unwrap()["kind"], "start");
        let end = rows.last().unwrap();
        assert_eq!(end["kind"], "end");
        assert_eq!(end["exit_code"], 0, "{end}");
        shards.push(rows[0]["shard"].as_str().unwrap().to_string());
        for r in rows.iter().filter(|r| r["kind"] == "input") {
            assert_eq!(r["status"], "ok", "{r}");
            let rel = Path::new(r["input"].as_str().unwrap())
                .strip_prefix(&input)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            *converted.entry(rel).or_default() += 1;
        }
    }
    shards.sort();
    assert_eq!(shards, ["0/4", "1/4", "2/4", "3/4"]);
    let mut want = names.clone();
    want.sort();
    assert_eq!(converted.keys().cloned().collect::<Vec<_>>(), want);
    assert!(converted.values().all(|&n| n == 1), "{converted:?}");
    for n in &names {
        assert!(out.join(n.replace(".npy", ".tet")).is_file(), "{n}");
    }
}
