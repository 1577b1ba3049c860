//! The channels' state ([`ChannelStore`], with runs and confirmations for the
//! items queued in their transactions).

use std::sync::Arc;

use super::fixtures::{confirmation, created, finish};
use crate::channels::{
    ChannelStore, NewOutboxItem, OutboxKind, OutboxStatus, PairingLimits, PairingOutcome,
    PairingRecord, ReplyMessage,
};
use crate::confirmations::ConfirmationStore;
use crate::runs::RunStore;

fn reply(channel: &str, target: &str, message_id: &str, run_id: &str, at: i64) -> ReplyMessage {
    ReplyMessage {
        channel: channel.into(),
        target: target.into(),
        message_id: message_id.into(),
        run_id: run_id.into(),
        sent_at: at,
    }
}

/// A message is found by channel, conversation and id together; recording
/// it again keeps one record; retention forgets old ones.
pub async fn answer_messages_lead_back_to_their_run<
    S: ChannelStore + crate::retention::RetentionStore,
>(
    store: S,
) {
    for r in [
        reply("telegram", "chat1", "10", "run_a", 100),
        reply("discord", "chat1", "10", "run_b", 100),
        reply("telegram", "chat2", "11", "run_b", 100),
    ] {
        store.record_reply_message(r).await.unwrap();
    }
    let run = async |channel: &str, target: &str, id: &str| {
        store.reply_message_run(channel, target, id).await.unwrap()
    };
    assert_eq!(
        run("telegram", "chat1", "10").await.as_deref(),
        Some("run_a")
    );
    assert_eq!(
        run("discord", "chat1", "10").await.as_deref(),
        Some("run_b")
    );
    assert_eq!(
        run("telegram", "chat2", "11").await.as_deref(),
        Some("run_b")
    );
    assert_eq!(run("telegram", "chat1", "11").await, None);
    assert_eq!(run("telegram", "chat2", "10").await, None);
    assert_eq!(run("slack", "chat1", "10").await, None);

    // A retried delivery records its message again: one record, the latest.
    store
        .record_reply_message(reply("telegram", "chat1", "10", "run_c", 300))
        .await
        .unwrap();
    assert_eq!(
        run("telegram", "chat1", "10").await.as_deref(),
        Some("run_c")
    );

    let report = store
        .purge_expired(crate::retention::RetentionCutoffs {
            memories_unused_since: 0,
            audit_before: 0,
            confirmations_expired_before: 0,
            channel_records_before: 0,
            reply_messages_before: 200,
        })
        .await
        .unwrap();
    assert_eq!((report.reply_messages, report.channel_records), (2, 0));
    assert_eq!(
        run("telegram", "chat1", "10").await.as_deref(),
        Some("run_c")
    );
    assert_eq!(run("discord", "chat1", "10").await, None);
    assert_eq!(run("telegram", "chat2", "11").await, None);
}

/// Retention deletes settled replies and old event ids, never a pending reply.
pub async fn retention_keeps_pending_replies<S: ChannelStore + crate::retention::RetentionStore>(
    store: S,
) {
    let ids = store
        .enqueue_outbox(vec![item("c1", "a"), item("c2", "b"), item("c3", "c")], 100)
        .await
        .unwrap();
    store.outbox_sent(ids[0]).await.unwrap();
    store.outbox_failed(ids[1], "blocked").await.unwrap();
    assert!(store.first_sight("slack", "Ev1", 100).await.unwrap());
    assert!(store.first_sight("slack", "Ev2", 900).await.unwrap());
    let report = store
        .purge_expired(crate::retention::RetentionCutoffs {
            memories_unused_since: 0,
            audit_before: 0,
            confirmations_expired_before: 0,
            channel_records_before: 500,
            reply_messages_before: 0,
        })
        .await
        .unwrap();
    assert_eq!(report.channel_records, 3, "sent, failed, one event id");
    let left: Vec<i64> = store
        .list_outbox(None, 10)
        .await
        .unwrap()
        .iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(left, vec![ids[2]]);
    assert!(
        store.first_sight("slack", "Ev1", 1_000).await.unwrap(),
        "forgotten"
    );
    assert!(
        !store.first_sight("slack", "Ev2", 1_000).await.unwrap(),
        "kept"
    );
}

