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
    /// Not a permission mode.
    #[error("{0}")]
    InvalidMode(String),
    /// `bypass` asked for in a group chat.
    #[error("{0}")]
    BypassInGroup(String),
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
    /// A job's thread is on a chat channel that is not enabled.
    #[error("{0}")]
    ChannelDisabled(String),
    /// No such job.
    #[error("no job with id {0:?}")]
    JobNotFound(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Something of ours failed (a task panicked); the message says what.
    #[error("{0}")]
    Internal(String),
    /// The thread is incognito and another replica holds it: its
    /// conversation lives in that replica's memory only.
    #[error(
        "thread {thread_key} is incognito and its conversation lives in the memory of replica \
         {holder}; send its messages to that replica, or turn incognito off for the thread"
    )]
    IncognitoElsewhere {
        /// The thread.
        thread_key: String,
        /// The replica that holds it (`hearth cluster` lists its address).
        holder: String,
    },
    /// An app manifest was refused; the message names the field (a JSON
    /// path) and what is accepted.
    #[error("{0}")]
    InvalidManifest(String),
    /// No such app, app version or enablement.
    #[error("{0}")]
    NotFound(String),
    /// The change conflicts with what is stored (a version imported again
    /// with other content, or enabling a version not approved).
    #[error("{0}")]
    Conflict(String),
    /// A configuration read again cannot be served (reload); the message
    /// names the file or variable, the key and the fix. Nothing changed.
    #[error("{0}")]
    InvalidConfig(String),
}

impl From<hearth_core::KeyError> for RuntimeError {
    fn from(e: hearth_core::KeyError) -> Self {
        Self::InvalidInput(e.to_string())
    }
}

impl RuntimeError {
    /// True when the same call may work later unchanged: the store failed,
    /// hearth is shutting down, or it is overloaded. A surface that can have
    /// the platform send the message again (Telegram's offset, Slack's
    /// acknowledgement) leaves it unacknowledged for these only; every
    /// other error is the runtime's answer to this message and will not
    /// change on a retry.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Store(_) | Self::ShuttingDown | Self::Overloaded { .. }
        )
    }
}

/// Result of runtime calls.
pub type Result<T> = std::result::Result<T, RuntimeError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_store_errors_shutdown_and_overload_are_transient() {
        let store = StoreError::Corrupt("bad row".into());
        assert!(RuntimeError::Store(store).is_transient());
        assert!(RuntimeError::ShuttingDown.is_transient());
        let overloaded = RuntimeError::Overloaded {
            queued: 9,
            retry_after_secs: 1,
        };
        assert!(overloaded.is_transient());
        for refusal in [
            RuntimeError::InvalidInput("empty".into()),
            RuntimeError::RunNotFound("run_1".into()),
            RuntimeError::ConfirmationNotFound,
            RuntimeError::Forbidden("not yours".into()),
            RuntimeError::UnknownModel("x/y".into()),
            RuntimeError::JobNotFound("job_1".into()),
        ] {
            assert!(!refusal.is_transient(), "{refusal}");
        }
    }
}
