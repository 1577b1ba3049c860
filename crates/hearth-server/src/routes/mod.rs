//! Route handlers, grouped by the sections of the API contract.
//!
//! Each handler is listed once, in `api!`, which makes both the served
//! router (from its `#[utoipa::path]` path and methods) and the documented
//! one (through `utoipa_axum::routes!`): a route cannot be served without
//! being documented.

pub mod apps;
pub mod budget;
pub mod channels;
pub mod cluster;
pub mod config;
pub mod confirmations;
pub mod credentials;
pub mod history;
pub mod jobs;
pub mod mcp;
pub mod memory;
pub mod messages;
pub mod ops;
pub mod permissions;
pub mod router;
pub mod skills;
pub mod threads;
pub mod tokens;
pub mod tools;
pub mod usage;

use axum::Router;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;

/// Serves `$m::$h` at the path and methods its `#[utoipa::path]` declares.
/// Only `path()` and `methods()` are read: the served router never builds
/// the operation's OpenAPI description (about 1 MB for the whole API at
/// start, which stayed in the process as idle RSS).
macro_rules! serve {
    ($router:expr, $m:ident :: $h:ident) => {
        utoipa_axum::paste! {{
            let path = <$m::[<__path_ $h>] as utoipa::Path>::path();
            let methods = <$m::[<__path_ $h>] as utoipa::Path>::methods();
            let served = methods.iter().fold(axum::routing::MethodRouter::new(), |r, m| {
                r.on(utoipa_axum::PathItemExt::to_method_filter(m), $m::$h)
            });
            $router.route(&path, served)
        }}
    };
}

/// One list of handlers gives both the served router and the documented
/// one, so a route cannot be served without being in `/openapi.json`.
macro_rules! api {
    ($(#[$doc:meta])* $served:ident, $documented:ident: $($m:ident :: $h:ident),+ $(,)?) => {
        $(#[$doc])*
        pub fn $served() -> Router<AppState> {
            let router = Router::new();
            $(let router = serve!(router, $m::$h);)+
            router
        }

        $(#[$doc])*
        /// (With each operation's OpenAPI description, for the document.)
        pub fn $documented() -> OpenApiRouter<AppState> {
            OpenApiRouter::new() $(.routes(routes!($m::$h)))+
        }
    };
}

api! {
    /// Everything under `/v1` (served behind auth).
    v1, v1_documented:
    messages::post_message,
    messages::list_runs,
    messages::get_run,
    messages::run_events,
    messages::cancel_run,
    messages::run_trace,
    threads::models,
    usage::usage,
    budget::budget,
    tools::tools,
    mcp::servers,
    mcp::restart,
    mcp::call,
    skills::skills,
    skills::reload,
    cluster::cluster,
    config::show_config,
    config::reload_config,
    confirmations::resolve,
    permissions::list,
    permissions::add_grant,
    permissions::remove_grant,
    permissions::check,
    permissions::audit,
    credentials::set_credential,
    credentials::remove_credential,
    credentials::list_credentials,
    apps::import_manifest,
    apps::approve_version,
    apps::list_apps,
    apps::enable_app,
    apps::disable_app,
    threads::list_threads,
    threads::runtime,
    threads::thread,
    threads::set_mode,
    threads::set_model,
    threads::set_thinking,
    threads::new_session,
    threads::set_incognito,
    history::history,
    channels::list_channels,
    channels::list_pairings,
    channels::approve_pairing,
    channels::deny_pairing,
    channels::list_allowed,
    channels::remove_allowed,
    channels::list_outbox,
    channels::retry_outbox,
    jobs::create_job,
    jobs::list_jobs,
    jobs::get_job,
    jobs::patch_job,
    jobs::delete_job,
    jobs::run_job,
    router::get_router,
    router::post_feedback,
    memory::search,
    memory::forget,
    memory::export,
    tokens::create_token,
}

api! {
    /// Health, readiness, metrics and the document itself (no token needed).
    ops, ops_documented:
    ops::healthz,
    ops::readyz,
    ops::metrics,
    ops::openapi,
}
