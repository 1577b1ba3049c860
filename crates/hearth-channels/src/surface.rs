//! The chat channels as the runtime's builder assembles them:
//! [`ChannelsFactory`] builds every channel `[channels]` enables (each behind
//! its cargo feature, with its token from the environment or the opened
//! sealed secrets) and the alerts, from the narrow stores the builder hands
//! out; the surface it returns routes replies, administers the channels,
//! serves the push endpoints, and starts and stops the loops with the
//! runtime.

use std::sync::{Arc, Mutex, PoisonError};

use hearth_runtime::surfaces::{
    ChannelAdmin, ChatSurface, ChatSurfaceFactory, ReplyRouter, SurfaceContext, Webhook,
};
use hearth_runtime::{BuildError, Notice, Runtime};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::alerts::Alerts;
use crate::hub::Channels;
use crate::secrets::TokenSources;

/// Builds the channels and alerts of a configuration (see the module
/// documentation). A channel whose token is missing stops the start,
/// unless it is marked `optional = true`: then it still exists, logs the
/// reason and shows as degraded, and hearth serves on.
#[derive(Debug, Default, Clone, Copy)]
pub struct ChannelsFactory;

impl ChatSurfaceFactory for ChannelsFactory {
    fn build(&self, ctx: SurfaceContext<'_>) -> Result<Arc<dyn ChatSurface>, BuildError> {
        let sources = TokenSources {
            env: ctx.env.clone(),
            sealed: ctx
                .secrets
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                .collect(),
        };
        // A missing token stops the start, as a missing provider key does,
        // unless the channel is marked optional.
        for missing in crate::required::missing_tokens(&ctx.config.channels, &sources) {
            if !missing.optional {
                return Err(BuildError::Config(missing.refusal()));
            }
            tracing::warn!(channel = missing.channel, reason = %missing.degraded(), "channel not started");
        }
        let channels = channels(&ctx, &sources);
        let config = ctx.config;
        let alert_secret = config
            .alerts
            .webhook_secret_env
            .as_deref()
            .and_then(|var| ctx.env.get(var))
            .cloned();
        let alerts = Alerts::new(
            &config.alerts,
            alert_secret,
            ctx.http.clone(),
            ctx.outbox.clone(),
            channels.clone(),
            config.channels.outbox_max_age(),
        )
        .map_err(|e| BuildError::Config(e.to_string()))?
        // Subscribed now, before the runtime exists, so no notice of
        // recovered runs is missed; matched once started.
        .map(|a| (a, ctx.notices.subscribe()));
        // Nothing fails from here: the channels taken over are this
        // surface's to stop now.
        channels.adopt();
        Ok(Arc::new(ChannelsSurface {
            channels,
            alerts: Mutex::new(alerts),
            alerts_stop: Mutex::new(None),
        }))
    }
}

