//! Confirmations ([`ConfirmationStore`], with runs and the audit log).

use hearth_core::RunStatus;

use super::fixtures::{audit, awaiting, confirmation, created, finish};
use crate::confirmations::ConfirmationStore;
use crate::grants::GrantStore;
use crate::records::{ConfirmationState, RUN_ENDED};
use crate::runs::RunStore;
use crate::threads::ThreadStore;

/// A run awaiting confirmation keeps its status when claimed.
pub async fn a_run_awaiting_confirmation_keeps_its_status_when_claimed<
    S: ConfirmationStore + RunStore + GrantStore,
>(
    store: S,
) {
    created(&store, "run_1", "t1").await;
    store
        .claim_run("run_1", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    store
        .request_confirmation(confirmation("run_1", "call_1", "hash_1"), vec![])
        .await
        .unwrap();
    assert!(
        store
            .claim_run("run_1", "node-b", 9_000, 2_000)
            .await
            .unwrap()
            .is_none()
    );
    let taken = store
        .claim_run("run_1", "node-b", 9_000, 5_001)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.status, RunStatus::AwaitingConfirmation);
    assert_eq!(taken.lease_owner.as_deref(), Some("node-b"));
}

/// A confirmation whose summary (written from the model's arguments) holds a
/// NUL, and an audit event whose outcome does, are stored: as given, or
/// with U+FFFD for the NUL where the store cannot hold one (PostgreSQL's
/// `text`, which refused both).
pub async fn a_confirmation_and_an_audit_event_holding_a_nul_are_stored<
    S: ConfirmationStore + RunStore + GrantStore,
>(
    store: S,
) {
    created(&store, "run_1", "t1").await;
    let mut asked = confirmation("run_1", "call_1", "hash_1");
    asked.summary = "forget \0 memory 1".to_owned();
    store.request_confirmation(asked, vec![]).await.unwrap();
    let stored = store.confirmation_by_hash("hash_1").await.unwrap().unwrap();
    assert!(
        ["forget \0 memory 1", "forget \u{FFFD} memory 1"].contains(&stored.summary.as_str()),
        "{stored:?}"
    );
    store
        .resolve_confirmation(
            "hash_1",
            ConfirmationState::Denied,
            "user:1",
            2_000,
            Some(audit("denied: \0")),
        )
        .await
        .unwrap()
        .unwrap();
    let events = store.list_audit(0).await.unwrap();
    assert!(
        ["denied: \0", "denied: \u{FFFD}"].contains(&events[0].outcome.as_str()),
        "{events:?}"
    );
}

pub async fn resolving_a_confirmation_stores_its_audit_event_only_when_it_resolves<
    S: ConfirmationStore + RunStore + GrantStore,
>(
    store: S,
) {
    awaiting(&store).await;

    let rec = store
        .resolve_confirmation(
            "hash_1",
            ConfirmationState::Approved,
            "user:1",
            2_000,
            Some(audit("approved")),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.state, ConfirmationState::Approved);
    assert_eq!(
        store.get_run("run_1").await.unwrap().unwrap().status,
        RunStatus::Running
    );
    assert_eq!(store.list_audit(0).await.unwrap(), vec![audit("approved")]);

    // Used once: a second answer changes nothing and records nothing.
    assert!(
        store
            .resolve_confirmation(
                "hash_1",
                ConfirmationState::Denied,
                "user:1",
                3_000,
                Some(audit("denied"))
            )
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.list_audit(0).await.unwrap(), vec![audit("approved")]);
}

/// A run that ends (whatever its status) leaves no confirmation pending: its
/// question is moot, and a `confirm <token>` for it must find nothing to
/// answer. The end and the resolution are one write; other runs' questions
/// stay pending.
pub async fn the_end_of_a_run_resolves_its_pending_confirmations<
    S: ConfirmationStore + RunStore + GrantStore + ThreadStore,
