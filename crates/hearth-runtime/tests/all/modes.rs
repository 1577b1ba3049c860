//! Permission modes in the runtime: setting them (bypass needs
//! `permissions.bypass`, never in a group, and lapses to `ask`), defaults
//! per channel, the audit of changes, and a recovered run keeping the mode
//! it started with.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hearth_agent::policy::{PolicyConfig, Preset};
use hearth_core::{PermissionMode, RunStatus, now_ms};
use hearth_runtime::{ModeSetter, Runtime, RuntimeError, WaitOutcome, testing};
use hearth_store::{Grant, Store};
use hearth_testkit::{FakeOpenAi, Reply};
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError, ToolRegistry};
use serde_json::{Value, json};

use crate::common;

const ADMIN: &str = "test:user:admin";
const MEMBER: &str = "test:user:member";

/// A write-class tool that counts how often it ran.
struct Delete(hearth_core::ToolSpec, Arc<AtomicUsize>);

#[async_trait::async_trait]
impl Tool for Delete {
    fn spec(&self) -> &hearth_core::ToolSpec {
        &self.0
    }
    fn class(&self) -> ToolClass {
        ToolClass::Write
    }
    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<Value, ToolError> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Ok(json!({ "deleted": true }))
    }
}

fn tools(runs: &Arc<AtomicUsize>) -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Delete(
        hearth_core::ToolSpec {
            name: "delete_file".into(),
            description: "deletes a file".into(),
            parameters: json!({"type": "object"}),
        },
        runs.clone(),
    )));
    tools
}

async fn runtime(
    dir: &std::path::Path,
    store: &Arc<dyn Store>,
    fake: &FakeOpenAi,
    extra: &str,
) -> Runtime {
    let toml = format!(
        "{}\n[permissions]\nbypass_minutes = 30\n{extra}",
        common::fake_toml(&fake.base_url(), "", "")
    );
    let policy = PolicyConfig {
        default_preset: Preset::Member,
        admins: vec![ADMIN.to_owned()],
    };
    let rt = common::build(
        common::builder(dir, &toml, store)
            .tools(tools(&Arc::default()))
            .engine(move |e| e.with_policy(policy)),
    )
    .await;
    rt.start().await.unwrap();
    rt
}

fn user(user_key: &str) -> ModeSetter<'_> {
    ModeSetter::User {
        user_key,
        roles: &[],
        scope: None,
        in_group: false,
    }
}

#[tokio::test]
async fn bypass_needs_the_capability_is_refused_in_groups_and_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let rt = runtime(dir.path(), &store, &fake, "").await;
    let dm = testing::thread("telegram:chat:42");

    // A member lacks permissions.bypass: refused, naming it, and audited.
    let err = rt
        .set_mode(&dm, "bypass", None, user(MEMBER))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RuntimeError::Forbidden(ref m) if m.contains("permissions.bypass")),
        "{err:?}"
    );
    assert_eq!(rt.thread_mode(&dm).await.unwrap().mode, PermissionMode::Ask);
    // Other modes are theirs to choose.
    rt.set_mode(&dm, "auto", None, user(MEMBER)).await.unwrap();
    // A grant of it lets them.
    store
        .add_grant(Grant {
            subject: format!("user:{MEMBER}"),
            capability: "permissions.bypass".into(),
            scope: "global".into(),
            granted_at: 0,
            granted_by: "test".into(),
        })
        .await
        .unwrap();
    let before = now_ms();
    let set = rt
        .set_mode(&dm, "bypass", Some(1_000_000), user(MEMBER))
        .await
        .unwrap();
    assert_eq!(set.mode, PermissionMode::Bypass);
    // Capped at bypass_minutes (30 here), whatever was asked.
    let at = set.expires_at.unwrap();
    assert!(
        at >= before + 30 * 60_000 && at <= now_ms() + 30 * 60_000,
        "{at}"
    );
    let shown = rt.thread_runtime(&dm).await.unwrap();
    assert_eq!(
        (shown.mode, shown.mode_expires_at),
        (PermissionMode::Bypass, Some(at))
    );

    // An admin, but in a group: refused for everyone.
    let group = testing::thread("telegram:chat:-100");
    let err = rt
        .set_mode(&group, "bypass", None, user(ADMIN))
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::BypassInGroup(_)), "{err:?}");
    let err = rt
        .set_mode(&group, "bypass", None, ModeSetter::Operator)
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::BypassInGroup(_)), "{err:?}");
    // A channel that says the chat is a group is believed.
    let guild = testing::thread("discord:channel:7");
    let err = rt
        .set_mode(
            &guild,
            "bypass",
            None,
            ModeSetter::User {
                user_key: ADMIN,
                roles: &[],
                scope: Some("discord:guild:1"),
                in_group: true,
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::BypassInGroup(_)), "{err:?}");
    // The operator may in a direct chat.
    rt.set_mode(
        &testing::thread("api:op"),
        "bypass",
        None,
        ModeSetter::Operator,
    )
    .await
    .unwrap();

    let err = rt
        .set_mode(&dm, "yolo", None, user(ADMIN))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RuntimeError::InvalidMode(ref m) if m.contains("accept_edits")),
        "{err:?}"
    );

    // Every change and refusal is audited: who, from, to, where.
    let audit = store.list_audit(100).await.unwrap();
    let modes: Vec<_> = audit.iter().filter(|e| e.action == "mode.set").collect();
    assert!(
        modes.iter().any(|e| e.actor == MEMBER
            && e.target == "telegram:chat:42"
            && e.outcome == "denied"
            && e.capability.as_deref() == Some("permissions.bypass")),
        "{modes:?}"
    );
    assert!(
        modes
            .iter()
            .any(|e| e.actor == MEMBER && e.outcome == "ask->auto"),
        "{modes:?}"
    );
    assert!(
        modes
            .iter()
            .any(|e| e.actor == MEMBER && e.outcome == "auto->bypass"),
        "{modes:?}"
    );
    assert!(
        modes.iter().any(|e| e.actor == ADMIN
            && e.target == "discord:channel:7"
            && e.scope.as_deref() == Some("discord:guild:1")
            && e.outcome.starts_with("denied")),
        "{modes:?}"
    );
    assert!(
        modes
            .iter()
            .any(|e| e.actor == "operator" && e.outcome == "ask->bypass"),
        "{modes:?}"
    );
}

