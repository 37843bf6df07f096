//! Checks of a data object's descriptor against what this build decodes, and the plan of how
//! the object becomes one variable: element type, byte order, decoded size, pipeline stages
//! (encoding, filter, compression, masks), what is lossy and what is refused (`Problem`).

use ciborium::Value;
use tensogram::{ByteOrder, DataObjectDescriptor, Dtype};
use tet_source::ElementType;

use crate::blosc2::{Blosc2Plan, BLOSC2_NOTE};

/// The compressions this build decodes (for the error message; `rle` and `roaring` are also
/// accepted on bitmask objects).
const SUPPORTED_COMPRESSIONS: &str = "none, zstd, lz4, szip, blosc2, zfp, sz3";
/// Mask methods this build decodes.
const SUPPORTED_MASK_METHODS: &str = "none, rle, roaring, zstd, lz4, blosc2";

/// How a variable's values come out of its object's decoded bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The elements as they are (a complex element is its (real, imaginary) pair).
    Whole,
    /// Bit `7 - i % 8` of byte `i / 8`, as a 0/1 byte.
    Bits,
}

/// Why an object cannot be delivered.
pub(crate) enum Problem {
    Malformed(String),
    Unsupported(String),
}

/// What an object becomes: one variable.
pub(crate) struct ObjectPlan {
    pub(crate) elem: ElementType,
    pub(crate) part: Part,
    pub(crate) swap_unit: usize,
    pub(crate) decoded_len: usize,
    pub(crate) blosc2: Option<Blosc2Plan>,
    pub(crate) notes: Vec<String>,
    pub(crate) filters: Vec<String>,
    /// The lossy stage of the pipeline and its parameters (`zfp(mode=fixed_rate, rate=16)`),
    /// when there is one: the values are its decoded output, not the values written.
    pub(crate) lossy: Option<String>,
    /// The descriptor's element strides when they are not C order (see [`check_shape`]).
    pub(crate) strides: Option<Vec<u64>>,
}

fn is_int(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Integer(_)))
}

pub(crate) fn int_param(desc: &DataObjectDescriptor, key: &str) -> Option<i128> {
    match desc.params.get(key) {
        Some(Value::Integer(i)) => Some(i128::from(*i)),
        _ => None,
    }
}

/// Requires integer parameters `keys` of a pipeline stage.
fn require_ints(
    desc: &DataObjectDescriptor,
    stage: &str,
    keys: &[&str],
) -> std::result::Result<(), Problem> {
    for k in keys {
        if !is_int(desc.params.get(*k)) {
            return Err(Problem::Malformed(format!(
                "{stage} needs the integer parameter '{k}', which is missing or not an integer"
            )));
        }
    }
    Ok(())
}

/// Checks a descriptor and works out what it becomes.
pub(crate) fn plan_object(
    desc: &DataObjectDescriptor,
    payload_len: usize,
) -> std::result::Result<ObjectPlan, Problem> {
    let (n, strides) = check_shape(desc)?;
    let mut notes = Vec::new();
    if let Some(st) = &strides {
        notes.push(format!(
            "element strides {st:?} (not C order) transposed to C order on read"
        ));
    }
    let mut filters = Vec::new();
    let bits_per_value = check_encoding(desc, &mut filters, &mut notes)?;
    check_filter(desc, &mut filters)?;
    let lossy_codec = check_compression(desc, &mut filters)?;
    check_masks(desc, &mut notes)?;
    let lossy = match (bits_per_value, lossy_codec) {
        (Some(_), _) => Some(param_list(desc, "simple_packing", "sp_")),
        (None, Some(codec)) => {
            let stage = param_list(desc, codec, &format!("{codec}_"));
            notes.push(format!(
                "lossy compression {stage}: values are the decoded f64"
            ));
            Some(stage)
        }
        (None, None) => None,
    };
    let (decoded_len, encoded_len) = check_sizes(desc, n, bits_per_value, payload_len)?;
    let blosc2_masks = desc.masks.as_ref().is_some_and(|m| {
        [&m.nan, &m.pos_inf, &m.neg_inf]
            .into_iter()
            .flatten()
            .any(|k| k.method == "blosc2")
    });
    let via_blosc2 = desc.compression == "blosc2" || blosc2_masks;
    if via_blosc2 {
        notes.push(BLOSC2_NOTE.to_string());
    }
    let (elem, part, unit) = element_of(desc.dtype, bits_per_value.is_some());
    if part == Part::Bits {
        notes.push("bitmask unpacked MSB-first to one u8 (0 or 1) per element".to_string());
    }
    let swap_unit = if desc.byte_order == ByteOrder::Big {
        unit
    } else {
        1
    };
    Ok(ObjectPlan {
        elem,
        part,
        swap_unit,
        decoded_len,
        blosc2: via_blosc2.then_some(Blosc2Plan {
            stage_len: encoded_len,
            elements: n,
        }),
        notes,
        filters,
        lossy,
        strides,
    })
}

