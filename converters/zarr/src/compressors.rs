//! numcodecs compressors and checksums that zarrs lacks, decoded as numcodecs 0.16 decodes
//! them, under their Zarr v2 ids and the `numcodecs.<id>` names zarr-python 3 writes in Zarr v3
//! metadata (runtime plugins, which take precedence over zarrs' built-in codecs):
//!
//! * `lz4(acceleration)`: a 4-byte little-endian decoded size, then one LZ4 block
//!   (numcodecs' `LZ4.decode`), decompressed by `lz4_flex`.
//! * `lzma(format, check, preset, filters)`: Python's `lzma.decompress` of the chunk; `format`
//!   1 (`.xz`, one or more streams, every check type verified) or 2 (`.lzma` "alone"), or 0
//!   (either, told apart by the `.xz` magic), decompressed by `lzma-rust2`. `format` 3 (raw, a
//!   custom filter chain) is an unsupported codec, as is a filter chain with another format
//!   (numcodecs itself refuses it).
//! * `crc32(location)`: zlib's CRC-32 of the payload as 4 little-endian bytes at the `start`
//!   (numcodecs' default) or the `end`, verified (`crc32fast`).
//! * `jenkins_lookup3(initval, prefix)`: Bob Jenkins' lookup3 `hashlittle` (the function HDF5
//!   checksums its metadata with) of `prefix` + payload, seeded with `initval`, as 4
//!   little-endian bytes after the payload, verified. The hash is written here (no maintained
//!   crate has it; it is a checksum, not a decoder); `prefix` is `null` or a list of bytes.
//! * `zfpy(mode, tolerance, rate, precision)`: the chunk is a zfp stream with a full header
//!   (`zfpy.compress_numpy`): the header gives the scalar type, the extents and the mode;
//!   libzfp (the crate `zfp-sys-cc`, the copy the Tensogram importer already links) decodes it.
//!   zfpy's first extent is the fastest-varying one, the C-order last axis, so the values
//!   come out in C order. In Zarr v2 zarr-python gives zfpy the chunk as an array and zarrs
//!   places the compressor after the `bytes` codec; in Zarr v3 `numcodecs.zfpy` is the
//!   array-to-bytes codec, so `lib.rs` puts a little-endian `bytes` codec before it when it
//!   reads the metadata, and the codec here is the same bytes-to-bytes decoder.
//!
//! Every decoder checks the decoded size against the chunk's (a wrong size is a read error)
//! and never allocates more than that, whatever sizes the chunk bytes claim. Encoding is not
//! implemented: nothing here writes Zarr.
//!
//! Also here: zarr-python 3 writes `numcodecs.blosc` and `numcodecs.bz2` with only the
//! arguments its caller gave (`{}` for `Blosc()`), where numcodecs fills in its defaults
//! (Blosc: `cname` lz4, `clevel` 5, `shuffle` 1, `blocksize` 0; BZ2: `level` 1) and zarrs
//! requires them; [`numcodecs_defaults`] fills them in.

use std::any::Any;
use std::borrow::Cow;
use std::io::Read;
use std::sync::{Arc, Once};

