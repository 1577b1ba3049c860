//! A message the runtime refuses (here `confirm <token>` sent by someone
//! who may not answer the confirmation) is an ordinary event on every
//! platform: Telegram acknowledges it and goes on with the batch, Discord
//! and Slack do not count it as a channel failure. Only store errors,
//! shutdown and overload leave an update to come again.

use hearth_testkit::ToolCallSpec;
use hearth_testkit::fake_telegram::User;
use serde_json::json;

use crate::telegram::{self, ALICE, BOB, WAIT, texts, wait_text};

#[tokio::test]
async fn a_refused_confirm_text_holds_up_neither_its_chat_nor_the_others() {
    let s = telegram::setup("").await;
    let group = -100_779;
    let (alice, bob) = (User::new(ALICE), User::new(BOB));
    s.fake
        .push(hearth_testkit::Reply::tool_calls(vec![ToolCallSpec::new(
            "f1",
            "memory_forget",
            json!({ "id": 1 }).to_string(),
        )]));
    s.tg.push_update(s.tg.group_text(group, &alice, "forget it", true));
    let ok =
        s.tg.wait_for(
            |st| st.visible_in(group).iter().any(|m| !m.buttons.is_empty()),
            WAIT,
        )
        .await;
    assert!(
        ok,
        "no prompt: {:?}",
        s.tg.with_state(|st| texts(st, group))
    );
    let approve = s.tg.with_state(|st| {
        st.visible_in(group)
            .into_iter()
            .find_map(|m| m.buttons.first()?.first()?.callback_data.clone())
            .unwrap()
    });
    let token = approve.strip_prefix("cf:a:").unwrap().to_owned();

    // One batch: Bob's confirm of Alice's question (which the runtime
    // refuses, or takes as an ordinary message), then Alice in the same
    // group, then Bob in his own chat.
    s.tg.push_update(s.tg.group_text(group, &bob, &format!("confirm {token}"), true));
    s.tg.push_update(s.tg.group_text(group, &alice, "and another thing", true));
    let last = s.tg.push_update(s.tg.private_text(&bob, "hello from bob"));

    wait_text(&s.tg, BOB, "echo: hello from bob").await;
    wait_text(&s.tg, group, "echo: and another thing").await;
    let acknowledged =
        s.tg.wait_for(
            |st| {
                st.requests()
                    .iter()
                    .any(|r| r.method == "getUpdates" && r.body["offset"].as_i64() > Some(last))
                    && st.pending_updates() == 0
            },
            WAIT,
        )
        .await;
    assert!(acknowledged, "the batch was never acknowledged");
    telegram::no_rejections(&s.tg);
}

#[tokio::test]
async fn refused_discord_messages_do_not_mark_the_channel_failing() {
    use crate::discord::{ALICE, BOB, GENERAL, GUILD, no_violations, setup};
    use hearth_testkit::fake_discord::BOT_ID;
    let s = setup().await;
    s.fake
        .push(hearth_testkit::Reply::tool_calls(vec![ToolCallSpec::new(
            "f1",
            "memory_forget",
            json!({ "id": 1 }).to_string(),
        )]));
    let mention = |t: &str| format!("<@{BOT_ID}> {t}");
    s.dc.message(GENERAL, Some(GUILD), ALICE, false, &mention("forget it"));
    let msgs = s.dc.wait_messages(1).await;
    let prompt = msgs
        .iter()
        .find(|m| m.components.is_some())
        .unwrap_or_else(|| panic!("no prompt: {msgs:?}"));
    let approve = prompt.components.as_ref().unwrap()[0]["components"][0]["custom_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = approve.strip_prefix("cf:a:").unwrap().to_owned();
    // Three refusals in a row: as many as mark a failing channel degraded.
    for _ in 0..3 {
        s.dc.message(
            GENERAL,
            Some(GUILD),
            BOB,
            false,
            &mention(&format!("confirm {token}")),
        );
    }
    // Events are handled in order: once this is answered, so were those.
    let other = "500000000000000003";
    s.dc.message(other, Some(GUILD), BOB, false, &mention("still there?"));
    s.dc.wait_message("echo: still there?").await;
    let log = std::fs::read_to_string(s.hearth.home.join("serve.log")).unwrap();
    assert!(
        !log.contains("could not take a Discord message"),
        "a refused message counted as a channel failure:\n{log}"
    );
    let (_, channels) = s.hearth.get("/v1/channels").await;
    let discord = channels["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "discord")
        .unwrap()
        .clone();
    assert_eq!(discord["state"], "connected", "{discord}");
    no_violations(&s.dc);
}

#[tokio::test]
async fn refused_slack_events_are_acknowledged() {
    use crate::slack::{ALICE, BOB, mention, no_violations, setup};
    let s = setup("", &[]).await;
    s.slack.wait_connected(1, WAIT).await;
    s.fake
        .push(hearth_testkit::Reply::tool_calls(vec![ToolCallSpec::new(
            "f1",
            "memory_forget",
            json!({ "id": 1 }).to_string(),
        )]));
    let root = "1700000000.000800";
    s.slack
        .push_event("Ev800", mention(ALICE, "CGENERAL", root, None, "forget it"));
    let prompt = s.slack.wait_posted("Approve this action?", WAIT).await;
    let token = prompt.blocks[1]["elements"][0]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    // Three refusals in a row: as many as mark a failing channel degraded.
    let ids: Vec<String> = (0..3)
        .map(|i| {
            let ts = format!("1700000000.00090{i}");
            let text = format!("confirm {token}");
            s.slack.push_event(
                &format!("Ev9{i}"),
                mention(BOB, "CGENERAL", &ts, Some(root), &text),
            )
        })
        .collect();
    for id in &ids {
        s.slack.wait_acked(id, WAIT).await;
    }
    let (_, channels) = s.hearth.get("/v1/channels").await;
    let slack = channels["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "slack")
        .unwrap()
        .clone();
    assert_eq!(slack["state"], "connected", "{slack}");
    no_violations(&s.slack);
}
