//! The MCP servers hearth is a client of: their state, and a debugging call.
//!
//! The manager reaches handlers as an `Extension` that `hearth serve` adds;
//! without it (tests, a build with no MCP) there are no servers.

use axum::Json;
use axum::extract::Extension;
use hearth_mcp::{McpError, McpManager};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

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
}

/// The answer of `POST /v1/mcp/servers/{name}/call`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct McpCallResult {
    /// The server's `tools/call` result as it sent it
    /// (`{content, structuredContent, isError}`).
    #[schema(value_type = Object)]
    pub result: serde_json::Value,
}

/// The path of `POST /v1/mcp/servers/{name}/call`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ServerName {
    /// The server, as named in `[mcp.servers.<name>]`.
    pub name: String,
}

/// Every configured MCP server, with its state and tool count.
#[utoipa::path(get, path = "/v1/mcp/servers", tag = "mcp",
    responses((status = 200, description = "The servers, by name", body = McpServerList)))]
pub async fn servers(mcp: Option<Extension<McpManager>>) -> Json<McpServerList> {
    let servers = mcp
        .map(|Extension(m)| m.statuses())
        .unwrap_or_default()
        .into_iter()
        .map(|s| McpServerInfo {
            name: s.name,
            transport: s.transport.to_owned(),
            state: s.state.as_str().to_owned(),
            last_error: s.last_error,
            tools: s.tools,
        })
        .collect();
    Json(McpServerList { servers })
}

/// Calls one tool of a server directly, for debugging (`hearth mcp call`):
/// no run, no model, no confirmation; the API token holder is the operator.
#[utoipa::path(post, path = "/v1/mcp/servers/{name}/call", tag = "mcp",
    params(ServerName),
    request_body = McpCallRequest,
    responses(
        (status = 200, description = "The tool's result (isError inside when the tool failed)", body = McpCallResult),
        (status = 400, description = "Bad input, or the server refused the call", body = crate::dto::ErrorBody),
        (status = 404, description = "No server of that name", body = crate::dto::ErrorBody),
        (status = 503, description = "The server is down or the call timed out", body = crate::dto::ErrorBody)))]
pub async fn call(
    mcp: Option<Extension<McpManager>>,
    ApiPath(ServerName { name }): ApiPath<ServerName>,
    ApiJson(body): ApiJson<McpCallRequest>,
) -> Result<Json<McpCallResult>, ApiError> {
    let manager = mcp.map(|Extension(m)| m).unwrap_or_default();
    let result = manager
        .call(&name, &body.tool, body.arguments)
        .await
        .map_err(|e| match e {
            McpError::UnknownServer(_) => ApiError::NotFound(e.to_string()),
            McpError::Server(_) => ApiError::InvalidRequest(e.to_string()),
            McpError::Start(_)
            | McpError::Closed(_)
            | McpError::Protocol(_)
            | McpError::Unavailable { .. }
            | McpError::Timeout(_) => ApiError::Unavailable(e.to_string()),
        })?;
    Ok(Json(McpCallResult { result }))
}