use serde_json::{Map, Value};
use zarrs::array::codec::api::{
    register_codec_v2, register_codec_v3, ArrayBytesRaw, BytesRepresentation,
    BytesToBytesCodecTraits, Codec, CodecError, CodecMetadataOptions, CodecOptions,
    CodecRuntimePluginV2, CodecRuntimePluginV3, CodecTraits, PartialDecoderCapability,
    PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::metadata::Configuration;
use zarrs::plugin::{ExtensionName, PluginCreateError, PluginUnsupportedError, ZarrVersion};

use crate::guard::MAX_DECODED_CHUNK;

/// The codecs of this module: (kind, Zarr v2 id, Zarr v3 name).
const CODECS: &[(Kind, &str, &str)] = &[
    (Kind::Lz4, "lz4", "numcodecs.lz4"),
    (Kind::Lzma, "lzma", "numcodecs.lzma"),
    (Kind::Crc32, "crc32", "numcodecs.crc32"),
    (
        Kind::Jenkins,
        "jenkins_lookup3",
        "numcodecs.jenkins_lookup3",
    ),
    (Kind::Zfpy, "zfpy", "numcodecs.zfpy"),
];

/// The v3 name of zfpy, the one array-to-bytes codec here (see the module docs).
pub const ZFPY_V3: &str = "numcodecs.zfpy";

/// Registers the codecs. Idempotent.
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for &(kind, id, name) in CODECS {
            register_codec_v3(CodecRuntimePluginV3::new(
                move |n| n == name || n == id,
                move |metadata| {
                    let empty = Configuration::default();
                    let config = metadata.configuration().unwrap_or(&empty);
                    Compressor::from_config(kind, config).map(|c| Codec::BytesToBytes(Arc::new(c)))
                },
            ));
            register_codec_v2(CodecRuntimePluginV2::new(
                move |n| n == id,
                move |metadata| {
                    Compressor::from_config(kind, metadata.configuration())
                        .map(|c| Codec::BytesToBytes(Arc::new(c)))
                },
            ));
        }
    });
}

/// Fills in the numcodecs defaults of a `blosc` or `bz2` configuration (keys absent only;
/// `id` is the numcodecs id, without `numcodecs.`).
pub fn numcodecs_defaults(id: &str, config: &mut Map<String, Value>) {
    let defaults: Vec<(&str, Value)> = match id {
        "blosc" => vec![
            ("cname", Value::from("lz4")),
            ("clevel", Value::from(5)),
            ("shuffle", Value::from(1)),
            ("blocksize", Value::from(0)),
        ],
        "bz2" => vec![("level", Value::from(1))],
        _ => return,
    };
    for (key, value) in defaults {
        config.entry(key).or_insert(value);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lz4,
    Lzma,
    Crc32,
    Jenkins,
    Zfpy,
}

impl Kind {
    fn id(self) -> &'static str {
        CODECS.iter().find(|c| c.0 == self).map_or("codec", |c| c.1)
    }
}

/// `lzma`'s container format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LzmaFormat {
    /// `FORMAT_AUTO` (0): `.xz` or `.lzma`.
    Auto,
    /// `FORMAT_XZ` (1).
    Xz,
    /// `FORMAT_ALONE` (2).
    Alone,
}

/// One numcodecs compressor or checksum.
#[derive(Debug, Clone)]
pub struct Compressor {
    kind: Kind,
    lzma: LzmaFormat,
    /// crc32: the checksum precedes the payload.
    at_start: bool,
    /// jenkins_lookup3: the seed and the bytes hashed before the payload.
    initval: u32,
    prefix: Vec<u8>,
    /// The configuration as found (given back verbatim as the codec's metadata).
    config: Map<String, Value>,
}

fn unsupported(kind: Kind, what: &str) -> PluginCreateError {
    PluginCreateError::Unsupported(PluginUnsupportedError::new(
        format!("numcodecs {} with {what}", kind.id()),
        "codec".into(),
    ))
}

