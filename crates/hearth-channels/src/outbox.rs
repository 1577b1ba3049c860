//! The per-channel sender: delivers the outbox at least once, in order per
//! conversation, each conversation independently of the others, with retry
//! and capped exponential backoff, honouring the platform's rate limits.
//! Every replica sharing a store runs it; each conversation's next reply is
//! claimed by one of them (see [`OutboxStore::claim_outbox`]), so a reply
//! is sent by one replica, after the conversation's earlier ones.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hearth_core::records::outbox::{NewOutboxItem, OutboxItem, OutboxKind};
use hearth_core::{Timestamp, now_ms};
use hearth_runtime::surfaces::{OutboxStore, StoreError};
use hearth_runtime::{Notice, Notices};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::backoff::{Backoff, jitter};
use crate::channel::{Delivery, Undelivered};
use crate::error::DeliveryError;
use crate::payload::Payload;

/// Due items fetched at once (beyond the conversations under way).
const ROUND: u32 = 128;
/// Conversations delivered to at the same time.
const IN_FLIGHT: usize = 128;
/// First retry delay after a transient failure.
const RETRY_BASE: Duration = Duration::from_secs(1);
/// Longest retry delay.
const RETRY_CAP: Duration = Duration::from_secs(300);
/// How long the sender waits on a store error before trying again.
const STORE_PAUSE: Duration = Duration::from_secs(1);
/// Longest idle wait.
const IDLE: Duration = Duration::from_secs(5);
/// The pending gauge is counted at most this often: a count per delivered
/// reply would be a store read on every message's path.
const GAUGE_EVERY: Duration = Duration::from_secs(1);

/// Queues a notice for `target` outside a run (a command's answer, an
/// "I cannot take that" reply) and wakes the channel's sender: every
/// platform's notices go through the outbox like answers do.
pub async fn queue_notice(
    store: &dyn OutboxStore,
    wake: &Notify,
    channel: &str,
    target: &str,
    payload: &Payload,
) -> Result<(), crate::error::ChannelError> {
    let item = NewOutboxItem {
        channel: channel.to_owned(),
        target: target.to_owned(),
        kind: OutboxKind::Message,
        run_id: None,
        payload: payload.to_json(),
    };
    store.enqueue_outbox(vec![item], now_ms()).await?;
    wake.notify_one();
    Ok(())
}

/// Records, as soon as they are delivered, that the first `progress` parts
/// of a reply sent as several platform messages went out (the platforms
/// call it after each part but the last, whose delivery ends the item), so
/// that a crash between parts resends at most the part in flight. Best
/// effort: when the store fails, the parts are recorded again if the
/// delivery fails, and a crash resends them.
#[cfg(any(
    feature = "telegram",
    feature = "discord",
    feature = "slack",
    feature = "sms"
))]
pub(crate) async fn save_progress(
    store: &dyn OutboxStore,
    channel: &'static str,
    item: &OutboxItem,
    progress: u32,
) {
    if let Err(e) = store.outbox_progress(item.id, progress).await {
        warn!(channel, id = item.id, error = %e, "cannot record a delivered part; a crash now would send it again");
    }
}

/// Who claims the conversations a sender delivers to, and for how long a
/// claim lasts without renewal (a dead sender's claims lapse after it).
#[derive(Debug, Clone)]
pub struct Claimer {
    /// The replica id.
    pub id: String,
    /// How long a claim lasts; renewed every third of it while a delivery
    /// is under way.
    pub lease: Duration,
}

impl Claimer {
    /// The replica `runtime` is, with its lease.
    pub fn of(runtime: &hearth_runtime::Runtime) -> Self {
        Self {
            id: runtime.replica().to_owned(),
            lease: runtime.lease(),
        }
    }

    fn lease_ms(&self) -> i64 {
        millis(self.lease)
    }
}

/// `outbox.failed`: an item ended `failed`. `data`:
/// `{"id", "channel", "target", "kind", "run_id", "error"}`.
pub const OUTBOX_FAILED: &str = "outbox.failed";

