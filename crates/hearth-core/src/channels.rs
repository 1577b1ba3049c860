//! The chat channels as the runtime's API shows them (`GET /v1/channels`,
//! `/v1/channels/{name}/allowed`): views the channels produce and the
//! server renders, so neither needs the other.

use crate::Timestamp;

/// Every channel hearth knows, enabled or not, in API order.
pub const CHANNEL_NAMES: [&str; 4] = ["telegram", "discord", "slack", "sms"];

/// Where a channel stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelState {
    /// Not enabled in the config.
    Disabled,
    /// Enabled, no successful platform call yet.
    Connecting,
    /// Working.
    Connected,
    /// Failing; retrying with backoff.
    Degraded,
    /// Enabled, its connection held by another replica sharing the store
    /// (this one takes it over if that one dies); replies are still sent
    /// from here.
    Standby,
}

impl ChannelState {
    /// The API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Degraded => "degraded",
            Self::Standby => "standby",
        }
    }
}

/// A channel as `GET /v1/channels` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelInfo {
    /// `telegram`, `discord` or `slack`.
    pub name: &'static str,
    /// Enabled in the config.
    pub enabled: bool,
    /// Where it stands.
    pub state: ChannelState,
    /// The last failure.
    pub last_error: Option<String>,
    /// When the last platform event was handled.
    pub last_event_at: Option<Timestamp>,
    /// Replies not yet delivered.
    pub outbox_pending: u64,
}

/// A user let in on a channel, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedEntry {
    /// `telegram:user:<id>`.
    pub user_key: String,
    /// When (config entries: `None`).
    pub added_at: Option<Timestamp>,
    /// `config` or `pairing`.
    pub via: &'static str,
}

/// What removing an allowed user did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    /// Removed.
    Yes,
    /// Not a paired user of this channel.
    NotFound,
    /// Listed in `hearth.toml`: remove it there.
    InConfig,
}
