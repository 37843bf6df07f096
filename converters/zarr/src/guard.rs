//! Guards between zarrs and untrusted chunk bytes.
//!
//! zarrs trusts sizes it finds inside chunk files in two places, which a corrupt or hostile
//! store can turn into huge allocations (a process abort, not an error):
//!
//! * the `zstd` codec sizes its output buffer from the frame header's content size
//!   (`ZSTD_decompressBound`); a few flipped header bits can claim terabytes. [`GuardedCodec`]
//!   wraps zarrs' own zstd codec and decodes into a buffer no larger than the size the codec
//!   chain expects (the decoded chunk size), failing with an error when the data is larger.
//! * the sharding codec reads inner chunks at the offsets and lengths of the shard index, and
//!   the file-system store allocates each requested range before reading it. [`GuardedStore`]
//!   wraps the store and refuses any byte range that does not lie inside the file. When a
//!   whole shard is read at once, zarrs slices it at the index's offsets with unchecked
//!   arithmetic (a panic on a corrupt index); for a sharded array the store therefore also
//!   checks every index entry of a shard it hands out whole ([`ShardIndex`]).
//!
//! And one place where it does not check at all: the `crc32c` codec's partial decoder (used
//! whenever a read covers part of a chunk) strips the checksum without verifying it, and
//! underflows on a chunk shorter than 4 bytes. [`GuardedCodec`] also wraps `crc32c`, so that
//! every decode, partial or not, goes through the verifying whole-value decoder.
//!
//! The wrappers are registered once, process-wide, as zarrs runtime codec plugins (which take
//! precedence over the built-in ones) for `zstd` and `crc32c`, Zarr v3 and v2 alike, and the
//! `numcodecs.zstd` / `numcodecs.crc32c` names zarr-python 3 writes (made by
//! `filters::numcodecs_v3`).

use std::any::Any;
use std::borrow::Cow;
use std::io::Read;
use std::sync::{Arc, Once};

use zarrs::array::codec::api::{
    register_codec_v2, register_codec_v3, ArrayBytesRaw, BytesRepresentation,
    BytesToBytesCodecTraits, Codec, CodecError, CodecMetadataOptions, CodecOptions,
    CodecRuntimePluginV2, CodecRuntimePluginV3, CodecTraits, CodecTraitsV2, CodecTraitsV3,
    PartialDecoderCapability, PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::array::codec::{Crc32cCodec, ZstdCodec};
use zarrs::metadata::Configuration;
use zarrs::plugin::{ExtensionName, PluginCreateError, ZarrVersion};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    Bytes, MaybeBytes, MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey,
};

/// The most bytes one decoded chunk (the unit zarrs decodes at once) may have.
pub const MAX_DECODED_CHUNK: u64 = 2 << 30;

/// Registers [`GuardedCodec`] for `zstd` and `crc32c` (v3 names and v2 ids). Idempotent.
pub fn register_plugins() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_codec_v3(CodecRuntimePluginV3::new(
            |name| name == "zstd" || name == "numcodecs.zstd",
            |metadata| {
                let codec = if metadata.name() == "numcodecs.zstd" {
                    crate::filters::numcodecs_v3(metadata)?
                } else {
                    <ZstdCodec as CodecTraitsV3>::create(metadata)?
                };
                GuardedCodec::wrap(codec, true)
            },
        ));
        register_codec_v2(CodecRuntimePluginV2::new(
            |name| name == "zstd",
            |metadata| GuardedCodec::wrap(<ZstdCodec as CodecTraitsV2>::create(metadata)?, true),
        ));
        register_codec_v3(CodecRuntimePluginV3::new(
            |name| name == "crc32c" || name == "numcodecs.crc32c",
            |metadata| {
                let codec = if metadata.name() == "numcodecs.crc32c" {
                    crate::filters::numcodecs_v3(metadata)?
                } else {
                    <Crc32cCodec as CodecTraitsV3>::create(metadata)?
                };
                GuardedCodec::wrap(codec, false)
            },
        ));
        register_codec_v2(CodecRuntimePluginV2::new(
            |name| name == "crc32c",
            |metadata| GuardedCodec::wrap(<Crc32cCodec as CodecTraitsV2>::create(metadata)?, false),
        ));
    });
}

