//! `[channels]`: the chat platforms hearth answers on. Every channel is off
//! until enabled; tokens come from the environment or sealed secrets, never
//! from the file; every base URL is configurable (tests, proxies,
//! self-hosted API servers).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[channels]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelsConfig {
    /// How long an undelivered reply is retried before it fails (`"24h"`).
    pub outbox_max_age: String,
    /// `[channels.telegram]`
    pub telegram: TelegramConfig,
    /// `[channels.discord]`
    pub discord: DiscordConfig,
    /// `[channels.slack]`
    pub slack: SlackConfig,
}

impl Default for ChannelsConfig {
    fn default() -> Self {
        Self {
            outbox_max_age: "24h".into(),
            telegram: TelegramConfig::default(),
            discord: DiscordConfig::default(),
            slack: SlackConfig::default(),
        }
    }
}

impl ChannelsConfig {
    /// `outbox_max_age` as a duration (validated at load).
    pub fn outbox_max_age(&self) -> Duration {
        parse_duration(&self.outbox_max_age).unwrap_or(Duration::from_secs(24 * 3600))
    }
}

/// How Telegram delivers updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TelegramMode {
    /// `getUpdates` long polling (works behind NAT, no public URL).
    #[default]
    Polling,
    /// Telegram posts updates to `POST /channels/telegram/webhook`.
    Webhook,
}

/// `[channels.telegram]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelegramConfig {
    /// Off unless set.
    pub enabled: bool,
    /// Start without this channel when its token is missing (it shows as
    /// degraded with the reason); otherwise a missing token stops `serve`.
    pub optional: bool,
    /// Environment variable holding the bot token.
    pub token_env: Option<String>,
    /// Name of a sealed secret holding the bot token.
    pub token_secret: Option<String>,
    /// Requests go to `{api_base}/bot<token>/<method>`.
    pub api_base: String,
    /// Polling or webhook.
    pub mode: TelegramMode,
    /// The public URL Telegram posts to (webhook mode).
    pub webhook_url: Option<String>,
    /// Environment variable holding the webhook's secret token (webhook mode).
    pub webhook_secret_env: Option<String>,
    /// Telegram user ids let in without pairing.
    pub allowed_users: Vec<i64>,
    /// Anyone may talk in private chats (no pairing).
    pub open_dms: bool,
    /// The permission mode of this channel's threads nobody set one on
    /// (default: `[permissions] default_mode`).
    pub default_mode: Option<crate::ModeName>,
    /// Anyone may mention the bot in groups.
    pub open_groups: bool,
    /// Seconds one `getUpdates` call waits for updates.
    pub poll_timeout_secs: u64,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            optional: false,
            token_env: Some("TELEGRAM_BOT_TOKEN".into()),
            token_secret: None,
            api_base: "https://api.telegram.org".into(),
            mode: TelegramMode::Polling,
            webhook_url: None,
            webhook_secret_env: None,
            allowed_users: Vec::new(),
            open_dms: false,
            default_mode: None,
            open_groups: false,
            poll_timeout_secs: 30,
        }
    }
}

/// `[channels.discord]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscordConfig {
    /// Off unless set.
    pub enabled: bool,
    /// Start without this channel when its token is missing (it shows as
    /// degraded with the reason); otherwise a missing token stops `serve`.
    pub optional: bool,
    /// Environment variable holding the bot token.
    pub token_env: Option<String>,
    /// Name of a sealed secret holding the bot token.
    pub token_secret: Option<String>,
    /// REST base URL.
    pub api_base: String,
    /// Gateway URL; empty: the one `GET {api_base}/gateway/bot` gives.
    pub gateway_url: String,
    /// Registers the slash commands (bulk overwrite) at start.
    pub sync_commands: bool,
    /// Discord user ids let in to DMs without pairing.
    pub allowed_users: Vec<u64>,
    /// Anyone may DM the bot (no pairing).
    pub open_dms: bool,
    /// The permission mode of this channel's threads nobody set one on
    /// (default: `[permissions] default_mode`).
    pub default_mode: Option<crate::ModeName>,
    /// Only these guilds are answered; empty: every guild the bot is in.
    pub guilds: Vec<u64>,
    /// Guilds whose answers carry a reply-latency footer.
    pub latency_footer_guilds: Vec<u64>,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            optional: false,
            token_env: Some("DISCORD_BOT_TOKEN".into()),
            token_secret: None,
            api_base: "https://discord.com/api/v10".into(),
            gateway_url: String::new(),
            sync_commands: true,
            allowed_users: Vec::new(),
            open_dms: false,
            default_mode: None,
            guilds: Vec::new(),
            latency_footer_guilds: Vec::new(),
        }
    }
}

/// How Slack delivers events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SlackMode {
    /// Socket Mode: hearth opens a WebSocket (no public URL).
    #[default]
    Socket,
    /// The Events API: Slack posts to `POST /channels/slack/events`.
    Http,
}

