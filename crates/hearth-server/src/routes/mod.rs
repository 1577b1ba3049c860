//! Route handlers, grouped by the sections of the API contract.
//!
//! Each handler is registered once, through `utoipa_axum::routes!`, which
//! adds it to the router and its `#[utoipa::path]` to the OpenAPI document
//! together: a route cannot be served without being documented.

pub mod confirmations;
pub mod messages;
pub mod ops;
pub mod permissions;
pub mod threads;
pub mod tools;
pub mod usage;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;

/// Everything under `/v1` (served behind auth).
pub fn v1() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(messages::post_message))
        .routes(routes!(messages::list_runs))
        .routes(routes!(messages::get_run))
        .routes(routes!(messages::run_events))
        .routes(routes!(messages::cancel_run))
        .routes(routes!(messages::run_trace))
        .routes(routes!(threads::models))
        .routes(routes!(usage::usage))
        .routes(routes!(tools::tools))
        .routes(routes!(confirmations::resolve))
        .routes(routes!(permissions::list))
        .routes(routes!(permissions::add_grant, permissions::remove_grant))
        .routes(routes!(permissions::check))
        .routes(routes!(permissions::audit))
        .routes(routes!(threads::runtime))
        .routes(routes!(threads::set_model))
        .routes(routes!(threads::set_thinking))
        .routes(routes!(threads::new_session))
        .routes(routes!(threads::set_incognito))
}

/// Health, readiness, metrics and the document itself (no token needed).
pub fn ops() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(ops::metrics))
        .routes(routes!(ops::openapi))
}
