//! A run's end on PostgreSQL in one statement.
//!
//! The end of a run writes the run, the expiry of its open confirmations,
//! its last steps, their usage, its messages, its replies and what it taught
//! the router. As one transaction of one statement each, that was eight round
//! trips per run (begin, six writes, commit), the largest share of a run's
//! round trips (docs/scaling.md, "What bounds throughput"). Here it is one
//! statement of data-modifying CTEs: one round trip, atomic as any single
//! statement (nothing of it is written unless all of it is), and every write
//! after the guarded update reads the update's output, so an end that finds
//! the run already terminal writes nothing at all.
//!
//! A finish the statement cannot express exactly falls back to the
//! transaction of one statement per write (`runs::finish_run`): follow-up
//! runs (each stored by `insert_run` under its thread's advisory lock, held
//! to the end's commit; calling `hearth_store_run` from the statement was
//! not tried), two steps with one index (an upsert may
//! not touch one row twice in a statement), and router deltas that repeat an
//! arm or take counts back (applied one by one, each clamped at zero).
//!
//! Why one snapshot for all the writes changes nothing: the guarded update
//! waits for (and re-checks against) a concurrent end or answer on the run's
//! row, as before; the confirmations' update re-checks each row a concurrent
//! answer changed (READ COMMITTED), and none is created for a run while it
//! ends; the steps, calls, messages and replies are new rows of this run; the
//! usage and router upserts take the newest version of a row a concurrent
//! run committed.

use deadpool_postgres::GenericClient;

use super::rows::{self, run_columns};
use super::wide;
use crate::RUN_ENDED;
use crate::codec::{LlmCall, role_str, to_json};
use crate::error::Result;
use crate::records::RunFinish;
use crate::runs::Finished;

