//! The SQL behind confirmations: write functions run on the writer thread
//! inside the batch transaction, reads on a reader thread.

use hearth_core::Timestamp;
use rusqlite::{OptionalExtension, Row, params};

use super::SqliteStore;
use super::db::Db;
use super::grants::append_audit;
use crate::channels::NewOutboxItem;
use crate::confirmations::ConfirmationStore;
use crate::error::{Result, StoreError};
use crate::records::{AuditEvent, ConfirmationRecord, ConfirmationState, RUN_ENDED};

fn record(row: &Row<'_>) -> rusqlite::Result<(ConfirmationRecord, String)> {
    let state: String = row.get(9)?;
    Ok((
        ConfirmationRecord {
            token_hash: row.get(0)?,
            run_id: row.get(1)?,
            call_id: row.get(2)?,
            thread_key: row.get(3)?,
            user_key: row.get(4)?,
            tool: row.get(5)?,
            summary: row.get(6)?,
            created_at: row.get(7)?,
            expires_at: row.get(8)?,
            state: ConfirmationState::Pending,
            resolved_by: row.get(10)?,
            resolved_at: row.get(11)?,
        },
        state,
    ))
}

fn parsed((mut rec, state): (ConfirmationRecord, String)) -> Result<ConfirmationRecord> {
    rec.state = ConfirmationState::parse(&state)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown confirmation state {state:?}")))?;
    Ok(rec)
}

pub(crate) fn for_call(
    db: &mut Db<'_>,
    run_id: &str,
    call_id: &str,
) -> Result<Option<ConfirmationRecord>> {
    const SQL: &str = "SELECT token_hash, run_id, call_id, thread_key, user_key, tool, summary, \
                       created_at, expires_at, state, resolved_by, resolved_at \
                       FROM confirmations WHERE run_id = ?1 AND call_id = ?2";
    db.stmt(SQL)?
        .query_row(params![run_id, call_id], record)
        .optional()?
        .map(parsed)
        .transpose()
}

pub(crate) fn by_hash(db: &mut Db<'_>, token_hash: &str) -> Result<Option<ConfirmationRecord>> {
    const SQL: &str = "SELECT token_hash, run_id, call_id, thread_key, user_key, tool, summary, \
                       created_at, expires_at, state, resolved_by, resolved_at \
                       FROM confirmations WHERE token_hash = ?1";
    db.stmt(SQL)?
        .query_row(params![token_hash], record)
        .optional()?
        .map(parsed)
        .transpose()
}

pub(crate) fn pending(
    db: &mut Db<'_>,
    run_id: Option<&str>,
    thread_key: Option<&str>,
) -> Result<Vec<ConfirmationRecord>> {
    const SQL: &str = "SELECT token_hash, run_id, call_id, thread_key, user_key, tool, summary, \
                       created_at, expires_at, state, resolved_by, resolved_at \
                       FROM confirmations WHERE state = 'pending' \
                       AND (?1 IS NULL OR run_id = ?1) AND (?2 IS NULL OR thread_key = ?2) \
                       ORDER BY created_at";
    let rows = db
        .stmt(SQL)?
        .query_map(params![run_id, thread_key], record)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter().map(parsed).collect()
}

pub(crate) fn request(
    db: &mut Db<'_>,
    rec: &ConfirmationRecord,
    outbox: &[NewOutboxItem],
) -> Result<ConfirmationRecord> {
    let inserted = db
        .stmt(
            "INSERT INTO confirmations (token_hash, run_id, call_id, thread_key, user_key, tool, \
         summary, created_at, expires_at, state) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'pending') \
         ON CONFLICT (run_id, call_id) DO NOTHING",
        )?
        .execute(params![
            rec.token_hash,
            rec.run_id,
            rec.call_id,
            rec.thread_key,
            rec.user_key,
            rec.tool,
            rec.summary,
            rec.created_at,
            rec.expires_at,
        ])?;
    let stored = for_call(db, &rec.run_id, &rec.call_id)?.ok_or_else(|| {
        StoreError::Corrupt(format!(
            "confirmation of call {} of {} vanished while being stored",
            rec.call_id, rec.run_id
        ))
    })?;
    if inserted == 1 {
        super::outbox::enqueue(db, outbox, rec.created_at)?;
    }
    if stored.state == ConfirmationState::Pending {
        db.stmt(
            "UPDATE runs SET status = 'awaiting_confirmation', updated_at = ?2 \
             WHERE run_id = ?1 AND status IN ('queued', 'running')",
        )?
        .execute(params![rec.run_id, rec.created_at])?;
    }
    Ok(stored)
}

