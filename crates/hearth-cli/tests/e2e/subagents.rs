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

/// The user of the sub-agent confirmation test, and someone else.
const ALICE: &str = "api:user:sub-alice";
const BOB: &str = "api:user:sub-bob";

/// The text of the last user message of a request.
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rfind(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The tool results since the last user message (this run's).
fn this_turns_results(body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let from = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    messages[from..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_childs_write_asks_the_parents_user_and_stays_answerable_across_a_restart() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|body| {
        let results = this_turns_results(body);
        let text = last_user_text(body);
        match body["model"].as_str() {
            Some("fake-model") if text == "remember this" && results.is_empty() => {
                Some(Reply::tool_calls(vec![ToolCallSpec::new(
                    "s1",
                    "memory_save",
                    json!({"text": "The cat is called Miso"}).to_string(),
                )]))
            }
            Some("fake-model") if text == "remember this" => Some(Reply::text("noted")),
            Some("fake-model") if results.is_empty() => {
                Some(Reply::tool_calls(vec![ToolCallSpec::new(
                    "c1",
                    "delegate",
                    json!({"task": "forget memory 1", "model": "fake/other-model"}).to_string(),
                )]))
            }
            Some("fake-model") => Some(Reply::text(format!("parent got: {}", results.join(" | ")))),
            Some("other-model") if results.is_empty() => {
                Some(Reply::tool_calls(vec![ToolCallSpec::new(
                    "f1",
                    "memory_forget",
                    json!({"id": 1}).to_string(),
                )]))
            }
            Some("other-model") => Some(Reply::text("forgot it")),
            _ => None,
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (s, v) = h
        .post(json!({ "text": "remember this", "thread_key": "api:subconf", "user_key": ALICE, "wait": true }))
        .await;
    assert_eq!(s, 200, "{v}");

    let (s, parent) = h
        .post(json!({ "text": "forget the cat", "thread_key": "api:subconf", "user_key": ALICE }))
        .await;
    assert_eq!(s, 202, "{parent}");
    let parent_id = parent["run_id"].as_str().unwrap().to_owned();
    let child = poll("the child's question", Duration::from_secs(30), || async {
        let (_, env) = h.get(&format!("/v1/runs/{parent_id}")).await;
        let Some(id) = env["children"][0]["run_id"].as_str() else {
            return Err(env);
        };
        let (_, child) = h.get(&format!("/v1/runs/{id}")).await;
        if child["status"] == "awaiting_confirmation" {
            Ok(child)
        } else {
            Err(child)
        }
    })
    .await;
    let child_id = child["run_id"].as_str().unwrap().to_owned();
    assert_eq!(child["parent_run_id"], parent_id.as_str(), "{child}");
    let c = &child["confirmation"];
    assert_eq!(c["tool"], "memory_forget", "{child}");
    let summary = c["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with(&format!(
            "sub-agent 1 of run {parent_id} (model fake/other-model) asks to run memory_forget"
        )),
        "{summary}"
    );
    let token = c["token"].as_str().unwrap().to_owned();
    // Listed with the questions waiting for the parent's user.
    let (_, waiting) = h
        .get(&format!(
            "/v1/runs?status=awaiting_confirmation&user_key={ALICE}"
        ))
        .await;
    assert!(
        waiting["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["run_id"] == child_id.as_str()),
        "{waiting}"
    );

    h.kill().await;
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (_, after) = h.get(&format!("/v1/runs/{child_id}")).await;
    assert_eq!(after["status"], "awaiting_confirmation", "{after}");
    let answer = |user: &'static str| {
        let h = &h;
        let token = token.clone();
        async move {
            let r = h
                .http
                .post(h.at(&format!("/v1/confirmations/{token}")))
                .json(&json!({ "user_key": user, "approve": true }))
                .send()
                .await
                .unwrap();
            r.status().as_u16()
        }
    };
    assert_eq!(answer(BOB).await, 403, "only the parent's user answers");
    assert_eq!(answer(ALICE).await, 200);
    let done = h.wait_run(&parent_id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let text = done["output"]["text"].as_str().unwrap_or_default();
    assert!(text.contains("forgot it"), "{done}");
    let out = crate::harness::command(&h.home)
        .args(["memory", "export", "--user", ALICE])
        .output()
        .await
        .unwrap();
    let memories: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        memories["memories"],
        json!([]),
        "the child's write ran once approved"
    );
}