/// The channels enabled in `ctx.config`.
fn channels(ctx: &SurfaceContext<'_>, sources: &TokenSources) -> Channels {
    // Pushed to only by the platforms this build has.
    #[cfg_attr(
        not(any(
            feature = "telegram",
            feature = "discord",
            feature = "slack",
            feature = "sms"
        )),
        expect(unused_mut, reason = "no platform is built in to push")
    )]
    let mut enabled: Vec<crate::hub::Enabled> = Vec::new();
    let ch = &ctx.config.channels;
    let env = ctx.env;
    // The channels in force, when a reload builds these: one whose key is
    // the same is taken over, connected.
    let previous = ctx
        .previous
        .and_then(|p| p.as_any())
        .and_then(|a| a.downcast_ref::<ChannelsSurface>())
        .map(|s| &s.channels);
    if ch.telegram.enabled {
        #[cfg(feature = "telegram")]
        {
            let t = &ch.telegram;
            let token = sources.token(
                "telegram",
                "bot token",
                t.token_env.as_deref(),
                t.token_secret.as_deref(),
            );
            let webhook_secret = t
                .webhook_secret_env
                .as_deref()
                .and_then(|var| env.get(var))
                .filter(|v| !v.trim().is_empty())
                .cloned();
            let key = key(
                t,
                &ch.outbox_max_age,
                &[token.as_deref().ok(), webhook_secret.as_deref()],
            );
            match previous.and_then(|p| p.reusable("telegram", &key)) {
                Some(kept) => enabled.push(kept),
                None => {
                    let tg = crate::telegram::Telegram::new(
                        t.clone(),
                        token,
                        webhook_secret,
                        ctx.http.clone(),
                        ctx.outbox.clone(),
                        ctx.access.clone(),
                    );
                    enabled.push(tg.enabled().keyed(key));
                }
            }
        }
        #[cfg(not(feature = "telegram"))]
        tracing::error!(
            "[channels.telegram] is enabled, but this hearth was built without the `telegram` feature"
        );
    }
    if ch.discord.enabled {
        #[cfg(feature = "discord")]
        {
            let d = &ch.discord;
            let token = sources.token(
                "discord",
                "bot token",
                d.token_env.as_deref(),
                d.token_secret.as_deref(),
            );
            let key = key(d, &ch.outbox_max_age, &[token.as_deref().ok()]);
            match previous.and_then(|p| p.reusable("discord", &key)) {
                Some(kept) => enabled.push(kept),
                None => {
                    let dc = crate::discord::Discord::new(
                        d.clone(),
                        token,
                        ctx.http.clone(),
                        ctx.outbox.clone(),
                        ctx.access.clone(),
                    );
                    enabled.push(dc.enabled().keyed(key));
                }
            }
        }
        #[cfg(not(feature = "discord"))]
        tracing::error!(
            "[channels.discord] is enabled, but this hearth was built without the `discord` feature"
        );
    }
    if ch.slack.enabled {
        #[cfg(feature = "slack")]
        {
            let s = &ch.slack;
            let bot_token = sources.token(
                "slack",
                "bot token",
                s.bot_token_env.as_deref(),
                s.bot_token_secret.as_deref(),
            );
            // Only Socket Mode needs the app-level token.
            let app_token = match s.mode {
                hearth_runtime::config::SlackMode::Socket => sources.token(
                    "slack",
                    "app-level token",
                    s.app_token_env.as_deref(),
                    s.app_token_secret.as_deref(),
                ),
                hearth_runtime::config::SlackMode::Http => Err(crate::ChannelError::NoToken {
                    channel: "slack",
                    detail: "HTTP mode uses no app-level token".into(),
                }),
            };
            let signing_secret = s
                .signing_secret_env
                .as_deref()
                .and_then(|var| env.get(var))
                .filter(|v| !v.trim().is_empty())
                .map(|v| v.trim().to_owned());
            let key = key(
                s,
                &ch.outbox_max_age,
                &[
                    bot_token.as_deref().ok(),
                    app_token.as_deref().ok(),
                    signing_secret.as_deref(),
                ],
            );
            match previous.and_then(|p| p.reusable("slack", &key)) {
                Some(kept) => enabled.push(kept),
                None => {
                    let slack = crate::slack::Slack::new(
                        s.clone(),
                        bot_token,
                        app_token,
                        signing_secret,
                        ctx.http.clone(),
                        ctx.outbox.clone(),
                        ctx.access.clone(),
                    );
                    enabled.push(slack.enabled().keyed(key));
                }
            }
        }
        #[cfg(not(feature = "slack"))]
        tracing::error!(
            "[channels.slack] is enabled, but this hearth was built without the `slack` feature"
        );
    }
    if ch.sms.enabled {
        #[cfg(feature = "sms")]
        {
            let s = &ch.sms;
            let token = sources.token(
                "sms",
                "auth token",
                s.auth_token_env.as_deref(),
                s.auth_token_secret.as_deref(),
            );
            let key = key(s, &ch.outbox_max_age, &[token.as_deref().ok()]);
            match previous.and_then(|p| p.reusable("sms", &key)) {
                Some(kept) => enabled.push(kept),
                None => {
                    let sms = crate::sms::Sms::new(
                        s.clone(),
                        token,
                        ctx.http.clone(),
                        ctx.outbox.clone(),
                        ctx.access.clone(),
                    );
                    enabled.push(sms.enabled().keyed(key));
                }
            }
        }
        #[cfg(not(feature = "sms"))]
        tracing::error!(
            "[channels.sms] is enabled, but this hearth was built without the `sms` feature"
        );
    }
    let _ = (sources, env, previous);
    Channels::new(
        ctx.outbox.clone(),
        ctx.access.clone(),
        enabled,
        ch.outbox_max_age(),
        ctx.notices.clone(),
    )
}

