//! Slack: Socket Mode (or the Events API over HTTP), direct messages with
//! pairing for strangers, channel mentions answered in a thread (and thread
//! replies continuing it without a mention), the `/hearth` slash command,
//! Approve/Deny buttons, a progress message, and delivery of the outbox as
//! escaped mrkdwn within Slack's limits.
//!
//! Thread keys: a DM is `slack:channel:<D…>`, a mention in a channel
//! `slack:thread:<C…>:<root ts>`. The outbox target is the platform
//! conversation id (`D…` or `C…`), as `/v1/outbox` promises; a thread's root
//! ts travels in the item's payload (`reply_to`), so replies land in the
//! thread. Items queued before that held `<C…>:<root ts>` as their target
//! and are still delivered. Runs are checked in the workspace's scope,
//! `slack:team:<T…>`.

pub mod api;
mod commands;
mod deliver;
mod http;
mod inbound;
mod interactive;
pub mod mrkdwn;
mod socket;
pub mod types;

pub use self::http::{PATH as EVENTS_PATH, sign};

use std::sync::Arc;

use hearth_core::records::outbox::OutboxItem;
use hearth_runtime::Runtime;
use hearth_runtime::config::{SlackConfig, SlackMode};
use hearth_runtime::surfaces::{AccessStore, OutboxStore, Webhook};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use self::api::Api;
use crate::access::Access;
use crate::channel::{Delivery, Ingress, Live, Undelivered};
use crate::error::ChannelError;
use crate::hub::Enabled;
use crate::kit::Kit;
use crate::payload::Payload;

const DM_PREFIX: &str = "slack:channel:";
const THREAD_PREFIX: &str = "slack:thread:";

/// The thread of a direct-message conversation.
pub fn dm_thread_key(channel: &str) -> String {
    format!("{DM_PREFIX}{channel}")
}

/// The thread of a Slack thread in a channel, by its root message.
pub fn thread_key(channel: &str, root_ts: &str) -> String {
    format!("{THREAD_PREFIX}{channel}:{root_ts}")
}

/// The user key of a Slack user.
pub fn user_key(user: &str) -> String {
    format!("slack:user:{user}")
}

/// A delivery target: the conversation, and the thread's root when the
/// reply belongs in a thread. Progress targets (and outbox items queued
/// before the target became the bare conversation id) are `<C…>:<root ts>`.
pub(crate) fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.split_once(':') {
        Some((channel, ts)) => (channel, Some(ts)),
        None => (target, None),
    }
}

/// The permission scope of a workspace.
pub fn team_scope(team: &str) -> String {
    format!("slack:team:{team}")
}

