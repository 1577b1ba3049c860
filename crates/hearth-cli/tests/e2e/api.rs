//! Answers, tools, history, waiting and events through the HTTP API.

use hearth_testkit::{FakeOpenAi, Gate, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, fake_config, parse_sse, user_texts};

#[tokio::test]
async fn a_message_gets_its_answer() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let v = h.ask("api:t1", "hello hearth").await;
    assert_eq!(v["status"], "succeeded");
    assert_eq!(v["output"]["text"], "echo: hello hearth");
    assert_eq!(v["model"], "fake/fake-model");
    assert_eq!(v["thread_key"], "api:t1");
    assert_eq!(v["user_key"], "api:user:anonymous");
    assert!(v["error"].is_null() && v["confirmation"].is_null());
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["model"], "fake-model");
    assert_eq!(reqs[0]["messages"][0]["role"], "system");
    assert!(
        reqs[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "current_time")
    );
    // GET returns the same envelope.
    let (s, g) = h
        .get(&format!("/v1/runs/{}", v["run_id"].as_str().unwrap()))
        .await;
    assert_eq!(s, 200);
    assert_eq!(g, v);
}

#[tokio::test]
async fn a_tool_call_round_trips_through_current_time() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_tokyo",
        "current_time",
        r#"{"timezone":"Asia/Tokyo"}"#,
    )]));
    fake.push(Reply::text("It is evening in Tokyo."));
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let v = h.ask("api:tools", "what time is it in Tokyo?").await;
    assert_eq!(v["output"]["text"], "It is evening in Tokyo.");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1]["messages"].as_array().unwrap();
    let call = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(call["tool_calls"][0]["id"], "call_tokyo");
    let result = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["tool_call_id"], "call_tokyo");
    let out: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert!(
        out["datetime"].as_str().unwrap().ends_with("+09:00"),
        "{out}"
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());

    let run_id = v["run_id"].as_str().unwrap();
    let (s, trace) = h.get(&format!("/v1/runs/{run_id}/trace")).await;
    assert_eq!(s, 200);
    let kinds: Vec<_> = trace["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["kind"].as_str().unwrap().to_owned(),
                s["name"].as_str().unwrap().to_owned(),
                s["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (
                "llm".to_owned(),
                "fake/fake-model".to_owned(),
                "succeeded".to_owned()
            ),
            (
                "tool".to_owned(),
                "current_time".to_owned(),
                "succeeded".to_owned()
            ),
            (
                "llm".to_owned(),
                "fake/fake-model".to_owned(),
                "succeeded".to_owned()
            ),
        ]
    );
    // The trace never carries arguments or outputs.
    assert!(!trace.to_string().contains("Asia/Tokyo"));

    // The tool exchange is part of the thread's history afterwards.
    let v2 = h.ask("api:tools", "thanks").await;
    assert_eq!(v2["status"], "succeeded");
    let last = fake.requests().pop().unwrap();
    assert!(
        last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool")
    );
}

#[tokio::test]
async fn history_carries_within_a_thread_and_not_across() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    h.ask("api:a", "my name is Ada").await;
    h.ask("api:a", "what is my name?").await;
    h.ask("api:b", "who am I?").await;
    let reqs = fake.requests();
    assert_eq!(user_texts(&reqs[1]), ["my name is Ada", "what is my name?"]);
    let assistant: Vec<_> = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(assistant, [json!("echo: my name is Ada")]);
    assert_eq!(user_texts(&reqs[2]), ["who am I?"]);
    let (_, rt) = h.get("/v1/threads/api:a/runtime").await;
    assert_eq!(rt["message_count"], 4);
    assert_eq!(rt["model"], "fake/fake-model");
}