impl Compressor {
    fn from_config(kind: Kind, config: &Map<String, Value>) -> Result<Self, PluginCreateError> {
        let other = |what: &str| PluginCreateError::Other(format!("{}: {what}", kind.id()));
        let mut c = Compressor {
            kind,
            lzma: LzmaFormat::Xz,
            at_start: true,
            initval: 0,
            prefix: Vec::new(),
            config: config.clone(),
        };
        match kind {
            Kind::Lz4 | Kind::Zfpy => {}
            Kind::Lzma => {
                c.lzma = match config.get("format") {
                    None | Some(Value::Null) => LzmaFormat::Xz,
                    Some(Value::Number(n)) => match n.as_i64() {
                        Some(0) => LzmaFormat::Auto,
                        Some(1) => LzmaFormat::Xz,
                        Some(2) => LzmaFormat::Alone,
                        Some(3) => {
                            return Err(unsupported(
                                kind,
                                "format 3 (raw LZMA with a custom filter chain)",
                            ))
                        }
                        _ => return Err(other(&format!("unknown format {n}"))),
                    },
                    Some(_) => return Err(other("'format' is not a number")),
                };
                if !matches!(config.get("filters"), None | Some(Value::Null)) {
                    return Err(other("a filter chain is only valid with format 3"));
                }
            }
            Kind::Crc32 => {
                c.at_start = match config.get("location") {
                    None | Some(Value::Null) => true,
                    Some(Value::String(s)) if s == "start" => true,
                    Some(Value::String(s)) if s == "end" => false,
                    Some(v) => return Err(other(&format!("location {v}"))),
                };
            }
            Kind::Jenkins => {
                c.initval = match config.get("initval") {
                    None | Some(Value::Null) => 0,
                    Some(v) => v
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| other(&format!("initval {v} is not a 32-bit unsigned")))?,
                };
                c.prefix = match config.get("prefix") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                        .collect::<Option<Vec<u8>>>()
                        .ok_or_else(|| other("prefix is not a list of bytes"))?,
                    Some(v) => return Err(other(&format!("prefix {v} is not a list of bytes"))),
                };
            }
        }
        Ok(c)
    }

    fn err(&self, what: impl std::fmt::Display) -> CodecError {
        CodecError::Other(format!("numcodecs {}: {what}", self.kind.id()))
    }

    /// Decodes one chunk into exactly `expected` bytes (`None`: at most the chunk limit).
    fn decode_chunk(&self, enc: &[u8], expected: Option<usize>) -> Result<Vec<u8>, CodecError> {
        let limit = usize::try_from(MAX_DECODED_CHUNK).unwrap_or(usize::MAX);
        let out = match self.kind {
            Kind::Lz4 => self.lz4(enc, expected, limit)?,
            Kind::Lzma => self.lzma(enc, expected.unwrap_or(limit))?,
            Kind::Crc32 => {
                let (sum, payload) = self.split_checksum(enc, self.at_start)?;
                let got = crc32fast::hash(payload);
                if got != sum {
                    return Err(self.err(format!(
                        "checksum mismatch (stored {sum:#010x}, computed {got:#010x})"
                    )));
                }
                payload.to_vec()
            }
            Kind::Jenkins => {
                let (sum, payload) = self.split_checksum(enc, false)?;
                let got = if self.prefix.is_empty() {
                    lookup3(payload, self.initval)
                } else {
                    lookup3(&[self.prefix.as_slice(), payload].concat(), self.initval)
                };
                if got != sum {
                    return Err(self.err(format!(
                        "checksum mismatch (stored {sum:#010x}, computed {got:#010x})"
                    )));
                }
                payload.to_vec()
            }
            Kind::Zfpy => zfp::decode(enc, expected.unwrap_or(limit), expected.is_some())
                .map_err(|e| self.err(e))?,
        };
        match expected {
            Some(n) if out.len() != n => {
                Err(self.err(format!("decoded {} bytes, the chunk has {n}", out.len())))
            }
            _ => Ok(out),
        }
    }

    fn split_checksum<'a>(
        &self,
        enc: &'a [u8],
        at_start: bool,
    ) -> Result<(u32, &'a [u8]), CodecError> {
        if enc.len() < 4 {
            return Err(self.err("chunk shorter than its 4-byte checksum"));
        }
        let (sum, payload) = if at_start {
            let (s, p) = enc.split_at(4);
            (s, p)
        } else {
            let (p, s) = enc.split_at(enc.len() - 4);
            (s, p)
        };
        Ok((
            u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]),
            payload,
        ))
    }

    fn lz4(
        &self,
        enc: &[u8],
        expected: Option<usize>,
        limit: usize,
    ) -> Result<Vec<u8>, CodecError> {
        if enc.len() < 4 {
            return Err(self.err("chunk shorter than its 4-byte size header"));
        }
        let size = u32::from_le_bytes([enc[0], enc[1], enc[2], enc[3]]);
        let size = usize::try_from(size).map_err(|_| self.err("size overflows"))?;
        if let Some(n) = expected {
            if size != n {
                return Err(self.err(format!("header says {size} bytes, the chunk has {n}")));
            }
        } else if size > limit {
            return Err(self.err(format!("header says {size} bytes (over the limit)")));
        }
        let mut out = vec![0u8; size];
        let got = lz4_flex::block::decompress_into(&enc[4..], &mut out)
            .map_err(|e| self.err(format!("corrupt LZ4 block: {e}")))?;
        if got != size {
            return Err(self.err(format!(
                "LZ4 block decodes to {got} bytes, header says {size}"
            )));
        }
        Ok(out)
    }

    fn lzma(&self, enc: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
        const XZ_MAGIC: &[u8] = b"\xFD7zXZ\0";
        let xz = match self.lzma {
            LzmaFormat::Xz => true,
            LzmaFormat::Alone => false,
            LzmaFormat::Auto => enc.starts_with(XZ_MAGIC),
        };
        let corrupt = |e: std::io::Error| self.err(format!("corrupt stream: {e}"));
        let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
        let mut out = Vec::new();
        if xz {
            lzma_rust2::XzReader::new(enc, true)
                .take(cap)
                .read_to_end(&mut out)
                .map_err(corrupt)?;
        } else {
            lzma_rust2::LzmaReader::new_mem_limit(enc, u32::MAX, None)
                .map_err(corrupt)?
                .take(cap)
                .read_to_end(&mut out)
                .map_err(corrupt)?;
        }
        if out.len() > limit {
            return Err(self.err(format!("decodes to more than {limit} bytes")));
        }
        Ok(out)
    }
}