/// A pipeline stage and its parameters, `stage(key=value, …)`: the parameters whose names start
/// with `prefix` (without it), in key order.
fn param_list(desc: &DataObjectDescriptor, stage: &str, prefix: &str) -> String {
    let params: Vec<String> = desc
        .params
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?, v)))
        .map(|(k, v)| match v {
            Value::Text(t) => format!("{k}={t}"),
            other => format!("{k}={}", crate::meta::json(other)),
        })
        .collect();
    format!("{stage}({})", params.join(", "))
}

/// Checks `ndim` and the strides against the shape; the element count, and the strides when
/// they are not C order. Element strides that lay the elements out densely in another axis
/// order (Fortran order `[1, n0, n0*n1, …]`, or any permutation of the axes) are read: the
/// element at index `i` is element `Σ i[k]·strides[k]` of the decoded payload, and the object
/// is transposed to C order when it is decoded. Other strides (overlapping, gapped) are
/// unsupported. An axis of length 1 may have any stride.
fn check_shape(
    desc: &DataObjectDescriptor,
) -> std::result::Result<(u64, Option<Vec<u64>>), Problem> {
    let shape = &desc.shape;
    if desc.ndim != shape.len() as u64 {
        return Err(Problem::Malformed(format!(
            "ndim {} does not match shape {shape:?}",
            desc.ndim
        )));
    }
    let n = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Problem::Malformed(format!("shape {shape:?} has too many elements")))?;
    if desc.strides.len() != shape.len() {
        return Err(Problem::Malformed(format!(
            "strides {:?} do not match shape {shape:?}",
            desc.strides
        )));
    }
    if n == 0 {
        return Ok((n, None));
    }
    let mut expected = vec![1u64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        expected[k] = expected[k + 1].saturating_mul(shape[k + 1]);
    }
    let strided = |k: usize| shape[k] > 1;
    if (0..shape.len()).all(|k| !strided(k) || desc.strides[k] == expected[k]) {
        return Ok((n, None));
    }
    // Dense in another axis order: sorted by stride, each axis steps over all the ones before.
    let mut axes: Vec<usize> = (0..shape.len()).filter(|&k| strided(k)).collect();
    axes.sort_by_key(|&k| desc.strides[k]);
    let mut step = 1u64;
    for &k in &axes {
        if desc.strides[k] != step {
            let fortran: Vec<u64> = shape
                .iter()
                .scan(1u64, |step, &d| {
                    let here = *step;
                    *step = step.saturating_mul(d);
                    Some(here)
                })
                .collect();
            return Err(Problem::Unsupported(format!(
                "strides {:?} for shape {shape:?} do not lay the elements out densely in any \
                 axis order (C order would be {expected:?}, Fortran order {fortran:?}): no \
                 lossless reading of the payload",
                desc.strides
            )));
        }
        step = step.saturating_mul(shape[k]);
    }
    if desc.dtype == Dtype::Bitmask {
        return Err(Problem::Unsupported(format!(
            "a bitmask object with strides {:?} (not C order) is not transposed",
            desc.strides
        )));
    }
    Ok((n, Some(desc.strides.clone())))
}

