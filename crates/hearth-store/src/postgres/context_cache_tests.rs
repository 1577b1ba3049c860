//! The thread-context cache on PostgreSQL: a thread that keeps talking
//! decodes only its new messages, and what a replica returns is always what
//! a full read would, whatever another replica appended or deleted.

use std::sync::atomic::Ordering;

use hearth_core::{Message, Role};

use super::PostgresStore;
use crate::Store;
use crate::conformance::fixtures::{created, finish, new_run, said_turns};
use crate::history::{HistorySeen, HistoryStore, ThreadContext};
use crate::runs::RunStore;
use crate::threads::ThreadStore;

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(Message::joined_text).collect()
}

fn decoded(store: &PostgresStore) -> u64 {
    store.inner.contexts.decoded.load(Ordering::Relaxed)
}

/// Reads `thread`'s context on `store` and hands it back, as a run does.
async fn read(store: &PostgresStore, thread: &str) -> ThreadContext {
    let ctx = store.thread_context(thread).await.unwrap();
    store.keep_context(thread, "run_reading", ctx.messages.clone(), ctx.ids.clone());
    ctx
}

/// Two replicas on one fresh database (`None`, said, without PostgreSQL).
async fn replicas() -> Option<(PostgresStore, PostgresStore)> {
    let url = super::testing::fresh_database_url().await?;
    Some((
        PostgresStore::connect(&url, "TEST", 2).await.unwrap(),
        PostgresStore::connect(&url, "TEST", 2).await.unwrap(),
    ))
}

#[tokio::test]
async fn a_thread_that_keeps_talking_decodes_only_its_new_messages() {
    let Some((a, b)) = replicas().await else {
        return;
    };
    said_turns(&a, "t1", 0, 50).await;
    let first = read(&a, "t1").await;
    assert_eq!(first.messages.len(), 100);
    assert_eq!(decoded(&a), 100);
    // The next message is answered on the other replica: this one still
    // reads only the two new rows, and returns what a full read does.
    said_turns(&b, "t1", 50, 1).await;
    let next = read(&a, "t1").await;
    assert_eq!(
        decoded(&a),
        102,
        "the second read decodes the two new messages, not the 100 before them"
    );
    assert_eq!(next.messages.len(), 102);
    assert_eq!(texts(&next.messages[100..]), ["u50", "a50"]);
    assert_eq!(next.ids[..100], first.ids[..]);
    assert_eq!(next, b.thread_context("t1").await.unwrap());
    // Read with nothing new, and not handed back: the read after it
    // decodes it all again, and is as right.
    let lent = a.thread_context("t1").await.unwrap();
    assert_eq!(decoded(&a), 102);
    assert_eq!(lent, next);
    let again = a.thread_context("t1").await.unwrap();
    assert_eq!(decoded(&a), 204);
    assert_eq!(again, next);
}

#[tokio::test]
async fn a_summary_a_clearing_and_a_new_session_on_another_replica_are_seen_at_once() {
    let Some((a, b)) = replicas().await else {
        return;
    };
    said_turns(&a, "t1", 0, 3).await;
    said_turns(&a, "t2", 0, 2).await;
    let ctx = read(&a, "t1").await;
    assert_eq!(ctx.messages.len(), 6);
    read(&a, "t2").await;

    // Compaction on the other replica: the summary hides what it covers,
    // and the rest comes from what this replica held.
    b.append_summary("t1", "run_t1_2", "s1", ctx.ids[3], 5)
        .await
        .unwrap();
    let before = decoded(&a);
    let ctx = read(&a, "t1").await;
    assert_eq!(decoded(&a), before, "nothing new to decode");
    assert_eq!(ctx.summary.as_ref().unwrap().text, "s1");
    assert_eq!(texts(&ctx.messages), ["u2", "a2"]);
    assert_eq!(ctx, b.thread_context("t1").await.unwrap());

    // Clearing the history on the other replica empties the context here,
    // also once new messages were stored.
    b.clear_thread_history("t1").await.unwrap();
    assert!(read(&a, "t1").await.messages.is_empty());
    read(&a, "t1").await;
    said_turns(&b, "t1", 3, 1).await;
    assert_eq!(texts(&read(&a, "t1").await.messages), ["u3", "a3"]);
    // Cleared and written again between two reads here.
    b.clear_thread_history("t1").await.unwrap();
    said_turns(&b, "t1", 4, 1).await;
    assert_eq!(texts(&read(&a, "t1").await.messages), ["u4", "a4"]);

    // A new session on the other replica, of a thread cached here.
    b.new_session("t2", None, 9).await.unwrap();
    assert!(a.thread_context("t2").await.unwrap().messages.is_empty());
    said_turns(&b, "t2", 2, 1).await;
    assert_eq!(
        texts(&a.thread_context("t2").await.unwrap().messages),
        ["u2", "a2"]
    );
}

#[tokio::test]
async fn a_run_starting_reads_its_context_after_what_is_held() {
    let Some((a, b)) = replicas().await else {
        return;
    };
    said_turns(&a, "t1", 0, 20).await;
    read(&a, "t1").await;
    said_turns(&b, "t1", 20, 1).await;
    created(&b, "run_next", "t1").await;
    let before = decoded(&a);
    let start = a.run_start("run_next", "t1").await.unwrap();
    assert_eq!(decoded(&a), before + 2);
    assert_eq!(start.context.messages.len(), 42);
    assert_eq!(start.context, b.thread_context("t1").await.unwrap());
}

