//! numcodecs filters that zarrs does not decode (or not under the names zarr-python writes),
//! decoded exactly as numcodecs 0.16 decodes them, and numcodecs' `crc32c` configuration.
//!
//! Each filter is an array-to-array codec registered as a runtime plugin (which takes
//! precedence over zarrs' built-in codecs) for its Zarr v2 id and the `numcodecs.<id>` name
//! zarr-python 3 writes in Zarr v3 metadata. What numcodecs' `decode` does, and what is done here:
//!
//! * `delta(dtype, astype)`: `np.cumsum(enc.view(astype).ravel(), out=dec)` with `dec` of
//!   `dtype`, over the whole chunk in C order. For integer types the running sum wraps in
//!   `dtype`'s width (two's complement): whatever width NumPy accumulates in, the result modulo
//!   2^bits is the same, so this is exact for every pair of integer types. For floats, only
//!   `astype == dtype` (float32 or float64) is decoded: the sum is sequential in that type, as
//!   `np.add.accumulate` is. Mixed float/integer or float32/float64 pairs are unsupported
//!   (the accumulation type NumPy would pick is not replicated).
//! * `astype(encode_dtype, decode_dtype)`: `enc.astype(decode_dtype)`, NumPy's C casts: integer
//!   to integer wraps, integer to float and float to float round to nearest, float to integer
//!   truncates (a NaN, infinite or out-of-range value, undefined in NumPy, is a read error).
//! * `bitround(keepbits)`: decoding is a no-op (the rounded floats are stored); float16,
//!   float32 and float64 arrays.
//! * `quantize(digits, dtype, astype)`: `enc.view(astype).astype(dtype)` (float32/float64).
//! * `categorize(labels, dtype, astype)`: code `i + 1` is `labels[i]` (truncated to the
//!   string length, as NumPy's assignment truncates), any other code the empty string;
//!   fixed-length unicode (`<U<n>`) arrays (object arrays are unsupported).
//! * `packbits`: byte 0 is the number of padding bits (0–7), then `np.unpackbits` (most
//!   significant bit first) of the rest, padding removed; `bool` arrays. The encoded chunk is
//!   `ceil(n / 8) + 1` bytes.
//!
//! Types are little-endian or single-byte NumPy types (`<i2`, `|u1`, `int16`…); a big-endian
//! or float16 `dtype`/`astype` (except bitround's float16) is an unsupported codec, as is any
//! configuration this module cannot decode exactly. A chunk that was never written reads as
//! the array's fill value (as zarr-python gives it). Encoding is not implemented: nothing here
//! writes Zarr.
//!
//! `crc32c`: zarr-python writes `numcodecs.crc32c` with an empty configuration (v3), meaning
//! the checksum is at the end (numcodecs' `CRC32C.location`); zarrs requires the `location`
//! field, so it is filled in before zarrs' codec is made (v2 `.zarray` metadata is patched
//! the same way where it is read, since zarrs converts it before any plugin is asked).

use std::any::Any;
use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::{Arc, Once};

