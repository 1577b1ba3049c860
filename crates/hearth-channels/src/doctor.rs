//! Token checks for `hearth doctor`: one platform call per enabled channel
//! (`getMe`, `GET /users/@me`, `auth.test`, Twilio's account) that says whether its token is
//! accepted. Plain HTTP, so it needs no running channel. A refusal says
//! where the token came from and what to do in the words the channels log
//! at serve time ([`crate::advice`]).

use std::time::Duration;

use hearth_runtime::config::ChannelsConfig;
use serde_json::Value;

use crate::advice::{self, check_then, token_source};
use crate::secrets::TokenSources;

/// How long one check may take: doctor must never hang on a platform.
const TIMEOUT: Duration = Duration::from_secs(5);

/// One line of the report: the channel, and what was found or what to do.
pub type Check = (&'static str, Result<String, String>);

/// Checks every enabled channel's token.
pub async fn check_tokens(
    config: &ChannelsConfig,
    sources: &TokenSources,
    client: &reqwest::Client,
) -> Vec<Check> {
    let mut out = Vec::new();
    if config.telegram.enabled {
        let t = &config.telegram;
        let r = match sources.token(
            "telegram",
            "bot token",
            t.token_env.as_deref(),
            t.token_secret.as_deref(),
        ) {
            Ok(token) => {
                let source = token_source(t.token_env.as_deref(), t.token_secret.as_deref());
                telegram(client, &t.api_base, &token, &source).await
            }
            Err(e) => Err(e.to_string()),
        };
        out.push(("telegram", r));
    }
    if config.discord.enabled {
        let d = &config.discord;
        let r = match sources.token(
            "discord",
            "bot token",
            d.token_env.as_deref(),
            d.token_secret.as_deref(),
        ) {
            Ok(token) => {
                let source = token_source(d.token_env.as_deref(), d.token_secret.as_deref());
                discord(client, &d.api_base, &token, &source).await
            }
            Err(e) => Err(e.to_string()),
        };
        out.push(("discord", r));
    }
    if config.slack.enabled {
        let s = &config.slack;
        let r = match sources.token(
            "slack",
            "bot token",
            s.bot_token_env.as_deref(),
            s.bot_token_secret.as_deref(),
        ) {
            Ok(token) => {
                let source =
                    token_source(s.bot_token_env.as_deref(), s.bot_token_secret.as_deref());
                slack(client, &s.api_base, &token, &source).await
            }
            Err(e) => Err(e.to_string()),
        };
        out.push(("slack", r));
        // Socket Mode connects with the app-level token: checked the same way.
        if s.mode == hearth_runtime::config::SlackMode::Socket {
            let r = match sources.token(
                "slack",
                "app-level token",
                s.app_token_env.as_deref(),
                s.app_token_secret.as_deref(),
            ) {
                Ok(token) => {
                    let source =
                        token_source(s.app_token_env.as_deref(), s.app_token_secret.as_deref());
                    slack_app(client, &s.api_base, &token, &source).await
                }
                Err(e) => Err(e.to_string()),
            };
            out.push(("slack app token", r));
        }
    }
    #[cfg(feature = "sms")]
    if config.sms.enabled {
        let m = &config.sms;
        let r = match sources.token(
            "sms",
            "auth token",
            m.auth_token_env.as_deref(),
            m.auth_token_secret.as_deref(),
        ) {
            Ok(token) => {
                let source =
                    token_source(m.auth_token_env.as_deref(), m.auth_token_secret.as_deref());
                let api = crate::sms::Api::new(client.clone(), &m.api_base, &m.account_sid, token);
                match api.account(TIMEOUT).await {
                    Ok(a) => Ok(format!(
                        "credentials accepted: account {} ({})",
                        a.friendly_name, a.status
                    )),
                    Err(crate::sms::ApiError::Network(e)) => Err(format!(
                        "cannot reach Twilio: {e}; check api_base and the network"
                    )),
                    Err(e) => Err(crate::sms::explain(&e, &source)),
                }
            }
            Err(e) => Err(e.to_string()),
        };
        out.push(("sms", r));
    }
    out
}

/// `apps.connections.open` with the app-level token: what Socket Mode calls
/// first (it only hands out a connection URL; nothing connects).
async fn slack_app(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    source: &str,
) -> Result<String, String> {
    let url = format!("{}/apps.connections.open", base.trim_end_matches('/'));
    let v = answer("Slack", client.post(url).bearer_auth(token)).await?;
    if v["ok"] == true {
        return Ok("app-level token accepted (Socket Mode)".into());
    }
    Err(format!(
        "app-level token refused ({}): {}",
        v["error"].as_str().unwrap_or("no error given"),
        check_then(source, advice::SLACK_APP_FIX)
    ))
}

/// Sends `request` (with the checks' timeout) and reads its JSON answer;
/// the error says which platform could not be reached or answered what.
async fn answer(platform: &str, request: reqwest::RequestBuilder) -> Result<Value, String> {
    request
        .timeout(TIMEOUT)
        .send()
        .await
        .map_err(|e| unreachable(platform, e))?
        .json()
        .await
        .map_err(|e| format!("{platform} answered something else: {}", e.without_url()))
}

fn unreachable(what: &str, e: reqwest::Error) -> String {
    format!(
        "cannot reach {what}: {}; check api_base and the network",
        e.without_url()
    )
}

async fn telegram(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    source: &str,
) -> Result<String, String> {
    let url = format!("{}/bot{token}/getMe", base.trim_end_matches('/'));
    let v = answer("Telegram", client.post(url)).await?;
    if v["ok"] == true {
        let name = v["result"]["username"].as_str().unwrap_or("?");
        return Ok(format!("token accepted: bot @{name}"));
    }
    Err(format!(
        "token refused ({}): {}",
        v["description"].as_str().unwrap_or("no description"),
        check_then(source, advice::TELEGRAM_FIX)
    ))
}

async fn discord(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    source: &str,
) -> Result<String, String> {
    let url = format!("{}/users/@me", base.trim_end_matches('/'));
    let r = client
        .get(url)
        .header("Authorization", format!("Bot {token}"))
        .timeout(TIMEOUT)
        .send()
        .await
        .map_err(|e| unreachable("Discord", e))?;
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    if status == 200 {
        let name = v["username"].as_str().unwrap_or("?");
        return Ok(format!("token accepted: bot {name}"));
    }
    Err(format!(
        "token refused (HTTP {status}): {}",
        check_then(source, advice::DISCORD_FIX)
    ))
}

async fn slack(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    source: &str,
) -> Result<String, String> {
    let url = format!("{}/auth.test", base.trim_end_matches('/'));
    let v = answer("Slack", client.post(url).bearer_auth(token)).await?;
    if v["ok"] == true {
        let team = v["team"].as_str().unwrap_or("?");
        let user = v["user"].as_str().unwrap_or("?");
        return Ok(format!("token accepted: {user} in {team}"));
    }
    Err(format!(
        "token refused ({}): {}",
        v["error"].as_str().unwrap_or("no error given"),
        check_then(source, advice::SLACK_FIX)
    ))
}
