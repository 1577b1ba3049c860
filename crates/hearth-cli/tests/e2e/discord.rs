//! Discord end to end: the real binary on the fake Discord gateway and
//! REST API, answering with the fake provider. The fake checks every
//! request and frame hearth sends (`violations()`).

use std::time::Duration;

use hearth_testkit::fake_discord::{BOT_ID, FakeDiscord, SentMessage};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, fake_config, user_texts};

pub(crate) const TOKEN: &str = "MTAwMDAwMDAwMDAwMDAwMDAx.Gfake.discordTOKENdiscordTOKEN";
pub(crate) const ALICE: &str = "100000000000000001";
pub(crate) const BOB: &str = "100000000000000002";
pub(crate) const DM: &str = "300000000000000001";
pub(crate) const GUILD: &str = "400000000000000001";
pub(crate) const GENERAL: &str = "500000000000000001";
/// A guild whose answers carry the latency footer.
const TIMED_GUILD: &str = "400000000000000002";
const TIMED: &str = "500000000000000002";

pub(crate) struct Setup {
    _dir: tempfile::TempDir,
    pub(crate) fake: FakeOpenAi,
    pub(crate) dc: FakeDiscord,
    pub(crate) hearth: Hearth,
}

pub(crate) async fn setup() -> Setup {
    setup_with("").await
}

/// The channel's `hearth.toml` for the fakes, with `extra` (further tables)
/// at the end.
pub(crate) fn config(fake: &FakeOpenAi, dc: &FakeDiscord, extra: &str) -> String {
    // An empty gateway_url: hearth asks GET /gateway/bot for it.
    format!(
        "{}\n[channels.discord]\nenabled = true\ntoken_env = \"DC_TOKEN\"\napi_base = \"{}\"\n\
         gateway_url = \"\"\nallowed_users = [{ALICE}]\n\
         latency_footer_guilds = [{TIMED_GUILD}]\n{extra}",
        fake_config(&fake.base_url()),
        dc.api_base()
    )
}

async fn setup_with(extra: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let dc = FakeDiscord::start(TOKEN).await;
    let config = config(&fake, &dc, extra);
    let hearth = Hearth::start_with(
        &dir.path().join("home"),
        Some(&config),
        &[("DC_TOKEN", TOKEN)],
    )
    .await;
    dc.wait_ready(1).await;
    Setup {
        _dir: dir,
        fake,
        dc,
        hearth,
    }
}

pub(crate) fn no_violations(dc: &FakeDiscord) {
    assert!(
        dc.violations().is_empty(),
        "Discord would have refused: {:?}",
        dc.violations()
    );
}

fn contents(msgs: &[SentMessage]) -> Vec<&str> {
    msgs.iter().map(|m| m.content.as_str()).collect()
}

