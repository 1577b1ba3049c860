//! The confirmation gate: a write-class call waits for the user's answer
//! before it runs.

use std::time::Duration;

use hearth_core::{RunError, RunEventKind, now_ms};
use hearth_store::{ConfirmationRecord, ConfirmationState, StoreError};
use hearth_tools::ToolClass;
use serde_json::{Value, json};

use super::tools::ToolCall;
use super::{Engine, EventSink, Progress, RunInput, Stop};
use crate::confirm::{hash_token, new_token};
use crate::wall::WallClock;

impl Engine {
    /// True when the call is a write-class call the user may make, with
    /// valid arguments, that config says must be confirmed first. Calls that
    /// will fail anyway (refused, bad arguments) are not put to the user.
    pub(super) fn needs_confirmation(&self, p: &Progress, name: &str, arguments: &str) -> bool {
        let Some(tool) = self.tools.get(name) else {
            return false;
        };
        if tool.class() != ToolClass::Write
            || !self.confirm.confirm_writes
            || self.confirm.exempt.iter().any(|t| t == name)
        {
            return false;
        }
        // Not offered: refused for the channel or a capability, never asked.
        if !p.offered.iter().any(|t| t.name == name) {
            return false;
        }
        let args = if arguments.trim().is_empty() {
            Ok(json!({}))
        } else {
            serde_json::from_str::<Value>(arguments)
        };
        matches!(args, Ok(ref v) if v.is_object()
            && hearth_tools::schema::validate(&tool.spec().parameters, v).is_ok())
    }

    /// Asks the user to confirm a call (or finds the question asked before a
    /// restart) and waits for the answer, the expiry or a cancel. Returns
    /// `None` when approved, else the result the model gets instead.
    pub(super) async fn confirm(
        &self,
        input: &RunInput,
        sink: &dyn EventSink,
        ToolCall {
            id: call_id,
            name,
            arguments,
        }: &ToolCall,
        clock: &WallClock,
    ) -> Result<Option<hearth_tools::ToolOutput>, Stop> {
        // Registered before the question is stored or read: an answer that
        // lands in between then finds a waiter to wake (its permit is kept),
        // instead of waking nobody and leaving the run to wait out the TTL.
        let guard = self.hub.register(&input.run_id, &input.thread_key, None);
        let (mut rec, token) = match input
            .journal(&self.store)
            .confirmation_for_call(&input.run_id, call_id)
            .await?
        {
            Some(rec) => (rec, None),
            None => {
                let token = new_token().map_err(|e| {
                    Stop::Failed(RunError {
                        code: "internal".into(),
                        message: format!("could not draw a random confirmation token: {e}"),
                    })
                })?;
                let now = now_ms();
                let ttl = i64::try_from(self.confirm.ttl.as_millis()).unwrap_or(i64::MAX);
                let rec = ConfirmationRecord {
                    token_hash: hash_token(&token),
                    run_id: input.run_id.clone(),
                    call_id: call_id.clone(),
                    thread_key: input.thread_key.clone(),
                    user_key: input.user_key.clone(),
                    tool: name.clone(),
                    summary: self.summary(name, arguments),
                    created_at: now,
                    expires_at: now.saturating_add(ttl),
                    state: ConfirmationState::Pending,
                    resolved_by: None,
                    resolved_at: None,
                };
                let stored = input
                    .journal(&self.store)
                    .request_confirmation(rec.clone())
                    .await?;
                let token = (stored.token_hash == rec.token_hash).then_some(token);
                (stored, token)
            }
        };
        if rec.state == ConfirmationState::Pending {
            self.hub.set_token(&input.run_id, token.clone());
            sink.emit(
                RunEventKind::ConfirmationRequired,
                json!({
                    "run_id": input.run_id,
                    "token": token,
                    "tool": rec.tool,
                    "summary": rec.summary,
                    "expires_at": hearth_core::rfc3339(rec.expires_at),
                }),
            );
            clock.pause();
            while rec.state == ConfirmationState::Pending {
                let now = now_ms();
                if now >= rec.expires_at {
                    input
                        .journal(&self.store)
                        .resolve_confirmation(
                            &rec.token_hash,
                            ConfirmationState::Expired,
                            "hearth:expired",
                            now,
                            None,
                        )
                        .await?;
                } else {
                    let left = u64::try_from(rec.expires_at - now).unwrap_or(0);
                    tokio::select! {
                        _ = guard.wake.notified() => {}
                        _ = tokio::time::sleep(Duration::from_millis(left)) => {}
                    }
                }
                rec = input
                    .journal(&self.store)
                    .confirmation_for_call(&input.run_id, call_id)
                    .await?
                    .ok_or_else(|| {
                        Stop::from(StoreError::Corrupt(format!(
                            "the confirmation of call {call_id} of {} disappeared",
                            input.run_id
                        )))
                    })?;
            }
            clock.resume();
        }
        drop(guard);
        let why = match (rec.state, rec.resolved_by.as_deref()) {
            (ConfirmationState::Approved, _) => return Ok(None),
            (ConfirmationState::Denied, Some("hearth:new_message")) => {
                "the user sent a new message instead of confirming it"
            }
            (ConfirmationState::Denied, _) => "the user declined it",
            _ => "nobody confirmed it in time",
        };
        tracing::info!(run_id = %input.run_id, tool = %name, state = rec.state.as_str(), "tool call not confirmed");
        Ok(Some(hearth_tools::ToolOutput {
            json: json!({
                "error": format!(
                    "not done: {name} needed the user's confirmation and {why}, so the action was not taken. Tell the user; do not retry unless they ask again."
                )
            })
            .to_string(),
            is_error: true,
        }))
    }

    /// The one line shown to the user, without secrets or line breaks.
    fn summary(&self, name: &str, arguments: &str) -> String {
        let args = serde_json::from_str::<Value>(arguments).unwrap_or(Value::Null);
        let line = match self.tools.get(name) {
            Some(tool) => tool.summary(&args),
            None => name.to_owned(),
        };
        let line: String = line
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        self.scanner.redact(&line).text.into_owned()
    }
}
