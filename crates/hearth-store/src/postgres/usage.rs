//! Model-call usage on PostgreSQL: one `llm_calls` row per finished model
//! call (a run's steps are recorded by `shared::record_llm_call` as they
//! finish; this module reads them and records calls made outside runs).

use hearth_core::Timestamp;

use super::rows::{col, unsigned};
use super::{PostgresStore, shared};
use crate::error::Result;
use crate::records::{ModelUsage, StepRecord, StepStatus, UsageGroup, UsageQuery, UsageRow};
use crate::usage::{CallUsage, ModelCall, UsageStore, add_model_usage};

/// Usage grouped by the key expression `$key`, then by model, in byte order
/// of the keys as SQLite sorts them (the `C` collation, whatever the
/// database's). Sums of BIGINT are NUMERIC in PostgreSQL: cast back.
macro_rules! usage_sql {
    ($key:literal) => {
        concat!(
            "SELECT ",
            $key,
            ", (provider || '/' || model) COLLATE \"C\", count(*), \
             coalesce(sum(input_tokens), 0)::BIGINT, coalesce(sum(output_tokens), 0)::BIGINT, \
             coalesce(sum(cached_tokens), 0)::BIGINT, \
             count(*) FILTER (WHERE input_tokens IS NULL AND output_tokens IS NULL), \
             coalesce(sum(cache_write_tokens), 0)::BIGINT, \
             coalesce(sum(reasoning_tokens), 0)::BIGINT \
             FROM llm_calls WHERE at >= $1 AND at < $2 GROUP BY 1, 2 ORDER BY 1, 2"
        )
    };
}

const USAGE_BY_PROVIDER: &str = usage_sql!("provider COLLATE \"C\"");

const USAGE_BY_MODEL: &str = usage_sql!("(provider || '/' || model) COLLATE \"C\"");

/// By the number of the UTC day, formatted by [`utc_day`]. Integer
/// arithmetic, as SQLite's `strftime('%Y-%m-%d', at / 1000, 'unixepoch')`
/// reads it: milliseconds truncated to seconds (towards zero), then seconds
/// floored to days; no time zone or timestamp range is involved.
const USAGE_BY_DAY: &str = usage_sql!("(at / 1000) / 86400 - ((at / 1000) % 86400 < 0)::INT");

/// `YYYY-MM-DD` of a day counted from 1970-01-01 in the proleptic Gregorian
/// calendar, as SQLite prints it (year 0 exists; year -1 is `-001`). SQLite
/// prints nothing past 9999-12-31; this prints the five-digit year.
fn utc_day(days: i64) -> String {
    // Howard Hinnant's `civil_from_days`: eras of 400 years from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[async_trait::async_trait]
impl UsageStore for PostgresStore {
    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>> {
        let sql = match query.group_by {
            UsageGroup::Provider => USAGE_BY_PROVIDER,
            UsageGroup::Model => USAGE_BY_MODEL,
            UsageGroup::Day => USAGE_BY_DAY,
        };
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await?;
        let found = client
            .query(
                &stmt,
                &[
                    &query.since.unwrap_or(i64::MIN),
                    &query.until.unwrap_or(i64::MAX),
                ],
            )
            .await?;
        let mut out: Vec<UsageRow> = Vec::new();
        for row in &found {
            let key = match query.group_by {
                UsageGroup::Provider | UsageGroup::Model => col(row, 0)?,
                UsageGroup::Day => utc_day(col(row, 0)?),
            };
            let m = ModelUsage {
                model: col(row, 1)?,
                calls: unsigned(row, 2)?,
                input_tokens: sum(row, 3)?,
                output_tokens: sum(row, 4)?,
                cached_tokens: sum(row, 5)?,
                untracked_calls: unsigned(row, 6)?,
                cache_write_tokens: sum(row, 7)?,
                reasoning_tokens: sum(row, 8)?,
            };
            add_model_usage(&mut out, key, m);
        }
        Ok(out)
    }

    async fn record_anonymous_usage(&self, steps: Vec<StepRecord>) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        for step in &steps {
            if step.kind.is_model_call() && step.status != StepStatus::Started {
                shared::record_llm_call(&tx, step, true).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn calls_since(&self, since: Timestamp) -> Result<Vec<CallUsage>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT at, provider || '/' || model, thread_key, user_key, \
                 coalesce(input_tokens, 0), coalesce(output_tokens, 0), \
                 coalesce(cached_tokens, 0), coalesce(cache_write_tokens, 0), \
                 coalesce(reasoning_tokens, 0) \
                 FROM llm_calls WHERE at >= $1 ORDER BY at",
            )
            .await?;
        let found = client.query(&stmt, &[&since]).await?;
        found
            .iter()
            .map(|row| {
                Ok(CallUsage {
                    at: col(row, 0)?,
                    model: col(row, 1)?,
                    thread_key: col(row, 2)?,
                    user_key: col(row, 3)?,
                    input_tokens: sum(row, 4)?,
                    output_tokens: sum(row, 5)?,
                    cached_tokens: sum(row, 6)?,
                    cache_write_tokens: sum(row, 7)?,
                    reasoning_tokens: sum(row, 8)?,
                })
            })
            .collect()
    }

    async fn record_model_call(&self, call: ModelCall) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, input_tokens, \
                 latency_ms, status, error_kind, thread_key, user_key) \
                 VALUES ($1, 0, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                 ON CONFLICT (run_id, idx) DO NOTHING",
            )
            .await?;
        let status = if call.error_kind.is_none() {
            "ok"
        } else {
            "error"
        };
        client
            .execute(
                &stmt,
                &[
                    &call.call_id,
                    &call.at,
                    &call.provider,
                    &call.model,
                    &call.purpose,
                    &call
                        .input_tokens
                        .map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
                    &call.latency_ms,
                    &status,
                    &call.error_kind,
                    &call.thread_key,
                    &call.user_key,
                ],
            )
            .await?;
        Ok(())
    }
}

/// A token sum; a provider that reported a negative count adds nothing, as
/// on SQLite.
fn sum(row: &tokio_postgres::Row, idx: usize) -> Result<u64> {
    Ok(u64::try_from(col::<i64>(row, idx)?).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::utc_day;

    /// Every day SQLite can print, around the epoch, leap days and the ends
    /// of its range, is printed the same.
    #[test]
    fn days_are_printed_as_sqlite_prints_them() {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        let mut days: Vec<i64> = (-800..800).collect();
        days.extend((0..3_000).map(|i| i * 997 - 719_528));
        days.extend([
            -719_528, -719_529, 2_932_896, 11_016, 11_017, 10_957, 19_675,
        ]);
        for day in days {
            let sqlite: Option<String> = db
                .query_row(
                    "SELECT strftime('%Y-%m-%d', ?1 * 86400, 'unixepoch')",
                    [day],
                    |r| r.get(0),
                )
                .unwrap();
            if let Some(sqlite) = sqlite {
                assert_eq!(utc_day(day), sqlite, "day {day}");
            }
        }
        assert_eq!(utc_day(19_675), "2023-11-14");
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(utc_day(-1), "1969-12-31");
    }
}
