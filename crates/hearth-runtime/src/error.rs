//! Runtime errors, one variant per thing a surface must tell apart.

use hearth_store::StoreError;

/// A failed runtime call.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The input was refused (empty text, bad key, ...).
    #[error("{0}")]
    InvalidInput(String),
    /// No such run.
    #[error("no run with id {0:?}")]
    RunNotFound(String),
    /// No pending confirmation has this token (unknown, used or expired).
    #[error("no pending confirmation has this token: it is unknown, already used or expired")]
    ConfirmationNotFound,
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The model reference names no configured provider or model.
    #[error("{0}")]
    UnknownModel(String),
    /// The process is shutting down and takes no new work.
    #[error("hearth is shutting down and accepts no new messages; retry shortly")]
    ShuttingDown,
    /// Too much work is queued; the caller should retry after `retry_after_secs`.
    #[error("hearth is saturated ({queued} runs queued or running); retry in {retry_after_secs} s")]
    Overloaded {
        /// Runs queued or running when the message was refused.
        queued: usize,
        /// Suggested wait before retrying.
        retry_after_secs: u64,
    },
    /// A job's schedule or time zone was refused.
    #[error(transparent)]
    InvalidSchedule(#[from] crate::jobs::ScheduleError),
    /// No such job.
    #[error("no job with id {0:?}")]
    JobNotFound(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Result of runtime calls.
pub type Result<T> = std::result::Result<T, RuntimeError>;
