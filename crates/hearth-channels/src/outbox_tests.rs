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

async fn queue(store: &dyn Store, wake: &Notify, target: &str, text: &str) {
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
    let sender = tokio::spawn(run_sender(
        channel.clone(),
        store.clone(),
        wake.clone(),
        Duration::from_secs(3600),
        Notices::default(),
        super::Claimer {
            id: "replica-1".into(),
            lease: Duration::from_secs(15),
        },
        stop.clone(),
    ));
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
