//! Full thread history and compaction summaries on SQLite.

use hearth_core::{Content, Timestamp};
use rusqlite::params;

use super::SqliteStore;
use super::db::Db;
use super::rows::{self, col, to_json};
use crate::context_cache::ContextCache;
use crate::error::{Result, StoreError};
use crate::history::{
    HistoryEntry, HistoryPage, HistoryStore, SUMMARY_ROLE, StoredSummary, ThreadContext, compacted,
    joined_text,
};

/// Summaries are rows of `messages` with the id of the last message they
/// replace; the partial index finds a thread's newest one without scanning
/// its history.
pub(crate) const MIGRATION_V11: &str = "
ALTER TABLE messages ADD COLUMN covers_to INTEGER;
CREATE INDEX IF NOT EXISTS messages_summaries ON messages (thread_key, id)
    WHERE covers_to IS NOT NULL;
";

fn latest_summary(db: &mut Db<'_>, thread_key: &str) -> Result<Option<StoredSummary>> {
    let stmt = db.stmt(
        "SELECT id, content, covers_to FROM messages \
         WHERE thread_key = ?1 AND covers_to IS NOT NULL ORDER BY id DESC LIMIT 1",
    )?;
    let mut found = stmt.query(params![thread_key])?;
    let Some(row) = found.next()? else {
        return Ok(None);
    };
    let content: String = col(row, 1)?;
    let parts: Vec<Content> = serde_json::from_str(&content)
        .map_err(|e| StoreError::Corrupt(format!("summary content: {e}")))?;
    Ok(Some(StoredSummary {
        id: col(row, 0)?,
        text: joined_text(&parts),
        covers_to: col(row, 2)?,
    }))
}

fn thread_context(
    db: &mut Db<'_>,
    cache: &ContextCache,
    thread_key: &str,
) -> Result<ThreadContext> {
    // Read first: a deletion that commits during this read makes the result
    // one the cache refuses.
    let epoch = cache.epoch();
    let summary = latest_summary(db, thread_key)?;
    let summary_id = summary.as_ref().map(|s| s.id);
    let mut after = summary.as_ref().map_or(0, |s| s.covers_to);
    let (mut messages, mut ids) = match cache.take(thread_key, epoch, summary_id) {
        Some(cached) => {
            after = after.max(cached.ids.last().copied().unwrap_or(0));
            (cached.messages, cached.ids)
        }
        None => (Vec::new(), Vec::new()),
    };
    let stmt = db.stmt(
        "SELECT role, content, id FROM messages \
         WHERE thread_key = ?1 AND id > ?2 AND covers_to IS NULL ORDER BY id",
    )?;
    let before = messages.len();
    let mut found = stmt.query(params![thread_key, after])?;
    while let Some(row) = found.next()? {
        messages.push(rows::message(row)?);
        ids.push(col(row, 2)?);
    }
    cache.count_decoded(messages.len() - before);
    // Handed out, not copied: the run gives them back (`keep_context`).
    cache.lend(thread_key, epoch, summary.clone());
    Ok(ThreadContext {
        summary,
        messages,
        ids,
    })
}

fn append_summary(
    db: &mut Db<'_>,
    thread_key: &str,
    run_id: &str,
    text: &str,
    covers_to: i64,
    at: Timestamp,
) -> Result<i64> {
    let content = to_json(
        &[Content::Text {
            text: text.to_owned(),
        }],
        "summary content",
    )?;
    db.stmt(
        "INSERT INTO messages (thread_key, run_id, role, content, created_at, covers_to) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        thread_key,
        run_id,
        SUMMARY_ROLE,
        content,
        at,
        covers_to
    ])?;
    Ok(db.conn().last_insert_rowid())
}

fn history_page(
    db: &mut Db<'_>,
    thread_key: &str,
    limit: u32,
    before: Option<i64>,
) -> Result<HistoryPage> {
    let boundary = db
        .stmt(
            "SELECT id, covers_to FROM messages \
             WHERE thread_key = ?1 AND covers_to IS NOT NULL ORDER BY id DESC LIMIT 1",
        )?
        .query(params![thread_key])?
        .next()?
        .map(|row| Ok::<_, StoreError>((col::<i64>(row, 0)?, col::<i64>(row, 1)?)))
        .transpose()?;
    let stmt = db.stmt(
        "SELECT id, role, content, run_id, created_at FROM messages \
         WHERE thread_key = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3",
    )?;
    // One more than asked says whether an older page exists.
    let mut found = stmt.query(params![
        thread_key,
        before.unwrap_or(i64::MAX),
        i64::from(limit) + 1
    ])?;
    let mut page = HistoryPage::default();
    while let Some(row) = found.next()? {
        if page.messages.len() == limit as usize {
            page.next_before = page.messages.last().map(|m| m.id);
            break;
        }
        let id: i64 = col(row, 0)?;
        let role: String = col(row, 1)?;
        let content: String = col(row, 2)?;
        let parts: Vec<Content> = serde_json::from_str(&content)
            .map_err(|e| StoreError::Corrupt(format!("message {id} content: {e}")))?;
        let text = joined_text(&parts);
        page.messages.push(HistoryEntry {
            id,
            text: (!text.is_empty()).then_some(text),
            compacted: compacted(boundary, id, &role),
            role,
            run_id: col(row, 3)?,
            created_at: col(row, 4)?,
        });
    }
    Ok(page)
}

#[async_trait::async_trait]
impl HistoryStore for SqliteStore {
    async fn thread_context(&self, thread_key: &str) -> Result<ThreadContext> {
        let thread_key = thread_key.to_owned();
        let cache = std::sync::Arc::clone(&self.inner.contexts);
        self.read(move |db| thread_context(db, &cache, &thread_key))
            .await
    }

    fn keep_context(
        &self,
        thread_key: &str,
        run_id: &str,
        messages: Vec<hearth_core::Message>,
        ids: Vec<i64>,
    ) {
        self.inner
            .contexts
            .give_back(thread_key, run_id, messages, ids);
    }

    async fn append_summary(
        &self,
        thread_key: &str,
        run_id: &str,
        text: &str,
        covers_to: i64,
        at: Timestamp,
    ) -> Result<i64> {
        let (thread_key, run_id, text) =
            (thread_key.to_owned(), run_id.to_owned(), text.to_owned());
        self.write(move |db| append_summary(db, &thread_key, &run_id, &text, covers_to, at))
            .await
    }

    async fn history_page(
        &self,
        thread_key: &str,
        limit: u32,
        before: Option<i64>,
    ) -> Result<HistoryPage> {
        let thread_key = thread_key.to_owned();
        self.read(move |db| history_page(db, &thread_key, limit, before))
            .await
    }
}
