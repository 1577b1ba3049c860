//! Crash safety: SIGKILL mid-run loses nothing and answers exactly once.

use std::time::Duration;

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::json;

use crate::harness::{Hearth, fake_config, user_texts};

#[tokio::test]
async fn a_run_in_flight_survives_sigkill_and_answers_once() {
    let fake = FakeOpenAi::start().await;
    // The first call hangs long enough for the kill; the retry after restart
    // gets the default (echo) answer.
    fake.push(Reply::text("never delivered").with_delay(Duration::from_secs(120)));
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (s, first) = h
        .post(json!({ "text": "first", "thread_key": "api:crash" }))
        .await;
    assert_eq!(s, 202);
    fake.wait_for_requests(1).await;
    // A second message accepted while the first is in flight is queued behind it.
    let (s, second) = h
        .post(json!({ "text": "second", "thread_key": "api:crash" }))
        .await;
    assert_eq!(s, 202);
    assert_eq!(second["status"], "queued");
    h.kill().await;

    let h = Hearth::start(dir.path(), Some(&config)).await;
    let a = h.wait_run(first["run_id"].as_str().unwrap()).await;
    let b = h.wait_run(second["run_id"].as_str().unwrap()).await;
    assert_eq!(a["status"], "succeeded", "{a}");
    assert_eq!(a["output"]["text"], "echo: first");
    assert_eq!(b["output"]["text"], "echo: second");
    let (_, rt) = h.get("/v1/threads/api:crash/runtime").await;
    assert_eq!(
        rt["message_count"], 4,
        "one user message and one answer per run"
    );
    let (_, runs) = h.get("/v1/runs?thread_key=api:crash").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 2);
    // The second run saw the first exchange exactly once.
    let last = fake.requests().pop().unwrap();
    assert_eq!(user_texts(&last), ["first", "second"]);
}

#[tokio::test]
async fn a_finished_tool_step_is_not_redone_after_a_crash() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "current_time",
        "{}",
    )]));
    fake.push(Reply::text("never delivered").with_delay(Duration::from_secs(120)));
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (_, v) = h
        .post(json!({ "text": "time?", "thread_key": "api:resume" }))
        .await;
    let run_id = v["run_id"].as_str().unwrap().to_owned();
    fake.wait_for_requests(2).await;
    h.kill().await;

    let h = Hearth::start(dir.path(), Some(&config)).await;
    let done = h.wait_run(&run_id).await;
    assert_eq!(done["status"], "succeeded");
    let reqs = fake.requests();
    assert_eq!(
        reqs.len(),
        3,
        "resumed with the second model call, not from scratch"
    );
    let msgs = reqs[2]["messages"].as_array().unwrap();
    assert_eq!(msgs.iter().filter(|m| m["role"] == "tool").count(), 1);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    let (_, trace) = h.get(&format!("/v1/runs/{run_id}/trace")).await;
    let steps = trace["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps.iter().filter(|s| s["kind"] == "tool").count(), 1);
}

#[tokio::test]
async fn sigterm_exits_cleanly_and_strict_durability_works() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}\n[store]\ndurability = \"strict\"\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    assert_eq!(
        h.ask("api:s", "kept?").await["output"]["text"],
        "echo: kept?"
    );
    let status = h.terminate().await;
    assert!(status.success(), "{status:?}");
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (_, rt) = h.get("/v1/threads/api:s/runtime").await;
    assert_eq!(rt["message_count"], 2);
}

#[tokio::test]
async fn sigterm_starts_no_queued_run_and_exits_when_the_runs_in_flight_end() {
    let fake = FakeOpenAi::start().await;
    // Long enough that every thread's first call is still in flight at SIGTERM.
    fake.set_default_delay(Duration::from_secs(3));
    let dir = tempfile::tempdir().unwrap();
    // A grace far longer than the calls: hearth must not wait it out.
    let config = format!(
        "{}\n[server]\nshutdown_grace_secs = 120\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let mut runs = Vec::new();
    for round in 0..3 {
        for t in 0..20 {
            let (s, env) = h
                .post(json!({ "text": format!("m{round}"), "thread_key": format!("api:busy{t}") }))
                .await;
            assert_eq!(s, 202, "{env}");
            runs.push(env["run_id"].as_str().unwrap().to_owned());
        }
    }
    fake.wait_for_requests(20).await;
    let started = std::time::Instant::now();
    let status = h.terminate().await;
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "hearth waited out the grace instead of exiting when its runs ended"
    );
    assert_eq!(
        fake.request_count(),
        20,
        "runs queued behind the busy ones were started after SIGTERM"
    );

    // The queued runs were kept and run at the next start.
    fake.set_default_delay(Duration::ZERO);
    let h = Hearth::start(dir.path(), Some(&config)).await;
    for run_id in &runs {
        let env = h.wait_run(run_id).await;
        assert_eq!(env["status"], "succeeded", "{env}");
    }
    assert_eq!(fake.request_count(), 60);
}