/// The whole end: `$1` run, `$2`-`$9` the run's new columns, `$10` who
/// expired its confirmations, then one array per column of the steps, the
/// model calls, the messages, the replies and the router deltas. Rows come
/// out of `unnest ... WITH ORDINALITY ORDER BY` in the order given, so the
/// messages and replies take their ids in that order (the history's and the
/// delivery order). Returns the run as it ended and whether a later run of
/// the thread was queued; no row when it was terminal already.
const END_SQL: &str = concat!(
    "WITH ended AS (UPDATE runs SET status = $2, output = $3, error_code = $4, \
     error_message = $5, updated_at = $6, lease_owner = NULL, lease_until = NULL, \
     last_event_seq = $7, model = COALESCE($8, model), \
     requested_model = COALESCE($9, requested_model), notified_by_end = TRUE \
     WHERE run_id = $1 AND status IN ('queued', 'running', 'awaiting_confirmation') \
     RETURNING ",
    run_columns!(),
    ", watched), ",
    "expired AS (UPDATE confirmations SET state = 'expired', resolved_by = $10, \
     resolved_at = $6 WHERE run_id = $1 AND state = 'pending' \
     AND EXISTS (SELECT 1 FROM ended)), ",
    "steps AS (INSERT INTO run_steps (run_id, idx, kind, name, status, started_at, \
     finished_at, tokens, payload) \
     SELECT $1, s.idx, s.kind, s.name, s.status, s.started_at, s.finished_at, s.tokens, \
     s.payload FROM unnest($11::BIGINT[], $12::TEXT[], $13::TEXT[], $14::TEXT[], \
     $15::BIGINT[], $16::BIGINT[], $17::TEXT[], $18::TEXT[]) \
     AS s (idx, kind, name, status, started_at, finished_at, tokens, payload) \
     WHERE EXISTS (SELECT 1 FROM ended) \
     ON CONFLICT (run_id, idx) DO UPDATE SET kind = excluded.kind, name = excluded.name, \
     status = excluded.status, started_at = excluded.started_at, \
     finished_at = excluded.finished_at, tokens = excluded.tokens, \
     payload = excluded.payload), ",
    // The usage of each finished model call, summed into the daily rollup
    // by the same statement (as `shared::record_llm_call` does), grouped so
    // that two calls of one model on one day make one upsert, into this
    // backend's stripe of the row (migration 0015): concurrent ends do not
    // wait for each other's commit there.
    "call AS (INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, \
     input_tokens, output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens, \
     latency_ms, status, error_kind, thread_key, user_key) \
     SELECT $1, c.idx, c.at, c.provider, c.model, c.purpose, c.input_tokens, \
     c.output_tokens, c.cached_tokens, c.reasoning_tokens, c.cache_write_tokens, \
     c.latency_ms, c.status, c.error_kind, ended.thread_key, ended.user_key \
     FROM ended, unnest($19::BIGINT[], $20::BIGINT[], $21::TEXT[], $22::TEXT[], \
     $23::TEXT[], $24::BIGINT[], $25::BIGINT[], $26::BIGINT[], $27::BIGINT[], \
     $28::BIGINT[], $29::BIGINT[], $30::TEXT[], $31::TEXT[]) \
     AS c (idx, at, provider, model, purpose, input_tokens, output_tokens, cached_tokens, \
     reasoning_tokens, cache_write_tokens, latency_ms, status, error_kind) \
     ON CONFLICT (run_id, idx) DO NOTHING \
     RETURNING at, provider, model, input_tokens, output_tokens, cached_tokens, \
     reasoning_tokens, cache_write_tokens), ",
    "usage AS (INSERT INTO usage_daily (day, provider, model, stripe, calls, untracked_calls, \
     input_tokens, output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens) \
     SELECT (at / 1000) / 86400 - ((at / 1000) % 86400 < 0)::INT, provider, model, \
     (pg_backend_pid() % 32)::SMALLINT, count(*), \
     count(*) FILTER (WHERE input_tokens IS NULL AND output_tokens IS NULL), \
     coalesce(sum(input_tokens), 0)::BIGINT, coalesce(sum(output_tokens), 0)::BIGINT, \
     coalesce(sum(cached_tokens), 0)::BIGINT, coalesce(sum(reasoning_tokens), 0)::BIGINT, \
     coalesce(sum(cache_write_tokens), 0)::BIGINT FROM call GROUP BY 1, 2, 3, 4 \
     ON CONFLICT (day, provider, model, stripe) DO UPDATE SET \
     calls = usage_daily.calls + excluded.calls, \
     untracked_calls = usage_daily.untracked_calls + excluded.untracked_calls, \
     input_tokens = usage_daily.input_tokens + excluded.input_tokens, \
     output_tokens = usage_daily.output_tokens + excluded.output_tokens, \
     cached_tokens = usage_daily.cached_tokens + excluded.cached_tokens, \
     reasoning_tokens = usage_daily.reasoning_tokens + excluded.reasoning_tokens, \
     cache_write_tokens = usage_daily.cache_write_tokens + excluded.cache_write_tokens), ",
    "said AS (INSERT INTO messages (thread_key, run_id, role, content, created_at) \
     SELECT ended.thread_key, $1, m.role, m.content, $6 \
     FROM ended, unnest($32::TEXT[], $33::TEXT[]) WITH ORDINALITY AS m (role, content, ord) \
     ORDER BY m.ord), ",
    "replies AS (INSERT INTO outbox (channel, target, kind, run_id, payload, \
     next_attempt_at, created_at) \
     SELECT o.channel, o.target, o.kind, o.run_id, o.payload, $6, $6 \
     FROM unnest($34::TEXT[], $35::TEXT[], $36::TEXT[], $37::TEXT[], $38::TEXT[]) \
     WITH ORDINALITY AS o (channel, target, kind, run_id, payload, ord) \
     WHERE EXISTS (SELECT 1 FROM ended) ORDER BY o.ord), ",
    // Only deltas of zero or more reach here (see `fits_one_statement`), so
    // the inserted counts are the deltas and the sums need no clamp below.
    "arms AS (INSERT INTO router_arms (model, task, successes, failures, runs) \
     SELECT a.model, a.task, a.successes, a.failures, a.runs \
     FROM unnest($39::TEXT[], $40::TEXT[], $41::BIGINT[], $42::BIGINT[], $43::BIGINT[]) \
     AS a (model, task, successes, failures, runs) WHERE EXISTS (SELECT 1 FROM ended) \
     ON CONFLICT (model, task) DO UPDATE SET \
     successes = router_arms.successes + excluded.successes, \
     failures = router_arms.failures + excluded.failures, \
     runs = router_arms.runs + excluded.runs) ",
    // The run as it ended (the caller answers with it instead of reading
    // it again), and whether a later run of the thread was queued: then
    // the replica claims it at once (`RunStore::finish_run_seeing_next`).
    // The end notifies as the row trigger would have, which it marked to
    // skip this row (`notified_by_end`, migration 0017): `hearth_ended`
    // when another replica may follow the run, `hearth_work` when its
    // thread's next run may start now. Both are delivered at the commit.
    "SELECT ",
    run_columns!(),
    ", next.queued, \
     CASE WHEN ended.watched THEN pg_notify('hearth_ended', ended.run_id) END, \
     CASE WHEN next.queued THEN pg_notify('hearth_work', '') END \
     FROM ended CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM runs AS later \
     WHERE later.thread_key = ended.thread_key AND later.status = 'queued' \
     AND later.run_id <> $1) AS queued) AS next"
);

