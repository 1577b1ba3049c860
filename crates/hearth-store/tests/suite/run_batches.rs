//! Messages that reach a PostgreSQL store together are stored by one
//! statement (`postgres/batch_queue.rs`, migration 0019, issue 19's
//! throughput): each run of the batch is stored as it would be alone, a run
//! PostgreSQL refuses fails only its own caller, and replicas storing
//! batches at once keep one run per thread at a time without deadlocking.

use hearth_core::RunStatus;
use hearth_store::conformance::fixtures::new_run;
use hearth_store::postgres::testing::{TEST_URL_VAR, fresh_database_url, refuse_inserts};
use hearth_store::prelude::*;
use hearth_store::{CreateRunOutcome, HistorySeen, PostgresStore, RunRecord};

/// The run an outcome holds, whether stored now or found by its key.
fn run_of(outcome: &CreateRunOutcome) -> &RunRecord {
    match outcome {
        CreateRunOutcome::Created(run) | CreateRunOutcome::Existing(run) => run,
    }
}

/// A batch of five: two messages of one idle thread, both asked claimed
/// (the first is, the second waits queued behind it); two with one
/// idempotency key on another thread (the second yields to the first); one
/// asked queued. Each is what storing it alone, in that order, gives.
#[tokio::test]
async fn runs_stored_together_are_each_stored_as_alone() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let store = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    let (together, outcomes) = store
        .store_as_one_batch(
            vec![
                (new_run("a1", "ta", None), true),
                (new_run("a2", "ta", None), true),
                (new_run("k1", "tk", Some("key")), true),
                (new_run("k2", "tk", Some("key")), true),
                (new_run("q", "tq", None), false),
            ],
            "replica-1",
            9_999_999_999_999,
            "p/m",
            false,
        )
        .await;
    assert!(together, "one statement stored the batch: {outcomes:?}");
    let outcomes: Vec<(CreateRunOutcome, Option<HistorySeen>)> =
        outcomes.into_iter().map(Result::unwrap).collect();

    let (a1, had) = &outcomes[0];
    assert!(matches!(a1, CreateRunOutcome::Created(_)), "{a1:?}");
    let a1 = run_of(a1);
    assert_eq!((a1.run_id.as_str(), a1.status), ("a1", RunStatus::Running));
    assert_eq!(a1.lease_owner.as_deref(), Some("replica-1"));
    assert_eq!(a1.model.as_deref(), Some("p/m"));
    assert_eq!(
        *had,
        Some(HistorySeen::Empty),
        "a new thread has no message"
    );

    let a2 = run_of(&outcomes[1].0);
    assert_eq!((a2.run_id.as_str(), a2.status), ("a2", RunStatus::Queued));
    assert_eq!(a2.lease_owner, None, "behind a1, not claimed");
    assert!(a2.seq > a1.seq, "stored in their order");

    assert!(matches!(outcomes[2].0, CreateRunOutcome::Created(_)));
    match &outcomes[3].0 {
        CreateRunOutcome::Existing(run) => assert_eq!(run.run_id, "k1"),
        other => panic!("the twin was stored: {other:?}"),
    }
    assert_eq!(outcomes[3].1, None);
    assert!(store.get_run("k2").await.unwrap().is_none());

    let q = run_of(&outcomes[4].0);
    assert_eq!(
        (q.status, q.lease_owner.as_deref()),
        (RunStatus::Queued, None)
    );
}

/// A batch holding a run PostgreSQL refuses (a trigger the test adds): the
/// statement fails, each run is stored again alone, and only the refused
/// one fails.
#[tokio::test]
async fn a_run_postgresql_refuses_fails_only_its_own_caller() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let store = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    refuse_inserts(&url, "runs", "input").await;
    let mut bad = new_run("bad", "tb", None);
    bad.input = "refuse me, PostgreSQL".to_owned();
    let (together, outcomes) = store
        .store_as_one_batch(
            vec![
                (new_run("a", "ta", None), true),
                (bad, true),
                (new_run("c", "tc", None), true),
            ],
            "replica-1",
            9_999_999_999_999,
            "p/m",
            false,
        )
        .await;
    assert!(!together);
    assert!(outcomes[1].is_err(), "{outcomes:?}");
    for (i, id) in [(0, "a"), (2, "c")] {
        let (outcome, _) = outcomes[i].as_ref().unwrap();
        assert_eq!(run_of(outcome).run_id, id);
        assert_eq!(
            store.get_run(id).await.unwrap().unwrap().status,
            RunStatus::Running
        );
    }
    assert!(store.get_run("bad").await.unwrap().is_none());
}

