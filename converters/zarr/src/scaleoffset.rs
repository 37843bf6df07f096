//! numcodecs' `fixedscaleoffset` filter, decoded exactly as numcodecs decodes it.
//!
//! zarrs has this codec, but it parses `scale` and `offset` as `f32` and computes in `f32` for
//! most types, while numcodecs (which wrote the data) computes with NumPy:
//!
//! ```python
//! enc = ensure_ndarray(buf).view(self.astype)
//! dec = (enc / self.scale) + self.offset      # scale, offset: Python numbers from the JSON
//! dec = dec.astype(self.dtype, copy=False)
//! ```
//!
//! `enc / scale` with a Python number is a `float64` array when `enc` is an integer or
//! `float64` array, and a `float32` array when `enc` is `float32` (NumPy 2's NEP 50 and
//! NumPy 1's value-based casting agree on these cases); `+ offset` keeps that type; the cast to
//! `dtype` rounds to nearest (float targets) or truncates towards zero (integer targets).
//! [`FixedScaleOffset`] replaces zarrs' codec (a runtime plugin, registered by
//! [`register`], takes precedence over the built-in one) and does exactly that, with
//! `scale` and `offset` kept as `f64`. zarrs' results differ in the last bit of `float32` data
//! and by about 1e-5 in `float64` data.
//!
//! What NumPy leaves undefined is refused instead of guessed: a decoded value that is NaN,
//! infinite or outside an integer `dtype` is a read error naming the value. `float16` and
//! big-endian `dtype`/`astype` are unsupported (an unsupported codec, skippable).
//!
//! Encoding (`(x - offset) * scale`, rounded half to even, cast to `astype`) is implemented
//! for completeness (nothing here writes Zarr). The encoded fill value is the array's fill value
//! *cast* to `astype`, not encoded, as zarr-python's `resolve_metadata` does (it only matters
//! to a sharding codec after this filter, for inner chunks never written); a fill value
//! `astype` cannot hold (NaN into an integer) saturates, as Rust's `as` does.

use std::any::Any;
use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::{Arc, Once};

use serde_json::{Map, Value};
use zarrs::array::codec::api::{
    register_codec_v2, register_codec_v3, ArrayBytes, ArrayCodecTraits, ArrayPartialDecoderTraits,
    ArrayToArrayCodecTraits, Codec, CodecError, CodecMetadataOptions, CodecOptions,
    CodecRuntimePluginV2, CodecRuntimePluginV3, CodecTraits, PartialDecoderCapability,
    PartialEncoderCapability, RecommendedConcurrency,
};
use zarrs::array::{data_type, DataType, FillValue, Indexer};
use zarrs::metadata::Configuration;
use zarrs::plugin::{ExtensionName, PluginCreateError, PluginUnsupportedError, ZarrVersion};
use zarrs::storage::StorageError;

/// The codec's Zarr v3 name.
pub const NAME_V3: &str = "numcodecs.fixedscaleoffset";
/// The codec's Zarr v2 id.
pub const ID_V2: &str = "fixedscaleoffset";

/// Registers [`FixedScaleOffset`] for the v3 name and the v2 id. Idempotent.
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_codec_v3(CodecRuntimePluginV3::new(
            |name| name == NAME_V3 || name == ID_V2,
            |metadata| {
                let empty = Configuration::default();
                let config = metadata.configuration().unwrap_or(&empty);
                FixedScaleOffset::from_config(config).map(|c| Codec::ArrayToArray(Arc::new(c)))
            },
        ));
        register_codec_v2(CodecRuntimePluginV2::new(
            |name| name == ID_V2,
            |metadata| {
                FixedScaleOffset::from_config(metadata.configuration())
                    .map(|c| Codec::ArrayToArray(Arc::new(c)))
            },
        ));
    });
}

/// A NumPy numeric type the codec handles (also used by the `filters` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Num {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
}

