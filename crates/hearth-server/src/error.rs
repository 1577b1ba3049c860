//! `ApiError`: the one mapping from failures to HTTP status and `code`.
//!
//! | variant | status | code |
//! | --- | --- | --- |
//! | `InvalidRequest` | 400 | `invalid_request` |
//! | `IdempotencyMismatch` | 400 | `idempotency_mismatch` |
//! | `UnknownModel` | 400 | `unknown_model` |
//! | `UnknownCapability` | 400 | `unknown_capability` |
//! | `InvalidSchedule` | 400 | `invalid_schedule` |
//! | `ChannelDisabled` | 400 | `channel_disabled` |
//! | `InvalidConfig` | 400 | `invalid_config` (a reload refused; nothing changed) |
//! | `InvalidMode` | 400 | `invalid_mode` (a search mode that is unknown or needs embeddings) |
//! | `InvalidManifest` | 400 | `invalid_manifest` (an app manifest refused; the message names the field) |
//! | `Unauthorized` | 401 | `unauthorized` |
//! | `Forbidden` | 403 | `forbidden` |
//! | `BypassInGroup` | 403 | `bypass_in_group` (permission mode `bypass` in a group chat) |
//! | `ForbiddenHost` | 403 | `forbidden_host` (a Host this server does not answer to) |
//! | `ForbiddenOrigin` | 403 | `forbidden_origin` (a browser page of another origin) |
//! | `NotFound` | 404 | `not_found` |
//! | `MethodNotAllowed` | 405 | `method_not_allowed` (with `Allow`) |
//! | `Conflict` | 409 | `conflict` (an app version imported again with other content, or enabled before it is approved) |
//! | `IncognitoElsewhere` | 409 | `incognito_elsewhere` (another replica holds the incognito thread) |
//! | `PayloadTooLarge` | 413 | `payload_too_large` |
//! | `UnsupportedMediaType` | 415 | `unsupported_media_type` |
//! | `NotImplemented` | 501 | `not_implemented` |
//! | `Unavailable` | 503 | `unavailable` |
//! | `Overloaded` | 503 | `overloaded` (with `Retry-After`) |
//! | `Internal` | 500 | `internal` (the cause is logged, not sent) |

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hearth_runtime::RuntimeError;
use hearth_runtime::policy::PolicyError;
use serde_json::json;

