//! Builds the chat channels enabled in `[channels]` (each behind its cargo
//! feature), with tokens from the environment or the opened sealed secrets.

use std::collections::BTreeMap;
use std::sync::Arc;

use hearth_channels::Channels;
use hearth_channels::secrets::TokenSources;
use hearth_config::Config;
use hearth_runtime::Runtime;
use hearth_store::Store;
use hearth_store::secrets::SecretString;

/// The channels `config` enables. A channel whose token is missing still
/// exists: it logs the reason and shows as degraded, and hearth serves on.
pub fn build(
    config: &Config,
    env: &BTreeMap<String, String>,
    secrets: &BTreeMap<String, SecretString>,
    client: &reqwest::Client,
    runtime: &Runtime,
    store: &Arc<dyn Store>,
) -> Channels {
    let sources = TokenSources {
        env: env.clone(),
        sealed: secrets
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned()))
            .collect(),
    };
    // Pushed to only by the platforms this build has.
    #[cfg_attr(
        not(any(feature = "telegram", feature = "discord", feature = "slack")),
        allow(unused_mut)
    )]
    let mut enabled: Vec<(
        Arc<dyn hearth_channels::Channel>,
        hearth_channels::access::Access,
    )> = Vec::new();
    let ch = &config.channels;
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
            let tg = hearth_channels::telegram::Telegram::new(
                t.clone(),
                token,
                webhook_secret,
                client.clone(),
                runtime.clone(),
                store.clone(),
            );
            let access = tg.access();
            enabled.push((tg, access));
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
            let dc = hearth_channels::discord::Discord::new(
                d.clone(),
                token,
                client.clone(),
                runtime.clone(),
                store.clone(),
            );
            let access = dc.access();
            enabled.push((dc, access));
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
                hearth_config::SlackMode::Socket => sources.token(
                    "slack",
                    "app-level token",
                    s.app_token_env.as_deref(),
                    s.app_token_secret.as_deref(),
                ),
                hearth_config::SlackMode::Http => Err(hearth_channels::ChannelError::NoToken {
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
            let slack = hearth_channels::slack::Slack::new(
                s.clone(),
                bot_token,
                app_token,
                signing_secret,
                client.clone(),
                runtime.clone(),
                store.clone(),
            );
            let access = slack.access();
            enabled.push((slack, access));
        }
        #[cfg(not(feature = "slack"))]
        tracing::error!(
            "[channels.slack] is enabled, but this hearth was built without the `slack` feature"
        );
    }
    let _ = (client, runtime, &sources);
    Channels::new(
        store.clone(),
        enabled,
        ch.outbox_max_age(),
        runtime.notice_bus(),
    )
}
