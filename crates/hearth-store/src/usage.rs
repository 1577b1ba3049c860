//! Usage: model calls counted for cost, never their text.

use hearth_core::Timestamp;

use crate::error::Result;
use crate::records::{StepRecord, UsageQuery, UsageRow};

pub use hearth_core::records::usage::CallUsage;

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
