//! A run's permission context (the space it was asked in and the sender's
//! role ids) is stored with it and governs its tool calls, also when the run
//! is picked up again by a new process.

use std::sync::Arc;
use std::time::Duration;

use hearth_agent::ConfirmPolicy;
use hearth_agent::policy::{PolicyConfig, Preset};
use hearth_core::{DeliveryMode, Inbound, RunStatus, now_ms};
use hearth_runtime::testing;
use hearth_runtime::{Answerer, Runtime, RuntimeError, WaitOutcome};
use hearth_store::{Grant, NewRun, Store};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError, ToolRegistry};

use crate::common;

const GUILD: &str = "discord:guild:9";

/// A write-class tool: its calls ask for a confirmation.
struct Delete(hearth_core::ToolSpec);

#[async_trait::async_trait]
impl Tool for Delete {
    fn spec(&self) -> &hearth_core::ToolSpec {
        &self.0
    }
    fn class(&self) -> ToolClass {
        ToolClass::Write
    }
    fn summary(&self, _args: &serde_json::Value) -> String {
        "delete a file".into()
    }
    async fn call(
        &self,
        _ctx: &ToolContext,
        _args: serde_json::Value,
    ) -> Result<serde_json::Value, ToolError> {
        Ok(serde_json::json!({ "deleted": true }))
    }
}

/// A runtime over `store` whose users hold nothing by default, with the
/// memory tools (gated by `memory.read` / `memory.write`).
async fn runtime(store: &Arc<dyn Store>, fake: &FakeOpenAi) -> Runtime {
    let toml = common::fake_toml(&fake.base_url(), "capabilities = { tools = true }", "");
    let mut tools = ToolRegistry::new();
    for t in hearth_tools::memory::tools(store.clone()) {
        tools.register(t);
    }
    tools.register(Arc::new(Delete(hearth_core::ToolSpec {
        name: "delete_file".into(),
        description: "deletes a file".into(),
        parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    })));
    let dir = tempfile::tempdir().unwrap();
    let rt = common::build(
        common::builder(dir.path(), &toml, store)
            .tools(tools)
            .engine(|e| {
                e.with_policy(PolicyConfig {
                    default_preset: Preset::None,
                    admins: Vec::new(),
                })
                .with_confirmations(ConfirmPolicy::default())
            }),
    )
    .await;
    rt.start().await.unwrap();
    rt
}

async fn grant_role_in_guild(store: &Arc<dyn Store>) {
    store
        .add_grant(Grant {
            subject: "role:111".into(),
            capability: "memory.read".into(),
            scope: GUILD.into(),
            granted_at: 0,
            granted_by: "test".into(),
        })
        .await
        .unwrap();
}

/// The tool result the model was handed in the newest request.
fn last_tool_result(fake: &FakeOpenAi) -> String {
    let last = fake.requests().pop().unwrap();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap()
}

async fn finished(rt: &Runtime, run_id: &str) {
    match rt.wait(run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(env) => assert_eq!(env.status, RunStatus::Succeeded, "{env:?}"),
        WaitOutcome::Pending(env) => panic!("not finished: {env:?}"),
    }
}

#[tokio::test]
async fn a_run_stored_in_a_guild_is_checked_there_with_its_roles_when_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    grant_role_in_guild(&store).await;
    // Left queued by a process that died: no channel is running to say
    // which guild the thread belongs to, only the stored run knows.
    for (id, role) in [("run_with_role", "111"), ("run_without", "222")] {
        store
            .create_run(NewRun {
                run_id: id.into(),
                thread_key: "discord:channel:77".into(),
                user_key: "discord:user:5".into(),
                source: "discord".into(),
                input: "what do you remember?".into(),
                idempotency_key: None,
                created_at: now_ms(),
                scope: Some(GUILD.into()),
                roles: vec![role.into()],
                parent_run_id: None,
            })
            .await
            .unwrap();
    }
    for _ in 0..2 {
        fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
            "c",
            "memory_list",
            "{}",
        )]));
        fake.push(Reply::text("done"));
    }
    // One thread runs its runs one after the other, oldest first, so the
    // fake's replies pair up with the runs in order.
    let rt = runtime(&store, &fake).await;
    finished(&rt, "run_with_role").await;
    let allowed = last_tool_result(&fake);
    assert!(!allowed.contains("missing capability"), "{allowed}");
    finished(&rt, "run_without").await;
    let refused = last_tool_result(&fake);
    assert!(
        refused.contains("missing capability memory.read"),
        "{refused}"
    );
}

