//! The runtime in-process: real SQLite store, fake provider, real engine.

use std::sync::Arc;
use std::time::Duration;

use hearth_agent::{Limits, RetryPolicy};
use hearth_core::{DeliveryMode, Inbound, RunStatus, now_ms};
use hearth_runtime::testing;
use hearth_runtime::{Catalog, Runtime, WaitOutcome};
use hearth_store::{NewRun, Store};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::ToolRegistry;
use serde_json::Value;

use crate::common;

struct Setup {
    rt: Runtime,
    store: Arc<dyn Store>,
    fake: FakeOpenAi,
    _dir: tempfile::TempDir,
}

async fn setup_with(limits: Limits, before_start: impl FnOnce(&Arc<dyn Store>)) -> Setup {
    setup_full(limits, "", before_start).await
}

/// `extra` is appended to the generated hearth.toml (after the fake provider).
async fn setup_full(
    limits: Limits,
    extra: &str,
    before_start: impl FnOnce(&Arc<dyn Store>),
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    before_start(&store);
    let toml = common::fake_toml(&fake.base_url(), "", extra);
    let retry = RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        max_total_wait: Duration::from_secs(5),
    };
    let rt = common::build(
        common::builder(dir.path(), &toml, &store)
            .tools(ToolRegistry::with_builtins())
            .limits(limits)
            .system_prompt("be brief")
            .engine(move |e| e.with_retry(retry)),
    )
    .await;
    rt.start().await.unwrap();
    Setup {
        rt,
        store,
        fake,
        _dir: dir,
    }
}

async fn setup() -> Setup {
    setup_with(Limits::default(), |_| {}).await
}

fn msg(thread: &str, text: &str, mode: DeliveryMode) -> Inbound {
    Inbound {
        source: "test".into(),
        thread_key: testing::thread(thread),
        user_key: testing::user("test:user:1"),
        text: text.into(),
        delivery_mode: mode,
        idempotency_key: None,
        scope: None,
        roles: Vec::new(),
    }
}

async fn finished(rt: &Runtime, run_id: &str) -> hearth_core::RunEnvelope {
    match rt.wait(run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(e) => e,
        WaitOutcome::Pending(e) => panic!("run not finished: {e:?}"),
    }
}

fn user_texts(req: &Value) -> Vec<String> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_steered_message_reaches_the_active_run_before_its_next_model_call() {
    let s = setup().await;
    s.fake
        .push(Reply::text("working on it").with_delay(Duration::from_millis(300)));
    let first =
        s.rt.ingest(msg("t:steer", "start", DeliveryMode::FollowUp))
            .await
            .unwrap();
    s.fake.wait_for_requests(1).await;
    let steered =
        s.rt.ingest(msg("t:steer", "also this", DeliveryMode::Steer))
            .await
            .unwrap();
    assert_eq!(
        steered.run_id, first.run_id,
        "steer joins the active run, no new run"
    );
    let done = finished(&s.rt, &first.run_id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(done.output.unwrap().text, "echo: also this");
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(user_texts(&reqs[1]), ["start", "also this"]);
    // With no active run, steer is an ordinary message.
    let alone =
        s.rt.ingest(msg("t:steer", "later", DeliveryMode::Steer))
            .await
            .unwrap();
    assert_ne!(alone.run_id, first.run_id);
    assert_eq!(
        finished(&s.rt, &alone.run_id).await.status,
        RunStatus::Succeeded
    );
}

#[tokio::test]
async fn hitting_a_limit_fails_the_run_with_a_clear_message() {
    let limits = Limits {
        max_llm_calls: 3,
        ..Limits::default()
    };
    let s = setup_with(limits, |_| {}).await;
    for i in 0..3 {
        s.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
            format!("c{i}"),
            "current_time",
            "{}",
        )]));
    }
    let run =
        s.rt.ingest(msg("t:limit", "loop forever", DeliveryMode::FollowUp))
            .await
            .unwrap();
    let done = finished(&s.rt, &run.run_id).await;
    assert_eq!(done.status, RunStatus::Failed);
    let err = done.error.unwrap();
    assert_eq!(err.code, "limit_exceeded");
    assert!(err.message.contains("max_llm_calls = 3"), "{}", err.message);
    assert_eq!(s.fake.request_count(), 3);
}

