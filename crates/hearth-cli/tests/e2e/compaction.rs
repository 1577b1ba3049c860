//! Compaction end to end: a thread that outgrows its model's window is
//! summarized, `GET /v1/threads/{k}/history` still pages through every
//! message with the boundaries marked, the trace shows the compaction, and
//! `hearth model status` says which window is used; an OpenAI client that
//! resends a long conversation has its old turns summarized once.

use hearth_agent::compaction::{PREVIOUS_SUMMARY_HEADING, SUMMARY_INSTRUCTIONS};
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config};

fn is_compaction(req: &Value) -> bool {
    req["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with(SUMMARY_INSTRUCTIONS))
}

/// Keeps the previous summary's lines and the user's "my ... is ..." lines.
fn summarize(req: &Value) -> Reply {
    let text = req["messages"][1]["content"].as_str().unwrap_or_default();
    let mut keep: Vec<&str> = Vec::new();
    let mut previous = false;
    for line in text.lines() {
        if line.starts_with("## ") {
            previous = line == PREVIOUS_SUMMARY_HEADING;
        } else if previous || (line.starts_with("user: my ") && line.contains(" is ")) {
            let line = line.trim_start_matches("- ");
            if !keep.contains(&line) {
                keep.push(line);
            }
        }
    }
    Reply::text(format!("- {}", keep.join("\n- ")))
}

#[tokio::test]
async fn a_long_thread_is_compacted_and_its_history_pages_through_everything() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|req| is_compaction(req).then(|| summarize(req)));
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}model_capabilities.fake-model = {{ context_window = 4000 }}\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let filler = "and a few words more about the garden, the rain and the long evenings".repeat(4);
    let mut runs = Vec::new();
    for i in 0..30 {
        let text = if i == 0 {
            "my locker code is 4417".to_owned()
        } else {
            format!("message {i} {filler}")
        };
        let v = h.ask("api:long", &text).await;
        assert_eq!(v["status"], "succeeded", "{v}");
        runs.push(v["run_id"].as_str().unwrap().to_owned());
    }
    let requests = fake.requests();
    let compactions = requests.iter().filter(|r| is_compaction(r)).count();
    assert!(compactions >= 2, "{compactions} compactions");
    let last = requests.iter().rev().find(|r| !is_compaction(r)).unwrap();
    assert!(last.to_string().contains("my locker code is 4417"));

    // Every message, newest first, a page at a time.
    let mut all: Vec<Value> = Vec::new();
    let mut path = "/v1/threads/api:long/history?limit=7".to_owned();
    loop {
        let (s, page) = h.get(&path).await;
        assert_eq!(s, 200, "{page}");
        let msgs = page["messages"].as_array().unwrap();
        assert!(msgs.len() <= 7);
        all.extend(msgs.iter().cloned());
        match page["next_before"].as_str() {
            Some(b) => path = format!("/v1/threads/api:long/history?limit=7&before={b}"),
            None => break,
        }
    }
    let summaries: Vec<&Value> = all.iter().filter(|m| m["role"] == "summary").collect();
    assert_eq!(summaries.len(), compactions);
    assert_eq!(
        all.len() - summaries.len(),
        60,
        "30 questions and 30 answers"
    );
    let ids: Vec<i64> = all
        .iter()
        .map(|m| m["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] > w[1]),
        "newest first, no repeats"
    );
    assert_eq!(all[0]["compacted"], false);
    let oldest = all.last().unwrap();
    assert_eq!(oldest["text"], "my locker code is 4417");
    assert_eq!(oldest["compacted"], true);
    assert_eq!(oldest["role"], "user");
    assert_eq!(oldest["run_id"], runs[0].as_str());
    assert!(
        summaries
            .iter()
            .all(|s| s["text"].as_str().unwrap().contains("4417"))
    );
    assert_eq!(
        summaries.iter().filter(|s| s["compacted"] == false).count(),
        1,
        "only the newest summary is in use"
    );

    // The trace shows each compaction with its figures, nothing of the text.
    let mut found = 0;
    for run in &runs {
        let (_, trace) = h.get(&format!("/v1/runs/{run}/trace")).await;
        for step in trace["steps"].as_array().unwrap() {
            if step["kind"] == "compaction" {
                found += 1;
                let d = &step["detail"];
                assert!(
                    d["tokens_before"].as_u64().unwrap() > d["tokens_after"].as_u64().unwrap(),
                    "{step}"
                );
                assert!(!step.to_string().contains("4417"), "{step}");
            } else {
                assert!(step["detail"].is_null(), "{step}");
            }
        }
    }
    assert_eq!(found, compactions);

    let (s, bad) = h.get("/v1/threads/api:long/history?before=abc").await;
    assert_eq!(s, 400, "{bad}");
    assert_eq!(bad["error"]["code"], "invalid_request");

    // The model status names the window, and says when it is assumed.
    let status = |thread: &'static str| {
        let home = h.home.clone();
        let url = h.url.clone();
        async move {
            crate::harness::succeeds(
                command(&home)
                    .env("HEARTH_URL", url)
                    .args(["model", "status", "--thread", thread]),
            )
            .await
        }
    };
    let known = status("api:long").await;
    assert!(known.contains("context       4000 tokens\n"), "{known}");
    crate::harness::succeeds(command(&h.home).env("HEARTH_URL", &h.url).args([
        "model",
        "set",
        "fake/other-model",
        "--thread",
        "api:other",
    ]))
    .await;
    let assumed = status("api:other").await;
    assert!(
        assumed.contains("32000 tokens (assumed: [agent] default_context_tokens"),
        "{assumed}"
    );
}

#[tokio::test]
async fn an_openai_client_resending_a_long_conversation_has_it_summarized_once() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|req| is_compaction(req).then(|| summarize(req)));
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}model_capabilities.fake-model = {{ context_window = 4000 }}\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let filler = "and a few words more about the garden, the rain and the long evenings".repeat(4);
    let mut messages = vec![
        json!({"role": "user", "content": "my locker code is 4417"}),
        json!({"role": "assistant", "content": "noted"}),
    ];
    for i in 1..25 {
        messages.push(json!({"role": "user", "content": format!("message {i} {filler}")}));
        messages.push(json!({"role": "assistant", "content": format!("answer {i}")}));
    }
    messages.push(json!({"role": "user", "content": "what is my locker code?"}));
    let body = json!({"model": "hearth", "user": "alice", "messages": messages});
    let compactions = || fake.requests().iter().filter(|r| is_compaction(r)).count();
    let mut after = Vec::new();
    // The same conversation twice (a regenerated answer, say).
    for _ in 0..2 {
        let (s, v) = h
            .send(
                reqwest::Method::POST,
                "/openai/v1/chat/completions",
                body.clone(),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        assert!(v["choices"][0]["message"]["content"].is_string(), "{v}");
        let requests = fake.requests();
        let sent = requests.iter().rev().find(|r| !is_compaction(r)).unwrap();
        assert!(sent.to_string().contains("4417"), "the summary is sent");
        assert!(
            !sent.to_string().contains("message 1 "),
            "the old turns are not"
        );
        after.push(compactions());
    }
    assert!(after[0] >= 1, "the long history was compacted");
    assert_eq!(after[1], after[0], "the same history was summarized again");

    // Every call counts in usage, the summarizing ones included.
    let (_, usage) = h.get("/v1/usage?group_by=model").await;
    assert_eq!(
        usage["rows"][0]["calls"].as_u64(),
        Some(fake.request_count() as u64),
        "{usage}"
    );
}
