//! Full history, summaries and paging ([`HistoryStore`], with runs from [`RunStore`]).

use hearth_core::Message;

use super::fixtures::{created, said_turns};
use crate::history::{HistoryStore, SUMMARY_ROLE};
use crate::runs::RunStore;
use crate::threads::ThreadStore;

/// A summary hides what it covers from the context, not from the store; the
/// newest summary wins and plain history never shows summaries.
pub async fn summaries_replace_what_they_cover_and_delete_nothing<
    S: HistoryStore + ThreadStore + RunStore,
>(
    store: S,
) {
    let empty = store.thread_context("t1").await.unwrap();
    assert!(empty.summary.is_none() && empty.messages.is_empty());
    said_turns(&store, "t1", 0, 3).await;
    let ctx = store.thread_context("t1").await.unwrap();
    assert_eq!(ctx.messages.len(), 6);
    assert_eq!(ctx.ids.len(), 6);
    assert!(ctx.ids.windows(2).all(|w| w[0] < w[1]));
    // The first summary replaces the first two runs (four messages).
    let first = store
        .append_summary("t1", "run_t1_2", "s1", ctx.ids[3], 5)
        .await
        .unwrap();
    let ctx = store.thread_context("t1").await.unwrap();
    let s = ctx.summary.clone().unwrap();
    assert_eq!((s.id, s.text.as_str()), (first, "s1"));
    let texts: Vec<String> = ctx.messages.iter().map(Message::joined_text).collect();
    assert_eq!(texts, ["u2", "a2"]);
    said_turns(&store, "t1", 3, 1).await;
    store
        .append_summary("t1", "run_t1_3", "s2", ctx.ids[1], 6)
        .await
        .unwrap();
    let ctx = store.thread_context("t1").await.unwrap();
    assert_eq!(ctx.summary.unwrap().text, "s2");
    let texts: Vec<String> = ctx.messages.iter().map(Message::joined_text).collect();
    assert_eq!(texts, ["u3", "a3"], "the older summary is not context");
    let plain = store.thread_history("t1", 100).await.unwrap();
    assert_eq!(plain.len(), 8, "every message kept, no summary among them");
    assert_eq!(
        store
            .history_page("t1", 100, None)
            .await
            .unwrap()
            .messages
            .len(),
        10
    );
}

/// A run that starts reads its journal and its thread's context together:
/// the same as reading them apart.
pub async fn a_runs_start_is_its_journal_and_its_threads_context<S: crate::Store>(store: S) {
    let fresh = store.run_start("run_none", "t:none").await.unwrap();
    assert!(fresh.steps.is_empty() && fresh.steers.is_empty());
    assert!(fresh.context.summary.is_none() && fresh.context.messages.is_empty());
    said_turns(&store, "t1", 0, 2).await;
    let ctx = store.thread_context("t1").await.unwrap();
    store
        .append_summary("t1", "run_t1_1", "s1", ctx.ids[1], 5)
        .await
        .unwrap();
    created(&store, "run_next", "t1").await;
    for index in [1, 0] {
        store
            .put_step(super::fixtures::step(
                "run_next",
                index,
                crate::records::StepStatus::Succeeded,
            ))
            .await
            .unwrap();
    }
    store.add_steer("run_next", "and then", 7).await.unwrap();
    let start = store.run_start("run_next", "t1").await.unwrap();
    assert_eq!(start.steps, store.steps("run_next").await.unwrap());
    assert_eq!(start.steps.len(), 2);
    assert_eq!(start.steers, store.steers("run_next").await.unwrap());
    assert_eq!(start.steers.len(), 1);
    assert_eq!(start.context, store.thread_context("t1").await.unwrap());
    assert_eq!(start.context.summary.map(|s| s.text).as_deref(), Some("s1"));
    assert_eq!(start.context.messages.len(), 2);
}

/// Pages walk back with `next_before`; covered messages and superseded
/// summaries are `compacted`.
pub async fn pages_are_newest_first_and_mark_compaction<
    S: HistoryStore + ThreadStore + RunStore,
>(
    store: S,
) {
    said_turns(&store, "t1", 0, 3).await;
    said_turns(&store, "t2", 0, 1).await;
    let ctx = store.thread_context("t1").await.unwrap();
    let old = store
        .append_summary("t1", "run_t1_2", "s1", ctx.ids[1], 5)
        .await
        .unwrap();
    let new = store
        .append_summary("t1", "run_t1_2", "s2", ctx.ids[3], 6)
        .await
        .unwrap();
    let first = store.history_page("t1", 3, None).await.unwrap();
    let ids: Vec<i64> = first.messages.iter().map(|m| m.id).collect();
    assert_eq!(ids[0], new);
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    assert_eq!(first.messages[0].role, SUMMARY_ROLE);
    assert_eq!(first.messages[0].text.as_deref(), Some("s2"));
    assert!(!first.messages[0].compacted);
    assert!(
        first.messages[1].compacted,
        "the older summary is superseded"
    );
    assert_eq!(first.messages[1].id, old);
    assert_eq!(first.next_before, Some(ids[2]));
    let mut all = first.messages.clone();
    let mut before = first.next_before;
    while let Some(b) = before {
        let page = store.history_page("t1", 3, Some(b)).await.unwrap();
        all.extend(page.messages.iter().cloned());
        before = page.next_before;
    }
    assert_eq!(all.len(), 8, "six messages and two summaries, once each");
    let flags: Vec<(String, bool)> = all
        .iter()
        .filter(|m| m.role != SUMMARY_ROLE)
        .map(|m| (m.text.clone().unwrap_or_default(), m.compacted))
        .collect();
    let want = [
        ("a2", false),
        ("u2", false),
        ("a1", true),
        ("u1", true),
        ("a0", true),
        ("u0", true),
    ];
    let want: Vec<(String, bool)> = want.iter().map(|(t, c)| ((*t).to_owned(), *c)).collect();
    assert_eq!(flags, want);
    assert!(all.iter().all(|m| m.run_id.is_some()));
    let other = store.history_page("t2", 10, None).await.unwrap();
    assert_eq!(other.messages.len(), 2);
    assert!(other.messages.iter().all(|m| !m.compacted));
    assert_eq!(other.next_before, None);
    let exact = store.history_page("t2", 2, None).await.unwrap();
    assert_eq!(
        exact.next_before, None,
        "no older page when it ends exactly"
    );
    assert!(
        store
            .history_page("none", 10, None)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
}
