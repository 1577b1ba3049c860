//! Full thread history and compaction summaries on PostgreSQL.
//!
//! Each replica keeps the decoded context of the threads that talk most
//! (`crate::context_cache`), as SQLite does, so a thread that keeps talking
//! decodes only its new messages. The read stays one statement (one round
//! trip, one snapshot): it takes the newest summary, the messages after the
//! last cached one (or after the summary's boundary), and whether the first
//! cached message still exists. Another replica may have appended to the
//! thread (those rows come after the last cached id: a thread's messages are
//! written by its runs' ends, one run at a time, so they commit in the order
//! of their ids) or deleted its history (always all of it, so the first
//! cached row is gone, and the statement then reads the whole context). A
//! newer summary drops what it covers from the cached rows; one that covers
//! less than they start from (written late by a replica that had stalled)
//! makes the statement read the whole context too.

use hearth_core::{Content, Message, Timestamp};
use tokio_postgres::types::ToSql;

use super::PostgresStore;
use super::rows::{self, col};
use crate::codec::{json, to_json};
use crate::context_cache::Cached;
use crate::error::{Result, StoreError};
use crate::history::{
    HistoryEntry, HistoryPage, HistoryStore, SUMMARY_ROLE, StoredSummary, ThreadContext, compacted,
    joined_text,
};
use crate::runs::RunStart;

/// The newest summary of a thread, then a row that says whether what is held
/// of the thread can be kept: message `$3` (the first held one) still exists,
/// and the summary is `$4` (the one the held context followed) or covers at
/// least up to `$3` (a newer one, after a prefix of what is held; one that
/// covers less, written late by a replica that had stalled, would leave out
/// rows before the held ones). Then the messages after the summary's
/// boundary and, when what is held is kept, after `$2` (the last held one),
/// oldest first. The summary is the one row with a `covers_to`; the check is
/// the one without an id.
const CONTEXT: &str = "WITH summary AS (SELECT id, content, covers_to FROM messages \
     WHERE thread_key = $1 AND covers_to IS NOT NULL ORDER BY id DESC LIMIT 1), \
     kept AS (SELECT coalesce(EXISTS (SELECT 1 FROM messages \
     WHERE thread_key = $1 AND id = $3::BIGINT) AND ((SELECT id FROM summary) \
     IS NOT DISTINCT FROM $4::BIGINT OR (SELECT covers_to FROM summary) >= $3::BIGINT), \
     FALSE) AS ok) \
     SELECT role, content, id, covers_to, FALSE FROM messages \
     WHERE thread_key = $1 AND covers_to IS NULL \
     AND id > greatest(coalesce((SELECT covers_to FROM summary), 0), \
     CASE WHEN (SELECT ok FROM kept) THEN $2::BIGINT ELSE 0 END) \
     UNION ALL SELECT NULL, content, id, covers_to, FALSE FROM summary \
     UNION ALL SELECT NULL, NULL, NULL, NULL, ok FROM kept \
     ORDER BY 4 NULLS LAST, 3 NULLS FIRST";

/// What [`CONTEXT`] is asked after: the last and the first cached message
/// (0 and 0 with nothing cached: no message has id 0, so all is read), and
/// the summary the cached context followed.
fn after(cached: Option<&Cached>) -> (i64, i64, Option<i64>) {
    cached
        .and_then(|c| Some((*c.ids.last()?, *c.ids.first()?, c.summary_id())))
        .unwrap_or((0, 0, None))
}

/// A thread's context from the rows of [`CONTEXT`] and what was cached of
/// it: the cached messages after the newest summary's boundary, then the
/// rows read, unless [`CONTEXT`] says not to keep them (the history was
/// deleted, or a summary covers less than it held); with how many messages
/// were decoded.
fn context_of(
    found: &[tokio_postgres::Row],
    cached: Option<Cached>,
) -> Result<(ThreadContext, usize)> {
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
    let Some((check, rest)) = rest.split_first() else {
        return Err(StoreError::Corrupt(
            "a thread's context came without its check row".into(),
        ));
    };
    let kept: bool = col(check, 4)?;
    let (mut messages, mut ids): (Vec<Message>, Vec<i64>) = match cached {
        Some(c) if kept => {
            // A newer summary replaces a prefix of what was cached.
            let boundary = summary.as_ref().map_or(0, |s| s.covers_to);
            let skip = c.ids.partition_point(|id| *id <= boundary);
            let (mut messages, mut ids) = (c.messages, c.ids);
            messages.drain(..skip);
            ids.drain(..skip);
            (messages, ids)
        }
        _ => (Vec::new(), Vec::new()),
    };
    messages.reserve(rest.len());
    ids.reserve(rest.len());
    for row in rest {
        messages.push(rows::message(row)?);
        ids.push(col(row, 2)?);
    }
    Ok((
        ThreadContext {
            summary,
            messages,
            ids,
        },
        rest.len(),
    ))
}