#[tokio::test]
async fn a_lapsed_bypass_is_ask_and_defaults_come_from_the_channel() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let rt = runtime(
        dir.path(),
        &store,
        &fake,
        "default_mode = \"accept_edits\"\n[channels.slack]\ndefault_mode = \"plan\"\n",
    )
    .await;
    let api = testing::thread("api:x");
    assert_eq!(
        rt.thread_mode(&api).await.unwrap().mode,
        PermissionMode::AcceptEdits
    );
    let slack = testing::thread("slack:dm:D1");
    assert_eq!(
        rt.thread_mode(&slack).await.unwrap().mode,
        PermissionMode::Plan
    );
    // A bypass whose time is up is ask, not the default.
    store
        .set_thread_mode("api:x", Some("bypass"), Some(now_ms() - 1))
        .await
        .unwrap();
    let now = rt.thread_runtime(&api).await.unwrap();
    assert_eq!((now.mode, now.mode_expires_at), (PermissionMode::Ask, None));
    // Another lapsed mode falls back to the default.
    store
        .set_thread_mode("slack:dm:D1", Some("auto"), Some(now_ms() - 1))
        .await
        .unwrap();
    assert_eq!(
        rt.thread_mode(&slack).await.unwrap().mode,
        PermissionMode::Plan
    );
}

/// A run a dead process left after its model asked for a write-class call,
/// started in `plan` mode; the thread was set to `auto` since. Recovered,
/// the run keeps `plan`: the call is refused as not offered, not run.
#[tokio::test]
async fn a_recovered_run_keeps_the_mode_it_started_with() {
    use hearth_core::{Content, Message, Role};
    use hearth_store::{NewRun, StepKind, StepRecord, StepStatus};
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("planned"));
    let store = common::store(dir.path());
    let run_id = hearth_core::new_run_id();
    let now = now_ms();
    store
        .create_run(NewRun {
            run_id: run_id.clone(),
            thread_key: "api:recovered".into(),
            user_key: ADMIN.into(),
            source: "test".into(),
            input: "clean up".into(),
            idempotency_key: None,
            created_at: now,
            scope: None,
            roles: Vec::new(),
            parent_run_id: None,
        })
        .await
        .unwrap();
    let claimed = store
        .claim_run_with_model(
            &run_id,
            "dead-process",
            now + 3_600_000,
            now,
            "fake/m",
            Some("plan"),
        )
        .await
        .unwrap();
    assert_eq!(claimed.unwrap().mode.as_deref(), Some("plan"));
    let asked = Message {
        role: Role::Assistant,
        content: vec![Content::ToolCall {
            id: "c1".into(),
            name: "delete_file".into(),
            arguments: "{}".into(),
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
    store
        .set_thread_mode("api:recovered", Some("auto"), None)
        .await
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let toml = common::fake_toml(&fake.base_url(), "", "");
    let policy = PolicyConfig {
        default_preset: Preset::Member,
        admins: vec![ADMIN.to_owned()],
    };
    let rt = common::build(
        common::builder(dir.path(), &toml, &store)
            .tools(tools(&runs))
            .engine(move |e| e.with_policy(policy)),
    )
    .await;
    assert_eq!(rt.start().await.unwrap(), 1, "the run is recovered");
    match rt.wait(&run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(env) => assert_eq!(env.status, RunStatus::Succeeded, "{env:?}"),
        WaitOutcome::Pending(env) => panic!("not finished: {env:?}"),
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the write ran in auto");
    let steps = store.steps(&run_id).await.unwrap();
    let tool = steps.iter().find(|s| s.kind == StepKind::Tool).unwrap();
    assert_eq!(
        tool.payload["detail"],
        json!({"mode": "plan", "decision": "not_offered"})
    );
    assert_eq!(
        store
            .get_run(&run_id)
            .await
            .unwrap()
            .unwrap()
            .mode
            .as_deref(),
        Some("plan")
    );
}

#[tokio::test]
async fn a_surface_cannot_give_its_run_a_mode() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let rt = runtime(dir.path(), &store, &fake, "").await;
    // Only `delegate` gives a run a mode of its own (its parent's); a
    // surface's overrides asking for `bypass` get the thread's.
    let env = rt
        .ingest_with(
            hearth_core::Inbound {
                source: "test".into(),
                thread_key: testing::thread("api:no-bypass"),
                user_key: testing::user(MEMBER),
                text: "hello".into(),
                delivery_mode: hearth_core::DeliveryMode::FollowUp,
                idempotency_key: None,
                scope: None,
                roles: Vec::new(),
            },
            hearth_runtime::RunOverrides {
                mode: Some("bypass".into()),
                ..hearth_runtime::RunOverrides::default()
            },
        )
        .await
        .unwrap();
    match rt.wait(&env.run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(e) => assert_eq!(e.status, RunStatus::Succeeded, "{e:?}"),
        WaitOutcome::Pending(e) => panic!("not finished: {e:?}"),
    }
    let run = store.get_run(&env.run_id).await.unwrap().unwrap();
    assert_eq!(run.mode.as_deref(), Some("ask"));
}
