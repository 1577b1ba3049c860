//! The router's memory: per (arm, task class) counts of successes, failures
//! and routed runs, and the rating given to runs. Counts, not posteriors:
//! the priors live in config, so changing them applies to what was learnt.

use crate::error::Result;

pub use hearth_core::records::router::{ArmStats, Rating, RunFeedback};

/// The router's counts.
#[async_trait::async_trait]
pub trait RouterStore: Send + Sync + 'static {
    /// Every (arm, task class) with what was observed of it.
    async fn arm_stats(&self) -> Result<Vec<ArmStats>>;

    /// Records a rating of a run: one observation on its arm and task. A
    /// run has at most one rating: rating it again replaces the first
    /// (the same rating twice changes nothing). Returns the changes made to
    /// the counts (none when nothing changed).
    async fn rate_run(&self, feedback: RunFeedback) -> Result<Vec<ArmStats>>;

    /// Journals a run's `route` step unless its index is taken (a run
    /// resumed after a crash keeps the journal it has). Returns whether it
    /// was written. Its loss in a power cut is harmless, so it may commit
    /// without a sync of its own.
    async fn put_route_step(&self, step: crate::records::StepRecord) -> Result<bool>;
}
