//! The two sides of a platform: [`Delivery`] (where replies go and how an
//! outbox item is sent) and [`Ingress`] (its loop and push endpoint), and
//! [`Live`]: the inbound side at work, the channel with the runtime its
//! handlers hand messages to.
//!
//! A channel is built before the runtime (the runtime is built with the
//! channels' reply router), so its delivery side (the outbox sender,
//! progress messages, reply routing) needs only the outbox store and the
//! platform's API; the inbound side gets the runtime when it starts
//! ([`Ingress::run`]) or, for a webhook, with each request.

use std::sync::Arc;

use hearth_core::records::outbox::OutboxItem;
use hearth_runtime::Runtime;
use hearth_runtime::surfaces::Webhook;
use tokio_util::sync::CancellationToken;

use crate::error::{ChannelError, DeliveryError};
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

/// A platform's delivery side: where a thread's replies go and how an
/// outbox item reaches the platform. Needs only the outbox store and the
/// platform's API, so it exists before the runtime; the outbox sender and
/// the reply router see only this.
#[async_trait::async_trait]
pub trait Delivery: Send + Sync + 'static {
    /// `telegram`, `discord`, `slack` (or `webhook` for alert webhooks).
    fn name(&self) -> &'static str;

    /// The outbox target (platform conversation id) of a thread this
    /// channel owns, from its thread key; `None` for other threads.
    fn target_of(&self, thread_key: &str) -> Option<String>;

    /// Where inside the target conversation replies on `thread_key` go
    /// (a Slack thread's root ts), carried in the payload's `reply_to`.
    fn reply_to_of(&self, _thread_key: &str) -> Option<String> {
        None
    }

    /// The permission scope of runs on `thread_key` (a guild, a group),
    /// when the channel knows it; `None` means `global`.
    fn scope_of(&self, _thread_key: &str) -> Option<String> {
        None
    }

    /// Delivers `item` (rendered from `payload`), skipping its first
    /// `item.progress` parts, which were delivered before. A reply sent as
    /// several platform messages records each part as it goes out
    /// ([`crate::outbox::save_progress`]), so that a crash between parts
    /// resends at most the one in flight.
    async fn deliver(&self, item: &OutboxItem, payload: &Payload) -> Result<(), Undelivered>;

    /// The progress message shown for `run_id`, if any, which the answer
    /// replaces: the caller queues its clean-up. Progress edits for the run
    /// stop.
    fn take_progress(&self, _run_id: &str) -> Option<String> {
        None
    }

    /// Takes back what a previous process left that the next answers need
    /// (the progress messages of runs `runtime` still has unfinished);
    /// called once before recovered runs execute.
    async fn restore(&self, _runtime: &Runtime) {}

    /// Checks the token with the platform (`hearth doctor`): a line naming
    /// the bot on success.
    async fn check(&self) -> Result<String, ChannelError>;

    /// Whether `user_id` is a member of the server `guild_id` (Discord
    /// only: an app's bot must be there for its manifest to apply); `None`
    /// on the other platforms.
    async fn has_member(
        &self,
        _guild_id: &str,
        _user_id: &str,
    ) -> Option<Result<bool, ChannelError>> {
        None
    }
}

/// A platform's inbound side: its loop (polling, a gateway, a socket) and
/// its push endpoint, which hand events, commands and button presses to
/// the runtime they are given ([`Live`]).
#[async_trait::async_trait]
pub trait Ingress: Send + Sync + 'static {
    /// Receives platform events and hands them to `runtime` until `stop`.
    /// Failures are logged, retried with backoff and shown in the
    /// channel's health; this never returns early.
    async fn run(self: Arc<Self>, runtime: Runtime, stop: CancellationToken);

    /// Whether [`Ingress::run`] keeps a long-lived connection to the
    /// platform (a poller, a gateway, a socket) that one replica at a time
    /// may hold when several share a store; a push mode's loop (which only
    /// learns who the bot is) runs on every replica, as its requests reach
    /// any of them.
    fn holds_connection(&self) -> bool {
        false
    }

    /// The endpoint of the platform's push mode (a webhook), mounted on
    /// hearth's listener outside bearer auth (it checks its own signature).
    fn webhook(self: Arc<Self>) -> Option<Arc<dyn Webhook>> {
        None
    }
}

/// A channel's inbound side: the channel and the runtime its handlers hand
/// messages to, given when the loops start or a webhook request comes.
/// Derefs to the channel, so a handler reaches both its runtime and the
/// delivery side it shares.
pub struct Live<C: ?Sized> {
    channel: Arc<C>,
    /// The runtime messages go to.
    pub(crate) runtime: Runtime,
}

impl<C: ?Sized> Live<C> {
    /// `channel` handing messages to `runtime`.
    pub fn new(channel: Arc<C>, runtime: Runtime) -> Self {
        Self { channel, runtime }
    }

    /// The channel itself.
    pub fn channel(&self) -> &Arc<C> {
        &self.channel
    }
}

impl<C: ?Sized> Clone for Live<C> {
    fn clone(&self) -> Self {
        Self {
            channel: self.channel.clone(),
            runtime: self.runtime.clone(),
        }
    }
}

impl<C: ?Sized> std::ops::Deref for Live<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.channel
    }
}
