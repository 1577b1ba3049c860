//! Discord: the gateway (twilight-gateway: IDENTIFY, heartbeats, RESUME,
//! re-IDENTIFY, backoff; the session kept in the store, so the next
//! process to connect resumes it), DMs and guild mentions, pairing for strangers in
//! DMs, slash commands, Approve/Deny buttons, typing and a throttled
//! progress message, and delivery of the outbox over REST with `nonce` +
//! `enforce_nonce`, so a retried part is never posted twice.
//!
//! twilight's types stay inside this module; REST goes through hearth's
//! reqwest ([`api`]).

pub mod api;
mod apps;
mod commands;
mod deliver;
mod gateway;
mod inbound;
mod interactions;
mod llm;
mod permissions;
mod plugins;
mod presses;
mod session;
mod stats;
pub mod types;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use hearth_core::records::outbox::OutboxItem;
use hearth_core::{Timestamp, now_ms};
use hearth_runtime::Runtime;
use hearth_runtime::config::DiscordConfig;
use hearth_runtime::surfaces::{AccessStore, OutboxStore};
use reqwest::Method;
use tokio_util::sync::CancellationToken;

use self::api::Api;
use crate::access::Access;
use crate::channel::{Delivery, Ingress, Live, Undelivered};
use crate::error::ChannelError;
use crate::hub::Enabled;
use crate::kit::Kit;
use crate::payload::Payload;

/// Thread keys of Discord channels start with this.
const THREAD_PREFIX: &str = "discord:channel:";

/// The thread of a channel (a DM is a channel too).
pub fn thread_key(channel_id: &str) -> String {
    format!("{THREAD_PREFIX}{channel_id}")
}

/// The user key of a Discord user.
pub fn user_key(user_id: &str) -> String {
    format!("discord:user:{user_id}")
}

/// The permission scope of a guild: grants made there with `/permissions`
/// apply to runs asked there.
pub fn guild_scope(guild_id: &str) -> String {
    format!("discord:guild:{guild_id}")
}

/// True for a snowflake (decimal digits only), so ids from events can be
/// put in URL paths.
fn is_snowflake(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Who the bot is, from `READY`.
#[derive(Debug, Clone)]
struct Identity {
    user_id: String,
    app_id: String,
}

/// The bot token, never printed.
struct Token(String);

/// The Discord channel's inbound side: the channel and the runtime.
type Dc = Live<Discord>;

/// The Discord channel.
pub struct Discord {
    config: DiscordConfig,
    /// `Err` when the token could not be read: the channel stays degraded.
    token: Result<Token, String>,
    kit: Kit<Api, Identity>,
    /// Guild owners seen in `GUILD_CREATE` (admins in their guild).
    owners: Mutex<HashMap<String, String>>,
    /// When the message behind a run was received, for runs answered in a
    /// `latency_footer_guilds` guild (in memory: no footer after a restart).
    footers: Mutex<HashMap<String, Timestamp>>,
    /// Member lookups of apps' bots: (guild, user) -> (member, when asked).
    members: Mutex<HashMap<(String, String), (bool, std::time::Instant)>>,
}

impl Discord {
    /// The channel for `config`, with its token (or why it is missing).
    pub fn new(
        config: DiscordConfig,
        token: Result<String, ChannelError>,
        client: reqwest::Client,
        store: Arc<dyn OutboxStore>,
        access: Arc<dyn AccessStore>,
    ) -> Arc<Self> {
        let access = Access::new(
            "discord",
            config
                .allowed_users
                .iter()
                .map(|id| user_key(&id.to_string())),
            config.open_dms,
            access,
        );
        let token = token.map(Token).map_err(|e| e.to_string());
        let api = token
            .as_ref()
            .map(|t| Api::new(client, &config.api_base, &t.0))
            .map_err(Clone::clone);
        Arc::new(Self {
            kit: Kit::new("discord", api, store, access),
            config,
            token,
            owners: Mutex::default(),
            footers: Mutex::default(),
            members: Mutex::default(),
        })
    }

    /// The channel as the hub holds it.
    pub(crate) fn enabled(self: &Arc<Self>) -> Enabled {
        self.kit.enable(self.clone(), self.clone())
    }

    fn owner_of(&self, guild_id: &str) -> Option<String> {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(guild_id)
            .cloned()
    }

    /// Notes that `run_id` answers a message received at `received` in a
    /// guild that wants the latency footer.
    fn time_reply(&self, run_id: &str, received: Timestamp) {
        let mut map = self.footers.lock().unwrap_or_else(PoisonError::into_inner);
        // Runs whose answer never came are forgotten after a day.
        map.retain(|_, t| now_ms() - *t < 86_400_000);
        map.insert(run_id.to_owned(), received);
    }

    /// The latency footer of `run_id`'s answer queued at `queued`. Kept
    /// until delivered, so a retry renders (and splits) the same text.
    fn footer(&self, run_id: &str, queued: Timestamp) -> Option<String> {
        let map = self.footers.lock().unwrap_or_else(PoisonError::into_inner);
        let received = *map.get(run_id)?;
        let secs = (queued - received).max(0) as f64 / 1000.0;
        Some(format!("\n-# answered in {secs:.1} s"))
    }

    fn footer_sent(&self, run_id: &str) {
        self.footers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run_id);
    }

    /// True when guild `guild_id` is answered (`guilds` narrows).
    fn guild_allowed(&self, guild_id: &str) -> bool {
        self.config.guilds.is_empty()
            || self.config.guilds.iter().any(|g| g.to_string() == guild_id)
    }
}

#[async_trait::async_trait]
impl Delivery for Discord {
    fn name(&self) -> &'static str {
        self.kit.name()
    }

    fn target_of(&self, thread_key: &str) -> Option<String> {
        let id = thread_key.strip_prefix(THREAD_PREFIX)?;
        is_snowflake(id).then(|| id.to_owned())
    }

    async fn deliver(&self, item: &OutboxItem, payload: &Payload) -> Result<(), Undelivered> {
        deliver::deliver(self, item, payload).await
    }

    fn take_progress(&self, run_id: &str) -> Option<String> {
        self.kit.progress.take(run_id)
    }

    async fn restore(&self, runtime: &Runtime) {
        self.kit.progress.restore(runtime).await;
    }

    async fn has_member(
        &self,
        guild_id: &str,
        user_id: &str,
    ) -> Option<Result<bool, ChannelError>> {
        Some(self.member(guild_id, user_id).await)
    }

    async fn check(&self) -> Result<String, ChannelError> {
        let me: types::User = self
            .kit
            .api_or_why()?
            .call(Method::GET, "/users/@me", "users/@me", None)
            .await
            .map_err(|e| ChannelError::Platform {
                channel: "discord",
                method: "GET /users/@me".into(),
                detail: e.to_string(),
            })?;
        Ok(format!(
            "token accepted: bot {} (id {})",
            me.username, me.id
        ))
    }
}

#[async_trait::async_trait]
impl Ingress for Discord {
    async fn run(self: Arc<Self>, runtime: Runtime, stop: CancellationToken) {
        gateway::run(Live::new(self, runtime), stop).await;
    }

    fn holds_connection(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_targets() {
        assert_eq!(thread_key("42"), "discord:channel:42");
        assert_eq!(user_key("7"), "discord:user:7");
        assert!(is_snowflake("123456789012345678"));
        assert!(!is_snowflake("12/../x"));
        assert!(!is_snowflake(""));
    }
}
