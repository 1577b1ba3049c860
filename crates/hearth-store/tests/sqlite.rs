//! Behaviour of `SqliteStore` against real database files.

// clippy's allow-unwrap-in-tests covers only `#[test]` bodies, not helpers.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use hearth_core::{Content, Message, Role, RunStatus};
use hearth_store::{
    AuditEvent, ConfirmationRecord, ConfirmationState, CreateRunOutcome, Durability, NewRun,
    NewSession, NewToken, RunFilter, RunFinish, RunRecord, SqliteStore, StepKind, StepRecord,
    StepStatus, Store, StoreError,
};
use serde_json::json;

fn open(dir: &Path) -> SqliteStore {
    SqliteStore::open(&dir.join("hearth.db"), Durability::Normal).unwrap()
}

fn new_run(id: &str, thread: &str, key: Option<&str>) -> NewRun {
    NewRun {
        run_id: id.to_owned(),
        thread_key: thread.to_owned(),
        user_key: "user:1".to_owned(),
        source: "http".to_owned(),
        input: format!("input of {id}"),
        idempotency_key: key.map(str::to_owned),
        created_at: 1_700_000_000_000,
    }
}

async fn created(store: &SqliteStore, id: &str, thread: &str) -> RunRecord {
    match store.create_run(new_run(id, thread, None)).await.unwrap() {
        CreateRunOutcome::Created(run) => run,
        other => panic!("expected Created, got {other:?}"),
    }
}

fn step(run_id: &str, index: u32, status: StepStatus) -> StepRecord {
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

fn confirmation(run_id: &str, call_id: &str, hash: &str) -> ConfirmationRecord {
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

fn finish(run_id: &str, messages: Vec<Message>) -> RunFinish {
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
    }
}

#[tokio::test]
async fn create_then_get_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.ping().await.unwrap();
    let run = created(&store, "run_1", "t1").await;
    assert_eq!(run.status, RunStatus::Queued);
    let got = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(got, run);
    assert!(store.get_run("run_missing").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_identical_requests_create_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path()));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            store
                .create_run(new_run(&format!("run_{i}"), "t1", Some("k1")))
                .await
        });
    }
    let (mut fresh, mut existing, mut ids) = (0, 0, Vec::new());
    while let Some(outcome) = tasks.join_next().await {
        match outcome.unwrap().unwrap() {
            CreateRunOutcome::Created(run) => {
                fresh += 1;
                ids.push(run.run_id);
            }
            CreateRunOutcome::Existing(run) => {
                existing += 1;
                ids.push(run.run_id);
            }
        }
    }
    assert_eq!((fresh, existing), (1, 19));
    ids.dedup();
    assert_eq!(ids.len(), 1);
    let filter = RunFilter {
        thread_key: Some("t1".into()),
        ..RunFilter::default()
    };
    assert_eq!(store.list_runs(&filter).await.unwrap().len(), 1);

    // The same key on another thread is another run.
    let other = store
        .create_run(new_run("run_other", "t2", Some("k1")))
        .await
        .unwrap();
    assert!(matches!(other, CreateRunOutcome::Created(ref r) if r.run_id == "run_other"));
}

#[tokio::test(flavor = "current_thread")]
async fn concurrent_writes_all_succeed_and_share_commits() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let before = store.committed_batches();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        let store = store.clone();
        tasks.spawn(async move {
            let run = created(&store, &format!("run_{i}"), &format!("t{}", i % 7)).await;
            store
                .put_step(step(&run.run_id, 0, StepStatus::Started))
                .await
        });
    }
    while let Some(result) = tasks.join_next().await {
        result.unwrap().unwrap();
    }
    let all = store
        .list_runs(&RunFilter {
            limit: 1000,
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 200);
    let commits = store.committed_batches() - before;
    assert!(commits < 200, "400 writes took {commits} commits");
}

