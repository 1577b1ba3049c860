//! Slack end to end: the real binary on the fake Slack (Web API and Socket
//! Mode, or the Events API over HTTP), answering with the fake provider.
//! Every request hearth sends is checked by the fake (`violations()`).

use std::time::{Duration, Instant};

use hearth_testkit::fake_slack::{APP_TOKEN, BOT_TOKEN, BOT_USER, FakeSlack, event_callback};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, fake_config, user_texts};

pub(crate) const ALICE: &str = "UALICE";
pub(crate) const BOB: &str = "UBOB";
const DM: &str = "DALICE";
pub(crate) const WAIT: Duration = Duration::from_secs(30);

pub(crate) struct Setup {
    _dir: tempfile::TempDir,
    pub(crate) fake: FakeOpenAi,
    pub(crate) slack: FakeSlack,
    pub(crate) hearth: Hearth,
}

pub(crate) async fn setup(extra: &str, env: &[(&str, &str)]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await.unwrap();
    let config = format!(
        "{}\n[channels.slack]\nenabled = true\napi_base = \"{}\"\nallowed_users = [\"{ALICE}\"]\n{extra}",
        fake_config(&fake.base_url()),
        slack.api_base()
    );
    let mut vars = vec![
        ("SLACK_BOT_TOKEN", BOT_TOKEN),
        ("SLACK_APP_TOKEN", APP_TOKEN),
    ];
    vars.extend_from_slice(env);
    let hearth = Hearth::start_with(&dir.path().join("home"), Some(&config), &vars).await;
    Setup {
        _dir: dir,
        fake,
        slack,
        hearth,
    }
}

/// A Socket Mode setup, connected.
async fn socket() -> Setup {
    let s = setup("", &[]).await;
    s.slack.wait_connected(1, WAIT).await;
    s
}

fn dm(user: &str, ts: &str, text: &str) -> Value {
    json!({ "type": "message", "channel": DM, "channel_type": "im", "user": user, "text": text, "ts": ts, "event_ts": ts })
}

pub(crate) fn mention(
    user: &str,
    channel: &str,
    ts: &str,
    thread_ts: Option<&str>,
    text: &str,
) -> Value {
    let mut e = json!({ "type": "app_mention", "channel": channel, "user": user, "text": format!("<@{BOT_USER}> {text}"), "ts": ts, "event_ts": ts });
    if let Some(t) = thread_ts {
        e["thread_ts"] = json!(t);
    }
    e
}

/// The bot's messages (not deleted) whose text contains `want`.
fn posted_with(slack: &FakeSlack, want: &str) -> Vec<hearth_testkit::fake_slack::Posted> {
    slack
        .messages()
        .into_iter()
        .filter(|m| !m.deleted && m.text.contains(want))
        .collect()
}

