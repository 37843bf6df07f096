//! CF-style time units from a TeaFile time section (epoch days + ticks per day).

/// Days from 0001-01-01 to 1970-01-01 in the proleptic Gregorian calendar.
pub const UNIX_EPOCH_DAYS: i64 = 719_162;

/// Days from 0001-01-01 to 9999-12-31: the last epoch a 4-digit CF date can express.
pub const MAX_EPOCH_DAYS: i64 = 3_652_058;

const NANOS_PER_DAY: i64 = 86_400_000_000_000;

/// The proleptic Gregorian date (year, month, day) `days` days after 0001-01-01, for
/// `0 <= days <= MAX_EPOCH_DAYS`; `None` outside.
pub fn date_from_epoch_days(days: i64) -> Option<(i64, u32, u32)> {
    if !(0..=MAX_EPOCH_DAYS).contains(&days) {
        return None;
    }
    // Days since 1970-01-01, then the civil-from-days algorithm on 400-year eras starting
    // on March 1st.
    let z = days - UNIX_EPOCH_DAYS + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Some((year, month, day))
}

/// The unit phrase of one tick (`seconds`, `milliseconds`, `100 nanoseconds`, `12 hours`, …).
///
/// When a tick is a whole number of nanoseconds (ticks_per_day divides 86 400 × 10⁹) it is
/// expressed as `[n ]<unit>` with the largest of days, hours, minutes, seconds, milliseconds,
/// microseconds, nanoseconds that divides it (the count is left out when it is 1). Otherwise the
/// UDUNITS quotient form `day/<ticks_per_day>` is used.
pub fn tick_unit(ticks_per_day: i64) -> String {
    const UNITS: [(&str, i64); 7] = [
        ("days", NANOS_PER_DAY),
        ("hours", 3_600_000_000_000),
        ("minutes", 60_000_000_000),
        ("seconds", 1_000_000_000),
        ("milliseconds", 1_000_000),
        ("microseconds", 1_000),
        ("nanoseconds", 1),
    ];
    if ticks_per_day > 0 && NANOS_PER_DAY % ticks_per_day == 0 {
        let tick_ns = NANOS_PER_DAY / ticks_per_day;
        for (name, ns) in UNITS {
            if tick_ns % ns == 0 {
                let n = tick_ns / ns;
                return if n == 1 {
                    name.to_string()
                } else {
                    format!("{n} {name}")
                };
            }
        }
    }
    format!("day/{ticks_per_day}")
}

/// The CF `units` text, e.g. `milliseconds since 1970-01-01 00:00:00`; `None` when the epoch is
/// outside years 1–9999 or ticks_per_day is not positive.
pub fn cf_units(epoch_days: i64, ticks_per_day: i64) -> Option<String> {
    if ticks_per_day <= 0 {
        return None;
    }
    let (y, m, d) = date_from_epoch_days(epoch_days)?;
    Some(format!(
        "{} since {y:04}-{m:02}-{d:02} 00:00:00",
        tick_unit(ticks_per_day)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(date_from_epoch_days(0), Some((1, 1, 1)));
        assert_eq!(date_from_epoch_days(719_162), Some((1970, 1, 1)));
        assert_eq!(date_from_epoch_days(730_119), Some((2000, 1, 1)));
        assert_eq!(date_from_epoch_days(730_178), Some((2000, 2, 29)));
        assert_eq!(date_from_epoch_days(MAX_EPOCH_DAYS), Some((9999, 12, 31)));
        assert_eq!(date_from_epoch_days(-1), None);
        assert_eq!(date_from_epoch_days(MAX_EPOCH_DAYS + 1), None);
        assert_eq!(date_from_epoch_days(i64::MIN), None);
        assert_eq!(date_from_epoch_days(i64::MAX), None);
    }

    #[test]
    fn dates_are_consecutive() {
        // Walk every day and check the calendar step by step.
        let mut prev = date_from_epoch_days(0).unwrap();
        for days in 1..=MAX_EPOCH_DAYS {
            let cur = date_from_epoch_days(days).unwrap();
            let (y, m, d) = prev;
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let month_len = match m {
                1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
                4 | 6 | 9 | 11 => 30,
                _ if leap => 29,
                _ => 28,
            };
            let expected = if d < month_len {
                (y, m, d + 1)
            } else if m < 12 {
                (y, m + 1, 1)
            } else {
                (y + 1, 1, 1)
            };
            assert_eq!(cur, expected, "day {days}");
            prev = cur;
        }
    }

    #[test]
    fn units() {
        assert_eq!(tick_unit(1), "days");
        assert_eq!(tick_unit(24), "hours");
        assert_eq!(tick_unit(1440), "minutes");
        assert_eq!(tick_unit(86_400), "seconds");
        assert_eq!(tick_unit(86_400_000), "milliseconds");
        assert_eq!(tick_unit(86_400_000_000), "microseconds");
        assert_eq!(tick_unit(86_400_000_000_000), "nanoseconds");
        assert_eq!(tick_unit(864_000_000_000), "100 nanoseconds");
        assert_eq!(tick_unit(2), "12 hours");
        assert_eq!(tick_unit(7), "day/7");
        assert_eq!(tick_unit(86_400_000_000_000_000), "day/86400000000000000");
        assert_eq!(
            cf_units(719_162, 86_400_000).as_deref(),
            Some("milliseconds since 1970-01-01 00:00:00")
        );
        assert_eq!(
            cf_units(0, 864_000_000_000).as_deref(),
            Some("100 nanoseconds since 0001-01-01 00:00:00")
        );
        assert_eq!(cf_units(-5, 1), None);
        assert_eq!(cf_units(0, 0), None);
    }
}
