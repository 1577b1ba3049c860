//! Runs, their leases, steps and steers on SQLite.

use hearth_core::{RunStatus, Timestamp};
use rusqlite::{OptionalExtension, Params, Statement, params};

use super::SqliteStore;
use super::db::Db;
use super::rows::{self, run_columns, to_json};
use super::threads::append_message;
use super::usage::record_llm_call;
use crate::error::{Result, StoreError};
use crate::records::{
    CreateRunOutcome, NewRun, RunFilter, RunFinish, RunRecord, RunStats, SteerRecord, StepRecord,
    StepStatus, ThreadActivity,
};
use crate::runs::RunStore;

/// The `list_runs` page size when the filter asks for 0.
const DEFAULT_LIMIT: u32 = 50;

/// The largest `list_runs` page.
const MAX_LIMIT: u32 = 1000;

fn create_run(db: &mut Db<'_>, run: NewRun) -> Result<CreateRunOutcome> {
    let roles = to_json(&run.roles, "run roles")?;
    let inserted = db
        .stmt(
            "INSERT INTO runs (run_id, thread_key, user_key, source, input, idempotency_key, \
             status, created_at, updated_at, scope, roles, parent_run_id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', ?7, ?7, ?8, ?9, ?10) \
             ON CONFLICT (thread_key, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
        )?
        .execute(params![
            run.run_id,
            run.thread_key,
            run.user_key,
            run.source,
            run.input,
            run.idempotency_key,
            run.created_at,
            run.scope,
            roles,
            run.parent_run_id
        ])?;
    if inserted == 1 {
        let seq = db.conn().last_insert_rowid();
        return Ok(CreateRunOutcome::Created(RunRecord {
            run_id: run.run_id,
            seq,
            thread_key: run.thread_key,
            user_key: run.user_key,
            source: run.source,
            input: run.input,
            idempotency_key: run.idempotency_key,
            status: RunStatus::Queued,
            output: None,
            error_code: None,
            error_message: None,
            model: None,
            requested_model: None,
            mode: None,
            lease_owner: None,
            lease_until: None,
            created_at: run.created_at,
            updated_at: run.created_at,
            last_event_seq: None,
            scope: run.scope,
            roles: run.roles,
            parent_run_id: run.parent_run_id,
        }));
    }
    let existing = db
        .stmt(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE thread_key = ?1 AND idempotency_key = ?2"
        ))?
        .query_row(params![run.thread_key, run.idempotency_key], |row| {
            Ok(rows::run(row))
        })
        .optional()?
        .transpose()?;
    existing
        .map(CreateRunOutcome::Existing)
        .ok_or_else(|| StoreError::Corrupt("run insert ignored without a conflicting run".into()))
}

fn claim_run(
    db: &mut Db<'_>,
    run_id: &str,
    owner: &str,
    lease_until: Timestamp,
    now: Timestamp,
    model: Option<&str>,
    mode: Option<&str>,
) -> Result<Option<RunRecord>> {
    // One conditional UPDATE: the writer runs writes one at a time (and a
    // server database would lock the row), so of concurrent claims exactly
    // one sees the run claimable.
    db.stmt(concat!(
        "UPDATE runs SET status = CASE status WHEN 'awaiting_confirmation' THEN status \
         ELSE 'running' END, lease_owner = ?2, lease_until = ?3, updated_at = ?4, \
         model = COALESCE(?5, model), mode = COALESCE(mode, ?6) \
         WHERE run_id = ?1 AND (status = 'queued' \
         OR (status IN ('running', 'awaiting_confirmation') AND (lease_owner IS NULL \
         OR lease_until IS NULL OR lease_until < ?4 OR lease_owner = ?2))) RETURNING ",
        run_columns!()
    ))?
    .query_row(
        params![run_id, owner, lease_until, now, model, mode],
        |row| Ok(rows::run(row)),
    )
    .optional()?
    .transpose()
}

fn set_run_model(db: &mut Db<'_>, run_id: &str, model: &str) -> Result<()> {
    db.stmt("UPDATE runs SET model = ?2 WHERE run_id = ?1")?
        .execute(params![run_id, model])?;
    Ok(())
}