fn item(target: &str, text: &str) -> NewOutboxItem {
    NewOutboxItem {
        channel: "telegram".into(),
        target: target.into(),
        kind: OutboxKind::Message,
        run_id: None,
        payload: format!("{{\"text\":\"{text}\"}}"),
    }
}

/// Only the head of each target's queue is due, so a target's items go out
/// in order even when a later one would be due first.
pub async fn outbox_delivers_in_order_per_target<S: ChannelStore>(store: S) {
    let ids = store
        .enqueue_outbox(
            vec![item("chat1", "a"), item("chat1", "b"), item("chat2", "c")],
            100,
        )
        .await
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert!(ids[0] < ids[1] && ids[1] < ids[2]);
    assert!(
        store
            .due_outbox("telegram", 99, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .due_outbox("discord", 100, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let due = store.due_outbox("telegram", 100, 10).await.unwrap();
    let heads: Vec<i64> = due.iter().map(|i| i.id).collect();
    assert_eq!(heads, vec![ids[0], ids[2]]);
    assert_eq!(due[0].payload, "{\"text\":\"a\"}");
    assert_eq!(due[0].status, OutboxStatus::Pending);
    assert_eq!(due[0].next_attempt_at, Some(100));
    assert_eq!(store.due_outbox("telegram", 100, 1).await.unwrap().len(), 1);

    // The head waiting for a retry holds back the rest of its target.
    store.outbox_retry(ids[0], 500, "HTTP 502").await.unwrap();
    let heads: Vec<i64> = store
        .due_outbox("telegram", 200, 10)
        .await
        .unwrap()
        .iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(heads, vec![ids[2]]);
    // Only heads count: chat1's second item (due at 100) waits for its head
    // (500); chat2's head (100) is due already and so not after 200.
    assert_eq!(
        store.next_outbox_due("telegram", 99).await.unwrap(),
        Some(100)
    );
    assert_eq!(
        store.next_outbox_due("telegram", 200).await.unwrap(),
        Some(500)
    );
    assert_eq!(store.next_outbox_due("telegram", 500).await.unwrap(), None);
    assert_eq!(store.next_outbox_due("discord", 0).await.unwrap(), None);

    store.outbox_progress(ids[0], 2).await.unwrap();
    store.outbox_sent(ids[0]).await.unwrap();
    let sent = store.get_outbox(ids[0]).await.unwrap().unwrap();
    assert_eq!(sent.status, OutboxStatus::Sent);
    assert_eq!(sent.payload, "", "a delivered reply's text is not kept");
    assert_eq!(sent.attempts, 1);
    assert_eq!(sent.progress, 2);
    assert_eq!(sent.last_error, None);
    let heads: Vec<i64> = store
        .due_outbox("telegram", 200, 10)
        .await
        .unwrap()
        .iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(heads, vec![ids[1], ids[2]]);
}

/// One claimer (a process alone, or one replica) is handed the due heads as
/// `due_outbox` gives them, those it already holds included, in id order;
/// a head waiting for its retry holds back its target for it too.
pub async fn one_claimer_is_handed_the_due_heads<S: ChannelStore>(store: S) {
    let ids = store
        .enqueue_outbox(
            vec![item("chat1", "a"), item("chat1", "b"), item("chat2", "c")],
            100,
        )
        .await
        .unwrap();
    let heads = |items: Vec<crate::channels::OutboxItem>| -> Vec<i64> {
        items.iter().map(|i| i.id).collect()
    };
    let claimed = store
        .claim_outbox("telegram", 100, 10, "r1", 2_100)
        .await
        .unwrap();
    assert_eq!(heads(claimed), vec![ids[0], ids[2]]);
    assert!(
        store
            .claim_outbox("discord", 100, 10, "r1", 2_100)
            .await
            .unwrap()
            .is_empty()
    );
    // Held already: handed again (a sender's deliveries under way).
    store
        .renew_outbox_claims("telegram", "r1", 3_000)
        .await
        .unwrap();
    let again = store
        .claim_outbox("telegram", 200, 10, "r1", 2_200)
        .await
        .unwrap();
    assert_eq!(heads(again), vec![ids[0], ids[2]]);
    store.outbox_retry(ids[0], 500, "HTTP 502").await.unwrap();
    store.outbox_sent(ids[2]).await.unwrap();
    assert!(
        store
            .claim_outbox("telegram", 300, 10, "r1", 2_300)
            .await
            .unwrap()
            .is_empty(),
        "chat1's head waits for its retry, and b behind it"
    );
    store.release_outbox_claims("telegram", "r1").await.unwrap();
    let after = store
        .claim_outbox("telegram", 500, 10, "r1", 2_500)
        .await
        .unwrap();
    assert_eq!(heads(after), vec![ids[0]]);
}

/// Retried, failed and retried-by-hand items, their counts and listing.
pub async fn outbox_retries_fails_and_is_retried<S: ChannelStore>(store: S) {
    let ids = store
        .enqueue_outbox(vec![item("chat1", "a"), item("chat2", "b")], 100)
        .await
        .unwrap();
    store
        .outbox_failed(ids[0], "Forbidden: bot was blocked by the user")
        .await
        .unwrap();
    let failed = store.get_outbox(ids[0]).await.unwrap().unwrap();
    assert_eq!(failed.status, OutboxStatus::Failed);
    assert_eq!(failed.next_attempt_at, None);
    assert_eq!(
        failed.payload, "{\"text\":\"a\"}",
        "kept for a retry by hand"
    );
    assert_eq!(
        failed.last_error.as_deref(),
        Some("Forbidden: bot was blocked by the user")
    );
    // Marking a failed item sent or failed again changes nothing.
    store.outbox_sent(ids[0]).await.unwrap();
    assert_eq!(
        store.get_outbox(ids[0]).await.unwrap().unwrap().status,
        OutboxStatus::Failed
    );

    let counts = store.outbox_counts().await.unwrap();
    assert_eq!(counts.len(), 1);
    assert_eq!(counts[0].0, "telegram");
    assert_eq!((counts[0].1.pending, counts[0].1.failed), (1, 1));

    let listed = store.list_outbox(None, 10).await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.id).collect::<Vec<_>>(),
        vec![ids[1], ids[0]]
    );
    let only_failed = store
        .list_outbox(Some(OutboxStatus::Failed), 10)
        .await
        .unwrap();
    assert_eq!(
        only_failed.iter().map(|i| i.id).collect::<Vec<_>>(),
        vec![ids[0]]
    );
    assert_eq!(store.list_outbox(None, 1).await.unwrap().len(), 1);

    assert!(
        !store.retry_outbox(ids[1], 300).await.unwrap(),
        "only failed items"
    );
    assert!(store.retry_outbox(ids[0], 300).await.unwrap());
    assert!(!store.retry_outbox(ids[0], 300).await.unwrap());
    let again = store.get_outbox(ids[0]).await.unwrap().unwrap();
    assert_eq!(again.status, OutboxStatus::Pending);
    assert_eq!(again.next_attempt_at, Some(300));
    assert!(store.get_outbox(9_999).await.unwrap().is_none());
}

/// Text a platform or a stranger chose, holding a NUL, is stored: as given,
/// or with U+FFFD for it where the store cannot hold one (PostgreSQL's
/// `text`, which refused the write, so a delivery error could not be
/// recorded and a pairing request failed).
pub async fn a_pairing_and_a_delivery_error_holding_a_nul_are_stored<S: ChannelStore>(store: S) {
    let asked = PairingRecord {
        display_name: "Eve\0".into(),
        ..pairing("AAAA1111", "1", 100)
    };
    assert!(matches!(
        store
            .request_pairing(asked, LIMITS, "{}".into())
            .await
            .unwrap(),
        PairingOutcome::Created(_)
    ));
    let pending = store.pending_pairings(200).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert!(
        ["Eve\0", "Eve\u{FFFD}"].contains(&pending[0].display_name.as_str()),
        "{pending:?}"
    );

    let ids = store
        .enqueue_outbox(vec![item("chat1", "a"), item("chat2", "b")], 100)
        .await
        .unwrap();
    store
        .outbox_retry(ids[0], 500, "Bad Request: \0")
        .await
        .unwrap();
    store.outbox_failed(ids[1], "Forbidden: \0").await.unwrap();
    let retried = store.get_outbox(ids[0]).await.unwrap().unwrap();
    assert_eq!((retried.attempts, retried.next_attempt_at), (1, Some(500)));
    assert!(
        ["Bad Request: \0", "Bad Request: \u{FFFD}"]
            .contains(&retried.last_error.as_deref().unwrap_or_default()),
        "{retried:?}"
    );
    let failed = store.get_outbox(ids[1]).await.unwrap().unwrap();
    assert_eq!(failed.status, OutboxStatus::Failed);
    assert!(
        ["Forbidden: \0", "Forbidden: \u{FFFD}"]
            .contains(&failed.last_error.as_deref().unwrap_or_default()),
        "{failed:?}"
    );
}

/// The answer is queued in the transaction that ends the run, and only then.
pub async fn a_run_end_queues_its_replies_only_when_it_ends_the_run<S: ChannelStore + RunStore>(
    store: S,
) {
    created(&store, "run_1", "telegram:chat:1").await;
    let mut end = finish("run_1", Vec::new());
    end.outbox = vec![NewOutboxItem {
        run_id: Some("run_1".into()),
        ..item("1", "the answer")
    }];
    assert!(store.finish_run(end.clone()).await.unwrap());
    let queued = store.list_outbox(None, 10).await.unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].run_id.as_deref(), Some("run_1"));
    assert_eq!(queued[0].created_at, end.finished_at);
    // A second end of the same run is refused and queues nothing.
    assert!(!store.finish_run(end).await.unwrap());
    assert_eq!(store.list_outbox(None, 10).await.unwrap().len(), 1);
}