/// The column of [`END_SQL`]'s row after the run's: whether a later run of
/// the thread was queued.
const QUEUED_COLUMN: usize = 22;

/// Whether `finish` is written exactly by [`END_SQL`]; the others take the
/// transaction of one statement per write.
pub(super) fn fits_one_statement(finish: &RunFinish) -> bool {
    let mut steps: Vec<u32> = finish.steps.iter().map(|s| s.index).collect();
    steps.sort_unstable();
    steps.dedup();
    let mut arms: Vec<(&str, &str)> = finish
        .arm_observations
        .iter()
        .map(|a| (a.model.as_str(), a.task.as_str()))
        .collect();
    arms.sort_unstable();
    arms.dedup();
    finish.follow_ups.is_empty()
        && steps.len() == finish.steps.len()
        && arms.len() == finish.arm_observations.len()
        && finish
            .arm_observations
            .iter()
            .all(|a| a.successes >= 0 && a.failures >= 0 && a.runs >= 0)
}

/// The columns of the steps of a finish, one array each.
#[derive(Default)]
struct Steps {
    idx: Vec<i64>,
    kind: Vec<&'static str>,
    name: Vec<String>,
    status: Vec<&'static str>,
    started_at: Vec<i64>,
    finished_at: Vec<Option<i64>>,
    tokens: Vec<Option<String>>,
    payload: Vec<String>,
}

/// The columns of the finished model calls among them.
#[derive(Default)]
struct Calls<'a> {
    idx: Vec<i64>,
    at: Vec<i64>,
    provider: Vec<&'a str>,
    model: Vec<&'a str>,
    purpose: Vec<&'static str>,
    input_tokens: Vec<Option<i64>>,
    output_tokens: Vec<Option<i64>>,
    cached_tokens: Vec<Option<i64>>,
    reasoning_tokens: Vec<Option<i64>>,
    cache_write_tokens: Vec<Option<i64>>,
    latency_ms: Vec<i64>,
    status: Vec<&'static str>,
    error_kind: Vec<Option<&'a str>>,
}