/// A zarrs bytes-to-bytes codec whose every decode is a whole-value decode: zarrs' own
/// (verifying) decoder, or for zstd a decoder whose output buffer is bounded by the expected
/// size. Partial decoders use the default, which decodes the whole value through
/// [`BytesToBytesCodecTraits::decode`] of this wrapper.
#[derive(Debug)]
pub struct GuardedCodec {
    inner: Arc<dyn BytesToBytesCodecTraits>,
    zstd: bool,
}

impl GuardedCodec {
    fn wrap(codec: Codec, zstd: bool) -> Result<Codec, PluginCreateError> {
        match codec {
            Codec::BytesToBytes(inner) => {
                Ok(Codec::BytesToBytes(Arc::new(GuardedCodec { inner, zstd })))
            }
            _ => Err(PluginCreateError::Other(
                "expected a bytes-to-bytes codec".into(),
            )),
        }
    }
}

impl ExtensionName for GuardedCodec {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        self.inner.name(version)
    }
}

impl CodecTraits for GuardedCodec {
    fn as_any(&self) -> &dyn Any {
        self.inner.as_any()
    }

    fn configuration(
        &self,
        version: ZarrVersion,
        options: &CodecMetadataOptions,
    ) -> Option<Configuration> {
        self.inner.configuration(version, options)
    }

    fn partial_decoder_capability(&self) -> PartialDecoderCapability {
        PartialDecoderCapability {
            partial_read: false,
            partial_decode: false,
        }
    }

    fn partial_encoder_capability(&self) -> PartialEncoderCapability {
        self.inner.partial_encoder_capability()
    }
}

impl BytesToBytesCodecTraits for GuardedCodec {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(
        &self,
        decoded_representation: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        self.inner.recommended_concurrency(decoded_representation)
    }

    fn encoded_representation(
        &self,
        decoded_representation: &BytesRepresentation,
    ) -> BytesRepresentation {
        self.inner.encoded_representation(decoded_representation)
    }

    fn encode<'a>(
        &self,
        decoded_value: ArrayBytesRaw<'a>,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        self.inner.encode(decoded_value, options)
    }

    fn decode<'a>(
        &self,
        encoded_value: ArrayBytesRaw<'a>,
        decoded_representation: &BytesRepresentation,
        options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        if !self.zstd {
            return self
                .inner
                .decode(encoded_value, decoded_representation, options);
        }
        let limit = match decoded_representation {
            BytesRepresentation::FixedSize(n) | BytesRepresentation::BoundedSize(n) => {
                (*n).min(MAX_DECODED_CHUNK)
            }
            BytesRepresentation::UnboundedSize => MAX_DECODED_CHUNK,
        };
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        bounded_zstd_decode(&encoded_value, limit, decoded_representation)
            .map(Cow::Owned)
            // zarrs' own I/O variant, so the zstd error stays the cause.
            .map_err(|e| CodecError::IOError(std::sync::Arc::new(std::io::Error::other(e))))
    }
}

/// Why a zstd chunk does not decode within its bound.
#[derive(Debug, thiserror::Error)]
enum ZstdChunkError {
    /// The one-call decoder failed (zstd's error).
    #[error("zstd chunk does not decode to at most {limit} bytes: {source}")]
    Bounded {
        /// The bound.
        limit: usize,
        /// zstd's error.
        source: std::io::Error,
    },
    /// The streaming decoder failed (zstd's error).
    #[error("zstd chunk is corrupt: {0}")]
    Corrupt(#[source] std::io::Error),
    /// The stream goes on past the bound.
    #[error("zstd chunk decodes to more than {0} bytes")]
    TooLarge(usize),
}

/// zstd-decodes `data` (one or more frames) into at most `limit` bytes.
fn bounded_zstd_decode(
    data: &[u8],
    limit: usize,
    expected: &BytesRepresentation,
) -> Result<Vec<u8>, ZstdChunkError> {
    match expected {
        // The expected size is known (and trusted: it comes from the array metadata, checked at
        // open): decode in one call into a buffer of at most that size.
        BytesRepresentation::FixedSize(_) | BytesRepresentation::BoundedSize(_) => {
            zstd::bulk::decompress(data, limit)
                .map_err(|source| ZstdChunkError::Bounded { limit, source })
        }
        // Unknown size (variable-length data): stream, growing with the real output only.
        BytesRepresentation::UnboundedSize => {
            let decoder =
                zstd::stream::read::Decoder::new(data).map_err(ZstdChunkError::Corrupt)?;
            let mut out = Vec::new();
            decoder
                .take(limit as u64 + 1)
                .read_to_end(&mut out)
                .map_err(ZstdChunkError::Corrupt)?;
            if out.len() > limit {
                return Err(ZstdChunkError::TooLarge(limit));
            }
            Ok(out)
        }
    }
}

/// The layout of a shard index (sharding codec with a plain `bytes` index, optionally followed
/// by `crc32c`), for checking whole shards before zarrs slices them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardIndex {
    /// Inner chunks per shard (index entries of two u64 each).
    pub entries: u64,
    /// The index is at the end of the shard (else at the start).
    pub at_end: bool,
    pub big_endian: bool,
    /// A 4-byte crc32c follows the index entries.
    pub checksum: bool,
}

