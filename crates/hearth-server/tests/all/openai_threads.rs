//! The OpenAI surface and confirmations: which thread a request runs on
//! (per user, per conversation for clients without one, apart for
//! background prompts), and that only the user's own turn answers or
//! denies what a chat waits for.

use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::openai::{Setup, setup};

/// Asks for `memory_forget` (write-class) as the first message of a chat;
/// returns the answer (the question with its token), the token and the run.
async fn asked(t: &Setup, body: Value) -> (String, String, String) {
    let (status, headers, v) = t.chat(body).await;
    assert_eq!(status, 200, "{v}");
    let prompt = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = prompt
        .split("`confirm ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no token in {prompt:?}"))
        .to_owned();
    let run_id = headers["x-hearth-run-id"].to_str().unwrap().to_owned();
    (prompt, token, run_id)
}

fn forget_call() -> Reply {
    Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )])
}

#[tokio::test]
async fn a_title_prompt_leaves_the_chats_confirmation_waiting() {
    let t = setup().await;
    t.fake.push(forget_call());
    t.fake.push(Reply::text("🐱 Forgetting the cat"));
    t.fake.push(Reply::text("forgotten"));
    let ask = json!({"role": "user", "content": "forget the cat"});
    let (prompt, token, run_id) = asked(
        &t,
        json!({"model": "hearth", "user": "dora", "messages": [ask]}),
    )
    .await;

    // Open WebUI asks for a title of the chat meanwhile: not Dora's turn.
    let (status, headers, v) = t
        .chat(json!({"model": "hearth", "user": "dora", "messages": [{"role": "user",
            "content": "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n<chat_history>\nUSER: forget the cat\n</chat_history>"}]}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        t.run(&run_id).await["status"],
        "awaiting_confirmation",
        "a background prompt must not deny the user's confirmation"
    );
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "🐱 Forgetting the cat"
    );
    let title_run = headers["x-hearth-run-id"].to_str().unwrap();
    assert_eq!(t.run(title_run).await["thread_key"], "openai:dora:tasks");

    let (status, _, v) = t
        .chat(json!({"model": "hearth", "user": "dora", "messages": [
            ask,
            {"role": "assistant", "content": prompt},
            {"role": "user", "content": format!("confirm {token}")},
        ]}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "forgotten");
    assert_eq!(t.run(&run_id).await["status"], "succeeded");
}

#[tokio::test]
async fn conversations_without_a_user_get_a_thread_each() {
    let t = setup().await;
    t.fake.push(forget_call());
    t.fake.push(Reply::text("sunny"));
    t.fake.push(Reply::text("🐱 Cat"));
    t.fake.push(Reply::text("forgotten"));
    let chat_a = |body: Value| {
        t.s.http
            .post(t.s.url("/openai/v1/chat/completions"))
            .header("X-OpenWebUI-Chat-Id", "chat-a")
            .json(&body)
    };
    let ask = json!({"role": "user", "content": "forget the cat"});
    let (status, headers, v) =
        t.s.send(chat_a(json!({"model": "hearth", "messages": [ask]})))
            .await;
    assert_eq!(status, 200, "{v}");
    let run_a = headers["x-hearth-run-id"].to_str().unwrap().to_owned();
    let prompt = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = prompt
        .split("`confirm ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap()
        .to_owned();
    let thread_a = t.run(&run_a).await["thread_key"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(thread_a.starts_with("openai:anonymous:"), "{thread_a}");

    // Another conversation of another anonymous client: its own thread, and
    // the first one's question still waits.
    let (status, headers, v) = t
        .chat(json!({"model": "hearth", "messages": [{"role": "user", "content": "weather?"}]}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "sunny");
    let run_b = headers["x-hearth-run-id"].to_str().unwrap();
    let thread_b = t.run(run_b).await["thread_key"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(thread_b.starts_with("openai:anonymous:"), "{thread_b}");
    assert_ne!(thread_a, thread_b);
    assert_eq!(
        t.run(&run_a).await["status"],
        "awaiting_confirmation",
        "another conversation's message must not deny this one's confirmation"
    );

    // The chat's title prompt runs beside it.
    let (status, headers, v) =
        t.s.send(chat_a(json!({"model": "hearth", "messages": [{"role": "user",
            "content": "### Task:\nGenerate a concise title.\n<chat_history>\nUSER: forget the cat\n</chat_history>"}]})))
            .await;
    assert_eq!(status, 200, "{v}");
    let title_run = headers["x-hearth-run-id"].to_str().unwrap();
    assert_eq!(
        t.run(title_run).await["thread_key"],
        json!(format!("{thread_a}:tasks"))
    );
    assert_eq!(t.run(&run_a).await["status"], "awaiting_confirmation");

    // The same conversation keeps its thread: its answer resumes the run.
    let (status, headers, v) =
        t.s.send(chat_a(json!({"model": "hearth", "messages": [
            ask,
            {"role": "assistant", "content": prompt},
            {"role": "user", "content": format!("confirm {token}")},
        ]})))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "forgotten");
    assert_eq!(headers["x-hearth-run-id"].to_str().unwrap(), run_a);
}

#[tokio::test]
async fn a_confirm_answer_finds_its_conversation_when_the_first_message_changed() {
    let t = setup().await;
    t.fake.push(forget_call());
    t.fake.push(Reply::text("forgotten"));
    let (prompt, token, run_id) = asked(
        &t,
        json!({"model": "hearth", "messages": [{"role": "user",
            "content": "forget the cat\n\n<context>a file the client attached</context>"}]}),
    )
    .await;
    // The client resends the first message without what it added to it.
    let (status, headers, v) = t
        .chat(json!({"model": "hearth", "messages": [
            {"role": "user", "content": "forget the cat"},
            {"role": "assistant", "content": prompt},
            {"role": "user", "content": format!("confirm {token}")},
        ]}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "forgotten");
    assert_eq!(headers["x-hearth-run-id"].to_str().unwrap(), run_id);
}