fn release_foreign_leases(db: &mut Db<'_>, owner: &str) -> Result<u64> {
    let changed = db
        .stmt(
            "UPDATE runs SET lease_owner = NULL, lease_until = NULL \
             WHERE lease_owner IS NOT NULL AND lease_owner != ?1 \
             AND status IN ('queued', 'running', 'awaiting_confirmation')",
        )?
        .execute(params![owner])?;
    Ok(changed as u64)
}

fn renew_leases(
    db: &mut Db<'_>,
    owner: &str,
    run_ids: &[String],
    lease_until: Timestamp,
) -> Result<u64> {
    if run_ids.is_empty() {
        return Ok(0);
    }
    // The ids travel as a JSON array so that one cached statement serves
    // every length.
    let ids = to_json(run_ids, "run ids")?;
    let changed = db
        .stmt(
            "UPDATE runs SET lease_until = ?3 WHERE lease_owner = ?1 \
             AND run_id IN (SELECT value FROM json_each(?2)) \
             AND status IN ('running', 'awaiting_confirmation')",
        )?
        .execute(params![owner, ids, lease_until])?;
    Ok(changed as u64)
}

fn put_step(db: &mut Db<'_>, step: &StepRecord) -> Result<()> {
    let tokens = step
        .tokens
        .as_ref()
        .map(|t| to_json(t, "step tokens"))
        .transpose()?;
    let payload = to_json(&step.payload, "step payload")?;
    db.stmt(
        "INSERT INTO run_steps (run_id, idx, kind, name, status, started_at, finished_at, tokens, \
         payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (run_id, idx) DO UPDATE \
         SET kind = excluded.kind, name = excluded.name, status = excluded.status, \
         started_at = excluded.started_at, finished_at = excluded.finished_at, \
         tokens = excluded.tokens, payload = excluded.payload",
    )?
    .execute(params![
        step.run_id,
        step.index,
        step.kind.as_str(),
        step.name,
        step.status.as_str(),
        step.started_at,
        step.finished_at,
        tokens,
        payload
    ])?;
    if step.kind.is_model_call() && step.status != StepStatus::Started {
        record_llm_call(db, step)?;
    }
    Ok(())
}

fn finish_run(db: &mut Db<'_>, finish: &RunFinish) -> Result<bool> {
    let thread_key: Option<String> = db
        .stmt(
            "UPDATE runs SET status = ?2, output = ?3, error_code = ?4, error_message = ?5, \
             updated_at = ?6, lease_owner = NULL, lease_until = NULL, last_event_seq = ?7, \
             model = COALESCE(?8, model), requested_model = COALESCE(?9, requested_model) \
             WHERE run_id = ?1 AND status NOT IN ('succeeded', 'failed', 'cancelled') \
             RETURNING thread_key",
        )?
        .query_row(
            params![
                finish.run_id,
                finish.status.as_str(),
                finish.output,
                finish.error_code,
                finish.error_message,
                finish.finished_at,
                finish.last_event_seq.and_then(|n| i64::try_from(n).ok()),
                finish.model,
                finish.requested_model
            ],
            |row| row.get(0),
        )
        .optional()?;
    let Some(thread_key) = thread_key else {
        return Ok(false);
    };
    super::confirmations::end_of_run(db, &finish.run_id, finish.finished_at)?;
    for step in &finish.steps {
        put_step(db, step)?;
    }
    for message in &finish.messages {
        append_message(db, &thread_key, &finish.run_id, message, finish.finished_at)?;
    }
    for run in &finish.follow_ups {
        create_run(db, run.clone())?;
    }
    super::outbox::enqueue(db, &finish.outbox, finish.finished_at)?;
    for observed in &finish.arm_observations {
        super::router::apply(db, observed)?;
    }
    Ok(true)
}

fn add_steer(db: &mut Db<'_>, run_id: &str, text: &str, at: Timestamp) -> Result<SteerRecord> {
    let id: i64 = db
        .stmt("INSERT INTO run_steers (run_id, text, created_at) VALUES (?1, ?2, ?3) RETURNING id")?
        .query_row(params![run_id, text, at], |row| row.get(0))?;
    Ok(SteerRecord {
        id,
        run_id: run_id.to_owned(),
        text: text.to_owned(),
        created_at: at,
    })
}

