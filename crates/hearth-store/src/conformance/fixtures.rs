//! Records and small steps the suites (and backend-specific tests) share.

use hearth_core::{Content, Message, Role, RunStatus};
use serde_json::json;

use crate::confirmations::ConfirmationStore;
use crate::memory::{MemoryScope, MemoryStore, NewMemory};
use crate::records::{
    AuditEvent, ConfirmationRecord, ConfirmationState, CreateRunOutcome, Grant, NewRun, RunFinish,
    RunRecord, StepKind, StepRecord, StepStatus,
};
use crate::runs::RunStore;

/// A queued run of `user:1` on `thread`.
pub fn new_run(id: &str, thread: &str, key: Option<&str>) -> NewRun {
    NewRun {
        run_id: id.to_owned(),
        thread_key: thread.to_owned(),
        user_key: "user:1".to_owned(),
        source: "http".to_owned(),
        input: format!("input of {id}"),
        idempotency_key: key.map(str::to_owned),
        created_at: 1_700_000_000_000,
        scope: None,
        roles: Vec::new(),
        parent_run_id: None,
    }
}

/// Creates a run that must be new.
pub async fn created<S: RunStore + ?Sized>(store: &S, id: &str, thread: &str) -> RunRecord {
    match store.create_run(new_run(id, thread, None)).await.unwrap() {
        CreateRunOutcome::Created(run) => run,
        other => panic!("expected Created, got {other:?}"),
    }
}

/// Stores runs `from..from + n` on `thread`, a user and an assistant
/// message each (`u{i}`, `a{i}`).
pub async fn said_turns<S: RunStore + ?Sized>(store: &S, thread: &str, from: usize, n: usize) {
    for i in from..from + n {
        let id = format!("run_{thread}_{i}");
        created(store, &id, thread).await;
        let messages = vec![
            Message::text(Role::User, format!("u{i}")),
            Message::text(Role::Assistant, format!("a{i}")),
        ];
        assert!(store.finish_run(finish(&id, messages)).await.unwrap());
    }
}

/// A model-call step.
pub fn step(run_id: &str, index: u32, status: StepStatus) -> StepRecord {
    StepRecord {
        run_id: run_id.to_owned(),
        index,
        kind: StepKind::Llm,
        name: "openai/gpt".to_owned(),
        status,
        started_at: 10,
        finished_at: None,
        tokens: Some(json!({"input": 3, "output": 4})),
        payload: json!({"step": index}),
    }
}

/// A pending confirmation of a `memory.forget` call on thread `t1`.
pub fn confirmation(run_id: &str, call_id: &str, hash: &str) -> ConfirmationRecord {
    ConfirmationRecord {
        token_hash: hash.to_owned(),
        run_id: run_id.to_owned(),
        call_id: call_id.to_owned(),
        thread_key: "t1".to_owned(),
        user_key: "user:1".to_owned(),
        tool: "memory.forget".to_owned(),
        summary: "forget memory 1".to_owned(),
        created_at: 1_000,
        expires_at: 100_000,
        state: ConfirmationState::Pending,
        resolved_by: None,
        resolved_at: None,
    }
}

/// A successful finish with one step and `messages`.
pub fn finish(run_id: &str, messages: Vec<Message>) -> RunFinish {
    RunFinish {
        run_id: run_id.to_owned(),
        status: RunStatus::Succeeded,
        output: Some("answer".to_owned()),
        error_code: None,
        error_message: None,
        messages,
        steps: vec![step(run_id, 0, StepStatus::Succeeded)],
        follow_ups: Vec::new(),
        finished_at: 1_700_000_001_000,
        last_event_seq: Some(7),
        outbox: Vec::new(),
        arm_observations: Vec::new(),
        model: None,
        requested_model: None,
        executed_elsewhere: false,
    }
}

/// The audit event of a confirmation answer with `outcome`.
pub fn audit(outcome: &str) -> AuditEvent {
    AuditEvent {
        at: 2_000,
        actor: "user:1".to_owned(),
        action: "confirmation.resolve".to_owned(),
        target: "run_1/memory.forget".to_owned(),
        outcome: outcome.to_owned(),
        capability: None,
        scope: Some("global".to_owned()),
    }
}

/// Run `run_1` of thread `t1`, claimed by `node-a`, awaiting confirmation
/// `hash_1`.
pub async fn awaiting<S: RunStore + ConfirmationStore + ?Sized>(store: &S) {
    created(store, "run_1", "t1").await;
    store
        .claim_run("run_1", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    store
        .request_confirmation(confirmation("run_1", "call_1", "hash_1"), vec![])
        .await
        .unwrap();
}

/// A user message with `text`.
pub fn said(text: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![Content::Text {
            text: text.to_owned(),
        }],
    }
}

/// A grant by the operator.
pub fn grant(subject: &str, capability: &str, scope: &str) -> Grant {
    Grant {
        subject: subject.to_owned(),
        capability: capability.to_owned(),
        scope: scope.to_owned(),
        granted_at: 1_700_000_000_000,
        granted_by: "operator".to_owned(),
    }
}

/// An audit event of the operator.
pub fn event(at: i64, action: &str, target: &str) -> AuditEvent {
    AuditEvent {
        at,
        actor: "operator".to_owned(),
        action: action.to_owned(),
        target: target.to_owned(),
        outcome: "ok".to_owned(),
        capability: Some("web.fetch".to_owned()),
        scope: Some("global".to_owned()),
    }
}

/// Owned strings.
pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The audit event the CLI stores with an erasure.
pub fn erasure(user: &str, at: i64) -> AuditEvent {
    AuditEvent {
        at,
        actor: "operator".to_owned(),
        action: "memory.delete".to_owned(),
        target: user.to_owned(),
        outcome: "deleted".to_owned(),
        capability: None,
        scope: None,
    }
}

/// A memory to save, from run `run_1`.
pub fn new(user: &str, thread: Option<&str>, text: &str, at: i64) -> NewMemory {
    NewMemory {
        user_key: user.to_owned(),
        thread_key: thread.map(str::to_owned),
        text: text.to_owned(),
        run_id: Some("run_1".to_owned()),
        at,
    }
}

/// What `user` sees, with `thread`'s memories when given.
pub fn scope(user: &str, thread: Option<&str>) -> MemoryScope {
    MemoryScope {
        user_key: user.to_owned(),
        thread_key: thread.map(str::to_owned),
    }
}

/// Saves a memory and returns its id.
pub async fn save<S: MemoryStore + ?Sized>(
    store: &S,
    user: &str,
    thread: Option<&str>,
    text: &str,
) -> i64 {
    store
        .save_memory(new(user, thread, text, 1_000))
        .await
        .unwrap()
        .memory
        .id
}

/// The texts a search finds, best first.
pub async fn found<S: MemoryStore + ?Sized>(
    store: &S,
    s: &MemoryScope,
    query: &str,
) -> Vec<String> {
    store
        .search_memories(s, query, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.memory.text)
        .collect()
}
