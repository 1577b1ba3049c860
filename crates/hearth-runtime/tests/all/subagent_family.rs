//! Sub-agents and the run that started them: the family is recorded by
//! `parent_run_id`, a child's write-class calls ask the parent's user in the
//! parent's conversation (under the parent's permission mode), and the
//! child's steps count against the parent's `[agent]` limits.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hearth_core::{DeliveryMode, Inbound, RunEnvelope, RunStatus};
use hearth_runtime::{Runtime, RuntimeError, testing};
use hearth_store::{NewRun, RunFinish, StepKind, Store};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::common;
use crate::subagents::{
    Calls, USER, delegate, finished, new_run, runtime, script, toml, tool_results,
};

/// Another user of the same place, who holds no `confirmations.resolve_any`.
const BOB: &str = "test:user:2";

/// A child (model `small`) that asks to delete a file, then reports what
/// it got.
fn deletes(body: &Value) -> Reply {
    let results = tool_results(body);
    if results.is_empty() {
        Reply::tool_calls(vec![ToolCallSpec::new("w1", "delete_file", "{}")])
    } else {
        Reply::text(format!("child saw: {}", results.join(" | ")))
    }
}

/// Sends `text` from `user` on `thread`.
async fn send(rt: &Runtime, thread: &str, user: &str, text: &str) -> RunEnvelope {
    rt.ingest(Inbound {
        source: "test".into(),
        thread_key: testing::thread(thread),
        user_key: testing::user(user),
        text: text.into(),
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
        scope: None,
        roles: Vec::new(),
    })
    .await
    .unwrap()
}