use serde_json::{Map, Value};
use zarrs::array::codec::api::CodecTraitsV2;
use zarrs::array::codec::api::{
    register_codec_v2, register_codec_v3, ArrayBytes, ArrayCodecTraits, ArrayPartialDecoderTraits,
    ArrayToArrayCodecTraits, Codec, CodecError, CodecMetadataOptions, CodecOptions,
    CodecRuntimePluginV2, CodecRuntimePluginV3, CodecTraits, PartialDecoderCapability,
    PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::array::codec::{
    BloscCodec, Bz2Codec, Crc32cCodec, Crc32cCodecConfiguration, GzipCodec, ZstdCodec,
};
use zarrs::array::{data_type, ArraySubset, DataType, FillValue, Indexer};
use zarrs::metadata::v2::MetadataV2;
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata::Configuration;
use zarrs::metadata_ext::codec::blosc::{
    codec_blosc_v2_numcodecs_to_v3, BloscCodecConfigurationNumcodecs,
};
use zarrs::plugin::{ExtensionName, PluginCreateError, PluginUnsupportedError, ZarrVersion};
use zarrs::storage::StorageError;

use crate::scaleoffset::Num;

/// The filters of this module: (kind, Zarr v2 id, Zarr v3 name).
const FILTERS: &[(Kind, &str, &str)] = &[
    (Kind::Delta, "delta", "numcodecs.delta"),
    (Kind::AsType, "astype", "numcodecs.astype"),
    (Kind::BitRound, "bitround", "numcodecs.bitround"),
    (Kind::Quantize, "quantize", "numcodecs.quantize"),
    (Kind::PackBits, "packbits", "numcodecs.packbits"),
    (Kind::Categorize, "categorize", "numcodecs.categorize"),
];

/// Registers the filters and the numcodecs `crc32c` configuration. Idempotent.
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for &(kind, id, name) in FILTERS {
            // v2 metadata reaches the v3 plugins under its v2 id, except `packbits`, which in
            // v3 is Zarr's own (different) array-to-bytes codec.
            let v2_id_in_v3 = kind != Kind::PackBits;
            register_codec_v3(CodecRuntimePluginV3::new(
                move |n| n == name || (v2_id_in_v3 && n == id),
                move |metadata| {
                    let empty = Configuration::default();
                    let config = metadata.configuration().unwrap_or(&empty);
                    Filter::from_config(kind, config).map(|c| Codec::ArrayToArray(Arc::new(c)))
                },
            ));
            register_codec_v2(CodecRuntimePluginV2::new(
                move |n| n == id,
                move |metadata| {
                    Filter::from_config(kind, metadata.configuration())
                        .map(|c| Codec::ArrayToArray(Arc::new(c)))
                },
            ));
        }
        // zarr-python's numcodecs wrappers: the numcodecs configuration under a v3 name
        // zarrs does not know (`numcodecs.zstd` and `numcodecs.crc32c` are registered by
        // `guard`, which wraps them).
        register_codec_v3(CodecRuntimePluginV3::new(
            |n| matches!(n, "numcodecs.gzip" | "numcodecs.blosc" | "numcodecs.bz2"),
            numcodecs_v3,
        ));
    });
}

/// zarrs' codec for a `numcodecs.<id>` v3 codec zarr-python writes (`zstd`, `gzip`, `blosc`,
/// `bz2`, `crc32c`), made from its configuration as from v2 `{"id": "<id>", …}` metadata (how
/// numcodecs itself serialises it), numcodecs' defaults filled in where zarr-python left them
/// out (`compressors::numcodecs_defaults`).
pub(crate) fn numcodecs_v3(metadata: &MetadataV3) -> Result<Codec, PluginCreateError> {
    let name = metadata.name();
    let empty = Configuration::default();
    let config = metadata.configuration().unwrap_or(&empty);
    let id = name.strip_prefix("numcodecs.").unwrap_or(name);
    if id == "crc32c" {
        return crc32c_numcodecs(config);
    }
    let mut v2: Map<String, Value> = config.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    crate::compressors::numcodecs_defaults(id, &mut v2);
    v2.insert("id".into(), Value::String(id.to_string()));
    let metadata: MetadataV2 = serde_json::from_value(Value::Object(v2))
        .map_err(|e| PluginCreateError::Other(format!("{name} configuration: {e}")))?;
    match id {
        "zstd" => <ZstdCodec as CodecTraitsV2>::create(&metadata),
        "gzip" => <GzipCodec as CodecTraitsV2>::create(&metadata),
        "bz2" => <Bz2Codec as CodecTraitsV2>::create(&metadata),
        "blosc" => {
            // zarrs converts v2 Blosc metadata before making the codec; so does this. The
            // shuffle mode and type size only matter to encoding (a Blosc frame's header says
            // how it was shuffled), so none is given.
            let numcodecs: BloscCodecConfigurationNumcodecs = metadata
                .to_typed_configuration()
                .map_err(|e| PluginCreateError::Other(format!("{name} configuration: {e}")))?;
            let config = codec_blosc_v2_numcodecs_to_v3(&numcodecs, None);
            Ok(Codec::BytesToBytes(Arc::new(
                BloscCodec::new_with_configuration(&config)?,
            )))
        }
        _ => Err(PluginCreateError::Other(format!(
            "{name}: not a numcodecs compressor"
        ))),
    }
}

