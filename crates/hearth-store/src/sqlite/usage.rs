//! Model-call usage on SQLite: one `llm_calls` row per finished model call.

use rusqlite::params;

use super::SqliteStore;
use super::db::Db;
use crate::codec::LlmCall;
use crate::error::Result;
use crate::records::{ModelUsage, StepRecord, StepStatus, UsageGroup, UsageQuery, UsageRow};
use crate::usage::{CallUsage, ModelCall, UsageStore, UsageWindow, add_model_usage, utc_day};

/// The usage row of a finished model-call step (ids and counts only).
pub(super) fn record_llm_call(db: &mut Db<'_>, step: &StepRecord) -> Result<()> {
    insert_llm_call(db, step, false)
}

/// Records a model call of a run that is not in this database (incognito),
/// with no thread or user.
fn record_anonymous_llm_call(db: &mut Db<'_>, step: &StepRecord) -> Result<()> {
    if !step.kind.is_model_call() || step.status == StepStatus::Started {
        return Ok(());
    }
    insert_llm_call(db, step, true)
}

fn insert_llm_call(db: &mut Db<'_>, step: &StepRecord, anonymous: bool) -> Result<()> {
    let row = LlmCall::of(step);
    let sql = if anonymous {
        "INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, input_tokens, \
         output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens, latency_ms, status, \
         error_kind, thread_key, user_key) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?14, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, NULL, NULL) \
         ON CONFLICT (run_id, idx) DO NOTHING"
    } else {
        "INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, input_tokens, \
         output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens, latency_ms, status, \
         error_kind, thread_key, user_key) \
         SELECT ?1, ?2, ?3, ?4, ?5, ?14, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, thread_key, user_key \
         FROM runs WHERE run_id = ?1 ON CONFLICT (run_id, idx) DO NOTHING"
    };
    db.stmt(sql)?.execute(params![
        step.run_id,
        step.index,
        step.started_at,
        row.provider,
        row.model,
        row.input_tokens,
        row.output_tokens,
        row.cached_tokens,
        row.reasoning_tokens,
        row.cache_write_tokens,
        row.latency_ms,
        row.status,
        row.error_kind,
        row.purpose,
    ])?;
    Ok(())
}

/// The daily usage rollup (a macro, so the migration can `concat!` it):
/// one row per UTC day (as [`crate::usage::day_of`]
/// counts it), provider and model, with the sums of its calls, so the
/// usage pages read a few rows per day instead of every call. A trigger
/// keeps it: it adds each `llm_calls` row in the same transaction that
/// inserts it (a duplicate, ignored on conflict, adds nothing), whoever
/// inserts it. `llm_calls` rows are never updated or deleted. Existing
/// calls are summed in.
macro_rules! usage_daily {
    () => {
        "
CREATE TABLE usage_daily (
    day INTEGER NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    calls INTEGER NOT NULL,
    untracked_calls INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    PRIMARY KEY (day, provider, model)
);
INSERT INTO usage_daily (day, provider, model, calls, untracked_calls, input_tokens, \
    output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens)
SELECT (at / 1000) / 86400 - ((at / 1000) % 86400 < 0), provider, model, COUNT(*), \
    SUM(input_tokens IS NULL AND output_tokens IS NULL), COALESCE(SUM(input_tokens), 0), \
    COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cached_tokens), 0), \
    COALESCE(SUM(reasoning_tokens), 0), COALESCE(SUM(cache_write_tokens), 0)
FROM llm_calls GROUP BY 1, 2, 3;
CREATE TRIGGER llm_calls_usage_daily AFTER INSERT ON llm_calls BEGIN
    INSERT INTO usage_daily (day, provider, model, calls, untracked_calls, input_tokens, \
        output_tokens, cached_tokens, reasoning_tokens, cache_write_tokens)
    VALUES ((NEW.at / 1000) / 86400 - ((NEW.at / 1000) % 86400 < 0), NEW.provider, NEW.model, 1, \
        NEW.input_tokens IS NULL AND NEW.output_tokens IS NULL, COALESCE(NEW.input_tokens, 0), \
        COALESCE(NEW.output_tokens, 0), COALESCE(NEW.cached_tokens, 0), \
        COALESCE(NEW.reasoning_tokens, 0), COALESCE(NEW.cache_write_tokens, 0))
    ON CONFLICT (day, provider, model) DO UPDATE SET
        calls = calls + excluded.calls,
        untracked_calls = untracked_calls + excluded.untracked_calls,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        cached_tokens = cached_tokens + excluded.cached_tokens,
        reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
        cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens;
END;
"
    };
}
pub(super) use usage_daily;

