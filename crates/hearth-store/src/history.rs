//! A thread's full history and its compaction summaries.
//!
//! Compaction never deletes: a summary is one more row of the thread (role
//! `summary`) that says up to which message it replaces the older ones in
//! what is sent to a model (`covers_to`). Summaries build on the previous
//! one, so the newest summary covers everything up to its boundary.

use hearth_core::{Content, Message, Timestamp};

use crate::error::Result;

pub use hearth_core::records::history::{
    HistoryEntry, HistoryPage, SUMMARY_ROLE, StoredSummary, ThreadContext,
};

/// What the insert of a run saw of its thread's stored history, in its
/// snapshot, taken after the thread's lock was granted: every earlier run of
/// the thread that ended had written its messages. For a run stored claimed
/// no other run of its thread is unfinished, and only a thread's runs write
/// its history, so until the run ends this is what it would read as it
/// starts (a deletion of the whole history aside: a new session, which
/// cancels the thread's run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistorySeen {
    /// No stored message: the run starts from an empty history.
    Empty,
    /// The id of the thread's newest stored row, a message or a summary.
    Newest(i64),
}

/// Threads' full history and compaction summaries.
#[async_trait::async_trait]
pub trait HistoryStore: Send + Sync + 'static {
    /// The newest summary of a thread and the messages after its boundary,
    /// in one read.
    async fn thread_context(&self, thread_key: &str) -> Result<ThreadContext>;

    /// [`thread_context`](Self::thread_context) for a run whose insert saw
    /// `newest` as the id of its thread's newest stored row
    /// ([`HistorySeen::Newest`]): a store that holds the thread's context up
    /// to that row answers from it without a read. Others read.
    async fn thread_context_seen(&self, thread_key: &str, newest: i64) -> Result<ThreadContext> {
        let _ = newest;
        self.thread_context(thread_key).await
    }

    /// Hands back the messages and ids of the last `thread_context` of the
    /// thread, unchanged (or after a summary replaced a prefix of them), once
    /// the run `run_id` is done with them: a store that caches contexts keeps
    /// them, so the thread's next read only adds the messages stored since,
    /// without copying or decoding the rest again (and may add the messages
    /// that run's end writes). Others drop them.
    fn keep_context(&self, thread_key: &str, run_id: &str, messages: Vec<Message>, ids: Vec<i64>) {
        let _ = (thread_key, run_id, messages, ids);
    }

    /// Stores a summary that replaces the thread's messages up to id
    /// `covers_to` (and any older summary); returns its id.
    async fn append_summary(
        &self,
        thread_key: &str,
        run_id: &str,
        text: &str,
        covers_to: i64,
        at: Timestamp,
    ) -> Result<i64>;

    /// Up to `limit` messages of a thread with an id below `before` (all
    /// when `None`), newest first, summaries included.
    async fn history_page(
        &self,
        thread_key: &str,
        limit: u32,
        before: Option<i64>,
    ) -> Result<HistoryPage>;
}

/// The text parts of a stored message joined (what a summary says, what a
/// history page shows).
pub(crate) fn joined_text(parts: &[Content]) -> String {
    parts
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Whether message `id` of role `role` is replaced by a summary in what is
/// sent to a model, given the thread's newest summary `(id, covers_to)`: a
/// message when that summary covers it, a summary when it is an older one.
pub(crate) fn compacted(newest_summary: Option<(i64, i64)>, id: i64, role: &str) -> bool {
    match newest_summary {
        Some((latest, _)) if role == SUMMARY_ROLE => id < latest,
        Some((_, covers_to)) => id <= covers_to,
        None => false,
    }
}