#[tokio::test]
async fn a_dm_is_answered_once_and_a_stranger_is_offered_pairing() {
    let s = setup().await;
    let commands = s.dc.wait_commands().await;
    let names: Vec<&str> = commands
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "ping",
            "ask",
            "model",
            "thinking",
            "mode",
            "runplan",
            "new",
            "usage",
            "permissions",
            "agent",
            "llm",
            "plugins",
            "help"
        ]
    );

    s.dc.message(DM, None, ALICE, false, "hello there");
    let msgs = s.dc.wait_messages(1).await;
    assert_eq!(contents(&msgs), ["echo: hello there"]);
    assert!(msgs[0].nonce.is_some(), "answers carry a nonce");

    // A stranger's DM: a pairing code, no model call.
    let bob_dm = "300000000000000002";
    s.dc.message(bob_dm, None, BOB, false, "let me in");
    let msgs = s.dc.wait_messages(2).await;
    assert_eq!(msgs[1].channel_id, bob_dm);
    assert!(msgs[1].content.contains("pairing code"), "{:?}", msgs[1]);
    assert_eq!(s.fake.request_count(), 1);
    let (_, pairings) = s.hearth.get("/v1/pairings").await;
    assert_eq!(
        pairings["pairings"][0]["user_key"],
        format!("discord:user:{BOB}")
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
async fn guild_mentions_are_answered_without_the_mention_and_the_rest_ignored() {
    let s = setup().await;
    s.dc.message(
        GENERAL,
        Some(GUILD),
        BOB,
        false,
        "just chatting, no mention",
    );
    s.dc.message(
        GENERAL,
        Some(GUILD),
        "100000000000000009",
        true,
        &format!("<@{BOT_ID}> I am a bot"),
    );
    s.dc.message(
        GENERAL,
        Some(GUILD),
        BOB,
        false,
        &format!("<@{BOT_ID}> what time is it?"),
    );
    let msgs = s.dc.wait_messages(1).await;
    // Events are handled in order: the two before were seen and ignored.
    assert_eq!(contents(&msgs), ["echo: what time is it?"]);
    // A guild that opted in gets the reply latency under the answer.
    s.dc.message(
        TIMED,
        Some(TIMED_GUILD),
        BOB,
        false,
        &format!("<@{BOT_ID}> hi"),
    );
    let msgs = s.dc.wait_messages(2).await;
    let (answer, footer) = msgs[1].content.split_once("\n-# answered in ").unwrap();
    assert_eq!(answer, "echo: hi");
    assert!(footer.ends_with(" s"), "{footer}");
    let requests = s.fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(user_texts(&requests[0]), ["what time is it?"]);
    no_violations(&s.dc);
}

#[tokio::test]
async fn a_long_answer_is_split_and_a_429_is_waited_out_with_each_part_sent_once() {
    let s = setup().await;
    let para = "word ".repeat(99) + "end.";
    let answer = [para.as_str(); 5].join("\n\n");
    assert!(answer.chars().count() > 2400);
    s.fake.push(Reply::text(answer.clone()));
    s.dc.rate_limit_messages(1, 0.3);
    s.dc.message(DM, None, ALICE, false, "tell me a lot");
    let msgs = s.dc.wait_messages(2).await;
    assert_eq!(msgs.len(), 2, "{:?}", contents(&msgs));
    for m in &msgs {
        assert!(m.content.chars().count() <= 2000);
    }
    let words = |t: &str| t.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        words(&format!("{} {}", msgs[0].content, msgs[1].content)),
        words(&answer)
    );
    assert_ne!(msgs[0].nonce, msgs[1].nonce);
    // One 429, then each part once.
    assert_eq!(s.dc.message_posts(), 3);
    no_violations(&s.dc);
}

#[tokio::test]
async fn a_dropped_gateway_is_resumed_and_no_event_is_lost() {
    let s = setup().await;
    s.dc.message(DM, None, ALICE, false, "first");
    s.dc.wait_messages(1).await;
    s.dc.drop_connection();
    // Sent while hearth is away: replayed on RESUME.
    s.dc.message(DM, None, ALICE, false, "second");
    let (session, seq) = s.dc.wait_resumed(1).await;
    assert_eq!(session, "session-1");
    assert!(seq >= 2, "READY and the first message were seen: {seq}");
    let msgs = s.dc.wait_messages(2).await;
    assert_eq!(contents(&msgs), ["echo: first", "echo: second"]);
    assert_eq!(s.dc.identifies(), 1, "resumed, not identified again");
    no_violations(&s.dc);
}

#[tokio::test]
async fn a_malformed_payload_is_logged_and_skipped() {
    let s = setup().await;
    s.dc.send_raw("{not json");
    s.dc.dispatch("MESSAGE_CREATE", json!({ "id": 5, "content": 7 }));
    s.dc.message(DM, None, ALICE, false, "still there?");
    let msgs = s.dc.wait_messages(1).await;
    assert_eq!(contents(&msgs), ["echo: still there?"]);
    let log = std::fs::read_to_string(s.hearth.home.join("serve.log")).unwrap();
    assert!(log.contains("skipping a malformed"), "{log}");
    assert!(!log.contains(TOKEN), "the token never reaches the log");
    no_violations(&s.dc);
}