/// Bob Jenkins' lookup3 `hashlittle` of `key` seeded with `initval` (lookup3.c, public domain;
/// HDF5's `H5_checksum_lookup3`): 12-byte blocks mixed into three words, the last (partial,
/// zero-padded) block through the final mix; an empty key hashes to the initial `c`.
pub fn lookup3(key: &[u8], initval: u32) -> u32 {
    fn word(b: &[u8]) -> u32 {
        let mut w = [0u8; 4];
        w[..b.len()].copy_from_slice(b);
        u32::from_le_bytes(w)
    }
    #[allow(clippy::cast_possible_truncation)]
    let start = 0xdead_beef_u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (start, start, start);
    let mut rest = key;
    while rest.len() > 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        // mix(a, b, c)
        a = a.wrapping_sub(c);
        a ^= c.rotate_left(4);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= a.rotate_left(6);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= b.rotate_left(8);
        b = b.wrapping_add(a);
        a = a.wrapping_sub(c);
        a ^= c.rotate_left(16);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= a.rotate_left(19);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= b.rotate_left(4);
        b = b.wrapping_add(a);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        return c;
    }
    a = a.wrapping_add(word(&rest[..rest.len().min(4)]));
    if rest.len() > 4 {
        b = b.wrapping_add(word(&rest[4..rest.len().min(8)]));
    }
    if rest.len() > 8 {
        c = c.wrapping_add(word(&rest[8..]));
    }
    // final(a, b, c)
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(24));
    c
}

/// zfpy streams decoded by libzfp.
mod zfp {
    use zfp_sys_cc as z;

