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
    Store(#[from] hearth_store::StoreError),
    /// The runtime refused.
    #[error("{0}")]
    Runtime(#[from] hearth_runtime::RuntimeError),
}
