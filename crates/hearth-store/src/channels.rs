//! What the chat channels (Telegram, Discord, Slack) keep durably: the
//! outbox of replies owed to a conversation, pairing requests, the users a
//! channel lets in, the platform cursors (Telegram's update offset), the
//! platform event ids already handled, and which platform messages carry a
//! run's answer (so a reaction to one rates the run).

use hearth_core::Timestamp;

use crate::error::Result;

pub use hearth_core::records::outbox::{
    AllowedUser, NewOutboxItem, OutboxCounts, OutboxItem, OutboxKind, OutboxStatus, PairingLimits,
    PairingOutcome, PairingRecord, ReplyMessage, ReplyRouter, RunEnd,
};

/// The outbox of replies a chat channel owes, and the platform state its
/// loops keep (cursors, events already handled, which messages carry a
/// run's answer).
#[async_trait::async_trait]
pub trait OutboxStore: Send + Sync + 'static {
    /// Queues replies (outside a run: notices, command answers). Returns their ids.
    async fn enqueue_outbox(&self, items: Vec<NewOutboxItem>, now: Timestamp) -> Result<Vec<i64>>;
    /// The items of `channel` to deliver now: for each target, its oldest
    /// pending item when that item is due (`next_attempt_at <= now`), so
    /// a target's items go out in order; at most `limit`, oldest first.
    async fn due_outbox(
        &self,
        channel: &str,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<OutboxItem>>;
    /// Claims the items of `channel` to deliver now for `claimer`, until
    /// `until`: like [`OutboxStore::due_outbox`], but only the heads of
    /// conversations no other claimer holds (its claim unexpired at `now`),
    /// so that of several processes sharing the store exactly one sends a
    /// conversation's head, and the next item only once the head is
    /// settled. The heads `claimer` already holds come again (renewed).
    /// A store one process alone uses (SQLite: the home lock) needs no
    /// claim: the default is `due_outbox`.
    async fn claim_outbox(
        &self,
        channel: &str,
        now: Timestamp,
        limit: u32,
        claimer: &str,
        until: Timestamp,
    ) -> Result<Vec<OutboxItem>> {
        let _ = (claimer, until);
        self.due_outbox(channel, now, limit).await
    }
    /// Extends to `until` the claims `claimer` holds on `channel`'s pending
    /// items (deliveries still under way). Nothing where nothing is claimed.
    async fn renew_outbox_claims(
        &self,
        channel: &str,
        claimer: &str,
        until: Timestamp,
    ) -> Result<()> {
        let _ = (channel, claimer, until);
        Ok(())
    }
    /// Extends to `until` `claimer`'s claim on the pending item `id` just
    /// before it is sent: false when the claim is no longer `claimer`'s (it
    /// lapsed and another process claimed the item) or the item is settled,
    /// and the delivery must not go out, so a sender held up past its claim
    /// (a stalled process, a slow database) does not send what another
    /// process sends too. True where nothing is claimed.
    async fn hold_outbox_claim(&self, id: i64, claimer: &str, until: Timestamp) -> Result<bool> {
        let _ = (id, claimer, until);
        Ok(true)
    }
    /// Gives up every claim `claimer` holds on `channel`'s pending items
    /// (its sender stopped), so another process sends them at once.
    async fn release_outbox_claims(&self, channel: &str, claimer: &str) -> Result<()> {
        let _ = (channel, claimer);
        Ok(())
    }
    /// The earliest time after `after` at which the oldest pending item of
    /// one of `channel`'s targets is due, if any (items behind a target's
    /// oldest wait for it, so their own times do not count).
    async fn next_outbox_due(&self, channel: &str, after: Timestamp) -> Result<Option<Timestamp>>;
    /// Records that the first `progress` parts of a pending item were delivered.
    async fn outbox_progress(&self, id: i64, progress: u32) -> Result<()>;
    /// Marks an item delivered and erases its payload.
    async fn outbox_sent(&self, id: i64) -> Result<()>;
    /// Counts a failed attempt and sets the next one.
    async fn outbox_retry(&self, id: i64, next_attempt_at: Timestamp, error: &str) -> Result<()>;
    /// Ends an item as failed with the error.
    async fn outbox_failed(&self, id: i64, error: &str) -> Result<()>;
    /// Outbox items, newest first, optionally of one status.
    async fn list_outbox(
        &self,
        status: Option<OutboxStatus>,
        limit: u32,
    ) -> Result<Vec<OutboxItem>>;
    /// One item by id.
    async fn get_outbox(&self, id: i64) -> Result<Option<OutboxItem>>;
    /// Puts a failed item back in the queue, due now. False when no failed
    /// item has this id.
    async fn retry_outbox(&self, id: i64, now: Timestamp) -> Result<bool>;
    /// Pending and failed counts per channel.
    async fn outbox_counts(&self) -> Result<Vec<(String, OutboxCounts)>>;
    /// A channel's stored cursor (e.g. Telegram's next update offset).
    async fn cursor(&self, channel: &str, name: &str) -> Result<Option<String>>;
    /// Stores a channel's cursor.
    async fn set_cursor(&self, channel: &str, name: &str, value: &str) -> Result<()>;
    /// Records a platform event id; true when it was new (so a redelivered
    /// event is handled once).
    async fn first_sight(&self, channel: &str, event_id: &str, now: Timestamp) -> Result<bool>;
    /// Remembers that a posted message carries a run's answer, so that a
    /// reaction to it can be traced to the run. Recording the same message
    /// again (a retried delivery) keeps one record, of the latest run.
    async fn record_reply_message(&self, reply: ReplyMessage) -> Result<()>;
    /// The run whose answer message `message_id` in `target` carries, if it
    /// was recorded and not yet purged by retention.
    async fn reply_message_run(
        &self,
        channel: &str,
        target: &str,
        message_id: &str,
    ) -> Result<Option<String>>;
}

