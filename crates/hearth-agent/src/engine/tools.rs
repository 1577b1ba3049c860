//! Running the tool calls of a model turn: permissions, journaling, and the
//! order and concurrency of calls.

use std::sync::Arc;

use hearth_core::{Content, Message, PermissionMode, Role, RunEventKind, now_ms};
use hearth_store::{AuditEvent, StepKind, StepRecord, StepStatus};
use hearth_tools::{ToolClass, channel_of};
use serde_json::{Value, json};

use super::{Engine, EventSink, Progress, RunInput, Stop, limit};
use crate::limits::Limits;
use crate::policy::{Preset, decide, decide_extra, scope_chain, subjects};
use crate::wall::WallClock;

impl Engine {
    /// Redacts secrets from JSON text (a tool's arguments or output): what
    /// a tool stores (memory) or the journal keeps holds only placeholders.
    fn redact_tool_json(&self, json: String, what: &'static str) -> String {
        match serde_json::from_str::<Value>(&json) {
            Ok(mut v) => {
                if self.scanner.redact_json(&mut v) > 0 {
                    tracing::info!(what, "redacted secrets from a tool call");
                    v.to_string()
                } else {
                    json
                }
            }
            Err(_) => self.scanner.redact(&json).text.into_owned(),
        }
    }

    /// Runs the calls of one model turn. Consecutive read-class calls run
    /// concurrently; a write-class call runs alone, in order. Results are
    /// journaled and handed to the model in the order the model asked.
    pub(super) async fn run_tools(
        &self,
        input: &RunInput,
        sink: &dyn EventSink,
        p: &mut Progress,
        calls: Vec<ToolCall>,
        clock: &WallClock,
    ) -> Result<(), Stop> {
        let ctx = input.tool_context();
        let mut rest = calls.into_iter().peekable();
        while let Some(first) = rest.next() {
            let asked = self.needs_confirmation(p, input.mode, &first.name, &first.arguments);
            if asked {
                check_call_limits(&self.limits, self.max_steps(input), p)?;
                self.check_family(input, p, true)?;
                if let Some(refusal) = self.confirm(input, sink, &first, clock).await? {
                    let mut call = self.begin_call(input, sink, p, first, false, true).await?;
                    call.unconfirmed = true;
                    self.end_call(input, sink, p, call, refusal).await?;
                    continue;
                }
            }
            let mut batch = vec![self.begin_call(input, sink, p, first, true, asked).await?];
            if batch[0].class != Some(ToolClass::Write) {
                while let Some(next) =
                    rest.next_if(|c| self.class_of(&c.name) != Some(ToolClass::Write))
                {
                    batch.push(self.begin_call(input, sink, p, next, true, false).await?);
                }
            }
            let timeout = self.limits.tool_timeout;
            let ctx = &ctx;
            let direct = p.direct;
            let outputs = futures_util::future::join_all(batch.iter().map(|c| async move {
                match c.refused {
                    Some(refusal) => self.deny(input, &c.name, refusal).await,
                    // A person asked for it and reads the result: no model
                    // needs warning about what an outside source said.
                    None if direct => {
                        self.tools
                            .execute_direct(ctx, &c.name, &c.arguments, timeout)
                            .await
                    }
                    None => {
                        let ctx = hearth_tools::ToolContext {
                            call_id: c.call_id.clone(),
                            ..ctx.clone()
                        };
                        self.tools
                            .execute(&ctx, &c.name, &c.arguments, timeout)
                            .await
                    }
                }
            }))
            .await;
            for (call, output) in batch.into_iter().zip(outputs) {
                self.end_call(input, sink, p, call, output).await?;
            }
        }
        Ok(())
    }

    /// A run resumed after a restart may owe calls to tools whose MCP
    /// server or executable skill is still starting: waits for them (each
    /// source bounds its wait by the server's start timeout), then lists the
    /// offered tools again, so such a call is neither an unknown tool nor
    /// refused as not offered. A server that does not come up answers the
    /// call with its own error (the registry asks its source why).
    pub(super) async fn wait_for_starting_tools(
        &self,
        input: &RunInput,
        p: &mut Progress,
    ) -> Result<(), Stop> {
        let Some(calls) = self.pending_calls(p) else {
            return Ok(());
        };
        let waits: Vec<_> = calls
            .iter()
            .filter_map(|c| Some((c.name.as_str(), self.tools.pending(&c.name)?)))
            .collect();
        if waits.is_empty() {
            return Ok(());
        }
        let run_id = input.run_id.as_str();
        futures_util::future::join_all(waits.into_iter().map(|(tool, wait)| async move {
            tracing::info!(
                run_id,
                tool,
                "waiting for the server of a resumed run's tool call"
            );
            if let Err(why) = wait.await {
                tracing::warn!(run_id, tool, error = %why, "the tool's server did not come up");
            }
        }))
        .await;
        (p.allowed, p.offered) = self.offered_tools(input).await?;
        Ok(())
    }