/// Ends a run with [`END_SQL`]: whether it ended here (not when it was
/// terminal already, and then nothing was written), and then whether a
/// later run of its thread was queued (in the statement's snapshot) and the
/// run as it ended. `finish` must [fit](fits_one_statement).
pub(super) async fn end_in_one_statement(
    c: &impl GenericClient,
    finish: &RunFinish,
) -> Result<Finished> {
    let mut steps = Steps::default();
    let mut calls = Calls::default();
    for step in &finish.steps {
        steps.idx.push(wide(step.index));
        steps.kind.push(step.kind.as_str());
        steps.name.push(step.name.clone());
        steps.status.push(step.status.as_str());
        steps.started_at.push(step.started_at);
        steps.finished_at.push(step.finished_at);
        steps.tokens.push(
            step.tokens
                .as_ref()
                .map(|t| to_json(t, "step tokens"))
                .transpose()?,
        );
        steps.payload.push(to_json(&step.payload, "step payload")?);
        if super::runs::counts_in_usage(step) {
            let row = LlmCall::of(step);
            calls.idx.push(wide(step.index));
            calls.at.push(step.started_at);
            calls.provider.push(row.provider);
            calls.model.push(row.model);
            calls.purpose.push(row.purpose);
            calls.input_tokens.push(row.input_tokens);
            calls.output_tokens.push(row.output_tokens);
            calls.cached_tokens.push(row.cached_tokens);
            calls.reasoning_tokens.push(row.reasoning_tokens);
            calls.cache_write_tokens.push(row.cache_write_tokens);
            calls.latency_ms.push(row.latency_ms);
            calls.status.push(row.status);
            calls.error_kind.push(row.error_kind);
        }
    }
    let roles: Vec<&str> = finish.messages.iter().map(|m| role_str(m.role)).collect();
    let contents = finish
        .messages
        .iter()
        .map(|m| to_json(&m.content, "message content"))
        .collect::<Result<Vec<_>>>()?;
    let out = &finish.outbox;
    let channels: Vec<&str> = out.iter().map(|o| o.channel.as_str()).collect();
    let targets: Vec<&str> = out.iter().map(|o| o.target.as_str()).collect();
    let kinds: Vec<&str> = out.iter().map(|o| o.kind.as_str()).collect();
    let out_runs: Vec<Option<&str>> = out.iter().map(|o| o.run_id.as_deref()).collect();
    let payloads: Vec<&str> = out.iter().map(|o| o.payload.as_str()).collect();
    let arms = &finish.arm_observations;
    let arm_models: Vec<&str> = arms.iter().map(|a| a.model.as_str()).collect();
    let arm_tasks: Vec<&str> = arms.iter().map(|a| a.task.as_str()).collect();
    let successes: Vec<i64> = arms.iter().map(|a| a.successes).collect();
    let failures: Vec<i64> = arms.iter().map(|a| a.failures).collect();
    let arm_runs: Vec<i64> = arms.iter().map(|a| a.runs).collect();
    let stmt = c.prepare_cached(END_SQL).await?;
    let row = c
        .query_opt(
            &stmt,
            &[
                &finish.run_id,
                &finish.status.as_str(),
                &finish.output,
                &finish.error_code,
                &finish.error_message,
                &finish.finished_at,
                &finish.last_event_seq.and_then(|n| i64::try_from(n).ok()),
                &finish.model,
                &finish.requested_model,
                &RUN_ENDED,
                &steps.idx,
                &steps.kind,
                &steps.name,
                &steps.status,
                &steps.started_at,
                &steps.finished_at,
                &steps.tokens,
                &steps.payload,
                &calls.idx,
                &calls.at,
                &calls.provider,
                &calls.model,
                &calls.purpose,
                &calls.input_tokens,
                &calls.output_tokens,
                &calls.cached_tokens,
                &calls.reasoning_tokens,
                &calls.cache_write_tokens,
                &calls.latency_ms,
                &calls.status,
                &calls.error_kind,
                &roles,
                &contents,
                &channels,
                &targets,
                &kinds,
                &out_runs,
                &payloads,
                &arm_models,
                &arm_tasks,
                &successes,
                &failures,
                &arm_runs,
            ],
        )
        .await?;
    Ok(match row {
        Some(row) => Finished {
            ended: true,
            next_queued: Some(row.try_get(QUEUED_COLUMN)?),
            run: Some(rows::run(&row)?),
        },
        None => Finished {
            ended: false,
            next_queued: None,
            run: None,
        },
    })
}