/// Checks the encoding stage; the bits per value of a `simple_packing` object (`None` for no
/// encoding).
fn check_encoding(
    desc: &DataObjectDescriptor,
    filters: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> std::result::Result<Option<u64>, Problem> {
    match desc.encoding.as_str() {
        "none" => return Ok(None),
        "simple_packing" => {}
        other => {
            return Err(Problem::Unsupported(format!(
                "encoding '{other}' is not supported by this build (supported: none, \
                 simple_packing)"
            )))
        }
    }
    if desc.dtype != Dtype::Float64 {
        return Err(Problem::Malformed(format!(
            "simple_packing applies to float64 objects only, this one is {}",
            desc.dtype
        )));
    }
    require_ints(
        desc,
        "simple_packing",
        &[
            "sp_binary_scale_factor",
            "sp_decimal_scale_factor",
            "sp_bits_per_value",
        ],
    )?;
    if !matches!(
        desc.params.get("sp_reference_value"),
        Some(Value::Float(_) | Value::Integer(_))
    ) {
        return Err(Problem::Malformed(
            "simple_packing needs the number parameter 'sp_reference_value'".to_string(),
        ));
    }
    let bits_per_value = match int_param(desc, "sp_bits_per_value") {
        Some(b @ 0..=64) => b as u64,
        other => {
            return Err(Problem::Malformed(format!(
                "simple_packing bits per value {other:?} is outside 0..=64"
            )))
        }
    };
    filters.push(format!("simple_packing({bits_per_value} bits)"));
    notes.push("lossy encoding simple_packing: values are the decoded f64".to_string());
    Ok(Some(bits_per_value))
}

/// Checks the filter stage.
fn check_filter(
    desc: &DataObjectDescriptor,
    filters: &mut Vec<String>,
) -> std::result::Result<(), Problem> {
    match desc.filter.as_str() {
        "none" => {}
        "shuffle" => {
            require_ints(desc, "the shuffle filter", &["shuffle_element_size"])?;
            filters.push("shuffle".to_string());
        }
        other => {
            return Err(Problem::Unsupported(format!(
                "filter '{other}' is not supported by this build (supported: none, shuffle)"
            )))
        }
    }
    Ok(())
}

/// Checks the compression stage; the name of a lossy codec (`zfp`, `sz3`).
fn check_compression(
    desc: &DataObjectDescriptor,
    filters: &mut Vec<String>,
) -> std::result::Result<Option<&'static str>, Problem> {
    let compression = desc.compression.as_str();
    match compression {
        "none" => {}
        "zstd" => filters.push(match int_param(desc, "zstd_level") {
            Some(l) => format!("zstd({l})"),
            None => "zstd".to_string(),
        }),
        "lz4" => filters.push("lz4".to_string()),
        "szip" => {
            require_ints(desc, "szip", &["szip_rsi", "szip_block_size", "szip_flags"])?;
            filters.push("szip".to_string());
        }
        "blosc2" => filters.push(check_blosc2(desc)?),
        "zfp" => {
            check_zfp(desc)?;
            filters.push(param_list(desc, "zfp", "zfp_"));
            return Ok(Some("zfp"));
        }
        "sz3" => {
            check_sz3(desc)?;
            filters.push(param_list(desc, "sz3", "sz3_"));
            return Ok(Some("sz3"));
        }
        "rle" | "roaring" => {
            if desc.dtype != Dtype::Bitmask {
                return Err(Problem::Malformed(format!(
                    "compression '{compression}' applies to bitmask objects only, this one is \
                     {}",
                    desc.dtype
                )));
            }
            filters.push(compression.to_string());
        }
        other => {
            return Err(Problem::Unsupported(format!(
                "compression '{other}' is not supported by this build (supported: \
                 {SUPPORTED_COMPRESSIONS})"
            )))
        }
    }
    Ok(None)
}

/// The parameter `key` of a pipeline stage, when present: it must be text.
fn text_param<'d>(
    desc: &'d DataObjectDescriptor,
    stage: &str,
    key: &str,
) -> std::result::Result<Option<&'d str>, Problem> {
    match desc.params.get(key) {
        None => Ok(None),
        Some(Value::Text(t)) => Ok(Some(t)),
        Some(_) => Err(Problem::Malformed(format!(
            "{stage} parameter '{key}' is not text"
        ))),
    }
}

/// Requires the number parameter `key` (a float or an integer) of a pipeline stage.
fn require_number(
    desc: &DataObjectDescriptor,
    stage: &str,
    key: &str,
) -> std::result::Result<(), Problem> {
    match desc.params.get(key) {
        Some(Value::Float(_) | Value::Integer(_)) => Ok(()),
        _ => Err(Problem::Malformed(format!(
            "{stage} needs the number parameter '{key}', which is missing or not a number"
        ))),
    }
}

/// Checks a blosc2 stage (`blosc2_codec` and `blosc2_clevel` are optional, as for tensogram's
/// writer, which defaults them to lz4 and 5); its name in the layout's filter list.
fn check_blosc2(desc: &DataObjectDescriptor) -> std::result::Result<String, Problem> {
    let codec = text_param(desc, "blosc2", "blosc2_codec")?.unwrap_or("lz4");
    if !BLOSC2_CODECS.contains(&codec) {
        return Err(Problem::Unsupported(format!(
            "blosc2 codec '{codec}' is not supported by this build (supported: {})",
            BLOSC2_CODECS.join(", ")
        )));
    }
    if !desc.params.contains_key("blosc2_clevel") {
        return Ok(format!("blosc2({codec})"));
    }
    require_ints(desc, "blosc2", &["blosc2_clevel"])?;
    match int_param(desc, "blosc2_clevel") {
        Some(l) if i32::try_from(l).is_ok() => Ok(format!("blosc2({codec}, {l})")),
        l => Err(Problem::Malformed(format!(
            "blosc2 level {l:?} is outside the i32 range"
        ))),
    }
}

