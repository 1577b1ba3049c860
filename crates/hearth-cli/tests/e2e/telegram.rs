//! Telegram end to end: the real binary polling the fake Bot API, answering
//! with the fake provider. Every request hearth sends is checked by the fake
//! (`rejections()` lists what Telegram would have refused).

use std::time::{Duration, Instant};

use hearth_testkit::fake_telegram::{Failure, FakeTelegram, TelegramState, User};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::json;

use crate::harness::{Hearth, command, fake_config};

const TOKEN: &str = "7000000001:AAtestTOKENtestTOKENtestTOKENtest";
pub(crate) const ALICE: i64 = 1001;
pub(crate) const BOB: i64 = 1002;
pub(crate) const WAIT: Duration = Duration::from_secs(30);

pub(crate) struct Setup {
    _dir: tempfile::TempDir,
    pub(crate) fake: FakeOpenAi,
    pub(crate) tg: FakeTelegram,
    pub(crate) hearth: Hearth,
}

fn config(fake: &FakeOpenAi, tg: &FakeTelegram, extra: &str) -> String {
    format!(
        "{}\n[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\napi_base = \"{}\"\n\
         allowed_users = [{ALICE}, {BOB}]\npoll_timeout_secs = 5\n{extra}",
        fake_config(&fake.base_url()),
        tg.url()
    )
}

async fn start(home: &std::path::Path, cfg: &str) -> Hearth {
    Hearth::start_with(home, Some(cfg), &[("TG_TOKEN", TOKEN)]).await
}

pub(crate) async fn setup(extra: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let hearth = start(&dir.path().join("home"), &config(&fake, &tg, extra)).await;
    Setup {
        _dir: dir,
        fake,
        tg,
        hearth,
    }
}

/// The bot's visible messages in `chat`, as text.
pub(crate) fn texts(st: &TelegramState, chat: i64) -> Vec<String> {
    st.visible_in(chat).iter().map(|m| m.text.clone()).collect()
}

pub(crate) async fn wait_text(tg: &FakeTelegram, chat: i64, want: &str) {
    let ok = tg
        .wait_for(|st| texts(st, chat).iter().any(|t| t.contains(want)), WAIT)
        .await;
    assert!(
        ok,
        "no message containing {want:?} in chat {chat}; chat shows {:?}",
        tg.with_state(|st| texts(st, chat))
    );
}

pub(crate) fn no_rejections(tg: &FakeTelegram) {
    assert!(
        tg.rejections().is_empty(),
        "Telegram would have refused: {:?}",
        tg.rejections()
    );
}

