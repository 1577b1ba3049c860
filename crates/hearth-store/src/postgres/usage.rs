//! Model-call usage on PostgreSQL: one `llm_calls` row per finished model
//! call (a run's steps are recorded by `shared::record_llm_call` as they
//! finish; this module reads them and records calls made outside runs).

use hearth_core::Timestamp;

use super::rows::{col, unsigned};
use super::{PostgresStore, shared};
use crate::error::Result;
use crate::records::{ModelUsage, StepRecord, StepStatus, UsageGroup, UsageQuery, UsageRow};
use crate::usage::{CallUsage, ModelCall, UsageStore, UsageWindow, add_model_usage, utc_day};

/// The columns of one raw call as a rollup row, for the window's edges.
macro_rules! raw_calls {
    ($range:literal) => {
        concat!(
            "SELECT (at / 1000) / 86400 - ((at / 1000) % 86400 < 0)::INT AS day, provider, \
             model, 1::BIGINT, (input_tokens IS NULL AND output_tokens IS NULL)::INT::BIGINT, \
             coalesce(input_tokens, 0), coalesce(output_tokens, 0), coalesce(cached_tokens, 0), \
             coalesce(reasoning_tokens, 0), coalesce(cache_write_tokens, 0) \
             FROM llm_calls WHERE ",
            $range
        )
    };
}

/// Usage grouped by the key expression `$key`, then by model, in byte order
/// of the keys as SQLite sorts them (the `C` collation, whatever the
/// database's): the window's whole days from the `usage_daily` rollup, its
/// edges from the raw calls (see [`UsageWindow`]). Sums of BIGINT are
/// NUMERIC in PostgreSQL: cast back.
macro_rules! usage_sql {
    ($key:literal) => {
        concat!(
            "SELECT ",
            $key,
            ", (provider || '/' || model) COLLATE \"C\", sum(calls)::BIGINT, \
             sum(input_tokens)::BIGINT, sum(output_tokens)::BIGINT, sum(cached_tokens)::BIGINT, \
             sum(untracked_calls)::BIGINT, sum(cache_write_tokens)::BIGINT, \
             sum(reasoning_tokens)::BIGINT FROM (\
             SELECT day, provider, model, calls, untracked_calls, input_tokens, output_tokens, \
             cached_tokens, reasoning_tokens, cache_write_tokens \
             FROM usage_daily WHERE day >= $5 AND day < $6 UNION ALL ",
            raw_calls!("at >= $1 AND at < $3"),
            " UNION ALL ",
            raw_calls!("at >= $4 AND at < $2"),
            ") AS u GROUP BY 1, 2 ORDER BY 1, 2"
        )
    };
}

const USAGE_BY_PROVIDER: &str = usage_sql!("provider COLLATE \"C\"");

const USAGE_BY_MODEL: &str = usage_sql!("(provider || '/' || model) COLLATE \"C\"");

const USAGE_BY_DAY: &str = usage_sql!("day");

#[async_trait::async_trait]
impl UsageStore for PostgresStore {
    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>> {
        let sql = match query.group_by {
            UsageGroup::Provider => USAGE_BY_PROVIDER,
            UsageGroup::Model => USAGE_BY_MODEL,
            UsageGroup::Day => USAGE_BY_DAY,
        };
        let w = UsageWindow::of(query.since, query.until);
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await?;
        let found = client
            .query(
                &stmt,
                &[&w.since, &w.until, &w.lo_ms, &w.hi_ms, &w.lo_day, &w.hi_day],
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
            .prepare_cached(concat!(
                "WITH call AS (INSERT INTO llm_calls (run_id, idx, at, provider, model, \
                     purpose, input_tokens, latency_ms, status, error_kind, thread_key, user_key) \
                     VALUES ($1, 0, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     ON CONFLICT (run_id, idx) DO NOTHING ",
                shared::add_to_usage_daily!()
            ))
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