>(
    store: S,
) {
    awaiting(&store).await;
    created(&store, "run_2", "t1").await;
    store
        .request_confirmation(confirmation("run_2", "call_1", "hash_2"), vec![])
        .await
        .unwrap();
    let mut end = finish("run_1", Vec::new());
    end.status = RunStatus::Cancelled;
    end.output = None;
    assert!(store.finish_run(end.clone()).await.unwrap());

    let rec = store.confirmation_by_hash("hash_1").await.unwrap().unwrap();
    assert_eq!(rec.state, ConfirmationState::Expired);
    assert_eq!(rec.resolved_by.as_deref(), Some(RUN_ENDED));
    assert_eq!(rec.resolved_at, Some(end.finished_at));
    assert!(
        store
            .pending_confirmations(Some("run_1"), None)
            .await
            .unwrap()
            .is_empty()
    );
    let others = store.pending_confirmations(None, Some("t1")).await.unwrap();
    assert_eq!(others.len(), 1);
    assert_eq!(others[0].token_hash, "hash_2");
    // Nobody can answer it any more.
    assert!(
        store
            .resolve_confirmation("hash_1", ConfirmationState::Approved, "user:1", 3_000, None)
            .await
            .unwrap()
            .is_none()
    );
}

/// A new session cancels the thread's active run and resolves its pending
/// confirmations in the same write.
pub async fn a_new_session_that_cancels_a_run_resolves_its_pending_confirmations<
    S: ConfirmationStore + RunStore + GrantStore + ThreadStore,
>(
    store: S,
) {
    awaiting(&store).await;
    let session = store.new_session("t1", Some("run_1"), 4_000).await.unwrap();
    assert!(session.cancelled);
    let rec = store.confirmation_by_hash("hash_1").await.unwrap().unwrap();
    assert_eq!(
        (rec.state, rec.resolved_by.as_deref(), rec.resolved_at),
        (ConfirmationState::Expired, Some(RUN_ENDED), Some(4_000))
    );
}

