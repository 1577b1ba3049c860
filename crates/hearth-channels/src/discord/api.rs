//! A thin Discord REST client on hearth's reqwest (twilight-http would bring
//! its own hyper client, drops `api_base`'s path when proxied, and has no
//! `enforce_nonce`). Every call sends `Authorization: Bot <token>`; answers
//! are JSON, errors `{code, message}` and 429s `{retry_after, global}`.
//!
//! Rate limits: a 429 blocks its route bucket (the route with its major
//! parameter, e.g. one channel's messages) or, when global, every route,
//! until `retry_after` has passed; so does a response that says the bucket
//! is empty (`X-RateLimit-Remaining: 0`). A call on a blocked bucket fails
//! at once as rate limited, without a request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

use crate::error::DeliveryError;

/// Longest a call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Discord's JSON error codes that mean the target is gone for good.
const UNKNOWN_MESSAGE: u64 = 10008;

/// A failed REST call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// Discord answered with an error status.
    #[error("Discord error HTTP {status} (code {code}): {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Discord's JSON error code (0 when absent).
        code: u64,
        /// Discord's message.
        message: String,
    },
    /// 429, or a bucket known to be empty.
    #[error("Discord rate limit: retry after {retry_after_ms} ms")]
    RateLimited {
        /// How long to wait.
        retry_after_ms: u64,
    },
    /// No answer: connection refused, reset, timed out.
    #[error("Discord unreachable: {0}")]
    Network(String),
    /// An answer that is not Discord's shape.
    #[error("unexpected answer from Discord: {0}")]
    Malformed(String),
}

impl ApiError {
    /// True for "Unknown Message" (already deleted).
    pub fn is_unknown_message(&self) -> bool {
        matches!(self, Self::Refused { code, .. } if *code == UNKNOWN_MESSAGE)
    }

    /// How the outbox must treat it.
    pub fn delivery(&self) -> DeliveryError {
        match self {
            Self::RateLimited { retry_after_ms } => DeliveryError::RateLimited {
                retry_after_ms: *retry_after_ms,
                message: self.to_string(),
            },
            // A bad token may be fixed in the config and hearth restarted:
            // keep the reply until then (or until outbox_max_age).
            Self::Refused { status: 401, .. } => DeliveryError::Transient(self.to_string()),
            Self::Refused { status, .. } if *status >= 500 => {
                DeliveryError::Transient(self.to_string())
            }
            // Missing access (403), unknown channel (404), bad request:
            // retrying cannot help.
            Self::Refused { .. } => DeliveryError::Permanent(self.to_string()),
            Self::Network(_) | Self::Malformed(_) => DeliveryError::Transient(self.to_string()),
        }
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: Option<u64>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    retry_after: Option<f64>,
    #[serde(default)]
    global: Option<bool>,
}

/// Buckets blocked until an instant; `"global"` blocks every route.
type Blocked = Arc<Mutex<HashMap<String, Instant>>>;

/// The REST API of one bot.
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    base: String,
    auth: String,
    blocked: Blocked,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Milliseconds from Discord's float seconds, rounded up.
fn secs_to_ms(secs: f64) -> u64 {
    if secs.is_finite() && secs > 0.0 {
        // Bounded above by a day, so the cast cannot overflow.
        (secs.min(86_400.0) * 1000.0).ceil() as u64
    } else {
        0
    }
}

impl Api {
    /// The bot with `token` at `api_base` (e.g. `https://discord.com/api/v10`).
    pub fn new(client: reqwest::Client, api_base: &str, token: &str) -> Self {
        Self {
            client,
            base: api_base.trim_end_matches('/').to_owned(),
            auth: format!("Bot {}", token.trim()),
            blocked: Arc::default(),
        }
    }

    fn blocked_for(&self, bucket: &str) -> Option<Duration> {
        let now = Instant::now();
        let map = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        [bucket, "global"]
            .iter()
            .filter_map(|b| map.get(*b))
            .filter(|until| **until > now)
            .map(|until| *until - now)
            .max()
    }

