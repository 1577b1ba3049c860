//! Thread history, settings and new sessions ([`ThreadStore`], with runs from [`RunStore`]).

use hearth_core::{Content, Message, Role, RunStatus};

use super::fixtures::{created, finish, said};
use crate::records::NewSession;
use crate::runs::RunStore;
use crate::threads::ThreadStore;

pub async fn history_is_oldest_first_and_limited<S: ThreadStore + RunStore>(store: S) {
    for i in 0..5 {
        let id = format!("run_{i}");
        created(&store, &id, "t1").await;
        let content = vec![
            Content::Text {
                text: format!("m{i}"),
            },
            Content::ToolCall {
                id: "c1".into(),
                name: "clock".into(),
                arguments: "{}".into(),
            },
        ];
        let msg = Message {
            role: Role::Assistant,
            content,
        };
        assert!(store.finish_run(finish(&id, vec![msg])).await.unwrap());
    }
    let texts = |h: Vec<Message>| h.iter().map(Message::joined_text).collect::<Vec<_>>();
    assert_eq!(
        texts(store.thread_history("t1", 3).await.unwrap()),
        ["m2", "m3", "m4"]
    );
    assert_eq!(
        texts(store.thread_history("t1", 100).await.unwrap()).len(),
        5
    );
    assert!(store.thread_history("t1", 0).await.unwrap().is_empty());
    assert!(
        store
            .thread_history("t_other", 10)
            .await
            .unwrap()
            .is_empty()
    );
    let full = store.thread_history("t1", 1).await.unwrap();
    assert_eq!(full[0].content.len(), 2);
}

pub async fn thread_state_defaults_updates_and_clear<S: ThreadStore + RunStore>(store: S) {
    let state = store.thread_state("t1").await.unwrap();
    assert_eq!(
        (
            state.thread_key.as_str(),
            state.model,
            state.thinking.as_str()
        ),
        ("t1", None, "off")
    );
    assert!(!state.incognito);
    assert_eq!(state.message_count, 0);

    store
        .set_thread_model("t1", Some("anthropic/claude"))
        .await
        .unwrap();
    store.set_thread_thinking("t1", "high").await.unwrap();
    created(&store, "run_1", "t1").await;
    let msgs = vec![
        Message::text(Role::User, "a"),
        Message::text(Role::Assistant, "b"),
    ];
    assert!(store.finish_run(finish("run_1", msgs)).await.unwrap());
    let state = store.thread_state("t1").await.unwrap();
    assert_eq!(state.model.as_deref(), Some("anthropic/claude"));
    assert_eq!(state.thinking, "high");
    assert_eq!(state.message_count, 2);

    store.set_thread_model("t1", None).await.unwrap();
    store.clear_thread_history("t1").await.unwrap();
    let state = store.thread_state("t1").await.unwrap();
    assert_eq!(
        (state.model, state.thinking.as_str(), state.message_count),
        (None, "high", 0)
    );
    assert!(store.thread_history("t1", 10).await.unwrap().is_empty());
}