#[tokio::test]
async fn ingest_stores_the_context_and_refuses_a_malformed_one() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    fake.push(Reply::text("hi"));
    let rt = runtime(&store, &fake).await;
    let msg = |scope: Option<&str>, roles: &[&str]| Inbound {
        source: "test".into(),
        thread_key: testing::thread("discord:channel:1"),
        user_key: testing::user("discord:user:5"),
        text: "hello".into(),
        scope: scope.map(str::to_owned),
        roles: roles.iter().map(|r| r.to_string()).collect(),
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
    };
    let env = rt.ingest(msg(Some(GUILD), &["111", "222"])).await.unwrap();
    let stored = store.get_run(&env.run_id).await.unwrap().unwrap();
    assert_eq!(stored.scope.as_deref(), Some(GUILD));
    assert_eq!(stored.roles, ["111", "222"]);
    finished(&rt, &env.run_id).await;

    for (scope, roles) in [
        (Some("Discord Guild 9"), &[][..]),
        (Some("discord:guild:"), &[][..]),
        (Some(GUILD), &[""][..]),
        (Some(GUILD), &["1\n2"][..]),
    ] {
        match rt.ingest(msg(scope, roles)).await {
            Err(RuntimeError::InvalidInput(why)) => assert!(!why.is_empty()),
            other => panic!("{scope:?} {roles:?} accepted: {other:?}"),
        }
    }
    let too_many: Vec<String> = (0..251).map(|n| n.to_string()).collect();
    let too_many: Vec<&str> = too_many.iter().map(String::as_str).collect();
    assert!(matches!(
        rt.ingest(msg(None, &too_many)).await,
        Err(RuntimeError::InvalidInput(_))
    ));
}

/// Waits until `run_id` asks for a confirmation; its token.
async fn asking(rt: &Runtime, run_id: &str) -> String {
    match rt.wait(run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Pending(env) if env.status == RunStatus::AwaitingConfirmation => {
            env.confirmation.unwrap().token.unwrap()
        }
        other => panic!("not asking: {other:?}"),
    }
}

#[tokio::test]
async fn an_admin_of_the_runs_scope_or_a_role_holding_resolve_any_there_answers_for_another() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    store
        .add_grant(Grant {
            subject: "role:333".into(),
            capability: "confirmations.resolve_any".into(),
            scope: GUILD.into(),
            granted_at: 0,
            granted_by: "test".into(),
        })
        .await
        .unwrap();
    let rt = runtime(&store, &fake).await;
    let save = || {
        fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
            "c",
            "delete_file",
            r#"{"path": "a"}"#,
        )]));
        fake.push(Reply::text("saved"));
    };
    let ask = |n: u32| Inbound {
        source: "test".into(),
        thread_key: testing::thread("discord:channel:1"),
        user_key: testing::user("discord:user:alice"),
        text: format!("remember {n}"),
        scope: Some(GUILD.into()),
        roles: vec!["111".into()],
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
    };
    let bob = "discord:user:bob";
    let no_roles: &[String] = &[];

    save();
    let run = rt.ingest(ask(1)).await.unwrap();
    let token = asking(&rt, &run.run_id).await;
    for who in [
        Answerer::user(bob),
        Answerer {
            user_key: bob,
            roles: &["111".to_owned()],
            admin_of: Some("discord:guild:8"),
        },
    ] {
        assert!(
            matches!(
                rt.resolve_confirmation_by(&token, who, true).await,
                Err(RuntimeError::Forbidden(_))
            ),
            "{who:?} answered"
        );
    }
    let admin = Answerer {
        user_key: bob,
        roles: no_roles,
        admin_of: Some(GUILD),
    };
    rt.resolve_confirmation_by(&token, admin, true)
        .await
        .unwrap();
    finished(&rt, &run.run_id).await;

    save();
    let run = rt.ingest(ask(2)).await.unwrap();
    let token = asking(&rt, &run.run_id).await;
    let holder = Answerer {
        user_key: bob,
        roles: &["333".to_owned()],
        admin_of: None,
    };
    rt.resolve_confirmation_by(&token, holder, false)
        .await
        .unwrap();
    finished(&rt, &run.run_id).await;
    let audit = store.list_audit(10).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.action == "confirmation.resolve" && e.scope.as_deref() == Some(GUILD)),
        "{audit:?}"
    );
}
