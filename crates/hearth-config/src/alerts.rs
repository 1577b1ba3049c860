//! `[alerts]` and `[[alerts.rules]]`: which process-wide events (a run
//! failed, a budget pool passed a threshold, a channel degraded, ...) are
//! sent where (a chat, a signed webhook), and how often at most.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::channels::parse_duration;

/// The events a rule's `on` can name (`*` and globs such as `run.*` match
/// several).
pub const ALERT_EVENTS: [&str; 6] = [
    "run.failed",
    "budget.threshold",
    "spend.daily_exceeded",
    "channel.degraded",
    "outbox.failed",
    "job.failed",
];

/// `[alerts]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlertsConfig {
    /// Environment variable holding the key webhook bodies are signed with
    /// (`X-Hearth-Signature: sha256=<hex hmac>`); required when a rule sends
    /// to a webhook.
    pub webhook_secret_env: Option<String>,
    /// At most one alert per rule in this long (`"10m"`), unless the rule
    /// sets its own; what is held back is counted in the next alert.
    pub min_interval: String,
    /// `[[alerts.rules]]`
    pub rules: Vec<AlertRule>,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        Self {
            webhook_secret_env: None,
            min_interval: "10m".into(),
            rules: Vec::new(),
        }
    }
}

/// `[[alerts.rules]]`: one event pattern and where its alerts go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertRule {
    /// The event pattern: a name from [`ALERT_EVENTS`], `*`, or a glob.
    pub on: String,
    /// A glob on the event's thread key or channel (`telegram:*`); events
    /// naming neither never match a rule that has one.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    /// `telegram:chat:<id>`, `discord:channel:<id>`, `slack:channel:<id>` or
    /// `webhook:<https url>`.
    pub to: String,
    /// This rule's own rate limit (default: `[alerts] min_interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_interval: Option<String>,
}

/// Where a rule's alerts go, parsed from `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlertTarget {
    /// A chat: its thread key on the channel (`telegram:chat:<id>`, ...).
    Chat {
        /// `telegram`, `discord` or `slack`.
        channel: &'static str,
        /// The thread key the channel owns.
        thread_key: String,
    },
    /// A JSON POST to this URL.
    Webhook(WebhookUrl),
}

/// A webhook's URL, which often carries its own credentials (a token in
/// the path or the query, a user and password): shown, logged and stored
/// as its scheme and host only ([`WebhookUrl::origin`]); the whole URL is
/// read only to send ([`WebhookUrl::expose`]).
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookUrl {
    url: String,
    origin: String,
}

impl WebhookUrl {
    /// The whole URL, credentials included: only for sending.
    pub fn expose(&self) -> &str {
        &self.url
    }

    /// `scheme://host[:port]`, safe to show.
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

impl std::fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WebhookUrl({:?})", self.origin)
    }
}

impl std::fmt::Display for WebhookUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.origin)
    }
}

/// `to` as it may be shown in an error: anything from a `://` on is left
/// out, since a URL may carry credentials.
fn shown(to: &str) -> String {
    match to.find("://") {
        Some(i) => format!("{}://…", &to[..i]),
        None => to.to_owned(),
    }
}

impl AlertTarget {
    /// Parses a rule's `to`; the error says which forms exist, and shows
    /// of a URL its scheme and host only.
    pub fn parse(to: &str) -> Result<Self, String> {
        if let Some(url) = to.strip_prefix("webhook:") {
            return check_webhook_url(url).map(Self::Webhook);
        }
        let chats = [
            ("telegram", "telegram:chat:"),
            ("discord", "discord:channel:"),
            ("slack", "slack:channel:"),
        ];
        for (channel, prefix) in chats {
            if let Some(id) = to.strip_prefix(prefix) {
                if id.is_empty() || id.contains(char::is_whitespace) {
                    break;
                }
                return Ok(Self::Chat {
                    channel,
                    thread_key: to.to_owned(),
                });
            }
        }
        Err(format!(
            "{:?} is not an alert target; use telegram:chat:<id>, discord:channel:<id>, \
             slack:channel:<id> or webhook:<https url>",
            shown(to)
        ))
    }
}

