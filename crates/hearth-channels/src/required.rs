//! The tokens an enabled channel cannot start without, checked the same way
//! by `hearth serve` (which refuses to start) and `hearth doctor` (which
//! says so first, in the same words). A channel marked `optional = true`
//! starts without its token instead, and shows as degraded with the reason.

use hearth_runtime::config::{ChannelsConfig, SlackMode};

use crate::error::ChannelError;
use crate::secrets::TokenSources;

/// An enabled channel whose token is missing.
#[derive(Debug)]
pub struct MissingToken {
    /// `telegram`, `discord`, `slack` or `sms`.
    pub channel: &'static str,
    /// Marked `optional = true`: hearth serves without it.
    pub optional: bool,
    /// Where the token was looked for.
    pub error: ChannelError,
}

impl MissingToken {
    /// What is wrong and what to do, as `serve` refuses and `doctor` fails.
    pub fn refusal(&self) -> String {
        let c = self.channel;
        format!(
            "[channels.{c}] is enabled but its token is missing: {}; or set optional = true in \
             [channels.{c}] to serve without it",
            detail(&self.error)
        )
    }

    /// The reason an optional channel is degraded.
    pub fn degraded(&self) -> String {
        format!(
            "[channels.{}] is optional and its token is missing, so it is not started: {}",
            self.channel,
            detail(&self.error)
        )
    }
}

fn detail(e: &ChannelError) -> String {
    match e {
        ChannelError::NoToken { detail, .. } => detail.clone(),
        other => other.to_string(),
    }
}

/// A token an enabled channel needs: its channel, whether the channel is
/// optional, what the token is, and its variable and secret names.
type Wanted<'a> = (
    &'static str,
    bool,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
);

/// Every enabled channel's token that cannot be found (the bot token, and
/// Slack's app-level token in Socket Mode).
pub fn missing_tokens(config: &ChannelsConfig, sources: &TokenSources) -> Vec<MissingToken> {
    let mut wanted: Vec<Wanted<'_>> = Vec::new();
    let t = &config.telegram;
    if t.enabled {
        wanted.push((
            "telegram",
            t.optional,
            "bot token",
            t.token_env.as_deref(),
            t.token_secret.as_deref(),
        ));
    }
    let d = &config.discord;
    if d.enabled {
        wanted.push((
            "discord",
            d.optional,
            "bot token",
            d.token_env.as_deref(),
            d.token_secret.as_deref(),
        ));
    }
    let s = &config.slack;
    if s.enabled {
        wanted.push((
            "slack",
            s.optional,
            "bot token",
            s.bot_token_env.as_deref(),
            s.bot_token_secret.as_deref(),
        ));
        if s.mode == SlackMode::Socket {
            wanted.push((
                "slack",
                s.optional,
                "app-level token",
                s.app_token_env.as_deref(),
                s.app_token_secret.as_deref(),
            ));
        }
    }
    let m = &config.sms;
    if m.enabled {
        wanted.push((
            "sms",
            m.optional,
            "auth token",
            m.auth_token_env.as_deref(),
            m.auth_token_secret.as_deref(),
        ));
    }
    wanted
        .into_iter()
        .filter_map(|(channel, optional, what, env, secret)| {
            sources
                .token(channel, what, env, secret)
                .err()
                .map(|error| MissingToken {
                    channel,
                    optional,
                    error,
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_token_is_named_with_the_fix_and_optional_is_kept() {
        let mut c = ChannelsConfig::default();
        c.telegram.enabled = true;
        c.telegram.token_env = Some("TG_TOKEN".into());
        c.slack.enabled = true;
        c.slack.optional = true;
        let mut sources = TokenSources::default();
        sources
            .env
            .insert("SLACK_BOT_TOKEN".into(), "xoxb-1".into());
        let missing = missing_tokens(&c, &sources);
        assert_eq!(missing.len(), 2, "{missing:?}");
        assert_eq!(missing[0].channel, "telegram");
        assert!(!missing[0].optional);
        let r = missing[0].refusal();
        assert!(r.contains("TG_TOKEN") && r.contains("not set"), "{r}");
        assert!(r.contains("optional = true"), "{r}");
        // Slack's app-level token (Socket Mode) counts too.
        assert_eq!(missing[1].channel, "slack");
        assert!(missing[1].optional);
        assert!(missing[1].degraded().contains("SLACK_APP_TOKEN"));
        sources.env.insert("TG_TOKEN".into(), "1:a".into());
        sources
            .env
            .insert("SLACK_APP_TOKEN".into(), "xapp-1".into());
        assert!(missing_tokens(&c, &sources).is_empty());
    }
}
