//! The MCP servers hearth is a client of: their state, and a direct call of
//! one of their tools (through the runtime, as a run).
//!
//! The servers are the runtime's: it starts, supervises and closes them.

use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use hearth_core::{RunEnvelope, UserKey};
use hearth_runtime::{McpLookupError, ToolCallRequest, WaitOutcome};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath};

/// One server of `GET /v1/mcp/servers`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct McpServerInfo {
    /// Its name in `[mcp.servers.<name>]`.
    pub name: String,
    /// `stdio` or `http`.
    #[schema(pattern = "^(stdio|http)$")]
    pub transport: String,
    /// `starting`, `ready`, `restarting`, `failed` or `disabled`.
    #[schema(pattern = "^(starting|ready|restarting|failed|disabled)$")]
    pub state: String,
    /// Why it last failed, if it did.
    pub last_error: Option<String>,
    /// How many tools it offers (as last listed).
    pub tools: usize,
}

/// `GET /v1/mcp/servers`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct McpServerList {
    /// By name.
    pub servers: Vec<McpServerInfo>,
}

/// `POST /v1/mcp/servers/{name}/call`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpCallRequest {
    /// The server's own name for the tool (not `<server>__<tool>`).
    pub tool: String,
    /// The tool's arguments.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub arguments: serde_json::Map<String, serde_json::Value>,
    /// Who calls: that user's capabilities apply, and they answer the
    /// confirmation. Default: the operator (`api:operator:<token name>`, or
    /// `api:operator:local` on a loopback hearth without tokens), who holds
    /// every capability.
    #[schema(value_type = Option<crate::schemas::Key>)]
    pub user_key: Option<String>,
    /// How long to wait for the call to end, in seconds (default 60, at
    /// most 600; a whole number, `5.0` is 5). A call that waits for a
    /// confirmation answers at once.
    #[schema(minimum = 0, maximum = 600)]
    #[serde(default, deserialize_with = "crate::schemas::whole_u64")]
    pub wait_timeout_secs: Option<u64>,
}

/// The path of `POST /v1/mcp/servers/{name}/call`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ServerName {
    /// The server, as named in `[mcp.servers.<name>]`.
    pub name: String,
}

const DEFAULT_WAIT_SECS: u64 = 60;
const MAX_WAIT_SECS: u64 = 600;

/// Every configured MCP server, with its state and tool count.
#[utoipa::path(get, path = "/v1/mcp/servers", tag = "mcp",
    responses((status = 200, description = "The servers, by name", body = McpServerList)))]
pub async fn servers(State(st): State<AppState>) -> Json<McpServerList> {
    let servers = st.runtime.mcp_servers().into_iter().map(info).collect();
    Json(McpServerList { servers })
}

fn info(s: hearth_runtime::McpServerStatus) -> McpServerInfo {
    McpServerInfo {
        name: s.name,
        transport: s.transport.to_owned(),
        state: s.state.to_owned(),
        last_error: s.last_error,
        tools: s.tools,
    }
}

/// Restarts one MCP server (or executable skill): its connection is
/// closed and a new one opened at once, its tools listed again, with no
/// back-off left from earlier failures. The configuration in force is kept
/// (`POST /v1/config/reload` reads a changed one).
#[utoipa::path(post, path = "/v1/mcp/servers/{name}/restart", tag = "mcp",
    params(ServerName),
    responses((status = 200, description = "The server, starting again", body = McpServerInfo),
        (status = 404, description = "No server has this name", body = crate::dto::ErrorBody)))]
pub async fn restart(
    State(st): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<McpServerInfo>, ApiError> {
    st.runtime.restart_mcp_server(&name).map_err(|e| match e {
        McpLookupError::UnknownServer(m) => ApiError::NotFound(m),
        McpLookupError::Unavailable(m) => ApiError::Unavailable(m),
    })?;
    st.runtime
        .mcp_servers()
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| Json(info(s)))
        .ok_or_else(|| ApiError::NotFound(format!("no MCP server is named {name:?}")))
}

/// Calls one tool of a server directly (`hearth mcp call`), as a run of its
/// own with no model: the same rules as a model's call of the tool. The
/// caller's capabilities are checked (the operator holds every one), a
/// write-class tool waits for a confirmation (`POST
/// /v1/confirmations/{token}`, as the run's `user_key`), and the call is
/// written to the audit log (`tool.direct_call`). The run's `output.text` is
/// the tool's result (JSON); a run that failed says why in `error.code`:
/// `forbidden` (a capability the user lacks), `not_confirmed`, `tool_error`.
#[utoipa::path(post, path = "/v1/mcp/servers/{name}/call", tag = "mcp",
    params(ServerName),
    request_body = McpCallRequest,
    responses(
        (status = 200, description = "The call ended within the wait: the run's envelope (`succeeded` with the tool's result in `output.text`, or `failed`)", body = RunEnvelope),
        (status = 202, description = "The call awaits a confirmation (`awaiting_confirmation`, with the token in `confirmation`) or did not end within the wait: the run's envelope", body = RunEnvelope),
        (status = 400, description = "Bad input", body = crate::dto::ErrorBody),
        (status = 404, description = "No server of that name, or it lists no such tool", body = crate::dto::ErrorBody),
        (status = 503, description = "The server is down and has not listed its tools, or hearth is shutting down or saturated", body = crate::dto::ErrorBody)))]
pub async fn call(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath(ServerName { name }): ApiPath<ServerName>,
    ApiJson(body): ApiJson<McpCallRequest>,
) -> Result<(StatusCode, Json<RunEnvelope>), ApiError> {
    let wait_secs = body.wait_timeout_secs.unwrap_or(DEFAULT_WAIT_SECS);
    if wait_secs > MAX_WAIT_SECS {
        return Err(ApiError::InvalidRequest(format!(
            "wait_timeout_secs must be at most {MAX_WAIT_SECS}"
        )));
    }
    let tool = st
        .runtime
        .mcp_tool_name(&name, &body.tool)
        .map_err(|e| match e {
            McpLookupError::UnknownServer(m) => ApiError::NotFound(m),
            McpLookupError::Unavailable(m) => ApiError::Unavailable(m),
        })?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "MCP server {name:?} lists no tool {:?}; GET /v1/tools shows its tools (as {name}__<tool>)",
                body.tool
            ))
        })?;
    let (user_key, operator) = match body.user_key {
        Some(user) => (UserKey::new(user)?, false),
        None => (UserKey::new(caller.operator_key())?, true),
    };
    let env = st
        .runtime
        .call_tool(ToolCallRequest {
            tool,
            arguments: body.arguments,
            user_key,
            operator,
        })
        .await?;
    match st
        .runtime
        .wait(&env.run_id, Duration::from_secs(wait_secs))
        .await?
    {
        WaitOutcome::Finished(env) => Ok((StatusCode::OK, Json(env))),
        WaitOutcome::Pending(env) => Ok((StatusCode::ACCEPTED, Json(env))),
    }
}
