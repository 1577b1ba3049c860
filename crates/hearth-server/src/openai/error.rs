//! `OpenAiError`: failures of the OpenAI-compatible surface, in OpenAI's
//! envelope `{"error":{"message","type","param","code"}}`.
//!
//! | variant | status | type | code |
//! | --- | --- | --- | --- |
//! | `InvalidRequest` | 400 | `invalid_request_error` | `null` or given |
//! | `Unauthorized` | 401 | `invalid_request_error` | `invalid_api_key` |
//! | `Forbidden` | 403 | `invalid_request_error` | `forbidden` |
//! | `ForbiddenHost` | 403 | `invalid_request_error` | `forbidden_host` |
//! | `ForbiddenOrigin` | 403 | `invalid_request_error` | `forbidden_origin` |
//! | `ModelNotFound` | 404 | `invalid_request_error` | `model_not_found` |
//! | `NotFound` | 404 | `invalid_request_error` | `unknown_url` |
//! | `MethodNotAllowed` | 405 | `invalid_request_error` | `method_not_allowed` |
//! | `PayloadTooLarge` | 413 | `invalid_request_error` | `payload_too_large` |
//! | `UnsupportedMediaType` | 415 | `invalid_request_error` | `unsupported_media_type` |
//! | `BudgetExceeded` | 429 | `insufficient_quota` | `budget_exceeded` |
//! | `RunFailed` | 500 | `server_error` | the run's error code |
//! | `Timeout` | 504 | `server_error` | `timeout` |
//! | `Unavailable` | 503 | `server_error` | `unavailable` / `overloaded` |
//! | `Internal` | 500 | `server_error` | `internal` (the cause is logged, not sent) |
//!
//! Failures that a retry would only repeat (a failed run, a budget, a
//! timeout) carry `x-should-retry: false`, which the official SDKs obey:
//! each retry would be a new run, with its cost.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hearth_core::RunError;
use hearth_runtime::RuntimeError;
use serde_json::json;

/// A failure answered in OpenAI's error envelope.
#[derive(Debug, thiserror::Error)]
pub enum OpenAiError {
    /// Bad input; `param` names the offending field when there is one.
    #[error("{message}")]
    InvalidRequest {
        /// What is wrong.
        message: String,
        /// The field at fault (`tools`, `messages[2].content`, ...).
        param: Option<String>,
        /// A more specific code than `null`.
        code: Option<&'static str>,
    },
    /// Missing or bad bearer token.
    #[error(
        "a valid bearer token is required: use a hearth API token (`hearth token create`) as the API key"
    )]
    Unauthorized,
    /// Authenticated, but not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// The `Host` does not name this server (DNS rebinding).
    #[error("{0}")]
    ForbiddenHost(String),
    /// A browser page of another origin.
    #[error("{0}")]
    ForbiddenOrigin(String),
    /// A body that is not `application/json`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A model id that is not `hearth` or `hearth/<provider>/<model>` of a configured model.
    #[error("the model `{0}` does not exist; GET /openai/v1/models lists the ones hearth serves")]
    ModelNotFound(String),
    /// No such endpoint under `/openai/v1`.
    #[error("no such endpoint: {0}")]
    NotFound(String),
    /// The endpoint exists, not with this method.
    #[error("{method} is not allowed here; allowed: {allow}")]
    MethodNotAllowed {
        /// The method sent.
        method: String,
        /// The methods the endpoint takes.
        allow: &'static str,
    },
    /// Body over `[server] max_body_bytes`.
    #[error("the request body is larger than the limit of {0} bytes ([server] max_body_bytes)")]
    PayloadTooLarge(usize),
    /// The run was refused for money.
    #[error("{0}")]
    BudgetExceeded(String),
    /// The run ended without an answer.
    #[error("{}", .0.message)]
    RunFailed(RunError),
    /// The run did not finish in time; it goes on and can be read in `/v1/runs`.
    #[error("run {0} did not finish within the wait; follow it at /v1/runs/{0}")]
    Timeout(String),
    /// Shutting down or saturated.
    #[error("{message}")]
    Unavailable {
        /// What the runtime said.
        message: String,
        /// `unavailable` or `overloaded`.
        code: &'static str,
        /// Seconds before a retry, sent as `Retry-After`.
        retry_after_secs: Option<u64>,
    },
    /// A failure of ours.
    #[error("internal error: {0}")]
    Internal(String),
}

impl OpenAiError {
    /// A 400 naming the field at fault.
    pub fn invalid(message: impl Into<String>, param: impl Into<String>) -> Self {
        Self::InvalidRequest {
            message: message.into(),
            param: Some(param.into()),
            code: None,
        }
    }

