//! A run executes once: the recovery sweep, ingest and follow-ups racing to
//! queue the same runs never make a second model call for any of them.

use std::time::Duration;

use hearth_core::{DeliveryMode, Inbound, RunStatus};
use hearth_runtime::testing;
use hearth_runtime::{RuntimeOptions, WaitOutcome};
use hearth_store::RunFilter;
use hearth_testkit::{FakeOpenAi, Reply};
use hearth_tools::ToolRegistry;

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_racing_ingest_and_follow_ups_never_runs_a_run_twice() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let toml = common::fake_toml(&fake.base_url(), "", "");
    // A sweep every millisecond: it races every ingest and every follow-up.
    let options = RuntimeOptions {
        sweep_every: Duration::from_millis(1),
        ..RuntimeOptions::default()
    };
    let rt = common::build(
        common::builder(dir.path(), &toml, &store)
            .tools(ToolRegistry::new())
            .options(options),
    )
    .await;
    rt.start().await.unwrap();

    let mut accepted = Vec::new();
    for round in 0..6 {
        let mut batch = Vec::new();
        for t in 0..24 {
            let rt = rt.clone();
            // Steers land on a busy thread's active run or become follow-ups.
            let mode = if round % 2 == 1 {
                DeliveryMode::Steer
            } else {
                DeliveryMode::FollowUp
            };
            batch.push(tokio::spawn(async move {
                rt.ingest(Inbound {
                    source: "test".into(),
                    thread_key: testing::thread(format!("race:{t}")),
                    user_key: testing::user("test:user:1"),
                    text: format!("message {round} on {t}"),
                    delivery_mode: mode,
                    idempotency_key: None,
                    scope: None,
                    roles: Vec::new(),
                })
                .await
                .unwrap()
            }));
        }
        for b in batch {
            accepted.push(b.await.unwrap().run_id);
        }
    }
    for run_id in &accepted {
        match rt.wait(run_id, Duration::from_secs(60)).await.unwrap() {
            WaitOutcome::Finished(_) => {}
            WaitOutcome::Pending(e) => panic!("run not finished: {e:?}"),
        }
    }
    // Follow-ups made from unseen steers were stored with the end of the run
    // that could not take them, so they exist by now; wait for them too.
    let all = store
        .list_runs(&RunFilter {
            thread_key: None,
            status: None,
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    for run in &all {
        rt.wait(&run.run_id, Duration::from_secs(60)).await.unwrap();
    }
    let runs = store
        .list_runs(&RunFilter {
            thread_key: None,
            status: None,
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(runs.len(), all.len());
    assert!(runs.iter().all(|r| r.status == RunStatus::Succeeded));
    // Each message is the newest user text of exactly one model call (its
    // run's, or its active run's when it was steered in): a run executed
    // twice would send the same newest text twice.
    let mut newest: Vec<String> = fake
        .requests()
        .iter()
        .filter_map(|r| {
            r["messages"]
                .as_array()?
                .iter()
                .rev()
                .find(|m| m["role"] == "user")
                .and_then(|m| m["content"].as_str())
                .map(str::to_owned)
        })
        .collect();
    let calls = newest.len();
    newest.sort();
    newest.dedup();
    assert_eq!(
        newest.len(),
        calls,
        "{} runs made {calls} model calls, some for the same newest message",
        runs.len()
    );
    assert!(calls >= runs.len());
}

/// A message to a thread with nothing else to run is stored already claimed
/// (one commit), then ended (one more): no commit of its own for the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_to_an_idle_thread_is_stored_claimed_in_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let sqlite = hearth_store::SqliteStore::open(
        &dir.path().join("hearth.db"),
        hearth_store::Durability::Normal,
    )
    .unwrap();
    let store: std::sync::Arc<dyn hearth_store::Store> = std::sync::Arc::new(sqlite.clone());
    let toml = common::fake_toml(&fake.base_url(), "", "");
    let rt =
        common::build(common::builder(dir.path(), &toml, &store).tools(ToolRegistry::new())).await;
    // Not started: no sweep or retention writes between the counts.
    let message = |text: &str| Inbound {
        source: "test".into(),
        thread_key: testing::thread("idle:1"),
        user_key: testing::user("test:user:1"),
        text: text.to_owned(),
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
        scope: None,
        roles: Vec::new(),
    };

    // The answer waits at the gate until the store was counted: a run that
    // ended at once would add its end's commit to the count of its message's.
    let gate = hearth_testkit::Gate::new();
    fake.push(Reply::text("answered").pausing_after(1, gate.clone()));
    let before = sqlite.committed_batches();
    let env = rt.ingest(message("first")).await.unwrap();
    assert_eq!(
        sqlite.committed_batches() - before,
        1,
        "stored in one commit"
    );
    let stored = store.get_run(&env.run_id).await.unwrap().unwrap();
    assert_eq!(
        stored.status,
        RunStatus::Running,
        "stored claimed: {stored:?}"
    );
    assert_eq!(stored.model.as_deref(), Some("fake/m"));
    gate.open();
    match rt.wait(&env.run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(done) => assert_eq!(done.status, RunStatus::Succeeded),
        WaitOutcome::Pending(e) => panic!("not finished: {e:?}"),
    }
    assert_eq!(
        sqlite.committed_batches() - before,
        2,
        "stored claimed, then ended: no separate claim"
    );
    assert_eq!(fake.requests().len(), 1);
}