/// An API failure.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Bad input.
    #[error("{0}")]
    InvalidRequest(String),
    /// Header and body idempotency keys differ.
    #[error(
        "the Idempotency-Key header and the body's idempotency_key differ; send one, or the same in both"
    )]
    IdempotencyMismatch,
    /// Unknown model reference.
    #[error("{0}")]
    UnknownModel(String),
    /// A capability name that is neither a capability nor `preset:<name>`
    /// (or, where only capabilities are accepted, a preset).
    #[error("{0}")]
    UnknownCapability(String),
    /// A job's schedule or time zone that is refused.
    #[error("{0}")]
    InvalidSchedule(String),
    /// A job's thread is on a chat channel that is not enabled.
    #[error("{0}")]
    ChannelDisabled(String),
    /// A configuration read again that cannot be served; the one in force
    /// is unchanged.
    #[error("{0}")]
    InvalidConfig(String),
    /// A memory search mode that is unknown, or needs embeddings while
    /// they are off.
    #[error("{0}")]
    InvalidMode(String),
    /// An app manifest that is refused (the message names the field).
    #[error("{0}")]
    InvalidManifest(String),
    /// The change conflicts with what is stored.
    #[error("{0}")]
    Conflict(String),
    /// Missing or bad token.
    #[error(
        "a valid bearer token is required: send Authorization: Bearer <token> (create one with `hearth token create`)"
    )]
    Unauthorized,
    /// Authenticated, but not allowed to do this.
    #[error("{0}")]
    Forbidden(String),
    /// `bypass` asked for in a group chat.
    #[error("{0}")]
    BypassInGroup(String),
    /// The `Host` does not name this server (DNS rebinding).
    #[error("{0}")]
    ForbiddenHost(String),
    /// A state-changing request from a browser page of another origin.
    #[error("{0}")]
    ForbiddenOrigin(String),
    /// No such thing.
    #[error("{0}")]
    NotFound(String),
    /// The path exists, but not with this method.
    #[error("{method} is not allowed here; allowed: {allow}")]
    MethodNotAllowed {
        /// The method the client sent.
        method: String,
        /// The methods the path accepts, as in the `Allow` header.
        allow: String,
    },
    /// Body over the limit.
    #[error("the request body is larger than the limit of {0} bytes ([server] max_body_bytes)")]
    PayloadTooLarge(usize),
    /// A body whose Content-Type the route does not take (JSON routes
    /// take only `application/json`).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A documented endpoint whose feature is not built yet.
    #[error("{0}")]
    NotImplemented(String),
    /// The thread is incognito and lives in another replica's memory.
    #[error("{0}")]
    IncognitoElsewhere(String),
    /// Temporarily unable (shutting down).
    #[error("{0}")]
    Unavailable(String),
    /// Saturated: the client should retry after `retry_after_secs`.
    #[error("{message}")]
    Overloaded {
        /// What the runtime said.
        message: String,
        /// Seconds to wait, sent as `Retry-After`.
        retry_after_secs: u64,
    },
    /// A failure of ours.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// Status and code of this error.
    pub fn status_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::InvalidRequest(_) => (StatusCode::BAD_REQUEST, "invalid_request"),
            Self::IdempotencyMismatch => (StatusCode::BAD_REQUEST, "idempotency_mismatch"),
            Self::UnknownModel(_) => (StatusCode::BAD_REQUEST, "unknown_model"),
            Self::UnknownCapability(_) => (StatusCode::BAD_REQUEST, "unknown_capability"),
            Self::InvalidSchedule(_) => (StatusCode::BAD_REQUEST, "invalid_schedule"),
            Self::ChannelDisabled(_) => (StatusCode::BAD_REQUEST, "channel_disabled"),
            Self::InvalidConfig(_) => (StatusCode::BAD_REQUEST, "invalid_config"),
            Self::InvalidMode(_) => (StatusCode::BAD_REQUEST, "invalid_mode"),
            Self::InvalidManifest(_) => (StatusCode::BAD_REQUEST, "invalid_manifest"),
            Self::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::BypassInGroup(_) => (StatusCode::FORBIDDEN, "bypass_in_group"),
            Self::ForbiddenHost(_) => (StatusCode::FORBIDDEN, "forbidden_host"),
            Self::ForbiddenOrigin(_) => (StatusCode::FORBIDDEN, "forbidden_origin"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::MethodNotAllowed { .. } => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::IncognitoElsewhere(_) => (StatusCode::CONFLICT, "incognito_elsewhere"),
            Self::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Self::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            Self::NotImplemented(_) => (StatusCode::NOT_IMPLEMENTED, "not_implemented"),
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::Overloaded { .. } => (StatusCode::SERVICE_UNAVAILABLE, "overloaded"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::InvalidInput(m) => Self::InvalidRequest(m),
            RuntimeError::RunNotFound(id) => Self::NotFound(format!("no run with id {id:?}")),
            RuntimeError::ConfirmationNotFound => Self::NotFound(e.to_string()),
            RuntimeError::Forbidden(m) => Self::Forbidden(m),
            RuntimeError::InvalidMode(m) => Self::InvalidMode(m),
            RuntimeError::BypassInGroup(m) => Self::BypassInGroup(m),
            RuntimeError::UnknownModel(m) => Self::UnknownModel(m),
            RuntimeError::ShuttingDown => Self::Unavailable(e.to_string()),
            RuntimeError::Overloaded {
                retry_after_secs, ..
            } => Self::Overloaded {
                message: e.to_string(),
                retry_after_secs,
            },
            RuntimeError::InvalidSchedule(s) => Self::InvalidSchedule(s.to_string()),
            RuntimeError::ChannelDisabled(m) => Self::ChannelDisabled(m),
            RuntimeError::JobNotFound(_) => Self::NotFound(e.to_string()),
            RuntimeError::Store(s) => Self::Internal(s.to_string()),
            RuntimeError::Internal(m) => Self::Internal(m),
            RuntimeError::InvalidConfig(m) => Self::InvalidConfig(m),
            RuntimeError::InvalidManifest(m) => Self::InvalidManifest(m),
            RuntimeError::NotFound(m) => Self::NotFound(m),
            RuntimeError::Conflict(m) => Self::Conflict(m),
            RuntimeError::IncognitoElsewhere { .. } => Self::IncognitoElsewhere(e.to_string()),
        }
    }
}

impl From<hearth_core::KeyError> for ApiError {
    fn from(e: hearth_core::KeyError) -> Self {
        Self::InvalidRequest(e.to_string())
    }
}

impl From<PolicyError> for ApiError {
    fn from(e: PolicyError) -> Self {
        match e {
            PolicyError::UnknownCapability(_) => Self::UnknownCapability(e.to_string()),
            PolicyError::BadSubject { .. } | PolicyError::BadScope { .. } => {
                Self::InvalidRequest(e.to_string())
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_code();
        let message = match &self {
            Self::Internal(cause) => {
                tracing::error!(error = %cause, "request failed");
                "hearth could not complete the request; see the server log".to_owned()
            }
            other => other.to_string(),
        };
        let mut resp = (
            status,
            Json(json!({ "error": { "code": code, "message": message } })),
        )
            .into_response();
        let extra = match &self {
            Self::Overloaded {
                retry_after_secs, ..
            } => Some((header::RETRY_AFTER, HeaderValue::from(*retry_after_secs))),
            Self::MethodNotAllowed { allow, .. } => HeaderValue::from_str(allow)
                .ok()
                .map(|v| (header::ALLOW, v)),
            _ => None,
        };
        if let Some((name, value)) = extra {
            resp.headers_mut().insert(name, value);
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn overloaded_is_503_overloaded_with_retry_after() {
        let e = ApiError::from(RuntimeError::Overloaded {
            queued: 4096,
            retry_after_secs: 7,
        });
        assert_eq!(
            e.status_code(),
            (StatusCode::SERVICE_UNAVAILABLE, "overloaded")
        );
        let resp = e.into_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "7");
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["code"], "overloaded");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("retry in 7 s"),
            "{v}"
        );
    }

    #[test]
    fn shutting_down_stays_unavailable() {
        assert_eq!(
            ApiError::from(RuntimeError::ShuttingDown).status_code(),
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        );
    }
}
