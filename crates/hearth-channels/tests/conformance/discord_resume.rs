//! Discord's gateway session across processes, through Discord's fake: a
//! gateway stopped cleanly stores its session (id, last sequence, resume
//! URL), and the next one started on the same store RESUMEs it and gets
//! what was sent while no one was connected; a RESUME Discord refuses
//! falls back to IDENTIFY; events replayed by a resume that were already
//! handled (a message, an interaction) do not act twice.

#![cfg(feature = "discord")]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hearth_channels::ChannelsFactory;
use hearth_core::records::RunFilter;
use hearth_runtime::Runtime;
use hearth_runtime::testing::{self, fake_toml};
use hearth_store::{OutboxStore, Store};
use hearth_testkit::FakeOpenAi;
use hearth_testkit::fake_discord::{BOT_ID, FakeDiscord};
use serde_json::{Value, json};

const TOKEN: &str = "resume-discord-token";
const GUILD: &str = "700000000000000001";
const GENERAL: &str = "710000000000000001";
const ALICE: &str = "100000000000000001";

/// One hearth process on the home both share.
struct Process {
    runtime: Runtime,
    store: Arc<dyn Store>,
}

struct Setup {
    home: tempfile::TempDir,
    model: FakeOpenAi,
    discord: FakeDiscord,
}

impl Setup {
    async fn new() -> Self {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary home: {e}"));
        Self {
            home,
            model: FakeOpenAi::start().await,
            discord: FakeDiscord::start(TOKEN).await,
        }
    }

    /// Starts a process on the shared home (the previous one stopped).
    async fn start(&self) -> Process {
        let toml = format!(
            "{}\n[channels.discord]\nenabled = true\ntoken_env = \"DC_TOKEN\"\n\
             api_base = \"{}\"\ngateway_url = \"{}\"\n",
            fake_toml(&self.model.base_url(), "", ""),
            self.discord.api_base(),
            self.discord.gateway_url()
        );
        let home: &Path = self.home.path();
        let store = testing::store(home);
        let env = [("DC_TOKEN".to_owned(), TOKEN.to_owned())].into();
        let builder = testing::builder(home, &toml, store.clone())
            .env(env)
            .surface(Box::new(ChannelsFactory));
        let runtime = testing::build(builder).await;
        if let Err(e) = runtime.start().await {
            panic!("starting hearth: {e}");
        }
        Process { runtime, store }
    }

    /// Alice mentions the bot with `text` in the general channel.
    fn say(&self, text: &str) -> String {
        let content = format!("<@{BOT_ID}> {text}");
        self.discord
            .message(GENERAL, Some(GUILD), ALICE, false, &content)
    }

    /// Messages hearth posted whose text is exactly `text`.
    fn posted(&self, text: &str) -> usize {
        self.discord
            .messages()
            .iter()
            .filter(|m| m.content == text)
            .count()
    }

    fn finish(&self) {
        let v = self.discord.violations();
        assert!(v.is_empty(), "Discord refused requests: {v:#?}");
    }
}

impl Process {
    /// Stops cleanly; returns once the gateway connection is gone.
    async fn stop(self, discord: &FakeDiscord) -> Arc<dyn Store> {
        self.runtime.shutdown(Duration::from_millis(200)).await;
        discord.wait_disconnected().await;
        self.store
    }

    async fn runs(&self) -> usize {
        let filter = RunFilter {
            thread_key: Some(format!("discord:channel:{GENERAL}")),
            status: None,
            limit: 100,
            ..Default::default()
        };
        match self.runtime.list_runs(&filter).await {
            Ok(runs) => runs.len(),
            Err(e) => panic!("listing runs: {e}"),
        }
    }
}

/// The stored session (`discord` cursor `session`).
async fn stored<S: OutboxStore + ?Sized>(store: &S) -> Value {
    let raw = store
        .cursor("discord", "session")
        .await
        .unwrap_or_else(|e| panic!("reading the cursor: {e}"))
        .unwrap_or_else(|| panic!("no gateway session was stored"));
    serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{raw:?}: {e}"))
}

