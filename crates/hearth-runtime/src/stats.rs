//! Run health of a space (a Discord guild, a Slack team, a Telegram group):
//! aggregates of the runs stored with its scope, for chat commands such as
//! Discord's `/agent stats`. Counts and timings only, never who asked what.

use hearth_agent::policy::validate_scope;
use hearth_core::Timestamp;
use hearth_store::RunStats;

use crate::error::{Result, RuntimeError};
use crate::runtime::Runtime;

/// How many tool names a report ranks.
const TOP_TOOLS: u32 = 3;

impl Runtime {
    /// Aggregate health of the runs asked in `scope` created at or after
    /// `since`: counts by status, p50/p95 of accept-to-end time of the
    /// finished ones, and the most called tools. Incognito runs, which are
    /// never written to disk, are not counted.
    pub async fn run_stats(&self, scope: &str, since: Timestamp) -> Result<RunStats> {
        validate_scope(scope).map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
        Ok(self.inner.store.run_stats(scope, since, TOP_TOOLS).await?)
    }
}
