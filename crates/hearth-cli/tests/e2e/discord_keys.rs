//! A Discord server's own provider key, end to end: an Administrator runs
//! `/llm key set`, types the key into the modal hearth opens, and the
//! server's runs then call the provider with it; DMs keep the operator's.
//! `/llm usage` shows the server's usage today. Removing the key fails
//! the server's runs with a message saying why. The key is in no message,
//! no interaction answer and no log line.

use hearth_testkit::FakeOpenAi;
use hearth_testkit::fake_discord::{BOT_ID, FakeDiscord};
use serde_json::{Value, json};

use crate::discord::{
    ALICE, BOB, DM, GENERAL, GUILD, TOKEN, callback_of, config, no_violations, text,
};
use crate::harness::Hearth;

const KEY: &str = "sk-guild-OWN-key-4c2f9e";
const MASTER: &str = "q7U0nG1Yb8m2p3ZxV4c5T6s7R8e9W0a1B2c3D4e5F6g=";

/// The `authorization` header of the provider's newest request.
fn last_key(fake: &FakeOpenAi) -> String {
    let headers = fake.request_headers().pop().unwrap();
    headers
        .into_iter()
        .filter(|(k, _)| k == "authorization")
        .map(|(_, v)| v)
        .collect::<Vec<_>>()
        .join(" | ")
}

fn key_command(verb: &str, provider: &str) -> Value {
    json!({ "name": "llm", "options": [{ "name": "key", "type": 2, "options": [
        { "name": verb, "type": 1, "options": [{ "name": "provider", "type": 3, "value": provider }] },
    ] }] })
}

#[tokio::test]
async fn a_server_admin_sets_its_key_in_a_modal_and_only_that_servers_runs_use_it() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let dc = FakeDiscord::start(TOKEN).await;
    let home = dir.path().join("home");
    let hearth = Hearth::start_with(
        &home,
        Some(&config(&fake, &dc, "")),
        &[
            ("DC_TOKEN", TOKEN),
            ("HEARTH_SECRET_KEY", MASTER),
            ("RUST_LOG", "debug"),
        ],
    )
    .await;
    dc.wait_ready(1).await;
    let mut answers = Vec::new();

    // A member who is not an admin is refused, privately.
    let id = dc.interaction(
        2,
        GENERAL,
        Some(GUILD),
        BOB,
        key_command("set", "fake"),
        None,
    );
    let b = callback_of(&dc, &id, 1).await;
    assert!(text(&b).contains("Only the server owner"), "{b}");
    assert_eq!(b["data"]["flags"], 64);
    dc.set_member_permissions("8");
    let id = dc.interaction(
        2,
        GENERAL,
        Some(GUILD),
        BOB,
        key_command("set", "nope"),
        None,
    );
    let b = callback_of(&dc, &id, 2).await;
    assert!(text(&b).contains("not a provider"), "{b}");
    // An Administrator gets the modal; the key goes in the form.
    let id = dc.interaction(
        2,
        GENERAL,
        Some(GUILD),
        BOB,
        key_command("set", "fake"),
        None,
    );
    let modal = callback_of(&dc, &id, 3).await;
    assert_eq!(modal["type"], 9, "{modal}");
    let custom_id = modal["data"]["custom_id"].as_str().unwrap().to_owned();
    let submit = json!({ "custom_id": custom_id, "components": [{ "type": 1, "components": [
        { "type": 4, "custom_id": "key", "value": KEY },
    ] }] });
    let id = dc.interaction(5, GENERAL, Some(GUILD), BOB, submit, None);
    let b = callback_of(&dc, &id, 4).await;
    assert!(text(&b).contains("now use its own key for fake"), "{b}");
    assert_eq!(b["data"]["flags"], 64);
    answers.push(b.to_string());

    // The server's runs use it; a DM keeps the operator's.
    dc.message(
        GENERAL,
        Some(GUILD),
        ALICE,
        false,
        &format!("<@{BOT_ID}> hello"),
    );
    dc.wait_message("echo: hello").await;
    assert_eq!(last_key(&fake), format!("Bearer {KEY}"));
    dc.message(DM, None, ALICE, false, "and in private?");
    dc.wait_message("echo: and in private?").await;
    assert_eq!(
        last_key(&fake),
        "Bearer test-key",
        "a DM used the server's key"
    );
    let (_, listed) = hearth
        .get(&format!("/v1/scopes/discord:guild:{GUILD}/credentials"))
        .await;
    assert_eq!(listed["credentials"][0]["provider"], "fake", "{listed}");
    answers.push(listed.to_string());

    // The server's usage today, all together.
    let usage = json!({ "name": "llm", "options": [{ "name": "usage", "type": 1 }] });
    let id = dc.interaction(2, GENERAL, Some(GUILD), BOB, usage, None);
    let b = callback_of(&dc, &id, 5).await;
    assert!(
        text(&b).starts_with("This server: Today (UTC): 1 model calls"),
        "{b}"
    );
    assert_eq!(b["data"]["flags"], 64);

    // Removed: the server's runs fail, saying so; nothing is called.
    let id = dc.interaction(
        2,
        GENERAL,
        Some(GUILD),
        BOB,
        key_command("remove", "fake"),
        None,
    );
    let b = callback_of(&dc, &id, 6).await;
    assert!(
        text(&b).starts_with("Removed this server's key for fake"),
        "{b}"
    );
    let calls = fake.request_count();
    dc.message(
        GENERAL,
        Some(GUILD),
        ALICE,
        false,
        &format!("<@{BOT_ID}> still there?"),
    );
    let failed = dc
        .wait_message_where("the failure", |m| {
            m.content.contains("key for fake was removed")
        })
        .await;
    assert!(
        failed.content.contains("community_fallback"),
        "{}",
        failed.content
    );
    assert_eq!(fake.request_count(), calls);

    for m in dc.messages() {
        answers.push(m.content);
    }
    for a in &answers {
        assert!(!a.contains(KEY), "the key was shown: {a}");
    }
    let log = std::fs::read_to_string(home.join("serve.log")).unwrap();
    assert!(!log.contains(KEY), "the key is in the log");
    no_violations(&dc);
}