/// The callback answering interaction `id`.
pub(crate) async fn callback_of(dc: &FakeDiscord, id: &str, n: usize) -> Value {
    let all = dc.wait_callbacks(n).await;
    all.into_iter()
        .find(|(i, _)| i == id)
        .map(|(_, body)| body)
        .unwrap_or_else(|| panic!("no callback for interaction {id}"))
}

#[tokio::test]
async fn slash_commands_answer_and_ask_is_deferred_then_finished() {
    let s = setup().await;
    let ping = s.dc.interaction(
        2,
        GENERAL,
        Some(GUILD),
        BOB,
        json!({ "name": "ping" }),
        None,
    );
    let body = callback_of(&s.dc, &ping, 1).await;
    assert_eq!(body["type"], 4);
    assert_eq!(body["data"]["content"], "Pong.");

    let data = json!({ "name": "ask", "options": [{ "name": "question", "type": 3, "value": "is it raining?" }] });
    let ask = s.dc.interaction(2, GENERAL, Some(GUILD), BOB, data, None);
    let body = callback_of(&s.dc, &ask, 2).await;
    assert_eq!(body["type"], 5, "deferred: {body}");
    let msgs = s.dc.wait_messages(1).await;
    assert_eq!(contents(&msgs), ["echo: is it raining?"]);
    assert_eq!(
        s.dc.original_edits().len(),
        1,
        "the deferred response is finished"
    );

    let stats = json!({ "name": "agent", "options": [{ "name": "stats", "type": 1 }] });
    let id = s.dc.interaction(2, GENERAL, Some(GUILD), BOB, stats, None);
    let body = callback_of(&s.dc, &id, 3).await;
    assert_eq!(body["data"]["flags"], 64);
    no_violations(&s.dc);
}

#[tokio::test]
async fn confirmation_buttons_count_only_for_the_asking_user() {
    let s = setup().await;
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
    let mention = |t: &str| format!("<@{BOT_ID}> {t}");
    s.dc.message(
        GENERAL,
        Some(GUILD),
        ALICE,
        false,
        &mention("remember I like tea"),
    );
    s.dc.wait_messages(1).await;
    s.dc.message(GENERAL, Some(GUILD), ALICE, false, &mention("forget it"));
    let msgs = s.dc.wait_messages(2).await;
    let prompt = msgs
        .iter()
        .find(|m| m.components.is_some())
        .unwrap_or_else(|| panic!("no prompt: {msgs:?}"));
    let buttons = &prompt.components.as_ref().unwrap()[0]["components"];
    let approve = buttons[0]["custom_id"].as_str().unwrap().to_owned();
    assert!(approve.starts_with("cf:a:") && approve.len() <= 100);
    let press = |user: &str| {
        let message = json!({ "id": prompt.id, "content": prompt.content });
        s.dc.interaction(
            3,
            GENERAL,
            Some(GUILD),
            user,
            json!({ "custom_id": approve, "component_type": 2 }),
            Some(message),
        )
    };
    let bob = press(BOB);
    let body = callback_of(&s.dc, &bob, 1).await;
    assert_eq!(body["type"], 4);
    assert_eq!(
        body["data"]["flags"], 64,
        "only Bob sees the refusal: {body}"
    );
    let thread = format!("discord:channel:{GENERAL}");
    let (_, runs) = s
        .hearth
        .get(&format!(
            "/v1/runs?thread_key={thread}&status=awaiting_confirmation"
        ))
        .await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");

    let alice = press(ALICE);
    let body = callback_of(&s.dc, &alice, 2).await;
    assert_eq!(body["type"], 7, "the prompt is updated: {body}");
    assert!(
        body["data"]["content"]
            .as_str()
            .unwrap()
            .contains("Approved by")
    );
    assert_eq!(body["data"]["components"], json!([]));
    let msgs = s.dc.wait_messages(3).await;
    assert_eq!(msgs.last().unwrap().content, "forgotten");
    no_violations(&s.dc);
}

