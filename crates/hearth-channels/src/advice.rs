//! What to do when a platform refuses a channel's token while hearth serves:
//! the same fix `hearth doctor` gives, naming where the token came from, so
//! the log line and `GET /v1/channels` tell the operator the next step.

use std::time::Duration;

/// Telegram's fix for a refused bot token (as `hearth doctor` says it).
pub const TELEGRAM_FIX: &str =
    "get a new one from @BotFather and set it where token_env/token_secret points";
/// Discord's fix for a refused bot token.
pub const DISCORD_FIX: &str = "reset it in the Discord developer portal (Bot, Reset Token) and set it where token_env/token_secret points";
/// Slack's fix for a refused bot token.
pub const SLACK_FIX: &str =
    "reinstall the app to the workspace and copy its Bot User OAuth Token (xoxb-)";
/// Slack's fix for a refused app-level token (Socket Mode).
pub const SLACK_APP_FIX: &str = "create an app-level token with the connections:write scope (Basic Information, App-Level Tokens) and set it where app_token_env/app_token_secret points";

/// Twilio's fix for refused credentials.
pub const TWILIO_FIX: &str = "copy the Account SID and Auth Token from the Twilio console (Account Info) into account_sid and where auth_token_env/auth_token_secret points";

/// Where a token was read from, as the config names it: the sealed secret
/// when one is set (it wins), else the environment variable.
pub fn token_source(env_var: Option<&str>, secret: Option<&str>) -> String {
    match (secret, env_var) {
        (Some(name), _) => format!("the sealed secret `{name}`"),
        (None, Some(var)) => var.to_owned(),
        (None, None) => "where token_env/token_secret points".to_owned(),
    }
}

/// `Telegram rejected the bot token (401 Unauthorized): check TELEGRAM_BOT_TOKEN;
/// get a new one from @BotFather ...`: who refused what, with the platform's
/// words, where the token came from and the fix. Never the token.
pub fn token_refused(platform: &str, what: &str, said: &str, source: &str, fix: &str) -> String {
    format!(
        "{platform} rejected the {what} ({said}): {}",
        check_then(source, fix)
    )
}

/// `check TELEGRAM_BOT_TOKEN; get a new one from @BotFather ...`: where the
/// token came from and the fix, the tail both the serve-time refusal and
/// `hearth doctor`'s say (one wording).
pub fn check_then(source: &str, fix: &str) -> String {
    format!("check {source}; {fix}")
}

/// `reason` with how hearth goes on: at the slow pace once the token was
/// refused often enough in a row, else at once with backoff.
pub fn with_retry(reason: String, slow: Option<Duration>) -> String {
    match slow {
        Some(every) => format!(
            "{reason}; retrying every {} until it is accepted",
            minutes(every)
        ),
        None => reason,
    }
}

/// `5 minutes`, `1 minute`, `30 seconds`.
fn minutes(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        60 => "minute".to_owned(),
        s if s % 60 == 0 => format!("{} minutes", s / 60),
        1 => "second".to_owned(),
        s => format!("{s} seconds"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_token_says_where_it_came_from_and_what_to_do() {
        let source = token_source(Some("TELEGRAM_BOT_TOKEN"), None);
        let why = token_refused(
            "Telegram",
            "bot token",
            "401 Unauthorized",
            &source,
            TELEGRAM_FIX,
        );
        assert_eq!(
            why,
            "Telegram rejected the bot token (401 Unauthorized): check TELEGRAM_BOT_TOKEN; \
             get a new one from @BotFather and set it where token_env/token_secret points"
        );
        assert_eq!(
            token_source(Some("TG"), Some("tg_token")),
            "the sealed secret `tg_token`"
        );
        let slow = with_retry(why.clone(), Some(Duration::from_secs(300)));
        assert!(
            slow.ends_with("; retrying every 5 minutes until it is accepted"),
            "{slow}"
        );
        assert_eq!(with_retry(why.clone(), None), why);
        assert_eq!(minutes(Duration::from_secs(60)), "minute");
        assert_eq!(minutes(Duration::from_secs(45)), "45 seconds");
    }
}
