//! A thin Slack Web API client on hearth's reqwest: every call is
//! `POST {api_base}/<method>` with a JSON body and `Authorization: Bearer`,
//! answered by `{ok: true, ...}` or `{ok: false, error}` (HTTP 200), or a
//! 429 with `Retry-After`. Tokens travel only in the header, and neither
//! `Debug` nor any error shows them.
//!
//! Rate limits: Slack limits each Web API method per workspace, so a 429
//! blocks that method's bucket (every `chat.postMessage` of the app, in any
//! conversation) until `Retry-After` has passed. A call on a blocked bucket
//! fails at once as rate limited, without a request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::DeliveryError;

/// Longest a call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A failed Web API call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// Slack answered `ok: false` (or an HTTP error status).
    #[error("Slack error: {error}")]
    Refused {
        /// The `error` code (`channel_not_found`, `ratelimited`, ...), or
        /// `HTTP <status>` when the body had none.
        error: String,
        /// The HTTP status.
        status: u16,
        /// `Retry-After`, seconds (429).
        retry_after: Option<u64>,
    },
    /// The method's bucket is blocked by an earlier 429; nothing was sent.
    #[error("Slack rate limit on {method}: retry after {retry_after_ms} ms")]
    Blocked {
        /// The blocked method.
        method: String,
        /// How long the block lasts.
        retry_after_ms: u64,
    },
    /// No answer: connection refused, reset, timed out.
    #[error("Slack unreachable: {0}")]
    Network(String),
    /// An answer that is not the Web API's shape.
    #[error("unexpected answer from Slack: {0}")]
    Malformed(String),
}

/// Error codes after which retrying the same request cannot help.
const PERMANENT: &[&str] = &[
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "msg_too_long",
    "no_text",
    "invalid_blocks",
    "invalid_blocks_format",
    "too_many_attachments",
    "message_not_found",
    "cant_update_message",
    "edit_window_closed",
    "restricted_action",
    "restricted_action_read_only_channel",
    "restricted_action_thread_only_channel",
    "restricted_action_non_threadable_channel",
    "user_not_in_channel",
    "user_not_found",
    "cannot_dm_bot",
    "missing_scope",
    "invalid_arguments",
    "invalid_arg_name",
    "invalid_array_arg",
    "invalid_json",
    "json_not_object",
    "thread_reply_not_available",
    "duplicate_channel_not_found",
];

impl ApiError {
    /// The Web API `error` code, if Slack gave one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Refused { error, .. } => Some(error),
            Self::Blocked { .. } | Self::Network(_) | Self::Malformed(_) => None,
        }
    }

    /// True when Slack answered with error code `code`.
    pub fn is(&self, code: &str) -> bool {
        self.code() == Some(code)
    }

    /// How the outbox must treat it.
    pub fn delivery(&self) -> DeliveryError {
        match self {
            Self::Refused {
                status: 429,
                retry_after,
                error,
            } => DeliveryError::RateLimited {
                retry_after_ms: retry_after.unwrap_or(1).saturating_mul(1000),
                message: error.clone(),
            },
            Self::Blocked {
                retry_after_ms,
                method,
            } => DeliveryError::RateLimited {
                retry_after_ms: *retry_after_ms,
                message: format!("{method} rate limited"),
            },
            Self::Refused { error, .. } if error == "ratelimited" => DeliveryError::RateLimited {
                retry_after_ms: 1000,
                message: error.clone(),
            },
            Self::Refused { status, .. } if *status >= 500 => {
                DeliveryError::Transient(self.to_string())
            }
            // The conversation is gone, the bot is not in it, or the request
            // cannot be sent as it is.
            Self::Refused { error, .. } if PERMANENT.contains(&error.as_str()) => {
                DeliveryError::Permanent(self.to_string())
            }
            // invalid_auth, not_authed, token_revoked, account_inactive: the
            // token may be fixed (or the app reinstalled) and hearth
            // restarted, so the reply is kept until then or outbox_max_age;
            // internal_error, fatal_error, service_unavailable and codes this
            // list does not know are retried the same way.
            Self::Refused { .. } | Self::Network(_) | Self::Malformed(_) => {
                DeliveryError::Transient(self.to_string())
            }
        }
    }
}