#[tokio::test]
async fn a_slow_answer_shows_typing_and_a_progress_message_that_the_answer_replaces() {
    let s = setup().await;
    // Longer than the moment after which progress is shown.
    s.fake
        .push(Reply::text("done at last").with_delay(Duration::from_millis(2500)));
    s.dc.message(DM, None, ALICE, false, "take your time");
    let msgs = s.dc.wait_messages(2).await;
    assert!(msgs[0].content.starts_with('⏳'), "{:?}", contents(&msgs));
    assert_eq!(msgs[1].content, "done at last");
    let deleted = s.dc.wait_deleted(1).await;
    assert_eq!(deleted, [msgs[0].id.clone()]);
    assert_eq!(contents(&s.dc.messages()), ["done at last"]);
    assert!(s.dc.typing() >= 1);
    no_violations(&s.dc);
}

#[tokio::test]
async fn a_send_whose_answer_was_lost_is_retried_without_a_duplicate() {
    let s = setup().await;
    s.dc.lose_answers(1);
    s.dc.message(DM, None, ALICE, false, "once please");
    // The first send (created, answer lost) and the outbox's retry, which
    // Discord answers with the message the nonce already made.
    s.dc.wait_posts(2).await;
    assert_eq!(contents(&s.dc.messages()), ["echo: once please"]);
    no_violations(&s.dc);
}

#[tokio::test]
async fn a_forbidden_channel_fails_the_reply_at_once() {
    let s = setup().await;
    s.dc.forbid(GENERAL);
    s.dc.message(
        GENERAL,
        Some(GUILD),
        BOB,
        false,
        &format!("<@{BOT_ID}> hello"),
    );
    s.dc.wait_posts(1).await;
    // The sender records the failure right after the answer it got.
    let failed = async {
        loop {
            let (_, v) = s.hearth.get("/v1/outbox?status=failed").await;
            if let Some(item) = v["items"].as_array().and_then(|a| a.first()).cloned() {
                return item;
            }
            let (_, pending) = s.hearth.get("/v1/outbox?status=pending").await;
            assert!(
                pending["items"]
                    .as_array()
                    .is_some_and(|a| a.iter().all(|i| i["attempts"] == 0)),
                "retried instead of failed: {pending}"
            );
            tokio::task::yield_now().await;
        }
    };
    let item = tokio::time::timeout(Duration::from_secs(20), failed)
        .await
        .expect("the reply was never marked failed");
    assert_eq!(item["target"], GENERAL);
    assert!(
        item["last_error"].as_str().unwrap().contains("403"),
        "{item}"
    );
    assert_eq!(s.dc.message_posts(), 1, "not retried");
    assert!(s.dc.messages().is_empty());
    no_violations(&s.dc);
}

/// Sends command `name` with `options` as `user` in the general channel;
/// the callback's body.
pub(crate) async fn run_command(
    s: &Setup,
    user: &str,
    name: &str,
    options: Value,
    n: usize,
) -> Value {
    let data = json!({ "name": name, "options": options });
    let id = s.dc.interaction(2, GENERAL, Some(GUILD), user, data, None);
    callback_of(&s.dc, &id, n).await
}

