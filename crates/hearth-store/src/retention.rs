//! Deleting what has been kept long enough: the store side of retention.
//!
//! The store only deletes by the cut-off times it is given; how long each kind
//! of record is kept is decided in one place by the caller
//! (`hearth_runtime::retention`).

pub use hearth_core::records::retention::{PurgeReport, RetentionCutoffs};

/// Deleting expired records.
#[async_trait::async_trait]
pub trait RetentionStore: Send + Sync + 'static {
    /// Deletes every record older than its cut-off, in one transaction.
    async fn purge_expired(&self, cutoffs: RetentionCutoffs) -> crate::Result<PurgeReport>;
}