fn steers(db: &mut Db<'_>, run_id: &str) -> Result<Vec<SteerRecord>> {
    let stmt = db.stmt(
        "SELECT id, run_id, text, created_at FROM run_steers WHERE run_id = ?1 ORDER BY id",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query(params![run_id])?;
    while let Some(row) = found.next()? {
        out.push(SteerRecord {
            id: row.get(0)?,
            run_id: row.get(1)?,
            text: row.get(2)?,
            created_at: row.get(3)?,
        });
    }
    Ok(out)
}

fn get_run(db: &mut Db<'_>, run_id: &str) -> Result<Option<RunRecord>> {
    db.stmt(concat!(
        "SELECT ",
        run_columns!(),
        " FROM runs WHERE run_id = ?1"
    ))?
    .query_row(params![run_id], |row| Ok(rows::run(row)))
    .optional()?
    .transpose()
}

/// The conditions every shape of `list_runs` shares, on parameters ?1 to
/// ?6: the cursor (runs accepted before run ?1; none when it is unknown),
/// user, source, model, and the time range. A NULL parameter is no
/// condition.
macro_rules! narrowing {
    () => {
        "(?1 IS NULL OR seq < (SELECT seq FROM runs WHERE run_id = ?1)) \
         AND (?2 IS NULL OR user_key = ?2) AND (?3 IS NULL OR source = ?3) \
         AND (?4 IS NULL OR model = ?4) AND (?5 IS NULL OR created_at >= ?5) \
         AND (?6 IS NULL OR created_at < ?6)"
    };
}

fn list_runs(db: &mut Db<'_>, filter: &RunFilter) -> Result<Vec<RunRecord>> {
    let limit = match filter.limit {
        0 => DEFAULT_LIMIT,
        n => n.min(MAX_LIMIT),
    };
    let (before, user, source, model) = (
        filter.before.as_deref(),
        filter.user_key.as_deref(),
        filter.source.as_deref(),
        filter.model.as_deref(),
    );
    let (since, until) = (filter.since, filter.until);
    // One statement per shape of the thread and status filters, so each can
    // use its own index.
    match (
        filter.thread_key.as_deref(),
        filter.status.map(RunStatus::as_str),
    ) {
        // One user's runs: the `runs_user_seq` index, newest first.
        (None, None) if user.is_some() => collect_runs(
            db.stmt(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE user_key = ?2 AND ",
                narrowing!(),
                " ORDER BY seq DESC LIMIT ?7"
            ))?,
            params![before, user, source, model, since, until, limit],
        ),
        (None, None) => collect_runs(
            db.stmt(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE ",
                narrowing!(),
                " ORDER BY seq DESC LIMIT ?7"
            ))?,
            params![before, user, source, model, since, until, limit],
        ),
        (Some(thread), None) => collect_runs(
            db.stmt(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE thread_key = ?7 AND ",
                narrowing!(),
                " ORDER BY seq DESC LIMIT ?8"
            ))?,
            params![before, user, source, model, since, until, thread, limit],
        ),
        (None, Some(status)) => collect_runs(
            db.stmt(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE status = ?7 AND ",
                narrowing!(),
                " ORDER BY seq DESC LIMIT ?8"
            ))?,
            params![before, user, source, model, since, until, status, limit],
        ),
        (Some(thread), Some(status)) => collect_runs(
            db.stmt(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE thread_key = ?7 AND status = ?8 AND ",
                narrowing!(),
                " ORDER BY seq DESC LIMIT ?9"
            ))?,
            params![
                before, user, source, model, since, until, thread, status, limit
            ],
        ),
    }
}

/// Whether a run of a user other than `user_key` is on `thread_key`: two
/// seeks of the `runs_thread_user` index (a key below and one above).
fn thread_has_other_users(db: &mut Db<'_>, thread_key: &str, user_key: &str) -> Result<bool> {
    let found = db
        .stmt(
            "SELECT EXISTS (SELECT 1 FROM runs WHERE thread_key = ?1 AND user_key < ?2) \
             OR EXISTS (SELECT 1 FROM runs WHERE thread_key = ?1 AND user_key > ?2)",
        )?
        .query_row(params![thread_key, user_key], |row| row.get::<_, bool>(0))?;
    Ok(found)
}

