//! Confirmations of write-class tool calls, in-process: real SQLite store,
//! fake provider, real engine. (Crash and restart while awaiting is tested end
//! to end with the real binary, in hearth-cli's e2e tests.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hearth_agent::policy::{PolicyConfig, Preset};
use hearth_agent::{ConfirmPolicy, Limits};
use hearth_core::{DeliveryMode, Inbound, RunEnvelope, RunEventKind, RunStatus};
use hearth_runtime::testing;
use hearth_runtime::{Runtime, RuntimeError, WaitOutcome};
use hearth_store::Store;
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError, ToolRegistry};
use serde_json::{Value, json};

use crate::common;

const ALICE: &str = "test:user:alice";
const BOB: &str = "test:user:bob";
const ADMIN: &str = "test:user:admin";

/// A write-class tool that counts how often it really ran.
struct Delete {
    spec: hearth_core::ToolSpec,
    runs: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Tool for Delete {
    fn spec(&self) -> &hearth_core::ToolSpec {
        &self.spec
    }
    fn class(&self) -> ToolClass {
        ToolClass::Write
    }
    fn summary(&self, args: &Value) -> String {
        format!("delete the file {}", args["path"].as_str().unwrap_or("?"))
    }
    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(json!({ "deleted": args["path"] }))
    }
}

struct Setup {
    rt: Runtime,
    store: Arc<dyn Store>,
    fake: FakeOpenAi,
    runs: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

async fn setup(ttl: Duration) -> Setup {
    setup_with(ttl, Limits::default()).await
}

async fn setup_with(ttl: Duration, limits: Limits) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let toml = common::fake_toml(&fake.base_url(), "capabilities = { tools = true }", "");
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Delete {
        spec: hearth_core::ToolSpec {
            name: "delete_file".into(),
            description: "deletes a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
        runs: runs.clone(),
    }));
    let policy = PolicyConfig {
        default_preset: Preset::Member,
        admins: vec![ADMIN.to_owned()],
    };
    let rt = common::build(
        common::builder(dir.path(), &toml, &store)
            .tools(tools)
            .limits(limits)
            .system_prompt("be brief")
            .engine(move |e| {
                e.with_policy(policy).with_confirmations(ConfirmPolicy {
                    ttl,
                    ..ConfirmPolicy::default()
                })
            }),
    )
    .await;
    rt.start().await.unwrap();
    Setup {
        rt,
        store,
        fake,
        runs,
        _dir: dir,
    }
}

fn msg(thread: &str, user: &str, text: &str) -> Inbound {
    Inbound {
        source: "test".into(),
        thread_key: testing::thread(thread),
        user_key: testing::user(user),
        text: text.into(),
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
        scope: None,
        roles: Vec::new(),
    }
}

/// Scripts the model to call delete_file once, then answer `then`.
fn script_delete(fake: &FakeOpenAi, then: &str) {
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_1",
        "delete_file",
        r#"{"path": "/tmp/notes.txt"}"#,
    )]));
    fake.push(Reply::text(then));
}

/// Sends a message that makes the run ask, and returns its envelope while it
/// awaits confirmation.
async fn awaiting(s: &Setup, thread: &str, user: &str) -> RunEnvelope {
    script_delete(&s.fake, "done");
    let run =
        s.rt.ingest(msg(thread, user, "delete my notes"))
            .await
            .unwrap();
    match s
        .rt
        .wait(&run.run_id, Duration::from_secs(30))
        .await
        .unwrap()
    {
        WaitOutcome::Pending(env) => {
            assert_eq!(env.status, RunStatus::AwaitingConfirmation, "{env:?}");
            env
        }
        WaitOutcome::Finished(env) => panic!("run finished without asking: {env:?}"),
    }
}

fn token_in(env: &RunEnvelope) -> String {
    env.confirmation.as_ref().unwrap().token.clone().unwrap()
}

async fn finished(rt: &Runtime, run_id: &str) -> RunEnvelope {
    match rt.wait(run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(e) => e,
        WaitOutcome::Pending(e) => panic!("run not finished: {e:?}"),
    }
}

/// Waits until the run is terminal (`wait` also returns while it awaits).
async fn terminal(rt: &Runtime, run_id: &str) -> RunEnvelope {
    let hearth_runtime::RunEvents::Live(log) = rt.events(run_id).await.unwrap() else {
        panic!("run {run_id} has no live log");
    };
    let mut rx = log.subscribe();
    tokio::time::timeout(
        Duration::from_secs(30),
        rx.wait_for(|(_, st)| st.is_terminal()),
    )
    .await
    .unwrap()
    .unwrap();
    rt.get_run(run_id).await.unwrap()
}