#[tokio::test]
async fn finish_run_is_atomic_and_happens_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_1", "t1").await;
    assert!(
        store
            .start_run("run_1", "node-a", 99, "openai/gpt")
            .await
            .unwrap()
    );
    let messages = vec![
        Message::text(Role::User, "hi"),
        Message::text(Role::Assistant, "hello"),
    ];
    assert!(
        store
            .finish_run(finish("run_1", messages.clone()))
            .await
            .unwrap()
    );

    let run = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(run.output.as_deref(), Some("answer"));
    assert_eq!(run.model.as_deref(), Some("openai/gpt"));
    assert_eq!((run.lease_owner, run.lease_until), (None, None));
    assert_eq!(run.updated_at, 1_700_000_001_000);
    assert_eq!(store.steps("run_1").await.unwrap().len(), 1);
    assert_eq!(store.thread_history("t1", 10).await.unwrap(), messages);

    let mut again = finish("run_1", vec![Message::text(Role::User, "dup")]);
    again.status = RunStatus::Failed;
    assert!(!store.finish_run(again).await.unwrap());
    assert_eq!(store.thread_history("t1", 10).await.unwrap(), messages);
    let run = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Succeeded);
    assert!(
        !store
            .finish_run(finish("run_missing", messages))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_failing_write_rolls_back_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_1", "t1").await;
    // A step of a run that does not exist breaks the foreign key...
    let bad = store.put_step(step("run_missing", 0, StepStatus::Started));
    let good = store.put_step(step("run_1", 0, StepStatus::Started));
    let (bad, good) = tokio::join!(bad, good);
    assert!(matches!(bad, Err(StoreError::Sqlite(_))), "{bad:?}");
    // ...without taking the other writes of its batch with it.
    good.unwrap();
    assert_eq!(store.steps("run_1").await.unwrap().len(), 1);
    assert!(store.steps("run_missing").await.unwrap().is_empty());
}

#[tokio::test]
async fn history_is_oldest_first_and_limited() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for i in 0..5 {
        let id = format!("run_{i}");
        created(&store, &id, "t1").await;
        let content = vec![
            Content::Text {
                text: format!("m{i}"),
            },
            Content::ToolCall {
                id: "c1".into(),
                name: "clock".into(),
                arguments: "{}".into(),
            },
        ];
        let msg = Message {
            role: Role::Assistant,
            content,
        };
        assert!(store.finish_run(finish(&id, vec![msg])).await.unwrap());
    }
    let texts = |h: Vec<Message>| h.iter().map(Message::joined_text).collect::<Vec<_>>();
    assert_eq!(
        texts(store.thread_history("t1", 3).await.unwrap()),
        ["m2", "m3", "m4"]
    );
    assert_eq!(
        texts(store.thread_history("t1", 100).await.unwrap()).len(),
        5
    );
    assert!(store.thread_history("t1", 0).await.unwrap().is_empty());
    assert!(
        store
            .thread_history("t_other", 10)
            .await
            .unwrap()
            .is_empty()
    );
    let full = store.thread_history("t1", 1).await.unwrap();
    assert_eq!(full[0].content.len(), 2);
}

#[tokio::test]
async fn unfinished_runs_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        for i in 0..4 {
            created(&store, &format!("run_{i}"), "t1").await;
        }
        assert!(store.start_run("run_1", "node-a", 5, "m/x").await.unwrap());
        assert!(store.finish_run(finish("run_2", vec![])).await.unwrap());
    }
    let store = open(dir.path());
    let ids: Vec<_> = store
        .unfinished_runs()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(ids, ["run_0", "run_1", "run_3"]);
    let run_1 = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(run_1.status, RunStatus::Running);
    assert_eq!(run_1.lease_owner.as_deref(), Some("node-a"));
}

#[tokio::test]
async fn start_run_refuses_terminal_runs_and_leases_renew() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_1", "t1").await;
    created(&store, "run_2", "t1").await;
    assert!(
        store
            .start_run("run_1", "node-a", 100, "m/x")
            .await
            .unwrap()
    );
    assert!(
        store
            .start_run("run_2", "node-a", 100, "m/x")
            .await
            .unwrap()
    );
    assert!(store.finish_run(finish("run_2", vec![])).await.unwrap());
    assert!(
        !store
            .start_run("run_2", "node-b", 100, "m/y")
            .await
            .unwrap()
    );
    assert!(
        !store
            .start_run("run_missing", "node-b", 100, "m/y")
            .await
            .unwrap()
    );
    assert_eq!(
        store.get_run("run_2").await.unwrap().unwrap().status,
        RunStatus::Succeeded
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_claims_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path()));
    created(&store, "run_1", "t1").await;
    let mut tasks = Vec::new();
    for i in 0..32 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            store
                .claim_run("run_1", &format!("node-{i}"), 10_000, 1_000)
                .await
                .unwrap()
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        if let Some(run) = task.await.unwrap() {
            winners.push(run);
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let stored = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Running);
    assert_eq!(stored.lease_owner, winners[0].lease_owner);
    assert_eq!(stored.lease_until, Some(10_000));
}

