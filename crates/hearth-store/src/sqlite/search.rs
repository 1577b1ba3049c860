//! Searching every thread: keys by prefix (the `runs_thread_seq` index,
//! read in key order and stopped after a page of distinct keys) and
//! messages by words (the `messages_fts` full-text index, newest first).

use rusqlite::params;

use super::db::Db;
use crate::error::Result;
use crate::memory::query_words;
use crate::records::MessageHit;
use crate::threads::prefix_end;

/// The full-text index of the words people and the model wrote: the text
/// parts of each message's content (its JSON's `text` fields; a content
/// that is not JSON as it is), not the JSON around them. A contentless
/// FTS5 table (the text stays in `messages` only), kept by triggers in the
/// transaction that writes or deletes a message; existing messages are
/// indexed by the migration. A macro, so the migration can `concat!` it.
macro_rules! messages_fts {
    () => {
        "
CREATE VIRTUAL TABLE messages_fts USING fts5(body, content = '');
INSERT INTO messages_fts (rowid, body) SELECT id, CASE WHEN json_valid(content) \
    THEN (SELECT group_concat(json_extract(p.value, '$.text'), ' ') FROM json_each(content) AS p) \
    ELSE content END FROM messages;
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, body) VALUES (NEW.id, CASE WHEN json_valid(NEW.content) \
        THEN (SELECT group_concat(json_extract(p.value, '$.text'), ' ') FROM json_each(NEW.content) AS p) \
        ELSE NEW.content END);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, body) VALUES ('delete', OLD.id, \
        CASE WHEN json_valid(OLD.content) \
        THEN (SELECT group_concat(json_extract(p.value, '$.text'), ' ') FROM json_each(OLD.content) AS p) \
        ELSE OLD.content END);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, body) VALUES ('delete', OLD.id, \
        CASE WHEN json_valid(OLD.content) \
        THEN (SELECT group_concat(json_extract(p.value, '$.text'), ' ') FROM json_each(OLD.content) AS p) \
        ELSE OLD.content END);
    INSERT INTO messages_fts (rowid, body) VALUES (NEW.id, CASE WHEN json_valid(NEW.content) \
        THEN (SELECT group_concat(json_extract(p.value, '$.text'), ' ') FROM json_each(NEW.content) AS p) \
        ELSE NEW.content END);
END;
"
    };
}
pub(super) use messages_fts;

pub(super) fn thread_keys(
    db: &mut Db<'_>,
    prefix: &str,
    after: Option<&str>,
    limit: u32,
) -> Result<Vec<String>> {
    // DISTINCT over the index in key order stops after `limit` keys: it
    // reads the runs of those threads only.
    let stmt = db.stmt(
        "SELECT DISTINCT thread_key FROM runs WHERE thread_key >= ?1 AND thread_key < ?2 \
         AND thread_key > ?3 ORDER BY thread_key LIMIT ?4",
    )?;
    let keys = stmt
        .query_map(
            params![prefix, prefix_end(prefix), after.unwrap_or(""), limit],
            |row| row.get::<_, String>(0),
        )?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(keys.into_iter().filter(|k| k.starts_with(prefix)).collect())
}

/// Every word of `text` as a quoted FTS5 term (so nothing in it is query
/// syntax), all required.
fn all_words(text: &str) -> Option<String> {
    let terms: Vec<String> = query_words(text)
        .into_iter()
        .map(|t| format!("\"{t}\""))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" AND "))
}

pub(super) fn search_messages(
    db: &mut Db<'_>,
    text: &str,
    before: Option<i64>,
    limit: u32,
) -> Result<Vec<MessageHit>> {
    let Some(query) = all_words(text) else {
        return Ok(Vec::new());
    };
    // The index hands out its matches by rowid, newest first, and stops
    // after a page; the messages are then read by id.
    let stmt = db.stmt(
        "SELECT m.id, m.thread_key, m.role, m.content, m.created_at \
         FROM (SELECT rowid AS id FROM messages_fts WHERE messages_fts MATCH ?1 AND rowid < ?2 \
               ORDER BY rowid DESC LIMIT ?3) AS hit \
         JOIN messages m ON m.id = hit.id ORDER BY m.id DESC",
    )?;
    let hits = stmt
        .query_map(params![query, before.unwrap_or(i64::MAX), limit], |row| {
            Ok(MessageHit {
                id: row.get(0)?,
                thread_key: row.get(1)?,
                role: row.get(2)?,
                content: row.get(3)?,
                created_at: row.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(hits)
}