/// zarrs' crc32c codec for a numcodecs configuration (`location` defaults to `end`).
fn crc32c_numcodecs(config: &Map<String, Value>) -> Result<Codec, PluginCreateError> {
    let mut config = config.clone();
    config.remove("id");
    config
        .entry("location")
        .or_insert_with(|| Value::String("end".into()));
    let parsed = serde_json::from_value(Value::Object(config))
        .map_err(|e| PluginCreateError::Other(format!("crc32c configuration: {e}")))?;
    let codec = Crc32cCodec::new_with_configuration(&Crc32cCodecConfiguration::Numcodecs(parsed));
    Ok(Codec::BytesToBytes(Arc::new(codec)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Delta,
    AsType,
    BitRound,
    Quantize,
    PackBits,
    Categorize,
}

impl Kind {
    fn id(self) -> &'static str {
        FILTERS
            .iter()
            .find(|f| f.0 == self)
            .map_or("filter", |f| f.1)
    }
}

/// The decoded (array) and encoded types of a numeric filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Types {
    /// `dtype` → `astype`.
    Num { dtype: Num, astype: Num },
    /// bitround: the array's float type, unchanged.
    AnyFloat,
    /// packbits: bool → packed bytes.
    Bits,
    /// categorize: fixed-length unicode (`<U{chars}`) → integer codes.
    Labels { chars: usize, astype: Num },
}

/// One numcodecs filter.
#[derive(Debug, Clone)]
pub struct Filter {
    kind: Kind,
    types: Types,
    /// categorize's labels, as code points (truncated to the string length, as NumPy's
    /// assignment into a `<U{chars}` array truncates).
    labels: Vec<Vec<u32>>,
    /// The configuration as found (given back verbatim as the codec's metadata).
    config: Map<String, Value>,
}

fn unsupported(kind: Kind, what: String) -> PluginCreateError {
    PluginCreateError::Unsupported(PluginUnsupportedError::new(
        format!("numcodecs {} filter with {what}", kind.id()),
        "codec".into(),
    ))
}

fn is_int(n: Num) -> bool {
    !matches!(n, Num::F32 | Num::F64)
}

