//! The chunk planner: a pure function from a variable's shape, element size and source chunking
//! to the `.tet` `chunk_shape`.
//!
//! Rules, in order:
//! 1. a per-dataset override (`--chunk temperature:1,721,1440`) is taken as given;
//! 2. otherwise the unit is the source's chunk shape (1 per axis for contiguous sources), and
//!    axes named in a per-dimension override (`--chunk time=1`) are fixed to that extent;
//! 3. the other axes grow from the innermost outwards, in multiples of the unit, keeping trailing
//!    axes whole while the chunk stays within the byte target; the first axis that cannot be
//!    whole takes the largest multiple of its unit that fits, and the axes outside it stay at
//!    one unit.
//!
//! So a chunk never exceeds the target unless one source chunk alone is larger (then it is that
//! one source chunk: each source chunk is decoded exactly once), and a large contiguous array is
//! never one giant chunk. See ARCHITECTURE.md for the choice of the default target.
//!
//! A source may also prefer a chunk shape (a `.tet` input: its own chunks). The preferred shape
//! is taken when no option applies to the dataset (no `--chunk-bytes`, no `--chunk` naming it or
//! one of its dimensions); it never constrains a plan the user asked for.

use std::collections::BTreeMap;

/// Default target of raw bytes per chunk: 4 MiB.
pub const DEFAULT_CHUNK_BYTES: u64 = 4 << 20;

/// A preferred chunk shape larger than this is re-planned: the pipeline holds several chunks per
/// worker in memory, and a `.tet` input's directory can claim any chunk shape.
pub const MAX_PREFERRED_CHUNK_BYTES: u64 = 64 << 20;

/// User settings that shape chunks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlanOptions {
    /// Target raw bytes per chunk; `None`: not asked for ([`DEFAULT_CHUNK_BYTES`]).
    pub target_bytes: Option<u64>,
    /// Fixed extents by dimension name (`--chunk time=1,lat=100`).
    pub by_dim: BTreeMap<String, u64>,
    /// Whole chunk shapes by dataset name (`--chunk temperature:1,721,1440`).
    pub by_dataset: BTreeMap<String, Vec<u64>>,
}

impl PlanOptions {
    /// The byte target in force.
    pub fn target(&self) -> u64 {
        self.target_bytes.unwrap_or(DEFAULT_CHUNK_BYTES)
    }

    /// Whether any setting applies to a dataset named `name` with dimensions `dims`.
    fn applies_to(&self, name: &str, dims: Option<&[String]>) -> bool {
        self.target_bytes.is_some()
            || self.by_dataset.contains_key(name)
            || dims.is_some_and(|d| d.iter().any(|d| self.by_dim.contains_key(d)))
    }

    /// A canonical text of the settings, for the history row (`4194304;time=1;t:1,2`).
    pub fn describe(&self) -> String {
        let mut s = self.target().to_string();
        for (d, n) in &self.by_dim {
            s += &format!(";{d}={n}");
        }
        for (d, c) in &self.by_dataset {
            let c: Vec<String> = c.iter().map(u64::to_string).collect();
            s += &format!(";{d}:{}", c.join(","));
        }
        s
    }

    /// Parses one `--chunk` argument: `dim=N[,dim=N…]` or `dataset:N,N,…`.
    pub fn add_spec(&mut self, spec: &str) -> Result<(), PlanError> {
        let bad = || PlanError::ChunkSyntax { spec: spec.into() };
        let positive = |t: &str| -> Result<u64, PlanError> {
            match t.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(PlanError::ChunkExtent {
                    spec: spec.into(),
                    extent: t.into(),
                }),
            }
        };
        if let Some((name, list)) = spec.rsplit_once(':') {
            if name.is_empty() {
                return Err(bad());
            }
            let shape = list
                .split(',')
                .map(positive)
                .collect::<Result<Vec<_>, _>>()?;
            self.by_dataset.insert(name.to_string(), shape);
            return Ok(());
        }
        for part in spec.split(',') {
            let (d, n) = part.split_once('=').ok_or_else(bad)?;
            if d.is_empty() {
                return Err(bad());
            }
            self.by_dim.insert(d.to_string(), positive(n)?);
        }
        Ok(())
    }
}

