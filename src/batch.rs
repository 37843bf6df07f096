//! Many inputs in one run, as schedulers use it: deterministic output names, deterministic
//! sharding of the input list (`--shard K/N`, Slurm array and Kubernetes indexed-Job variables),
//! and the up-to-date check that makes re-runs idempotent. Pure decisions and one footer read;
//! the conversions themselves are the pipeline's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::format::TetFile;

/// The history `params` keys whose values change output bytes (see
/// [`crate::pipeline::ConvertOptions::byte_affecting_params`]); the others (`input`,
/// `input_bytes`, `tool`, `version`) describe the run.
pub const BYTE_AFFECTING_KEYS: &[&str] = &[
    "codec",
    "chunk",
    "skip_unsupported",
    "unpack",
    "follow_external",
];

/// The output of `input` in `dir`: its file name without the last extension, plus `.tet`
/// (`ocean.nc` → `ocean.tet`, `climate.zarr/` → `climate.tet`).
pub fn output_in(dir: &Path, input: &Path) -> Option<PathBuf> {
    let stem = input.file_stem().filter(|s| !s.is_empty())?;
    let mut name = stem.to_os_string();
    name.push(".tet");
    Some(dir.join(name))
}

/// One shard of a list: items `i` with `i % count == index` (0-based index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// `K/N` with `0 <= K < N`.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("--shard {s:?}: expected K/N (0-based K, e.g. 0/4)"))?;
        let index: u64 = k
            .trim()
            .parse()
            .map_err(|_| format!("--shard {s:?}: K is not a number"))?;
        let count: u64 = n
            .trim()
            .parse()
            .map_err(|_| format!("--shard {s:?}: N is not a number"))?;
        Shard::new(index, count).map_err(|e| format!("--shard {s:?}: {e}"))
    }

    fn new(index: u64, count: u64) -> Result<Shard, String> {
        if count == 0 || index >= count {
            return Err(format!(
                "shard index {index} is not below the count {count}"
            ));
        }
        Ok(Shard { index, count })
    }

    /// The shard a scheduler assigned through the environment, when no `--shard` is given:
    /// Slurm job arrays (`SLURM_ARRAY_TASK_ID` − `SLURM_ARRAY_TASK_MIN` of
    /// `SLURM_ARRAY_TASK_COUNT`), or a Kubernetes indexed Job (`JOB_COMPLETION_INDEX`, with the
    /// count given as `count`, as Kubernetes does not export it). `None` when neither is set.
    pub fn from_env(
        var: impl Fn(&str) -> Option<String>,
        count: Option<u64>,
    ) -> Result<Option<Shard>, String> {
        let num = |name: &str| -> Result<Option<u64>, String> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("{name}={v:?} is not a number"))
                })
                .transpose()
        };
        if let Some(id) = num("SLURM_ARRAY_TASK_ID")? {
            let n = match count {
                Some(n) => n,
                None => num("SLURM_ARRAY_TASK_COUNT")?.ok_or(
                    "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not (give --shard-count)",
                )?,
            };
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let k = id.checked_sub(min).ok_or_else(|| {
                format!("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}")
            })?;
            return Shard::new(k, n).map(Some);
        }
        if let Some(k) = num("JOB_COMPLETION_INDEX")? {
            let n = count.ok_or(
                "JOB_COMPLETION_INDEX is set: give the Job's completions as --shard-count",
            )?;
            return Shard::new(k, n).map(Some);
        }
        Ok(None)
    }

    /// The items of this shard, in their order.
    pub fn select<T>(&self, items: Vec<T>) -> Vec<T> {
        items
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i as u64 % self.count == self.index)
            .map(|(_, t)| t)
            .collect()
    }
}

/// Whether `output` already holds the conversion of an input with `digest` under `params`: a
/// its last `convert` history row names the digest as its parent and agrees on every byte-affecting
/// option. Any doubt (no file, unreadable footer, other options) means "not up to date".
pub fn up_to_date(output: &Path, digest: &str, params: &BTreeMap<String, String>) -> bool {
    let Ok(f) = TetFile::open(output) else {
        return false;
    };
    let Ok(Some(footer)) = f.footer() else {
        return false;
    };
    let pick = |p: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        p.iter()
            .filter(|(k, _)| BYTE_AFFECTING_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let want = pick(params);
    // The last row made the file; earlier ones are the lineage a `.tet` input carried over.
    footer.history.last().is_some_and(|row| {
        row.op == "convert" && row.parents.iter().any(|p| p == digest) && pick(&row.params) == want
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names() {
        let d = Path::new("/out");
        assert_eq!(
            output_in(d, Path::new("a/ocean.nc")),
            Some("/out/ocean.tet".into())
        );
        assert_eq!(
            output_in(d, Path::new("s/climate.zarr/")),
            Some("/out/climate.tet".into())
        );
        assert_eq!(
            output_in(d, Path::new("x.tar.npy")),
            Some("/out/x.tar.tet".into())
        );
        assert_eq!(output_in(d, Path::new("/")), None);
    }

    #[test]
    fn shards_partition_the_list() {
        let items: Vec<u32> = (0..10).collect();
        let mut seen = Vec::new();
        for k in 0..3 {
            seen.extend(
                Shard::parse(&format!("{k}/3"))
                    .unwrap()
                    .select(items.clone()),
            );
        }
        seen.sort();
        assert_eq!(seen, items);
        assert_eq!(Shard::parse("1/3").unwrap().select(items), vec![1, 4, 7]);
        for bad in ["3/3", "1", "a/2", "0/0", "-1/2"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shards_from_scheduler_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let slurm = env(&[
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "8"),
        ]);
        assert_eq!(
            Shard::from_env(slurm, None).unwrap(),
            Some(Shard { index: 4, count: 8 })
        );
        let k8s = env(&[("JOB_COMPLETION_INDEX", "2")]);
        assert!(Shard::from_env(k8s, None).is_err());
        assert_eq!(
            Shard::from_env(k8s, Some(4)).unwrap(),
            Some(Shard { index: 2, count: 4 })
        );
        assert_eq!(Shard::from_env(env(&[]), None).unwrap(), None);
        assert!(Shard::from_env(env(&[("JOB_COMPLETION_INDEX", "4")]), Some(4)).is_err());
    }
}
