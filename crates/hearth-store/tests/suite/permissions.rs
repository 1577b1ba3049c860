//! Grants and the audit log in `SqliteStore`: durability, migration, and a
//! failed audit write rolling back its grant change.

use hearth_store::conformance::fixtures::{event, grant};
use hearth_store::prelude::*;

use crate::open;

#[tokio::test]
async fn grants_and_audit_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        store
            .add_grant_audited(
                grant("user:u1", "web.fetch", "global"),
                event(7, "grant.add", "user:u1"),
            )
            .await
            .unwrap();
    }
    let store = open(dir.path());
    store.ping().await.unwrap();
    assert_eq!(
        store.list_grants(None).await.unwrap(),
        vec![grant("user:u1", "web.fetch", "global")]
    );
    assert_eq!(
        store.list_audit(0).await.unwrap(),
        vec![event(7, "grant.add", "user:u1")]
    );
}

#[tokio::test]
async fn a_version_4_database_gains_grants_and_audit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hearth.db");
    drop(open(dir.path()));
    // Roll the file back to schema 4, as an older hearth left it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE grants; DROP TABLE audit; ALTER TABLE runs DROP COLUMN last_event_seq; \
         DROP INDEX runs_scope_created; ALTER TABLE runs DROP COLUMN scope; \
         ALTER TABLE runs DROP COLUMN roles; \
         DROP INDEX messages_summaries; ALTER TABLE messages DROP COLUMN covers_to; \
         ALTER TABLE runs DROP COLUMN requested_model; \
         ALTER TABLE memories DROP COLUMN embedding; \
         ALTER TABLE memories DROP COLUMN embedding_model; \
         ALTER TABLE threads DROP COLUMN mode; ALTER TABLE threads DROP COLUMN mode_expires_at; \
         ALTER TABLE runs DROP COLUMN mode; DROP TABLE scope_credentials; \
         DROP TABLE ui_sessions; DROP TRIGGER memory_vectors_delete; DROP TABLE memory_vectors; ALTER TABLE api_tokens DROP COLUMN user_key; \
         DROP INDEX runs_parent; ALTER TABLE runs DROP COLUMN parent_run_id; \
         DROP TABLE app_versions; DROP TABLE app_guilds; DROP TRIGGER llm_calls_usage_daily; DROP TABLE usage_daily; \
         DROP TRIGGER messages_fts_insert; DROP TRIGGER messages_fts_delete; \
         DROP TRIGGER messages_fts_update; DROP TABLE messages_fts; \
         DROP INDEX runs_user_seq; DROP INDEX runs_thread_user; PRAGMA user_version = 4;",
    )
    .unwrap();
    drop(conn);
    let store = open(dir.path());
    store.ping().await.unwrap();
    assert!(
        store
            .add_grant(grant("user:u1", "web.fetch", "global"))
            .await
            .unwrap()
    );
    store
        .append_audit(event(1, "grant.add", "user:u1"))
        .await
        .unwrap();
    assert_eq!(store.list_audit(0).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_failed_audit_write_rolls_back_the_grant_change() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hearth.db");
    {
        let store = open(dir.path());
        store
            .add_grant(grant("user:keep", "web.fetch", "global"))
            .await
            .unwrap();
    }
    // Make every audit insert with this outcome fail inside the transaction.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER audit_fail BEFORE INSERT ON audit WHEN NEW.outcome = 'boom' \
         BEGIN SELECT RAISE(ABORT, 'audit refused'); END;",
    )
    .unwrap();
    drop(conn);
    let store = open(dir.path());
    let mut bad = event(1, "grant.add", "user:new");
    bad.outcome = "boom".to_owned();

    assert!(
        store
            .add_grant_audited(grant("user:new", "web.fetch", "global"), bad.clone())
            .await
            .is_err()
    );
    assert!(
        store
            .remove_grant_audited("user:keep", "web.fetch", "global", bad)
            .await
            .is_err()
    );
    // Neither change stuck, and the store still works.
    assert_eq!(
        store.list_grants(None).await.unwrap(),
        vec![grant("user:keep", "web.fetch", "global")]
    );
    assert!(store.list_audit(0).await.unwrap().is_empty());
    assert!(
        store
            .add_grant_audited(
                grant("user:new", "web.fetch", "global"),
                event(2, "grant.add", "user:new"),
            )
            .await
            .unwrap()
    );
    assert_eq!(store.list_audit(0).await.unwrap().len(), 1);
}
