//! Sub-agents survive a crash: hearth killed while a parent waits for the
//! child its `delegate` call started resumes both, and the parent finds that
//! child again instead of starting a second one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, fake_config, poll};

/// The tool results a request carries.
fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn sigkill_mid_delegation_resumes_without_a_second_child() {
    let fake = FakeOpenAi::start().await;
    // The child's model hangs until hearth is killed, then answers.
    let answer = Arc::new(AtomicBool::new(false));
    let child_answers = answer.clone();
    fake.respond_with(move |body| {
        let results = tool_results(body);
        match body["model"].as_str() {
            Some("fake-model") if results.is_empty() => {
                Some(Reply::tool_calls(vec![ToolCallSpec::new(
                    "c1",
                    "delegate",
                    json!({"task": "count the stars", "model": "fake/other-model"}).to_string(),
                )]))
            }
            Some("fake-model") => Some(Reply::text(format!("parent got: {}", results.join(" | ")))),
            Some("other-model") if child_answers.load(Ordering::SeqCst) => {
                Some(Reply::text("many stars"))
            }
            Some("other-model") => {
                Some(Reply::text("never delivered").with_delay(Duration::from_secs(120)))
            }
            _ => None,
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (s, parent) = h
        .post(json!({ "text": "how many stars?", "thread_key": "api:stars" }))
        .await;
    assert_eq!(s, 202, "{parent}");
    let parent_id = parent["run_id"].as_str().unwrap().to_owned();
    // The child asked its model: hearth dies mid-delegation.
    let child_id = poll(
        "the child's model call",
        Duration::from_secs(30),
        || async {
            let (_, env) = h.get(&format!("/v1/runs/{parent_id}")).await;
            let asked = fake.requests().iter().any(|r| r["model"] == "other-model");
            match env["children"][0]["run_id"].as_str() {
                Some(id) if asked => Ok(id.to_owned()),
                _ => Err(env),
            }
        },
    )
    .await;
    h.kill().await;

    answer.store(true, Ordering::SeqCst);
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let done = h.wait_run(&parent_id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let text = done["output"]["text"].as_str().unwrap_or_default();
    assert!(text.contains("many stars"), "{done}");
    let (_, env) = h.get(&format!("/v1/runs/{parent_id}")).await;
    let children = env["children"].as_array().cloned().unwrap_or_default();
    assert_eq!(children.len(), 1, "one child: {env}");
    assert_eq!(children[0]["run_id"], child_id.as_str(), "{env}");
    assert_eq!(children[0]["status"], "succeeded", "{env}");
    let child_calls = fake
        .requests()
        .iter()
        .filter(|r| r["model"] == "other-model")
        .count();
    assert_eq!(
        child_calls, 2,
        "the child's call, cut by the kill, then redone once"
    );
}
