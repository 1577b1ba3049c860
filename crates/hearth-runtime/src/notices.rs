//! Notices: process-wide events for alerts to consume. Published:
//! `run.failed` (a run ended failed), `budget.threshold` (a budget pool
//! passed 80 % or 100 % of its limit; once per window),
//! `spend.daily_exceeded` (the day's estimated spend reached `[llm]
//! daily_spend_alert_usd`; once per UTC day), `job.failed` (a run fired by a
//! scheduled job ended failed), and by the channels `channel.degraded` and
//! `outbox.failed`. A notice nobody listens to is dropped.

use hearth_core::Timestamp;
use serde_json::Value;
use tokio::sync::broadcast;

/// `run.failed`: a run ended `failed`. `data`:
/// `{"run_id", "thread_key", "source", "code"}`.
pub const RUN_FAILED: &str = "run.failed";

/// `job.failed`: a run fired by a job ended `failed`. `data`:
/// `{"job_id", "run_id", "thread_key", "scheduled_at", "code"}`.
pub const JOB_FAILED: &str = "job.failed";

/// One process-wide event.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// What happened: `run.failed`, `budget.threshold`, ...
    pub event: String,
    /// When, unix ms.
    pub at: Timestamp,
    /// Its details (ids and numbers, never message text).
    pub data: Value,
}

/// Where notices are published; cheap to clone.
#[derive(Debug, Clone)]
pub struct Notices {
    tx: broadcast::Sender<Notice>,
}

impl Default for Notices {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(256).0,
        }
    }
}

impl Notices {
    /// Publishes `notice` to every current subscriber.
    pub fn publish(&self, notice: Notice) {
        let _ = self.tx.send(notice);
    }

    /// Notices from now on. A subscriber that falls more than 256 behind
    /// misses the oldest ones (and is told how many).
    pub fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.tx.subscribe()
    }
}