/// Several replies of one end are queued in the order given (the order a
/// conversation shows them), after the replies queued before.
pub async fn a_run_end_queues_several_replies_in_their_order<S: ChannelStore + RunStore>(store: S) {
    store
        .enqueue_outbox(vec![item("1", "before")], 5)
        .await
        .unwrap();
    created(&store, "run_1", "telegram:chat:1").await;
    let mut end = finish("run_1", Vec::new());
    end.outbox = ["first", "second", "third"]
        .into_iter()
        .map(|text| NewOutboxItem {
            run_id: Some("run_1".into()),
            ..item("1", text)
        })
        .collect();
    end.outbox.push(item("2", "elsewhere"));
    assert!(store.finish_run(end).await.unwrap());
    let queued = store.list_outbox(None, 10).await.unwrap();
    let mut ordered: Vec<_> = queued.iter().map(|q| (q.id, q.payload.as_str())).collect();
    ordered.sort_unstable();
    assert_eq!(
        ordered.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
        [
            "{\"text\":\"before\"}",
            "{\"text\":\"first\"}",
            "{\"text\":\"second\"}",
            "{\"text\":\"third\"}",
            "{\"text\":\"elsewhere\"}",
        ]
    );
}

/// A confirmation's prompt is queued with it, and not again when the same
/// call asks again after a restart.
pub async fn a_confirmation_queues_its_prompt_once<
    S: ChannelStore + RunStore + ConfirmationStore,
