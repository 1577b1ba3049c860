//! A thread's full stored history, for `GET /v1/threads/{k}/history`.

use hearth_store::HistoryPage;

use crate::error::{Result, RuntimeError};
use hearth_core::ThreadKey;

use crate::runtime::Runtime;

/// Messages per page when the caller does not say.
pub const DEFAULT_HISTORY_LIMIT: u32 = 50;
/// Most messages one page returns.
pub const MAX_HISTORY_LIMIT: u32 = 1000;

impl Runtime {
    /// Up to `limit` stored messages of a thread older than the message id
    /// `before` (newest first), summaries included and covered messages
    /// marked. What an incognito thread says is never stored, so never here.
    pub async fn history(
        &self,
        thread_key: &ThreadKey,
        limit: Option<u32>,
        before: Option<&str>,
    ) -> Result<HistoryPage> {
        let limit = limit
            .unwrap_or(DEFAULT_HISTORY_LIMIT)
            .clamp(1, MAX_HISTORY_LIMIT);
        let before = match before.filter(|b| !b.is_empty()) {
            None => None,
            Some(b) => Some(b.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                RuntimeError::InvalidInput(format!(
                    "before {b:?} is not a message id; pass the next_before of the previous page"
                ))
            })?),
        };
        Ok(self
            .inner
            .store
            .history_page(thread_key, limit, before)
            .await?)
    }

    /// The thread's newest non-empty answer among its last
    /// [`DEFAULT_HISTORY_LIMIT`] messages: the plan a `plan`-mode run gave,
    /// which approving it (`/runplan`, the dashboard's `Run the plan`) sends
    /// back. `None` when the model has not answered yet.
    pub async fn last_answer(&self, thread_key: &ThreadKey) -> Result<Option<String>> {
        let page = self.history(thread_key, None, None).await?;
        Ok(page
            .messages
            .into_iter()
            .find(|m| {
                m.role == "assistant" && m.text.as_deref().is_some_and(|t| !t.trim().is_empty())
            })
            .and_then(|m| m.text))
    }
}
