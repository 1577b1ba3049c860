//! Pairing requests and the users they let in, on PostgreSQL.
//!
//! SQLite had one writer, so a request's checks and writes could not
//! interleave with another's. Here several replicas may take requests at
//! once, so a request holds a transaction-scoped advisory lock on its
//! channel: requests of one channel take turns (at most one pending code per
//! user, at most `max_pending` per channel), other channels do not wait.
//! Approving and denying are decided once by a single
//! `UPDATE ... WHERE state = 'pending' ... RETURNING`: of two concurrent
//! decisions, the second finds the row no longer pending.

use deadpool_postgres::GenericClient;
use hearth_core::Timestamp;
use tokio_postgres::Row;

use super::rows::col;
use super::{PostgresStore, shared, wide};
use crate::channels::{
    AccessStore, AllowedUser, NewOutboxItem, OutboxKind, PairingLimits, PairingOutcome,
    PairingRecord,
};
use crate::error::Result;

/// The `pairings` columns in the order [`pairing`] reads them.
macro_rules! pairing_columns {
    () => {
        "code, channel, user_key, display_name, target, requested_at, expires_at"
    };
}

/// A pairing request from a row selected with [`pairing_columns`].
fn pairing(row: &Row) -> Result<PairingRecord> {
    Ok(PairingRecord {
        code: col(row, 0)?,
        channel: col(row, 1)?,
        user_key: col(row, 2)?,
        display_name: col(row, 3)?,
        target: col(row, 4)?,
        requested_at: col(row, 5)?,
        expires_at: col(row, 6)?,
    })
}

/// The message telling a user about their request, to its conversation.
fn notice_item(rec: &PairingRecord, notice: String) -> NewOutboxItem {
    NewOutboxItem {
        channel: rec.channel.clone(),
        target: rec.target.clone(),
        kind: OutboxKind::Message,
        run_id: None,
        payload: notice,
    }
}

/// The checks and writes of a request, in the caller's transaction, which
/// already holds its channel's lock.
async fn request(
    c: &impl GenericClient,
    rec: &PairingRecord,
    limits: PairingLimits,
    notice: String,
) -> Result<PairingOutcome> {
    let now = rec.requested_at;
    let existing = c
        .query_opt(
            concat!(
                "SELECT ",
                pairing_columns!(),
                " FROM pairings WHERE channel = $1 AND user_key = $2 AND state = 'pending' \
                 AND expires_at > $3"
            ),
            &[&rec.channel, &rec.user_key, &now],
        )
        .await?;
    if let Some(row) = existing {
        return Ok(PairingOutcome::Existing(pairing(&row)?));
    }
    let cooldown = limits.denied_cooldown_ms.max(0);
    let last_denied: Option<Timestamp> = col(
        &c.query_one(
            "SELECT max(decided_at) FROM pairings WHERE channel = $1 AND user_key = $2 \
             AND state = 'denied' AND decided_at > $3",
            &[&rec.channel, &rec.user_key, &now.saturating_sub(cooldown)],
        )
        .await?,
        0,
    )?;
    if let Some(at) = last_denied {
        return Ok(PairingOutcome::CoolingDown {
            until: at.saturating_add(cooldown),
        });
    }
    // An expired request of the same user (or an old used code) must not
    // block the new one.
    c.execute(
        "DELETE FROM pairings WHERE code = $1 \
         OR (channel = $2 AND user_key = $3 AND state = 'pending')",
        &[&rec.code, &rec.channel, &rec.user_key],
    )
    .await?;
    // The oldest pending requests give way, so that the channel keeps at
    // most `max_pending` with this one: strangers who keep asking cannot
    // take every place and lock a newcomer out. The outer `state` test is
    // checked again on a row an approval changed meanwhile, so an approved
    // request is never deleted as if it were pending.
    let keep = wide(limits.max_pending.max(1) - 1);
    c.execute(
        "DELETE FROM pairings WHERE state = 'pending' AND code IN (SELECT code FROM pairings \
         WHERE channel = $1 AND state = 'pending' AND expires_at > $2 \
         ORDER BY requested_at DESC, code DESC OFFSET $3)",
        &[&rec.channel, &now, &keep],
    )
    .await?;
    c.execute(
        concat!(
            "INSERT INTO pairings (",
            pairing_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7)"
        ),
        &[
            &rec.code,
            &rec.channel,
            &rec.user_key,
            &super::storable(&rec.display_name),
            &rec.target,
            &rec.requested_at,
            &rec.expires_at,
        ],
    )
    .await?;
    shared::enqueue_outbox(c, &[notice_item(rec, notice)], now).await?;
    Ok(PairingOutcome::Created(rec.clone()))
}

