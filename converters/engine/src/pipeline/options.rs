//! What shapes a conversion: `--codec` ([`CodecChoice`]) and what one conversion runs with
//! ([`ConvertOptions`]: its [`Settings`] and its runtime context).

use std::str::FromStr;

use crate::control::{Cancel, Progress};
use crate::settings::Settings;

/// The zstd level of `--codec zstd` without a level (the zstd CLI's default).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// The zstd level `--codec auto` uses for data the source stored compressed. Level 2 rather
/// than 3: measured on five kinds of 4 MiB chunks (BENCHMARKS.md, issue 14: noisy and smooth
/// f32, f64, masked f32, i16 counts) level 2 compresses 11–55 % faster on four of them, and its
/// output is between 2.8 % smaller and 7.1 % larger; on the netCDF-4 zlib case it is both
/// smaller (478 vs 490 MiB per GiB) and 25 % cheaper. `auto` serves scheduled conversions
/// that mirror the source's choice to compress; `--codec zstd:N` picks any level.
pub const AUTO_ZSTD_LEVEL: i32 = 2;

/// `--codec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodecChoice {
    /// Mirror the source: compressed source data → zstd, uncompressed → raw.
    Auto,
    /// `auto+ext`: as `auto`, but where it would pick zstd, the smallest of zstd and the
    /// extension codecs on a sample of each dataset's chunks ([`CodecChoice::Smallest`]).
    AutoExt,
    Raw,
    Zstd(i32),
    /// An extension codec (zstd over transformed elements) at a zstd level: `zstd-shuffle`,
    /// `zstd-bitshuffle`, `zstd-delta`, `zstd-delta-bitshuffle`, each with an optional
    /// `:LEVEL`. Naming one is the opt-in to a file the reference reader refuses
    /// (docs/FORMAT.md, "Extension codecs").
    Transformed(crate::format::Codec, i32),
    /// `smallest[:LEVEL]`: per dataset, the candidate that compresses a sample of its chunks
    /// smallest (`crate::pipeline::choose`). Without `+ext` the only candidate is zstd (the
    /// file stays v1); `smallest+ext[:LEVEL]` adds the extension codecs.
    Smallest {
        level: i32,
        ext: bool,
    },
}

/// The extension codecs `--codec` names (the order the chooser tries them in, after zstd).
pub const EXTENSION_CODECS: [crate::format::Codec; 4] = [
    crate::format::Codec::ZstdShuffle,
    crate::format::Codec::ZstdBitShuffle,
    crate::format::Codec::ZstdDelta,
    crate::format::Codec::ZstdDeltaBitShuffle,
];

/// The levels `--codec zstd:LEVEL` takes (zstd's positive levels).
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=22;

/// A `--codec` value that is none of `auto`, `raw`, `zstd`, `zstd:LEVEL`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "codec {0:?}: expected auto, auto+ext, raw, zstd[:{lo}..{hi}], zstd-shuffle[:LEVEL], \
     zstd-bitshuffle[:LEVEL], zstd-delta[:LEVEL], zstd-delta-bitshuffle[:LEVEL], smallest[:LEVEL] \
     or smallest+ext[:LEVEL]",
    lo = ZSTD_LEVELS.start(),
    hi = ZSTD_LEVELS.end()
)]
pub struct CodecError(pub String);

impl FromStr for CodecChoice {
    type Err = CodecError;
    fn from_str(s: &str) -> Result<Self, CodecError> {
        let bad = || CodecError(s.into());
        match s {
            "auto" => return Ok(CodecChoice::Auto),
            "auto+ext" => return Ok(CodecChoice::AutoExt),
            "raw" => return Ok(CodecChoice::Raw),
            _ => {}
        }
        let (name, level) = match s.split_once(':') {
            Some((n, l)) => {
                let l = l
                    .parse::<i32>()
                    .ok()
                    .filter(|l| ZSTD_LEVELS.contains(l))
                    .ok_or_else(bad)?;
                (n, l)
            }
            None => (s, DEFAULT_ZSTD_LEVEL),
        };
        match name {
            "zstd" => Ok(CodecChoice::Zstd(level)),
            "smallest" => Ok(CodecChoice::Smallest { level, ext: false }),
            "smallest+ext" => Ok(CodecChoice::Smallest { level, ext: true }),
            _ => EXTENSION_CODECS
                .into_iter()
                .find(|c| c.name() == name)
                .map(|c| CodecChoice::Transformed(c, level))
                .ok_or_else(bad),
        }
    }
}