/// A webhook must be https, unless it goes to this machine. Errors show
/// the URL's scheme and host only.
fn check_webhook_url(raw: &str) -> Result<WebhookUrl, String> {
    let url = url::Url::parse(raw).map_err(|e| {
        format!("the webhook URL is not a URL ({e}); e.g. webhook:https://example.org/hook")
    })?;
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    let origin = match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{}://{host}:{port}", url.scheme()),
        (Some(host), None) => format!("{}://{host}", url.scheme()),
        (None, _) => format!("{}:", url.scheme()),
    };
    match url.scheme() {
        "https" if url.host_str().is_some() => Ok(WebhookUrl {
            url: raw.to_owned(),
            origin,
        }),
        "http" if loopback => Ok(WebhookUrl {
            url: raw.to_owned(),
            origin,
        }),
        "http" => Err(format!(
            "webhook URL {origin} must be https (plain http only to a loopback address, \
             which never leaves this machine)"
        )),
        "https" => Err(format!("webhook URL {origin} names no host")),
        other => Err(format!(
            "webhook URL {origin} has scheme {other:?}; use https"
        )),
    }
}

/// True when `text` matches `glob`, where `*` stands for any run of
/// characters (also none) and everything else for itself.
pub fn glob_match(glob: &str, text: &str) -> bool {
    let (g, t) = (glob.as_bytes(), text.as_bytes());
    let (mut gi, mut ti) = (0, 0);
    // The last star seen and where the text stood then: on a mismatch the
    // star takes one more character.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if gi < g.len() && g[gi] == b'*' {
            star = Some((gi, ti));
            gi += 1;
        } else if gi < g.len() && g[gi] == t[ti] {
            gi += 1;
            ti += 1;
        } else if let Some((sg, st)) = star {
            gi = sg + 1;
            ti = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|&c| c == b'*')
}

impl AlertsConfig {
    /// The rate limit of rule `i` (validated at load).
    pub fn min_interval_of(&self, rule: &AlertRule) -> Duration {
        let own = rule.min_interval.as_deref().and_then(parse_duration);
        own.or_else(|| parse_duration(&self.min_interval))
            .unwrap_or(Duration::from_secs(600))
    }

    /// True when some rule sends to a webhook.
    pub fn has_webhooks(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(AlertTarget::parse(&r.to), Ok(AlertTarget::Webhook(_))))
    }
}

