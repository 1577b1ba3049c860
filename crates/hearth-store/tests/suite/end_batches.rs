//! Run ends that reach a PostgreSQL store together are written by one
//! statement (`postgres/batch_queue.rs`, issue 19's throughput): each end of
//! the batch writes exactly its own rows, an end PostgreSQL refuses fails
//! only its own run, and concurrent callers each get their own answer.

use hearth_core::{Message, Role, RunStatus};
use hearth_store::ArmStats;
use hearth_store::channels::{NewOutboxItem, OutboxKind};
use hearth_store::conformance::fixtures::{created, finish};
use hearth_store::postgres::testing::{TEST_URL_VAR, fresh_database_url, refuse_inserts};
use hearth_store::prelude::*;
use hearth_store::{PostgresStore, UsageGroup, UsageQuery};

/// An arm observation of `model` on `chat`.
fn arm(model: &str, successes: i64, failures: i64) -> ArmStats {
    ArmStats {
        model: model.to_owned(),
        task: "chat".to_owned(),
        successes,
        failures,
        runs: 1,
    }
}

/// The user message and the answer of a run on `thread`.
fn exchange(thread: &str) -> Vec<Message> {
    vec![
        Message::text(Role::User, format!("question on {thread}")),
        Message::text(Role::Assistant, format!("answer on {thread}")),
    ]
}

/// Three runs ended in one statement, next to one that was terminal
/// already: each run gets its own status, messages, reply, usage and
/// router counts (two of them teach one arm: summed, not refused), and the
/// terminal one writes nothing.
#[tokio::test]
async fn ends_written_together_each_write_their_own_rows() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let store = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    for (run, thread) in [("a", "ta"), ("b", "tb"), ("c", "tc"), ("done", "td")] {
        created(&store, run, thread).await;
    }
    assert!(
        store
            .finish_run(finish("done", exchange("td")))
            .await
            .unwrap()
    );

    let mut a = finish("a", exchange("ta"));
    a.outbox.push(NewOutboxItem {
        channel: "telegram".to_owned(),
        target: "chat-a".to_owned(),
        kind: OutboxKind::Message,
        run_id: Some("a".to_owned()),
        payload: r#"{"text":"answer on ta"}"#.to_owned(),
    });
    a.arm_observations = vec![arm("p/m", 1, 0), arm("p/other", 1, 0)];
    let mut b = finish("b", exchange("tb"));
    b.messages
        .push(Message::text(Role::Assistant, "and one more on tb"));
    b.arm_observations = vec![arm("p/m", 0, 1)];
    let mut c = finish("c", vec![Message::text(Role::User, "question on tc")]);
    c.status = RunStatus::Cancelled;
    c.output = None;
    c.error_code = Some("cancelled".to_owned());
    let again = finish("done", vec![Message::text(Role::User, "written twice?")]);

    let (together, outcomes) = store.end_as_one_batch(vec![a, b, again, c]).await;
    assert!(together, "one statement wrote the batch: {outcomes:?}");
    let ended: Vec<bool> = outcomes.iter().map(|o| o.as_ref().unwrap().ended).collect();
    assert_eq!(ended, [true, true, false, true]);
    for (outcome, id, status) in [
        (&outcomes[0], "a", RunStatus::Succeeded),
        (&outcomes[1], "b", RunStatus::Succeeded),
        (&outcomes[3], "c", RunStatus::Cancelled),
    ] {
        let run = outcome.as_ref().unwrap().run.clone().unwrap();
        assert_eq!((run.run_id.as_str(), run.status), (id, status));
        assert_eq!(store.get_run(id).await.unwrap().unwrap().status, status);
    }
    assert_eq!(
        store
            .get_run("c")
            .await
            .unwrap()
            .unwrap()
            .error_code
            .as_deref(),
        Some("cancelled")
    );

    assert_eq!(
        store.thread_history("ta", 10).await.unwrap(),
        exchange("ta")
    );
    let mut on_b = exchange("tb");
    on_b.push(Message::text(Role::Assistant, "and one more on tb"));
    assert_eq!(store.thread_history("tb", 10).await.unwrap(), on_b);
    assert_eq!(
        store.thread_history("tc", 10).await.unwrap(),
        [Message::text(Role::User, "question on tc")]
    );
    assert_eq!(
        store.thread_history("td", 10).await.unwrap(),
        exchange("td")
    );

    let replies = store.due_outbox("telegram", i64::MAX, 10).await.unwrap();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(
        (replies[0].target.as_str(), replies[0].run_id.as_deref()),
        ("chat-a", Some("a"))
    );

    let mut arms = store.arm_stats().await.unwrap();
    arms.sort_by(|x, y| x.model.cmp(&y.model));
    assert_eq!(
        arms,
        [arm("p/m", 1, 1), arm("p/other", 1, 0)].map(|mut a| {
            a.runs = if a.model == "p/m" { 2 } else { 1 };
            a
        })
    );

    // One model call each for a, b, c and the run ended before.
    let usage = store
        .usage(&UsageQuery {
            since: None,
            until: None,
            group_by: UsageGroup::Model,
        })
        .await
        .unwrap();
    assert_eq!(usage.iter().map(|u| u.calls).sum::<u64>(), 4, "{usage:?}");
}

