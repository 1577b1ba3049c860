//! The channels' outbox on SQLite: replies owed to a conversation, queued in
//! the transaction that decided them and delivered in id order per target.

use hearth_core::Timestamp;
use rusqlite::{Row, params};

use super::db::Db;
use super::rows::col;
use crate::channels::{NewOutboxItem, OutboxCounts, OutboxItem, OutboxKind, OutboxStatus};
use crate::error::{Result, StoreError};

/// The channels' tables: outbox, pairing requests, paired users, cursors and
/// the platform event ids already handled.
pub(crate) const MIGRATION_V9: &str = "
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    target TEXT NOT NULL,
    kind TEXT NOT NULL,
    run_id TEXT,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    progress INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'pending',
    next_attempt_at INTEGER,
    last_error TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_queue ON outbox (channel, target, id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS outbox_status ON outbox (status, id);

CREATE TABLE IF NOT EXISTS pairings (
    code TEXT PRIMARY KEY NOT NULL,
    channel TEXT NOT NULL,
    user_key TEXT NOT NULL,
    display_name TEXT NOT NULL,
    target TEXT NOT NULL,
    requested_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    decided_at INTEGER
);
CREATE INDEX IF NOT EXISTS pairings_pending ON pairings (channel, user_key) WHERE state = 'pending';

CREATE TABLE IF NOT EXISTS channel_allowed (
    channel TEXT NOT NULL,
    user_key TEXT NOT NULL,
    added_at INTEGER NOT NULL,
    PRIMARY KEY (channel, user_key)
);

CREATE TABLE IF NOT EXISTS channel_cursors (
    channel TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (channel, name)
);

CREATE TABLE IF NOT EXISTS channel_events (
    channel TEXT NOT NULL,
    event_id TEXT NOT NULL,
    seen_at INTEGER NOT NULL,
    PRIMARY KEY (channel, event_id)
);
";

/// The `outbox` columns in the order [`item`] reads them.
macro_rules! outbox_columns {
    () => {
        "id, channel, target, kind, run_id, payload, attempts, progress, status, \
         next_attempt_at, last_error, created_at"
    };
}

fn item(row: &Row<'_>) -> Result<OutboxItem> {
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
        attempts: col(row, 6)?,
        progress: col(row, 7)?,
        status: OutboxStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown outbox status {status:?}")))?,
        next_attempt_at: col(row, 9)?,
        last_error: col(row, 10)?,
        created_at: col(row, 11)?,
    })
}

fn items(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
) -> Result<Vec<OutboxItem>> {
    let mut out = Vec::new();
    let mut found = stmt.query(params)?;
    while let Some(row) = found.next()? {
        out.push(item(row)?);
    }
    Ok(out)
}

/// Queues items in the caller's transaction (a run's end, a confirmation,
/// an approval): the reply is durable exactly when its cause is.
pub(crate) fn enqueue(
    db: &mut Db<'_>,
    items: &[NewOutboxItem],
    now: Timestamp,
) -> Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(items.len());
    for it in items {
        let id: i64 = db
            .stmt(
                "INSERT INTO outbox (channel, target, kind, run_id, payload, next_attempt_at, \
                 created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) RETURNING id",
            )?
            .query_row(
                params![
                    it.channel,
                    it.target,
                    it.kind.as_str(),
                    it.run_id,
                    it.payload,
                    now
                ],
                |row| row.get(0),
            )?;
        ids.push(id);
    }
    Ok(ids)
}