/// The tool result the model got for `call_1`, from the provider's requests.
fn tool_result(fake: &FakeOpenAi) -> String {
    fake.requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_1")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn an_approved_call_runs_once_and_the_run_finishes() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:approve", ALICE).await;
    let c = env.confirmation.clone().unwrap();
    assert_eq!(c.tool, "delete_file");
    assert_eq!(c.summary, "delete the file /tmp/notes.txt");
    let token = token_in(&env);
    assert_eq!(token.len(), 32, "160 bits in base32");
    assert_eq!(
        s.runs.load(Ordering::SeqCst),
        0,
        "nothing ran before the answer"
    );
    // The store keeps only the hash.
    let stored = s
        .store
        .pending_confirmations(Some(&env.run_id), None)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_ne!(stored[0].token_hash, token);
    assert_eq!(stored[0].token_hash.len(), 64);

    let answered =
        s.rt.resolve_confirmation(&token, ALICE, true)
            .await
            .unwrap();
    assert_eq!(answered.run_id, env.run_id);
    let done = finished(&s.rt, &env.run_id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(done.confirmation, None);
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
    assert!(
        tool_result(&s.fake).contains("deleted"),
        "{}",
        tool_result(&s.fake)
    );

    // Single use: the same token again is unknown.
    let again = s.rt.resolve_confirmation(&token, ALICE, true).await;
    assert!(
        matches!(again, Err(RuntimeError::ConfirmationNotFound)),
        "{again:?}"
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);

    // The event log said what was asked, with the token.
    let hearth_runtime::RunEvents::Live(log) = s.rt.events(&env.run_id).await.unwrap() else {
        panic!("the run has no live log");
    };
    let asked = log
        .since(0)
        .into_iter()
        .find(|e| e.kind == RunEventKind::ConfirmationRequired)
        .unwrap();
    assert_eq!(asked.data["token"], token);
    assert_eq!(asked.data["summary"], "delete the file /tmp/notes.txt");
}

#[tokio::test]
async fn a_denied_call_does_not_run_and_the_model_is_told() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:deny", ALICE).await;
    s.rt.resolve_confirmation(&token_in(&env), ALICE, false)
        .await
        .unwrap();
    let done = finished(&s.rt, &env.run_id).await;
    assert_eq!(
        done.status,
        RunStatus::Succeeded,
        "the run goes on after a denial"
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    let result = tool_result(&s.fake);
    assert!(
        result.contains("declined") && result.contains("not taken"),
        "{result}"
    );
}

