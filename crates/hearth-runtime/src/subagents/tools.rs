//! The model's sub-agent tools: `delegate`, `delegate_status`,
//! `delegate_wait` and `delegate_cancel`, behind `agents.delegate`. All are
//! read-class for the parent: a child's own calls are judged on their own
//! (its write-class calls ask the parent's user, in the parent's
//! conversation, under the parent's permission mode).
//!
//! Made with the runtime and holding it weakly, as the job tools do.

use std::sync::{Arc, Weak};
use std::time::Duration;

use hearth_agent::subagents::depth;
use hearth_core::{DeliveryMode, Inbound, RunStatus, ThreadKey, ToolSpec, UserKey};
use hearth_store::RunRecord;
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError};
use serde_json::{Value, json};

use crate::runtime::{Inner, Runtime, WaitOutcome};
use crate::supplied::RunOverrides;

/// The capability every sub-agent tool needs.
const CAPABILITY: &str = "agents.delegate";

/// The tool that starts a child.
pub(crate) const DELEGATE: &str = "delegate";

/// How much of the tool timeout a waiting call leaves for its answer to
/// travel back: past it the call returns the handle, still running.
const WAIT_MARGIN: Duration = Duration::from_secs(1);

/// How soon a wait for a child with no event log here looks again.
const RECHECK: Duration = Duration::from_millis(50);

/// The runtime the sub-agent tools act on.
#[derive(Clone)]
pub(crate) struct SubagentTools {
    runtime: Weak<Inner>,
}

impl SubagentTools {
    /// The sub-agent tools of the runtime being made over `runtime`.
    pub(crate) fn new(runtime: Weak<Inner>) -> Self {
        Self { runtime }
    }

    /// The four tools.
    pub(crate) fn tools(&self) -> Vec<Arc<dyn Tool>> {
        [Kind::Delegate, Kind::Status, Kind::Wait, Kind::Cancel]
            .into_iter()
            .map(|kind| {
                Arc::new(SubagentTool {
                    spec: kind.spec(),
                    kind,
                    tools: self.clone(),
                }) as Arc<dyn Tool>
            })
            .collect()
    }

    fn runtime(&self) -> Result<Runtime, ToolError> {
        self.runtime
            .upgrade()
            .map(|inner| Runtime { inner })
            .ok_or_else(|| ToolError("sub-agents are not available in this process".into()))
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Delegate,
    Status,
    Wait,
    Cancel,
}

impl Kind {
    fn spec(self) -> ToolSpec {
        let handle = json!({
            "type": "object",
            "properties": {
                "handle": {"type": "string", "minLength": 1,
                           "description": "The handle `delegate` returned"}
            },
            "required": ["handle"],
            "additionalProperties": false
        });
        let (name, description, parameters) = match self {
            Self::Delegate => (
                DELEGATE,
                "Hand a self-contained task to a sub-agent: a separate run that sees only \
                 `task` (include everything it needs), may use a cheaper model, looks things \
                 up with read-only tools and answers. `wait: true` (default) returns its \
                 answer; `wait: false` returns a handle at once so several sub-agents work in \
                 parallel (then `delegate_wait` each handle). A sub-agent's actions that \
                 change something ask the user first, as yours do, and its steps count \
                 against your limits.",
                json!({
                    "type": "object",
                    "properties": {
                        "task": {"type": "string", "minLength": 1, "maxLength": 32768,
                                 "description": "What the sub-agent must do, with all the context it needs"},
                        "model": {"type": "string", "minLength": 1,
                                  "description": "`<provider>/<model>` for the sub-agent, or \"auto\" to let the router choose; default: your own model"},
                        "tools": {"type": "array", "items": {"type": "string"}, "maxItems": 64,
                                  "description": "Only these of your tools; default: all of them"},
                        "wait": {"type": "boolean", "description": "Wait for the answer (default true)"},
                        "max_steps": {"type": "integer", "minimum": 1,
                                      "description": "At most this many steps (model and tool calls) for the sub-agent; default and ceiling: the configured limit"}
                    },
                    "required": ["task"],
                    "additionalProperties": false
                }),
            ),
            Self::Status => (
                "delegate_status",
                "The status of a sub-agent started with `delegate`, and its answer once it \
                 has one.",
                handle,
            ),
            Self::Wait => (
                "delegate_wait",
                "Wait for a sub-agent started with `delegate` and return its answer (or its \
                 status, if it is still running when the wait ends).",
                handle,
            ),
            Self::Cancel => (
                "delegate_cancel",
                "Stop a sub-agent started with `delegate`.",
                handle,
            ),
        };
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

/// One of the sub-agent tools.
struct SubagentTool {
    spec: ToolSpec,
    kind: Kind,
    tools: SubagentTools,
}

#[async_trait::async_trait]
impl Tool for SubagentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Read
    }

