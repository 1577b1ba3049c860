//! Memory end to end: the model saves a fact in one thread, finds it with a
//! citation in another, and the operator exports and erases it with the CLI.

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config};

const USER: &str = "api:user:mem-alice";
const FACT: &str = "The user's favourite colour is teal";

/// Sends `text` on `thread` as [`USER`] and waits for the finished run.
async fn ask_as_user(h: &Hearth, thread: &str, text: &str) -> Value {
    let (s, v) = h
        .post(json!({ "text": text, "thread_key": thread, "user_key": USER, "wait": true }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "succeeded", "{v}");
    v
}

/// The JSON of the tool result in a provider request.
fn tool_result(req: &Value) -> Value {
    let msg = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("no tool result in {req}"));
    serde_json::from_str(msg["content"].as_str().unwrap()).unwrap()
}

async fn hearth_memory(h: &Hearth, args: &[&str]) -> (i32, String, String) {
    let out = command(&h.home)
        .arg("memory")
        .args(args)
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn search_call(id: &str) -> Reply {
    Reply::tool_calls(vec![ToolCallSpec::new(
        id,
        "memory_search",
        r#"{"query":"favourite colour"}"#,
    )])
}

#[tokio::test]
async fn saved_memory_is_found_in_another_thread_exported_and_erased() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    // Run 1: the model saves the fact.
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_save",
        "memory_save",
        json!({ "text": FACT }).to_string(),
    )]));
    fake.push(Reply::text("I'll remember that."));
    ask_as_user(&h, "api:mem-one", "remember: my favourite colour is teal").await;
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let saved = tool_result(&reqs[1]);
    assert_eq!(saved["saved"], true, "{saved}");
    let id = saved["id"].as_i64().unwrap();

    // Run 2, another thread of the same user: the search finds it, citing its id.
    fake.push(search_call("call_search"));
    fake.push(Reply::text(format!("Teal [memory:{id}]")));
    let v = ask_as_user(&h, "api:mem-two", "what is my favourite colour?").await;
    assert_eq!(v["output"]["text"], format!("Teal [memory:{id}]"), "{v}");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 4);
    let found = tool_result(&reqs[3]);
    let hit = &found["results"][0];
    assert_eq!(hit["text"], FACT, "{found}");
    assert_eq!(hit["id"], id);
    assert_eq!(hit["source"]["memory_id"], id);
    assert_eq!(hit["source"]["thread_key"], Value::Null);
    assert!(hit["source"]["run_id"].as_str().is_some(), "{found}");
    assert!(
        found["cite"].as_str().unwrap().contains("[memory:<id>]"),
        "{found}"
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());

    // The operator exports it...
    let (code, out, err) = hearth_memory(&h, &["export", "--user", USER]).await;
    assert_eq!(code, 0, "{err}");
    let export: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(export["user_key"], USER);
    let memories = export["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 1, "{export}");
    assert_eq!(memories[0]["id"], id);
    assert_eq!(memories[0]["text"], FACT);

    // ... refuses to erase without confirmation, then erases it, audited.
    let (code, _, err) = hearth_memory(&h, &["delete", "--user", USER]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--yes"), "{err}");
    let (code, out, err) = hearth_memory(&h, &["delete", "--user", USER, "--yes"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("deleted 1 memories of {USER}"));
    let (s, audit) = h.get("/v1/audit").await;
    assert_eq!(s, 200);
    let event = &audit["events"][0];
    assert_eq!(
        (&event["actor"], &event["action"], &event["target"]),
        (&json!("operator"), &json!("memory.delete"), &json!(USER)),
        "{audit}"
    );
    let (code, out, _) = hearth_memory(&h, &["export", "--user", USER]).await;
    assert_eq!(code, 0);
    let export: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(export["memories"], json!([]));

    // A following search finds nothing.
    fake.push(search_call("call_search_again"));
    fake.push(Reply::text("I don't know."));
    ask_as_user(&h, "api:mem-three", "what is my favourite colour?").await;
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 6);
    assert_eq!(tool_result(&reqs[5])["results"], json!([]));
}
