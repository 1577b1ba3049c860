//! Writes several aggregates make inside their own transactions: an audit
//! event with a grant change, an outbox item with a run's end, a history
//! message, a model call's usage, the expiry of a run's confirmations, a
//! router arm's counts. Each takes the caller's transaction (or connection)
//! so it commits with it.

use deadpool_postgres::GenericClient;
use hearth_core::{Message, Timestamp};

use super::wide;
use crate::RUN_ENDED;
use crate::channels::NewOutboxItem;
use crate::codec::{LlmCall, role_str, to_json};
use crate::error::Result;
use crate::records::{AuditEvent, StepRecord};
use crate::router::ArmStats;

/// Appends one audit event.
pub(crate) async fn append_audit(c: &impl GenericClient, event: &AuditEvent) -> Result<()> {
    let stmt = c
        .prepare_cached(
            "INSERT INTO audit (at, actor, action, target, outcome, capability, scope) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .await?;
    c.execute(
        &stmt,
        &[
            &event.at,
            &event.actor,
            &event.action,
            &super::storable(&event.target),
            &super::storable(&event.outcome),
            &event.capability,
            &event.scope,
        ],
    )
    .await?;
    Ok(())
}

/// Queues outbox items; the reply is durable exactly when its cause is.
pub(crate) async fn enqueue_outbox(
    c: &impl GenericClient,
    items: &[NewOutboxItem],
    now: Timestamp,
) -> Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(items.len());
    if items.is_empty() {
        return Ok(ids);
    }
    let stmt = c
        .prepare_cached(
            "INSERT INTO outbox (channel, target, kind, run_id, payload, next_attempt_at, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING id",
        )
        .await?;
    for it in items {
        let row = c
            .query_one(
                &stmt,
                &[
                    &it.channel,
                    &it.target,
                    &it.kind.as_str(),
                    &it.run_id,
                    &it.payload,
                    &now,
                ],
            )
            .await?;
        ids.push(row.try_get(0)?);
    }
    Ok(ids)
}

