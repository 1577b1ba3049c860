//! The SQL behind each `Store` operation. Write functions run on the writer
//! thread inside a savepoint of the batch transaction; read functions run on a
//! reader thread.

use hearth_core::{Message, RunStatus, Timestamp};
use rusqlite::{OptionalExtension, Params, Statement, params};

use super::db::Db;
use super::migrations;
use super::rows::{self, col, run_columns, to_json};
use crate::error::{Result, StoreError};
use crate::records::{
    AuditEvent, CreateRunOutcome, Grant, ModelUsage, NewRun, NewSession, NewToken, RunFilter,
    RunFinish, RunRecord, SecretInfo, SteerRecord, StepKind, StepRecord, StepStatus, ThreadState,
    TokenRecord, UsageGroup, UsageQuery, UsageRow,
};

/// The `list_runs` page size when the filter asks for 0.
const DEFAULT_LIMIT: u32 = 50;
/// The largest `list_runs` page.
const MAX_LIMIT: u32 = 1000;
/// The `list_audit` page size when the caller asks for 0.
const DEFAULT_AUDIT_LIMIT: u32 = 100;
/// The largest `list_audit` page.
const MAX_AUDIT_LIMIT: u32 = 1000;

/// The schema version must be the one this build writes.
pub(crate) fn ping(db: &mut Db<'_>) -> Result<()> {
    let found = migrations::user_version(db.conn())?;
    if found == migrations::LATEST {
        return Ok(());
    }
    if found > migrations::LATEST {
        return Err(StoreError::TooNew {
            found,
            supported: migrations::LATEST,
        });
    }
    Err(StoreError::Corrupt(format!(
        "schema version {found}, expected {}",
        migrations::LATEST
    )))
}

