//! Confirmations: questions a run asks its user before a tool call, and
//! their answers.

use hearth_core::Timestamp;

use crate::error::Result;
use crate::records::{AuditEvent, ConfirmationRecord, ConfirmationState};

/// Confirmations asked by runs and their answers.
#[async_trait::async_trait]
pub trait ConfirmationStore: Send + Sync + 'static {
    /// Stores a pending confirmation and marks its run
    /// `awaiting_confirmation`, in one transaction. When the run already has
    /// a confirmation for the same call, nothing changes but the run's status
    /// (if it is still pending) and that one is returned. `outbox` (the
    /// prompt a chat channel owes its user) is queued in the same
    /// transaction, only when this call stored the confirmation.
    async fn request_confirmation(
        &self,
        rec: ConfirmationRecord,
        outbox: Vec<crate::channels::NewOutboxItem>,
    ) -> Result<ConfirmationRecord>;

    /// The confirmation of one tool call of a run.
    async fn confirmation_for_call(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<Option<ConfirmationRecord>>;

    /// A confirmation by token hash.
    async fn confirmation_by_hash(&self, token_hash: &str) -> Result<Option<ConfirmationRecord>>;

    /// The pending confirmations of a run, or of a thread's runs.
    async fn pending_confirmations(
        &self,
        run_id: Option<&str>,
        thread_key: Option<&str>,
    ) -> Result<Vec<ConfirmationRecord>>;

    /// Answers a pending confirmation (`state` is approved, denied or expired),
    /// puts its run back to `running` and stores `audit` in the audit log, in
    /// one transaction. Returns `None` (and changes nothing, `audit` not
    /// stored either) when it is not pending any more, so a token is used at
    /// most once.
    async fn resolve_confirmation(
        &self,
        token_hash: &str,
        state: ConfirmationState,
        by: &str,
        at: Timestamp,
        audit: Option<AuditEvent>,
    ) -> Result<Option<ConfirmationRecord>>;
}