>(
    store: S,
) {
    created(&store, "run_1", "t1").await;
    let prompt = NewOutboxItem {
        kind: OutboxKind::Prompt,
        run_id: Some("run_1".into()),
        ..item("1", "approve?")
    };
    store
        .request_confirmation(
            confirmation("run_1", "call_1", "hash_1"),
            vec![prompt.clone()],
        )
        .await
        .unwrap();
    store
        .request_confirmation(confirmation("run_1", "call_1", "hash_2"), vec![prompt])
        .await
        .unwrap();
    let queued = store.list_outbox(None, 10).await.unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].kind, OutboxKind::Prompt);
}

fn pairing(code: &str, user: &str, at: i64) -> PairingRecord {
    PairingRecord {
        code: code.into(),
        channel: "telegram".into(),
        user_key: format!("telegram:user:{user}"),
        display_name: format!("User {user}"),
        target: user.into(),
        requested_at: at,
        expires_at: at + 1_000,
    }
}

const LIMITS: PairingLimits = PairingLimits {
    max_pending: 2,
    denied_cooldown_ms: 500,
};

/// One pending code per user, at most `max_pending` per channel (the oldest
/// gives way to a newcomer), expiry, and an approval that lets the user in
/// and tells them in one transaction.
pub async fn pairing_requests_are_bounded_and_decided_once<S: ChannelStore>(store: S) {
    let first = store
        .request_pairing(pairing("AAAA1111", "1", 100), LIMITS, "{}".into())
        .await
        .unwrap();
    assert_eq!(
        first,
        PairingOutcome::Created(pairing("AAAA1111", "1", 100))
    );
    let again = store
        .request_pairing(pairing("BBBB2222", "1", 200), LIMITS, "{}".into())
        .await
        .unwrap();
    assert_eq!(
        again,
        PairingOutcome::Existing(pairing("AAAA1111", "1", 100))
    );
    store
        .request_pairing(pairing("CCCC3333", "2", 200), LIMITS, "{}".into())
        .await
        .unwrap();
    // The channel is full: the newcomer gets a code and the oldest gives way.
    assert_eq!(
        store
            .request_pairing(pairing("DDDD4444", "3", 300), LIMITS, "{}".into())
            .await
            .unwrap(),
        PairingOutcome::Created(pairing("DDDD4444", "3", 300))
    );
    let codes = async |now| {
        store
            .pending_pairings(now)
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.code)
            .collect::<Vec<_>>()
    };
    assert_eq!(codes(300).await, ["CCCC3333", "DDDD4444"]);
    assert!(
        store
            .approve_pairing("AAAA1111", 300, "{}".into())
            .await
            .unwrap()
            .is_none(),
        "a code that gave way still works"
    );
    // After one expires its user may ask again.
    assert_eq!(codes(1_250).await, ["DDDD4444"]);
    assert!(matches!(
        store
            .request_pairing(pairing("EEEE5555", "1", 1_250), LIMITS, "{}".into())
            .await
            .unwrap(),
        PairingOutcome::Created(_)
    ));

    assert!(
        !store
            .is_allowed("telegram", "telegram:user:1")
            .await
            .unwrap()
    );
    let approved = store
        .approve_pairing("EEEE5555", 1_260, "{\"text\":\"approved\"}".into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(approved.user_key, "telegram:user:1");
    assert!(
        store
            .is_allowed("telegram", "telegram:user:1")
            .await
            .unwrap()
    );
    assert!(
        !store
            .is_allowed("discord", "telegram:user:1")
            .await
            .unwrap()
    );
    // Four codes were told (AAAA1111, CCCC3333, DDDD4444, EEEE5555), then
    // the approval; the repeated request queued nothing.
    let notice = store.list_outbox(None, 10).await.unwrap();
    assert_eq!(notice.len(), 5);
    assert_eq!(
        (notice[0].target.as_str(), notice[0].payload.as_str()),
        ("1", "{\"text\":\"approved\"}")
    );
    assert!(
        store
            .approve_pairing("EEEE5555", 1_270, "{}".into())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .deny_pairing("EEEE5555", 1_270)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .deny_pairing("CCCC3333", 1_270)
            .await
            .unwrap()
            .is_none(),
        "expired"
    );

    assert_eq!(
        store
            .deny_pairing("DDDD4444", 1_270)
            .await
            .unwrap()
            .map(|p| p.code),
        Some("DDDD4444".into())
    );
    assert!(
        store
            .approve_pairing("DDDD4444", 1_270, "{}".into())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !store
            .is_allowed("telegram", "telegram:user:3")
            .await
            .unwrap()
    );
    assert!(codes(1_270).await.is_empty());

    let allowed = store.allowed_users("telegram").await.unwrap();
    assert_eq!(allowed.len(), 1);
    assert_eq!(
        (allowed[0].user_key.as_str(), allowed[0].added_at),
        ("telegram:user:1", 1_260)
    );
    assert!(
        store
            .remove_allowed("telegram", "telegram:user:1")
            .await
            .unwrap()
    );
    assert!(
        !store
            .remove_allowed("telegram", "telegram:user:1")
            .await
            .unwrap()
    );
    assert!(
        !store
            .is_allowed("telegram", "telegram:user:1")
            .await
            .unwrap()
    );
}

