//! Searching every thread on PostgreSQL: keys by prefix (an index of
//! `runs.thread_key` in byte order, read in key order and stopped after a
//! page of distinct keys) and messages by words (a GIN index of the words
//! of each message's text parts, `hearth_message_words` in migration 0012,
//! the newest first).

use super::rows::col;
use super::{PostgresStore, wide};
use crate::error::Result;
use crate::memory::query_words;
use crate::records::MessageHit;
use crate::threads::prefix_end;

impl PostgresStore {
    pub(super) async fn find_thread_keys(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>> {
        let client = self.client().await?;
        // `COLLATE "C"` compares bytes, as SQLite does, and matches the index.
        let stmt = client
            .prepare_cached(
                "SELECT DISTINCT thread_key COLLATE \"C\" FROM runs \
                 WHERE thread_key COLLATE \"C\" >= $1 AND thread_key COLLATE \"C\" < $2 \
                 AND thread_key COLLATE \"C\" > $3 ORDER BY 1 LIMIT $4",
            )
            .await?;
        let found = client
            .query(
                &stmt,
                &[
                    &prefix,
                    &prefix_end(prefix),
                    &after.unwrap_or(""),
                    &wide(limit),
                ],
            )
            .await?;
        let keys = found
            .iter()
            .map(|r| col::<String>(r, 0))
            .collect::<Result<Vec<_>>>()?;
        Ok(keys.into_iter().filter(|k| k.starts_with(prefix)).collect())
    }

    pub(super) async fn find_messages(
        &self,
        text: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<MessageHit>> {
        let words = query_words(text);
        if words.is_empty() {
            return Ok(Vec::new());
        }
        // Words of letters and digits only: none of websearch's syntax
        // survives, and words side by side are all required.
        let query = words.join(" ");
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT id, thread_key, role, content, created_at FROM messages \
                 WHERE hearth_message_words(content) @@ websearch_to_tsquery('simple', $1) \
                 AND id < $2 ORDER BY id DESC LIMIT $3",
            )
            .await?;
        let found = client
            .query(&stmt, &[&query, &before.unwrap_or(i64::MAX), &wide(limit)])
            .await?;
        found
            .iter()
            .map(|r| {
                Ok(MessageHit {
                    id: col(r, 0)?,
                    thread_key: col(r, 1)?,
                    role: col(r, 2)?,
                    content: col(r, 3)?,
                    created_at: col(r, 4)?,
                })
            })
            .collect()
    }
}