    /// Status, `type` and `code` of this error.
    pub fn parts(&self) -> (StatusCode, &'static str, Option<String>) {
        const INVALID: &str = "invalid_request_error";
        const SERVER: &str = "server_error";
        let code = |c: &str| Some(c.to_owned());
        match self {
            Self::InvalidRequest { code: c, .. } => {
                (StatusCode::BAD_REQUEST, INVALID, c.map(str::to_owned))
            }
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, INVALID, code("invalid_api_key")),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, INVALID, code("forbidden")),
            Self::ForbiddenHost(_) => (StatusCode::FORBIDDEN, INVALID, code("forbidden_host")),
            Self::ForbiddenOrigin(_) => (StatusCode::FORBIDDEN, INVALID, code("forbidden_origin")),
            Self::UnsupportedMediaType(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                INVALID,
                code("unsupported_media_type"),
            ),
            Self::ModelNotFound(_) => (StatusCode::NOT_FOUND, INVALID, code("model_not_found")),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, INVALID, code("unknown_url")),
            Self::MethodNotAllowed { .. } => (
                StatusCode::METHOD_NOT_ALLOWED,
                INVALID,
                code("method_not_allowed"),
            ),
            Self::PayloadTooLarge(_) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                INVALID,
                code("payload_too_large"),
            ),
            Self::BudgetExceeded(_) => (
                StatusCode::TOO_MANY_REQUESTS,
                "insufficient_quota",
                code("budget_exceeded"),
            ),
            Self::RunFailed(e) => (StatusCode::INTERNAL_SERVER_ERROR, SERVER, code(&e.code)),
            Self::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, SERVER, code("timeout")),
            Self::Unavailable { code: c, .. } => (StatusCode::SERVICE_UNAVAILABLE, SERVER, code(c)),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, SERVER, code("internal")),
        }
    }

    /// The `param` field.
    fn param(&self) -> Option<&str> {
        match self {
            Self::InvalidRequest { param, .. } => param.as_deref(),
            Self::ModelNotFound(_) => Some("model"),
            _ => None,
        }
    }

    /// The envelope's body, also sent as a stream's last event.
    pub fn body(&self) -> serde_json::Value {
        let (_, kind, code) = self.parts();
        let message = match self {
            Self::Internal(cause) => {
                tracing::error!(error = %cause, "OpenAI-compatible request failed");
                "hearth could not complete the request; see the server log".to_owned()
            }
            other => other.to_string(),
        };
        json!({ "error": { "message": message, "type": kind, "param": self.param(), "code": code } })
    }

    /// A run's failure: a budget refusal is 429, anything else 500.
    pub fn from_run(e: RunError) -> Self {
        if e.code == "budget_exceeded" {
            Self::BudgetExceeded(e.message)
        } else {
            Self::RunFailed(e)
        }
    }
}

impl From<hearth_core::KeyError> for OpenAiError {
    fn from(e: hearth_core::KeyError) -> Self {
        RuntimeError::from(e).into()
    }
}

impl From<RuntimeError> for OpenAiError {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::InvalidInput(m) => Self::InvalidRequest {
                message: m,
                param: None,
                code: None,
            },
            RuntimeError::RunNotFound(_)
            | RuntimeError::JobNotFound(_)
            | RuntimeError::Store(_)
            | RuntimeError::Internal(_)
            | RuntimeError::InvalidConfig(_)
            | RuntimeError::NotFound(_) => Self::Internal(e.to_string()),
            RuntimeError::InvalidSchedule(_)
            | RuntimeError::InvalidManifest(_)
            | RuntimeError::Conflict(_)
            | RuntimeError::ChannelDisabled(_)
            | RuntimeError::InvalidMode(_) => Self::InvalidRequest {
                message: e.to_string(),
                param: None,
                code: None,
            },
            RuntimeError::IncognitoElsewhere { .. } => Self::InvalidRequest {
                message: e.to_string(),
                param: None,
                code: Some("incognito_elsewhere"),
            },
            RuntimeError::ConfirmationNotFound => Self::InvalidRequest {
                message: e.to_string(),
                param: Some("messages".into()),
                code: None,
            },
            RuntimeError::Forbidden(m) | RuntimeError::BypassInGroup(m) => Self::Forbidden(m),
            RuntimeError::UnknownModel(m) => Self::InvalidRequest {
                message: m,
                param: Some("model".into()),
                code: Some("model_not_found"),
            },
            RuntimeError::ShuttingDown => Self::Unavailable {
                message: e.to_string(),
                code: "unavailable",
                retry_after_secs: None,
            },
            RuntimeError::Overloaded {
                retry_after_secs, ..
            } => Self::Unavailable {
                message: e.to_string(),
                code: "overloaded",
                retry_after_secs: Some(retry_after_secs),
            },
        }
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let (status, _, _) = self.parts();
        let mut resp = (status, Json(self.body())).into_response();
        let headers = resp.headers_mut();
        match &self {
            Self::Unavailable {
                retry_after_secs: Some(s),
                ..
            } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(*s));
            }
            Self::MethodNotAllowed { allow, .. } => {
                headers.insert(header::ALLOW, HeaderValue::from_static(allow));
            }
            Self::RunFailed(_) | Self::BudgetExceeded(_) | Self::Timeout(_) => {
                headers.insert("x-should-retry", HeaderValue::from_static("false"));
            }
            _ => {}
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_has_openais_four_fields() {
        let e = OpenAiError::invalid("client-side tools are not supported", "tools");
        assert_eq!(
            e.body(),
            json!({ "error": { "message": "client-side tools are not supported",
                "type": "invalid_request_error", "param": "tools", "code": null } })
        );
        let e = OpenAiError::ModelNotFound("gpt-4o".into());
        assert_eq!(e.parts().0, StatusCode::NOT_FOUND);
        assert_eq!(e.body()["error"]["code"], "model_not_found");
        assert_eq!(e.body()["error"]["param"], "model");
    }

    #[test]
    fn a_run_refused_for_money_is_429_and_not_retried() {
        let e = OpenAiError::from_run(RunError {
            code: "budget_exceeded".into(),
            message: "pool daily".into(),
        });
        let resp = e.into_response();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()["x-should-retry"], "false");
    }
}