impl Filter {
    fn from_config(kind: Kind, config: &Map<String, Value>) -> Result<Self, PluginCreateError> {
        let other = |what: &str| PluginCreateError::Other(format!("{}: {what}", kind.id()));
        let ty = |key: &str| -> Result<Option<Num>, PluginCreateError> {
            match config.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Num::parse(s)
                    .map(Some)
                    .map_err(|e| unsupported(kind, format!("{key} {e}"))),
                Some(_) => Err(other(&format!("'{key}' is not a string"))),
            }
        };
        let types = match kind {
            Kind::Delta | Kind::Quantize => {
                let dtype = ty("dtype")?.ok_or_else(|| other("no 'dtype'"))?;
                let astype = ty("astype")?.unwrap_or(dtype);
                if kind == Kind::Quantize {
                    if is_int(dtype) || is_int(astype) {
                        return Err(other("quantize needs float types"));
                    }
                    if !matches!(config.get("digits"), Some(Value::Number(_))) {
                        return Err(other("no numeric 'digits'"));
                    }
                } else if !(is_int(dtype) && is_int(astype)) && dtype != astype {
                    return Err(unsupported(
                        kind,
                        format!(
                            "dtype {dtype:?} and astype {astype:?} (floats only with astype equal \
                             to dtype: NumPy's accumulation type is not replicated)"
                        ),
                    ));
                }
                Types::Num { dtype, astype }
            }
            Kind::AsType => {
                let dtype = ty("decode_dtype")?.ok_or_else(|| other("no 'decode_dtype'"))?;
                let astype = ty("encode_dtype")?.ok_or_else(|| other("no 'encode_dtype'"))?;
                Types::Num { dtype, astype }
            }
            Kind::BitRound => {
                match config.get("keepbits") {
                    Some(Value::Number(n)) if n.as_u64().is_some() => {}
                    _ => return Err(other("no non-negative integer 'keepbits'")),
                }
                Types::AnyFloat
            }
            Kind::PackBits => Types::Bits,
            Kind::Categorize => {
                let dtype = match config.get("dtype") {
                    Some(Value::String(s)) => s.as_str(),
                    _ => return Err(other("no 'dtype'")),
                };
                let chars = dtype
                    .strip_prefix(['<', '|', '='])
                    .and_then(|d| d.strip_prefix('U'))
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        unsupported(
                            kind,
                            format!(
                                "dtype '{dtype}' (only little-endian fixed-length unicode '<U<n>'; \
                                 object arrays are not read)"
                            ),
                        )
                    })?;
                let astype = ty("astype")?.unwrap_or(Num::U8);
                if !is_int(astype) {
                    return Err(unsupported(kind, format!("astype {astype:?}")));
                }
                let labels = match config.get("labels") {
                    Some(Value::Array(l)) => l
                        .iter()
                        .map(|v| {
                            v.as_str()
                                .map(|s| s.chars().take(chars).map(u32::from).collect())
                        })
                        .collect::<Option<Vec<Vec<u32>>>>()
                        .ok_or_else(|| other("a label is not a string"))?,
                    _ => return Err(other("no 'labels' list")),
                };
                return Ok(Filter {
                    kind,
                    types: Types::Labels { chars, astype },
                    labels,
                    config: config.clone(),
                });
            }
        };
        Ok(Filter {
            kind,
            types,
            labels: Vec::new(),
            config: config.clone(),
        })
    }

    fn err(&self, what: impl std::fmt::Display) -> CodecError {
        CodecError::Other(format!("numcodecs {}: {what}", self.kind.id()))
    }

    /// The array's (decoded) data type must be the codec's.
    fn check_type(&self, data_type: &DataType) -> Result<(), CodecError> {
        let ok = match self.types {
            Types::Num { dtype, .. } => *data_type == dtype.data_type(),
            Types::AnyFloat => [
                data_type::float16(),
                data_type::float32(),
                data_type::float64(),
            ]
            .contains(data_type),
            Types::Bits => *data_type == data_type::bool(),
            Types::Labels { chars, .. } => {
                let bytes = chars.checked_mul(4).and_then(|b| u64::try_from(b).ok());
                bytes
                    .and_then(NonZeroU64::new)
                    .and_then(|b| data_type::fixed_length_utf32(b).ok())
                    .is_some_and(|t| *data_type == t)
            }
        };
        if ok {
            Ok(())
        } else {
            Err(self.err(format!(
                "the array's data type {data_type} is not the codec's ({:?})",
                self.types
            )))
        }
    }

    fn encoded_type(&self, decoded: &DataType) -> DataType {
        match self.types {
            Types::Num { astype, .. } => astype.data_type(),
            Types::AnyFloat => decoded.clone(),
            Types::Bits => data_type::uint8(),
            Types::Labels { astype, .. } => astype.data_type(),
        }
    }

    /// Decodes one whole encoded chunk of `n` elements.
    fn decode_chunk(&self, enc: &[u8], n: usize, elem: usize) -> Result<Vec<u8>, CodecError> {
        match (self.kind, self.types) {
            (Kind::BitRound, _) => {
                if enc.len()
                    != n.checked_mul(elem)
                        .ok_or_else(|| self.err("chunk too large"))?
                {
                    return Err(self.err(format!("{} bytes for {n} elements", enc.len())));
                }
                Ok(enc.to_vec())
            }
            (Kind::PackBits, _) => self.unpack(enc, n),
            (Kind::Categorize, Types::Labels { chars, astype }) => {
                self.categorize(enc, n, chars, astype)
            }
            (Kind::Delta, Types::Num { dtype, astype }) => self.delta(enc, n, dtype, astype),
            (_, Types::Num { dtype, astype }) => {
                cast(enc, n, astype, dtype).map_err(|e| self.err(e))
            }
            _ => Err(self.err("inconsistent configuration")),
        }
    }

    fn unpack(&self, enc: &[u8], n: usize) -> Result<Vec<u8>, CodecError> {
        let (&pad, packed) = enc
            .split_first()
            .ok_or_else(|| self.err("empty chunk (no padding byte)"))?;
        if pad > 7 {
            return Err(self.err(format!("{pad} padding bits (at most 7)")));
        }
        let bits = packed
            .len()
            .checked_mul(8)
            .and_then(|b| b.checked_sub(usize::from(pad)))
            .ok_or_else(|| self.err("padding longer than the data"))?;
        if bits != n {
            return Err(self.err(format!("{bits} bits for a chunk of {n} elements")));
        }
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let byte = packed[i / 8];
            out.push((byte >> (7 - i % 8)) & 1);
        }
        Ok(out)
    }

    /// numcodecs: `dec = np.full_like(enc, '', dtype)`, then `dec[enc == i + 1] = labels[i]`.
    /// Output: native-endian UCS-4 code points, zero-padded, as zarrs holds `<U` values.
    fn categorize(
        &self,
        enc: &[u8],
        n: usize,
        chars: usize,
        astype: Num,
    ) -> Result<Vec<u8>, CodecError> {
        let too_large = || self.err("chunk too large");
        if enc.len() != n.checked_mul(astype.size()).ok_or_else(too_large)? {
            return Err(self.err(format!("{} bytes for {n} {astype:?} codes", enc.len())));
        }
        let width = chars.checked_mul(4).ok_or_else(too_large)?;
        let mut out = vec![0u8; n.checked_mul(width).ok_or_else(too_large)?];
        for (e, o) in enc
            .chunks_exact(astype.size())
            .zip(out.chunks_exact_mut(width))
        {
            let code = load_int(astype, e);
            let label = usize::try_from(code)
                .ok()
                .and_then(|c| c.checked_sub(1))
                .and_then(|i| self.labels.get(i));
            if let Some(label) = label {
                for (cp, dst) in label.iter().zip(o.chunks_exact_mut(4)) {
                    dst.copy_from_slice(&cp.to_ne_bytes());
                }
            }
        }
        Ok(out)
    }

    fn delta(&self, enc: &[u8], n: usize, dtype: Num, astype: Num) -> Result<Vec<u8>, CodecError> {
        if enc.len()
            != n.checked_mul(astype.size())
                .ok_or_else(|| self.err("chunk too large"))?
        {
            return Err(self.err(format!("{} bytes for {n} {astype:?} elements", enc.len())));
        }
        let mut out = vec![
            0u8;
            n.checked_mul(dtype.size())
                .ok_or_else(|| self.err("chunk too large"))?
        ];
        let elems = enc.chunks_exact(astype.size());
        let outs = out.chunks_exact_mut(dtype.size());
        match dtype {
            Num::F64 => {
                let mut acc = 0f64;
                for (e, o) in elems.zip(outs) {
                    acc += f64::from_le_bytes(e.try_into().map_err(|_| self.err("element size"))?);
                    o.copy_from_slice(&acc.to_le_bytes());
                }
            }
            Num::F32 => {
                let mut acc = 0f32;
                for (e, o) in elems.zip(outs) {
                    acc += f32::from_le_bytes(e.try_into().map_err(|_| self.err("element size"))?);
                    o.copy_from_slice(&acc.to_le_bytes());
                }
            }
            _ => {
                // Integers: the running sum modulo 2^128 truncates to the same bits NumPy's
                // wrapping sum has modulo 2^(dtype bits).
                let mut acc = 0i128;
                for (e, o) in elems.zip(outs) {
                    acc = acc.wrapping_add(load_int(astype, e));
                    o.copy_from_slice(&acc.to_le_bytes()[..dtype.size()]);
                }
            }
        }
        Ok(out)
    }
}

