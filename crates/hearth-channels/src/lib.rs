//! hearth-channels: hearth as a bot on chat platforms.
//!
//! Each platform (Telegram, Discord, Slack, SMS; one module behind a cargo feature) turns its events into
//! [`hearth_core::Inbound`] for the runtime, like the HTTP surface does, and
//! renders run events back. No channel has its own agent loop, tools or
//! storage. Replies that matter (answers, confirmation prompts, pairing
//! notices) go through a durable outbox in the store, queued in the same
//! commit as their cause and delivered at least once, in order per
//! conversation, by one sender per channel ([`outbox`]). A 👍 or 👎 the
//! asker puts on an answer (Telegram, Discord) rates the run for the router.

pub mod access;
pub mod advice;
pub mod alerts;
pub mod backoff;
pub mod channel;
#[cfg(any(feature = "telegram", feature = "discord", feature = "slack"))]
mod commands;
#[cfg(any(feature = "telegram", feature = "discord", feature = "slack"))]
mod control;
#[cfg(feature = "discord")]
pub mod discord;
pub mod doctor;
pub mod error;
pub mod health;
pub mod hub;
#[cfg(any(
    feature = "telegram",
    feature = "discord",
    feature = "slack",
    feature = "sms"
))]
mod kit;
mod lease;
pub mod outbox;
pub mod payload;
pub mod progress;
#[cfg(any(feature = "telegram", feature = "discord"))]
mod reactions;
pub mod required;
pub mod secrets;
#[cfg(feature = "slack")]
pub mod slack;
#[cfg(feature = "sms")]
pub mod sms;
pub mod surface;
#[cfg(feature = "telegram")]
pub mod telegram;
pub mod text;

pub use channel::{Delivery, Ingress, Undelivered};
pub use error::{ChannelError, DeliveryError};
pub use health::{ChannelState, Health, HealthSnapshot};
pub use hub::Channels;
pub use payload::{ConfirmButtons, Payload};
pub use surface::ChannelsFactory;
