//! Replies owed to chats, through the real binary and the fake Bot API:
//! each chat is delivered on its own, in order, and a SIGKILL resends at
//! most the message that was in flight. The fake holds chosen sendMessage
//! calls (no answer, no effect) so that "slow" and "killed mid-send" are
//! events the test waits for, not sleeps.

use std::time::Duration;

use hearth_testkit::fake_telegram::{Failure, FakeTelegram, Matching, TelegramState, User};
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::Value;

use crate::harness::{Hearth, fake_config, poll};

const TOKEN: &str = "7000000001:AAtestTOKENtestTOKENtestTOKENtest";
const ALICE: i64 = 1001;
const BOB: i64 = 1002;
const WAIT: Duration = Duration::from_secs(30);
/// Well within the 30 s a Telegram call may take before hearth gives up on
/// it: a reply that waited for a stuck send would miss this.
const WHILE_STUCK: Duration = Duration::from_secs(15);
/// Marks the last part of a long answer.
const END: &str = "THE-END";

struct Setup {
    dir: tempfile::TempDir,
    fake: FakeOpenAi,
    tg: FakeTelegram,
    config: String,
}

impl Setup {
    async fn new() -> Self {
        let fake = FakeOpenAi::start().await;
        let tg = FakeTelegram::start(TOKEN).await;
        let config = format!(
            "{}\n[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\napi_base = \"{}\"\n\
             allowed_users = [{ALICE}, {BOB}]\npoll_timeout_secs = 5\n",
            fake_config(&fake.base_url()),
            tg.url()
        );
        Self {
            dir: tempfile::tempdir().unwrap(),
            fake,
            tg,
            config,
        }
    }

    async fn start(&self) -> Hearth {
        let home = self.dir.path().join("home");
        Hearth::start_with(&home, Some(&self.config), &[("TG_TOKEN", TOKEN)]).await
    }

    async fn wait(&self, what: &str, condition: impl Fn(&TelegramState) -> bool) {
        let ok = self.tg.wait_for(condition, WAIT).await;
        assert!(
            ok,
            "{what}: chats show {:?} and {:?}",
            self.texts(ALICE),
            self.texts(BOB)
        );
    }

    fn texts(&self, chat: i64) -> Vec<String> {
        self.tg.with_state(|st| texts(st, chat))
    }

    fn no_rejections(&self) {
        let r = self.tg.rejections();
        assert!(r.is_empty(), "Telegram would have refused: {r:?}");
    }
}

fn texts(st: &TelegramState, chat: i64) -> Vec<String> {
    st.visible_in(chat).iter().map(|m| m.text.clone()).collect()
}

/// Runs of a thread, oldest first.
async fn runs(h: &Hearth, thread: &str) -> Vec<Value> {
    let (_, v) = h.get(&format!("/v1/runs?thread_key={thread}")).await;
    let mut runs = v["runs"].as_array().cloned().unwrap_or_default();
    runs.reverse();
    runs
}

#[tokio::test]
async fn a_stuck_send_to_one_chat_does_not_delay_another_chats_reply() {
    let s = Setup::new().await;
    let _h = s.start().await;
    s.tg.hold(Matching::method("sendMessage").in_chat(ALICE), 1);
    s.tg.push_update(s.tg.private_text(&User::new(ALICE), "slow one"));
    s.wait("Alice's answer never left", |st| st.held() == 1)
        .await;

    s.tg.push_update(s.tg.private_text(&User::new(BOB), "quick one"));
    let ok =
        s.tg.wait_for(
            |st| texts(st, BOB).iter().any(|t| t == "echo: quick one"),
            WHILE_STUCK,
        )
        .await;
    assert!(ok, "Bob's answer waited for the send stuck in Alice's chat");
    assert!(s.texts(ALICE).is_empty());

    s.tg.release();
    s.wait("Alice's answer after the release", |st| {
        !texts(st, ALICE).is_empty()
    })
    .await;
    assert_eq!(s.texts(ALICE), ["echo: slow one"]);
    assert_eq!(s.texts(BOB), ["echo: quick one"]);
    s.no_rejections();
}

#[tokio::test]
async fn two_replies_waiting_for_one_chat_survive_sigkill_once_and_in_order() {
    let s = Setup::new().await;
    let h = s.start().await;
    // The first answer's send never returns; the second queues behind it.
    s.tg.hold(Matching::method("sendMessage").in_chat(ALICE), 1);
    let alice = User::new(ALICE);
    s.tg.push_update(s.tg.private_text(&alice, "one"));
    s.wait("the first answer never left", |st| st.held() == 1)
        .await;
    s.tg.push_update(s.tg.private_text(&alice, "two"));
    s.fake.wait_for_requests(2).await;
    let thread = format!("telegram:chat:{ALICE}");
    let listed = runs(&h, &thread).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    // A run's answer is queued in the commit that ends it.
    h.wait_run(listed[1]["run_id"].as_str().unwrap()).await;
    let (_, pending) = h.get("/v1/outbox?status=pending").await;
    assert_eq!(pending["items"].as_array().unwrap().len(), 2, "{pending}");
    h.kill().await;

    let h = s.start().await;
    s.wait("both answers after the restart", |st| {
        texts(st, ALICE).len() >= 2
    })
    .await;
    assert_eq!(s.texts(ALICE), ["echo: one", "echo: two"]);
    assert_eq!(s.fake.request_count(), 2, "a run was executed again");
    // Marked delivered once Telegram's answer is back, just after the chat
    // shows it.
    poll("the outbox drained", WAIT, || async {
        let (_, pending) = h.get("/v1/outbox?status=pending").await;
        let items = pending["items"].clone();
        if items == serde_json::json!([]) {
            Ok(())
        } else {
            Err(items)
        }
    })
    .await;
    s.no_rejections();
}

