//! The engine with a real store and the fake provider: how tool calls run.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use hearth_agent::{Candidate, Engine, EventSink, Limits, Outcome, RunInput, ToolMode};
use hearth_core::{ModelRef, RunEventKind, ThinkingLevel, ToolSpec};
use hearth_llm::{OpenAiCompatConfig, OpenAiCompatProvider};
use hearth_store::{Durability, HistorySeen, SqliteStore, Store};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::{Tool, ToolClass, ToolError, ToolRegistry};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct Sink;
impl EventSink for Sink {
    fn emit(&self, _kind: RunEventKind, _data: Value) {}
}

fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: String::new(),
        parameters: json!({"type": "object"}),
    }
}

/// Read tools that only finish once both are running at the same time.
struct Meet {
    spec: ToolSpec,
    barrier: Arc<tokio::sync::Barrier>,
}

#[async_trait::async_trait]
impl Tool for Meet {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }
    async fn call(
        &self,
        _ctx: &hearth_tools::ToolContext,
        _args: Value,
    ) -> Result<Value, ToolError> {
        self.barrier.wait().await;
        Ok(json!({ "met": self.spec.name }))
    }
}

/// Write tools that record their order and whether two ever overlapped.
struct Write {
    spec: ToolSpec,
    busy: Arc<AtomicBool>,
    overlaps: Arc<AtomicUsize>,
    order: Arc<Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl Tool for Write {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn class(&self) -> ToolClass {
        ToolClass::Write
    }
    async fn call(
        &self,
        _ctx: &hearth_tools::ToolContext,
        _args: Value,
    ) -> Result<Value, ToolError> {
        if self.busy.swap(true, Ordering::SeqCst) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        // Give a concurrent call the chance to show itself.
        tokio::task::yield_now().await;
        self.order.lock().unwrap().push(self.spec.name.clone());
        self.busy.store(false, Ordering::SeqCst);
        Ok(json!({ "wrote": self.spec.name }))
    }
}

async fn engine_with(tools: ToolRegistry, dir: &std::path::Path) -> (Engine, Arc<dyn Store>) {
    let limits = Limits {
        tool_timeout: Duration::from_secs(10),
        ..Limits::default()
    };
    engine_with_limits(tools, dir, limits).await
}

async fn engine_with_limits(
    tools: ToolRegistry,
    dir: &std::path::Path,
    limits: Limits,
) -> (Engine, Arc<dyn Store>) {
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.join("e.db"), Durability::Normal).unwrap());
    // These tests are about ordering and containment; confirmations have
    // their own tests in hearth-runtime.
    let confirm = hearth_agent::ConfirmPolicy {
        confirm_writes: false,
        ..Default::default()
    };
    (
        Engine::new(store.clone(), tools, limits, "sys".into()).with_confirmations(confirm),
        store,
    )
}

/// A write tool that never answers.
struct Hangs(ToolSpec);

#[async_trait::async_trait]
impl Tool for Hangs {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn class(&self) -> ToolClass {
        ToolClass::Write
    }
    async fn call(
        &self,
        _ctx: &hearth_tools::ToolContext,
        _args: Value,
    ) -> Result<Value, ToolError> {
        std::future::pending().await
    }
}

async fn run(engine: &Engine, store: &Arc<dyn Store>, fake: &FakeOpenAi, text: &str) -> Outcome {
    let input = stored_run(store, fake, text).await;
    engine.run(input, &Sink).await.outcome
}

/// A run of `text` stored in `store`, on the fake provider, as the engine
/// gets it (not fresh: it reads its journal).
async fn stored_run(store: &Arc<dyn Store>, fake: &FakeOpenAi, text: &str) -> RunInput {
    let run_id = hearth_core::new_run_id();
    store
        .create_run(hearth_store::NewRun {
            run_id: run_id.clone(),
            thread_key: "t".into(),
            user_key: "u".into(),
            source: "test".into(),
            input: text.into(),
            idempotency_key: None,
            created_at: hearth_core::now_ms(),
            scope: None,
            roles: Vec::new(),
            parent_run_id: None,
        })
        .await
        .unwrap();
    let provider = OpenAiCompatProvider::new(
        {
            // The fake, like OpenAI, refuses a call without a key.
            let mut cfg = OpenAiCompatConfig::new("fake", fake.base_url());
            cfg.api_key = Some("test-key".into());
            cfg
        },
        reqwest::Client::new(),
    )
    .unwrap();
    RunInput {
        run_id,
        thread_key: "t".into(),
        text: text.into(),
        user_key: "test:user:1".into(),
        scope: "global".into(),
        roles: Vec::new(),
        candidates: vec![Candidate {
            model: ModelRef::parse("fake/m").unwrap(),
            provider: Arc::new(provider),
            tools: ToolMode::Send,
            thinking: false,
            context_window: None,
        }],
        thinking: ThinkingLevel::Off,
        cancel: CancellationToken::new(),
        steer: None,
        incognito: false,
        journal: None,
        replies: None,
        pinned: false,
        first_step: 0,
        mode: hearth_core::PermissionMode::Ask,
        tools: None,
        max_steps: None,
        asker: None,
        family: None,
        fresh: false,
        history_seen: None,
    }
}