    fn capability(&self) -> Option<&'static str> {
        Some(CAPABILITY)
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let rt = self.tools.runtime()?;
        match self.kind {
            Kind::Delegate => rt.delegate(ctx, &args).await,
            Kind::Status => {
                let child = rt.own_child(ctx, &args).await?;
                Ok(shown(&child))
            }
            Kind::Wait => {
                let child = rt.own_child(ctx, &args).await?;
                rt.await_child(&child.run_id).await
            }
            Kind::Cancel => {
                let child = rt.own_child(ctx, &args).await?;
                rt.cancel(&child.run_id).await.map_err(failed)?;
                let child = rt.run_record(&child.run_id).await.map_err(failed)?;
                Ok(shown(&child))
            }
        }
    }
}

/// What a parent may narrow for its child.
struct ChildLimits {
    tools: Option<Vec<String>>,
    max_steps: Option<u32>,
}

/// The `tools` argument of a `delegate` call.
pub(super) fn tools_arg(args: &Value) -> Result<Option<Vec<String>>, ToolError> {
    let refused = || ToolError("`tools` must be a list of tool names".into());
    match args.get("tools") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|t| t.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .map(Some)
            .ok_or_else(refused),
        Some(_) => Err(refused()),
    }
}

/// The `max_steps` argument of a `delegate` call.
pub(super) fn max_steps_arg(args: &Value) -> Result<Option<u32>, ToolError> {
    match args.get("max_steps") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .map(|n| Some(u32::try_from(n).unwrap_or(u32::MAX)))
            .ok_or_else(|| ToolError("`max_steps` must be a whole number of at least 1".into())),
    }
}

fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError(e.to_string())
}

/// What the parent's model sees of a child: its handle and status, and its
/// answer or error once it has one.
fn shown(child: &RunRecord) -> Value {
    let mut v = json!({ "handle": child.run_id, "status": child.status.as_str() });
    match child.status {
        RunStatus::Succeeded => v["answer"] = json!(child.output.clone().unwrap_or_default()),
        RunStatus::Failed => {
            v["error"] = json!(child.error_message.clone().unwrap_or_default());
        }
        RunStatus::Cancelled => {}
        RunStatus::AwaitingConfirmation => {
            v["note"] = json!(
                "waiting for the user to confirm one of its actions: call delegate_wait with \
                 the handle"
            );
        }
        _ => v["note"] = json!("still running: call delegate_wait with the handle"),
    }
    v
}

/// What [`shown`] says of a child whose event log ended with its terminal
/// event; `None` when it has no such event (its end was learnt without one).
fn shown_from_end(child_id: &str, log: &crate::bus::RunLog) -> Option<Value> {
    let status = log.status();
    if !status.is_terminal() {
        return None;
    }
    let end = log.since(log.last_seq().saturating_sub(1)).pop()?;
    if !end.kind.is_terminal() {
        return None;
    }
    let mut v = json!({ "handle": child_id, "status": status.as_str() });
    match status {
        RunStatus::Succeeded => v["answer"] = end.data["output"]["text"].clone(),
        RunStatus::Failed => v["error"] = end.data["error"]["message"].clone(),
        _ => {}
    }
    // As the store would show it: an absent text is an empty one.
    for field in ["answer", "error"] {
        if v.get(field).is_some_and(Value::is_null) {
            v[field] = json!("");
        }
    }
    Some(v)
}

