//! Runs, their leases, steps and steers on PostgreSQL.
//!
//! Several replicas write here at once, so every "exactly one wins" of the
//! trait is one statement that PostgreSQL serialises on the row: an insert
//! that yields to the idempotency index, a claim or a finish whose `WHERE`
//! is re-checked against the row as the winner left it.

use deadpool_postgres::GenericClient;
use hearth_core::{RunStatus, Timestamp};
use tokio_postgres::types::ToSql;

use super::rows::{self, STEP_COLUMNS, col, run_columns, unsigned};
use super::run_insert::{Claim, insert_run, store_run};
use super::{PostgresStore, finish, narrow, shared, storable, storable_opt, wide};
use crate::codec::to_json;
use crate::error::{Result, StoreError};
use crate::records::{
    CreateRunOutcome, NewRun, RunFilter, RunFinish, RunRecord, RunStats, SteerRecord, StepRecord,
    StepStatus, ThreadActivity,
};
use crate::runs::{Finished, RunStore};

/// The conditions every shape of `list_runs` shares, on parameters $1 to
/// $6: the cursor (runs accepted before run $1; none when it is unknown),
/// user, source, model, and the time range. A NULL parameter is no
/// condition.
macro_rules! narrowing {
    () => {
        "($1::text IS NULL OR seq < (SELECT seq FROM runs WHERE run_id = $1)) \
         AND ($2::text IS NULL OR user_key = $2) AND ($3::text IS NULL OR source = $3) \
         AND ($4::text IS NULL OR model = $4) AND ($5::bigint IS NULL OR created_at >= $5) \
         AND ($6::bigint IS NULL OR created_at < $6)"
    };
}

/// The `list_runs` page size when the filter asks for 0.
const DEFAULT_LIMIT: u32 = 50;

/// The largest `list_runs` page.
const MAX_LIMIT: u32 = 1000;

/// The conditional claim: PostgreSQL re-checks the `WHERE` of a row another
/// claimer changed meanwhile, so of concurrent claims exactly one sees the
/// run claimable. A run whose thread has an earlier unfinished run is not
/// claimable: replicas keep each thread's order between them. A run taken
/// from another holder becomes watched (migration 0015): the replica that
/// held it may have a log of it that its end must reach.
async fn claim_run(
    store: &PostgresStore,
    run_id: &str,
    owner: &str,
    lease_until: Timestamp,
    now: Timestamp,
    model: Option<&str>,
    mode: Option<&str>,
) -> Result<Option<RunRecord>> {
    let client = store.client().await?;
    let stmt = client
        .prepare_cached(concat!(
            "UPDATE runs SET status = CASE status WHEN 'awaiting_confirmation' THEN status \
             ELSE 'running' END, lease_owner = $2, lease_until = $3, updated_at = $4, \
             model = COALESCE($5, model), mode = COALESCE(mode, $6), \
             watched = watched OR lease_owner IS DISTINCT FROM $2 \
             WHERE run_id = $1 AND (status = 'queued' \
             OR (status IN ('running', 'awaiting_confirmation') AND (lease_owner IS NULL \
             OR lease_until IS NULL OR lease_until < $4 OR lease_owner = $2))) \
             AND NOT EXISTS (SELECT 1 FROM runs AS earlier WHERE earlier.thread_key = \
             runs.thread_key AND earlier.seq < runs.seq \
             AND earlier.status IN ('queued', 'running', 'awaiting_confirmation')) \
             AND NOT EXISTS (SELECT 1 FROM runs AS held WHERE held.thread_key = \
             runs.thread_key AND held.lease_owner IS NOT NULL AND held.lease_until >= $4 \
             AND held.status IN ('succeeded', 'failed', 'cancelled')) RETURNING ",
            run_columns!()
        ))
        .await?;
    client
        .query_opt(&stmt, &[&run_id, &owner, &lease_until, &now, &model, &mode])
        .await?
        .map(|row| rows::run(&row))
        .transpose()
}

/// A finished model call: its step also writes a usage row.
pub(super) fn counts_in_usage(step: &StepRecord) -> bool {
    step.kind.is_model_call() && step.status != StepStatus::Started
}