fn unfinished_runs(db: &mut Db<'_>) -> Result<Vec<RunRecord>> {
    collect_runs(
        db.stmt(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE status IN ('queued', 'running', 'awaiting_confirmation') ORDER BY seq"
        ))?,
        [],
    )
}

fn child_runs(db: &mut Db<'_>, parent_run_id: &str) -> Result<Vec<RunRecord>> {
    collect_runs(
        db.stmt(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE parent_run_id = ?1 ORDER BY seq"
        ))?,
        params![parent_run_id],
    )
}

/// The finished runs' accept-to-end times, as an ordered column to pick
/// percentiles from.
const FINISHED_LATENCY: &str = "SELECT updated_at - created_at AS ms FROM runs \
     WHERE scope = ?1 AND created_at >= ?2 AND status IN ('succeeded', 'failed', 'cancelled') \
     ORDER BY ms LIMIT 1 OFFSET ?3";

fn run_stats(db: &mut Db<'_>, scope: &str, since: Timestamp, top: u32) -> Result<RunStats> {
    let mut stats = RunStats::default();
    let mut counted = Vec::new();
    {
        let stmt = db.stmt(
            "SELECT status, count(*) FROM runs WHERE scope = ?1 AND created_at >= ?2 \
             GROUP BY status",
        )?;
        let mut found = stmt.query(params![scope, since])?;
        while let Some(row) = found.next()? {
            let status: String = rows::col(row, 0)?;
            let status = RunStatus::parse(&status)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown run status {status:?}")))?;
            counted.push((status, rows::count(row, 1)?));
        }
    }
    stats.by_status = RunStatus::ALL
        .into_iter()
        .filter_map(|st| counted.iter().find(|(s, _)| *s == st).copied())
        .collect();
    let finished: u64 = stats
        .by_status
        .iter()
        .filter(|(s, _)| s.is_terminal())
        .map(|(_, n)| n)
        .sum();
    let mut percentile = |p: u64| -> Result<Option<u64>> {
        if finished == 0 {
            return Ok(None);
        }
        // Nearest rank: the smallest value with at least p% at or below it.
        let rank = i64::try_from((finished * p).div_ceil(100).max(1) - 1)
            .map_err(|_| StoreError::Corrupt(format!("{finished} finished runs")))?;
        let ms: Option<i64> = db
            .stmt(FINISHED_LATENCY)?
            .query_row(params![scope, since, rank], |row| row.get(0))
            .optional()?;
        Ok(ms.map(|ms| u64::try_from(ms).unwrap_or(0)))
    };
    stats.latency_p50_ms = percentile(50)?;
    stats.latency_p95_ms = percentile(95)?;
    let stmt = db.stmt(
        "SELECT s.name, count(*) AS calls FROM run_steps s JOIN runs r ON r.run_id = s.run_id \
         WHERE r.scope = ?1 AND r.created_at >= ?2 AND s.kind = 'tool' \
         GROUP BY s.name ORDER BY calls DESC, s.name LIMIT ?3",
    )?;
    let mut found = stmt.query(params![scope, since, top])?;
    while let Some(row) = found.next()? {
        stats
            .top_tools
            .push((rows::col(row, 0)?, rows::count(row, 1)?));
    }
    Ok(stats)
}

fn list_threads(db: &mut Db<'_>, limit: u32) -> Result<Vec<ThreadActivity>> {
    let limit = limit.clamp(1, MAX_LIMIT);
    // First among the newest runs only (see `RECENT_RUNS_PER_THREAD`),
    // then, for the threads found, their whole count.
    let window = i64::from(limit) * i64::from(crate::runs::RECENT_RUNS_PER_THREAD);
    let recent = newest_threads(
        db,
        "SELECT r.thread_key, r.created_at \
         FROM (SELECT thread_key, MAX(seq) AS last FROM runs \
               WHERE seq > (SELECT COALESCE(MAX(seq), 0) FROM runs) - ?2 GROUP BY thread_key) g \
         JOIN runs r ON r.seq = g.last ORDER BY g.last DESC LIMIT ?1",
        params![limit, window],
    )?;
    let found = if recent.len() == limit as usize {
        recent
    } else {
        // Fewer threads than asked for in the window: group them all.
        newest_threads(
            db,
            "SELECT r.thread_key, r.created_at \
             FROM (SELECT thread_key, MAX(seq) AS last FROM runs GROUP BY thread_key) g \
             JOIN runs r ON r.seq = g.last ORDER BY g.last DESC LIMIT ?1",
            params![limit],
        )?
    };
    let mut out = Vec::with_capacity(found.len());
    for (thread_key, last_run_at) in found {
        // Reads only the (thread_key, seq) index.
        let stmt = db.stmt("SELECT COUNT(*) FROM runs WHERE thread_key = ?1")?;
        let runs: i64 = stmt.query_row(params![thread_key], |row| row.get(0))?;
        out.push(ThreadActivity {
            thread_key,
            runs: u64::try_from(runs).unwrap_or(0),
            last_run_at,
        });
    }
    Ok(out)
}

