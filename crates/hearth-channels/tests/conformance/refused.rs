//! A token the platform refuses, while hearth serves: the channel says what
//! to check (the same words as `hearth doctor`), and after three refusals in
//! a row stops hammering the platform and retries every few minutes, shown
//! as `degraded` with the reason in the channel list.

use std::time::Duration;

use hearth_channels::ChannelsFactory;
use hearth_core::ChannelState;
use hearth_runtime::testing::{TestRuntime, fake_toml};
use hearth_testkit::FakeOpenAi;

use crate::harness::WAIT;

#[cfg(feature = "telegram")]
const ACCEPTED: &str = "7000000001:AAacceptedTOKENacceptedTOKENacce";
#[cfg(feature = "telegram")]
const REVOKED: &str = "7000000001:AArevokedTOKENrevokedTOKENrevokedT";

#[cfg(feature = "telegram")]
#[tokio::test]
async fn a_refused_telegram_token_says_what_to_check_and_is_retried_slowly() {
    use hearth_testkit::fake_telegram::FakeTelegram;
    let model = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(ACCEPTED).await;
    let toml = format!(
        "{}\n[channels.telegram]\nenabled = true\ntoken_env = \"TELEGRAM_BOT_TOKEN\"\n\
         api_base = \"{}\"\nallowed_users = [1001]\npoll_timeout_secs = 5\n",
        fake_toml(&model.base_url(), "", ""),
        tg.url()
    );
    let env = [("TELEGRAM_BOT_TOKEN".to_owned(), REVOKED.to_owned())].into();
    let t = TestRuntime::start_with(&toml, |b| b.env(env).surface(Box::new(ChannelsFactory))).await;
    // The third refusal in a row puts the loop on the slow pace, and the
    // channel says so; the wait ends with that event, not a set time.
    let reason = reason_of(&t, "telegram", "retrying every").await;

    assert_eq!(
        reason,
        "Telegram rejected the bot token (401 Unauthorized): check TELEGRAM_BOT_TOKEN; \
         get a new one from @BotFather and set it where token_env/token_secret points; \
         retrying every 5 minutes until it is accepted"
    );
    assert!(!reason.contains(REVOKED), "{reason}");
    // Three calls, then none for minutes (the next one is 5 minutes away).
    assert_eq!(tg.with_state(|s| s.calls("getMe")), 3);
    assert_eq!(tg.rejections(), vec!["getMe: 401 Unauthorized"; 3]);
    t.runtime.shutdown(Duration::from_millis(200)).await;
}

