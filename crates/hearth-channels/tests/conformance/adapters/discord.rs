//! Discord through `FakeDiscord`'s gateway and REST API. A redelivered
//! message is its `MESSAGE_CREATE` dispatched again, as a gateway that
//! replays a session from a sequence the bot had seen; messages are
//! handled in the order they are dispatched, so the answer to a later
//! message in another channel says the replay was handled.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use hearth_runtime::testing::TestRuntime;
use hearth_testkit::fake_discord::{BOT_ID, FakeDiscord};
use serde_json::json;

use crate::{Platform, Who};

const TOKEN: &str = "conformance-discord-token";
const GUILD: &str = "700000000000000001";
/// The guild channel Alice and Bob share.
const GENERAL: &str = "710000000000000001";
/// Where the replay's probe is asked.
const PROBE: &str = "710000000000000002";

fn user(who: Who) -> &'static str {
    match who {
        Who::Alice => "100000000000000001",
        Who::Bob => "100000000000000002",
    }
}

pub(crate) struct Discord {
    fake: FakeDiscord,
    probes: AtomicUsize,
}

impl Platform for Discord {
    /// The message's id.
    type Sent = String;

    async fn start() -> Self {
        Self {
            fake: FakeDiscord::start(TOKEN).await,
            probes: AtomicUsize::new(0),
        }
    }

    fn config(&self) -> String {
        format!(
            "[channels.discord]\nenabled = true\ntoken_env = \"DC_TOKEN\"\napi_base = \"{}\"\ngateway_url = \"{}\"\n",
            self.fake.api_base(),
            self.fake.gateway_url()
        )
    }

    fn env(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("DC_TOKEN".to_owned(), TOKEN.to_owned())])
    }

    async fn ready(&self, _t: &TestRuntime) {
        self.fake.wait_ready(1).await;
    }

    async fn send(&self, _t: &TestRuntime, who: Who, text: &str) -> String {
        let content = format!("<@{BOT_ID}> {text}");
        self.fake
            .message(GENERAL, Some(GUILD), user(who), false, &content)
    }

    fn thread(&self, _sent: &String) -> String {
        format!("discord:channel:{GENERAL}")
    }

    async fn redeliver(&self, _t: &TestRuntime, sent: &String) {
        assert!(
            self.fake.redeliver_message(sent).is_some(),
            "message {sent} was never dispatched"
        );
        let n = self.probes.fetch_add(1, Ordering::SeqCst);
        let probe = format!("probe {n}");
        let content = format!("<@{BOT_ID}> {probe}");
        self.fake
            .message(PROBE, Some(GUILD), user(Who::Alice), false, &content);
        self.fake.wait_message(&format!("echo: {probe}")).await;
    }

    fn delivered(&self, text: &str) -> usize {
        self.fake
            .messages()
            .iter()
            .filter(|m| m.channel_id == GENERAL && m.content.contains(text))
            .count()
    }

    async fn wait_delivered(&self, text: &str) {
        self.fake
            .wait_message_where(&format!("a message with {text:?}"), |m| {
                m.channel_id == GENERAL && m.content.contains(text)
            })
            .await;
    }

    fn posts(&self) -> usize {
        self.fake.message_posts() as usize
    }

    fn script_429(&self, secs: u64) {
        self.fake.rate_limit_messages(1, secs as f64);
    }

    fn violations(&self) -> Vec<String> {
        self.fake.violations()
    }

    async fn press_approve(&self, _t: &TestRuntime, who: Who, _sent: &String) {
        let prompt = self
            .fake
            .wait_message_where("a prompt with buttons", |m| {
                m.channel_id == GENERAL && m.components.is_some()
            })
            .await;
        let components = prompt.components.clone().unwrap_or_default();
        let Some(custom_id) = components[0]["components"][0]["custom_id"].as_str() else {
            panic!("no Approve button: {components}");
        };
        let data = json!({ "custom_id": custom_id, "component_type": 2 });
        let message = json!({ "id": prompt.id, "channel_id": GENERAL, "content": prompt.content });
        self.fake
            .interaction(3, GENERAL, Some(GUILD), user(who), data, Some(message));
    }

    async fn wait_refused(&self, _who: Who) {
        let callbacks = self.fake.wait_callbacks(1).await;
        let (_, body) = &callbacks[0];
        assert_eq!(body["type"], 4, "not a message: {body}");
        assert_eq!(
            body["data"]["flags"], 64,
            "not for the presser alone: {body}"
        );
        let text = body["data"]["content"].as_str().unwrap_or_default();
        assert!(text.contains("Only the person who asked"), "{body}");
    }
}
