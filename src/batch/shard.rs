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

/// Why no shard can be taken from `--shard` or the scheduler's variables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// A `--shard` value that is not a shard (the cause says why).
    #[error("--shard {spec:?}: {source}")]
    Flag {
        spec: String,
        #[source]
        source: Box<ShardError>,
    },
    /// No `/` between K and N.
    #[error("expected K/N (0-based K, e.g. 0/4)")]
    Syntax,
    /// K or N (`part`) is not a number.
    #[error("{part} is not a number")]
    Part {
        part: char,
        #[source]
        source: std::num::ParseIntError,
    },
    /// An index that is not below the count (a count of 0 included).
    #[error("shard index {index} is not below the count {count}")]
    OutOfRange { index: u64, count: u64 },
    /// A scheduler variable that is not a number.
    #[error("{name}={value:?} is not a number")]
    Variable {
        name: &'static str,
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
    /// A Slurm array task without the array's task count.
    #[error("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not (give --shard-count)")]
    SlurmCount,
    /// A Slurm task id below the array's first id.
    #[error("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}")]
    SlurmBelowMin { id: u64, min: u64 },
    /// A Kubernetes indexed Job, whose count the environment does not hold.
    #[error("JOB_COMPLETION_INDEX is set: give the Job's completions as --shard-count")]
    JobCount,
}

impl Shard {
    /// `K/N` with `0 <= K < N`.
    pub fn parse(s: &str) -> Result<Shard, ShardError> {
        Shard::parse_parts(s).map_err(|e| ShardError::Flag {
            spec: s.into(),
            source: Box::new(e),
        })
    }

    fn parse_parts(s: &str) -> Result<Shard, ShardError> {
        let (k, n) = s.split_once('/').ok_or(ShardError::Syntax)?;
        let number = |part: char, t: &str| {
            t.trim()
                .parse::<u64>()
                .map_err(|source| ShardError::Part { part, source })
        };
        Shard::new(number('K', k)?, number('N', n)?)
    }

    fn new(index: u64, count: u64) -> Result<Shard, ShardError> {
        if count == 0 || index >= count {
            return Err(ShardError::OutOfRange { index, count });
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
    ) -> Result<Option<Shard>, ShardError> {
        let num = |name: &'static str| -> Result<Option<u64>, ShardError> {
            var(name)
                .map(|value| {
                    value
                        .trim()
                        .parse::<u64>()
                        .map_err(|source| ShardError::Variable {
                            name,
                            value,
                            source,
                        })
                })
                .transpose()
        };
        if let Some(id) = num("SLURM_ARRAY_TASK_ID")? {
            let n = match count {
                Some(n) => n,
                None => num("SLURM_ARRAY_TASK_COUNT")?.ok_or(ShardError::SlurmCount)?,
            };
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let k = id
                .checked_sub(min)
                .ok_or(ShardError::SlurmBelowMin { id, min })?;
            return Shard::new(k, n).map(Some);
        }
        if let Some(k) = num("JOB_COMPLETION_INDEX")? {
            let n = count.ok_or(ShardError::JobCount)?;
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
        assert_eq!(
            Shard::parse("3/3").unwrap_err().to_string(),
            "--shard \"3/3\": shard index 3 is not below the count 3"
        );
        assert_eq!(
            Shard::parse("1").unwrap_err().to_string(),
            "--shard \"1\": expected K/N (0-based K, e.g. 0/4)"
        );
        let e = Shard::parse("0/x").unwrap_err();
        assert_eq!(e.to_string(), "--shard \"0/x\": N is not a number");
        let ShardError::Flag { source, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(matches!(**source, ShardError::Part { part: 'N', .. }));
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
        assert_eq!(Shard::from_env(k8s, None), Err(ShardError::JobCount));
        assert_eq!(
            Shard::from_env(k8s, Some(4)).unwrap(),
            Some(Shard { index: 2, count: 4 })
        );
        assert_eq!(Shard::from_env(env(&[]), None).unwrap(), None);
        assert!(Shard::from_env(env(&[("JOB_COMPLETION_INDEX", "4")]), Some(4)).is_err());
    }
}