/// Paragraphs enough for two Telegram messages, the second ending in [`END`].
fn two_part_answer() -> String {
    let mut answer = "Plenty of **words** in this paragraph, to be split.\n\n".repeat(120);
    answer.push_str(END);
    answer
}

#[tokio::test]
async fn a_kill_between_the_parts_of_an_answer_resends_only_the_part_in_flight() {
    let s = Setup::new().await;
    let h = s.start().await;
    s.fake.push(Reply::text(two_part_answer()));
    s.tg.hold(Matching::method("sendMessage").with_text(END), 1);
    s.tg.push_update(s.tg.private_text(&User::new(ALICE), "write a lot"));
    s.wait("the second part never left", |st| st.held() == 1)
        .await;
    assert_eq!(s.texts(ALICE).len(), 1, "the first part is delivered");
    h.kill().await;

    let _h = s.start().await;
    s.wait("the second part after the restart", |st| {
        texts(st, ALICE).iter().any(|t| t.contains(END))
    })
    .await;
    let parts = s.texts(ALICE);
    assert_eq!(
        parts.len(),
        2,
        "a part delivered before the kill was sent again: {} messages",
        parts.len()
    );
    assert!(!parts[0].contains(END) && parts[1].ends_with(END));
    assert_eq!(s.fake.request_count(), 1, "the run was executed again");
    s.no_rejections();
}

#[tokio::test]
async fn a_plain_text_fallback_cut_short_resumes_where_it_stopped() {
    let s = Setup::new().await;
    let _h = s.start().await;
    // One formatted message whose Markdown source, sent as plain text when
    // Telegram refuses the formatting, takes two messages.
    let line = "**bold** word\n";
    let answer = format!("{}{END}", line.repeat(350));
    s.fake.push(Reply::text(answer));
    let entities =
        "Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0";
    s.tg.fail_matching(
        Matching::method("sendMessage").in_chat(ALICE),
        1,
        Failure::Error {
            code: 400,
            description: entities.into(),
        },
    );
    // Then the second plain message fails once.
    s.tg.fail_matching(
        Matching::method("sendMessage").with_text(END),
        1,
        Failure::Status(502),
    );
    s.tg.push_update(s.tg.private_text(&User::new(ALICE), "format this"));
    s.wait("the end of the answer", |st| {
        texts(st, ALICE).iter().any(|t| t.contains(END))
    })
    .await;
    let parts = s.texts(ALICE);
    let words: usize = parts.iter().map(|p| p.matches("word").count()).sum();
    assert_eq!(
        words,
        350,
        "the answer's lines were sent more than once: {} messages",
        parts.len()
    );
    assert_eq!(parts.len(), 2);
    s.no_rejections();
}

#[tokio::test]
async fn on_slack_a_kill_between_the_parts_of_an_answer_resends_only_the_part_in_flight() {
    use hearth_testkit::fake_slack::{APP_TOKEN, BOT_TOKEN, FakeSlack};

    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let fake = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await.unwrap();
    let config = format!(
        "{}\n[channels.slack]\nenabled = true\napi_base = \"{}\"\nallowed_users = [\"UALICE\"]\n",
        fake_config(&fake.base_url()),
        slack.api_base()
    );
    let env = [
        ("SLACK_BOT_TOKEN", BOT_TOKEN),
        ("SLACK_APP_TOKEN", APP_TOKEN),
    ];
    let h = Hearth::start_with(&home, Some(&config), &env).await;
    slack.wait_connected(1, WAIT).await;
    fake.push(Reply::text(two_part_answer()));
    slack.hold("chat.postMessage", END, 1);
    let ts = "1700000000.000100";
    slack.push_event(
        "Ev1",
        serde_json::json!({ "type": "message", "channel": "DALICE", "channel_type": "im",
                            "user": "UALICE", "text": "write a lot", "ts": ts, "event_ts": ts }),
    );
    slack.wait_held(1, WAIT).await;
    let before = slack.messages().len();
    assert!(before >= 1, "the parts before the last are delivered");
    h.kill().await;

    let _h = Hearth::start_with(&home, Some(&config), &env).await;
    slack.wait_posted(END, WAIT).await;
    let texts: Vec<String> = slack.messages().into_iter().map(|m| m.text).collect();
    assert_eq!(
        texts.len(),
        before + 1,
        "a part delivered before the kill was sent again: {} messages",
        texts.len()
    );
    assert!(texts[before].ends_with(END));
    assert_eq!(fake.request_count(), 1, "the run was executed again");
    assert_eq!(slack.violations(), Vec::<String>::new());
}