#[tokio::test]
async fn an_unanswered_confirmation_expires_as_a_denial() {
    let s = setup(Duration::from_millis(300)).await;
    let env = awaiting(&s, "t:expire", ALICE).await;
    let token = token_in(&env);
    let done = terminal(&s.rt, &env.run_id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    assert!(
        tool_result(&s.fake).contains("in time"),
        "{}",
        tool_result(&s.fake)
    );
    let late = s.rt.resolve_confirmation(&token, ALICE, true).await;
    assert!(
        matches!(late, Err(RuntimeError::ConfirmationNotFound)),
        "{late:?}"
    );
}

#[tokio::test]
async fn another_users_token_is_forbidden_unless_they_may_resolve_any() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:other", ALICE).await;
    let token = token_in(&env);
    let bob = s.rt.resolve_confirmation(&token, BOB, true).await;
    assert!(matches!(bob, Err(RuntimeError::Forbidden(_))), "{bob:?}");
    // Still pending, and the refusal was audited.
    let still = s.rt.get_run(&env.run_id).await.unwrap();
    assert_eq!(still.status, RunStatus::AwaitingConfirmation);
    let audit = s.store.list_audit(10).await.unwrap();
    assert!(audit.iter().any(|e| e.actor == BOB
        && e.outcome == "denied"
        && e.capability.as_deref() == Some("confirmations.resolve_any")));

    // An admin holds confirmations.resolve_any.
    s.rt.resolve_confirmation(&token, ADMIN, true)
        .await
        .unwrap();
    assert_eq!(
        finished(&s.rt, &env.run_id).await.status,
        RunStatus::Succeeded
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_grant_of_resolve_any_lets_another_user_answer() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:grant", ALICE).await;
    s.store
        .add_grant(hearth_store::Grant {
            subject: format!("user:{BOB}"),
            capability: "confirmations.resolve_any".into(),
            scope: "global".into(),
            granted_at: 0,
            granted_by: "test".into(),
        })
        .await
        .unwrap();
    s.rt.resolve_confirmation(&token_in(&env), BOB, false)
        .await
        .unwrap();
    assert_eq!(
        finished(&s.rt, &env.run_id).await.status,
        RunStatus::Succeeded
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn confirm_and_deny_messages_answer_instead_of_starting_a_run() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:msg", ALICE).await;
    let token = token_in(&env);
    let answered =
        s.rt.ingest(msg("t:msg", ALICE, &format!("confirm {token}")))
            .await
            .unwrap();
    assert_eq!(answered.run_id, env.run_id, "the waiting run's envelope");
    assert_eq!(
        finished(&s.rt, &env.run_id).await.status,
        RunStatus::Succeeded
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
    let runs = s
        .store
        .list_runs(&hearth_store::RunFilter {
            thread_key: Some("t:msg".into()),
            status: None,
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(runs.len(), 1, "no run was made of the confirm message");

    let env = awaiting(&s, "t:msg2", ALICE).await;
    let deny = format!("deny {}", token_in(&env));
    let answered = s.rt.ingest(msg("t:msg2", ALICE, &deny)).await.unwrap();
    assert_eq!(answered.run_id, env.run_id);
    assert_eq!(
        finished(&s.rt, &env.run_id).await.status,
        RunStatus::Succeeded
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 1, "denied: not run");
}

#[tokio::test]
async fn a_new_message_on_the_thread_denies_and_then_runs() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:new", ALICE).await;
    let token = token_in(&env);
    s.fake.push(Reply::text("sure, something else"));
    let next =
        s.rt.ingest(msg("t:new", ALICE, "never mind, what time is it?"))
            .await
            .unwrap();
    assert_ne!(next.run_id, env.run_id);
    let first = finished(&s.rt, &env.run_id).await;
    assert_eq!(first.status, RunStatus::Succeeded);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    assert!(
        tool_result(&s.fake).contains("new message"),
        "{}",
        tool_result(&s.fake)
    );
    assert_eq!(
        finished(&s.rt, &next.run_id).await.status,
        RunStatus::Succeeded
    );
    // The token died with the denial.
    let late = s.rt.resolve_confirmation(&token, ALICE, true).await;
    assert!(
        matches!(late, Err(RuntimeError::ConfirmationNotFound)),
        "{late:?}"
    );
}

#[tokio::test]
async fn unknown_tokens_and_cancelled_runs_are_not_found() {
    let s = setup(Duration::from_secs(300)).await;
    let unknown =
        s.rt.resolve_confirmation("abcdefghijklmnopqrstuvwxyz234567", ALICE, true)
            .await;
    assert!(matches!(unknown, Err(RuntimeError::ConfirmationNotFound)));
    let env = awaiting(&s, "t:cancel", ALICE).await;
    let cancelled = s.rt.cancel(&env.run_id).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let late =
        s.rt.resolve_confirmation(&token_in(&env), ALICE, true)
            .await;
    assert!(
        matches!(late, Err(RuntimeError::ConfirmationNotFound)),
        "{late:?}"
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn waiting_does_not_count_against_the_wall_time_limit() {
    let limits = Limits {
        max_wall: Duration::from_millis(300),
        ..Limits::default()
    };
    let s = setup_with(Duration::from_secs(300), limits).await;
    let env = awaiting(&s, "t:wall", ALICE).await;
    // Time passing is the point here, not synchronisation: nothing signals
    // "the limit did not fire", so the test lets the run's budget run out.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let still = s.rt.get_run(&env.run_id).await.unwrap();
    assert_eq!(still.status, RunStatus::AwaitingConfirmation, "{still:?}");
    s.rt.resolve_confirmation(&token_in(&env), ALICE, true)
        .await
        .unwrap();
    assert_eq!(
        finished(&s.rt, &env.run_id).await.status,
        RunStatus::Succeeded
    );
}

/// Whether `run_id` still has a confirmation pending in the store.
async fn still_pending(s: &Setup, run_id: &str) -> bool {
    !s.store
        .pending_confirmations(Some(run_id), None)
        .await
        .unwrap()
        .is_empty()
}

#[tokio::test]
async fn a_confirm_message_nobody_can_answer_with_it_is_an_ordinary_message() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:refused", ALICE).await;
    let confirm = format!("confirm {}", token_in(&env));

    // Not the asker's: a message like any other (a new run behind the
    // waiting one), not an error, and the question stays Alice's.
    let bobs =
        s.rt.ingest(msg("t:refused", BOB, &confirm))
            .await
            .expect("a confirm text from another user is an ordinary message");
    assert_ne!(bobs.run_id, env.run_id);
    assert_eq!(bobs.status, RunStatus::Queued);
    assert!(still_pending(&s, &env.run_id).await);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);

    // The run ended (cancelled): its question is moot, the text a message.
    s.rt.cancel(&env.run_id).await.unwrap();
    let late =
        s.rt.ingest(msg("t:refused", ALICE, &confirm))
            .await
            .expect("a confirm text for an ended run is an ordinary message");
    assert_ne!(late.run_id, env.run_id);
    assert_ne!(late.run_id, bobs.run_id);
    finished(&s.rt, &late.run_id).await;
    assert_eq!(s.runs.load(Ordering::SeqCst), 0, "nothing was approved");

    // Over the API the token itself is unknown.
    let api =
        s.rt.resolve_confirmation(&token_in(&env), ALICE, true)
            .await;
    assert!(
        matches!(api, Err(RuntimeError::ConfirmationNotFound)),
        "{api:?}"
    );
}

#[tokio::test]
async fn a_cancelled_run_leaves_no_confirmation_pending() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:ended", ALICE).await;
    let cancelled = s.rt.cancel(&env.run_id).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    assert!(
        !still_pending(&s, &env.run_id).await,
        "the run's end resolves its question"
    );
    let on_thread = s
        .store
        .pending_confirmations(None, Some("t:ended"))
        .await
        .unwrap();
    assert!(on_thread.is_empty(), "{on_thread:?}");
}

#[tokio::test]
async fn only_the_askers_own_message_denies_what_the_thread_waits_for() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:group", ALICE).await;

    // Bob talks to the bot in the same group: Alice's question stands.
    let bobs =
        s.rt.ingest(msg("t:group", BOB, "what is the weather?"))
            .await
            .unwrap();
    assert!(
        still_pending(&s, &env.run_id).await,
        "another user's message must not deny Alice's confirmation"
    );
    let still = s.rt.get_run(&env.run_id).await.unwrap();
    assert_eq!(still.status, RunStatus::AwaitingConfirmation);

    // Alice moving on denies it; the run goes on and Bob's runs after.
    let alices =
        s.rt.ingest(msg("t:group", ALICE, "never mind"))
            .await
            .unwrap();
    assert!(!still_pending(&s, &env.run_id).await);
    assert_eq!(
        finished(&s.rt, &env.run_id).await.status,
        RunStatus::Succeeded
    );
    assert!(
        tool_result(&s.fake).contains("new message"),
        "{}",
        tool_result(&s.fake)
    );
    finished(&s.rt, &bobs.run_id).await;
    finished(&s.rt, &alices.run_id).await;
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_holder_of_resolve_any_moving_on_denies_too() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:admin", ALICE).await;
    // An admin holds confirmations.resolve_any: their message counts as an answer.
    let next =
        s.rt.ingest(msg("t:admin", ADMIN, "stop that"))
            .await
            .unwrap();
    assert!(!still_pending(&s, &env.run_id).await);
    finished(&s.rt, &env.run_id).await;
    finished(&s.rt, &next.run_id).await;
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_job_firing_never_denies_a_confirmation() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:job", ALICE).await;
    // A job of Alice's own, on the same thread.
    let job =
        s.rt.create_job(hearth_runtime::NewJob {
            name: "digest".into(),
            schedule: "every 1h".into(),
            timezone: None,
            thread_key: "t:job".into(),
            user_key: ALICE.into(),
            text: "send the digest".into(),
            catch_up: hearth_runtime::CatchUp::Latest,
        })
        .await
        .unwrap();
    let fired = s.rt.run_job_now(&job.id).await.unwrap();
    assert_ne!(fired.run_id, env.run_id);
    assert!(
        still_pending(&s, &env.run_id).await,
        "a job firing is not the user's turn"
    );
    s.rt.resolve_confirmation(&token_in(&env), ALICE, true)
        .await
        .unwrap();
    assert_eq!(
        finished(&s.rt, &env.run_id).await.status,
        RunStatus::Succeeded
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
    finished(&s.rt, &fired.run_id).await;
}

#[tokio::test]
async fn a_background_request_leaves_the_users_confirmation_alone() {
    let s = setup(Duration::from_secs(300)).await;
    let env = awaiting(&s, "t:task", ALICE).await;
    let overrides = hearth_runtime::RunOverrides {
        background: true,
        ..Default::default()
    };
    let task =
        s.rt.ingest_with(
            msg("t:task", ALICE, "### Task:\nSuggest a title"),
            overrides,
        )
        .await
        .unwrap();
    assert!(still_pending(&s, &env.run_id).await);
    // Nor does a background request answer one.
    let confirm = format!("confirm {}", token_in(&env));
    let overrides = hearth_runtime::RunOverrides {
        background: true,
        ..Default::default()
    };
    let not_an_answer =
        s.rt.ingest_with(msg("t:task", ALICE, &confirm), overrides)
            .await
            .unwrap();
    assert_ne!(not_an_answer.run_id, env.run_id);
    assert!(still_pending(&s, &env.run_id).await);
    s.rt.resolve_confirmation(&token_in(&env), ALICE, true)
        .await
        .unwrap();
    finished(&s.rt, &env.run_id).await;
    finished(&s.rt, &task.run_id).await;
    finished(&s.rt, &not_an_answer.run_id).await;
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
}