/// A denied user's requests are ignored (nothing stored, nothing queued)
/// until the cool-down has passed; other users and channels are not held up.
pub async fn a_denied_user_waits_out_the_cool_down<S: ChannelStore>(store: S) {
    store
        .request_pairing(pairing("AAAA1111", "1", 100), LIMITS, "{}".into())
        .await
        .unwrap();
    assert!(store.deny_pairing("AAAA1111", 200).await.unwrap().is_some());
    assert_eq!(
        store
            .request_pairing(pairing("BBBB2222", "1", 300), LIMITS, "{}".into())
            .await
            .unwrap(),
        PairingOutcome::CoolingDown { until: 700 }
    );
    let mut on_discord = pairing("CCCC3333", "1", 300);
    on_discord.channel = "discord".into();
    assert!(matches!(
        store
            .request_pairing(on_discord, LIMITS, "{}".into())
            .await
            .unwrap(),
        PairingOutcome::Created(_)
    ));
    assert!(matches!(
        store
            .request_pairing(pairing("DDDD4444", "2", 300), LIMITS, "{}".into())
            .await
            .unwrap(),
        PairingOutcome::Created(_)
    ));
    assert_eq!(store.list_outbox(None, 10).await.unwrap().len(), 3);
    assert_eq!(
        store
            .request_pairing(pairing("EEEE5555", "1", 699), LIMITS, "{}".into())
            .await
            .unwrap(),
        PairingOutcome::CoolingDown { until: 700 }
    );
    assert!(matches!(
        store
            .request_pairing(pairing("FFFF6666", "1", 701), LIMITS, "{}".into())
            .await
            .unwrap(),
        PairingOutcome::Created(_)
    ));
}