/// A NumPy dtype string the codecs do not take (the string).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadNum {
    /// Not one of the integer or float types.
    #[error("type '{0}' (only 8- to 64-bit integers, float32 and float64)")]
    Type(String),
    /// A big-endian type.
    #[error("big-endian type '{0}'")]
    BigEndian(String),
}

/// A decoded value the codec's dtype cannot hold (numcodecs' result would be undefined).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "decoded value {value} does not fit the codec's dtype {dtype:?} (numcodecs' result would \
     be undefined)"
)]
pub(crate) struct DoesNotFit {
    /// The value.
    pub value: f64,
    /// The type it should be stored as.
    pub dtype: Num,
}

impl Num {
    /// Parses a NumPy dtype string (`<f8`, `|u1`, `f4`, `float64`, …).
    pub(crate) fn parse(s: &str) -> Result<Num, BadNum> {
        let named = match s {
            "int8" => Some(Num::I8),
            "int16" => Some(Num::I16),
            "int32" => Some(Num::I32),
            "int64" => Some(Num::I64),
            "uint8" => Some(Num::U8),
            "uint16" => Some(Num::U16),
            "uint32" => Some(Num::U32),
            "uint64" => Some(Num::U64),
            "float32" => Some(Num::F32),
            "float64" => Some(Num::F64),
            _ => None,
        };
        if let Some(n) = named {
            return Ok(n);
        }
        let (order, code) = match s.chars().next() {
            Some(c @ ('<' | '>' | '|' | '=')) => (Some(c), &s[1..]),
            _ => (None, s),
        };
        let num = match code {
            "i1" => Num::I8,
            "i2" => Num::I16,
            "i4" => Num::I32,
            "i8" => Num::I64,
            "u1" => Num::U8,
            "u2" => Num::U16,
            "u4" => Num::U32,
            "u8" => Num::U64,
            "f4" => Num::F32,
            "f8" => Num::F64,
            _ => return Err(BadNum::Type(s.to_string())),
        };
        if order == Some('>') && num.size() > 1 {
            return Err(BadNum::BigEndian(s.to_string()));
        }
        Ok(num)
    }

    pub(crate) fn size(self) -> usize {
        match self {
            Num::I8 | Num::U8 => 1,
            Num::I16 | Num::U16 => 2,
            Num::I32 | Num::U32 | Num::F32 => 4,
            Num::I64 | Num::U64 | Num::F64 => 8,
        }
    }

    pub(crate) fn data_type(self) -> DataType {
        match self {
            Num::I8 => data_type::int8(),
            Num::I16 => data_type::int16(),
            Num::I32 => data_type::int32(),
            Num::I64 => data_type::int64(),
            Num::U8 => data_type::uint8(),
            Num::U16 => data_type::uint16(),
            Num::U32 => data_type::uint32(),
            Num::U64 => data_type::uint64(),
            Num::F32 => data_type::float32(),
            Num::F64 => data_type::float64(),
        }
    }

    /// The value of one native-endian element as `f64` (NumPy's `astype(float64)`: integers
    /// round to nearest, float32 widens exactly). `bytes` has exactly [`Num::size`] bytes.
    #[allow(clippy::cast_precision_loss)]
    fn load_f64(self, b: &[u8]) -> f64 {
        macro_rules! ld {
            ($t:ty) => {{
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_ne_bytes(a) as f64
            }};
        }
        match self {
            Num::I8 => ld!(i8),
            Num::I16 => ld!(i16),
            Num::I32 => ld!(i32),
            Num::I64 => ld!(i64),
            Num::U8 => ld!(u8),
            Num::U16 => ld!(u16),
            Num::U32 => ld!(u32),
            Num::U64 => ld!(u64),
            Num::F32 => ld!(f32),
            Num::F64 => ld!(f64),
        }
    }