impl Runtime {
    /// `delegate`: starts (or, for a resumed parent, finds) the child of
    /// this call, then waits for it when asked to.
    async fn delegate(&self, ctx: &ToolContext, args: &Value) -> Result<Value, ToolError> {
        let task = args
            .get("task")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| ToolError("`task` is required and must be a non-empty string".into()))?;
        let max_steps = max_steps_arg(args)?;
        let wait = args.get("wait").and_then(Value::as_bool).unwrap_or(true);
        let tools = tools_arg(args)?;
        let live = self.inner.live();
        let limits = &live.config.agent.subagents;
        let level = depth(&ctx.thread_key);
        if level >= limits.max_depth {
            return Err(ToolError(format!(
                "delegate refused: this run is {level} delegation(s) deep and [agent.subagents] \
                 max_depth = {}; do the task yourself",
                limits.max_depth
            )));
        }
        if ctx.call_id.is_empty() {
            return Err(ToolError(
                "delegate can only be called by a run's model".into(),
            ));
        }
        // The parent is the run calling: as it was claimed here (its
        // thread, number, user, scope, roles, mode and model do not change
        // while it runs), else from the store.
        let parent = match self.inner.families.record_of(&ctx.run_id) {
            Some(parent) => parent,
            None => Arc::new(self.run_record(&ctx.run_id).await.map_err(failed)?),
        };
        let store = self.family_store(&parent).await.map_err(failed)?;
        // One child at a time per parent: the next one's number depends on
        // the ones before.
        let family = self.inner.families.lock_of(&parent.run_id);
        let numbering = family.lock().await;
        let slot = self
            .slot(&store, &parent, &ctx.call_id)
            .await
            .map_err(failed)?;
        let child_id = match slot.existing {
            Some(child) => child,
            None => {
                let started = slot.started;
                if started >= limits.max_children as usize {
                    return Err(ToolError(format!(
                        "delegate refused: this run has started {started} sub-agents and \
                         [agent.subagents] max_children = {}; do the rest yourself",
                        limits.max_children
                    )));
                }
                let running = slot.running;
                if running >= limits.max_parallel as usize {
                    return Err(ToolError(format!(
                        "delegate refused: {running} sub-agents of this run are still running \
                         and [agent.subagents] max_parallel = {}; delegate_wait for one first",
                        limits.max_parallel
                    )));
                }
                self.check_family_left(&parent.run_id)?;
                let model = match args.get("model").and_then(Value::as_str) {
                    None => parent.model.clone(),
                    // The router picks by the child's task when it routes;
                    // else the child runs on the parent's model.
                    Some("auto") if Self::routes_runs(&live) => None,
                    Some("auto") => parent.model.clone(),
                    Some(m) => {
                        let (m, _) = live.catalog.resolve(m).map_err(|e| {
                            ToolError(format!("delegate refused: model {m:?}: {e}"))
                        })?;
                        Some(m.to_string())
                    }
                };
                let limits = ChildLimits { tools, max_steps };
                let child = self
                    .start_child(ctx, &parent, (&slot.key, &slot.thread), task, model, limits)
                    .await?;
                self.inner.families.add_child(
                    &parent.run_id,
                    super::KnownChild {
                        key: slot.key,
                        run_id: child.clone(),
                    },
                );
                child
            }
        };
        drop(numbering);
        if wait {
            self.await_child(&child_id).await
        } else {
            let child = self.run_record(&child_id).await.map_err(failed)?;
            Ok(shown(&child))
        }
    }

    /// Stores the child run with its model and its parent's permission
    /// mode (its thread is made incognito first when the parent's is). A
    /// child recovered after a restart gets its model again from the
    /// parent's journal (`with_delegated_tools`) and keeps the recorded mode.
    async fn start_child(
        &self,
        ctx: &ToolContext,
        parent: &RunRecord,
        (key, thread): (&str, &str),
        task: &str,
        model: Option<String>,
        ChildLimits { tools, max_steps }: ChildLimits,
    ) -> Result<String, ToolError> {
        let thread_key = ThreadKey::new(thread).map_err(|_| {
            ToolError(format!(
                "delegate refused: the sub-agent's thread key would be too long ({} \
                 characters); delegate from a shallower run",
                thread.chars().count()
            ))
        })?;
        if ctx.incognito {
            self.set_incognito(&thread_key, true)
                .await
                .map_err(failed)?;
        }
        let user_key = UserKey::new(parent.user_key.as_str()).map_err(failed)?;
        let inbound = Inbound {
            source: hearth_core::DELEGATE_SOURCE.into(),
            thread_key,
            user_key,
            text: task.to_owned(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: Some(key.to_owned()),
            scope: parent.scope.clone(),
            roles: parent.roles.clone(),
        };
        let overrides = RunOverrides {
            // Not its user's turn: it answers no confirmation.
            background: true,
            tools,
            max_steps,
            parent_run_id: Some(parent.run_id.clone()),
            // Recorded with the child: its thread keeps no settings.
            model,
            mode: parent.mode.clone(),
            ..RunOverrides::default()
        };
        let env = self
            .ingest_inner(inbound, overrides)
            .await
            .map_err(|e| ToolError(format!("delegate could not start the sub-agent: {e}")))?;
        tracing::info!(parent = %parent.run_id, child = %env.run_id, "sub-agent started");
        Ok(env.run_id)
    }

    /// Waits for a child up to the tool timeout (less a margin), then shows it.
    async fn await_child(&self, child_id: &str) -> Result<Value, ToolError> {
        let timeout = self
            .inner
            .live()
            .engine
            .limits()
            .tool_timeout
            .saturating_sub(WAIT_MARGIN)
            .max(Duration::from_millis(100));
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.inner.bus.get(child_id) {
                // Also through a question it asks the user: the answer
                // resumes it, and this call gets what it then finds.
                Some(log) => {
                    let mut rx = log.subscribe();
                    let _ =
                        tokio::time::timeout(left, rx.wait_for(|(_, st)| st.is_terminal())).await;
                    // The end event says what the store would: no read.
                    if let Some(shown) = shown_from_end(child_id, &log) {
                        return Ok(shown);
                    }
                }
                // A child recovered after a restart has no event log until
                // its worker takes it, and `wait` then answers at once: it
                // is asked again, a little later, until the deadline.
                None => {
                    if let WaitOutcome::Finished(_) =
                        self.wait(child_id, left).await.map_err(failed)?
                    {
                        break;
                    }
                }
            }
            let child = self.run_record(child_id).await.map_err(failed)?;
            if child.status.is_terminal() || tokio::time::Instant::now() >= deadline {
                return Ok(shown(&child));
            }
            tokio::time::sleep(RECHECK.min(left)).await;
        }
        let child = self.run_record(child_id).await.map_err(failed)?;
        Ok(shown(&child))
    }

    /// Refuses a new child of `parent_run_id` when its family has nothing
    /// left of the `[agent]` limits they share (counting this call): the
    /// child would stop before its first answer. What is left bounds the
    /// child as it runs (the engine stops the family when it is spent).
    fn check_family_left(&self, parent_run_id: &str) -> Result<(), ToolError> {
        let Some(family) = self.inner.families.family_of(parent_run_id) else {
            return Ok(());
        };
        let live = self.inner.live();
        let limits = live.engine.limits();
        let spent = family.total();
        let left = limits
            .max_steps
            .saturating_sub(spent.steps.saturating_add(1));
        let calls_left = limits.max_llm_calls.saturating_sub(spent.llm_calls);
        if left == 0 || calls_left == 0 || family.wall_left().is_zero() {
            return Err(ToolError(format!(
                "delegate refused: this run and its sub-agents have taken {} of [agent] \
                 max_steps = {} ({} of max_llm_calls = {}), which they share; too little is \
                 left for a sub-agent: finish the task yourself",
                spent.steps, limits.max_steps, spent.llm_calls, limits.max_llm_calls
            )));
        }
        Ok(())
    }

    /// The child a `delegate_*` call names, refused unless this run started it.
    async fn own_child(&self, ctx: &ToolContext, args: &Value) -> Result<RunRecord, ToolError> {
        let handle = args
            .get("handle")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError("`handle` is required and must be a string".into()))?;
        let not_yours = || {
            ToolError(format!(
                "no sub-agent of this run has the handle {handle:?}; use a handle `delegate` \
                 returned in this run"
            ))
        };
        let child = self.run_record(handle).await.map_err(|_| not_yours())?;
        if super::is_child_of(&child, &ctx.run_id) {
            Ok(child)
        } else {
            Err(not_yours())
        }
    }
}
