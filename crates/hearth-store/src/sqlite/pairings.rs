//! Pairing requests, paired users, cursors and seen platform events on
//! SQLite, and the [`OutboxStore`] and [`AccessStore`] implementations (the outbox half lives in
//! `outbox.rs`, answer messages in `reply_messages.rs`).

use hearth_core::Timestamp;
use rusqlite::{OptionalExtension, Row, params};

use super::SqliteStore;
use super::db::Db;
use super::outbox;
use super::reply_messages;
use super::rows::col;
use crate::channels::{
    AccessStore, AllowedUser, NewOutboxItem, OutboxCounts, OutboxItem, OutboxKind, OutboxStatus,
    OutboxStore, PairingLimits, PairingOutcome, PairingRecord, ReplyMessage,
};
use crate::error::Result;

fn pairing(row: &Row<'_>) -> Result<PairingRecord> {
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

fn pending_of(
    db: &mut Db<'_>,
    channel: &str,
    user_key: &str,
    now: Timestamp,
) -> Result<Option<PairingRecord>> {
    let stmt = db.stmt(
        "SELECT code, channel, user_key, display_name, target, requested_at, expires_at \
         FROM pairings WHERE channel = ?1 AND user_key = ?2 AND state = 'pending' \
         AND expires_at > ?3",
    )?;
    let mut found = stmt.query(params![channel, user_key, now])?;
    found.next()?.map(pairing).transpose()
}

/// When a denial of `user_key` on `channel` after `since` ends its
/// cool-down, if there is one.
fn denied_until(
    db: &mut Db<'_>,
    channel: &str,
    user_key: &str,
    since: Timestamp,
    cooldown_ms: i64,
) -> Result<Option<Timestamp>> {
    let last: Option<Timestamp> = db
        .stmt(
            "SELECT max(decided_at) FROM pairings WHERE channel = ?1 AND user_key = ?2 \
             AND state = 'denied' AND decided_at > ?3",
        )?
        .query_row(params![channel, user_key, since], |row| row.get(0))?;
    Ok(last.map(|at| at.saturating_add(cooldown_ms)))
}

fn request(
    db: &mut Db<'_>,
    rec: &PairingRecord,
    limits: PairingLimits,
    notice: String,
) -> Result<PairingOutcome> {
    let now = rec.requested_at;
    if let Some(existing) = pending_of(db, &rec.channel, &rec.user_key, now)? {
        return Ok(PairingOutcome::Existing(existing));
    }
    let cooldown = limits.denied_cooldown_ms.max(0);
    if let Some(until) = denied_until(
        db,
        &rec.channel,
        &rec.user_key,
        now.saturating_sub(cooldown),
        cooldown,
    )? {
        return Ok(PairingOutcome::CoolingDown { until });
    }
    // An expired request of the same user (or an old used code) must not
    // block the new one.
    db.stmt("DELETE FROM pairings WHERE code = ?1 OR (channel = ?2 AND user_key = ?3 AND state = 'pending')")?
        .execute(params![rec.code, rec.channel, rec.user_key])?;
    // The oldest pending requests give way, so that the channel keeps at
    // most `max_pending` with this one: strangers who keep asking cannot
    // take every place and lock a newcomer out.
    let keep = limits.max_pending.max(1) - 1;
    db.stmt(
        "DELETE FROM pairings WHERE code IN (SELECT code FROM pairings WHERE channel = ?1 \
         AND state = 'pending' AND expires_at > ?2 ORDER BY requested_at DESC, code DESC \
         LIMIT -1 OFFSET ?3)",
    )?
    .execute(params![rec.channel, now, keep])?;
    db.stmt(
        "INSERT INTO pairings (code, channel, user_key, display_name, target, requested_at, \
         expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        rec.code,
        rec.channel,
        rec.user_key,
        rec.display_name,
        rec.target,
        rec.requested_at,
        rec.expires_at
    ])?;
    let item = NewOutboxItem {
        channel: rec.channel.clone(),
        target: rec.target.clone(),
        kind: OutboxKind::Message,
        run_id: None,
        payload: notice,
    };
    outbox::enqueue(db, &[item], now)?;
    Ok(PairingOutcome::Created(rec.clone()))
}

