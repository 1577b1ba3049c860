//! Runs, leases, steps and steers ([`RunStore`]; finishing a run also writes thread history, so [`ThreadStore`] too).

use std::sync::Arc;

use hearth_core::{Message, Role, RunStatus};

use super::fixtures::{created, finish, new_run, step};
use crate::records::{
    CreateRunOutcome, NewRun, RunFilter, RunFinish, RunRecord, StepKind, StepStatus,
};
use crate::runs::RunStore;
use crate::threads::ThreadStore;

/// A fresh store is reachable and migrated (what `/readyz` asks).
pub async fn a_fresh_store_answers_a_ping<S: crate::Store>(store: S) {
    store.ping().await.unwrap();
}

pub async fn create_then_get_round_trips<S: RunStore + ThreadStore>(store: S) {
    let run = created(&store, "run_1", "t1").await;
    assert_eq!(run.status, RunStatus::Queued);
    let got = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(got, run);
    assert!(store.get_run("run_missing").await.unwrap().is_none());
}

/// A run's scope and roles come back from every read (`get_run`,
/// `list_runs`, `unfinished_runs`, a claim), so a recovered run is checked
/// where it was asked; a run without them reads as `None` and `[]`.
pub async fn permission_context_is_stored_with_the_run<S: RunStore + ThreadStore>(store: S) {
    let mut asked = new_run("run_g", "discord:channel:5", None);
    asked.scope = Some("discord:guild:9".into());
    asked.roles = vec!["111".into(), "222".into()];
    let CreateRunOutcome::Created(run) = store.create_run(asked).await.unwrap() else {
        panic!("expected a new run");
    };
    assert_eq!(run.scope.as_deref(), Some("discord:guild:9"));
    assert_eq!(run.roles, ["111", "222"]);
    let plain = created(&store, "run_p", "t1").await;
    assert_eq!((plain.scope, plain.roles), (None, Vec::<String>::new()));

    assert_eq!(store.get_run("run_g").await.unwrap().unwrap(), run);
    let unfinished = store.unfinished_runs().await.unwrap();
    assert_eq!(unfinished.first(), Some(&run));
    let listed = store.list_runs(&RunFilter::default()).await.unwrap();
    assert!(
        listed.contains(&run),
        "list_runs lost the context: {listed:?}"
    );
    let claimed = store
        .claim_run("run_g", "owner", i64::MAX, 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (claimed.scope.as_deref(), claimed.roles.as_slice()),
        (
            Some("discord:guild:9"),
            ["111".to_owned(), "222".to_owned()].as_slice()
        )
    );
}

/// A run for the `run_stats` check: id, scope, creation time, its end
/// (status and ms after creation) when finished, and its tool calls.
type StatsRun = (
    &'static str,
    Option<&'static str>,
    i64,
    Option<(RunStatus, i64)>,
    &'static [&'static str],
);

