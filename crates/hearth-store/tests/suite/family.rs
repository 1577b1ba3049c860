//! Sub-agents stored before runs had `parent_run_id` get it from their
//! idempotency key (`delegate:<parent>:<call>`) when PostgreSQL migrates.

use hearth_store::PostgresStore;
use hearth_store::prelude::*;

/// The migrations a database made before the column (`0010_parent_run_id`)
/// and the compact vectors (`0009`) has.
const BEFORE: u32 = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_stored_before_the_column_are_listed_after_migrating() {
    let Some(url) = hearth_store::postgres::testing::fresh_database_url().await else {
        return;
    };
    hearth_store::postgres::testing::migrate_through(&url, BEFORE).await;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    client
        .batch_execute(
            "INSERT INTO runs (run_id, thread_key, user_key, source, input, idempotency_key, status, created_at, updated_at) VALUES
             ('run_p', 't:1', 'u', 'api', 'x', NULL, 'succeeded', 0, 0),
             ('run_c', 't:1/sub/1.1', 'u', 'delegate', 'x', 'delegate:run_p:call_7', 'succeeded', 0, 0),
             ('run_x', 't:2', 'u', 'api', 'x', 'delegate:run_p:call_8', 'succeeded', 0, 0);",
        )
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;

    let store = PostgresStore::connect(&url, "HEARTH_TEST_POSTGRES_URL", 2)
        .await
        .unwrap();
    let children = store.child_runs("run_p").await.unwrap();
    assert_eq!(
        children
            .iter()
            .map(|r| r.run_id.as_str())
            .collect::<Vec<_>>(),
        ["run_c"]
    );
    let other = store.get_run("run_x").await.unwrap().unwrap();
    assert_eq!(other.parent_run_id, None);
}
