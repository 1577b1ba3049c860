//! Answering confirmations: over the API, by a `confirm <token>` / `deny
//! <token>` message, or implicitly by the asker's new message on the thread.

use hearth_agent::confirm::{hash_token, looks_like_token};
use hearth_agent::policy::{decide, scope_chain, subjects};
use hearth_core::{Confirmation, Inbound, RunEnvelope, RunStatus, now_ms, rfc3339};
use std::sync::Arc;

use hearth_store::{AuditEvent, ConfirmationRecord, ConfirmationState, RunRecord, Store};
use tracing::{info, warn};

use crate::envelope::envelope;
use crate::error::{Result, RuntimeError};
use crate::runtime::Runtime;

/// The capability that lets a user answer other users' confirmations.
const RESOLVE_ANY: &str = "confirmations.resolve_any";

/// Who hearth records as the answerer when a new message denies.
const BY_NEW_MESSAGE: &str = "hearth:new_message";

/// The sender of a message that is their own turn in the conversation:
/// it may deny what the thread waits for of them.
pub(crate) struct Sender {
    pub(crate) user_key: String,
    /// Their role ids on the platform (grants to `role:<id>` apply).
    pub(crate) roles: Vec<String>,
}

/// `confirm <token>` or `deny <token>`, parsed.
pub(crate) struct Command<'a> {
    pub(crate) approve: bool,
    pub(crate) token: &'a str,
}

/// Parses a message that is exactly `confirm <token>` or `deny <token>`
/// (surrounding white space aside).
pub(crate) fn parse_command(text: &str) -> Option<Command<'_>> {
    let (verb, token) = text.trim().split_once(' ')?;
    let approve = match verb {
        "confirm" => true,
        "deny" => false,
        _ => return None,
    };
    looks_like_token(token).then_some(Command { approve, token })
}

/// Who answers a confirmation, as far as the surface they answer on knows
/// them.
#[derive(Debug, Clone, Copy)]
pub struct Answerer<'a> {
    /// Their user key.
    pub user_key: &'a str,
    /// Their role ids on the platform: grants of
    /// `confirmations.resolve_any` to `role:<id>` apply.
    pub roles: &'a [String],
    /// The scope the platform says they administer (a Discord guild whose
    /// owner they are or where they have Administrator): they may answer
    /// the confirmations of runs asked in exactly that scope.
    pub admin_of: Option<&'a str>,
}

impl<'a> Answerer<'a> {
    /// A user known only by key.
    pub fn user(user_key: &'a str) -> Self {
        Self {
            user_key,
            roles: &[],
            admin_of: None,
        }
    }
}

impl Runtime {
    /// Answers the confirmation `token` for `user_key`; returns the waiting
    /// run's envelope. Only the user who asked may answer, or a holder of
    /// `confirmations.resolve_any`.
    pub async fn resolve_confirmation(
        &self,
        token: &str,
        user_key: &str,
        approve: bool,
    ) -> Result<RunEnvelope> {
        self.resolve_confirmation_by(token, Answerer::user(user_key), approve)
            .await
    }

    /// [`Runtime::resolve_confirmation`] by `who`: the user who asked, a
    /// holder of `confirmations.resolve_any` in the run's scope (through a
    /// grant to them or one of their roles), or an admin of the run's scope.
    pub async fn resolve_confirmation_by(
        &self,
        token: &str,
        who: Answerer<'_>,
        approve: bool,
    ) -> Result<RunEnvelope> {
        self.resolve_hash(&hash_token(token), who, approve).await
    }