/// `(thread_key, created_at of its newest run)` rows of `sql`.
fn newest_threads(
    db: &mut Db<'_>,
    sql: &'static str,
    params: impl Params,
) -> Result<Vec<(String, Timestamp)>> {
    let stmt = db.stmt(sql)?;
    let mut out = Vec::new();
    let mut found = stmt.query(params)?;
    while let Some(row) = found.next()? {
        out.push((row.get(0)?, row.get(1)?));
    }
    Ok(out)
}

fn collect_runs(stmt: &mut Statement<'_>, params: impl Params) -> Result<Vec<RunRecord>> {
    let mut out = Vec::new();
    let mut found = stmt.query(params)?;
    while let Some(row) = found.next()? {
        out.push(rows::run(row)?);
    }
    Ok(out)
}

fn steps(db: &mut Db<'_>, run_id: &str) -> Result<Vec<StepRecord>> {
    let stmt = db.stmt(concat!(
        "SELECT run_id, idx, kind, name, status, started_at, finished_at, tokens, payload ",
        "FROM run_steps WHERE run_id = ?1 ORDER BY idx"
    ))?;
    let mut out = Vec::new();
    let mut found = stmt.query(params![run_id])?;
    while let Some(row) = found.next()? {
        out.push(rows::step(row)?);
    }
    Ok(out)
}

#[async_trait::async_trait]
impl RunStore for SqliteStore {
    async fn create_run(&self, run: NewRun) -> Result<CreateRunOutcome> {
        self.write(move |db| create_run(db, run)).await
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        let run_id = run_id.to_owned();
        self.read(move |db| get_run(db, &run_id)).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let filter = filter.clone();
        self.read(move |db| list_runs(db, &filter)).await
    }

    async fn list_threads(&self, limit: u32) -> Result<Vec<ThreadActivity>> {
        self.read(move |db| list_threads(db, limit)).await
    }

    async fn unfinished_runs(&self) -> Result<Vec<RunRecord>> {
        self.read(unfinished_runs).await
    }

    async fn child_runs(&self, parent_run_id: &str) -> Result<Vec<RunRecord>> {
        let parent_run_id = parent_run_id.to_owned();
        self.read(move |db| child_runs(db, &parent_run_id)).await
    }

    async fn thread_has_other_users(&self, thread_key: &str, user_key: &str) -> Result<bool> {
        let (thread_key, user_key) = (thread_key.to_owned(), user_key.to_owned());
        self.read(move |db| thread_has_other_users(db, &thread_key, &user_key))
            .await
    }

    async fn run_stats(&self, scope: &str, since: Timestamp, top: u32) -> Result<RunStats> {
        let scope = scope.to_owned();
        self.read(move |db| run_stats(db, &scope, since, top)).await
    }

