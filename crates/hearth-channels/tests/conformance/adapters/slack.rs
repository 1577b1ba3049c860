//! Slack through `FakeSlack`, in Socket Mode: each event comes in an
//! envelope hearth acknowledges once it is stored, and Slack sends an
//! event again (same `event_id`) when it was not acknowledged in time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use hearth_runtime::testing::TestRuntime;
use hearth_testkit::fake_slack::{APP_TOKEN, BOT_TOKEN, BOT_USER, FakeSlack};
use serde_json::{Value, json};

use crate::harness::WAIT;
use crate::{Platform, Who};

/// The channel Alice and Bob share; a mention there starts a thread.
const CHANNEL: &str = "CGENERAL";

fn user(who: Who) -> &'static str {
    match who {
        Who::Alice => "UALICE",
        Who::Bob => "UBOB",
    }
}

pub(crate) struct Slack {
    fake: FakeSlack,
    next: AtomicUsize,
}

/// A mention as sent: its event id, the event, and its ts (the thread's
/// root).
pub(crate) struct Sent {
    event_id: String,
    event: Value,
    ts: String,
}

impl Slack {
    /// Pushes `event` as `event_id` and waits until hearth acknowledged it.
    async fn push(&self, event_id: &str, event: Value) {
        let envelope = self.fake.push_event(event_id, event);
        self.fake.wait_acked(&envelope, WAIT).await;
    }
}

impl Platform for Slack {
    type Sent = Sent;

    async fn start() -> Self {
        let fake = FakeSlack::start()
            .await
            .unwrap_or_else(|e| panic!("starting the fake Slack: {e}"));
        Self {
            fake,
            next: AtomicUsize::new(1),
        }
    }

    fn config(&self) -> String {
        format!(
            "[channels.slack]\nenabled = true\nbot_token_env = \"SLACK_BOT_TOKEN\"\n\
             app_token_env = \"SLACK_APP_TOKEN\"\napi_base = \"{}\"\n",
            self.fake.api_base()
        )
    }

    fn env(&self) -> BTreeMap<String, String> {
        [
            ("SLACK_BOT_TOKEN", BOT_TOKEN),
            ("SLACK_APP_TOKEN", APP_TOKEN),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into()
    }

    async fn ready(&self, _t: &TestRuntime) {
        self.fake.wait_connected(1, WAIT).await;
    }

    async fn send(&self, _t: &TestRuntime, who: Who, text: &str) -> Sent {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let ts = format!("1700000000.{n:06}");
        let event = json!({ "type": "app_mention", "channel": CHANNEL, "user": user(who),
                            "text": format!("<@{BOT_USER}> {text}"), "ts": ts, "event_ts": ts });
        let event_id = format!("EvConf{n}");
        self.push(&event_id, event.clone()).await;
        Sent {
            event_id,
            event,
            ts,
        }
    }

    fn thread(&self, sent: &Sent) -> String {
        format!("slack:thread:{CHANNEL}:{}", sent.ts)
    }

    async fn redeliver(&self, _t: &TestRuntime, sent: &Sent) {
        self.push(&sent.event_id, sent.event.clone()).await;
    }

    fn delivered(&self, text: &str) -> usize {
        self.fake
            .messages()
            .iter()
            .filter(|m| !m.deleted && m.text.contains(text))
            .count()
    }

    async fn wait_delivered(&self, text: &str) {
        self.fake.wait_posted(text, WAIT).await;
    }

    fn posts(&self) -> usize {
        self.fake.calls("chat.postMessage").len()
    }

    fn script_429(&self, secs: u64) {
        self.fake.rate_limit("chat.postMessage", secs);
    }

    fn violations(&self) -> Vec<String> {
        self.fake.violations()
    }

    async fn press_approve(&self, _t: &TestRuntime, who: Who, sent: &Sent) {
        let prompt = self.fake.wait_posted("Approve this action?", WAIT).await;
        let approve = &prompt.blocks[1]["elements"][0];
        assert_eq!(approve["action_id"], "hearth_confirm_approve", "{prompt:?}");
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let trigger = format!("trig-{n}");
        let press = json!({ "type": "block_actions", "user": { "id": user(who) }, "channel": { "id": CHANNEL },
                "message": { "ts": prompt.ts, "text": prompt.text, "thread_ts": sent.ts },
                "actions": [{ "action_id": "hearth_confirm_approve", "value": approve["value"], "type": "button" }],
                "response_url": self.fake.response_url(&trigger), "trigger_id": trigger });
        let envelope = self.fake.push_envelope("interactive", press);
        self.fake.wait_acked(&envelope, WAIT).await;
    }

    async fn wait_refused(&self, who: Who) {
        let notices = self.fake.wait_calls("chat.postEphemeral", 1, WAIT).await;
        assert_eq!(notices[0]["user"], user(who), "{notices:?}");
        let text = notices[0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("Only the person who asked"), "{notices:?}");
    }
}
