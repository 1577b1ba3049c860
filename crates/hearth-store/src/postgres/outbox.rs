//! The channels' outbox on PostgreSQL: replies owed to a conversation,
//! queued in the transaction that decided them and delivered in id order per
//! target; and the platform state the channel loops keep (cursors, event ids
//! already handled, which messages carry a run's answer).
//!
//! Every write here is one statement, so it is atomic on its own; the ones
//! several replicas may race on (`first_sight`, the status changes guarded by
//! `status = 'pending'`) decide the race in that statement. Replicas deliver
//! one outbox by claiming each conversation's head item (`claim_outbox`):
//! the claim names the replica and lapses at a time, so a dead sender's
//! conversations go to another replica once its claim expires.

use deadpool_postgres::GenericClient;
use hearth_core::Timestamp;
use tokio_postgres::Row;

use super::rows::{col, unsigned};
use super::{PostgresStore, narrow, shared, wide};
use crate::channels::{
    NewOutboxItem, OutboxCounts, OutboxItem, OutboxKind, OutboxStatus, OutboxStore, ReplyMessage,
};
use crate::error::{Result, StoreError};

/// The `outbox` columns in the order [`item`] reads them.
macro_rules! outbox_columns {
    () => {
        "id, channel, target, kind, run_id, payload, attempts, progress, status, \
         next_attempt_at, last_error, created_at"
    };
}

/// An outbox item from a row selected with [`outbox_columns`].
fn item(row: &Row) -> Result<OutboxItem> {
    let kind: String = col(row, 3)?;
    let status: String = col(row, 8)?;
    Ok(OutboxItem {
        id: col(row, 0)?,
        channel: col(row, 1)?,
        target: col(row, 2)?,
        kind: OutboxKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown outbox kind {kind:?}")))?,
        run_id: col(row, 4)?,
        payload: col(row, 5)?,
        attempts: unsigned(row, 6)?,
        progress: unsigned(row, 7)?,
        status: OutboxStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown outbox status {status:?}")))?,
        next_attempt_at: col(row, 9)?,
        last_error: col(row, 10)?,
        created_at: col(row, 11)?,
    })
}

fn items(rows: &[Row]) -> Result<Vec<OutboxItem>> {
    rows.iter().map(item).collect()
}

/// Deletes settled outbox items, seen event ids and decided or expired
/// pairing requests older than `before`; pending items always stay. For
/// `RetentionStore::purge_expired`, in its transaction.
pub(crate) async fn purge(c: &impl GenericClient, before: Timestamp) -> Result<u64> {
    let outbox = c
        .execute(
            "DELETE FROM outbox WHERE status IN ('sent', 'failed') AND created_at < $1",
            &[&before],
        )
        .await?;
    let events = c
        .execute("DELETE FROM channel_events WHERE seen_at < $1", &[&before])
        .await?;
    let pairings = c
        .execute("DELETE FROM pairings WHERE expires_at < $1", &[&before])
        .await?;
    Ok(outbox.saturating_add(events).saturating_add(pairings))
}

/// Deletes the records of answer messages posted before `before`. For
/// `RetentionStore::purge_expired`, in its transaction.
pub(crate) async fn purge_reply_messages(c: &impl GenericClient, before: Timestamp) -> Result<u64> {
    Ok(
        c.execute("DELETE FROM reply_messages WHERE sent_at < $1", &[&before])
            .await?,
    )
}

impl PostgresStore {
    /// Runs one status change of a pending item (the guard in `sql` makes a
    /// settled item stay as it is).
    async fn outbox_update(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await?;
        Ok(client.execute(&stmt, params).await?)
    }
}

#[async_trait::async_trait]
impl OutboxStore for PostgresStore {
    async fn enqueue_outbox(&self, items: Vec<NewOutboxItem>, now: Timestamp) -> Result<Vec<i64>> {
        // All or none, as one write on SQLite.
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let ids = shared::enqueue_outbox(&tx, &items, now).await?;
        tx.commit().await?;
        Ok(ids)
    }

