//! `Channels`: every configured channel, their senders, and what the rest of
//! hearth asks of them: the reply router the runtime calls, and the
//! administration behind `/v1/channels`, `/v1/pairings` and `/v1/outbox`
//! ([`ChannelAdmin`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use hearth_core::records::ConfirmationRecord;
use hearth_core::records::outbox::{
    NewOutboxItem, OutboxItem, OutboxKind, OutboxStatus, PairingRecord, RunEnd,
};
use hearth_core::{AllowedEntry, CHANNEL_NAMES, ChannelInfo, Removed, RunStatus, now_ms};
use hearth_runtime::surfaces::{AccessStore, ChannelAdmin, OutboxStore, ReplyRouter, Webhook};
use hearth_runtime::{Notice, Notices, Runtime, RuntimeError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::access::{APPROVED_NOTICE, Access};
use crate::channel::{Delivery, Ingress};
use crate::error::ChannelError;
use crate::health::{ChannelState, Health};
use crate::payload::{ConfirmButtons, Payload};

/// `channel.degraded`: a channel failed repeatedly. `data`: `{"channel", "error"}`.
pub const CHANNEL_DEGRADED: &str = "channel.degraded";

/// Where a confirmation prompt's question ends and how to answer it by
/// button or text begins (a channel without buttons words its own).
pub(crate) const CONFIRM_HINT: &str = "\n\nPress a button, or reply";

/// Every channel hearth knows, enabled or not, in API order.
pub const NAMES: [&str; 4] = CHANNEL_NAMES;

/// An enabled platform as the hub holds it: its delivery side (replies
/// are routed and sent through it), its inbound side (started with the
/// runtime), and what the hub shows of it and wakes.
#[derive(Clone)]
pub struct Enabled {
    delivery: Arc<dyn Delivery>,
    ingress: Arc<dyn Ingress>,
    health: Arc<Health>,
    wake: Arc<Notify>,
    access: Access,
    /// What it was built from (settings and tokens, hashed): a reload
    /// whose channel has the same key takes this one over, connected.
    key: Option<String>,
    /// Its loop and sender once started, shared by every hub holding it.
    running: Arc<Running>,
}

/// A platform's inbound loop and outbox sender while they run.
#[derive(Default)]
struct Running {
    /// The id of the hub that stops them ([`Channels::adopt`]).
    owner: AtomicU64,
    /// Their stop and their tasks, once started.
    tasks: std::sync::Mutex<Option<(CancellationToken, Vec<tokio::task::JoinHandle<()>>)>>,
}

/// Hub ids, so a channel taken over by a new hub is stopped by it only.
static HUB_IDS: AtomicU64 = AtomicU64::new(1);

impl Enabled {
    /// A platform's two sides, its health, the wake of its outbox sender
    /// and its access rules.
    pub fn new(
        delivery: Arc<dyn Delivery>,
        ingress: Arc<dyn Ingress>,
        health: Arc<Health>,
        wake: Arc<Notify>,
        access: Access,
    ) -> Self {
        Self {
            delivery,
            ingress,
            health,
            wake,
            access,
            key: None,
            running: Arc::default(),
        }
    }

    /// With the key of what it was built from (see [`Enabled::key`]).
    #[cfg_attr(
        not(any(
            feature = "telegram",
            feature = "discord",
            feature = "slack",
            feature = "sms"
        )),
        expect(dead_code, reason = "no platform is built in to take over")
    )]
    pub(crate) fn keyed(mut self, key: String) -> Self {
        self.key = Some(key);
        self
    }

    /// The platform's name.
    pub(crate) fn name(&self) -> &'static str {
        self.delivery.name()
    }

    /// Whether it was built from `key`.
    pub(crate) fn built_from(&self, key: &str) -> bool {
        self.key.as_deref() == Some(key)
    }
}

struct Inner {
    outbox: Arc<dyn OutboxStore>,
    access: Arc<dyn AccessStore>,
    enabled: Vec<Enabled>,
    max_age: Duration,
    notices: Notices,
    /// This hub's id (see [`Running::owner`]).
    id: u64,
}

/// The channels. Cheap to clone.
#[derive(Clone)]
pub struct Channels {
    inner: Arc<Inner>,
}

impl Channels {
    /// No channel enabled.
    pub fn none(outbox: Arc<dyn OutboxStore>, access: Arc<dyn AccessStore>) -> Self {
        Self::new(
            outbox,
            access,
            Vec::new(),
            Duration::from_secs(24 * 3600),
            Notices::default(),
        )
    }