/// A `--chunk` setting that cannot be parsed or does not fit a dataset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Neither `dim=N[,dim=N…]` nor `dataset:N,N,…`.
    #[error("--chunk {spec:?}: expected dim=N[,dim=N…] or dataset:N,N,…")]
    ChunkSyntax { spec: String },
    /// An extent that is not a positive integer.
    #[error("--chunk {spec:?}: {extent:?} is not a positive integer")]
    ChunkExtent { spec: String, extent: String },
    /// `--chunk` naming a dimension or a variable the input does not have (`what`:
    /// `dimension` or `variable`), with the closest names it has.
    #[error("--chunk: no {what} `{name}` {}", crate::select::closest_note(.closest))]
    UnknownName {
        what: &'static str,
        name: String,
        closest: Vec<String>,
    },
    /// A dataset's chunk shape with another number of extents than the dataset has axes.
    #[error("--chunk {dataset}: {given} extents given for a rank-{rank} dataset")]
    ChunkRank {
        dataset: String,
        given: usize,
        rank: usize,
    },
}

/// A size (`--chunk-bytes`, `--memory-budget`, a manifest's `chunk_bytes`) that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// No leading number (or one too large for 64 bits).
    #[error("{text:?} is not a size")]
    NotANumber {
        text: String,
        #[source]
        source: std::num::ParseIntError,
    },
    /// A unit other than B, KiB, MiB, GiB (or their short forms).
    #[error("{0:?}: unknown unit (use KiB, MiB or GiB)")]
    UnknownUnit(String),
    /// Zero, or more bytes than 64 bits count.
    #[error("{0:?} is not a positive size")]
    NotPositive(String),
}

/// `4MiB`, `4M`, `512k`, `1000000`.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|source| SizeError::NotANumber {
        text: s.into(),
        source,
    })?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(SizeError::UnknownUnit(s.into())),
    };
    n.checked_mul(mult)
        .filter(|&v| v > 0)
        .ok_or_else(|| SizeError::NotPositive(s.into()))
}

/// What the planner knows of one variable.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    pub name: &'a str,
    pub shape: &'a [u64],
    pub elem_size: u64,
    pub dims: Option<&'a [String]>,
    /// The source's chunk shape, if it is chunked.
    pub source_chunks: Option<&'a [u64]>,
    /// The chunk shape the source prefers when no option applies (see the module docs).
    pub preferred_chunks: Option<&'a [u64]>,
}

