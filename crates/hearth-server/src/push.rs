//! The chat platforms' push endpoints (Telegram's webhook, Slack's Events
//! API): the runtime's channels serve them as [`Webhook`]s, mounted here
//! for `POST` at their paths. They sit outside bearer auth (the platform
//! signs each request, and the webhook checks it) and, under `/channels`,
//! outside the door's Origin rule; the Host rule and the body limit apply.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hearth_runtime::surfaces::Webhook;

use crate::AppState;

/// A route for each of `webhooks`.
pub(crate) fn routes(webhooks: Vec<Arc<dyn Webhook>>) -> Router<AppState> {
    webhooks.into_iter().fold(Router::new(), |router, hook| {
        let path = hook.path();
        router.route(
            path,
            post(move |st: State<AppState>, parts: Parts, body: Bytes| {
                handle(hook, st, parts, body)
            }),
        )
    })
}

async fn handle(
    hook: Arc<dyn Webhook>,
    State(st): State<AppState>,
    parts: Parts,
    body: Bytes,
) -> Response {
    let request = axum::http::Request::from_parts(parts, body);
    hook.handle(&st.runtime, request)
        .await
        .map(Body::from)
        .into_response()
}
