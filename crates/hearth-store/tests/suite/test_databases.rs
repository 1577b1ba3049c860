//! Test databases of earlier runs are dropped when a test makes a new one
//! (`postgres/testing.rs`), so that a server that outlives the tests (a
//! developer's own) does not fill up with them.

use hearth_store::postgres::testing::{STALE_AFTER_SECS, fresh_database_url, server_url};
use tokio_postgres::NoTls;

/// A connection to `url`, and the task that drives it (it ends when the
/// client is dropped).
async fn connect(url: &str) -> (tokio_postgres::Client, tokio::task::JoinHandle<()>) {
    let (client, connection) = url
        .parse::<tokio_postgres::Config>()
        .unwrap()
        .connect(NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    (client, driver)
}

async fn exists(client: &tokio_postgres::Client, name: &str) -> bool {
    client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await
        .unwrap()
        .is_some()
}

#[tokio::test]
async fn making_a_test_database_drops_those_of_earlier_runs() {
    if server_url().is_none() {
        return;
    }
    let (client, _) = connect(&server_url().unwrap()).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).unwrap();
    let tag = data_encoding::HEXLOWER.encode(&random);
    let old = format!("hearth_t_{}_{tag}old", now - STALE_AFTER_SECS - 60);
    let legacy = format!("hearth_t_{tag}{tag}");
    let recent = format!("hearth_t_{}_{tag}new", now - 60);
    let old_in_use = format!("hearth_t_{}_{tag}use", now - STALE_AFTER_SECS - 60);
    for name in [&old, &legacy, &recent, &old_in_use] {
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
    }
    // Someone is connected to this one: it is kept however old.
    let in_use_url =
        hearth_store::postgres::testing::with_dbname(&server_url().unwrap(), &old_in_use);
    let (user, held) = connect(&in_use_url).await;

    let made = fresh_database_url().await.unwrap();

    assert!(
        !exists(&client, &old).await,
        "a database older than any run is dropped"
    );
    assert!(
        !exists(&client, &legacy).await,
        "a database named without its time is dropped"
    );
    assert!(
        exists(&client, &recent).await,
        "a database of a run that may go on is kept"
    );
    assert!(
        exists(&client, &old_in_use).await,
        "a database someone is connected to is kept"
    );
    let made = made.parse::<tokio_postgres::Config>().unwrap();
    let made = made.get_dbname().unwrap();
    assert!(exists(&client, made).await, "the new database is there");

    drop(user);
    let _ = held.await;
    for name in [&recent, &old_in_use] {
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await
            .unwrap();
    }
}
