//! CF time coordinates (`units = "<unit> since <date>"`, `calendar = …`) to ISO 8601 labels.
//!
//! Calendars: `standard`/`gregorian` (Julian before 1582-10-15, Gregorian after, as CF and
//! cftime define it), `proleptic_gregorian`, `julian`, `noleap`/`365_day`, `all_leap`/`366_day`
//! and `360_day`. Labels follow Python's `isoformat()`: `YYYY-MM-DDTHH:MM:SS`, with `.ffffff`
//! only when there are microseconds.

/// A calendar of the CF conventions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calendar {
    Standard,
    ProlepticGregorian,
    Julian,
    NoLeap,
    AllLeap,
    Day360,
}

impl Calendar {
    pub fn parse(name: &str) -> Option<Calendar> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "standard" | "gregorian" | "" => Calendar::Standard,
            "proleptic_gregorian" => Calendar::ProlepticGregorian,
            "julian" => Calendar::Julian,
            "noleap" | "365_day" => Calendar::NoLeap,
            "all_leap" | "366_day" => Calendar::AllLeap,
            "360_day" => Calendar::Day360,
            _ => return None,
        })
    }
}

/// Parsed `units` of a time coordinate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeUnits {
    /// Microseconds per unit.
    pub micros_per_unit: f64,
    /// Reference date and time.
    pub epoch: DateTime,
}

/// A calendar date and time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    /// Microseconds since midnight.
    pub micros: i64,
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Parses `"<unit> since <date>[ time][ zone]"`; `None` when it is not a CF time unit.
pub fn parse_units(units: &str) -> Option<TimeUnits> {
    let lower = units.trim().to_ascii_lowercase();
    let (unit, rest) = lower.split_once(" since ")?;
    let micros_per_unit = match unit.trim() {
        "days" | "day" | "d" => 86_400e6,
        "hours" | "hour" | "hrs" | "hr" | "h" => 3_600e6,
        "minutes" | "minute" | "mins" | "min" => 60e6,
        "seconds" | "second" | "secs" | "sec" | "s" => 1e6,
        "milliseconds" | "millisecond" | "msecs" | "msec" | "ms" => 1e3,
        "microseconds" | "microsecond" | "usecs" | "usec" | "us" => 1.0,
        _ => return None,
    };
    Some(TimeUnits {
        micros_per_unit,
        epoch: parse_date(rest.trim())?,
    })
}

fn parse_date(s: &str) -> Option<DateTime> {
    // Date part: [-]Y-M-D; then optional time after 'T' or ' '; then optional zone.
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let split = body.find(['T', 't', ' ']).unwrap_or(body.len());
    let (date, rest) = body.split_at(split);
    let mut it = date.split('-');
    let year: i64 = it.next()?.parse().ok()?;
    let month: u32 = it.next().map_or(Some(1), |m| m.parse().ok())?;
    let day: u32 = it.next().map_or(Some(1), |d| d.parse().ok())?;
    if it.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let year = if neg { -year } else { year };
    let mut rest = rest.trim_start_matches(['T', 't', ' ']).trim();
    // Drop a zone: Z, UTC, or an offset applied below.
    let mut offset_min: i64 = 0;
    // (`units` were lower-cased: a zone is `z` or `utc`.)
    if let Some(r) = rest.strip_suffix('z').or_else(|| rest.strip_suffix("utc")) {
        rest = r.trim();
    } else if let Some(pos) = rest.rfind(['+', '-']).filter(|&p| p > 0) {
        let (t, z) = rest.split_at(pos);
        let sign = if z.starts_with('-') { -1 } else { 1 };
        let z = &z[1..];
        let (h, m) = z.split_once(':').unwrap_or((z, "0"));
        offset_min = sign * (h.trim().parse::<i64>().ok()? * 60 + m.trim().parse::<i64>().ok()?);
        rest = t.trim();
    } else if let Some((t, z)) = rest.split_once(' ') {
        // "12:00:00 0:00" style zone.
        let (h, m) = z.split_once(':').unwrap_or((z, "0"));
        let sign = if h.starts_with('-') { -1 } else { 1 };
        let h = h.trim_start_matches(['+', '-']);
        offset_min = sign * (h.parse::<i64>().ok()? * 60 + m.parse::<i64>().ok()?);
        rest = t.trim();
    }
    let mut micros: i64 = 0;
    if !rest.is_empty() {
        let mut parts = rest.split(':');
        let h: i64 = parts.next()?.parse().ok()?;
        let m: i64 = parts.next().map_or(Some(0), |m| m.parse().ok())?;
        let sec: f64 = parts.next().map_or(Some(0.0), |x| x.parse().ok())?;
        if parts.next().is_some() || !(0..24).contains(&h) || !(0..60).contains(&m) {
            return None;
        }
        if !(0.0..61.0).contains(&sec) {
            return None;
        }
        micros = (h * 3600 + m * 60) * 1_000_000 + (sec * 1e6).round() as i64;
    }
    micros -= offset_min * 60_000_000;
    Some(DateTime {
        year,
        month,
        day,
        micros,
    })
}

