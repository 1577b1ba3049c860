//! The sender against a scripted channel: conversations are delivered
//! independently, each in order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_runtime::Notices;
use hearth_store::{NewOutboxItem, OutboxItem, OutboxKind, SqliteStore, Store};
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::run_sender;
use crate::channel::{Delivery, Undelivered};
use crate::error::ChannelError;
use crate::payload::Payload;

/// Long enough for any delivery the test expects; reached only on failure.
const WAIT: Duration = Duration::from_secs(10);

/// A channel that reports each delivery, and holds those of gated
/// conversations until the test lets them through.
struct Scripted {
    wake: Arc<Notify>,
    gates: Mutex<HashMap<String, Arc<Semaphore>>>,
    entered: mpsc::UnboundedSender<(String, String)>,
    delivered: mpsc::UnboundedSender<(String, String)>,
}

struct Events {
    entered: mpsc::UnboundedReceiver<(String, String)>,
    delivered: mpsc::UnboundedReceiver<(String, String)>,
}

impl Scripted {
    fn new() -> (Arc<Self>, Events) {
        let (entered, entered_rx) = mpsc::unbounded_channel();
        let (delivered, delivered_rx) = mpsc::unbounded_channel();
        let channel = Arc::new(Self {
            wake: Arc::new(Notify::new()),
            gates: Mutex::new(HashMap::new()),
            entered,
            delivered,
        });
        let events = Events {
            entered: entered_rx,
            delivered: delivered_rx,
        };
        (channel, events)
    }

    /// Holds every delivery to `target` until [`Scripted::release`].
    fn gate(&self, target: &str) -> Arc<Semaphore> {
        let gate = Arc::new(Semaphore::new(0));
        self.gates
            .lock()
            .unwrap()
            .insert(target.to_owned(), gate.clone());
        gate
    }
}

#[async_trait::async_trait]
impl Delivery for Scripted {
    fn name(&self) -> &'static str {
        "telegram"
    }

    fn target_of(&self, _thread_key: &str) -> Option<String> {
        None
    }

    async fn deliver(&self, item: &OutboxItem, payload: &Payload) -> Result<(), Undelivered> {
        let event = (item.target.clone(), payload.text.clone());
        let gate = self.gates.lock().unwrap().get(&item.target).cloned();
        if let Some(gate) = gate {
            self.entered.send(event.clone()).unwrap();
            gate.acquire().await.unwrap().forget();
        }
        self.delivered.send(event).unwrap();
        Ok(())
    }

    async fn check(&self) -> Result<String, ChannelError> {
        Ok("scripted".into())
    }
}

/// Starts the sender of `channel` on `store`, as replica `replica-1`.
fn start(
    channel: &Arc<Scripted>,
    store: Arc<dyn hearth_store::OutboxStore>,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run_sender(
        channel.clone(),
        store,
        channel.wake.clone(),
        Duration::from_secs(3600),
        Notices::default(),
        super::Claimer {
            id: "replica-1".into(),
            lease: Duration::from_secs(15),
        },
        stop.clone(),
    ))
}

async fn queue(store: &dyn hearth_store::OutboxStore, wake: &Notify, target: &str, text: &str) {
    let item = NewOutboxItem {
        channel: "telegram".into(),
        target: target.into(),
        kind: OutboxKind::Message,
        run_id: None,
        payload: Payload::notice(text).to_json(),
    };
    store
        .enqueue_outbox(vec![item], hearth_core::now_ms())
        .await
        .unwrap();
    wake.notify_one();
}

async fn next(rx: &mut mpsc::UnboundedReceiver<(String, String)>, what: &str) -> (String, String) {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {WAIT:?}"))
        .unwrap()
}

fn pair(target: &str, text: &str) -> (String, String) {
    (target.to_owned(), text.to_owned())
}

/// A send stuck in one conversation (a slow platform, a long timeout) must
/// not delay the replies of another; the stuck one keeps its order.
#[tokio::test]
async fn a_slow_conversation_does_not_hold_up_another() {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (channel, mut events) = Scripted::new();
    let wake = channel.wake.clone();
    let slow = channel.gate("slow");
    queue(store.as_ref(), &wake, "slow", "s1").await;
    let stop = CancellationToken::new();
    let sender = start(&channel, store.clone(), &stop);
    assert_eq!(
        next(&mut events.entered, "the slow send").await,
        pair("slow", "s1")
    );

    queue(store.as_ref(), &wake, "fast", "f1").await;
    queue(store.as_ref(), &wake, "slow", "s2").await;
    assert_eq!(
        next(&mut events.delivered, "the other conversation's reply").await,
        pair("fast", "f1"),
        "a reply to another conversation waited for the slow one"
    );

    slow.add_permits(2);
    assert_eq!(
        next(&mut events.delivered, "the slow reply").await,
        pair("slow", "s1")
    );
    assert_eq!(
        next(
            &mut events.delivered,
            "the slow conversation's second reply"
        )
        .await,
        pair("slow", "s2")
    );
    stop.cancel();
    tokio::time::timeout(WAIT, sender).await.unwrap().unwrap();
    assert!(events.delivered.try_recv().is_err(), "delivered twice");
}

/// The outbox of one SQLite store, except that every claim on a reply to
/// `taken` has gone to another replica by the time its delivery starts.
struct TakenOver {
    inner: Arc<SqliteStore>,
    taken: &'static str,
    ids: Mutex<HashMap<i64, String>>,
}

