//! Turning rows into records: every decode failure is `StoreError::Corrupt`,
//! never a panic.

use hearth_core::{Content, Message, RunStatus};
use rusqlite::Row;
use rusqlite::types::FromSql;

use crate::codec::{self, json, parse_role};
pub(crate) use crate::codec::{role_str, to_json};
use crate::error::{Result, StoreError};
use crate::records::{RunRecord, StepRecord, TokenRecord};

/// The `runs` columns in the order [`run`] reads them.
macro_rules! run_columns {
    () => {
        "run_id, seq, thread_key, user_key, source, input, idempotency_key, status, output, \
         error_code, error_message, model, lease_owner, lease_until, created_at, updated_at, \
         last_event_seq, scope, roles, requested_model, mode, parent_run_id"
    };
}
pub(crate) use run_columns;

/// Reads one column, reporting a value of the wrong type as corruption.
pub(crate) fn col<T: FromSql>(row: &Row<'_>, idx: usize) -> Result<T> {
    row.get(idx).map_err(|e| match e {
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..) => StoreError::Corrupt(e.to_string()),
        other => StoreError::Sqlite(other),
    })
}

/// A run from a row selected with [`run_columns`].
pub(crate) fn run(row: &Row<'_>) -> Result<RunRecord> {
    let status: String = col(row, 7)?;
    Ok(RunRecord {
        run_id: col(row, 0)?,
        seq: col(row, 1)?,
        thread_key: col(row, 2)?,
        user_key: col(row, 3)?,
        source: col(row, 4)?,
        input: col(row, 5)?,
        idempotency_key: col(row, 6)?,
        status: RunStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown run status {status:?}")))?,
        output: col(row, 8)?,
        error_code: col(row, 9)?,
        error_message: col(row, 10)?,
        model: col(row, 11)?,
        lease_owner: col(row, 12)?,
        lease_until: col(row, 13)?,
        created_at: col(row, 14)?,
        updated_at: col(row, 15)?,
        last_event_seq: col::<Option<i64>>(row, 16)?.and_then(|n| u64::try_from(n).ok()),
        scope: col(row, 17)?,
        roles: json(&col::<String>(row, 18)?, "run roles")?,
        requested_model: col(row, 19)?,
        mode: col(row, 20)?,
        parent_run_id: col(row, 21)?,
    })
}

/// A step from a row of `run_id, idx, kind, name, status, started_at,
/// finished_at, tokens, payload`.
pub(crate) fn step(row: &Row<'_>) -> Result<StepRecord> {
    let kind: String = col(row, 2)?;
    let status: String = col(row, 4)?;
    let tokens: Option<String> = col(row, 7)?;
    let payload: String = col(row, 8)?;
    Ok(StepRecord {
        run_id: col(row, 0)?,
        index: col(row, 1)?,
        kind: codec::step_kind(&kind)?,
        name: col(row, 3)?,
        status: codec::step_status(&status)?,
        started_at: col(row, 5)?,
        finished_at: col(row, 6)?,
        tokens: tokens
            .as_deref()
            .map(|t| json(t, "step tokens"))
            .transpose()?,
        payload: json(&payload, "step payload")?,
    })
}

/// A message from a `(role, content)` row.
pub(crate) fn message(row: &Row<'_>) -> Result<Message> {
    let role: String = col(row, 0)?;
    let content: String = col(row, 1)?;
    Ok(Message {
        role: parse_role(&role)?,
        content: json::<Vec<Content>>(&content, "message content")?,
    })
}

/// A token from an `(id, name, created_at, revoked_at)` row.
pub(crate) fn token(row: &Row<'_>) -> Result<TokenRecord> {
    Ok(TokenRecord {
        id: col(row, 0)?,
        name: col(row, 1)?,
        created_at: col(row, 2)?,
        revoked_at: col(row, 3)?,
        user_key: col(row, 4)?,
    })
}

/// A `count(*)` column; counts are never negative.
pub(crate) fn count(row: &rusqlite::Row<'_>, idx: usize) -> Result<u64> {
    let n: i64 = col(row, idx)?;
    u64::try_from(n).map_err(|_| StoreError::Corrupt(format!("negative count {n}")))
}