#[tokio::test]
async fn an_unknown_tool_becomes_an_error_result_for_the_model() {
    let s = setup().await;
    s.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "launch_rocket",
        "{}",
    )]));
    s.fake.push(Reply::text("I cannot do that."));
    let run =
        s.rt.ingest(msg("t:unknown", "launch", DeliveryMode::FollowUp))
            .await
            .unwrap();
    let done = finished(&s.rt, &run.run_id).await;
    assert_eq!(done.output.unwrap().text, "I cannot do that.");
    let reqs = s.fake.requests();
    let tool = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool["content"].as_str().unwrap().contains("unknown tool"),
        "{tool}"
    );
}

#[tokio::test]
async fn cancelling_a_queued_run_removes_it_and_the_thread_goes_on() {
    let s = setup().await;
    s.fake.push(Reply::hang());
    let a =
        s.rt.ingest(msg("t:cq", "a", DeliveryMode::FollowUp))
            .await
            .unwrap();
    s.fake.wait_for_requests(1).await;
    let b =
        s.rt.ingest(msg("t:cq", "b", DeliveryMode::FollowUp))
            .await
            .unwrap();
    assert_eq!(b.status, RunStatus::Queued);
    assert_eq!(
        s.rt.cancel(&b.run_id).await.unwrap().status,
        RunStatus::Cancelled
    );
    assert_eq!(
        s.rt.cancel(&a.run_id).await.unwrap().status,
        RunStatus::Cancelled
    );
    let c =
        s.rt.ingest(msg("t:cq", "c", DeliveryMode::FollowUp))
            .await
            .unwrap();
    assert_eq!(
        finished(&s.rt, &c.run_id).await.output.unwrap().text,
        "echo: c"
    );
    assert_eq!(s.fake.request_count(), 2, "b never reached the provider");
}

#[tokio::test]
async fn a_new_session_cancels_and_clears_history() {
    let s = setup().await;
    let a =
        s.rt.ingest(msg("t:new", "remember me", DeliveryMode::FollowUp))
            .await
            .unwrap();
    finished(&s.rt, &a.run_id).await;
    assert_eq!(
        s.rt.thread_runtime(&testing::thread("t:new"))
            .await
            .unwrap()
            .message_count,
        2
    );
    s.fake.push(Reply::hang());
    let b =
        s.rt.ingest(msg("t:new", "hang", DeliveryMode::FollowUp))
            .await
            .unwrap();
    s.fake.wait_for_requests(2).await;
    let rt = s.rt.new_session(&testing::thread("t:new")).await.unwrap();
    assert_eq!(rt.message_count, 0);
    assert_eq!(
        s.rt.get_run(&b.run_id).await.unwrap().status,
        RunStatus::Cancelled
    );
    let c =
        s.rt.ingest(msg("t:new", "fresh", DeliveryMode::FollowUp))
            .await
            .unwrap();
    finished(&s.rt, &c.run_id).await;
    assert_eq!(user_texts(&s.fake.requests()[2]), ["fresh"]);
}

#[tokio::test]
async fn runs_left_queued_by_a_dead_process_are_recovered_at_start() {
    let s = setup_with(Limits::default(), |store| {
        let store = store.clone();
        // Written as a crashed process would have left it: stored, never run.
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(async {
                    store
                        .create_run(NewRun {
                            run_id: "run_left_behind".into(),
                            thread_key: "t:rec".into(),
                            user_key: "test:user:1".into(),
                            source: "test".into(),
                            input: "are you there?".into(),
                            idempotency_key: None,
                            created_at: now_ms(),
                            scope: None,
                            roles: Vec::new(),
                            parent_run_id: None,
                        })
                        .await
                        .unwrap();
                })
        })
        .join()
        .unwrap();
    })
    .await;
    let done = finished(&s.rt, "run_left_behind").await;
    assert_eq!(done.output.unwrap().text, "echo: are you there?");
    assert!(s.store.unfinished_runs().await.unwrap().is_empty());
}

