//! Full thread history and compaction summaries on PostgreSQL.
//!
//! Unlike SQLite, no decoded context is kept between runs: replicas share the
//! database, and a context cached by one would miss what another appended or
//! deleted. Each read is instead one statement (one round trip, one
//! snapshot) that decodes what it returns.

use hearth_core::{Content, Timestamp};
use tokio_postgres::types::ToSql;

use super::PostgresStore;
use super::rows::{self, col};
use crate::codec::{json, to_json};
use crate::error::{Result, StoreError};
use crate::history::{
    HistoryEntry, HistoryPage, HistoryStore, SUMMARY_ROLE, StoredSummary, ThreadContext, compacted,
    joined_text,
};
use crate::runs::RunStart;

/// The newest summary of a thread, then the messages after its boundary,
/// oldest first: the summary is the one row with a `covers_to`, sorted
/// before the others.
const CONTEXT: &str = "WITH summary AS (SELECT id, content, covers_to FROM messages \
     WHERE thread_key = $1 AND covers_to IS NOT NULL ORDER BY id DESC LIMIT 1) \
     SELECT role, content, id, covers_to FROM messages \
     WHERE thread_key = $1 AND covers_to IS NULL \
     AND id > coalesce((SELECT covers_to FROM summary), 0) \
     UNION ALL SELECT NULL, content, id, covers_to FROM summary \
     ORDER BY covers_to NULLS LAST, id";

/// A page of history, newest first, each row with the thread's newest
/// summary (`id`, `covers_to`) that says which rows it replaces.
const PAGE: &str = "WITH newest AS (SELECT id, covers_to FROM messages \
     WHERE thread_key = $1 AND covers_to IS NOT NULL ORDER BY id DESC LIMIT 1) \
     SELECT m.id, m.role, m.content, m.run_id, m.created_at, n.id, n.covers_to \
     FROM messages m LEFT JOIN newest n ON TRUE \
     WHERE m.thread_key = $1 AND m.id < $2 ORDER BY m.id DESC LIMIT $3";

/// A thread's context from the rows of [`CONTEXT`].
fn context_of(found: &[tokio_postgres::Row]) -> Result<ThreadContext> {
    let mut rest = found;
    let mut summary = None;
    if let Some((first, after)) = rest.split_first()
        && let Some(covers_to) = col::<Option<i64>>(first, 3)?
    {
        let content: String = col(first, 1)?;
        let parts: Vec<Content> = json(&content, "summary content")?;
        summary = Some(StoredSummary {
            id: col(first, 2)?,
            text: joined_text(&parts),
            covers_to,
        });
        rest = after;
    }
    let mut messages = Vec::with_capacity(rest.len());
    let mut ids = Vec::with_capacity(rest.len());
    for row in rest {
        messages.push(rows::message(row)?);
        ids.push(col(row, 2)?);
    }
    Ok(ThreadContext {
        summary,
        messages,
        ids,
    })
}

/// A run's steps and steers and its thread's context: three reads sent
/// together on one connection (one round trip instead of two, on two
/// connections). Each is its own statement with its own snapshot, as when
/// they are read apart.
pub(super) async fn run_start(
    store: &PostgresStore,
    run_id: &str,
    thread_key: &str,
) -> Result<RunStart> {
    let client = store.client().await?;
    let steps_sql = super::runs::steps_sql();
    let (steps, steers, context) = tokio::try_join!(
        client.prepare_cached(&steps_sql),
        client.prepare_cached(super::runs::STEERS),
        client.prepare_cached(CONTEXT),
    )?;
    let of_run: [&(dyn ToSql + Sync); 1] = [&run_id];
    let of_thread: [&(dyn ToSql + Sync); 1] = [&thread_key];
    let (steps, steers, context) = tokio::try_join!(
        client.query(&steps, &of_run),
        client.query(&steers, &of_run),
        client.query(&context, &of_thread),
    )?;
    Ok(RunStart {
        steps: steps.iter().map(rows::step).collect::<Result<_>>()?,
        steers: steers
            .iter()
            .map(super::runs::steer)
            .collect::<Result<_>>()?,
        context: context_of(&context)?,
    })
}

#[async_trait::async_trait]
impl HistoryStore for PostgresStore {
    async fn thread_context(&self, thread_key: &str) -> Result<ThreadContext> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(CONTEXT).await?;
        context_of(&client.query(&stmt, &[&thread_key]).await?)
    }

    async fn append_summary(
        &self,
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
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO messages (thread_key, run_id, role, content, created_at, covers_to) \
                 VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            )
            .await?;
        let row = client
            .query_one(
                &stmt,
                &[
                    &thread_key,
                    &run_id,
                    &SUMMARY_ROLE,
                    &content,
                    &at,
                    &covers_to,
                ],
            )
            .await?;
        col(&row, 0)
    }

    async fn history_page(
        &self,
        thread_key: &str,
        limit: u32,
        before: Option<i64>,
    ) -> Result<HistoryPage> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(PAGE).await?;
        // One more than asked says whether an older page exists.
        let found = client
            .query(
                &stmt,
                &[
                    &thread_key,
                    &before.unwrap_or(i64::MAX),
                    &(i64::from(limit) + 1),
                ],
            )
            .await?;
        let mut page = HistoryPage::default();
        for row in &found {
            if page.messages.len() == limit as usize {
                page.next_before = page.messages.last().map(|m| m.id);
                break;
            }
            let id: i64 = col(row, 0)?;
            let role: String = col(row, 1)?;
            let content: String = col(row, 2)?;
            let parts: Vec<Content> = serde_json::from_str(&content)
                .map_err(|e| StoreError::Corrupt(format!("message {id} content: {e}")))?;
            let newest = match (col::<Option<i64>>(row, 5)?, col::<Option<i64>>(row, 6)?) {
                (Some(summary), Some(covers_to)) => Some((summary, covers_to)),
                _ => None,
            };
            let text = joined_text(&parts);
            page.messages.push(HistoryEntry {
                id,
                text: (!text.is_empty()).then_some(text),
                compacted: compacted(newest, id, &role),
                role,
                run_id: col(row, 3)?,
                created_at: col(row, 4)?,
            });
        }
        Ok(page)
    }
}