/// Appends or replaces one journal step; a finished model call also counts
/// in usage, in the same transaction when `c` is one.
async fn put_step(c: &impl GenericClient, step: &StepRecord) -> Result<()> {
    let tokens = step
        .tokens
        .as_ref()
        .map(|t| to_json(t, "step tokens"))
        .transpose()?;
    let payload = to_json(&step.payload, "step payload")?;
    let stmt = c
        .prepare_cached(
            "INSERT INTO run_steps (run_id, idx, kind, name, status, started_at, finished_at, \
             tokens, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (run_id, idx) DO UPDATE SET kind = excluded.kind, \
             name = excluded.name, status = excluded.status, started_at = excluded.started_at, \
             finished_at = excluded.finished_at, tokens = excluded.tokens, \
             payload = excluded.payload",
        )
        .await?;
    c.execute(
        &stmt,
        &[
            &step.run_id,
            &wide(step.index),
            &step.kind.as_str(),
            &storable(&step.name),
            &step.status.as_str(),
            &step.started_at,
            &step.finished_at,
            &tokens,
            &payload,
        ],
    )
    .await?;
    if counts_in_usage(step) {
        shared::record_llm_call(c, step, false).await?;
    }
    Ok(())
}

/// Ends a run: in one statement when it can be (`finish.rs`; with the ends
/// that arrive with it, `batch_queue.rs`), else in one transaction. The
/// guarded update comes first: it locks the run's row, so a concurrent
/// finish waits for this one and then finds the run terminal (and writes
/// nothing); an answer to one of its confirmations takes the run's row first
/// too, so the two cannot deadlock.
///
/// When the run handed its thread's context back (`keep_context`), the
/// messages its end wrote are added to it with the ids the end gave them,
/// so the thread's next run can start from it without a read.
async fn finish_run(store: &PostgresStore, finish: RunFinish) -> Result<Finished> {
    if finish::fits_one_statement(&finish) {
        let contexts = &store.inner.contexts;
        let said = contexts
            .kept_by(&finish.run_id)
            .then(|| (finish.run_id.clone(), finish.messages.clone()));
        let ended = store.ends().write(finish).await?;
        if let Some((run_id, messages)) = said
            && ended.finished.ended
        {
            contexts.extend(&run_id, messages, ended.said);
        }
        return Ok(ended.finished);
    }
    let finish = &finish;
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    let end = tx
        .prepare_cached(concat!(
            "UPDATE runs SET status = $2, output = $3, error_code = $4, error_message = $5, \
             updated_at = $6, lease_owner = CASE WHEN $10 AND lease_until >= $6 \
             THEN lease_owner END, lease_until = CASE WHEN $10 AND lease_until >= $6 \
             THEN lease_until END, last_event_seq = $7, \
             model = COALESCE($8, model), requested_model = COALESCE($9, requested_model) \
             WHERE run_id = $1 AND status IN ('queued', 'running', 'awaiting_confirmation') \
             RETURNING ",
            run_columns!()
        ))
        .await?;
    let ended = tx
        .query_opt(
            &end,
            &[
                &finish.run_id,
                &finish.status.as_str(),
                &storable_opt(finish.output.as_deref()),
                &storable_opt(finish.error_code.as_deref()),
                &storable_opt(finish.error_message.as_deref()),
                &finish.finished_at,
                &finish.last_event_seq.and_then(|n| i64::try_from(n).ok()),
                &finish.model,
                &finish.requested_model,
                &finish.executed_elsewhere,
            ],
        )
        .await?;
    let Some(ended) = ended else {
        // Dropping the transaction rolls it back; nothing was written.
        return Ok(Finished {
            ended: false,
            next_queued: None,
            run: None,
        });
    };
    let ended = rows::run(&ended)?;
    let thread_key = &ended.thread_key;
    shared::end_of_run(&tx, &finish.run_id, finish.finished_at).await?;
    for step in &finish.steps {
        put_step(&tx, step).await?;
    }
    for message in &finish.messages {
        shared::append_message(&tx, thread_key, &finish.run_id, message, finish.finished_at)
            .await?;
    }
    for run in &finish.follow_ups {
        insert_run(&tx, run, None, None).await?;
    }
    shared::enqueue_outbox(&tx, &finish.outbox, finish.finished_at).await?;
    for observed in &finish.arm_observations {
        shared::apply_arm_delta(&tx, observed).await?;
    }
    tx.commit().await?;
    Ok(Finished {
        ended: true,
        next_queued: None,
        run: Some(ended),
    })
}

