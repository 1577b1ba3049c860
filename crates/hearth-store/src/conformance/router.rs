//! The router's counts ([`RouterStore`]; a run's observations commit with its
//! finish, so [`RunStore`] too).

use hearth_core::RunStatus;
use serde_json::json;

use super::fixtures::{created, finish};
use crate::records::{StepKind, StepStatus};
use crate::router::{ArmStats, Rating, RouterStore, RunFeedback};
use crate::runs::RunStore;

fn stats(model: &str, task: &str, successes: i64, failures: i64, runs: i64) -> ArmStats {
    ArmStats {
        model: model.to_owned(),
        task: task.to_owned(),
        successes,
        failures,
        runs,
    }
}

/// A finish's observations are added to the counts; a second finish of the
/// same run (refused) adds nothing.
pub async fn observations_commit_with_the_run_end_and_only_once<S: RouterStore + RunStore>(
    store: S,
) {
    assert!(store.arm_stats().await.unwrap().is_empty());
    for id in ["run_1", "run_2"] {
        created(&store, id, "t1").await;
        let mut end = finish(id, Vec::new());
        end.arm_observations = vec![
            stats("p/good", "code", 1, 0, 1),
            stats("p/bad", "code", 0, 1, 0),
        ];
        assert!(store.finish_run(end.clone()).await.unwrap());
        assert!(!store.finish_run(end).await.unwrap(), "already finished");
    }
    let mut failed = finish("run_3", Vec::new());
    created(&store, "run_3", "t1").await;
    failed.status = RunStatus::Failed;
    failed.arm_observations = vec![stats("p/bad", "chat", 0, 1, 1)];
    assert!(store.finish_run(failed).await.unwrap());
    assert_eq!(
        store.arm_stats().await.unwrap(),
        vec![
            stats("p/bad", "chat", 0, 1, 1),
            stats("p/bad", "code", 0, 2, 0),
            stats("p/good", "code", 2, 0, 2),
        ]
    );
}

/// Rating a run adds one observation; the same rating again changes
/// nothing; the other rating moves it.
pub async fn a_rating_counts_once_and_a_new_rating_replaces_it<S: RouterStore + RunStore>(
    store: S,
) {
    let rate = |rating| RunFeedback {
        run_id: "run_1".to_owned(),
        model: "p/m".to_owned(),
        task: "chat".to_owned(),
        rating,
        at: 5,
    };
    assert_eq!(
        store.rate_run(rate(Rating::Up)).await.unwrap(),
        vec![stats("p/m", "chat", 1, 0, 0)]
    );
    assert!(store.rate_run(rate(Rating::Up)).await.unwrap().is_empty());
    assert_eq!(
        store.arm_stats().await.unwrap(),
        vec![stats("p/m", "chat", 1, 0, 0)]
    );
    assert_eq!(
        store.rate_run(rate(Rating::Down)).await.unwrap(),
        vec![stats("p/m", "chat", -1, 1, 0)]
    );
    assert_eq!(
        store.arm_stats().await.unwrap(),
        vec![stats("p/m", "chat", 0, 1, 0)]
    );
}

/// A route step keeps its kind and its detail.
pub async fn route_steps_round_trip<S: RouterStore + RunStore>(store: S) {
    created(&store, "run_1", "t1").await;
    let mut route = super::fixtures::step("run_1", 0, StepStatus::Succeeded);
    route.kind = StepKind::Route;
    route.name = "p/m".to_owned();
    route.tokens = None;
    route.payload = json!({ "detail": { "task": "chat", "chosen": "p/m" } });
    assert!(store.put_route_step(route.clone()).await.unwrap());
    assert_eq!(store.steps("run_1").await.unwrap(), vec![route.clone()]);
    // A taken index is left alone.
    let mut again = route.clone();
    again.name = "p/other".to_owned();
    assert!(!store.put_route_step(again).await.unwrap());
    assert_eq!(store.steps("run_1").await.unwrap(), vec![route]);
}

/// Ratings of one run given on several replicas at once are applied one
/// after the other: the counts hold exactly the last rating, and they are
/// the sum of the changes each rating reported.
pub async fn concurrent_ratings_of_a_run_leave_one_rating_counted<S: RouterStore>(store: S) {
    let store = std::sync::Arc::new(store);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12 {
        let store = std::sync::Arc::clone(&store);
        tasks.spawn(async move {
            store
                .rate_run(RunFeedback {
                    run_id: "run_1".to_owned(),
                    model: "p/m".to_owned(),
                    task: "chat".to_owned(),
                    rating: if i % 3 == 0 { Rating::Down } else { Rating::Up },
                    at: i,
                })
                .await
                .unwrap()
        });
    }
    let (mut successes, mut failures) = (0, 0);
    while let Some(changes) = tasks.join_next().await {
        for change in changes.unwrap() {
            assert_eq!(
                (change.model.as_str(), change.task.as_str()),
                ("p/m", "chat")
            );
            successes += change.successes;
            failures += change.failures;
        }
    }
    let counted = store.arm_stats().await.unwrap();
    assert_eq!(counted.len(), 1, "{counted:?}");
    assert_eq!(
        (counted[0].successes, counted[0].failures),
        (successes, failures)
    );
    assert_eq!(successes + failures, 1, "{counted:?}");
}
