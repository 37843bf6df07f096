//! Checksums of a `.tet` file: what is recorded, where, and how it is checked.
//!
//! `.tet` v1 has no checksum field, so every check lives in places the reference reader ignores
//! (see `docs/FORMAT.md`, "Integrity"):
//!
//! - **zstd chunks we encode** carry zstd's own content checksum (the frame header's
//!   `Content_Checksum_flag`: the low 32 bits of XXH64 of the decoded bytes at the end of the
//!   frame). Every zstd decoder, the reference reader's included, checks it while decoding.
//! - **every chunk** — raw chunks and zstd frames without the flag above all, but ours with the
//!   flag too — has an xxh3-64 digest of its *stored* bytes in
//!   `metadata.tet_ext.chunk_digests.digests`, one entry per index row in index order: a 16-digit
//!   lowercase hex string, or `null`, which a reader accepts only for a zstd frame that carries its
//!   own checksum (our writer never writes `null`: hashing the compressed bytes costs little and
//!   lets the Zarr export check a frame it copies without decoding it).
//! - **the footer** ends with the top-level key `tet_footer_digest` = `"xxh3-64:<16 hex>"`, the
//!   xxh3-64 of the file's first bytes up to the end of the chunk index (superblock, directory,
//!   chunk index), then the metadata spill (when there is one), then the footer JSON text up to and
//!   including `xxh3-64:` — so the history, the metadata and the chunk digests are covered too.
//!   The key is always the last one of the footer object: the text ends with
//!   `,"tet_footer_digest":"xxh3-64:<16 hex>"}`.
//!
//! xxh3-64 (rather than crc32c): it runs at memory bandwidth on every x86-64 and aarch64 without
//! CPU feature detection (a conversion hashes each raw chunk once, a deep verify each stored
//! byte), a 64-bit value makes an undetected random corruption about 2^32 times less likely than a
//! 32-bit CRC, and it is the same family as the XXH64 zstd uses for its own frame checksum.

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use super::schema::{ChunkDigests, Lenient};

/// The digest algorithm's name, as recorded.
pub const ALGORITHM: &str = "xxh3-64";
/// Key under `metadata.tet_ext` holding the chunk digests.
pub const CHUNK_DIGESTS_KEY: &str = "chunk_digests";
/// Top-level footer key holding the footer digest (always the last key of the footer object).
pub const FOOTER_DIGEST_KEY: &str = "tet_footer_digest";
/// The footer text right before the footer digest's hex digits.
pub const FOOTER_DIGEST_PREFIX: &str = ",\"tet_footer_digest\":\"xxh3-64:";
/// What follows the hex digits: the closing quote and the end of the footer object.
pub const FOOTER_DIGEST_END: &str = "\"}";
/// Hex digits of a digest.
pub const HEX_LEN: usize = 16;

/// xxh3-64 of a chunk's stored bytes.
pub fn digest(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

/// A streaming xxh3-64 (the footer digest, a chunk read from another file in pieces).
#[derive(Clone)]
pub struct Hasher(Xxh3);

impl Default for Hasher {
    fn default() -> Self {
        Hasher(Xxh3::new())
    }
}

impl Hasher {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    pub fn finish(&self) -> u64 {
        self.0.digest()
    }
}

/// A digest as recorded: 16 lowercase hex digits.
pub fn hex(d: u64) -> String {
    format!("{d:016x}")
}

/// Inverse of [`hex`]; `None` unless exactly 16 lowercase hex digits.
pub fn parse_hex(s: &str) -> Option<u64> {
    if s.len() != HEX_LEN || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// The zstd frame magic number, little-endian.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Whether a zstd frame's header sets the content checksum flag; `None` when `frame` does not
/// start with a zstd frame header.
pub fn zstd_has_checksum(frame: &[u8]) -> Option<bool> {
    if frame.get(..4)? != ZSTD_MAGIC {
        return None;
    }
    // Frame_Header_Descriptor, bit 2: Content_Checksum_flag.
    Some(frame.get(4)? & 0b100 != 0)
}

/// The checksum a chunk is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkCheck {
    /// An xxh3-64 digest of its stored bytes, from the footer.
    Digest(u64),
    /// Its zstd frame's own content checksum (checked by decoding).
    ZstdChecksum,
    /// Nothing: a file without checksums (the reference's, ours before they existed).
    None,
}

/// The footer digest of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FooterDigest {
    /// The file records none (the footer is unreadable, or written without checksums).
    Absent,
    /// Recorded and equal to the bytes.
    Ok(u64),
    /// Recorded, but the bytes hash differently.
    Mismatch { recorded: u64, computed: u64 },
    /// The key is there but not in the form [`FOOTER_DIGEST_PREFIX`] + hex + `"}` at the end.
    Malformed(String),
}

