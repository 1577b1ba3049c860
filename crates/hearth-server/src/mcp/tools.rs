//! The tools hearth offers over MCP, and the rmcp `ServerHandler` that
//! serves them. Every tool is a call on `Runtime`, the same calls the `/v1`
//! handlers make; the caller acts as `mcp:user:<token name>`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use hearth_core::records::RunFilter;
use hearth_core::{DeliveryMode, Inbound, RunEnvelope, RunStatus, ThreadKey, UserKey, rfc3339};
use hearth_runtime::{Runtime, RuntimeError, WaitOutcome};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::auth::Caller;

/// Thread of `send_message` when the caller names none.
const DEFAULT_THREAD: &str = "mcp:default";
const DEFAULT_WAIT_SECS: u64 = 60;
const MAX_WAIT_SECS: u64 = 600;
/// How many of the newest runs `list_threads` reads to find the active threads.
const THREAD_SCAN_RUNS: u32 = 1000;

/// The user key an MCP caller acts as.
pub fn user_key(caller: &Caller) -> String {
    match caller {
        Caller::Token(name) => format!("mcp:user:{name}"),
        Caller::Member { user_key, .. } => user_key.clone(),
        Caller::Local => "mcp:user:local".into(),
    }
}

/// One MCP session's handler (rmcp makes one per session).
#[derive(Clone)]
pub struct HearthMcp {
    runtime: Runtime,
    tools: Arc<Vec<Tool>>,
}

impl HearthMcp {
    /// A handler over `runtime` offering `tools` (see [`tool_list`]).
    pub fn new(runtime: Runtime, tools: Arc<Vec<Tool>>) -> Self {
        Self { runtime, tools }
    }
}

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(map) => Arc::new(map),
        // Only literal objects below reach this function.
        _ => Arc::new(JsonObject::new()),
    }
}