/// A batch holding an end that PostgreSQL refuses (here a trigger the
/// test adds refuses one of its messages): the statement fails, each end
/// is written again alone, and only the refused one fails; its run stays
/// unfinished.
#[tokio::test]
async fn an_end_postgresql_refuses_fails_only_its_own_run() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let store = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    for (run, thread) in [("a", "ta"), ("bad", "tb"), ("c", "tc")] {
        created(&store, run, thread).await;
    }
    refuse_inserts(&url, "messages", "content").await;
    let bad = finish(
        "bad",
        vec![Message::text(Role::Assistant, "refuse me, PostgreSQL")],
    );

    let (together, outcomes) = store
        .end_as_one_batch(vec![
            finish("a", exchange("ta")),
            bad,
            finish("c", exchange("tc")),
        ])
        .await;
    assert!(!together);
    assert!(outcomes[0].as_ref().unwrap().ended, "{outcomes:?}");
    assert!(outcomes[1].is_err(), "{outcomes:?}");
    assert!(outcomes[2].as_ref().unwrap().ended, "{outcomes:?}");
    assert_eq!(
        store.thread_history("ta", 10).await.unwrap(),
        exchange("ta")
    );
    assert_eq!(
        store.thread_history("tc", 10).await.unwrap(),
        exchange("tc")
    );
    assert!(store.thread_history("tb", 10).await.unwrap().is_empty());
    let bad = store.get_run("bad").await.unwrap().unwrap();
    assert!(!bad.status.is_terminal(), "{bad:?}");
}

/// Forty ends sent at once through a store of two connections, two of them
/// for one run: every caller is answered for its own run, exactly one of
/// the twins ends it, and every thread holds its own exchange once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_ends_are_each_answered_for_their_own_run() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let store = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    let runs: Vec<(String, String)> = (0..39)
        .map(|i| (format!("run_{i}"), format!("t{i}")))
        .collect();
    for (run, thread) in &runs {
        created(&store, run, thread).await;
    }
    let mut ends = tokio::task::JoinSet::new();
    for (i, (run, thread)) in runs.iter().enumerate() {
        let store = store.clone();
        let f = finish(run, exchange(thread));
        ends.spawn(async move { (i, store.finish_run_returning(f).await) });
    }
    let twin = store.clone();
    let f = finish("run_0", exchange("t0"));
    ends.spawn(async move { (0, twin.finish_run_returning(f).await) });

    let mut ended_run_0 = 0;
    let mut answered = 0;
    while let Some(joined) = ends.join_next().await {
        let (i, outcome) = joined.unwrap();
        let finished = outcome.unwrap();
        answered += 1;
        if !finished.ended {
            assert_eq!(i, 0, "only the twin finds its run ended: {finished:?}");
            continue;
        }
        let run = finished.run.unwrap();
        assert_eq!(run.run_id, runs[i].0, "answered for another run");
        assert_eq!(run.status, RunStatus::Succeeded);
        if i == 0 {
            ended_run_0 += 1;
        }
    }
    assert_eq!(answered, 40);
    assert_eq!(ended_run_0, 1, "exactly one of the twins ended run_0");
    for (_, thread) in &runs {
        assert_eq!(
            store.thread_history(thread, 10).await.unwrap(),
            exchange(thread),
            "{thread}"
        );
    }
}