#[tokio::test]
async fn a_message_in_gets_its_answer_once_and_the_menu_is_set() {
    let s = setup("").await;
    let alice = User::new(ALICE);
    s.tg.push_update(s.tg.private_text(&alice, "hello there"));
    wait_text(&s.tg, ALICE, "echo: hello there").await;
    // The run is done and its reply sent; nothing else follows it.
    // Marked sent right after Telegram answered.
    let sent = async {
        loop {
            let (_, v) = s.hearth.get("/v1/outbox?status=sent").await;
            if v["items"].as_array().is_some_and(|a| !a.is_empty()) {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let outbox = tokio::time::timeout(WAIT, sent).await.unwrap();
    assert_eq!(outbox["items"].as_array().unwrap().len(), 1, "{outbox}");
    let (_, pending) = s.hearth.get("/v1/outbox?status=pending").await;
    assert_eq!(pending["items"], json!([]), "{pending}");
    assert_eq!(
        s.tg.with_state(|st| texts(st, ALICE)),
        vec!["echo: hello there"]
    );
    assert_eq!(s.fake.request_count(), 1);
    assert!(s.tg.with_state(|st| st.commands().iter().any(|(c, _)| c == "model")));
    let (_, ch) = s.hearth.get("/v1/channels").await;
    let tg = ch["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "telegram")
        .unwrap();
    assert_eq!(tg["enabled"], true);
    assert_eq!(tg["state"], "connected", "{ch}");
    let (_, ready) = s.hearth.get("/readyz").await;
    assert_eq!(ready["checks"]["channel:telegram"], "ok", "{ready}");
    no_rejections(&s.tg);
}

#[tokio::test]
async fn a_long_rich_answer_is_split_within_the_limit_and_formatted() {
    let s = setup("").await;
    let para = "**Bold** words & <angle> brackets with `code`.\n\n";
    let mut answer = para.repeat(150);
    answer.push_str("```rust\nfn main() {}\n```\n");
    s.fake.push(Reply::text(answer.clone()));
    s.tg.push_update(s.tg.private_text(&User::new(ALICE), "write a lot"));
    let ok =
        s.tg.wait_for(
            |st| {
                st.visible_in(ALICE)
                    .iter()
                    .any(|m| m.text.contains("fn main() {}"))
            },
            WAIT,
        )
        .await;
    assert!(ok, "{:?}", s.tg.with_state(|st| texts(st, ALICE)));
    let parts = s.tg.with_state(|st| texts(st, ALICE));
    assert!(parts.len() >= 2, "{} parts", parts.len());
    for p in &parts {
        assert!(p.encode_utf16().count() <= 4096);
        assert!(!p.contains("**"), "bold markers were rendered: {p:.80}");
    }
    assert!(s.tg.with_state(|st| {
        st.visible_in(ALICE)[0]
            .entities
            .iter()
            .any(|e| e.kind == "bold")
    }));
    no_rejections(&s.tg);
}

#[tokio::test]
async fn a_429_is_waited_out_and_the_answer_arrives_once() {
    let s = setup("").await;
    s.tg.fail_method(
        "sendMessage",
        1,
        Failure::TooManyRequests { retry_after: 2 },
    );
    let t0 = Instant::now();
    s.tg.push_update(s.tg.private_text(&User::new(ALICE), "rate me"));
    wait_text(&s.tg, ALICE, "echo: rate me").await;
    assert!(
        t0.elapsed() >= Duration::from_secs(2),
        "retry_after was not honoured"
    );
    assert_eq!(s.tg.with_state(|st| texts(st, ALICE)).len(), 1);
    assert_eq!(s.tg.with_state(|st| st.calls("sendMessage")), 2);
    no_rejections(&s.tg);
}

#[tokio::test]
async fn telegram_down_for_a_while_then_back_gets_the_answer_through() {
    let s = setup("").await;
    // 5xx first, then no connection at all, then back.
    s.tg.fail_method("sendMessage", 2, Failure::Status(502));
    s.tg.push_update(s.tg.private_text(&User::new(ALICE), "are you there"));
    let ok = s.tg.wait_for(|st| st.calls("sendMessage") >= 1, WAIT).await;
    assert!(ok);
    s.tg.set_unreachable(true);
    let pending = async {
        loop {
            let (_, v) = s.hearth.get("/v1/outbox?status=pending").await;
            if v["items"].as_array().is_some_and(|a| !a.is_empty()) {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let v = tokio::time::timeout(WAIT, pending).await.unwrap();
    assert_eq!(v["items"][0]["kind"], "message");
    assert!(
        v["items"][0].get("text").is_none(),
        "the outbox API never shows text"
    );
    s.tg.set_unreachable(false);
    wait_text(&s.tg, ALICE, "echo: are you there").await;
    assert_eq!(s.tg.with_state(|st| texts(st, ALICE)).len(), 1);
    assert_eq!(s.fake.request_count(), 1);
    no_rejections(&s.tg);
}

#[tokio::test]
async fn an_answer_waiting_in_the_outbox_survives_sigkill_without_a_second_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let cfg = config(&fake, &tg, "");
    let h = start(&home, &cfg).await;
    // The first attempts fail (the answer waits in the outbox); later ones work.
    tg.fail_method("sendMessage", 3, Failure::Status(502));
    tg.push_update(tg.private_text(&User::new(ALICE), "remember to answer"));
    let ok = tg.wait_for(|st| st.calls("sendMessage") >= 1, WAIT).await;
    assert!(ok, "the answer was never attempted");
    let (_, v) = h.get("/v1/outbox?status=pending").await;
    assert_eq!(v["items"].as_array().unwrap().len(), 1, "{v}");
    h.kill().await;
    assert!(tg.with_state(|st| texts(st, ALICE)).is_empty());
    let h = start(&home, &cfg).await;
    wait_text(&tg, ALICE, "echo: remember to answer").await;
    assert_eq!(fake.request_count(), 1, "the run was executed again");
    assert_eq!(tg.with_state(|st| texts(st, ALICE)).len(), 1);
    let (_, v) = h.get("/v1/runs?thread_key=telegram:chat:1001").await;
    assert_eq!(v["runs"].as_array().unwrap().len(), 1, "{v}");
    no_rejections(&tg);
}

#[tokio::test]
async fn a_redelivered_webhook_update_makes_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let cfg = config(
        &fake,
        &tg,
        "mode = \"webhook\"\nwebhook_secret_env = \"TG_SECRET\"\n",
    );
    let h = Hearth::start_with(
        &dir.path().join("home"),
        Some(&cfg),
        &[("TG_TOKEN", TOKEN), ("TG_SECRET", "s3cret-token")],
    )
    .await;
    let mut update = tg.private_text(&User::new(ALICE), "only once please");
    update["update_id"] = json!(555);
    let post = |secret: &'static str| {
        h.http
            .post(h.at("/channels/telegram/webhook"))
            .header("X-Telegram-Bot-Api-Secret-Token", secret)
            .json(&update)
            .send()
    };
    assert_eq!(post("wrong").await.unwrap().status().as_u16(), 401);
    assert_eq!(post("s3cret-token").await.unwrap().status().as_u16(), 200);
    assert_eq!(post("s3cret-token").await.unwrap().status().as_u16(), 200);
    wait_text(&tg, ALICE, "echo: only once please").await;
    let (_, v) = h.get("/v1/runs?thread_key=telegram:chat:1001").await;
    assert_eq!(v["runs"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(fake.request_count(), 1);
    assert_eq!(tg.with_state(|st| texts(st, ALICE)).len(), 1);
    // A malformed body is taken (redelivery cannot fix it) and skipped.
    let r = h
        .http
        .post(h.at("/channels/telegram/webhook"))
        .header("X-Telegram-Bot-Api-Secret-Token", "s3cret-token")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    no_rejections(&tg);
}

#[tokio::test]
async fn a_stranger_pairs_then_gets_answers() {
    let s = setup("").await;
    let eve = User::new(3003);
    s.tg.push_update(s.tg.private_text(&eve, "let me in"));
    wait_text(&s.tg, 3003, "hearth pair approve").await;
    // Asking again does not send a second code.
    s.tg.push_update(s.tg.private_text(&eve, "please"));
    let (_, p) = s.hearth.get("/v1/pairings").await;
    let pairings = p["pairings"].as_array().unwrap();
    assert_eq!(pairings.len(), 1, "{p}");
    assert_eq!(pairings[0]["user_key"], "telegram:user:3003");
    let code = pairings[0]["code"].as_str().unwrap().to_owned();
    assert_eq!(s.fake.request_count(), 0, "a stranger got a model call");
    crate::harness::succeeds(command(&s.hearth.home).args([
        "--url",
        &s.hearth.url,
        "pair",
        "approve",
        &code,
    ]))
    .await;
    wait_text(&s.tg, 3003, "You are approved").await;
    let again = s
        .hearth
        .http
        .post(s.hearth.at(&format!("/v1/pairings/{code}/approve")))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 404);
    let (_, allowed) = s.hearth.get("/v1/channels/telegram/allowed").await;
    let users = allowed["users"].as_array().unwrap();
    assert!(
        users
            .iter()
            .any(|u| u["user_key"] == "telegram:user:3003" && u["via"] == "pairing"),
        "{allowed}"
    );
    assert!(
        users
            .iter()
            .any(|u| u["user_key"] == "telegram:user:1001" && u["via"] == "config")
    );
    s.tg.push_update(s.tg.private_text(&eve, "hello now"));
    wait_text(&s.tg, 3003, "echo: hello now").await;
    assert_eq!(
        s.tg.with_state(|st| texts(st, 3003)).len(),
        3,
        "code, approval, answer"
    );
    no_rejections(&s.tg);
}

#[tokio::test]
async fn groups_answer_mentions_and_replies_only_and_ignore_bots() {
    let s = setup("").await;
    let group = -100_555;
    let alice = User::new(ALICE);
    s.tg.push_update(s.tg.group_text(group, &alice, "just chatting", false));
    s.tg.push_update(s.tg.group_text(group, &User::bot(4004), "I am a bot", true));
    s.tg.push_update(s.tg.group_text(group, &User::new(5005), "stranger here", true));
    s.tg.push_update(s.tg.private_text(&User::bot(4005), "bot dm"));
    s.tg.push_update(s.tg.group_text(group, &alice, "what now?", true));
    wait_text(&s.tg, group, "echo: what now?").await;
    assert_eq!(
        s.tg.with_state(|st| texts(st, group)),
        vec!["echo: what now?"]
    );
    assert_eq!(s.fake.request_count(), 1);
    let seen = crate::harness::user_texts(&s.fake.requests()[0]);
    assert_eq!(
        seen.last().map(String::as_str),
        Some("what now?"),
        "the mention reached the model"
    );
    assert!(s.tg.with_state(|st| texts(st, 4005)).is_empty());
    no_rejections(&s.tg);
}

#[tokio::test]
async fn a_malformed_update_is_skipped_and_the_next_is_answered() {
    let s = setup("").await;
    s.tg.push_update(json!({ "message": "not a message object" }));
    s.tg.push_update(s.tg.private_text(&User::new(ALICE), "after the junk"));
    wait_text(&s.tg, ALICE, "echo: after the junk").await;
    let log = std::fs::read_to_string(s.hearth.home.join("serve.log")).unwrap();
    assert!(log.contains("skipping a malformed update"), "{log}");
    no_rejections(&s.tg);
}

#[tokio::test]
async fn commands_and_pickers_change_the_thread() {
    let s = setup("").await;
    let alice = User::new(ALICE);
    s.tg.push_update(s.tg.private_text(&alice, "/model"));
    let ok =
        s.tg.wait_for(
            |st| st.visible_in(ALICE).iter().any(|m| !m.buttons.is_empty()),
            WAIT,
        )
        .await;
    assert!(ok);
    let picker = s.tg.with_state(|st| st.visible_in(ALICE)[0].clone());
    let other = picker
        .buttons
        .iter()
        .flatten()
        .find(|b| b.text.ends_with("fake/other-model"))
        .unwrap()
        .clone();
    let data = other.callback_data.unwrap();
    assert!(data.len() <= 64);
    s.tg.push_update(s.tg.callback_query(&alice, ALICE, picker.message_id, &data));
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
    assert!(
        ok,
        "{:?}",
        s.tg.with_state(|st| st.callback_answers().to_vec())
    );
    let (_, rt) = s.hearth.get("/v1/threads/telegram:chat:1001/runtime").await;
    assert_eq!(rt["model"], "fake/other-model", "{rt}");
    // A stale button (its model moved) re-renders the picker.
    s.tg.push_update(s.tg.callback_query(&alice, ALICE, picker.message_id, "m:0:deadbeef"));
    let ok =
        s.tg.wait_for(
            |st| {
                st.callback_answers()
                    .iter()
                    .any(|a| a.text.as_deref() == Some("The list changed; pick again."))
            },
            WAIT,
        )
        .await;
    assert!(ok);
    // An argument sets at once; help lists the commands.
    s.tg.push_update(s.tg.private_text(&alice, "/thinking high"));
    wait_text(&s.tg, ALICE, "Thinking: high").await;
    let (_, rt) = s.hearth.get("/v1/threads/telegram:chat:1001/runtime").await;
    assert_eq!(rt["thinking"], "high", "{rt}");
    s.tg.push_update(s.tg.private_text(&alice, "/help"));
    wait_text(&s.tg, ALICE, "/model [id]: Choose the model").await;
    s.tg.push_update(s.tg.private_text(&alice, "/new"));
    wait_text(&s.tg, ALICE, "Started a new conversation.").await;
    s.tg.push_update(s.tg.private_text(&alice, "/cancel"));
    wait_text(&s.tg, ALICE, "Nothing to cancel.").await;
    s.tg.push_update(s.tg.private_text(&alice, "/usage"));
    wait_text(&s.tg, ALICE, "model calls").await;
    assert_eq!(s.fake.request_count(), 0, "commands are not model calls");
    no_rejections(&s.tg);
}

#[tokio::test]
async fn confirmation_buttons_count_only_for_the_asking_user() {
    let s = setup("").await;
    let group = -100_777;
    let (alice, bob) = (User::new(ALICE), User::new(BOB));
    s.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "m1",
        "memory_save",
        json!({ "text": "alice likes tea" }).to_string(),
    )]));
    s.fake.push(Reply::text("saved"));
    s.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
    s.fake.push(Reply::text("forgotten"));
    s.tg.push_update(s.tg.group_text(group, &alice, "remember I like tea", true));
    wait_text(&s.tg, group, "saved").await;
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
    let prompt = s.tg.with_state(|st| {
        st.visible_in(group)
            .into_iter()
            .find(|m| !m.buttons.is_empty())
            .unwrap()
            .clone()
    });
    let approve = prompt.buttons[0][0].callback_data.clone().unwrap();
    assert!(approve.starts_with("cf:a:") && approve.len() <= 64);
    s.tg.push_update(s.tg.callback_query(&bob, group, prompt.message_id, &approve));
    let ok =
        s.tg.wait_for(
            |st| st.callback_answers().iter().any(|a| a.show_alert),
            WAIT,
        )
        .await;
    assert!(ok, "the wrong user was not told");
    let (_, runs) = s
        .hearth
        .get("/v1/runs?thread_key=telegram:chat:-100777&status=awaiting_confirmation")
        .await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    s.tg.push_update(s.tg.callback_query(&alice, group, prompt.message_id, &approve));
    wait_text(&s.tg, group, "forgotten").await;
    assert!(s.tg.with_state(|st| {
        st.visible_in(group)
            .iter()
            .any(|m| m.text.contains("Approved by"))
    }));
    no_rejections(&s.tg);
}

#[tokio::test]
async fn progress_edits_are_throttled_and_the_answer_replaces_them() {
    let s = setup("").await;
    let answer = "word ".repeat(100);
    s.fake.push(
        Reply::text(answer.clone())
            .in_pieces(200)
            .with_chunk_delay(Duration::from_millis(20)),
    );
    let t0 = Instant::now();
    s.tg.push_update(s.tg.private_text(&User::new(ALICE), "stream it"));
    // The answer, then the clean-up of the progress message, in that order.
    let ok =
        s.tg.wait_for(
            |st| {
                texts(st, ALICE)
                    .iter()
                    .map(|t| t.trim())
                    .eq([answer.trim()])
            },
            WAIT,
        )
        .await;
    assert!(ok, "{:?}", s.tg.with_state(|st| texts(st, ALICE)));
    let secs = t0.elapsed().as_secs_f64();
    let (visible, all, edits) = s.tg.with_state(|st| {
        let all: Vec<_> = st
            .sent()
            .into_iter()
            .filter(|m| m.chat_id == ALICE)
            .cloned()
            .collect();
        (texts(st, ALICE), all, st.calls("editMessageText"))
    });
    assert_eq!(
        visible.iter().map(|t| t.trim()).collect::<Vec<_>>(),
        vec![answer.trim()],
        "one answer, no drafts left"
    );
    let progress: Vec<_> = all.iter().filter(|m| m.deleted).collect();
    assert_eq!(progress.len(), 1, "one progress message, deleted: {all:?}");
    assert!(progress[0].text.starts_with('⏳'));
    // At most one edit per second (the first post comes after 1.5 s).
    assert!(
        edits as f64 <= secs,
        "{edits} edits in {secs:.1} s under 200 deltas"
    );
    assert!(s.tg.with_state(|st| {
        st.chat_actions()
            .iter()
            .any(|(c, a)| *c == ALICE && a == "typing")
    }));
    no_rejections(&s.tg);
}

#[tokio::test]
async fn doctor_checks_the_store_the_provider_and_the_bot_token() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    std::fs::create_dir_all(&home).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::write(home.join("hearth.toml"), config(&fake, &tg, "")).unwrap();
    let doctor = |token: &'static str| {
        let mut cmd = command(&home);
        cmd.arg("doctor").env("TG_TOKEN", token);
        cmd.output()
    };
    let out = doctor(TOKEN).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "ok    config",
        "ok    home",
        "ok    store",
        "ok    provider fake",
        "ok    channel telegram: token accepted: bot @hearth_test_bot",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    let out = doctor("7000000001:wrong").await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // Serve starts with a refused token (the channel degrades): a warning.
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("WARN  channel telegram: token refused"),
        "{text}"
    );
    assert!(!text.contains("wrong"), "the token was printed:\n{text}");
    // Telegram refused the wrong token, and only that.
    assert_eq!(tg.rejections(), ["getMe: 401 Unauthorized"]);
}

