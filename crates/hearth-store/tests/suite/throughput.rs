//! What keeps concurrent runs on PostgreSQL from committing one at a time
//! (issue 19, throughput): two runs' ends that add to one model's usage on
//! one day do not wait for each other's commit, and the end of a run no
//! other replica follows notifies nobody.

use std::collections::HashSet;
use std::time::Duration;

use hearth_core::{Message, Role};
use hearth_store::conformance::fixtures::{created, finish, new_run};
use hearth_store::postgres::testing::{TEST_URL_VAR, fresh_database_url};
use hearth_store::prelude::*;
use hearth_store::{CreateRunOutcome, PostgresStore, Wake};

/// The backends connected to the database of `sql`, but its own.
async fn backends(sql: &tokio_postgres::Client) -> HashSet<i32> {
    sql.query(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
         AND pid <> pg_backend_pid()",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// The backend a store of one connection opened since `before` was listed.
async fn new_backend(sql: &tokio_postgres::Client, before: &HashSet<i32>) -> i32 {
    let now = backends(sql).await;
    let new: Vec<i32> = now.difference(before).copied().collect();
    assert_eq!(new.len(), 1, "one new backend: {new:?}");
    new[0]
}

/// Two ends of runs of the same model on the same day, from two replicas:
/// the second commits while the first is held in its commit. With one
/// usage row per day and model the second waited for the first's row lock
/// to its commit, so at concurrency every end waited for the one before
/// (measured: about 3 of 8 connections waiting so at concurrency 64).
#[tokio::test]
async fn ends_of_one_model_do_not_wait_for_each_others_commit() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let (sql, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let first = PostgresStore::connect(&url, TEST_URL_VAR, 1).await.unwrap();
    created(&first, "run_1", "t1").await;
    created(&first, "run_2", "t2").await;
    let first_pid = new_backend(&sql, &HashSet::new()).await;
    // A second replica whose backend writes to another stripe than the
    // first's (the stripe is the backend's pid modulo 32).
    let mut seen = HashSet::from([first_pid]);
    let second = loop {
        let store = PostgresStore::connect(&url, TEST_URL_VAR, 1).await.unwrap();
        store.get_run("run_2").await.unwrap();
        let pid = new_backend(&sql, &seen).await;
        seen.insert(pid);
        if pid % 32 != first_pid % 32 {
            break store;
        }
        assert!(seen.len() < 20, "no backend in another stripe: {seen:?}");
    };

    // The first end is held in its commit (a deferred trigger waits for a
    // lock this test holds), after all its writes.
    sql.batch_execute(
        "CREATE FUNCTION gate() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN PERFORM pg_advisory_xact_lock(42); RETURN NULL; END $$; \
         CREATE CONSTRAINT TRIGGER gate AFTER INSERT ON messages \
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW \
         WHEN (NEW.content LIKE '%held%') EXECUTE FUNCTION gate(); \
         SELECT pg_advisory_lock(42);",
    )
    .await
    .unwrap();
    let held = tokio::spawn(async move {
        first
            .finish_run(finish(
                "run_1",
                vec![
                    Message::text(Role::User, "hi"),
                    Message::text(Role::Assistant, "held"),
                ],
            ))
            .await
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting = sql
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 \
                 AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
                &[&first_pid],
            )
            .await
            .unwrap()
            .get::<_, i64>(0);
        if waiting == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first end did not reach its commit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let second_end = tokio::time::timeout(
        Duration::from_secs(5),
        second.finish_run(finish(
            "run_2",
            vec![
                Message::text(Role::User, "hi"),
                Message::text(Role::Assistant, "fine"),
            ],
        )),
    )
    .await;
    sql.batch_execute("SELECT pg_advisory_unlock(42)")
        .await
        .unwrap();
    assert!(
        matches!(second_end, Ok(Ok(true))),
        "the second end waited for the first one's commit: {second_end:?}"
    );
    assert!(held.await.unwrap().unwrap(), "the first end is stored too");

    // The totals are the sums of the stripes.
    let usage = second
        .usage(&hearth_store::UsageQuery {
            since: None,
            until: None,
            group_by: hearth_store::UsageGroup::Model,
        })
        .await
        .unwrap();
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert_eq!(usage[0].calls, 2, "{usage:?}");
}

/// Far enough from the fixtures' times that no lease lapses by accident.
const NOW: i64 = 1_700_000_000_000;

/// The next wake-up, within 5 s.
async fn next(wakes: &mut tokio::sync::mpsc::Receiver<Wake>) -> Wake {
    tokio::time::timeout(Duration::from_secs(5), wakes.recv())
        .await
        .expect("a wake-up within 5 s")
        .expect("the listener lives")
}

/// Stores `run_id` claimed by `owner` until `until`, as a replica stores
/// the message it took when the thread is idle.
async fn claimed(store: &PostgresStore, run_id: &str, thread: &str, owner: &str, until: i64) {
    let stored = store
        .create_claimed_run(new_run(run_id, thread, None), owner, until, "p/m", None)
        .await
        .unwrap();
    assert!(matches!(stored, CreateRunOutcome::Created(_)), "{stored:?}");
}

/// Only the ends somebody else may hold a log of are notified: a run
/// stored claimed by its replica and ended there (the common case: the
/// replica that took the message runs it) commits without `NOTIFY`, whose
/// lock every notifying commit of the cluster waits for through its WAL
/// flush (measured: about 4 of 8 connections waiting so at concurrency 64).
/// A run another replica follows, one it took over, and one stored queued
/// are still told. Notifications arrive in commit order, so the quiet end,
/// committed first, would be the first one heard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_ends_another_replica_may_follow_are_notified() {
    let Some((store, ())) = hearth_store::postgres::testing::fresh_store().await else {
        return;
    };
    let cluster = store.cluster().unwrap();
    let mut wakes = cluster.listen();
    assert_eq!(next(&mut wakes).await, Wake::Connected);

    claimed(&store, "quiet", "t1", "a", NOW + 10_000).await;
    // Its worker claims it again, with its model: still its own.
    store
        .claim_run_with_model("quiet", "a", NOW + 10_000, NOW, "p/m", None)
        .await
        .unwrap()
        .unwrap();
    claimed(&store, "followed", "t2", "a", NOW + 10_000).await;
    cluster.watch_end("followed").await.unwrap();
    // Its replica died: its lease lapsed and another replica took it.
    claimed(&store, "taken", "t3", "a", NOW - 1).await;
    store
        .claim_run("taken", "b", NOW + 10_000, NOW)
        .await
        .unwrap()
        .unwrap();
    created(&store, "queued", "t4").await;
    assert_eq!(next(&mut wakes).await, Wake::Work);

    for run_id in ["quiet", "followed", "taken", "queued"] {
        let mut done = finish(run_id, Vec::new());
        done.steps.clear();
        assert!(store.finish_run(done).await.unwrap(), "{run_id} ends");
    }
    let mut heard = Vec::new();
    while heard.last().map(String::as_str) != Some("queued") {
        match next(&mut wakes).await {
            Wake::Ended(run_id) => heard.push(run_id),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(heard, ["followed", "taken", "queued"]);
}

/// The end of one statement sends its own notifications (migration 0017)
/// and runs no row trigger, whose PL/pgSQL call was about a fifth of its
/// time; an end of several statements (follow-ups) still has the trigger
/// notify. Here the trigger's function is replaced by one that records its
/// calls and notifies nothing, so every wake-up heard comes from the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_in_one_statement_notifies_itself_without_the_row_trigger() {
    let Some((store, sql)) = super::round_trips::fresh(2).await else {
        return;
    };
    sql.batch_execute(
        "CREATE TABLE trigger_calls (op TEXT, run_id TEXT); \
         CREATE OR REPLACE FUNCTION hearth_runs_notify() RETURNS trigger \
         LANGUAGE plpgsql AS $$ BEGIN \
         INSERT INTO trigger_calls VALUES (TG_OP, NEW.run_id); RETURN NULL; END $$;",
    )
    .await
    .unwrap();
    let calls = || async {
        sql.query(
            "SELECT op, run_id FROM trigger_calls WHERE op = 'UPDATE'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(1))
        .collect::<Vec<_>>()
    };
    let cluster = store.cluster().unwrap();
    let mut wakes = cluster.listen();
    assert_eq!(next(&mut wakes).await, Wake::Connected);

    // A watched run with its thread's next message queued behind it.
    claimed(&store, "first", "t", "a", NOW + 10_000).await;
    cluster.watch_end("first").await.unwrap();
    created(&store, "second", "t").await;
    let mut end = finish("first", Vec::new());
    end.steps.clear();
    assert!(store.finish_run(end).await.unwrap());
    let mut heard = vec![next(&mut wakes).await, next(&mut wakes).await];
    heard.sort_by_key(|w| format!("{w:?}"));
    assert_eq!(heard, [Wake::Ended("first".into()), Wake::Work]);
    assert_eq!(
        calls().await,
        Vec::<String>::new(),
        "the end ran the row trigger"
    );

    // An end with a follow-up takes the transaction of several statements:
    // the row trigger notifies for it.
    store
        .claim_run("second", "a", NOW + 10_000, NOW)
        .await
        .unwrap()
        .unwrap();
    let mut end = finish("second", Vec::new());
    end.follow_ups = vec![new_run("third", "t", None)];
    assert!(store.finish_run(end).await.unwrap());
    assert!(calls().await.contains(&"second".to_owned()));
}

/// Migration 0017 redefines the words a message is indexed by without
/// rebuilding the index, which holds for every content only when the words
/// are those of the function before: compared here on what hearth writes
/// and on what it never should.
#[tokio::test]
async fn message_words_are_the_words_of_the_function_before() {
    // The store migrates the database; the test reads through its own connection.
    let Some((_store, sql)) = super::round_trips::fresh(1).await else {
        return;
    };
    // The definition of migration 0012.
    sql.batch_execute(
        "CREATE FUNCTION words_before(content TEXT) RETURNS TSVECTOR \
         LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN \
         RETURN to_tsvector('simple', coalesce((SELECT string_agg(part->>'text', ' ') \
         FROM jsonb_array_elements(content::jsonb) AS part), '')); \
         EXCEPTION WHEN others THEN RETURN to_tsvector('simple', content); END $$;",
    )
    .await
    .unwrap();
    let contents = [
        r#"[{"type":"text","text":"Hello World, it's Zoë\n \"quoted\" e-mail a.b@c.de 3.14"}]"#,
        r#"[{"type":"text","text":"part one"},{"type":"tool_call","id":"c1","name":"read","arguments":{"text":"nested"}},{"type":"text","text":"PART two 東京"}]"#,
        r#"[{"type":"image","url":"u"}]"#,
        "[]",
        r#"[{"text":null}]"#,
        r#"["a string", {"text":"x y"}]"#,
        r#"{"text":"an object"}"#,
        r#""a JSON string""#,
        "not JSON at all",
        "[not JSON",
    ];
    for content in contents {
        let row = sql
            .query_one(
                "SELECT tsvector_to_array(hearth_message_words($1)), \
                 tsvector_to_array(words_before($1))",
                &[&content],
            )
            .await
            .unwrap();
        let (now, before): (Vec<String>, Vec<String>) = (row.get(0), row.get(1));
        assert_eq!(now, before, "{content}");
    }
}
