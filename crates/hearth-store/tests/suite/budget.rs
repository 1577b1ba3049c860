//! Budget reservations shared by replicas on PostgreSQL: two replicas
//! racing for one pool hold no more than its limit, a dead replica's holds
//! stop counting after its lease, and a settlement replaces the estimate
//! with the real use.

use std::sync::Arc;

use hearth_store::budget::{LedgerCharge, LedgerHold, Reserved};
use hearth_store::{BudgetLedger, PostgresStore, ReplicaBeat, Store};

fn beat(id: &str, at: i64) -> ReplicaBeat {
    ReplicaBeat {
        id: id.into(),
        addr: "127.0.0.1:1".into(),
        started_at: 1_000,
        at,
        runs_executing: 0,
    }
}

fn hold(amount: f64) -> LedgerHold {
    LedgerHold {
        pool: "daily".into(),
        subject: String::new(),
        since: 0,
        limit: 10.0,
        amount,
    }
}

fn charge(amount: f64) -> LedgerCharge {
    LedgerCharge {
        pool: "daily".into(),
        subject: String::new(),
        since: 0,
        bucket: 0,
        amount,
        limit: 10.0,
        announce_key: 0,
    }
}

/// Two stores on one fresh database, as two replicas have; `None` without
/// a test server.
async fn two_replicas() -> Option<(PostgresStore, PostgresStore)> {
    let url = hearth_store::postgres::testing::fresh_database_url().await?;
    let var = hearth_store::postgres::testing::TEST_URL_VAR;
    let a = PostgresStore::connect(&url, var, 4).await.unwrap();
    let b = PostgresStore::connect(&url, var, 4).await.unwrap();
    for (store, id) in [(&a, "a"), (&b, "b")] {
        store
            .cluster()
            .unwrap()
            .heartbeat(&beat(id, 10_000))
            .await
            .unwrap();
    }
    Some((a, b))
}

/// Used and reserved of the pool as every replica sees it.
async fn pool(ledger: &dyn BudgetLedger, alive_since: i64) -> (f64, f64) {
    let rows = ledger
        .status(&[("daily".into(), 0)], "an onlooker", alive_since)
        .await
        .unwrap();
    rows.first()
        .map_or((0.0, 0.0), |r| (r.state.used, r.state.reserved))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_racing_for_a_pool_hold_no_more_than_its_limit() {
    let Some((a, b)) = two_replicas().await else {
        return;
    };
    let ledgers: [(Arc<dyn BudgetLedger>, &str); 2] = [
        (a.budget_ledger().unwrap(), "a"),
        (b.budget_ledger().unwrap(), "b"),
    ];
    // Each replica tries 20 calls of 1 at once against a limit of 10, and
    // keeps what it got: the holds are the limit, never more.
    let mut tasks = Vec::new();
    for (ledger, id) in &ledgers {
        for _ in 0..20 {
            let (ledger, id) = (ledger.clone(), id.to_string());
            tasks.push(tokio::spawn(async move {
                ledger
                    .reserve(&[hold(1.0)], &id, 10_000, 5_000)
                    .await
                    .unwrap()
            }));
        }
    }
    let mut held = Vec::new();
    for t in tasks {
        if let Reserved::Held { id, pools } = t.await.unwrap() {
            assert!(pools[0].used + pools[0].reserved <= 10.0, "{pools:?}");
            held.push(id);
        }
    }
    assert_eq!(
        held.len(),
        10,
        "the pool holds exactly its limit of 1-unit calls"
    );
    assert_eq!(pool(ledgers[0].0.as_ref(), 5_000).await, (0.0, 10.0));

    // Settling each at its estimate keeps use at the limit; the pool then
    // refuses every replica.
    for id in &held {
        ledgers[1]
            .0
            .settle(id, &[charge(1.0)], "b", 5_000)
            .await
            .unwrap();
    }
    assert_eq!(pool(ledgers[1].0.as_ref(), 5_000).await, (10.0, 0.0));
    for (ledger, id) in &ledgers {
        let refused = ledger
            .reserve(&[hold(0.5)], id, 10_000, 5_000)
            .await
            .unwrap();
        assert!(
            matches!(refused, Reserved::Refused { index: 0, .. }),
            "{refused:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_holds_stop_counting_after_its_lease() {
    let Some((a, b)) = two_replicas().await else {
        return;
    };
    let (la, lb) = (a.budget_ledger().unwrap(), b.budget_ledger().unwrap());
    let Reserved::Held { .. } = la.reserve(&[hold(8.0)], "a", 10_000, 5_000).await.unwrap() else {
        panic!("an empty pool holds 8 of 10");
    };
    // While a heartbeats (last seen 10 000, the lease reaching back to
    // 5 000), its hold counts for b.
    let refused = lb.reserve(&[hold(4.0)], "b", 12_000, 5_000).await.unwrap();
    let Reserved::Refused { state, .. } = refused else {
        panic!("a live replica's hold was not counted: {refused:?}");
    };
    assert_eq!((state.used, state.reserved), (0.0, 8.0));
    // b heartbeats on, a is silent: past a's lease its hold no longer counts.
    b.cluster()
        .unwrap()
        .heartbeat(&beat("b", 30_000))
        .await
        .unwrap();
    let taken = lb.reserve(&[hold(4.0)], "b", 30_000, 25_000).await.unwrap();
    assert!(matches!(taken, Reserved::Held { .. }), "{taken:?}");
    assert_eq!(pool(lb.as_ref(), 25_000).await, (0.0, 4.0));
    // Tidying removes the dead hold and keeps the live one.
    assert_eq!(lb.tidy("b", &[], 0, 25_000, 0).await.unwrap(), 1);
    assert_eq!(pool(lb.as_ref(), 0).await, (0.0, 4.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_replaces_the_estimate_with_the_real_use_and_announces_once() {
    let Some((a, b)) = two_replicas().await else {
        return;
    };
    let (la, lb) = (a.budget_ledger().unwrap(), b.budget_ledger().unwrap());
    let Reserved::Held { id, pools } = la.reserve(&[hold(6.0)], "a", 10_000, 5_000).await.unwrap()
    else {
        panic!("an empty pool holds 6 of 10");
    };
    assert_eq!((pools[0].used, pools[0].reserved), (0.0, 6.0));
    let settled = la.settle(&id, &[charge(8.5)], "a", 5_000).await.unwrap();
    assert_eq!(
        (settled[0].state.used, settled[0].state.reserved),
        (8.5, 0.0)
    );
    assert_eq!(settled[0].crossed, [80], "8.5 of 10 passes 80 %");
    // The other replica sees the use, and does not announce 80 % again.
    assert_eq!(pool(lb.as_ref(), 5_000).await, (8.5, 0.0));
    let Reserved::Held { id, .. } = lb.reserve(&[hold(1.0)], "b", 10_000, 5_000).await.unwrap()
    else {
        panic!("1.5 is left");
    };
    let settled = lb.settle(&id, &[charge(0.5)], "b", 5_000).await.unwrap();
    assert!(settled[0].crossed.is_empty(), "{settled:?}");
    let Reserved::Held { id, .. } = lb.reserve(&[hold(1.0)], "b", 10_000, 5_000).await.unwrap()
    else {
        panic!("1 is left");
    };
    let settled = lb.settle(&id, &[charge(1.0)], "b", 5_000).await.unwrap();
    assert_eq!(settled[0].crossed, [100]);
}
