//! Which platform message carries which run's answer, on SQLite: written
//! by the outbox senders as they post answers, read when a reaction comes.

use hearth_core::Timestamp;
use rusqlite::{OptionalExtension, params};

use super::db::Db;
use crate::channels::ReplyMessage;
use crate::error::Result;

/// Answer messages by (channel, conversation, message id). The index on
/// `sent_at` keeps the retention pass from scanning the table.
pub(crate) const MIGRATION_V14: &str = "
CREATE TABLE IF NOT EXISTS reply_messages (
    channel TEXT NOT NULL,
    target TEXT NOT NULL,
    message_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    sent_at INTEGER NOT NULL,
    PRIMARY KEY (channel, target, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS reply_messages_sent_at ON reply_messages (sent_at);
";

pub(crate) fn record(db: &mut Db<'_>, r: &ReplyMessage) -> Result<()> {
    db.stmt(
        "INSERT INTO reply_messages (channel, target, message_id, run_id, sent_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (channel, target, message_id) \
         DO UPDATE SET run_id = excluded.run_id, sent_at = excluded.sent_at",
    )?
    .execute(params![
        r.channel,
        r.target,
        r.message_id,
        r.run_id,
        r.sent_at
    ])?;
    Ok(())
}

pub(crate) fn run_of(
    db: &mut Db<'_>,
    channel: &str,
    target: &str,
    message_id: &str,
) -> Result<Option<String>> {
    Ok(db
        .stmt(
            "SELECT run_id FROM reply_messages \
             WHERE channel = ?1 AND target = ?2 AND message_id = ?3",
        )?
        .query_row(params![channel, target, message_id], |row| row.get(0))
        .optional()?)
}

/// Deletes the records of messages posted before `before`.
pub(crate) fn purge(db: &mut Db<'_>, before: Timestamp) -> Result<u64> {
    let n = db
        .stmt("DELETE FROM reply_messages WHERE sent_at < ?1")?
        .execute(params![before])?;
    Ok(u64::try_from(n).unwrap_or(u64::MAX))
}
