//! Stable sharding of a batch: which of N tasks converts an input depends on that input alone.
//!
//! The shard of an input is the first 8 bytes of SHA-256 of its *key* — its path relative to the
//! root it was found under (the walked directory, or `--base`), with `/` separators, as raw
//! bytes — read as a big-endian integer, modulo N. An input listed on its own (no root) is keyed
//! by its path as given. Because nothing else enters the hash, a file that arrives between two
//! array tasks' listings cannot shift any other file into another shard: every task agrees on
//! every file it sees. In shell: `printf %s "$key" | sha256sum | cut -c1-16` is the number in hex.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// One shard of N (0-based index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
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

    /// Whether the input keyed `key` belongs to this shard.
    pub fn takes(&self, key: &Path) -> bool {
        shard_of(key, self.count) == self.index
    }
}

/// The shard (of `count`) of the input keyed `key`; see the module docs.
pub fn shard_of(key: &Path, count: u64) -> u64 {
    let d = Sha256::digest(key.as_os_str().as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&d[..8]);
    u64::from_be_bytes(first) % count.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_any_list_and_ignore_the_rest_of_it() {
        let keys: Vec<String> = (0..200).map(|i| format!("day{}/f{i}.nc", i % 7)).collect();
        let mut seen = Vec::new();
        for k in 0..3 {
            let s = Shard::parse(&format!("{k}/3")).unwrap();
            seen.extend(keys.iter().filter(|p| s.takes(Path::new(p))).cloned());
        }
        seen.sort();
        let mut all = keys.clone();
        all.sort();
        assert_eq!(seen, all);
        // Every shard gets a fair share of 200 keys.
        for k in 0..3 {
            let n = keys
                .iter()
                .filter(|p| shard_of(Path::new(p), 3) == k)
                .count();
            assert!((40..=95).contains(&n), "shard {k}: {n}");
        }
        for bad in ["3/3", "1", "a/2", "0/0", "-1/2"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_hash_is_the_documented_one() {
        // printf %s 2024-01-01/ocean.nc | sha256sum → 5c0bb9b1…; first 8 bytes big-endian.
        let d = Sha256::digest(b"2024-01-01/ocean.nc");
        let want = u64::from_be_bytes(d[..8].try_into().unwrap());
        assert_eq!(
            shard_of(Path::new("2024-01-01/ocean.nc"), 1000),
            want % 1000
        );
        assert_eq!(shard_of(Path::new("x"), 1), 0);
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
