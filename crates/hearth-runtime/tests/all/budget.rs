//! Budget pools through the runtime: enforced before each model call,
//! settled after, never leaked, rebuilt from the store after a restart.

use std::sync::Arc;
use std::time::Duration;

use hearth_core::{DeliveryMode, Inbound, RunEnvelope, RunEventKind, RunStatus};
use hearth_runtime::testing;
use hearth_runtime::{RunEvents, Runtime, WaitOutcome};
use hearth_store::{StepKind, StepStatus, Store, UsageGroup, UsageQuery};
use hearth_testkit::{FakeOpenAi, Reply};
use hearth_tools::ToolRegistry;

use crate::common;

/// A runtime on `store` whose default model is `fake/m` at `fake`, with
/// `extra` appended to its hearth.toml (the `[budget]` part).
async fn runtime(store: &Arc<dyn Store>, fake: &FakeOpenAi, extra: &str) -> Runtime {
    let toml = format!("{}\n{extra}", common::fake_toml(&fake.base_url(), "", ""));
    runtime_of(store, &toml).await
}

/// A runtime on `store` configured by `toml` (its `[budget]` included).
async fn runtime_of(store: &Arc<dyn Store>, toml: &str) -> Runtime {
    let dir = tempfile::tempdir().unwrap();
    let rt =
        common::build(common::builder(dir.path(), toml, store).tools(ToolRegistry::new())).await;
    rt.start().await.unwrap();
    rt
}

fn msg(thread: &str, user: &str) -> Inbound {
    Inbound {
        source: "test".into(),
        thread_key: testing::thread(thread),
        user_key: testing::user(user),
        text: "hello".into(),
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
        scope: None,
        roles: Vec::new(),
    }
}

async fn run(rt: &Runtime, thread: &str, user: &str) -> RunEnvelope {
    let env = rt.ingest(msg(thread, user)).await.unwrap();
    match rt.wait(&env.run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(e) => e,
        WaitOutcome::Pending(e) => panic!("run not finished: {e:?}"),
    }
}

const TWO_CALLS: &str = "[[budget.pools]]\nname = \"calls\"\nkind = \"requests\"\nlimit = 2\n";

#[tokio::test]
async fn a_used_up_pool_fails_the_run_with_budget_exceeded_before_calling() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let rt = runtime(&store, &fake, TWO_CALLS).await;
    for thread in ["t:1", "t:2"] {
        assert_eq!(
            run(&rt, thread, "u:user:a").await.status,
            RunStatus::Succeeded
        );
    }
    let refused = run(&rt, "t:3", "u:user:a").await;
    assert_eq!(refused.status, RunStatus::Failed);
    let err = refused.error.unwrap();
    assert_eq!(err.code, "budget_exceeded");
    for part in [
        "\"calls\"",
        "2 requests used of 2 requests",
        "resets at",
        "T00:00:00",
    ] {
        assert!(err.message.contains(part), "{part}: {}", err.message);
    }
    assert_eq!(
        fake.request_count(),
        2,
        "the refused call never reached the provider"
    );
    let status = rt.budget_status().await;
    assert_eq!(
        (status[0].used, status[0].reserved, status[0].limit),
        (2.0, 0.0, 2.0)
    );
}

#[tokio::test]
async fn concurrent_runs_cannot_overshoot_a_pool() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    // Slow answers: every run's call is in flight at the same time.
    fake.set_default_delay(Duration::from_millis(300));
    let rt = runtime(
        &store,
        &fake,
        "[[budget.pools]]\nname = \"calls\"\nkind = \"requests\"\nlimit = 3\n",
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(
            rt.ingest(msg(&format!("t:c{i}"), "u:user:a"))
                .await
                .unwrap()
                .run_id,
        );
    }
    let mut outcomes = Vec::new();
    for id in &ids {
        match rt.wait(id, Duration::from_secs(30)).await.unwrap() {
            WaitOutcome::Finished(e) => outcomes.push(e.error.map(|e| e.code)),
            WaitOutcome::Pending(e) => panic!("run not finished: {e:?}"),
        }
    }
    let ok = outcomes.iter().filter(|o| o.is_none()).count();
    let refused = outcomes
        .iter()
        .filter(|o| o.as_deref() == Some("budget_exceeded"))
        .count();
    assert_eq!((ok, refused), (3, 7), "{outcomes:?}");
    assert_eq!(fake.request_count(), 3);
    assert_eq!(rt.budget_status().await[0].used, 3.0);
}

