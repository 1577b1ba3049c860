//! The PostgreSQL writes that save round trips keep their guarantees: a
//! run's end in one statement is still all or nothing, and a message stored
//! in one statement (`hearth_store_run`: the thread's lock and the insert)
//! is accepted only once committed, and a failure leaves the pooled
//! connection clean and the thread free.

use std::time::Duration;

use hearth_core::{Message, Role, RunStatus};
use hearth_store::conformance::fixtures::{confirmation, created, finish, new_run, step};
use hearth_store::postgres::testing::{TEST_URL_VAR, fresh_database_url};
use hearth_store::prelude::*;
use hearth_store::{
    ArmStats, ConfirmationState, CreateRunOutcome, HistorySeen, NewOutboxItem, OutboxKind,
    PostgresStore, StepKind, StepStatus,
};

/// A fresh store with `pool` connections, and a connection of its own to
/// the same database for changing it behind the store's back.
pub(super) async fn fresh(pool: usize) -> Option<(PostgresStore, tokio_postgres::Client)> {
    let url = fresh_database_url().await?;
    let store = PostgresStore::connect(&url, TEST_URL_VAR, pool)
        .await
        .unwrap();
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    Some((store, client))
}

/// An end with a part for every table it writes: the run, a confirmation to
/// expire, a model call (usage), a tool step, two messages, a reply, a
/// router observation.
fn full_end(run_id: &str, answer: &str) -> hearth_store::RunFinish {
    let mut end = finish(
        run_id,
        vec![
            Message::text(Role::User, "hi"),
            Message::text(Role::Assistant, answer),
        ],
    );
    let mut call = step(run_id, 0, StepStatus::Succeeded);
    call.kind = StepKind::Llm;
    call.name = "p/m".into();
    call.tokens = Some(serde_json::json!({ "input_tokens": 3, "output_tokens": 4 }));
    let mut tool = step(run_id, 1, StepStatus::Succeeded);
    tool.kind = StepKind::Tool;
    end.steps = vec![call, tool];
    end.outbox = vec![NewOutboxItem {
        channel: "telegram".into(),
        target: "1".into(),
        kind: OutboxKind::Message,
        run_id: Some(run_id.into()),
        payload: "{\"text\":\"answer\"}".into(),
    }];
    end.arm_observations = vec![ArmStats {
        model: "p/m".into(),
        task: "chat".into(),
        successes: 1,
        failures: 0,
        runs: 1,
    }];
    end
}

/// What the end of `run_id` wrote, table by table.
async fn written(
    store: &PostgresStore,
    run_id: &str,
    thread: &str,
) -> (
    RunStatus,
    usize,
    usize,
    usize,
    usize,
    usize,
    ConfirmationState,
) {
    let run = store.get_run(run_id).await.unwrap().unwrap();
    let steps = store.steps(run_id).await.unwrap().len();
    let calls = store.calls_since(0).await.unwrap().len();
    let history = store.thread_history(thread, 10).await.unwrap().len();
    let outbox = store.list_outbox(None, 10).await.unwrap().len();
    let arms = store.arm_stats().await.unwrap().len();
    let asked = store
        .confirmation_for_call(run_id, "call_1")
        .await
        .unwrap()
        .unwrap();
    (run.status, steps, calls, history, outbox, arms, asked.state)
}

/// An end whose last write fails (a message the database refuses) leaves
/// every table as it was: the run unfinished, no step, no usage, no
/// message, no reply, no router count, the confirmation still pending. The
/// same end, once it can be written, writes each part once.
#[tokio::test]
async fn a_run_end_that_fails_midway_writes_nothing() {
    let Some((store, sql)) = fresh(2).await else {
        return;
    };
    created(&store, "run_1", "t1").await;
    store
        .request_confirmation(confirmation("run_1", "call_1", "hash_1"), Vec::new())
        .await
        .unwrap();
    sql.batch_execute(
        "ALTER TABLE messages ADD CONSTRAINT no_boom CHECK (content NOT LIKE '%boom%')",
    )
    .await
    .unwrap();

    let refused = store.finish_run(full_end("run_1", "boom")).await;
    assert!(
        refused.is_err(),
        "the database refused a message: {refused:?}"
    );
    assert_eq!(
        written(&store, "run_1", "t1").await,
        (
            RunStatus::AwaitingConfirmation,
            0,
            0,
            0,
            0,
            0,
            ConfirmationState::Pending
        ),
        "nothing of a failed end is written"
    );

    sql.batch_execute("ALTER TABLE messages DROP CONSTRAINT no_boom")
        .await
        .unwrap();
    assert!(store.finish_run(full_end("run_1", "fine")).await.unwrap());
    assert_eq!(
        written(&store, "run_1", "t1").await,
        (
            RunStatus::Succeeded,
            2,
            1,
            2,
            1,
            1,
            ConfirmationState::Expired
        )
    );
    let usage = store
        .usage(&hearth_store::UsageQuery {
            since: None,
            until: None,
            group_by: hearth_store::UsageGroup::Model,
        })
        .await
        .unwrap();
    assert_eq!((usage[0].calls, usage[0].input_tokens), (1, 3));
}