    /// Answers, for `user_key`, the question run `run_id` waits on, without
    /// its token: the dashboard's Approve / Deny, which an operator or the
    /// run's own user (a member) presses, also for a question asked before
    /// a restart (the store keeps only the token's hash, so the token is
    /// gone). The oldest pending question of the run is answered; the same
    /// rules as [`Runtime::resolve_confirmation`] apply.
    pub async fn resolve_confirmation_of_run(
        &self,
        run_id: &str,
        user_key: &str,
        approve: bool,
    ) -> Result<RunEnvelope> {
        let pending = self
            .store_of_run(run_id)
            .pending_confirmations(Some(run_id), None)
            .await?;
        let rec = pending
            .into_iter()
            .min_by_key(|r| r.created_at)
            .ok_or(RuntimeError::ConfirmationNotFound)?;
        self.resolve_hash(&rec.token_hash, Answerer::user(user_key), approve)
            .await
    }

    async fn resolve_hash(
        &self,
        hash: &str,
        who: Answerer<'_>,
        approve: bool,
    ) -> Result<RunEnvelope> {
        let user_key = who.user_key;
        crate::runtime::check_key("user_key", user_key)?;
        let (rec, store) = self
            .find_confirmation(hash)
            .await?
            .filter(|(r, _)| r.state == ConfirmationState::Pending)
            .ok_or(RuntimeError::ConfirmationNotFound)?;
        let Some(run) = store
            .get_run(&rec.run_id)
            .await?
            .filter(|r| !r.status.is_terminal())
        else {
            // A cancelled run's question is moot.
            return Err(RuntimeError::ConfirmationNotFound);
        };
        // Grants count in the space the run was asked in.
        let scope = run.scope.as_deref().unwrap_or("global");
        let now = now_ms();
        if now >= rec.expires_at {
            // The waiting run marks it expired itself; wake it so it does now.
            self.inner.live().engine.confirmations().wake(&rec.run_id);
            return Err(RuntimeError::ConfirmationNotFound);
        }
        let admin_here = who.admin_of.is_some_and(|a| a == scope && a != "global");
        if rec.user_key != user_key
            && !admin_here
            && !self.may_resolve_any(user_key, who.roles, scope).await?
        {
            self.append_audit(audit_event(
                user_key,
                &rec,
                "denied",
                Some(RESOLVE_ANY),
                scope,
            ))
            .await;
            return Err(RuntimeError::Forbidden(format!(
                "this confirmation belongs to another user; answering it needs capability {RESOLVE_ANY}"
            )));
        }
        let state = if approve {
            ConfirmationState::Approved
        } else {
            ConfirmationState::Denied
        };
        // The answer and its audit record are one transaction, except for
        // an incognito run: its confirmation lives in memory, the audit log
        // on disk.
        let event = audit_event(user_key, &rec, state.as_str(), None, scope);
        let same_db = Arc::ptr_eq(&store, &self.inner.store);
        let Some(rec) = store
            .resolve_confirmation(hash, state, user_key, now, same_db.then(|| event.clone()))
            .await?
        else {
            return Err(RuntimeError::ConfirmationNotFound);
        };
        self.resumed(&rec);
        if !same_db {
            self.append_audit(event).await;
        }
        info!(run_id = %rec.run_id, tool = %rec.tool, state = state.as_str(), "confirmation answered");
        self.get_run(&rec.run_id).await
    }

