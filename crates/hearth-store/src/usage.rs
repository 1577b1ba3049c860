//! Usage: model calls counted for cost, never their text.

use hearth_core::Timestamp;

use crate::error::Result;
use crate::records::{StepRecord, UsageQuery, UsageRow};

/// One model call as counted for budgets: when, which model, whose, and
/// the tokens reported (0 where none were).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallUsage {
    /// When it started, unix ms.
    pub at: Timestamp,
    /// `<provider>/<model>`.
    pub model: String,
    /// Its thread; `None` for incognito runs.
    pub thread_key: Option<String>,
    /// Its user; `None` for incognito runs.
    pub user_key: Option<String>,
    /// Prompt tokens, cached included.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
    /// Prompt tokens written to a cache.
    pub cache_write_tokens: u64,
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
}

/// Model calls counted for usage and cost.
#[async_trait::async_trait]
pub trait UsageStore: Send + Sync + 'static {
    /// Model calls grouped for usage and cost.
    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>>;

    /// Counts model calls of runs stored elsewhere (incognito) in usage,
    /// without their thread or user: only provider, model, tokens, timing.
    /// Steps that are not finished model calls are skipped.
    async fn record_anonymous_usage(&self, steps: Vec<StepRecord>) -> Result<()>;

    /// Every model call from `since` (inclusive) on, oldest first: what
    /// budget pools rebuild their use from at start.
    async fn calls_since(&self, since: Timestamp) -> Result<Vec<CallUsage>>;
}
