//! The confirmation gate: a write-class call waits for the user's answer
//! before it runs.

use std::sync::Arc;
use std::time::Duration;

use hearth_core::{PermissionMode, RunError, RunEventKind, now_ms};
use hearth_store::{ChannelStore, ConfirmationStore};
use hearth_store::{ConfirmationRecord, ConfirmationState, StoreError};
use hearth_tools::ToolClass;
use hearth_tools::profiles::glob_match;
use serde_json::{Value, json};

use super::tools::ToolCall;
use super::{Engine, EventSink, Progress, RunInput, Stop};
use crate::confirm::{ConfirmationHub, hash_token, new_token};
use crate::wall::WallClock;

impl Engine {
    /// True when the call is a write-class call the user may make, with
    /// valid arguments, that config and the run's permission mode say must
    /// be confirmed first. Calls that will fail anyway (refused, bad
    /// arguments) are not put to the user.
    pub(super) fn needs_confirmation(
        &self,
        p: &Progress,
        mode: PermissionMode,
        name: &str,
        arguments: &str,
    ) -> bool {
        let Some(tool) = self.tools.get(name) else {
            return false;
        };
        if tool.class() != ToolClass::Write
            || !self.confirm.confirm_writes
            || self.confirm.exempt.iter().any(|t| t == name)
        {
            return false;
        }
        // Not offered: refused for the channel, a capability or the mode,
        // never asked.
        if !p.offered.iter().any(|t| t.name == name) {
            return false;
        }
        if !self.mode_asks(mode, name) {
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

    /// Whether `mode` asks before the offered write-class tool `name` runs.
    pub(super) fn mode_asks(&self, mode: PermissionMode, name: &str) -> bool {
        let any = |globs: &[String]| globs.iter().any(|g| glob_match(g, name));
        match mode {
            // Offer no write-class tool; a call to one is refused, not asked.
            PermissionMode::Deny | PermissionMode::Plan | PermissionMode::Ask => true,
            PermissionMode::AcceptEdits => {
                !any(&self.confirm.edit_tools) || any(&self.confirm.always_ask)
            }
            PermissionMode::Auto => any(&self.confirm.always_ask),
            PermissionMode::Bypass => false,
        }
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
        let store: &dyn ConfirmationStore = input.journal(&self.store).as_ref();
        let question = || {
            let token = new_token().map_err(|e| {
                Stop::Failed(RunError {
                    code: "internal".into(),
                    message: format!("could not draw a random confirmation token: {e}"),
                })
            })?;
            let now = now_ms();
            let ttl = i64::try_from(self.confirm.ttl.as_millis()).unwrap_or(i64::MAX);
            // A sub-agent asks in the conversation that started it: its own
            // thread is no chat, and the prompt says which sub-agent asks.
            let summary = match &input.asker {
                Some(who) => format!(
                    "{who} asks to run {name}: {}",
                    self.summary(name, arguments)
                ),
                None => self.summary(name, arguments),
            };
            let rec = ConfirmationRecord {
                token_hash: hash_token(&token),
                run_id: input.run_id.clone(),
                call_id: call_id.clone(),
                thread_key: asked_on(input).to_owned(),
                user_key: input.user_key.clone(),
                tool: name.clone(),
                summary,
                created_at: now,
                expires_at: now.saturating_add(ttl),
                state: ConfirmationState::Pending,
                resolved_by: None,
                resolved_at: None,
            };
            Ok((rec, token))
        };
        // Resumed only if this call paused it: the clock may be shared with
        // other runs of the family that wait for their own answers.
        let paused = std::sync::atomic::AtomicBool::new(false);
        let asked = |rec: &ConfirmationRecord, token: Option<String>| {
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
            paused.store(true, std::sync::atomic::Ordering::Relaxed);
        };
        // An incognito run's question lives in memory; its chat prompt is
        // queued on disk after it (as its answer is), or the chat never sees
        // buttons and the run waits out the TTL.
        let outbox = input
            .incognito
            .then(|| self.store.as_ref() as &dyn ChannelStore);
        let answered =
            await_answer(store, outbox, &self.hub, input, call_id, question, asked).await;
        if paused.load(std::sync::atomic::Ordering::Relaxed) {
            clock.resume();
        }
        let rec = answered?;
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

/// The thread a run's questions are asked on: a sub-agent's go to the
/// conversation its first ancestor runs in, where its user is.
fn asked_on(input: &RunInput) -> &str {
    crate::subagents::root_thread(&input.thread_key)
}

/// Stores the question of call `call_id` (or finds the one asked before a
/// restart), tells `asked` while it is pending, and waits for its answer or
/// its expiry. Returns the answered (or expired) record. The chat prompt
/// commits with the question, or goes to `outbox` right after when given
/// (the question is in a store in memory, the outbox on disk).
async fn await_answer(
    store: &dyn ConfirmationStore,
    outbox: Option<&dyn ChannelStore>,
    hub: &Arc<ConfirmationHub>,
    input: &RunInput,
    call_id: &str,
    question: impl FnOnce() -> Result<(ConfirmationRecord, String), Stop>,
    asked: impl FnOnce(&ConfirmationRecord, Option<String>),
) -> Result<ConfirmationRecord, Stop> {
    // Registered before the question is stored or read: an answer that
    // lands in between then finds a waiter to wake (its permit is kept),
    // instead of waking nobody and leaving the run to wait out the TTL.
    let guard = hub.register(&input.run_id, asked_on(input), None);
    let (mut rec, token) = match store.confirmation_for_call(&input.run_id, call_id).await? {
        Some(rec) => (rec, None),
        None => {
            let (rec, token) = question()?;
            let prompt = match &input.replies {
                Some(replies) => replies.on_confirmation(&rec, &token),
                None => Vec::new(),
            };
            let channels: Vec<String> = prompt.iter().map(|p| p.channel.clone()).collect();
            let (with_question, after) = match outbox {
                Some(_) => (Vec::new(), prompt),
                None => (prompt, Vec::new()),
            };
            let stored = store
                .request_confirmation(rec.clone(), with_question)
                .await?;
            let fresh = stored.token_hash == rec.token_hash;
            // Queued only for a question this call stored: one found already
            // there was prompted by whoever stored it.
            if let Some(outbox) = outbox
                && fresh
                && !after.is_empty()
                && let Err(e) = outbox.enqueue_outbox(after, now_ms()).await
            {
                tracing::warn!(run_id = %input.run_id, error = %e, "could not queue the confirmation prompt of an incognito run");
            }
            if let Some(replies) = &input.replies {
                for channel in &channels {
                    replies.committed(channel);
                }
            }
            let token = fresh.then_some(token);
            (stored, token)
        }
    };
    if rec.state != ConfirmationState::Pending {
        return Ok(rec);
    }
    hub.set_token(&input.run_id, token.clone());
    asked(&rec, token);
    while rec.state == ConfirmationState::Pending {
        let now = now_ms();
        if now >= rec.expires_at {
            store
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
        rec = store
            .confirmation_for_call(&input.run_id, call_id)
            .await?
            .ok_or_else(|| {
                Stop::from(StoreError::Corrupt(format!(
                    "the confirmation of call {call_id} of {} disappeared",
                    input.run_id
                )))
            })?;
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use hearth_core::Timestamp;
    use hearth_store::Result as StoreResult;

    use super::*;

    /// A confirmation store where an answer lands right after the question
    /// is stored, before the caller gets the stored record back: the run
    /// learns of it only through the hub's wake-up.
    struct AnsweredAtOnce {
        hub: Arc<ConfirmationHub>,
        rec: Mutex<Option<ConfirmationRecord>>,
    }

    #[async_trait::async_trait]
    impl ConfirmationStore for AnsweredAtOnce {
        async fn request_confirmation(
            &self,
            rec: ConfirmationRecord,
            _outbox: Vec<hearth_store::NewOutboxItem>,
        ) -> StoreResult<ConfirmationRecord> {
            let mut denied = rec.clone();
            denied.state = ConfirmationState::Denied;
            denied.resolved_by = Some("test:user:1".into());
            *self.rec.lock().unwrap() = Some(denied);
            // What the runtime does once it stored an answer.
            self.hub.wake(&rec.run_id);
            Ok(rec)
        }
        async fn confirmation_for_call(
            &self,
            _run_id: &str,
            _call_id: &str,
        ) -> StoreResult<Option<ConfirmationRecord>> {
            Ok(self.rec.lock().unwrap().clone())
        }
        async fn confirmation_by_hash(
            &self,
            _token_hash: &str,
        ) -> StoreResult<Option<ConfirmationRecord>> {
            Ok(self.rec.lock().unwrap().clone())
        }
        async fn pending_confirmations(
            &self,
            _run_id: Option<&str>,
            _thread_key: Option<&str>,
        ) -> StoreResult<Vec<ConfirmationRecord>> {
            Ok(Vec::new())
        }
        async fn resolve_confirmation(
            &self,
            _token_hash: &str,
            _state: ConfirmationState,
            _by: &str,
            _at: Timestamp,
            _audit: Option<hearth_store::AuditEvent>,
        ) -> StoreResult<Option<ConfirmationRecord>> {
            Ok(None)
        }
    }

    #[tokio::test]
    async fn an_answer_landing_as_the_question_is_stored_is_not_lost() {
        let hub = Arc::new(ConfirmationHub::default());
        let store = AnsweredAtOnce {
            hub: hub.clone(),
            rec: Mutex::new(None),
        };
        let input = RunInput {
            run_id: "run_1".into(),
            thread_key: "t:1".into(),
            text: String::new(),
            user_key: "test:user:1".into(),
            scope: "global".into(),
            roles: Vec::new(),
            candidates: Vec::new(),
            thinking: hearth_core::ThinkingLevel::Off,
            cancel: tokio_util::sync::CancellationToken::new(),
            steer: None,
            incognito: false,
            journal: None,
            replies: None,
            pinned: false,
            first_step: 0,
            mode: PermissionMode::Ask,
            tools: None,
            max_steps: None,
            asker: None,
            family: None,
            fresh: false,
            history_seen: None,
        };
        let question = || {
            Ok((
                ConfirmationRecord {
                    token_hash: "h".into(),
                    run_id: "run_1".into(),
                    call_id: "c1".into(),
                    thread_key: "t:1".into(),
                    user_key: "test:user:1".into(),
                    tool: "memory_forget".into(),
                    summary: String::new(),
                    created_at: now_ms(),
                    // An hour: waiting it out is the bug.
                    expires_at: now_ms() + 3_600_000,
                    state: ConfirmationState::Pending,
                    resolved_by: None,
                    resolved_at: None,
                },
                "token".to_owned(),
            ))
        };
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            await_answer(&store, None, &hub, &input, "c1", question, |_, _| {}),
        )
        .await
        .expect("the run slept through the answer (lost wake-up)");
        assert_eq!(
            answer.ok().map(|r| r.state),
            Some(ConfirmationState::Denied)
        );
    }
}