/// Cursors are per channel and name; an event id is new once.
pub async fn cursors_and_first_sight<S: ChannelStore>(store: S) {
    assert_eq!(store.cursor("telegram", "offset").await.unwrap(), None);
    store.set_cursor("telegram", "offset", "41").await.unwrap();
    store.set_cursor("telegram", "offset", "42").await.unwrap();
    assert_eq!(
        store.cursor("telegram", "offset").await.unwrap().as_deref(),
        Some("42")
    );
    assert_eq!(store.cursor("slack", "offset").await.unwrap(), None);

    assert!(store.first_sight("slack", "Ev1", 10).await.unwrap());
    assert!(!store.first_sight("slack", "Ev1", 11).await.unwrap());
    assert!(store.first_sight("discord", "Ev1", 11).await.unwrap());
}

/// Of concurrent callers that see the same event (a redelivery reaching two
/// replicas at once), exactly one is told it is new.
pub async fn of_concurrent_first_sights_exactly_one_is_new<S: ChannelStore>(store: S) {
    let store = Arc::new(store);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16 {
        let store = Arc::clone(&store);
        tasks.spawn(async move { store.first_sight("slack", "Ev1", 100 + i).await });
    }
    let mut new = 0;
    while let Some(seen) = tasks.join_next().await {
        if seen.unwrap().unwrap() {
            new += 1;
        }
    }
    assert_eq!(new, 1);
}

