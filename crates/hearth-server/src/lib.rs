//! hearth-server: the HTTP API of ../shared/API.md on axum.
//!
//! Owns routing, request validation (bodies are parsed strictly and every
//! rejection becomes `{"error":{"code","message"}}`), bearer-token auth, SSE,
//! `/openapi.json` and `/metrics`. It calls only `Runtime`; it never runs the
//! engine or writes run state itself. Permissions and the audit log go to the
//! runtime's store, with decisions made by `hearth_agent::policy`.

pub mod auth;
pub mod dto;
pub mod error;
pub mod extract;
pub mod openapi;
pub mod routes;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use hearth_agent::policy::PolicyConfig;
use hearth_runtime::Runtime;
use metrics_exporter_prometheus::PrometheusHandle;

pub use auth::{Auth, generate_token, hash_token};
pub use error::ApiError;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The runtime.
    pub runtime: Runtime,
    /// Token checks.
    pub auth: Arc<Auth>,
    /// Renders `/metrics`; `None` when no recorder is installed (tests).
    pub metrics: Option<PrometheusHandle>,
    /// The `[permissions]` configuration: the default preset and the admins
    /// (for `GET /v1/permissions` and `/v1/permissions/check`).
    pub policy: PolicyConfig,
}

/// The whole API.
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    let v1 = routes::v1().layer(axum::middleware::from_fn_with_state(
        state.clone(),
        auth::require_token,
    ));
    Router::new()
        .merge(routes::ops::routes())
        .merge(v1)
        .fallback(routes::ops::not_found)
        .layer(axum::middleware::from_fn(routes::ops::request_context))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}