#[tokio::test]
async fn claims_respect_terminal_runs_and_live_leases() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_1", "t1").await;
    created(&store, "run_2", "t1").await;

    let won = store
        .claim_run("run_1", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            won.status,
            won.lease_owner.as_deref(),
            won.lease_until,
            won.updated_at
        ),
        (RunStatus::Running, Some("node-a"), Some(5_000), 1_000)
    );
    // Another owner's live lease (and a lease ending exactly now) holds.
    assert!(
        store
            .claim_run("run_1", "node-b", 9_000, 2_000)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claim_run("run_1", "node-b", 9_000, 5_000)
            .await
            .unwrap()
            .is_none()
    );
    // The same owner claims again (recovery of its own run) and extends it.
    let again = store
        .claim_run("run_1", "node-a", 6_000, 2_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.lease_until, Some(6_000));
    // Once the lease has lapsed, another owner wins.
    let taken = store
        .claim_run("run_1", "node-b", 9_000, 6_001)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.lease_owner.as_deref(), Some("node-b"));

    // Terminal and unknown runs are never claimed.
    store
        .claim_run("run_2", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert!(store.finish_run(finish("run_2", vec![])).await.unwrap());
    assert!(
        store
            .claim_run("run_2", "node-a", 5_000, 1_000)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claim_run("run_2", "node-b", 5_000, 99_000)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claim_run("run_missing", "node-a", 5_000, 1_000)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store.get_run("run_2").await.unwrap().unwrap().status,
        RunStatus::Succeeded
    );

    store.set_run_model("run_1", "openai/gpt").await.unwrap();
    assert_eq!(
        store
            .get_run("run_1")
            .await
            .unwrap()
            .unwrap()
            .model
            .as_deref(),
        Some("openai/gpt")
    );
}

#[tokio::test]
async fn a_run_awaiting_confirmation_keeps_its_status_when_claimed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_1", "t1").await;
    store
        .claim_run("run_1", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    store
        .request_confirmation(confirmation("run_1", "call_1", "hash_1"))
        .await
        .unwrap();
    assert!(
        store
            .claim_run("run_1", "node-b", 9_000, 2_000)
            .await
            .unwrap()
            .is_none()
    );
    let taken = store
        .claim_run("run_1", "node-b", 9_000, 5_001)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.status, RunStatus::AwaitingConfirmation);
    assert_eq!(taken.lease_owner.as_deref(), Some("node-b"));
}

#[tokio::test]
async fn renew_leases_extends_only_the_named_runs_of_the_owner() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for id in ["run_1", "run_2", "run_3", "run_4"] {
        created(&store, id, "t1").await;
    }
    for id in ["run_1", "run_2", "run_4"] {
        store
            .claim_run(id, "node-a", 100, 10)
            .await
            .unwrap()
            .unwrap();
    }
    store
        .claim_run("run_3", "node-b", 100, 10)
        .await
        .unwrap()
        .unwrap();
    assert!(store.finish_run(finish("run_4", vec![])).await.unwrap());

    let named = ["run_1", "run_3", "run_4", "run_missing"].map(str::to_owned);
    // run_3 is another owner's, run_4 is finished: only run_1 is renewed.
    assert_eq!(store.renew_leases("node-a", &named, 500).await.unwrap(), 1);
    assert_eq!(store.renew_leases("node-a", &[], 500).await.unwrap(), 0);
    let lease = |id: &'static str| {
        let store = store.clone();
        async move { store.get_run(id).await.unwrap().unwrap().lease_until }
    };
    assert_eq!(lease("run_1").await, Some(500));
    // Held by node-a but not executing: its lease lapses so recovery can take it.
    assert_eq!(lease("run_2").await, Some(100));
    assert_eq!(lease("run_3").await, Some(100));
    assert_eq!(lease("run_4").await, None);
}