    async fn due_outbox(
        &self,
        channel: &str,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<OutboxItem>> {
        let client = self.client().await?;
        // Only a target's head counts: an item behind a head that waits for
        // its retry waits too, so a conversation's replies keep their order.
        let stmt = client
            .prepare_cached(concat!(
                "SELECT ",
                outbox_columns!(),
                " FROM outbox o WHERE channel = $1 AND status = 'pending' \
                 AND next_attempt_at <= $2 \
                 AND id = (SELECT min(id) FROM outbox h WHERE h.channel = o.channel \
                           AND h.target = o.target AND h.status = 'pending') \
                 ORDER BY id LIMIT $3"
            ))
            .await?;
        let rows = client.query(&stmt, &[&channel, &now, &wide(limit)]).await?;
        items(&rows)
    }

    async fn claim_outbox(
        &self,
        channel: &str,
        now: Timestamp,
        limit: u32,
        claimer: &str,
        until: Timestamp,
    ) -> Result<Vec<OutboxItem>> {
        let client = self.client().await?;
        // A head locked by a replica claiming it now is skipped; one claimed
        // by a replica that committed meanwhile is re-read under the lock
        // (READ COMMITTED re-checks the row's new version) and left out, so
        // of racing replicas exactly one gets each head.
        let stmt = client
            .prepare_cached(concat!(
                "UPDATE outbox SET claimed_by = $4, claimed_until = $5 WHERE id IN (\
                 SELECT id FROM outbox o WHERE channel = $1 AND status = 'pending' \
                 AND next_attempt_at <= $2 \
                 AND (claimed_until IS NULL OR claimed_until < $2 OR claimed_by = $4) \
                 AND id = (SELECT min(id) FROM outbox h WHERE h.channel = o.channel \
                           AND h.target = o.target AND h.status = 'pending') \
                 ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING ",
                outbox_columns!()
            ))
            .await?;
        let rows = client
            .query(&stmt, &[&channel, &now, &wide(limit), &claimer, &until])
            .await?;
        let mut claimed = items(&rows)?;
        claimed.sort_by_key(|i| i.id);
        Ok(claimed)
    }

    async fn renew_outbox_claims(
        &self,
        channel: &str,
        claimer: &str,
        until: Timestamp,
    ) -> Result<()> {
        self.outbox_update(
            "UPDATE outbox SET claimed_until = $3 WHERE channel = $1 AND claimed_by = $2 \
             AND status = 'pending'",
            &[&channel, &claimer, &until],
        )
        .await?;
        Ok(())
    }

    async fn hold_outbox_claim(&self, id: i64, claimer: &str, until: Timestamp) -> Result<bool> {
        // A lapsed claim nobody took since is still this claimer's: taking
        // it up again is safe, as no other process sends meanwhile.
        let held = self
            .outbox_update(
                "UPDATE outbox SET claimed_until = $3 WHERE id = $1 AND claimed_by = $2 \
                 AND status = 'pending'",
                &[&id, &claimer, &until],
            )
            .await?;
        Ok(held == 1)
    }

    async fn release_outbox_claims(&self, channel: &str, claimer: &str) -> Result<()> {
        self.outbox_update(
            "UPDATE outbox SET claimed_by = NULL, claimed_until = NULL WHERE channel = $1 \
             AND claimed_by = $2 AND status = 'pending'",
            &[&channel, &claimer],
        )
        .await?;
        Ok(())
    }

    async fn next_outbox_due(&self, channel: &str, after: Timestamp) -> Result<Option<Timestamp>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT min(next_attempt_at) FROM outbox o WHERE channel = $1 \
                 AND status = 'pending' AND next_attempt_at > $2 \
                 AND id = (SELECT min(id) FROM outbox h WHERE h.channel = o.channel \
                           AND h.target = o.target AND h.status = 'pending')",
            )
            .await?;
        let row = client.query_one(&stmt, &[&channel, &after]).await?;
        col(&row, 0)
    }

    async fn outbox_progress(&self, id: i64, progress: u32) -> Result<()> {
        self.outbox_update(
            "UPDATE outbox SET progress = $2 WHERE id = $1 AND status = 'pending'",
            &[&id, &wide(progress)],
        )
        .await?;
        Ok(())
    }

    async fn outbox_sent(&self, id: i64) -> Result<()> {
        self.outbox_update(
            "UPDATE outbox SET status = 'sent', payload = '', next_attempt_at = NULL, \
             last_error = NULL WHERE id = $1 AND status = 'pending'",
            &[&id],
        )
        .await?;
        Ok(())
    }

    async fn outbox_retry(&self, id: i64, next_attempt_at: Timestamp, error: &str) -> Result<()> {
        self.outbox_update(
            "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3 \
             WHERE id = $1 AND status = 'pending'",
            &[&id, &next_attempt_at, &super::storable(error)],
        )
        .await?;
        Ok(())
    }

    async fn outbox_failed(&self, id: i64, error: &str) -> Result<()> {
        self.outbox_update(
            "UPDATE outbox SET status = 'failed', attempts = attempts + 1, \
             next_attempt_at = NULL, last_error = $2 WHERE id = $1 AND status = 'pending'",
            &[&id, &super::storable(error)],
        )
        .await?;
        Ok(())
    }

    async fn list_outbox(
        &self,
        status: Option<OutboxStatus>,
        limit: u32,
    ) -> Result<Vec<OutboxItem>> {
        let client = self.client().await?;
        let rows = match status {
            Some(status) => {
                client
                    .query(
                        concat!(
                            "SELECT ",
                            outbox_columns!(),
                            " FROM outbox WHERE status = $1 ORDER BY id DESC LIMIT $2"
                        ),
                        &[&status.as_str(), &wide(limit)],
                    )
                    .await?
            }
            None => {
                client
                    .query(
                        concat!(
                            "SELECT ",
                            outbox_columns!(),
                            " FROM outbox ORDER BY id DESC LIMIT $1"
                        ),
                        &[&wide(limit)],
                    )
                    .await?
            }
        };
        items(&rows)
    }

    async fn get_outbox(&self, id: i64) -> Result<Option<OutboxItem>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(concat!(
                "SELECT ",
                outbox_columns!(),
                " FROM outbox WHERE id = $1"
            ))
            .await?;
        client
            .query_opt(&stmt, &[&id])
            .await?
            .as_ref()
            .map(item)
            .transpose()
    }

    async fn retry_outbox(&self, id: i64, now: Timestamp) -> Result<bool> {
        // The guard makes one of two concurrent retries by hand the one.
        let changed = self
            .outbox_update(
                "UPDATE outbox SET status = 'pending', next_attempt_at = $2 \
                 WHERE id = $1 AND status = 'failed'",
                &[&id, &now],
            )
            .await?;
        Ok(changed == 1)
    }

    async fn outbox_counts(&self) -> Result<Vec<(String, OutboxCounts)>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT channel, count(*) FILTER (WHERE status = 'pending'), \
                 count(*) FILTER (WHERE status = 'failed') FROM outbox \
                 WHERE status IN ('pending', 'failed') GROUP BY channel ORDER BY channel",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    col(row, 0)?,
                    OutboxCounts {
                        pending: narrow(col::<i64>(row, 1)?),
                        failed: narrow(col::<i64>(row, 2)?),
                    },
                ))
            })
            .collect()
    }

    async fn cursor(&self, channel: &str, name: &str) -> Result<Option<String>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("SELECT value FROM channel_cursors WHERE channel = $1 AND name = $2")
            .await?;
        client
            .query_opt(&stmt, &[&channel, &name])
            .await?
            .map(|row| col(&row, 0))
            .transpose()
    }

    async fn set_cursor(&self, channel: &str, name: &str, value: &str) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO channel_cursors (channel, name, value) VALUES ($1, $2, $3) \
                 ON CONFLICT (channel, name) DO UPDATE SET value = excluded.value",
            )
            .await?;
        client.execute(&stmt, &[&channel, &name, &value]).await?;
        Ok(())
    }

    async fn first_sight(&self, channel: &str, event_id: &str, now: Timestamp) -> Result<bool> {
        let client = self.client().await?;
        // Of concurrent inserts of one key, PostgreSQL lets one insert and
        // makes the others wait for it and then do nothing: exactly one
        // caller sees its row counted, on whichever replica it runs.
        let stmt = client
            .prepare_cached(
                "INSERT INTO channel_events (channel, event_id, seen_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (channel, event_id) DO NOTHING",
            )
            .await?;
        let inserted = client.execute(&stmt, &[&channel, &event_id, &now]).await?;
        Ok(inserted == 1)
    }

    async fn record_reply_message(&self, reply: ReplyMessage) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO reply_messages (channel, target, message_id, run_id, sent_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (channel, target, message_id) \
                 DO UPDATE SET run_id = excluded.run_id, sent_at = excluded.sent_at",
            )
            .await?;
        client
            .execute(
                &stmt,
                &[
                    &reply.channel,
                    &reply.target,
                    &reply.message_id,
                    &reply.run_id,
                    &reply.sent_at,
                ],
            )
            .await?;
        Ok(())
    }

    async fn reply_message_run(
        &self,
        channel: &str,
        target: &str,
        message_id: &str,
    ) -> Result<Option<String>> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT run_id FROM reply_messages \
                 WHERE channel = $1 AND target = $2 AND message_id = $3",
            )
            .await?;
        client
            .query_opt(&stmt, &[&channel, &target, &message_id])
            .await?
            .map(|row| col(&row, 0))
            .transpose()
    }
}