impl ShardIndex {
    /// The index layout of a `sharding_indexed` codec configuration, when its index codecs
    /// are ones this check understands.
    pub fn from_configuration(
        config: &serde_json::Map<String, serde_json::Value>,
        entries: u64,
    ) -> Option<ShardIndex> {
        use serde_json::Value;
        let at_end = match config.get("index_location") {
            None => true,
            Some(Value::String(s)) if s == "end" => true,
            Some(Value::String(s)) if s == "start" => false,
            _ => return None,
        };
        let codecs = config.get("index_codecs")?.as_array()?;
        let name = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => o.get("name").and_then(Value::as_str).map(str::to_string),
            _ => None,
        };
        let (first, rest) = codecs.split_first()?;
        if name(first)? != "bytes" {
            return None;
        }
        let big_endian = first
            .get("configuration")
            .and_then(|c| c.get("endian"))
            .and_then(Value::as_str)
            == Some("big");
        let checksum = match rest {
            [] => false,
            [c] if name(c).as_deref() == Some("crc32c") => true,
            _ => return None,
        };
        Some(ShardIndex {
            entries,
            at_end,
            big_endian,
            checksum,
        })
    }

    /// Checks that every entry of the index of `shard` is empty or lies inside the shard.
    fn check(&self, key: &StoreKey, shard: &[u8]) -> Result<(), StorageError> {
        let len = shard.len() as u64;
        let index_len = self
            .entries
            .checked_mul(16)
            .and_then(|n| n.checked_add(if self.checksum { 4 } else { 0 }));
        let Some(index_len) = index_len.filter(|&n| n <= len) else {
            // Too short for its index: zarrs reports that itself.
            return Ok(());
        };
        let index_len = index_len as usize;
        let index = if self.at_end {
            &shard[shard.len() - index_len..]
        } else {
            &shard[..index_len]
        };
        let word = |b: &[u8]| {
            let a: [u8; 8] = b.try_into().unwrap_or_default();
            if self.big_endian {
                u64::from_be_bytes(a)
            } else {
                u64::from_le_bytes(a)
            }
        };
        for (i, e) in index.chunks_exact(16).enumerate() {
            let (offset, nbytes) = (word(&e[..8]), word(&e[8..]));
            if offset == u64::MAX && nbytes == u64::MAX {
                continue;
            }
            if offset.checked_add(nbytes).is_none_or(|end| end > len) {
                return Err(StorageError::Other(format!(
                    "{key}: shard index entry {i} points at {nbytes} bytes at offset {offset}, \
                     outside the {len}-byte shard"
                )));
            }
        }
        Ok(())
    }
}

/// A read-only store that refuses byte ranges outside the stored value before the inner store
/// allocates a buffer for them, and checks the index of whole shards.
#[derive(Debug)]
pub struct GuardedStore<S: ?Sized> {
    inner: Arc<S>,
    shard_index: Option<ShardIndex>,
}

impl<S: ?Sized> GuardedStore<S> {
    pub fn new(inner: Arc<S>, shard_index: Option<ShardIndex>) -> Self {
        GuardedStore { inner, shard_index }
    }
}

fn range_fits(range: &ByteRange, size: u64) -> bool {
    match *range {
        ByteRange::FromStart(offset, None) => offset <= size,
        ByteRange::FromStart(offset, Some(len)) => {
            offset.checked_add(len).is_some_and(|e| e <= size)
        }
        ByteRange::Suffix(len) => len <= size,
    }
}

fn describe(range: &ByteRange) -> String {
    match *range {
        ByteRange::FromStart(offset, None) => format!("from byte {offset} to the end"),
        ByteRange::FromStart(offset, Some(len)) => format!("{len} bytes at offset {offset}"),
        ByteRange::Suffix(len) => format!("the last {len} bytes"),
    }
}

