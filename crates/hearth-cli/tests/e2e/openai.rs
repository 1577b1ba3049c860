//! The OpenAI-compatible surface of the real binary, driven by the official
//! `openai` Python package (pinned in `.ci/prereqs.sh`), plain and streaming.
//!
//! Ignored by a plain `cargo test` and run by `.ci/test`, which installs the
//! package; a missing package fails it, so it cannot pass unseen.

use std::time::Duration;

use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::harness::{Hearth, fake_config};

/// The `openai` package version `.ci/test` installs.
const OPENAI_VERSION: &str = "3.54.0";

/// Run by [`external_tools::the_official_openai_client_talks_to_hearth`].
async fn official_client_talks_to_hearth() {
    hearth_testkit::tools::python_package("openai", OPENAI_VERSION);

    let fake = FakeOpenAi::start().await;
    // "what time is it?": a turn that says something and calls a tool, then
    // the answer once the tool's result is back.
    fake.respond_with(|req| {
        let messages = req["messages"].as_array()?;
        let last = messages.last()?;
        if last["role"] == "tool" {
            return Some(Reply::text("It is noon."));
        }
        (last["content"] == "what time is it?").then(|| text_then_tool_call("Let me look. "))
    });
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let h = Hearth::start(&home, Some(&fake_config(&fake.base_url()))).await;
    let token = crate::harness::new_token(&home, "openai-client").await;

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/openai_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(hearth_testkit::tools::python())
            .arg(script)
            .arg(h.at("/openai/v1"))
            .arg(&token)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the openai client did not finish within 120 s")
    .unwrap();
    assert!(
        out.status.success(),
        "openai client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let chunks = got["stream"]["chunks"].take();
    // Role, two content deltas, finish, usage: at least four chunks.
    assert!(chunks.as_u64().is_some_and(|n| n >= 4), "{chunks}");
    assert_eq!(
        got,
        json!({
            "version": OPENAI_VERSION,
            "models": ["hearth", "hearth/echo/echo", "hearth/fake/fake-model", "hearth/fake/other-model"],
            "plain": {
                "object": "chat.completion", "model": "hearth", "role": "assistant",
                "content": "echo: plain question", "finish_reason": "stop", "usage": [12, 7, 19],
            },
            "stream": {
                "content": "echo: streamed question", "finish_reason": "stop",
                "usage": [12, 7, 19], "chunks": null,
            },
            "tool_turn": {"plain": "It is noon.", "stream": "It is noon."},
            "tools": {"status": 400, "param": "tools", "type": "invalid_request_error"},
            "bad_key": {"status": 401, "code": "invalid_api_key"},
        }),
        "{got:#}"
    );
    // The plain request's history reached the provider; the run is on the user's thread.
    let reqs = fake.requests();
    let plain = reqs
        .iter()
        .find(|r| r["messages"].to_string().contains("plain question"))
        .unwrap();
    let roles: Vec<&str> = plain["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    let r = h
        .http
        .get(h.at("/v1/runs?thread_key=openai:py"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let runs: Value = r.json().await.unwrap();
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(1), "{runs}");
    assert_eq!(runs["runs"][0]["user_key"], "openai:user:py");
}

/// A model turn that says `text`, then calls `current_time` (read-only).
fn text_then_tool_call(text: &str) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
               "model": "fake-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let frames = [
        chunk(json!({"role": "assistant", "content": text}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_t", "type": "function",
                "function": {"name": "current_time", "arguments": "{}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ];
    let body: String = frames.iter().map(|f| format!("data: {f}\n\n")).collect();
    Reply::raw_sse(format!("{body}data: [DONE]\n\n"))
}

/// The tests that need tools from outside the workspace: ignored by a plain
/// `cargo test`, run by `.ci/test` (`-- --ignored external_tools::`), where
/// a missing tool fails them.
mod external_tools {
    #[tokio::test]
    #[ignore = "needs the Python package openai==3.54.0 (.ci/test installs it): \
                cargo test -p hearth-cli --test e2e -- --ignored external_tools::"]
    async fn the_official_openai_client_talks_to_hearth() {
        super::official_client_talks_to_hearth().await;
    }
}
