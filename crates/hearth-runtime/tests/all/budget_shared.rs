//! Budget pools shared by two replicas on one PostgreSQL database: what one
//! replica spends, the other counts (built with `--features postgres`; skipped
//! without `HEARTH_TEST_POSTGRES_URL`).

use std::sync::Arc;
use std::time::Duration;

use hearth_core::{DeliveryMode, Inbound, RunEnvelope, RunStatus};
use hearth_runtime::testing;
use hearth_runtime::{Runtime, WaitOutcome};
use hearth_store::postgres::testing::{TEST_URL_VAR, fresh_database_url};
use hearth_store::{PostgresStore, Store, UsageStore};
use hearth_testkit::{FakeOpenAi, FakeUsage, Reply};
use hearth_tools::ToolRegistry;

use crate::common;

/// A replica on the database at `url`: its own home and store connection,
/// `[store] backend = "postgres"` (so it has a replica id and leases), and
/// `extra` (the `[budget]` part).
pub(crate) async fn replica(
    url: &str,
    fake: &FakeOpenAi,
    extra: &str,
) -> (Runtime, tempfile::TempDir) {
    let store: Arc<dyn Store> =
        Arc::new(PostgresStore::connect(url, TEST_URL_VAR, 4).await.unwrap());
    let toml = format!(
        "{}\n[store]\nbackend = \"postgres\"\nlease_secs = 2\n{extra}",
        common::fake_toml(&fake.base_url(), "", "")
    );
    let dir = tempfile::tempdir().unwrap();
    let rt =
        common::build(common::builder(dir.path(), &toml, &store).tools(ToolRegistry::new())).await;
    rt.start().await.unwrap();
    (rt, dir)
}