/// Why the recorded chunk digests cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestsError {
    #[error(
        "tet_ext.{CHUNK_DIGESTS_KEY} is not {{\"algorithm\": …, \"digests\": [hex or null, …]}}"
    )]
    Malformed,
    #[error("tet_ext.{CHUNK_DIGESTS_KEY}.algorithm is {0:?}, not \"{ALGORITHM}\"")]
    Algorithm(String),
    #[error("tet_ext.{CHUNK_DIGESTS_KEY} lists {listed} digests for {rows} index rows")]
    Count { listed: usize, rows: usize },
    #[error("tet_ext.{CHUNK_DIGESTS_KEY}: digest {0} is not 16 lowercase hex digits")]
    Digest(usize),
}

/// Parses `metadata.tet_ext.chunk_digests` of a file with `rows` index rows.
pub fn parse_chunk_digests(
    v: &Lenient<ChunkDigests>,
    rows: usize,
) -> Result<Vec<Option<u64>>, DigestsError> {
    let d = v.typed().ok_or(DigestsError::Malformed)?;
    if d.algorithm != ALGORITHM {
        return Err(DigestsError::Algorithm(d.algorithm.clone()));
    }
    if d.digests.len() != rows {
        return Err(DigestsError::Count {
            listed: d.digests.len(),
            rows,
        });
    }
    d.digests
        .iter()
        .enumerate()
        .map(|(i, d)| match d {
            None => Ok(None),
            Some(s) => parse_hex(s).map(Some).ok_or(DigestsError::Digest(i)),
        })
        .collect()
}

/// The `chunk_digests` record of a list of digests in index order.
pub fn chunk_digests(digests: impl Iterator<Item = Option<u64>>) -> ChunkDigests {
    ChunkDigests {
        algorithm: ALGORITHM.into(),
        digests: digests.map(|d| d.map(hex)).collect(),
        other: Default::default(),
    }
}