    /// Stores `v` as this type into `out` ([`Num::size`] bytes, native-endian), as NumPy's
    /// `astype` does: floats round to nearest, integers truncate towards zero. A value an
    /// integer type cannot hold (NaN, infinite, out of range: undefined in NumPy) is an error.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    fn store(self, v: f64, out: &mut [u8]) -> Result<(), DoesNotFit> {
        let int = |bits: i32, signed: bool| -> Result<f64, DoesNotFit> {
            let t = v.trunc();
            // Bounds as exact powers of two: [-2^(bits-1), 2^(bits-1)) or [0, 2^bits).
            let (lo, hi) = if signed {
                (-(2f64.powi(bits - 1)), 2f64.powi(bits - 1))
            } else {
                (0.0, 2f64.powi(bits))
            };
            if t.is_finite() && t >= lo && t < hi {
                Ok(t)
            } else {
                Err(DoesNotFit {
                    value: v,
                    dtype: self,
                })
            }
        };
        match self {
            Num::I8 => out.copy_from_slice(&(int(8, true)? as i8).to_ne_bytes()),
            Num::I16 => out.copy_from_slice(&(int(16, true)? as i16).to_ne_bytes()),
            Num::I32 => out.copy_from_slice(&(int(32, true)? as i32).to_ne_bytes()),
            Num::I64 => out.copy_from_slice(&(int(64, true)? as i64).to_ne_bytes()),
            Num::U8 => out.copy_from_slice(&(int(8, false)? as u8).to_ne_bytes()),
            Num::U16 => out.copy_from_slice(&(int(16, false)? as u16).to_ne_bytes()),
            Num::U32 => out.copy_from_slice(&(int(32, false)? as u32).to_ne_bytes()),
            Num::U64 => out.copy_from_slice(&(int(64, false)? as u64).to_ne_bytes()),
            Num::F32 => out.copy_from_slice(&(v as f32).to_ne_bytes()),
            Num::F64 => out.copy_from_slice(&v.to_ne_bytes()),
        }
        Ok(())
    }
}

impl Num {
    /// Stores `v` as this type with Rust's `as` (saturating, NaN → 0): a total conversion, for
    /// the encoded fill value only.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    fn store_saturating(self, v: f64, out: &mut [u8]) {
        match self {
            Num::I8 => out.copy_from_slice(&(v as i8).to_ne_bytes()),
            Num::I16 => out.copy_from_slice(&(v as i16).to_ne_bytes()),
            Num::I32 => out.copy_from_slice(&(v as i32).to_ne_bytes()),
            Num::I64 => out.copy_from_slice(&(v as i64).to_ne_bytes()),
            Num::U8 => out.copy_from_slice(&(v as u8).to_ne_bytes()),
            Num::U16 => out.copy_from_slice(&(v as u16).to_ne_bytes()),
            Num::U32 => out.copy_from_slice(&(v as u32).to_ne_bytes()),
            Num::U64 => out.copy_from_slice(&(v as u64).to_ne_bytes()),
            Num::F32 => out.copy_from_slice(&(v as f32).to_ne_bytes()),
            Num::F64 => out.copy_from_slice(&v.to_ne_bytes()),
        }
    }
}

/// numcodecs' `FixedScaleOffset(offset, scale, dtype, astype)`.
#[derive(Debug, Clone)]
pub struct FixedScaleOffset {
    scale: f64,
    offset: f64,
    dtype: Num,
    astype: Num,
    /// The configuration as found (given back verbatim as the codec's metadata).
    config: Map<String, Value>,
}