    /// Why a zfpy chunk cannot be decoded.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    pub enum ZfpError {
        /// libzfp could not allocate its objects.
        #[error("libzfp could not allocate")]
        Alloc,
        /// The chunk does not start with a zfp header.
        #[error("no valid zfp header")]
        NoHeader,
        /// A scalar type zfpy does not write (libzfp's code).
        #[error("zfp scalar type {0}")]
        ScalarType(u32),
        /// The extents' product overflows.
        #[error("zfp extents overflow")]
        Overflow,
        /// The header's size is not the chunk's.
        #[error("zfp header says {n} scalars of {size} bytes, the chunk has {limit} bytes")]
        Size {
            /// Scalars the header says.
            n: usize,
            /// Bytes a scalar.
            size: usize,
            /// Bytes of the chunk.
            limit: usize,
        },
        /// The header read twice differs.
        #[error("zfp header changed")]
        Changed,
        /// libzfp reported a failed decompression.
        #[error("libzfp failed to decompress the stream")]
        Failed,
    }

    /// `ZFP_HEADER_FULL`: magic, field metadata and compression mode.
    const HEADER_FULL: u32 = 7;

    /// Owns the libzfp objects of one decode.
    struct Handles {
        field: *mut z::zfp_field,
        zfp: *mut z::zfp_stream,
        stream: *mut z::bitstream,
    }

    impl Drop for Handles {
        fn drop(&mut self) {
            // SAFETY: each pointer is null or was returned by its libzfp allocator, once.
            unsafe {
                if !self.zfp.is_null() {
                    z::zfp_stream_close(self.zfp);
                }
                if !self.stream.is_null() {
                    z::stream_close(self.stream);
                }
                if !self.field.is_null() {
                    z::zfp_field_free(self.field);
                }
            }
        }
    }

    /// The chunk `enc` copied into 64-bit words (libzfp reads its stream a word at a time,
    /// possibly a word past the data), zero-padded to at least `bytes`.
    fn words(enc: &[u8], bytes: usize) -> Vec<u64> {
        let n = bytes.max(enc.len()).div_ceil(8) + 2;
        let mut w = vec![0u64; n];
        for (dst, src) in w.iter_mut().zip(enc.chunks(8)) {
            let mut b = [0u8; 8];
            b[..src.len()].copy_from_slice(src);
            *dst = u64::from_ne_bytes(b);
        }
        w
    }

    /// Opens libzfp over `buf` and reads the full header: (handles, bytes per scalar, scalars).
    fn open(buf: &mut [u64]) -> Result<(Handles, usize, usize), ZfpError> {
        // SAFETY: `buf` outlives the handles (both live in the caller's frame and the handles
        // are dropped first); libzfp only reads within `buf.len() * 8` bytes.
        unsafe {
            let h = Handles {
                field: z::zfp_field_alloc(),
                zfp: z::zfp_stream_open(std::ptr::null_mut()),
                stream: z::stream_open(buf.as_mut_ptr().cast(), buf.len() * 8),
            };
            if h.field.is_null() || h.zfp.is_null() || h.stream.is_null() {
                return Err(ZfpError::Alloc);
            }
            z::zfp_stream_set_bit_stream(h.zfp, h.stream);
            z::zfp_stream_rewind(h.zfp);
            if z::zfp_read_header(h.zfp, h.field, HEADER_FULL) == 0 {
                return Err(ZfpError::NoHeader);
            }
            let size = match z::zfp_field_type(h.field) {
                t if t == z::zfp_type_zfp_type_int32 || t == z::zfp_type_zfp_type_float => 4,
                t if t == z::zfp_type_zfp_type_int64 || t == z::zfp_type_zfp_type_double => 8,
                t => return Err(ZfpError::ScalarType(t)),
            };
            let f = &*h.field;
            let mut n = 1usize;
            for d in [f.nx, f.ny, f.nz, f.nw] {
                if d != 0 {
                    n = n.checked_mul(d).ok_or(ZfpError::Overflow)?;
                }
            }
            Ok((h, size, n))
        }
    }

    /// Decodes a zfpy chunk to little-endian scalars in C order: exactly `limit` bytes when
    /// `exact`, else at most `limit`.
    pub fn decode(enc: &[u8], limit: usize, exact: bool) -> Result<Vec<u8>, ZfpError> {
        // The header first (at most 20 bytes), from a small copy.
        let mut head = words(&enc[..enc.len().min(32)], 32);
        let (h, size, n) = open(&mut head)?;
        // SAFETY: valid handles holding the header's mode and field.
        let max = unsafe { z::zfp_stream_maximum_size(h.zfp, h.field) };
        drop(h);
        let bytes = n.checked_mul(size).ok_or(ZfpError::Overflow)?;
        if (exact && bytes != limit) || bytes > limit {
            return Err(ZfpError::Size { n, size, limit });
        }
        let mut out = vec![0u64; bytes.div_ceil(8)];
        let mut buf = words(enc, max);
        let (h, _, n2) = open(&mut buf)?;
        if n2 != n {
            return Err(ZfpError::Changed);
        }
        // SAFETY: the field's extents (read again from the same header bytes) were checked
        // against `out`'s size above; `buf` holds at least the largest stream such a field
        // can have, plus padding.
        let done = unsafe {
            z::zfp_field_set_pointer(h.field, out.as_mut_ptr().cast());
            z::zfp_decompress(h.zfp, h.field)
        };
        drop(h);
        if done == 0 {
            return Err(ZfpError::Failed);
        }
        let mut bytes_out: Vec<u8> = out.iter().flat_map(|w| w.to_ne_bytes()).collect();
        bytes_out.truncate(bytes);
        if cfg!(target_endian = "big") {
            bytes_out.chunks_exact_mut(size).for_each(<[u8]>::reverse);
        }
        Ok(bytes_out)
    }
}

