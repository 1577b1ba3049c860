//! hearth-server: the HTTP API of ../shared/API.md on axum.
//!
//! Owns routing, request validation (bodies are parsed strictly and every
//! rejection becomes `{"error":{"code","message"}}`), bearer-token auth, SSE,
//! `/openapi.json`, `/metrics` and the accept loop (`listen::serve`). It
//! calls only `Runtime`; it never runs the engine or touches the store.
//! Permission decisions are made by `hearth_agent::policy` inside the runtime.

pub mod auth;
pub mod door;
pub mod dto;
pub mod error;
pub mod extract;
pub mod listen;
pub mod mcp;
pub mod metrics;
pub mod middleware;
pub mod openai;
pub mod openapi;
mod push;
pub mod routes;
pub mod schemas;
pub mod ui;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::{Extension, Router};
use hearth_runtime::Runtime;
use metrics_exporter_prometheus::PrometheusHandle;

pub use auth::{Auth, generate_token, hash_token};
pub use door::{AllowedHosts, CsrfValidator, Door};
pub use error::ApiError;
pub use listen::{ServeLimits, serve};

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub runtime: Runtime,
    /// Token checks.
    pub auth: Arc<Auth>,
    /// Renders `/metrics`; `None` when no recorder is installed (tests).
    pub metrics: Option<PrometheusHandle>,
}

/// The whole API.
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    with_state(Routes::build(), state, max_body_bytes)
}

/// The API's routes, registered but without state.
pub struct Routes {
    ops: Router<AppState>,
    v1: Router<AppState>,
    openai: Router<AppState>,
    door: Door,
    ui: ui::Ui,
}

impl Routes {
    /// Registers every route.
    pub fn build() -> Self {
        let ui = ui::Ui::default();
        Self {
            ops: routes::ops(),
            v1: routes::v1(),
            openai: openai::routes(),
            door: Door::default().with_csrf(ui.csrf()),
            ui,
        }
    }

    /// Dashboard logins that last `hours` (`[server] ui_session_hours`).
    pub fn with_ui_session_hours(mut self, hours: u64) -> Self {
        self.ui = ui::Ui::new(std::time::Duration::from_secs(hours.saturating_mul(3600)));
        self.door = self.door.with_csrf(self.ui.csrf());
        self
    }

    /// The names every route answers to in Host, and the configured ones
    /// it also takes as a browser Origin (the loopback names unless set):
    /// the bind address and `[server] allowed_hosts`.
    pub fn with_allowed_hosts(mut self, hosts: AllowedHosts) -> Self {
        self.door = self.door.with_hosts(hosts);
        self
    }

    /// Lets a browser request with `Origin: null` and `Sec-Fetch-Site:
    /// same-origin` pass when `validator` accepts its CSRF token (for the
    /// dashboard's forms; without one, `null` is always refused).
    pub fn with_csrf(mut self, validator: std::sync::Arc<dyn CsrfValidator>) -> Self {
        self.door = self.door.with_csrf(validator);
        self
    }
}

/// The whole API over routes built before, with the runtime's chat
/// channels behind `/v1/channels`, `/v1/pairings` and `/v1/outbox`, and
/// their push endpoints.
pub fn with_state(routes: Routes, state: AppState, max_body_bytes: usize) -> Router {
    let Routes {
        ops,
        v1,
        openai,
        door,
        ui,
    } = routes;
    let channels = routes::channels::ChannelsHandle(state.runtime.clone());
    // Webhooks check their own signatures, not the bearer token.
    let push = push::routes();
    let mcp = mcp::router(state.clone(), max_body_bytes);
    // The dashboard checks its own sessions (cookies, not bearer tokens).
    let ui = ui.router(state.clone());
    let v1 = v1.layer(axum::middleware::from_fn_with_state(
        state.clone(),
        auth::require_token,
    ));
    // Same token checks, refused in OpenAI's error envelope.
    let openai = openai.layer(axum::middleware::from_fn_with_state(
        state.clone(),
        openai::require_token,
    ));
    // Layers run outside-in from the last one added: request ids and metrics
    // see every answer, the door (Host, Origin) refuses strangers before
    // anything else runs, panics become 500s inside them, and the body limit
    // is known to whoever refuses a body.
    Router::new()
        .merge(ops)
        .merge(v1)
        .merge(openai)
        .merge(mcp)
        .merge(push)
        .merge(ui)
        .route_layer(axum::middleware::from_fn(middleware::mark_route))
        .fallback(routes::ops::not_found)
        .layer(axum::middleware::from_fn(middleware::envelope_bare_errors))
        .layer(axum::middleware::from_fn(middleware::catch_panic))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(Extension(extract::BodyLimit(max_body_bytes)))
        .layer(Extension(channels))
        .layer(axum::middleware::from_fn_with_state(door, door::guard))
        .layer(axum::middleware::from_fn(middleware::request_context))
        .with_state(state)
}