pub(crate) fn resolve(
    db: &mut Db<'_>,
    token_hash: &str,
    state: ConfirmationState,
    by: &str,
    at: Timestamp,
    audit: Option<&AuditEvent>,
) -> Result<Option<ConfirmationRecord>> {
    let changed = db
        .stmt(
            "UPDATE confirmations SET state = ?2, resolved_by = ?3, resolved_at = ?4 \
             WHERE token_hash = ?1 AND state = 'pending'",
        )?
        .execute(params![token_hash, state.as_str(), by, at])?;
    if changed == 0 {
        return Ok(None);
    }
    let Some(rec) = by_hash(db, token_hash)? else {
        return Ok(None);
    };
    db.stmt(
        "UPDATE runs SET status = 'running', updated_at = ?2 \
         WHERE run_id = ?1 AND status = 'awaiting_confirmation'",
    )?
    .execute(params![rec.run_id, at])?;
    if let Some(event) = audit {
        append_audit(db, event)?;
    }
    Ok(Some(rec))
}

/// Marks the pending confirmations of `run_id`, which is ending, expired by
/// [`RUN_ENDED`]: called inside the transaction that writes the run's end,
/// so no question outlives its run (a token for it is then unknown, and a
/// `confirm <token>` message for it an ordinary message).
pub(crate) fn end_of_run(db: &mut Db<'_>, run_id: &str, at: Timestamp) -> Result<()> {
    db.stmt(
        "UPDATE confirmations SET state = 'expired', resolved_by = ?2, resolved_at = ?3 \
         WHERE run_id = ?1 AND state = 'pending'",
    )?
    .execute(params![run_id, RUN_ENDED, at])?;
    Ok(())
}

#[async_trait::async_trait]
impl ConfirmationStore for SqliteStore {
    async fn request_confirmation(
        &self,
        rec: ConfirmationRecord,
        outbox: Vec<NewOutboxItem>,
    ) -> Result<ConfirmationRecord> {
        self.write(move |db| request(db, &rec, &outbox)).await
    }

    async fn confirmation_for_call(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<Option<ConfirmationRecord>> {
        let (run_id, call_id) = (run_id.to_owned(), call_id.to_owned());
        self.read(move |db| for_call(db, &run_id, &call_id)).await
    }

    async fn confirmation_by_hash(&self, token_hash: &str) -> Result<Option<ConfirmationRecord>> {
        let token_hash = token_hash.to_owned();
        self.read(move |db| by_hash(db, &token_hash)).await
    }

    async fn pending_confirmations(
        &self,
        run_id: Option<&str>,
        thread_key: Option<&str>,
    ) -> Result<Vec<ConfirmationRecord>> {
        let (run_id, thread_key) = (run_id.map(str::to_owned), thread_key.map(str::to_owned));
        self.read(move |db| pending(db, run_id.as_deref(), thread_key.as_deref()))
            .await
    }

    async fn resolve_confirmation(
        &self,
        token_hash: &str,
        state: ConfirmationState,
        by: &str,
        at: Timestamp,
        audit: Option<AuditEvent>,
    ) -> Result<Option<ConfirmationRecord>> {
        let (token_hash, by) = (token_hash.to_owned(), by.to_owned());
        self.write(move |db| resolve(db, &token_hash, state, &by, at, audit.as_ref()))
            .await
    }
}
