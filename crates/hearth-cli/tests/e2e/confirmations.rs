//! Confirmations end to end: `memory_forget` (write-class) waits for the
//! user's answer, across a SIGKILL and restart, and forgets only once approved.

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config};

const USER: &str = "api:user:conf-alice";
const OTHER: &str = "api:user:conf-bob";

async fn export(h: &Hearth) -> Value {
    let out =
        crate::harness::succeeds(command(&h.home).args(["memory", "export", "--user", USER])).await;
    serde_json::from_str(&out).unwrap()
}

async fn confirm(h: &Hearth, token: &str, user: &str, approve: bool) -> (u16, Value) {
    let r = h
        .http
        .post(h.at(&format!("/v1/confirmations/{token}")))
        .json(&json!({ "user_key": user, "approve": approve }))
        .send()
        .await
        .unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap())
}

/// Has the model save `text` for [`USER`] on `thread`; returns the memory's id.
async fn saved(h: &Hearth, fake: &FakeOpenAi, thread: &str, text: &str) -> i64 {
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "s1",
        "memory_save",
        json!({ "text": text }).to_string(),
    )]));
    fake.push(Reply::text("noted"));
    let (s, v) = h
        .post(json!({ "text": "remember this", "thread_key": thread, "user_key": USER, "wait": true }))
        .await;
    assert_eq!(s, 200, "{v}");
    let memories = export(h).await;
    let found = memories["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["text"] == text)
        .unwrap_or_else(|| panic!("{text:?} not saved: {memories}"));
    found["id"].as_i64().unwrap()
}

/// Scripts the model's next turn to call `memory_forget(id)`, then answer `then`.
fn script_forget(fake: &FakeOpenAi, id: i64, then: &str) {
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": id }).to_string(),
    )]));
    fake.push(Reply::text(then));
}

#[tokio::test]
async fn memory_forget_waits_for_confirmation_across_a_restart() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let id = saved(&h, &fake, "api:conf", "The cat is called Miso").await;

    script_forget(&fake, id, "forgotten");
    let (s, waiting) = h
        .post(json!({ "text": "forget the cat", "thread_key": "api:conf", "user_key": USER, "wait": true }))
        .await;
    assert_eq!(s, 202, "awaiting confirmation is not finished: {waiting}");
    assert_eq!(waiting["status"], "awaiting_confirmation", "{waiting}");
    let c = &waiting["confirmation"];
    assert_eq!(c["tool"], "memory_forget");
    assert!(
        c["summary"].as_str().unwrap().contains(&id.to_string()),
        "{c}"
    );
    let token = c["token"].as_str().unwrap().to_owned();
    let run_id = waiting["run_id"].as_str().unwrap().to_owned();
    assert_eq!(export(&h).await["memories"].as_array().unwrap().len(), 1);

    h.kill().await;
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (_, after) = h.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(after["status"], "awaiting_confirmation", "{after}");
    assert_eq!(
        after["confirmation"]["token"],
        Value::Null,
        "only the hash is stored"
    );
    assert_eq!(after["confirmation"]["tool"], "memory_forget");
    assert_eq!(export(&h).await["memories"].as_array().unwrap().len(), 1);

    let (s, v) = confirm(&h, &token, OTHER, true).await;
    assert_eq!(s, 403, "{v}");
    assert_eq!(v["error"]["code"], "forbidden");
    let (s, v) = confirm(&h, &token, USER, true).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["run_id"], run_id);
    let done = h.wait_run(&run_id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["output"]["text"], "forgotten");
    assert!(export(&h).await["memories"].as_array().unwrap().is_empty());
    // Used once: the token is gone.
    let (s, v) = confirm(&h, &token, USER, true).await;
    assert_eq!(s, 404, "{v}");
    assert_eq!(v["error"]["code"], "not_found");
}

#[tokio::test]
async fn a_deny_message_keeps_the_memory_and_the_event_carries_the_token() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let id = saved(&h, &fake, "api:deny", "Parking is on level 3").await;
    script_forget(&fake, id, "kept it");
    let (s, waiting) = h
        .post(json!({ "text": "forget parking", "thread_key": "api:deny", "user_key": USER, "wait": true }))
        .await;
    assert_eq!(s, 202, "{waiting}");
    let token = waiting["confirmation"]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let run_id = waiting["run_id"].as_str().unwrap().to_owned();

    let (s, answered) = h
        .post(
            json!({ "text": format!("deny {token}"), "thread_key": "api:deny", "user_key": USER }),
        )
        .await;
    assert!(s == 200 || s == 202, "{answered}");
    assert_eq!(
        answered["run_id"], run_id,
        "a deny message answers, it is not a new run"
    );
    let done = h.wait_run(&run_id).await;
    assert_eq!(done["output"]["text"], "kept it");
    assert_eq!(export(&h).await["memories"].as_array().unwrap().len(), 1);

    let events = h.events(&run_id, None).await;
    let asked = events
        .iter()
        .find(|(_, kind, _)| kind == "confirmation.required")
        .expect("a confirmation.required event");
    assert_eq!(asked.2["token"], token);
    assert_eq!(asked.2["tool"], "memory_forget");
    let (_, runs) = h.get("/v1/runs?thread_key=api:deny").await;
    assert_eq!(
        runs["runs"].as_array().unwrap().len(),
        2,
        "no run for the deny message"
    );
}