    /// The `enabled` channels; undelivered replies fail after `max_age`. A
    /// channel becoming degraded and a reply that fails are published on
    /// `notices` (`channel.degraded`, `outbox.failed`).
    pub fn new(
        outbox: Arc<dyn OutboxStore>,
        access: Arc<dyn AccessStore>,
        enabled: Vec<Enabled>,
        max_age: Duration,
        notices: Notices,
    ) -> Self {
        for e in &enabled {
            let (name, bus) = (e.delivery.name(), notices.clone());
            e.health.on_degraded(Box::new(move |error| {
                bus.publish(Notice {
                    event: CHANNEL_DEGRADED.to_owned(),
                    at: now_ms(),
                    data: serde_json::json!({ "channel": name, "error": error }),
                });
            }));
        }
        Self {
            inner: Arc::new(Inner {
                outbox,
                access,
                enabled,
                max_age,
                notices,
                id: HUB_IDS.fetch_add(1, Ordering::Relaxed),
            }),
        }
    }

    /// Makes this hub the one that stops its channels, those taken over
    /// from the hub before it included; called once it is sure to be put
    /// in force (a build that fails after this would leave them unstopped).
    pub fn adopt(&self) {
        for e in &self.inner.enabled {
            e.running.owner.store(self.inner.id, Ordering::SeqCst);
        }
    }