fn pending(db: &mut Db<'_>, now: Timestamp) -> Result<Vec<PairingRecord>> {
    let stmt = db.stmt(
        "SELECT code, channel, user_key, display_name, target, requested_at, expires_at \
         FROM pairings WHERE state = 'pending' AND expires_at > ?1 ORDER BY requested_at, code",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query(params![now])?;
    while let Some(row) = found.next()? {
        out.push(pairing(row)?);
    }
    Ok(out)
}

/// Marks a pending, unexpired code approved or denied; the record when it was one.
fn decide(
    db: &mut Db<'_>,
    code: &str,
    now: Timestamp,
    approve: bool,
) -> Result<Option<PairingRecord>> {
    let sql: &'static str = if approve {
        concat!(
            "UPDATE pairings SET state = 'approved', decided_at = ?2 WHERE code = ?1 \
             AND state = 'pending' AND expires_at > ?2 RETURNING ",
            "code, channel, user_key, display_name, target, requested_at, expires_at"
        )
    } else {
        concat!(
            "UPDATE pairings SET state = 'denied', decided_at = ?2 WHERE code = ?1 \
             AND state = 'pending' AND expires_at > ?2 RETURNING ",
            "code, channel, user_key, display_name, target, requested_at, expires_at"
        )
    };
    let stmt = db.stmt(sql)?;
    let mut found = stmt.query(params![code, now])?;
    found.next()?.map(pairing).transpose()
}

fn approve(
    db: &mut Db<'_>,
    code: &str,
    now: Timestamp,
    notice: String,
) -> Result<Option<PairingRecord>> {
    let Some(rec) = decide(db, code, now, true)? else {
        return Ok(None);
    };
    db.stmt(
        "INSERT INTO channel_allowed (channel, user_key, added_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (channel, user_key) DO NOTHING",
    )?
    .execute(params![rec.channel, rec.user_key, now])?;
    let item = NewOutboxItem {
        channel: rec.channel.clone(),
        target: rec.target.clone(),
        kind: OutboxKind::Message,
        run_id: None,
        payload: notice,
    };
    outbox::enqueue(db, &[item], now)?;
    Ok(Some(rec))
}

