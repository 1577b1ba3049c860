//! Pool windows: when a window began and when it resets, in unix ms (UTC).

use hearth_core::Timestamp;

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 86_400_000;

/// When a pool's use starts again from zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The UTC hour.
    Hour,
    /// The UTC day, from midnight UTC.
    Day,
    /// The UTC calendar month.
    Month,
    /// The last 24 hours, sliding: each use drops out 24 h after it.
    Rolling24h,
}

impl Window {
    /// Start of the fixed window holding `now`; for the rolling window, the
    /// oldest instant still inside it (exclusive).
    pub fn start(self, now: Timestamp) -> Timestamp {
        match self {
            Self::Hour => now - now.rem_euclid(HOUR_MS),
            Self::Day => now - now.rem_euclid(DAY_MS),
            Self::Month => {
                let (y, m, _) = civil_from_days(now.div_euclid(DAY_MS));
                days_from_civil(y, m, 1) * DAY_MS
            }
            Self::Rolling24h => now - DAY_MS,
        }
    }

    /// When the fixed window holding `now` ends. The rolling window has no
    /// fixed end: its uses drop out one by one (see `Account::resets_at`).
    pub fn end(self, now: Timestamp) -> Timestamp {
        match self {
            Self::Hour => self.start(now) + HOUR_MS,
            Self::Day => self.start(now) + DAY_MS,
            Self::Month => {
                let (y, m, _) = civil_from_days(now.div_euclid(DAY_MS));
                let (y, m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                days_from_civil(y, m, 1) * DAY_MS
            }
            Self::Rolling24h => now + DAY_MS,
        }
    }

    /// The length a use stays counted in the rolling window.
    pub(crate) const ROLLING_MS: i64 = DAY_MS;
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix ms of a UTC date and time.
    fn at(y: i64, mo: u32, d: u32, h: i64, mi: i64) -> Timestamp {
        days_from_civil(y, mo, d) * DAY_MS + h * HOUR_MS + mi * 60_000
    }

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for z in [-800_000, -1, 0, 1, 11_016, 11_017, 20_000, 2_000_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z, "{y}-{m}-{d}");
        }
        assert_eq!(
            civil_from_days(at(2024, 2, 29, 0, 0) / DAY_MS),
            (2024, 2, 29)
        );
    }

    #[test]
    fn day_resets_at_utc_midnight() {
        let now = at(2026, 11, 23, 23, 59);
        assert_eq!(Window::Day.start(now), at(2026, 11, 23, 0, 0));
        assert_eq!(Window::Day.end(now), at(2026, 11, 24, 0, 0));
        let midnight = at(2026, 11, 24, 0, 0);
        assert_eq!(
            Window::Day.start(midnight),
            midnight,
            "midnight opens a new day"
        );
    }

    #[test]
    fn hour_windows() {
        let now = at(2026, 11, 23, 20, 41);
        assert_eq!(Window::Hour.start(now), at(2026, 11, 23, 20, 0));
        assert_eq!(Window::Hour.end(now), at(2026, 11, 23, 21, 0));
    }

    #[test]
    fn month_windows_follow_the_calendar() {
        let now = at(2026, 11, 23, 20, 41);
        assert_eq!(Window::Month.start(now), at(2026, 11, 1, 0, 0));
        assert_eq!(Window::Month.end(now), at(2026, 12, 1, 0, 0));
        let dec = at(2026, 12, 31, 23, 59);
        assert_eq!(Window::Month.end(dec), at(2027, 1, 1, 0, 0), "year turns");
        let leap = at(2028, 2, 29, 12, 0);
        assert_eq!(Window::Month.start(leap), at(2028, 2, 1, 0, 0));
        assert_eq!(Window::Month.end(leap), at(2028, 3, 1, 0, 0));
    }

    #[test]
    fn rolling_window_is_the_last_24_hours() {
        let now = at(2026, 11, 23, 20, 41);
        assert_eq!(Window::Rolling24h.start(now), at(2026, 11, 22, 20, 41));
    }
}