/// `run_stats` counts the runs of one scope created since the window's
/// start by status, takes nearest-rank percentiles of the finished ones'
/// accept-to-end times, and ranks tool calls; other scopes, runs without a
/// scope, older runs and model-call steps do not count.
pub async fn run_stats_aggregate_one_scopes_runs_in_the_window<S: RunStore + ThreadStore>(
    store: S,
) {
    let guild = "discord:guild:1";
    // (id, scope, created, end: (status, after ms), tool calls)
    let runs: [StatsRun; 7] = [
        (
            "r_fast",
            Some(guild),
            1_000,
            Some((RunStatus::Succeeded, 100)),
            &["web_fetch", "web_fetch", "memory_search"],
        ),
        (
            "r_slow",
            Some(guild),
            2_000,
            Some((RunStatus::Failed, 300)),
            &["web_fetch", "memory_search", "current_time"],
        ),
        (
            "r_mid",
            Some(guild),
            2_500,
            Some((RunStatus::Cancelled, 200)),
            &[],
        ),
        ("r_open", Some(guild), 3_000, None, &["current_time"]),
        (
            "r_old",
            Some(guild),
            999,
            Some((RunStatus::Succeeded, 9_000)),
            &["old_tool"],
        ),
        (
            "r_other",
            Some("discord:guild:2"),
            1_500,
            Some((RunStatus::Succeeded, 5)),
            &["other_tool"],
        ),
        (
            "r_none",
            None,
            1_500,
            Some((RunStatus::Failed, 5)),
            &["other_tool"],
        ),
    ];
    for (id, scope, created_at, end, tools) in runs {
        let mut run = new_run(id, &format!("t_{id}"), None);
        run.scope = scope.map(str::to_owned);
        run.created_at = created_at;
        store.create_run(run).await.unwrap();
        let mut steps = vec![step(id, 0, StepStatus::Succeeded)];
        for (i, name) in tools.iter().enumerate() {
            let mut s = step(id, i as u32 + 1, StepStatus::Succeeded);
            s.kind = StepKind::Tool;
            s.name = (*name).to_owned();
            steps.push(s);
        }
        match end {
            Some((status, after)) => {
                let mut f = finish(id, Vec::new());
                f.status = status;
                f.steps = steps;
                f.finished_at = created_at + after;
                assert!(store.finish_run(f).await.unwrap());
            }
            None => {
                for s in steps {
                    store.put_step(s).await.unwrap();
                }
            }
        }
    }

    let stats = store.run_stats(guild, 1_000, 2).await.unwrap();
    assert_eq!(
        stats.by_status,
        [
            (RunStatus::Queued, 1),
            (RunStatus::Succeeded, 1),
            (RunStatus::Failed, 1),
            (RunStatus::Cancelled, 1),
        ]
    );
    assert_eq!(stats.total(), 4);
    // Finished: 100, 200, 300 ms.
    assert_eq!(
        (stats.latency_p50_ms, stats.latency_p95_ms),
        (Some(200), Some(300))
    );
    assert_eq!(
        stats.top_tools,
        // current_time and memory_search tie at 2: by name.
        [("web_fetch".to_owned(), 3), ("current_time".to_owned(), 2)]
    );

    let later = store.run_stats(guild, 2_001, 10).await.unwrap();
    assert_eq!(
        later.by_status,
        [(RunStatus::Queued, 1), (RunStatus::Cancelled, 1)]
    );
    assert_eq!(
        (later.latency_p50_ms, later.latency_p95_ms),
        (Some(200), Some(200))
    );
    assert_eq!(later.top_tools, [("current_time".to_owned(), 1)]);

    let empty = store.run_stats("discord:guild:3", 0, 5).await.unwrap();
    assert_eq!(empty, crate::records::RunStats::default());
}

pub async fn concurrent_identical_requests_create_one_run<S: RunStore + ThreadStore>(store: S) {
    let store = Arc::new(store);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            store
                .create_run(new_run(&format!("run_{i}"), "t1", Some("k1")))
                .await
        });
    }
    let (mut fresh, mut existing, mut ids) = (0, 0, Vec::new());
    while let Some(outcome) = tasks.join_next().await {
        match outcome.unwrap().unwrap() {
            CreateRunOutcome::Created(run) => {
                fresh += 1;
                ids.push(run.run_id);
            }
            CreateRunOutcome::Existing(run) => {
                existing += 1;
                ids.push(run.run_id);
            }
        }
    }
    assert_eq!((fresh, existing), (1, 19));
    ids.dedup();
    assert_eq!(ids.len(), 1);
    let filter = RunFilter {
        thread_key: Some("t1".into()),
        ..RunFilter::default()
    };
    assert_eq!(store.list_runs(&filter).await.unwrap().len(), 1);

    // The same key on another thread is another run.
    let other = store
        .create_run(new_run("run_other", "t2", Some("k1")))
        .await
        .unwrap();
    assert!(matches!(other, CreateRunOutcome::Created(ref r) if r.run_id == "run_other"));
}