/// An integer element (little-endian) as `i128`.
fn load_int(t: Num, b: &[u8]) -> i128 {
    let mut a = [0u8; 8];
    let k = t.size().min(8).min(b.len());
    a[..k].copy_from_slice(&b[..k]);
    match t {
        Num::I8 => i128::from(a[0] as i8),
        Num::I16 => i128::from(i16::from_le_bytes([a[0], a[1]])),
        Num::I32 => i128::from(i32::from_le_bytes([a[0], a[1], a[2], a[3]])),
        Num::I64 => i128::from(i64::from_le_bytes(a)),
        Num::U8 => i128::from(a[0]),
        Num::U16 => i128::from(u16::from_le_bytes([a[0], a[1]])),
        Num::U32 => i128::from(u32::from_le_bytes([a[0], a[1], a[2], a[3]])),
        Num::U64 => i128::from(u64::from_le_bytes(a)),
        Num::F32 | Num::F64 => 0,
    }
}

/// One value, as NumPy holds it before a cast.
#[derive(Debug, Clone, Copy)]
enum Val {
    Int(i128),
    F32(f32),
    F64(f64),
}

fn load(t: Num, b: &[u8]) -> Val {
    match t {
        Num::F32 => {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[..4]);
            Val::F32(f32::from_le_bytes(a))
        }
        Num::F64 => {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[..8]);
            Val::F64(f64::from_le_bytes(a))
        }
        _ => Val::Int(load_int(t, b)),
    }
}

/// Why a chunk cannot be cast from the codec's `astype` to its `dtype`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum CastError {
    /// The chunk is not `n` elements of the type.
    #[error("{len} bytes for {n} {from:?} elements")]
    Length {
        /// Bytes of the chunk.
        len: usize,
        /// Elements expected.
        n: usize,
        /// Their type.
        from: Num,
    },
    /// The cast chunk would not fit memory's integers.
    #[error("chunk too large")]
    TooLarge,
    /// A value the target type cannot hold.
    #[error("value {value} does not fit {to:?} (NumPy's cast would be undefined)")]
    DoesNotFit {
        /// The value.
        value: f64,
        /// The target type.
        to: Num,
    },
}

