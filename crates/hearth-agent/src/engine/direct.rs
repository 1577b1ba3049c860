//! A tool call a person asks for directly (`hearth mcp call`, `POST
//! /v1/mcp/servers/{name}/call`), not a model: a run whose one step is that
//! call, through the same gate as a model's call. The channel's tools, the
//! user's capabilities, the confirmation of a write-class call and the
//! journal apply as in `run_tools`; no model is called, nothing is added to
//! the thread's history, and every such call leaves an audit record
//! (`tool.direct_call`) with how it ended.

use std::collections::HashSet;

use hearth_core::{RunError, now_ms};
use hearth_store::{AuditEvent, StepKind, StepStatus};
use serde_json::Value;

use super::tools::{CallEnd, ToolCall};
use super::{Engine, EventSink, Progress, RunInput, Stop};
use crate::engine::run_io::{ModelCalls, Outcome, RunResult};
use crate::wall::WallClock;

/// The call id a direct call is journaled (and confirmed) under: a run
/// makes one such call, and its confirmation is found again after a restart
/// by this id.
pub const DIRECT_CALL_ID: &str = "direct";

/// One tool call made by a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectCall {
    /// The registry's name for the tool (`<server>__<tool>` for MCP).
    pub tool: String,
    /// Its arguments: a JSON object, as text.
    pub arguments: String,
    /// The caller is the operator (an API token holder, or the local user
    /// of a loopback hearth without tokens), who holds every capability as
    /// an admin does. Confirmation still applies.
    pub operator: bool,
}

impl Engine {
    /// Runs (or, after a restart, finishes) the run of one direct call. It
    /// succeeds with the tool's output (JSON text) when the tool ran and
    /// answered; it fails with `forbidden` when the user may not make the
    /// call, `not_confirmed` when a write-class call was not confirmed,
    /// `tool_error` when the tool failed, and `outcome_unknown` when hearth
    /// stopped while the call ran (it is never made twice).
    pub async fn call_tool(
        &self,
        input: RunInput,
        call: DirectCall,
        sink: &dyn EventSink,
    ) -> RunResult {
        let cancel = input.cancel.clone();
        let max_wall = self.limits.max_wall;
        let clock = WallClock::new(max_wall);
        let body = self.direct(&input, &call, sink, &clock);
        let super::bounded::Bounded { result, cut } =
            super::bounded::bounded(body, &cancel, &clock, || {
                format!(
                    "the call took longer than max_wall_secs = {} s and was stopped",
                    max_wall.as_secs()
                )
            })
            .await;
        if cut {
            self.mark_cut_calls(&input).await;
        }
        let (outcome, audited) = match result {
            Ok((output, CallEnd::Ok)) => (Outcome::Succeeded(output), "ok"),
            Ok((output, end)) => {
                let (code, audited) = match end {
                    CallEnd::Refused => ("forbidden", "denied"),
                    CallEnd::NotConfirmed => ("not_confirmed", "not_confirmed"),
                    CallEnd::Ok | CallEnd::Error => ("tool_error", "error"),
                };
                let message = error_text(&output);
                (
                    Outcome::Failed(RunError {
                        code: code.to_owned(),
                        message,
                    }),
                    audited,
                )
            }
            Err(Stop::Failed(e)) => {
                let audited = if e.code == "outcome_unknown" {
                    "unknown"
                } else {
                    "failed"
                };
                (Outcome::Failed(e), audited)
            }
            Err(Stop::Cancelled) => (Outcome::Cancelled, "cancelled"),
        };
        self.audit_direct(&input, &call.tool, audited).await;
        RunResult {
            outcome,
            messages: Vec::new(),
            steps: Vec::new(),
            unseen_steer: Vec::new(),
            model_calls: Vec::new(),
        }
    }