    /// The tools `input`'s user may use, and of those the ones the run's
    /// permission mode offers. Grants only add to the default preset, so
    /// they are read only when some tool needs more than it holds.
    pub(super) async fn offered_tools(&self, input: &RunInput) -> Result<Offer, Stop> {
        self.offered_tools_as(input, false).await
    }

    /// As `offered_tools`; `operator` makes the user hold every capability,
    /// as an admin does (the API token holder calling a tool directly).
    pub(super) async fn offered_tools_as(
        &self,
        input: &RunInput,
        operator: bool,
    ) -> Result<Offer, Stop> {
        let mut allowed = self.allowed_tools(input, operator).await?;
        if crate::subagents::is_subagent(&input.thread_key) {
            allowed.retain(|t| subagent_may_call(input, t.spec().name.as_str()));
        }
        // `deny` offers nothing, `plan` only what reads; a mode takes away,
        // it never adds what the capabilities refused.
        let offered: Vec<Arc<dyn hearth_tools::Tool>> = match input.mode {
            PermissionMode::Deny => Vec::new(),
            PermissionMode::Plan => allowed
                .iter()
                .filter(|t| t.class() == ToolClass::Read)
                .cloned()
                .collect(),
            _ => allowed.clone(),
        };
        let same = offered.len() == allowed.len();
        let allowed = self.offered.specs(allowed);
        let offered = if same {
            Arc::clone(&allowed)
        } else {
            self.offered.specs(offered)
        };
        Ok((allowed, offered))
    }

    /// The tools of the run's channel that its user's capabilities allow.
    async fn allowed_tools(
        &self,
        input: &RunInput,
        operator: bool,
    ) -> Result<Vec<Arc<dyn hearth_tools::Tool>>, Stop> {
        let channel = channel_of(&input.thread_key);
        let on_channel: Vec<Arc<dyn hearth_tools::Tool>> = self
            .tools
            .for_channel(channel)
            .filter(|t| t.offered_in(&input.scope))
            .collect();
        if operator {
            return Ok(on_channel);
        }
        let needs_grants = on_channel.iter().any(|t| {
            t.capability().is_some_and(|cap| {
                !self.policy.is_admin(&input.user_key) && !self.policy.default_preset.contains(cap)
            })
        });
        let grants = if needs_grants {
            let scopes = scope_chain(&input.scope).unwrap_or_else(|_| vec!["global".to_owned()]);
            self.store
                .grants_for(&subjects(&input.user_key, &input.roles), &scopes)
                .await?
        } else {
            Vec::new()
        };
        let offered: Vec<Arc<dyn hearth_tools::Tool>> = on_channel
            .into_iter()
            .filter(|t| {
                t.capability().is_none_or(|cap| {
                    match t.capability_preset().and_then(Preset::parse) {
                        Some(least) => {
                            decide_extra(
                                &self.policy,
                                &input.user_key,
                                &input.roles,
                                cap,
                                least,
                                &grants,
                            )
                            .allowed
                        }
                        None => {
                            decide(&self.policy, &input.user_key, &input.roles, cap, &grants)
                                .allowed
                        }
                    }
                })
            })
            .collect();
        Ok(offered)
    }

    /// A refused call: an error the model can read, and an audit record
    /// (with the missing capability, or none when the channel lacks the tool).
    async fn deny(
        &self,
        input: &RunInput,
        tool: &str,
        refusal: Refusal,
    ) -> hearth_tools::ToolOutput {
        let (capability, error) = match refusal {
            Refusal::Capability(cap) => (
                Some(cap.to_owned()),
                format!(
                    "permission denied: calling {tool} needs capability {cap}, and this user does not have it (missing capability {cap}); an operator can grant it"
                ),
            ),
            Refusal::Channel => (
                None,
                format!(
                    "tool {tool} is not available on channel {}; use another tool or answer without it",
                    channel_of(&input.thread_key)
                ),
            ),
            Refusal::Mode => (
                None,
                format!(
                    "not done: tool {tool} is not offered in this thread's permission mode {}; \
                     do not retry. Answer without it, or tell the user which mode would allow it",
                    input.mode
                ),
            ),
            Refusal::Subagent => (
                None,
                format!(
                    "not done: tool {tool} is not among the tools this sub-agent was given; do \
                     not retry. Use the tools offered, or answer without it"
                ),
            ),
        };
        let outcome = match refusal {
            Refusal::Mode | Refusal::Subagent => "not_offered",
            Refusal::Capability(_) | Refusal::Channel => "denied",
        };
        let event = AuditEvent {
            at: now_ms(),
            actor: input.user_key.clone(),
            action: "tool.call".into(),
            target: tool.to_owned(),
            outcome: outcome.into(),
            capability,
            scope: Some(input.scope.clone()),
        };
        if let Err(e) = self.store.append_audit(event).await {
            tracing::warn!(error = %e, tool, "could not write a denial to the audit log");
        }
        hearth_tools::ToolOutput {
            json: json!({ "error": error }).to_string(),
            is_error: true,
        }
    }

