//! `/mcp`: hearth as an MCP server over streamable HTTP, on the main listener.
//!
//! Owns the rmcp server side (kept in this module so an rmcp bump touches
//! one place): the tool definitions and handler (`tools`), the
//! DNS-rebinding check (`hosts`) and the layers in front of rmcp's tower
//! service. Requests pass, in order: Host/Origin check (403), the same
//! bearer auth as `/v1` (401), then rmcp. Tools call `Runtime` only.

pub mod hosts;
pub mod tools;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use hosts::AllowedHosts;
pub use tools::{HearthMcp, user_key};

use crate::AppState;
use crate::error::ApiError;

/// The path MCP is served at.
pub const PATH: &str = "/mcp";

/// `/mcp` with its checks, over `state`'s runtime; `max_body_bytes` bounds
/// a request body as on the rest of the API.
pub fn router<S: Clone + Send + Sync + 'static>(
    state: AppState,
    hosts: AllowedHosts,
    max_body_bytes: usize,
) -> Router<S> {
    let runtime = state.runtime.clone();
    let tools = tools::tool_list();
    // Our own layer checks Host and Origin (before auth, in the API's error
    // shape), so rmcp's copy of that check is off: two lists that could
    // disagree would give 403s nobody can explain.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(max_body_bytes);
    let service = StreamableHttpService::new(
        move || Ok(HearthMcp::new(runtime.clone(), tools.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service(PATH, service)
        .layer(axum::middleware::from_fn_with_state(state, identify))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(hosts),
            check_hosts,
        ))
}

/// 403 `forbidden` unless Host (and Origin, when sent) name this server.
async fn check_hosts(
    State(hosts): State<Arc<AllowedHosts>>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    // HTTP/1.1 requires Host; the URI's authority stands in for it on HTTP/2.
    let host = match req.headers().get(HOST) {
        Some(v) => v.to_str().ok().map(str::to_owned),
        None => req.uri().authority().map(|a| a.as_str().to_owned()),
    };
    if !host.as_deref().is_some_and(|h| hosts.allows_host(h)) {
        tracing::warn!(host = ?host, "refused an MCP request for another host (DNS rebinding?)");
        return Err(ApiError::Forbidden(
            "the Host header does not name this server; add it to [server] allowed_hosts".into(),
        ));
    }
    if let Some(origin) = req.headers().get(ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !hosts.allows_origin(origin) {
            tracing::warn!(origin, "refused an MCP request from another origin");
            return Err(ApiError::Forbidden(
                "the Origin header does not name this server; add its host to [server] allowed_hosts"
                    .into(),
            ));
        }
    }
    Ok(next.run(req).await)
}

/// The bearer auth of `/v1`, keeping who passed for the tools.
async fn identify(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    let caller = state.auth.identify(header).await?;
    req.extensions_mut().insert(caller);
    Ok(next.run(req).await)
}
