//! Route handlers, grouped by the sections of the API contract.

pub mod confirmations;
pub mod messages;
pub mod ops;
pub mod permissions;
pub mod threads;
pub mod tools;
pub mod usage;

use axum::Router;
use axum::routing::{delete, get, post, put};

use crate::AppState;

/// Everything under `/v1` (behind auth).
pub fn v1() -> Router<AppState> {
    Router::new()
        .route("/v1/messages", post(messages::post_message))
        .route("/v1/runs", get(messages::list_runs))
        .route("/v1/runs/{run_id}", get(messages::get_run))
        .route("/v1/runs/{run_id}/events", get(messages::run_events))
        .route("/v1/runs/{run_id}/cancel", post(messages::cancel_run))
        .route("/v1/runs/{run_id}/trace", get(messages::run_trace))
        .route("/v1/models", get(threads::models))
        .route("/v1/usage", get(usage::usage))
        .route("/v1/tools", get(tools::tools))
        .route("/v1/confirmations/{token}", post(confirmations::resolve))
        .route("/v1/permissions", get(permissions::list))
        .route(
            "/v1/permissions/grants",
            post(permissions::add_grant).delete(permissions::remove_grant),
        )
        .route("/v1/permissions/check", get(permissions::check))
        .route("/v1/audit", get(permissions::audit))
        .route("/v1/threads/{thread_key}/runtime", get(threads::runtime))
        .route("/v1/threads/{thread_key}/model", put(threads::set_model))
        .route(
            "/v1/threads/{thread_key}/thinking",
            put(threads::set_thinking),
        )
        .route(
            "/v1/threads/{thread_key}/session",
            delete(threads::new_session),
        )
        .route(
            "/v1/threads/{thread_key}/incognito",
            put(threads::set_incognito),
        )
}