    /// After a cancel cut the run short: a write-class call journaled as
    /// started has no outcome and never will; record it as unknown so the
    /// trace says so. (Its task was aborted with the run's future.)
    pub(super) async fn mark_cut_calls(&self, input: &RunInput) {
        let journal = input.journal(&self.store);
        let steps = match journal.steps(&input.run_id).await {
            Ok(steps) => steps,
            Err(e) => {
                tracing::warn!(run_id = %input.run_id, error = %e, "could not read the journal of a cancelled run");
                return;
            }
        };
        for mut step in steps {
            if step.kind == StepKind::Tool && step.status == StepStatus::Started {
                step.status = StepStatus::Unknown;
                step.finished_at = Some(now_ms());
                tracing::info!(run_id = %input.run_id, tool = %step.name, "a write-class call was cut off by a cancel; its outcome is unknown");
                if let Err(e) = journal.put_step(step).await {
                    tracing::warn!(run_id = %input.run_id, error = %e, "could not journal a cut-off call as unknown");
                }
            }
        }
    }

    fn class_of(&self, name: &str) -> Option<ToolClass> {
        self.tools.get(name).map(|t| t.class())
    }

    /// Checks the limits, journals a write-class call that will run as
    /// started (so a crash mid-call is reported as "outcome unknown", never
    /// repeated) and announces the call.
    async fn begin_call(
        &self,
        input: &RunInput,
        sink: &dyn EventSink,
        p: &mut Progress,
        ToolCall {
            id: call_id,
            name,
            arguments,
        }: ToolCall,
        will_run: bool,
        asked: bool,
    ) -> Result<PendingCall, Stop> {
        check_call_limits(&self.limits, self.max_steps(input), p)?;
        self.check_family(input, p, true)?;
        let arguments = self.redact_tool_json(arguments, "arguments");
        p.tool_calls += 1;
        let index = p.next_index;
        p.next_index += 1;
        let class = self.class_of(&name);
        // The capability is checked before the arguments, also for a tool the
        // run was not offered; an unknown tool stays an "unknown tool" error.
        let refused = match self.tools.get(&name) {
            Some(_)
                if !self
                    .tools
                    .available_on(channel_of(&input.thread_key), &name) =>
            {
                Some(Refusal::Channel)
            }
            Some(_)
                if crate::subagents::is_subagent(&input.thread_key)
                    && !subagent_may_call(input, &name) =>
            {
                Some(Refusal::Subagent)
            }
            // Allowed, but the run's mode does not offer it.
            Some(_)
                if p.allowed.iter().any(|t| t.name == name)
                    && !p.offered.iter().any(|t| t.name == name) =>
            {
                Some(Refusal::Mode)
            }
            Some(t) => match t.capability() {
                Some(cap) if !p.offered.iter().any(|t| t.name == name) => {
                    Some(Refusal::Capability(cap))
                }
                _ => None,
            },
            None => None,
        };
        let decision = match refused {
            Some(Refusal::Mode | Refusal::Subagent) => "not_offered",
            Some(_) => "refused",
            None if asked => "asked",
            None => "ran",
        };
        let step = StepRecord {
            run_id: input.run_id.clone(),
            index,
            kind: StepKind::Tool,
            name: name.clone(),
            status: StepStatus::Started,
            started_at: now_ms(),
            finished_at: None,
            tokens: None,
            payload: json!({
                "call_id": call_id,
                "arguments": arguments,
                // The trace shows which mode decided what about the call.
                "detail": { "mode": input.mode.as_str(), "decision": decision },
            }),
        };
        if class == Some(ToolClass::Write) && will_run {
            input.journal(&self.store).put_step(step.clone()).await?;
        }
        sink.emit(
            RunEventKind::ToolStarted,
            json!({ "call_id": call_id, "name": name }),
        );
        Ok(PendingCall {
            call_id,
            name,
            arguments,
            class,
            refused,
            unconfirmed: false,
            step,
        })
    }