/// A message whose insert fails, and one whose commit fails, are not
/// accepted and leave no run; on a pool of one connection, the thread's
/// next message is then stored (the connection is not left inside a failed
/// transaction), and claimed (the failed runs hold nothing), and another
/// store's message to the thread is not kept waiting on its lock.
#[tokio::test]
async fn a_message_stored_in_one_round_trip_is_accepted_only_once_committed() {
    let Some((store, sql)) = fresh(1).await else {
        return;
    };
    sql.batch_execute(
        "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN RAISE EXCEPTION 'boom'; END $$; \
         CREATE TRIGGER boom_now BEFORE INSERT ON runs FOR EACH ROW \
         WHEN (NEW.input = 'boom now') EXECUTE FUNCTION boom(); \
         CREATE CONSTRAINT TRIGGER boom_at_commit AFTER INSERT ON runs \
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW \
         WHEN (NEW.input = 'boom at commit') EXECUTE FUNCTION boom();",
    )
    .await
    .unwrap();
    for (id, input) in [("run_now", "boom now"), ("run_commit", "boom at commit")] {
        let mut run = new_run(id, "t1", None);
        run.input = input.into();
        let stored = store.create_run(run).await;
        assert!(stored.is_err(), "{input}: {stored:?}");
        assert!(store.get_run(id).await.unwrap().is_none(), "{input}");
    }
    let mut run = new_run("run_commit_claimed", "t1", None);
    run.input = "boom at commit".into();
    let stored = store
        .create_claimed_run(run, "node-a", 99, "p/m", None)
        .await;
    assert!(stored.is_err(), "{stored:?}");

    let next = store
        .create_claimed_run(new_run("run_ok", "t1", None), "node-a", 99, "p/m", None)
        .await
        .unwrap();
    let CreateRunOutcome::Created(next) = next else {
        panic!("a new run: {next:?}");
    };
    assert_eq!(
        (next.status, next.lease_owner.as_deref()),
        (RunStatus::Running, Some("node-a"))
    );
    let other = PostgresStore::connect(
        &hearth_store::postgres::testing::with_dbname(
            &hearth_store::postgres::testing::server_url().unwrap(),
            &sql.query_one("SELECT current_database()", &[])
                .await
                .unwrap()
                .get::<_, String>(0),
        ),
        TEST_URL_VAR,
        1,
    )
    .await
    .unwrap();
    let queued = tokio::time::timeout(
        Duration::from_secs(5),
        other.create_run(new_run("run_later", "t1", None)),
    )
    .await
    .expect("the thread's lock is free")
    .unwrap();
    assert!(
        matches!(queued, CreateRunOutcome::Created(ref r) if r.status == RunStatus::Queued),
        "behind the running one: {queued:?}"
    );
    let in_tx: String = sql
        .query_one(
            "SELECT coalesce(string_agg(state, ','), '') FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND state LIKE '%transaction%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(in_tx, "", "no pooled connection is left in a transaction");
}

/// The end tells whether a later run of the thread was queued, so the
/// replica that ended it asks for the thread's next run only then.
#[tokio::test]
async fn a_run_end_tells_whether_its_thread_has_a_run_queued() {
    let Some((store, _sql)) = fresh(2).await else {
        return;
    };
    for (id, thread) in [("run_alone", "t1"), ("run_first", "t2")] {
        store
            .create_claimed_run(new_run(id, thread, None), "node-a", 99, "p/m", None)
            .await
            .unwrap();
    }
    created(&store, "run_behind", "t2").await;
    assert_eq!(
        store
            .finish_run_seeing_next(finish("run_alone", Vec::new()))
            .await
            .unwrap(),
        (true, Some(false))
    );
    assert_eq!(
        store
            .finish_run_seeing_next(finish("run_first", Vec::new()))
            .await
            .unwrap(),
        (true, Some(true))
    );
    assert_eq!(
        store
            .finish_run_seeing_next(finish("run_first", Vec::new()))
            .await
            .unwrap(),
        (false, None),
        "ended already"
    );
}

/// Storing a message is one statement in one transaction, claimed or
/// queued (it was four: begin, the thread's lock, the insert and commit);
/// a message whose idempotency key is taken adds the read of its twin.
#[tokio::test]
async fn a_message_is_stored_in_one_statement() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let wire = super::wire::Wire::start(&url).await;
    let store = PostgresStore::connect(wire.url(), TEST_URL_VAR, 1)
        .await
        .unwrap();
    // The first store of a connection also prepares its statements.
    created(&store, "run_warm", "t0").await;

    wire.take();
    let claimed = store
        .create_claimed_run(new_run("run_1", "t1", Some("k")), "node-a", 99, "p/m", None)
        .await
        .unwrap();
    assert!(
        matches!(claimed, CreateRunOutcome::Created(ref r) if r.status == RunStatus::Running),
        "{claimed:?}"
    );
    let sent = wire.take();
    assert_eq!(
        (sent.statements.len(), sent.transactions),
        (1, 1),
        "claimed: {sent:#?}"
    );

    let queued = store
        .create_run(new_run("run_2", "t1", None))
        .await
        .unwrap();
    assert!(
        matches!(queued, CreateRunOutcome::Created(ref r) if r.status == RunStatus::Queued),
        "{queued:?}"
    );
    let sent = wire.take();
    assert_eq!(
        (sent.statements.len(), sent.transactions),
        (1, 1),
        "queued: {sent:#?}"
    );

    let twin = store
        .create_run(new_run("run_3", "t1", Some("k")))
        .await
        .unwrap();
    assert!(
        matches!(twin, CreateRunOutcome::Existing(ref r) if r.run_id == "run_1"),
        "{twin:?}"
    );
    let sent = wire.take();
    assert_eq!(
        (sent.statements.len(), sent.transactions),
        (2, 2),
        "a twin: {sent:#?}"
    );
}