/// The Web API with the bot token (`xoxb-`) and, for Socket Mode, the
/// app-level token (`xapp-`).
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    base: String,
    bot_token: String,
    /// Methods blocked by a 429, until when; shared by clones.
    blocked: Arc<Mutex<HashMap<String, Instant>>>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// The app with `bot_token` at `api_base` (no trailing slash needed).
    pub fn new(client: reqwest::Client, api_base: &str, bot_token: String) -> Self {
        Self {
            client,
            base: api_base.trim_end_matches('/').to_owned(),
            bot_token,
            blocked: Arc::default(),
        }
    }

    /// How long `method`'s bucket is still blocked, if it is.
    fn blocked_for(&self, method: &str) -> Option<Duration> {
        let now = Instant::now();
        let map = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(method)
            .filter(|until| **until > now)
            .map(|until| *until - now)
    }

    /// Blocks `method`'s bucket for `d` (never shortening a longer block).
    fn block(&self, method: &str, d: Duration) {
        let now = Instant::now();
        let until = now + d;
        let mut map = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, u| *u > now);
        let e = map.entry(method.to_owned()).or_insert(until);
        *e = (*e).max(until);
    }

    /// Calls `method` with the bot token.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &Value,
    ) -> Result<T, ApiError> {
        self.call_as(&self.bot_token, method, body).await
    }

    /// Calls `method` with `token` (the app-level token for
    /// `apps.connections.open`).
    pub async fn call_as<T: DeserializeOwned>(
        &self,
        token: &str,
        method: &str,
        body: &Value,
    ) -> Result<T, ApiError> {
        if let Some(wait) = self.blocked_for(method) {
            return Err(ApiError::Blocked {
                method: method.to_owned(),
                retry_after_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1),
            });
        }
        let req = self
            .client
            .post(format!("{}/{method}", self.base))
            .bearer_auth(token)
            .json(body);
        let result = send(req).await;
        if let Err(ApiError::Refused {
            status: 429,
            retry_after,
            ..
        }) = &result
        {
            // Slack always sends Retry-After with a 429; one second if not.
            self.block(
                method,
                Duration::from_secs(retry_after.unwrap_or(1).clamp(1, 86_400)),
            );
        }
        result
    }

    /// Posts `body` to a `response_url` Slack gave with a slash command or
    /// an interaction (it carries its own authority; no token is sent).
    pub async fn respond(&self, response_url: &str, body: &Value) -> Result<(), ApiError> {
        let resp = self
            .client
            .post(response_url)
            .json(body)
            .timeout(CALL_TIMEOUT)
            .send()
            .await
            .map_err(|e| ApiError::Network(hearth_core::error_text(&e.without_url())))?;
        let status = resp.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(ApiError::Refused {
                error: format!("HTTP {}", status.as_u16()),
                status: status.as_u16(),
                retry_after: retry_after(resp.headers()),
            })
        }
    }
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

async fn send<T: DeserializeOwned>(req: reqwest::RequestBuilder) -> Result<T, ApiError> {
    let resp = req
        .timeout(CALL_TIMEOUT)
        .send()
        .await
        .map_err(|e| ApiError::Network(hearth_core::error_text(&e.without_url())))?;
    let status = resp.status().as_u16();
    let retry_after = retry_after(resp.headers());
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| ApiError::Network(hearth_core::error_text(&e.without_url())))?;
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        // A proxy's HTML page or an empty 429: the status says it all.
        Err(_) if status == 429 || status >= 500 => Value::Null,
        Err(e) => return Err(ApiError::Malformed(format!("HTTP {status}, {e}"))),
    };
    let ok = body.get("ok").and_then(Value::as_bool).unwrap_or(false);
    if !ok || status >= 400 {
        let error = body
            .get("error")
            .and_then(Value::as_str)
            .map_or_else(|| format!("HTTP {status}"), str::to_owned);
        return Err(ApiError::Refused {
            error,
            status,
            retry_after,
        });
    }
    serde_json::from_value(body).map_err(|e| ApiError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(error: &str, status: u16, retry_after: Option<u64>) -> ApiError {
        ApiError::Refused {
            error: error.into(),
            status,
            retry_after,
        }
    }

    #[test]
    fn errors_are_classified_for_the_outbox() {
        assert_eq!(
            refused("ratelimited", 429, Some(7)).delivery(),
            DeliveryError::RateLimited {
                retry_after_ms: 7000,
                message: "ratelimited".into()
            }
        );
        for permanent in ["channel_not_found", "not_in_channel", "msg_too_long"] {
            assert!(
                matches!(
                    refused(permanent, 200, None).delivery(),
                    DeliveryError::Permanent(_)
                ),
                "{permanent}"
            );
        }
        for transient in [
            "invalid_auth",
            "account_inactive",
            "internal_error",
            "HTTP 503",
        ] {
            let status = if transient.starts_with("HTTP") {
                503
            } else {
                200
            };
            assert!(
                matches!(
                    refused(transient, status, None).delivery(),
                    DeliveryError::Transient(_)
                ),
                "{transient}"
            );
        }
        assert!(matches!(
            ApiError::Network("connection refused".into()).delivery(),
            DeliveryError::Transient(_)
        ));
        assert!(refused("not_in_channel", 200, None).is("not_in_channel"));
    }

    #[tokio::test]
    async fn a_429_blocks_the_method_for_every_conversation_without_a_request() {
        // Nothing listens on port 1: a request would fail as Network.
        let api = Api::new(
            reqwest::Client::new(),
            "http://127.0.0.1:1",
            "xoxb-t".into(),
        );
        api.block("chat.postMessage", Duration::from_secs(30));
        for channel in ["C1", "D2"] {
            let body = serde_json::json!({ "channel": channel, "text": "hi" });
            let err = api
                .call::<Value>("chat.postMessage", &body)
                .await
                .unwrap_err();
            match err.delivery() {
                DeliveryError::RateLimited { retry_after_ms, .. } => {
                    assert!(
                        (29_000..=30_000).contains(&retry_after_ms),
                        "{retry_after_ms}"
                    );
                }
                other => panic!("expected a rate limit, got {other:?}"),
            }
        }
        // Another method's bucket is not blocked: it reaches the network.
        let err = api
            .call::<Value>("chat.update", &serde_json::json!({}))
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::Network(_)), "{err:?}");
    }

    #[test]
    fn debug_hides_the_token() {
        let api = Api::new(
            reqwest::Client::new(),
            "http://127.0.0.1:1/",
            "xoxb-SECRET".into(),
        );
        assert!(!format!("{api:?}").contains("SECRET"));
    }
}