impl std::fmt::Display for CodecChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CodecChoice::Auto => f.write_str("auto"),
            CodecChoice::Raw => f.write_str("raw"),
            CodecChoice::AutoExt => f.write_str("auto+ext"),
            CodecChoice::Zstd(l) => write!(f, "zstd:{l}"),
            CodecChoice::Transformed(c, l) => write!(f, "{}:{l}", c.name()),
            CodecChoice::Smallest { level, ext: false } => write!(f, "smallest:{level}"),
            CodecChoice::Smallest { level, ext: true } => write!(f, "smallest+ext:{level}"),
        }
    }
}

/// What the pipeline runs with: the conversion's [`Settings`] (the one serde type every front
/// end builds; the history row's params derive from it) and the part of the request's runtime
/// context the pipeline reads (progress, cancellation). The inputs are no part of it: they
/// arrive opened ([`super::Opened`]).
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    /// Every setting of the conversion (codec, chunking, selection, combine, threads…).
    pub settings: Settings,
    /// Told of the chunk work as it goes (the CLI draws a progress bar from it).
    pub progress: Option<Progress>,
    /// Asked between chunks whether to stop (the CLI's asks its signal handlers).
    pub cancel: Cancel,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions::from(Settings::default())
    }
}

impl From<Settings> for ConvertOptions {
    fn from(settings: Settings) -> Self {
        ConvertOptions {
            settings,
            progress: None,
            cancel: Cancel::never(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_choice_parses() {
        assert_eq!("auto".parse(), Ok(CodecChoice::Auto));
        assert_eq!("zstd".parse(), Ok(CodecChoice::Zstd(3)));
        assert_eq!("zstd:19".parse(), Ok(CodecChoice::Zstd(19)));
        assert!("zstd:0".parse::<CodecChoice>().is_err());
        assert_eq!(
            "lz4".parse::<CodecChoice>().unwrap_err().to_string(),
            "codec \"lz4\": expected auto, auto+ext, raw, zstd[:1..22], zstd-shuffle[:LEVEL], \
             zstd-bitshuffle[:LEVEL], zstd-delta[:LEVEL], zstd-delta-bitshuffle[:LEVEL], \
             smallest[:LEVEL] or smallest+ext[:LEVEL]"
        );
        for s in [
            "auto+ext",
            "zstd-shuffle:3",
            "zstd-bitshuffle:19",
            "zstd-delta:1",
            "zstd-delta-bitshuffle:5",
            "smallest:3",
            "smallest+ext:9",
        ] {
            assert_eq!(s.parse::<CodecChoice>().unwrap().to_string(), s);
        }
        assert_eq!(
            "zstd-delta".parse(),
            Ok(CodecChoice::Transformed(crate::format::Codec::ZstdDelta, 3))
        );
        assert_eq!(
            "smallest+ext".parse(),
            Ok(CodecChoice::Smallest {
                level: 3,
                ext: true
            })
        );
        for bad in [
            "zstd-xor",
            "zstd-shuffle:0",
            "smallest:x",
            "raw:3",
            "auto:2",
        ] {
            assert!(bad.parse::<CodecChoice>().is_err(), "{bad}");
        }
        assert_eq!(
            "zstd:23".parse::<CodecChoice>(),
            Err(CodecError("zstd:23".into()))
        );
        assert_eq!(CodecChoice::Zstd(7).to_string(), "zstd:7");
    }
}
