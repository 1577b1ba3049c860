//! The same rule on every platform for a shared conversation (a Telegram
//! group, a Discord guild channel, a Slack channel thread): changing it
//! needs `llm.configure` in its scope, and its answer is stopped only by
//! the user who asked or an admin.

use hearth_testkit::fake_telegram::User;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::Hearth;

/// Queues a model turn that asks to forget memory 1: the run waits for
/// its asker's confirmation, so it is still going when others act.
fn a_waiting_run(fake: &hearth_testkit::FakeOpenAi) {
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
}

/// The runs of `thread` with `status`.
async fn runs(h: &Hearth, thread: &str, status: &str) -> Vec<Value> {
    let (s, v) = h
        .get(&format!("/v1/runs?thread_key={thread}&status={status}"))
        .await;
    assert_eq!(s, 200, "{v}");
    v["runs"].as_array().unwrap().clone()
}

/// Waits until `thread` has a run with `status`.
async fn wait_status(h: &Hearth, thread: &str, status: &str) {
    let found = async {
        while runs(h, thread, status).await.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(crate::telegram::WAIT, found)
        .await
        .unwrap_or_else(|_| panic!("no {status} run on {thread}"));
}

async fn grant(h: &Hearth, user_key: &str, capability: &str, scope: &str) {
    let body =
        json!({ "subject": format!("user:{user_key}"), "capability": capability, "scope": scope });
    let (s, v) = h
        .send(reqwest::Method::POST, "/v1/permissions/grants", body)
        .await;
    assert_eq!(s, 201, "{v}");
}

mod telegram {
    use super::*;
    use crate::telegram::{ALICE, BOB, WAIT, no_rejections, setup, texts, wait_text};

    #[tokio::test]
    async fn a_group_member_changes_or_stops_nothing_without_the_right() {
        let s = setup("").await;
        let group = -100_780;
        let thread = format!("telegram:chat:{group}");
        let (alice, bob) = (User::new(ALICE), User::new(BOB));
        a_waiting_run(&s.fake);
        s.tg.push_update(s.tg.group_text(group, &alice, "forget it", true));
        wait_status(&s.hearth, &thread, "awaiting_confirmation").await;

        // Bob may neither stop Alice's answer nor start over the group.
        s.tg.push_update(s.tg.group_text(group, &bob, "/cancel", true));
        wait_text(&s.tg, group, "Only the person who asked").await;
        s.tg.push_update(s.tg.group_text(group, &bob, "/new", true));
        wait_text(&s.tg, group, "llm.configure").await;
        assert_eq!(
            runs(&s.hearth, &thread, "awaiting_confirmation")
                .await
                .len(),
            1
        );

        // The picker shows; Bob's press changes nothing until he holds the
        // capability in this group.
        s.tg.push_update(s.tg.group_text(group, &bob, "/model", true));
        let ok =
            s.tg.wait_for(
                |st| {
                    st.visible_in(group)
                        .iter()
                        .any(|m| m.text.starts_with("Choose the model"))
                },
                WAIT,
            )
            .await;
        assert!(ok, "{:?}", s.tg.with_state(|st| texts(st, group)));
        let (picker, data) = s.tg.with_state(|st| {
            let m = st
                .visible_in(group)
                .into_iter()
                .find(|m| m.text.starts_with("Choose the model"))
                .unwrap()
                .clone();
            let data = m
                .buttons
                .iter()
                .flatten()
                .find(|b| b.text.ends_with("fake/other-model"))
                .and_then(|b| b.callback_data.clone())
                .unwrap();
            (m.message_id, data)
        });
        s.tg.push_update(s.tg.callback_query(&bob, group, picker, &data));
        let refused =
            s.tg.wait_for(
                |st| {
                    st.callback_answers().iter().any(|a| {
                        a.show_alert
                            && a.text
                                .as_deref()
                                .is_some_and(|t| t.contains("llm.configure"))
                    })
                },
                WAIT,
            )
            .await;
        assert!(
            refused,
            "{:?}",
            s.tg.with_state(|st| st.callback_answers().to_vec())
        );
        let (_, rt) = s.hearth.get(&format!("/v1/threads/{thread}/runtime")).await;
        assert_eq!(rt["model"], "fake/fake-model", "{rt}");
        grant(
            &s.hearth,
            &format!("telegram:user:{BOB}"),
            "llm.configure",
            &thread,
        )
        .await;
        s.tg.push_update(s.tg.callback_query(&bob, group, picker, &data));
        let ok =
            s.tg.wait_for(
                |st| {
                    st.callback_answers()
                        .iter()
                        .any(|a| a.text.as_deref() == Some("Model: fake/other-model"))
                },
                WAIT,
            )
            .await;
        assert!(ok);

        // Alice stops her own answer.
        s.tg.push_update(s.tg.group_text(group, &alice, "/cancel", true));
        wait_status(&s.hearth, &thread, "cancelled").await;
        no_rejections(&s.tg);
    }
}

mod discord {
    use super::*;
    use crate::discord::{
        ALICE, BOB, GENERAL, GUILD, ROLE, no_violations, run_command, setup, text,
    };
    use hearth_testkit::fake_discord::BOT_ID;

    #[tokio::test]
    async fn only_the_asker_or_a_server_admin_stops_an_answer_and_a_role_grant_lets_a_member_change_the_channel()
     {
        let s = setup().await;
        let thread = format!("discord:channel:{GENERAL}");
        a_waiting_run(&s.fake);
        s.dc.message(
            GENERAL,
            Some(GUILD),
            ALICE,
            false,
            &format!("<@{BOT_ID}> forget it"),
        );
        wait_status(&s.hearth, &thread, "awaiting_confirmation").await;
        let cancel = json!([{ "name": "cancel", "type": 1 }]);
        let b = run_command(&s, BOB, "agent", cancel.clone(), 1).await;
        assert!(text(&b).contains("Only the person who asked"), "{b}");
        assert_eq!(b["data"]["flags"], 64, "only Bob sees it: {b}");
        assert_eq!(
            runs(&s.hearth, &thread, "awaiting_confirmation")
                .await
                .len(),
            1
        );

        // A grant of llm.configure to a role of Bob's in this guild.
        s.dc.set_member_roles(BOB, &[ROLE]);
        crate::discord::grant_to_role(&s, "llm.configure", 2).await;
        let opt = json!([{ "name": "name", "type": 3, "value": "fake/other-model" }]);
        let b = run_command(&s, BOB, "model", opt, 3).await;
        assert_eq!(text(&b), "Model: fake/other-model");
        // It lets him change the channel, not stop Alice's answer.
        let b = run_command(&s, BOB, "agent", cancel.clone(), 4).await;
        assert!(text(&b).contains("Only the person who asked"), "{b}");

        let b = run_command(&s, ALICE, "agent", cancel, 5).await;
        assert!(["Cancelled.", "Stopping."].contains(&text(&b)), "{b}");
        wait_status(&s.hearth, &thread, "cancelled").await;
        no_violations(&s.dc);
    }
}

mod slack {
    use super::*;
    use crate::slack::{ALICE, BOB, WAIT, mention, no_violations, setup};

    #[tokio::test]
    async fn a_channel_thread_is_changed_with_the_right_and_stopped_by_its_asker() {
        // open_dms: Bob may use the command at all; the rule is what stops him.
        let s = setup("open_dms = true\n", &[]).await;
        s.slack.wait_connected(1, WAIT).await;
        let root = "1700000000.000700";
        let thread = format!("slack:thread:CGENERAL:{root}");
        a_waiting_run(&s.fake);
        s.slack
            .push_event("Ev700", mention(ALICE, "CGENERAL", root, None, "forget it"));
        wait_status(&s.hearth, &thread, "awaiting_confirmation").await;
        let cmd = |user: &str, text: &str, id: &str| {
            json!({ "command": "/hearth", "text": text, "user_id": user, "channel_id": "CGENERAL", "team_id": "TFAKE",
                    "response_url": s.slack.response_url(id), "trigger_id": format!("trig-{id}") })
        };
        s.slack
            .push_envelope("slash_commands", cmd(BOB, &format!("cancel {root}"), "1"));
        s.slack.push_envelope(
            "slash_commands",
            cmd(BOB, &format!("model fake/other-model {root}"), "2"),
        );
        let replies = s.slack.wait_calls("response_url", 2, WAIT).await;
        let by_id = |replies: &[Value], id: &str| {
            replies
                .iter()
                .find(|r| r["response_url_id"] == id)
                .map(|r| r["text"].as_str().unwrap_or_default().to_owned())
                .unwrap()
        };
        assert!(
            by_id(&replies, "1").contains("Only the person who asked"),
            "{replies:?}"
        );
        assert!(
            by_id(&replies, "2").contains("llm.configure"),
            "{replies:?}"
        );
        assert_eq!(
            runs(&s.hearth, &thread, "awaiting_confirmation")
                .await
                .len(),
            1
        );
        grant(
            &s.hearth,
            &format!("slack:user:{BOB}"),
            "llm.configure",
            "slack:team:TFAKE",
        )
        .await;
        s.slack.push_envelope(
            "slash_commands",
            cmd(BOB, &format!("model fake/other-model {root}"), "3"),
        );
        // Alice's own thread: the newest she talked in.
        s.slack
            .push_envelope("slash_commands", cmd(ALICE, "cancel", "4"));
        let replies = s.slack.wait_calls("response_url", 4, WAIT).await;
        assert_eq!(by_id(&replies, "3"), "Model: fake/other-model");
        assert!(
            ["Cancelled.", "Stopping."].contains(&by_id(&replies, "4").as_str()),
            "{replies:?}"
        );
        wait_status(&s.hearth, &thread, "cancelled").await;
        no_violations(&s.slack);
    }
}