    /// The call through the gate; its output (as journaled) and how it ended.
    async fn direct(
        &self,
        input: &RunInput,
        call: &DirectCall,
        sink: &dyn EventSink,
        clock: &WallClock,
    ) -> Result<(String, CallEnd), Stop> {
        let journal = input.journal(&self.store);
        // Resumed after a restart: a call that was made is not made again.
        for step in journal.steps(&input.run_id).await? {
            if step.kind != StepKind::Tool || step.payload["call_id"] != DIRECT_CALL_ID {
                continue;
            }
            let output = step.payload["output"].as_str().map(str::to_owned);
            let end = match step.payload["not_run"].as_str() {
                Some("refused") => CallEnd::Refused,
                Some(_) => CallEnd::NotConfirmed,
                None if step.status == StepStatus::Succeeded => CallEnd::Ok,
                None => CallEnd::Error,
            };
            return match (step.status, output) {
                (StepStatus::Succeeded | StepStatus::Failed, Some(output)) => Ok((output, end)),
                _ => Err(Stop::Failed(RunError {
                    code: "outcome_unknown".into(),
                    message: format!(
                        "hearth stopped while {} was running; the call was not repeated, and it may or may not have happened",
                        call.tool
                    ),
                })),
            };
        }
        // Recovered after a restart, the tool's MCP server or skill may still
        // be starting: wait for it (bounded by its start timeout) rather than
        // call it an unknown tool.
        if let Some(wait) = self.tools.pending(&call.tool)
            && let Err(why) = wait.await
        {
            tracing::warn!(run_id = %input.run_id, tool = %call.tool, error = %why, "the tool's server did not come up");
        }
        let (allowed, offered) = self.offered_tools_as(input, call.operator).await?;
        let mut p = Progress {
            allowed,
            offered,
            pending_steer: Vec::new(),
            seen_steer: HashSet::new(),
            history: Vec::new(),
            history_ids: Vec::new(),
            history_tokens: 0,
            history_as_read: false,
            summary: None,
            supplied: None,
            tools_size: None,
            calls: ModelCalls::default(),
            scratch: Vec::new(),
            next_index: input.first_step,
            llm_calls: 0,
            tool_calls: 0,
            ends: Vec::new(),
            direct: true,
        };
        let asked = ToolCall {
            id: DIRECT_CALL_ID.to_owned(),
            name: call.tool.clone(),
            arguments: call.arguments.clone(),
        };
        self.run_tools(input, sink, &mut p, vec![asked], clock)
            .await?;
        let output = p
            .scratch
            .iter()
            .flat_map(|m| &m.content)
            .find_map(|c| match c {
                hearth_core::Content::ToolResult { call_id, output }
                    if call_id == DIRECT_CALL_ID =>
                {
                    Some(output.clone())
                }
                _ => None,
            })
            .unwrap_or_default();
        let end = p
            .ends
            .iter()
            .find(|(id, _)| id == DIRECT_CALL_ID)
            .map_or(CallEnd::Error, |(_, end)| *end);
        Ok((output, end))
    }

    /// The audit record of a direct call: who, which tool, how it ended.
    async fn audit_direct(&self, input: &RunInput, tool: &str, outcome: &str) {
        let event = AuditEvent {
            at: now_ms(),
            actor: input.user_key.clone(),
            action: "tool.direct_call".into(),
            target: tool.to_owned(),
            outcome: outcome.to_owned(),
            capability: self
                .tools
                .get(tool)
                .and_then(|t| t.capability())
                .map(str::to_owned),
            scope: Some(input.scope.clone()),
        };
        if let Err(e) = self.store.append_audit(event).await {
            tracing::warn!(error = %e, tool, run_id = %input.run_id, "could not write a direct tool call to the audit log");
        }
    }
}

/// The message of an `{"error": ...}` output, else the output itself.
fn error_text(output: &str) -> String {
    match serde_json::from_str::<Value>(output) {
        Ok(Value::Object(map)) => match map.get("error") {
            Some(Value::String(s)) => s.clone(),
            _ => output.to_owned(),
        },
        _ => output.to_owned(),
    }
}