/// Why a stored zstd frame is not the chunk it should be.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("zstd decoder")]
    Decoder(#[source] std::io::Error),
    /// The decoded bytes do not match the frame's content checksum.
    #[error("decoded bytes do not match the zstd frame checksum")]
    Checksum(#[source] std::io::Error),
    #[error("zstd payload does not decode")]
    Decode(#[source] std::io::Error),
    #[error("zstd payload decodes to more than raw_byte_len {raw_len}")]
    TooLong { raw_len: u64 },
    #[error("zstd payload decodes to {total} bytes, raw_byte_len is {raw_len}")]
    Length { total: u64, raw_len: u64 },
    #[error("{trailing} bytes follow the zstd frame inside the payload")]
    Trailing { trailing: usize },
}

impl FrameError {
    /// Whether the failure is a checksum mismatch (the stored bytes changed).
    pub fn is_checksum(&self) -> bool {
        matches!(self, FrameError::Checksum(_))
    }
}

/// Decodes one zstd frame through `scratch`, checking that it yields exactly `raw_len` bytes,
/// that nothing follows it and (when the frame carries one) its content checksum. Never
/// allocates in proportion to what the frame claims.
pub fn decode_check(src: &[u8], raw_len: u64, scratch: &mut [u8]) -> Result<(), FrameError> {
    use std::io::Read;
    let mut dec = zstd::stream::read::Decoder::with_buffer(src)
        .map_err(FrameError::Decoder)?
        .single_frame();
    let mut total = 0u64;
    loop {
        let n = match dec.read(scratch) {
            Ok(n) => n,
            // zstd reports its error code only as the io::Error's text.
            Err(e) if e.to_string().to_ascii_lowercase().contains("checksum") => {
                return Err(FrameError::Checksum(e))
            }
            Err(e) => return Err(FrameError::Decode(e)),
        };
        if n == 0 {
            break;
        }
        total = total.saturating_add(n as u64);
        if total > raw_len {
            return Err(FrameError::TooLong { raw_len });
        }
    }
    if total != raw_len {
        return Err(FrameError::Length { total, raw_len });
    }
    let rest = dec.finish();
    if !rest.is_empty() {
        return Err(FrameError::Trailing {
            trailing: rest.len(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_other_forms() {
        for d in [0, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
            assert_eq!(parse_hex(&hex(d)), Some(d));
        }
        for bad in [
            "",
            "0",
            "0123456789ABCDEF",
            "0123456789abcdeg",
            "+123456789abcdef",
        ] {
            assert_eq!(parse_hex(bad), None, "{bad}");
        }
    }

    #[test]
    fn zstd_checksum_flag_is_read_from_the_header() {
        let data = vec![7u8; 1000];
        let plain = zstd::bulk::compress(&data, 3).unwrap();
        let mut c = zstd::bulk::Compressor::new(3).unwrap();
        c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
            .unwrap();
        let flagged = c.compress(&data).unwrap();
        assert_eq!(zstd_has_checksum(&plain), Some(false));
        assert_eq!(zstd_has_checksum(&flagged), Some(true));
        assert_eq!(zstd_has_checksum(b"TETR\0"), None);
        assert_eq!(zstd_has_checksum(&flagged[..4]), None);
        let mut scratch = vec![0u8; 256];
        assert!(decode_check(&flagged, 1000, &mut scratch).is_ok());
        // The checksum is the frame's last 4 bytes: damage it and decoding says so.
        let mut bad = flagged.clone();
        *bad.last_mut().unwrap() ^= 1;
        let e = decode_check(&bad, 1000, &mut scratch).unwrap_err();
        assert!(e.is_checksum(), "{e}");
        assert!(decode_check(&plain, 999, &mut scratch).is_err());
    }

    #[test]
    fn chunk_digests_parse_back() {
        let v = serde_json::to_value(chunk_digests([Some(5), None, Some(u64::MAX)].into_iter()))
            .unwrap();
        assert_eq!(
            v.to_string(),
            r#"{"algorithm":"xxh3-64","digests":["0000000000000005",null,"ffffffffffffffff"]}"#
        );
        let read = |v: &serde_json::Value| -> Lenient<ChunkDigests> {
            serde_json::from_value(v.clone()).unwrap()
        };
        assert_eq!(
            parse_chunk_digests(&read(&v), 3).unwrap(),
            vec![Some(5), None, Some(u64::MAX)]
        );
        assert_eq!(
            parse_chunk_digests(&read(&v), 2),
            Err(DigestsError::Count { listed: 3, rows: 2 })
        );
        let mut w = v.clone();
        w["algorithm"] = "crc32c".into();
        assert_eq!(
            parse_chunk_digests(&read(&w), 3),
            Err(DigestsError::Algorithm("crc32c".into()))
        );
        w = v.clone();
        w["digests"][0] = 5.into();
        assert_eq!(
            parse_chunk_digests(&read(&w), 3),
            Err(DigestsError::Malformed)
        );
        w = v;
        w["digests"][2] = "FFFFFFFFFFFFFFFF".into();
        assert_eq!(
            parse_chunk_digests(&read(&w), 3),
            Err(DigestsError::Digest(2))
        );
    }
}