/// A run stored claimed says what its thread's newest stored row is: none
/// for a thread's first message, the last message once a run of the thread
/// ended with messages, a summary once one was written after them. Nothing
/// is said of a twin.
#[tokio::test]
async fn storing_a_run_says_its_threads_newest_stored_row() {
    let Some((store, _sql)) = fresh(2).await else {
        return;
    };
    let stored = |id: &'static str, key: Option<&'static str>| {
        store.create_claimed_run_seeing_history(new_run(id, "t1", key), "node-a", 99, "p/m", None)
    };
    let (first, seen) = stored("run_1", None).await.unwrap();
    assert!(matches!(first, CreateRunOutcome::Created(_)), "{first:?}");
    assert_eq!(seen, Some(HistorySeen::Empty), "the thread's first message");
    let said = vec![
        Message::text(Role::User, "hi"),
        Message::text(Role::Assistant, "hello"),
    ];
    assert!(store.finish_run(finish("run_1", said)).await.unwrap());
    let ids = store.thread_context("t1").await.unwrap().ids;
    let (_, seen) = stored("run_2", Some("k")).await.unwrap();
    assert_eq!(
        seen,
        ids.last().copied().map(HistorySeen::Newest),
        "after a run that said something: its last message ({ids:?})"
    );
    let summary = store
        .append_summary("t1", "run_2", "they greeted", ids[0], 5)
        .await
        .unwrap();
    assert!(store.finish_run(finish("run_2", Vec::new())).await.unwrap());
    let (_, seen) = stored("run_3", None).await.unwrap();
    assert_eq!(
        seen,
        Some(HistorySeen::Newest(summary)),
        "the summary after them"
    );
    assert!(store.finish_run(finish("run_3", Vec::new())).await.unwrap());
    let (twin, seen) = stored("run_4", Some("k")).await.unwrap();
    assert!(matches!(twin, CreateRunOutcome::Existing(_)), "{twin:?}");
    assert_eq!(seen, None, "a twin");
}