pub(crate) fn no_violations(slack: &FakeSlack) {
    assert_eq!(slack.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_dm_is_answered_once_even_when_redelivered_and_bot_messages_are_ignored() {
    let s = socket().await;
    let env = s.slack.push_event(
        "Ev1",
        dm(
            ALICE,
            "1700000000.000100",
            &format!("<@{BOT_USER}> is 1 &lt; 2 &amp;&amp; <#C9|general> ok?"),
        ),
    );
    s.slack.wait_acked(&env, WAIT).await;
    let answer = s.slack.wait_posted("echo: is 1", WAIT).await;
    assert_eq!(answer.channel, DM);
    assert_eq!(
        answer.thread_ts, None,
        "DMs are answered in the conversation"
    );
    // Decoded for the model, escaped again on the way out.
    assert_eq!(
        user_texts(&s.fake.requests()[0]),
        vec!["is 1 < 2 && #general ok?"]
    );
    assert_eq!(answer.text, "echo: is 1 &lt; 2 &amp;&amp; #general ok?");

    // The same event again (Slack's retry), and a bot's message: no run.
    let again = s.slack.push_event(
        "Ev1",
        dm(
            ALICE,
            "1700000000.000100",
            &format!("<@{BOT_USER}> is 1 &lt; 2 &amp;&amp; <#C9|general> ok?"),
        ),
    );
    let mut bot = dm("UOTHERBOT", "1700000000.000200", "I am a bot");
    bot["bot_id"] = json!("BOTHER");
    let bot_env = s.slack.push_event("Ev2", bot);
    let mut edit = dm(ALICE, "1700000000.000300", "edited");
    edit["subtype"] = json!("message_changed");
    let edit_env = s.slack.push_event("Ev3", edit);
    for e in [&again, &bot_env, &edit_env] {
        s.slack.wait_acked(e, WAIT).await;
    }
    // A later message is answered; by then any second run would have shown.
    let next = s
        .slack
        .push_event("Ev4", dm(ALICE, "1700000000.000400", "second"));
    s.slack.wait_acked(&next, WAIT).await;
    s.slack.wait_posted("echo: second", WAIT).await;
    assert_eq!(s.fake.request_count(), 2, "one run per event");
    assert_eq!(
        posted_with(&s.slack, "echo: is 1").len(),
        1,
        "answered once"
    );
    no_violations(&s.slack);
}

#[tokio::test]
async fn a_mention_is_answered_in_its_thread_and_replies_continue_without_a_mention() {
    let s = socket().await;
    let root = "1700000000.000100";
    s.slack
        .push_event("Ev10", mention(BOB, "CGENERAL", root, None, "what is up?"));
    let first = s.slack.wait_posted("echo: what is up?", WAIT).await;
    assert_eq!(
        (first.channel.as_str(), first.thread_ts.as_deref()),
        ("CGENERAL", Some(root))
    );

    // A reply in that thread, without a mention, continues the conversation;
    // a message elsewhere in the channel is not for hearth.
    let unrelated = s.slack.push_event(
        "Ev11",
        json!({ "type": "message", "channel": "CGENERAL", "channel_type": "channel", "user": BOB, "text": "lunch?", "ts": "1700000000.000150" }),
    );
    s.slack.wait_acked(&unrelated, WAIT).await;
    s.slack.push_event(
        "Ev12",
        json!({ "type": "message", "channel": "CGENERAL", "channel_type": "channel", "user": BOB, "text": "and then?", "ts": "1700000000.000200", "thread_ts": root }),
    );
    let second = s.slack.wait_posted("echo: and then?", WAIT).await;
    assert_eq!(second.thread_ts.as_deref(), Some(root));
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2, "the unrelated message made no run");
    assert_eq!(
        user_texts(&reqs[1]),
        vec!["what is up?", "and then?"],
        "one conversation"
    );

    // In a thread hearth never answered, a reply without a mention is ignored.
    let other = s.slack.push_event(
        "Ev13",
        json!({ "type": "message", "channel": "CGENERAL", "channel_type": "channel", "user": BOB, "text": "hm", "ts": "1700000000.000300", "thread_ts": "1700000000.000150" }),
    );
    s.slack.wait_acked(&other, WAIT).await;
    s.slack
        .push_event("Ev14", dm(ALICE, "1700000000.000400", "ping"));
    s.slack.wait_posted("echo: ping", WAIT).await;
    assert_eq!(s.fake.request_count(), 3);
    no_violations(&s.slack);
}

#[tokio::test]
async fn a_rate_limited_answer_waits_for_retry_after_and_arrives_once() {
    let s = socket().await;
    s.slack.rate_limit("chat.postMessage", 2);
    let t0 = Instant::now();
    s.slack
        .push_event("Ev20", dm(ALICE, "1700000000.000100", "slowly"));
    let calls = s.slack.wait_calls("chat.postMessage", 2, WAIT).await;
    assert!(
        t0.elapsed() >= Duration::from_secs(2),
        "Retry-After honoured: {:?}",
        t0.elapsed()
    );
    assert_eq!(calls[0], calls[1], "the same message, sent again");
    s.slack.wait_posted("echo: slowly", WAIT).await;
    assert_eq!(posted_with(&s.slack, "echo: slowly").len(), 1);
    no_violations(&s.slack);
}

#[tokio::test]
async fn malformed_envelopes_are_logged_and_skipped_and_reconnects_lose_nothing() {
    let s = socket().await;
    s.slack.send_raw("{not json");
    let bad = s.slack.push_envelope(
        "events_api",
        json!({ "type": "event_callback", "event": 42 }),
    );
    s.slack.wait_acked(&bad, WAIT).await;

    // Slack asks for a new connection; then the connection drops and an
    // event arrives meanwhile: it is delivered on the next connection.
    s.slack.disconnect();
    s.slack.wait_connected(2, WAIT).await;
    s.slack.drop_connection();
    let env = s
        .slack
        .push_event("Ev30", dm(ALICE, "1700000000.000100", "still there?"));
    s.slack.wait_connected(3, WAIT).await;
    s.slack.wait_acked(&env, WAIT).await;
    s.slack.wait_posted("echo: still there?", WAIT).await;
    assert_eq!(s.fake.request_count(), 1);
    let log = std::fs::read_to_string(s.hearth.home.join("serve.log")).unwrap();
    assert!(log.contains("malformed"), "{log}");
    no_violations(&s.slack);
}

#[tokio::test]
async fn strangers_in_dms_are_offered_pairing_then_answered_once_approved() {
    let s = socket().await;
    let env = s
        .slack
        .push_event("Ev40", dm(BOB, "1700000000.000100", "hi"));
    s.slack.wait_acked(&env, WAIT).await;
    let notice = s.slack.wait_posted("pairing code", WAIT).await;
    assert_eq!(notice.channel, DM);
    assert_eq!(s.fake.request_count(), 0);

    // The owner approves; Bob is told, and answered from then on.
    let (_, pairings) = s.hearth.get("/v1/pairings").await;
    let p = &pairings["pairings"][0];
    assert_eq!(p["user_key"], format!("slack:user:{BOB}"), "{pairings}");
    let code = p["code"].as_str().unwrap();
    assert!(notice.text.contains(code));
    let r = s
        .hearth
        .http
        .post(s.hearth.at(&format!("/v1/pairings/{code}/approve")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    s.slack.wait_posted("You are approved", WAIT).await;
    s.slack
        .push_event("Ev41", dm(BOB, "1700000000.000200", "now?"));
    s.slack.wait_posted("echo: now?", WAIT).await;

    let (_, ch) = s.hearth.get("/v1/channels").await;
    let slack = ch["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "slack")
        .unwrap();
    assert_eq!(slack["state"], "connected", "{ch}");
    let (_, ready) = s.hearth.get("/readyz").await;
    assert_eq!(ready["checks"]["channel:slack"], "ok", "{ready}");
    no_violations(&s.slack);
}

#[tokio::test]
async fn the_hearth_command_answers_through_the_response_url() {
    let s = socket().await;
    let cmd = |text: &str, id: &str| {
        json!({ "command": "/hearth", "text": text, "user_id": ALICE, "channel_id": DM, "team_id": "TFAKE",
                "response_url": s.slack.response_url(id), "trigger_id": format!("trig-{id}") })
    };
    s.slack.push_envelope("slash_commands", cmd("help", "1"));
    s.slack.push_envelope("slash_commands", cmd("model", "2"));
    let replies = s.slack.wait_calls("response_url", 2, WAIT).await;
    let by_id = |id: &str| {
        replies
            .iter()
            .find(|r| r["response_url_id"] == id)
            .cloned()
            .unwrap()
    };
    assert!(by_id("1")["text"].as_str().unwrap().contains("/hearth new"));
    let picker = by_id("2");
    let other = picker["blocks"][1]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["value"].as_str().unwrap().ends_with("other-model"))
        .cloned()
        .unwrap_or_else(|| panic!("no other-model button: {picker}"));

    // Pressing a model button sets it for the DM's conversation.
    s.slack.push_envelope(
        "interactive",
        json!({ "type": "block_actions", "user": { "id": ALICE }, "channel": { "id": DM },
                "actions": [{ "action_id": other["action_id"], "value": other["value"], "type": "button" }],
                "response_url": s.slack.response_url("3"), "trigger_id": "trig-3" }),
    );
    let replies = s.slack.wait_calls("response_url", 3, WAIT).await;
    let now = replies[2]["text"].as_str().unwrap();
    assert!(
        now.contains("Now: ") && now.ends_with("other-model"),
        "{now}"
    );
    s.slack
        .push_event("Ev50", dm(ALICE, "1700000000.000100", "which model?"));
    s.slack.wait_posted("echo: which model?", WAIT).await;
    assert_eq!(s.fake.requests()[0]["model"], "other-model");
    assert_eq!(s.fake.request_count(), 1, "commands are not model calls");
    no_violations(&s.slack);
}

#[tokio::test]
async fn confirmation_buttons_count_only_for_the_asking_user() {
    let s = socket().await;
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
    let root = "1700000000.000100";
    s.slack.push_event(
        "Ev60",
        mention(ALICE, "CTEAM", root, None, "remember I like tea"),
    );
    s.slack.wait_posted("saved", WAIT).await;
    s.slack.push_event(
        "Ev61",
        mention(ALICE, "CTEAM", "1700000000.000200", Some(root), "forget it"),
    );
    let prompt = s.slack.wait_posted("Approve this action?", WAIT).await;
    assert_eq!(prompt.thread_ts.as_deref(), Some(root));
    let approve = prompt.blocks[1]["elements"][0].clone();
    assert_eq!(approve["action_id"], "hearth_confirm_approve");
    let press = |user: &str, trigger: &str| {
        json!({ "type": "block_actions", "user": { "id": user }, "channel": { "id": "CTEAM" },
                "message": { "ts": prompt.ts, "text": prompt.text, "thread_ts": root },
                "actions": [{ "action_id": "hearth_confirm_approve", "value": approve["value"], "type": "button" }],
                "response_url": s.slack.response_url(trigger), "trigger_id": trigger })
    };
    // Bob is told it is not his to answer; the run keeps waiting.
    let bob = s.slack.push_envelope("interactive", press(BOB, "t-bob"));
    s.slack.wait_acked(&bob, WAIT).await;
    let notices = s.slack.wait_calls("chat.postEphemeral", 1, WAIT).await;
    assert_eq!(notices[0]["user"], BOB);
    assert_eq!(notices[0]["thread_ts"], root);
    let (_, runs) = s
        .hearth
        .get(&format!(
            "/v1/runs?thread_key=slack:thread:CTEAM:{root}&status=awaiting_confirmation"
        ))
        .await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    // Alice's press approves it.
    s.slack
        .push_envelope("interactive", press(ALICE, "t-alice"));
    s.slack.wait_posted("forgotten", WAIT).await;
    s.slack.wait_posted("Approved", WAIT).await;
    let settled = posted_with(&s.slack, "Approved").remove(0);
    assert_eq!(
        settled.ts, prompt.ts,
        "the prompt itself says how it was answered"
    );
    assert_eq!(
        settled.blocks.as_array().unwrap().len(),
        1,
        "and has no buttons left"
    );
    no_violations(&s.slack);
}

#[tokio::test]
async fn a_resolve_any_grant_in_the_team_lets_another_member_answer() {
    let s = socket().await;
    let r = s
        .hearth
        .http
        .post(s.hearth.at("/v1/permissions/grants"))
        .json(&json!({ "subject": format!("user:slack:user:{BOB}"),
                       "capability": "confirmations.resolve_any", "scope": "slack:team:TFAKE" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    s.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
    s.fake.push(Reply::text("forgotten"));
    let root = "1700000000.000300";
    s.slack
        .push_event("Ev62", mention(ALICE, "CTEAM", root, None, "forget it"));
    let prompt = s.slack.wait_posted("Approve this action?", WAIT).await;
    let approve = prompt.blocks[1]["elements"][0].clone();
    s.slack.push_envelope(
        "interactive",
        json!({ "type": "block_actions", "user": { "id": BOB, "team_id": "TFAKE" },
                "team": { "id": "TFAKE" }, "channel": { "id": "CTEAM" },
                "message": { "ts": prompt.ts, "text": prompt.text, "thread_ts": root },
                "actions": [{ "action_id": "hearth_confirm_approve", "value": approve["value"], "type": "button" }],
                "response_url": s.slack.response_url("t-bob"), "trigger_id": "t-bob" }),
    );
    s.slack.wait_posted("forgotten", WAIT).await;
    assert!(
        s.slack.calls("chat.postEphemeral").is_empty(),
        "Bob holds the grant in this workspace and was refused"
    );
    no_violations(&s.slack);
}

/// POSTs `body` to hearth's events route signed with `secret` at `ts`.
async fn post_signed(
    h: &Hearth,
    secret: &str,
    ts: i64,
    body: &str,
    content_type: &str,
) -> (u16, String) {
    let sig = hearth_channels::slack::sign(secret, &ts.to_string(), body.as_bytes());
    let r = h
        .http
        .post(h.at(hearth_channels::slack::EVENTS_PATH))
        .header("content-type", content_type)
        .header("x-slack-request-timestamp", ts.to_string())
        .header("x-slack-signature", sig)
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn http_mode_checks_signatures_and_answers_events() {
    let secret = "8f742231b10e8888abcd99yyyzzz85a5";
    let s = setup(
        "mode = \"http\"\nsigning_secret_env = \"SLACK_SIGNING_SECRET\"\n",
        &[("SLACK_SIGNING_SECRET", secret)],
    )
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let json_type = "application/json";
    let challenge = json!({ "token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification" }).to_string();
    let (status, body) = post_signed(&s.hearth, secret, now, &challenge, json_type).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );
    assert_eq!(
        post_signed(&s.hearth, "wrong secret", now, &challenge, json_type)
            .await
            .0,
        401
    );
    assert_eq!(
        post_signed(&s.hearth, secret, now - 301, &challenge, json_type)
            .await
            .0,
        401,
        "stale"
    );
    let unsigned = s
        .hearth
        .http
        .post(s.hearth.at("/channels/slack/events"))
        .body(challenge.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status().as_u16(), 401);

    let event = event_callback("EvH1", dm(ALICE, "1700000000.000100", "over http")).to_string();
    assert_eq!(
        post_signed(&s.hearth, secret, now, &event, json_type)
            .await
            .0,
        200
    );
    // Slack's retry of the same event: taken, no second run.
    assert_eq!(
        post_signed(&s.hearth, secret, now, &event, json_type)
            .await
            .0,
        200
    );
    s.slack.wait_posted("echo: over http", WAIT).await;
    let later = event_callback("EvH2", dm(ALICE, "1700000000.000200", "again")).to_string();
    assert_eq!(
        post_signed(&s.hearth, secret, now, &later, json_type)
            .await
            .0,
        200
    );
    s.slack.wait_posted("echo: again", WAIT).await;
    assert_eq!(s.fake.request_count(), 2);
    assert_eq!(s.slack.connections(), 0, "no Socket Mode in HTTP mode");
    no_violations(&s.slack);
}

#[tokio::test]
async fn a_slow_answer_shows_a_throttled_progress_message_that_the_answer_replaces() {
    let s = socket().await;
    let answer = "word ".repeat(100);
    s.fake.push(
        Reply::text(answer.clone())
            .in_pieces(100)
            .with_chunk_delay(Duration::from_millis(30)),
    );
    let t0 = Instant::now();
    s.slack
        .push_event("Ev70", dm(ALICE, "1700000000.000100", "take your time"));
    s.slack.wait_posted("word word", WAIT).await;
    let secs = t0.elapsed().as_secs_f64();
    // The progress message is removed once the answer is out.
    s.slack.wait_calls("chat.delete", 1, WAIT).await;
    let visible: Vec<String> = s
        .slack
        .messages()
        .into_iter()
        .filter(|m| !m.deleted)
        .map(|m| m.text.trim().to_owned())
        .collect();
    assert_eq!(visible, vec![answer.trim().to_owned()], "the answer, once");
    let posts = s.slack.calls("chat.postMessage");
    assert!(
        posts[0]["text"].as_str().unwrap().starts_with('⏳'),
        "a progress message first: {posts:?}"
    );
    let edits = s.slack.calls("chat.update").len();
    assert!(
        edits as f64 <= secs + 1.0,
        "{edits} edits in {secs:.1} s: at most one a second"
    );
    no_violations(&s.slack);
}

#[tokio::test]
async fn a_grant_in_the_team_scope_applies_to_slack_runs_and_not_to_the_api() {
    let s = setup("\n[permissions]\ndefault_preset = \"none\"\n", &[]).await;
    s.slack.wait_connected(1, WAIT).await;
    let r = s
        .hearth
        .http
        .post(s.hearth.at("/v1/permissions/grants"))
        .json(
            &json!({ "subject": format!("user:slack:user:{ALICE}"), "capability": "memory.read",
                       "scope": "slack:team:TFAKE" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    s.slack
        .push_event("Ev80", dm(ALICE, "1700000000.000100", "in slack"));
    s.slack.wait_posted("echo: in slack", WAIT).await;
    // The same user over the HTTP API: its thread is in the global scope.
    s.hearth
        .post(json!({ "text": "over http", "thread_key": "api:scoped", "user_key": format!("slack:user:{ALICE}"), "wait": true }))
        .await;
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        crate::harness::offered_tools(&reqs[0])
            .iter()
            .any(|t| t == "memory_search"),
        "offered in Slack: {:?}",
        crate::harness::offered_tools(&reqs[0])
    );
    assert!(
        !crate::harness::offered_tools(&reqs[1])
            .iter()
            .any(|t| t == "memory_search"),
        "not offered over the API: {:?}",
        crate::harness::offered_tools(&reqs[1])
    );
    no_violations(&s.slack);
}

#[tokio::test]
async fn a_429_blocks_chat_post_message_in_every_conversation_until_retry_after() {
    let s = socket().await;
    let block = Duration::from_secs(3);
    s.slack.rate_limit("chat.postMessage", 3);
    s.slack
        .push_event("Ev90", dm(ALICE, "1700000000.000100", "first"));
    let limited = s.slack.wait_calls("chat.postMessage", 1, WAIT).await;
    let t429 = Instant::now();
    assert_eq!(limited[0]["channel"], DM);
    // Another conversation asks while the method is blocked: its answer
    // waits for the block too.
    let root = "1700000000.000200";
    s.slack
        .push_event("Ev91", mention(BOB, "CGENERAL", root, None, "second"));
    let in_thread = s.slack.wait_posted("echo: second", WAIT).await;
    s.slack.wait_posted("echo: first", WAIT).await;
    let posts = s.slack.calls_at("chat.postMessage");
    assert_eq!(
        posts.len(),
        3,
        "the limited one again, and the other: {posts:?}"
    );
    for (at, body) in &posts[1..] {
        // The fake saw the 429'd call just before the test did.
        let after = at.saturating_duration_since(t429) + Duration::from_millis(100);
        assert!(after >= block, "sent {after:?} after the 429: {body}");
    }
    assert_eq!(posted_with(&s.slack, "echo: first").len(), 1);
    assert_eq!(posted_with(&s.slack, "echo: second").len(), 1);
    assert_eq!(
        (in_thread.channel.as_str(), in_thread.thread_ts.as_deref()),
        ("CGENERAL", Some(root))
    );

    // The outbox shows the platform conversation ids, the thread's too. An
    // item is pending until its delivery is recorded, then sent: reading
    // pending first, then sent, finds each at least once.
    let mut items = Vec::new();
    for status in ["pending", "sent"] {
        let (_, outbox) = s.hearth.get(&format!("/v1/outbox?status={status}")).await;
        items.extend(outbox["items"].as_array().cloned().unwrap_or_default());
    }
    let mut targets: Vec<(i64, String)> = items
        .iter()
        .filter(|i| i["kind"] == "message")
        .map(|i| {
            (
                i["id"].as_i64().unwrap_or_default(),
                i["target"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    targets.sort_unstable();
    targets.dedup();
    let mut targets: Vec<String> = targets.into_iter().map(|(_, t)| t).collect();
    targets.sort_unstable();
    assert_eq!(targets, vec!["CGENERAL", DM], "{items:?}");
    no_violations(&s.slack);
}

#[tokio::test]
async fn the_hearth_command_in_a_channel_acts_on_the_users_thread_or_the_one_named() {
    let s = socket().await;
    // A channel thread is shared: changing it needs llm.configure.
    let grant = json!({ "subject": format!("user:slack:user:{ALICE}"),
                        "capability": "llm.configure", "scope": "slack:team:TFAKE" });
    let (status, v) = s
        .hearth
        .send(reqwest::Method::POST, "/v1/permissions/grants", grant)
        .await;
    assert_eq!(status, 201, "{v}");
    let root = "1700000000.000100";
    s.slack
        .push_event("Ev100", mention(ALICE, "CGENERAL", root, None, "hello"));
    s.slack.wait_posted("echo: hello", WAIT).await;
    let cmd = |text: &str, id: &str| {
        json!({ "command": "/hearth", "text": text, "user_id": ALICE, "channel_id": "CGENERAL", "team_id": "TFAKE",
                "response_url": s.slack.response_url(id), "trigger_id": format!("trig-{id}") })
    };
    // No thread named: Alice's newest thread in the channel.
    s.slack.push_envelope("slash_commands", cmd("model", "1"));
    let replies = s.slack.wait_calls("response_url", 1, WAIT).await;
    let picker = &replies[0];
    let row = &picker["blocks"][1];
    assert_eq!(
        row["block_id"],
        format!("hearth_thread:{root}:0"),
        "{picker}"
    );
    let other = row["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["value"].as_str().unwrap().ends_with("other-model"))
        .cloned()
        .unwrap_or_else(|| panic!("no other-model button: {picker}"));
    s.slack.push_envelope(
        "interactive",
        json!({ "type": "block_actions", "user": { "id": ALICE }, "channel": { "id": "CGENERAL" },
                "actions": [{ "action_id": other["action_id"], "block_id": row["block_id"], "value": other["value"], "type": "button" }],
                "response_url": s.slack.response_url("2"), "trigger_id": "trig-2" }),
    );
    let replies = s.slack.wait_calls("response_url", 2, WAIT).await;
    let now = replies[1]["text"].as_str().unwrap();
    assert!(now.ends_with("other-model"), "{now}");

    // A thread named by its link; one hearth never answered is refused.
    let link = "https://fake.slack.com/archives/CGENERAL/p1700000000000100";
    s.slack
        .push_envelope("slash_commands", cmd(&format!("thinking high {link}"), "3"));
    s.slack.push_envelope(
        "slash_commands",
        cmd(
            "new https://fake.slack.com/archives/CGENERAL/p1700000099000000",
            "4",
        ),
    );
    let replies = s.slack.wait_calls("response_url", 4, WAIT).await;
    let by_id = |id: &str| {
        replies
            .iter()
            .find(|r| r["response_url_id"] == id)
            .map(|r| r["text"].as_str().unwrap_or_default().to_owned())
            .unwrap()
    };
    assert_eq!(by_id("3"), "Thinking: high");
    assert!(
        by_id("4").contains("no conversation in that thread"),
        "{}",
        by_id("4")
    );

    // The thread continues on the model chosen for it; the DM does not.
    s.slack.push_event(
        "Ev101",
        json!({ "type": "message", "channel": "CGENERAL", "channel_type": "channel", "user": ALICE, "text": "again", "ts": "1700000000.000300", "thread_ts": root }),
    );
    s.slack.wait_posted("echo: again", WAIT).await;
    s.slack
        .push_event("Ev102", dm(ALICE, "1700000000.000400", "in private"));
    s.slack.wait_posted("echo: in private", WAIT).await;
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 3, "commands are not model calls");
    assert_eq!(reqs[1]["model"], "other-model");
    assert_eq!(reqs[2]["model"], "fake-model");
    no_violations(&s.slack);
}
