//! Zarr v2 `datetime64` / `timedelta64` data types (`"<M8[s]"`, `">m8[10ms]"`), which zarrs
//! reads in Zarr v3 (`numpy.datetime64` / `numpy.timedelta64` with a unit and a scale factor)
//! but not in v2. A runtime data-type plugin maps the v2 type string to the same zarrs data
//! type, so v2 arrays are read exactly as v3 ones are: int64 counts of `scale_factor` units,
//! the data type recorded in the facts. The byte order (`<`/`>`) is zarrs' business (it comes
//! from the type string, as for every v2 number). A type without a unit (`"<M8"`, NumPy's
//! generic unit) stays unsupported.

use std::num::NonZeroU32;
use std::sync::Once;

use zarrs::array::data_type::api::{register_data_type_v2, DataTypeRuntimePluginV2};
use zarrs::array::data_type::{numpy_datetime64, numpy_timedelta64, NumpyTimeUnit};
use zarrs::metadata::v2::DataTypeMetadataV2;
use zarrs::plugin::{PluginCreateError, PluginUnsupportedError};

/// `(datetime, unit, scale)` of a v2 type string such as `<M8[10ms]`.
fn parse(s: &str) -> Option<(bool, NumpyTimeUnit, NonZeroU32)> {
    let rest = s.strip_prefix(['<', '>'])?;
    let (datetime, rest) = if let Some(r) = rest.strip_prefix("M8[") {
        (true, r)
    } else {
        (false, rest.strip_prefix("m8[")?)
    };
    let inner = rest.strip_suffix(']')?;
    let digits = inner
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(inner.len());
    let (n, unit) = inner.split_at(digits);
    let scale = if n.is_empty() { 1 } else { n.parse().ok()? };
    let unit = match unit {
        "Y" => NumpyTimeUnit::Year,
        "M" => NumpyTimeUnit::Month,
        "W" => NumpyTimeUnit::Week,
        "D" => NumpyTimeUnit::Day,
        "h" => NumpyTimeUnit::Hour,
        "m" => NumpyTimeUnit::Minute,
        "s" => NumpyTimeUnit::Second,
        "ms" => NumpyTimeUnit::Millisecond,
        "us" | "μs" => NumpyTimeUnit::Microsecond,
        "ns" => NumpyTimeUnit::Nanosecond,
        "ps" => NumpyTimeUnit::Picosecond,
        "fs" => NumpyTimeUnit::Femtosecond,
        "as" => NumpyTimeUnit::Attosecond,
        _ => return None,
    };
    Some((datetime, unit, NonZeroU32::new(scale)?))
}

/// Whether a v2 type string names a datetime64/timedelta64 (with or without a valid unit).
fn is_time(s: &str) -> bool {
    let rest = s.trim_start_matches(['<', '>', '|', '=']);
    rest.starts_with("M8") || rest.starts_with("m8")
}

/// Registers the v2 datetime64/timedelta64 data types. Idempotent.
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_data_type_v2(DataTypeRuntimePluginV2::new(is_time, |metadata| {
            let DataTypeMetadataV2::Simple(s) = metadata else {
                return Err(PluginCreateError::Other("not a type string".into()));
            };
            match parse(s) {
                Some((true, unit, scale)) => Ok(numpy_datetime64(unit, scale)),
                Some((false, unit, scale)) => Ok(numpy_timedelta64(unit, scale)),
                None => Err(PluginCreateError::Unsupported(PluginUnsupportedError::new(
                    format!("{s} (a datetime64/timedelta64 without a known unit)"),
                    "data type".into(),
                ))),
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_strings() {
        assert!(matches!(
            parse("<M8[10ms]"),
            Some((true, NumpyTimeUnit::Millisecond, s)) if s.get() == 10
        ));
        assert!(matches!(
            parse(">m8[s]"),
            Some((false, NumpyTimeUnit::Second, s)) if s.get() == 1
        ));
        for bad in ["<M8", "<M8[]", "<M8[0s]", "<M8[10x]", "<f8", "M8[s]"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
        assert!(is_time("<M8") && is_time(">m8[s]") && !is_time("<i8"));
    }
}