#[tokio::test]
async fn release_foreign_leases_frees_only_other_owners_unfinished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for id in ["run_1", "run_2", "run_3"] {
        created(&store, id, "t1").await;
    }
    store
        .claim_run("run_1", "node-a", 100_000, 10)
        .await
        .unwrap()
        .unwrap();
    store
        .claim_run("run_2", "node-dead", 100_000, 10)
        .await
        .unwrap()
        .unwrap();
    store
        .claim_run("run_3", "node-dead", 100_000, 10)
        .await
        .unwrap()
        .unwrap();
    assert!(store.finish_run(finish("run_3", vec![])).await.unwrap());

    assert_eq!(store.release_foreign_leases("node-a").await.unwrap(), 1);
    let run_2 = store.get_run("run_2").await.unwrap().unwrap();
    assert_eq!((run_2.lease_owner, run_2.lease_until), (None, None));
    let run_1 = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(run_1.lease_owner.as_deref(), Some("node-a"));
    // The freed run is claimable at once, although its lease had not lapsed.
    assert!(
        store
            .claim_run("run_2", "node-a", 200_000, 20)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn steps_upsert_by_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_1", "t1").await;
    store
        .put_step(step("run_1", 1, StepStatus::Started))
        .await
        .unwrap();
    store
        .put_step(step("run_1", 0, StepStatus::Started))
        .await
        .unwrap();
    let mut done = step("run_1", 1, StepStatus::Succeeded);
    done.finished_at = Some(20);
    done.tokens = None;
    done.kind = StepKind::Tool;
    store.put_step(done.clone()).await.unwrap();
    let steps = store.steps("run_1").await.unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0], step("run_1", 0, StepStatus::Started));
    assert_eq!(steps[1], done);
}

#[tokio::test]
async fn thread_state_defaults_updates_and_clear() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let state = store.thread_state("t1").await.unwrap();
    assert_eq!(
        (
            state.thread_key.as_str(),
            state.model,
            state.thinking.as_str()
        ),
        ("t1", None, "off")
    );
    assert!(!state.incognito);
    assert_eq!(state.message_count, 0);

    store
        .set_thread_model("t1", Some("anthropic/claude"))
        .await
        .unwrap();
    store.set_thread_thinking("t1", "high").await.unwrap();
    created(&store, "run_1", "t1").await;
    let msgs = vec![
        Message::text(Role::User, "a"),
        Message::text(Role::Assistant, "b"),
    ];
    assert!(store.finish_run(finish("run_1", msgs)).await.unwrap());
    let state = store.thread_state("t1").await.unwrap();
    assert_eq!(state.model.as_deref(), Some("anthropic/claude"));
    assert_eq!(state.thinking, "high");
    assert_eq!(state.message_count, 2);

    store.set_thread_model("t1", None).await.unwrap();
    store.clear_thread_history("t1").await.unwrap();
    let state = store.thread_state("t1").await.unwrap();
    assert_eq!(
        (state.model, state.thinking.as_str(), state.message_count),
        (None, "high", 0)
    );
    assert!(store.thread_history("t1", 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn tokens_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for (i, id) in ["tok_a", "tok_b"].into_iter().enumerate() {
        let token = NewToken {
            id: id.into(),
            name: format!("label {id}"),
            hash_hex: format!("hash_{id}"),
            created_at: 1000 + i as i64,
        };
        store.create_token(token).await.unwrap();
    }
    assert_eq!(store.active_token_count().await.unwrap(), 2);
    assert!(store.token_hash_valid("hash_tok_a").await.unwrap());
    assert!(!store.token_hash_valid("hash_unknown").await.unwrap());

    assert!(store.revoke_token("tok_a").await.unwrap());
    assert!(!store.revoke_token("tok_a").await.unwrap());
    assert!(!store.revoke_token("tok_missing").await.unwrap());
    assert!(!store.token_hash_valid("hash_tok_a").await.unwrap());
    assert_eq!(store.active_token_count().await.unwrap(), 1);

    let list = store.list_tokens().await.unwrap();
    let ids: Vec<_> = list.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["tok_b", "tok_a"]);
    assert!(list[1].revoked_at.is_some() && list[0].revoked_at.is_none());
    assert_eq!(list[0].name, "label tok_b");
}