/// Whether the thread had messages is asked after the thread's lock was
/// granted, in the insert's snapshot: a run of the thread that ends while
/// the message waits for the lock has its messages seen (asked before the
/// wait, they would be missed, and the new run stored claimed, its previous
/// run being over, would start from an empty history).
#[tokio::test]
async fn a_run_that_ends_while_a_message_waits_for_the_lock_has_its_messages_seen() {
    let Some((store, mut sql)) = fresh(2).await else {
        return;
    };
    store
        .create_claimed_run(new_run("run_1", "t1", None), "node-a", 99, "p/m", None)
        .await
        .unwrap();
    let lock = sql.transaction().await.unwrap();
    lock.execute(
        "SELECT pg_advisory_xact_lock(1751474546, hashtext('t1'))",
        &[],
    )
    .await
    .unwrap();
    let waiting = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .create_claimed_run_seeing_history(
                    new_run("run_2", "t1", None),
                    "node-a",
                    99,
                    "p/m",
                    None,
                )
                .await
        }
    });
    // Until its statement (and so its first snapshot) waits on the lock.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waits: i64 = lock
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waits == 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never waited");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let said = vec![
        Message::text(Role::User, "hi"),
        Message::text(Role::Assistant, "hello"),
    ];
    assert!(store.finish_run(finish("run_1", said)).await.unwrap());
    lock.commit().await.unwrap();
    let (run, had) = waiting.await.unwrap().unwrap();
    let CreateRunOutcome::Created(run) = run else {
        panic!("a new run: {run:?}");
    };
    assert_eq!(run.status, RunStatus::Running, "stored claimed");
    assert!(
        matches!(had, Some(HistorySeen::Newest(_))),
        "run_1's messages: {had:?}"
    );
}

/// `hearth_store_run`, which replicas of the previous version call during a
/// rolling upgrade, still stores a run claimed on an idle thread and queued
/// behind it, now through the function that also reports the history.
#[tokio::test]
async fn the_function_older_replicas_call_stores_runs_as_before() {
    let Some((store, sql)) = fresh(1).await else {
        return;
    };
    let call = "SELECT run_id, status, lease_owner FROM hearth_store_run($1, 't1', 'user:1', \
                'http', 'hi', NULL, 'running', 1, NULL, '[]', 'old-replica', 99, 'p/m', NULL, NULL)";
    let mut stored = Vec::new();
    for id in ["run_old_1", "run_old_2"] {
        let row = sql.query_one(call, &[&id]).await.unwrap();
        stored.push((
            row.get::<_, String>(0),
            row.get::<_, String>(1),
            row.get::<_, Option<String>>(2),
        ));
    }
    assert_eq!(
        stored,
        vec![
            (
                "run_old_1".into(),
                "running".into(),
                Some("old-replica".into())
            ),
            ("run_old_2".into(), "queued".into(), None),
        ]
    );
    let run = store.get_run("run_old_2").await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Queued);
}

/// The functions the previous version calls (migration 0021: one run, and
/// several together) still say whether the thread had messages, now
/// through the function that returns the newest row (migration 0024).
#[tokio::test]
async fn the_previous_versions_functions_still_say_whether_a_thread_had_messages() {
    let Some((store, sql)) = fresh(1).await else {
        return;
    };
    let one = sql
        .query_one(
            "SELECT (r.run).status, r.had_messages FROM hearth_store_run_assuming_defaults(\
             'run_1', 't1', 'user:1', 'http', 'hi', NULL, 'running', 1, NULL, '[]', \
             'old-replica', 99, 'p/m', NULL, NULL, TRUE) AS r",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (one.get::<_, String>(0), one.get::<_, bool>(1)),
        ("running".to_owned(), false)
    );
    let said = vec![
        Message::text(Role::User, "hi"),
        Message::text(Role::Assistant, "hello"),
    ];
    assert!(store.finish_run(finish("run_1", said)).await.unwrap());
    let together = sql
        .query(
            "SELECT r.i, (r.run).status, r.had_messages \
             FROM hearth_store_runs_assuming_defaults(ARRAY['run_2', 'run_3'], \
             ARRAY['t1', 't2'], ARRAY['user:1', 'user:1'], ARRAY['http', 'http'], \
             ARRAY['again', 'new'], ARRAY[NULL, NULL]::TEXT[], ARRAY['running', 'running'], \
             ARRAY[2, 2]::BIGINT[], ARRAY[NULL, NULL]::TEXT[], ARRAY['[]', '[]'], \
             ARRAY['old-replica', 'old-replica'], ARRAY[99, 99]::BIGINT[], \
             ARRAY['p/m', 'p/m'], ARRAY[NULL, NULL]::TEXT[], ARRAY[NULL, NULL]::TEXT[], \
             ARRAY[TRUE, TRUE]) AS r ORDER BY r.i",
            &[],
        )
        .await
        .unwrap();
    let together: Vec<(i32, String, bool)> = together
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        together,
        [
            (1, "running".to_owned(), true),
            (2, "running".to_owned(), false)
        ]
    );
}