pub async fn new_session_cancels_the_run_and_clears_history_together<S: crate::Store>(store: S) {
    created(&store, "run_0", "t1").await;
    assert!(
        store
            .finish_run(finish("run_0", vec![said("old")]))
            .await
            .unwrap()
    );
    created(&store, "run_1", "t1").await;
    store
        .claim_run("run_1", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    created(&store, "run_other", "t2").await;

    // A run of another thread is not cancelled through this one.
    let other = store
        .new_session("t1", Some("run_other"), 3_000)
        .await
        .unwrap();
    assert!(!other.cancelled);
    assert_eq!(
        store.get_run("run_other").await.unwrap().unwrap().status,
        RunStatus::Queued
    );

    created(&store, "run_2", "t1").await;
    assert!(
        store
            .finish_run(finish("run_2", vec![said("again")]))
            .await
            .unwrap()
    );
    let done = store.new_session("t1", Some("run_1"), 4_000).await.unwrap();
    assert_eq!(
        done,
        NewSession {
            cancelled: true,
            cleared_messages: 1
        }
    );
    let run = store.get_run("run_1").await.unwrap().unwrap();
    // On a store replicas share, the unexpired lease of the replica that
    // executes the run stays until that replica stopped it and lets go.
    let holder = store.cluster().is_some().then(|| "node-a".to_owned());
    assert_eq!(
        (run.status, run.lease_owner, run.updated_at),
        (RunStatus::Cancelled, holder, 4_000)
    );
    assert!(store.thread_history("t1", 10).await.unwrap().is_empty());

    // The cancelled run, finishing late, cannot write into the new session.
    assert!(
        !store
            .finish_run(finish("run_1", vec![said("late")]))
            .await
            .unwrap()
    );
    assert!(store.thread_history("t1", 10).await.unwrap().is_empty());
    // A terminal run stays as it ended.
    let again = store.new_session("t1", Some("run_0"), 5_000).await.unwrap();
    assert_eq!(
        again,
        NewSession {
            cancelled: false,
            cleared_messages: 0
        }
    );
    assert_eq!(
        store.get_run("run_0").await.unwrap().unwrap().status,
        RunStatus::Succeeded
    );
    assert_eq!(
        store.new_session("t1", None, 6_000).await.unwrap(),
        NewSession::default()
    );
}

/// The incognito flag is off by default, kept per thread, listed while on,
/// and setting it twice changes nothing.
pub async fn the_incognito_flag_is_kept_and_listed<S: ThreadStore>(store: S) {
    assert!(store.incognito_threads().await.unwrap().is_empty());
    assert!(!store.thread_state("t1").await.unwrap().incognito);
    store.set_thread_incognito("t1", true).await.unwrap();
    store.set_thread_incognito("t2", true).await.unwrap();
    store.set_thread_incognito("t2", true).await.unwrap();
    let mut listed = store.incognito_threads().await.unwrap();
    listed.sort();
    assert_eq!(listed, ["t1", "t2"]);
    assert!(store.thread_state("t1").await.unwrap().incognito);

    store.set_thread_incognito("t2", false).await.unwrap();
    assert_eq!(store.incognito_threads().await.unwrap(), ["t1"]);
    assert!(!store.thread_state("t2").await.unwrap().incognito);
    // Turning off a flag that was never on is no error either.
    store.set_thread_incognito("t3", false).await.unwrap();
    assert_eq!(store.incognito_threads().await.unwrap(), ["t1"]);
}

/// Settings written at once to a thread nobody configured yet are all kept:
/// each write creates the thread's row or updates it, never fails on the
/// other's creation.
pub async fn concurrent_settings_of_a_new_thread_are_all_kept<S: ThreadStore>(store: S) {
    let store = std::sync::Arc::new(store);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8 {
        let thread = format!("t{i}");
        let s = std::sync::Arc::clone(&store);
        let t = thread.clone();
        tasks.spawn(async move { s.set_thread_model(&t, Some("a/m")).await });
        let s = std::sync::Arc::clone(&store);
        let t = thread.clone();
        tasks.spawn(async move { s.set_thread_thinking(&t, "high").await });
        let s = std::sync::Arc::clone(&store);
        tasks.spawn(async move { s.set_thread_incognito(&thread, true).await });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap().unwrap();
    }
    for i in 0..8 {
        let state = store.thread_settings(&format!("t{i}")).await.unwrap();
        assert_eq!(
            (
                state.model.as_deref(),
                state.thinking.as_str(),
                state.incognito
            ),
            (Some("a/m"), "high", true)
        );
    }
    assert_eq!(store.incognito_threads().await.unwrap().len(), 8);
}

/// A run that finishes while its thread starts a new session either ends
/// first (its messages are then cleared with the rest) or is cancelled
/// first (its finish is refused): never both, never neither, and the new
/// session starts empty either way.
pub async fn a_finish_racing_a_new_session_lands_before_it_or_not_at_all<
    S: ThreadStore + RunStore,
>(
    store: S,
) {
    let store = std::sync::Arc::new(store);
    for i in 0..12 {
        let (thread, run) = (format!("t{i}"), format!("run_{i}"));
        created(store.as_ref(), &run, &thread).await;
        let s = std::sync::Arc::clone(&store);
        let r = run.clone();
        let finishing =
            tokio::spawn(async move { s.finish_run(finish(&r, vec![said("x")])).await });
        let session = store.new_session(&thread, Some(&run), 9_000).await.unwrap();
        let finished = finishing.await.unwrap().unwrap();
        assert!(
            finished != session.cancelled,
            "run {i}: finished {finished}, cancelled {}",
            session.cancelled
        );
        assert_eq!(session.cleared_messages, u64::from(finished));
        assert!(store.thread_history(&thread, 10).await.unwrap().is_empty());
    }
}

/// A thread's permission mode and its expiry are kept, leave the other
/// settings alone, and clear back to the default; a run's first claim
/// records the mode it starts with and a later claim (after a restart)
/// keeps it whatever the thread says by then.
pub async fn thread_modes_are_kept_and_a_run_keeps_its_first_mode<S: ThreadStore + RunStore>(
    store: S,
) {
    let state = store.thread_settings("t_mode").await.unwrap();
    assert_eq!((state.mode, state.mode_expires_at), (None, None));
    store.set_thread_thinking("t_mode", "low").await.unwrap();
    store
        .set_thread_mode("t_mode", Some("bypass"), Some(1_234))
        .await
        .unwrap();
    let state = store.thread_state("t_mode").await.unwrap();
    assert_eq!(
        (
            state.mode.as_deref(),
            state.mode_expires_at,
            state.thinking.as_str()
        ),
        (Some("bypass"), Some(1_234), "low")
    );
    store
        .set_thread_mode("t_mode", Some("plan"), None)
        .await
        .unwrap();
    let state = store.thread_settings("t_mode").await.unwrap();
    assert_eq!(
        (state.mode.as_deref(), state.mode_expires_at),
        (Some("plan"), None)
    );
    store.set_thread_mode("t_mode", None, None).await.unwrap();
    assert_eq!(store.thread_settings("t_mode").await.unwrap().mode, None);

    created(&store, "run_m", "t_mode").await;
    let first = store
        .claim_run_with_model("run_m", "node-a", 10_000, 1, "fake/m", Some("plan"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.mode.as_deref(), Some("plan"));
    // The lease lapsed (the process died); another claim brings the mode
    // the thread has now, and the run keeps its own.
    let again = store
        .claim_run_with_model("run_m", "node-b", 30_000, 20_000, "fake/m", Some("auto"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.mode.as_deref(), Some("plan"));
    assert_eq!(
        store
            .get_run("run_m")
            .await
            .unwrap()
            .unwrap()
            .mode
            .as_deref(),
        Some("plan")
    );
    // Stored claimed at once, it records the mode too.
    let claimed = store
        .create_claimed_run(
            super::fixtures::new_run("run_n", "t_mode2", None),
            "node-a",
            10_000,
            "fake/m",
            Some("accept_edits"),
        )
        .await
        .unwrap();
    match claimed {
        crate::records::CreateRunOutcome::Created(run) => {
            assert_eq!(run.mode.as_deref(), Some("accept_edits"));
        }
        other => panic!("expected Created, got {other:?}"),
    }
}

/// A run stored assuming the defaults (its thread's settings not read) is
/// stored claimed with the model and mode given on a thread without
/// settings of its own (none at all, or all back to the defaults), and held
/// (claimed, without a model or mode) on a thread with a model, a thinking
/// level or a mode of its own, whoever set them.
pub async fn a_run_stored_assuming_defaults_is_held_on_a_thread_with_settings<S: crate::Store>(
    store: S,
) {
    use crate::records::CreateRunOutcome;
    store
        .set_thread_model("t_model", Some("p/other"))
        .await
        .unwrap();
    store.set_thread_thinking("t_think", "high").await.unwrap();
    store
        .set_thread_mode("t_moded", Some("plan"), None)
        .await
        .unwrap();
    // Set, then set back: a row of defaults.
    store
        .set_thread_model("t_back", Some("p/other"))
        .await
        .unwrap();
    store.set_thread_model("t_back", None).await.unwrap();
    let cases = [
        ("t_none", true),
        ("t_back", true),
        ("t_model", false),
        ("t_think", false),
        ("t_moded", false),
    ];
    for (thread, claimed) in cases {
        let run = super::fixtures::new_run(&format!("run_{thread}"), thread, None);
        let (outcome, _) = store
            .create_claimed_run_assuming_defaults(run, "node-a", 10_000, "p/m", Some("ask"))
            .await
            .unwrap();
        let CreateRunOutcome::Created(run) = outcome else {
            panic!("{thread}: a new run: {outcome:?}");
        };
        assert_eq!(
            (run.status, run.lease_owner.as_deref()),
            (hearth_core::RunStatus::Running, Some("node-a")),
            "{thread}: claimed by its owner either way"
        );
        let (model, mode) = if claimed {
            (Some("p/m"), Some("ask"))
        } else {
            (None, None)
        };
        // Without a model: none on PostgreSQL, empty on SQLite.
        let stored = run.model.as_deref().filter(|m| !m.is_empty());
        assert_eq!((stored, run.mode.as_deref()), (model, mode), "{thread}");
        assert_eq!(
            store.get_run(&run.run_id).await.unwrap().unwrap().model,
            run.model
        );
    }
}

/// Thread keys are found by prefix in byte order, a page at a time; the
/// messages of every thread are found by all of their words, newest first,
/// a page at a time, and a thread's new session takes its messages out of
/// the search.
pub async fn threads_are_found_by_key_prefix_and_by_words_of_their_history<
    S: ThreadStore + RunStore,
>(
    store: S,
) {
    let threads = [
        ("api:alpha", "the heron flew over the marsh"),
        ("api:alphabet", "letters of the alphabet"),
        ("api:beta", "a heron stood still"),
        ("telegram:chat:7", "Heron and MARSH again"),
    ];
    for (i, (thread, text)) in threads.iter().enumerate() {
        let id = format!("run_s{i}");
        created(&store, &id, thread).await;
        assert!(
            store
                .finish_run(finish(&id, vec![said(text)]))
                .await
                .unwrap()
        );
    }
    // A second run on a thread lists the thread once.
    created(&store, "run_s9", "api:alpha").await;

    assert_eq!(
        store.thread_keys("api:alp", None, 10).await.unwrap(),
        ["api:alpha", "api:alphabet"]
    );
    assert_eq!(
        store.thread_keys("api:", None, 2).await.unwrap(),
        ["api:alpha", "api:alphabet"]
    );
    assert_eq!(
        store
            .thread_keys("api:", Some("api:alphabet"), 2)
            .await
            .unwrap(),
        ["api:beta"]
    );
    assert!(
        store
            .thread_keys("nope", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.thread_keys("", None, 10).await.unwrap().len(), 4);

    let keys = |hits: Vec<crate::records::MessageHit>| {
        hits.into_iter().map(|h| h.thread_key).collect::<Vec<_>>()
    };
    let heron = store.search_messages("heron", None, 10).await.unwrap();
    assert_eq!(
        keys(heron.clone()),
        ["telegram:chat:7", "api:beta", "api:alpha"],
        "newest first, case folded"
    );
    assert!(heron[0].content.contains("Heron and MARSH"));
    assert_eq!(heron[0].role, "user");
    let page = store.search_messages("heron", None, 2).await.unwrap();
    let next = store
        .search_messages("heron", Some(page[1].id), 2)
        .await
        .unwrap();
    assert_eq!(keys(next), ["api:alpha"]);
    assert_eq!(
        keys(
            store
                .search_messages("marsh heron", None, 10)
                .await
                .unwrap()
        ),
        ["telegram:chat:7", "api:alpha"],
        "every word"
    );
    assert!(
        store
            .search_messages("  \"*-( ", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .search_messages("ostrich", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The words written, not the stored form around them.
    assert!(
        store
            .search_messages("type", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .search_messages("text", None, 10)
            .await
            .unwrap()
            .is_empty()
    );

    store
        .new_session("api:beta", None, 1_700_000_000_000)
        .await
        .unwrap();
    assert_eq!(
        keys(store.search_messages("heron", None, 10).await.unwrap()),
        ["telegram:chat:7", "api:alpha"]
    );
}
