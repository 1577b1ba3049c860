//! Runs' ends on PostgreSQL in one statement.
//!
//! The end of a run writes the run, the expiry of its open confirmations,
//! its last steps, their usage, its messages, its replies and what it taught
//! the router. As one transaction of one statement each, that was eight round
//! trips per run (begin, six writes, commit), the largest share of a run's
//! round trips (docs/scaling.md, "What bounds throughput"). Here it is one
//! statement of data-modifying CTEs: one round trip, atomic as any single
//! statement (nothing of it is written unless all of it is), and every write
//! after the guarded update reads the update's output, so an end that finds
//! the run already terminal writes nothing at all. The statement takes the
//! ends of several runs at once (`batch_queue.rs` sends those that arrive
//! together); each row of each write names its run, and only the rows of
//! runs the guarded update ended are written.
//!
//! A finish the statement cannot express exactly falls back to the
//! transaction of one statement per write (`runs::finish_run`): an end
//! written by a replica that is not executing the run (it keeps the
//! executor's lease; rare, so the hot statement does not carry it), follow-up
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

use std::borrow::Cow;

use deadpool_postgres::GenericClient;

use super::rows::{self, run_columns};
use super::{storable, storable_opt, wide};
use crate::RUN_ENDED;
use crate::codec::{LlmCall, role_str, to_json};
use crate::error::Result;
use crate::records::RunFinish;
use crate::runs::Finished;

