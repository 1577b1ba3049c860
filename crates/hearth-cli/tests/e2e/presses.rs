//! Button presses while the store fails: every press is answered (its
//! button stops spinning), and one that could not act acts when it comes
//! again, because it is marked seen only after it acted. The store failure
//! is a trigger in hearth's own database that aborts writes to one table.

use std::path::{Path, PathBuf};

use hearth_testkit::fake_discord::BOT_ID;
use hearth_testkit::fake_telegram::User;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::json;

/// Writes to one table of a running hearth's database fail until
/// [`Broken::mend`].
struct Broken {
    db: PathBuf,
    table: &'static str,
}

impl Broken {
    fn writes_to(home: &Path, table: &'static str) -> Broken {
        let db = home.join("hearth.db");
        let sql = format!(
            "CREATE TRIGGER test_broken_insert BEFORE INSERT ON {table} \
                 BEGIN SELECT RAISE(ABORT, 'injected store failure'); END;\
             CREATE TRIGGER test_broken_update BEFORE UPDATE ON {table} \
                 BEGIN SELECT RAISE(ABORT, 'injected store failure'); END;"
        );
        Self::run(&db, &sql);
        Broken { db, table }
    }

    fn run(db: &Path, sql: &str) {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        conn.execute_batch(sql).unwrap();
    }

    fn mend(self) {
        Self::run(
            &self.db,
            "DROP TRIGGER test_broken_insert; DROP TRIGGER test_broken_update;",
        );
        eprintln!("writes to {} work again", self.table);
    }
}

#[tokio::test]
async fn a_telegram_press_the_store_fails_is_answered_and_acts_once_the_store_is_back() {
    use crate::telegram::{ALICE, WAIT, no_rejections, setup, texts};
    let s = setup("").await;
    let alice = User::new(ALICE);
    s.tg.push_update(s.tg.private_text(&alice, "/model"));
    let ok =
        s.tg.wait_for(
            |st| st.visible_in(ALICE).iter().any(|m| !m.buttons.is_empty()),
            WAIT,
        )
        .await;
    assert!(ok, "{:?}", s.tg.with_state(|st| texts(st, ALICE)));
    let picker = s.tg.with_state(|st| st.visible_in(ALICE)[0].clone());
    let data = picker
        .buttons
        .iter()
        .flatten()
        .find(|b| b.text.ends_with("fake/other-model"))
        .and_then(|b| b.callback_data.clone())
        .unwrap();

    let broken = Broken::writes_to(&s.hearth.home, "threads");
    let press = s.tg.callback_query(&alice, ALICE, picker.message_id, &data);
    let query = press["callback_query"]["id"].as_str().unwrap().to_owned();
    s.tg.push_update(press);
    // The button stops spinning although the model could not be stored.
    let answered =
        s.tg.wait_for(
            |st| st.callback_answers().iter().any(|a| a.query_id == query),
            WAIT,
        )
        .await;
    assert!(answered, "the press was never answered");
    broken.mend();
    // The same press, received again, acts now.
    let shown =
        s.tg.wait_for(
            |st| {
                st.visible_in(ALICE).iter().any(|m| {
                    m.message_id == picker.message_id && m.text.contains("Now: fake/other-model")
                })
            },
            WAIT,
        )
        .await;
    assert!(shown, "{:?}", s.tg.with_state(|st| texts(st, ALICE)));
    let (_, rt) = s.hearth.get("/v1/threads/telegram:chat:1001/runtime").await;
    assert_eq!(rt["model"], "fake/other-model", "{rt}");
    let answers = s.tg.with_state(|st| {
        st.callback_answers()
            .iter()
            .filter(|a| a.query_id == query)
            .count()
    });
    assert_eq!(answers, 1, "a press is answered once");
    no_rejections(&s.tg);
}

#[tokio::test]
async fn a_discord_press_is_answered_even_when_it_cannot_be_recorded() {
    use crate::discord::{ALICE, GENERAL, GUILD, callback_of, no_violations, setup, text};
    let s = setup().await;
    s.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
    s.fake.push(Reply::text("forgotten"));
    s.dc.message(
        GENERAL,
        Some(GUILD),
        ALICE,
        false,
        &format!("<@{BOT_ID}> forget it"),
    );
    let msgs = s.dc.wait_messages(1).await;
    let prompt = msgs
        .iter()
        .find(|m| m.components.is_some())
        .unwrap_or_else(|| panic!("no prompt: {msgs:?}"));
    let approve = prompt.components.as_ref().unwrap()[0]["components"][0]["custom_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Presses cannot be recorded as seen.
    let broken = Broken::writes_to(&s.hearth.home, "channel_events");
    let message = json!({ "id": prompt.id, "content": prompt.content });
    let press = s.dc.interaction(
        3,
        GENERAL,
        Some(GUILD),
        ALICE,
        json!({ "custom_id": approve, "component_type": 2 }),
        Some(message),
    );
    let body = callback_of(&s.dc, &press, 1).await;
    broken.mend();
    assert_eq!(body["type"], 7, "the prompt is updated: {body}");
    assert!(text(&body).contains("Approved by"), "{body}");
    s.dc.wait_message("forgotten").await;
    no_violations(&s.dc);
}

#[tokio::test]
async fn a_slack_press_the_store_fails_is_told_and_acts_when_slack_sends_it_again() {
    use crate::slack::{ALICE, WAIT, no_violations, setup};
    let s = setup("", &[]).await;
    s.slack.wait_connected(1, WAIT).await;
    let dm = "DALICE";
    s.slack.push_envelope(
        "slash_commands",
        json!({ "command": "/hearth", "text": "model", "user_id": ALICE, "channel_id": dm, "team_id": "TFAKE",
                "response_url": s.slack.response_url("1"), "trigger_id": "trig-1" }),
    );
    let replies = s.slack.wait_calls("response_url", 1, WAIT).await;
    let other = replies[0]["blocks"][1]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["value"].as_str().unwrap().ends_with("other-model"))
        .cloned()
        .unwrap_or_else(|| panic!("no other-model button: {}", replies[0]));

    let broken = Broken::writes_to(&s.hearth.home, "threads");
    let press = s.slack.push_envelope(
        "interactive",
        json!({ "type": "block_actions", "user": { "id": ALICE }, "channel": { "id": dm },
                "actions": [{ "action_id": other["action_id"], "value": other["value"], "type": "button" }],
                "response_url": s.slack.response_url("2"), "trigger_id": "trig-2" }),
    );
    // Told at once; not acknowledged, so Slack sends it again.
    let replies = s.slack.wait_calls("response_url", 2, WAIT).await;
    let told = replies[1]["text"].as_str().unwrap_or_default();
    assert!(told.contains("did not go through"), "{}", replies[1]);
    assert!(
        s.slack.unacked().contains(&press),
        "the press was acknowledged"
    );
    broken.mend();
    // A new connection: the fake sends what was not acknowledged again.
    s.slack.disconnect();
    s.slack.wait_acked(&press, WAIT).await;
    let replies = s.slack.wait_calls("response_url", 3, WAIT).await;
    let now = replies[2]["text"].as_str().unwrap_or_default();
    assert!(now.ends_with("other-model"), "{}", replies[2]);
    let (_, rt) = s
        .hearth
        .get(&format!("/v1/threads/slack:channel:{dm}/runtime"))
        .await;
    assert_eq!(rt["model"], "fake/other-model", "{rt}");
    no_violations(&s.slack);
}