impl FixedScaleOffset {
    /// The codec of a v2 filter (without `id`) or v3 `configuration` object.
    pub fn from_config(config: &Map<String, Value>) -> Result<Self, PluginCreateError> {
        let unsupported = |what: String| {
            PluginCreateError::Unsupported(PluginUnsupportedError::new(
                format!("{ID_V2} with {what}"),
                "codec".into(),
            ))
        };
        let invalid = |what: &str| PluginCreateError::Other(format!("{ID_V2}: {what}"));
        let number = |key: &str| -> Result<f64, PluginCreateError> {
            match config.get(key) {
                Some(Value::Number(n)) => n
                    .as_f64()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| invalid(&format!("'{key}' is not a finite number"))),
                Some(_) => Err(invalid(&format!("'{key}' is not a number"))),
                None => Err(invalid(&format!("no '{key}'"))),
            }
        };
        let scale = number("scale")?;
        let offset = number("offset")?;
        let dtype = match config.get("dtype") {
            Some(Value::String(s)) => {
                Num::parse(s).map_err(|e| unsupported(format!("dtype {e}")))?
            }
            _ => return Err(invalid("'dtype' is not a string")),
        };
        let astype = match config.get("astype") {
            None | Some(Value::Null) => dtype,
            Some(Value::String(s)) => {
                Num::parse(s).map_err(|e| unsupported(format!("astype {e}")))?
            }
            Some(_) => return Err(invalid("'astype' is not a string")),
        };
        Ok(FixedScaleOffset {
            scale,
            offset,
            dtype,
            astype,
            config: config.clone(),
        })
    }

    /// Decodes one element: `astype` value `enc` → `dtype` value, as NumPy computes
    /// `(enc / scale + offset).astype(dtype)`.
    #[allow(clippy::cast_possible_truncation)]
    fn decode_one(&self, enc: &[u8], out: &mut [u8]) -> Result<(), DoesNotFit> {
        let v = if self.astype == Num::F32 {
            // float32 array with Python scalars: NumPy computes in float32 (each operation
            // rounded to float32), the scalars first rounded to float32.
            let e = self.astype.load_f64(enc) as f32;
            f64::from(e / self.scale as f32 + self.offset as f32)
        } else {
            self.astype.load_f64(enc) / self.scale + self.offset
        };
        self.dtype.store(v, out)
    }

    /// Encodes one element: `dtype` value → `astype` value, `around((x - offset) * scale)`.
    #[allow(clippy::cast_possible_truncation)]
    fn encode_one(&self, dec: &[u8], out: &mut [u8]) -> Result<(), DoesNotFit> {
        let v = if self.dtype == Num::F32 {
            let x = self.dtype.load_f64(dec) as f32;
            f64::from(((x - self.offset as f32) * self.scale as f32).round_ties_even())
        } else {
            ((self.dtype.load_f64(dec) - self.offset) * self.scale).round_ties_even()
        };
        self.astype.store(v, out)
    }

    fn check_type(&self, data_type: &DataType) -> Result<(), CodecError> {
        if *data_type == self.dtype.data_type() {
            Ok(())
        } else {
            Err(CodecError::Other(format!(
                "{ID_V2}: the array's data type {data_type} is not the codec's dtype {:?}",
                self.dtype
            )))
        }
    }

    /// Maps every element of `input` (elements of `from`) with `f` into a new buffer of
    /// elements of `to`.
    fn map(
        input: &[u8],
        from: Num,
        to: Num,
        f: impl Fn(&[u8], &mut [u8]) -> Result<(), DoesNotFit>,
    ) -> Result<Vec<u8>, CodecError> {
        if !input.len().is_multiple_of(from.size()) {
            return Err(CodecError::Other(format!(
                "{ID_V2}: {} bytes is not a whole number of {from:?} elements",
                input.len()
            )));
        }
        let n = input.len() / from.size();
        let len = n
            .checked_mul(to.size())
            .ok_or_else(|| CodecError::Other(format!("{ID_V2}: chunk too large")))?;
        let mut out = vec![0u8; len];
        for (i, o) in input
            .chunks_exact(from.size())
            .zip(out.chunks_exact_mut(to.size()))
        {
            f(i, o).map_err(|e| CodecError::Other(format!("{ID_V2}: {e}")))?;
        }
        Ok(out)
    }
}

impl ExtensionName for FixedScaleOffset {
    fn name(&self, version: ZarrVersion) -> Option<Cow<'static, str>> {
        Some(Cow::Borrowed(match version {
            ZarrVersion::V2 => ID_V2,
            _ => NAME_V3,
        }))
    }
}