/// Julian day number of a proleptic Gregorian date.
fn jdn_gregorian(y: i64, m: u32, d: u32) -> i64 {
    let a = (14 - m as i64) / 12;
    let y2 = y + 4800 - a;
    let m2 = m as i64 + 12 * a - 3;
    d as i64 + (153 * m2 + 2) / 5 + 365 * y2 + y2.div_euclid(4) - y2.div_euclid(100)
        + y2.div_euclid(400)
        - 32045
}

/// Julian day number of a Julian-calendar date.
fn jdn_julian(y: i64, m: u32, d: u32) -> i64 {
    let a = (14 - m as i64) / 12;
    let y2 = y + 4800 - a;
    let m2 = m as i64 + 12 * a - 3;
    d as i64 + (153 * m2 + 2) / 5 + 365 * y2 + y2.div_euclid(4) - 32083
}

fn from_jdn_gregorian(j: i64) -> (i64, u32, u32) {
    let a = j + 32044;
    let b = (4 * a + 3).div_euclid(146097);
    let c = a - (146097 * b).div_euclid(4);
    let d = (4 * c + 3).div_euclid(1461);
    let e = c - (1461 * d).div_euclid(4);
    let m = (5 * e + 2).div_euclid(153);
    let day = e - (153 * m + 2).div_euclid(5) + 1;
    let month = m + 3 - 12 * m.div_euclid(10);
    let year = 100 * b + d - 4800 + m.div_euclid(10);
    (year, month as u32, day as u32)
}

fn from_jdn_julian(j: i64) -> (i64, u32, u32) {
    let c = j + 32082;
    let d = (4 * c + 3).div_euclid(1461);
    let e = c - (1461 * d).div_euclid(4);
    let m = (5 * e + 2).div_euclid(153);
    let day = e - (153 * m + 2).div_euclid(5) + 1;
    let month = m + 3 - 12 * m.div_euclid(10);
    let year = d - 4800 + m.div_euclid(10);
    (year, month as u32, day as u32)
}

/// First JDN of the Gregorian calendar in the `standard` calendar (1582-10-15).
const GREGORIAN_START_JDN: i64 = 2_299_161;