    /// The enabled channel `name` built from `key`, to take over.
    #[cfg_attr(
        not(any(
            feature = "telegram",
            feature = "discord",
            feature = "slack",
            feature = "sms"
        )),
        expect(dead_code, reason = "no platform is built in to take over")
    )]
    pub(crate) fn reusable(&self, name: &str, key: &str) -> Option<Enabled> {
        self.find(name).filter(|e| e.built_from(key)).cloned()
    }

    /// True when no channel is enabled.
    pub fn is_empty(&self) -> bool {
        self.inner.enabled.is_empty()
    }

    /// Lets every channel take back what a previous process left (see
    /// [`Delivery::restore`]); call before the runtime recovers runs.
    pub async fn restore(&self, runtime: &Runtime) {
        for e in &self.inner.enabled {
            e.delivery.restore(runtime).await;
        }
    }

    /// Starts every channel's inbound loop (handing messages to `runtime`)
    /// and outbox sender. Pending replies left by a previous process are
    /// delivered; no run is executed again for them.
    pub fn start(&self, runtime: &Runtime) {
        for e in &self.inner.enabled {
            let mut running = e
                .running
                .tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if running.is_some() {
                // Taken over from the hub before: connected already.
                tracing::info!(channel = e.name(), "channel unchanged; kept connected");
                continue;
            }
            let stop = CancellationToken::new();
            // A connection only one replica may hold runs under its lease;
            // every replica sends replies (claiming each conversation).
            let ingress = if e.ingress.holds_connection() {
                tokio::spawn(crate::lease::run_held(
                    e.name(),
                    e.ingress.clone(),
                    e.health.clone(),
                    runtime.clone(),
                    stop.clone(),
                ))
            } else {
                tokio::spawn(e.ingress.clone().run(runtime.clone(), stop.clone()))
            };
            let tasks = vec![
                ingress,
                tokio::spawn(crate::outbox::run_sender(
                    e.delivery.clone(),
                    self.inner.outbox.clone(),
                    e.wake.clone(),
                    self.inner.max_age,
                    self.inner.notices.clone(),
                    crate::outbox::Claimer::of(runtime),
                    stop.clone(),
                )),
            ];
            *running = Some((stop, tasks));
            tracing::info!(channel = e.name(), "channel started");
        }
    }

    /// The channels this hub stops: not those a newer hub took over.
    fn owned(&self) -> impl Iterator<Item = &Enabled> {
        let id = self.inner.id;
        self.inner
            .enabled
            .iter()
            .filter(move |e| e.running.owner.load(Ordering::SeqCst) == id)
    }

    /// Stops the loops and senders (pending replies stay in the outbox).
    pub fn shutdown(&self) {
        for e in self.owned() {
            let running = e
                .running
                .tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some((stop, _)) = running.as_ref() {
                stop.cancel();
            }
        }
    }

    /// Stops the loops and senders, and waits (at most `grace`) until they
    /// ended: the deliveries under way finished, so channels started after
    /// (a configuration reload) neither send an item twice nor poll beside
    /// them.
    pub async fn stopped(&self, grace: Duration) {
        self.shutdown();
        let mut tasks = Vec::new();
        for e in self.owned() {
            let running = e
                .running
                .tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some((_, t)) = running {
                tasks.extend(t);
            }
        }
        let all = async {
            for task in tasks {
                // A loop that panicked has ended too.
                let _ = task.await;
            }
        };
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!(
                grace_secs = grace.as_secs(),
                "channel loops still running after the grace; the new ones start beside them"
            );
        }
    }

    /// The endpoints of channels in a push mode (webhooks), to mount
    /// outside bearer auth; none when no channel is in one.
    pub fn webhooks(&self) -> Vec<Arc<dyn Webhook>> {
        self.inner
            .enabled
            .iter()
            .filter_map(|e| e.ingress.clone().webhook())
            .collect()
    }

    fn find(&self, name: &str) -> Option<&Enabled> {
        self.inner
            .enabled
            .iter()
            .find(|e| e.delivery.name() == name)
    }

    fn owner(&self, thread_key: &str) -> Option<(&Enabled, String)> {
        self.inner
            .enabled
            .iter()
            .find_map(|e| e.delivery.target_of(thread_key).map(|t| (e, t)))
    }

    /// Queues `payload` for the conversation of `thread_key` on whichever
    /// channel owns it, and wakes that channel's sender. False when no
    /// enabled channel owns the thread.
    pub async fn queue_to_thread(
        &self,
        thread_key: &str,
        mut payload: Payload,
    ) -> Result<bool, ChannelError> {
        let Some((e, target)) = self.owner(thread_key) else {
            return Ok(false);
        };
        payload.reply_to = e.delivery.reply_to_of(thread_key);
        crate::outbox::queue_notice(
            self.inner.outbox.as_ref(),
            &e.wake,
            e.delivery.name(),
            &target,
            &payload,
        )
        .await?;
        Ok(true)
    }

    /// Every channel with its state.
    pub async fn list(&self) -> Result<Vec<ChannelInfo>, ChannelError> {
        let counts = self.inner.outbox.outbox_counts().await?;
        Ok(NAMES
            .iter()
            .map(|&name| {
                let outbox_pending = counts
                    .iter()
                    .find(|(c, _)| c == name)
                    .map_or(0, |(_, n)| n.pending);
                match self.find(name) {
                    Some(e) => {
                        let h = e.health.snapshot();
                        ChannelInfo {
                            name,
                            enabled: true,
                            state: h.state,
                            last_error: h.last_error,
                            last_event_at: h.last_event_at,
                            outbox_pending,
                        }
                    }
                    None => ChannelInfo {
                        name,
                        enabled: false,
                        state: ChannelState::Disabled,
                        last_error: None,
                        last_event_at: None,
                        outbox_pending,
                    },
                }
            })
            .collect())
    }

    /// `/readyz` checks: `("channel:<name>", "ok" | "connecting" | "degraded: <reason>"
    /// | "standby: held by <replica>")` for each enabled channel.
    pub fn readiness(&self) -> Vec<(String, String)> {
        self.inner
            .enabled
            .iter()
            .map(|e| {
                let h = e.health.snapshot();
                let status = match h.state {
                    ChannelState::Connected => "ok".to_owned(),
                    // Not a failure: another replica holds the connection.
                    ChannelState::Standby => match e.health.held_by() {
                        Some(holder) if !holder.is_empty() => format!("standby: held by {holder}"),
                        _ => "standby".to_owned(),
                    },
                    ChannelState::Degraded => format!(
                        "degraded: {}",
                        h.last_error.as_deref().unwrap_or("repeated failures")
                    ),
                    other => other.as_str().to_owned(),
                };
                (format!("channel:{}", e.delivery.name()), status)
            })
            .collect()
    }

    /// Pending pairing requests.
    pub async fn pairings(&self) -> Result<Vec<PairingRecord>, ChannelError> {
        Ok(self.inner.access.pending_pairings(now_ms()).await?)
    }

    /// Approves a pairing code: the user is let in and told. `None` for an
    /// unknown, used or expired code.
    pub async fn approve(&self, code: &str) -> Result<Option<PairingRecord>, ChannelError> {
        let notice = Payload::notice(APPROVED_NOTICE).to_json();
        let rec = self
            .inner
            .access
            .approve_pairing(code, now_ms(), notice)
            .await?;
        if let Some(rec) = &rec {
            tracing::info!(channel = %rec.channel, user_key = %rec.user_key, "pairing approved");
            self.committed(&rec.channel);
        }
        Ok(rec)
    }

    /// Denies a pairing code (the user is not told).
    pub async fn deny(&self, code: &str) -> Result<Option<PairingRecord>, ChannelError> {
        Ok(self.inner.access.deny_pairing(code, now_ms()).await?)
    }

    /// Users let in on channel `name` (`None` for an unknown channel name).
    pub async fn allowed(&self, name: &str) -> Result<Option<Vec<AllowedEntry>>, ChannelError> {
        if !NAMES.contains(&name) {
            return Ok(None);
        }
        let mut out: Vec<AllowedEntry> = self
            .find(name)
            .map(|e| {
                e.access
                    .config_allowed()
                    .map(|u| AllowedEntry {
                        user_key: u.clone(),
                        added_at: None,
                        via: "config",
                    })
                    .collect()
            })
            .unwrap_or_default();
        for u in self.inner.access.allowed_users(name).await? {
            if !out.iter().any(|e| e.user_key == u.user_key) {
                out.push(AllowedEntry {
                    user_key: u.user_key,
                    added_at: Some(u.added_at),
                    via: "pairing",
                });
            }
        }
        Ok(Some(out))
    }

    /// Removes a paired user from channel `name`.
    pub async fn remove_allowed(
        &self,
        name: &str,
        user_key: &str,
    ) -> Result<Removed, ChannelError> {
        if self.inner.access.remove_allowed(name, user_key).await? {
            return Ok(Removed::Yes);
        }
        let in_config = self
            .find(name)
            .is_some_and(|e| e.access.config_allowed().any(|u| u == user_key));
        Ok(if in_config {
            Removed::InConfig
        } else {
            Removed::NotFound
        })
    }

    /// Outbox items, newest first.
    pub async fn outbox(
        &self,
        status: Option<OutboxStatus>,
        limit: u32,
    ) -> Result<Vec<OutboxItem>, ChannelError> {
        Ok(self.inner.outbox.list_outbox(status, limit).await?)
    }

    /// One outbox item.
    pub async fn outbox_item(&self, id: i64) -> Result<Option<OutboxItem>, ChannelError> {
        Ok(self.inner.outbox.get_outbox(id).await?)
    }

    /// Puts a failed item back in its queue. False when no failed item has
    /// this id.
    pub async fn retry(&self, id: i64) -> Result<bool, ChannelError> {
        let store = &self.inner.outbox;
        let Some(item) = store.get_outbox(id).await? else {
            return Ok(false);
        };
        let retried = store.retry_outbox(id, now_ms()).await?;
        if retried {
            self.committed(&item.channel);
        }
        Ok(retried)
    }

    /// Checks every enabled channel's token with its platform (`hearth doctor`).
    pub async fn check(&self) -> Vec<(&'static str, Result<String, ChannelError>)> {
        let mut out = Vec::new();
        for e in &self.inner.enabled {
            out.push((e.delivery.name(), e.delivery.check().await));
        }
        out
    }
}