/// Marks a pending, unexpired code approved or denied; the record when it
/// was one. One statement, so of concurrent decisions exactly one returns it.
async fn decide(
    c: &impl GenericClient,
    code: &str,
    now: Timestamp,
    approve: bool,
) -> Result<Option<PairingRecord>> {
    let state = if approve { "approved" } else { "denied" };
    c.query_opt(
        concat!(
            "UPDATE pairings SET state = $3, decided_at = $2 WHERE code = $1 \
             AND state = 'pending' AND expires_at > $2 RETURNING ",
            pairing_columns!()
        ),
        &[&code, &now, &state],
    )
    .await?
    .as_ref()
    .map(pairing)
    .transpose()
}

#[async_trait::async_trait]
impl AccessStore for PostgresStore {
    async fn request_pairing(
        &self,
        rec: PairingRecord,
        limits: PairingLimits,
        notice: String,
    ) -> Result<PairingOutcome> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // Requests of one channel take turns until this one commits; each
        // statement after the lock sees what the previous holder committed.
        // The key is a hash of a name of ours, 64 bits, so it does not meet
        // the migrations' lock or another channel's in practice.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&format!("hearth.pairings:{}", rec.channel)],
        )
        .await?;
        let outcome = request(&tx, &rec, limits, notice).await?;
        tx.commit().await?;
        Ok(outcome)
    }

    async fn pending_pairings(&self, now: Timestamp) -> Result<Vec<PairingRecord>> {
        let client = self.client().await?;
        let rows = client
            .query(
                concat!(
                    "SELECT ",
                    pairing_columns!(),
                    " FROM pairings WHERE state = 'pending' AND expires_at > $1 \
                     ORDER BY requested_at, code"
                ),
                &[&now],
            )
            .await?;
        rows.iter().map(pairing).collect()
    }

    async fn approve_pairing(
        &self,
        code: &str,
        now: Timestamp,
        notice: String,
    ) -> Result<Option<PairingRecord>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(rec) = decide(&tx, code, now, true).await? else {
            // Nothing was written; dropping the transaction rolls it back.
            return Ok(None);
        };
        tx.execute(
            "INSERT INTO channel_allowed (channel, user_key, added_at) VALUES ($1, $2, $3) \
             ON CONFLICT (channel, user_key) DO NOTHING",
            &[&rec.channel, &rec.user_key, &now],
        )
        .await?;
        shared::enqueue_outbox(&tx, &[notice_item(&rec, notice)], now).await?;
        tx.commit().await?;
        Ok(Some(rec))
    }

    async fn deny_pairing(&self, code: &str, now: Timestamp) -> Result<Option<PairingRecord>> {
        let client = self.client().await?;
        decide(&client, code, now, false).await
    }

    async fn allowed_users(&self, channel: &str) -> Result<Vec<AllowedUser>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT user_key, added_at FROM channel_allowed WHERE channel = $1 \
                 ORDER BY added_at, user_key",
                &[&channel],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(AllowedUser {
                    user_key: col(row, 0)?,
                    added_at: col(row, 1)?,
                })
            })
            .collect()
    }

    async fn is_allowed(&self, channel: &str, user_key: &str) -> Result<bool> {
        let client = self.client().await?;
        // Asked for every message of a channel that pairs its users.
        let stmt = client
            .prepare_cached("SELECT 1 FROM channel_allowed WHERE channel = $1 AND user_key = $2")
            .await?;
        Ok(client
            .query_opt(&stmt, &[&channel, &user_key])
            .await?
            .is_some())
    }

    async fn remove_allowed(&self, channel: &str, user_key: &str) -> Result<bool> {
        let client = self.client().await?;
        let changed = client
            .execute(
                "DELETE FROM channel_allowed WHERE channel = $1 AND user_key = $2",
                &[&channel, &user_key],
            )
            .await?;
        Ok(changed == 1)
    }
}