pub(crate) fn text(body: &Value) -> &str {
    body["data"]["content"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn changing_the_channel_and_permissions_need_a_server_admin() {
    let s = setup().await;
    let thread = format!("discord:channel:{GENERAL}");
    let opt = |name: &str, value: &str| json!([{ "name": name, "type": 3, "value": value }]);
    // A plain member changes nothing in the shared channel: told privately.
    let b = run_command(&s, BOB, "model", opt("name", "fake/other-model"), 1).await;
    assert!(text(&b).contains("llm.configure"), "{b}");
    assert_eq!(b["data"]["flags"], 64);
    let b = run_command(&s, BOB, "thinking", opt("level", "high"), 2).await;
    assert!(text(&b).contains("llm.configure"), "{b}");
    let b = run_command(&s, BOB, "new", json!([]), 3).await;
    assert!(text(&b).contains("llm.configure"), "{b}");
    let (_, t) = s.hearth.get(&format!("/v1/threads/{thread}/runtime")).await;
    assert_eq!(t["model"], "fake/fake-model", "{t}");
    assert_ne!(t["thinking"], "high", "{t}");
    let (_, audit) = s.hearth.get("/v1/audit?limit=20").await;
    let refused = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["action"] == "thread.configure"
                && e["outcome"] == "denied"
                && e["actor"] == format!("discord:user:{BOB}")
                && e["target"] == thread.as_str()
        })
        .count();
    assert_eq!(refused, 3, "{audit}");
    let b = run_command(&s, BOB, "usage", json!([]), 4).await;
    assert!(text(&b).contains("model calls"), "{b}");
    let cancel = json!([{ "name": "cancel", "type": 1 }]);
    let b = run_command(&s, BOB, "agent", cancel, 5).await;
    assert_eq!(text(&b), "Nothing to cancel.");

    let grant = json!([{ "name": "grant", "type": 1, "options": [
        { "name": "capability", "type": 3, "value": "web.fetch" },
        { "name": "role", "type": 8, "value": "600000000000000001" },
    ] }]);
    let b = run_command(&s, BOB, "permissions", grant.clone(), 6).await;
    assert!(text(&b).contains("Only the server owner"), "{b}");
    assert_eq!(b["data"]["flags"], 64);
    // A server Administrator changes the channel and grants.
    s.dc.set_member_permissions("8");
    let b = run_command(&s, BOB, "model", opt("name", "fake/other-model"), 7).await;
    assert_eq!(text(&b), "Model: fake/other-model");
    let b = run_command(&s, BOB, "thinking", opt("level", "high"), 8).await;
    assert_eq!(text(&b), "Thinking: high");
    let (_, t) = s.hearth.get(&format!("/v1/threads/{thread}/runtime")).await;
    assert_eq!(t["model"], "fake/other-model", "{t}");
    assert_eq!(t["thinking"], "high", "{t}");
    let b = run_command(&s, BOB, "new", json!([]), 9).await;
    assert_eq!(text(&b), "Started a new conversation.");
    let b = run_command(&s, BOB, "permissions", grant, 10).await;
    assert!(text(&b).starts_with("Granted web.fetch"), "{b}");
    let scope = format!("discord:guild:{GUILD}");
    let (_, p) = s
        .hearth
        .get(&format!("/v1/permissions?scope={scope}"))
        .await;
    let grants = p["grants"].as_array().unwrap();
    assert!(
        grants
            .iter()
            .any(|g| g["subject"] == "role:600000000000000001" && g["capability"] == "web.fetch"),
        "{p}"
    );
    assert_eq!(s.fake.request_count(), 0, "commands are not model calls");
    no_violations(&s.dc);
}

