//! The one trait every platform implements.

use std::sync::Arc;

use hearth_store::OutboxItem;
use tokio_util::sync::CancellationToken;

use crate::error::{ChannelError, DeliveryError};
use crate::health::Health;
use crate::payload::Payload;

/// Why an item was not (completely) delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct Undelivered {
    /// How far the item got, counting earlier attempts (`item.progress`),
    /// as the channel counts it (parts delivered; Telegram also packs in
    /// the plain-text messages of a part); a retry resumes from there.
    pub parts_done: u32,
    /// What went wrong.
    pub error: DeliveryError,
}

/// A chat platform: its inbound loop and its delivery of outbox items.
#[async_trait::async_trait]
pub trait Channel: Send + Sync + 'static {
    /// `telegram`, `discord` or `slack`.
    fn name(&self) -> &'static str;

    /// The outbox target (platform conversation id) of a thread this
    /// channel owns, from its thread key; `None` for other threads.
    fn target_of(&self, thread_key: &str) -> Option<String>;

    /// Where inside the target conversation replies on `thread_key` go
    /// (a Slack thread's root ts), carried in the payload's `reply_to`.
    fn reply_to_of(&self, _thread_key: &str) -> Option<String> {
        None
    }

    /// The channel's health, updated by its loops.
    fn health(&self) -> &Health;

    /// Wakes the channel's outbox sender (notified after items are queued).
    fn outbox_wake(&self) -> Arc<tokio::sync::Notify>;

    /// Receives platform events and hands them to the runtime until `stop`.
    /// Failures are logged, retried with backoff and shown in `health`;
    /// this never returns early.
    async fn run(self: Arc<Self>, stop: CancellationToken);

    /// Delivers `item` (rendered from `payload`), skipping its first
    /// `item.progress` parts, which were delivered before. A reply sent as
    /// several platform messages records each part as it goes out
    /// ([`crate::outbox::save_progress`]), so that a crash between parts
    /// resends at most the one in flight.
    async fn deliver(&self, item: &OutboxItem, payload: &Payload) -> Result<(), Undelivered>;

    /// The progress message shown for `run_id`, if any, which the answer
    /// replaces: the caller queues its clean-up. Progress edits for the run
    /// stop.
    fn take_progress(&self, run_id: &str) -> Option<String>;

    /// Takes back what a previous process left that the next answers need
    /// (the progress messages of runs still unfinished); called once before
    /// recovered runs execute.
    async fn restore(&self) {}

    /// Checks the token with the platform (`hearth doctor`): a line naming
    /// the bot on success.
    async fn check(&self) -> Result<String, ChannelError>;

    /// The permission scope of runs on `thread_key` (a guild, a group),
    /// when the channel knows it; `None` means `global`.
    fn scope_of(&self, _thread_key: &str) -> Option<String> {
        None
    }

    /// Routes for the platform's push mode (webhooks), mounted on hearth's
    /// listener outside bearer auth (each checks its own signature).
    fn push_routes(self: Arc<Self>) -> Option<axum::Router> {
        None
    }
}