/// Concurrent requests keep one pending code per user (the others are told
/// the existing one and queue nothing) and at most `max_pending` per channel.
pub async fn concurrent_pairing_requests_keep_one_code_per_user_and_the_bound<S: ChannelStore>(
    store: S,
) {
    let store = Arc::new(store);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..10 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            store
                .request_pairing(
                    pairing(&format!("SAME{i:04}"), "1", 100),
                    LIMITS,
                    "{}".into(),
                )
                .await
        });
    }
    let (mut created, mut existing) = (Vec::new(), Vec::new());
    while let Some(outcome) = tasks.join_next().await {
        match outcome.unwrap().unwrap() {
            PairingOutcome::Created(rec) => created.push(rec.code),
            PairingOutcome::Existing(rec) => existing.push(rec.code),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((created.len(), existing.len()), (1, 9));
    assert!(existing.iter().all(|code| *code == created[0]));

    // Ten newcomers at once on another channel: each gets a code, and the
    // channel keeps its bound.
    let limits = PairingLimits {
        max_pending: 3,
        ..LIMITS
    };
    for i in 0..10 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let mut rec = pairing(&format!("NEW{i:05}"), &format!("n{i}"), 100 + i);
            rec.channel = "discord".into();
            store.request_pairing(rec, limits, "{}".into()).await
        });
    }
    while let Some(outcome) = tasks.join_next().await {
        assert!(matches!(
            outcome.unwrap().unwrap(),
            PairingOutcome::Created(_)
        ));
    }
    let pending = store.pending_pairings(100).await.unwrap();
    assert_eq!(pending.iter().filter(|p| p.channel == "discord").count(), 3);
    assert_eq!(
        pending.iter().filter(|p| p.channel == "telegram").count(),
        1
    );
    assert_eq!(
        store.list_outbox(None, 100).await.unwrap().len(),
        11,
        "one notice per code given"
    );
}

/// Of concurrent approvals and denials of one code (two admins on two
/// replicas), exactly one decides it, and only an approval lets the user in.
pub async fn of_concurrent_decisions_on_a_code_exactly_one_wins<S: ChannelStore>(store: S) {
    let store = Arc::new(store);
    store
        .request_pairing(pairing("AAAA1111", "1", 100), LIMITS, "{}".into())
        .await
        .unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let decided = if i % 2 == 0 {
                store
                    .approve_pairing("AAAA1111", 200, "{\"text\":\"in\"}".into())
                    .await
            } else {
                store.deny_pairing("AAAA1111", 200).await
            };
            (i % 2 == 0, decided.unwrap().is_some())
        });
    }
    let mut winners = Vec::new();
    while let Some(outcome) = tasks.join_next().await {
        let (approve, won) = outcome.unwrap();
        if won {
            winners.push(approve);
        }
    }
    assert_eq!(winners.len(), 1);
    let approved = winners[0];
    assert_eq!(
        store
            .is_allowed("telegram", "telegram:user:1")
            .await
            .unwrap(),
        approved
    );
    let queued = store.list_outbox(None, 10).await.unwrap().len();
    assert_eq!(
        queued,
        if approved { 2 } else { 1 },
        "one approval notice at most"
    );
}