#[tokio::test]
async fn ingest_refuses_bad_input_and_shutdown_stops_new_work() {
    let s = setup().await;
    for t in ["", "  "] {
        assert!(
            matches!(
                s.rt.ingest(msg("t:x", t, DeliveryMode::FollowUp)).await,
                Err(hearth_runtime::RuntimeError::InvalidInput(_))
            ),
            "{t:?}"
        );
    }
    // A bad key never reaches the runtime: it is refused where it is made,
    // as the runtime's own refusal of the input.
    for thread in ["", "a\nb"] {
        let e = hearth_core::ThreadKey::new(thread).unwrap_err();
        assert!(
            matches!(
                hearth_runtime::RuntimeError::from(e),
                hearth_runtime::RuntimeError::InvalidInput(_)
            ),
            "{thread:?}"
        );
    }
    assert_eq!(s.rt.shutdown(Duration::from_secs(1)).await, 0);
    assert!(matches!(
        s.rt.ingest(msg("t:x", "late", DeliveryMode::FollowUp))
            .await,
        Err(hearth_runtime::RuntimeError::ShuttingDown)
    ));
}

#[tokio::test]
async fn a_steer_stored_before_a_crash_reaches_the_recovered_run() {
    let s = setup_with(Limits::default(), |store| {
        let store = store.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(async {
                    store
                        .create_run(NewRun {
                            run_id: "run_steered".into(),
                            thread_key: "t:srec".into(),
                            user_key: "test:user:1".into(),
                            source: "test".into(),
                            input: "first".into(),
                            idempotency_key: None,
                            created_at: now_ms(),
                            scope: None,
                            roles: Vec::new(),
                            parent_run_id: None,
                        })
                        .await
                        .unwrap();
                    store
                        .add_steer("run_steered", "and this", now_ms())
                        .await
                        .unwrap();
                })
        })
        .join()
        .unwrap();
    })
    .await;
    let done = finished(&s.rt, "run_steered").await;
    assert_eq!(done.output.unwrap().text, "echo: and this");
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(user_texts(&reqs[0]), ["first", "and this"]);
    // The next run's history holds both messages, once.
    let next =
        s.rt.ingest(msg("t:srec", "next", DeliveryMode::FollowUp))
            .await
            .unwrap();
    finished(&s.rt, &next.run_id).await;
    assert_eq!(
        user_texts(&s.fake.requests()[1]),
        ["first", "and this", "next"]
    );
}

fn trace(steps: &[hearth_store::StepRecord]) -> Vec<(String, &'static str)> {
    steps
        .iter()
        .map(|s| (s.name.clone(), s.status.as_str()))
        .collect()
}

#[tokio::test]
async fn a_rate_limited_call_is_retried_and_the_trace_shows_each_attempt() {
    let s = setup().await;
    s.fake.push(
        Reply::http_error(429, serde_json::json!({"error": {"message": "slow down"}}))
            .with_header("retry-after", "0"),
    );
    let run =
        s.rt.ingest(msg("t:retry", "hi", DeliveryMode::FollowUp))
            .await
            .unwrap();
    let done = finished(&s.rt, &run.run_id).await;
    assert_eq!(done.output.unwrap().text, "echo: hi");
    assert_eq!(s.fake.request_count(), 2);
    let steps = s.rt.trace(&run.run_id).await.unwrap();
    assert_eq!(
        trace(&steps),
        [
            ("fake/m".to_owned(), "failed"),
            ("fake/m".to_owned(), "succeeded")
        ]
    );
    assert_eq!(steps[0].payload["error"]["kind"], "rate_limited");
}