/// A run stored and never run here (`fresh`) reads neither its journal nor
/// its stored steers: its steers come through its inbox. Any other run
/// reads them, so a run resumed after a restart sees a steer stored before.
#[tokio::test]
async fn a_fresh_run_reads_no_stored_steer_and_any_other_run_does() {
    for fresh in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (engine, store) = engine_with(ToolRegistry::new(), dir.path()).await;
        let fake = FakeOpenAi::start().await;
        fake.push(Reply::text("done"));
        let mut input = stored_run(&store, &fake, "first").await;
        store
            .add_steer(&input.run_id, "stored steer", hearth_core::now_ms())
            .await
            .unwrap();
        input.fresh = fresh;
        assert_eq!(
            engine.run(input, &Sink).await.outcome,
            Outcome::Succeeded("done".into())
        );
        let sent = fake.requests()[0]["messages"].to_string();
        assert_eq!(
            sent.contains("stored steer"),
            !fresh,
            "fresh {fresh}: {sent}"
        );
    }
}

/// A run marked as its thread's first (`HistorySeen::Empty`: the store said,
/// as it stored the run claimed, that the thread had no message) reads no
/// history; any other run reads it (one whose insert saw a newest row, from
/// a store that holds no context, too), so a thread's earlier turns reach
/// the model.
#[tokio::test]
async fn a_run_on_a_new_thread_reads_no_history_and_any_other_run_does() {
    for seen in [None, Some(HistorySeen::Newest(1)), Some(HistorySeen::Empty)] {
        let dir = tempfile::tempdir().unwrap();
        let (engine, store) = engine_with(ToolRegistry::new(), dir.path()).await;
        let fake = FakeOpenAi::start().await;
        fake.push(Reply::text("noted"));
        fake.push(Reply::text("done"));
        // The earlier turn, stored as the runtime ends a run.
        let earlier = stored_run(&store, &fake, "the earlier turn").await;
        let run_id = earlier.run_id.clone();
        let result = engine.run(earlier, &Sink).await;
        assert_eq!(result.outcome, Outcome::Succeeded("noted".into()));
        let ended = super::compaction::ended_as(&run_id, result);
        assert!(store.finish_run(ended).await.unwrap());
        let mut input = stored_run(&store, &fake, "second").await;
        input.fresh = true;
        input.history_seen = seen;
        assert_eq!(
            engine.run(input, &Sink).await.outcome,
            Outcome::Succeeded("done".into())
        );
        let sent = fake.requests()[1]["messages"].to_string();
        assert_eq!(
            sent.contains("the earlier turn"),
            seen != Some(HistorySeen::Empty),
            "{seen:?}: {sent}"
        );
    }
}

#[tokio::test]
async fn read_calls_proposed_together_run_concurrently() {
    let dir = tempfile::tempdir().unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let mut tools = ToolRegistry::new();
    for n in ["left", "right"] {
        tools.register(Arc::new(Meet {
            spec: spec(n),
            barrier: barrier.clone(),
        }));
    }
    let (engine, store) = engine_with(tools, dir.path()).await;
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![
        ToolCallSpec::new("a", "left", "{}"),
        ToolCallSpec::new("b", "right", "{}"),
    ]));
    fake.push(Reply::text("both met"));
    // Run one at a time, the first call would wait for the second until the
    // tool timeout and come back as an error.
    assert_eq!(
        run(&engine, &store, &fake, "go").await,
        Outcome::Succeeded("both met".into())
    );
    let msgs = fake.requests()[1]["messages"].to_string();
    assert!(
        msgs.contains("met") && !msgs.contains("timed out"),
        "{msgs}"
    );
    // Results come back in the order the model asked.
    let tool_ids: Vec<String> = fake.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tool_ids, ["a", "b"]);
}

#[tokio::test]
async fn write_calls_run_one_at_a_time_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let busy = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tools = ToolRegistry::new();
    for n in ["w1", "w2", "w3"] {
        tools.register(Arc::new(Write {
            spec: spec(n),
            busy: busy.clone(),
            overlaps: overlaps.clone(),
            order: order.clone(),
        }));
    }
    let (engine, store) = engine_with(tools, dir.path()).await;
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![
        ToolCallSpec::new("1", "w2", "{}"),
        ToolCallSpec::new("2", "w1", "{}"),
        ToolCallSpec::new("3", "w3", "{}"),
    ]));
    fake.push(Reply::text("written"));
    assert_eq!(
        run(&engine, &store, &fake, "write").await,
        Outcome::Succeeded("written".into())
    );
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(*order.lock().unwrap(), ["w2", "w1", "w3"]);
}

