//! `/mcp`: hearth as an MCP server over streamable HTTP, on the main listener.
//!
//! Owns the rmcp server side (kept in this module so an rmcp bump touches
//! one place): the tool definitions and handler (`tools`) and the layers in
//! front of rmcp's tower service. Requests pass, in order: the door's Host
//! and Origin checks (403, `crate::door`, on every method here), the same
//! bearer auth as `/v1` (401), a POST's Content-Type (415), then rmcp.
//! Tools call `Runtime` only.

pub mod tools;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use tools::{HearthMcp, user_key};

use crate::AppState;
use crate::error::ApiError;

/// The path MCP is served at.
pub const PATH: &str = "/mcp";

/// `/mcp` with its checks, over `state`'s runtime; `max_body_bytes` bounds
/// a request body as on the rest of the API. The door (Host and Origin)
/// is the whole router's layer.
pub fn router<S: Clone + Send + Sync + 'static>(
    state: AppState,
    max_body_bytes: usize,
) -> Router<S> {
    let runtime = state.runtime.clone();
    let tools = tools::tool_list();
    // The door checks Host and Origin (before auth, in the API's error
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
        .layer(axum::middleware::from_fn(json_posts))
        .layer(axum::middleware::from_fn_with_state(state, identify))
}

/// 415 `unsupported_media_type` for a POST that is not `application/json`,
/// in the API's envelope (rmcp's own answer is plain text, and comes after
/// its Accept check).
async fn json_posts(req: Request, next: Next) -> Result<Response, ApiError> {
    if req.method() == Method::POST {
        crate::door::json_content_type(req.headers()).map_err(ApiError::UnsupportedMediaType)?;
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
    if caller.member().is_some() {
        // The MCP tools reach every thread and run: operators only.
        return Err(ApiError::Forbidden(crate::auth::MEMBER_REFUSED.into()));
    }
    req.extensions_mut().insert(caller);
    Ok(next.run(req).await)
}