#[tokio::test]
async fn strict_durability_works() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strict.db");
    let store = SqliteStore::open(&path, Durability::Strict).unwrap();
    assert_eq!(store.path(), path);
    created(&store, "run_1", "t1").await;
    drop(store);
    let store = SqliteStore::open(&path, Durability::Strict).unwrap();
    assert!(store.get_run("run_1").await.unwrap().is_some());
}

#[test]
fn newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hearth.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 999).unwrap();
    drop(conn);
    match SqliteStore::open(&path, Durability::Normal) {
        Err(StoreError::TooNew {
            found: 999,
            supported,
        }) => assert!(supported < 999),
        other => panic!("expected TooNew, got {other:?}"),
    }
}

#[tokio::test]
async fn corrupt_rows_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_1", "t1").await;
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute("UPDATE runs SET status = 'exploded'", [])
        .unwrap();
    conn.execute(
        "INSERT INTO messages (thread_key, role, content, created_at) VALUES ('t1', 'user', 'not json', 1)",
        [],
    )
    .unwrap();
    drop(conn);
    assert!(matches!(
        store.get_run("run_1").await,
        Err(StoreError::Corrupt(_))
    ));
    assert!(matches!(
        store.thread_history("t1", 5).await,
        Err(StoreError::Corrupt(_))
    ));
}

#[tokio::test]
async fn list_runs_filters_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for i in 0..6 {
        created(
            &store,
            &format!("run_{i}"),
            if i % 2 == 0 { "even" } else { "odd" },
        )
        .await;
    }
    assert!(store.finish_run(finish("run_4", vec![])).await.unwrap());
    let ids = |runs: Vec<RunRecord>| runs.into_iter().map(|r| r.run_id).collect::<Vec<_>>();

    let all = store.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(
        ids(all),
        ["run_5", "run_4", "run_3", "run_2", "run_1", "run_0"]
    );
    let even = RunFilter {
        thread_key: Some("even".into()),
        ..RunFilter::default()
    };
    assert_eq!(
        ids(store.list_runs(&even).await.unwrap()),
        ["run_4", "run_2", "run_0"]
    );
    let queued_even = RunFilter {
        status: Some(RunStatus::Queued),
        ..even.clone()
    };
    assert_eq!(
        ids(store.list_runs(&queued_even).await.unwrap()),
        ["run_2", "run_0"]
    );
    let done = RunFilter {
        status: Some(RunStatus::Succeeded),
        ..RunFilter::default()
    };
    assert_eq!(ids(store.list_runs(&done).await.unwrap()), ["run_4"]);
    let two = RunFilter {
        limit: 2,
        ..RunFilter::default()
    };
    assert_eq!(
        ids(store.list_runs(&two).await.unwrap()),
        ["run_5", "run_4"]
    );
}

#[tokio::test]
async fn steers_are_stored_in_order_and_follow_ups_commit_with_the_finish() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_s", "t:s").await;
    let a = store.add_steer("run_s", "first", 10).await.unwrap();
    let b = store.add_steer("run_s", "second", 11).await.unwrap();
    assert!(b.id > a.id);
    let all = store.steers("run_s").await.unwrap();
    assert_eq!(
        all.iter().map(|s| s.text.as_str()).collect::<Vec<_>>(),
        ["first", "second"]
    );
    assert!(store.steers("run_other").await.unwrap().is_empty());
    // A steer for a run that does not exist breaks the foreign key.
    assert!(store.add_steer("run_missing", "x", 12).await.is_err());

    let mut fin = finish("run_s", Vec::new());
    fin.follow_ups = vec![new_run("run_follow", "t:s", None)];
    assert!(store.finish_run(fin.clone()).await.unwrap());
    let follow = store.get_run("run_follow").await.unwrap().unwrap();
    assert_eq!(follow.status, RunStatus::Queued);
    // A second finish changes nothing and creates nothing.
    fin.follow_ups = vec![new_run("run_follow_2", "t:s", None)];
    assert!(!store.finish_run(fin).await.unwrap());
    assert!(store.get_run("run_follow_2").await.unwrap().is_none());
}

