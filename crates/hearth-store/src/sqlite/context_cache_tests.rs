//! The thread-context cache: a thread that keeps talking decodes only its
//! new messages, and what it returns is always what a full read would.

use std::sync::atomic::Ordering;

use hearth_core::{Message, Role};

use super::SqliteStore;
use crate::conformance::fixtures::said_turns;
use crate::history::HistoryStore;
use crate::threads::ThreadStore;

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(Message::joined_text).collect()
}

fn decoded(store: &SqliteStore) -> u64 {
    store.inner.contexts.decoded.load(Ordering::Relaxed)
}

fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("h.db"), super::Durability::Normal).unwrap();
    (dir, store)
}

#[tokio::test]
async fn a_thread_that_keeps_talking_decodes_only_its_new_messages() {
    let (_dir, store) = store();
    said_turns(&store, "t1", 0, 50).await;
    let first = store.thread_context("t1").await.unwrap();
    assert_eq!(first.messages.len(), 100);
    assert_eq!(decoded(&store), 100);
    // The run hands its context back when it is done with it.
    let (first_ids, first_len) = (first.ids.clone(), first.messages.len());
    store.keep_context("t1", "run_x", first.messages, first.ids);
    said_turns(&store, "t1", 50, 1).await;
    let next = store.thread_context("t1").await.unwrap();
    assert_eq!(
        decoded(&store),
        102,
        "the second read decodes the two new messages, not the 100 before them"
    );
    assert_eq!(next.messages.len(), 102);
    assert_eq!(texts(&next.messages[100..]), ["u50", "a50"]);
    assert!(next.ids.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(next.ids[..first_len], first_ids[..]);
    // Not handed back: the next read decodes it all again, and is as right.
    let again = store.thread_context("t1").await.unwrap();
    assert_eq!(decoded(&store), 204);
    assert_eq!(again, next);
}

#[tokio::test]
async fn a_context_handed_back_after_a_deletion_is_not_kept() {
    let (_dir, store) = store();
    said_turns(&store, "t1", 0, 2).await;
    let ctx = store.thread_context("t1").await.unwrap();
    store.clear_thread_history("t1").await.unwrap();
    store.keep_context("t1", "run_x", ctx.messages, ctx.ids);
    assert!(
        store
            .thread_context("t1")
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    // Handed back without having been read: ignored.
    let stray = vec![Message::text(Role::User, "never stored")];
    store.keep_context("t2", "run_x", stray, vec![1]);
    assert!(
        store
            .thread_context("t2")
            .await
            .unwrap()
            .messages
            .is_empty()
    );
}

#[tokio::test]
async fn a_new_summary_clearing_and_a_new_session_are_seen_at_once() {
    let (_dir, store) = store();
    said_turns(&store, "t1", 0, 3).await;
    said_turns(&store, "t2", 0, 2).await;
    let ctx = store.thread_context("t1").await.unwrap();
    assert_eq!(ctx.messages.len(), 6);
    store.keep_context("t1", "run_x", ctx.messages.clone(), ctx.ids.clone());
    let t2 = store.thread_context("t2").await.unwrap();
    store.keep_context("t2", "run_x", t2.messages, t2.ids);

    // Compaction: the summary hides what it covers.
    store
        .append_summary("t1", "run_t1_2", "s1", ctx.ids[3], 5)
        .await
        .unwrap();
    let ctx = store.thread_context("t1").await.unwrap();
    assert_eq!(ctx.summary.unwrap().text, "s1");
    assert_eq!(texts(&ctx.messages), ["u2", "a2"]);
    store.keep_context("t1", "run_x", ctx.messages, ctx.ids);

    // Clearing the history empties the context, also after new messages.
    store.clear_thread_history("t1").await.unwrap();
    assert!(
        store
            .thread_context("t1")
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    said_turns(&store, "t1", 3, 1).await;
    assert_eq!(
        texts(&store.thread_context("t1").await.unwrap().messages),
        ["u3", "a3"]
    );

    // A new session on another thread, whose context was cached.
    store.new_session("t2", None, 9).await.unwrap();
    assert!(
        store
            .thread_context("t2")
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    said_turns(&store, "t2", 2, 1).await;
    assert_eq!(
        texts(&store.thread_context("t2").await.unwrap().messages),
        ["u2", "a2"]
    );
}

#[tokio::test]
async fn many_threads_stay_within_the_bound_and_stay_right() {
    let (_dir, store) = store();
    for t in 0..40 {
        said_turns(&store, &format!("t{t}"), 0, 2).await;
        let ctx = store.thread_context(&format!("t{t}")).await.unwrap();
        store.keep_context(&format!("t{t}"), "run_x", ctx.messages, ctx.ids);
    }
    assert!(store.inner.contexts.len() <= 16);
    for t in 0..40 {
        let ctx = store.thread_context(&format!("t{t}")).await.unwrap();
        assert_eq!(texts(&ctx.messages), ["u0", "a0", "u1", "a1"]);
        store.keep_context(&format!("t{t}"), "run_x", ctx.messages, ctx.ids);
    }
}

#[tokio::test]
async fn a_run_reads_the_settings_without_counting_the_messages() {
    let (_dir, store) = store();
    said_turns(&store, "t1", 0, 3).await;
    store.set_thread_model("t1", Some("p/m")).await.unwrap();
    store.set_thread_thinking("t1", "high").await.unwrap();
    let counted = store.thread_state("t1").await.unwrap();
    assert_eq!(counted.message_count, 6);
    let settings = store.thread_settings("t1").await.unwrap();
    assert_eq!(settings.message_count, 0, "not counted");
    assert_eq!(settings.model.as_deref(), Some("p/m"));
    assert_eq!(settings.thinking, "high");
    assert_eq!(settings.incognito, counted.incognito);
    let unknown = store.thread_settings("t9").await.unwrap();
    assert_eq!((unknown.model, unknown.thinking.as_str()), (None, "off"));
}