    fn block(&self, bucket: &str, d: Duration) {
        let until = Instant::now() + d;
        let mut map = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, u| *u > Instant::now());
        let e = map.entry(bucket.to_owned()).or_insert(until);
        *e = (*e).max(until);
    }

    /// Calls `method path` with an optional JSON body; `bucket` names the
    /// route's rate-limit bucket. An empty answer (204) reads as `null`.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        bucket: &str,
        body: Option<&Value>,
    ) -> Result<T, ApiError> {
        if let Some(wait) = self.blocked_for(bucket) {
            return Err(ApiError::RateLimited {
                retry_after_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1),
            });
        }
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", &self.auth)
            .timeout(CALL_TIMEOUT);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| ApiError::Network(hearth_core::error_text(&e.without_url())))?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let remaining = header("x-ratelimit-remaining");
        let reset_after = header("x-ratelimit-reset-after").and_then(|v| v.parse::<f64>().ok());
        let header_retry = header("retry-after").and_then(|v| v.parse::<f64>().ok());
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| ApiError::Network(hearth_core::error_text(&e.without_url())))?;
        if (200..300).contains(&status) {
            if remaining.as_deref() == Some("0")
                && let Some(secs) = reset_after
            {
                self.block(bucket, Duration::from_millis(secs_to_ms(secs)));
            }
            let text: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
            return serde_json::from_slice(text)
                .map_err(|e| ApiError::Malformed(format!("HTTP {status}: {e}")));
        }
        let err: Option<ErrorBody> = serde_json::from_slice(&bytes).ok();
        if status == 429 {
            let secs = err
                .as_ref()
                .and_then(|e| e.retry_after)
                .or(header_retry)
                .unwrap_or(1.0);
            let ms = secs_to_ms(secs).max(1);
            let global = err.as_ref().and_then(|e| e.global).unwrap_or(false);
            self.block(
                if global { "global" } else { bucket },
                Duration::from_millis(ms),
            );
            return Err(ApiError::RateLimited { retry_after_ms: ms });
        }
        Err(ApiError::Refused {
            status,
            code: err.as_ref().and_then(|e| e.code).unwrap_or(0),
            message: err
                .and_then(|e| e.message)
                .unwrap_or_else(|| format!("HTTP {status}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16, code: u64) -> ApiError {
        ApiError::Refused {
            status,
            code,
            message: "m".into(),
        }
    }

    #[test]
    fn errors_are_classified_for_the_outbox() {
        assert!(matches!(
            ApiError::RateLimited {
                retry_after_ms: 1500
            }
            .delivery(),
            DeliveryError::RateLimited {
                retry_after_ms: 1500,
                ..
            }
        ));
        assert!(matches!(
            refused(403, 50001).delivery(),
            DeliveryError::Permanent(_)
        ));
        assert!(matches!(
            refused(404, 10003).delivery(),
            DeliveryError::Permanent(_)
        ));
        assert!(matches!(
            refused(502, 0).delivery(),
            DeliveryError::Transient(_)
        ));
        assert!(matches!(
            refused(401, 0).delivery(),
            DeliveryError::Transient(_)
        ));
        assert!(refused(404, UNKNOWN_MESSAGE).is_unknown_message());
        assert_eq!(secs_to_ms(0.0011), 2);
        assert_eq!(secs_to_ms(f64::NAN), 0);
    }

    #[test]
    fn a_blocked_bucket_fails_without_a_request_and_debug_hides_the_token() {
        let api = Api::new(reqwest::Client::new(), "http://127.0.0.1:1/", "SECRET");
        assert!(!format!("{api:?}").contains("SECRET"));
        api.block("b", Duration::from_secs(60));
        assert!(api.blocked_for("b").is_some());
        assert!(api.blocked_for("other").is_none());
        api.block("global", Duration::from_secs(60));
        assert!(api.blocked_for("other").is_some());
    }
}
