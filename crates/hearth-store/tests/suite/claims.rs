//! Claims of the next runnable run and wake-ups between replicas, on
//! PostgreSQL (the store several replicas share).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_core::RunStatus;
use hearth_store::conformance::fixtures::{created, finish};
use hearth_store::{PostgresStore, RunStore, Store, Wake};

/// Far enough from the fixtures' times that no lease lapses by accident.
const NOW: i64 = 1_700_000_000_000;

/// The next wake-up, within 5 s.
async fn next(wakes: &mut tokio::sync::mpsc::Receiver<Wake>) -> Wake {
    tokio::time::timeout(Duration::from_secs(5), wakes.recv())
        .await
        .expect("a wake-up within 5 s")
        .expect("the listener lives")
}

async fn ended(store: &PostgresStore, run_id: &str) {
    let mut done = finish(run_id, Vec::new());
    done.steps.clear();
    assert!(store.finish_run(done).await.unwrap(), "{run_id} ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_claim_takes_the_oldest_head_of_a_thread_and_lapsed_leases() {
    let Some((store, ())) = hearth_store::postgres::testing::fresh_store().await else {
        return;
    };
    let cluster = store.cluster().unwrap();
    created(&store, "a1", "ta").await;
    created(&store, "b1", "tb").await;
    created(&store, "a2", "ta").await;
    let until = NOW + 10_000;

    let first = cluster
        .claim_next("r1", until, NOW)
        .await
        .unwrap()
        .unwrap()
        .run;
    assert_eq!(first.run_id, "a1");
    assert_eq!(first.status, RunStatus::Running);
    assert_eq!(first.lease_owner.as_deref(), Some("r1"));
    // a2 waits behind a1, which runs: b1 is next, then nothing.
    let second = cluster
        .claim_next("r2", until, NOW)
        .await
        .unwrap()
        .unwrap()
        .run;
    assert_eq!(second.run_id, "b1");
    assert!(
        cluster
            .claim_next("r2", until, NOW)
            .await
            .unwrap()
            .is_none()
    );
    // The owner re-claims its own run (the worker's claim after the pull).
    assert!(
        store
            .claim_run_with_model("a1", "r1", until, NOW, "openai/gpt", None)
            .await
            .unwrap()
            .is_some()
    );
    // a1's lease lapses (its replica died): a1 is claimable again, a2 not.
    let later = until + 1;
    store
        .renew_leases("r2", &["b1".to_owned()], later + 60_000)
        .await
        .unwrap();
    let taken = cluster
        .claim_next("r3", later + 10_000, later)
        .await
        .unwrap()
        .unwrap()
        .run;
    assert_eq!(taken.run_id, "a1");
    assert_eq!(taken.lease_owner.as_deref(), Some("r3"));
    assert_eq!(
        taken.model.as_deref(),
        Some("openai/gpt"),
        "the model stays"
    );
    assert!(
        cluster
            .claim_next("r3", later + 10_000, later)
            .await
            .unwrap()
            .is_none(),
        "b1 holds its lease, a2 waits behind a1"
    );
    // Of its thread only: a1 ends, a2 is its thread's next.
    ended(&store, "a1").await;
    assert!(
        cluster
            .claim_next_of_thread("tb", "r3", later + 10_000, later)
            .await
            .unwrap()
            .is_none()
    );
    let next = cluster
        .claim_next_of_thread("ta", "r3", later + 10_000, later)
        .await
        .unwrap()
        .unwrap()
        .run;
    assert_eq!(next.run_id, "a2");

    // A stopping replica gives up what it claimed and did not start.
    assert_eq!(
        cluster
            .release_run_leases("r3", &["nothing".to_owned()])
            .await
            .unwrap(),
        1
    );
    let again = cluster
        .claim_next("r4", later + 10_000, later)
        .await
        .unwrap()
        .unwrap()
        .run;
    assert_eq!(again.run_id, "a2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claimers_take_each_run_once_and_keep_each_threads_order() {
    let Some((store, ())) = hearth_store::postgres::testing::fresh_store().await else {
        return;
    };
    const THREADS: usize = 6;
    const PER_THREAD: usize = 5;
    const CLAIMERS: usize = 8;
    for i in 0..PER_THREAD {
        for t in 0..THREADS {
            created(&store, &format!("t{t}-{i}"), &format!("thread{t}")).await;
        }
    }
    // Each claimer claims, checks that nothing else of the thread runs,
    // and ends what it claimed, until some rounds in a row find nothing.
    let running = Arc::new(Mutex::new(HashSet::<String>::new()));
    let claims = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    for c in 0..CLAIMERS {
        let store = store.clone();
        let (running, claims) = (running.clone(), claims.clone());
        tasks.push(tokio::spawn(async move {
            let owner = format!("claimer{c}");
            let mut idle_rounds = 0;
            while idle_rounds < 20 {
                let cluster = store.cluster().unwrap();
                let Some(hearth_store::Claimed { run, .. }) =
                    cluster.claim_next(&owner, NOW + 60_000, NOW).await.unwrap()
                else {
                    idle_rounds += 1;
                    tokio::task::yield_now().await;
                    continue;
                };
                idle_rounds = 0;
                assert!(
                    running.lock().unwrap().insert(run.thread_key.clone()),
                    "two runs of {} at once",
                    run.thread_key
                );
                claims.lock().unwrap().push(run.run_id.clone());
                tokio::task::yield_now().await;
                running.lock().unwrap().remove(&run.thread_key);
                ended(&store, &run.run_id).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let all = claims.lock().unwrap().clone();
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(all.len(), unique.len(), "a run was claimed twice: {all:?}");
    assert_eq!(all.len(), THREADS * PER_THREAD, "every run was claimed");
    // In the order of the claims, each thread's runs come in their order.
    let mut order: HashMap<String, Vec<usize>> = HashMap::new();
    for id in &all {
        let (t, i) = id.split_once('-').unwrap();
        order
            .entry(t.to_owned())
            .or_default()
            .push(i.parse().unwrap());
    }
    for (t, claimed) in order {
        assert_eq!(claimed, (0..PER_THREAD).collect::<Vec<_>>(), "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_hears_queued_runs_ends_and_answers() {
    let Some((store, ())) = hearth_store::postgres::testing::fresh_store().await else {
        return;
    };
    let cluster = store.cluster().unwrap();
    let mut wakes = cluster.listen();
    assert_eq!(next(&mut wakes).await, Wake::Connected);
    created(&store, "r1", "t1").await;
    assert_eq!(next(&mut wakes).await, Wake::Work);
    created(&store, "r2", "t1").await;
    assert_eq!(next(&mut wakes).await, Wake::Work);
    cluster
        .claim_next("a", NOW + 10_000, NOW)
        .await
        .unwrap()
        .unwrap();
    // r1 ends while r2 waits behind it: its end, and work.
    ended(&store, "r1").await;
    assert_eq!(next(&mut wakes).await, Wake::Ended("r1".into()));
    assert_eq!(next(&mut wakes).await, Wake::Work);
    ended(&store, "r2").await;
    assert_eq!(next(&mut wakes).await, Wake::Ended("r2".into()));
    // An answered confirmation names its run.
    hearth_store::conformance::fixtures::awaiting(&store).await;
    let answered = hearth_store::ConfirmationStore::resolve_confirmation(
        &store,
        "hash_1",
        hearth_store::ConfirmationState::Approved,
        "user:1",
        NOW,
        None,
    )
    .await
    .unwrap();
    let run_id = answered.expect("the confirmation was pending").run_id;
    loop {
        match next(&mut wakes).await {
            Wake::Confirmation(id) => {
                assert_eq!(id, run_id);
                break;
            }
            // `awaiting` made and claimed a run of its own, which asks.
            Wake::Work => {}
            Wake::Asks(id) => assert_eq!(id, "run_1"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_hears_incognito_changes_and_a_lease_names_its_holder() {
    let Some((store, ())) = hearth_store::postgres::testing::fresh_store().await else {
        return;
    };
    let cluster = store.cluster().unwrap();
    let mut wakes = cluster.listen();
    assert_eq!(next(&mut wakes).await, Wake::Connected);
    hearth_store::ThreadStore::set_thread_incognito(&store, "t:x", true)
        .await
        .unwrap();
    assert_eq!(
        next(&mut wakes).await,
        Wake::Incognito {
            thread_key: "t:x".into(),
            on: true
        }
    );
    hearth_store::ThreadStore::set_thread_incognito(&store, "t:x", false)
        .await
        .unwrap();
    assert_eq!(
        next(&mut wakes).await,
        Wake::Incognito {
            thread_key: "t:x".into(),
            on: false
        }
    );
    assert!(
        cluster
            .acquire_lease("incognito:t:x", "r1", NOW + 10, NOW)
            .await
            .unwrap()
    );
    assert_eq!(
        cluster.lease_holder("incognito:t:x", NOW).await.unwrap(),
        Some("r1".into())
    );
    assert_eq!(
        cluster
            .lease_holder("incognito:t:x", NOW + 11)
            .await
            .unwrap(),
        None,
        "a lapsed lease has no holder"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_racing_into_one_idle_thread_are_claimed_at_most_once_and_kept_in_order() {
    let Some((store, ())) = hearth_store::postgres::testing::fresh_store().await else {
        return;
    };
    // Rounds of replicas storing a message each on the same idle thread at
    // the same instant, each believing the thread idle (so each asks for
    // its run stored claimed).
    for round in 0..20 {
        let thread = format!("race{round}");
        let mut tasks = Vec::new();
        for r in 0..4 {
            let store = store.clone();
            let thread = thread.clone();
            tasks.push(tokio::spawn(async move {
                let run = hearth_store::conformance::fixtures::new_run(
                    &format!("{thread}-{r}"),
                    &thread,
                    None,
                );
                let owner = format!("replica{r}");
                match store
                    .create_claimed_run(run, &owner, NOW + 60_000, "openai/gpt", None)
                    .await
                    .unwrap()
                {
                    hearth_store::CreateRunOutcome::Created(run) => run,
                    other => panic!("{other:?}"),
                }
            }));
        }
        let mut runs = Vec::new();
        for t in tasks {
            runs.push(t.await.unwrap());
        }
        let claimed: Vec<_> = runs
            .iter()
            .filter(|r| r.status == RunStatus::Running)
            .collect();
        assert_eq!(claimed.len(), 1, "round {round}: {runs:#?}");
        // The claimed one is the thread's first: nothing before it.
        let first = runs.iter().map(|r| r.seq).min().unwrap();
        assert_eq!(claimed[0].seq, first, "round {round}: {runs:#?}");
    }
}

/// Ends `run_id` as a replica that is not executing it does (a cancel
/// answered there) at `at`.
async fn cancelled_elsewhere(store: &PostgresStore, run_id: &str, at: i64) {
    let mut done = finish(run_id, Vec::new());
    done.steps.clear();
    done.status = RunStatus::Cancelled;
    done.output = None;
    done.finished_at = at;
    done.executed_elsewhere = true;
    assert!(store.finish_run(done).await.unwrap(), "{run_id} ends");
}

/// A run ended by a replica that is not executing it keeps the executing
/// replica's unexpired lease: its thread's next run is neither claimed nor
/// stored claimed until that replica lets go (migration 0023). A lease that
/// lapsed holds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_ended_elsewhere_holds_its_thread_until_its_executor_lets_go() {
    let Some((store, ())) = hearth_store::postgres::testing::fresh_store().await else {
        return;
    };
    let cluster = store.cluster().unwrap();
    let mut wakes = cluster.listen();
    assert_eq!(next(&mut wakes).await, Wake::Connected);
    created(&store, "h1", "th").await;
    created(&store, "h2", "th").await;
    assert_eq!(next(&mut wakes).await, Wake::Work);
    assert_eq!(next(&mut wakes).await, Wake::Work);
    let until = NOW + 10_000;
    let first = cluster.claim_next("r1", until, NOW).await.unwrap().unwrap();
    assert_eq!(first.run.run_id, "h1");
    cancelled_elsewhere(&store, "h1", NOW + 1_000).await;
    // The end is heard (the replica executing h1 stops it), and so is h2,
    // which no claim takes yet.
    assert_eq!(next(&mut wakes).await, Wake::Ended("h1".into()));
    assert_eq!(next(&mut wakes).await, Wake::Work);
    let h1 = store.get_run("h1").await.unwrap().unwrap();
    assert_eq!(h1.status, RunStatus::Cancelled);
    assert_eq!(h1.lease_owner.as_deref(), Some("r1"), "{h1:?}");
    for owner in ["r1", "r2"] {
        assert!(
            cluster
                .claim_next(owner, until, NOW + 2_000)
                .await
                .unwrap()
                .is_none(),
            "h2 waits while h1 is held"
        );
        assert!(
            cluster
                .claim_next_of_thread("th", owner, until, NOW + 2_000)
                .await
                .unwrap()
                .is_none()
        );
    }
    // A message to the thread meanwhile is stored queued, not claimed.
    let mut third = hearth_store::conformance::fixtures::new_run("h3", "th", None);
    third.created_at = NOW + 2_000;
    match store
        .create_claimed_run(third, "r2", until, "openai/gpt", None)
        .await
        .unwrap()
    {
        hearth_store::CreateRunOutcome::Created(run) => {
            assert_eq!(run.status, RunStatus::Queued, "{run:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(next(&mut wakes).await, Wake::Work);
    // Only its holder lets go; then the replicas hear that h2 may start.
    assert!(!cluster.let_go("h1", "r2").await.unwrap());
    assert!(cluster.let_go("h1", "r1").await.unwrap());
    assert_eq!(next(&mut wakes).await, Wake::Work);
    let taken = cluster
        .claim_next("r2", until, NOW + 2_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.run.run_id, "h2");

    // Ended elsewhere after its lease lapsed (its replica died): nothing
    // is held, and the thread's next run is claimable at once.
    created(&store, "l1", "tl").await;
    created(&store, "l2", "tl").await;
    cluster
        .claim_next("r1", NOW + 1_000, NOW)
        .await
        .unwrap()
        .unwrap();
    cancelled_elsewhere(&store, "l1", NOW + 5_000).await;
    let l1 = store.get_run("l1").await.unwrap().unwrap();
    assert_eq!(l1.lease_owner, None, "{l1:?}");
    let next_run = cluster
        .claim_next_of_thread("tl", "r2", NOW + 15_000, NOW + 5_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next_run.run.run_id, "l2");
}

/// How many runs have a supplied part kept (migration 0022).
async fn kept_supplied(store: &PostgresStore) -> i64 {
    hearth_store::postgres::testing::sql_client(store)
        .await
        .query_one("SELECT count(*) FROM run_supplied", &[])
        .await
        .unwrap()
        .get(0)
}

/// A message stored queued with what its surface supplied (a model, a
/// client's conversation) gives it to the replica that claims it; one
/// stored claimed by the replica that took it keeps nothing (that replica
/// runs it); the retention pass drops what finished runs kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_queued_run_was_supplied_comes_with_its_claim() {
    use hearth_store::conformance::fixtures::new_run;
    use hearth_store::{RetentionCutoffs, RetentionStore, RunClaim};

    let Some((store, ())) = hearth_store::postgres::testing::fresh_store().await else {
        return;
    };
    let cluster = store.cluster().unwrap();
    let supplied = r#"{"model":"fake/other"}"#;
    let claim = RunClaim {
        owner: "r1",
        lease_until: NOW + 10_000,
        model: "fake/m",
        mode: None,
        assumes_defaults: true,
    };
    // On an idle thread the run is stored claimed: nothing is kept.
    let (first, _) = store
        .create_run_supplied(new_run("s1", "ts", None), Some(claim), supplied)
        .await
        .unwrap();
    let hearth_store::CreateRunOutcome::Created(first) = first else {
        panic!("s1 is new");
    };
    assert_eq!(first.lease_owner.as_deref(), Some("r1"));
    assert_eq!(kept_supplied(&store).await, 0);
    // Behind it, the next is stored queued, and kept with it.
    let (second, _) = store
        .create_run_supplied(new_run("s2", "ts", None), Some(claim), supplied)
        .await
        .unwrap();
    let hearth_store::CreateRunOutcome::Created(second) = second else {
        panic!("s2 is new");
    };
    assert_eq!(second.status, RunStatus::Queued);
    assert_eq!(kept_supplied(&store).await, 1);
    // A twin (same idempotency key) keeps nothing more.
    let keyed = || new_run("s3", "tk", Some("key"));
    store.create_run(keyed()).await.unwrap();
    let (twin, _) = store
        .create_run_supplied(keyed(), None, supplied)
        .await
        .unwrap();
    assert!(matches!(twin, hearth_store::CreateRunOutcome::Existing(_)));
    assert_eq!(kept_supplied(&store).await, 1);

    ended(&store, "s1").await;
    let next = cluster
        .claim_next_of_thread("ts", "r2", NOW + 10_000, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.run.run_id, "s2");
    let got: serde_json::Value = serde_json::from_str(next.supplied.as_deref().unwrap()).unwrap();
    assert_eq!(got, serde_json::json!({"model": "fake/other"}));

    let cutoffs = RetentionCutoffs {
        memories_unused_since: 0,
        audit_before: 0,
        confirmations_expired_before: 0,
        channel_records_before: 0,
        reply_messages_before: 0,
    };
    store.purge_expired(cutoffs).await.unwrap();
    assert_eq!(kept_supplied(&store).await, 1, "s2 still runs");
    ended(&store, "s2").await;
    store.purge_expired(cutoffs).await.unwrap();
    assert_eq!(kept_supplied(&store).await, 0, "s2 ended");
}