/// The codecs tensogram's blosc2 stage knows.
const BLOSC2_CODECS: [&str; 5] = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"];

/// zfp and sz3 compress the stage's input bytes as float64 values (tensogram's compressors read
/// them as native `f64`, whatever the dtype): only a float64 object with no encoding and no
/// filter comes back as values. Any other pipeline decodes to something else than what was
/// written (tensogram itself returns bytes of the wrong size or scrambled values), so it is
/// refused with the reason.
fn require_plain_float64(
    desc: &DataObjectDescriptor,
    codec: &str,
) -> std::result::Result<(), Problem> {
    let why = if desc.dtype != Dtype::Float64 {
        format!("a {} object", desc.dtype)
    } else if desc.encoding != "none" {
        format!("the output of encoding '{}'", desc.encoding)
    } else if desc.filter != "none" {
        format!("the output of filter '{}'", desc.filter)
    } else {
        return Ok(());
    };
    Err(Problem::Unsupported(format!(
        "compression '{codec}' on {why}: tensogram's {codec} codec compresses its input as \
         float64 values, so only plain float64 objects decode to their values"
    )))
}

/// Checks a zfp stage: a plain float64 object and the parameters of its mode.
fn check_zfp(desc: &DataObjectDescriptor) -> std::result::Result<(), Problem> {
    require_plain_float64(desc, "zfp")?;
    let Some(mode) = text_param(desc, "zfp", "zfp_mode")? else {
        return Err(Problem::Malformed(
            "zfp needs the text parameter 'zfp_mode'".to_string(),
        ));
    };
    match mode {
        "fixed_rate" => require_number(desc, "zfp fixed_rate", "zfp_rate"),
        "fixed_accuracy" => require_number(desc, "zfp fixed_accuracy", "zfp_tolerance"),
        "fixed_precision" => {
            require_ints(desc, "zfp fixed_precision", &["zfp_precision"])?;
            match int_param(desc, "zfp_precision") {
                Some(p) if u32::try_from(p).is_ok() => Ok(()),
                p => Err(Problem::Malformed(format!(
                    "zfp precision {p:?} is outside the u32 range"
                ))),
            }
        }
        other => Err(Problem::Unsupported(format!(
            "zfp mode '{other}' is not supported by this build (supported: fixed_rate, \
             fixed_precision, fixed_accuracy)"
        ))),
    }
}

/// Checks an sz3 stage: a plain float64 object, its error-bound mode and bound.
fn check_sz3(desc: &DataObjectDescriptor) -> std::result::Result<(), Problem> {
    require_plain_float64(desc, "sz3")?;
    let Some(mode) = text_param(desc, "sz3", "sz3_error_bound_mode")? else {
        return Err(Problem::Malformed(
            "sz3 needs the text parameter 'sz3_error_bound_mode'".to_string(),
        ));
    };
    if !matches!(mode, "abs" | "rel" | "psnr") {
        return Err(Problem::Unsupported(format!(
            "sz3 error bound mode '{mode}' is not supported by this build (supported: abs, \
             rel, psnr)"
        )));
    }
    require_number(desc, "sz3", "sz3_error_bound")
}

/// Checks the NaN / Inf masks (methods this build decodes, never on a bitmask) and notes the
/// restoration.
fn check_masks(
    desc: &DataObjectDescriptor,
    notes: &mut Vec<String>,
) -> std::result::Result<(), Problem> {
    let Some(masks) = &desc.masks else {
        return Ok(());
    };
    let present: Vec<(&str, &tensogram::MaskDescriptor)> = [
        ("nan", masks.nan.as_ref()),
        ("inf+", masks.pos_inf.as_ref()),
        ("inf-", masks.neg_inf.as_ref()),
    ]
    .into_iter()
    .filter_map(|(k, m)| m.map(|m| (k, m)))
    .collect();
    for (kind, m) in &present {
        let known = matches!(
            m.method.as_str(),
            "none" | "rle" | "roaring" | "zstd" | "lz4" | "blosc2"
        );
        if !known {
            return Err(Problem::Unsupported(format!(
                "{kind} mask method '{}' is not supported by this build (supported: \
                 {SUPPORTED_MASK_METHODS})",
                m.method
            )));
        }
    }
    if !present.is_empty() {
        if desc.dtype == Dtype::Bitmask {
            return Err(Problem::Malformed(
                "NaN/Inf masks on a bitmask object".to_string(),
            ));
        }
        let kinds: Vec<&str> = present.iter().map(|(k, _)| *k).collect();
        notes.push(format!(
            "non-finite values restored from the tensogram masks ({}): canonical quiet NaN \
             and ±Inf",
            kinds.join(", ")
        ));
    }
    Ok(())
}