pub async fn finish_run_is_atomic_and_happens_once<S: RunStore + ThreadStore>(store: S) {
    created(&store, "run_1", "t1").await;
    store
        .claim_run("run_1", "node-a", 99, 10)
        .await
        .unwrap()
        .unwrap();
    store.set_run_model("run_1", "openai/gpt").await.unwrap();
    let messages = vec![
        Message::text(Role::User, "hi"),
        Message::text(Role::Assistant, "hello"),
    ];
    assert!(
        store
            .finish_run(finish("run_1", messages.clone()))
            .await
            .unwrap()
    );

    let run = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(run.output.as_deref(), Some("answer"));
    assert_eq!(run.model.as_deref(), Some("openai/gpt"));
    assert_eq!((run.lease_owner, run.lease_until), (None, None));
    assert_eq!(run.updated_at, 1_700_000_001_000);
    assert_eq!(run.last_event_seq, Some(7));
    assert_eq!(store.steps("run_1").await.unwrap().len(), 1);
    assert_eq!(store.thread_history("t1", 10).await.unwrap(), messages);

    let mut again = finish("run_1", vec![Message::text(Role::User, "dup")]);
    again.status = RunStatus::Failed;
    assert!(!store.finish_run(again).await.unwrap());
    assert_eq!(store.thread_history("t1", 10).await.unwrap(), messages);
    let run = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Succeeded);
    assert!(
        !store
            .finish_run(finish("run_missing", messages))
            .await
            .unwrap()
    );
}

pub async fn steps_upsert_by_index<S: RunStore + ThreadStore>(store: S) {
    created(&store, "run_1", "t1").await;
    store
        .put_step(step("run_1", 1, StepStatus::Started))
        .await
        .unwrap();
    store
        .put_step(step("run_1", 0, StepStatus::Started))
        .await
        .unwrap();
    let mut done = step("run_1", 1, StepStatus::Succeeded);
    done.finished_at = Some(20);
    done.tokens = None;
    done.kind = StepKind::Tool;
    store.put_step(done.clone()).await.unwrap();
    let steps = store.steps("run_1").await.unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0], step("run_1", 0, StepStatus::Started));
    assert_eq!(steps[1], done);
    let (journal, steers) = store.journal_of_run("run_1").await.unwrap();
    assert_eq!(journal, steps);
    assert!(steers.is_empty());
}

pub async fn list_runs_filters_newest_first<S: RunStore + ThreadStore>(store: S) {
    for i in 0..6 {
        created(
            &store,
            &format!("run_{i}"),
            if i % 2 == 0 { "even" } else { "odd" },
        )
        .await;
    }
    assert!(store.finish_run(finish("run_4", vec![])).await.unwrap());
    let ids = |runs: Vec<RunRecord>| runs.into_iter().map(|r| r.run_id).collect::<Vec<_>>();

    let all = store.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(
        ids(all),
        ["run_5", "run_4", "run_3", "run_2", "run_1", "run_0"]
    );
    let even = RunFilter {
        thread_key: Some("even".into()),
        ..RunFilter::default()
    };
    assert_eq!(
        ids(store.list_runs(&even).await.unwrap()),
        ["run_4", "run_2", "run_0"]
    );
    let queued_even = RunFilter {
        status: Some(RunStatus::Queued),
        ..even.clone()
    };
    assert_eq!(
        ids(store.list_runs(&queued_even).await.unwrap()),
        ["run_2", "run_0"]
    );
    let done = RunFilter {
        status: Some(RunStatus::Succeeded),
        ..RunFilter::default()
    };
    assert_eq!(ids(store.list_runs(&done).await.unwrap()), ["run_4"]);
    let two = RunFilter {
        limit: 2,
        ..RunFilter::default()
    };
    assert_eq!(
        ids(store.list_runs(&two).await.unwrap()),
        ["run_5", "run_4"]
    );
    // Paging: the next page starts after the last run of the one before.
    let next = RunFilter {
        before: Some("run_4".into()),
        ..two.clone()
    };
    assert_eq!(
        ids(store.list_runs(&next).await.unwrap()),
        ["run_3", "run_2"]
    );
    let even_after = RunFilter {
        before: Some("run_4".into()),
        ..even.clone()
    };
    assert_eq!(
        ids(store.list_runs(&even_after).await.unwrap()),
        ["run_2", "run_0"]
    );
    let queued_even_after = RunFilter {
        before: Some("run_2".into()),
        ..queued_even.clone()
    };
    assert_eq!(
        ids(store.list_runs(&queued_even_after).await.unwrap()),
        ["run_0"]
    );
    let done_after = RunFilter {
        before: Some("run_5".into()),
        ..done.clone()
    };
    assert_eq!(ids(store.list_runs(&done_after).await.unwrap()), ["run_4"]);
    let unknown = RunFilter {
        before: Some("run_gone".into()),
        ..RunFilter::default()
    };
    assert!(store.list_runs(&unknown).await.unwrap().is_empty());
}