/// Plans the chunk shape of one variable.
pub fn plan(input: &PlanInput<'_>, opts: &PlanOptions) -> Result<Vec<u64>, PlanError> {
    let rank = input.shape.len();
    if let Some(c) = opts.by_dataset.get(input.name) {
        if c.len() != rank {
            return Err(PlanError::ChunkRank {
                dataset: input.name.into(),
                given: c.len(),
                rank,
            });
        }
        return Ok(c.clone());
    }
    if let Some(c) = input.preferred_chunks {
        let bytes = c
            .iter()
            .try_fold(input.elem_size, |acc, &n| acc.checked_mul(n));
        let fits = c.len() == rank
            && c.iter().all(|&n| n > 0)
            && bytes.is_some_and(|b| b <= MAX_PREFERRED_CHUNK_BYTES);
        if fits && !opts.applies_to(input.name, input.dims) {
            return Ok(c.to_vec());
        }
    }
    // The unit along each axis: the source chunk (never more than the axis), or 1.
    let unit: Vec<u64> = (0..rank)
        .map(|a| {
            let u = input
                .source_chunks
                .filter(|c| c.len() == rank)
                .map_or(1, |c| c[a].max(1));
            u.min(input.shape[a].max(1))
        })
        .collect();
    let mut fixed = vec![false; rank];
    let mut chunk = unit.clone();
    if let Some(dims) = input.dims.filter(|d| d.len() == rank) {
        for (a, d) in dims.iter().enumerate() {
            if let Some(&n) = opts.by_dim.get(d) {
                chunk[a] = n;
                fixed[a] = true;
            }
        }
    }
    let target = opts.target().max(1);
    for a in (0..rank).rev() {
        if fixed[a] {
            continue;
        }
        // Bytes of one step along `a` with the other axes as they are now.
        let other = (0..rank)
            .filter(|&b| b != a)
            .try_fold(input.elem_size.max(1), |acc, b| acc.checked_mul(chunk[b]))
            .unwrap_or(u64::MAX);
        let fit = target / other; // elements along `a` that fit the target
        let full = input.shape[a].max(1);
        if fit >= full {
            chunk[a] = full;
            continue;
        }
        chunk[a] = (fit / unit[a] * unit[a]).max(unit[a]);
        break;
    }
    Ok(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(shape: &[u64], elem: u64, src: Option<&[u64]>, target: u64) -> Vec<u64> {
        plan(
            &PlanInput {
                name: "v",
                shape,
                elem_size: elem,
                dims: None,
                source_chunks: src,
                preferred_chunks: None,
            },
            &PlanOptions {
                target_bytes: Some(target),
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn examples() {
        // 1 GiB f32 (256, 1024, 1024): 4 MiB = one (1024, 1024) plane.
        assert_eq!(p(&[256, 1024, 1024], 4, None, 4 << 20), vec![1, 1024, 1024]);
        // Small arrays are one chunk.
        assert_eq!(p(&[10, 20], 8, None, 4 << 20), vec![10, 20]);
        // A long 1-D array is split.
        assert_eq!(p(&[1 << 30], 4, None, 4 << 20), vec![1 << 20]);
        // Source chunks (1, 512, 512) of f32 = 1 MiB: four of them along axis 1..2 fit.
        assert_eq!(
            p(&[256, 1024, 1024], 4, Some(&[1, 512, 512]), 4 << 20),
            vec![1, 1024, 1024]
        );
        // A source chunk larger than the target is kept whole.
        assert_eq!(
            p(&[64, 4096, 4096], 4, Some(&[8, 4096, 4096]), 4 << 20),
            vec![8, 4096, 4096]
        );
        // Zero-length axes.
        assert_eq!(p(&[0, 5], 4, None, 4 << 20), vec![1, 5]);
    }

    #[test]
    fn overrides() {
        let dims = vec!["time".to_string(), "lat".to_string(), "lon".to_string()];
        let mut o = PlanOptions::default();
        o.add_spec("time=2,lat=10").unwrap();
        o.add_spec("other:1,2,3").unwrap();
        let input = PlanInput {
            name: "t",
            shape: &[100, 721, 1440],
            elem_size: 4,
            dims: Some(&dims),
            source_chunks: None,
            preferred_chunks: None,
        };
        assert_eq!(plan(&input, &o).unwrap(), vec![2, 10, 1440]);
        assert_eq!(
            plan(
                &PlanInput {
                    name: "other",
                    ..input
                },
                &o
            )
            .unwrap(),
            vec![1, 2, 3]
        );
        assert!(plan(
            &PlanInput {
                name: "other",
                shape: &[3],
                ..input
            },
            &o
        )
        .is_err());
        assert!(o.add_spec("time=0").is_err());
        assert!(o.add_spec("x:1,a").is_err());
        assert!(o.add_spec("nonsense").is_err());
        assert_eq!(o.describe(), "4194304;lat=10;time=2;other:1,2,3");
    }

    #[test]
    fn mistakes_are_typed_and_name_the_spec() {
        let mut o = PlanOptions::default();
        assert_eq!(
            o.add_spec("time=0"),
            Err(PlanError::ChunkExtent {
                spec: "time=0".into(),
                extent: "0".into()
            })
        );
        assert_eq!(
            o.add_spec("=3").unwrap_err().to_string(),
            "--chunk \"=3\": expected dim=N[,dim=N…] or dataset:N,N,…"
        );
        assert_eq!(
            o.add_spec("x:1,a").unwrap_err().to_string(),
            "--chunk \"x:1,a\": \"a\" is not a positive integer"
        );
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size(" 512k "), Ok(512 << 10));
        assert_eq!(
            parse_size("4 parsecs").unwrap_err().to_string(),
            "\"4 parsecs\": unknown unit (use KiB, MiB or GiB)"
        );
        assert_eq!(
            parse_size("0").unwrap_err(),
            SizeError::NotPositive("0".into())
        );
        // The integer parser's error is kept as the cause.
        let e = parse_size("MiB").unwrap_err();
        assert_eq!(e.to_string(), "\"MiB\" is not a size");
        let cause = std::error::Error::source(&e).expect("a cause");
        assert!(cause.downcast_ref::<std::num::ParseIntError>().is_some());
        assert!(matches!(
            parse_size("99999999999999999999"),
            Err(SizeError::NotANumber { .. })
        ));
    }

    #[test]
    fn preferred_chunks_only_when_no_option_applies() {
        let dims = vec!["time".to_string(), "x".to_string()];
        let input = PlanInput {
            name: "v",
            shape: &[100, 1000],
            elem_size: 4,
            dims: Some(&dims),
            source_chunks: None,
            preferred_chunks: Some(&[3, 7]),
        };
        let mut o = PlanOptions::default();
        assert_eq!(plan(&input, &o).unwrap(), vec![3, 7]);
        // An option naming another dimension or dataset leaves it alone.
        o.add_spec("level=2").unwrap();
        o.add_spec("w:1,1").unwrap();
        assert_eq!(plan(&input, &o).unwrap(), vec![3, 7]);
        // Any option that applies re-plans freely (the preferred shape is no unit).
        o.add_spec("time=10").unwrap();
        assert_eq!(plan(&input, &o).unwrap(), vec![10, 1000]);
        let o = PlanOptions {
            target_bytes: Some(400),
            ..PlanOptions::default()
        };
        assert_eq!(plan(&input, &o).unwrap(), vec![1, 100]);
        // A preferred shape of the wrong rank, with a zero or over 64 MiB is ignored.
        for bad in [&[0u64, 7][..], &[3], &[1 << 25, 1]] {
            let bad = PlanInput {
                preferred_chunks: Some(bad),
                shape: &[1 << 30, 1000],
                ..input
            };
            assert_eq!(
                plan(&bad, &PlanOptions::default()).unwrap(),
                vec![1048, 1000]
            );
        }
    }

    fn arb_case() -> impl Strategy<Value = (Vec<u64>, u64, Option<Vec<u64>>, u64)> {
        (1usize..=8).prop_flat_map(|rank| {
            (
                proptest::collection::vec(0u64..3000, rank),
                prop_oneof![Just(1u64), Just(2), Just(4), Just(8)],
                proptest::option::of(proptest::collection::vec(1u64..700, rank)),
                1u64..(64 << 20),
            )
        })
    }

    proptest! {
        #[test]
        fn planner_properties((shape, elem, src, target) in arb_case()) {
            // Arrays whose byte size fits u64 (the pipeline refuses the others first).
            prop_assume!(shape.iter().try_fold(elem, |a, &d| a.checked_mul(d)).is_some());
            let c = p(&shape, elem, src.as_deref(), target);
            prop_assert_eq!(c.len(), shape.len());
            // Every extent positive: the chunks tile the shape (ceil division covers it and
            // edge chunks are clipped).
            prop_assert!(c.iter().all(|&x| x >= 1));
            let grid = crate::format::Grid::new(&shape, &c).unwrap();
            for a in 0..shape.len() {
                prop_assert!(grid.counts[a] * c[a] >= shape[a]);
                prop_assert!(shape[a] == 0 || (grid.counts[a] - 1) * c[a] < shape[a]);
            }
            let unit: Vec<u64> = (0..shape.len())
                .map(|a| src.as_ref().map_or(1, |s| s[a]).min(shape[a].max(1)))
                .collect();
            // Alignment: each chunk extent is a multiple of the source unit, or the whole axis.
            for a in 0..shape.len() {
                prop_assert!(c[a].is_multiple_of(unit[a]) || c[a] == shape[a].max(1),
                    "axis {} extent {} unit {}", a, c[a], unit[a]);
            }
            // Size: within the target unless one source unit alone is larger.
            let bytes = c.iter().fold(elem as u128, |acc, &x| acc * x as u128);
            let unit_bytes = unit.iter().fold(elem as u128, |acc, &x| acc * x as u128);
            prop_assert!(bytes <= (target as u128).max(unit_bytes),
                "chunk {:?} = {} bytes > target {}", c, bytes, target);
            // Trailing axes are whole: inside the innermost split axis everything is whole,
            // outside it every axis is one source unit (so chunks are as compact as the target
            // allows and follow the C order of the data).
            if let Some(k) = (0..shape.len()).rev().find(|&a| c[a] < shape[a].max(1)) {
                for b in 0..k {
                    prop_assert_eq!(c[b], unit[b], "outer axis {} of {:?}", b, c);
                }
            }
        }
    }
}