/// The whole end of one or more runs (ends that reach the store together
/// share it: `batch_queue`): `$1`-`$9` one array per column of the runs' new
/// values, `$10` who expired their confirmations, then one array per column
/// of the steps, the model calls, the messages, the replies and the router
/// deltas, each row naming the run it belongs to. Rows come out of `unnest
/// ... WITH ORDINALITY ORDER BY` in the order given, so the messages and
/// replies take their ids in that order (the history's and the delivery
/// order; the runs' in the order they came). A run is named once. Returns
/// each run as it ended and whether a later run of its thread was queued; no
/// row for a run that was terminal already, and nothing is written for it.
const END_SQL: &str = concat!(
    "WITH input AS (SELECT * FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], \
     $5::TEXT[], $6::BIGINT[], $7::BIGINT[], $8::TEXT[], $9::TEXT[]) \
     AS i (end_run, end_status, end_output, end_code, end_message, end_at, end_seq, \
     end_model, end_requested)), ",
    "ended AS (UPDATE runs SET status = end_status, output = end_output, \
     error_code = end_code, error_message = end_message, updated_at = end_at, \
     lease_owner = NULL, lease_until = NULL, last_event_seq = end_seq, \
     model = COALESCE(end_model, model), \
     requested_model = COALESCE(end_requested, requested_model), notified_by_end = TRUE \
     FROM input WHERE run_id = end_run \
     AND status IN ('queued', 'running', 'awaiting_confirmation') \
     RETURNING ",
    run_columns!(),
    ", watched, end_at), ",
    "expired AS (UPDATE confirmations SET state = 'expired', resolved_by = $10, \
     resolved_at = ended.end_at FROM ended WHERE confirmations.run_id = ended.run_id \
     AND confirmations.state = 'pending'), ",
    "steps AS (INSERT INTO run_steps (run_id, idx, kind, name, status, started_at, \
     finished_at, tokens, payload) \
     SELECT s.step_run, s.idx, s.kind, s.name, s.status, s.started_at, s.finished_at, \
     s.tokens, s.payload FROM unnest($11::TEXT[], $12::BIGINT[], $13::TEXT[], \
     $14::TEXT[], $15::TEXT[], $16::BIGINT[], $17::BIGINT[], $18::TEXT[], $19::TEXT[]) \
     AS s (step_run, idx, kind, name, status, started_at, finished_at, tokens, payload) \
     WHERE s.step_run IN (SELECT run_id FROM ended) \
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
     SELECT c.call_run, c.idx, c.at, c.provider, c.model, c.purpose, c.input_tokens, \
     c.output_tokens, c.cached_tokens, c.reasoning_tokens, c.cache_write_tokens, \
     c.latency_ms, c.status, c.error_kind, ended.thread_key, ended.user_key \
     FROM unnest($20::TEXT[], $21::BIGINT[], $22::BIGINT[], $23::TEXT[], $24::TEXT[], \
     $25::TEXT[], $26::BIGINT[], $27::BIGINT[], $28::BIGINT[], $29::BIGINT[], \
     $30::BIGINT[], $31::BIGINT[], $32::TEXT[], $33::TEXT[]) \
     AS c (call_run, idx, at, provider, model, purpose, input_tokens, output_tokens, \
     cached_tokens, reasoning_tokens, cache_write_tokens, latency_ms, status, error_kind) \
     JOIN ended ON ended.run_id = c.call_run \
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
     SELECT ended.thread_key, m.said_run, m.role, m.content, ended.end_at \
     FROM unnest($34::TEXT[], $35::TEXT[], $36::TEXT[]) WITH ORDINALITY \
     AS m (said_run, role, content, ord) JOIN ended ON ended.run_id = m.said_run \
     ORDER BY m.ord RETURNING run_id, id), ",
    "replies AS (INSERT INTO outbox (channel, target, kind, run_id, payload, \
     next_attempt_at, created_at) \
     SELECT o.channel, o.target, o.kind, o.run_id, o.payload, ended.end_at, ended.end_at \
     FROM unnest($37::TEXT[], $38::TEXT[], $39::TEXT[], $40::TEXT[], $41::TEXT[], \
     $42::TEXT[]) WITH ORDINALITY \
     AS o (reply_run, channel, target, kind, run_id, payload, ord) \
     JOIN ended ON ended.run_id = o.reply_run ORDER BY o.ord), ",
    // Only deltas of zero or more reach here (see `fits_one_statement`), so
    // the inserted counts are the deltas and the sums need no clamp below.
    // Grouped, since two runs of one batch may teach one arm (an upsert
    // may not touch one row twice in a statement).
    "arms AS (INSERT INTO router_arms (model, task, successes, failures, runs) \
     SELECT a.model, a.task, sum(a.successes)::BIGINT, sum(a.failures)::BIGINT, \
     sum(a.runs)::BIGINT \
     FROM unnest($43::TEXT[], $44::TEXT[], $45::TEXT[], $46::BIGINT[], $47::BIGINT[], \
     $48::BIGINT[]) AS a (arm_run, model, task, successes, failures, runs) \
     WHERE a.arm_run IN (SELECT run_id FROM ended) GROUP BY a.model, a.task \
     ON CONFLICT (model, task) DO UPDATE SET \
     successes = router_arms.successes + excluded.successes, \
     failures = router_arms.failures + excluded.failures, \
     runs = router_arms.runs + excluded.runs) ",
    // Each run as it ended (the caller answers with it instead of reading
    // it again), and whether a later run of its thread was queued: then
    // the replica claims it at once (`RunStore::finish_run_seeing_next`);
    // then the ids its messages were given, in their order (the replica
    // adds them to the context it holds of the thread: `context_cache.rs`).
    // The end notifies as the row trigger would have, which it marked to
    // skip these rows (`notified_by_end`, migration 0017): `hearth_ended`
    // when another replica may follow the run, `hearth_work` when its
    // thread's next run may start now. Both are delivered at the commit.
    "SELECT ",
    run_columns!(),
    ", next.queued, \
     CASE WHEN ended.watched THEN pg_notify('hearth_ended', ended.run_id) END, \
     CASE WHEN next.queued THEN pg_notify('hearth_work', '') END, \
     (SELECT array_agg(said.id ORDER BY said.id) FROM said \
     WHERE said.run_id = ended.run_id) \
     FROM ended CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM runs AS later \
     WHERE later.thread_key = ended.thread_key AND later.status = 'queued' \
     AND later.run_id <> ended.run_id) AS queued) AS next"
);

