//! Model-call usage on SQLite: one `llm_calls` row per finished model call.

use rusqlite::params;

use super::SqliteStore;
use super::db::Db;
use crate::codec::LlmCall;
use crate::error::Result;
use crate::records::{ModelUsage, StepRecord, StepStatus, UsageGroup, UsageQuery, UsageRow};
use crate::usage::{CallUsage, ModelCall, UsageStore, add_model_usage};

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

fn usage(db: &mut Db<'_>, q: &UsageQuery) -> Result<Vec<UsageRow>> {
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
        add_model_usage(&mut out, key, m);
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