/// `/model` without a name shows the models as buttons, to the one who
/// asked only; a press sets the conversation's model and shows the picker
/// as it stands. `/help` lists the commands.
#[tokio::test]
async fn the_model_picker_is_buttons_and_a_press_sets_the_model() {
    let s = setup().await;
    let id =
        s.dc.interaction(2, DM, None, ALICE, json!({ "name": "model" }), None);
    let picker = callback_of(&s.dc, &id, 1).await;
    assert_eq!(picker["type"], 4, "{picker}");
    assert_eq!(picker["data"]["flags"], 64, "{picker}");
    assert_eq!(text(&picker), "Choose the model:\nNow: fake/fake-model");
    let button = picker["data"]["components"][0]["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["label"] == "fake/other-model")
        .cloned()
        .unwrap_or_else(|| panic!("no other-model button: {picker}"));
    let data = json!({ "custom_id": button["custom_id"], "component_type": 2 });
    let shown = json!({ "id": "700000000000000001", "channel_id": DM, "content": text(&picker) });
    let press = s.dc.interaction(3, DM, None, ALICE, data, Some(shown));
    let updated = callback_of(&s.dc, &press, 2).await;
    assert_eq!(
        updated["type"], 7,
        "the picker is updated in place: {updated}"
    );
    assert_eq!(text(&updated), "Choose the model:\nNow: fake/other-model");
    let (_, t) = s
        .hearth
        .get(&format!("/v1/threads/discord:channel:{DM}/runtime"))
        .await;
    assert_eq!(t["model"], "fake/other-model", "{t}");
    let id =
        s.dc.interaction(2, DM, None, ALICE, json!({ "name": "help" }), None);
    let help = callback_of(&s.dc, &id, 3).await;
    assert!(
        text(&help).contains("/agent cancel: Stop the answer"),
        "{help}"
    );
    assert_eq!(help["data"]["flags"], 64);
    assert_eq!(s.fake.request_count(), 0, "commands are not model calls");
    no_violations(&s.dc);
}

/// A role in [`GUILD`].
pub(crate) const ROLE: &str = "600000000000000009";
const CAROL: &str = "100000000000000003";

/// `/permissions grant` of `capability` to [`ROLE`] by an Administrator;
/// the callback is the `n`th.
pub(crate) async fn grant_to_role(s: &Setup, capability: &str, n: usize) {
    let grant = json!([{ "name": "grant", "type": 1, "options": [
        { "name": "capability", "type": 3, "value": capability },
        { "name": "role", "type": 8, "value": ROLE },
    ] }]);
    s.dc.set_member_permissions("8");
    let b = run_command(s, CAROL, "permissions", grant, n).await;
    assert!(text(&b).starts_with("Granted"), "{b}");
    s.dc.set_member_permissions("0");
}

#[tokio::test]
async fn a_role_grant_in_a_guild_offers_the_tool_to_members_with_the_role_only() {
    let s = setup_with("\n[permissions]\ndefault_preset = \"none\"\n").await;
    grant_to_role(&s, "memory.read", 1).await;
    s.dc.set_member_roles(ALICE, &["600000000000000001", ROLE]);
    s.dc.set_member_roles(BOB, &["600000000000000001"]);
    let mention = |t: &str| format!("<@{BOT_ID}> {t}");
    s.dc.message(
        GENERAL,
        Some(GUILD),
        ALICE,
        false,
        &mention("with the role"),
    );
    s.dc.wait_messages(1).await;
    s.dc.message(GENERAL, Some(GUILD), BOB, false, &mention("without it"));
    let msgs = s.dc.wait_messages(2).await;
    assert_eq!(contents(&msgs), ["echo: with the role", "echo: without it"]);
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
    no_violations(&s.dc);
}

#[tokio::test]
async fn a_server_admin_answers_another_members_confirmation_and_a_plain_member_cannot() {
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
    let buttons = &prompt.components.as_ref().unwrap()[0]["components"];
    let approve = buttons[0]["custom_id"].as_str().unwrap().to_owned();
    let press = |user: &str| {
        let message = json!({ "id": prompt.id, "content": prompt.content });
        s.dc.interaction(
            3,
            GENERAL,
            Some(GUILD),
            user,
            json!({ "custom_id": approve, "component_type": 2 }),
            Some(message),
        )
    };
    let bob = press(BOB);
    let body = callback_of(&s.dc, &bob, 1).await;
    assert_eq!(body["type"], 4);
    assert_eq!(body["data"]["flags"], 64, "only Bob sees it: {body}");
    assert!(text(&body).contains("server admin"), "{body}");

    s.dc.set_member_permissions("8");
    let carol = press(CAROL);
    let body = callback_of(&s.dc, &carol, 2).await;
    assert_eq!(body["type"], 7, "the prompt is updated: {body}");
    assert!(text(&body).contains("Approved by"), "{body}");
    let msgs = s.dc.wait_messages(2).await;
    assert_eq!(msgs.last().unwrap().content, "forgotten");
    let (_, audit) = s.hearth.get("/v1/audit?limit=20").await;
    let scope = format!("discord:guild:{GUILD}");
    assert!(
        audit["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "confirmation.resolve"
                && e["actor"] == format!("discord:user:{CAROL}")
                && e["outcome"] == "approved"
                && e["scope"] == scope),
        "{audit}"
    );
    no_violations(&s.dc);
}

#[tokio::test]
async fn a_guild_run_recovered_after_sigkill_is_still_checked_in_its_guild() {
    let s = setup_with("\n[permissions]\ndefault_preset = \"none\"\n").await;
    grant_to_role(&s, "memory.read", 1).await;
    s.dc.set_member_roles(ALICE, &[ROLE]);
    s.fake
        .push(Reply::text("never delivered").with_delay(Duration::from_secs(120)));
    s.fake.push(Reply::text("after the restart"));
    s.dc.message(
        GENERAL,
        Some(GUILD),
        ALICE,
        false,
        &format!("<@{BOT_ID}> what do you remember?"),
    );
    s.fake.wait_for_requests(1).await;
    let Setup {
        _dir: dir,
        fake,
        dc,
        hearth,
    } = s;
    hearth.kill().await;

    // Nothing tells the new process which guild the channel is in but the
    // stored run.
    let hearth = Hearth::start_with(
        &dir.path().join("home"),
        Some(&config(
            &fake,
            &dc,
            "\n[permissions]\ndefault_preset = \"none\"\n",
        )),
        &[("DC_TOKEN", TOKEN)],
    )
    .await;
    let msgs = dc.wait_messages(1).await;
    assert_eq!(contents(&msgs), ["after the restart"]);
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2, "the run was asked again once");
    for req in &reqs {
        assert!(
            crate::harness::offered_tools(req)
                .iter()
                .any(|t| t == "memory_search"),
            "{:?}",
            crate::harness::offered_tools(req)
        );
    }
    no_violations(&dc);
    drop(hearth);
}