/// Runs `channel`'s sender until `stop`; items that fail are published on
/// `notices` as `outbox.failed` (alerts themselves excepted).
///
/// Each conversation (outbox target) is delivered on its own: the head of
/// its queue goes out as soon as it is due and the conversation's previous
/// delivery has ended, whatever other conversations are waiting on, so a
/// slow or failing send delays only its own conversation. Within one
/// conversation items go out one at a time, in order. A conversation's
/// head is delivered only once `claimer` claimed it; the claims of
/// deliveries under way are renewed, and given up on `stop`. On `stop`, no
/// new delivery starts and those under way are waited for.
pub async fn run_sender(
    channel: Arc<dyn Delivery>,
    store: Arc<dyn OutboxStore>,
    wake: Arc<Notify>,
    max_age: Duration,
    notices: Notices,
    claimer: Claimer,
    stop: CancellationToken,
) {
    let name = channel.name();
    let max_age_ms = i64::try_from(max_age.as_millis()).unwrap_or(i64::MAX);
    let mut gauge_at: Option<tokio::time::Instant> = None;
    // Deliveries under way, and the conversation each one holds.
    let mut tasks: JoinSet<()> = JoinSet::new();
    let mut busy: HashMap<tokio::task::Id, String> = HashMap::new();
    let renew_every = claimer.lease / 3;
    let mut renewed_at = tokio::time::Instant::now();
    loop {
        while let Some(done) = tasks.try_join_next_with_id() {
            settle(&mut busy, done);
        }
        if stop.is_cancelled() {
            while let Some(done) = tasks.join_next_with_id().await {
                settle(&mut busy, done);
            }
            // What this sender held goes to another replica at once.
            if let Err(e) = store.release_outbox_claims(name, &claimer.id).await {
                warn!(channel = name, error = %e, "cannot give up the outbox claims; they lapse on their own");
            }
            return;
        }
        let now = now_ms();
        if !busy.is_empty() && renewed_at.elapsed() >= renew_every {
            // Deliveries under way keep their conversations.
            if let Err(e) = store
                .renew_outbox_claims(name, &claimer.id, now.saturating_add(claimer.lease_ms()))
                .await
            {
                warn!(channel = name, error = %e, "cannot renew the outbox claims");
            }
            renewed_at = tokio::time::Instant::now();
        }
        if busy.len() < IN_FLIGHT {
            // Busy conversations' heads are among the due items: fetching
            // that many more leaves room for a full round of others. One
            // claimed and not started (no room) comes again to this claimer
            // at its next round.
            let limit = ROUND.saturating_add(u32::try_from(busy.len()).unwrap_or(u32::MAX));
            let until = now.saturating_add(claimer.lease_ms());
            let due = match store
                .claim_outbox(name, now, limit, &claimer.id, until)
                .await
            {
                Ok(due) => due,
                Err(e) => {
                    warn!(channel = name, error = %e, "cannot read the outbox; retrying");
                    pause(&stop, STORE_PAUSE).await;
                    continue;
                }
            };
            let fetched = due.len();
            let mut started = 0;
            for item in due {
                if busy.len() >= IN_FLIGHT {
                    break;
                }
                if busy.values().any(|t| *t == item.target) {
                    continue;
                }
                let target = item.target.clone();
                let (channel, store, notices) = (channel.clone(), store.clone(), notices.clone());
                let claimer = claimer.clone();
                let task = tasks.spawn(async move {
                    if still_held(store.as_ref(), &claimer, &item, name).await {
                        deliver_one(channel.as_ref(), store.as_ref(), &notices, item, max_age_ms)
                            .await;
                    }
                });
                busy.insert(task.id(), target);
                started += 1;
            }
            if started > 0 && u32::try_from(fetched).is_ok_and(|n| n >= limit) {
                // There may be more due than one fetch returned.
                continue;
            }
        }
        let since_gauge = gauge_at.map(|t| t.elapsed());
        let gauge_due = since_gauge.is_none_or(|d| d >= GAUGE_EVERY);
        if gauge_due {
            refresh_gauge(name, store.as_ref()).await;
            gauge_at = Some(tokio::time::Instant::now());
        }
        // Every due head is under way now, so the next one to wait for is
        // due later: a retry, or a conversation's next item once its
        // delivery ends (which wakes this loop).
        let next = store.next_outbox_due(name, now).await.ok().flatten();
        // A skipped count is made up within GAUGE_EVERY.
        let gauge_wait = match since_gauge {
            Some(d) if !gauge_due => GAUGE_EVERY.saturating_sub(d),
            _ => IDLE,
        };
        let wait = next
            .map(|at| Duration::from_millis(u64::try_from(at - now).unwrap_or(0)))
            .unwrap_or(IDLE)
            .min(IDLE)
            .min(gauge_wait);
        // Claims under way are renewed in time.
        let wait = if busy.is_empty() {
            wait
        } else {
            wait.min(renew_every)
        };
        tokio::select! {
            () = stop.cancelled() => {}
            () = wake.notified() => {}
            () = tokio::time::sleep(wait) => {}
            Some(done) = tasks.join_next_with_id() => settle(&mut busy, done),
        }
    }
}

/// Frees the conversation of a delivery that ended.
fn settle(
    busy: &mut HashMap<tokio::task::Id, String>,
    done: Result<(tokio::task::Id, ()), tokio::task::JoinError>,
) {
    let id = match done {
        Ok((id, ())) => id,
        Err(e) => {
            // The item stays pending and is delivered again.
            warn!(error = %e, "an outbox delivery ended abnormally");
            e.id()
        }
    };
    busy.remove(&id);
}

async fn pause(stop: &CancellationToken, d: Duration) {
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(d) => {}
    }
}

async fn refresh_gauge(name: &'static str, store: &dyn OutboxStore) {
    if let Ok(counts) = store.outbox_counts().await {
        let pending = counts
            .iter()
            .find(|(c, _)| c == name)
            .map_or(0, |(_, n)| n.pending);
        metrics::gauge!("hearth_outbox_pending", "channel" => name).set(pending as f64);
    }
}

