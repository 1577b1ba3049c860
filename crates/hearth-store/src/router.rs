//! The router's memory: per (arm, task class) counts of successes, failures
//! and routed runs, and the rating given to runs. Counts, not posteriors:
//! the priors live in config, so changing them applies to what was learnt.

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// What is known of one arm on one task class, or (in a run's finish) what
/// that run adds to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmStats {
    /// `<provider>/<model>`.
    pub model: String,
    /// Task class (`chat`, `code`, ...).
    pub task: String,
    /// Observed successes (or their change).
    pub successes: i64,
    /// Observed failures (or their change).
    pub failures: i64,
    /// Routed runs that chose this arm (or their change).
    pub runs: i64,
}

/// A user's rating of a run's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rating {
    /// A good answer: one success.
    Up,
    /// A bad answer: one failure.
    Down,
}

impl Rating {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
        }
    }
}

/// A rating of a routed run, for the arm and task class it was routed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFeedback {
    /// The run rated.
    pub run_id: String,
    /// The arm that answered it.
    pub model: String,
    /// Its task class.
    pub task: String,
    /// Up or down.
    pub rating: Rating,
    /// When.
    pub at: hearth_core::Timestamp,
}

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
