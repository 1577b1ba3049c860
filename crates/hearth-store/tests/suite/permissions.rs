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
    crate::roll_back(&path, 4);
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
