//! The router through the runtime: two arms on fake providers, learning
//! from failures, budget pools, pinned threads and restarts.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_agent::RetryPolicy;
use hearth_agent::router::{Estimate, Pools, TaskClass};
use hearth_core::{DeliveryMode, Inbound, RunEnvelope, RunStatus};
use hearth_runtime::testing;
use hearth_runtime::{Runtime, WaitOutcome};
use hearth_store::{Rating, StepKind, Store};
use hearth_testkit::{FakeOpenAi, Reply};
use hearth_tools::ToolRegistry;

use crate::common;

struct Arms {
    good: FakeOpenAi,
    bad: FakeOpenAi,
}

impl Arms {
    async fn start() -> Self {
        Self {
            good: FakeOpenAi::start().await,
            bad: FakeOpenAi::start().await,
        }
    }

    fn toml(&self, strategy: &str) -> String {
        format!(
            "[llm]\ndefault_model = \"good/m\"\n\
             [llm.providers.good]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"m\"]\n\
             [llm.providers.bad]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"m\"]\n\
             [router]\nstrategy = \"{strategy}\"\nseed = 11\n\
             [[router.arms]]\nmodel = \"bad/m\"\n[[router.arms]]\nmodel = \"good/m\"\n",
            self.good.base_url(),
            self.bad.base_url()
        )
    }
}

async fn runtime(
    dir: &Path,
    toml: &str,
    pools: Option<Arc<dyn Pools>>,
) -> (Runtime, Arc<dyn Store>) {
    let store = common::store(dir);
    // One attempt per model, so a failure fails over at once.
    let retry = RetryPolicy {
        max_attempts: 1,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(1),
        max_total_wait: Duration::from_millis(1),
    };
    // `[budget]` in the config: the real pools, for the engine and the router.
    let rt = common::build(
        common::builder(dir, toml, &store)
            .tools(ToolRegistry::with_builtins())
            .system_prompt("be brief")
            .engine(move |e| e.with_retry(retry))
            .router(move |r| match pools {
                Some(p) => r.with_pools(p),
                None => r,
            }),
    )
    .await;
    rt.start().await.unwrap();
    (rt, store)
}

async fn ask(rt: &Runtime, thread: &str, text: &str) -> RunEnvelope {
    let env = rt
        .ingest(Inbound {
            source: "test".into(),
            thread_key: testing::thread(thread),
            user_key: testing::user("test:user:1"),
            text: text.into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap();
    match rt.wait(&env.run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(e) => e,
        WaitOutcome::Pending(e) => panic!("run not finished: {e:?}"),
    }
}

/// A seeded stream in [0, 1) for the bad arm's script.
fn script(seed: u64, n: usize) -> Vec<bool> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 100) < 20
        })
        .collect()
}

