//! Recovery of runs whose end could not be stored.

use std::time::Duration;

use hearth_agent::{Engine, Limits};
use hearth_core::{DeliveryMode, Inbound, RunStatus};
use hearth_runtime::{Runtime, RuntimeOptions, WaitOutcome};
use hearth_testkit::{FakeOpenAi, Reply};
use hearth_tools::ToolRegistry;

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_end_could_not_be_stored_is_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    // The first answer comes once the database is locked (below).
    fake.push(Reply::text("lost").with_delay(Duration::from_secs(2)));
    let store = common::store(dir.path());
    let catalog = common::catalog(&common::fake_toml(&fake.base_url(), "", ""));
    let engine = Engine::new(
        store.clone(),
        ToolRegistry::new(),
        Limits::default(),
        String::new(),
    );
    let options = RuntimeOptions {
        lease: Duration::from_millis(200),
        sweep_every: Duration::from_millis(50),
        ..RuntimeOptions::default()
    };
    let rt = Runtime::new(store.clone(), catalog, engine, options);
    rt.start().await.unwrap();
    let run = rt
        .ingest(Inbound {
            source: "test".into(),
            thread_key: "t:lost-end".into(),
            user_key: "test:user:1".into(),
            text: "hello".into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap();
    fake.wait_for_requests(1).await;

    // Another connection holds the write lock past the store's busy timeout:
    // storing the run's end fails.
    let path = dir.path().join("h.db");
    let locker = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        conn
    })
    .join()
    .unwrap();
    let first = rt.wait(&run.run_id, Duration::from_secs(30)).await.unwrap();
    let WaitOutcome::Pending(env) = first else {
        panic!("the end was stored despite the lock: {first:?}");
    };
    assert_eq!(env.status, RunStatus::Running, "{env:?}");
    drop(locker);

    // The run stays running in the store; recovery must run it again.
    fake.wait_for_requests(2).await;
    match rt.wait(&run.run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(env) => {
            assert_eq!(env.status, RunStatus::Succeeded, "{env:?}");
            assert_eq!(env.output.unwrap().text, "echo: hello");
        }
        WaitOutcome::Pending(env) => panic!("not recovered: {env:?}"),
    }
}