/// A channel failure as the runtime's API reports it.
fn api_error(e: ChannelError) -> RuntimeError {
    match e {
        ChannelError::Store(e) => RuntimeError::Store(e),
        ChannelError::Runtime(e) => e,
        other => RuntimeError::Internal(other.to_string()),
    }
}

#[async_trait::async_trait]
impl ChannelAdmin for Channels {
    async fn list(&self) -> hearth_runtime::Result<Vec<ChannelInfo>> {
        Channels::list(self).await.map_err(api_error)
    }

    fn readiness(&self) -> Vec<(String, String)> {
        Channels::readiness(self)
    }

    async fn pairings(&self) -> hearth_runtime::Result<Vec<PairingRecord>> {
        Channels::pairings(self).await.map_err(api_error)
    }

    async fn approve_pairing(&self, code: &str) -> hearth_runtime::Result<Option<PairingRecord>> {
        self.approve(code).await.map_err(api_error)
    }

    async fn deny_pairing(&self, code: &str) -> hearth_runtime::Result<Option<PairingRecord>> {
        self.deny(code).await.map_err(api_error)
    }

    async fn allowed(&self, name: &str) -> hearth_runtime::Result<Option<Vec<AllowedEntry>>> {
        Channels::allowed(self, name).await.map_err(api_error)
    }