/// The tools' definitions, built once per server.
pub fn tool_list() -> Arc<Vec<Tool>> {
    let read = |title: &str| ToolAnnotations::with_title(title).read_only(true);
    Arc::new(vec![
        Tool::new(
            "send_message",
            "Send a message to the hearth agent on a thread and (by default) wait for its \
             answer. Returns the answer as text and the run envelope as structured content. \
             A run that needs a confirmation returns with status awaiting_confirmation; \
             send `confirm <token>` or `deny <token>` on the same thread to answer it.",
            schema(json!({
                "type": "object",
                "properties": {
                    "thread_key": {"type": "string", "description": "Conversation thread, e.g. mcp:default", "default": DEFAULT_THREAD},
                    "text": {"type": "string", "minLength": 1, "description": "The message"},
                    "wait": {"type": "boolean", "default": true, "description": "Wait for the answer"},
                    "wait_timeout_secs": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECS, "default": DEFAULT_WAIT_SECS}
                },
                "required": ["text"],
                "additionalProperties": false
            })),
        )
        .annotate(ToolAnnotations::with_title("Send a message").read_only(false).destructive(false)),
        Tool::new(
            "get_run",
            "One run's envelope: status, answer, error or pending confirmation.",
            schema(json!({
                "type": "object",
                "properties": {"run_id": {"type": "string", "minLength": 1}},
                "required": ["run_id"],
                "additionalProperties": false
            })),
        )
        .annotate(read("Get a run")),
        Tool::new(
            "list_threads",
            "Threads with recent runs, most recently active first.",
            schema(json!({
                "type": "object",
                "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}},
                "additionalProperties": false
            })),
        )
        .annotate(read("List threads")),
        Tool::new(
            "memory_search",
            "Search what hearth remembers about you (your user-wide memories, plus those of \
             `thread_key` when given), best match first.",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1},
                    "thread_key": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        )
        .annotate(read("Search memory")),
        Tool::new(
            "list_tools",
            "The tools hearth's agent can use (on `channel` when given), with their class \
             (read or write) and the capability they need.",
            schema(json!({
                "type": "object",
                "properties": {"channel": {"type": "string"}},
                "additionalProperties": false
            })),
        )
        .annotate(read("List hearth's tools")),
    ])
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendMessage {
    thread_key: Option<String>,
    text: String,
    wait: Option<bool>,
    wait_timeout_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetRun {
    run_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListThreads {
    limit: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemorySearch {
    query: String,
    thread_key: Option<String>,
    limit: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListTools {
    channel: Option<String>,
}

/// A tool call that failed in a way the caller should read (MCP: a result
/// with `isError`, not a protocol error, so the model sees the message).
struct ToolFailure(String);

impl From<RuntimeError> for ToolFailure {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::Store(_) => {
                tracing::error!(error = %e, "an MCP tool call failed in the store");
                Self("hearth could not complete the call (an internal error; see its log)".into())
            }
            other => Self(other.to_string()),
        }
    }
}

fn args<T: DeserializeOwned>(arguments: Option<JsonObject>) -> Result<T, ToolFailure> {
    let v = Value::Object(arguments.unwrap_or_default());
    serde_json::from_value(v).map_err(|e| ToolFailure(format!("invalid arguments: {e}")))
}

fn envelope_json(env: &RunEnvelope) -> Value {
    serde_json::to_value(env).unwrap_or(Value::Null)
}

/// The answer of a run as a tool result: its text when it succeeded, what
/// happened otherwise; the envelope always as structured content.
fn run_result(env: &RunEnvelope) -> CallToolResult {
    let (text, is_error) = match env.status {
        RunStatus::Succeeded => (
            env.output
                .as_ref()
                .map(|o| o.text.clone())
                .unwrap_or_default(),
            false,
        ),
        RunStatus::Failed => (
            match &env.error {
                Some(e) => format!("run {} failed ({}): {}", env.run_id, e.code, e.message),
                None => format!("run {} failed", env.run_id),
            },
            true,
        ),
        RunStatus::Cancelled => (format!("run {} was cancelled", env.run_id), true),
        RunStatus::AwaitingConfirmation => (
            match &env.confirmation {
                Some(c) => format!(
                    "run {} awaits confirmation of {}: {}. Send `confirm {}` or `deny {}` on thread {}.",
                    env.run_id,
                    c.tool,
                    c.summary,
                    c.token.as_deref().unwrap_or("<token>"),
                    c.token.as_deref().unwrap_or("<token>"),
                    env.thread_key
                ),
                None => format!("run {} awaits confirmation", env.run_id),
            },
            false,
        ),
        RunStatus::Queued | RunStatus::Running => (
            format!(
                "run {} is {}; ask get_run for its answer later",
                env.run_id,
                env.status.as_str()
            ),
            false,
        ),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(envelope_json(env));
    result.is_error = Some(is_error);
    result
}

fn structured(v: Value) -> CallToolResult {
    CallToolResult::structured(v)
}

impl HearthMcp {
    async fn send_message(
        &self,
        caller: &Caller,
        a: SendMessage,
    ) -> Result<CallToolResult, ToolFailure> {
        let wait_secs = a.wait_timeout_secs.unwrap_or(DEFAULT_WAIT_SECS);
        if wait_secs > MAX_WAIT_SECS {
            return Err(ToolFailure(format!(
                "wait_timeout_secs must be at most {MAX_WAIT_SECS}"
            )));
        }
        let env = self
            .runtime
            .ingest(Inbound {
                source: "mcp".into(),
                thread_key: ThreadKey::new(a.thread_key.as_deref().unwrap_or(DEFAULT_THREAD))
                    .map_err(RuntimeError::from)?,
                user_key: UserKey::new(user_key(caller)).map_err(RuntimeError::from)?,
                text: a.text,
                delivery_mode: DeliveryMode::FollowUp,
                idempotency_key: None,
                scope: None,
                roles: Vec::new(),
            })
            .await?;
        if !a.wait.unwrap_or(true) {
            return Ok(run_result(&env));
        }
        let env = match self
            .runtime
            .wait(&env.run_id, Duration::from_secs(wait_secs))
            .await?
        {
            WaitOutcome::Finished(env) | WaitOutcome::Pending(env) => env,
        };
        Ok(run_result(&env))
    }

    async fn get_run(&self, a: GetRun) -> Result<CallToolResult, ToolFailure> {
        let env = self.runtime.get_run(&a.run_id).await?;
        Ok(structured(envelope_json(&env)))
    }

    /// Threads seen in the newest runs: there is no thread table to list,
    /// and a thread nobody wrote to lately is not what a client looks for.
    async fn list_threads(&self, a: ListThreads) -> Result<CallToolResult, ToolFailure> {
        let limit = a.limit.unwrap_or(50).clamp(1, 200) as usize;
        let runs = self
            .runtime
            .list_runs(&RunFilter {
                thread_key: None,
                status: None,
                limit: THREAD_SCAN_RUNS,
                ..Default::default()
            })
            .await?;
        let mut order: Vec<String> = Vec::new();
        let mut seen: BTreeMap<String, (usize, &RunEnvelope)> = BTreeMap::new();
        for run in &runs {
            match seen.get_mut(&run.thread_key) {
                Some((count, _)) => *count += 1,
                None => {
                    order.push(run.thread_key.clone());
                    seen.insert(run.thread_key.clone(), (1, run));
                }
            }
        }
        let threads: Vec<Value> = order
            .iter()
            .take(limit)
            .filter_map(|key| seen.get(key))
            .map(|(count, last)| {
                json!({
                    "thread_key": last.thread_key,
                    "last_run_id": last.run_id,
                    "last_status": last.status.as_str(),
                    "last_active_at": last.updated_at,
                    "recent_runs": count,
                })
            })
            .collect();
        Ok(structured(json!({ "threads": threads })))
    }

    async fn memory_search(
        &self,
        caller: &Caller,
        a: MemorySearch,
    ) -> Result<CallToolResult, ToolFailure> {
        let limit = a.limit.unwrap_or(10).clamp(1, 100);
        let hits = self
            .runtime
            .search_memories(&user_key(caller), a.thread_key.as_deref(), &a.query, limit)
            .await?;
        let memories: Vec<Value> = hits
            .iter()
            .map(|h| {
                json!({
                    "id": h.memory.id,
                    "text": h.memory.text,
                    "thread_key": h.memory.thread_key,
                    "created_at": rfc3339(h.memory.created_at),
                    "score": h.score,
                })
            })
            .collect();
        Ok(structured(json!({ "memories": memories })))
    }

    fn list_tools_of(&self, a: ListTools) -> CallToolResult {
        let tools: Vec<Value> = self
            .runtime
            .tools(a.channel.as_deref().filter(|c| !c.is_empty()))
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "class": t.class,
                    "capability": t.capability,
                })
            })
            .collect();
        structured(json!({ "tools": tools }))
    }

    async fn dispatch(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResult, ToolFailure> {
        match name {
            "send_message" => self.send_message(caller, args(arguments)?).await,
            "get_run" => self.get_run(args(arguments)?).await,
            "list_threads" => self.list_threads(args(arguments)?).await,
            "memory_search" => self.memory_search(caller, args(arguments)?).await,
            "list_tools" => Ok(self.list_tools_of(args(arguments)?)),
            other => Err(ToolFailure(format!("unknown tool {other:?}"))),
        }
    }
}