/// How long stopping waits for the loops and senders to end (a delivery
/// under way, a long poll to notice the stop).
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// What a channel is built from, hashed: its section, the outbox's age
/// limit and the secrets it read (kept only as this hash). A reload that
/// gives a channel the same key keeps it connected.
#[cfg_attr(
    not(any(
        feature = "telegram",
        feature = "discord",
        feature = "slack",
        feature = "sms"
    )),
    expect(dead_code, reason = "no platform is built in")
)]
fn key(section: &impl serde::Serialize, max_age: &str, secrets: &[Option<&str>]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(serde_json::to_vec(section).unwrap_or_default());
    hash.update([0]);
    hash.update(max_age.as_bytes());
    for secret in secrets {
        // Length-prefixed, so that two secrets cannot trade bytes.
        match secret {
            Some(v) => {
                hash.update([1]);
                hash.update((v.len() as u64).to_le_bytes());
                hash.update(v.as_bytes());
            }
            None => hash.update([0]),
        }
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The channels and alerts, started and stopped with the runtime.
struct ChannelsSurface {
    channels: Channels,
    /// The alerts and the notices they match, until started.
    alerts: Mutex<Option<(Alerts, broadcast::Receiver<Notice>)>>,
    /// Stops the alerts once started.
    alerts_stop: Mutex<Option<CancellationToken>>,
}

#[async_trait::async_trait]
impl ChatSurface for ChannelsSurface {
    fn reply_router(&self) -> Option<Arc<dyn ReplyRouter>> {
        // Nothing is owed without a channel; runs then skip routing.
        (!self.channels.is_empty()).then(|| Arc::new(self.channels.clone()) as Arc<dyn ReplyRouter>)
    }

    fn admin(&self) -> Arc<dyn ChannelAdmin> {
        Arc::new(self.channels.clone())
    }

    fn webhooks(&self) -> Vec<Arc<dyn Webhook>> {
        self.channels.webhooks()
    }

    async fn restore(&self, runtime: &Runtime) {
        // Before recovery, so a recovered run that fails is alerted about too.
        let alerts = self
            .alerts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((alerts, notices)) = alerts {
            let stop = alerts.start(notices, crate::outbox::Claimer::of(runtime));
            *self
                .alerts_stop
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(stop);
        }
        self.channels.restore(runtime).await;
    }

    fn start(&self, runtime: Runtime) {
        self.channels.start(&runtime);
    }

    async fn shutdown(&self) {
        self.channels.stopped(STOP_GRACE).await;
        let stop = self
            .alerts_stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(stop) = stop {
            stop.cancel();
        }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(all(
    test,
    any(
        feature = "telegram",
        feature = "discord",
        feature = "slack",
        feature = "sms"
    )
))]
mod tests {
    use super::key;

    #[test]
    fn a_channel_key_changes_with_its_section_its_outbox_age_and_its_tokens() {
        let section = serde_json::json!({"enabled": true, "token_env": "TG"});
        let base = key(&section, "24h", &[Some("t1"), None]);
        assert_eq!(base, key(&section, "24h", &[Some("t1"), None]));
        let other = serde_json::json!({"enabled": true, "token_env": "TG2"});
        assert_ne!(base, key(&other, "24h", &[Some("t1"), None]));
        assert_ne!(base, key(&section, "1h", &[Some("t1"), None]));
        assert_ne!(base, key(&section, "24h", &[Some("t2"), None]));
        assert_ne!(base, key(&section, "24h", &[None, Some("t1")]));
        assert!(!base.contains("t1"));
    }
}