impl ExtensionName for Compressor {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        let (_, id, name) = CODECS.iter().find(|c| c.0 == self.kind)?;
        Some(Cow::Borrowed(match version {
            ZarrVersion::V2 => id,
            _ => name,
        }))
    }
}

impl CodecTraits for Compressor {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn configuration(
        &self,
        _version: ZarrVersion,
        _options: &CodecMetadataOptions,
    ) -> Option<Configuration> {
        Some(Configuration::from(self.config.clone()))
    }

    fn partial_decoder_capability(&self) -> PartialDecoderCapability {
        PartialDecoderCapability {
            partial_read: false,
            partial_decode: false,
        }
    }

    fn partial_encoder_capability(&self) -> PartialEncoderCapability {
        PartialEncoderCapability {
            partial_encode: false,
        }
    }
}

impl BytesToBytesCodecTraits for Compressor {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn BytesToBytesCodecTraits> {
        self
    }

    fn recommended_concurrency(
        &self,
        _decoded_representation: &BytesRepresentation,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }

    fn encoded_representation(
        &self,
        decoded_representation: &BytesRepresentation,
    ) -> BytesRepresentation {
        match (self.kind, decoded_representation) {
            (Kind::Crc32 | Kind::Jenkins, BytesRepresentation::FixedSize(n)) => {
                BytesRepresentation::FixedSize(n + 4)
            }
            (Kind::Crc32 | Kind::Jenkins, BytesRepresentation::BoundedSize(n)) => {
                BytesRepresentation::BoundedSize(n + 4)
            }
            _ => BytesRepresentation::UnboundedSize,
        }
    }

