//! Deleting what has been kept long enough: the store side of retention.
//!
//! The store only deletes by the cut-off times it is given; how long each kind
//! of record is kept is decided in one place by the caller
//! (`hearth_runtime::retention`).

use crate::Timestamp;

/// Cut-off times: records older than these are deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionCutoffs {
    /// Memories last used before this.
    pub memories_unused_since: Timestamp,
    /// Audit events that happened before this.
    pub audit_before: Timestamp,
    /// Confirmations that expired before this, once their run is finished
    /// (a run still waiting keeps its confirmation, however old).
    pub confirmations_expired_before: Timestamp,
    /// Outbox items delivered or failed before this (by creation time), and
    /// channel event ids and pairing requests seen before this.
    pub channel_records_before: Timestamp,
    /// Records of which message carries which run's answer, for messages
    /// posted before this (a reaction to them no longer rates the run).
    pub reply_messages_before: Timestamp,
}

/// How many records one purge deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeReport {
    pub memories: u64,
    pub audit_events: u64,
    pub confirmations: u64,
    /// Outbox items, seen event ids and pairing requests.
    pub channel_records: u64,
    /// Records of answer messages.
    pub reply_messages: u64,
}
