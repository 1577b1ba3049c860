//! A token the platform refuses, while hearth serves: the channel says what
//! to check (the same words as `hearth doctor`), and after three refusals in
//! a row stops hammering the platform and retries every few minutes, shown
//! as `degraded` with the reason in the channel list.

#![cfg(feature = "telegram")]

use std::time::Duration;

use hearth_channels::ChannelsFactory;
use hearth_core::ChannelState;
use hearth_runtime::testing::{TestRuntime, fake_toml};
use hearth_testkit::FakeOpenAi;
use hearth_testkit::fake_telegram::FakeTelegram;

use crate::harness::WAIT;

const ACCEPTED: &str = "7000000001:AAacceptedTOKENacceptedTOKENacce";
const REVOKED: &str = "7000000001:AArevokedTOKENrevokedTOKENrevokedT";

#[tokio::test]
async fn a_refused_telegram_token_says_what_to_check_and_is_retried_slowly() {
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
    let Some(channels) = t.runtime.channels() else {
        panic!("no channels were built");
    };

    // The third refusal in a row puts the loop on the slow pace, and the
    // channel says so; the wait ends with that event, not a set time.
    let reason = tokio::time::timeout(WAIT, async {
        loop {
            let list = channels
                .list()
                .await
                .unwrap_or_else(|e| panic!("listing channels: {e}"));
            if let Some(info) = list.iter().find(|c| c.name == "telegram")
                && info.state == ChannelState::Degraded
                && let Some(why) = &info.last_error
                && why.contains("retrying every")
            {
                return why.clone();
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the channel never showed the slow retry"));

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