/// Stores `v` as `t` with NumPy's C-cast semantics (see the module docs).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss
)]
fn store(t: Num, v: Val, out: &mut [u8]) -> Result<(), CastError> {
    let int_bits = (t.size() * 8) as u32;
    match (t, v) {
        (Num::F64, Val::Int(i)) => out.copy_from_slice(&(i as f64).to_le_bytes()),
        (Num::F64, Val::F32(f)) => out.copy_from_slice(&f64::from(f).to_le_bytes()),
        (Num::F64, Val::F64(f)) => out.copy_from_slice(&f.to_le_bytes()),
        (Num::F32, Val::Int(i)) => out.copy_from_slice(&(i as f32).to_le_bytes()),
        (Num::F32, Val::F32(f)) => out.copy_from_slice(&f.to_le_bytes()),
        (Num::F32, Val::F64(f)) => out.copy_from_slice(&(f as f32).to_le_bytes()),
        (_, Val::Int(i)) => out.copy_from_slice(&i.to_le_bytes()[..t.size()]),
        (_, Val::F32(_) | Val::F64(_)) => {
            let f = match v {
                Val::F32(f) => f64::from(f),
                Val::F64(f) => f,
                Val::Int(_) => 0.0,
            };
            let tr = f.trunc();
            let signed = matches!(t, Num::I8 | Num::I16 | Num::I32 | Num::I64);
            let (lo, hi) = if signed {
                (
                    -(2f64.powi(int_bits as i32 - 1)),
                    2f64.powi(int_bits as i32 - 1),
                )
            } else {
                (0.0, 2f64.powi(int_bits as i32))
            };
            if !(tr.is_finite() && tr >= lo && tr < hi) {
                return Err(CastError::DoesNotFit { value: f, to: t });
            }
            let i = tr as i128;
            out.copy_from_slice(&i.to_le_bytes()[..t.size()]);
        }
    }
    Ok(())
}

/// `n` elements of `from` cast to `to`.
fn cast(enc: &[u8], n: usize, from: Num, to: Num) -> Result<Vec<u8>, CastError> {
    if Some(enc.len()) != n.checked_mul(from.size()) {
        return Err(CastError::Length {
            len: enc.len(),
            n,
            from,
        });
    }
    let len = n.checked_mul(to.size()).ok_or(CastError::TooLarge)?;
    let mut out = vec![0u8; len];
    for (e, o) in enc
        .chunks_exact(from.size())
        .zip(out.chunks_exact_mut(to.size()))
    {
        store(to, load(from, e), o)?;
    }
    Ok(out)
}

fn elements(shape: &[NonZeroU64]) -> Result<usize, CodecError> {
    shape
        .iter()
        .try_fold(1usize, |a, d| a.checked_mul(usize::try_from(d.get()).ok()?))
        .ok_or_else(|| CodecError::Other("chunk too large".into()))
}

impl ExtensionName for Filter {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        let (_, id, name) = FILTERS.iter().find(|f| f.0 == self.kind)?;
        Some(Cow::Borrowed(match version {
            ZarrVersion::V2 => id,
            _ => name,
        }))
    }
}

impl CodecTraits for Filter {
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
        // Delta and packbits need the whole chunk, and the partial decoder below reads and
        // decodes it whole whatever part is asked for. Saying so (`false`) would make zarrs
        // (0.23) put its partial-decoder cache next to this codec, and zarrs gives that cache
        // the shape and data type of the *decoded* side of the codec after it in the chain:
        // wrong whenever that codec changes them — `fixedscaleoffset` before `delta` in a v2
        // `filters` list (the cache expects the float array where `delta` gives integers:
        // "invalid byte range", wrong decoded sizes), or the `transpose` zarrs puts first for
        // a v2 Fortran-order array (the cache asks `delta` for the C-order shape:
        // "out-of-bounds"). Claiming both capabilities keeps the cache away; nothing is lost,
        // as this codec's own partial decoder is the cache.
        PartialDecoderCapability {
            partial_read: true,
            partial_decode: true,
        }
    }

    fn partial_encoder_capability(&self) -> PartialEncoderCapability {
        PartialEncoderCapability {
            partial_encode: false,
        }
    }
}