impl CodecTraits for FixedScaleOffset {
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
        // Elementwise: zarrs' default array-to-array partial decoder decodes the part read.
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

impl ArrayCodecTraits for FixedScaleOffset {
    fn recommended_concurrency(
        &self,
        _shape: &[NonZeroU64],
        _data_type: &DataType,
    ) -> Result<RecommendedConcurrency, CodecError> {
        Ok(RecommendedConcurrency::new_maximum(1))
    }
}

impl ArrayToArrayCodecTraits for FixedScaleOffset {
    fn into_dyn(self: Arc<Self>) -> Arc<dyn ArrayToArrayCodecTraits> {
        self
    }

    fn encoded_data_type(&self, decoded_data_type: &DataType) -> Result<DataType, CodecError> {
        self.check_type(decoded_data_type)?;
        Ok(self.astype.data_type())
    }

    fn partial_decoder(
        self: Arc<Self>,
        input_handle: Arc<dyn ArrayPartialDecoderTraits>,
        _shape: &[NonZeroU64],
        data_type: &DataType,
        fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<Arc<dyn ArrayPartialDecoderTraits>, CodecError> {
        self.check_type(data_type)?;
        Ok(Arc::new(PartialDecoder {
            input: input_handle,
            codec: self,
            data_type: data_type.clone(),
            fill_value: fill_value.clone(),
        }))
    }

    fn encoded_fill_value(
        &self,
        decoded_data_type: &DataType,
        decoded_fill_value: &FillValue,
    ) -> Result<FillValue, CodecError> {
        self.check_type(decoded_data_type)?;
        let fill = decoded_fill_value.as_ne_bytes();
        if fill.len() != self.dtype.size() {
            return Err(CodecError::Other(format!(
                "{ID_V2}: a fill value of {} bytes for dtype {:?}",
                fill.len(),
                self.dtype
            )));
        }
        let mut out = vec![0u8; self.astype.size()];
        self.astype
            .store_saturating(self.dtype.load_f64(fill), &mut out);
        Ok(FillValue::new(out))
    }

    fn encode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        _shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        self.check_type(data_type)?;
        let input = bytes.into_fixed()?;
        let out = Self::map(&input, self.dtype, self.astype, |d, o| {
            self.encode_one(d, o)
        })?;
        Ok(ArrayBytes::from(out))
    }

    fn decode<'a>(
        &self,
        bytes: ArrayBytes<'a>,
        _shape: &[NonZeroU64],
        data_type: &DataType,
        _fill_value: &FillValue,
        _options: &CodecOptions,
    ) -> Result<ArrayBytes<'a>, CodecError> {
        self.check_type(data_type)?;
        let input = bytes.into_fixed()?;
        let out = Self::map(&input, self.astype, self.dtype, |e, o| {
            self.decode_one(e, o)
        })?;
        Ok(ArrayBytes::from(out))
    }
}

/// Partial decoder: like zarrs' default for array-to-array codecs (decode what the inner
/// decoder returns), except that a chunk that does not exist reads as the array's fill value.
/// zarrs' default decodes the inner decoder's fill (the *encoded* fill value) instead, which
/// is not the fill value (`0` stored as `u1` decodes to `offset`); zarr-python gives the fill
/// value for a chunk never written.
struct PartialDecoder {
    input: Arc<dyn ArrayPartialDecoderTraits>,
    codec: Arc<FixedScaleOffset>,
    data_type: DataType,
    fill_value: FillValue,
}