/// `list_runs` narrows by user, source, model and acceptance time, on
/// every shape of the thread and status filters, with the cursor.
pub async fn list_runs_narrows_by_user_source_model_and_time<S: RunStore + ThreadStore>(store: S) {
    for i in 0..6_i64 {
        let run = NewRun {
            user_key: if i < 3 { "user:ann" } else { "user:bob" }.into(),
            source: if i % 2 == 0 { "api" } else { "telegram" }.into(),
            created_at: 1_700_000_000_000 + i * 1000,
            ..new_run(&format!("run_{i}"), if i < 4 { "t1" } else { "t2" }, None)
        };
        store.create_run(run).await.unwrap();
    }
    let answered = RunFinish {
        model: Some("fake/m2".into()),
        ..finish("run_2", vec![])
    };
    assert!(store.finish_run(answered).await.unwrap());
    let ids = |runs: Vec<RunRecord>| runs.into_iter().map(|r| r.run_id).collect::<Vec<_>>();
    let list = |f: RunFilter| {
        let store = &store;
        async move { ids(store.list_runs(&f).await.unwrap()) }
    };
    let ann = RunFilter {
        user_key: Some("user:ann".into()),
        ..RunFilter::default()
    };
    assert_eq!(list(ann.clone()).await, ["run_2", "run_1", "run_0"]);
    let ann_api = RunFilter {
        source: Some("api".into()),
        ..ann.clone()
    };
    assert_eq!(list(ann_api.clone()).await, ["run_2", "run_0"]);
    assert_eq!(
        list(RunFilter {
            before: Some("run_2".into()),
            ..ann_api
        })
        .await,
        ["run_0"]
    );
    let m2 = RunFilter {
        model: Some("fake/m2".into()),
        ..RunFilter::default()
    };
    assert_eq!(list(m2).await, ["run_2"]);
    let window = RunFilter {
        since: Some(1_700_000_001_000),
        until: Some(1_700_000_004_000),
        ..RunFilter::default()
    };
    assert_eq!(list(window.clone()).await, ["run_3", "run_2", "run_1"]);
    let t1_bob = RunFilter {
        thread_key: Some("t1".into()),
        user_key: Some("user:bob".into()),
        ..RunFilter::default()
    };
    assert_eq!(list(t1_bob).await, ["run_3"]);
    let done_in_window = RunFilter {
        status: Some(RunStatus::Succeeded),
        ..window
    };
    assert_eq!(list(done_in_window).await, ["run_2"]);
    let t2_queued_telegram = RunFilter {
        thread_key: Some("t2".into()),
        status: Some(RunStatus::Queued),
        source: Some("telegram".into()),
        ..RunFilter::default()
    };
    assert_eq!(list(t2_queued_telegram).await, ["run_5"]);
}

pub async fn list_threads_counts_runs_most_recently_active_first<S: RunStore + ThreadStore>(
    store: S,
) {
    assert!(store.list_threads(10).await.unwrap().is_empty());
    for (i, thread) in ["a", "b", "a", "c", "a"].into_iter().enumerate() {
        created(&store, &format!("run_{i}"), thread).await;
    }
    let threads = store.list_threads(10).await.unwrap();
    let seen: Vec<(&str, u64)> = threads
        .iter()
        .map(|t| (t.thread_key.as_str(), t.runs))
        .collect();
    assert_eq!(seen, [("a", 3), ("c", 1), ("b", 1)]);
    let newest_a = store.get_run("run_4").await.unwrap().unwrap().created_at;
    assert_eq!(threads[0].last_run_at, newest_a);
    let two: Vec<String> = store
        .list_threads(2)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.thread_key)
        .collect();
    assert_eq!(two, ["a", "c"]);
    // More runs of one thread than the newest runs read first for one
    // thread: it is still the newest, with all its runs counted, and an
    // older thread comes after it.
    for i in 0..45 {
        created(&store, &format!("run_busy_{i}"), "busy").await;
    }
    let one = store.list_threads(1).await.unwrap();
    assert_eq!(
        one.iter()
            .map(|t| (t.thread_key.as_str(), t.runs))
            .collect::<Vec<_>>(),
        [("busy", 45)]
    );
    let three = store.list_threads(3).await.unwrap();
    assert_eq!(
        three
            .iter()
            .map(|t| (t.thread_key.as_str(), t.runs))
            .collect::<Vec<_>>(),
        [("busy", 45), ("a", 3), ("c", 1)]
    );
}

