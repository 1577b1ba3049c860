//! The router's memory: per (arm, task class) counts of successes, failures
//! and routed runs, and the rating given to runs. Counts, not posteriors:
//! the priors live in config, so changing them applies to what was learnt.

use serde::{Deserialize, Serialize};

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
    pub at: crate::Timestamp,
}
