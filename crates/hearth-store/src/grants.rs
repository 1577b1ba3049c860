//! Grants of capabilities and the audit log that records changes to them
//! (and other decisions worth a trace).

use crate::error::Result;
use crate::records::{AuditEvent, Grant};

/// Grants and the audit log.
#[async_trait::async_trait]
pub trait GrantStore: Send + Sync + 'static {
    /// Stores a grant. Returns false (and changes nothing) when the same
    /// subject already holds the same capability in the same scope.
    async fn add_grant(&self, grant: Grant) -> Result<bool>;

    /// Stores a grant and, only when it was new, `event` in the audit log,
    /// in one transaction. Returns whether the grant was new.
    async fn add_grant_audited(&self, grant: Grant, event: AuditEvent) -> Result<bool>;

    /// Removes a grant. Returns false when there was none.
    async fn remove_grant(&self, subject: &str, capability: &str, scope: &str) -> Result<bool>;

    /// Removes a grant and, only when one was removed, stores `event` in the
    /// audit log, in one transaction. Returns whether a grant was removed.
    async fn remove_grant_audited(
        &self,
        subject: &str,
        capability: &str,
        scope: &str,
        event: AuditEvent,
    ) -> Result<bool>;

    /// Every grant, or only those in `scope`, by subject then capability.
    async fn list_grants(&self, scope: Option<&str>) -> Result<Vec<Grant>>;

    /// The grants of any of `subjects` in any of `scopes`, by subject, then
    /// capability, then scope.
    async fn grants_for(&self, subjects: &[String], scopes: &[String]) -> Result<Vec<Grant>>;

    /// Appends one event to the audit log.
    async fn append_audit(&self, event: AuditEvent) -> Result<()>;

    /// The newest `limit` audit events, newest first (0 means 100; at most 1000).
    async fn list_audit(&self, limit: u32) -> Result<Vec<AuditEvent>>;
}

/// The `list_audit` page size when the caller asks for 0.
const DEFAULT_AUDIT_LIMIT: u32 = 100;

/// The largest `list_audit` page.
const MAX_AUDIT_LIMIT: u32 = 1000;

/// The number of audit events `list_audit` returns for the `limit` asked.
pub(crate) fn audit_limit(limit: u32) -> u32 {
    match limit {
        0 => DEFAULT_AUDIT_LIMIT,
        n => n.min(MAX_AUDIT_LIMIT),
    }
}