/// A summary newer than the one the held context followed, but covering
/// less (written late by a replica that had stalled): the rows between its
/// boundary and the held ones are read too, as a full read has them.
#[tokio::test]
async fn a_newer_summary_covering_less_is_read_in_full() {
    let Some((a, b)) = replicas().await else {
        return;
    };
    said_turns(&a, "t1", 0, 4).await;
    let all = b.thread_context("t1").await.unwrap();
    b.append_summary("t1", "run_t1_3", "s2", all.ids[5], 5)
        .await
        .unwrap();
    let held = read(&a, "t1").await;
    assert_eq!(texts(&held.messages), ["u3", "a3"]);
    b.append_summary("t1", "run_t1_3", "s1 late", all.ids[1], 6)
        .await
        .unwrap();
    let ctx = read(&a, "t1").await;
    assert_eq!(ctx.summary.as_ref().unwrap().text, "s1 late");
    assert_eq!(texts(&ctx.messages), ["u1", "a1", "u2", "a2", "u3", "a3"]);
    assert_eq!(ctx, b.thread_context("t1").await.unwrap());
}

fn reads(store: &PostgresStore) -> u64 {
    store.inner.contexts.reads.load(Ordering::Relaxed)
}

/// One run on `store`, as the runtime makes it: stored claimed, its
/// context read (or not) from what the insert saw, checked against a full
/// read on `witness`, handed back after `during` ran with it, and ended
/// with a turn (`u{i}`, `a{i}`). Returns the context it started from.
async fn turn_with(
    store: &PostgresStore,
    witness: &PostgresStore,
    thread: &str,
    i: usize,
    during: impl AsyncFnOnce(&str, &mut ThreadContext),
) -> ThreadContext {
    let id = format!("run_{thread}_{i}");
    let (_, seen) = store
        .create_claimed_run_seeing_history(
            new_run(&id, thread, None),
            "replica-a",
            i64::MAX,
            "p/m",
            None,
        )
        .await
        .unwrap();
    let mut ctx = match seen {
        Some(HistorySeen::Newest(newest)) => {
            store.thread_context_seen(thread, newest).await.unwrap()
        }
        Some(HistorySeen::Empty) => ThreadContext::default(),
        None => panic!("PostgreSQL says what the insert saw"),
    };
    assert_eq!(
        ctx,
        witness.thread_context(thread).await.unwrap(),
        "run {i} starts from what a full read has"
    );
    let read = ctx.clone();
    during(&id, &mut ctx).await;
    store.keep_context(thread, &id, ctx.messages, ctx.ids);
    let said = vec![
        Message::text(Role::User, format!("u{i}")),
        Message::text(Role::Assistant, format!("a{i}")),
    ];
    assert!(store.finish_run(finish(&id, said)).await.unwrap());
    read
}

/// A thread that keeps talking to one replica starts each run from what
/// the replica holds, without a read: the end adds its messages to it, and
/// the next insert shows nothing else was written. Whatever another replica
/// writes in between is read, and every context is what a full read has.
#[tokio::test]
async fn a_thread_that_keeps_talking_to_one_replica_reads_nothing() {
    let Some(url) = super::testing::fresh_database_url().await else {
        return;
    };
    let store = async || PostgresStore::connect(&url, "TEST", 2).await.unwrap();
    // `w` reads in full for comparison.
    let (a, b, w) = (store().await, store().await, store().await);
    let turn = |store: &'static str, i: usize| {
        let on = if store == "a" { &a } else { &b };
        turn_with(on, &w, "t1", i, async |_, _| {})
    };
    said_turns(&a, "t1", 0, 3).await;
    assert_eq!(turn("a", 3).await.messages.len(), 6);
    assert_eq!(reads(&a), 1, "the first run reads");
    for i in 4..8 {
        assert_eq!(turn("a", i).await.messages.len(), 2 * i, "run {i}");
    }
    assert_eq!(reads(&a), 1, "the runs after it read nothing");

    // A run answered by the other replica: the next one here reads what it
    // wrote, and holds on from there.
    turn("b", 8).await;
    let ctx = turn("a", 9).await;
    assert_eq!(texts(&ctx.messages[16..]), ["u8", "a8"]);
    assert_eq!(reads(&a), 2);
    turn("a", 10).await;
    assert_eq!(reads(&a), 2);

    // A run here compacts: the summary it wrote comes with the held context.
    turn_with(&a, &b, "t1", 11, async |run, ctx| {
        let id = a
            .append_summary("t1", run, "s1", ctx.ids[5], 11)
            .await
            .unwrap();
        assert!(id > *ctx.ids.last().unwrap());
        ctx.messages.drain(..6);
        ctx.ids.drain(..6);
    })
    .await;
    let ctx = turn("a", 12).await;
    assert_eq!(reads(&a), 2, "held across its own compaction");
    assert_eq!(ctx.summary.as_ref().map(|s| s.text.as_str()), Some("s1"));

    // A summary written elsewhere is read.
    let all = b.thread_context("t1").await.unwrap();
    b.append_summary("t1", "run_t1_12", "s2", all.ids[3], 12)
        .await
        .unwrap();
    let ctx = turn("a", 13).await;
    assert_eq!(reads(&a), 3);
    assert_eq!(ctx.summary.as_ref().map(|s| s.text.as_str()), Some("s2"));

    // A run that ends without having handed its context back adds nothing
    // to what is held: the next one reads.
    turn("a", 14).await;
    said_turns(&a, "t1", 15, 1).await;
    let ctx = turn("a", 16).await;
    assert_eq!(reads(&a), 4);
    assert_eq!(
        texts(&ctx.messages[ctx.messages.len() - 4..]),
        ["u14", "a14", "u15", "a15"]
    );

    // A new session here drops what is held.
    turn("a", 17).await;
    a.new_session("t1", None, 20).await.unwrap();
    assert_eq!(turn("a", 18).await, ThreadContext::default());
    assert_eq!(turn("a", 19).await.messages.len(), 2);
}
