//! The dashboard at `/ui`: server-rendered pages over the same runtime
//! calls as `/v1`, behind the same tokens and the same door.
//!
//! Why this stack: pages are **maud** templates, compiled and type-checked
//! with the code (a misspelt field is a build error, every value is
//! HTML-escaped unless marked otherwise), with no template files to ship or
//! parse at run time and no template engine in the binary. maud over
//! askama because the markup sits beside the Rust that fills it (one file
//! per page, no second template directory) and its output is a plain
//! `String`. Charts are SVG drawn on the server. One small hand-written
//! script (`assets/app.js`, no framework, no build step, no npm) keeps a
//! page live over one SSE connection and streams answers on thread pages;
//! every action also works as a plain form post. One CSS file follows the
//! system's dark or light theme. All three are compiled into the binary.
//!
//! Every page handler reads through the `/v1` handlers or the runtime calls
//! they make, so the dashboard shows exactly what the API shows to the same
//! token. Security headers: a strict Content-Security-Policy (no inline
//! script or style), `X-Frame-Options: DENY`, `Referrer-Policy: no-referrer`.

mod admin;
mod confirm;
pub mod layout;
mod live;
mod login;
mod memory;
mod overview;
mod runs;
mod search;
pub mod session;
mod threads;
mod usage;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::AppState;
pub use session::{Sessions, Viewer};

/// The policy every dashboard response carries: only this origin's own
/// script, style, images and connections; no frames, no plugins.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
const ICON_SVG: &str = include_str!("assets/icon.svg");

/// The dashboard: its sessions (how long a login lasts).
#[derive(Clone)]
pub struct Ui {
    sessions: Arc<Sessions>,
}

impl Default for Ui {
    /// Logins that last 12 hours.
    fn default() -> Self {
        Self::new(Duration::from_secs(12 * 3600))
    }
}

impl Ui {
    /// A dashboard whose logins last `session_ttl`.
    pub fn new(session_ttl: Duration) -> Self {
        Self {
            sessions: Arc::new(Sessions::new(session_ttl)),
        }
    }

    /// The door's check of same-origin form posts that carry `Origin: null`.
    pub fn csrf(&self) -> Arc<dyn crate::door::CsrfValidator> {
        Arc::new(session::UiCsrf(self.sessions.clone()))
    }

    /// The `/ui` routes and `GET /`, over `state`.
    pub(crate) fn router(&self, state: AppState) -> Router<AppState> {
        self.sessions.attach(state.clone());
        let pages = Router::new()
            .route("/ui", get(overview::show))
            .route("/ui/live", get(overview::live))
            .route("/ui/events", get(live::events))
            .route("/ui/login", get(login::form).post(login::submit))
            .route("/ui/logout", get(login::logout_form).post(login::logout))
            .route("/ui/runs", get(runs::list))
            .route("/ui/runs/{id}", get(runs::detail))
            .route("/ui/runs/{id}/events", get(runs::events))
            .route("/ui/runs/{id}/cancel", post(runs::cancel))
            .route("/ui/confirmations", get(confirm::list))
            .route("/ui/confirmations/{run_id}", post(confirm::answer))
            .route("/ui/threads", get(threads::list))
            .route("/ui/threads/open", get(threads::open))
            .route("/ui/threads/{key}", get(threads::detail))
            .route("/ui/threads/{key}/send", post(threads::send))
            .route("/ui/threads/{key}/session", post(threads::new_session))
            .route("/ui/threads/{key}/settings", post(threads::settings))
            .route("/ui/threads/{key}/run-plan", post(threads::run_plan))
            .route("/ui/usage", get(usage::show))
            .route("/ui/usage.csv", get(usage::csv))
            .route("/ui/budget", get(admin::budget))
            .route("/ui/router", get(admin::router))
            .route("/ui/jobs", get(admin::jobs))
            .route("/ui/jobs/{id}/run", post(admin::run_job))
            .route("/ui/jobs/{id}/{action}", post(admin::toggle_job))
            .route("/ui/channels", get(admin::channels))
            .route("/ui/outbox/{id}/retry", post(admin::retry_outbox))
            .route("/ui/pairings/{code}/{verdict}", post(admin::answer_pairing))
            .route("/ui/mcp", get(admin::mcp))
            .route("/ui/mcp/{name}/reload", post(admin::reload_mcp))
            .route("/ui/skills", get(admin::skills))
            .route("/ui/skills/reload", post(admin::reload_skills))
            .route("/ui/memory", get(memory::show))
            .route("/ui/memory/export", get(memory::export))
            .route("/ui/memory/{id}/delete", post(memory::delete))
            .route("/ui/settings", get(admin::settings))
            .route(
                "/ui/assets/app.js",
                get(|| asset(APP_JS, "text/javascript; charset=utf-8")),
            )
            .route(
                "/ui/assets/app.css",
                get(|| asset(APP_CSS, "text/css; charset=utf-8")),
            )
            .route(
                "/ui/assets/icon.svg",
                get(|| asset(ICON_SVG, "image/svg+xml")),
            )
            .route("/ui/{*rest}", get(not_found).post(not_found))
            .layer(axum::middleware::from_fn_with_state(
                (state, self.sessions.clone()),
                session::gate,
            ))
            .layer(axum::Extension(self.sessions.clone()));
        Router::new()
            .route("/", get(|| async { Redirect::to("/ui") }))
            .merge(pages)
            .layer(axum::middleware::from_fn(headers))
    }
}

async fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

async fn not_found() -> Response {
    layout::status_page(
        StatusCode::NOT_FOUND,
        "Not found",
        "There is no such page in the dashboard.",
    )
}

/// The security headers of every dashboard response; pages are not cached.
async fn headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("x-content-type-options", "nosniff"),
    ] {
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    if !h.contains_key(CACHE_CONTROL) {
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}
