//! `--codec smallest[+ext][:LEVEL]` and `--codec auto+ext`: per dataset, the codec that
//! compresses a sample of its chunks smallest. Deterministic: the sample is a fixed set of grid
//! positions, the candidates are tried in a fixed order and a tie keeps the earlier one (zstd,
//! the v1 codec, first), so the same input and options give the same choice. What was chosen is
//! recorded in the history row ([`record`]).

use std::collections::BTreeMap;

use tet_source::Source;

use super::compressor::chunk_compressor;
use super::options::EXTENSION_CODECS;
use super::plan::Planned;
use super::report::{refused, ConvertError};
use crate::format::codec::ChunkCodec;
use crate::format::{Codec, Grid};
use crate::meta::Widen;

/// Chunks per dataset the candidates are tried on: spread evenly over the grid's linear order
/// (the first chunk, then `k * total / SAMPLE_CHUNKS`).
pub const SAMPLE_CHUNKS: u64 = 4;

/// History param: the chooser's candidates and sample (`zstd,zstd-shuffle,…;sample=4`).
pub const CHOOSER_KEY: &str = "codec_chooser";
/// History param: how many datasets each codec was chosen for (`zstd-delta=3,zstd=1`).
pub const CHOSEN_KEY: &str = "codec_chosen";

/// The candidates, in the order they are tried: zstd, then (with `ext`) the extension codecs.
pub fn candidates(ext: bool) -> Vec<Codec> {
    let mut c = vec![Codec::Zstd];
    if ext {
        c.extend(EXTENSION_CODECS);
    }
    c
}

/// The grid positions (linear, C order) of the sample.
fn sample(total: u64) -> Vec<u64> {
    if total <= SAMPLE_CHUNKS {
        (0..total).collect()
    } else {
        let mut v: Vec<u64> = (0..SAMPLE_CHUNKS)
            .map(|k| (u128::from(k) * u128::from(total) / u128::from(SAMPLE_CHUNKS)) as u64)
            .collect();
        v.dedup();
        v
    }
}

/// What one dataset's choice needs to know of it.
pub(super) struct Candidate<'a> {
    pub var: usize,
    pub grid: &'a Grid,
    pub widen: Widen,
    /// The stored element size (after widening).
    pub elem: usize,
}

/// The candidate whose frames of the sampled chunks are smallest in total at `level` (the first
/// of equals); a dataset without chunks gets the first candidate.
pub(super) fn choose(
    source: &dyn Source,
    d: &Candidate<'_>,
    level: i32,
    candidates: &[Codec],
) -> Result<Codec, ConvertError> {
    let Some(&first) = candidates.first() else {
        return Err(refused("no codec to choose from"));
    };
    let src_elem = source.variables()[d.var].dtype.size() as u64;
    let mut sizes = vec![0u64; candidates.len()];
    let mut comp = chunk_compressor(level, false)?;
    let (mut buf, mut wide, mut scratch, mut out) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for l in sample(d.grid.total) {
        let coords = d.grid.coords(l);
        let (start, count) = d.grid.chunk_region(&coords);
        let n = count
            .iter()
            .try_fold(src_elem, |a, &c| a.checked_mul(c))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| refused("chunk larger than the address space"))?;
        buf.clear();
        buf.resize(n, 0);
        source.read_region(d.var, &start, &count, &mut buf)?;
        let data: &[u8] = if d.widen.converts() {
            d.widen.apply(&buf, &mut wide);
            &wide
        } else {
            &buf
        };
        for (size, &c) in sizes.iter_mut().zip(candidates) {
            ChunkCodec::new(c, d.elem).encode(data, &mut comp, &mut scratch, &mut out)?;
            *size = size.saturating_add(out.len() as u64);
        }
    }
    let best = sizes
        .iter()
        .zip(candidates)
        .min_by_key(|(s, _)| **s)
        .map_or(first, |(_, &c)| c);
    log::debug!(
        "variable {}: sampled sizes {:?} → {}",
        d.var,
        candidates
            .iter()
            .map(|c| c.name())
            .zip(&sizes)
            .collect::<Vec<_>>(),
        best.name()
    );
    Ok(best)
}

/// Records the chooser's rule and its choices in the history params, when it ran.
pub(super) fn record(
    planned: &[Planned],
    ext: Option<bool>,
    params: &mut BTreeMap<String, String>,
) {
    let Some(ext) = ext else {
        return;
    };
    let names: Vec<&str> = candidates(ext).iter().map(|c| c.name()).collect();
    params.insert(
        CHOOSER_KEY.into(),
        format!("{};sample={SAMPLE_CHUNKS}", names.join(",")),
    );
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for p in planned.iter().filter(|p| p.codec != Codec::Raw) {
        *counts.entry(p.codec.name()).or_default() += 1;
    }
    let chosen: Vec<String> = counts.iter().map(|(c, n)| format!("{c}={n}")).collect();
    params.insert(CHOSEN_KEY.into(), chosen.join(","));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_spread_and_fixed() {
        assert_eq!(sample(0), Vec::<u64>::new());
        assert_eq!(sample(3), vec![0, 1, 2]);
        assert_eq!(sample(4), vec![0, 1, 2, 3]);
        assert_eq!(sample(96), vec![0, 24, 48, 72]);
        assert_eq!(sample(5), vec![0, 1, 2, 3]);
    }
}