#[tokio::test]
async fn agent_stats_reports_the_runs_of_its_guild_only() {
    let s = setup().await;
    const OTHER_GUILD: &str = "400000000000000003";
    const OTHER: &str = "500000000000000003";
    let mention = |t: &str| format!("<@{BOT_ID}> {t}");
    s.dc.message(GENERAL, Some(GUILD), ALICE, false, &mention("one"));
    s.dc.wait_messages(1).await;
    s.dc.message(GENERAL, Some(GUILD), BOB, false, &mention("two"));
    s.dc.wait_messages(2).await;
    s.dc.message(OTHER, Some(OTHER_GUILD), BOB, false, &mention("three"));
    s.dc.wait_messages(3).await;
    // The answer is posted once the run's end is stored.
    let stats = json!({ "name": "agent", "options": [{ "name": "stats", "type": 1 }] });
    // A member who is not an admin of the guild sees no guild-wide health.
    let refused =
        s.dc.interaction(2, GENERAL, Some(GUILD), CAROL, stats.clone(), None);
    let body = callback_of(&s.dc, &refused, 1).await;
    assert_eq!(body["data"]["flags"], 64, "{body}");
    assert!(!text(&body).contains("runs"), "{body}");
    assert!(text(&body).contains("server admins"), "{body}");
    s.dc.set_member_permissions("8");
    let here =
        s.dc.interaction(2, GENERAL, Some(GUILD), CAROL, stats.clone(), None);
    let body = callback_of(&s.dc, &here, 2).await;
    assert_eq!(body["data"]["flags"], 64, "{body}");
    let lines: Vec<&str> = text(&body).lines().collect();
    assert_eq!(lines.len(), 4, "{body}");
    for line in &lines[1..] {
        assert!(
            line.contains(": 2 runs (2 succeeded); latency p50 "),
            "{line}"
        );
    }
    let there =
        s.dc.interaction(2, OTHER, Some(OTHER_GUILD), CAROL, stats.clone(), None);
    let body = callback_of(&s.dc, &there, 3).await;
    assert!(
        text(&body).contains("Last hour: 1 run (1 succeeded)"),
        "{body}"
    );
    let dm = s.dc.interaction(2, DM, None, ALICE, stats, None);
    let body = callback_of(&s.dc, &dm, 4).await;
    assert_eq!(text(&body), "Use this command in a server.");
    no_violations(&s.dc);
}
