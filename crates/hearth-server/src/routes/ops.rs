//! Health, readiness, metrics, the OpenAPI document, request ids and 404s.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tracing::Instrument;

use crate::AppState;
use crate::dto::{Health, Ready};
use crate::error::ApiError;

/// Routes that need no token.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
}

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
    let store_ok = match st.runtime.store().ping().await {
        Ok(()) => {
            checks.insert("store".to_owned(), "ok".to_owned());
            true
        }
        Err(e) => {
            checks.insert("store".to_owned(), e.to_string());
            false
        }
    };
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
                checks,
            }),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Ready {
                status: "not_ready",
                checks,
            }),
        )
    }
}

/// Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus metrics", content_type = "text/plain")))]
pub async fn metrics(State(st): State<AppState>) -> Response {
    let body = st.metrics.as_ref().map(|h| h.render()).unwrap_or_default();
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

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Gives every request an id (its own `X-Request-Id` when sane), a span, and a
/// debug log line with status and duration.
pub async fn request_context(req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| format!("req-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)));
    let span = tracing::debug_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path());
    let started = Instant::now();
    let mut resp = next.run(req).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::debug!(
            status = resp.status().as_u16(),
            duration_us = started.elapsed().as_micros() as u64,
            "request done"
        );
    });
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}