pub async fn steers_are_stored_in_order_and_follow_ups_commit_with_the_finish<
    S: RunStore + ThreadStore,
>(
    store: S,
) {
    created(&store, "run_s", "t:s").await;
    let a = store.add_steer("run_s", "first", 10).await.unwrap();
    let b = store.add_steer("run_s", "second", 11).await.unwrap();
    assert!(b.id > a.id);
    let all = store.steers("run_s").await.unwrap();
    assert_eq!(
        all.iter().map(|s| s.text.as_str()).collect::<Vec<_>>(),
        ["first", "second"]
    );
    assert!(store.steers("run_other").await.unwrap().is_empty());
    // Read together, the journal holds the same steers (and no steps yet).
    let (steps, steers) = store.journal_of_run("run_s").await.unwrap();
    assert!(steps.is_empty());
    assert_eq!(steers, all);
    // A steer for a run that does not exist breaks the foreign key.
    assert!(store.add_steer("run_missing", "x", 12).await.is_err());

    let mut fin = finish("run_s", Vec::new());
    fin.follow_ups = vec![new_run("run_follow", "t:s", None)];
    assert!(store.finish_run(fin.clone()).await.unwrap());
    let follow = store.get_run("run_follow").await.unwrap().unwrap();
    assert_eq!(follow.status, RunStatus::Queued);
    // A second finish changes nothing and creates nothing.
    fin.follow_ups = vec![new_run("run_follow_2", "t:s", None)];
    assert!(!store.finish_run(fin).await.unwrap());
    assert!(store.get_run("run_follow_2").await.unwrap().is_none());
}

/// Whether `stored` is `given` as a store keeps it: as given, or with each
/// NUL as U+FFFD (PostgreSQL's `text` cannot hold U+0000).
fn kept(stored: Option<&str>, given: &str) -> bool {
    stored == Some(given) || stored == Some(given.replace('\0', "\u{FFFD}").as_str())
}

/// Text holding a NUL (U+0000) in a message, a steer, a tool step's name or
/// a run's answer or error is stored and the run ends, on every store. On
/// PostgreSQL the message's insert and the run's end were refused for it:
/// the message answered 500, and a run whose model answered with one could
/// not end and was run again on recovery, with the same answer.
pub async fn text_holding_a_nul_is_stored_and_its_run_ends<S: RunStore + ThreadStore>(store: S) {
    let mut queued = new_run("run_nul", "t:nul", None);
    queued.input = "input \0 of run_nul".to_owned();
    let CreateRunOutcome::Created(run) = store.create_run(queued).await.unwrap() else {
        panic!("a new run");
    };
    assert!(kept(Some(&run.input), "input \0 of run_nul"), "{run:?}");
    let mut claimed = new_run("run_nul_2", "t:nul_2", None);
    claimed.input = "\0".to_owned();
    let CreateRunOutcome::Created(run) = store
        .create_claimed_run(claimed, "node-a", 5_000, "p/m", None)
        .await
        .unwrap()
    else {
        panic!("a new run");
    };
    assert!(kept(Some(&run.input), "\0"), "{run:?}");

    let steer = store.add_steer("run_nul", "steer \0", 10).await.unwrap();
    assert!(kept(Some(&steer.text), "steer \0"), "{steer:?}");
    let mut named = step("run_nul", 1, StepStatus::Succeeded);
    named.kind = StepKind::Tool;
    named.name = "tool \0".to_owned();
    store.put_step(named).await.unwrap();

    let mut fin = finish(
        "run_nul",
        vec![
            Message::text(Role::User, "input \0 of run_nul"),
            Message::text(Role::Assistant, "answer \0"),
        ],
    );
    fin.output = Some("answer \0".to_owned());
    let mut tool = step("run_nul", 2, StepStatus::Succeeded);
    tool.kind = StepKind::Tool;
    tool.name = "tool of the end \0".to_owned();
    fin.steps.push(tool);
    assert!(store.finish_run(fin).await.unwrap());
    let ended = store.get_run("run_nul").await.unwrap().unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded);
    assert!(kept(ended.output.as_deref(), "answer \0"), "{ended:?}");
    let steps = store.steps("run_nul").await.unwrap();
    assert!(kept(Some(&steps[1].name), "tool \0"), "{steps:?}");
    assert!(
        kept(Some(&steps[2].name), "tool of the end \0"),
        "{steps:?}"
    );
    // Messages are JSON, which writes the NUL as an escape: kept as given.
    assert_eq!(
        store.thread_history("t:nul", 10).await.unwrap()[1],
        Message::text(Role::Assistant, "answer \0")
    );

    let mut failed = finish("run_nul_2", Vec::new());
    failed.status = RunStatus::Failed;
    failed.output = None;
    failed.error_code = Some("provider_error".to_owned());
    failed.error_message = Some("the model said \0".to_owned());
    assert!(store.finish_run(failed).await.unwrap());
    let ended = store.get_run("run_nul_2").await.unwrap().unwrap();
    assert_eq!(ended.status, RunStatus::Failed);
    assert!(
        kept(ended.error_message.as_deref(), "the model said \0"),
        "{ended:?}"
    );
}

