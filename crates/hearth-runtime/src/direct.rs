//! Direct tool calls: a person asks for one tool call (`hearth mcp call`,
//! `POST /v1/mcp/servers/{name}/call`) instead of a model. It is a run like
//! any other (stored, queued, claimed, recovered, cancellable, followed over
//! SSE), on a thread of its own, whose engine step is the call alone
//! (`Engine::call_tool`): the same capability checks, confirmation and
//! journal as a model's call, and an audit record. A write-class call
//! therefore waits in `awaiting_confirmation` for `POST
//! /v1/confirmations/{token}` like a model's.
//!
//! The call is stored as the run's input (JSON) under the source
//! [`DIRECT_SOURCE`], which ingest refuses from outside, so a recovered run
//! is known for what it is.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use hearth_agent::firewall::SecretScanner;
use hearth_agent::{DirectCall, Outcome, RunInput};
use hearth_core::{
    Inbound, RunEnvelope, RunError, RunEventKind, RunStatus, ThinkingLevel, ThreadKey, UserKey,
};
use hearth_store::RunRecord;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::error::{Result, RuntimeError};
use crate::execute::LogSink;
use crate::runtime::Runtime;
use crate::supplied::RunOverrides;

/// The source of a direct call's run. Reserved: a message may not claim it.
pub const DIRECT_SOURCE: &str = "direct";

/// A tool call a person asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRequest {
    /// The registry's name for the tool (`<server>__<tool>` for MCP).
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// Who asks: the capabilities checked, and who may confirm.
    pub user_key: UserKey,
    /// The caller is the operator (an API token holder, or the local user
    /// of a loopback hearth without tokens): every capability is theirs, as
    /// an admin's. A write-class call still needs a confirmation.
    pub operator: bool,
}

/// Runs accepted as direct calls and not started yet (and those found by a
/// recovery sweep): they are claimed without preparing a model.
#[derive(Default)]
pub(crate) struct DirectRuns(Mutex<HashSet<String>>);

impl DirectRuns {
    pub(crate) fn put(&self, run_id: &str) {
        let mut set = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        set.insert(run_id.to_owned());
    }

    /// Whether `run_id` is a direct call; forgets it (a run starts once).
    pub(crate) fn take(&self, run_id: &str) -> bool {
        let mut set = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        set.remove(run_id)
    }
}

impl Runtime {
    /// Accepts a direct tool call as a run of its own thread
    /// (`api:direct:<id>`), stored before this returns; the envelope is the
    /// queued run's. The tool must exist (`InvalidInput` otherwise); whether
    /// the user may call it, and whether it needs a confirmation, is decided
    /// as the run executes, as for a model's call. Secrets in the arguments
    /// are redacted before they are stored, as in a message.
    pub async fn call_tool(&self, req: ToolCallRequest) -> Result<RunEnvelope> {
        if self.is_shutting_down() {
            return Err(RuntimeError::ShuttingDown);
        }
        if self.inner.live().engine.tools().get(&req.tool).is_none() {
            return Err(RuntimeError::InvalidInput(format!(
                "no tool is named {:?}; GET /v1/tools lists them",
                req.tool
            )));
        }
        let queued = self.inner.scheduler.len();
        if queued >= self.inner.options.max_queued {
            return Err(RuntimeError::Overloaded {
                queued,
                retry_after_secs: 1,
            });
        }
        let mut arguments = Value::Object(req.arguments);
        if SecretScanner::new().redact_json(&mut arguments) > 0 {
            tracing::info!(tool = %req.tool, "redacted secrets from a direct tool call's arguments");
        }
        let stored = json!({
            "tool": req.tool,
            "arguments": arguments,
            "operator": req.operator,
        });
        let inbound = Inbound {
            source: DIRECT_SOURCE.to_owned(),
            thread_key: ThreadKey::new(format!("api:direct:{}", uuid::Uuid::now_v7().simple()))?,
            user_key: req.user_key,
            text: stored.to_string(),
            delivery_mode: hearth_core::DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        };
        self.ingest_stored(inbound, RunOverrides::default(), true)
            .await
    }

    /// Executes a claimed direct call's run to its end.
    pub(crate) async fn run_direct(&self, run: &RunRecord, cancel: CancellationToken) {
        let inner = &self.inner;
        let log = inner.bus.reopen(&run.run_id, run.status);
        log.push(
            RunEventKind::Started,
            json!({ "run_id": run.run_id, "model": null }),
            Some(RunStatus::Running),
        );
        let Some(call) = stored_call(&run.input) else {
            let outcome = Outcome::Failed(RunError {
                code: "invalid_request".into(),
                message: format!(
                    "run {} is a direct tool call whose stored call cannot be read",
                    run.run_id
                ),
            });
            self.finish(run, &log, outcome, Vec::new(), Vec::new(), Vec::new())
                .await;
            return;
        };
        metrics::gauge!("hearth_runs_in_flight").increment(1.0);
        let journal = inner.incognito.store_of_run(&run.run_id);
        let input = RunInput {
            run_id: run.run_id.clone(),
            thread_key: run.thread_key.clone(),
            text: String::new(),
            user_key: run.user_key.clone(),
            scope: run.scope.clone().unwrap_or_else(|| "global".into()),
            roles: run.roles.clone(),
            candidates: Vec::new(),
            thinking: ThinkingLevel::Off,
            cancel,
            steer: None,
            incognito: journal.is_some(),
            journal,
            replies: inner.replies.clone(),
            pinned: false,
            first_step: 0,
            mode: hearth_core::PermissionMode::Ask,
            tools: None,
            max_steps: None,
            asker: None,
            family: None,
            fresh: false,
            history_seen: None,
        };
        let result = inner
            .live()
            .engine
            .call_tool(input, call, &LogSink(&log))
            .await;
        self.finish(
            run,
            &log,
            result.outcome,
            Vec::new(),
            result.steps,
            Vec::new(),
        )
        .await;
        metrics::gauge!("hearth_runs_in_flight").decrement(1.0);
    }
}

/// The call a direct run stored as its input.
fn stored_call(input: &str) -> Option<DirectCall> {
    let v: Value = serde_json::from_str(input).ok()?;
    Some(DirectCall {
        tool: v["tool"].as_str()?.to_owned(),
        arguments: match &v["arguments"] {
            Value::Object(map) => Value::Object(map.clone()).to_string(),
            _ => return None,
        },
        operator: v["operator"].as_bool().unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_call_reads_back_and_anything_else_does_not() {
        let call = stored_call(r#"{"tool":"fk__note","arguments":{"text":"hi"},"operator":true}"#)
            .unwrap();
        assert_eq!(call.tool, "fk__note");
        assert_eq!(call.arguments, r#"{"text":"hi"}"#);
        assert!(call.operator);
        for bad in [
            "",
            "hello",
            "{}",
            r#"{"tool":"t","arguments":[]}"#,
            r#"{"tool":1}"#,
        ] {
            assert!(stored_call(bad).is_none(), "{bad}");
        }
    }
}