impl ArrayPartialDecoderTraits for PartialDecoder {
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
        let encoded = self.input.partial_decode(indexer, options)?.into_fixed()?;
        let out = FixedScaleOffset::map(&encoded, self.codec.astype, self.codec.dtype, |e, o| {
            self.codec.decode_one(e, o)
        })?;
        Ok(ArrayBytes::from(out))
    }

    fn supports_partial_decode(&self) -> bool {
        self.input.supports_partial_decode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codec(v: Value) -> FixedScaleOffset {
        FixedScaleOffset::from_config(v.as_object().unwrap()).unwrap()
    }

    #[test]
    fn decodes_in_f64_for_integer_encodings() {
        let c = codec(json!({"scale": 333.3, "offset": -12.5, "dtype": "<f8", "astype": "<i2"}));
        let mut out = [0u8; 8];
        c.decode_one(&1234i16.to_ne_bytes(), &mut out).unwrap();
        assert_eq!(
            f64::from_ne_bytes(out).to_bits(),
            (1234.0f64 / 333.3 - 12.5).to_bits()
        );
        // float32 data from an integer encoding: computed in f64, rounded once.
        let c = codec(json!({"scale": 33.3, "offset": 15.2, "dtype": "<f4", "astype": "<i2"}));
        let mut out = [0u8; 4];
        c.decode_one(&(-77i16).to_ne_bytes(), &mut out).unwrap();
        assert_eq!(
            f32::from_ne_bytes(out).to_bits(),
            ((-77.0f64 / 33.3 + 15.2) as f32).to_bits()
        );
    }

    #[test]
    fn decodes_in_f32_for_float32_encodings() {
        let c = codec(json!({"scale": 3.7, "offset": 0.3, "dtype": "<f8", "astype": "<f4"}));
        let mut out = [0u8; 8];
        c.decode_one(&123.0f32.to_ne_bytes(), &mut out).unwrap();
        let want = f64::from(123.0f32 / 3.7f32 + 0.3f32);
        assert_eq!(f64::from_ne_bytes(out).to_bits(), want.to_bits());
    }

    #[test]
    fn integer_targets_truncate_and_refuse_what_numpy_leaves_undefined() {
        let c = codec(json!({"scale": 0.5, "offset": 17, "dtype": "<i4", "astype": "<i2"}));
        let mut out = [0u8; 4];
        c.decode_one(&(-3i16).to_ne_bytes(), &mut out).unwrap();
        assert_eq!(i32::from_ne_bytes(out), 11);
        let c = codec(json!({"scale": 0.001, "offset": 0, "dtype": "|u1", "astype": "<i2"}));
        let mut out = [0u8; 1];
        assert!(c.decode_one(&1i16.to_ne_bytes(), &mut out).is_err());
        assert!(c.decode_one(&(-1i16).to_ne_bytes(), &mut out).is_err());
        c.decode_one(&0i16.to_ne_bytes(), &mut out).unwrap();
        assert_eq!(out[0], 0);
    }

    #[test]
    fn encodes_rounding_half_to_even() {
        let c = codec(json!({"scale": 1, "offset": 0, "dtype": "<f8", "astype": "<i2"}));
        let mut out = [0u8; 2];
        c.encode_one(&2.5f64.to_ne_bytes(), &mut out).unwrap();
        assert_eq!(i16::from_ne_bytes(out), 2);
        c.encode_one(&(-3.5f64).to_ne_bytes(), &mut out).unwrap();
        assert_eq!(i16::from_ne_bytes(out), -4);
    }

    #[test]
    fn unsupported_and_invalid_configurations() {
        let cfg = |v: Value| FixedScaleOffset::from_config(v.as_object().unwrap());
        for bad in [
            json!({"scale": 1, "offset": 0, "dtype": "<f2"}),
            json!({"scale": 1, "offset": 0, "dtype": ">f8", "astype": "u1"}),
            json!({"scale": 1, "offset": 0, "dtype": "<f8", "astype": ">i2"}),
        ] {
            assert!(matches!(cfg(bad), Err(PluginCreateError::Unsupported(_))));
        }
        for bad in [
            json!({"offset": 0, "dtype": "<f8"}),
            json!({"scale": "1", "offset": 0, "dtype": "<f8"}),
            json!({"scale": 1, "offset": 0}),
        ] {
            assert!(matches!(cfg(bad), Err(PluginCreateError::Other(_))));
        }
        assert!(cfg(json!({"scale": 1, "offset": 0, "dtype": ">u1", "astype": "float64"})).is_ok());
    }
}