/// `[channels.slack]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlackConfig {
    /// Off unless set.
    pub enabled: bool,
    /// Start without this channel when its token is missing (it shows as
    /// degraded with the reason); otherwise a missing token stops `serve`.
    pub optional: bool,
    /// Environment variable holding the bot token (`xoxb-`).
    pub bot_token_env: Option<String>,
    /// Name of a sealed secret holding the bot token.
    pub bot_token_secret: Option<String>,
    /// Environment variable holding the app-level token (`xapp-`, Socket Mode).
    pub app_token_env: Option<String>,
    /// Name of a sealed secret holding the app-level token.
    pub app_token_secret: Option<String>,
    /// Web API base URL.
    pub api_base: String,
    /// Socket Mode or HTTP.
    pub mode: SlackMode,
    /// Environment variable holding the signing secret (HTTP mode).
    pub signing_secret_env: Option<String>,
    /// Slack user ids let in to DMs without pairing.
    pub allowed_users: Vec<String>,
    /// Anyone in the workspace may DM the bot (no pairing).
    pub open_dms: bool,
    /// The permission mode of this channel's threads nobody set one on
    /// (default: `[permissions] default_mode`).
    pub default_mode: Option<crate::ModeName>,
}

impl Default for SlackConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            optional: false,
            bot_token_env: Some("SLACK_BOT_TOKEN".into()),
            bot_token_secret: None,
            app_token_env: Some("SLACK_APP_TOKEN".into()),
            app_token_secret: None,
            api_base: "https://slack.com/api".into(),
            mode: SlackMode::Socket,
            signing_secret_env: None,
            allowed_users: Vec::new(),
            open_dms: false,
            default_mode: None,
        }
    }
}

/// Parses `"90s"`, `"30m"`, `"24h"`, `"7d"` (one number and one unit).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        "d" => n.checked_mul(86_400)?,
        _ => return None,
    };
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// The first mistake in `[channels]`, as (dotted key, message).
pub fn validate(c: &ChannelsConfig) -> Result<(), (String, String)> {
    if parse_duration(&c.outbox_max_age).is_none() {
        return Err((
            "channels.outbox_max_age".into(),
            format!(
                "{:?} is not a duration: write a number and a unit, e.g. \"24h\", \"90m\", \"7d\"",
                c.outbox_max_age
            ),
        ));
    }
    let bases = [
        ("channels.telegram.api_base", &c.telegram.api_base),
        ("channels.discord.api_base", &c.discord.api_base),
        ("channels.slack.api_base", &c.slack.api_base),
    ];
    for (key, base) in bases {
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err((
                key.into(),
                format!("{base:?} must be an http:// or https:// URL"),
            ));
        }
    }
    let t = &c.telegram;
    if t.enabled && t.token_env.is_none() && t.token_secret.is_none() {
        return Err((
            "channels.telegram.token_env".into(),
            "set token_env (an environment variable) or token_secret (a sealed secret) to the bot token from BotFather".into(),
        ));
    }
    if t.enabled && t.mode == TelegramMode::Webhook && t.webhook_secret_env.is_none() {
        return Err((
            "channels.telegram.webhook_secret_env".into(),
            "webhook mode needs webhook_secret_env: the variable holding the secret Telegram sends in X-Telegram-Bot-Api-Secret-Token".into(),
        ));
    }
    if t.poll_timeout_secs > 50 {
        return Err((
            "channels.telegram.poll_timeout_secs".into(),
            "must be at most 50 (seconds one getUpdates call waits)".into(),
        ));
    }
    let d = &c.discord;
    if d.enabled && d.token_env.is_none() && d.token_secret.is_none() {
        return Err((
            "channels.discord.token_env".into(),
            "set token_env or token_secret to the bot token from the Discord developer portal"
                .into(),
        ));
    }
    let ws = d.gateway_url.starts_with("ws://") || d.gateway_url.starts_with("wss://");
    if !d.gateway_url.is_empty() && !ws {
        return Err((
            "channels.discord.gateway_url".into(),
            format!(
                "{:?} must be a ws:// or wss:// URL, or empty",
                d.gateway_url
            ),
        ));
    }
    let s = &c.slack;
    if s.enabled && s.bot_token_env.is_none() && s.bot_token_secret.is_none() {
        return Err((
            "channels.slack.bot_token_env".into(),
            "set bot_token_env or bot_token_secret to the bot token (xoxb-...)".into(),
        ));
    }
    if s.enabled
        && s.mode == SlackMode::Socket
        && s.app_token_env.is_none()
        && s.app_token_secret.is_none()
    {
        return Err((
            "channels.slack.app_token_env".into(),
            "Socket Mode needs app_token_env or app_token_secret (an app-level token, xapp-...)"
                .into(),
        ));
    }
    if s.enabled && s.mode == SlackMode::Http && s.signing_secret_env.is_none() {
        return Err((
            "channels.slack.signing_secret_env".into(),
            "HTTP mode needs signing_secret_env: the variable holding the app's signing secret"
                .into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_one_unit() {
        assert_eq!(parse_duration("24h"), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(604_800)));
        for bad in [
            "",
            "h",
            "24",
            "0h",
            "1.5h",
            "24 hours",
            "-1h",
            "99999999999999999999d",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_enabled_channel_needs_a_token_source() {
        let mut c = ChannelsConfig::default();
        assert!(validate(&c).is_ok());
        c.telegram.enabled = true;
        c.telegram.token_env = None;
        let (key, _) = validate(&c).unwrap_err();
        assert_eq!(key, "channels.telegram.token_env");
        c.telegram.token_secret = Some("tg".into());
        assert!(validate(&c).is_ok());
        c.outbox_max_age = "a day".into();
        assert_eq!(validate(&c).unwrap_err().0, "channels.outbox_max_age");
    }
}