pub async fn of_concurrent_claims_exactly_one_wins<S: RunStore + ThreadStore>(store: S) {
    let store = Arc::new(store);
    created(store.as_ref(), "run_1", "t1").await;
    let mut tasks = Vec::new();
    for i in 0..32 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            store
                .claim_run("run_1", &format!("node-{i}"), 10_000, 1_000)
                .await
                .unwrap()
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        if let Some(run) = task.await.unwrap() {
            winners.push(run);
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let stored = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Running);
    assert_eq!(stored.lease_owner, winners[0].lease_owner);
    assert_eq!(stored.lease_until, Some(10_000));
}

pub async fn a_run_created_claimed_is_running_under_its_owner_and_a_twin_is_left_alone<
    S: RunStore + ThreadStore,
>(
    store: S,
) {
    let first = new_run("run_c", "t:c", Some("key-1"));
    let at = first.created_at;
    let run = match store
        .create_claimed_run(first, "node-a", at + 10_000, "openai/gpt", None)
        .await
        .unwrap()
    {
        CreateRunOutcome::Created(run) => run,
        other => panic!("expected Created, got {other:?}"),
    };
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.lease_owner.as_deref(), Some("node-a"));
    assert_eq!(run.lease_until, Some(at + 10_000));
    assert_eq!(run.model.as_deref(), Some("openai/gpt"));
    assert_eq!(store.get_run("run_c").await.unwrap().unwrap(), run);
    // Its lease is live: nobody else claims it; its owner may again.
    assert!(
        store
            .claim_run("run_c", "node-b", at + 20_000, at + 1)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claim_run("run_c", "node-a", at + 20_000, at + 1)
            .await
            .unwrap()
            .is_some()
    );
    // The same idempotency key again: the stored run, not claimed anew.
    let twin = store
        .create_claimed_run(
            new_run("run_d", "t:c", Some("key-1")),
            "node-b",
            at + 30_000,
            "x/y",
            None,
        )
        .await
        .unwrap();
    match twin {
        CreateRunOutcome::Existing(existing) => {
            assert_eq!(existing.run_id, "run_c");
            assert_eq!(existing.lease_owner.as_deref(), Some("node-a"));
            assert_eq!(existing.model.as_deref(), Some("openai/gpt"));
        }
        other => panic!("expected Existing, got {other:?}"),
    }
    assert!(store.get_run("run_d").await.unwrap().is_none());
}

