//! Health, readiness, metrics, the OpenAPI document and 404s.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::dto::{Health, Ready};
use crate::error::ApiError;

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process runs", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
    })
}

/// Readiness: the store is reachable and migrated.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses((status = 200, description = "Ready", body = Ready),
              (status = 503, description = "Not ready", body = Ready)))]
pub async fn readyz(State(st): State<AppState>) -> (StatusCode, Json<Ready>) {
    let mut checks = BTreeMap::new();
    // A degraded channel is shown but does not make hearth not ready.
    checks.extend(st.runtime.channel_readiness());
    let store_ok = match st.runtime.store_ready().await {
        Ok(()) => {
            checks.insert("store".to_owned(), "ok".to_owned());
            true
        }
        Err(e) => {
            checks.insert("store".to_owned(), e.to_string());
            false
        }
    };
    // Informational: without it wake-ups wait for the upkeep round.
    if let Some(hears) = st.runtime.hears_other_replicas() {
        checks.insert(
            "wakeups".to_owned(),
            if hears { "ok" } else { "reconnecting" }.to_owned(),
        );
    }
    let accepting = !st.runtime.is_shutting_down();
    checks.insert(
        "accepting".to_owned(),
        if accepting { "ok" } else { "shutting down" }.to_owned(),
    );
    if store_ok && accepting {
        (
            StatusCode::OK,
            Json(Ready {
                status: "ready",
                store: st.runtime.store_backend(),
                replica: st.runtime.replica().to_owned(),
                checks,
            }),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Ready {
                status: "not_ready",
                store: st.runtime.store_backend(),
                replica: st.runtime.replica().to_owned(),
                checks,
            }),
        )
    }
}

/// Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus metrics", content_type = "text/plain")))]
pub async fn metrics(State(st): State<AppState>) -> Response {
    // Rolls the budget windows first, so a pool whose window turned over
    // since its last call does not show the old use.
    let _ = st.runtime.budget_status().await;
    let body = match &st.metrics {
        Some(h) => {
            // Every family shows from the first scrape, at 0 until something
            // happens (channels and tools as configured now, reloads included).
            crate::metrics::prime(&known_labels(&st.runtime));
            h.render()
        }
        None => String::new(),
    };
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// The OpenAPI 3.1 document of this API.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "OpenAPI document", content_type = "application/json")))]
pub async fn openapi() -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        crate::openapi::document_json(),
    )
        .into_response()
}

/// Unknown paths.
pub async fn not_found() -> ApiError {
    ApiError::NotFound("no such endpoint; see /openapi.json".into())
}

/// The channels and tools whose series exist before their first event.
fn known_labels(rt: &hearth_runtime::Runtime) -> crate::metrics::KnownLabels {
    let channels = rt
        .channel_readiness()
        .into_iter()
        .filter_map(|(check, _)| check.strip_prefix("channel:").map(str::to_owned))
        .collect();
    let tools = rt.tools(None).into_iter().map(|t| t.name).collect();
    crate::metrics::KnownLabels { channels, tools }
}
