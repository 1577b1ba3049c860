//! API tokens ([`TokenStore`]).

use crate::records::{NewToken, UiSession};
use crate::tokens::TokenStore;

pub async fn tokens_lifecycle<S: TokenStore>(store: S) {
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
    assert_eq!(
        store.token_name("hash_tok_b").await.unwrap().as_deref(),
        Some("label tok_b")
    );
    assert_eq!(store.token_name("hash_unknown").await.unwrap(), None);

    assert!(store.revoke_token("tok_a").await.unwrap());
    assert!(!store.revoke_token("tok_a").await.unwrap());
    assert!(!store.revoke_token("tok_missing").await.unwrap());
    assert!(!store.token_hash_valid("hash_tok_a").await.unwrap());
    assert_eq!(store.active_token_count().await.unwrap(), 1);
    assert_eq!(store.token_name("hash_tok_a").await.unwrap(), None);

    let list = store.list_tokens().await.unwrap();
    let ids: Vec<_> = list.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["tok_b", "tok_a"]);
    assert!(list[1].revoked_at.is_some() && list[0].revoked_at.is_none());
    assert_eq!(list[0].name, "label tok_b");
}

/// Tokens created in the same millisecond list newest first too.
pub async fn tokens_of_one_millisecond_list_in_creation_order_newest_first<S: TokenStore>(
    store: S,
) {
    for (id, at) in [
        ("tok_x", 4_000),
        ("tok_c", 5_000),
        ("tok_a", 5_000),
        ("tok_b", 5_000),
    ] {
        let token = NewToken {
            id: id.into(),
            name: id.into(),
            hash_hex: format!("hash_{id}"),
            created_at: at,
        };
        store.create_token(token).await.unwrap();
    }
    let list = store.list_tokens().await.unwrap();
    let ids: Vec<_> = list.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["tok_b", "tok_a", "tok_c", "tok_x"]);
}

/// Dashboard sessions: found while they last and their token is
/// unrevoked, with the token's name; ended ones are gone; a new session
/// clears the ones that ended before it.
pub async fn ui_sessions_last_until_they_expire_or_their_token_is_revoked<S: TokenStore>(store: S) {
    for id in ["tok_a", "tok_b"] {
        let token = NewToken {
            id: id.into(),
            name: format!("label {id}"),
            hash_hex: format!("hash_{id}"),
            created_at: 1000,
        };
        store.create_token(token).await.unwrap();
    }
    let session = |id: &str, token: &str, created_at, expires_at| UiSession {
        id_hash: format!("sess_{id}"),
        token_hash: format!("hash_{token}"),
        csrf: format!("csrf_{id}"),
        created_at,
        expires_at,
    };
    store
        .create_ui_session(session("1", "tok_a", 1_000, 5_000))
        .await
        .unwrap();
    store
        .create_ui_session(session("2", "tok_b", 1_000, 5_000))
        .await
        .unwrap();
    let (found, name) = store.ui_session("sess_1", 4_999).await.unwrap().unwrap();
    assert_eq!(found, session("1", "tok_a", 1_000, 5_000));
    assert_eq!(name, "label tok_a");
    assert!(
        store.ui_session("sess_1", 5_000).await.unwrap().is_none(),
        "ended"
    );
    assert!(store.ui_session("sess_unknown", 0).await.unwrap().is_none());

    assert!(store.revoke_token("tok_b").await.unwrap());
    assert!(
        store.ui_session("sess_2", 2_000).await.unwrap().is_none(),
        "its token revoked"
    );

    assert!(store.end_ui_session("sess_1").await.unwrap());
    assert!(!store.end_ui_session("sess_1").await.unwrap());
    assert!(
        store.ui_session("sess_1", 2_000).await.unwrap().is_none(),
        "logged out"
    );

    // Opening one at 6000 drops those that ended by then (sess_2).
    store
        .create_ui_session(session("3", "tok_a", 6_000, 9_000))
        .await
        .unwrap();
    assert!(!store.end_ui_session("sess_2").await.unwrap(), "purged");
    assert!(store.ui_session("sess_3", 6_001).await.unwrap().is_some());
}