pub async fn claims_respect_terminal_runs_and_live_leases<S: RunStore + ThreadStore>(store: S) {
    // Two threads: a store shared by replicas keeps a thread's order, so a
    // later run of the same thread would not be claimable before this one ends.
    created(&store, "run_1", "t1").await;
    created(&store, "run_2", "t2").await;

    let won = store
        .claim_run("run_1", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            won.status,
            won.lease_owner.as_deref(),
            won.lease_until,
            won.updated_at
        ),
        (RunStatus::Running, Some("node-a"), Some(5_000), 1_000)
    );
    // Another owner's live lease (and a lease ending exactly now) holds.
    assert!(
        store
            .claim_run("run_1", "node-b", 9_000, 2_000)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claim_run("run_1", "node-b", 9_000, 5_000)
            .await
            .unwrap()
            .is_none()
    );
    // The same owner claims again (recovery of its own run) and extends it.
    let again = store
        .claim_run("run_1", "node-a", 6_000, 2_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.lease_until, Some(6_000));
    // Once the lease has lapsed, another owner wins.
    let taken = store
        .claim_run("run_1", "node-b", 9_000, 6_001)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.lease_owner.as_deref(), Some("node-b"));
    // A claim can record the model in the same write; a plain one keeps it.
    let with_model = store
        .claim_run_with_model("run_1", "node-b", 9_500, 6_002, "openai/gpt", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(with_model.model.as_deref(), Some("openai/gpt"));
    let plain = store
        .claim_run("run_1", "node-b", 9_600, 6_003)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(plain.model.as_deref(), Some("openai/gpt"));

    // Terminal and unknown runs are never claimed.
    store
        .claim_run("run_2", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert!(store.finish_run(finish("run_2", vec![])).await.unwrap());
    assert!(
        store
            .claim_run("run_2", "node-a", 5_000, 1_000)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claim_run("run_2", "node-b", 5_000, 99_000)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claim_run("run_missing", "node-a", 5_000, 1_000)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store.get_run("run_2").await.unwrap().unwrap().status,
        RunStatus::Succeeded
    );

    store.set_run_model("run_1", "openai/gpt").await.unwrap();
    assert_eq!(
        store
            .get_run("run_1")
            .await
            .unwrap()
            .unwrap()
            .model
            .as_deref(),
        Some("openai/gpt")
    );
}

pub async fn renew_leases_extends_only_the_named_runs_of_the_owner<S: RunStore + ThreadStore>(
    store: S,
) {
    for id in ["run_1", "run_2", "run_3", "run_4"] {
        // One thread each: each is claimed while the others are unfinished.
        created(&store, id, &format!("t_{id}")).await;
    }
    for id in ["run_1", "run_2", "run_4"] {
        store
            .claim_run(id, "node-a", 100, 10)
            .await
            .unwrap()
            .unwrap();
    }
    store
        .claim_run("run_3", "node-b", 100, 10)
        .await
        .unwrap()
        .unwrap();
    assert!(store.finish_run(finish("run_4", vec![])).await.unwrap());

    let named = ["run_1", "run_3", "run_4", "run_missing"].map(str::to_owned);
    // run_3 is another owner's, run_4 is finished: only run_1 is renewed.
    assert_eq!(store.renew_leases("node-a", &named, 500).await.unwrap(), 1);
    assert_eq!(store.renew_leases("node-a", &[], 500).await.unwrap(), 0);
    let mut leases = Vec::new();
    for id in ["run_1", "run_2", "run_3", "run_4"] {
        leases.push(store.get_run(id).await.unwrap().unwrap().lease_until);
    }
    // run_2 is held by node-a but not executing: its lease lapses so
    // recovery can take it.
    assert_eq!(leases, [Some(500), Some(100), Some(100), None]);
}

pub async fn release_foreign_leases_frees_only_other_owners_unfinished_runs<
    S: RunStore + ThreadStore,
>(
    store: S,
) {
    for id in ["run_1", "run_2", "run_3"] {
        // One thread each: each is claimed while the others are unfinished.
        created(&store, id, &format!("t_{id}")).await;
    }
    store
        .claim_run("run_1", "node-a", 100_000, 10)
        .await
        .unwrap()
        .unwrap();
    store
        .claim_run("run_2", "node-dead", 100_000, 10)
        .await
        .unwrap()
        .unwrap();
    store
        .claim_run("run_3", "node-dead", 100_000, 10)
        .await
        .unwrap()
        .unwrap();
    assert!(store.finish_run(finish("run_3", vec![])).await.unwrap());

    assert_eq!(store.release_foreign_leases("node-a").await.unwrap(), 1);
    let run_2 = store.get_run("run_2").await.unwrap().unwrap();
    assert_eq!((run_2.lease_owner, run_2.lease_until), (None, None));
    let run_1 = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(run_1.lease_owner.as_deref(), Some("node-a"));
    // The freed run is claimable at once, although its lease had not lapsed.
    assert!(
        store
            .claim_run("run_2", "node-a", 200_000, 20)
            .await
            .unwrap()
            .is_some()
    );
}

/// A run's end names the model that answered: it replaces the model the run
/// was claimed with, which is kept as `requested_model` when the runtime says
/// they differ (failover, routing). An end that names no model keeps both.
pub async fn the_end_records_the_model_that_answered_and_the_one_asked_for<
    S: RunStore + ThreadStore,
>(
    store: S,
) {
    for id in ["run_f", "run_s", "run_n"] {
        // One thread each: each is claimed while the others are unfinished.
        created(&store, id, &format!("t_{id}")).await;
        store
            .claim_run_with_model(id, "node", i64::MAX, 0, "fake/primary", None)
            .await
            .unwrap()
            .unwrap();
    }
    let mut failed_over = finish("run_f", vec![]);
    failed_over.model = Some("fake/backup".into());
    failed_over.requested_model = Some("fake/primary".into());
    assert!(store.finish_run(failed_over).await.unwrap());
    let run = store.get_run("run_f").await.unwrap().unwrap();
    assert_eq!(
        (run.model.as_deref(), run.requested_model.as_deref()),
        (Some("fake/backup"), Some("fake/primary"))
    );
    let listed = store.list_runs(&RunFilter::default()).await.unwrap();
    assert!(listed.contains(&run), "list_runs lost it: {listed:?}");

    let mut same = finish("run_s", vec![]);
    same.model = Some("fake/primary".into());
    assert!(store.finish_run(same).await.unwrap());
    let run = store.get_run("run_s").await.unwrap().unwrap();
    assert_eq!(
        (run.model.as_deref(), run.requested_model),
        (Some("fake/primary"), None)
    );

    assert!(store.finish_run(finish("run_n", vec![])).await.unwrap());
    let run = store.get_run("run_n").await.unwrap().unwrap();
    assert_eq!(
        (run.model.as_deref(), run.requested_model),
        (Some("fake/primary"), None)
    );
}

/// Of concurrent ends of one run (as two replicas may both try, one
/// recovering it), exactly one is applied: one returns true, and only its
/// follow-up and usage are written.
pub async fn of_concurrent_finishes_exactly_one_ends_the_run<S: RunStore + ThreadStore>(store: S) {
    let store = Arc::new(store);
    created(store.as_ref(), "run_1", "t1").await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let mut end = finish("run_1", Vec::new());
            end.output = Some(format!("answer {i}"));
            end.follow_ups = vec![new_run(&format!("run_follow_{i}"), "t1", None)];
            (i, store.finish_run(end).await.unwrap())
        });
    }
    let mut winners = Vec::new();
    while let Some(done) = tasks.join_next().await {
        let (i, ended) = done.unwrap();
        if ended {
            winners.push(i);
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let winner = winners[0];
    let run = store.get_run("run_1").await.unwrap().unwrap();
    assert_eq!(run.output, Some(format!("answer {winner}")));
    let follow_ups: Vec<String> = store
        .list_runs(&RunFilter {
            status: Some(RunStatus::Queued),
            ..RunFilter::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(follow_ups, [format!("run_follow_{winner}")]);
    assert_eq!(store.steps("run_1").await.unwrap().len(), 1);
}

/// A thread is one user's alone until another user's run is on it,
/// however old that run is among the thread's runs.
pub async fn a_thread_is_one_users_until_another_users_run_is_on_it<S: RunStore>(store: S) {
    let run = |id: &str, thread: &str, user: &str| {
        let mut r = new_run(id, thread, None);
        r.user_key = user.to_owned();
        r
    };
    assert!(
        !store
            .thread_has_other_users("t:new", "alice")
            .await
            .unwrap()
    );
    store.create_run(run("r_b0", "t:o", "bob")).await.unwrap();
    for i in 0..5 {
        store
            .create_run(run(&format!("r_a{i}"), "t:o", "alice"))
            .await
            .unwrap();
    }
    store
        .create_run(run("r_c0", "t:mine", "alice"))
        .await
        .unwrap();
    assert!(store.thread_has_other_users("t:o", "alice").await.unwrap());
    assert!(store.thread_has_other_users("t:o", "bob").await.unwrap());
    assert!(store.thread_has_other_users("t:o", "carol").await.unwrap());
    assert!(
        !store
            .thread_has_other_users("t:mine", "alice")
            .await
            .unwrap()
    );
    assert!(
        store
            .thread_has_other_users("t:mine", "alicf")
            .await
            .unwrap()
    );
    assert!(
        store
            .thread_has_other_users("t:mine", "alicd")
            .await
            .unwrap()
    );
}
