//! The interfaces the runtime needs from the surfaces above it.
//!
//! The chat channels sit above the runtime (they ingest through it), yet the
//! runtime must commit their durable replies with the events that cause
//! them, and the HTTP server must show and administer them. So the runtime
//! defines what it needs and the channels implement it: a [`ReplyRouter`]
//! (which replies a run's end or question owes), a [`ChannelAdmin`] (what
//! `/v1/channels`, `/v1/pairings` and `/v1/outbox` do), [`Webhook`]s (the
//! platforms' push endpoints, in `http` types so neither side needs the
//! other's framework), all gathered in a [`ChatSurface`] that a
//! [`ChatSurfaceFactory`] builds from a [`SurfaceContext`]. The context hands
//! the channels the narrow stores they may use, never the whole store.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use hearth_core::records::outbox::{OutboxItem, OutboxStatus, PairingRecord};
use hearth_core::{AllowedEntry, ChannelInfo, Removed};

pub use hearth_core::records::outbox::ReplyRouter;
pub use hearth_store::{AccessStore, OutboxStore, StoreError};

use crate::error::Result;
use crate::notices::Notices;
use crate::runtime::Runtime;

/// A secret value the channels need (a bot token), opened from the sealed
/// store or read from the environment; never logged.
pub type Secret = hearth_store::secrets::SecretString;

/// What `/v1/channels`, `/v1/channels/{name}/allowed`, `/v1/pairings` and
/// `/v1/outbox` do.
#[async_trait::async_trait]
pub trait ChannelAdmin: Send + Sync + 'static {
    /// Every channel hearth knows, enabled or not, with its state.
    async fn list(&self) -> Result<Vec<ChannelInfo>>;

    /// `/readyz` checks: `("channel:<name>", "ok" | "connecting" |
    /// "degraded: <reason>")` for each enabled channel.
    fn readiness(&self) -> Vec<(String, String)>;

    /// Pending, unexpired pairing requests.
    async fn pairings(&self) -> Result<Vec<PairingRecord>>;

    /// Approves a pairing code (the user is let in and told); `None` for an
    /// unknown, used or expired code.
    async fn approve_pairing(&self, code: &str) -> Result<Option<PairingRecord>>;

    /// Denies a pairing code; `None` for an unknown, used or expired code.
    async fn deny_pairing(&self, code: &str) -> Result<Option<PairingRecord>>;

    /// Users let in on channel `name`; `None` for a name hearth does not know.
    async fn allowed(&self, name: &str) -> Result<Option<Vec<AllowedEntry>>>;

    /// Removes a paired user from channel `name`.
    async fn remove_allowed(&self, name: &str, user_key: &str) -> Result<Removed>;

    /// Outbox items, newest first, optionally of one status.
    async fn outbox(&self, status: Option<OutboxStatus>, limit: u32) -> Result<Vec<OutboxItem>>;

    /// Puts a failed item back in its queue and gives it as it stands
    /// then; `None` when no failed item has this id.
    async fn retry_outbox(&self, id: i64) -> Result<Option<OutboxItem>>;

    /// Whether the Discord server `guild_id` has a member whose user id is
    /// one of `ids` (an app's bot user or application id): an app manifest
    /// applies only to a bot that is there. `None` when it cannot be told
    /// (Discord is not enabled).
    async fn discord_member(&self, _guild_id: &str, _ids: &[String]) -> Result<Option<bool>> {
        Ok(None)
    }
}

/// A platform's push endpoint (Telegram's webhook, Slack's Events API). The
/// server mounts it at [`Webhook::path`] for `POST`, outside bearer auth and
/// the Origin rule (the platform signs its requests), inside the Host rule
/// and the body limit. It exists before the runtime does (the surface is
/// built first), so the server hands it the runtime with each request.
#[async_trait::async_trait]
pub trait Webhook: Send + Sync + 'static {
    /// Where it is mounted (`/channels/telegram/webhook`).
    fn path(&self) -> &'static str;

    /// Answers one request, handing what it carries to `runtime`; checks
    /// the platform's signature itself.
    async fn handle(
        &self,
        runtime: &Runtime,
        request: http::Request<Bytes>,
    ) -> http::Response<Bytes>;
}

/// The chat channels, as the runtime's builder assembled them.
#[async_trait::async_trait]
pub trait ChatSurface: Send + Sync + 'static {
    /// Which durable replies a run's end or question owes; it needs nothing
    /// of the runtime, so the runtime is built with it. `None` when no
    /// channel is enabled: no run then owes a reply.
    fn reply_router(&self) -> Option<Arc<dyn ReplyRouter>>;

    /// The administration behind `/v1/channels`, `/v1/pairings`, `/v1/outbox`.
    fn admin(&self) -> Arc<dyn ChannelAdmin>;

    /// The push endpoints of channels in a push mode.
    fn webhooks(&self) -> Vec<Arc<dyn Webhook>>;

    /// Takes back what a previous process left that the next answers need
    /// (progress messages of runs `runtime` still has unfinished), and
    /// starts what must see recovered runs end (alerts); called before the
    /// runtime recovers runs, and on a surface built by a reload before it
    /// starts (it then takes over the progress messages of the runs in
    /// flight).
    async fn restore(&self, runtime: &Runtime);

    /// Starts the inbound loops, the senders and anything else that acts
    /// for the channels, with the built runtime. Called once per surface:
    /// after recovery, or after `restore` for a surface built by a reload.
    fn start(&self, runtime: Runtime);

    /// Stops the loops and senders; pending replies stay in the outbox.
    /// Channels a surface built by a reload took over (unchanged) keep
    /// running: the new surface stops them.
    async fn shutdown(&self);

    /// The surface as its own type, so that its factory, building the
    /// next one at a reload, can take over what did not change.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// What the builder gives the channels to build themselves.
pub struct SurfaceContext<'a> {
    /// The effective configuration.
    pub config: &'a hearth_config::Config,
    /// The process environment, as the config loader saw it (token
    /// variables are read from here).
    pub env: &'a BTreeMap<String, String>,
    /// Secrets opened from the sealed store, by name.
    pub secrets: &'a BTreeMap<String, Secret>,
    /// The one outbound HTTP client.
    pub http: reqwest::Client,
    /// The outbox and the platforms' state.
    pub outbox: Arc<dyn OutboxStore>,
    /// Pairings and allowed users.
    pub access: Arc<dyn AccessStore>,
    /// Where process-wide events are published (`channel.degraded`,
    /// `outbox.failed`), and where alerts read them.
    pub notices: Notices,
    /// The surface in force, when a reload builds the next one: a channel
    /// whose settings and tokens did not change is taken over from it,
    /// connected, instead of built again.
    pub previous: Option<&'a dyn ChatSurface>,
}

/// Builds the chat channels the configuration enables: once at start, and
/// again at each configuration reload that changes `[channels]` or
/// `[alerts]` (the runtime keeps the factory).
pub trait ChatSurfaceFactory: Send + Sync + 'static {
    /// The channels of `ctx.config`; an enabled channel that cannot work
    /// (a token missing) is still built, shows as degraded and says why.
    /// An error stops hearth's start, or refuses a reload (a configuration
    /// that cannot be served, such as an alert rule naming a disabled
    /// channel). Building starts nothing: `restore` and `start` do.
    fn build(
        &self,
        ctx: SurfaceContext<'_>,
    ) -> std::result::Result<Arc<dyn ChatSurface>, crate::builder::BuildError>;
}