/// A confirmation is found by its run and tool call, and asking again for
/// the same call returns the one stored, not a second one.
pub async fn a_confirmation_is_found_by_its_run_and_call<S: ConfirmationStore + RunStore>(
    store: S,
) {
    awaiting(&store).await;
    let found = store
        .confirmation_for_call("run_1", "call_1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, confirmation("run_1", "call_1", "hash_1"));
    assert!(
        store
            .confirmation_for_call("run_1", "call_2")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .confirmation_for_call("run_2", "call_1")
            .await
            .unwrap()
            .is_none()
    );
    let again = store
        .request_confirmation(confirmation("run_1", "call_1", "hash_again"), vec![])
        .await
        .unwrap();
    assert_eq!(again.token_hash, "hash_1");
    assert!(
        store
            .confirmation_by_hash("hash_again")
            .await
            .unwrap()
            .is_none()
    );
}

/// The pending confirmations of a thread are those of its runs, still
/// pending; of a run, that run's.
pub async fn pending_confirmations_of_a_thread_are_its_runs_pending_ones<
    S: ConfirmationStore + RunStore + GrantStore,
>(
    store: S,
) {
    for (run, thread, hash) in [
        ("run_1", "t1", "hash_1"),
        ("run_2", "t1", "hash_2"),
        ("run_3", "t2", "hash_3"),
    ] {
        created(&store, run, thread).await;
        let mut rec = confirmation(run, "call_1", hash);
        rec.thread_key = thread.to_owned();
        store.request_confirmation(rec, vec![]).await.unwrap();
    }
    let hashes = |recs: Vec<crate::records::ConfirmationRecord>| {
        let mut h: Vec<String> = recs.into_iter().map(|r| r.token_hash).collect();
        h.sort();
        h
    };
    assert_eq!(
        hashes(store.pending_confirmations(None, Some("t1")).await.unwrap()),
        ["hash_1", "hash_2"]
    );
    assert_eq!(
        hashes(store.pending_confirmations(None, Some("t2")).await.unwrap()),
        ["hash_3"]
    );
    assert!(
        store
            .pending_confirmations(None, Some("t_none"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        hashes(
            store
                .pending_confirmations(Some("run_2"), None)
                .await
                .unwrap()
        ),
        ["hash_2"]
    );
    store
        .resolve_confirmation("hash_1", ConfirmationState::Denied, "user:1", 2_000, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        hashes(store.pending_confirmations(None, Some("t1")).await.unwrap()),
        ["hash_2"]
    );
}

/// Of concurrent answers to one question (from two replicas, or a button
/// and a typed `confirm`), exactly one resolves it; its audit event alone is
/// stored.
pub async fn of_concurrent_answers_exactly_one_resolves<
    S: ConfirmationStore + RunStore + GrantStore,
>(
    store: S,
) {
    let store = std::sync::Arc::new(store);
    awaiting(store.as_ref()).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16 {
        let store = std::sync::Arc::clone(&store);
        tasks.spawn(async move {
            let state = if i % 2 == 0 {
                ConfirmationState::Approved
            } else {
                ConfirmationState::Denied
            };
            store
                .resolve_confirmation("hash_1", state, &format!("user:{i}"), 2_000, None)
                .await
                .unwrap()
        });
    }
    let mut answered = Vec::new();
    while let Some(done) = tasks.join_next().await {
        answered.extend(done.unwrap());
    }
    assert_eq!(answered.len(), 1, "answered: {answered:?}");
    let stored = store.confirmation_by_hash("hash_1").await.unwrap().unwrap();
    assert_eq!(stored, answered[0]);
    assert_eq!(
        store.get_run("run_1").await.unwrap().unwrap().status,
        RunStatus::Running
    );
}

/// The same call asking concurrently (a run resumed twice) stores one
/// question: every caller gets the first one's token.
pub async fn concurrent_requests_for_one_call_store_one_question<
    S: ConfirmationStore + RunStore,
>(
    store: S,
) {
    let store = std::sync::Arc::new(store);
    created(store.as_ref(), "run_1", "t1").await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16 {
        let store = std::sync::Arc::clone(&store);
        tasks.spawn(async move {
            store
                .request_confirmation(
                    confirmation("run_1", "call_1", &format!("hash_{i}")),
                    vec![],
                )
                .await
                .unwrap()
                .token_hash
        });
    }
    let mut hashes = Vec::new();
    while let Some(done) = tasks.join_next().await {
        hashes.push(done.unwrap());
    }
    hashes.dedup();
    assert_eq!(hashes.len(), 1, "hashes: {hashes:?}");
    assert_eq!(
        store
            .pending_confirmations(Some("run_1"), None)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store.get_run("run_1").await.unwrap().unwrap().status,
        RunStatus::AwaitingConfirmation
    );
}

/// An answer racing the end of its run: both calls succeed (neither is
/// refused by a lock conflict) and the outcome is one of the two orders: the
/// answer came first (approved, then the run ended) or the end did (the
/// question expired with the run, and the answer found nothing).
pub async fn an_answer_racing_the_end_of_its_run_is_one_or_the_other<
    S: ConfirmationStore + RunStore + GrantStore,
>(
    store: S,
) {
    let store = std::sync::Arc::new(store);
    for i in 0..12 {
        let (run_id, hash) = (format!("run_{i}"), format!("hash_{i}"));
        created(store.as_ref(), &run_id, "t1").await;
        store
            .request_confirmation(confirmation(&run_id, "call_1", &hash), vec![])
            .await
            .unwrap();
        let answer = {
            let (store, hash) = (std::sync::Arc::clone(&store), hash.clone());
            tokio::spawn(async move {
                store
                    .resolve_confirmation(
                        &hash,
                        ConfirmationState::Approved,
                        "user:1",
                        2_000,
                        Some(audit("approved")),
                    )
                    .await
                    .unwrap()
            })
        };
        let end = {
            let (store, run_id) = (std::sync::Arc::clone(&store), run_id.clone());
            tokio::spawn(async move {
                let mut end = finish(&run_id, Vec::new());
                end.status = RunStatus::Cancelled;
                store.finish_run(end).await.unwrap()
            })
        };
        let (answered, ended) = (answer.await.unwrap(), end.await.unwrap());
        assert!(ended, "the end of {run_id} was refused");
        let stored = store.confirmation_by_hash(&hash).await.unwrap().unwrap();
        match answered {
            Some(rec) => {
                assert_eq!(rec.state, ConfirmationState::Approved);
                assert_eq!(stored.state, ConfirmationState::Approved);
            }
            None => assert_eq!(
                (stored.state, stored.resolved_by.as_deref()),
                (ConfirmationState::Expired, Some(RUN_ENDED))
            ),
        }
        assert_eq!(
            store.get_run(&run_id).await.unwrap().unwrap().status,
            RunStatus::Cancelled
        );
    }
}
