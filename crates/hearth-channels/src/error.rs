//! Errors of the channels.

/// Why delivering an outbox item failed, as the sender must treat it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeliveryError {
    /// Will not work on retry (chat not found, bot blocked, 403, bad
    /// request): the item ends as `failed` at once.
    #[error("{0}")]
    Permanent(String),
    /// May work later (5xx, connection refused, timeout): retried with
    /// capped exponential backoff until the item is too old.
    #[error("{0}")]
    Transient(String),
    /// The platform said to wait (429): the whole conversation waits.
    #[error("rate limited for {retry_after_ms} ms: {message}")]
    RateLimited {
        /// How long to wait.
        retry_after_ms: u64,
        /// The platform's words.
        message: String,
    },
}

/// A channel that cannot start or answer.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The token is missing from where the config says it is.
    #[error("{channel}: no token: {detail}")]
    NoToken {
        /// The channel.
        channel: &'static str,
        /// Where it was looked for and what to do.
        detail: String,
    },
    /// The platform refused or failed a call.
    #[error("{channel}: {method} failed: {detail}")]
    Platform {
        /// The channel.
        channel: &'static str,
        /// The API method.
        method: String,
        /// What the platform said.
        detail: String,
    },
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] hearth_runtime::surfaces::StoreError),
    /// The runtime refused.
    #[error("{0}")]
    Runtime(#[from] hearth_runtime::RuntimeError),
}

/// A key made from what the platform sent that is not one (an id too long):
/// the runtime's answer to this event, as if it had checked it.
impl From<hearth_core::KeyError> for ChannelError {
    fn from(e: hearth_core::KeyError) -> Self {
        Self::Runtime(e.into())
    }
}

impl ChannelError {
    /// True when handling the same event again may work: the store or the
    /// platform failed, or the runtime is shutting down or overloaded. Only
    /// these leave an event for the platform to send again (and count as a
    /// channel failure); any other runtime error is the runtime's answer to
    /// this event, which a retry would only repeat.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Runtime(e) => e.is_transient(),
            Self::NoToken { .. } | Self::Platform { .. } | Self::Store(_) => true,
        }
    }
}

/// What the sender of a message the runtime refused is told.
#[cfg(any(
    feature = "telegram",
    feature = "discord",
    feature = "slack",
    feature = "sms"
))]
pub(crate) fn refusal_notice(e: &hearth_runtime::RuntimeError) -> String {
    format!("I cannot take that message: {e}")
}

#[cfg(test)]
mod tests {
    use hearth_runtime::RuntimeError;
    use hearth_runtime::surfaces::StoreError;

    use super::*;

    #[test]
    fn only_failures_that_may_pass_leave_an_event_unacknowledged() {
        let store = || StoreError::Corrupt("bad row".into());
        assert!(ChannelError::Store(store()).is_transient());
        assert!(ChannelError::Runtime(RuntimeError::Store(store())).is_transient());
        assert!(ChannelError::Runtime(RuntimeError::ShuttingDown).is_transient());
        let overloaded = RuntimeError::Overloaded {
            queued: 3,
            retry_after_secs: 1,
        };
        assert!(ChannelError::Runtime(overloaded).is_transient());
        let platform = ChannelError::Platform {
            channel: "slack",
            method: "auth.test".into(),
            detail: "HTTP 502".into(),
        };
        assert!(platform.is_transient());
        for refusal in [
            RuntimeError::InvalidInput("text must not be empty".into()),
            RuntimeError::Forbidden("this confirmation belongs to another user".into()),
            RuntimeError::ConfirmationNotFound,
            RuntimeError::RunNotFound("run_1".into()),
            RuntimeError::UnknownModel("x/y".into()),
        ] {
            assert!(!ChannelError::Runtime(refusal).is_transient());
        }
    }
}
