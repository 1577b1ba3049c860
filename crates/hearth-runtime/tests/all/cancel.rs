//! Cancelling a run reaches the tool it is running.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_agent::ConfirmPolicy;
use hearth_core::{DeliveryMode, Inbound, RunStatus, ToolSpec};
use hearth_runtime::testing;
use hearth_store::{StepKind, StepStatus};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError, ToolRegistry};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

use crate::common;

/// A write-class tool that never finishes; dropping its future drops `alive`.
struct Stuck {
    spec: ToolSpec,
    started: Arc<Notify>,
    alive: Mutex<Option<oneshot::Sender<()>>>,
}

#[async_trait::async_trait]
impl Tool for Stuck {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn class(&self) -> ToolClass {
        ToolClass::Write
    }
    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<Value, ToolError> {
        let _alive = self.alive.lock().unwrap().take();
        self.started.notify_one();
        std::future::pending::<()>().await;
        Ok(json!({}))
    }
}

#[tokio::test]
async fn cancel_stops_a_running_write_tool_and_journals_it_as_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1", "deploy", "{}",
    )]));
    let store = common::store(dir.path());
    let toml = common::fake_toml(&fake.base_url(), "", "");
    let started = Arc::new(Notify::new());
    let (alive, mut gone) = oneshot::channel();
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Stuck {
        spec: ToolSpec {
            name: "deploy".into(),
            description: "deploys".into(),
            parameters: json!({"type": "object"}),
        },
        started: started.clone(),
        alive: Mutex::new(Some(alive)),
    }));
    let rt = common::build(
        common::builder(dir.path(), &toml, &store)
            .tools(tools)
            .engine(|e| {
                e.with_confirmations(ConfirmPolicy {
                    confirm_writes: false,
                    ..ConfirmPolicy::default()
                })
            }),
    )
    .await;
    rt.start().await.unwrap();

    let run = rt
        .ingest(Inbound {
            source: "test".into(),
            thread_key: testing::thread("t:cancel"),
            user_key: testing::user("test:user:1"),
            text: "deploy it".into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap();
    started.notified().await;
    let env = rt.cancel(&run.run_id).await.unwrap();
    assert_eq!(env.status, RunStatus::Cancelled);

    let closed = tokio::time::timeout(Duration::from_secs(10), &mut gone).await;
    assert!(
        matches!(closed, Ok(Err(_))),
        "the tool kept running after its run was cancelled"
    );
    let steps = store.steps(&run.run_id).await.unwrap();
    let tool: Vec<_> = steps
        .iter()
        .filter(|s| s.kind == StepKind::Tool)
        .map(|s| (s.name.as_str(), s.status))
        .collect();
    assert_eq!(tool, [("deploy", StepStatus::Unknown)]);
}