const MONTH_DAYS: [u32; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/// Day number of a date in `cal` (any fixed origin per calendar).
fn day_number(cal: Calendar, y: i64, m: u32, d: u32) -> Option<i64> {
    let cum = |leap: bool| -> i64 {
        (0..(m - 1) as usize)
            .map(|i| MONTH_DAYS[i] as i64 + i64::from(i == 1 && leap))
            .sum()
    };
    Some(match cal {
        Calendar::ProlepticGregorian => jdn_gregorian(y, m, d),
        Calendar::Julian => jdn_julian(y, m, d),
        Calendar::Standard => {
            let g = jdn_gregorian(y, m, d);
            if g >= GREGORIAN_START_JDN {
                g
            } else {
                jdn_julian(y, m, d)
            }
        }
        Calendar::NoLeap => y * 365 + cum(false) + d as i64 - 1,
        Calendar::AllLeap => y * 366 + cum(true) + d as i64 - 1,
        Calendar::Day360 => {
            if d > 30 {
                return None;
            }
            y * 360 + (m as i64 - 1) * 30 + d as i64 - 1
        }
    })
}

fn from_day_number(cal: Calendar, n: i64) -> (i64, u32, u32) {
    let fixed = |n: i64, len: i64, leap: bool| {
        let y = n.div_euclid(len);
        let mut r = n.rem_euclid(len);
        let mut m = 0usize;
        loop {
            let ml = MONTH_DAYS[m] as i64 + i64::from(m == 1 && leap);
            if r < ml || m == 11 {
                break;
            }
            r -= ml;
            m += 1;
        }
        (y, m as u32 + 1, r as u32 + 1)
    };
    match cal {
        Calendar::ProlepticGregorian => from_jdn_gregorian(n),
        Calendar::Julian => from_jdn_julian(n),
        Calendar::Standard => {
            if n >= GREGORIAN_START_JDN {
                from_jdn_gregorian(n)
            } else {
                from_jdn_julian(n)
            }
        }
        Calendar::NoLeap => fixed(n, 365, false),
        Calendar::AllLeap => fixed(n, 366, true),
        Calendar::Day360 => {
            let y = n.div_euclid(360);
            let r = n.rem_euclid(360);
            (y, (r / 30) as u32 + 1, (r % 30) as u32 + 1)
        }
    }
}

/// The ISO 8601 label of `value` units after the epoch, or `None` when out of range.
pub fn label(value: f64, units: &TimeUnits, cal: Calendar) -> Option<String> {
    if !value.is_finite() {
        return None;
    }
    let offset = value * units.micros_per_unit;
    if offset.abs() > 3.0e20 {
        return None; // ~ ±9.5 million years
    }
    let e = units.epoch;
    // Leap-day epochs do not exist in every calendar.
    if matches!(cal, Calendar::NoLeap) && e.month == 2 && e.day == 29 {
        return None;
    }
    let base_day = day_number(cal, e.year, e.month, e.day)?;
    let total = (e.micros as i128) + offset.round() as i128;
    let days = total.div_euclid(MICROS_PER_DAY as i128) as i64;
    let micros = total.rem_euclid(MICROS_PER_DAY as i128) as i64;
    let (y, m, d) = from_day_number(cal, base_day.checked_add(days)?);
    if !(-9999..=99999).contains(&y) {
        return None;
    }
    let secs = micros / 1_000_000;
    let frac = micros % 1_000_000;
    let date = if y < 0 {
        format!("-{:04}-{m:02}-{d:02}", -y)
    } else {
        format!("{y:04}-{m:02}-{d:02}")
    };
    let time = format!(
        "{:02}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    );
    Some(if frac != 0 {
        format!("{date}T{time}.{frac:06}")
    } else {
        format!("{date}T{time}")
    })
}

/// Microseconds from the calendar's day origin to the epoch of `units` (`None`: the epoch is not
/// a date of `cal`, as 29 February in `noleap` or day 31 in `360_day`).
fn epoch_micros(units: &TimeUnits, cal: Calendar) -> Option<i128> {
    let e = units.epoch;
    let day = day_number(cal, e.year, e.month, e.day)?;
    if from_day_number(cal, day) != (e.year, e.month, e.day) {
        return None;
    }
    Some(i128::from(day) * i128::from(MICROS_PER_DAY) + i128::from(e.micros))
}

/// Re-expresses values of one CF time unit in another of the same calendar, exactly
/// (`hours since 2024-02-02` → `hours since 2024-02-01`: 24 more), as `ncrcat` rebases a
/// record coordinate into the first file's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebase {
    /// Microseconds per unit of the values' units.
    from: i128,
    /// Microseconds per unit of the target units.
    to: i128,
    /// Microseconds from the target epoch to the values' epoch.
    delta: i128,
}

/// The largest integer every f64 up to it holds exactly.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// `a * b + c` when each step is exact in f64.
fn exact_mul_add(a: f64, b: f64, c: f64) -> Option<f64> {
    let p = a * b;
    if a.mul_add(b, -p) != 0.0 || !p.is_finite() {
        return None;
    }
    let s = p + c;
    // Two-sum: the rounding error of p + c.
    let bb = s - p;
    let err = (p - (s - bb)) + (c - bb);
    (err == 0.0 && s.is_finite()).then_some(s)
}

impl Rebase {
    /// How values in `from` units are had in `to` units of `calendar`; `None` when either is
    /// not a CF time unit of fixed length (`months since …`) or its epoch is not a date of
    /// the calendar.
    pub fn new(from: &str, to: &str, calendar: &str) -> Option<Rebase> {
        let cal = Calendar::parse(calendar)?;
        let (f, t) = (parse_units(from)?, parse_units(to)?);
        Some(Rebase {
            from: f.micros_per_unit as i128,
            to: t.micros_per_unit as i128,
            delta: epoch_micros(&f, cal)? - epoch_micros(&t, cal)?,
        })
    }

    /// Whether values stay as they are.
    pub fn is_identity(&self) -> bool {
        self.from == self.to && self.delta == 0
    }

    /// The value `v` in the target units, approximately (for ordering).
    pub fn approx(&self, v: f64) -> f64 {
        (v * self.from as f64 + self.delta as f64) / self.to as f64
    }

    /// The value `v` in the target units, or `None` when it is not exactly representable
    /// (an integer type: `integer`, the result must be a whole number; a float: every step
    /// exact in f64).
    pub fn apply(&self, v: f64, integer: bool) -> Option<f64> {
        if !v.is_finite() || v.abs() > EXACT {
            return None;
        }
        // Whole target units per source unit and between the epochs: the small-number path.
        let (a, b, div) = if self.from % self.to == 0 && self.delta % self.to == 0 {
            (self.from / self.to, self.delta / self.to, 1)
        } else {
            (self.from, self.delta, self.to)
        };
        let r = if integer {
            if v.fract() != 0.0 {
                return None;
            }
            let x = (v as i128).checked_mul(a)?.checked_add(b)?;
            if x % div != 0 {
                return None;
            }
            (x / div) as f64
        } else {
            let (af, bf, df) = (a as f64, b as f64, div as f64);
            if af.abs() > EXACT || bf.abs() > EXACT || df > EXACT {
                return None;
            }
            let x = exact_mul_add(v, af, bf)?;
            let r = x / df;
            if r.mul_add(df, -x) != 0.0 {
                return None;
            }
            r
        };
        (r.abs() <= EXACT).then_some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_leap_gregorian(y: i64) -> bool {
        y.rem_euclid(4) == 0 && (y.rem_euclid(100) != 0 || y.rem_euclid(400) == 0)
    }

    fn l(v: f64, units: &str, cal: &str) -> String {
        label(
            v,
            &parse_units(units).unwrap(),
            Calendar::parse(cal).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn units_parse() {
        assert!(parse_units("hours since 2000-01-01").is_some());
        assert!(parse_units("days since 1-1-1 0:0:0").is_some());
        assert!(parse_units("kelvin").is_none());
        assert!(parse_units("furlongs since 2000-01-01").is_none());
        assert!(parse_units("days since 2000-13-01").is_none());
    }

    #[test]
    fn gregorian_family() {
        assert_eq!(
            l(
                1709280000618.0,
                "milliseconds since 1970-01-01 00:00:00",
                "standard"
            ),
            "2024-03-01T08:00:00.618000"
        );
        assert_eq!(
            l(36.0, "hours since 2000-01-01", "gregorian"),
            "2000-01-02T12:00:00"
        );
        assert_eq!(
            l(-1.0, "days since 2000-03-01", "standard"),
            "2000-02-29T00:00:00"
        );
        assert_eq!(
            l(1.5, "days since 1999-12-31T12:00:00Z", "standard"),
            "2000-01-02T00:00:00"
        );
        // Mixed calendar: the day after 1582-10-04 (Julian) is 1582-10-15 (Gregorian).
        assert_eq!(
            l(1.0, "days since 1582-10-04", "standard"),
            "1582-10-15T00:00:00"
        );
        assert_eq!(
            l(1.0, "days since 1582-10-04", "proleptic_gregorian"),
            "1582-10-05T00:00:00"
        );
        assert_eq!(
            l(1.0, "days since 1582-10-04", "julian"),
            "1582-10-05T00:00:00"
        );
        // 1900 is a leap year in the Julian calendar only.
        assert_eq!(
            l(59.0, "days since 1900-01-01", "julian"),
            "1900-02-29T00:00:00"
        );
        assert_eq!(
            l(59.0, "days since 1900-01-01", "proleptic_gregorian"),
            "1900-03-01T00:00:00"
        );
        // Time zone offsets shift the epoch.
        assert_eq!(
            l(0.0, "hours since 2000-01-01 06:00:00+06:00", "standard"),
            "2000-01-01T00:00:00"
        );
    }

    #[test]
    fn model_calendars() {
        assert_eq!(
            l(59.0, "days since 2000-01-01", "noleap"),
            "2000-03-01T00:00:00"
        );
        assert_eq!(
            l(365.0, "days since 2000-01-01", "365_day"),
            "2001-01-01T00:00:00"
        );
        assert_eq!(
            l(59.0, "days since 2001-01-01", "all_leap"),
            "2001-02-29T00:00:00"
        );
        assert_eq!(
            l(30.0, "days since 2000-02-01", "360_day"),
            "2000-03-01T00:00:00"
        );
        assert_eq!(
            l(29.0, "days since 2000-02-01", "360_day"),
            "2000-02-30T00:00:00"
        );
        assert_eq!(
            l(360.0, "days since 2000-01-01", "360_day"),
            "2001-01-01T00:00:00"
        );
        assert_eq!(
            l(-1.0, "days since 2000-01-01", "noleap"),
            "1999-12-31T00:00:00"
        );
    }

    #[test]
    fn gregorian_matches_a_day_count_over_centuries() {
        // Walk day by day across 1600..2401 and compare with a naive calendar.
        let units = parse_units("days since 1600-01-01").unwrap();
        let (mut y, mut m, mut d) = (1600i64, 1u32, 1u32);
        for n in 0..(801 * 366) {
            let want = format!("{y:04}-{m:02}-{d:02}T00:00:00");
            assert_eq!(
                label(n as f64, &units, Calendar::ProlepticGregorian).unwrap(),
                want
            );
            let ml = MONTH_DAYS[m as usize - 1] + u32::from(m == 2 && is_leap_gregorian(y));
            d += 1;
            if d > ml {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
            if y > 2400 {
                break;
            }
        }
    }

    #[test]
    fn out_of_range_is_none() {
        let u = parse_units("days since 2000-01-01").unwrap();
        assert!(label(f64::NAN, &u, Calendar::Standard).is_none());
        assert!(label(1e300, &u, Calendar::Standard).is_none());
    }
    #[test]
    fn rebase_is_exact_or_none() {
        let r = Rebase::new(
            "hours since 2024-02-02 00:00:00",
            "hours since 2024-02-01",
            "standard",
        )
        .unwrap();
        assert_eq!(r.apply(0.0, true), Some(24.0));
        assert_eq!(r.apply(23.0, false), Some(47.0));
        assert_eq!(r.apply(0.5, false), Some(24.5));
        assert_eq!(r.apply(0.5, true), None);
        // Days into hours; a leap day in the Gregorian calendar, none in noleap.
        let g = Rebase::new(
            "days since 2024-03-01",
            "hours since 2024-02-28",
            "gregorian",
        );
        assert_eq!(g.unwrap().apply(1.0, true), Some(72.0));
        let n = Rebase::new("days since 2023-03-01", "hours since 2023-02-28", "noleap");
        assert_eq!(n.unwrap().apply(1.0, true), Some(48.0));
        let d = Rebase::new("days since 2000-03-01", "days since 2000-02-30", "360_day");
        assert_eq!(d.unwrap().apply(0.0, true), Some(1.0));
        let l = Rebase::new("days since 2001-03-01", "days since 2001-02-28", "all_leap");
        assert_eq!(l.unwrap().apply(0.0, true), Some(2.0));
        // Hours into days: whole days only for integers; a third of a day is no f64.
        let h = Rebase::new(
            "hours since 2000-01-02",
            "days since 2000-01-01",
            "standard",
        );
        let h = h.unwrap();
        assert_eq!(h.apply(24.0, true), Some(2.0));
        assert_eq!(h.apply(12.0, false), Some(1.5));
        assert_eq!(h.apply(8.0, false), None);
        assert_eq!(h.apply(12.0, true), None);
        assert!(Rebase::new(
            "months since 2000-01-01",
            "days since 2000-01-01",
            "standard"
        )
        .is_none());
        assert!(Rebase::new("days since 2001-02-29", "days since 2001-01-01", "noleap").is_none());
        assert!(
            Rebase::new("days since 2000-02-30", "days since 2000-01-01", "standard").is_none()
        );
        assert!(
            Rebase::new("days since 2000-01-01", "days since 2000-01-01", "standard")
                .unwrap()
                .is_identity()
        );
    }
}
