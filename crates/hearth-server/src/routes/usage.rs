//! `GET /v1/usage`: model calls grouped, with estimated cost.

use axum::Json;
use axum::extract::State;
use hearth_core::records::{UsageGroup, UsageQuery};

use crate::AppState;
use crate::dto::{UsageParams, UsageRow, UsageRows};
use crate::error::ApiError;
use crate::extract::ApiQuery;

/// Model calls grouped by provider, model or day.
#[utoipa::path(get, path = "/v1/usage", tag = "usage", params(UsageParams),
    responses((status = 200, description = "Usage groups, by key", body = UsageRows), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn usage(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<UsageParams>,
) -> Result<Json<UsageRows>, ApiError> {
    let now = hearth_core::now_ms();
    let group_by = match q.group_by.as_deref() {
        None | Some("provider") => UsageGroup::Provider,
        Some("model") => UsageGroup::Model,
        Some("day") => UsageGroup::Day,
        Some(other) => {
            return Err(ApiError::InvalidRequest(format!(
                "unknown group_by {other:?}; one of provider, model, day"
            )));
        }
    };
    let query = UsageQuery {
        since: q.since.as_deref().map(|s| parse_time(s, now)).transpose()?,
        until: q.until.as_deref().map(|s| parse_time(s, now)).transpose()?,
        group_by,
    };
    let rows = st.runtime.usage(&query).await?;
    Ok(Json(UsageRows {
        rows: rows
            .into_iter()
            .map(|r| UsageRow {
                key: r.key,
                calls: r.calls,
                input_tokens: r.input_tokens,
                output_tokens: r.output_tokens,
                cached_tokens: r.cached_tokens,
                cost_usd: r.cost_usd.map(|c| (c * 1e9).round() / 1e9),
                untracked_calls: r.untracked_calls,
            })
            .collect(),
    }))
}

/// An RFC 3339 time, `today` (UTC midnight), or an age such as `7d`, `24h`, `30m`.
pub fn parse_time(s: &str, now_ms: i64) -> Result<i64, ApiError> {
    let bad = || {
        ApiError::InvalidRequest(format!(
            "time {s:?} is not RFC 3339 (2026-11-22T00:00:00Z), `today`, or an age like 7d, 24h, 30m"
        ))
    };
    if s == "today" {
        return now_ms
            .checked_sub(now_ms.rem_euclid(86_400_000))
            .ok_or_else(bad);
    }
    // An age is 1 to 11 digits and one ASCII unit letter (the document's
    // pattern). The unit is found by its character, not by byte position:
    // the input may be any UTF-8.
    let unit_ms = |unit: char| match unit {
        'd' => Some(86_400_000_i64),
        'h' => Some(3_600_000),
        'm' => Some(60_000),
        _ => None,
    };
    if let Some(unit) = s.chars().last()
        && let Some(digits) = s.strip_suffix(unit)
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        let ms = unit_ms(unit).ok_or_else(bad)?;
        if digits.len() > MAX_AGE_DIGITS {
            return Err(bad());
        }
        return digits
            .parse::<i64>()
            .ok()
            .and_then(|n| n.checked_mul(ms))
            .and_then(|d| now_ms.checked_sub(d))
            .ok_or_else(bad);
    }
    rfc3339_ms(s).ok_or_else(bad)
}

/// Most digits of an age: 11 days' worth of digits stays within the
/// milliseconds an `i64` counts back from now.
const MAX_AGE_DIGITS: usize = 11;

/// Milliseconds since the Unix epoch of an RFC 3339 `date-time` (section
/// 5.6: `YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)`, `T` and `Z` in either
/// case, a leap second `60` taken as the next second), exactly the
/// document's `format: date-time`; every such instant, years 0000 to 9999,
/// and nothing else.
fn rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0_i64, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
        })
    };
    let at = |i: usize, c: u8| b.get(i).is_some_and(|x| x.eq_ignore_ascii_case(&c));
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if !(1..=month_days).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    let mut millis = 0;
    if at(i, b'.') {
        let digits = b[i + 1..].iter().take_while(|d| d.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        for k in 0..3 {
            millis = millis * 10 + if k < digits { num(i + 1 + k, 1)? } else { 0 };
        }
        i += 1 + digits;
    }
    let offset_minutes = if at(i, b'Z') && b.len() == i + 1 {
        0
    } else if (at(i, b'+') || at(i, b'-')) && at(i + 3, b':') && b.len() == i + 6 {
        let (h, m) = (num(i + 1, 2)?, num(i + 4, 2)?);
        if h > 23 || m > 59 {
            return None;
        }
        if at(i, b'-') {
            -(h * 60 + m)
        } else {
            h * 60 + m
        }
    } else {
        return None;
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1_000 + millis)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::parse_time;

    #[test]
    fn parses_ages_today_and_rfc3339() {
        let now = 1_700_000_000_000;
        assert_eq!(parse_time("7d", now).unwrap(), now - 7 * 86_400_000);
        assert_eq!(parse_time("30m", now).unwrap(), now - 1_800_000);
        assert_eq!(parse_time("today", now).unwrap(), now - now % 86_400_000);
        assert_eq!(parse_time("2023-11-14T22:13:20Z", now).unwrap(), now);
        for bad in ["", "7w", "-1d", "yesterday", "99999999999999999999d"] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_multibyte_last_character_is_refused_not_a_panic() {
        for bad in ["7é", "é", "1日", "7d\u{1F600}"] {
            assert!(parse_time(bad, 1_700_000_000_000).is_err(), "{bad}");
        }
    }

    proptest! {
        /// Any text is parsed or refused with `invalid_request`; never a panic.
        #[test]
        fn any_text_is_parsed_or_refused(
            s in prop_oneof![any::<String>(), "[0-9]{0,22}[dhmé日]?", Just("today".to_owned())],
            now in any::<i64>(),
        ) {
            if let Err(e) = parse_time(&s, now) {
                prop_assert_eq!(e.status_code().1, "invalid_request");
            }
        }

        /// Every age in range means exactly that long before now.
        #[test]
        fn ages_count_back_from_now(n in 0i64..1_000_000, unit in prop::sample::select(vec![('d', 86_400_000i64), ('h', 3_600_000), ('m', 60_000)])) {
            let now = 1_700_000_000_000;
            prop_assert_eq!(parse_time(&format!("{n}{}", unit.0), now).ok(), Some(now - n * unit.1));
        }

        /// Every RFC 3339 UTC time round-trips to its milliseconds.
        #[test]
        fn rfc3339_times_round_trip(ms in 0i64..4_000_000_000_000) {
            let t = jiff::Timestamp::from_millisecond(ms).unwrap();
            prop_assert_eq!(parse_time(&t.to_string(), 0).ok(), Some(ms));
        }
    }
}