/// The parent's first child, once it waits for a confirmation.
async fn child_awaiting(rt: &Runtime, parent_id: &str) -> RunEnvelope {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let parent = rt.get_run(parent_id).await.unwrap();
        if let Some(c) = parent.children.first() {
            let child = rt.get_run(&c.run_id).await.unwrap();
            if child.status == RunStatus::AwaitingConfirmation {
                return child;
            }
            assert!(!child.status.is_terminal(), "the child ended: {child:?}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no child asked: {parent:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A parent on `thread` that delegates to a child that deletes a file.
async fn parent_with_a_writing_child(
    thread: &str,
    mode: Option<&str>,
) -> (
    tempfile::TempDir,
    FakeOpenAi,
    Calls,
    Runtime,
    RunEnvelope,
    Arc<dyn Store>,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    if let Some(mode) = mode {
        store
            .set_thread_mode(thread, Some(mode), None)
            .await
            .unwrap();
    }
    let fake = FakeOpenAi::start().await;
    let calls = vec![delegate(
        "c1",
        json!({"task": "clean up", "model": "fake/small"}),
    )];
    script(&fake, calls, deletes);
    let counts = Calls::default();
    let rt = runtime(dir.path(), &store, &toml(&fake, ""), &counts).await;
    let parent = send(&rt, thread, USER, "clean up for me").await;
    (dir, fake, counts, rt, parent, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_write_asks_the_parents_user_in_the_parents_conversation() {
    let (_dir, _fake, counts, rt, parent, store) = parent_with_a_writing_child("t:ask", None).await;
    let child = child_awaiting(&rt, &parent.run_id).await;
    let c = child.confirmation.clone().unwrap();
    assert_eq!(c.tool, "delete_file");
    let who = format!(
        "sub-agent 1 of run {} (model fake/small) asks to run delete_file",
        parent.run_id
    );
    assert!(c.summary.starts_with(&who), "{}", c.summary);
    // Asked on the parent's thread, for the parent's user.
    let pending = store
        .pending_confirmations(None, Some("t:ask"))
        .await
        .unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].run_id, child.run_id);
    assert_eq!(pending[0].user_key, USER);
    assert_eq!(counts.delete.load(Ordering::SeqCst), 0, "nothing ran yet");

    // Only who may answer the parent may answer it.
    let token = c.token.unwrap();
    let bob = rt.resolve_confirmation(&token, BOB, true).await;
    assert!(matches!(bob, Err(RuntimeError::Forbidden(_))), "{bob:?}");
    // The parent's user answers in the parent's conversation.
    send(&rt, "t:ask", USER, &format!("confirm {token}")).await;
    let parent = finished(&rt, &parent.run_id).await;
    assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
    assert_eq!(counts.delete.load(Ordering::SeqCst), 1);
    let text = parent.output.unwrap().text;
    assert!(text.contains("a fact"), "the child got the result: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_write_denied_by_the_parents_user_does_not_run() {
    let (_dir, _fake, counts, rt, parent, _) = parent_with_a_writing_child("t:deny", None).await;
    let child = child_awaiting(&rt, &parent.run_id).await;
    let token = child.confirmation.unwrap().token.unwrap();
    rt.resolve_confirmation(&token, USER, false).await.unwrap();
    let parent = finished(&rt, &parent.run_id).await;
    assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
    assert_eq!(counts.delete.load(Ordering::SeqCst), 0);
    let text = parent.output.unwrap().text;
    assert!(text.contains("the user declined it"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_of_a_plan_parent_gets_no_write_and_of_an_auto_parent_writes() {
    let (_dir, fake, counts, rt, parent, _) =
        parent_with_a_writing_child("t:plan", Some("plan")).await;
    let parent = finished(&rt, &parent.run_id).await;
    assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
    assert_eq!(counts.delete.load(Ordering::SeqCst), 0);
    let text = parent.output.unwrap().text;
    assert!(text.contains("permission mode plan"), "{text}");
    let offered = crate::common::offered_to(&fake, "small");
    assert!(!offered.iter().any(|t| t == "delete_file"), "{offered:?}");

    let (_dir, _fake, counts, rt, parent, store) =
        parent_with_a_writing_child("t:auto", Some("auto")).await;
    let parent = finished(&rt, &parent.run_id).await;
    assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
    assert_eq!(
        counts.delete.load(Ordering::SeqCst),
        1,
        "auto runs it unasked"
    );
    // The mode is recorded with the child (a restart keeps it); its thread
    // has no settings of its own.
    let env = rt.get_run(&parent.run_id).await.unwrap();
    let child = store
        .get_run(&env.children[0].run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(child.mode.as_deref(), Some("auto"));
    let settings = store.thread_settings(&child.thread_key).await.unwrap();
    assert_eq!((settings.model, settings.mode), (None, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parents_step_limit_stops_the_child_and_then_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = vec![delegate(
        "c1",
        json!({"task": "look forever", "model": "fake/small"}),
    )];
    // The child never stops looking things up on its own.
    script(&fake, calls, |_| {
        Reply::tool_calls(vec![ToolCallSpec::new("l", "lookup", "{}")])
    });
    let counts = Calls::default();
    let config = toml(&fake, "[agent]\nmax_steps = 6\n");
    let rt = runtime(dir.path(), &store, &config, &counts).await;
    let parent = send(&rt, "t:steps", USER, "go").await;
    let parent = finished(&rt, &parent.run_id).await;
    assert_eq!(parent.status, RunStatus::Failed, "{parent:?}");
    let err = parent.error.unwrap();
    assert_eq!(err.code, "limit_exceeded");
    assert!(
        err.message
            .contains("this run and its sub-agents together reached max_steps = 6"),
        "{}",
        err.message
    );
    let child_id = rt.get_run(&parent.run_id).await.unwrap().children[0]
        .run_id
        .clone();
    let child = rt.get_run(&child_id).await.unwrap();
    assert_eq!(child.status, RunStatus::Failed, "{child:?}");
    let err = child.error.unwrap();
    assert!(
        err.message.contains("together reached max_steps = 6"),
        "{}",
        err.message
    );
    // One model call of the parent and its delegate call: the child had
    // the rest, far fewer than a run of its own would.
    let child_steps = store.steps(&child_id).await.unwrap();
    assert!(child_steps.len() <= 5, "{}", child_steps.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_with_nothing_left_may_not_delegate() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = vec![delegate(
        "c1",
        json!({"task": "anything", "model": "fake/small"}),
    )];
    script(&fake, calls, crate::subagents::answers_its_task);
    let counts = Calls::default();
    let config = toml(&fake, "[agent]\nmax_steps = 2\n");
    let rt = runtime(dir.path(), &store, &config, &counts).await;
    let parent = send(&rt, "t:spent", USER, "go").await;
    let parent = finished(&rt, &parent.run_id).await;
    let steps = store.steps(&parent.run_id).await.unwrap();
    let call = steps
        .iter()
        .find(|s| s.kind == StepKind::Tool && s.name == "delegate")
        .unwrap();
    let output = call.payload["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("delegate refused: this run and its sub-agents have taken"),
        "{output}"
    );
    assert!(
        rt.get_run(&parent.run_id)
            .await
            .unwrap()
            .children
            .is_empty()
    );
    assert!(
        !fake.requests().iter().any(|r| r["model"] == "small"),
        "no child ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_and_the_parent_come_from_the_recorded_parent_run_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    // A parent and a child whose key and thread have neither shape the
    // runtime gives them: only `parent_run_id` ties them.
    let parent_id = hearth_core::new_run_id();
    let child_id = hearth_core::new_run_id();
    store
        .create_run(new_run(&parent_id, "t:col", "test", "go", None))
        .await
        .unwrap();
    store
        .create_run(NewRun {
            parent_run_id: Some(parent_id.clone()),
            ..new_run(
                &child_id,
                "t:col/sub/imported",
                hearth_core::DELEGATE_SOURCE,
                "a task",
                Some("imported-7".into()),
            )
        })
        .await
        .unwrap();
    for id in [&parent_id, &child_id] {
        let done = RunFinish {
            run_id: id.clone(),
            status: RunStatus::Succeeded,
            output: Some("done".into()),
            error_code: None,
            error_message: None,
            messages: Vec::new(),
            steps: Vec::new(),
            follow_ups: Vec::new(),
            finished_at: hearth_core::now_ms(),
            last_event_seq: None,
            outbox: Vec::new(),
            arm_observations: Vec::new(),
            model: Some("fake/small".into()),
            requested_model: None,
            executed_elsewhere: false,
        };
        assert!(store.finish_run(done).await.unwrap());
    }
    let rt = runtime(dir.path(), &store, &toml(&fake, ""), &Calls::default()).await;
    let parent = rt.get_run(&parent_id).await.unwrap();
    assert_eq!(parent.children.len(), 1, "{:?}", parent.children);
    assert_eq!(parent.children[0].run_id, child_id);
    assert_eq!(parent.parent_run_id, None);
    let child = rt.get_run(&child_id).await.unwrap();
    assert_eq!(child.parent_run_id.as_deref(), Some(parent_id.as_str()));
}

/// A chat channel's reply router that records what it is asked to send.
#[derive(Default)]
struct ChatLike {
    prompts: std::sync::Mutex<Vec<(String, String)>>,
    ends: std::sync::Mutex<Vec<String>>,
}

impl hearth_store::ReplyRouter for ChatLike {
    fn on_finish(&self, end: hearth_store::RunEnd<'_>) -> Vec<hearth_store::NewOutboxItem> {
        self.ends.lock().unwrap().push(end.run.thread_key.clone());
        Vec::new()
    }

    fn on_confirmation(
        &self,
        rec: &hearth_store::ConfirmationRecord,
        _token: &str,
    ) -> Vec<hearth_store::NewOutboxItem> {
        self.prompts
            .lock()
            .unwrap()
            .push((rec.thread_key.clone(), rec.summary.clone()));
        Vec::new()
    }

    fn committed(&self, _channel: &str) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_question_is_prompted_in_the_parents_chat() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = vec![delegate(
        "c1",
        json!({"task": "clean up", "model": "fake/small"}),
    )];
    script(&fake, calls, deletes);
    let router = Arc::new(ChatLike::default());
    let surface = testing::reply_router_surface_on(router.clone(), &["telegram"]);
    let rt = common::build(
        common::builder(dir.path(), &toml(&fake, ""), &store)
            .tools(crate::subagents::tools(&Calls::default()))
            .subagent_tools()
            .surface(surface),
    )
    .await;
    rt.start().await.unwrap();
    let parent = send(&rt, "telegram:chat:7", USER, "clean up for me").await;
    let child = child_awaiting(&rt, &parent.run_id).await;
    let prompts = router.prompts.lock().unwrap().clone();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert_eq!(
        prompts[0].0, "telegram:chat:7",
        "asked in the parent's chat"
    );
    assert!(
        prompts[0].1.starts_with("sub-agent 1 of run "),
        "{prompts:?}"
    );
    let token = child.confirmation.unwrap().token.unwrap();
    rt.resolve_confirmation(&token, USER, true).await.unwrap();
    let parent = finished(&rt, &parent.run_id).await;
    assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
    // Only the parent answers in the chat.
    let ends = router.ends.lock().unwrap().clone();
    assert_eq!(ends, ["telegram:chat:7"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_spends_the_wall_time_its_parent_has_left() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    // The parent's first call takes 1.5 s of its 2; the child's takes 1 s,
    // which a run of its own could spend, but the family has 0.5 s left.
    fake.respond_with(|body| {
        let results = tool_results(body);
        Some(match body["model"].as_str() {
            Some("m") if results.is_empty() => Reply::tool_calls(vec![delegate(
                "c1",
                json!({"task": "slow", "model": "fake/small"}),
            )])
            .with_delay(Duration::from_millis(1500)),
            Some("m") => Reply::text(format!("all done: {}", results.join(" | "))),
            _ => Reply::text("slow answer").with_delay(Duration::from_millis(1000)),
        })
    });
    let config = toml(&fake, "[agent]\nmax_wall_secs = 2\n");
    let rt = runtime(dir.path(), &store, &config, &Calls::default()).await;
    let parent = send(&rt, "t:wall", USER, "go").await;
    let parent = finished(&rt, &parent.run_id).await;
    assert_eq!(parent.status, RunStatus::Failed, "{parent:?}");
    let child_id = parent.children[0].run_id.clone();
    let child = finished(&rt, &child_id).await;
    assert_eq!(child.status, RunStatus::Failed, "{child:?}");
    let err = child.error.unwrap();
    assert!(
        err.message
            .contains("the run and the agent that started it took longer than max_wall_secs = 2 s"),
        "{}",
        err.message
    );
}

/// A step of a journal, for a run a dead process left.
fn step(run_id: &str, index: u32, kind: StepKind, payload: Value) -> hearth_store::StepRecord {
    let now = hearth_core::now_ms();
    hearth_store::StepRecord {
        run_id: run_id.into(),
        index,
        kind,
        name: if kind == StepKind::Tool {
            "lookup"
        } else {
            "fake/small"
        }
        .into(),
        status: hearth_store::StepStatus::Succeeded,
        started_at: now,
        finished_at: Some(now),
        tokens: None,
        payload,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_ended_before_a_crash_still_counts_against_the_family() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    // Whatever is resumed, the child looks things up for as long as it may.
    script(&fake, Vec::new(), |_| {
        Reply::tool_calls(vec![ToolCallSpec::new("l", "lookup", "{}")])
    });
    // A dead process left a parent (one model call, which asked for its
    // second child), a first child that ended after four steps, and the
    // second child, running.
    let now = hearth_core::now_ms();
    let parent_id = hearth_core::new_run_id();
    let hearth_store::CreateRunOutcome::Created(parent) = store
        .create_run(new_run(&parent_id, "t:fam", "test", "go", None))
        .await
        .unwrap()
    else {
        panic!("the parent exists already");
    };
    store
        .claim_run_with_model(
            &parent_id,
            "dead",
            now + 3_600_000,
            now,
            "fake/m",
            Some("ask"),
        )
        .await
        .unwrap();
    let asked = hearth_core::Message {
        role: hearth_core::Role::Assistant,
        content: vec![hearth_core::Content::ToolCall {
            id: "c2".into(),
            name: "delegate".into(),
            arguments: json!({"task": "look more", "model": "fake/small"}).to_string(),
        }],
    };
    store
        .put_step(step(
            &parent_id,
            0,
            StepKind::Llm,
            json!({ "message": asked, "steered": [] }),
        ))
        .await
        .unwrap();
    let child = |k: u32, id: &str, call: &str| NewRun {
        parent_run_id: Some(parent_id.clone()),
        ..new_run(
            id,
            &format!("t:fam/sub/{}.{k}", parent.seq),
            hearth_core::DELEGATE_SOURCE,
            "look",
            Some(hearth_core::delegate_key(&parent_id, call)),
        )
    };
    let first = hearth_core::new_run_id();
    store.create_run(child(1, &first, "c1")).await.unwrap();
    store
        .claim_run(&first, "dead", now + 3_600_000, now)
        .await
        .unwrap();
    for i in 0..4 {
        let kind = if i % 2 == 0 {
            StepKind::Llm
        } else {
            StepKind::Tool
        };
        store
            .put_step(step(&first, i, kind, json!({})))
            .await
            .unwrap();
    }
    let done = RunFinish {
        run_id: first.clone(),
        status: RunStatus::Succeeded,
        output: Some("found it".into()),
        error_code: None,
        error_message: None,
        messages: Vec::new(),
        steps: Vec::new(),
        follow_ups: Vec::new(),
        finished_at: now,
        last_event_seq: None,
        outbox: Vec::new(),
        arm_observations: Vec::new(),
        model: Some("fake/small".into()),
        requested_model: None,
        executed_elsewhere: false,
    };
    assert!(store.finish_run(done).await.unwrap());
    let second = hearth_core::new_run_id();
    store.create_run(child(2, &second, "c2")).await.unwrap();
    store
        .set_thread_model(&format!("t:fam/sub/{}.2", parent.seq), Some("fake/small"))
        .await
        .unwrap();
    store
        .claim_run(&second, "dead", now + 3_600_000, now)
        .await
        .unwrap();

    let config = toml(&fake, "[agent]\nmax_steps = 7\n");
    let rt = runtime(dir.path(), &store, &config, &Calls::default()).await;
    let second = finished(&rt, &second).await;
    assert_eq!(second.status, RunStatus::Failed, "{second:?}");
    let err = second.error.unwrap();
    assert!(
        err.message.contains("together reached max_steps = 7"),
        "{}",
        err.message
    );
    // The parent's call and the first child's four steps were spent before
    // the crash: two were left (a run on its own would have taken seven).
    let steps = store.steps(&second.run_id).await.unwrap();
    assert!(steps.len() <= 3, "{} steps: {steps:?}", steps.len());
    finished(&rt, &parent_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_left_asking_when_its_parent_ends_is_cancelled_and_its_question_withdrawn() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    // The parent starts a child without waiting and answers at once.
    let calls = vec![delegate(
        "c1",
        json!({"task": "clean up", "model": "fake/small", "wait": false}),
    )];
    script(&fake, calls, deletes);
    let counts = Calls::default();
    let rt = runtime(dir.path(), &store, &toml(&fake, ""), &counts).await;
    let parent = send(&rt, "t:left", USER, "clean up for me").await;
    let parent = finished(&rt, &parent.run_id).await;
    assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
    let child_id = rt.get_run(&parent.run_id).await.unwrap().children[0]
        .run_id
        .clone();
    let child = finished(&rt, &child_id).await;
    assert_eq!(child.status, RunStatus::Cancelled, "{child:?}");
    let pending = store
        .pending_confirmations(None, Some("t:left"))
        .await
        .unwrap();
    assert!(pending.is_empty(), "{pending:?}");
    assert_eq!(counts.delete.load(Ordering::SeqCst), 0);
}
