//! Recovery of runs whose end could not be stored.

use std::sync::Arc;
use std::time::Duration;

use hearth_core::{DeliveryMode, Inbound, RunStatus};
use hearth_runtime::testing;
use hearth_runtime::{Runtime, RuntimeOptions, WaitOutcome};
use hearth_testkit::{FakeOpenAi, Reply};
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError, ToolRegistry, ToolSource, ToolWait};
use serde_json::{Value, json};

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_end_could_not_be_stored_is_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    // The first answer comes once the database is locked (below).
    fake.push(Reply::text("lost").with_delay(Duration::from_secs(2)));
    let store = common::store(dir.path());
    let toml = common::fake_toml(&fake.base_url(), "", "");
    let options = RuntimeOptions {
        lease: Duration::from_millis(200),
        sweep_every: Duration::from_millis(50),
        ..RuntimeOptions::default()
    };
    let rt = common::build(
        common::builder(dir.path(), &toml, &store)
            .tools(ToolRegistry::new())
            .options(options),
    )
    .await;
    rt.start().await.unwrap();
    let run = rt
        .ingest(Inbound {
            source: "test".into(),
            thread_key: testing::thread("t:lost-end"),
            user_key: testing::user("test:user:1"),
            text: "hello".into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap();
    fake.wait_for_requests(1).await;

    // Another connection holds the write lock past the store's busy timeout:
    // storing the run's end fails.
    let path = dir.path().join("hearth.db");
    let locker = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        conn
    })
    .join()
    .unwrap();
    let first = rt.wait(&run.run_id, Duration::from_secs(30)).await.unwrap();
    let WaitOutcome::Pending(env) = first else {
        panic!("the end was stored despite the lock: {first:?}");
    };
    assert_eq!(env.status, RunStatus::Running, "{env:?}");
    drop(locker);

    // The run stays running in the store; recovery must run it again.
    fake.wait_for_requests(2).await;
    match rt.wait(&run.run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(env) => {
            assert_eq!(env.status, RunStatus::Succeeded, "{env:?}");
            assert_eq!(env.output.unwrap().text, "echo: hello");
        }
        WaitOutcome::Pending(env) => panic!("not recovered: {env:?}"),
    }
}

/// A source of one tool, `slow__echo`, whose server is still starting: it
/// offers nothing until `up` is set (or, with `fails`, never), and says when
/// a run starts waiting for it.
struct Starting {
    up: tokio::sync::watch::Sender<bool>,
    asked: Arc<tokio::sync::Notify>,
    fails: bool,
}

/// `slow__echo`: answers its text.
struct SlowEcho(hearth_core::ToolSpec);

#[async_trait::async_trait]
impl Tool for SlowEcho {
    fn spec(&self) -> &hearth_core::ToolSpec {
        &self.0
    }
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }
    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        Ok(json!({ "said": args["text"] }))
    }
}

const DOWN: &str = "MCP server slow is not available (failed): could not start: boom";

impl ToolSource for Starting {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.get("slow__echo").into_iter().collect()
    }
    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        (name == "slow__echo" && *self.up.borrow()).then(|| {
            Arc::new(SlowEcho(hearth_core::ToolSpec {
                name: name.into(),
                description: "echo".into(),
                parameters: json!({"type": "object"}),
            })) as Arc<dyn Tool>
        })
    }
    fn pending(&self, name: &str) -> Option<ToolWait> {
        if name != "slow__echo" || *self.up.borrow() {
            return None;
        }
        self.asked.notify_one();
        let mut up = self.up.subscribe();
        let fails = self.fails;
        Some(Box::pin(async move {
            if fails {
                return Err(DOWN.to_owned());
            }
            up.wait_for(|up| *up).await.map_err(|e| e.to_string())?;
            Ok(())
        }))
    }
    fn unavailable(&self, name: &str) -> Option<String> {
        (name == "slow__echo" && self.fails).then(|| DOWN.to_owned())
    }
}

/// A run left running by a dead process, its model having asked for
/// `slow__echo` (a read-class call, redone on recovery), and a runtime
/// started on it whose tool source is `source`.
async fn recovered_with(
    dir: &std::path::Path,
    fake: &FakeOpenAi,
    source: Arc<Starting>,
) -> (Runtime, String) {
    use hearth_core::{Content, Message, Role};
    use hearth_store::{NewRun, StepKind, StepRecord, StepStatus};
    let store = common::store(dir);
    let run_id = hearth_core::new_run_id();
    let now = hearth_core::now_ms();
    store
        .create_run(NewRun {
            run_id: run_id.clone(),
            thread_key: "t:recovered".into(),
            user_key: "test:user:1".into(),
            source: "test".into(),
            input: "echo it".into(),
            idempotency_key: None,
            created_at: now,
            scope: None,
            roles: Vec::new(),
            parent_run_id: None,
        })
        .await
        .unwrap();
    let claimed = store
        .claim_run(&run_id, "dead-process", now + 3_600_000, now)
        .await
        .unwrap();
    assert!(claimed.is_some());
    let asked = Message {
        role: Role::Assistant,
        content: vec![Content::ToolCall {
            id: "c1".into(),
            name: "slow__echo".into(),
            arguments: r#"{"text":"from before the crash"}"#.into(),
        }],
    };
    store
        .put_step(StepRecord {
            run_id: run_id.clone(),
            index: 0,
            kind: StepKind::Llm,
            name: "fake/m".into(),
            status: StepStatus::Succeeded,
            started_at: now,
            finished_at: Some(now),
            tokens: None,
            payload: json!({ "message": asked, "steered": [] }),
        })
        .await
        .unwrap();
    let mut tools = ToolRegistry::new();
    tools.add_source(source);
    let toml = common::fake_toml(&fake.base_url(), "", "");
    let rt = common::build(common::builder(dir, &toml, &store).tools(tools)).await;
    assert_eq!(rt.start().await.unwrap(), 1, "the run is recovered");
    (rt, run_id)
}

/// The tool result the model got in its first request after recovery.
fn tool_result(fake: &FakeOpenAi) -> String {
    let req = fake.requests().remove(0);
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_recovered_run_waits_for_the_server_of_its_pending_tool_call() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let source = Arc::new(Starting {
        up: tokio::sync::watch::channel(false).0,
        asked: Arc::default(),
        fails: false,
    });
    let (rt, run_id) = recovered_with(dir.path(), &fake, source.clone()).await;
    // The run waits for the server: nothing is called yet.
    source.asked.notified().await;
    assert_eq!(fake.request_count(), 0);
    source.up.send_replace(true);
    match rt.wait(&run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(env) => assert_eq!(env.status, RunStatus::Succeeded, "{env:?}"),
        WaitOutcome::Pending(env) => panic!("not finished: {env:?}"),
    }
    let result = tool_result(&fake);
    assert!(result.contains("from before the crash"), "{result}");
    assert!(!result.contains("unknown tool"), "{result}");
}

#[tokio::test]
async fn a_recovered_call_to_a_server_that_never_comes_up_fails_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let source = Arc::new(Starting {
        up: tokio::sync::watch::channel(false).0,
        asked: Arc::default(),
        fails: true,
    });
    let (rt, run_id) = recovered_with(dir.path(), &fake, source).await;
    match rt.wait(&run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(env) => assert_eq!(env.status, RunStatus::Succeeded, "{env:?}"),
        WaitOutcome::Pending(env) => panic!("not finished: {env:?}"),
    }
    let result = tool_result(&fake);
    assert!(result.contains(DOWN), "{result}");
}