/// The column of [`END_SQL`]'s row after the run's: whether a later run of
/// the thread was queued.
const QUEUED_COLUMN: usize = 22;

/// The column of [`END_SQL`]'s row with the ids of the run's messages.
const SAID_COLUMN: usize = QUEUED_COLUMN + 3;

/// One end written by [`end_together`]: what the store answers, and the
/// ids its messages were given, in their order (none when it was not
/// written).
#[derive(Debug)]
pub(super) struct Ended {
    pub finished: Finished,
    pub said: Vec<i64>,
}

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
        && !finish.executed_elsewhere
        && steps.len() == finish.steps.len()
        && arms.len() == finish.arm_observations.len()
        && finish
            .arm_observations
            .iter()
            .all(|a| a.successes >= 0 && a.failures >= 0 && a.runs >= 0)
}

/// The runs' new columns, one array each.
#[derive(Default)]
struct Ends<'a> {
    run: Vec<&'a str>,
    status: Vec<&'static str>,
    output: Vec<Option<Cow<'a, str>>>,
    error_code: Vec<Option<Cow<'a, str>>>,
    error_message: Vec<Option<Cow<'a, str>>>,
    at: Vec<i64>,
    last_event_seq: Vec<Option<i64>>,
    model: Vec<Option<&'a str>>,
    requested_model: Vec<Option<&'a str>>,
}

/// The columns of the steps of the finishes, one array each.
#[derive(Default)]
struct Steps<'a> {
    run: Vec<&'a str>,
    idx: Vec<i64>,
    kind: Vec<&'static str>,
    name: Vec<Cow<'a, str>>,
    status: Vec<&'static str>,
    started_at: Vec<i64>,
    finished_at: Vec<Option<i64>>,
    tokens: Vec<Option<String>>,
    payload: Vec<String>,
}

/// The columns of the finished model calls among them.
#[derive(Default)]
struct Calls<'a> {
    run: Vec<&'a str>,
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

/// The columns of the messages, the replies and the router deltas.
#[derive(Default)]
struct Writes<'a> {
    said_run: Vec<&'a str>,
    roles: Vec<&'static str>,
    contents: Vec<String>,
    reply_run: Vec<&'a str>,
    channels: Vec<&'a str>,
    targets: Vec<&'a str>,
    kinds: Vec<&'a str>,
    reply_runs: Vec<Option<&'a str>>,
    payloads: Vec<&'a str>,
    arm_run: Vec<&'a str>,
    arm_models: Vec<&'a str>,
    arm_tasks: Vec<&'a str>,
    successes: Vec<i64>,
    failures: Vec<i64>,
    arm_runs: Vec<i64>,
}

