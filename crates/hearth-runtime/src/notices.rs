//! Runtime-wide notices for operators: events that are about hearth rather
//! than about one run's stream (`job.failed`; budgets and channels may add
//! theirs). Alert rules subscribe here and decide where each goes.
//!
//! A notice is `{event, at, summary, data}`, the body an alert webhook
//! sends. It carries ids and codes, never message text or model output.
//! Delivery is best effort: a subscriber that lags loses the oldest ones.

use hearth_core::Timestamp;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

/// Notices kept for a subscriber that has not read them yet.
const BACKLOG: usize = 256;

/// `job.failed`: a run fired by a job ended `failed`. `data`:
/// `{"job_id", "run_id", "thread_key", "scheduled_at", "code"}`.
pub const JOB_FAILED: &str = "job.failed";

/// One notice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    /// The event name, e.g. `job.failed`.
    pub event: &'static str,
    /// When it happened (unix ms).
    pub at: Timestamp,
    /// One sentence for people.
    pub summary: String,
    /// Ids and codes that identify what it is about.
    pub data: Value,
}

/// The publishing side, held by the runtime.
pub(crate) struct Notices {
    tx: broadcast::Sender<Notice>,
}

impl Default for Notices {
    fn default() -> Self {
        Self {
            tx: broadcast::Sender::new(BACKLOG),
        }
    }
}

impl Notices {
    /// Publishes to whoever listens (nobody is fine).
    pub(crate) fn publish(&self, notice: Notice) {
        let _ = self.tx.send(notice);
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.tx.subscribe()
    }
}