#[tokio::test]
async fn a_restarted_gateway_resumes_its_stored_session_and_gets_what_was_sent_meanwhile() {
    let s = Setup::new().await;
    let first = s.start().await;
    s.discord.wait_ready(1).await;
    s.say("before");
    s.discord.wait_message("echo: before").await;
    let store = first.stop(&s.discord).await;
    // Stored at the stop: every event sent so far was handled.
    let session = stored(store.as_ref()).await;
    assert_eq!(session["session_id"], "session-1", "{session}");
    assert_eq!(session["seq"], s.discord.last_seq(), "{session}");
    drop(store);

    s.say("while away");
    let second = s.start().await;
    let (id, seq) = s.discord.wait_resumed(1).await;
    assert_eq!(
        (id.as_str(), Some(seq)),
        ("session-1", session["seq"].as_u64())
    );
    s.discord.wait_message("echo: while away").await;
    assert_eq!(s.discord.identifies(), 1, "resumed, not identified again");
    assert_eq!(s.posted("echo: before"), 1);
    assert_eq!(s.model.requests().len(), 2);
    // The resumed session is stored again as it goes on.
    s.say("after");
    s.discord.wait_message("echo: after").await;
    let store = second.stop(&s.discord).await;
    assert_eq!(stored(store.as_ref()).await["seq"], s.discord.last_seq());
    s.finish();
}

#[tokio::test]
async fn a_refused_resume_falls_back_to_identify() {
    let s = Setup::new().await;
    let first = s.start().await;
    s.discord.wait_ready(1).await;
    s.say("before");
    s.discord.wait_message("echo: before").await;
    let seq = s.discord.last_seq();
    drop(first.stop(&s.discord).await);
    // Discord no longer keeps the session.
    s.discord.invalidate_session();

    let second = s.start().await;
    s.discord.wait_ready(2).await;
    assert_eq!(
        s.discord.refused_resumes(),
        [("session-1".to_owned(), seq)],
        "the stored session was tried first"
    );
    s.say("after");
    s.discord.wait_message("echo: after").await;
    let store = second.stop(&s.discord).await;
    assert_eq!(stored(store.as_ref()).await["session_id"], "session-2");
    s.finish();
}

#[tokio::test]
async fn events_replayed_by_a_resume_that_were_handled_do_not_act_twice() {
    let s = Setup::new().await;
    let first = s.start().await;
    s.discord.wait_ready(1).await;
    let ready = s.discord.last_seq();
    s.say("handled once");
    s.discord.wait_message("echo: handled once").await;
    let ping = s.discord.interaction(
        2,
        GENERAL,
        Some(GUILD),
        ALICE,
        json!({ "name": "ping" }),
        None,
    );
    let callbacks = s.discord.wait_callbacks(1).await;
    assert_eq!(callbacks[0].0, ping);
    let store = first.stop(&s.discord).await;
    // As if the process had died before storing how far it got: the
    // session is stored from READY on.
    let mut session = stored(store.as_ref()).await;
    session["seq"] = json!(ready);
    store
        .set_cursor("discord", "session", &session.to_string())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    drop(store);

    s.say("new");
    let second = s.start().await;
    assert_eq!(
        s.discord.wait_resumed(1).await,
        ("session-1".to_owned(), ready)
    );
    s.discord.wait_message("echo: new").await;
    // The message and the command came again: no second run, answer or
    // interaction callback (the fake refuses a second one).
    assert_eq!(s.posted("echo: handled once"), 1);
    assert_eq!(second.runs().await, 2, "one run per message");
    assert_eq!(s.model.requests().len(), 2);
    assert_eq!(s.discord.wait_callbacks(1).await.len(), 1);
    drop(second.stop(&s.discord).await);
    s.finish();
}

#[tokio::test]
async fn another_bots_stored_session_is_not_resumed() {
    let s = Setup::new().await;
    let first = s.start().await;
    s.discord.wait_ready(1).await;
    // Answered: READY was handled, so the session is known.
    s.say("hello");
    s.discord.wait_message("echo: hello").await;
    let store = first.stop(&s.discord).await;
    let mut session = stored(store.as_ref()).await;
    assert_eq!(session["bot_id"], BOT_ID, "{session}");
    // Stored before the token was changed to another bot's.
    session["bot_id"] = json!("900000000000000099");
    store
        .set_cursor("discord", "session", &session.to_string())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    drop(store);

    let second = s.start().await;
    s.discord.wait_ready(2).await;
    assert_eq!(
        s.discord.resumes(),
        [],
        "no RESUME of another bot's session"
    );
    assert_eq!(s.discord.refused_resumes(), []);
    drop(second.stop(&s.discord).await);
    s.finish();
}
