//! App manifests and their guilds ([`AppStore`]).

use crate::apps::{AppStore, AppVersionStatus};

/// A version is imported once (never rewritten), approved once with the
/// consent and the approver, listed by app; guilds enable one version per
/// app, replace it, and disable it once.
pub async fn app_versions_are_imported_approved_and_enabled_per_guild<S: AppStore>(store: S) {
    assert!(store.app_version("dj", "1").await.unwrap().is_none());
    assert!(
        store
            .approve_app_version("dj", "1", "op", 5)
            .await
            .unwrap()
            .is_none()
    );
    let first = store
        .import_app_version("dj", "1", "{\"a\":1}", "op", 10)
        .await
        .unwrap();
    assert_eq!(first.status, AppVersionStatus::Pending);
    assert!(!first.public_dispatch_consent);
    assert_eq!(
        (first.approved_at, first.approved_by.as_deref()),
        (None, None)
    );
    let again = store
        .import_app_version("dj", "1", "{\"a\":2}", "other", 11)
        .await
        .unwrap();
    assert_eq!(again, first, "a version is never rewritten");
    store
        .import_app_version("dj", "2", "{}", "op", 12)
        .await
        .unwrap();
    store
        .import_app_version("bank", "0.1", "{}", "op", 13)
        .await
        .unwrap();

    let approved = store
        .approve_app_version("dj", "1", "admin", 20)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(approved.status, AppVersionStatus::Approved);
    assert!(approved.public_dispatch_consent);
    assert_eq!(approved.approved_at, Some(20));
    assert_eq!(approved.approved_by.as_deref(), Some("admin"));
    let twice = store
        .approve_app_version("dj", "1", "late", 30)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(twice, approved, "the first approval stays");

    let listed: Vec<(String, String)> = store
        .list_app_versions()
        .await
        .unwrap()
        .into_iter()
        .map(|v| (v.app, v.version))
        .collect();
    assert_eq!(
        listed,
        [("bank", "0.1"), ("dj", "1"), ("dj", "2")].map(|(a, v)| (a.to_owned(), v.to_owned()))
    );

    store
        .enable_app("100", "dj", "1", "admin", 40)
        .await
        .unwrap();
    store
        .enable_app("200", "dj", "1", "admin", 41)
        .await
        .unwrap();
    store.enable_app("100", "dj", "2", "mod", 42).await.unwrap();
    let g100 = store.list_app_enablements(Some("100")).await.unwrap();
    assert_eq!(g100.len(), 1);
    assert_eq!(
        (
            g100[0].version.as_str(),
            g100[0].enabled_by.as_str(),
            g100[0].enabled_at
        ),
        ("2", "mod", 42)
    );
    assert_eq!(store.list_app_enablements(None).await.unwrap().len(), 2);
    assert!(store.disable_app("100", "dj").await.unwrap());
    assert!(!store.disable_app("100", "dj").await.unwrap());
    assert!(
        store
            .list_app_enablements(Some("100"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.list_app_enablements(Some("200")).await.unwrap().len(),
        1
    );
}