pub(crate) fn create_run(db: &mut Db<'_>, run: NewRun) -> Result<CreateRunOutcome> {
    let inserted = db
        .stmt(
            "INSERT INTO runs (run_id, thread_key, user_key, source, input, idempotency_key, \
             status, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', ?7, ?7) \
             ON CONFLICT (thread_key, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
        )?
        .execute(params![
            run.run_id,
            run.thread_key,
            run.user_key,
            run.source,
            run.input,
            run.idempotency_key,
            run.created_at
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
            lease_owner: None,
            lease_until: None,
            created_at: run.created_at,
            updated_at: run.created_at,
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

pub(crate) fn start_run(
    db: &mut Db<'_>,
    run_id: &str,
    owner: &str,
    lease_until: Timestamp,
    model: &str,
    now: Timestamp,
) -> Result<bool> {
    let changed = db
        .stmt(
            // A run recovered while it awaits a confirmation keeps awaiting it.
            "UPDATE runs SET status = CASE status WHEN 'awaiting_confirmation' THEN status \
             ELSE 'running' END, lease_owner = ?2, lease_until = ?3, model = ?4, \
             updated_at = ?5 WHERE run_id = ?1 AND status NOT IN ('succeeded', 'failed', 'cancelled')",
        )?
        .execute(params![run_id, owner, lease_until, model, now])?;
    Ok(changed == 1)
}

pub(crate) fn claim_run(
    db: &mut Db<'_>,
    run_id: &str,
    owner: &str,
    lease_until: Timestamp,
    now: Timestamp,
) -> Result<Option<RunRecord>> {
    // One conditional UPDATE: the writer runs writes one at a time (and a
    // server database would lock the row), so of concurrent claims exactly
    // one sees the run claimable.
    db.stmt(concat!(
        "UPDATE runs SET status = CASE status WHEN 'awaiting_confirmation' THEN status \
         ELSE 'running' END, lease_owner = ?2, lease_until = ?3, updated_at = ?4 \
         WHERE run_id = ?1 AND (status = 'queued' \
         OR (status IN ('running', 'awaiting_confirmation') AND (lease_owner IS NULL \
         OR lease_until IS NULL OR lease_until < ?4 OR lease_owner = ?2))) RETURNING ",
        run_columns!()
    ))?
    .query_row(params![run_id, owner, lease_until, now], |row| {
        Ok(rows::run(row))
    })
    .optional()?
    .transpose()
}

pub(crate) fn set_run_model(db: &mut Db<'_>, run_id: &str, model: &str) -> Result<()> {
    db.stmt("UPDATE runs SET model = ?2 WHERE run_id = ?1")?
        .execute(params![run_id, model])?;
    Ok(())
}

pub(crate) fn release_foreign_leases(db: &mut Db<'_>, owner: &str) -> Result<u64> {
    let changed = db
        .stmt(
            "UPDATE runs SET lease_owner = NULL, lease_until = NULL \
             WHERE lease_owner IS NOT NULL AND lease_owner != ?1 \
             AND status IN ('queued', 'running', 'awaiting_confirmation')",
        )?
        .execute(params![owner])?;
    Ok(changed as u64)
}

pub(crate) fn renew_leases(
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

pub(crate) fn put_step(db: &mut Db<'_>, step: &StepRecord) -> Result<()> {
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
    if step.kind == StepKind::Llm && step.status != StepStatus::Started {
        record_llm_call(db, step)?;
    }
    Ok(())
}

pub(crate) fn finish_run(db: &mut Db<'_>, finish: &RunFinish) -> Result<bool> {
    let thread_key: Option<String> = db
        .stmt(
            "UPDATE runs SET status = ?2, output = ?3, error_code = ?4, error_message = ?5, \
             updated_at = ?6, lease_owner = NULL, lease_until = NULL \
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
                finish.finished_at
            ],
            |row| row.get(0),
        )
        .optional()?;
    let Some(thread_key) = thread_key else {
        return Ok(false);
    };
    for step in &finish.steps {
        put_step(db, step)?;
    }
    for message in &finish.messages {
        append_message(db, &thread_key, &finish.run_id, message, finish.finished_at)?;
    }
    for run in &finish.follow_ups {
        create_run(db, run.clone())?;
    }
    Ok(true)
}

/// The usage row of a finished model-call step (ids and counts only).
fn record_llm_call(db: &mut Db<'_>, step: &StepRecord) -> Result<()> {
    insert_llm_call(db, step, false)
}

/// Records a model call of a run that is not in this database (incognito),
/// with no thread or user.
pub(crate) fn record_anonymous_llm_call(db: &mut Db<'_>, step: &StepRecord) -> Result<()> {
    if step.kind != StepKind::Llm || step.status == StepStatus::Started {
        return Ok(());
    }
    insert_llm_call(db, step, true)
}

fn insert_llm_call(db: &mut Db<'_>, step: &StepRecord, anonymous: bool) -> Result<()> {
    let (provider, model) = step
        .name
        .split_once('/')
        .unwrap_or((step.name.as_str(), ""));
    let tok = |k: &str| {
        step.tokens
            .as_ref()
            .and_then(|t| t.get(k))
            .and_then(serde_json::Value::as_i64)
    };
    let status = if step.status == StepStatus::Succeeded {
        "ok"
    } else {
        "error"
    };
    let error_kind = step
        .payload
        .get("error")
        .and_then(|e| e.get("kind"))
        .and_then(|k| k.as_str());
    let latency = step.finished_at.map_or(0, |f| (f - step.started_at).max(0));
    let sql = if anonymous {
        "INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, input_tokens, \
         output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens, latency_ms, status, \
         error_kind, thread_key, user_key) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'chat', ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, NULL, NULL) \
         ON CONFLICT (run_id, idx) DO NOTHING"
    } else {
        "INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, input_tokens, \
         output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens, latency_ms, status, \
         error_kind, thread_key, user_key) \
         SELECT ?1, ?2, ?3, ?4, ?5, 'chat', ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, thread_key, user_key \
         FROM runs WHERE run_id = ?1 ON CONFLICT (run_id, idx) DO NOTHING"
    };
    db.stmt(sql)?.execute(params![
        step.run_id,
        step.index,
        step.started_at,
        provider,
        model,
        tok("input_tokens"),
        tok("output_tokens"),
        tok("cached_tokens"),
        tok("reasoning_tokens"),
        tok("cache_write_tokens"),
        latency,
        status,
        error_kind
    ])?;
    Ok(())
}

pub(crate) fn usage(db: &mut Db<'_>, q: &UsageQuery) -> Result<Vec<UsageRow>> {
    let sql = match q.group_by {
        UsageGroup::Provider => USAGE_BY_PROVIDER,
        UsageGroup::Model => USAGE_BY_MODEL,
        UsageGroup::Day => USAGE_BY_DAY,
    };
    let stmt = db.stmt(sql)?;
    let mut found = stmt.query(params![
        q.since.unwrap_or(i64::MIN),
        q.until.unwrap_or(i64::MAX)
    ])?;
    let mut out: Vec<UsageRow> = Vec::new();
    while let Some(row) = found.next()? {
        let key: String = row.get(0)?;
        let n = |i: usize| -> rusqlite::Result<u64> {
            Ok(u64::try_from(row.get::<_, i64>(i)?).unwrap_or(0))
        };
        let m = ModelUsage {
            model: row.get(1)?,
            calls: n(2)?,
            input_tokens: n(3)?,
            output_tokens: n(4)?,
            cached_tokens: n(5)?,
            untracked_calls: n(6)?,
            cache_write_tokens: n(7)?,
            reasoning_tokens: n(8)?,
        };
        if out.last().is_none_or(|r| r.key != key) {
            out.push(UsageRow {
                key,
                calls: 0,
                input_tokens: 0,
                output_tokens: 0,
                cached_tokens: 0,
                untracked_calls: 0,
                by_model: Vec::new(),
            });
        }
        if let Some(r) = out.last_mut() {
            r.calls += m.calls;
            r.input_tokens += m.input_tokens;
            r.output_tokens += m.output_tokens;
            r.cached_tokens += m.cached_tokens;
            r.untracked_calls += m.untracked_calls;
            r.by_model.push(m);
        }
    }
    Ok(out)
}

macro_rules! usage_sql {
    ($key:literal) => {
        concat!(
            "SELECT ",
            $key,
            ", provider || '/' || model, COUNT(*), \
             COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), \
             COALESCE(SUM(cached_tokens), 0), \
             SUM(CASE WHEN input_tokens IS NULL AND output_tokens IS NULL THEN 1 ELSE 0 END), \
             COALESCE(SUM(cache_write_tokens), 0), COALESCE(SUM(reasoning_tokens), 0) \
             FROM llm_calls WHERE at >= ?1 AND at < ?2 GROUP BY 1, 2 ORDER BY 1, 2"
        )
    };
}

const USAGE_BY_PROVIDER: &str = usage_sql!("provider");
const USAGE_BY_MODEL: &str = usage_sql!("provider || '/' || model");
const USAGE_BY_DAY: &str = usage_sql!("strftime('%Y-%m-%d', at / 1000, 'unixepoch')");

pub(crate) fn add_steer(
    db: &mut Db<'_>,
    run_id: &str,
    text: &str,
    at: Timestamp,
) -> Result<SteerRecord> {
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

pub(crate) fn steers(db: &mut Db<'_>, run_id: &str) -> Result<Vec<SteerRecord>> {
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

fn append_message(
    db: &mut Db<'_>,
    thread_key: &str,
    run_id: &str,
    message: &Message,
    at: Timestamp,
) -> Result<()> {
    let content = to_json(&message.content, "message content")?;
    db.stmt(
        "INSERT INTO messages (thread_key, run_id, role, content, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        thread_key,
        run_id,
        rows::role_str(message.role),
        content,
        at
    ])?;
    Ok(())
}

pub(crate) fn set_thread_model(
    db: &mut Db<'_>,
    thread_key: &str,
    model: Option<&str>,
    now: Timestamp,
) -> Result<()> {
    db.stmt(
        "INSERT INTO threads (thread_key, model, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (thread_key) DO UPDATE SET model = excluded.model, updated_at = excluded.updated_at",
    )?
    .execute(params![thread_key, model, now])?;
    Ok(())
}

pub(crate) fn set_thread_thinking(
    db: &mut Db<'_>,
    thread_key: &str,
    level: &str,
    now: Timestamp,
) -> Result<()> {
    db.stmt(
        "INSERT INTO threads (thread_key, thinking, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (thread_key) DO UPDATE SET thinking = excluded.thinking, \
         updated_at = excluded.updated_at",
    )?
    .execute(params![thread_key, level, now])?;
    Ok(())
}

pub(crate) fn set_thread_incognito(
    db: &mut Db<'_>,
    thread_key: &str,
    enabled: bool,
    now: Timestamp,
) -> Result<()> {
    db.stmt(
        "INSERT INTO threads (thread_key, incognito, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (thread_key) DO UPDATE SET incognito = excluded.incognito, \
         updated_at = excluded.updated_at",
    )?
    .execute(params![thread_key, i64::from(enabled), now])?;
    Ok(())
}

pub(crate) fn incognito_threads(db: &mut Db<'_>) -> Result<Vec<String>> {
    let keys = db
        .stmt("SELECT thread_key FROM threads WHERE incognito != 0 ORDER BY thread_key")?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(keys)
}

pub(crate) fn clear_thread_history(db: &mut Db<'_>, thread_key: &str) -> Result<()> {
    db.stmt("DELETE FROM messages WHERE thread_key = ?1")?
        .execute(params![thread_key])?;
    Ok(())
}

pub(crate) fn new_session(
    db: &mut Db<'_>,
    thread_key: &str,
    cancelled_run: Option<&str>,
    at: Timestamp,
) -> Result<NewSession> {
    let cancelled = match cancelled_run {
        Some(run_id) => {
            db.stmt(
                "UPDATE runs SET status = 'cancelled', updated_at = ?3, lease_owner = NULL, \
                 lease_until = NULL WHERE run_id = ?1 AND thread_key = ?2 \
                 AND status NOT IN ('succeeded', 'failed', 'cancelled')",
            )?
            .execute(params![run_id, thread_key, at])?
                == 1
        }
        None => false,
    };
    let cleared = db
        .stmt("DELETE FROM messages WHERE thread_key = ?1")?
        .execute(params![thread_key])?;
    Ok(NewSession {
        cancelled,
        cleared_messages: cleared as u64,
    })
}

pub(crate) fn create_token(db: &mut Db<'_>, token: &NewToken) -> Result<()> {
    db.stmt("INSERT INTO api_tokens (id, name, hash_hex, created_at) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![
            token.id,
            token.name,
            token.hash_hex,
            token.created_at
        ])?;
    Ok(())
}

pub(crate) fn revoke_token(db: &mut Db<'_>, id: &str, now: Timestamp) -> Result<bool> {
    let changed = db
        .stmt("UPDATE api_tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL")?
        .execute(params![id, now])?;
    Ok(changed == 1)
}

pub(crate) fn get_run(db: &mut Db<'_>, run_id: &str) -> Result<Option<RunRecord>> {
    db.stmt(concat!(
        "SELECT ",
        run_columns!(),
        " FROM runs WHERE run_id = ?1"
    ))?
    .query_row(params![run_id], |row| Ok(rows::run(row)))
    .optional()?
    .transpose()
}

pub(crate) fn list_runs(db: &mut Db<'_>, filter: &RunFilter) -> Result<Vec<RunRecord>> {
    let limit = match filter.limit {
        0 => DEFAULT_LIMIT,
        n => n.min(MAX_LIMIT),
    };
    // One statement per filter shape, so each can use its own index.
    match (
        filter.thread_key.as_deref(),
        filter.status.map(RunStatus::as_str),
    ) {
        (None, None) => collect_runs(
            db.stmt(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs ORDER BY seq DESC LIMIT ?1"
            ))?,
            params![limit],
        ),
        (Some(thread), None) => collect_runs(
            db.stmt(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE thread_key = ?1 ORDER BY seq DESC LIMIT ?2"
            ))?,
            params![thread, limit],
        ),
        (None, Some(status)) => collect_runs(
            db.stmt(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE status = ?1 ORDER BY seq DESC LIMIT ?2"
            ))?,
            params![status, limit],
        ),
        (Some(thread), Some(status)) => collect_runs(
            db.stmt(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE thread_key = ?1 AND status = ?2 ORDER BY seq DESC LIMIT ?3"
            ))?,
            params![thread, status, limit],
        ),
    }
}