/// Whether `claimer` still holds `item` as its delivery starts (its claim
/// extended by a lease), so that a sender held up past its claim sends
/// nothing another replica took over. An item whose claim cannot be
/// checked is not sent now; it is claimed again at a later round.
async fn still_held(
    store: &dyn OutboxStore,
    claimer: &Claimer,
    item: &OutboxItem,
    channel: &'static str,
) -> bool {
    let until = now_ms().saturating_add(claimer.lease_ms());
    match store.hold_outbox_claim(item.id, &claimer.id, until).await {
        Ok(true) => true,
        Ok(false) => {
            // An operator should know: this replica stalled past a lease.
            warn!(
                channel,
                id = item.id,
                "held up past its claim on a reply, which another replica took over; not sending it here"
            );
            false
        }
        Err(e) => {
            warn!(channel, id = item.id, error = %e, "cannot confirm the claim on a reply; sending it later");
            false
        }
    }
}

/// Delivers one item and records what happened.
async fn deliver_one(
    channel: &dyn Delivery,
    store: &dyn OutboxStore,
    notices: &Notices,
    item: OutboxItem,
    max_age_ms: i64,
) {
    let name = channel.name();
    let payload = Payload::from_json(&item.payload);
    let is_alert = payload.as_ref().is_ok_and(|p| p.alert);
    let outcome = match payload {
        Ok(payload) => channel.deliver(&item, &payload).await,
        Err(e) => Err(Undelivered {
            parts_done: item.progress,
            error: DeliveryError::Permanent(format!("unreadable outbox payload: {e}")),
        }),
    };
    let now = now_ms();
    let result = match outcome {
        Ok(()) => {
            metrics::counter!("hearth_outbox_sent_total", "channel" => name).increment(1);
            debug!(channel = name, id = item.id, "outbox item delivered");
            store.outbox_sent(item.id).await
        }
        Err(Undelivered { parts_done, error }) => {
            // Platforms record each part as it goes out; this catches up
            // when one of those writes failed. (Not `>`: Telegram packs a
            // part's plain-text messages into the count.)
            if parts_done != item.progress
                && let Err(e) = store.outbox_progress(item.id, parts_done).await
            {
                warn!(channel = name, id = item.id, error = %e, "cannot record delivered parts");
            }
            match settle_failure(name, store, &item, error, now, max_age_ms).await {
                Ok(Some(why)) if !is_alert => {
                    notices.publish(Notice {
                        event: OUTBOX_FAILED.to_owned(),
                        at: now,
                        data: serde_json::json!({
                            "id": item.id,
                            "channel": name,
                            "target": item.target,
                            "kind": item.kind.as_str(),
                            "run_id": item.run_id,
                            "error": why,
                        }),
                    });
                    Ok(())
                }
                other => other.map(|_| ()),
            }
        }
    };
    if let Err(e) = result {
        // The item stays pending and is delivered again: at least once.
        warn!(channel = name, id = item.id, error = %e, "cannot record an outbox delivery");
    }
}

/// Records a failed attempt: a retry, or the item's end (`Some(why)`).
async fn settle_failure(
    name: &'static str,
    store: &dyn OutboxStore,
    item: &OutboxItem,
    error: DeliveryError,
    now: Timestamp,
    max_age_ms: i64,
) -> Result<Option<String>, StoreError> {
    let too_old = |next: Timestamp| next.saturating_sub(item.created_at) > max_age_ms;
    let fail = async |why: String| {
        metrics::counter!("hearth_outbox_failed_total", "channel" => name).increment(1);
        warn!(channel = name, id = item.id, kind = item.kind.as_str(), error = %why, "outbox item failed");
        store.outbox_failed(item.id, &why).await.map(|()| Some(why))
    };
    match error {
        DeliveryError::Permanent(why) => fail(why).await,
        DeliveryError::Transient(why) => {
            let delay = jitter(Backoff::delay_for(RETRY_BASE, RETRY_CAP, item.attempts));
            let next = now.saturating_add(millis(delay));
            if too_old(next) {
                fail(format!("{why} (gave up: older than outbox_max_age)")).await
            } else {
                info!(channel = name, id = item.id, attempts = item.attempts + 1, error = %why, "delivery failed; will retry");
                store.outbox_retry(item.id, next, &why).await.map(|()| None)
            }
        }
        DeliveryError::RateLimited {
            retry_after_ms,
            message,
        } => {
            let next = now.saturating_add(i64::try_from(retry_after_ms).unwrap_or(i64::MAX));
            if too_old(next) {
                fail(format!("{message} (gave up: older than outbox_max_age)")).await
            } else {
                info!(
                    channel = name,
                    id = item.id,
                    retry_after_ms,
                    "rate limited; the conversation waits"
                );
                store
                    .outbox_retry(item.id, next, &message)
                    .await
                    .map(|()| None)
            }
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[path = "outbox_tests.rs"]
mod tests;