/// Who a chat channel lets in: pairing requests and the users they let in.
#[async_trait::async_trait]
pub trait AccessStore: Send + Sync + 'static {
    /// Stores a pairing request and queues `notice` (the message telling
    /// the user their code) to its target in the same transaction, unless
    /// the user has a pending one (`Existing`) or was denied within
    /// `limits.denied_cooldown_ms` (`CoolingDown`); then nothing is stored.
    /// A user's expired request is replaced; when the channel already has
    /// `limits.max_pending` unexpired requests, the oldest give way.
    async fn request_pairing(
        &self,
        rec: PairingRecord,
        limits: PairingLimits,
        notice: String,
    ) -> Result<PairingOutcome>;
    /// Pending, unexpired pairing requests, oldest first.
    async fn pending_pairings(&self, now: Timestamp) -> Result<Vec<PairingRecord>>;
    /// Approves a pending, unexpired code: in one transaction the request is
    /// used up, its user is allowed on its channel and `notice` (a payload
    /// for the user's conversation) is queued. `None` for an unknown, used
    /// or expired code.
    async fn approve_pairing(
        &self,
        code: &str,
        now: Timestamp,
        notice: String,
    ) -> Result<Option<PairingRecord>>;
    /// Denies a pending, unexpired code. `None` for an unknown, used or expired code.
    async fn deny_pairing(&self, code: &str, now: Timestamp) -> Result<Option<PairingRecord>>;
    /// Users let in on `channel` through pairing, oldest first.
    async fn allowed_users(&self, channel: &str) -> Result<Vec<AllowedUser>>;
    /// True when `user_key` was let in on `channel` through pairing.
    async fn is_allowed(&self, channel: &str, user_key: &str) -> Result<bool>;
    /// Removes a paired user. False when they were not there.
    async fn remove_allowed(&self, channel: &str, user_key: &str) -> Result<bool>;
}

/// Everything a channel keeps: [`OutboxStore`] and [`AccessStore`] together,
/// for the code that needs both (the store's own conformance suite).
pub trait ChannelStore: OutboxStore + AccessStore {}

impl<T: OutboxStore + AccessStore + ?Sized> ChannelStore for T {}