/// Checks the payload size against the encoded stream `n` elements make (before compression);
/// the lengths of the decoded bytes and of that stream.
fn check_sizes(
    desc: &DataObjectDescriptor,
    n: u64,
    bits_per_value: Option<u64>,
    payload_len: usize,
) -> std::result::Result<(usize, usize), Problem> {
    let (shape, dtype) = (&desc.shape, desc.dtype);
    let too_big = || Problem::Malformed(format!("shape {shape:?} of {dtype} is too large"));
    let width = dtype.byte_width() as u64;
    let encoded_len: u64 = if let Some(bits) = bits_per_value {
        n.checked_mul(bits).ok_or_else(too_big)?.div_ceil(8)
    } else if dtype == Dtype::Bitmask {
        n.div_ceil(8)
    } else {
        n.checked_mul(width).ok_or_else(too_big)?
    };
    let decoded_len: u64 = if bits_per_value.is_some() {
        n.checked_mul(8).ok_or_else(too_big)?
    } else {
        encoded_len
    };
    let decoded_len = usize::try_from(decoded_len).map_err(|_| too_big())?;
    let encoded_len = usize::try_from(encoded_len).map_err(|_| too_big())?;
    match desc.compression.as_str() {
        "none" if payload_len != encoded_len => {
            return Err(Problem::Malformed(format!(
                "the payload is {payload_len} bytes, shape {shape:?} of {dtype} needs \
                 {encoded_len}"
            )));
        }
        // tensogram's lz4 stream starts with the decoded size (u32, little-endian), checked
        // against the descriptor by `check_lz4_prefix`.
        "lz4" if payload_len < 4 => {
            return Err(Problem::Malformed(format!(
                "the lz4 payload is {payload_len} bytes, too short for its size prefix"
            )));
        }
        _ => {}
    }
    Ok((decoded_len, encoded_len))
}

/// What the elements of an object of `dtype` are delivered as: element type, how they come
/// out of the decoded bytes, and the unit a big-endian object is byte-swapped in (each part
/// of a complex element on its own).
fn element_of(dtype: Dtype, simple_packing: bool) -> (ElementType, Part, usize) {
    let et = match dtype {
        Dtype::Complex64 => return (ElementType::C64, Part::Whole, 4),
        Dtype::Complex128 => return (ElementType::C128, Part::Whole, 8),
        Dtype::Bitmask => return (ElementType::U8, Part::Bits, 1),
        _ if simple_packing => ElementType::F64,
        Dtype::Float16 => ElementType::F16,
        Dtype::Bfloat16 => ElementType::BF16,
        Dtype::Float32 => ElementType::F32,
        Dtype::Float64 => ElementType::F64,
        Dtype::Int8 => ElementType::I8,
        Dtype::Int16 => ElementType::I16,
        Dtype::Int32 => ElementType::I32,
        Dtype::Int64 => ElementType::I64,
        Dtype::Uint8 => ElementType::U8,
        Dtype::Uint16 => ElementType::U16,
        Dtype::Uint32 => ElementType::U32,
        Dtype::Uint64 => ElementType::U64,
    };
    (et, Part::Whole, et.size())
}

/// The declared decoded size at the start of an lz4 payload must match the descriptor.
pub(crate) fn check_lz4_prefix(
    desc: &DataObjectDescriptor,
    payload: &[u8],
) -> std::result::Result<(), Problem> {
    let Some(p) = payload.get(..4) else {
        return Ok(());
    };
    let declared = u64::from(u32::from_le_bytes([p[0], p[1], p[2], p[3]]));
    let n = desc
        .shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .unwrap_or(u64::MAX);
    let expected = if desc.encoding == "simple_packing" {
        let bits = int_param(desc, "sp_bits_per_value")
            .unwrap_or(0)
            .clamp(0, 64) as u64;
        n.checked_mul(bits).map(|b| b.div_ceil(8))
    } else if desc.dtype == Dtype::Bitmask {
        Some(n.div_ceil(8))
    } else {
        n.checked_mul(desc.dtype.byte_width() as u64)
    };
    if expected != Some(declared) {
        return Err(Problem::Malformed(format!(
            "the lz4 payload declares {declared} decoded bytes, shape {:?} of {} needs {}",
            desc.shape,
            desc.dtype,
            expected.map_or("more than 2^64".to_string(), |e| e.to_string())
        )));
    }
    Ok(())
}