/// Two stores on one database (two replicas), 120 messages at once over 8
/// threads, each asked claimed, through two connections each, so that the
/// queues batch them: every message is stored once, and each thread has
/// exactly one run claimed (its first) and the rest queued in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_storing_batches_at_once_keep_one_run_per_thread() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let stores = [
        PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap(),
        PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap(),
    ];
    let (sql, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);

    let mut stored = tokio::task::JoinSet::new();
    for i in 0..120 {
        let store = stores[i % 2].clone();
        // Threads in an order that differs between the replicas, so that
        // their batches hold the threads' locks in different orders of
        // arrival.
        let thread = if i % 2 == 0 {
            (i / 2) % 8
        } else {
            7 - (i / 2) % 8
        };
        let run = new_run(&format!("run_{i}"), &format!("t{thread}"), None);
        let owner = format!("replica-{}", i % 2);
        stored.spawn(async move {
            store
                .create_claimed_run_seeing_history(run, &owner, 9_999_999_999_999, "p/m", None)
                .await
        });
    }
    let mut created = 0;
    while let Some(joined) = stored.join_next().await {
        let (outcome, _) = joined.unwrap().unwrap();
        assert!(
            matches!(outcome, CreateRunOutcome::Created(_)),
            "{outcome:?}"
        );
        created += 1;
    }
    assert_eq!(created, 120);

    for thread in 0..8 {
        let rows = sql
            .query(
                "SELECT status, lease_owner FROM runs WHERE thread_key = $1 ORDER BY seq",
                &[&format!("t{thread}")],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 15, "t{thread}");
        let statuses: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(statuses[0], "running", "t{thread}: {statuses:?}");
        assert!(
            statuses[1..].iter().all(|s| s == "queued"),
            "t{thread}: one run at a time: {statuses:?}"
        );
        assert!(
            rows[1..]
                .iter()
                .all(|r| r.get::<_, Option<String>>(1).is_none())
        );
    }
}

/// Two batches holding the same two threads in opposite orders, released
/// at the same instant by a third transaction that held both threads'
/// locks: taken in the order given, each would hold one lock and wait for
/// the other's (PostgreSQL would end one after `deadlock_timeout`, and its
/// runs would be stored again alone); taken in one order, the second waits
/// for the first, and both batches are stored whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_holding_threads_in_opposite_orders_do_not_deadlock() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let one = PostgresStore::connect(&url, TEST_URL_VAR, 1).await.unwrap();
    let two = PostgresStore::connect(&url, TEST_URL_VAR, 1).await.unwrap();
    let (mut holder, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let (watcher, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let held = holder.transaction().await.unwrap();
    held.batch_execute(
        "SELECT pg_advisory_xact_lock(1751474546, hashtext('tx')), \
         pg_advisory_xact_lock(1751474546, hashtext('ty'))",
    )
    .await
    .unwrap();

    let batch = |store: PostgresStore, first: &'static str, second: &'static str, n: u32| {
        tokio::spawn(async move {
            store
                .store_as_one_batch(
                    vec![
                        (new_run(&format!("{first}{n}"), first, None), true),
                        (new_run(&format!("{second}{n}"), second, None), true),
                    ],
                    "replica",
                    9_999_999_999_999,
                    "p/m",
                    false,
                )
                .await
        })
    };
    let waiting = || async {
        watcher
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                &[],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    let first = batch(one, "tx", "ty", 1);
    while waiting().await < 1 {
        tokio::task::yield_now().await;
    }
    let second = batch(two, "ty", "tx", 2);
    while waiting().await < 2 {
        tokio::task::yield_now().await;
    }
    held.commit().await.unwrap();

    for batch in [first, second] {
        let (together, outcomes) = batch.await.unwrap();
        assert!(
            together,
            "a batch was refused and stored alone: {outcomes:?}"
        );
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    }
}

/// A batch whose models were chosen from the defaults (no settings read):
/// the run of a thread with settings of its own is stored held, without a
/// model, and the others claimed with the model given, each as alone.
#[tokio::test]
async fn runs_stored_together_assuming_defaults_are_held_where_a_thread_has_settings() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let store = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    store
        .set_thread_model("configured", Some("p/other"))
        .await
        .unwrap();
    let (together, outcomes) = store
        .store_as_one_batch(
            vec![
                (new_run("plain", "plain", None), true),
                (new_run("set", "configured", None), true),
            ],
            "replica-1",
            9_999_999_999_999,
            "p/m",
            true,
        )
        .await;
    assert!(together, "one statement stored the batch: {outcomes:?}");
    let runs: Vec<RunRecord> = outcomes
        .into_iter()
        .map(|o| run_of(&o.unwrap().0).clone())
        .collect();
    assert_eq!(
        (runs[0].status, runs[0].model.as_deref()),
        (RunStatus::Running, Some("p/m"))
    );
    assert_eq!(
        (
            runs[1].status,
            runs[1].lease_owner.as_deref(),
            runs[1].model.as_deref()
        ),
        (RunStatus::Running, Some("replica-1"), None),
        "held for its worker"
    );
}
