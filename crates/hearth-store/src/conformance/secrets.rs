//! Sealed secrets ([`SecretStore`]).

use crate::records::{ScopeCredentialInfo, SecretInfo, StoredScopeCredential};
use crate::secret_store::SecretStore;

pub async fn secrets_are_upserted_listed_without_values_and_deleted<S: SecretStore>(store: S) {
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
            SecretInfo {
                name: "anthropic".into(),
                created_at: 2_000,
                updated_at: 2_000,
            },
            SecretInfo {
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
    assert_eq!(store.get_secret("anthropic").await.unwrap(), Some(vec![9]));
}

/// Sealed values are bytes, any bytes, returned as stored; names sort by
/// their bytes (capitals before `_` before small letters), whatever the
/// database's collation.
pub async fn sealed_bytes_round_trip_and_names_sort_bytewise<S: SecretStore>(store: S) {
    let every_byte: Vec<u8> = (0..=255).collect();
    store.put_secret("b", Vec::new(), 1).await.unwrap();
    store.put_secret("a", every_byte.clone(), 2).await.unwrap();
    store.put_secret("_x", vec![0, 0, 0], 3).await.unwrap();
    store.put_secret("B", vec![255], 4).await.unwrap();
    assert_eq!(store.get_secret("a").await.unwrap(), Some(every_byte));
    assert_eq!(store.get_secret("b").await.unwrap(), Some(Vec::new()));
    assert_eq!(store.get_secret("_x").await.unwrap(), Some(vec![0, 0, 0]));
    let names: Vec<String> = store
        .list_secrets()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["B", "_x", "a", "b"]);
}

/// A community's keys: one per provider per scope, listed without values,
/// removed keeping that the scope had one, set again after removal; other
/// scopes never see them.
pub async fn community_keys_are_set_listed_removed_and_remembered_per_scope<S: SecretStore>(
    store: S,
) {
    let (g1, g2) = ("discord:guild:1", "discord:guild:2");
    assert_eq!(store.scope_credential(g1, "openai").await.unwrap(), None);
    assert!(
        !store
            .remove_scope_credential(g1, "openai", 1)
            .await
            .unwrap()
    );
    store
        .put_scope_credential(g1, "openai", vec![1, 2], 10)
        .await
        .unwrap();
    store
        .put_scope_credential(g1, "anthropic", vec![3], 11)
        .await
        .unwrap();
    store
        .put_scope_credential(g2, "openai", vec![4], 12)
        .await
        .unwrap();
    store
        .put_scope_credential(g1, "openai", vec![5], 13)
        .await
        .unwrap();
    assert_eq!(
        store.list_scope_credentials(g1).await.unwrap(),
        vec![
            ScopeCredentialInfo {
                provider: "anthropic".into(),
                set_at: 11
            },
            ScopeCredentialInfo {
                provider: "openai".into(),
                set_at: 13
            },
        ]
    );
    assert_eq!(
        store.scope_credential(g2, "openai").await.unwrap(),
        Some(StoredScopeCredential {
            sealed: Some(vec![4]),
            set_at: 12,
            removed_at: None
        })
    );
    assert!(
        store
            .remove_scope_credential(g1, "openai", 20)
            .await
            .unwrap()
    );
    assert!(
        !store
            .remove_scope_credential(g1, "openai", 21)
            .await
            .unwrap(),
        "already removed"
    );
    assert_eq!(
        store.scope_credential(g1, "openai").await.unwrap(),
        Some(StoredScopeCredential {
            sealed: None,
            set_at: 13,
            removed_at: Some(20)
        })
    );
    assert_eq!(store.list_scope_credentials(g1).await.unwrap().len(), 1);
    store
        .put_scope_credential(g1, "openai", vec![6], 30)
        .await
        .unwrap();
    assert_eq!(
        store.scope_credential(g1, "openai").await.unwrap(),
        Some(StoredScopeCredential {
            sealed: Some(vec![6]),
            set_at: 30,
            removed_at: None
        })
    );
    assert!(
        store
            .list_scope_credentials("slack:team:T1")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store.list_secrets().await.unwrap().is_empty(),
        "not among the named secrets"
    );
}
