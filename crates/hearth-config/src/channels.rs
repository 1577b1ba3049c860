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
    /// `[channels.sms]`
    pub sms: SmsConfig,
}

impl Default for ChannelsConfig {
    fn default() -> Self {
        Self {
            outbox_max_age: "24h".into(),
            telegram: TelegramConfig::default(),
            discord: DiscordConfig::default(),
            slack: SlackConfig::default(),
            sms: SmsConfig::default(),
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

/// Who carries SMS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SmsProvider {
    /// Twilio's Programmable Messaging: inbound posts to
    /// `POST /channels/sms/twilio`, answers through its Messages API.
    #[default]
    Twilio,
}

/// `[channels.sms]`: text messages through Twilio. Threads are
/// `sms:<E.164 number>`; carriers' `STOP`, `START` and `HELP` are honoured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SmsConfig {
    /// Off unless set.
    pub enabled: bool,
    /// Start without this channel when its auth token is missing (it shows
    /// as degraded with the reason); otherwise a missing token stops `serve`.
    pub optional: bool,
    /// `twilio` (the only provider).
    pub provider: SmsProvider,
    /// The Twilio account (`AC...`): the Messages API's account and the
    /// Basic auth user.
    pub account_sid: String,
    /// Environment variable holding the account's auth token (default
    /// `TWILIO_AUTH_TOKEN`): it signs inbound posts and authenticates sends.
    pub auth_token_env: Option<String>,
    /// Name of a sealed secret holding the auth token (wins over the variable).
    pub auth_token_secret: Option<String>,
    /// The number answers are sent from (E.164), or
    pub from: Option<String>,
    /// a Messaging Service (`MG...`) that picks the sender; one of the two.
    pub messaging_service_sid: Option<String>,
    /// The URL Twilio is configured to post incoming messages to, exactly
    /// (scheme, host, path, query): the signature is computed over it.
    pub public_url: Option<String>,
    /// REST base URL (default Twilio's).
    pub api_base: String,
    /// Numbers (E.164, `+15551234567`) let in without pairing.
    pub allowed_users: Vec<String>,
    /// Anyone who texts the number is answered (no pairing).
    pub open_dms: bool,
    /// Most messages one answer is sent as (default 4, at most 10); the
    /// rest is replaced by a note that the full answer is at `/ui`.
    pub max_segments: u32,
    /// The permission mode of this channel's threads nobody set one on
    /// (default: `[permissions] default_mode`).
    pub default_mode: Option<crate::ModeName>,
}

impl Default for SmsConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            optional: false,
            provider: SmsProvider::Twilio,
            account_sid: String::new(),
            auth_token_env: Some("TWILIO_AUTH_TOKEN".into()),
            auth_token_secret: None,
            from: None,
            messaging_service_sid: None,
            public_url: None,
            api_base: "https://api.twilio.com".into(),
            allowed_users: Vec::new(),
            open_dms: false,
            max_segments: 4,
            default_mode: None,
        }
    }
}

/// Most segments `[channels.sms] max_segments` may ask for.
pub const MAX_SMS_SEGMENTS: u32 = 10;

/// True for an E.164 number: `+`, then 2 to 15 digits, the first not 0.
pub fn is_e164(number: &str) -> bool {
    number.strip_prefix('+').is_some_and(|d| {
        (2..=15).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()) && !d.starts_with('0')
    })
}

/// The first mistake in an enabled `[channels.sms]`.
fn validate_sms(s: &SmsConfig) -> Result<(), (String, String)> {
    let key = |k: &str| format!("channels.sms.{k}");
    if !(s.api_base.starts_with("http://") || s.api_base.starts_with("https://")) {
        return Err((
            key("api_base"),
            format!("{:?} must be an http:// or https:// URL", s.api_base),
        ));
    }
    if s.max_segments == 0 || s.max_segments > MAX_SMS_SEGMENTS {
        return Err((
            key("max_segments"),
            format!("must be 1 to {MAX_SMS_SEGMENTS} (messages one answer is sent as; default 4)"),
        ));
    }
    if let Some(bad) = s.allowed_users.iter().find(|n| !is_e164(n)) {
        return Err((
            key("allowed_users"),
            format!(
                "{bad:?} is not an E.164 number: write it as + and the country code, e.g. \"+15551234567\""
            ),
        ));
    }
    if !s.enabled {
        return Ok(());
    }
    let sid_ok = s.account_sid.len() == 34
        && s.account_sid.starts_with("AC")
        && s.account_sid.bytes().all(|b| b.is_ascii_alphanumeric());
    if !sid_ok {
        return Err((
            key("account_sid"),
            "set account_sid to the Twilio Account SID (AC and 32 hex characters, from the Twilio console)".into(),
        ));
    }
    if s.auth_token_env.is_none() && s.auth_token_secret.is_none() {
        return Err((
            key("auth_token_env"),
            "set auth_token_env (an environment variable) or auth_token_secret (a sealed secret) to the account's auth token".into(),
        ));
    }
    match (&s.from, &s.messaging_service_sid) {
        (None, None) => {
            return Err((
                key("from"),
                "set from (the Twilio number answers come from, E.164) or messaging_service_sid (MG...)".into(),
            ));
        }
        (Some(_), Some(_)) => {
            return Err((
                key("from"),
                "set from or messaging_service_sid, not both: Twilio sends through one".into(),
            ));
        }
        (Some(from), None) if !is_e164(from) => {
            return Err((
                key("from"),
                format!("{from:?} is not an E.164 number, e.g. \"+15551234567\""),
            ));
        }
        (None, Some(mg)) if !mg.starts_with("MG") => {
            return Err((
                key("messaging_service_sid"),
                format!("{mg:?} is not a Messaging Service SID (MG...)"),
            ));
        }
        _ => {}
    }
    match &s.public_url {
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => Ok(()),
        Some(u) => Err((
            key("public_url"),
            format!("{u:?} must be the http(s) URL Twilio posts to"),
        )),
        None => Err((
            key("public_url"),
            "set public_url to the URL Twilio posts incoming messages to (ending in /channels/sms/twilio): inbound signatures are checked against it".into(),
        )),
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
    validate_sms(&c.sms)?;
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

    #[test]
    fn an_enabled_sms_channel_needs_an_account_a_sender_and_its_public_url() {
        let mut c = ChannelsConfig::default();
        c.sms.enabled = true;
        assert_eq!(validate(&c).unwrap_err().0, "channels.sms.account_sid");
        c.sms.account_sid = format!("AC{}", "0".repeat(32));
        assert_eq!(validate(&c).unwrap_err().0, "channels.sms.from");
        c.sms.from = Some("5551234".into());
        assert_eq!(validate(&c).unwrap_err().0, "channels.sms.from");
        c.sms.from = Some("+15551234567".into());
        assert_eq!(validate(&c).unwrap_err().0, "channels.sms.public_url");
        c.sms.public_url = Some("https://example.test/channels/sms/twilio".into());
        assert!(validate(&c).is_ok());
        c.sms.messaging_service_sid = Some("MG1".into());
        assert_eq!(validate(&c).unwrap_err().0, "channels.sms.from");
        c.sms.messaging_service_sid = None;
        c.sms.max_segments = 0;
        assert_eq!(validate(&c).unwrap_err().0, "channels.sms.max_segments");
        c.sms.max_segments = 4;
        c.sms.allowed_users = vec!["+15550001111".into(), "0044".into()];
        assert_eq!(validate(&c).unwrap_err().0, "channels.sms.allowed_users");
        assert!(is_e164("+447700900123") && !is_e164("+0123") && !is_e164("+1"));
    }
}