    fn encode<'a>(
        &self,
        _decoded_value: ArrayBytesRaw<'a>,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        Err(self.err("encoding is not implemented (tet-zarr only reads Zarr)"))
    }

    fn decode<'a>(
        &self,
        encoded_value: ArrayBytesRaw<'a>,
        decoded_representation: &BytesRepresentation,
        _options: &CodecOptions,
    ) -> Result<ArrayBytesRaw<'a>, CodecError> {
        let expected = match decoded_representation {
            BytesRepresentation::FixedSize(n) => {
                if *n > MAX_DECODED_CHUNK {
                    return Err(self.err(format!("chunk of {n} bytes is over the limit")));
                }
                Some(usize::try_from(*n).map_err(|_| self.err("chunk too large"))?)
            }
            _ => None,
        };
        self.decode_chunk(&encoded_value, expected).map(Cow::Owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codec(kind: Kind, v: Value) -> Result<Compressor, PluginCreateError> {
        Compressor::from_config(kind, v.as_object().unwrap())
    }

    /// The self-test values of lookup3.c (`driver5`).
    #[test]
    fn lookup3_matches_the_reference_values() {
        assert_eq!(lookup3(b"", 0), 0xdead_beef);
        assert_eq!(lookup3(b"", 0xdead_beef), 0xbd5b_7dde);
        assert_eq!(lookup3(b"Four score and seven years ago", 0), 0x1777_0551);
        assert_eq!(lookup3(b"Four score and seven years ago", 1), 0xcd62_8161);
    }

    #[test]
    fn checksums_are_verified() {
        let c = codec(Kind::Crc32, json!({})).unwrap();
        let payload = b"hello zarr";
        let mut enc = crc32fast::hash(payload).to_le_bytes().to_vec();
        enc.extend_from_slice(payload);
        assert_eq!(c.decode_chunk(&enc, Some(10)).unwrap(), payload);
        enc[5] ^= 1;
        assert!(c.decode_chunk(&enc, Some(10)).is_err());
        assert!(c.decode_chunk(&[1, 2], None).is_err());
        let c = codec(Kind::Crc32, json!({"location": "end"})).unwrap();
        let mut enc = payload.to_vec();
        enc.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        assert_eq!(c.decode_chunk(&enc, Some(10)).unwrap(), payload);
        let j = codec(Kind::Jenkins, json!({"initval": 1, "prefix": [70, 111]})).unwrap();
        let mut enc = b"ur score and seven years ago".to_vec();
        // The prefix "Fo" completes the reference key.
        enc.extend_from_slice(&0xcd62_8161_u32.to_le_bytes());
        assert_eq!(j.decode_chunk(&enc, Some(28)).unwrap(), &enc[..28]);
    }

    #[test]
    fn lz4_checks_its_size_header() {
        let c = codec(Kind::Lz4, json!({"acceleration": 1})).unwrap();
        let data = vec![7u8; 100];
        let mut enc = 100u32.to_le_bytes().to_vec();
        enc.extend(lz4_flex::block::compress(&data));
        assert_eq!(c.decode_chunk(&enc, Some(100)).unwrap(), data);
        assert!(c.decode_chunk(&enc, Some(99)).is_err());
        enc[0] = 0xff;
        enc[3] = 0xff;
        assert!(c.decode_chunk(&enc, None).is_err());
    }

    #[test]
    fn unsupported_and_invalid_configurations() {
        assert!(matches!(
            codec(Kind::Lzma, json!({"format": 3, "filters": [{"id": 33}]})),
            Err(PluginCreateError::Unsupported(_))
        ));
        for (kind, v) in [
            (Kind::Lzma, json!({"format": 1, "filters": [{"id": 33}]})),
            (Kind::Lzma, json!({"format": 9})),
            (Kind::Crc32, json!({"location": "middle"})),
            (Kind::Jenkins, json!({"initval": -1})),
            (Kind::Jenkins, json!({"prefix": "ab"})),
        ] {
            assert!(
                matches!(codec(kind, v.clone()), Err(PluginCreateError::Other(_))),
                "{v}"
            );
        }
    }

    #[test]
    fn zfp_garbage_is_an_error() {
        let c = codec(Kind::Zfpy, json!({"mode": 4})).unwrap();
        assert!(c
            .decode_chunk(b"not a zfp stream at all", Some(80))
            .is_err());
        assert!(c.decode_chunk(b"", Some(80)).is_err());
    }

    #[test]
    fn numcodecs_defaults_fill_only_what_is_missing() {
        let mut m = json!({"cname": "zstd"}).as_object().unwrap().clone();
        numcodecs_defaults("blosc", &mut m);
        assert_eq!(
            Value::Object(m),
            json!({"cname": "zstd", "clevel": 5, "shuffle": 1, "blocksize": 0})
        );
        let mut m = Map::new();
        numcodecs_defaults("bz2", &mut m);
        assert_eq!(Value::Object(m), json!({"level": 1}));
    }
}