/// The first mistake in `[alerts]`, as (dotted key, message). `enabled`
/// says whether a chat channel is enabled, so a rule cannot send to one
/// that is off.
pub fn validate(c: &AlertsConfig, enabled: impl Fn(&str) -> bool) -> Result<(), (String, String)> {
    let duration_hint = "write a number and a unit, e.g. \"10m\", \"90s\", \"1h\"";
    if parse_duration(&c.min_interval).is_none() {
        return Err((
            "alerts.min_interval".into(),
            format!("{:?} is not a duration: {duration_hint}", c.min_interval),
        ));
    }
    for (i, rule) in c.rules.iter().enumerate() {
        let key = |field: &str| format!("alerts.rules[{i}].{field}");
        if !ALERT_EVENTS.iter().any(|e| glob_match(&rule.on, e)) {
            return Err((
                key("on"),
                format!(
                    "{:?} matches no event; use one of {}, or \"*\"",
                    rule.on,
                    ALERT_EVENTS.join(", ")
                ),
            ));
        }
        if let Some(m) = &rule.min_interval
            && parse_duration(m).is_none()
        {
            return Err((
                key("min_interval"),
                format!("{m:?} is not a duration: {duration_hint}"),
            ));
        }
        match AlertTarget::parse(&rule.to).map_err(|e| (key("to"), e))? {
            AlertTarget::Chat { channel, .. } if !enabled(channel) => {
                return Err((
                    key("to"),
                    format!(
                        "{:?} sends to {channel}, which is not enabled; enable \
                         [channels.{channel}] or send the alert elsewhere",
                        rule.to
                    ),
                ));
            }
            AlertTarget::Webhook(_) if c.webhook_secret_env.is_none() => {
                return Err((
                    "alerts.webhook_secret_env".into(),
                    "a rule sends to a webhook: name the environment variable holding \
                     the signing key (webhook_secret_env = \"HEARTH_ALERT_SECRET\")"
                        .into(),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_shells_do() {
        assert!(glob_match("*", "run.failed"));
        assert!(glob_match("run.*", "run.failed"));
        assert!(glob_match("telegram:*", "telegram:chat:42"));
        assert!(glob_match("*:chat:4*", "telegram:chat:42"));
        assert!(glob_match("run.failed", "run.failed"));
        assert!(!glob_match("run.failed", "run.failed2"));
        assert!(!glob_match("run.*", "job.failed"));
        assert!(!glob_match("", "x"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
    }

    #[test]
    fn targets_parse_and_webhooks_must_be_https_unless_loopback() {
        assert_eq!(
            AlertTarget::parse("telegram:chat:-100123"),
            Ok(AlertTarget::Chat {
                channel: "telegram",
                thread_key: "telegram:chat:-100123".into()
            })
        );
        assert!(matches!(
            AlertTarget::parse("webhook:https://example.org/hook"),
            Ok(AlertTarget::Webhook(_))
        ));
        for ok in [
            "webhook:http://127.0.0.1:9000/h",
            "webhook:http://[::1]:9000/h",
            "webhook:http://localhost/h",
        ] {
            assert!(AlertTarget::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "webhook:http://example.org/hook",
            "webhook:http://10.0.0.1/hook",
            "webhook:ftp://example.org",
            "webhook:not a url",
            "telegram:chat:",
            "telegram:user:1",
            "email:me@example.org",
        ] {
            assert!(AlertTarget::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn webhook_urls_show_their_scheme_and_host_only() {
        let raw = "https://user:hunter2@hooks.example.org:8443/services/XXXXSECRET?token=abc";
        let Ok(AlertTarget::Webhook(url)) = AlertTarget::parse(&format!("webhook:{raw}")) else {
            panic!("a valid webhook target was refused");
        };
        assert_eq!(url.expose(), raw);
        assert_eq!(url.origin(), "https://hooks.example.org:8443");
        assert_eq!(url.to_string(), "https://hooks.example.org:8443");
        assert!(!format!("{url:?}").contains("hunter2"), "{url:?}");
        for bad in [
            "webhook:http://user:hunter2@example.org/XXXXSECRET",
            "webhook:ftp://user:hunter2@example.org/XXXXSECRET",
            "webhook:hunter2 XXXXSECRET",
            "webhok:https://user:hunter2@example.org/XXXXSECRET",
        ] {
            let e = AlertTarget::parse(bad).unwrap_err();
            assert!(!e.contains("hunter2") && !e.contains("XXXXSECRET"), "{e}");
        }
        let e = AlertTarget::parse("webhook:http://user:hunter2@example.org/x").unwrap_err();
        assert!(
            e.contains("http://example.org") && e.contains("must be https"),
            "{e}"
        );
        let c = AlertsConfig {
            webhook_secret_env: Some("KEY".into()),
            rules: vec![rule(
                "*",
                "webhook:http://user:hunter2@example.org/XXXXSECRET",
            )],
            ..AlertsConfig::default()
        };
        let (key, msg) = validate(&c, |_| true).unwrap_err();
        assert_eq!(key, "alerts.rules[0].to");
        assert!(
            !msg.contains("hunter2") && !msg.contains("XXXXSECRET"),
            "{msg}"
        );
    }

    fn rule(on: &str, to: &str) -> AlertRule {
        AlertRule {
            on: on.into(),
            matches: None,
            to: to.into(),
            min_interval: None,
        }
    }

    #[test]
    fn validation_names_the_rule_and_the_field() {
        let mut c = AlertsConfig {
            rules: vec![rule("run.failed", "webhook:https://example.org/h")],
            ..AlertsConfig::default()
        };
        let (key, _) = validate(&c, |_| true).unwrap_err();
        assert_eq!(key, "alerts.webhook_secret_env");
        c.webhook_secret_env = Some("SECRET".into());
        assert_eq!(validate(&c, |_| true), Ok(()));

        c.rules.push(rule("nothing.here", "telegram:chat:1"));
        let (key, msg) = validate(&c, |_| true).unwrap_err();
        assert_eq!(key, "alerts.rules[1].on");
        assert!(msg.contains("run.failed"), "{msg}");

        c.rules[1] = rule("*", "telegram:chat:1");
        let (key, msg) = validate(&c, |_| false).unwrap_err();
        assert_eq!(key, "alerts.rules[1].to");
        assert!(msg.contains("[channels.telegram]"), "{msg}");

        c.rules[1].min_interval = Some("soon".into());
        let (key, _) = validate(&c, |_| true).unwrap_err();
        assert_eq!(key, "alerts.rules[1].min_interval");
        c.rules[1].min_interval = Some("30s".into());
        assert_eq!(c.min_interval_of(&c.rules[1]), Duration::from_secs(30));
        assert_eq!(c.min_interval_of(&c.rules[0]), Duration::from_secs(600));
    }
}