/// Who is calling: set by `/mcp`'s auth layer on the HTTP request, whose
/// parts rmcp hands to every request it serves.
fn caller_of(ctx: &RequestContext<RoleServer>) -> Option<Caller> {
    ctx.extensions
        .get::<Parts>()
        .and_then(|p| p.extensions.get::<Caller>())
        .cloned()
}

impl ServerHandler for HearthMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hearth", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "hearth is a self-hosted AI agent gateway. send_message talks to its agent on \
                 a thread (history is kept per thread); get_run, list_threads, memory_search \
                 and list_tools read its state.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.get_tool(&request.name).is_none() {
            // The spec's protocol error for a tool that does not exist.
            return Err(ErrorData::invalid_params(
                format!("unknown tool {:?}", request.name),
                None,
            ));
        }
        // Without the HTTP layer's mark the request did not come through
        // `/mcp`'s auth: refuse rather than act as anyone.
        let Some(caller) = caller_of(&context) else {
            return Err(ErrorData::internal_error(
                "the caller is unknown (no authenticated HTTP request)",
                None,
            ));
        };
        let result = match self
            .dispatch(&caller, &request.name, request.arguments)
            .await
        {
            Ok(r) => r,
            Err(ToolFailure(message)) => CallToolResult::error(vec![ContentBlock::text(message)]),
        };
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use hearth_core::{Confirmation, RunError, RunOutput};

    use super::*;

    fn envelope(status: RunStatus) -> RunEnvelope {
        RunEnvelope {
            run_id: "run_1".into(),
            thread_key: "mcp:t".into(),
            user_key: "mcp:user:local".into(),
            status,
            output: None,
            error: None,
            confirmation: None,
            model: None,
            requested_model: None,
            source: "mcp".into(),
            job_id: None,
            scheduled_at: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            parent_run_id: None,
            children: Vec::new(),
        }
    }

    fn text(r: &CallToolResult) -> String {
        serde_json::to_value(&r.content).unwrap()[0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn a_run_becomes_its_answer_or_what_happened_with_the_envelope_beside() {
        let mut ok = envelope(RunStatus::Succeeded);
        ok.output = Some(RunOutput { text: "42".into() });
        let r = run_result(&ok);
        assert_eq!((text(&r).as_str(), r.is_error), ("42", Some(false)));
        assert_eq!(
            r.structured_content,
            Some(serde_json::to_value(&ok).unwrap())
        );

        let mut failed = envelope(RunStatus::Failed);
        failed.error = Some(RunError {
            code: "provider_error".into(),
            message: "down".into(),
        });
        let r = run_result(&failed);
        assert_eq!(r.is_error, Some(true));
        assert_eq!(text(&r), "run run_1 failed (provider_error): down");

        let mut waiting = envelope(RunStatus::AwaitingConfirmation);
        waiting.confirmation = Some(Confirmation {
            token: Some("tok9".into()),
            tool: "memory_forget".into(),
            summary: "forget memory 3".into(),
            expires_at: "2026-01-01T00:10:00Z".into(),
        });
        let r = run_result(&waiting);
        assert_eq!(r.is_error, Some(false));
        let t = text(&r);
        assert!(
            t.contains("`confirm tok9`") && t.contains("thread mcp:t"),
            "{t}"
        );

        let r = run_result(&envelope(RunStatus::Cancelled));
        assert_eq!(r.is_error, Some(true));
        let r = run_result(&envelope(RunStatus::Queued));
        assert!(text(&r).contains("get_run"), "{}", text(&r));
    }

    #[test]
    fn callers_act_as_mcp_users() {
        assert_eq!(user_key(&Caller::Token("laptop".into())), "mcp:user:laptop");
        assert_eq!(user_key(&Caller::Local), "mcp:user:local");
    }

    #[test]
    fn every_tool_schema_is_an_object_schema() {
        for t in tool_list().iter() {
            assert_eq!(
                t.input_schema.get("type"),
                Some(&json!("object")),
                "{}",
                t.name
            );
        }
    }
}
