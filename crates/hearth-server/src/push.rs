//! The chat platforms' push endpoints (Telegram's webhook, Slack's Events
//! API): the runtime's channels serve them as webhooks, each answering
//! `POST` at its path under `/channels`, looked up at each request (a
//! configuration reload may replace the channels). They sit outside bearer auth (the platform
//! signs each request, and the webhook checks it) and, under `/channels`,
//! outside the door's Origin rule; the Host rule and the body limit apply.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use crate::AppState;

/// Where the platforms push: every path under it is answered by the
/// runtime's webhook of that path in force at the request (a configuration
/// reload may add, rebuild or stop one), or is not found.
const PUSH_ROUTE: &str = "/channels/{*path}";

/// The push endpoints' route.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route(PUSH_ROUTE, post(handle))
}

async fn handle(State(st): State<AppState>, parts: Parts, body: Bytes) -> Response {
    let path = parts.uri.path();
    let Some(hook) = st.runtime.webhooks().into_iter().find(|h| h.path() == path) else {
        return crate::routes::ops::not_found().await.into_response();
    };
    let request = axum::http::Request::from_parts(parts, body);
    hook.handle(&st.runtime, request)
        .await
        .map(Body::from)
        .into_response()
}
