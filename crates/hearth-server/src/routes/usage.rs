//! `GET /v1/usage`: model calls grouped, with estimated cost.

use axum::Json;
use axum::extract::{Query, State};
use hearth_store::{UsageGroup, UsageQuery};

use crate::AppState;
use crate::dto::{UsageParams, UsageRow, UsageRows};
use crate::error::ApiError;

/// Model calls grouped by provider, model or day.
#[utoipa::path(get, path = "/v1/usage", tag = "usage", params(UsageParams),
    responses((status = 200, body = UsageRows), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn usage(
    State(st): State<AppState>,
    query: Result<Query<UsageParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<UsageRows>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::InvalidRequest(e.body_text()))?;
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
        return Ok(now_ms - now_ms.rem_euclid(86_400_000));
    }
    if let Some((n, unit)) = s.len().checked_sub(1).map(|i| s.split_at(i))
        && let Ok(n) = n.parse::<i64>()
        && n >= 0
    {
        let ms = match unit {
            "d" => 86_400_000,
            "h" => 3_600_000,
            "m" => 60_000,
            _ => return Err(bad()),
        };
        return n.checked_mul(ms).map(|d| now_ms - d).ok_or_else(bad);
    }
    s.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
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
}
