//! Threads: their message history and runtime settings.

use hearth_core::{Message, Timestamp};

use crate::error::Result;
use crate::records::{MessageHit, NewSession, ThreadState};

/// Threads: history and settings.
#[async_trait::async_trait]
pub trait ThreadStore: Send + Sync + 'static {
    /// The last `limit` messages of a thread, oldest first.
    async fn thread_history(&self, thread_key: &str, limit: u32) -> Result<Vec<Message>>;

    /// Keys of the threads with runs that start with `prefix`, in byte
    /// order, after `after` (the last key of the previous page), at most
    /// `limit`: an index range, however many threads there are.
    async fn thread_keys(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>>;

    /// Messages of any thread holding every word of `text` (letters and
    /// digits; case and accents as the full-text index folds them), newest
    /// first, older than message `before`, at most `limit`: read from a
    /// full-text index, not by scanning the history. Empty when `text` has
    /// no words.
    async fn search_messages(
        &self,
        text: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<MessageHit>>;

    /// A thread's runtime settings and message count (defaults when unknown).
    async fn thread_state(&self, thread_key: &str) -> Result<ThreadState>;

    /// A thread's runtime settings without counting its messages
    /// (`message_count` is 0): what a run reads before it starts, in a time
    /// that does not grow with the thread.
    async fn thread_settings(&self, thread_key: &str) -> Result<ThreadState> {
        let state = self.thread_state(thread_key).await?;
        Ok(ThreadState {
            message_count: 0,
            ..state
        })
    }

    /// Sets (or with `None` clears) a thread's model override.
    async fn set_thread_model(&self, thread_key: &str, model: Option<&str>) -> Result<()>;

    /// Sets a thread's thinking level (`off`, `low`, `medium`, `high`).
    async fn set_thread_thinking(&self, thread_key: &str, level: &str) -> Result<()>;

    /// Sets a thread's permission mode (`None`: back to the configured
    /// default) and when it lapses (`None`: never).
    async fn set_thread_mode(
        &self,
        thread_key: &str,
        mode: Option<&str>,
        expires_at: Option<Timestamp>,
    ) -> Result<()>;

    /// Turns a thread's incognito flag on or off (the flag is kept; what an
    /// incognito thread says is not).
    async fn set_thread_incognito(&self, thread_key: &str, enabled: bool) -> Result<()>;

    /// Threads whose incognito flag is on.
    async fn incognito_threads(&self) -> Result<Vec<String>>;

    /// Deletes a thread's message history (its settings stay).
    async fn clear_thread_history(&self, thread_key: &str) -> Result<()>;

    /// Starts a new session on a thread: marks `cancelled_run` (a run of that
    /// thread) `cancelled` unless it is already terminal (its pending
    /// confirmations `expired` by [`crate::RUN_ENDED`]), and deletes the
    /// thread's message history, in one transaction; so a cancelled run that
    /// finishes late cannot append to the new session, and a failure leaves
    /// both as they were.
    async fn new_session(
        &self,
        thread_key: &str,
        cancelled_run: Option<&str>,
        at: Timestamp,
    ) -> Result<NewSession>;
}

/// The exclusive upper bound of the keys that start with `prefix` (in
/// byte order, as both backends compare them): `prefix` followed by the
/// largest character. Keys are then checked to start with `prefix`.
pub(crate) fn prefix_end(prefix: &str) -> String {
    format!("{prefix}\u{10FFFF}")
}