    async fn claim_run(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<RunRecord>> {
        let (run_id, owner) = (run_id.to_owned(), owner.to_owned());
        // Lost in a power cut, a claim leaves the run to be claimed again.
        self.write_lazy(move |db| claim_run(db, &run_id, &owner, lease_until, now, None, None))
            .await
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
        let (run_id, owner, model) = (run_id.to_owned(), owner.to_owned(), model.to_owned());
        let mode = mode.map(str::to_owned);
        self.write_lazy(move |db| {
            claim_run(
                db,
                &run_id,
                &owner,
                lease_until,
                now,
                Some(&model),
                mode.as_deref(),
            )
        })
        .await
    }

    async fn create_claimed_run(
        &self,
        run: NewRun,
        owner: &str,
        lease_until: Timestamp,
        model: &str,
        mode: Option<&str>,
    ) -> Result<CreateRunOutcome> {
        let (owner, model) = (owner.to_owned(), model.to_owned());
        let mode = mode.map(str::to_owned);
        self.write(move |db| {
            let now = run.created_at;
            let created = match create_run(db, run)? {
                CreateRunOutcome::Created(run) => run,
                existing @ CreateRunOutcome::Existing(_) => return Ok(existing),
            };
            let claimed = claim_run(
                db,
                &created.run_id,
                &owner,
                lease_until,
                now,
                Some(&model),
                mode.as_deref(),
            )?;
            Ok(CreateRunOutcome::Created(claimed.unwrap_or(created)))
        })
        .await
    }

    async fn set_run_model(&self, run_id: &str, model: &str) -> Result<()> {
        let (run_id, model) = (run_id.to_owned(), model.to_owned());
        self.write_lazy(move |db| set_run_model(db, &run_id, &model))
            .await
    }

    async fn release_foreign_leases(&self, owner: &str) -> Result<u64> {
        let owner = owner.to_owned();
        self.write(move |db| release_foreign_leases(db, &owner))
            .await
    }

    async fn renew_leases(
        &self,
        owner: &str,
        run_ids: &[String],
        lease_until: Timestamp,
    ) -> Result<u64> {
        let (owner, run_ids) = (owner.to_owned(), run_ids.to_vec());
        self.write(move |db| renew_leases(db, &owner, &run_ids, lease_until))
            .await
    }

    async fn put_step(&self, step: StepRecord) -> Result<()> {
        self.write(move |db| put_step(db, &step)).await
    }

    async fn steps(&self, run_id: &str) -> Result<Vec<StepRecord>> {
        let run_id = run_id.to_owned();
        self.read(move |db| steps(db, &run_id)).await
    }

    async fn journal_of_run(&self, run_id: &str) -> Result<(Vec<StepRecord>, Vec<SteerRecord>)> {
        let run_id = run_id.to_owned();
        // One reader hop instead of two.
        self.read(move |db| Ok((steps(db, &run_id)?, steers(db, &run_id)?)))
            .await
    }

    async fn add_steer(&self, run_id: &str, text: &str, at: Timestamp) -> Result<SteerRecord> {
        let (run_id, text) = (run_id.to_owned(), text.to_owned());
        self.write(move |db| add_steer(db, &run_id, &text, at))
            .await
    }

    async fn steers(&self, run_id: &str) -> Result<Vec<SteerRecord>> {
        let run_id = run_id.to_owned();
        self.read(move |db| steers(db, &run_id)).await
    }

    async fn finish_run(&self, finish: RunFinish) -> Result<bool> {
        self.write(move |db| finish_run(db, &finish)).await
    }
}

#[cfg(test)]
mod plans {
    use rusqlite::Connection;

    use crate::sqlite::rows::run_columns;

    /// How SQLite plans `sql` on a migrated database, one line per step.
    fn plan(sql: &str) -> String {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::sqlite::migrations::migrate(&mut conn).unwrap();
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let n = stmt.parameter_count();
        let params: Vec<Option<String>> = (0..n).map(|_| Some("x".to_owned())).collect();
        stmt.query_map(rusqlite::params_from_iter(params), |r| {
            r.get::<_, String>(3)
        })
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap()
        .join("\n")
    }

    /// One user's runs and a thread's other users are read from indexes,
    /// not by scanning the runs.
    #[test]
    fn the_user_filter_and_thread_ownership_read_indexes() {
        let by_user = plan(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE user_key = ?2 AND ",
            narrowing!(),
            " ORDER BY seq DESC LIMIT ?7"
        ));
        assert!(by_user.contains("USING INDEX runs_user_seq"), "{by_user}");
        assert!(!by_user.contains("TEMP B-TREE"), "{by_user}");
        let others = plan(
            "SELECT EXISTS (SELECT 1 FROM runs WHERE thread_key = ?1 AND user_key < ?2) \
             OR EXISTS (SELECT 1 FROM runs WHERE thread_key = ?1 AND user_key > ?2)",
        );
        assert_eq!(
            others
                .matches("USING COVERING INDEX runs_thread_user")
                .count(),
            2,
            "{others}"
        );
    }
}
