//! Layers around every route: request ids and HTTP metrics, the catch-panic
//! layer, and the envelope for errors that axum answers before a handler runs.

use std::any::Any;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use tracing::Instrument;

use crate::error::ApiError;
use crate::extract::BodyLimit;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The route label of requests that matched no route (404s), so scanners
/// probing random paths cannot grow the metrics without bound.
const UNMATCHED: &str = "unmatched";

/// The matched route template, carried from `mark_route` (inside routing) to
/// `request_context` (outside it) in the response's extensions.
#[derive(Clone)]
struct RouteLabel(String);

/// Gives every request an id (its own `X-Request-Id` when sane), a span, a
/// debug log line, and the `hearth_http_requests_total` and
/// `hearth_http_request_duration_seconds` metrics by route and status.
pub async fn request_context(req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| format!("req-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)));
    // Any token is a valid method; only the ones we route are labels, so
    // odd methods cannot grow the metrics without bound.
    let method = match req.method().as_str() {
        m @ ("GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS") => m.to_owned(),
        _ => "other".to_owned(),
    };
    let span = tracing::debug_span!("request", request_id = %id, method = %method, path = %req.uri().path());
    let started = Instant::now();
    let mut resp = next.run(req).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let status = resp.status().as_u16();
    span.in_scope(|| {
        tracing::debug!(
            status,
            duration_us = elapsed.as_micros() as u64,
            "request done"
        );
    });
    let route = resp
        .extensions_mut()
        .remove::<RouteLabel>()
        .map_or_else(|| UNMATCHED.to_owned(), |r| r.0);
    let labels = [
        ("route", route),
        ("method", method),
        ("status", status.to_string()),
    ];
    metrics::counter!("hearth_http_requests_total", &labels).increment(1);
    metrics::histogram!("hearth_http_request_duration_seconds", &labels)
        .record(elapsed.as_secs_f64());
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

/// A route layer: records the matched route template for `request_context`.
pub async fn mark_route(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    let mut resp = next.run(req).await;
    if let Some(route) = route {
        resp.extensions_mut().insert(RouteLabel(route));
    }
    resp
}

/// Records `route` as the route label of a response made before
/// `mark_route` ran (the door's refusals).
pub(crate) fn label_route(resp: &mut Response, route: &str) {
    resp.extensions_mut().insert(RouteLabel(route.to_owned()));
}

/// Turns a panic in a handler into 500 `internal` in the error envelope
/// (and an ERROR log line) instead of a dropped connection.
pub async fn catch_panic(req: Request, next: Next) -> Response {
    let route = req.uri().path().to_owned();
    match AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            let what = panic_message(panic.as_ref());
            tracing::error!(path = %route, panic = %what, "a request handler panicked");
            metrics::counter!("hearth_http_panics_total").increment(1);
            ApiError::Internal(format!("handler panicked: {what}")).into_response()
        }
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Puts error responses that axum made itself with an empty or plain-text
/// body (405, and any other bare 4xx/5xx) into the error envelope, keeping
/// their headers (`Allow` on 405).
pub async fn envelope_bare_errors(req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_owned();
    let limit = req.extensions().get::<BodyLimit>().map_or(0, |l| l.0);
    // Layers added with `Router::layer` run after routing, so the matched
    // template is known here (for the `Allow` of a 405).
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(&resp) || is_html(&resp) {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_owned();
    let err = match status {
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed {
            method,
            allow: route.as_deref().map(allowed_methods).unwrap_or_default(),
        },
        StatusCode::NOT_FOUND => ApiError::NotFound("no such endpoint; see /openapi.json".into()),
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(limit),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType(if text.is_empty() {
            "send the body as JSON with Content-Type: application/json".into()
        } else {
            text
        }),
        s if s.is_server_error() => ApiError::Internal(text),
        _ => ApiError::InvalidRequest(if text.is_empty() {
            format!("the request was refused ({status})")
        } else {
            text
        }),
    };
    let mut out = err.into_response();
    // The envelope's status is the original one (e.g. 413 stays 413).
    *out.status_mut() = status;
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH && name != header::ALLOW {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// A page of the dashboard, which answers errors as pages of its own.
fn is_html(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/html"))
}

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"))
}

/// The methods a route template accepts, as an `Allow` value (`GET,HEAD`),
/// read from the OpenAPI document, which lists every registered route.
fn allowed_methods(route: &str) -> String {
    static TABLE: OnceLock<HashMap<String, String>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let doc: serde_json::Value =
            serde_json::from_str(crate::openapi::document_json()).unwrap_or_default();
        let mut table = HashMap::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            let mut methods = Vec::new();
            for m in ["get", "put", "post", "delete", "patch"] {
                if item.get(m).is_some() {
                    methods.push(m.to_ascii_uppercase());
                    if m == "get" {
                        methods.push("HEAD".to_owned());
                    }
                }
            }
            table.insert(path.clone(), methods.join(","));
        }
        table
    });
    table.get(route).cloned().unwrap_or_default()
}