#[tokio::test]
async fn a_model_that_keeps_failing_fails_over_to_the_fallback() {
    let backup = FakeOpenAi::start().await;
    let extra = format!(
        "fallback = [\"backup/b\"]\n[llm.providers.backup]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"b\"]\n",
        backup.base_url()
    );
    let s = setup_full(Limits::default(), &extra, |_| {}).await;
    for _ in 0..3 {
        s.fake.push(Reply::http_error(
            500,
            serde_json::json!({"error": {"message": "boom"}}),
        ));
    }
    let run =
        s.rt.ingest(msg("t:fo", "rescue me", DeliveryMode::FollowUp))
            .await
            .unwrap();
    let done = finished(&s.rt, &run.run_id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(done.output.unwrap().text, "echo: rescue me");
    // The envelope names the model that answered, and the one asked for.
    assert_eq!(
        (done.model.as_deref(), done.requested_model.as_deref()),
        (Some("backup/b"), Some("fake/m"))
    );
    let listed = s.rt.list_runs(&Default::default()).await.unwrap();
    let listed = listed.iter().find(|r| r.run_id == run.run_id).unwrap();
    assert_eq!(listed.requested_model.as_deref(), Some("fake/m"));
    assert_eq!(s.fake.request_count(), 3, "three attempts on the primary");
    assert_eq!(backup.request_count(), 1);
    assert_eq!(backup.requests()[0]["model"], "b");
    let steps = s.rt.trace(&run.run_id).await.unwrap();
    assert_eq!(
        trace(&steps),
        [
            ("fake/m".to_owned(), "failed"),
            ("fake/m".to_owned(), "failed"),
            ("fake/m".to_owned(), "failed"),
            ("backup/b".to_owned(), "succeeded"),
        ]
    );
}

#[tokio::test]
async fn request_errors_and_broken_streams_are_not_retried() {
    let s = setup().await;
    s.fake.push(Reply::http_error(
        400,
        serde_json::json!({"error": {"message": "bad field"}}),
    ));
    let run =
        s.rt.ingest(msg("t:nr", "a", DeliveryMode::FollowUp))
            .await
            .unwrap();
    let done = finished(&s.rt, &run.run_id).await;
    assert_eq!(done.error.unwrap().code, "provider_invalid_request");
    assert_eq!(s.fake.request_count(), 1);
    // Text already streamed to followers is not streamed twice.
    s.fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial\"}}]}\n\ndata: {\"error\":{\"message\":\"died\"}}\n\n",
    ));
    let run =
        s.rt.ingest(msg("t:nr", "b", DeliveryMode::FollowUp))
            .await
            .unwrap();
    let done = finished(&s.rt, &run.run_id).await;
    assert_eq!(done.status, RunStatus::Failed);
    assert_eq!(s.fake.request_count(), 2);
}

#[tokio::test]
async fn an_unknown_fallback_is_a_configuration_error() {
    let toml = "[llm]\nfallback = [\"nope/x\"]\n";
    let config = hearth_config::load_str(toml, "test", Vec::new()).unwrap();
    let err = Catalog::from_config(
        &config,
        &Default::default(),
        &Default::default(),
        reqwest::Client::new(),
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("llm.fallback"), "{err}");
}

fn tool_names(req: &Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|x| x["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn system_text(req: &Value) -> String {
    req["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_provider_without_tools_gets_none_and_is_told_so() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let toml = format!(
        "[llm]\ndefault_model = \"plain/m\"\n[llm.providers.plain]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"m\"]\ncapabilities = {{ tools = false, thinking = false }}\n",
        fake.base_url()
    );
    let rt = common::build(
        common::builder(dir.path(), &toml, &store)
            .tools(ToolRegistry::with_builtins())
            .system_prompt("be brief"),
    )
    .await;
    rt.start().await.unwrap();
    let th = rt
        .set_thinking(
            &testing::thread("t:plain"),
            hearth_core::ThinkingLevel::High,
        )
        .await
        .unwrap();
    assert_eq!(
        th.thinking, "off",
        "clamped: this model has no reasoning control"
    );
    let run = rt
        .ingest(msg("t:plain", "hi", DeliveryMode::FollowUp))
        .await
        .unwrap();
    finished(&rt, &run.run_id).await;
    let req = &fake.requests()[0];
    assert!(tool_names(req).is_empty(), "{req}");
    assert!(system_text(req).contains("No tools are available"), "{req}");
    assert!(
        req.get("reasoning_effort").is_none(),
        "thinking clamped to off: {req}"
    );
}

#[tokio::test]
async fn model_dependent_tools_are_dropped_once_the_server_rejects_them() {
    let s = setup().await;
    s.fake.push(Reply::http_error(
        400,
        serde_json::json!({"error": {"message": "this model does not support tools"}}),
    ));
    let a =
        s.rt.ingest(msg("t:md", "first", DeliveryMode::FollowUp))
            .await
            .unwrap();
    assert_eq!(
        finished(&s.rt, &a.run_id).await.status,
        RunStatus::Succeeded
    );
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 2);
    assert!(tool_names(&reqs[0]).contains(&"current_time".to_owned()));
    assert!(tool_names(&reqs[1]).is_empty(), "retried without tools");
    assert!(system_text(&reqs[1]).contains("No tools are available"));
    // The next run goes prompt-only from the start.
    let b =
        s.rt.ingest(msg("t:md", "second", DeliveryMode::FollowUp))
            .await
            .unwrap();
    finished(&s.rt, &b.run_id).await;
    let reqs = s.fake.requests();
    assert_eq!(reqs.len(), 3);
    assert!(tool_names(&reqs[2]).is_empty());
    // An ordinary bad request is not mistaken for a tools rejection.
    s.fake.push(Reply::http_error(
        400,
        serde_json::json!({"error": {"message": "max_tokens too large"}}),
    ));
    let c =
        s.rt.ingest(msg("t:md2", "x", DeliveryMode::FollowUp))
            .await
            .unwrap();
    assert_eq!(finished(&s.rt, &c.run_id).await.status, RunStatus::Failed);
}