#[tokio::test]
async fn formatting_refused_by_telegram_goes_out_plain() {
    let s = setup("").await;
    s.fake.push(Reply::text("**bold** answer"));
    s.tg.fail_method(
        "sendMessage",
        1,
        Failure::Error {
            code: 400,
            description:
                "Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0"
                    .into(),
        },
    );
    s.tg.push_update(s.tg.private_text(&User::new(ALICE), "format me"));
    wait_text(&s.tg, ALICE, "**bold** answer").await;
    let (texts, first) = s.tg.with_state(|st| {
        let sends: Vec<_> = st
            .requests()
            .iter()
            .filter(|r| r.method == "sendMessage")
            .cloned()
            .collect();
        (texts(st, ALICE), sends)
    });
    assert_eq!(texts, vec!["**bold** answer"], "sent once, as plain text");
    assert_eq!(first[0].body["parse_mode"], "HTML");
    assert!(
        first[1].body.get("parse_mode").is_none(),
        "{:?}",
        first[1].body
    );
    no_rejections(&s.tg);
}

#[tokio::test]
async fn a_grant_in_a_groups_scope_applies_to_runs_in_that_group_only() {
    let s = setup("\n[permissions]\ndefault_preset = \"none\"\n").await;
    let group = -100_999;
    let r = s
        .hearth
        .http
        .post(s.hearth.at("/v1/permissions/grants"))
        .json(
            &json!({ "subject": "user:telegram:user:1001", "capability": "memory.read",
                        "scope": "telegram:chat:-100999" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let alice = User::new(ALICE);
    s.tg.push_update(s.tg.group_text(group, &alice, "in the group", true));
    wait_text(&s.tg, group, "echo: in the group").await;
    s.tg.push_update(s.tg.private_text(&alice, "in private"));
    wait_text(&s.tg, ALICE, "echo: in private").await;
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        crate::harness::offered_tools(&reqs[0])
            .iter()
            .any(|t| t == "memory_search"),
        "{:?}",
        crate::harness::offered_tools(&reqs[0])
    );
    assert!(
        !crate::harness::offered_tools(&reqs[1])
            .iter()
            .any(|t| t == "memory_search"),
        "{:?}",
        crate::harness::offered_tools(&reqs[1])
    );
    no_rejections(&s.tg);
}

#[tokio::test]
async fn an_incognito_chat_gets_the_confirmation_prompt_and_its_buttons_work() {
    let s = setup("").await;
    let r = s
        .hearth
        .http
        .put(s.hearth.at("/v1/threads/telegram:chat:1001/incognito"))
        .json(&json!({ "enabled": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    s.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
    s.fake.push(Reply::text("forgotten"));
    let alice = User::new(ALICE);
    s.tg.push_update(s.tg.private_text(&alice, "forget it"));
    let ok =
        s.tg.wait_for(
            |st| st.visible_in(ALICE).iter().any(|m| !m.buttons.is_empty()),
            WAIT,
        )
        .await;
    assert!(
        ok,
        "no prompt in the incognito chat: {:?}",
        s.tg.with_state(|st| texts(st, ALICE))
    );
    let prompt = s.tg.with_state(|st| {
        st.visible_in(ALICE)
            .into_iter()
            .find(|m| !m.buttons.is_empty())
            .unwrap()
            .clone()
    });
    let approve = prompt.buttons[0][0].callback_data.clone().unwrap();
    s.tg.push_update(s.tg.callback_query(&alice, ALICE, prompt.message_id, &approve));
    wait_text(&s.tg, ALICE, "forgotten").await;
    no_rejections(&s.tg);
}

#[tokio::test]
async fn a_resolve_any_grant_in_the_group_lets_another_member_answer() {
    let s = setup("").await;
    let group = -100_778;
    let r = s
        .hearth
        .http
        .post(s.hearth.at("/v1/permissions/grants"))
        .json(&json!({ "subject": format!("user:telegram:user:{BOB}"),
                       "capability": "confirmations.resolve_any",
                       "scope": format!("telegram:chat:{group}") }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let (alice, bob) = (User::new(ALICE), User::new(BOB));
    s.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
    s.fake.push(Reply::text("forgotten"));
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
    let prompt = s.tg.with_state(|st| {
        st.visible_in(group)
            .into_iter()
            .find(|m| !m.buttons.is_empty())
            .unwrap()
            .clone()
    });
    let approve = prompt.buttons[0][0].callback_data.clone().unwrap();
    s.tg.push_update(s.tg.callback_query(&bob, group, prompt.message_id, &approve));
    wait_text(&s.tg, group, "forgotten").await;
    assert!(
        s.tg.with_state(|st| st.callback_answers().iter().all(|a| !a.show_alert)),
        "Bob holds the grant in this group and was refused"
    );
    no_rejections(&s.tg);
}

#[tokio::test]
async fn a_progress_message_left_by_a_killed_process_is_removed_with_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let cfg = config(&fake, &tg, "");
    let h = start(&home, &cfg).await;
    // Slow enough that the progress message shows before hearth is killed.
    fake.push(
        Reply::text("word ".repeat(100))
            .in_pieces(200)
            .with_chunk_delay(Duration::from_millis(50)),
    );
    fake.push(Reply::text("answered after the restart"));
    tg.push_update(tg.private_text(&User::new(ALICE), "take your time"));
    // Killed once the message was edited: by then its id is stored (right
    // after it was posted), which the kill cannot be ordered after otherwise.
    let ok = tg
        .wait_for(|st| st.calls("editMessageText") >= 1, WAIT)
        .await;
    assert!(ok, "no progress message was shown");
    h.kill().await;
    let _h = start(&home, &cfg).await;
    let ok = tg
        .wait_for(
            |st| texts(st, ALICE) == ["answered after the restart"],
            WAIT,
        )
        .await;
    assert!(
        ok,
        "the progress message stays beside the answer: {:?}\n{}",
        tg.with_state(|st| texts(st, ALICE)),
        std::fs::read_to_string(home.join("serve.log")).unwrap_or_default()
    );
    no_rejections(&tg);
}

#[tokio::test]
async fn the_webhook_is_exempt_from_the_origin_rule_but_not_from_the_host_rule() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let cfg = config(
        &fake,
        &tg,
        "mode = \"webhook\"\nwebhook_secret_env = \"TG_SECRET\"\n",
    );
    let h = Hearth::start_with(
        &dir.path().join("home"),
        Some(&cfg),
        &[("TG_TOKEN", TOKEN), ("TG_SECRET", "s3cret-token")],
    )
    .await;
    let mut update = tg.private_text(&User::new(ALICE), "through a proxy");
    update["update_id"] = json!(777);
    let post = || {
        h.http
            .post(h.at("/channels/telegram/webhook"))
            .header("X-Telegram-Bot-Api-Secret-Token", "s3cret-token")
            .json(&update)
    };
    // A name hearth does not answer to is refused before the secret is looked at.
    let r = post().header("host", "evil.example").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "forbidden_host", "{v}");
    // The platform signs its requests; an Origin does not matter here.
    let r = post()
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    wait_text(&tg, ALICE, "echo: through a proxy").await;
    no_rejections(&tg);
}