fn usage(db: &mut Db<'_>, q: &UsageQuery) -> Result<Vec<UsageRow>> {
    let sql = match q.group_by {
        UsageGroup::Provider => USAGE_BY_PROVIDER,
        UsageGroup::Model => USAGE_BY_MODEL,
        UsageGroup::Day => USAGE_BY_DAY,
    };
    let w = UsageWindow::of(q.since, q.until);
    let stmt = db.stmt(sql)?;
    let mut found = stmt.query(params![
        w.since, w.until, w.lo_ms, w.hi_ms, w.lo_day, w.hi_day
    ])?;
    let mut out: Vec<UsageRow> = Vec::new();
    while let Some(row) = found.next()? {
        let key: String = match q.group_by {
            UsageGroup::Provider | UsageGroup::Model => row.get(0)?,
            UsageGroup::Day => utc_day(row.get(0)?),
        };
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
        add_model_usage(&mut out, key, m);
    }
    Ok(out)
}

/// The columns of one raw call as a rollup row, for the window's edges.
macro_rules! raw_calls {
    ($range:literal) => {
        concat!(
            "SELECT (at / 1000) / 86400 - ((at / 1000) % 86400 < 0), provider, model, 1, \
             input_tokens IS NULL AND output_tokens IS NULL, COALESCE(input_tokens, 0), \
             COALESCE(output_tokens, 0), COALESCE(cached_tokens, 0), \
             COALESCE(reasoning_tokens, 0), COALESCE(cache_write_tokens, 0) \
             FROM llm_calls WHERE ",
            $range
        )
    };
}

/// Usage grouped by `$key`, then by model: the window's whole days from
/// the rollup, its edges from the raw calls (see [`UsageWindow`]).
macro_rules! usage_sql {
    ($key:literal) => {
        concat!(
            "SELECT ",
            $key,
            ", provider || '/' || model, SUM(calls), SUM(input_tokens), SUM(output_tokens), \
             SUM(cached_tokens), SUM(untracked_calls), SUM(cache_write_tokens), \
             SUM(reasoning_tokens) FROM (\
             SELECT day, provider, model, calls, untracked_calls, input_tokens, output_tokens, \
             cached_tokens, reasoning_tokens, cache_write_tokens \
             FROM usage_daily WHERE day >= ?5 AND day < ?6 UNION ALL ",
            raw_calls!("at >= ?1 AND at < ?3"),
            " UNION ALL ",
            raw_calls!("at >= ?4 AND at < ?2"),
            ") GROUP BY 1, 2 ORDER BY 1, 2"
        )
    };
}

const USAGE_BY_PROVIDER: &str = usage_sql!("provider");

const USAGE_BY_MODEL: &str = usage_sql!("provider || '/' || model");

const USAGE_BY_DAY: &str = usage_sql!("day");

fn calls_since(db: &mut Db<'_>, since: i64) -> Result<Vec<CallUsage>> {
    let stmt = db.stmt(
        "SELECT at, provider || '/' || model, thread_key, user_key, \
         COALESCE(input_tokens, 0), COALESCE(output_tokens, 0), COALESCE(cached_tokens, 0), \
         COALESCE(cache_write_tokens, 0), COALESCE(reasoning_tokens, 0) \
         FROM llm_calls WHERE at >= ?1 ORDER BY at",
    )?;
    let mut found = stmt.query(params![since])?;
    let mut out = Vec::new();
    while let Some(row) = found.next()? {
        let n = |i: usize| -> rusqlite::Result<u64> {
            Ok(u64::try_from(row.get::<_, i64>(i)?).unwrap_or(0))
        };
        out.push(CallUsage {
            at: row.get(0)?,
            model: row.get(1)?,
            thread_key: row.get(2)?,
            user_key: row.get(3)?,
            input_tokens: n(4)?,
            output_tokens: n(5)?,
            cached_tokens: n(6)?,
            cache_write_tokens: n(7)?,
            reasoning_tokens: n(8)?,
        });
    }
    Ok(out)
}

#[async_trait::async_trait]
impl UsageStore for SqliteStore {
    async fn calls_since(&self, since: i64) -> Result<Vec<CallUsage>> {
        self.read(move |db| calls_since(db, since)).await
    }

    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>> {
        let query = query.clone();
        self.read(move |db| usage(db, &query)).await
    }

    async fn record_model_call(&self, call: ModelCall) -> Result<()> {
        self.write(move |db| {
            db.stmt(
                "INSERT INTO llm_calls (run_id, idx, at, provider, model, purpose, input_tokens, \
                 latency_ms, status, error_kind, thread_key, user_key) \
                 VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
                 ON CONFLICT (run_id, idx) DO NOTHING",
            )?
            .execute(params![
                call.call_id,
                call.at,
                call.provider,
                call.model,
                call.purpose,
                call.input_tokens
                    .map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
                call.latency_ms,
                if call.error_kind.is_none() {
                    "ok"
                } else {
                    "error"
                },
                call.error_kind,
                call.thread_key,
                call.user_key,
            ])?;
            Ok(())
        })
        .await
    }

    async fn record_anonymous_usage(&self, steps: Vec<StepRecord>) -> Result<()> {
        self.write(move |db| {
            for step in &steps {
                record_anonymous_llm_call(db, step)?;
            }
            Ok(())
        })
        .await
    }
}
