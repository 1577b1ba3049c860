//! Confirmations on PostgreSQL: questions a run asks before a tool call,
//! answered at most once whichever replica the answer reaches.

use deadpool_postgres::GenericClient;
use hearth_core::Timestamp;
use tokio_postgres::Row;

use super::rows::col;
use super::{PostgresStore, shared};
use crate::channels::NewOutboxItem;
use crate::confirmations::ConfirmationStore;
use crate::error::{Result, StoreError};
use crate::records::{AuditEvent, ConfirmationRecord, ConfirmationState};

/// The `confirmations` columns in the order [`record`] reads them.
macro_rules! columns {
    () => {
        "token_hash, run_id, call_id, thread_key, user_key, tool, summary, created_at, \
         expires_at, state, resolved_by, resolved_at"
    };
}

/// A confirmation from a row selected with [`columns`].
fn record(row: &Row) -> Result<ConfirmationRecord> {
    let state: String = col(row, 9)?;
    Ok(ConfirmationRecord {
        token_hash: col(row, 0)?,
        run_id: col(row, 1)?,
        call_id: col(row, 2)?,
        thread_key: col(row, 3)?,
        user_key: col(row, 4)?,
        tool: col(row, 5)?,
        summary: col(row, 6)?,
        created_at: col(row, 7)?,
        expires_at: col(row, 8)?,
        state: ConfirmationState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown confirmation state {state:?}")))?,
        resolved_by: col(row, 10)?,
        resolved_at: col(row, 11)?,
    })
}

async fn for_call(
    c: &impl GenericClient,
    run_id: &str,
    call_id: &str,
) -> Result<Option<ConfirmationRecord>> {
    let stmt = c
        .prepare_cached(concat!(
            "SELECT ",
            columns!(),
            " FROM confirmations WHERE run_id = $1 AND call_id = $2"
        ))
        .await?;
    c.query_opt(&stmt, &[&run_id, &call_id])
        .await?
        .map(|row| record(&row))
        .transpose()
}

/// Stores the question (or finds the one asked before for the same call),
/// queues its prompt only when this call stored it, and marks the run
/// awaiting while the question is pending; one transaction.
async fn request(
    store: &PostgresStore,
    rec: &ConfirmationRecord,
    outbox: &[NewOutboxItem],
) -> Result<ConfirmationRecord> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    // A concurrent request for the same call waits for this one to commit
    // and then inserts nothing, so the prompt is queued once.
    let insert = tx
        .prepare_cached(concat!(
            "INSERT INTO confirmations (token_hash, run_id, call_id, thread_key, user_key, tool, \
             summary, created_at, expires_at, state) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending') \
             ON CONFLICT (run_id, call_id) DO NOTHING RETURNING ",
            columns!()
        ))
        .await?;
    let inserted = tx
        .query_opt(
            &insert,
            &[
                &rec.token_hash,
                &rec.run_id,
                &rec.call_id,
                &rec.thread_key,
                &rec.user_key,
                &super::storable(&rec.tool),
                &super::storable(&rec.summary),
                &rec.created_at,
                &rec.expires_at,
            ],
        )
        .await?;
    let stored = match inserted {
        Some(row) => {
            shared::enqueue_outbox(&tx, outbox, rec.created_at).await?;
            record(&row)?
        }
        None => for_call(&tx, &rec.run_id, &rec.call_id)
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "confirmation of call {} of {} vanished while being stored",
                    rec.call_id, rec.run_id
                ))
            })?,
    };
    if stored.state == ConfirmationState::Pending {
        let awaiting = tx
            .prepare_cached(
                "UPDATE runs SET status = 'awaiting_confirmation', updated_at = $2 \
                 WHERE run_id = $1 AND status IN ('queued', 'running')",
            )
            .await?;
        tx.execute(&awaiting, &[&rec.run_id, &rec.created_at])
            .await?;
    }
    tx.commit().await?;
    Ok(stored)
}

/// Answers a pending question once, puts its run back to `running` and
/// stores the audit event; one transaction.
async fn resolve(
    store: &PostgresStore,
    token_hash: &str,
    state: ConfirmationState,
    by: &str,
    at: Timestamp,
    audit: Option<&AuditEvent>,
) -> Result<Option<ConfirmationRecord>> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    // The run's row first, as a run's end takes it (and then its
    // confirmations): an answer racing the end of its run waits instead of
    // deadlocking with it. The lock is the one the update below takes
    // anyway, which lets steps and steers keep referencing the run.
    let lock = tx
        .prepare_cached(
            "SELECT run_id FROM runs \
             WHERE run_id = (SELECT run_id FROM confirmations WHERE token_hash = $1) \
             FOR NO KEY UPDATE",
        )
        .await?;
    tx.execute(&lock, &[&token_hash]).await?;
    // Of concurrent answers, the first to commit finds it pending; the others
    // find it answered (the row is re-checked after the winner's commit).
    let answer = tx
        .prepare_cached(concat!(
            "UPDATE confirmations SET state = $2, resolved_by = $3, resolved_at = $4 \
             WHERE token_hash = $1 AND state = 'pending' RETURNING ",
            columns!()
        ))
        .await?;
    let Some(row) = tx
        .query_opt(&answer, &[&token_hash, &state.as_str(), &by, &at])
        .await?
    else {
        // Dropping the transaction rolls it back: nothing changes.
        return Ok(None);
    };
    let rec = record(&row)?;
    let running = tx
        .prepare_cached(
            "UPDATE runs SET status = 'running', updated_at = $2 \
             WHERE run_id = $1 AND status = 'awaiting_confirmation'",
        )
        .await?;
    tx.execute(&running, &[&rec.run_id, &at]).await?;
    if let Some(event) = audit {
        shared::append_audit(&tx, event).await?;
    }
    tx.commit().await?;
    Ok(Some(rec))
}

#[async_trait::async_trait]
impl ConfirmationStore for PostgresStore {
    async fn request_confirmation(
        &self,
        rec: ConfirmationRecord,
        outbox: Vec<NewOutboxItem>,
    ) -> Result<ConfirmationRecord> {
        request(self, &rec, &outbox).await
    }

    async fn confirmation_for_call(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<Option<ConfirmationRecord>> {
        let client = self.client().await?;
        for_call(&client, run_id, call_id).await
    }

    async fn confirmation_by_hash(&self, token_hash: &str) -> Result<Option<ConfirmationRecord>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(concat!(
                "SELECT ",
                columns!(),
                " FROM confirmations WHERE token_hash = $1"
            ))
            .await?;
        client
            .query_opt(&stmt, &[&token_hash])
            .await?
            .map(|row| record(&row))
            .transpose()
    }

    async fn pending_confirmations(
        &self,
        run_id: Option<&str>,
        thread_key: Option<&str>,
    ) -> Result<Vec<ConfirmationRecord>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(concat!(
                "SELECT ",
                columns!(),
                " FROM confirmations WHERE state = 'pending' \
                 AND ($1::text IS NULL OR run_id = $1) \
                 AND ($2::text IS NULL OR thread_key = $2) ORDER BY created_at"
            ))
            .await?;
        client
            .query(&stmt, &[&run_id, &thread_key])
            .await?
            .iter()
            .map(record)
            .collect()
    }

    async fn resolve_confirmation(
        &self,
        token_hash: &str,
        state: ConfirmationState,
        by: &str,
        at: Timestamp,
        audit: Option<AuditEvent>,
    ) -> Result<Option<ConfirmationRecord>> {
        resolve(self, token_hash, state, by, at, audit.as_ref()).await
    }
}
