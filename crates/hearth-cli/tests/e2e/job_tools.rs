//! The model's job tools in the real binary: offered only with
//! `jobs.manage`; `schedule_job` and `cancel_job` wait for confirmation;
//! the model sees and cancels only its own conversation's jobs.

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, fake_config, offered_tools};

const THREAD: &str = "api:jobtools";
const USER: &str = "api:user:jt-alice";

/// Asks on [`THREAD`] as [`USER`] with the model's next turn scripted to call
/// `tool(args)` and then answer "done"; approves a confirmation if one is
/// asked. Returns the finished run.
async fn call_tool(h: &Hearth, fake: &FakeOpenAi, tool: &str, args: Value, confirm: bool) -> Value {
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        tool,
        args.to_string(),
    )]));
    fake.push(Reply::text("done"));
    let (s, v) = h
        .post(json!({ "text": "please", "thread_key": THREAD, "user_key": USER, "wait": true }))
        .await;
    if !confirm {
        assert_eq!(s, 200, "{v}");
        return v;
    }
    assert_eq!(s, 202, "{tool} should wait for confirmation: {v}");
    assert_eq!(v["confirmation"]["tool"], tool, "{v}");
    let token = v["confirmation"]["token"].as_str().unwrap();
    let (s, c) = h
        .send(
            reqwest::Method::POST,
            &format!("/v1/confirmations/{token}"),
            json!({ "user_key": USER, "approve": true }),
        )
        .await;
    assert_eq!(s, 200, "{c}");
    h.wait_run(v["run_id"].as_str().unwrap()).await
}

/// What the last tool call returned to the model (the tool message of the
/// request after it).
fn last_tool_result(fake: &FakeOpenAi) -> Value {
    let req = fake.requests().last().cloned().unwrap();
    let content = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap();
    // Tool output reaches the model as text; hearth's own tools return JSON.
    serde_json::from_str(&content).unwrap_or(Value::String(content))
}

#[tokio::test]
async fn the_model_schedules_lists_and_cancels_only_its_conversations_jobs() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;

    // A member (the default preset) is not offered the job tools.
    h.post(json!({ "text": "hi", "thread_key": THREAD, "user_key": USER, "wait": true }))
        .await;
    let offered = offered_tools(fake.requests().last().unwrap());
    assert!(
        !offered.iter().any(|t| t.contains("job")),
        "offered without jobs.manage: {offered:?}"
    );
    let (s, g) = h
        .send(
            reqwest::Method::POST,
            "/v1/permissions/grants",
            json!({ "subject": format!("user:{USER}"), "capability": "jobs.manage" }),
        )
        .await;
    assert_eq!(s, 201, "{g}");

    let done = call_tool(
        &h,
        &fake,
        "schedule_job",
        json!({"name": "stretch", "schedule": "every 1h", "text": "time to stretch",
               "timezone": "Europe/Paris"}),
        true,
    )
    .await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let offered = offered_tools(&fake.requests()[1]);
    for t in ["schedule_job", "list_jobs", "cancel_job"] {
        assert!(offered.iter().any(|o| o == t), "{t} not in {offered:?}");
    }
    let scheduled = last_tool_result(&fake);
    let id = scheduled["scheduled"]["id"].as_str().unwrap().to_owned();
    let (s, job) = h.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(s, 200, "{job}");
    assert_eq!(job["thread_key"], THREAD);
    assert_eq!(job["user_key"], USER);
    assert_eq!(job["text"], "time to stretch");
    assert_eq!(job["timezone"], "Europe/Paris");

    // Someone else's job, made through the API on another thread.
    let (s, other) = h
        .send(
            reqwest::Method::POST,
            "/v1/jobs",
            json!({"name": "theirs", "schedule": "every 2h", "thread_key": "api:elsewhere",
               "user_key": "api:user:bob", "text": "hello"}),
        )
        .await;
    assert_eq!(s, 201, "{other}");
    let other_id = other["id"].as_str().unwrap().to_owned();

    // Listing is a read: no confirmation; only this conversation's job.
    call_tool(&h, &fake, "list_jobs", json!({}), false).await;
    let listed = last_tool_result(&fake);
    let ids: Vec<&str> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![id.as_str()], "{listed}");

    // The other job cannot be cancelled from here, approved or not.
    call_tool(&h, &fake, "cancel_job", json!({"id": other_id}), true).await;
    let refused = last_tool_result(&fake).to_string();
    assert!(refused.contains("has no job"), "{refused}");
    let (s, _) = h.get(&format!("/v1/jobs/{other_id}")).await;
    assert_eq!(s, 200, "the other conversation's job was cancelled");

    call_tool(&h, &fake, "cancel_job", json!({"id": id}), true).await;
    let cancelled = last_tool_result(&fake);
    assert_eq!(cancelled["cancelled"]["id"], id.as_str(), "{cancelled}");
    let (s, _) = h.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(s, 404);
}