pub(crate) async fn run(rt: &Runtime, thread: &str) -> RunEnvelope {
    let inbound = Inbound {
        source: "test".into(),
        thread_key: testing::thread(thread),
        user_key: testing::user("u:user:a"),
        text: "hello".into(),
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
        scope: None,
        roles: Vec::new(),
    };
    let env = rt.ingest(inbound).await.unwrap();
    match rt.wait(&env.run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(e) => e,
        WaitOutcome::Pending(e) => panic!("run not finished: {e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_refuses_a_call_another_replicas_spend_used_up() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let pools = "[[budget.pools]]\nname = \"calls\"\nkind = \"requests\"\nlimit = 2\n\
                 [[budget.pools]]\nname = \"tokens\"\nkind = \"tokens\"\nlimit = 1000000\n";
    // Both replicas are up (and have rebuilt their pools from the store)
    // before anything is spent.
    let (a, _home_a) = replica(&url, &fake, pools).await;
    let (b, _home_b) = replica(&url, &fake, pools).await;
    assert_ne!(a.replica(), b.replica());

    for thread in ["t:1", "t:2"] {
        assert_eq!(run(&a, thread).await.status, RunStatus::Succeeded);
    }
    assert_eq!(fake.request_count(), 2);

    // b spent nothing, yet sees a's use and refuses as one machine would.
    let refused = run(&b, "t:3").await;
    assert_eq!(refused.status, RunStatus::Failed, "{refused:?}");
    let err = refused.error.unwrap();
    assert_eq!(err.code, "budget_exceeded");
    assert!(
        err.message.contains("2 requests used of 2 requests"),
        "{}",
        err.message
    );
    assert_eq!(
        fake.request_count(),
        2,
        "the refused call never reached the provider"
    );

    // Both show the shared use: the settled calls at what the provider
    // reported, nothing held.
    for rt in [&a, &b] {
        let status = rt.budget_status().await;
        let calls = status.iter().find(|p| p.name == "calls").unwrap();
        assert_eq!((calls.used, calls.reserved), (2.0, 0.0), "{status:?}");
        let tokens = status.iter().find(|p| p.name == "tokens").unwrap();
        let each = FakeUsage::DEFAULT.prompt_tokens + FakeUsage::DEFAULT.completion_tokens;
        let reported = 2.0 * each as f64;
        assert_eq!(tokens.used, reported, "{status:?}");
    }
}

/// The pool `name` as `rt` shows it.
async fn pool(rt: &Runtime, name: &str) -> hearth_agent::budget::PoolStatus {
    let status = rt.budget_status().await;
    status.into_iter().find(|p| p.name == name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_holds_for_every_replica_and_a_cancelled_one_is_charged() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::hang());
    let pools = "[[budget.pools]]\nname = \"tok\"\nkind = \"tokens\"\nlimit = 100000\n";
    let (a, _home_a) = replica(&url, &fake, pools).await;
    let (b, _home_b) = replica(&url, &fake, pools).await;
    let inbound = Inbound {
        source: "test".into(),
        thread_key: testing::thread("t:cancel"),
        user_key: testing::user("u:user:a"),
        text: "hello".into(),
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
        scope: None,
        roles: Vec::new(),
    };
    let env = a.ingest(inbound).await.unwrap();
    fake.wait_for_requests(1).await;
    // a's call in flight holds its estimate where b sees it.
    let held = pool(&b, "tok").await.reserved;
    assert!(
        held > 4096.0,
        "the estimate includes max_output_tokens: {held}"
    );

    // Cut off by the cancel, the call is charged its prompt estimate and its
    // hold released, in the ledger (settled in the background of the drop).
    let cancelled = a.cancel(&env.run_id).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        let status = pool(&b, "tok").await;
        if status.reserved == 0.0 || std::time::Instant::now() > deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        status.reserved == 0.0 && status.used > 0.0 && status.used < held - 4096.0 + 1.0,
        "{status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_stored_before_the_ledger_counted_them_count_once() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    // A call in today's usage that no ledger saw (copied from SQLite, say).
    let store = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    store
        .record_model_call(hearth_store::ModelCall {
            call_id: "emb_before".into(),
            at: hearth_core::now_ms(),
            provider: "fake".into(),
            model: "m".into(),
            purpose: "embedding".into(),
            user_key: None,
            thread_key: None,
            input_tokens: Some(3),
            latency_ms: 1,
            error_kind: None,
        })
        .await
        .unwrap();
    let fake = FakeOpenAi::start().await;
    let pools = "[[budget.pools]]\nname = \"calls\"\nkind = \"requests\"\nlimit = 2\n";
    // Both replicas rebuild their pools from it; the ledger counts it once.
    let (a, _home_a) = replica(&url, &fake, pools).await;
    let (b, _home_b) = replica(&url, &fake, pools).await;
    assert_eq!(pool(&b, "calls").await.used, 1.0);
    assert_eq!(run(&a, "t:1").await.status, RunStatus::Succeeded);
    let refused = run(&b, "t:2").await;
    assert_eq!(
        refused.error.map(|e| e.code).as_deref(),
        Some("budget_exceeded")
    );
    assert_eq!(fake.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replica_whose_call_passes_80_percent_of_the_shared_use_announces_it_once() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let pools = "[[budget.pools]]\nname = \"five\"\nkind = \"requests\"\nlimit = 5\n";
    let (a, _home_a) = replica(&url, &fake, pools).await;
    let (b, _home_b) = replica(&url, &fake, pools).await;
    let (mut on_a, mut on_b) = (a.notices(), b.notices());
    for thread in ["t:1", "t:2", "t:3"] {
        assert_eq!(run(&a, thread).await.status, RunStatus::Succeeded);
    }
    // b's first call is the pool's fourth: 80 % of what both spent.
    assert_eq!(run(&b, "t:4").await.status, RunStatus::Succeeded);
    let n = tokio::time::timeout(Duration::from_secs(10), on_b.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n.event, "budget.threshold");
    assert_eq!(
        (n.data["pool"].as_str(), n.data["percent"].as_u64()),
        (Some("five"), Some(80))
    );
    assert_eq!(n.data["used"].as_f64(), Some(4.0));
    // a's next call passes 100 %, and does not announce 80 % again first.
    assert_eq!(run(&a, "t:5").await.status, RunStatus::Succeeded);
    let n = tokio::time::timeout(Duration::from_secs(10), on_a.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (n.event.as_str(), n.data["percent"].as_u64()),
        ("budget.threshold", Some(100)),
        "{n:?}"
    );
}