/// A steer from an `(id, run_id, text, created_at)` row.
pub(super) fn steer(row: &tokio_postgres::Row) -> Result<SteerRecord> {
    Ok(SteerRecord {
        id: col(row, 0)?,
        run_id: col(row, 1)?,
        text: col(row, 2)?,
        created_at: col(row, 3)?,
    })
}

pub(super) const STEERS: &str =
    "SELECT id, run_id, text, created_at FROM run_steers WHERE run_id = $1 ORDER BY id";

/// The statement reading a run's steps.
pub(super) fn steps_sql() -> String {
    format!("SELECT {STEP_COLUMNS} FROM run_steps WHERE run_id = $1 ORDER BY idx")
}

/// Runs of one `list_runs` statement, with its parameters.
async fn collect_runs(
    client: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<RunRecord>> {
    let stmt = client.prepare_cached(sql).await?;
    client
        .query(&stmt, params)
        .await?
        .iter()
        .map(rows::run)
        .collect()
}

/// `run_stats`: three independent reads, pipelined on one connection (one
/// round trip instead of three).
async fn run_stats(
    store: &PostgresStore,
    scope: &str,
    since: Timestamp,
    top: u32,
) -> Result<RunStats> {
    let client = store.client().await?;
    let (by_status, latency, tools) = tokio::try_join!(
        client.prepare_cached(
            "SELECT status, count(*) FROM runs WHERE scope = $1 AND created_at >= $2 \
             GROUP BY status",
        ),
        // Nearest rank, as on SQLite: percentile_disc picks the smallest
        // value with at least p of the finished runs at or below it.
        client.prepare_cached(
            "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY updated_at - created_at), \
             percentile_disc(0.95) WITHIN GROUP (ORDER BY updated_at - created_at) \
             FROM runs WHERE scope = $1 AND created_at >= $2 \
             AND status IN ('succeeded', 'failed', 'cancelled')",
        ),
        client.prepare_cached(
            "SELECT s.name, count(*) AS calls FROM run_steps s JOIN runs r ON r.run_id = s.run_id \
             WHERE r.scope = $1 AND r.created_at >= $2 AND s.kind = 'tool' \
             GROUP BY s.name ORDER BY calls DESC, s.name LIMIT $3",
        ),
    )?;
    let top = wide(top);
    let window: [&(dyn ToSql + Sync); 2] = [&scope, &since];
    let ranked: [&(dyn ToSql + Sync); 3] = [&scope, &since, &top];
    let (counted, latency, tools) = tokio::try_join!(
        client.query(&by_status, &window),
        client.query_one(&latency, &window),
        client.query(&tools, &ranked),
    )?;
    let mut stats = RunStats::default();
    for row in &counted {
        let status: String = col(row, 0)?;
        let status = RunStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown run status {status:?}")))?;
        stats.by_status.push((status, unsigned(row, 1)?));
    }
    stats
        .by_status
        .sort_by_key(|(status, _)| RunStatus::ALL.iter().position(|s| s == status));
    stats.latency_p50_ms = col::<Option<i64>>(&latency, 0)?.map(narrow);
    stats.latency_p95_ms = col::<Option<i64>>(&latency, 1)?.map(narrow);
    for row in &tools {
        stats.top_tools.push((col(row, 0)?, unsigned(row, 1)?));
    }
    Ok(stats)
}

#[async_trait::async_trait]
impl RunStore for PostgresStore {
    async fn create_run(&self, run: NewRun) -> Result<CreateRunOutcome> {
        Ok(store_run(self, run, None).await?.0)
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE run_id = $1"
            ))
            .await?;
        client
            .query_opt(&stmt, &[&run_id])
            .await?
            .map(|row| rows::run(&row))
            .transpose()
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let limit = wide(match filter.limit {
            0 => DEFAULT_LIMIT,
            n => n.min(MAX_LIMIT),
        });
        let (before, user, source, model) = (
            filter.before.as_deref(),
            filter.user_key.as_deref(),
            filter.source.as_deref(),
            filter.model.as_deref(),
        );
        let (since, until) = (filter.since, filter.until);
        let client = self.client().await?;
        // One statement per shape of the thread and status filters, so each
        // can use its own index.
        match (
            filter.thread_key.as_deref(),
            filter.status.map(RunStatus::as_str),
        ) {
            // One user's runs: the `runs_user_seq` index, newest first.
            (None, None) if user.is_some() => {
                collect_runs(
                    &client,
                    concat!(
                        "SELECT ",
                        run_columns!(),
                        " FROM runs WHERE user_key = $2 AND ",
                        narrowing!(),
                        " ORDER BY seq DESC LIMIT $7"
                    ),
                    &[&before, &user, &source, &model, &since, &until, &limit],
                )
                .await
            }
            (None, None) => {
                collect_runs(
                    &client,
                    concat!(
                        "SELECT ",
                        run_columns!(),
                        " FROM runs WHERE ",
                        narrowing!(),
                        " ORDER BY seq DESC LIMIT $7"
                    ),
                    &[&before, &user, &source, &model, &since, &until, &limit],
                )
                .await
            }
            (Some(thread), None) => {
                collect_runs(
                    &client,
                    concat!(
                        "SELECT ",
                        run_columns!(),
                        " FROM runs WHERE thread_key = $7 AND ",
                        narrowing!(),
                        " ORDER BY seq DESC LIMIT $8"
                    ),
                    &[
                        &before, &user, &source, &model, &since, &until, &thread, &limit,
                    ],
                )
                .await
            }
            (None, Some(status)) => {
                collect_runs(
                    &client,
                    concat!(
                        "SELECT ",
                        run_columns!(),
                        " FROM runs WHERE status = $7 AND ",
                        narrowing!(),
                        " ORDER BY seq DESC LIMIT $8"
                    ),
                    &[
                        &before, &user, &source, &model, &since, &until, &status, &limit,
                    ],
                )
                .await
            }
            (Some(thread), Some(status)) => {
                collect_runs(
                    &client,
                    concat!(
                        "SELECT ",
                        run_columns!(),
                        " FROM runs WHERE thread_key = $7 AND status = $8 AND ",
                        narrowing!(),
                        " ORDER BY seq DESC LIMIT $9"
                    ),
                    &[
                        &before, &user, &source, &model, &since, &until, &thread, &status, &limit,
                    ],
                )
                .await
            }
        }
    }

    async fn thread_has_other_users(&self, thread_key: &str, user_key: &str) -> Result<bool> {
        let client = self.client().await?;
        // Two seeks of `runs_thread_user`: a key below and one above.
        let stmt = client
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM runs WHERE thread_key = $1 AND user_key < $2) \
                 OR EXISTS (SELECT 1 FROM runs WHERE thread_key = $1 AND user_key > $2)",
            )
            .await?;
        let row = client.query_one(&stmt, &[&thread_key, &user_key]).await?;
        col(&row, 0)
    }

    async fn list_threads(&self, limit: u32) -> Result<Vec<ThreadActivity>> {
        let limit = limit.clamp(1, MAX_LIMIT);
        let window = i64::from(limit) * i64::from(crate::runs::RECENT_RUNS_PER_THREAD);
        let client = self.client().await?;
        // First among the newest runs only (see `RECENT_RUNS_PER_THREAD`),
        // then, for the threads found, their whole count.
        let recent = client
            .prepare_cached(
                "SELECT r.thread_key, r.created_at \
                 FROM (SELECT thread_key, max(seq) AS last FROM runs \
                 WHERE seq > (SELECT coalesce(max(seq), 0) FROM runs) - $2 \
                 GROUP BY thread_key) g \
                 JOIN runs r ON r.seq = g.last ORDER BY g.last DESC LIMIT $1",
            )
            .await?;
        let mut rows = client.query(&recent, &[&wide(limit), &window]).await?;
        if rows.len() != limit as usize {
            // Fewer threads than asked for in the window: group them all.
            let all = client
                .prepare_cached(
                    "SELECT r.thread_key, r.created_at \
                     FROM (SELECT thread_key, max(seq) AS last FROM runs GROUP BY thread_key) g \
                     JOIN runs r ON r.seq = g.last ORDER BY g.last DESC LIMIT $1",
                )
                .await?;
            rows = client.query(&all, &[&wide(limit)]).await?;
        }
        let keys: Vec<String> = rows.iter().map(|row| col(row, 0)).collect::<Result<_>>()?;
        // Reads only the (thread_key, seq) index.
        let counts = client
            .prepare_cached(
                "SELECT thread_key, count(*) FROM runs WHERE thread_key = ANY($1) \
                 GROUP BY thread_key",
            )
            .await?;
        let mut count_of = std::collections::HashMap::new();
        for row in client.query(&counts, &[&keys]).await? {
            let key: String = col(&row, 0)?;
            count_of.insert(key, unsigned(&row, 1)?);
        }
        rows.iter()
            .map(|row| {
                let thread_key: String = col(row, 0)?;
                Ok(ThreadActivity {
                    runs: count_of.get(&thread_key).copied().unwrap_or(0),
                    thread_key,
                    last_run_at: col(row, 1)?,
                })
            })
            .collect()
    }

    async fn run_stats(&self, scope: &str, since: Timestamp, top: u32) -> Result<RunStats> {
        run_stats(self, scope, since, top).await
    }

    async fn unfinished_runs(&self) -> Result<Vec<RunRecord>> {
        let client = self.client().await?;
        collect_runs(
            &client,
            concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE status IN ('queued', 'running', 'awaiting_confirmation') \
                 ORDER BY seq"
            ),
            &[],
        )
        .await
    }

    async fn child_runs(&self, parent_run_id: &str) -> Result<Vec<RunRecord>> {
        let client = self.client().await?;
        collect_runs(
            &client,
            concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE parent_run_id = $1 ORDER BY seq"
            ),
            &[&parent_run_id],
        )
        .await
    }

    /// One statement: the run and its children by their two indexes.
    async fn run_with_children(&self, run_id: &str) -> Result<Option<(RunRecord, Vec<RunRecord>)>> {
        let client = self.client().await?;
        let family = collect_runs(
            &client,
            concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE run_id = $1 OR parent_run_id = $1 ORDER BY seq"
            ),
            &[&run_id],
        )
        .await?;
        let (run, children): (Vec<_>, Vec<_>) =
            family.into_iter().partition(|r| r.run_id == run_id);
        Ok(run.into_iter().next().map(|run| (run, children)))
    }

    async fn claim_run(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<RunRecord>> {
        claim_run(self, run_id, owner, lease_until, now, None, None).await
    }

    async fn claim_run_with_model(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
        model: &str,
        mode: Option<&str>,
    ) -> Result<Option<RunRecord>> {
        claim_run(self, run_id, owner, lease_until, now, Some(model), mode).await
    }

    /// One insert that stores the run already claimed (what `claim_run`
    /// would make of a new queued run: running, leased, its model, updated
    /// at its creation), so one insert and one commit; a twin found by
    /// its idempotency key is returned unclaimed.
    async fn create_claimed_run(
        &self,
        run: NewRun,
        owner: &str,
        lease_until: Timestamp,
        model: &str,
        mode: Option<&str>,
    ) -> Result<CreateRunOutcome> {
        let (outcome, _) = self
            .create_claimed_run_seeing_history(run, owner, lease_until, model, mode)
            .await?;
        Ok(outcome)
    }

    async fn create_claimed_run_seeing_history(
        &self,
        run: NewRun,
        owner: &str,
        lease_until: Timestamp,
        model: &str,
        mode: Option<&str>,
    ) -> Result<(CreateRunOutcome, Option<crate::HistorySeen>)> {
        let claim = Claim {
            owner,
            lease_until,
            model,
            mode,
            assumes_defaults: false,
        };
        store_run(self, run, Some(&claim)).await
    }

    async fn set_run_model(&self, run_id: &str, model: &str) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("UPDATE runs SET model = $2 WHERE run_id = $1")
            .await?;
        client.execute(&stmt, &[&run_id, &model]).await?;
        Ok(())
    }

    async fn release_foreign_leases(&self, owner: &str) -> Result<u64> {
        let client = self.client().await?;
        Ok(client
            .execute(
                "UPDATE runs SET lease_owner = NULL, lease_until = NULL \
                 WHERE lease_owner IS NOT NULL AND lease_owner != $1 \
                 AND status IN ('queued', 'running', 'awaiting_confirmation')",
                &[&owner],
            )
            .await?)
    }

    async fn renew_leases(
        &self,
        owner: &str,
        run_ids: &[String],
        lease_until: Timestamp,
    ) -> Result<u64> {
        if run_ids.is_empty() {
            return Ok(0);
        }
        let client = self.client().await?;
        // The ids travel as one array, so one cached statement serves every
        // length.
        let stmt = client
            .prepare_cached(
                "UPDATE runs SET lease_until = $3 WHERE lease_owner = $1 \
                 AND run_id = ANY($2) AND status IN ('running', 'awaiting_confirmation')",
            )
            .await?;
        Ok(client
            .execute(&stmt, &[&owner, &run_ids, &lease_until])
            .await?)
    }

    async fn put_step(&self, step: StepRecord) -> Result<()> {
        let mut client = self.client().await?;
        if !counts_in_usage(&step) {
            // One statement: no transaction to begin and commit.
            return put_step(&client, &step).await;
        }
        // The step and its usage row commit together.
        let tx = client.transaction().await?;
        put_step(&tx, &step).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn steps(&self, run_id: &str) -> Result<Vec<StepRecord>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(&steps_sql()).await?;
        client
            .query(&stmt, &[&run_id])
            .await?
            .iter()
            .map(rows::step)
            .collect()
    }

    async fn journal_of_run(&self, run_id: &str) -> Result<(Vec<StepRecord>, Vec<SteerRecord>)> {
        let client = self.client().await?;
        let steps_sql = steps_sql();
        let (steps, steers) = tokio::try_join!(
            client.prepare_cached(&steps_sql),
            client.prepare_cached(STEERS)
        )?;
        // Both reads pipelined on one connection: one round trip.
        let of_run: [&(dyn ToSql + Sync); 1] = [&run_id];
        let (steps, steers) = tokio::try_join!(
            client.query(&steps, &of_run),
            client.query(&steers, &of_run)
        )?;
        Ok((
            steps.iter().map(rows::step).collect::<Result<_>>()?,
            steers.iter().map(steer).collect::<Result<_>>()?,
        ))
    }

    async fn add_steer(&self, run_id: &str, text: &str, at: Timestamp) -> Result<SteerRecord> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO run_steers (run_id, text, created_at) VALUES ($1, $2, $3) \
                 RETURNING id",
            )
            .await?;
        let row = client
            .query_one(&stmt, &[&run_id, &storable(text), &at])
            .await?;
        Ok(SteerRecord {
            id: col(&row, 0)?,
            run_id: run_id.to_owned(),
            text: text.to_owned(),
            created_at: at,
        })
    }

    async fn steers(&self, run_id: &str) -> Result<Vec<SteerRecord>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(STEERS).await?;
        client
            .query(&stmt, &[&run_id])
            .await?
            .iter()
            .map(steer)
            .collect()
    }

    async fn finish_run(&self, finish: RunFinish) -> Result<bool> {
        Ok(finish_run(self, finish).await?.ended)
    }

    async fn finish_run_seeing_next(&self, finish: RunFinish) -> Result<(bool, Option<bool>)> {
        let finished = finish_run(self, finish).await?;
        Ok((finished.ended, finished.next_queued))
    }

    async fn finish_run_returning(&self, finish: RunFinish) -> Result<Finished> {
        finish_run(self, finish).await
    }
}