#[tokio::test]
async fn a_call_with_bad_arguments_gets_a_readable_error_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = engine_with(ToolRegistry::with_builtins(), dir.path()).await;
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c",
        "current_time",
        r#"{"timezone": 5}"#,
    )]));
    fake.push(Reply::text("sorry"));
    assert_eq!(
        run(&engine, &store, &fake, "time?").await,
        Outcome::Succeeded("sorry".into())
    );
    let msgs = fake.requests()[1]["messages"].to_string();
    assert!(
        msgs.contains("invalid arguments for current_time: arguments.timezone must be string"),
        "{msgs}"
    );
}

/// A tool that needs `memory.write`.
struct Remember;

#[async_trait::async_trait]
impl Tool for Remember {
    fn spec(&self) -> &ToolSpec {
        static SPEC: std::sync::OnceLock<ToolSpec> = std::sync::OnceLock::new();
        SPEC.get_or_init(|| spec("remember"))
    }
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }
    fn capability(&self) -> Option<&'static str> {
        Some("memory.write")
    }
    async fn call(
        &self,
        _ctx: &hearth_tools::ToolContext,
        _args: Value,
    ) -> Result<Value, ToolError> {
        Ok(json!({ "remembered": true }))
    }
}

fn offered(req: &Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|x| x["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn policy_engine(
    dir: &std::path::Path,
    preset: hearth_agent::policy::Preset,
    admins: Vec<String>,
) -> (Engine, Arc<dyn Store>) {
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Remember));
    let (engine, store) = engine_with(tools, dir).await;
    let engine = engine.with_policy(hearth_agent::policy::PolicyConfig {
        default_preset: preset,
        admins,
    });
    (engine, store)
}

#[tokio::test]
async fn a_tool_the_user_may_not_use_is_not_offered_and_a_call_is_refused_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) =
        policy_engine(dir.path(), hearth_agent::policy::Preset::None, vec![]).await;
    let fake = FakeOpenAi::start().await;
    // The model calls it anyway (as if from an earlier tool list).
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c",
        "remember",
        "{not even json",
    )]));
    fake.push(Reply::text("ok"));
    assert_eq!(
        run(&engine, &store, &fake, "remember this").await,
        Outcome::Succeeded("ok".into())
    );
    let reqs = fake.requests();
    assert!(offered(&reqs[0]).is_empty(), "{}", reqs[0]);
    let msgs = reqs[1]["messages"].to_string();
    assert!(
        msgs.contains("missing capability memory.write"),
        "checked before the (bad) arguments: {msgs}"
    );
    let audit = store.list_audit(10).await.unwrap();
    assert_eq!(audit.len(), 1);
    let a = &audit[0];
    assert_eq!(
        (
            a.actor.as_str(),
            a.action.as_str(),
            a.target.as_str(),
            a.outcome.as_str()
        ),
        ("test:user:1", "tool.call", "remember", "denied")
    );
    assert_eq!(a.capability.as_deref(), Some("memory.write"));
    assert!(
        !format!("{audit:?}").contains("remember this"),
        "no message text in the audit log"
    );
}

#[tokio::test]
async fn a_grant_or_admin_status_makes_the_tool_available() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) =
        policy_engine(dir.path(), hearth_agent::policy::Preset::None, vec![]).await;
    store
        .add_grant(hearth_store::Grant {
            subject: "user:test:user:1".into(),
            capability: "memory.write".into(),
            scope: "global".into(),
            granted_at: 1,
            granted_by: "operator".into(),
        })
        .await
        .unwrap();
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c", "remember", "{}",
    )]));
    fake.push(Reply::text("done"));
    assert_eq!(
        run(&engine, &store, &fake, "remember").await,
        Outcome::Succeeded("done".into())
    );
    assert_eq!(offered(&fake.requests()[0]), ["remember"]);
    assert!(
        fake.requests()[1]["messages"]
            .to_string()
            .contains("remembered")
    );
    assert!(store.list_audit(10).await.unwrap().is_empty());

    let dir2 = tempfile::tempdir().unwrap();
    let (engine, store) = policy_engine(
        dir2.path(),
        hearth_agent::policy::Preset::None,
        vec!["test:user:1".into()],
    )
    .await;
    let fake = FakeOpenAi::start().await;
    run(&engine, &store, &fake, "hi").await;
    assert_eq!(
        offered(&fake.requests()[0]),
        ["remember"],
        "admins hold every capability"
    );
}