#[tokio::test]
async fn events_arrive_in_order_and_replay_after_last_event_id() {
    let fake = FakeOpenAi::start().await;
    fake.push(
        Reply::text("one two three four five six")
            .with_chunk_delay(std::time::Duration::from_millis(5)),
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let (s, v) = h
        .post(json!({ "text": "count", "thread_key": "api:sse" }))
        .await;
    assert_eq!(s, 202);
    let run_id = v["run_id"].as_str().unwrap().to_owned();
    // Follow live (the stream ends after the terminal event).
    let events = h.events(&run_id, None).await;
    let ids: Vec<u64> = events.iter().map(|e| e.0).collect();
    assert_eq!(ids, (1..=events.len() as u64).collect::<Vec<_>>());
    let names: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(names.first(), Some(&"run.queued"));
    assert_eq!(names.get(1), Some(&"run.started"));
    assert_eq!(names.last(), Some(&"run.succeeded"));
    assert!(names[2..names.len() - 1].iter().all(|n| *n == "text.delta"));
    let text: String = events
        .iter()
        .filter(|e| e.1 == "text.delta")
        .map(|e| e.2["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "one two three four five six");
    assert_eq!(
        events.last().unwrap().2["output"]["text"],
        "one two three four five six"
    );
    // Replay after an id gives exactly the rest.
    let rest = h.events(&run_id, Some(2)).await;
    assert_eq!(rest, events[2..].to_vec());
    let (s, bad) = h.get(&format!("/v1/runs/{run_id}/events")).await;
    assert_eq!(s, 200, "{bad}");
}

/// A run's event stream read one event at a time, as it arrives.
struct LiveEvents {
    resp: reqwest::Response,
    buf: String,
}

impl LiveEvents {
    /// Opens `/v1/runs/{run_id}/events`, after `last_event_id` when given.
    async fn open(h: &Hearth, run_id: &str, last_event_id: Option<u64>) -> Self {
        let mut rb = h.http.get(h.at(&format!("/v1/runs/{run_id}/events")));
        if let Some(id) = last_event_id {
            rb = rb.header("Last-Event-ID", id.to_string());
        }
        let resp = rb.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        Self {
            resp,
            buf: String::new(),
        }
    }

    /// The next event, or `None` when the stream ends.
    async fn next(&mut self) -> Option<(u64, String, Value)> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                // Keep-alive comments carry no event.
                if let Some(event) = parse_sse(&block).pop() {
                    return Some(event);
                }
                continue;
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), self.resp.chunk())
                .await
                .expect("no event within 30 s")
                .unwrap()?;
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

#[tokio::test]
async fn a_reconnect_with_last_event_id_while_the_run_is_live_gets_exactly_the_rest() {
    let fake = FakeOpenAi::start().await;
    // The role chunk and three of six pieces, then nothing until the gate
    // opens: the run is live for as long as the test needs.
    let gate = Gate::new();
    fake.push(
        Reply::text("one two three four five six")
            .in_pieces(6)
            .pausing_after(4, gate.clone()),
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let (s, v) = h
        .post(json!({ "text": "count", "thread_key": "api:live" }))
        .await;
    assert_eq!(s, 202, "{v}");
    let run_id = v["run_id"].as_str().unwrap().to_owned();

    // Follow until the first piece of text, then drop the connection.
    let mut first = LiveEvents::open(&h, &run_id, None).await;
    let mut seen = Vec::new();
    while let Some(event) = first.next().await {
        let text = event.1 == "text.delta";
        seen.push(event);
        if text {
            break;
        }
    }
    drop(first);
    let last = seen.last().expect("events before the pause").0;
    assert_eq!(seen.last().unwrap().1, "text.delta", "{seen:?}");
    let (_, run) = h.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(
        run["status"], "running",
        "the run must still be live: {run}"
    );

    // Reconnect while the provider's answer is held; let it go on only
    // once the new stream is open, so its events are both replayed and live.
    let mut again = LiveEvents::open(&h, &run_id, Some(last)).await;
    gate.open();
    let mut rest = Vec::new();
    while let Some(event) = again.next().await {
        rest.push(event);
    }

    // Exactly what came after `last`: no gap, no repeat, to the end.
    let all = h.events(&run_id, None).await;
    let after: Vec<_> = all.iter().filter(|e| e.0 > last).cloned().collect();
    assert_eq!(rest, after);
    let ids: Vec<u64> = rest.iter().map(|e| e.0).collect();
    assert_eq!(
        ids,
        ((last + 1)..=(last + rest.len() as u64)).collect::<Vec<_>>()
    );
    assert_eq!(rest.last().unwrap().1, "run.succeeded", "{rest:?}");
    let text: String = seen
        .iter()
        .chain(&rest)
        .filter(|e| e.1 == "text.delta")
        .map(|e| e.2["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "one two three four five six");
}

#[tokio::test]
async fn wait_returns_200_with_the_final_envelope_and_202_on_timeout() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("slow answer").with_delay(std::time::Duration::from_secs(3)));
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let (s, v) = h
        .post(json!({ "text": "hi", "thread_key": "api:w", "wait": true, "wait_timeout_secs": 1 }))
        .await;
    assert_eq!(s, 202, "{v}");
    assert!(matches!(v["status"].as_str(), Some("queued" | "running")));
    let done = h.wait_run(v["run_id"].as_str().unwrap()).await;
    assert_eq!(done["output"]["text"], "slow answer");
    let (s, v) = h
        .post(json!({ "text": "again", "thread_key": "api:w", "wait": true }))
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["status"], "succeeded");
}

#[tokio::test]
async fn idempotent_ingest_makes_one_run_under_concurrent_duplicates() {
    let fake = FakeOpenAi::start().await;
    fake.set_default_delay(std::time::Duration::from_millis(200));
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let http = h.http.clone();
        let url = h.at("/v1/messages");
        tasks.push(tokio::spawn(async move {
            let r = http
                .post(url)
                .header("Idempotency-Key", "key-1")
                .json(&json!({ "text": "pay the bill", "thread_key": "api:idem", "wait": true }))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }));
    }
    let mut ids = std::collections::BTreeSet::new();
    for t in tasks {
        let (s, v) = t.await.unwrap();
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["output"]["text"], "echo: pay the bill");
        ids.insert(v["run_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(fake.request_count(), 1);
    let (_, rt) = h.get("/v1/threads/api:idem/runtime").await;
    assert_eq!(rt["message_count"], 2);
    let (_, runs) = h.get("/v1/runs?thread_key=api:idem").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);
    // The same key in the body is the same run too.
    let (s, v) = h
        .post(
            json!({ "text": "pay the bill", "thread_key": "api:idem", "idempotency_key": "key-1" }),
        )
        .await;
    assert_eq!(s, 202);
    assert_eq!(v["run_id"].as_str().unwrap(), ids.first().unwrap());
    // Header and body disagreeing is refused.
    let r = h
        .http
        .post(h.at("/v1/messages"))
        .header("Idempotency-Key", "a")
        .json(&json!({ "text": "x", "idempotency_key": "b" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "idempotency_mismatch");
}

#[tokio::test]
async fn cancel_stops_a_running_run() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::hang());
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let (_, v) = h
        .post(json!({ "text": "never answered", "thread_key": "api:c" }))
        .await;
    let run_id = v["run_id"].as_str().unwrap().to_owned();
    fake.wait_for_requests(1).await;
    let r = h
        .http
        .post(h.at(&format!("/v1/runs/{run_id}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], "cancelled");
    let events = h.events(&run_id, None).await;
    assert_eq!(events.last().unwrap().1, "run.cancelled");
    // Cancelling again returns the terminal status; the thread keeps working.
    let r = h
        .http
        .post(h.at(&format!("/v1/runs/{run_id}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "cancelled");
    assert_eq!(h.ask("api:c", "next").await["output"]["text"], "echo: next");
}

#[tokio::test]
async fn provider_errors_fail_the_run_with_a_typed_code() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::http_error(
        401,
        json!({ "error": { "message": "bad key" } }),
    ));
    fake.push(Reply::raw_sse("data: {not json\n\n"));
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let (s, v) = h
        .post(json!({ "text": "a", "thread_key": "api:e", "wait": true }))
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["error"]["code"], "provider_auth");
    assert!(v["output"].is_null());
    let (_, v) = h
        .post(json!({ "text": "b", "thread_key": "api:e", "wait": true }))
        .await;
    assert_eq!(v["error"]["code"], "provider_malformed_response");
    // Failed runs leave no half answers in history.
    let (_, rt) = h.get("/v1/threads/api:e/runtime").await;
    assert_eq!(rt["message_count"], 0);
}

#[tokio::test]
async fn models_threads_openapi_and_metrics() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let (s, m) = h.get("/v1/models").await;
    assert_eq!(s, 200);
    assert_eq!(m["default"], "fake/fake-model");
    let ids: Vec<_> = m["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        ids.contains(&"fake/other-model".to_owned()) && ids.contains(&"echo/echo".to_owned()),
        "{ids:?}"
    );
    assert_eq!(m["models"][0]["capabilities"]["streaming"], true);

    let r = h
        .http
        .put(h.at("/v1/threads/api:m/model"))
        .json(&json!({ "model": "echo/echo" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(h.ask("api:m", "hi").await["output"]["text"], "echo: hi");
    assert_eq!(
        fake.request_count(),
        0,
        "the echo provider answered, not the fake"
    );
    let r = h
        .http
        .put(h.at("/v1/threads/api:m/thinking"))
        .json(&json!({ "level": "high" }))
        .send()
        .await
        .unwrap();
    // The echo model has no reasoning control: the effective level is off...
    assert_eq!(r.json::<Value>().await.unwrap()["thinking"], "off");
    // ...and the requested level returns with a model that has one.
    let r = h
        .http
        .put(h.at("/v1/threads/api:m/model"))
        .json(&json!({ "model": "fake/fake-model" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["thinking"], "high");
    let r = h
        .http
        .delete(h.at("/v1/threads/api:m/session"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["message_count"], 0);

    let (s, doc) = h.get("/openapi.json").await;
    assert_eq!(s, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    for p in [
        "/v1/messages",
        "/v1/runs/{run_id}/events",
        "/v1/threads/{thread_key}/model",
        "/healthz",
    ] {
        assert!(doc["paths"].get(p).is_some(), "{p} missing from openapi");
    }
    let (s, metrics) = h.get("/metrics").await;
    assert_eq!(s, 200);
    let metrics = metrics.as_str().unwrap().to_owned();
    assert!(
        metrics.contains("hearth_runs_total{status=\"succeeded\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hearth_run_duration_seconds_bucket"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hearth_llm_call_duration_seconds"),
        "{metrics}"
    );
    let (s, hz) = h.get("/healthz").await;
    assert_eq!((s, hz["status"].as_str()), (200, Some("ok")));
    let (s, rz) = h.get("/readyz").await;
    assert_eq!((s, rz["status"].as_str()), (200, Some("ready")));
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    let (_, doc) = h.get("/openapi.json").await;
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 16, "{}", paths.len());
    for (path, ops) in paths {
        let concrete = path
            .replace("{run_id}", "run_none")
            .replace("{thread_key}", "api:doc");
        for method in ops.as_object().unwrap().keys() {
            let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let r = h
                .http
                .request(m, h.at(&concrete))
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let body = r.text().await.unwrap();
            assert_ne!(status, 405, "{method} {path}: not routed for this method");
            assert!(
                !body.contains("no such endpoint"),
                "{method} {path}: documented but not routed"
            );
        }
    }
}

#[tokio::test]
async fn responses_carry_request_ids_and_json_logs_hold_no_message_text() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}\n[log]\nformat = \"json\"\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let r = h
        .http
        .get(h.at("/healthz"))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "abc-123");
    let r = h.http.get(h.at("/healthz")).send().await.unwrap();
    assert!(
        r.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .starts_with("req-")
    );
    h.ask("api:log", "my secret diary entry").await;
    let status = h.terminate().await;
    assert!(status.success());
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 3, "{log}");
    for line in &lines {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{line}");
    }
    assert!(
        !log.contains("secret diary"),
        "message text leaked into the log"
    );
    assert!(!log.contains("echo: my"), "answer text leaked into the log");
}

#[tokio::test]
async fn tools_lists_every_registered_tool_with_class_and_capability() {
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), None).await;
    for path in ["/v1/tools", "/v1/tools?channel=api"] {
        let (s, v) = h.get(path).await;
        assert_eq!(s, 200, "{v}");
        let tools = v["tools"].as_array().unwrap();
        let find = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
        let time = find("current_time");
        assert_eq!(
            (time["class"].as_str(), time["source"].as_str()),
            (Some("read"), Some("builtin"))
        );
        assert!(time["capability"].is_null());
        assert_eq!(find("web_fetch")["capability"], "web.fetch");
    }
}