impl<'a> Steps<'a> {
    /// Adds `finish`'s steps, and its finished model calls to `calls`.
    fn add(&mut self, calls: &mut Calls<'a>, finish: &'a RunFinish) -> Result<()> {
        let run = finish.run_id.as_str();
        for step in &finish.steps {
            self.run.push(run);
            self.idx.push(wide(step.index));
            self.kind.push(step.kind.as_str());
            self.name.push(storable(&step.name));
            self.status.push(step.status.as_str());
            self.started_at.push(step.started_at);
            self.finished_at.push(step.finished_at);
            self.tokens.push(
                step.tokens
                    .as_ref()
                    .map(|t| to_json(t, "step tokens"))
                    .transpose()?,
            );
            self.payload.push(to_json(&step.payload, "step payload")?);
            if super::runs::counts_in_usage(step) {
                let row = LlmCall::of(step);
                calls.run.push(run);
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
        Ok(())
    }
}

impl<'a> Ends<'a> {
    /// Adds `finish`'s run.
    fn add(&mut self, finish: &'a RunFinish) {
        self.run.push(&finish.run_id);
        self.status.push(finish.status.as_str());
        self.output.push(storable_opt(finish.output.as_deref()));
        self.error_code
            .push(storable_opt(finish.error_code.as_deref()));
        self.error_message
            .push(storable_opt(finish.error_message.as_deref()));
        self.at.push(finish.finished_at);
        self.last_event_seq
            .push(finish.last_event_seq.and_then(|n| i64::try_from(n).ok()));
        self.model.push(finish.model.as_deref());
        self.requested_model.push(finish.requested_model.as_deref());
    }
}

impl<'a> Writes<'a> {
    /// Adds `finish`'s messages, replies and router deltas.
    fn add(&mut self, finish: &'a RunFinish) -> Result<()> {
        let run = finish.run_id.as_str();
        for m in &finish.messages {
            self.said_run.push(run);
            self.roles.push(role_str(m.role));
            self.contents.push(to_json(&m.content, "message content")?);
        }
        for o in &finish.outbox {
            self.reply_run.push(run);
            self.channels.push(&o.channel);
            self.targets.push(&o.target);
            self.kinds.push(o.kind.as_str());
            self.reply_runs.push(o.run_id.as_deref());
            self.payloads.push(&o.payload);
        }
        for a in &finish.arm_observations {
            self.arm_run.push(run);
            self.arm_models.push(&a.model);
            self.arm_tasks.push(&a.task);
            self.successes.push(a.successes);
            self.failures.push(a.failures);
            self.arm_runs.push(a.runs);
        }
        Ok(())
    }
}

/// Ends runs with [`END_SQL`], in one statement: for each finish, in the
/// order given, whether it ended here (not when its run was terminal
/// already, and then nothing was written for it), and then whether a later
/// run of its thread was queued (in the statement's snapshot), the run as
/// it ended and the ids of its messages. Every finish must [fit](fits_one_statement) and name a run
/// no other names. An error writes nothing for any of them.
pub(super) async fn end_together(
    c: &impl GenericClient,
    finishes: &[RunFinish],
) -> Result<Vec<Ended>> {
    let mut ends = Ends::default();
    let mut steps = Steps::default();
    let mut calls = Calls::default();
    let mut w = Writes::default();
    for finish in finishes {
        ends.add(finish);
        steps.add(&mut calls, finish)?;
        w.add(finish)?;
    }
    let stmt = c.prepare_cached(END_SQL).await?;
    let rows = c
        .query(
            &stmt,
            &[
                &ends.run,
                &ends.status,
                &ends.output,
                &ends.error_code,
                &ends.error_message,
                &ends.at,
                &ends.last_event_seq,
                &ends.model,
                &ends.requested_model,
                &RUN_ENDED,
                &steps.run,
                &steps.idx,
                &steps.kind,
                &steps.name,
                &steps.status,
                &steps.started_at,
                &steps.finished_at,
                &steps.tokens,
                &steps.payload,
                &calls.run,
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
                &w.said_run,
                &w.roles,
                &w.contents,
                &w.reply_run,
                &w.channels,
                &w.targets,
                &w.kinds,
                &w.reply_runs,
                &w.payloads,
                &w.arm_run,
                &w.arm_models,
                &w.arm_tasks,
                &w.successes,
                &w.failures,
                &w.arm_runs,
            ],
        )
        .await?;
    let mut finished: Vec<Ended> = finishes
        .iter()
        .map(|_| Ended {
            finished: Finished {
                ended: false,
                next_queued: None,
                run: None,
            },
            said: Vec::new(),
        })
        .collect();
    for row in &rows {
        let run = rows::run(row)?;
        let Some(at) = finishes.iter().position(|f| f.run_id == run.run_id) else {
            return Err(crate::error::StoreError::Corrupt(format!(
                "the end of several runs returned run {}, which it was not given",
                run.run_id
            )));
        };
        finished[at] = Ended {
            finished: Finished {
                ended: true,
                next_queued: Some(row.try_get(QUEUED_COLUMN)?),
                run: Some(run),
            },
            said: row
                .try_get::<_, Option<Vec<i64>>>(SAID_COLUMN)?
                .unwrap_or_default(),
        };
    }
    Ok(finished)
}