/// A tool that leaks a credential in its output, to check the firewall.
struct Leaky {
    spec: hearth_core::ToolSpec,
}

#[async_trait::async_trait]
impl hearth_tools::Tool for Leaky {
    fn spec(&self) -> &hearth_core::ToolSpec {
        &self.spec
    }
    fn class(&self) -> hearth_tools::ToolClass {
        hearth_tools::ToolClass::Read
    }
    async fn call(
        &self,
        _ctx: &hearth_tools::ToolContext,
        _args: Value,
    ) -> Result<Value, hearth_tools::ToolError> {
        Ok(
            serde_json::json!({ "config": format!("token={}", concat!("ghp_", "R8fQ2mZkL0pXv9TnB4cW7yHs1dJ6aE3uGiKo")) }),
        )
    }
}

fn db_bytes(dir: &std::path::Path) -> Vec<u8> {
    let mut all = Vec::new();
    for f in ["hearth.db", "hearth.db-wal"] {
        if let Ok(b) = std::fs::read(dir.join(f)) {
            all.extend(b);
        }
    }
    all
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn secrets_are_redacted_before_storage_and_before_any_provider_sees_them() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let toml = common::fake_toml(&fake.base_url(), "capabilities = { tools = true }", "");
    let mut tools = ToolRegistry::with_builtins();
    tools.register(Arc::new(Leaky {
        spec: hearth_core::ToolSpec {
            name: "read_config".into(),
            description: "reads the config".into(),
            parameters: serde_json::json!({"type": "object"}),
        },
    }));
    let rt = common::build(
        common::builder(dir.path(), &toml, &store)
            .tools(tools)
            .system_prompt("be brief"),
    )
    .await;
    rt.start().await.unwrap();

    let aws = concat!("AKIA", "Z7QXKJ3M9PLW2RTY");
    let ghp = concat!("ghp_", "R8fQ2mZkL0pXv9TnB4cW7yHs1dJ6aE3uGiKo");
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "read_config",
        "{}",
    )]));
    fake.push(Reply::text("done"));
    let run = rt
        .ingest(msg(
            "t:fw",
            &format!("my key is {aws}, please check the config"),
            DeliveryMode::FollowUp,
        ))
        .await
        .unwrap();
    assert_eq!(
        finished(&rt, &run.run_id).await.status,
        RunStatus::Succeeded
    );
    let reqs = fake.requests();
    let all = serde_json::to_string(&reqs).unwrap();
    assert!(!all.contains(aws), "the message's key reached the provider");
    assert!(!all.contains(ghp), "the tool's token reached the provider");
    assert!(all.contains("[REDACTED:aws_access_key:"), "{all}");
    assert!(all.contains("[REDACTED:github_token:"), "{all}");
    assert!(user_texts(&reqs[0])[0].starts_with("my key is [REDACTED:"));
    // Nothing of either secret is on disk: run input, journal, history.
    drop(rt);
    let bytes = db_bytes(dir.path());
    assert!(!bytes.is_empty());
    assert!(
        !contains(&bytes, aws) && !contains(&bytes, ghp),
        "a secret reached the database file"
    );
}