/// Appends one message to a thread's history.
pub(crate) async fn append_message(
    c: &impl GenericClient,
    thread_key: &str,
    run_id: &str,
    message: &Message,
    at: Timestamp,
) -> Result<()> {
    let content = to_json(&message.content, "message content")?;
    let stmt = c
        .prepare_cached(
            "INSERT INTO messages (thread_key, run_id, role, content, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .await?;
    c.execute(
        &stmt,
        &[&thread_key, &run_id, &role_str(message.role), &content, &at],
    )
    .await?;
    Ok(())
}

/// The end of a statement `WITH call AS (INSERT INTO llm_calls ... ON
/// CONFLICT DO NOTHING `: returns the inserted row and adds it to the
/// `usage_daily` rollup in the same statement, so a call is summed exactly
/// when it is stored (a duplicate, not inserted, adds nothing). It adds to
/// its backend's stripe of the row (migration 0015), so concurrent calls of
/// one model do not wait for each other's commit.
macro_rules! add_to_usage_daily {
    () => {
        "RETURNING at, provider, model, input_tokens, output_tokens, cached_tokens, \
         reasoning_tokens, cache_write_tokens) \
         INSERT INTO usage_daily (day, provider, model, stripe, calls, untracked_calls, \
         input_tokens, output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens) \
         SELECT (at / 1000) / 86400 - ((at / 1000) % 86400 < 0)::INT, provider, model, \
         (pg_backend_pid() % 32)::SMALLINT, 1, \
         (input_tokens IS NULL AND output_tokens IS NULL)::INT, coalesce(input_tokens, 0), \
         coalesce(output_tokens, 0), coalesce(cached_tokens, 0), coalesce(reasoning_tokens, 0), \
         coalesce(cache_write_tokens, 0) FROM call \
         ON CONFLICT (day, provider, model, stripe) DO UPDATE SET \
         calls = usage_daily.calls + excluded.calls, \
         untracked_calls = usage_daily.untracked_calls + excluded.untracked_calls, \
         input_tokens = usage_daily.input_tokens + excluded.input_tokens, \
         output_tokens = usage_daily.output_tokens + excluded.output_tokens, \
         cached_tokens = usage_daily.cached_tokens + excluded.cached_tokens, \
         reasoning_tokens = usage_daily.reasoning_tokens + excluded.reasoning_tokens, \
         cache_write_tokens = usage_daily.cache_write_tokens + excluded.cache_write_tokens"
    };
}
pub(crate) use add_to_usage_daily;

/// Records the usage of a finished model-call step of a stored run (its
/// thread and user read from the run); `anonymous` records one of a run that
/// is not in this database (incognito), with no thread or user. A step
/// recorded twice counts once.
pub(crate) async fn record_llm_call(
    c: &impl GenericClient,
    step: &StepRecord,
    anonymous: bool,
) -> Result<()> {
    let row = LlmCall::of(step);
    let sql = if anonymous {
        concat!(
            "WITH call AS (INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, \
             input_tokens, output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens, \
             latency_ms, status, error_kind, thread_key, user_key) \
             VALUES ($1, $2, $3, $4, $5, $14, $6, $7, $8, $9, $10, $11, $12, $13, NULL, NULL) \
             ON CONFLICT (run_id, idx) DO NOTHING ",
            add_to_usage_daily!()
        )
    } else {
        concat!(
            "WITH call AS (INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, \
             input_tokens, output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens, \
             latency_ms, status, error_kind, thread_key, user_key) \
             SELECT $1, $2, $3, $4, $5, $14, $6, $7, $8, $9, $10, $11, $12, $13, thread_key, \
             user_key FROM runs WHERE run_id = $1 ON CONFLICT (run_id, idx) DO NOTHING ",
            add_to_usage_daily!()
        )
    };
    let stmt = c.prepare_cached(sql).await?;
    c.execute(
        &stmt,
        &[
            &step.run_id,
            &wide(step.index),
            &step.started_at,
            &row.provider,
            &row.model,
            &row.input_tokens,
            &row.output_tokens,
            &row.cached_tokens,
            &row.reasoning_tokens,
            &row.cache_write_tokens,
            &row.latency_ms,
            &row.status,
            &row.error_kind,
            &row.purpose,
        ],
    )
    .await?;
    Ok(())
}

/// Expires the pending confirmations of a run that ended.
pub(crate) async fn end_of_run(c: &impl GenericClient, run_id: &str, at: Timestamp) -> Result<()> {
    let stmt = c
        .prepare_cached(
            "UPDATE confirmations SET state = 'expired', resolved_by = $2, resolved_at = $3 \
             WHERE run_id = $1 AND state = 'pending'",
        )
        .await?;
    c.execute(&stmt, &[&run_id, &RUN_ENDED, &at]).await?;
    Ok(())
}

/// Adds `delta` to its router arm's counts (a run's observations at its
/// end, a rating taken back or given); counts never go below zero. One
/// upsert, so concurrent additions to the same arm all count.
pub(crate) async fn apply_arm_delta(c: &impl GenericClient, delta: &ArmStats) -> Result<()> {
    let stmt = c
        .prepare_cached(
            // The casts type the parameters (a bare `GREATEST($3, 0)` would
            // make them INTEGER, and an i64 delta would not bind).
            "INSERT INTO router_arms (model, task, successes, failures, runs) \
             VALUES ($1, $2, GREATEST($3::bigint, 0), GREATEST($4::bigint, 0), \
             GREATEST($5::bigint, 0)) \
             ON CONFLICT (model, task) DO UPDATE SET \
             successes = GREATEST(router_arms.successes + $3, 0), \
             failures = GREATEST(router_arms.failures + $4, 0), \
             runs = GREATEST(router_arms.runs + $5, 0)",
        )
        .await?;
    c.execute(
        &stmt,
        &[
            &delta.model,
            &delta.task,
            &delta.successes,
            &delta.failures,
            &delta.runs,
        ],
    )
    .await?;
    Ok(())
}
