//! Telegram through `FakeTelegram`, in webhook mode: Telegram posts each
//! update to the webhook and posts it again until it is answered 200, so a
//! redelivered update is the same update posted twice.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};

use bytes::Bytes;
use hearth_runtime::testing::TestRuntime;
use hearth_testkit::fake_telegram::{Failure, FakeTelegram, Matching, User};
use serde_json::{Value, json};

use crate::harness::WAIT;
use crate::{Platform, Who};

const TOKEN: &str = "7000000001:AAconformanceTOKENconformanceTOK";
const SECRET: &str = "conformance-webhook-secret";
/// The group Alice and Bob share.
const GROUP: i64 = -100_500;
const WEBHOOK: &str = "/channels/telegram/webhook";

fn user(who: Who) -> User {
    User::new(match who {
        Who::Alice => 1001,
        Who::Bob => 1002,
    })
}

pub(crate) struct Telegram {
    fake: FakeTelegram,
    next_update: AtomicI64,
}

impl Telegram {
    /// Posts `update` to hearth's webhook as Telegram does; the status.
    async fn post(&self, t: &TestRuntime, update: &Value) -> u16 {
        let Some(hook) = t
            .runtime
            .webhooks()
            .into_iter()
            .find(|w| w.path() == WEBHOOK)
        else {
            panic!("no Telegram webhook is served");
        };
        let request = http::Request::post(WEBHOOK)
            .header("x-telegram-bot-api-secret-token", SECRET)
            .header("content-type", "application/json")
            .body(Bytes::from(update.to_string()))
            .unwrap_or_else(|e| panic!("building a webhook request: {e}"));
        hook.handle(&t.runtime, request).await.status().as_u16()
    }

    /// Posts `update` with the next update id; the update as posted.
    async fn push(&self, t: &TestRuntime, mut update: Value) -> Value {
        update["update_id"] = json!(self.next_update.fetch_add(1, Ordering::SeqCst));
        assert_eq!(self.post(t, &update).await, 200, "{update}");
        update
    }
}

impl Platform for Telegram {
    type Sent = Value;

    async fn start() -> Self {
        Self {
            fake: FakeTelegram::start(TOKEN).await,
            next_update: AtomicI64::new(500_001),
        }
    }

    fn config(&self) -> String {
        format!(
            "[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\napi_base = \"{}\"\n\
             allowed_users = [1001, 1002]\nmode = \"webhook\"\nwebhook_secret_env = \"TG_SECRET\"\n",
            self.fake.url()
        )
    }

    fn env(&self) -> BTreeMap<String, String> {
        [("TG_TOKEN", TOKEN), ("TG_SECRET", SECRET)]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into()
    }

    async fn ready(&self, _t: &TestRuntime) {
        // The menu is set once the bot knows its @username (getMe), which
        // it needs to see mentions in groups.
        let ready = self
            .fake
            .wait_for(|st| !st.commands().is_empty(), WAIT)
            .await;
        assert!(ready, "hearth never set the command menu");
    }

    async fn send(&self, t: &TestRuntime, who: Who, text: &str) -> Value {
        let update = self.fake.group_text(GROUP, &user(who), text, true);
        self.push(t, update).await
    }

    fn thread(&self, _sent: &Value) -> String {
        format!("telegram:chat:{GROUP}")
    }

    async fn redeliver(&self, t: &TestRuntime, sent: &Value) {
        assert_eq!(self.post(t, sent).await, 200);
    }

    fn delivered(&self, text: &str) -> usize {
        self.fake.with_state(|st| {
            st.visible_in(GROUP)
                .iter()
                .filter(|m| m.text.contains(text))
                .count()
        })
    }

    async fn wait_delivered(&self, text: &str) {
        let ok = self
            .fake
            .wait_for(
                |st| st.visible_in(GROUP).iter().any(|m| m.text.contains(text)),
                WAIT,
            )
            .await;
        assert!(ok, "no message with {text:?}: {:?}", self.fake.sent());
    }

    fn posts(&self) -> usize {
        self.fake.with_state(|st| st.calls("sendMessage"))
    }

    fn script_429(&self, secs: u64) {
        let failure = Failure::TooManyRequests { retry_after: secs };
        self.fake
            .fail_matching(Matching::method("sendMessage").in_chat(GROUP), 1, failure);
    }

    fn violations(&self) -> Vec<String> {
        self.fake.rejections()
    }

    async fn press_approve(&self, t: &TestRuntime, who: Who, _sent: &Value) {
        let shown = self
            .fake
            .wait_for(
                |st| st.visible_in(GROUP).iter().any(|m| !m.buttons.is_empty()),
                WAIT,
            )
            .await;
        assert!(shown, "no prompt with buttons: {:?}", self.fake.sent());
        let (message_id, data) = self.fake.with_state(|st| {
            let prompt = st
                .visible_in(GROUP)
                .into_iter()
                .find(|m| !m.buttons.is_empty())
                .map(|m| (m.message_id, m.buttons[0][0].callback_data.clone()));
            match prompt {
                Some((id, Some(data))) => (id, data),
                other => panic!("no Approve button: {other:?}"),
            }
        });
        let press = self
            .fake
            .callback_query(&user(who), GROUP, message_id, &data);
        self.push(t, press).await;
    }

    async fn wait_refused(&self, who: Who) {
        let id = user(who).id.to_string();
        let ok = self
            .fake
            .wait_for(
                |st| {
                    st.callback_answers()
                        .iter()
                        .any(|a| a.show_alert && a.query_id.starts_with(&id))
                },
                WAIT,
            )
            .await;
        assert!(
            ok,
            "no alert for the press: {:?}",
            self.fake.with_state(|st| st.callback_answers().to_vec())
        );
    }
}