impl<S: ?Sized + ReadableStorageTraits> ReadableStorageTraits for GuardedStore<S> {
    fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        let value = self.inner.get(key)?;
        if let (Some(bytes), Some(index)) = (&value, &self.shard_index) {
            index.check(key, bytes)?;
        }
        Ok(value)
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let ranges: Vec<ByteRange> = byte_ranges.collect();
        let Some(size) = self.inner.size_key(key)? else {
            return Ok(None);
        };
        if let Some(bad) = ranges.iter().find(|r| !range_fits(r, size)) {
            return Err(StorageError::Other(format!(
                "{key}: read of {} is outside the {size}-byte file (corrupt shard index?)",
                describe(bad)
            )));
        }
        let whole: Vec<bool> = ranges
            .iter()
            .map(|r| matches!(r, ByteRange::FromStart(0, None)))
            .collect();
        let Some(index) = self.shard_index.filter(|_| whole.contains(&true)) else {
            return self
                .inner
                .get_partial_many(key, Box::new(ranges.into_iter()));
        };
        // Whole values requested: check them as shards before handing them out.
        let Some(values) = self
            .inner
            .get_partial_many(key, Box::new(ranges.into_iter()))?
        else {
            return Ok(None);
        };
        let values: Vec<Result<Bytes, StorageError>> = values.collect();
        for (v, w) in values.iter().zip(&whole) {
            if let (Ok(bytes), true) = (v, w) {
                index.check(key, bytes)?;
            }
        }
        Ok(Some(Box::new(values.into_iter())))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.inner.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        self.inner.supports_get_partial()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert!(range_fits(&ByteRange::FromStart(0, None), 0));
        assert!(range_fits(&ByteRange::FromStart(3, Some(7)), 10));
        assert!(!range_fits(&ByteRange::FromStart(3, Some(8)), 10));
        assert!(!range_fits(&ByteRange::FromStart(u64::MAX, Some(2)), 10));
        assert!(!range_fits(&ByteRange::FromStart(11, None), 10));
        assert!(range_fits(&ByteRange::Suffix(10), 10));
        assert!(!range_fits(&ByteRange::Suffix(11), 10));
    }

    #[test]
    fn shard_index_check() {
        let conf: serde_json::Value = serde_json::json!({
            "chunk_shape": [2], "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]});
        let idx = ShardIndex::from_configuration(conf.as_object().unwrap(), 2).unwrap();
        assert!(idx.at_end && idx.checksum && !idx.big_endian);
        let key = StoreKey::new("a/c/0").unwrap();
        let mut shard = vec![7u8; 10];
        for v in [0u64, 10, u64::MAX, u64::MAX] {
            shard.extend_from_slice(&v.to_le_bytes());
        }
        shard.extend_from_slice(&[0; 4]);
        assert!(idx.check(&key, &shard).is_ok());
        let n = shard.len();
        shard[n - 36..n - 28].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        assert!(idx.check(&key, &shard).is_err());
        let conf = serde_json::json!({"index_codecs": [{"name": "zstd"}]});
        assert!(ShardIndex::from_configuration(conf.as_object().unwrap(), 2).is_none());
    }

    #[test]
    fn zstd_is_bounded() {
        let data: Vec<u8> = (0..1000u32).flat_map(|x| x.to_le_bytes()).collect();
        let enc = zstd::bulk::compress(&data, 3).unwrap();
        let fixed = BytesRepresentation::FixedSize(4000);
        assert_eq!(bounded_zstd_decode(&enc, 4000, &fixed).unwrap(), data);
        assert!(bounded_zstd_decode(&enc, 3999, &fixed).is_err());
        let unb = BytesRepresentation::UnboundedSize;
        assert_eq!(bounded_zstd_decode(&enc, 4000, &unb).unwrap(), data);
        assert!(bounded_zstd_decode(&enc, 100, &unb).is_err());
        // A frame header claiming an absurd content size costs nothing.
        let mut bomb = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
        bomb.extend_from_slice(&(1u64 << 50).to_le_bytes());
        bomb.extend_from_slice(&[0x01, 0x00, 0x00]);
        assert!(bounded_zstd_decode(&bomb, 4000, &fixed).is_err());
        assert!(bounded_zstd_decode(&bomb, 4000, &unb).is_err());
        assert!(bounded_zstd_decode(b"garbage", 4000, &fixed).is_err());
    }
}
