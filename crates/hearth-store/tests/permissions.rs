//! Grants and the audit log in `SqliteStore`.

// clippy's allow-unwrap-in-tests covers only `#[test]` bodies, not helpers.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use hearth_store::{AuditEvent, Durability, Grant, SqliteStore, Store};

fn open(dir: &Path) -> SqliteStore {
    SqliteStore::open(&dir.join("hearth.db"), Durability::Normal).unwrap()
}

fn grant(subject: &str, capability: &str, scope: &str) -> Grant {
    Grant {
        subject: subject.to_owned(),
        capability: capability.to_owned(),
        scope: scope.to_owned(),
        granted_at: 1_700_000_000_000,
        granted_by: "operator".to_owned(),
    }
}

fn event(at: i64, action: &str, target: &str) -> AuditEvent {
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

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn add_grant_is_idempotent_and_keeps_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let first = grant("user:u1", "web.fetch", "global");
    assert!(store.add_grant(first.clone()).await.unwrap());
    let mut again = first.clone();
    again.granted_at += 5;
    again.granted_by = "someone-else".to_owned();
    assert!(!store.add_grant(again).await.unwrap());
    assert_eq!(store.list_grants(None).await.unwrap(), vec![first]);
}

#[tokio::test]
async fn remove_grant_reports_whether_it_existed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store
        .add_grant(grant("user:u1", "web.fetch", "global"))
        .await
        .unwrap();
    // Same subject and capability in another scope is another grant.
    assert!(
        !store
            .remove_grant("user:u1", "web.fetch", "discord:guild:1")
            .await
            .unwrap()
    );
    assert!(
        store
            .remove_grant("user:u1", "web.fetch", "global")
            .await
            .unwrap()
    );
    assert!(
        !store
            .remove_grant("user:u1", "web.fetch", "global")
            .await
            .unwrap()
    );
    assert!(store.list_grants(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn list_grants_filters_by_scope_and_sorts() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for g in [
        grant("user:u2", "web.fetch", "global"),
        grant("role:r1", "skills.use", "discord:guild:1"),
        grant("user:u1", "web.search", "global"),
        grant("user:u1", "memory.read", "global"),
        grant("user:u1", "memory.read", "discord:guild:1"),
    ] {
        assert!(store.add_grant(g).await.unwrap());
    }
    let global = store.list_grants(Some("global")).await.unwrap();
    let keys: Vec<(&str, &str)> = global
        .iter()
        .map(|g| (g.subject.as_str(), g.capability.as_str()))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("user:u1", "memory.read"),
            ("user:u1", "web.search"),
            ("user:u2", "web.fetch"),
        ]
    );
    assert!(global.iter().all(|g| g.scope == "global"));

    let guild = store.list_grants(Some("discord:guild:1")).await.unwrap();
    assert_eq!(guild.len(), 2);
    assert_eq!(guild[0].subject, "role:r1");
    assert_eq!(guild[1].subject, "user:u1");

    assert_eq!(store.list_grants(None).await.unwrap().len(), 5);
    assert!(
        store
            .list_grants(Some("discord:guild:2"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn grants_for_matches_any_subject_in_any_scope() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for g in [
        grant("user:u1", "web.fetch", "global"),
        grant("user:u1", "jobs.manage", "discord:guild:1"),
        grant("role:mods", "skills.use", "discord:guild:1"),
        grant("role:mods", "llm.configure", "discord:guild:2"),
        grant("user:u2", "web.search", "global"),
        grant("role:other", "agent.analytics", "discord:guild:1"),
    ] {
        store.add_grant(g).await.unwrap();
    }
    let found = store
        .grants_for(
            &strings(&["user:u1", "role:mods"]),
            &strings(&["discord:guild:1", "global"]),
        )
        .await
        .unwrap();
    let keys: Vec<(&str, &str, &str)> = found
        .iter()
        .map(|g| (g.subject.as_str(), g.capability.as_str(), g.scope.as_str()))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("role:mods", "skills.use", "discord:guild:1"),
            ("user:u1", "jobs.manage", "discord:guild:1"),
            ("user:u1", "web.fetch", "global"),
        ]
    );

    let global_only = store
        .grants_for(&strings(&["user:u1", "role:mods"]), &strings(&["global"]))
        .await
        .unwrap();
    assert_eq!(global_only, vec![grant("user:u1", "web.fetch", "global")]);

    // Empty lists match nothing (and are not an error).
    assert!(
        store
            .grants_for(&[], &strings(&["global"]))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .grants_for(&strings(&["user:u1"]), &[])
            .await
            .unwrap()
            .is_empty()
    );
    // Values are bound, not spliced: quotes and JSON syntax are just text.
    assert!(
        store
            .grants_for(
                &strings(&["user:u1' OR 1=1 --", "\"]"]),
                &strings(&["global"])
            )
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn audit_is_newest_first_with_default_and_cap() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    assert!(store.list_audit(0).await.unwrap().is_empty());

    let mut plain = event(5, "tool.call", "web_fetch");
    plain.capability = None;
    plain.scope = None;
    plain.outcome = "denied".to_owned();
    store
        .append_audit(event(1, "grant.add", "user:a"))
        .await
        .unwrap();
    store.append_audit(plain.clone()).await.unwrap();
    store
        .append_audit(event(3, "grant.remove", "user:b"))
        .await
        .unwrap();
    // Same time: the later write is newer.
    store
        .append_audit(event(5, "grant.add", "user:c"))
        .await
        .unwrap();

    let all = store.list_audit(10).await.unwrap();
    let targets: Vec<&str> = all.iter().map(|e| e.target.as_str()).collect();
    assert_eq!(targets, vec!["user:c", "web_fetch", "user:b", "user:a"]);
    assert_eq!(all[1], plain);
    assert_eq!(all[3], event(1, "grant.add", "user:a"));

    let two = store.list_audit(2).await.unwrap();
    assert_eq!(two, all[..2].to_vec());
}

#[tokio::test]
async fn audit_limit_defaults_to_100_and_caps_at_1000() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for i in 0..1005 {
        store
            .append_audit(event(i, "tool.call", "t"))
            .await
            .unwrap();
    }
    assert_eq!(store.list_audit(0).await.unwrap().len(), 100);
    let capped = store.list_audit(u32::MAX).await.unwrap();
    assert_eq!(capped.len(), 1000);
    assert_eq!(capped[0].at, 1004);
    assert_eq!(capped[999].at, 5);
}

#[tokio::test]
async fn audited_grant_changes_write_the_event_only_when_something_changed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let g = grant("role:mods", "preset:trusted", "discord:guild:1");

    assert!(
        store
            .add_grant_audited(g.clone(), event(1, "grant.add", "role:mods"))
            .await
            .unwrap()
    );
    assert!(
        !store
            .add_grant_audited(g.clone(), event(2, "grant.add", "role:mods"))
            .await
            .unwrap()
    );
    assert!(
        store
            .remove_grant_audited(
                "role:mods",
                "preset:trusted",
                "discord:guild:1",
                event(3, "grant.remove", "role:mods"),
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .remove_grant_audited(
                "role:mods",
                "preset:trusted",
                "discord:guild:1",
                event(4, "grant.remove", "role:mods"),
            )
            .await
            .unwrap()
    );
    let ats: Vec<i64> = store
        .list_audit(0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.at)
        .collect();
    assert_eq!(ats, vec![3, 1]);
    assert!(store.list_grants(None).await.unwrap().is_empty());
}

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
    conn.execute_batch("DROP TABLE grants; DROP TABLE audit; PRAGMA user_version = 4;")
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
