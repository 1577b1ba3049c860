//! API tokens ([`TokenStore`]).

use crate::records::{NewToken, TokenHolder, UiSession};
use crate::tokens::TokenStore;

pub async fn tokens_lifecycle<S: TokenStore>(store: S) {
    for (i, id) in ["tok_a", "tok_b"].into_iter().enumerate() {
        let token = NewToken {
            id: id.into(),
            name: format!("label {id}"),
            hash_hex: format!("hash_{id}"),
            created_at: 1000 + i as i64,
            user_key: None,
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
    assert_eq!(
        store.token_holder("hash_tok_a").await.unwrap(),
        Some(TokenHolder {
            name: "label tok_a".into(),
            user_key: None
        })
    );

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
            user_key: None,
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
            user_key: None,
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
    assert_eq!(name.name, "label tok_a");
    assert_eq!(name.user_key, None);
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

/// A token bound to a user says so wherever its holder is asked for.
pub async fn a_token_bound_to_a_user_names_it<S: TokenStore>(store: S) {
    let token = NewToken {
        id: "tok_m".into(),
        name: "member".into(),
        hash_hex: "hash_tok_m".into(),
        created_at: 1000,
        user_key: Some("api:user:ann".into()),
    };
    store.create_token(token).await.unwrap();
    let holder = TokenHolder {
        name: "member".into(),
        user_key: Some("api:user:ann".into()),
    };
    assert_eq!(
        store.token_holder("hash_tok_m").await.unwrap(),
        Some(holder.clone())
    );
    let listed = store.list_tokens().await.unwrap();
    assert_eq!(listed[0].user_key.as_deref(), Some("api:user:ann"));
    store
        .create_ui_session(UiSession {
            id_hash: "sess_m".into(),
            token_hash: "hash_tok_m".into(),
            csrf: "c".into(),
            created_at: 1000,
            expires_at: 9000,
        })
        .await
        .unwrap();
    let (_, found) = store.ui_session("sess_m", 2000).await.unwrap().unwrap();
    assert_eq!(found, holder);
    assert!(store.revoke_token("tok_m").await.unwrap());
    assert_eq!(store.token_holder("hash_tok_m").await.unwrap(), None);
}
