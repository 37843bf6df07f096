//! HDF5 time values (`H5T_TIME`: `H5T_UNIX_D32*`, `H5T_UNIX_D64*`), which libhdf5 stores as
//! plain integers and never converts. Their one writer in use is PyTables:
//!
//! * `Time32Col` / `Time32Atom` (32 bits): whole seconds since 1970-01-01 00:00:00 UTC. The
//!   stored integer is the value; the variable gets the CF `units`
//!   `seconds since 1970-01-01 00:00:00`.
//! * `Time64Col` / `Time64Atom` (64 bits): a `struct timeval` packed into one integer — the
//!   seconds in the high 32 bits (signed), the microseconds in the low 32 bits. PyTables reads
//!   it as the float `seconds + microseconds * 1e-6` (`1178896298.832258`), which is not exact
//!   in binary; here it is the exact integer count of **microseconds** since the epoch,
//!   `seconds * 1_000_000 + microseconds` (CF `units` `microseconds since 1970-01-01 00:00:00`,
//!   which xarray decodes to the same instants), and any 32-bit seconds and microseconds fit
//!   an `i64` without overflow.
//!
//! PyTables writes a negative time with a fraction (before 1970) with the microseconds word
//! negative too (`-1.5` → seconds `-1`, microseconds `-500000` in two's complement) and reads
//! the word back as signed; so does this module (`-1_500_000` µs). PyTables rounds the fraction
//! to microseconds, which can reach a whole second (`5.9999997` → seconds `5`, microseconds
//! `1000000`): that is taken as it is. A low word outside `-1_000_000..=1_000_000` is not
//! microseconds: such a 64-bit time (an integer written by another tool with another meaning)
//! is refused in one line naming the dataset and the value, never delivered as a guess.

use tet_source::{Feature, SourceError};

/// The CF units of 32-bit HDF5 time values (stored seconds).
pub(crate) const UNITS_SECONDS: &str = "seconds since 1970-01-01 00:00:00";
/// The CF units of decoded 64-bit HDF5 time values (microseconds).
pub(crate) const UNITS_MICROSECONDS: &str = "microseconds since 1970-01-01 00:00:00";
/// Unix time has no leap seconds and the Gregorian calendar throughout.
pub(crate) const CALENDAR: &str = "proleptic_gregorian";

/// A 64-bit time value whose low word is not a count of microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotTimeval(pub i64);

impl NotTimeval {
    /// The refusal, naming the dataset (or attribute) `what`.
    pub(crate) fn error(self, what: &str) -> SourceError {
        Feature::DataType.unsupported(format!(
            "{what}: 64-bit HDF5 time value {:#018x} is not PyTables' seconds and microseconds (microseconds word {})",
            self.0 as u64, self.0 as i32
        ))
    }
}

/// The microseconds since the epoch of a stored 64-bit time value (see the module notes).
pub(crate) fn micros(raw: i64) -> Result<i64, NotTimeval> {
    let seconds = raw >> 32;
    // The low word, signed (PyTables' negative fractions).
    let micros = i64::from(raw as i32);
    if micros.abs() > 1_000_000 {
        return Err(NotTimeval(raw));
    }
    // |seconds| ≤ 2^31 and |micros| ≤ 10^6: the result is below 2^52 in magnitude.
    Ok(seconds * 1_000_000 + micros)
}

/// Decodes little-endian stored 64-bit time values in place into microseconds.
pub(crate) fn decode_in_place(buf: &mut [u8]) -> Result<(), NotTimeval> {
    for c in buf.chunks_exact_mut(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        let us = micros(i64::from_le_bytes(b))?;
        c.copy_from_slice(&us.to_le_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(seconds: i32, micros: i32) -> i64 {
        (i64::from(seconds) << 32) | i64::from(micros as u32)
    }

    #[test]
    fn seconds_and_microseconds() {
        // The value PyTables reads as 1178896298.832258.
        assert_eq!(raw(1_178_896_298, 832_258), 5_063_321_045_286_302_466);
        assert_eq!(micros(5_063_321_045_286_302_466), Ok(1_178_896_298_832_258));
        assert_eq!(micros(0), Ok(0));
        assert_eq!(micros(raw(-1, -500_000)), Ok(-1_500_000));
        assert_eq!(micros(raw(-2, 0)), Ok(-2_000_000));
        assert_eq!(
            micros(raw(i32::MIN, -999_999)),
            Ok(i64::from(i32::MIN) * 1_000_000 - 999_999)
        );
        assert_eq!(
            micros(raw(i32::MAX, 999_999)),
            Ok(i64::from(i32::MAX) * 1_000_000 + 999_999)
        );
    }

    #[test]
    fn other_integers_are_refused() {
        assert_eq!(micros(raw(5, 1_000_000)), Ok(6_000_000));
        assert_eq!(micros(1_000_001), Err(NotTimeval(1_000_001)));
        assert_eq!(
            micros(1_700_000_000_123),
            Err(NotTimeval(1_700_000_000_123))
        );
        let msg = NotTimeval(raw(1, 5_000_000))
            .error("dataset 't'")
            .to_string();
        assert!(
            msg.contains("dataset 't'") && msg.contains("5000000"),
            "{msg}"
        );
        let mut b = [raw(3, 4).to_le_bytes(), 7_000_000i64.to_le_bytes()].concat();
        assert_eq!(decode_in_place(&mut b[..8]), Ok(()));
        assert_eq!(&b[..8], &3_000_004i64.to_le_bytes());
        assert!(decode_in_place(&mut b).is_err());
    }
}
