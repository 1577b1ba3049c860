//! Behaviour of `SqliteStore` itself: database files, migrations, batching,
//! and failures inside a transaction (provoked with triggers).

use std::path::Path;

use hearth_core::RunStatus;
use hearth_store::conformance::fixtures::{audit, awaiting, created, finish, said, step};
use hearth_store::prelude::*;
use hearth_store::{
    ConfirmationState, Durability, RunFilter, SqliteStore, StepRecord, StepStatus, StoreError,
};
use serde_json::json;

use crate::open;

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
async fn unfinished_runs_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        for i in 0..4 {
            created(&store, &format!("run_{i}"), "t1").await;
        }
        store
            .claim_run("run_1", "node-a", 5, 1)
            .await
            .unwrap()
            .unwrap();
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
async fn model_calls_are_recorded_for_usage_without_text() {
    use hearth_store::StepKind;
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

    // What the rows add up to is the usage conformance suite's; here, what
    // SQLite keeps of them.
    // The usage table never holds text.
    let conn = rusqlite::Connection::open(dir.path().join("hearth.db")).unwrap();
    let dump: String = conn
        .query_row("SELECT group_concat(provider || model || purpose || status || COALESCE(error_kind, '') || thread_key || user_key) FROM llm_calls", [], |r| r.get(0))
        .unwrap();
    assert!(!dump.contains("SECRET"), "{dump}");
    assert!(dump.contains("rate_limited"));
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
    crate::roll_back(&path, 3);
    let store = open(dir.path());
    store.ping().await.unwrap();
    store.put_secret("s", vec![1], 1).await.unwrap();
    assert_eq!(store.get_secret("s").await.unwrap(), Some(vec![1]));
}

#[tokio::test]
async fn runs_of_a_version_9_database_gain_an_empty_permission_context() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hearth.db");
    {
        let store = open(dir.path());
        created(&store, "run_old", "discord:channel:5").await;
    }
    // Roll the file back to schema 9, as the hearth before run scopes left it.
    crate::roll_back(&path, 9);
    let store = open(dir.path());
    let old = store.get_run("run_old").await.unwrap().unwrap();
    assert_eq!((old.scope, old.roles), (None, Vec::<String>::new()));
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    // Migrated to the latest schema, whatever later migrations add.
    let fresh_dir = tempfile::tempdir().unwrap();
    drop(open(fresh_dir.path()));
    let fresh: u32 = rusqlite::Connection::open(fresh_dir.path().join("hearth.db"))
        .unwrap()
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert!(version >= 10);
    assert_eq!(version, fresh);
}

/// Runs stored before migration 16 read back without a `requested_model`
/// (their `model` is the one they started with), and a new end records one.
#[tokio::test]
async fn runs_of_a_version_15_database_gain_no_requested_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hearth.db");
    {
        let store = open(dir.path());
        created(&store, "run_old", "t1").await;
        store
            .claim_run_with_model("run_old", "node", i64::MAX, 0, "fake/primary", None)
            .await
            .unwrap()
            .unwrap();
    }
    crate::roll_back(&path, 15);
    let store = open(dir.path());
    let old = store.get_run("run_old").await.unwrap().unwrap();
    assert_eq!(
        (old.model.as_deref(), old.requested_model),
        (Some("fake/primary"), None)
    );
    let mut end = finish("run_old", vec![]);
    end.model = Some("fake/backup".into());
    end.requested_model = Some("fake/primary".into());
    assert!(store.finish_run(end).await.unwrap());
    let done = store.get_run("run_old").await.unwrap().unwrap();
    assert_eq!(done.requested_model.as_deref(), Some("fake/primary"));
}

/// Memories saved before migration 17 keep their text and are due for
/// embedding: the background pass finds them.
#[tokio::test]
async fn memories_of_a_version_16_database_are_due_for_embedding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hearth.db");
    let id = {
        let store = open(dir.path());
        hearth_store::conformance::fixtures::save(&store, "u", None, "old fact").await
    };
    crate::roll_back(&path, 16);
    let store = open(dir.path());
    let due = store.memories_to_embed("m", 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].id, due[0].text.as_str()), (id, "old fact"));
    assert!(
        store
            .set_memory_embedding(id, "m", &[1.0, 2.0])
            .await
            .unwrap()
    );
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