fn allowed(db: &mut Db<'_>, channel: &str) -> Result<Vec<AllowedUser>> {
    let stmt = db.stmt(
        "SELECT user_key, added_at FROM channel_allowed WHERE channel = ?1 ORDER BY added_at, user_key",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query(params![channel])?;
    while let Some(row) = found.next()? {
        out.push(AllowedUser {
            user_key: col(row, 0)?,
            added_at: col(row, 1)?,
        });
    }
    Ok(out)
}

fn is_allowed(db: &mut Db<'_>, channel: &str, user_key: &str) -> Result<bool> {
    Ok(db
        .stmt("SELECT 1 FROM channel_allowed WHERE channel = ?1 AND user_key = ?2")?
        .query_row(params![channel, user_key], |_| Ok(()))
        .optional()?
        .is_some())
}

fn remove_allowed(db: &mut Db<'_>, channel: &str, user_key: &str) -> Result<bool> {
    let changed = db
        .stmt("DELETE FROM channel_allowed WHERE channel = ?1 AND user_key = ?2")?
        .execute(params![channel, user_key])?;
    Ok(changed == 1)
}

fn cursor(db: &mut Db<'_>, channel: &str, name: &str) -> Result<Option<String>> {
    Ok(db
        .stmt("SELECT value FROM channel_cursors WHERE channel = ?1 AND name = ?2")?
        .query_row(params![channel, name], |row| row.get(0))
        .optional()?)
}

fn set_cursor(db: &mut Db<'_>, channel: &str, name: &str, value: &str) -> Result<()> {
    db.stmt(
        "INSERT INTO channel_cursors (channel, name, value) VALUES (?1, ?2, ?3) \
         ON CONFLICT (channel, name) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![channel, name, value])?;
    Ok(())
}

fn first_sight(db: &mut Db<'_>, channel: &str, event_id: &str, now: Timestamp) -> Result<bool> {
    let inserted = db
        .stmt(
            "INSERT INTO channel_events (channel, event_id, seen_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (channel, event_id) DO NOTHING",
        )?
        .execute(params![channel, event_id, now])?;
    Ok(inserted == 1)
}

#[async_trait::async_trait]
impl OutboxStore for SqliteStore {
    async fn enqueue_outbox(&self, items: Vec<NewOutboxItem>, now: Timestamp) -> Result<Vec<i64>> {
        self.write(move |db| outbox::enqueue(db, &items, now)).await
    }
    async fn due_outbox(
        &self,
        channel: &str,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<OutboxItem>> {
        let channel = channel.to_owned();
        self.read(move |db| outbox::due(db, &channel, now, limit))
            .await
    }
    async fn next_outbox_due(&self, channel: &str, after: Timestamp) -> Result<Option<Timestamp>> {
        let channel = channel.to_owned();
        self.read(move |db| outbox::next_due(db, &channel, after))
            .await
    }
    async fn outbox_progress(&self, id: i64, progress: u32) -> Result<()> {
        self.write(move |db| outbox::progress(db, id, progress))
            .await
    }
    async fn outbox_sent(&self, id: i64) -> Result<()> {
        self.write(move |db| outbox::sent(db, id)).await
    }
    async fn outbox_retry(&self, id: i64, next_attempt_at: Timestamp, error: &str) -> Result<()> {
        let error = error.to_owned();
        self.write(move |db| outbox::retry_later(db, id, next_attempt_at, &error))
            .await
    }
    async fn outbox_failed(&self, id: i64, error: &str) -> Result<()> {
        let error = error.to_owned();
        self.write(move |db| outbox::failed(db, id, &error)).await
    }
    async fn list_outbox(
        &self,
        status: Option<OutboxStatus>,
        limit: u32,
    ) -> Result<Vec<OutboxItem>> {
        self.read(move |db| outbox::list(db, status, limit)).await
    }
    async fn get_outbox(&self, id: i64) -> Result<Option<OutboxItem>> {
        self.read(move |db| outbox::get(db, id)).await
    }
    async fn retry_outbox(&self, id: i64, now: Timestamp) -> Result<bool> {
        self.write(move |db| outbox::retry_failed(db, id, now))
            .await
    }
    async fn outbox_counts(&self) -> Result<Vec<(String, OutboxCounts)>> {
        self.read(outbox::counts).await
    }
    async fn cursor(&self, channel: &str, name: &str) -> Result<Option<String>> {
        let (channel, name) = (channel.to_owned(), name.to_owned());
        self.read(move |db| cursor(db, &channel, &name)).await
    }
    async fn set_cursor(&self, channel: &str, name: &str, value: &str) -> Result<()> {
        let (channel, name, value) = (channel.to_owned(), name.to_owned(), value.to_owned());
        self.write(move |db| set_cursor(db, &channel, &name, &value))
            .await
    }
    async fn first_sight(&self, channel: &str, event_id: &str, now: Timestamp) -> Result<bool> {
        let (channel, event_id) = (channel.to_owned(), event_id.to_owned());
        self.write(move |db| first_sight(db, &channel, &event_id, now))
            .await
    }
    async fn record_reply_message(&self, reply: ReplyMessage) -> Result<()> {
        // Losing one in a power cut only loses a reaction's rating.
        self.write_lazy(move |db| reply_messages::record(db, &reply))
            .await
    }
    async fn reply_message_run(
        &self,
        channel: &str,
        target: &str,
        message_id: &str,
    ) -> Result<Option<String>> {
        let (channel, target, message_id) =
            (channel.to_owned(), target.to_owned(), message_id.to_owned());
        self.read(move |db| reply_messages::run_of(db, &channel, &target, &message_id))
            .await
    }
}

#[async_trait::async_trait]
impl AccessStore for SqliteStore {
    async fn request_pairing(
        &self,
        rec: PairingRecord,
        limits: PairingLimits,
        notice: String,
    ) -> Result<PairingOutcome> {
        self.write(move |db| request(db, &rec, limits, notice))
            .await
    }
    async fn pending_pairings(&self, now: Timestamp) -> Result<Vec<PairingRecord>> {
        self.read(move |db| pending(db, now)).await
    }
    async fn approve_pairing(
        &self,
        code: &str,
        now: Timestamp,
        notice: String,
    ) -> Result<Option<PairingRecord>> {
        let code = code.to_owned();
        self.write(move |db| approve(db, &code, now, notice)).await
    }
    async fn deny_pairing(&self, code: &str, now: Timestamp) -> Result<Option<PairingRecord>> {
        let code = code.to_owned();
        self.write(move |db| decide(db, &code, now, false)).await
    }
    async fn allowed_users(&self, channel: &str) -> Result<Vec<AllowedUser>> {
        let channel = channel.to_owned();
        self.read(move |db| allowed(db, &channel)).await
    }
    async fn is_allowed(&self, channel: &str, user_key: &str) -> Result<bool> {
        let (channel, user_key) = (channel.to_owned(), user_key.to_owned());
        self.read(move |db| is_allowed(db, &channel, &user_key))
            .await
    }
    async fn remove_allowed(&self, channel: &str, user_key: &str) -> Result<bool> {
        let (channel, user_key) = (channel.to_owned(), user_key.to_owned());
        self.write(move |db| remove_allowed(db, &channel, &user_key))
            .await
    }
}