#[tokio::test]
async fn model_calls_are_recorded_for_usage_without_text() {
    use hearth_store::{StepKind, UsageGroup, UsageQuery};
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_u", "t:u").await;
    let llm = |idx: u32, name: &str, status: StepStatus, tokens: Option<serde_json::Value>| {
        StepRecord {
            run_id: "run_u".into(),
            index: idx,
            kind: StepKind::Llm,
            name: name.into(),
            status,
            started_at: 1_700_000_000_000 + i64::from(idx),
            finished_at: Some(1_700_000_000_250 + i64::from(idx)),
            tokens,
            payload: json!({ "message": { "role": "assistant", "content": [{ "type": "text", "text": "SECRET ANSWER" }] },
                         "error": { "kind": "rate_limited" } }),
        }
    };
    let t = |i: u64, o: u64, c: u64| {
        Some(json!({ "input_tokens": i, "output_tokens": o, "cached_tokens": c }))
    };
    store
        .put_step(llm(0, "a/m1", StepStatus::Failed, None))
        .await
        .unwrap();
    store
        .put_step(llm(1, "a/m1", StepStatus::Succeeded, t(100, 10, 40)))
        .await
        .unwrap();
    store
        .put_step(llm(2, "b/m2", StepStatus::Succeeded, t(5, 1, 0)))
        .await
        .unwrap();
    // Re-journaling the same step does not count it twice; a tool step is no model call.
    store
        .put_step(llm(2, "b/m2", StepStatus::Succeeded, t(5, 1, 0)))
        .await
        .unwrap();
    let mut tool = step("run_u", 3, StepStatus::Succeeded);
    tool.kind = StepKind::Tool;
    store.put_step(tool).await.unwrap();

    let q = |g| UsageQuery {
        since: None,
        until: None,
        group_by: g,
    };
    let rows = store.usage(&q(UsageGroup::Provider)).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (
            rows[0].key.as_str(),
            rows[0].calls,
            rows[0].input_tokens,
            rows[0].output_tokens,
            rows[0].cached_tokens,
            rows[0].untracked_calls
        ),
        ("a", 2, 100, 10, 40, 1)
    );
    assert_eq!(
        (rows[1].key.as_str(), rows[1].calls, rows[1].input_tokens),
        ("b", 1, 5)
    );
    let by_model = store.usage(&q(UsageGroup::Model)).await.unwrap();
    assert_eq!(
        by_model.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["a/m1", "b/m2"]
    );
    let by_day = store.usage(&q(UsageGroup::Day)).await.unwrap();
    assert_eq!(by_day.len(), 1);
    assert_eq!(by_day[0].key, "2023-11-14");
    assert_eq!(by_day[0].calls, 3);
    let later = UsageQuery {
        since: Some(1_800_000_000_000),
        until: None,
        group_by: UsageGroup::Day,
    };
    assert!(store.usage(&later).await.unwrap().is_empty());
    // The usage table never holds text.
    let conn = rusqlite::Connection::open(dir.path().join("hearth.db")).unwrap();
    let dump: String = conn
        .query_row("SELECT group_concat(provider || model || purpose || status || COALESCE(error_kind, '') || thread_key || user_key) FROM llm_calls", [], |r| r.get(0))
        .unwrap();
    assert!(!dump.contains("SECRET"), "{dump}");
    assert!(dump.contains("rate_limited"));
}

#[tokio::test]
async fn secrets_are_upserted_listed_without_values_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    assert!(store.list_secrets().await.unwrap().is_empty());
    assert_eq!(store.get_secret("openai").await.unwrap(), None);

    store
        .put_secret("openai", vec![1, 2, 3], 1_000)
        .await
        .unwrap();
    store.put_secret("anthropic", vec![9], 2_000).await.unwrap();
    assert_eq!(
        store.get_secret("openai").await.unwrap(),
        Some(vec![1, 2, 3])
    );

    // Replacing keeps the creation time and moves the update time.
    store.put_secret("openai", vec![4, 5], 3_000).await.unwrap();
    assert_eq!(store.get_secret("openai").await.unwrap(), Some(vec![4, 5]));
    let listed = store.list_secrets().await.unwrap();
    assert_eq!(
        listed,
        vec![
            hearth_store::SecretInfo {
                name: "anthropic".into(),
                created_at: 2_000,
                updated_at: 2_000,
            },
            hearth_store::SecretInfo {
                name: "openai".into(),
                created_at: 1_000,
                updated_at: 3_000,
            },
        ]
    );

    assert!(store.delete_secret("openai").await.unwrap());
    assert!(!store.delete_secret("openai").await.unwrap());
    assert_eq!(store.get_secret("openai").await.unwrap(), None);
    assert_eq!(store.list_secrets().await.unwrap().len(), 1);

    // Durable across a reopen.
    drop(store);
    let store = open(dir.path());
    assert_eq!(store.get_secret("anthropic").await.unwrap(), Some(vec![9]));
}

