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
        None | Some("") | Some("provider") => UsageGroup::Provider,
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
    // An age is digits and one ASCII unit letter. The unit is found by its
    // character, not by byte position: the input may be any UTF-8.
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
        return digits
            .parse::<i64>()
            .ok()
            .and_then(|n| n.checked_mul(ms))
            .and_then(|d| now_ms.checked_sub(d))
            .ok_or_else(bad);
    }
    s.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|_| bad())
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
