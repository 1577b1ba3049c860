//! Grants and the audit log ([`GrantStore`]).

use super::fixtures::{event, grant, strings};
use crate::grants::GrantStore;

pub async fn add_grant_is_idempotent_and_keeps_the_first<S: GrantStore>(store: S) {
    let first = grant("user:u1", "web.fetch", "global");
    assert!(store.add_grant(first.clone()).await.unwrap());
    let mut again = first.clone();
    again.granted_at += 5;
    again.granted_by = "someone-else".to_owned();
    assert!(!store.add_grant(again).await.unwrap());
    assert_eq!(store.list_grants(None).await.unwrap(), vec![first]);
}

pub async fn remove_grant_reports_whether_it_existed<S: GrantStore>(store: S) {
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

pub async fn list_grants_filters_by_scope_and_sorts<S: GrantStore>(store: S) {
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

pub async fn grants_for_matches_any_subject_in_any_scope<S: GrantStore>(store: S) {
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

pub async fn audit_is_newest_first_with_default_and_cap<S: GrantStore>(store: S) {
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

pub async fn audit_limit_defaults_to_100_and_caps_at_1000<S: GrantStore>(store: S) {
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

pub async fn audited_grant_changes_write_the_event_only_when_something_changed<S: GrantStore>(
    store: S,
) {
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

/// The same grant change made on several replicas at once happens once and
/// is audited once.
pub async fn concurrent_identical_grant_changes_are_audited_once<S: GrantStore>(store: S) {
    let store = std::sync::Arc::new(store);
    let g = grant("user:u1", "web.fetch", "global");
    let mut adds = tokio::task::JoinSet::new();
    for i in 0..8 {
        let (store, g) = (std::sync::Arc::clone(&store), g.clone());
        adds.spawn(async move {
            store
                .add_grant_audited(g, event(i, "grant.add", "user:u1"))
                .await
                .unwrap()
        });
    }
    let mut added = 0;
    while let Some(done) = adds.join_next().await {
        added += usize::from(done.unwrap());
    }
    assert_eq!(added, 1);
    let mut removes = tokio::task::JoinSet::new();
    for i in 0..8 {
        let store = std::sync::Arc::clone(&store);
        removes.spawn(async move {
            store
                .remove_grant_audited(
                    "user:u1",
                    "web.fetch",
                    "global",
                    event(100 + i, "grant.remove", "user:u1"),
                )
                .await
                .unwrap()
        });
    }
    let mut removed = 0;
    while let Some(done) = removes.join_next().await {
        removed += usize::from(done.unwrap());
    }
    assert_eq!(removed, 1);
    let actions: Vec<String> = store
        .list_audit(0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(actions, ["grant.remove", "grant.add"]);
    assert!(store.list_grants(None).await.unwrap().is_empty());
}