#[tokio::test]
async fn hearth_confirm_answers_from_the_cli() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let id = saved(&h, &fake, "api:cli", "The boat is blue").await;
    script_forget(&fake, id, "gone");
    // The CLI user sees what is asked and how to answer.
    let out = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .args([
            "message",
            "forget the boat",
            "--thread",
            "api:cli",
            "--user",
            USER,
            "--wait",
        ])
        .output()
        .await
        .unwrap();
    // Its own status: neither done nor failed, it waits for an answer.
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains("awaits confirmation: forget memory"),
        "{stdout}"
    );
    let token = stdout
        .split("hearth confirm ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no token in {stdout}"))
        .to_owned();
    let (_, runs) = h
        .get("/v1/runs?thread_key=api:cli&status=awaiting_confirmation")
        .await;
    let run_id = runs["runs"][0]["run_id"].as_str().unwrap().to_owned();

    let stdout = crate::harness::succeeds(
        command(&h.home)
            .env("HEARTH_URL", &h.url)
            .args(["confirm", &token, "--user", USER]),
    )
    .await;
    assert!(stdout.starts_with("approved; run "), "{stdout}");
    assert_eq!(h.wait_run(&run_id).await["output"]["text"], "gone");
    assert!(export(&h).await["memories"].as_array().unwrap().is_empty());
    // A used token: the CLI exits 1 with the API's error.
    let out = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .args(["deny", &token, "--user", USER])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not_found"));
}

#[tokio::test]
async fn a_new_message_after_a_restart_denies_the_waiting_action() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let id = saved(&h, &fake, "api:moved", "The bike is red").await;
    script_forget(&fake, id, "left it alone");
    fake.push(Reply::text("about something else"));
    let (s, waiting) = h
        .post(json!({ "text": "forget the bike", "thread_key": "api:moved", "user_key": USER, "wait": true }))
        .await;
    assert_eq!(s, 202, "{waiting}");
    let run_id = waiting["run_id"].as_str().unwrap().to_owned();
    h.kill().await;

    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (s, next) = h
        .post(json!({ "text": "actually, something else", "thread_key": "api:moved", "user_key": USER }))
        .await;
    assert_eq!(s, 202, "{next}");
    assert_ne!(next["run_id"], run_id.as_str());
    let first = h.wait_run(&run_id).await;
    assert_eq!(first["output"]["text"], "left it alone", "{first}");
    let second = h.wait_run(next["run_id"].as_str().unwrap()).await;
    assert_eq!(second["output"]["text"], "about something else");
    assert_eq!(
        export(&h).await["memories"].as_array().unwrap().len(),
        1,
        "not forgotten"
    );
}

#[tokio::test]
async fn a_confirm_text_that_cannot_answer_is_an_ordinary_message() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let id = saved(&h, &fake, "api:refused", "The key is under the mat").await;
    script_forget(&fake, id, "should not happen");
    let (s, waiting) = h
        .post(json!({ "text": "forget the key", "thread_key": "api:refused", "user_key": USER, "wait": true }))
        .await;
    assert_eq!(s, 202, "{waiting}");
    let token = waiting["confirmation"]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let run_id = waiting["run_id"].as_str().unwrap().to_owned();
    let text = format!("confirm {token}");

    // Someone else's token: a message like any other, queued behind the
    // waiting run, which still waits for its asker.
    let (s, bobs) = h
        .post(json!({ "text": text, "thread_key": "api:refused", "user_key": OTHER }))
        .await;
    assert_eq!(s, 202, "another user's confirm text is a message: {bobs}");
    assert_eq!(bobs["status"], "queued", "{bobs}");
    assert_ne!(bobs["run_id"], run_id.as_str());
    let (_, still) = h.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(still["status"], "awaiting_confirmation", "{still}");

    // The waiting run is cancelled: its token answers nothing any more.
    let (s, cancelled) = h
        .send(
            reqwest::Method::POST,
            &format!("/v1/runs/{run_id}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!((s, &cancelled["status"]), (200, &json!("cancelled")));
    let (s, late) = h
        .post(json!({ "text": text, "thread_key": "api:refused", "user_key": USER, "wait": true }))
        .await;
    assert_eq!(
        s, 200,
        "a confirm text for an ended run is a message: {late}"
    );
    assert_eq!(late["status"], "succeeded", "{late}");
    assert_ne!(late["run_id"], run_id.as_str());
    assert_eq!(
        export(&h).await["memories"].as_array().unwrap().len(),
        1,
        "nothing was forgotten"
    );
    let (s, v) = confirm(&h, &token, USER, true).await;
    assert_eq!(s, 404, "{v}");
    let (_, runs) = h.get("/v1/runs?thread_key=api:refused").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 4, "{runs}");
}