impl ArrayCodecTraits for Filter {
    fn recommended_concurrency(
        &self,
        _shape: &[NonZeroU64],
        _data_type: &DataType,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }
}

impl ArrayToArrayCodecTraits for Filter {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToArrayCodecTraits> {
        self
    }

    fn encoded_data_type(&self, decoded_data_type: &DataType) -> Result<DataType, CodecError> {
        self.check_type(decoded_data_type)?;
        Ok(self.encoded_type(decoded_data_type))
    }

    fn encoded_shape(
        &self,
        decoded_shape: &[NonZeroU64],
    ) -> Result<zarrs::array::ChunkShape, CodecError> {
        if self.kind != Kind::PackBits {
            return Ok(decoded_shape.to_vec());
        }
        let n = elements(decoded_shape)?;
        let bytes = n
            .div_ceil(8)
            .checked_add(1)
            .and_then(|b| u64::try_from(b).ok());
        let bytes = bytes
            .and_then(NonZeroU64::new)
            .ok_or_else(|| self.err("chunk too large"))?;
        Ok(vec![bytes])
    }

    fn decoded_shape(
        &self,
        encoded_shape: &[NonZeroU64],
    ) -> Result<Option<zarrs::array::ChunkShape>, CodecError> {
        if self.kind == Kind::PackBits {
            Ok(None)
        } else {
            Ok(Some(encoded_shape.to_vec()))
        }
    }

    fn encoded_fill_value(
        &self,
        decoded_data_type: &DataType,
        decoded_fill_value: &FillValue,
    ) -> Result<FillValue, CodecError> {
        // Only a sharding codec after this filter would use it (for inner chunks never
        // written); those read as the fill value through the partial decoder below anyway.
        self.check_type(decoded_data_type)?;
        let fill = decoded_fill_value.as_ne_bytes();
        Ok(match self.types {
            Types::Num { dtype, astype } => {
                let mut out = vec![0u8; astype.size()];
                if fill.len() == dtype.size() {
                    // A fill value the encoded type cannot hold becomes 0.
                    let _ = store(astype, load(dtype, fill), &mut out);
                }
                FillValue::new(out)
            }
            Types::AnyFloat => decoded_fill_value.clone(),
            Types::Bits => FillValue::new(vec![0]),
            Types::Labels { astype, .. } => FillValue::new(vec![0u8; astype.size()]),
        })
    }

    fn encode<'a>(
        &self,
        _bytes: ArrayBytes<'a>,
        _shape: &[NonZeroU64],
        _data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        Err(self.err("encoding is not implemented (tet-zarr only reads Zarr)"))
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        self.check_type(data_type)?;
        let n = elements(shape)?;
        let elem = data_type
            .fixed_size()
            .ok_or_else(|| self.err("variable-size data type"))?;
        let input = bytes.into_fixed()?;
        Ok(ArrayBytes::from(self.decode_chunk(&input, n, elem)?))
    }

    fn partial_decoder(
        self: Arc<Self>,
        input_handle: Arc<dyn ArrayPartialDecoderTraits>,
        shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<Arc<dyn ArrayPartialDecoderTraits>, CodecError> {
        self.check_type(data_type)?;
        let encoded_shape: Vec<u64> = self.encoded_shape(shape)?.iter().map(|d| d.get()).collect();
        Ok(Arc::new(WholeChunkDecoder {
            input: input_handle,
            codec: self,
            shape: shape.to_vec(),
            encoded_shape,
            data_type: data_type.clone(),
            fill_value: fill_value.clone(),
        }))
    }
}

/// Partial decoder: a chunk never written reads as the array's fill value (zarrs' default
/// would decode the encoded fill value); otherwise the whole chunk is decoded (delta and
/// packbits cannot decode a part) and the part asked for is extracted.
struct WholeChunkDecoder {
    input: Arc<dyn ArrayPartialDecoderTraits>,
    codec: Arc<Filter>,
    shape: Vec<NonZeroU64>,
    encoded_shape: Vec<u64>,
    data_type: DataType,
    fill_value: FillValue,
}

impl ArrayPartialDecoderTraits for WholeChunkDecoder {
    fn data_type(&self) -> &DataType {
        &self.data_type
    }

    fn exists(&self) -> Result<bool, StorageError> {
        self.input.exists()
    }

    fn size_held(&self) -> usize {
        self.input.size_held()
    }