/// A fetch-like tool (untrusted output) whose page is a service-account
/// file: its private key's newlines are JSON escapes inside the page.
struct ServiceAccountPage {
    spec: ToolSpec,
    key_body: String,
}

#[async_trait::async_trait]
impl Tool for ServiceAccountPage {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }
    fn untrusted(&self) -> bool {
        true
    }
    async fn call(
        &self,
        _ctx: &hearth_tools::ToolContext,
        _args: Value,
    ) -> Result<Value, ToolError> {
        let b = &self.key_body;
        let pem = format!(
            "{}{}\n{b}\n{b}\n{}{}\n",
            "-----BEGIN ", "PRIVATE KEY-----", "-----END ", "PRIVATE KEY-----"
        );
        let page = serde_json::to_string_pretty(&json!({
            "type": "service_account",
            "private_key": pem,
            "client_email": "svc@example.iam.gserviceaccount.com",
        }))
        .map_err(|e| ToolError(e.to_string()))?;
        Ok(json!({ "url": "https://example.com/sa.json", "content": page }))
    }
}

/// Issue 8 item 16: the key in a fetched service-account JSON reaches
/// neither the provider nor the database.
#[tokio::test]
async fn a_private_key_in_fetched_json_reaches_neither_provider_nor_store() {
    let dir = tempfile::tempdir().unwrap();
    // Base64 body of the key, built at run time (no key-shaped literal).
    let key_body: String = (0..64u8)
        .map(|i| char::from(b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"[usize::from(i) % 32] ^ (i & 1)))
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(ServiceAccountPage {
        spec: spec("fetch_page"),
        key_body: key_body.clone(),
    }));
    let (engine, store) = engine_with(tools, dir.path()).await;
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f",
        "fetch_page",
        "{}",
    )]));
    fake.push(Reply::text("fetched"));
    assert_eq!(
        run(&engine, &store, &fake, "fetch it").await,
        Outcome::Succeeded("fetched".into())
    );
    let sent = fake.requests()[1]["messages"].to_string();
    assert!(sent.contains("[REDACTED:private_key:"), "{sent}");
    assert!(
        !sent.contains(&key_body),
        "the key reached the provider: {sent}"
    );
    drop(engine);
    // The last handle, dropped off the async runtime, closes the database
    // before returning (on the runtime the close is handed to the blocking pool).
    std::thread::spawn(move || drop(store)).join().unwrap();
    // Every byte the store wrote, WAL included.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(
            !bytes
                .windows(key_body.len())
                .any(|w| w == key_body.as_bytes()),
            "the key reached the store"
        );
    }
}

/// A run cancelled once its wall time has run out ends as the limit ends it:
/// the deadline came first. A parent stopped by its family's clock cancels
/// its children, whose share of that clock ran out at the same instant; each
/// child then fails on the limit, whichever of the two its task saw first.
#[tokio::test]
async fn a_cancel_after_the_wall_time_ran_out_ends_the_run_on_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_wall: Duration::ZERO,
        ..Limits::default()
    };
    let (engine, store) = engine_with_limits(ToolRegistry::new(), dir.path(), limits).await;
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("too late"));
    let input = stored_run(&store, &fake, "go").await;
    input.cancel.cancel();
    match engine.run(input, &Sink).await.outcome {
        Outcome::Failed(e) => {
            assert_eq!(e.code, "limit_exceeded", "{e:?}");
            assert!(e.message.contains("max_wall_secs = 0 s"), "{e:?}");
        }
        other => panic!("expected the limit, got {other:?}"),
    }
}

/// A write-class call cut off by the wall time may have acted: its step is
/// journaled `unknown`, as when a cancel cuts it off, not left `started`.
#[tokio::test]
async fn a_write_call_cut_off_by_the_wall_time_is_journaled_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Hangs(spec("send_mail"))));
    let limits = Limits {
        max_wall: Duration::from_millis(300),
        tool_timeout: Duration::from_secs(60),
        ..Limits::default()
    };
    let (engine, store) = engine_with_limits(tools, dir.path(), limits).await;
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "send_mail",
        "{}",
    )]));
    let input = stored_run(&store, &fake, "mail it").await;
    let run_id = input.run_id.clone();
    match engine.run(input, &Sink).await.outcome {
        Outcome::Failed(e) => assert_eq!(e.code, "limit_exceeded", "{e:?}"),
        other => panic!("expected the limit, got {other:?}"),
    }
    let steps = store.steps(&run_id).await.unwrap();
    let call = steps
        .iter()
        .find(|s| s.kind == hearth_store::StepKind::Tool)
        .unwrap_or_else(|| panic!("no tool step: {steps:?}"));
    assert_eq!(call.status, hearth_store::StepStatus::Unknown, "{call:?}");
}