#[tokio::test]
async fn sealed_secrets_round_trip_and_the_file_holds_no_plaintext() {
    use hearth_store::secrets::{Sealer, generate_key_base64};

    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let sealer = Sealer::from_base64(&generate_key_base64().unwrap()).unwrap();
    let value = "sk-PLAINTEXT-never-on-disk-0123456789";
    let sealed = sealer.seal("provider.key", value.as_bytes()).unwrap();
    store
        .put_secret("provider.key", sealed, 1_000)
        .await
        .unwrap();
    let stored = store.get_secret("provider.key").await.unwrap().unwrap();
    assert_eq!(
        sealer.open("provider.key", &stored).unwrap().expose(),
        value
    );
    // Another key cannot open it.
    let other = Sealer::from_base64(&generate_key_base64().unwrap()).unwrap();
    assert!(other.open("provider.key", &stored).is_err());

    drop(store);
    let mut bytes = std::fs::read(dir.path().join("hearth.db")).unwrap();
    if let Ok(wal) = std::fs::read(dir.path().join("hearth.db-wal")) {
        bytes.extend(wal);
    }
    assert!(
        !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
        "plaintext found in the database file"
    );
}

#[tokio::test]
async fn a_version_3_database_gains_the_secrets_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hearth.db");
    drop(open(dir.path()));
    // Roll the file back to schema 3, as an older hearth left it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("DROP TABLE secrets; PRAGMA user_version = 3;")
        .unwrap();
    drop(conn);
    let store = open(dir.path());
    store.ping().await.unwrap();
    store.put_secret("s", vec![1], 1).await.unwrap();
    assert_eq!(store.get_secret("s").await.unwrap(), Some(vec![1]));
}

fn audit(outcome: &str) -> AuditEvent {
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

/// Makes every audit insert with outcome `boom` fail inside its transaction.
fn refuse_audit_outcome_boom(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER audit_fail BEFORE INSERT ON audit WHEN NEW.outcome = 'boom' \
         BEGIN SELECT RAISE(ABORT, 'audit refused'); END;",
    )
    .unwrap();
}

/// A run of thread `t1` that awaits confirmation `hash_1`.
async fn awaiting(store: &SqliteStore) {
    created(store, "run_1", "t1").await;
    store
        .claim_run("run_1", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    store
        .request_confirmation(confirmation("run_1", "call_1", "hash_1"))
        .await
        .unwrap();
}

#[tokio::test]
async fn resolving_a_confirmation_stores_its_audit_event_only_when_it_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    awaiting(&store).await;

    let rec = store
        .resolve_confirmation(
            "hash_1",
            ConfirmationState::Approved,
            "user:1",
            2_000,
            Some(audit("approved")),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.state, ConfirmationState::Approved);
    assert_eq!(
        store.get_run("run_1").await.unwrap().unwrap().status,
        RunStatus::Running
    );
    assert_eq!(store.list_audit(0).await.unwrap(), vec![audit("approved")]);

    // Used once: a second answer changes nothing and records nothing.
    assert!(
        store
            .resolve_confirmation(
                "hash_1",
                ConfirmationState::Denied,
                "user:1",
                3_000,
                Some(audit("denied"))
            )
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.list_audit(0).await.unwrap(), vec![audit("approved")]);
}