#[tokio::test]
async fn a_cancelled_call_leaves_no_reservation_and_is_charged() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::hang());
    let rt = runtime(
        &store,
        &fake,
        "[[budget.pools]]\nname = \"tok\"\nkind = \"tokens\"\nlimit = 100000\n",
    )
    .await;
    let env = rt.ingest(msg("t:cancel", "u:user:a")).await.unwrap();
    fake.wait_for_requests(1).await;
    let held = rt.budget_status().await[0].reserved;
    assert!(
        held > 4096.0,
        "the estimate includes max_output_tokens: {held}"
    );
    let cancelled = rt.cancel(&env.run_id).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let status = &rt.budget_status().await[0];
    // Nothing streamed: the prompt estimate, without the answer's reserve.
    assert!(
        status.reserved == 0.0 && status.used > 0.0 && status.used < held - 4096.0 + 1.0,
        "{status:?}"
    );
}

/// Waits until the run has streamed some answer text to its followers.
async fn first_delta(rt: &Runtime, run_id: &str) {
    let RunEvents::Live(log) = rt.events(run_id).await.unwrap() else {
        panic!("run {run_id} has no live log");
    };
    let mut rx = log.subscribe();
    tokio::time::timeout(
        Duration::from_secs(30),
        rx.wait_for(|_| {
            log.since(0)
                .iter()
                .any(|e| e.kind == RunEventKind::TextDelta)
        }),
    )
    .await
    .expect("no text streamed within 30 s")
    .unwrap();
}

/// A streamed call cancelled midway was sent, and the provider bills it:
/// it counts against the pools (the prompt estimate plus what streamed) and
/// in usage, so a user who cancels cannot make unlimited calls, and a
/// restart does not forget it.
#[tokio::test]
async fn cancelled_streamed_calls_are_charged_and_counted_in_usage() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let pools = format!(
        "{TWO_CALLS}[[budget.pools]]\nname = \"tok\"\nkind = \"tokens\"\nlimit = 1000000\n"
    );
    let rt = runtime(&store, &fake, &pools).await;
    let answer = "one two three four five six seven eight ".repeat(10);
    let mut cancelled = Vec::new();
    for i in 0..2 {
        // The role chunk and the first piece stream at once, the rest never
        // comes.
        fake.push(Reply::text(answer.clone()).in_pieces(4).stalling_after(2));
        let env = rt
            .ingest(msg(&format!("t:cut{i}"), "u:user:a"))
            .await
            .unwrap();
        first_delta(&rt, &env.run_id).await;
        let c = rt.cancel(&env.run_id).await.unwrap();
        assert_eq!(c.status, RunStatus::Cancelled);
        cancelled.push(env.run_id);
    }
    let status = rt.budget_status().await;
    assert_eq!(
        (status[0].used, status[0].reserved),
        (2.0, 0.0),
        "both calls count: {status:?}"
    );
    // The prompt estimate (tools and system prompt included) plus the
    // quarter of the answer that streamed, for each call.
    let streamed = (answer.len() / 4) as f64 / 4.0;
    assert!(
        status[1].used > 2.0 * streamed && status[1].reserved == 0.0,
        "{status:?}"
    );
    let refused = run(&rt, "t:cut2", "u:user:a").await;
    assert_eq!(refused.error.unwrap().code, "budget_exceeded");
    assert_eq!(fake.request_count(), 2, "the third call was never sent");

    // Each cut-off call is journaled as failed with kind `cancelled`, and
    // usage counts it.
    for run_id in &cancelled {
        let steps = store.steps(run_id).await.unwrap();
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(
            (steps[0].kind, steps[0].status),
            (StepKind::Llm, StepStatus::Failed)
        );
        assert_eq!(steps[0].payload["error"]["kind"], "cancelled");
    }
    let usage = store
        .usage(&UsageQuery {
            since: None,
            until: None,
            group_by: UsageGroup::Model,
        })
        .await
        .unwrap();
    assert_eq!(usage[0].calls, 2, "{usage:?}");
    rt.shutdown(Duration::from_secs(5)).await;
    let rt = runtime(&store, &fake, &pools).await;
    assert_eq!(
        rt.budget_status().await[0].used,
        2.0,
        "rebuilt after a restart"
    );
}