/// True for ids Slack gives conversations and users (`C0123ABC`): only
/// these are put into keys and targets.
fn is_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// True for message timestamps (`1700000000.000100`).
fn is_ts(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// The conversation and, for a thread, its root ts, of a Slack thread key.
fn parse_thread_key(thread_key: &str) -> Option<(&str, Option<&str>)> {
    if let Some(id) = thread_key.strip_prefix(DM_PREFIX) {
        return is_id(id).then_some((id, None));
    }
    let rest = thread_key.strip_prefix(THREAD_PREFIX)?;
    let (channel, ts) = rest.split_once(':')?;
    (is_id(channel) && is_ts(ts)).then_some((channel, Some(ts)))
}

/// The outbox target of a Slack thread key: the conversation id.
fn target_for(thread_key: &str) -> Option<String> {
    parse_thread_key(thread_key).map(|(channel, _)| channel.to_owned())
}

/// Where in the conversation a reply goes: a thread's root ts.
fn reply_to_for(thread_key: &str) -> Option<String> {
    parse_thread_key(thread_key).and_then(|(_, ts)| ts.map(str::to_owned))
}

/// Who the bot is, from `auth.test`.
#[derive(Debug, Clone)]
struct Identity {
    user_id: String,
    /// The workspace (`T…`), when Slack said and it is a well-formed id.
    team_id: Option<String>,
}

/// The Slack channel's inbound side: the channel and the runtime.
type Sl = Live<Slack>;

/// Slack's `error` codes that mean the token itself was refused: it will
/// not pass until someone changes it.
const REFUSED_TOKEN: [&str; 5] = [
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
];

/// The Slack channel.
pub struct Slack {
    config: SlackConfig,
    kit: Kit<Api, Identity>,
    /// The app-level token (Socket Mode), or why it is missing.
    app_token: Result<String, String>,
    /// The signing secret (HTTP mode).
    signing_secret: Option<String>,
}

impl Slack {
    /// The channel for `config`, with its tokens (or why they are missing)
    /// and the signing secret in HTTP mode.
    pub fn new(
        config: SlackConfig,
        bot_token: Result<String, ChannelError>,
        app_token: Result<String, ChannelError>,
        signing_secret: Option<String>,
        client: reqwest::Client,
        store: Arc<dyn OutboxStore>,
        access: Arc<dyn AccessStore>,
    ) -> Arc<Self> {
        let access = Access::new(
            "slack",
            config.allowed_users.iter().map(|id| user_key(id)),
            config.open_dms,
            access,
        );
        let api = bot_token
            .map(|t| Api::new(client, &config.api_base, t))
            .map_err(|e| e.to_string());
        Arc::new(Self {
            kit: Kit::new("slack", api, store, access),
            config,
            app_token: app_token.map_err(|e| e.to_string()),
            signing_secret,
        })
    }

    /// The channel as the hub holds it.
    pub(crate) fn enabled(self: &Arc<Self>) -> Enabled {
        self.kit.enable(self.clone(), self.clone())
    }

    /// The scope of a run from `team` (an event's `team_id`), or the bot's
    /// workspace from `auth.test`.
    fn scope_for(&self, team: Option<&str>) -> Option<String> {
        team.filter(|t| is_id(t))
            .or_else(|| self.kit.me.get().and_then(|m| m.team_id.as_deref()))
            .map(team_scope)
    }

    /// `auth.test`: who the bot is and in which workspace.
    async fn auth_test(&self) -> Result<types::AuthTest, ChannelError> {
        self.kit
            .api_or_why()?
            .call("auth.test", &json!({}))
            .await
            .map_err(|e| ChannelError::Platform {
                channel: "slack",
                method: "auth.test".into(),
                detail: e.to_string(),
            })
    }

    /// Learns the bot's user id (`auth.test`), once.
    /// When `error` (a failed call's text) says Slack refused one of the
    /// tokens (`app`: the app-level one): says what to check, on the log
    /// and the channel's health, and gives the delay before the next try,
    /// slow once refused three times in a row. `None` for other failures.
    fn refused(
        &self,
        error: &str,
        app: bool,
        backoff: &mut crate::backoff::Backoff,
    ) -> Option<std::time::Duration> {
        let code = REFUSED_TOKEN.iter().find(|c| error.contains(*c))?;
        let delay = backoff.refused();
        let c = &self.config;
        let (what, source, fix) = if app {
            (
                "app-level token",
                crate::advice::token_source(
                    c.app_token_env.as_deref(),
                    c.app_token_secret.as_deref(),
                ),
                crate::advice::SLACK_APP_FIX,
            )
        } else {
            (
                "bot token",
                crate::advice::token_source(
                    c.bot_token_env.as_deref(),
                    c.bot_token_secret.as_deref(),
                ),
                crate::advice::SLACK_FIX,
            )
        };
        let why = crate::advice::token_refused("Slack", what, code, &source, fix);
        let why = crate::advice::with_retry(why, backoff.slow_pace());
        tracing::error!(channel = "slack", error = %why, "Slack refused a token");
        self.kit.health.failed(why);
        Some(delay)
    }

    async fn identify(&self) -> Result<(), ChannelError> {
        if self.kit.me.get().is_some() {
            return Ok(());
        }
        let me = self.auth_test().await?;
        tracing::info!(channel = "slack", bot_user = %me.user_id, team = me.team.as_deref().unwrap_or("unknown"), "Slack bot identified");
        let _ = self.kit.me.set(Identity {
            user_id: me.user_id,
            team_id: me.team_id.filter(|t| is_id(t)),
        });
        Ok(())
    }
}

#[async_trait::async_trait]
impl Delivery for Slack {
    fn name(&self) -> &'static str {
        self.kit.name()
    }

    fn target_of(&self, thread_key: &str) -> Option<String> {
        target_for(thread_key)
    }

    fn reply_to_of(&self, thread_key: &str) -> Option<String> {
        reply_to_for(thread_key)
    }

    fn scope_of(&self, thread_key: &str) -> Option<String> {
        // Runs carry their scope since it was stored with them; this is the
        // fallback for runs stored before, in the bot's workspace.
        parse_thread_key(thread_key)?;
        self.scope_for(None)
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

    async fn check(&self) -> Result<String, ChannelError> {
        let me = self.auth_test().await?;
        Ok(format!(
            "token accepted: bot {} ({}) in {}",
            me.user.unwrap_or_default(),
            me.user_id,
            me.team.or(me.team_id).unwrap_or_default()
        ))
    }
}

#[async_trait::async_trait]
impl Ingress for Slack {
    async fn run(self: Arc<Self>, runtime: Runtime, stop: CancellationToken) {
        match self.config.mode {
            SlackMode::Socket => socket::run(Live::new(self, runtime), stop).await,
            SlackMode::Http => http::run(self, stop).await,
        }
    }

    fn holds_connection(&self) -> bool {
        self.config.mode == SlackMode::Socket
    }

    fn webhook(self: Arc<Self>) -> Option<Arc<dyn Webhook>> {
        (self.config.mode == SlackMode::Http)
            .then(|| Arc::new(http::SlackEvents(self)) as Arc<dyn Webhook>)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_come_from_thread_keys() {
        assert_eq!(split_target("D123"), ("D123", None));
        assert_eq!(split_target("C1:1700.01"), ("C1", Some("1700.01")));
        assert!(is_id("C0123ABC") && !is_id("C1:2") && !is_id(""));
        assert!(is_ts("1700000000.000100") && !is_ts("17a"));
        assert_eq!(dm_thread_key("D1"), "slack:channel:D1");
        assert_eq!(thread_key("C1", "17.5"), "slack:thread:C1:17.5");
        assert_eq!(user_key("U9"), "slack:user:U9");
        assert_eq!(target_for("slack:channel:D1").as_deref(), Some("D1"));
        assert_eq!(target_for("slack:thread:C1:17.5").as_deref(), Some("C1"));
        assert_eq!(
            reply_to_for("slack:thread:C1:17.5").as_deref(),
            Some("17.5")
        );
        assert_eq!(reply_to_for("slack:channel:D1"), None);
        assert_eq!(team_scope("T1"), "slack:team:T1");
        assert_eq!(target_for("slack:thread:C1:x"), None);
        assert_eq!(target_for("telegram:chat:1"), None);
    }
}