#[async_trait::async_trait]
impl hearth_store::OutboxStore for TakenOver {
    async fn enqueue_outbox(
        &self,
        items: Vec<NewOutboxItem>,
        now: hearth_core::Timestamp,
    ) -> hearth_store::Result<Vec<i64>> {
        let targets: Vec<String> = items.iter().map(|i| i.target.clone()).collect();
        let ids = self.inner.enqueue_outbox(items, now).await?;
        let mut known = self.ids.lock().unwrap();
        known.extend(ids.iter().copied().zip(targets));
        Ok(ids)
    }
    async fn due_outbox(
        &self,
        channel: &str,
        now: hearth_core::Timestamp,
        limit: u32,
    ) -> hearth_store::Result<Vec<OutboxItem>> {
        self.inner.due_outbox(channel, now, limit).await
    }
    async fn hold_outbox_claim(
        &self,
        id: i64,
        _claimer: &str,
        _until: hearth_core::Timestamp,
    ) -> hearth_store::Result<bool> {
        let target = self.ids.lock().unwrap().get(&id).cloned();
        Ok(target.as_deref() != Some(self.taken))
    }
    async fn next_outbox_due(
        &self,
        channel: &str,
        after: hearth_core::Timestamp,
    ) -> hearth_store::Result<Option<hearth_core::Timestamp>> {
        self.inner.next_outbox_due(channel, after).await
    }
    async fn outbox_progress(&self, id: i64, progress: u32) -> hearth_store::Result<()> {
        self.inner.outbox_progress(id, progress).await
    }
    async fn outbox_sent(&self, id: i64) -> hearth_store::Result<()> {
        self.inner.outbox_sent(id).await
    }
    async fn outbox_retry(
        &self,
        id: i64,
        next_attempt_at: hearth_core::Timestamp,
        error: &str,
    ) -> hearth_store::Result<()> {
        self.inner.outbox_retry(id, next_attempt_at, error).await
    }
    async fn outbox_failed(&self, id: i64, error: &str) -> hearth_store::Result<()> {
        self.inner.outbox_failed(id, error).await
    }
    async fn list_outbox(
        &self,
        status: Option<hearth_store::OutboxStatus>,
        limit: u32,
    ) -> hearth_store::Result<Vec<OutboxItem>> {
        self.inner.list_outbox(status, limit).await
    }
    async fn get_outbox(&self, id: i64) -> hearth_store::Result<Option<OutboxItem>> {
        self.inner.get_outbox(id).await
    }
    async fn retry_outbox(
        &self,
        id: i64,
        now: hearth_core::Timestamp,
    ) -> hearth_store::Result<bool> {
        self.inner.retry_outbox(id, now).await
    }
    async fn outbox_counts(
        &self,
    ) -> hearth_store::Result<Vec<(String, hearth_store::OutboxCounts)>> {
        self.inner.outbox_counts().await
    }
    async fn cursor(&self, channel: &str, name: &str) -> hearth_store::Result<Option<String>> {
        self.inner.cursor(channel, name).await
    }
    async fn set_cursor(&self, channel: &str, name: &str, value: &str) -> hearth_store::Result<()> {
        self.inner.set_cursor(channel, name, value).await
    }
    async fn first_sight(
        &self,
        channel: &str,
        event_id: &str,
        now: hearth_core::Timestamp,
    ) -> hearth_store::Result<bool> {
        self.inner.first_sight(channel, event_id, now).await
    }
    async fn record_reply_message(
        &self,
        reply: hearth_store::ReplyMessage,
    ) -> hearth_store::Result<()> {
        self.inner.record_reply_message(reply).await
    }
    async fn reply_message_run(
        &self,
        channel: &str,
        target: &str,
        message_id: &str,
    ) -> hearth_store::Result<Option<String>> {
        self.inner
            .reply_message_run(channel, target, message_id)
            .await
    }
}

/// A sender held up past its claim (a stalled replica) must not send what
/// another replica took over meanwhile: the delivery is checked against the
/// claim as it starts, and only the conversations still held go out.
#[tokio::test]
async fn a_reply_another_replica_took_over_is_not_sent_here() {
    let store = Arc::new(TakenOver {
        inner: Arc::new(SqliteStore::open_in_memory().unwrap()),
        taken: "taken",
        ids: Mutex::new(HashMap::new()),
    });
    let (channel, mut events) = Scripted::new();
    let wake = channel.wake.clone();
    let stop = CancellationToken::new();
    let sender = start(&channel, store.clone(), &stop);
    queue(store.as_ref(), &wake, "taken", "t1").await;
    queue(store.as_ref(), &wake, "held", "h1").await;
    assert_eq!(
        next(&mut events.delivered, "the reply still held").await,
        pair("held", "h1")
    );
    stop.cancel();
    tokio::time::timeout(WAIT, sender).await.unwrap().unwrap();
    assert!(
        events.delivered.try_recv().is_err(),
        "a reply another replica holds was sent here too"
    );
    let pending = hearth_store::OutboxStore::list_outbox(store.inner.as_ref(), None, 10)
        .await
        .unwrap();
    assert!(
        pending
            .iter()
            .any(|i| i.target == "taken" && i.status == hearth_store::OutboxStatus::Pending),
        "{pending:?}"
    );
}