#[tokio::test]
async fn use_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let per_user = "[[budget.pools]]\nname = \"mine\"\nkind = \"tokens\"\nlimit = 100000\n\
                    scope = \"user\"\n";
    {
        let rt = runtime(&store, &fake, &format!("{TWO_CALLS}{per_user}")).await;
        assert_eq!(
            run(&rt, "t:r", "u:user:a").await.status,
            RunStatus::Succeeded
        );
        rt.shutdown(Duration::from_secs(5)).await;
    }
    let rt = runtime(&store, &fake, &format!("{TWO_CALLS}{per_user}")).await;
    let status = rt.budget_status().await;
    assert_eq!(status[0].used, 1.0, "{status:?}");
    // The fake reports 12 prompt and 7 completion tokens per call.
    assert_eq!(
        (status[1].subject.as_deref(), status[1].used),
        (Some("u:user:a"), 19.0)
    );
    assert_eq!(
        run(&rt, "t:r", "u:user:a").await.status,
        RunStatus::Succeeded
    );
    let refused = run(&rt, "t:r", "u:user:a").await;
    assert_eq!(refused.error.unwrap().code, "budget_exceeded");
}

#[tokio::test]
async fn a_thread_with_its_own_model_is_not_switched_when_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let backup = FakeOpenAi::start().await;
    let toml_extra = format!(
        "[[budget.pools]]\nname = \"main\"\nkind = \"requests\"\nlimit = 1\nmodels = [\"fake/*\"]\n\
         [llm.providers.backup]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"b\"]\n",
        backup.base_url()
    );
    let toml = format!(
        "[llm]\ndefault_model = \"fake/m\"\nfallback = [\"backup/b\"]\n\
         [llm.providers.fake]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"m\"]\n{toml_extra}",
        fake.base_url()
    );
    let rt = runtime_of(&store, &toml).await;

    assert_eq!(
        run(&rt, "t:any", "u:user:a").await.status,
        RunStatus::Succeeded
    );
    // The default model's pool is used up: a run on the default moves on
    // to the fallback, which draws from no pool.
    let moved = run(&rt, "t:any", "u:user:a").await;
    assert_eq!(moved.status, RunStatus::Succeeded, "{moved:?}");
    assert_eq!(backup.request_count(), 1);
    // A thread that chose the model keeps it, and is told why it cannot run.
    rt.set_model(&testing::thread("t:pinned"), "fake/m")
        .await
        .unwrap();
    let pinned = run(&rt, "t:pinned", "u:user:a").await;
    let err = pinned.error.unwrap();
    assert_eq!(err.code, "budget_exceeded");
    assert!(err.message.contains("fake/m"), "{}", err.message);
    assert_eq!(backup.request_count(), 1, "not switched to the fallback");
}

#[tokio::test]
async fn crossing_80_percent_publishes_a_budget_threshold_notice() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let rt = runtime(
        &store,
        &fake,
        "[[budget.pools]]\nname = \"five\"\nkind = \"requests\"\nlimit = 5\nscope = \"thread\"\n",
    )
    .await;
    let mut notices = rt.notices();
    for _ in 0..4 {
        assert_eq!(
            run(&rt, "t:n", "u:user:a").await.status,
            RunStatus::Succeeded
        );
    }
    let n = tokio::time::timeout(Duration::from_secs(10), notices.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n.event, "budget.threshold");
    assert_eq!(n.data["pool"], "five");
    assert_eq!(n.data["percent"], 80);
    assert_eq!(n.data["subject"], "t:n");
    assert_eq!(
        (n.data["used"].as_f64(), n.data["limit"].as_f64()),
        (Some(4.0), Some(5.0))
    );
}
