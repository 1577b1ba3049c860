//! A thread's full history and its compaction summaries.
//!
//! Compaction never deletes: a summary is one more row of the thread (role
//! `summary`) that says up to which message it replaces the older ones in
//! what is sent to a model (`covers_to`). Summaries build on the previous
//! one, so the newest summary covers everything up to its boundary.

use crate::{Message, Timestamp};

/// The stored role of a compaction summary.
pub const SUMMARY_ROLE: &str = "summary";

/// The newest summary of a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSummary {
    /// Its message id.
    pub id: i64,
    /// What it says.
    pub text: String,
    /// The id of the last message it replaces.
    pub covers_to: i64,
}

/// What a run sends of its thread: the newest summary and every message
/// after its boundary, oldest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ThreadContext {
    /// The newest summary, if the thread was ever compacted.
    pub summary: Option<StoredSummary>,
    /// The messages the summary does not cover.
    pub messages: Vec<Message>,
    /// Their ids, in the same order (a later summary's boundary is one of them).
    pub ids: Vec<i64>,
}

/// One stored message as `GET /v1/threads/{k}/history` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Its id (also the paging cursor).
    pub id: i64,
    /// `user`, `assistant`, `tool` or `summary`.
    pub role: String,
    /// Its text parts joined; `None` when it has none (tool calls and results).
    pub text: Option<String>,
    /// The run that wrote it.
    pub run_id: Option<String>,
    /// When it was stored.
    pub created_at: Timestamp,
    /// True when a summary replaces it in what is sent (for a summary: a
    /// newer summary does).
    pub compacted: bool,
}

/// A page of history, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistoryPage {
    pub messages: Vec<HistoryEntry>,
    /// The `before` of the next (older) page; `None` on the last page.
    pub next_before: Option<i64>,
}
