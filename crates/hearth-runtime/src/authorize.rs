//! Checks a surface makes before acting for someone outside a run (a chat
//! command changing a shared conversation, cancelling another user's run),
//! under this hearth's own permission policy.

use hearth_agent::policy::{decide, scope_chain, subjects};
use hearth_core::now_ms;
use hearth_store::AuditEvent;
use tracing::warn;

use crate::confirmations::Answerer;
use crate::error::{Result, RuntimeError};
use crate::runtime::Runtime;

impl Runtime {
    /// Whether `who` holds `capability` in `scope` (grants there and
    /// globally count): an admin of hearth (`[permissions] admins`) or, by
    /// the platform's word, of exactly `scope` holds every capability; else
    /// the default preset and grants to them or their roles decide. A
    /// refusal is written to the audit log as `action` on `target`.
    pub async fn authorize(
        &self,
        who: Answerer<'_>,
        capability: &str,
        scope: &str,
        action: &str,
        target: &str,
    ) -> Result<bool> {
        if self.is_admin_in(who, scope) {
            return Ok(true);
        }
        let chain = scope_chain(scope).map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
        let grants = self
            .inner
            .store
            .grants_for(&subjects(who.user_key, who.roles), &chain)
            .await?;
        let live = self.inner.live();
        let policy = live.engine.policy();
        if decide(policy, who.user_key, who.roles, capability, &grants).allowed {
            return Ok(true);
        }
        self.audit_refusal(who, action, target, Some(capability), scope)
            .await;
        Ok(false)
    }

    /// Writes to the audit log that `who` was refused `action` on `target`
    /// in `scope` (for want of `capability`, when one would have allowed
    /// it). A failure to write is logged, not returned: the refusal stands.
    pub async fn audit_refusal(
        &self,
        who: Answerer<'_>,
        action: &str,
        target: &str,
        capability: Option<&str>,
        scope: &str,
    ) {
        let event = AuditEvent {
            at: now_ms(),
            actor: who.user_key.to_owned(),
            action: action.to_owned(),
            target: target.to_owned(),
            outcome: "denied".into(),
            capability: capability.map(str::to_owned),
            scope: Some(scope.to_owned()),
        };
        if let Err(e) = self.inner.store.append_audit(event).await {
            warn!(error = %e, action, "could not write a refusal to the audit log");
        }
    }

    /// Whether `who` is an admin in `scope`: listed in `[permissions]
    /// admins`, or named by the platform as an admin of exactly `scope` (a
    /// Discord guild's owner or Administrator in that guild's scope).
    pub fn is_admin_in(&self, who: Answerer<'_>, scope: &str) -> bool {
        self.inner.live().engine.policy().is_admin(who.user_key)
            || who.admin_of.is_some_and(|a| a == scope && a != "global")
    }
}
