//! A PostgreSQL store holds the API tokens and grants it read while it
//! listens, and drops them when a change is heard, when it makes one, or
//! when the listener is lost (`postgres/access_cache.rs`, migration 0020).
//!
//! To see that something is held, the database is changed behind the
//! replica's back: a session in `replica` role fires no trigger, so its
//! change is not told, and only a store that holds what it read still
//! answers as before.

use std::time::{Duration, Instant};

use hearth_store::postgres::testing::{TEST_URL_VAR, fresh_database_url};
use hearth_store::{
    Grant, GrantStore, NewToken, PostgresStore, Store, TokenHolder, TokenStore, Wake,
};

/// The next wake-up, within 5 s.
async fn next(wakes: &mut tokio::sync::mpsc::Receiver<Wake>) -> Wake {
    tokio::time::timeout(Duration::from_secs(5), wakes.recv())
        .await
        .expect("a wake-up within 5 s")
        .expect("the listener lives")
}

fn token(id: &str, hash_hex: &str) -> NewToken {
    NewToken {
        id: id.to_owned(),
        name: id.to_owned(),
        hash_hex: hash_hex.to_owned(),
        created_at: 1_700_000_000_000,
        user_key: None,
    }
}

/// A plain connection to the database, for changes made behind the
/// store's back.
async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// Inserts a token without telling anyone (no trigger fires).
async fn insert_untold(client: &tokio_postgres::Client, id: &str) {
    client
        .batch_execute(&format!(
            "SET session_replication_role = replica; \
             INSERT INTO api_tokens (id, name, hash_hex, created_at) \
             VALUES ('{id}', '{id}', 'hash-{id}', 1); \
             SET session_replication_role = origin"
        ))
        .await
        .unwrap();
}

/// Polls `count` until it is `want`: the change's notification reaches the
/// store's listener in its own time.
async fn count_becomes(store: &PostgresStore, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let count = store.active_token_count().await.unwrap();
        if count == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the count stayed {count}, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_held_until_a_change_is_heard() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let replica = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    let other = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    let behind = sql(&url).await;
    // Made before the replica listens: no notification of it is on its way
    // to the replica to drop what the replica reads next.
    other.create_token(token("t1", "h1")).await.unwrap();
    let mut wakes = replica.cluster().unwrap().listen();
    assert_eq!(next(&mut wakes).await, Wake::Connected);
    assert_eq!(replica.active_token_count().await.unwrap(), 1);
    let holder = TokenHolder {
        name: "t1".into(),
        user_key: None,
    };
    assert_eq!(
        replica.token_holder("h1").await.unwrap(),
        Some(holder.clone())
    );

    // Held: a change nobody is told of is not seen.
    insert_untold(&behind, "t2").await;
    behind
        .batch_execute(
            "SET session_replication_role = replica; \
             UPDATE api_tokens SET revoked_at = 1 WHERE id = 't1'; \
             SET session_replication_role = origin",
        )
        .await
        .unwrap();
    assert_eq!(replica.active_token_count().await.unwrap(), 1);
    assert_eq!(replica.token_holder("h1").await.unwrap(), Some(holder));
    // Another store, not listening, holds nothing and reads both changes.
    assert_eq!(other.active_token_count().await.unwrap(), 1);
    assert_eq!(other.token_holder("h1").await.unwrap(), None);

    // A change that is told (a token created elsewhere) drops all held.
    other.create_token(token("t3", "h3")).await.unwrap();
    count_becomes(&replica, 2).await;
    assert_eq!(replica.token_holder("h1").await.unwrap(), None);
    // Revoked elsewhere: seen once told.
    assert!(other.revoke_token("t3").await.unwrap());
    count_becomes(&replica, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_listener_drops_the_tokens_held() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let replica = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    let behind = sql(&url).await;
    let mut wakes = replica.cluster().unwrap().listen();
    assert_eq!(next(&mut wakes).await, Wake::Connected);
    assert_eq!(replica.active_token_count().await.unwrap(), 0);
    insert_untold(&behind, "t1").await;
    assert_eq!(replica.active_token_count().await.unwrap(), 0, "held");

    // The listener's connection is cut: what changed meanwhile was not heard.
    let cut = behind
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(cut, 1, "one listening connection");
    assert_eq!(next(&mut wakes).await, Wake::Lost);
    assert_eq!(replica.active_token_count().await.unwrap(), 1);
    // Listening again, it holds again.
    assert_eq!(next(&mut wakes).await, Wake::Connected);
    assert_eq!(replica.active_token_count().await.unwrap(), 1);
    insert_untold(&behind, "t2").await;
    assert_eq!(replica.active_token_count().await.unwrap(), 1, "held");
}

fn grant(capability: &str) -> Grant {
    Grant {
        subject: "user:u".into(),
        capability: capability.into(),
        scope: "global".into(),
        granted_at: 1,
        granted_by: "user:u".into(),
    }
}

/// Polls the grants of `user:u` in `global` until they are `want`.
async fn grants_become(store: &PostgresStore, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let found = capabilities(store).await;
        if found == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the grants stayed {found:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn capabilities(store: &PostgresStore) -> Vec<String> {
    store
        .grants_for(&["user:u".into()], &["global".into()])
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.capability)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_are_held_until_a_change_is_heard_or_made_here() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let replica = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    let other = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    let behind = sql(&url).await;
    let mut wakes = replica.cluster().unwrap().listen();
    assert_eq!(next(&mut wakes).await, Wake::Connected);
    assert!(capabilities(&replica).await.is_empty());

    // Held: a grant nobody is told of is not seen.
    behind
        .batch_execute(
            "SET session_replication_role = replica; \
             INSERT INTO grants (subject, capability, scope, granted_at, granted_by) \
             VALUES ('user:u', 'untold', 'global', 1, 'x'); \
             SET session_replication_role = origin",
        )
        .await
        .unwrap();
    assert!(capabilities(&replica).await.is_empty(), "held");

    // A grant this replica makes is seen by its next read, without waiting
    // to be told: here nobody is.
    behind
        .batch_execute("ALTER TABLE grants DISABLE TRIGGER grants_notify")
        .await
        .unwrap();
    assert!(replica.add_grant(grant("shell")).await.unwrap());
    assert_eq!(capabilities(&replica).await, ["shell", "untold"]);
    behind
        .batch_execute("ALTER TABLE grants ENABLE TRIGGER grants_notify")
        .await
        .unwrap();
    // Removed by another replica: seen once told.
    assert!(
        other
            .remove_grant("user:u", "shell", "global")
            .await
            .unwrap()
    );
    grants_become(&replica, &["untold"]).await;
}