    async fn remove_allowed(&self, name: &str, user_key: &str) -> hearth_runtime::Result<Removed> {
        Channels::remove_allowed(self, name, user_key)
            .await
            .map_err(api_error)
    }

    async fn outbox(
        &self,
        status: Option<OutboxStatus>,
        limit: u32,
    ) -> hearth_runtime::Result<Vec<OutboxItem>> {
        Channels::outbox(self, status, limit)
            .await
            .map_err(api_error)
    }

    async fn retry_outbox(&self, id: i64) -> hearth_runtime::Result<Option<OutboxItem>> {
        if !self.retry(id).await.map_err(api_error)? {
            return Ok(None);
        }
        self.outbox_item(id).await.map_err(api_error)
    }

    async fn discord_member(
        &self,
        guild_id: &str,
        ids: &[String],
    ) -> hearth_runtime::Result<Option<bool>> {
        let Some(e) = self.find("discord") else {
            return Ok(None);
        };
        for id in ids {
            match e.delivery.has_member(guild_id, id).await {
                Some(Ok(true)) => return Ok(Some(true)),
                Some(Ok(false)) => {}
                Some(Err(err)) => return Err(api_error(err)),
                None => return Ok(None),
            }
        }
        Ok(Some(false))
    }
}

impl ReplyRouter for Channels {
    fn on_finish(&self, end: RunEnd<'_>) -> Vec<NewOutboxItem> {
        let Some((e, target)) = self.owner(&end.run.thread_key) else {
            return Vec::new();
        };
        let channel = e.delivery.name();
        let reply_to = e.delivery.reply_to_of(&end.run.thread_key);
        let mut payload = match end.status {
            RunStatus::Succeeded => Payload {
                text: match end.output {
                    Some(t) if !t.trim().is_empty() => t.to_owned(),
                    _ => "(no answer)".to_owned(),
                },
                rich: true,
                ..Payload::default()
            },
            RunStatus::Failed => Payload::notice(format!(
                "Sorry, I could not answer that: {}",
                end.error.map_or("the run failed", |(_, message)| message)
            )),
            _ => Payload::notice("Stopped."),
        };
        payload.reply_to = reply_to;
        let mut items = vec![NewOutboxItem {
            channel: channel.to_owned(),
            target: target.clone(),
            kind: OutboxKind::Message,
            run_id: Some(end.run.run_id.clone()),
            payload: payload.to_json(),
        }];
        if let Some(message_id) = e.delivery.take_progress(&end.run.run_id) {
            items.push(NewOutboxItem {
                channel: channel.to_owned(),
                target,
                kind: OutboxKind::Delete,
                run_id: Some(end.run.run_id.clone()),
                payload: Payload {
                    message_id: Some(message_id),
                    ..Payload::default()
                }
                .to_json(),
            });
        }
        items
    }

    fn on_confirmation(&self, rec: &ConfirmationRecord, token: &str) -> Vec<NewOutboxItem> {
        let Some((e, target)) = self.owner(&rec.thread_key) else {
            return Vec::new();
        };
        let text = format!(
            "Approve this action?\n\n{}: {}{CONFIRM_HINT} `confirm {token}` or `deny {token}`.",
            rec.tool, rec.summary
        );
        vec![NewOutboxItem {
            channel: e.delivery.name().to_owned(),
            target,
            kind: OutboxKind::Prompt,
            run_id: Some(rec.run_id.clone()),
            payload: Payload {
                text,
                confirm: Some(ConfirmButtons {
                    token: token.to_owned(),
                }),
                reply_to: e.delivery.reply_to_of(&rec.thread_key),
                ..Payload::default()
            }
            .to_json(),
        }]
    }

    fn committed(&self, channel: &str) {
        if let Some(e) = self.find(channel) {
            e.wake.notify_one();
        }
    }

    fn scope_of(&self, thread_key: &str) -> Option<String> {
        let (e, _) = self.owner(thread_key)?;
        e.delivery.scope_of(thread_key)
    }

    fn on_app_message(
        &self,
        thread_key: &str,
        run_id: Option<&str>,
        text: &str,
    ) -> Option<NewOutboxItem> {
        let (e, target) = self.owner(thread_key)?;
        // Other bots' commands exist on Discord only.
        if e.delivery.name() != "discord" {
            return None;
        }
        Some(NewOutboxItem {
            channel: "discord".to_owned(),
            target,
            kind: OutboxKind::Message,
            run_id: run_id.map(str::to_owned),
            payload: Payload::notice(text).to_json(),
        })
    }
}