    fn partial_decode(
        &self,
        indexer: &dyn Indexer,
        options: &CodecOptions,
    ) -> Result<ArrayBytes<'_>, CodecError> {
        if !self.input.exists()? {
            return ArrayBytes::new_fill_value(&self.data_type, indexer.len(), &self.fill_value)
                .map_err(CodecError::from);
        }
        let whole = ArraySubset::new_with_shape(self.encoded_shape.clone());
        let encoded = self.input.partial_decode(&whole, options)?;
        let decoded = self.codec.decode(
            encoded,
            &self.shape,
            &self.data_type,
            &self.fill_value,
            options,
        )?;
        let shape: Vec<u64> = self.shape.iter().map(|d| d.get()).collect();
        decoded
            .extract_array_subset(indexer, &shape, &self.data_type)
            .map(ArrayBytes::into_owned)
    }

    fn supports_partial_decode(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(kind: Kind, v: Value) -> Result<Filter, PluginCreateError> {
        Filter::from_config(kind, v.as_object().unwrap())
    }

    #[test]
    fn delta_wraps_in_the_decoded_width() {
        let f = filter(Kind::Delta, json!({"dtype": "<i2", "astype": "|i1"})).unwrap();
        let enc: Vec<u8> = [100i8, 100, 100, -128].iter().map(|&v| v as u8).collect();
        let out = f.decode_chunk(&enc, 4, 2).unwrap();
        let got: Vec<i16> = out
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(got, [100, 200, 300, 172]);
        let f = filter(Kind::Delta, json!({"dtype": "|u1", "astype": "<i4"})).unwrap();
        let enc: Vec<u8> = [250i32, 10, -5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(f.decode_chunk(&enc, 3, 1).unwrap(), [250, 4, 255]);
    }

    #[test]
    fn astype_casts_as_numpy() {
        let f = filter(
            Kind::AsType,
            json!({"encode_dtype": "<f8", "decode_dtype": "<i2"}),
        )
        .unwrap();
        let enc: Vec<u8> = [-2.9f64, 3.99]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(f.decode_chunk(&enc, 2, 2).unwrap(), [254, 255, 3, 0]);
        let bad: Vec<u8> = 1e9f64.to_le_bytes().to_vec();
        assert!(f.decode_chunk(&bad, 1, 2).is_err());
        let f = filter(
            Kind::AsType,
            json!({"encode_dtype": "<i8", "decode_dtype": "<f4"}),
        )
        .unwrap();
        let big = (1i64 << 40) + 1;
        let out = f.decode_chunk(&big.to_le_bytes(), 1, 4).unwrap();
        assert_eq!(out, (big as f32).to_le_bytes());
    }

    #[test]
    fn packbits_unpacks_msb_first_and_checks_padding() {
        let f = filter(Kind::PackBits, json!({})).unwrap();
        assert_eq!(
            f.decode_chunk(&[6, 0b1010_0000, 0b0100_0000], 10, 1)
                .unwrap(),
            [1, 0, 1, 0, 0, 0, 0, 0, 0, 1]
        );
        assert!(f.decode_chunk(&[8, 0], 0, 1).is_err());
        assert!(f.decode_chunk(&[0, 0], 9, 1).is_err());
        assert!(f.decode_chunk(&[], 0, 1).is_err());
    }

    #[test]
    fn configurations_that_cannot_be_replicated_are_unsupported() {
        for (kind, v) in [
            (Kind::Delta, json!({"dtype": "<f8", "astype": "<f4"})),
            (Kind::Delta, json!({"dtype": "<i4", "astype": "<f8"})),
            (Kind::Delta, json!({"dtype": ">i4"})),
            (
                Kind::AsType,
                json!({"encode_dtype": "<f2", "decode_dtype": "<f4"}),
            ),
        ] {
            assert!(
                matches!(
                    filter(kind, v.clone()),
                    Err(PluginCreateError::Unsupported(_))
                ),
                "{v}"
            );
        }
        for (kind, v) in [
            (Kind::Delta, json!({})),
            (Kind::Quantize, json!({"dtype": "<f8"})),
            (Kind::Quantize, json!({"digits": 2, "dtype": "<i4"})),
            (Kind::BitRound, json!({"keepbits": -1})),
        ] {
            assert!(
                matches!(filter(kind, v.clone()), Err(PluginCreateError::Other(_))),
                "{v}"
            );
        }
    }
}