#[tokio::test]
async fn learn_moves_to_the_arm_that_does_not_fail() {
    let arms = Arms::start().await;
    // The bad arm answers 20% of its calls and fails the rest with a 503
    // (after which the run fails over to the good arm).
    for ok in script(0x9e37_79b9, 400) {
        arms.bad.push(if ok {
            Reply::text("fine")
        } else {
            Reply::http_error(
                503,
                serde_json::json!({ "error": { "message": "overloaded" } }),
            )
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let (rt, store) = runtime(dir.path(), &arms.toml("learn"), None).await;
    let mut chosen = Vec::new();
    for i in 0..200 {
        let env = ask(&rt, "api:learn", &format!("hello number {i}")).await;
        assert_eq!(env.status, RunStatus::Succeeded, "{env:?}");
        // The router's choice is the model asked for: a failed-over run
        // names it as `requested_model` and the arm that answered as `model`.
        if let Some(requested) = &env.requested_model {
            assert_eq!(
                (requested.as_str(), env.model.as_deref()),
                ("bad/m", Some("good/m"))
            );
        }
        chosen.push(env.requested_model.or(env.model).unwrap());
    }
    let good_late = chosen[150..].iter().filter(|m| *m == "good/m").count();
    assert!(
        good_late >= 45,
        "good arm in {good_late} of the last 50 runs"
    );
    assert!(chosen.iter().any(|m| m == "bad/m"), "the bad arm was tried");

    // The posteriors are stored, and a restart starts from them.
    let report = rt.router_report();
    assert_eq!(report.strategy, "learn");
    let bad = report
        .arms
        .iter()
        .find(|p| p.model == "bad/m" && p.task == TaskClass::Chat)
        .unwrap()
        .clone();
    assert!(bad.beta > bad.alpha, "{bad:?}");
    let runs: u64 = report.arms.iter().map(|p| p.runs).sum();
    assert_eq!(runs, 200);
    rt.shutdown(Duration::from_secs(5)).await;
    drop(rt);
    drop(store);
    let (again, _store) = runtime(dir.path(), &arms.toml("learn"), None).await;
    assert_eq!(again.router_report(), report);
}

#[tokio::test]
async fn each_routed_run_has_a_route_step_and_feedback_counts_once() {
    let arms = Arms::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (rt, store) = runtime(dir.path(), &arms.toml("cheapest"), None).await;
    let env = ask(&rt, "api:t", "write a poem about rain").await;
    assert_eq!(env.status, RunStatus::Succeeded);
    let steps = rt.trace(&env.run_id).await.unwrap();
    assert_eq!(steps[0].kind, StepKind::Route);
    assert_eq!(steps[0].index, 0);
    let detail = &steps[0].payload["detail"];
    assert_eq!(detail["task"], "writing");
    assert_eq!(detail["chosen"], env.model.clone().unwrap());
    assert_eq!(detail["candidates"].as_array().unwrap().len(), 2);
    assert!(
        detail["reason"].as_str().unwrap().contains("cost"),
        "{detail}"
    );
    assert_eq!(steps[1].kind, StepKind::Llm, "the model call follows");

    let chosen = env.model.unwrap();
    let writing = |rt: &Runtime| {
        rt.router_report()
            .arms
            .into_iter()
            .find(|p| p.model == chosen && p.task == TaskClass::Writing)
            .unwrap()
    };
    let before = writing(&rt);
    assert!(rt.rate_run(&env.run_id, Rating::Down).await.unwrap());
    assert!(rt.rate_run(&env.run_id, Rating::Down).await.unwrap());
    let after = writing(&rt);
    assert_eq!((after.alpha, after.beta), (before.alpha, before.beta + 1.0));
    assert!(rt.rate_run(&env.run_id, Rating::Up).await.unwrap());
    let flipped = writing(&rt);
    assert_eq!(
        (flipped.alpha, flipped.beta),
        (before.alpha + 1.0, before.beta)
    );
    let stored = store.arm_stats().await.unwrap();
    assert!(
        stored
            .iter()
            .any(|s| s.model == chosen && s.task == "writing" && s.successes == 2),
        "the run's success and the up rating: {stored:?}"
    );
    assert!(matches!(
        rt.rate_run("run_missing", Rating::Up).await,
        Err(hearth_runtime::RuntimeError::RunNotFound(_))
    ));
}

#[tokio::test]
async fn a_thread_with_its_model_set_is_not_routed_and_teaches_nothing() {
    let arms = Arms::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (rt, store) = runtime(dir.path(), &arms.toml("learn"), None).await;
    rt.set_model(&testing::thread("api:pinned"), "bad/m")
        .await
        .unwrap();
    let env = ask(&rt, "api:pinned", "hello").await;
    assert_eq!(env.model.as_deref(), Some("bad/m"));
    let steps = rt.trace(&env.run_id).await.unwrap();
    assert!(steps.iter().all(|s| s.kind != StepKind::Route), "{steps:?}");
    assert!(store.arm_stats().await.unwrap().is_empty());
    assert!(!rt.rate_run(&env.run_id, Rating::Up).await.unwrap());
    assert!(store.arm_stats().await.unwrap().is_empty());
}

/// Pools where some models are exhausted.
#[derive(Default)]
struct Exhausted(Mutex<HashSet<String>>);

impl Pools for Exhausted {
    fn affordable(&self, model: &str, _: &str, _: &str, _: &Estimate) -> bool {
        !self.0.lock().unwrap().contains(model)
    }

    fn scarcity(&self, model: &str, _: &str, _: &str) -> f64 {
        if self.0.lock().unwrap().contains(model) {
            1.0
        } else {
            0.0
        }
    }
}

#[tokio::test]
async fn an_exhausted_pool_removes_its_arms_at_once() {
    let arms = Arms::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pools = Arc::new(Exhausted::default());
    let (rt, _store) = runtime(dir.path(), &arms.toml("learn"), Some(pools.clone())).await;
    pools.0.lock().unwrap().insert("good/m".into());
    for i in 0..10 {
        let env = ask(&rt, "api:t", &format!("hi {i}")).await;
        assert_eq!(env.model.as_deref(), Some("bad/m"), "{env:?}");
    }
    pools.0.lock().unwrap().insert("bad/m".into());
    let env = ask(&rt, "api:t", "hi again").await;
    assert_eq!(env.status, RunStatus::Failed);
    let err = env.error.unwrap();
    assert_eq!(err.code, "budget_exceeded");
    assert!(
        err.message.contains("good/m (over budget)"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_budget_pool_that_runs_out_takes_its_arm_out_of_routing() {
    let arms = Arms::start().await;
    let dir = tempfile::tempdir().unwrap();
    // The good arm is the clear favourite but its pool takes two requests a
    // day; the other arm has no pool.
    let toml = format!(
        "[llm]\ndefault_model = \"good/m\"\n\
         [llm.providers.good]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"m\"]\n\
         [llm.providers.bad]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"m\"]\n\
         [router]\nstrategy = \"learn\"\nseed = 11\n\
         [[router.arms]]\nmodel = \"bad/m\"\nquality = 0.02\n\
         [[router.arms]]\nmodel = \"good/m\"\nquality = 0.98\n\
         [[budget.pools]]\nname = \"good-calls\"\nkind = \"requests\"\nlimit = 2\n\
         models = [\"good/*\"]\n",
        arms.good.base_url(),
        arms.bad.base_url()
    );
    let (rt, _store) = runtime(dir.path(), &toml, None).await;
    let mut models = Vec::new();
    for i in 0..5 {
        let env = ask(&rt, "api:pool", &format!("hello {i}")).await;
        assert_eq!(env.status, RunStatus::Succeeded, "{env:?}");
        models.push(env.model.unwrap_or_default());
    }
    // Two runs on the favourite, then its pool is spent and every run goes
    // to the arm that can still be afforded, with no refusal.
    assert_eq!(models, ["good/m", "good/m", "bad/m", "bad/m", "bad/m"]);
    let status = rt.budget_status().await;
    let pool = status.iter().find(|p| p.name == "good-calls").unwrap();
    assert_eq!(pool.used, 2.0, "{pool:?}");
}
