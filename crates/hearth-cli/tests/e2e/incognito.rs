//! Incognito end to end: `hearth incognito on`, then nothing the thread says
//! reaches the database file, and memory is not written.

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::json;

use crate::harness::{Hearth, command, fake_config};

const WORDS: &str = "incognito-words-about-the-lighthouse";

fn file_contains(home: &std::path::Path, needle: &str) -> bool {
    ["hearth.db", "hearth.db-wal"].iter().any(|f| {
        std::fs::read(home.join(f))
            .map(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            .unwrap_or(false)
    })
}

#[tokio::test]
async fn an_incognito_thread_writes_nothing_it_says_to_disk() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    let said = crate::harness::succeeds(command(&h.home).env("HEARTH_URL", &h.url).args([
        "incognito",
        "on",
        "--thread",
        "api:inc",
    ]))
    .await;
    assert_eq!(said.trim(), "incognito on");
    let (_, rt) = h.get("/v1/threads/api:inc/runtime").await;
    assert_eq!(rt["incognito"], true);

    // The model tries to remember something: refused, nothing saved.
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "m1",
        "memory_save",
        json!({ "text": WORDS }).to_string(),
    )]));
    fake.push(Reply::text("I will not remember that"));
    let v = h.ask("api:inc", WORDS).await;
    assert_eq!(v["status"], "succeeded", "{v}");
    let tool_result = fake
        .requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .unwrap();
    assert!(tool_result.contains("incognito"), "{tool_result}");

    let (s, run) = h
        .get(&format!("/v1/runs/{}", v["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(s, 200, "readable while the process lives: {run}");
    let (_, rt) = h.get("/v1/threads/api:inc/runtime").await;
    assert_eq!(
        rt["message_count"], 4,
        "the exchange, tool call included, in memory"
    );
    assert!(!file_contains(&h.home, WORDS));
    assert!(!file_contains(&h.home, "I will not remember that"));

    // The flag survives a restart; the conversation does not.
    h.kill().await;
    let h = Hearth::start(dir.path(), None).await;
    let (_, rt) = h.get("/v1/threads/api:inc/runtime").await;
    assert_eq!(rt["incognito"], true);
    assert_eq!(rt["message_count"], 0);
    let (s, _) = h
        .get(&format!("/v1/runs/{}", v["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(s, 404);
    assert!(!file_contains(&h.home, WORDS));

    let r = h
        .http
        .put(h.at("/v1/threads/api:inc/incognito"))
        .json(&json!({ "enabled": false }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["incognito"], false);
}