pub(crate) fn due(
    db: &mut Db<'_>,
    channel: &str,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<OutboxItem>> {
    let stmt = db.stmt(concat!(
        "SELECT ",
        outbox_columns!(),
        " FROM outbox o WHERE channel = ?1 AND status = 'pending' AND next_attempt_at <= ?2 \
         AND id = (SELECT min(id) FROM outbox h WHERE h.channel = o.channel \
                   AND h.target = o.target AND h.status = 'pending') \
         ORDER BY id LIMIT ?3"
    ))?;
    items(stmt, params![channel, now, limit])
}

pub(crate) fn next_due(
    db: &mut Db<'_>,
    channel: &str,
    after: Timestamp,
) -> Result<Option<Timestamp>> {
    let next: Option<Timestamp> = db
        .stmt(
            "SELECT min(next_attempt_at) FROM outbox o WHERE channel = ?1 AND status = 'pending' \
             AND next_attempt_at > ?2 \
             AND id = (SELECT min(id) FROM outbox h WHERE h.channel = o.channel \
                       AND h.target = o.target AND h.status = 'pending')",
        )?
        .query_row(params![channel, after], |row| row.get(0))?;
    Ok(next)
}

pub(crate) fn progress(db: &mut Db<'_>, id: i64, progress: u32) -> Result<()> {
    db.stmt("UPDATE outbox SET progress = ?2 WHERE id = ?1 AND status = 'pending'")?
        .execute(params![id, progress])?;
    Ok(())
}

pub(crate) fn sent(db: &mut Db<'_>, id: i64) -> Result<()> {
    db.stmt(
        "UPDATE outbox SET status = 'sent', payload = '', next_attempt_at = NULL, \
         last_error = NULL WHERE id = ?1 AND status = 'pending'",
    )?
    .execute(params![id])?;
    Ok(())
}

pub(crate) fn retry_later(db: &mut Db<'_>, id: i64, next: Timestamp, error: &str) -> Result<()> {
    db.stmt(
        "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?2, last_error = ?3 \
         WHERE id = ?1 AND status = 'pending'",
    )?
    .execute(params![id, next, error])?;
    Ok(())
}

pub(crate) fn failed(db: &mut Db<'_>, id: i64, error: &str) -> Result<()> {
    db.stmt(
        "UPDATE outbox SET status = 'failed', attempts = attempts + 1, next_attempt_at = NULL, \
         last_error = ?2 WHERE id = ?1 AND status = 'pending'",
    )?
    .execute(params![id, error])?;
    Ok(())
}

pub(crate) fn list(
    db: &mut Db<'_>,
    status: Option<OutboxStatus>,
    limit: u32,
) -> Result<Vec<OutboxItem>> {
    match status {
        Some(status) => {
            let stmt = db.stmt(concat!(
                "SELECT ",
                outbox_columns!(),
                " FROM outbox WHERE status = ?1 ORDER BY id DESC LIMIT ?2"
            ))?;
            items(stmt, params![status.as_str(), limit])
        }
        None => {
            let stmt = db.stmt(concat!(
                "SELECT ",
                outbox_columns!(),
                " FROM outbox ORDER BY id DESC LIMIT ?1"
            ))?;
            items(stmt, params![limit])
        }
    }
}

pub(crate) fn get(db: &mut Db<'_>, id: i64) -> Result<Option<OutboxItem>> {
    let stmt = db.stmt(concat!(
        "SELECT ",
        outbox_columns!(),
        " FROM outbox WHERE id = ?1"
    ))?;
    let mut found = stmt.query(params![id])?;
    found.next()?.map(item).transpose()
}

pub(crate) fn retry_failed(db: &mut Db<'_>, id: i64, now: Timestamp) -> Result<bool> {
    let changed = db
        .stmt(
            "UPDATE outbox SET status = 'pending', next_attempt_at = ?2 \
             WHERE id = ?1 AND status = 'failed'",
        )?
        .execute(params![id, now])?;
    Ok(changed == 1)
}

pub(crate) fn counts(db: &mut Db<'_>) -> Result<Vec<(String, OutboxCounts)>> {
    let stmt = db.stmt(
        "SELECT channel, sum(status = 'pending'), sum(status = 'failed') FROM outbox \
         WHERE status IN ('pending', 'failed') GROUP BY channel ORDER BY channel",
    )?;
    let mut out = Vec::new();
    let mut found = stmt.query([])?;
    while let Some(row) = found.next()? {
        let pending: i64 = col(row, 1)?;
        let failed: i64 = col(row, 2)?;
        out.push((
            col(row, 0)?,
            OutboxCounts {
                pending: u64::try_from(pending).unwrap_or(0),
                failed: u64::try_from(failed).unwrap_or(0),
            },
        ));
    }
    Ok(out)
}

/// Deletes settled outbox items, seen event ids and decided or expired
/// pairing requests older than `before`; pending items always stay.
pub(crate) fn purge(db: &mut Db<'_>, before: Timestamp) -> Result<u64> {
    let outbox = db
        .stmt("DELETE FROM outbox WHERE status IN ('sent', 'failed') AND created_at < ?1")?
        .execute(params![before])?;
    let events = db
        .stmt("DELETE FROM channel_events WHERE seen_at < ?1")?
        .execute(params![before])?;
    let pairings = db
        .stmt("DELETE FROM pairings WHERE expires_at < ?1")?
        .execute(params![before])?;
    Ok(u64::try_from(outbox + events + pairings).unwrap_or(u64::MAX))
}