    /// Redacts, journals and announces a finished call, and adds its result.
    async fn end_call(
        &self,
        input: &RunInput,
        sink: &dyn EventSink,
        p: &mut Progress,
        call: PendingCall,
        output: hearth_tools::ToolOutput,
    ) -> Result<(), Stop> {
        let ok = !output.is_error;
        metrics::counter!("hearth_tool_calls_total", "tool" => call.class.map_or_else(|| "unknown".to_owned(), |_| call.name.clone()), "outcome" => if ok { "ok" } else { "error" }).increment(1);
        // Tool output is outside content: secrets in it never reach the
        // model, the journal or the history.
        let output = self.redact_tool_json(output.json, "result");
        let end = match (call.refused, call.unconfirmed, ok) {
            (Some(_), _, _) => CallEnd::Refused,
            (None, true, _) => CallEnd::NotConfirmed,
            (None, false, true) => CallEnd::Ok,
            (None, false, false) => CallEnd::Error,
        };
        let mut step = call.step;
        step.status = if ok {
            StepStatus::Succeeded
        } else {
            StepStatus::Failed
        };
        step.finished_at = Some(now_ms());
        step.payload["output"] = Value::String(output.clone());
        if let Some(why) = end.not_run() {
            step.payload["not_run"] = Value::from(why);
        }
        input.journal(&self.store).put_step(step).await?;
        p.ends.push((call.call_id.clone(), end));
        sink.emit(
            RunEventKind::ToolFinished,
            json!({ "call_id": call.call_id, "name": call.name, "ok": ok }),
        );
        push_tool_result(&mut p.scratch, call.call_id, output);
        Ok(())
    }
}

/// Fails the run when one more tool call would pass a limit.
fn check_call_limits(limits: &Limits, max_steps: u32, p: &Progress) -> Result<(), Stop> {
    if p.tool_calls >= limits.max_tool_calls {
        return Err(limit(format!(
            "the model asked for more than max_tool_calls = {} tool calls",
            limits.max_tool_calls
        )));
    }
    if p.next_index >= max_steps {
        return Err(limit(format!(
            "the run reached max_steps = {max_steps} without finishing"
        )));
    }
    Ok(())
}

/// A tool call the model asked for and no result answers yet, as the
/// model sent it (the arguments are raw JSON text, not yet redacted).
pub(super) struct ToolCall {
    /// The model's id for the call, which its result must echo.
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: String,
}

/// A tool call announced and journaled, not yet finished.
struct PendingCall {
    call_id: String,
    name: String,
    arguments: String,
    class: Option<ToolClass>,
    /// The capability the user lacks, when the call is refused.
    refused: Option<Refusal>,
    /// The user did not confirm it (declined, moved on, or let it expire).
    unconfirmed: bool,
    step: StepRecord,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CallEnd {
    /// It ran and answered.
    Ok,
    /// It ran (or could not run: bad arguments, unknown tool) and failed.
    Error,
    /// The user may not make it (a capability, or not on this channel).
    Refused,
    /// It needed the user's confirmation and did not get it.
    NotConfirmed,
}

impl CallEnd {
    /// Why it did not run, as journaled (`None` when it ran).
    pub(super) fn not_run(self) -> Option<&'static str> {
        match self {
            Self::Refused => Some("refused"),
            Self::NotConfirmed => Some("not_confirmed"),
            Self::Ok | Self::Error => None,
        }
    }
}

/// Why a call is not run.
#[derive(Clone, Copy)]
enum Refusal {
    /// The user lacks this capability.
    Capability(&'static str),
    /// The run's channel does not have the tool.
    Channel,
    /// The run's permission mode does not offer it (`deny`, `plan`).
    Mode,
    /// The run is a sub-agent, which uses only the tools its parent gave it.
    Subagent,
}

/// Whether a sub-agent's run may call `name`: when its parent chose tools,
/// only those. Its write-class calls ask the parent's user, in the parent's
/// conversation, as the parent's would (the mode carried over decides).
fn subagent_may_call(input: &RunInput, name: &str) -> bool {
    input
        .tools
        .as_ref()
        .is_none_or(|only| only.iter().any(|n| n == name))
}

/// The tools a run's user may use, and of those the ones its mode offers.
pub(super) type Offer = (Arc<[hearth_core::ToolSpec]>, Arc<[hearth_core::ToolSpec]>);

/// Appends a tool result to the trailing tool message, starting one if needed.
pub(super) fn push_tool_result(scratch: &mut Vec<Message>, call_id: String, output: String) {
    let part = Content::ToolResult { call_id, output };
    match scratch.last_mut() {
        Some(m) if m.role == Role::Tool => m.content.push(part),
        _ => scratch.push(Message {
            role: Role::Tool,
            content: vec![part],
        }),
    }
}