impl PostgresStore {
    /// The cached context of `thread_key` taken out for a read, with the
    /// epoch it is read in.
    fn cached_context(&self, thread_key: &str) -> (Option<Cached>, u64) {
        let epoch = self.inner.contexts.epoch();
        (self.inner.contexts.take_any(thread_key, epoch), epoch)
    }

    /// Hands the context read out, noting what it was read under so the run
    /// can give it back (`keep_context`).
    fn lend_context(
        &self,
        thread_key: &str,
        epoch: u64,
        (context, decoded): &(ThreadContext, usize),
    ) {
        self.inner.contexts.count_decoded(*decoded);
        self.inner
            .contexts
            .lend(thread_key, epoch, context.summary.clone());
    }

    /// Reads `thread_key`'s context after what is `cached` of it, in `epoch`,
    /// and lends it out.
    async fn read_context(
        &self,
        thread_key: &str,
        cached: Option<Cached>,
        epoch: u64,
    ) -> Result<ThreadContext> {
        let client = self.client().await?;
        let (last, first, summary) = after(cached.as_ref());
        let stmt = client.prepare_cached(CONTEXT).await?;
        let found = client
            .query(&stmt, &[&thread_key, &last, &first, &summary])
            .await?;
        self.inner.contexts.count_read();
        let read = context_of(&found, cached)?;
        self.lend_context(thread_key, epoch, &read);
        Ok(read.0)
    }
}

/// A page of history, newest first, each row with the thread's newest
/// summary (`id`, `covers_to`) that says which rows it replaces.
const PAGE: &str = "WITH newest AS (SELECT id, covers_to FROM messages \
     WHERE thread_key = $1 AND covers_to IS NOT NULL ORDER BY id DESC LIMIT 1) \
     SELECT m.id, m.role, m.content, m.run_id, m.created_at, n.id, n.covers_to \
     FROM messages m LEFT JOIN newest n ON TRUE \
     WHERE m.thread_key = $1 AND m.id < $2 ORDER BY m.id DESC LIMIT $3";

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
    let (cached, epoch) = store.cached_context(thread_key);
    let (last, first, summary) = after(cached.as_ref());
    let steps_sql = super::runs::steps_sql();
    let (steps, steers, context) = tokio::try_join!(
        client.prepare_cached(&steps_sql),
        client.prepare_cached(super::runs::STEERS),
        client.prepare_cached(CONTEXT),
    )?;
    let of_run: [&(dyn ToSql + Sync); 1] = [&run_id];
    let of_thread: [&(dyn ToSql + Sync); 4] = [&thread_key, &last, &first, &summary];
    let (steps, steers, context) = tokio::try_join!(
        client.query(&steps, &of_run),
        client.query(&steers, &of_run),
        client.query(&context, &of_thread),
    )?;
    store.inner.contexts.count_read();
    let read = context_of(&context, cached)?;
    store.lend_context(thread_key, epoch, &read);
    let (context, _) = read;
    Ok(RunStart {
        steps: steps.iter().map(rows::step).collect::<Result<_>>()?,
        steers: steers
            .iter()
            .map(super::runs::steer)
            .collect::<Result<_>>()?,
        context,
    })
}

#[async_trait::async_trait]
impl HistoryStore for PostgresStore {
    async fn thread_context(&self, thread_key: &str) -> Result<ThreadContext> {
        let (cached, epoch) = self.cached_context(thread_key);
        self.read_context(thread_key, cached, epoch).await
    }

    /// Held up to `newest` (the thread's newest row when the run's insert
    /// saw it, after its thread's lock): nothing was written since, so what
    /// is held is what the read would return (`context_cache.rs`).
    async fn thread_context_seen(&self, thread_key: &str, newest: i64) -> Result<ThreadContext> {
        let (cached, epoch) = self.cached_context(thread_key);
        match cached {
            Some(held) if held.newest() == Some(newest) => {
                let context = ThreadContext {
                    summary: held.summary,
                    messages: held.messages,
                    ids: held.ids,
                };
                self.inner
                    .contexts
                    .lend(thread_key, epoch, context.summary.clone());
                Ok(context)
            }
            cached => self.read_context(thread_key, cached, epoch).await,
        }
    }

    fn keep_context(&self, thread_key: &str, run_id: &str, messages: Vec<Message>, ids: Vec<i64>) {
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
        let id = col(&row, 0)?;
        // The run compacting holds the context out and hands back what
        // follows this summary.
        self.inner.contexts.summarized(
            thread_key,
            StoredSummary {
                id,
                text: text.to_owned(),
                covers_to,
            },
        );
        Ok(id)
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
