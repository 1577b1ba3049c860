//! Replicas and duty leases on PostgreSQL (the store several replicas share).

use hearth_store::{ReplicaBeat, Store};

fn beat(id: &str, at: i64, runs: u64) -> ReplicaBeat {
    ReplicaBeat {
        id: id.into(),
        addr: format!("127.0.0.1:{}", 7000 + runs),
        started_at: 1_000,
        at,
        runs_executing: runs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_has_one_holder_until_it_expires_and_replicas_list_what_they_hold() {
    let Some((store, ())) = hearth_store::postgres::testing::fresh_store().await else {
        return;
    };
    assert_eq!(store.backend(), "postgres");
    let cluster = store.cluster().unwrap();
    cluster.heartbeat(&beat("a", 10_000, 2)).await.unwrap();
    cluster.heartbeat(&beat("b", 10_000, 0)).await.unwrap();

    // Racing for one duty: exactly one wins.
    let (x, y) = tokio::join!(
        cluster.acquire_lease("telegram", "a", 20_000, 10_000),
        cluster.acquire_lease("telegram", "b", 20_000, 10_000),
    );
    let (x, y) = (x.unwrap(), y.unwrap());
    assert!(x ^ y, "both or neither won: {x} {y}");
    let (holder, other) = if x { ("a", "b") } else { ("b", "a") };
    // The holder renews; the other cannot take a live lease...
    assert!(
        cluster
            .acquire_lease("telegram", holder, 30_000, 15_000)
            .await
            .unwrap()
    );
    assert!(
        !cluster
            .acquire_lease("telegram", other, 40_000, 29_999)
            .await
            .unwrap()
    );
    // ...but takes it once it expired.
    assert!(
        cluster
            .acquire_lease("telegram", other, 60_000, 30_001)
            .await
            .unwrap()
    );
    assert!(
        cluster
            .acquire_lease("sweep", holder, 60_000, 30_001)
            .await
            .unwrap()
    );

    let replicas = cluster.replicas(0, 30_002).await.unwrap();
    let ids: Vec<_> = replicas.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    let of = |id: &str| replicas.iter().find(|r| r.id == id).unwrap().clone();
    assert_eq!(of(other).holds, ["telegram"]);
    assert_eq!(of(holder).holds, ["sweep"]);
    assert_eq!(of("a").runs_executing, 2);
    // A replica not seen since `since` is not listed.
    cluster.heartbeat(&beat("a", 50_000, 1)).await.unwrap();
    let recent = cluster.replicas(40_000, 50_000).await.unwrap();
    assert_eq!(recent.len(), 1);
    assert_eq!(recent[0].runs_executing, 1);

    // Leaving frees what it held.
    cluster.leave(other).await.unwrap();
    assert!(
        cluster
            .acquire_lease("telegram", holder, 70_000, 31_000)
            .await
            .unwrap()
    );
    cluster.release_lease("telegram", holder).await.unwrap();
    assert!(
        cluster
            .acquire_lease("telegram", "c", 70_000, 31_000)
            .await
            .unwrap()
    );

    let skew = cluster.database_now().await.unwrap() - hearth_core::now_ms();
    assert!(skew.abs() < 5_000, "the database's clock is {skew} ms off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_keeps_its_order_between_replicas() {
    use hearth_core::RunStatus;
    use hearth_store::conformance::fixtures::{created, finish, new_run};
    use hearth_store::{CreateRunOutcome, RunStore};
    let Some((store, ())) = hearth_store::postgres::testing::fresh_store().await else {
        return;
    };
    let first = created(&store, "r1", "t").await;
    let second = created(&store, "r2", "t").await;
    let now = first.created_at;
    // Replica b may not start the later message while the earlier waits or runs.
    assert!(
        store
            .claim_run(&second.run_id, "b", now + 10_000, now)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claim_run(&first.run_id, "a", now + 10_000, now)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .claim_run(&second.run_id, "b", now + 10_000, now)
            .await
            .unwrap()
            .is_none()
    );
    // A replica that thinks the thread idle stores its message unclaimed.
    let third = match store
        .create_claimed_run(
            new_run("r3", "t", None),
            "b",
            now + 10_000,
            "echo/echo",
            None,
        )
        .await
        .unwrap()
    {
        CreateRunOutcome::Created(run) => run,
        CreateRunOutcome::Existing(run) => panic!("a new run was taken for a twin: {run:?}"),
    };
    assert_eq!(third.status, RunStatus::Queued);
    assert_eq!(third.lease_owner, None);
    // Once the earlier one ends, the next in order is free, and only it.
    assert!(
        store
            .finish_run(finish(&first.run_id, Vec::new()))
            .await
            .unwrap()
    );
    assert!(
        store
            .claim_run(&third.run_id, "b", now + 10_000, now)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claim_run(&second.run_id, "b", now + 10_000, now)
            .await
            .unwrap()
            .is_some()
    );
    // Another thread is not held up by this one.
    let other = store
        .create_claimed_run(
            new_run("r4", "u", None),
            "b",
            now + 10_000,
            "echo/echo",
            None,
        )
        .await
        .unwrap();
    assert!(matches!(other, CreateRunOutcome::Created(run) if run.status == RunStatus::Running));
}