#[tokio::test]
async fn sigterm_with_a_run_longer_than_the_grace_exits_after_it_and_the_run_is_recovered() {
    let fake = FakeOpenAi::start().await;
    // The first answer stalls for good after its first piece of text; the
    // call after the restart gets the default (echo) answer.
    fake.push(Reply::text("never finished").stalling_after(2));
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}\n[server]\nshutdown_grace_secs = 1\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (s, env) = h
        .post(json!({ "text": "long", "thread_key": "api:long" }))
        .await;
    assert_eq!(s, 202, "{env}");
    let run_id = env["run_id"].as_str().unwrap().to_owned();
    fake.wait_for_requests(1).await;

    let started = std::time::Instant::now();
    let status = h.terminate().await;
    let took = started.elapsed();
    assert!(status.success(), "{status:?}");
    // It waits the grace for the run, then leaves it for recovery; the
    // margin covers closing the server and the MCP and channel tasks.
    assert!(
        took >= Duration::from_millis(900),
        "exited after {took:?}, before the 1 s grace for the run in flight"
    );
    assert!(
        took < Duration::from_secs(1 + 4),
        "exited after {took:?}, long after the 1 s grace"
    );

    let h = Hearth::start(dir.path(), Some(&config)).await;
    let env = h.wait_run(&run_id).await;
    assert_eq!(env["status"], "succeeded", "{env}");
    assert_eq!(env["output"]["text"], "echo: long");
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn a_saturated_hearth_answers_503_overloaded_with_retry_after_and_loses_nothing() {
    let fake = FakeOpenAi::start().await;
    fake.set_default_delay(Duration::from_millis(500));
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}\n[server]\nmax_queued_runs = 2\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let mut accepted = Vec::new();
    for t in 0..2 {
        let (s, env) = h
            .post(json!({ "text": "hi", "thread_key": format!("api:full{t}") }))
            .await;
        assert_eq!(s, 202, "{env}");
        accepted.push(env["run_id"].as_str().unwrap().to_owned());
    }
    let r = h
        .http
        .post(h.at("/v1/messages"))
        .json(&json!({ "text": "one too many", "thread_key": "api:full9" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    let retry_after = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(retry_after.as_deref(), Some("1"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded", "{body}");
    // Nothing of the refused message was stored.
    let (_, runs) = h.get("/v1/runs?thread_key=api:full9").await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 0);
    // Once the queue drains, messages are taken again.
    for run_id in &accepted {
        assert_eq!(h.wait_run(run_id).await["status"], "succeeded");
    }
    let (s, env) = h
        .post(json!({ "text": "now", "thread_key": "api:full9" }))
        .await;
    assert_eq!(s, 202, "{env}");
    h.kill().await;
}

#[tokio::test]
async fn a_recovered_run_waits_for_the_mcp_server_of_its_pending_call() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_1",
        "fk__write_note",
        r#"{"text":"remember"}"#,
    )]));
    let dir = tempfile::tempdir().unwrap();
    // The server takes 1.5 s to start, far longer than a recovered run
    // takes to resume.
    let config = format!(
        "{}[mcp.servers.fk]\ncommand = \"{}\"\nargs = [\"--start-delay-ms\", \"1500\"]\npreset = \"member\"\n",
        fake_config(&fake.base_url()),
        hearth_testkit::fake_mcp::fake_mcp_bin().display()
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !h
        .get("/v1/mcp/servers")
        .await
        .1
        .to_string()
        .contains("\"ready\"")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "fk never became ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A write-class call waits for the user; hearth is killed meanwhile.
    let (s, waiting) = h
        .post(json!({ "text": "note it", "thread_key": "api:recover-mcp", "wait": true }))
        .await;
    assert_eq!(s, 202, "{waiting}");
    assert_eq!(
        waiting["confirmation"]["tool"], "fk__write_note",
        "{waiting}"
    );
    let run_id = waiting["run_id"].as_str().unwrap().to_owned();
    let token = waiting["confirmation"]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    h.kill().await;

    fake.push(Reply::text("noted it"));
    let h = Hearth::start(dir.path(), Some(&config)).await;
    // The user approves; the recovered run finds the answer once it resumes,
    // which it does only when fk is up (not with an "unknown tool").
    let r = h
        .http
        .post(h.at(&format!("/v1/confirmations/{token}")))
        .json(&json!({"user_key": "api:user:anonymous", "approve": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let done = h.wait_run(&run_id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["output"]["text"], "noted it", "{done}");
    let last = fake.requests().pop().unwrap();
    let result = last["messages"].to_string();
    assert!(!result.contains("unknown tool"), "{result}");
    assert!(result.contains("noted: remember"), "{result}");
}