    /// When `inbound` is `confirm <token>` / `deny <token>` for a
    /// confirmation pending on its thread that its sender may answer,
    /// answers it and returns the run's envelope. A token that cannot be
    /// answered (unknown, another user's, expired, its run ended) gives
    /// `None`: the text is an ordinary message, as any other text is. Only
    /// a failure to read or write the store is an error.
    pub(crate) async fn confirmation_command(
        &self,
        inbound: &Inbound,
    ) -> Result<Option<RunEnvelope>> {
        let Some(cmd) = parse_command(&inbound.text) else {
            return Ok(None);
        };
        let on_thread = self
            .find_confirmation(&hash_token(cmd.token))
            .await?
            .is_some_and(|(r, _)| {
                r.thread_key == inbound.thread_key && r.state == ConfirmationState::Pending
            });
        if !on_thread {
            return Ok(None);
        }
        let who = Answerer {
            user_key: &inbound.user_key,
            roles: &inbound.roles,
            admin_of: None,
        };
        match self
            .resolve_confirmation_by(cmd.token, who, cmd.approve)
            .await
        {
            Ok(env) => Ok(Some(env)),
            Err(e @ (RuntimeError::ConfirmationNotFound | RuntimeError::Forbidden(_))) => {
                info!(thread_key = %inbound.thread_key, reason = %e, "a confirm/deny message could not answer; taken as an ordinary message");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The thread a `confirm <token>` / `deny <token>` text would answer on:
    /// where the confirmation it names still waits. `None` for any other
    /// text, or a token that is unknown or answered. Lets a surface that
    /// derives a thread per conversation route an answer to the
    /// conversation that asked.
    pub async fn pending_confirmation_thread(&self, text: &str) -> Result<Option<String>> {
        let Some(cmd) = parse_command(text) else {
            return Ok(None);
        };
        Ok(self
            .find_confirmation(&hash_token(cmd.token))
            .await?
            .filter(|(r, _)| r.state == ConfirmationState::Pending)
            .map(|(r, _)| r.thread_key))
    }

    /// Denies what runs of `thread_key` wait for of `sender`: their new
    /// message means they moved on. Only the confirmations `sender` could
    /// answer are denied (theirs, or any when they hold
    /// `confirmations.resolve_any` in the run's scope): someone else
    /// talking in a shared thread does not cancel another user's approval.
    /// Looked up only for runs waiting in this process or active on the
    /// thread (one recovered after a restart may not have reached its
    /// question again yet), so the common case, a thread with nothing
    /// running, costs no query.
    /// `own_run` is the run the message itself became, if any: it is not
    /// one the thread waited for, and a message never denies its own run.
    pub(crate) async fn deny_pending_on_thread(
        &self,
        thread_key: &str,
        sender: &Sender,
        own_run: Option<&str>,
    ) {
        let mut runs = self
            .inner
            .live()
            .engine
            .confirmations()
            .waiting_on(thread_key);
        if let Some(active) = self.inner.scheduler.active_run(thread_key)
            && !runs.contains(&active)
        {
            runs.push(active);
        }
        runs.retain(|run_id| Some(run_id.as_str()) != own_run);
        for run_id in runs {
            let store = self.store_of_run(&run_id);
            let pending = match store.pending_confirmations(Some(&run_id), None).await {
                Ok(p) => p,
                Err(e) => {
                    warn!(run_id, error = %e, "could not look up confirmations to deny");
                    continue;
                }
            };
            for rec in pending {
                if self.may_deny(&store, &rec, sender).await {
                    self.deny_for_new_message(&store, &rec).await;
                }
            }
        }
    }

    /// Whether a new message of `sender` answers `rec` (as a denial): they
    /// asked, or they hold `confirmations.resolve_any` where the run was
    /// asked. A failed look-up leaves the question standing.
    async fn may_deny(
        &self,
        store: &Arc<dyn Store>,
        rec: &ConfirmationRecord,
        sender: &Sender,
    ) -> bool {
        if rec.user_key == sender.user_key {
            return true;
        }
        let scope = match store.get_run(&rec.run_id).await {
            Ok(run) => run.and_then(|r| r.scope),
            Err(e) => {
                warn!(run_id = %rec.run_id, error = %e, "could not read a run to decide whether a message denies its confirmation");
                return false;
            }
        };
        let scope = scope.as_deref().unwrap_or("global");
        match self
            .may_resolve_any(&sender.user_key, &sender.roles, scope)
            .await
        {
            Ok(allowed) => allowed,
            Err(e) => {
                warn!(run_id = %rec.run_id, error = %e, "could not read grants to decide whether a message denies a confirmation");
                false
            }
        }
    }

    async fn deny_for_new_message(&self, store: &Arc<dyn Store>, rec: &ConfirmationRecord) {
        let answered = store
            .resolve_confirmation(
                &rec.token_hash,
                ConfirmationState::Denied,
                BY_NEW_MESSAGE,
                now_ms(),
                None,
            )
            .await;
        match answered {
            Ok(Some(rec)) => self.resumed(&rec),
            Ok(None) => {}
            Err(e) => warn!(run_id = %rec.run_id, error = %e, "could not deny a confirmation"),
        }
    }

    /// The envelope of a stored run, with its pending confirmation.
    pub(crate) async fn envelope_of(&self, run: &RunRecord) -> Result<RunEnvelope> {
        let mut env = envelope(run);
        if run.status == RunStatus::AwaitingConfirmation
            && let Some(rec) = self
                .store_of_run(&run.run_id)
                .pending_confirmations(Some(&run.run_id), None)
                .await?
                .into_iter()
                .next()
        {
            env.confirmation = Some(Confirmation {
                token: self.inner.live().engine.confirmations().token(&run.run_id),
                tool: rec.tool,
                summary: rec.summary,
                expires_at: rfc3339(rec.expires_at),
            });
        }
        Ok(env)
    }

    /// A confirmation by token hash, with the store that holds it (disk, or
    /// memory for incognito runs).
    async fn find_confirmation(
        &self,
        hash: &str,
    ) -> Result<Option<(ConfirmationRecord, Arc<dyn Store>)>> {
        if let Some(rec) = self.inner.store.confirmation_by_hash(hash).await? {
            return Ok(Some((rec, self.inner.store.clone())));
        }
        if let Some(memory) = self.inner.incognito.opened()
            && let Some(rec) = memory.confirmation_by_hash(hash).await?
        {
            return Ok(Some((rec, memory)));
        }
        Ok(None)
    }

    /// Marks the run running again for followers and wakes it.
    fn resumed(&self, rec: &ConfirmationRecord) {
        if let Some(log) = self.inner.bus.get(&rec.run_id) {
            log.set_status(RunStatus::Running);
        }
        self.inner.live().engine.confirmations().wake(&rec.run_id);
    }

    /// Whether `user_key` (with `roles`) holds `confirmations.resolve_any`
    /// in `scope` (the run's) or globally.
    async fn may_resolve_any(&self, user_key: &str, roles: &[String], scope: &str) -> Result<bool> {
        let live = self.inner.live();
        let policy = live.engine.policy();
        if decide(policy, user_key, roles, RESOLVE_ANY, &[]).allowed {
            return Ok(true);
        }
        let scopes = scope_chain(scope).unwrap_or_else(|_| vec!["global".to_owned()]);
        let grants = self
            .inner
            .store
            .grants_for(&subjects(user_key, roles), &scopes)
            .await?;
        Ok(decide(policy, user_key, roles, RESOLVE_ANY, &grants).allowed)
    }

    async fn append_audit(&self, event: AuditEvent) {
        if let Err(e) = self.inner.store.append_audit(event).await {
            warn!(error = %e, "could not write a confirmation answer to the audit log");
        }
    }
}

/// The audit record of an answer (or a refused attempt) to `rec`.
fn audit_event(
    actor: &str,
    rec: &ConfirmationRecord,
    outcome: &str,
    capability: Option<&str>,
    scope: &str,
) -> AuditEvent {
    AuditEvent {
        at: now_ms(),
        actor: actor.to_owned(),
        action: "confirmation.resolve".into(),
        target: format!("{}/{}", rec.run_id, rec.tool),
        outcome: outcome.to_owned(),
        capability: capability.map(str::to_owned),
        scope: Some(scope.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_exact() {
        let t = "abcdefghijklmnopqrstuvwxyz234567";
        assert!(parse_command(&format!("confirm {t}")).is_some_and(|c| c.approve && c.token == t));
        assert!(parse_command(&format!("  deny {t}\n")).is_some_and(|c| !c.approve));
        assert!(parse_command(&format!("please confirm {t}")).is_none());
        assert!(parse_command(&format!("confirm {t} now")).is_none());
        assert!(parse_command("confirm short").is_none());
        assert!(parse_command(&format!("Confirm {t}")).is_none());
    }
}
