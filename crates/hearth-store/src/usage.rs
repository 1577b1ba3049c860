//! Usage: model calls counted for cost, never their text.

use crate::error::Result;
use crate::records::{StepRecord, UsageQuery, UsageRow};

/// Model calls counted for usage and cost.
#[async_trait::async_trait]
pub trait UsageStore: Send + Sync + 'static {
    /// Model calls grouped for usage and cost.
    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>>;

    /// Counts model calls of runs stored elsewhere (incognito) in usage,
    /// without their thread or user: only provider, model, tokens, timing.
    /// Steps that are not finished model calls are skipped.
    async fn record_anonymous_usage(&self, steps: Vec<StepRecord>) -> Result<()>;
}
