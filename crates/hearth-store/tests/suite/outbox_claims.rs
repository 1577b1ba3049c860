//! The channels' shared state on PostgreSQL, as several replicas use it: the
//! outbox claimed per conversation, and platform events deduplicated in the
//! database.

use hearth_store::OutboxStore;
use hearth_store::channels::{NewOutboxItem, OutboxKind};
use hearth_store::postgres::PostgresStore;
use hearth_store::postgres::testing::{TEST_URL_VAR, fresh_database_url};

/// Two stores on one fresh database, as two replicas have them.
async fn two_replicas() -> Option<(PostgresStore, PostgresStore)> {
    let url = fresh_database_url().await?;
    let a = PostgresStore::connect(&url, TEST_URL_VAR, 4).await.unwrap();
    let b = PostgresStore::connect(&url, TEST_URL_VAR, 4).await.unwrap();
    Some((a, b))
}

fn reply(target: &str, text: &str) -> NewOutboxItem {
    NewOutboxItem {
        channel: "telegram".into(),
        target: target.into(),
        kind: OutboxKind::Message,
        run_id: None,
        payload: text.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_claim_each_conversation_once_in_order_and_take_a_lapsed_claim_over() {
    let Some((a, b)) = two_replicas().await else {
        return;
    };
    let now = 1_000;
    let mut items = Vec::new();
    for n in 0..3 {
        for chat in ["1", "2", "3", "4"] {
            items.push(reply(chat, &format!("{chat}:{n}")));
        }
    }
    a.enqueue_outbox(items, now).await.unwrap();

    // Racing claims: every conversation's head goes to exactly one replica,
    // and nothing behind a head is handed out.
    for _ in 0..20 {
        let (x, y) = tokio::join!(
            a.claim_outbox("telegram", now, 10, "a", now + 2_000),
            b.claim_outbox("telegram", now, 10, "b", now + 2_000),
        );
        let (x, y) = (x.unwrap(), y.unwrap());
        let mut heads: Vec<_> = x.iter().chain(&y).map(|i| i.payload.clone()).collect();
        heads.sort();
        assert_eq!(heads, ["1:0", "2:0", "3:0", "4:0"], "{x:?} {y:?}");
        // Released for the next race.
        a.release_outbox_claims("telegram", "a").await.unwrap();
        b.release_outbox_claims("telegram", "b").await.unwrap();
    }

    // Delivered by whichever holds it, one conversation's replies come in
    // order, and an unexpired claim keeps the others out.
    let mut sent: Vec<String> = Vec::new();
    let mut t = now;
    loop {
        t += 10;
        let (x, y) = tokio::join!(
            a.claim_outbox("telegram", t, 10, "a", t + 2_000),
            b.claim_outbox("telegram", t, 10, "b", t + 2_000),
        );
        let (x, y) = (x.unwrap(), y.unwrap());
        if x.is_empty() && y.is_empty() {
            break;
        }
        let ids: Vec<i64> = x.iter().map(|i| i.id).collect();
        assert!(y.iter().all(|i| !ids.contains(&i.id)), "{x:?} {y:?}");
        for item in x.iter().chain(&y) {
            sent.push(item.payload.clone());
            a.outbox_sent(item.id).await.unwrap();
        }
    }
    assert_eq!(sent.len(), 12, "each reply once: {sent:?}");
    for chat in ["1", "2", "3", "4"] {
        let order: Vec<_> = sent.iter().filter(|p| p.starts_with(chat)).collect();
        assert_eq!(
            order,
            [0, 1, 2]
                .map(|n| format!("{chat}:{n}"))
                .iter()
                .collect::<Vec<_>>()
        );
    }

    // A sender that dies holding a conversation keeps it until its claim
    // lapses; then another replica continues from the same item.
    let ids = a
        .enqueue_outbox(vec![reply("5", "5:0"), reply("5", "5:1")], t)
        .await
        .unwrap();
    let held = a
        .claim_outbox("telegram", t, 10, "a", t + 2_000)
        .await
        .unwrap();
    assert_eq!(held.iter().map(|i| i.id).collect::<Vec<_>>(), [ids[0]]);
    assert!(
        b.claim_outbox("telegram", t + 1_999, 10, "b", t + 4_000)
            .await
            .unwrap()
            .is_empty(),
        "a live claim is not taken"
    );
    // The holder renews while its delivery is under way.
    a.renew_outbox_claims("telegram", "a", t + 3_000)
        .await
        .unwrap();
    assert!(
        b.claim_outbox("telegram", t + 2_500, 10, "b", t + 4_500)
            .await
            .unwrap()
            .is_empty(),
        "a renewed claim is not taken"
    );
    let taken = b
        .claim_outbox("telegram", t + 3_001, 10, "b", t + 5_000)
        .await
        .unwrap();
    assert_eq!(taken.iter().map(|i| i.id).collect::<Vec<_>>(), [ids[0]]);
    assert!(
        a.claim_outbox("telegram", t + 3_002, 10, "a", t + 5_000)
            .await
            .unwrap()
            .is_empty(),
        "the dead holder's claim went over"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_platform_event_posted_to_two_replicas_is_handled_once() {
    let Some((a, b)) = two_replicas().await else {
        return;
    };
    for n in 0..50 {
        let key = format!("event:Ev{n}");
        let (x, y) = tokio::join!(
            a.first_sight("slack", &key, 1_000),
            b.first_sight("slack", &key, 1_000),
        );
        let (x, y) = (x.unwrap(), y.unwrap());
        assert!(x ^ y, "{key}: both or neither handled it: {x} {y}");
        assert!(!a.first_sight("slack", &key, 2_000).await.unwrap());
    }
    // Another channel's event of the same id is another event.
    assert!(a.first_sight("discord", "event:Ev0", 1_000).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_held_up_past_its_claim_finds_it_taken_over() {
    let Some((a, b)) = two_replicas().await else {
        return;
    };
    let now = 1_000;
    let id = a.enqueue_outbox(vec![reply("1", "x")], now).await.unwrap()[0];
    assert_eq!(
        a.claim_outbox("telegram", now, 10, "a", now + 2_000)
            .await
            .unwrap()
            .len(),
        1
    );
    // While the claim holds, only its holder may send, and holding extends it.
    assert!(a.hold_outbox_claim(id, "a", now + 4_000).await.unwrap());
    assert!(!b.hold_outbox_claim(id, "b", now + 4_000).await.unwrap());
    let early = b.claim_outbox("telegram", now + 3_000, 10, "b", now + 5_000);
    assert!(
        early.await.unwrap().is_empty(),
        "the held claim was extended"
    );

    // a is held up past its claim; b takes the item over, and a must not send.
    let late = b.claim_outbox("telegram", now + 4_001, 10, "b", now + 6_000);
    assert_eq!(late.await.unwrap().len(), 1);
    assert!(!a.hold_outbox_claim(id, "a", now + 7_000).await.unwrap());
    assert!(b.hold_outbox_claim(id, "b", now + 7_000).await.unwrap());

    // A settled item is nobody's to send.
    b.outbox_sent(id).await.unwrap();
    assert!(!b.hold_outbox_claim(id, "b", now + 8_000).await.unwrap());
}