pub(crate) fn unfinished_runs(db: &mut Db<'_>) -> Result<Vec<RunRecord>> {
    collect_runs(
        db.stmt(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE status IN ('queued', 'running', 'awaiting_confirmation') ORDER BY seq"
        ))?,
        [],
    )
}

fn collect_runs(stmt: &mut Statement<'_>, params: impl Params) -> Result<Vec<RunRecord>> {
    let mut out = Vec::new();
    let mut found = stmt.query(params)?;
    while let Some(row) = found.next()? {
        out.push(rows::run(row)?);
    }
    Ok(out)
}

pub(crate) fn steps(db: &mut Db<'_>, run_id: &str) -> Result<Vec<StepRecord>> {
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

pub(crate) fn thread_history(
    db: &mut Db<'_>,
    thread_key: &str,
    limit: u32,
) -> Result<Vec<Message>> {
    let stmt = db.stmt(
        "SELECT role, content FROM (SELECT id, role, content FROM messages WHERE thread_key = ?1 \
         ORDER BY id DESC LIMIT ?2) ORDER BY id",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query(params![thread_key, limit])?;
    while let Some(row) = found.next()? {
        out.push(rows::message(row)?);
    }
    Ok(out)
}

pub(crate) fn thread_state(db: &mut Db<'_>, thread_key: &str) -> Result<ThreadState> {
    // One statement, so the settings and the count come from one snapshot.
    let stmt = db.stmt(
        "SELECT t.model, t.thinking, t.incognito, \
         (SELECT count(*) FROM messages WHERE thread_key = ?1) \
         FROM (SELECT 1) LEFT JOIN threads t ON t.thread_key = ?1",
    )?;
    let mut found = stmt.query(params![thread_key])?;
    let Some(row) = found.next()? else {
        return Err(StoreError::Corrupt(
            "thread state query returned no row".into(),
        ));
    };
    let thinking: Option<String> = col(row, 1)?;
    let incognito: Option<i64> = col(row, 2)?;
    Ok(ThreadState {
        thread_key: thread_key.to_owned(),
        model: col(row, 0)?,
        thinking: thinking.unwrap_or_else(|| "off".to_owned()),
        incognito: incognito.unwrap_or(0) != 0,
        message_count: count(row, 3)?,
    })
}

pub(crate) fn list_tokens(db: &mut Db<'_>) -> Result<Vec<TokenRecord>> {
    let stmt = db.stmt(
        "SELECT id, name, created_at, revoked_at FROM api_tokens ORDER BY created_at DESC, rowid DESC",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query([])?;
    while let Some(row) = found.next()? {
        out.push(rows::token(row)?);
    }
    Ok(out)
}

pub(crate) fn token_hash_valid(db: &mut Db<'_>, hash_hex: &str) -> Result<bool> {
    let valid = db
        .stmt(
            "SELECT EXISTS (SELECT 1 FROM api_tokens WHERE hash_hex = ?1 AND revoked_at IS NULL)",
        )?
        .query_row(params![hash_hex], |row| row.get(0))?;
    Ok(valid)
}

/// A `count(*)` column; counts are never negative.
fn count(row: &rusqlite::Row<'_>, idx: usize) -> Result<u64> {
    let n: i64 = col(row, idx)?;
    u64::try_from(n).map_err(|_| StoreError::Corrupt(format!("negative count {n}")))
}

pub(crate) fn active_token_count(db: &mut Db<'_>) -> Result<u64> {
    let stmt = db.stmt("SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL")?;
    let mut found = stmt.query([])?;
    match found.next()? {
        Some(row) => count(row, 0),
        None => Ok(0),
    }
}

pub(crate) fn put_secret(db: &mut Db<'_>, name: &str, sealed: &[u8], at: Timestamp) -> Result<()> {
    db.stmt(
        "INSERT INTO secrets (name, sealed, created_at, updated_at) VALUES (?1, ?2, ?3, ?3) \
         ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
    )?
    .execute(params![name, sealed, at])?;
    Ok(())
}

pub(crate) fn get_secret(db: &mut Db<'_>, name: &str) -> Result<Option<Vec<u8>>> {
    let sealed = db
        .stmt("SELECT sealed FROM secrets WHERE name = ?1")?
        .query_row(params![name], |row| row.get(0))
        .optional()?;
    Ok(sealed)
}

pub(crate) fn list_secrets(db: &mut Db<'_>) -> Result<Vec<SecretInfo>> {
    let stmt = db.stmt("SELECT name, created_at, updated_at FROM secrets ORDER BY name")?;
    let mut out = Vec::new();
    let mut found = stmt.query([])?;
    while let Some(row) = found.next()? {
        out.push(SecretInfo {
            name: col(row, 0)?,
            created_at: col(row, 1)?,
            updated_at: col(row, 2)?,
        });
    }
    Ok(out)
}

pub(crate) fn delete_secret(db: &mut Db<'_>, name: &str) -> Result<bool> {
    let changed = db
        .stmt("DELETE FROM secrets WHERE name = ?1")?
        .execute(params![name])?;
    Ok(changed == 1)
}

pub(crate) fn add_grant(db: &mut Db<'_>, grant: &Grant) -> Result<bool> {
    let inserted = db
        .stmt(
            "INSERT INTO grants (subject, capability, scope, granted_at, granted_by) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (subject, capability, scope) DO NOTHING",
        )?
        .execute(params![
            grant.subject,
            grant.capability,
            grant.scope,
            grant.granted_at,
            grant.granted_by
        ])?;
    Ok(inserted == 1)
}

/// Adds a grant and, only when it was new, its audit event; the caller runs
/// this as one write, so both land in the same savepoint.
pub(crate) fn add_grant_audited(
    db: &mut Db<'_>,
    grant: &Grant,
    event: &AuditEvent,
) -> Result<bool> {
    let created = add_grant(db, grant)?;
    if created {
        append_audit(db, event)?;
    }
    Ok(created)
}

pub(crate) fn remove_grant(
    db: &mut Db<'_>,
    subject: &str,
    capability: &str,
    scope: &str,
) -> Result<bool> {
    let removed = db
        .stmt("DELETE FROM grants WHERE subject = ?1 AND capability = ?2 AND scope = ?3")?
        .execute(params![subject, capability, scope])?;
    Ok(removed == 1)
}

/// Removes a grant and, only when one was removed, writes its audit event.
pub(crate) fn remove_grant_audited(
    db: &mut Db<'_>,
    subject: &str,
    capability: &str,
    scope: &str,
    event: &AuditEvent,
) -> Result<bool> {
    let removed = remove_grant(db, subject, capability, scope)?;
    if removed {
        append_audit(db, event)?;
    }
    Ok(removed)
}

/// The `grants` columns in the order [`grant_row`] reads them.
macro_rules! grant_columns {
    () => {
        "subject, capability, scope, granted_at, granted_by"
    };
}

fn grant_row(row: &rusqlite::Row<'_>) -> Result<Grant> {
    Ok(Grant {
        subject: col(row, 0)?,
        capability: col(row, 1)?,
        scope: col(row, 2)?,
        granted_at: col(row, 3)?,
        granted_by: col(row, 4)?,
    })
}

fn collect_grants<P: Params>(stmt: &mut Statement<'_>, params: P) -> Result<Vec<Grant>> {
    let mut out = Vec::new();
    let mut found = stmt.query(params)?;
    while let Some(row) = found.next()? {
        out.push(grant_row(row)?);
    }
    Ok(out)
}

pub(crate) fn list_grants(db: &mut Db<'_>, scope: Option<&str>) -> Result<Vec<Grant>> {
    match scope {
        None => collect_grants(
            db.stmt(concat!(
                "SELECT ",
                grant_columns!(),
                " FROM grants ORDER BY subject, capability, scope"
            ))?,
            [],
        ),
        Some(scope) => collect_grants(
            db.stmt(concat!(
                "SELECT ",
                grant_columns!(),
                " FROM grants WHERE scope = ?1 ORDER BY subject, capability"
            ))?,
            params![scope],
        ),
    }
}

pub(crate) fn grants_for(
    db: &mut Db<'_>,
    subjects: &[String],
    scopes: &[String],
) -> Result<Vec<Grant>> {
    if subjects.is_empty() || scopes.is_empty() {
        return Ok(Vec::new());
    }
    // The lists travel as JSON arrays so that one cached statement serves
    // every length.
    let subjects = to_json(subjects, "grant subjects")?;
    let scopes = to_json(scopes, "grant scopes")?;
    collect_grants(
        db.stmt(concat!(
            "SELECT ",
            grant_columns!(),
            " FROM grants WHERE subject IN (SELECT value FROM json_each(?1)) \
             AND scope IN (SELECT value FROM json_each(?2)) \
             ORDER BY subject, capability, scope"
        ))?,
        params![subjects, scopes],
    )
}

pub(crate) fn append_audit(db: &mut Db<'_>, event: &AuditEvent) -> Result<()> {
    db.stmt(
        "INSERT INTO audit (at, actor, action, target, outcome, capability, scope) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        event.at,
        event.actor,
        event.action,
        event.target,
        event.outcome,
        event.capability,
        event.scope
    ])?;
    Ok(())
}

pub(crate) fn list_audit(db: &mut Db<'_>, limit: u32) -> Result<Vec<AuditEvent>> {
    let limit = match limit {
        0 => DEFAULT_AUDIT_LIMIT,
        n => n.min(MAX_AUDIT_LIMIT),
    };
    let stmt = db.stmt(
        "SELECT at, actor, action, target, outcome, capability, scope FROM audit \
         ORDER BY at DESC, id DESC LIMIT ?1",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query(params![limit])?;
    while let Some(row) = found.next()? {
        out.push(AuditEvent {
            at: col(row, 0)?,
            actor: col(row, 1)?,
            action: col(row, 2)?,
            target: col(row, 3)?,
            outcome: col(row, 4)?,
            capability: col(row, 5)?,
            scope: col(row, 6)?,
        });
    }
    Ok(out)
}