/// The channel's health once it shows `wanted` in its reason.
async fn reason_of(t: &TestRuntime, channel: &str, wanted: &str) -> String {
    let Some(channels) = t.runtime.channels() else {
        panic!("no channels were built");
    };
    tokio::time::timeout(WAIT, async {
        loop {
            let list = channels
                .list()
                .await
                .unwrap_or_else(|e| panic!("listing channels: {e}"));
            if let Some(info) = list.iter().find(|c| c.name == channel)
                && info.state == ChannelState::Degraded
                && let Some(why) = &info.last_error
                && why.contains(wanted)
            {
                return why.clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{channel} never showed {wanted:?}"))
}

#[cfg(feature = "slack")]
#[tokio::test]
async fn a_refused_slack_bot_token_says_what_to_check_and_is_retried_slowly() {
    use hearth_testkit::fake_slack::FakeSlack;
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start()
        .await
        .unwrap_or_else(|e| panic!("starting the fake Slack: {e}"));
    let toml = format!(
        "{}\n[channels.slack]\nenabled = true\nbot_token_env = \"SLACK_BOT_TOKEN\"\n\
         app_token_env = \"SLACK_APP_TOKEN\"\napi_base = \"{}\"\n",
        fake_toml(&model.base_url(), "", ""),
        slack.api_base()
    );
    let env = [
        ("SLACK_BOT_TOKEN".to_owned(), "xoxb-revoked".to_owned()),
        ("SLACK_APP_TOKEN".to_owned(), "xapp-revoked".to_owned()),
    ]
    .into();
    let t = TestRuntime::start_with(&toml, |b| b.env(env).surface(Box::new(ChannelsFactory))).await;
    let reason = reason_of(&t, "slack", "retrying every").await;
    assert_eq!(
        reason,
        "Slack rejected the bot token (invalid_auth): check SLACK_BOT_TOKEN; reinstall the app \
         to the workspace and copy its Bot User OAuth Token (xoxb-); retrying every 5 minutes \
         until it is accepted"
    );
    assert_eq!(slack.calls("auth.test").len(), 3);
    let broken = slack.violations();
    assert!(
        broken.iter().all(|v| v.contains("invalid_auth")),
        "{broken:?}"
    );
    t.runtime.shutdown(Duration::from_millis(200)).await;
}

#[cfg(feature = "discord")]
#[tokio::test]
async fn a_refused_discord_token_says_what_to_check_and_is_retried_slowly() {
    use hearth_testkit::fake_discord::FakeDiscord;
    let model = FakeOpenAi::start().await;
    let dc = FakeDiscord::start("accepted-discord-token").await;
    // No gateway_url: the gateway's address is asked with the token first.
    let toml = format!(
        "{}\n[channels.discord]\nenabled = true\ntoken_env = \"DISCORD_BOT_TOKEN\"\n\
         api_base = \"{}\"\ngateway_url = \"\"\n",
        fake_toml(&model.base_url(), "", ""),
        dc.api_base()
    );
    let env = [(
        "DISCORD_BOT_TOKEN".to_owned(),
        "revoked-discord-token".to_owned(),
    )]
    .into();
    let t = TestRuntime::start_with(&toml, |b| b.env(env).surface(Box::new(ChannelsFactory))).await;
    let reason = reason_of(&t, "discord", "retrying every").await;
    assert_eq!(
        reason,
        "Discord rejected the bot token (401: Unauthorized): check DISCORD_BOT_TOKEN; reset \
         it in the Discord developer portal (Bot, Reset Token) and set it where \
         token_env/token_secret points; retrying every 5 minutes until it is accepted"
    );
    let broken = dc.violations();
    assert_eq!(broken.len(), 3, "{broken:?}");
    t.runtime.shutdown(Duration::from_millis(200)).await;
}

#[cfg(feature = "sms")]
#[tokio::test]
async fn refused_twilio_credentials_say_what_to_check_and_are_retried_slowly() {
    use hearth_testkit::fake_twilio::{ACCOUNT_SID, FROM, FakeTwilio};
    let model = FakeOpenAi::start().await;
    let twilio = FakeTwilio::start()
        .await
        .unwrap_or_else(|e| panic!("starting the fake Twilio: {e}"));
    let toml = format!(
        "{}\n[channels.sms]\nenabled = true\naccount_sid = \"{ACCOUNT_SID}\"\nfrom = \"{FROM}\"\n\
         public_url = \"https://h.test/channels/sms/twilio\"\napi_base = \"{}\"\n",
        fake_toml(&model.base_url(), "", ""),
        twilio.api_base()
    );
    let env = [("TWILIO_AUTH_TOKEN".to_owned(), "revoked-token".to_owned())].into();
    let t = TestRuntime::start_with(&toml, |b| b.env(env).surface(Box::new(ChannelsFactory))).await;
    let reason = reason_of(&t, "sms", "retrying every").await;
    assert_eq!(
        reason,
        "Twilio rejected the account SID and auth token (Twilio refused (HTTP 401, code 20003): \
         Authenticate): check TWILIO_AUTH_TOKEN; copy the Account SID and Auth Token from the \
         Twilio console (Account Info) into account_sid and where auth_token_env/auth_token_secret \
         points; retrying every 5 minutes until it is accepted"
    );
    assert!(!reason.contains("revoked-token"));
    assert_eq!(
        twilio.account_reads(),
        0,
        "no read with the right credentials"
    );
    t.runtime.shutdown(Duration::from_millis(200)).await;
}