#[tokio::test]
async fn a_failed_audit_write_rolls_back_the_confirmation_answer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hearth.db");
    {
        let store = open(dir.path());
        awaiting(&store).await;
    }
    refuse_audit_outcome_boom(&path);
    let store = open(dir.path());

    assert!(
        store
            .resolve_confirmation(
                "hash_1",
                ConfirmationState::Approved,
                "user:1",
                2_000,
                Some(audit("boom"))
            )
            .await
            .is_err()
    );
    let rec = store.confirmation_by_hash("hash_1").await.unwrap().unwrap();
    assert_eq!(rec.state, ConfirmationState::Pending);
    assert_eq!(
        store.get_run("run_1").await.unwrap().unwrap().status,
        RunStatus::AwaitingConfirmation
    );
    // Still answerable once the audit log takes it.
    assert!(
        store
            .resolve_confirmation(
                "hash_1",
                ConfirmationState::Approved,
                "user:1",
                2_000,
                Some(audit("approved"))
            )
            .await
            .unwrap()
            .is_some()
    );
}

fn said(text: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![Content::Text {
            text: text.to_owned(),
        }],
    }
}

#[tokio::test]
async fn new_session_cancels_the_run_and_clears_history_together() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_0", "t1").await;
    assert!(
        store
            .finish_run(finish("run_0", vec![said("old")]))
            .await
            .unwrap()
    );
    created(&store, "run_1", "t1").await;
    store
        .claim_run("run_1", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    created(&store, "run_other", "t2").await;

    // A run of another thread is not cancelled through this one.
    let other = store
        .new_session("t1", Some("run_other"), 3_000)
        .await
        .unwrap();
    assert!(!other.cancelled);
    assert_eq!(
        store.get_run("run_other").await.unwrap().unwrap().status,
        RunStatus::Queued
    );

    created(&store, "run_2", "t1").await;
    assert!(
        store
            .finish_run(finish("run_2", vec![said("again")]))
            .await
            .unwrap()
    );
    let done = store.new_session("t1", Some("run_1"), 4_000).await.unwrap();
    assert_eq!(
        done,
        NewSession {
            cancelled: true,
            cleared_messages: 1
        }
    );
    let run = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(
        (run.status, run.lease_owner, run.updated_at),
        (RunStatus::Cancelled, None, 4_000)
    );
    assert!(store.thread_history("t1", 10).await.unwrap().is_empty());

    // The cancelled run, finishing late, cannot write into the new session.
    assert!(
        !store
            .finish_run(finish("run_1", vec![said("late")]))
            .await
            .unwrap()
    );
    assert!(store.thread_history("t1", 10).await.unwrap().is_empty());
    // A terminal run stays as it ended.
    let again = store.new_session("t1", Some("run_0"), 5_000).await.unwrap();
    assert_eq!(
        again,
        NewSession {
            cancelled: false,
            cleared_messages: 0
        }
    );
    assert_eq!(
        store.get_run("run_0").await.unwrap().unwrap().status,
        RunStatus::Succeeded
    );
    assert_eq!(
        store.new_session("t1", None, 6_000).await.unwrap(),
        NewSession::default()
    );
}

#[tokio::test]
async fn a_failed_history_clear_keeps_the_run_uncancelled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hearth.db");
    {
        let store = open(dir.path());
        created(&store, "run_0", "t1").await;
        assert!(
            store
                .finish_run(finish("run_0", vec![said("old")]))
                .await
                .unwrap()
        );
        created(&store, "run_1", "t1").await;
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER keep_messages BEFORE DELETE ON messages \
         BEGIN SELECT RAISE(ABORT, 'messages are kept'); END;",
    )
    .unwrap();
    drop(conn);
    let store = open(dir.path());

    assert!(store.new_session("t1", Some("run_1"), 3_000).await.is_err());
    assert_eq!(
        store.get_run("run_1").await.unwrap().unwrap().status,
        RunStatus::Queued
    );
    assert_eq!(store.thread_history("t1", 10).await.unwrap().len(), 1);
}

#[cfg(unix)]
#[tokio::test]
async fn the_database_and_its_wal_files_are_private_to_the_owner() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    created(&store, "run_1", "t1").await;
    for name in ["hearth.db", "hearth.db-wal", "hearth.db-shm"] {
        let mode = std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name} has mode {:o}", mode & 0o777);
    }
}
