//! A thin Telegram Bot API client on hearth's reqwest: every call is
//! `POST {api_base}/bot<token>/<method>` with a JSON body, answered by
//! `{ok, result}` or `{ok: false, error_code, description, parameters}`.
//! The token is part of the URL, so no URL ever reaches a log or an error.

use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::DeliveryError;

/// Longest a non-polling call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A failed Bot API call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// Telegram answered `ok: false`.
    #[error("Telegram error {code}: {description}")]
    Refused {
        /// `error_code` (an HTTP status).
        code: u16,
        /// `description`.
        description: String,
        /// `parameters.retry_after`, seconds.
        retry_after: Option<u64>,
    },
    /// No answer: connection refused, reset, timed out.
    #[error("Telegram unreachable: {0}")]
    Network(String),
    /// An answer that is not the Bot API's shape.
    #[error("unexpected answer from Telegram: {0}")]
    Malformed(String),
}

impl ApiError {
    /// True for "can't parse entities" (the text goes out plain instead).
    pub fn is_entity_error(&self) -> bool {
        matches!(self, Self::Refused { code: 400, description, .. } if description.contains("can't parse entities"))
    }

    /// True when the description contains `needle` (Telegram's wording).
    pub fn says(&self, needle: &str) -> bool {
        matches!(self, Self::Refused { description, .. } if description.contains(needle))
    }

    /// How the outbox must treat it.
    pub fn delivery(&self) -> DeliveryError {
        match self {
            Self::Refused {
                code: 429,
                description,
                retry_after,
            } => DeliveryError::RateLimited {
                retry_after_ms: retry_after.unwrap_or(1).saturating_mul(1000),
                message: description.clone(),
            },
            // A bad token may be fixed in the config and hearth restarted:
            // keep the reply until then (or until outbox_max_age).
            Self::Refused { code: 401, .. } => DeliveryError::Transient(self.to_string()),
            Self::Refused { code, .. } if *code >= 500 => {
                DeliveryError::Transient(self.to_string())
            }
            // Chat not found, bot blocked or kicked, bad request: retrying
            // cannot help.
            Self::Refused { .. } => DeliveryError::Permanent(self.to_string()),
            Self::Network(_) | Self::Malformed(_) => DeliveryError::Transient(self.to_string()),
        }
    }
}

#[derive(Deserialize)]
struct Envelope {
    ok: bool,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error_code: Option<u16>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Parameters>,
}

#[derive(Deserialize)]
struct Parameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

/// The Bot API of one bot.
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    base: String,
    token: String,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// The bot with `token` at `api_base` (no trailing slash needed).
    pub fn new(client: reqwest::Client, api_base: &str, token: String) -> Self {
        Self {
            client,
            base: api_base.trim_end_matches('/').to_owned(),
            token,
        }
    }

    /// Calls `method` with `body`, waiting at most `CALL_TIMEOUT`.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &Value,
    ) -> Result<T, ApiError> {
        self.call_within(method, body, CALL_TIMEOUT).await
    }

    /// Calls `method` with `body`, waiting at most `timeout`.
    pub async fn call_within<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let url = format!("{}/bot{}/{method}", self.base, self.token);
        let resp = self
            .client
            .post(url)
            .json(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| ApiError::Network(hearth_core::error_text(&e.without_url())))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| ApiError::Network(hearth_core::error_text(&e.without_url())))?;
        let env: Envelope = serde_json::from_slice(&bytes).map_err(|e| {
            if status >= 500 {
                // A proxy's HTML error page: the platform is down, not malformed.
                ApiError::Refused {
                    code: status,
                    description: format!("HTTP {status}"),
                    retry_after: None,
                }
            } else {
                ApiError::Malformed(format!("HTTP {status}, {e}"))
            }
        })?;
        if !env.ok {
            return Err(ApiError::Refused {
                code: env.error_code.unwrap_or(status),
                description: env.description.unwrap_or_else(|| format!("HTTP {status}")),
                retry_after: env.parameters.and_then(|p| p.retry_after),
            });
        }
        let result = env.result.unwrap_or(Value::Null);
        serde_json::from_value(result).map_err(|e| ApiError::Malformed(format!("{method}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: u16, description: &str, retry_after: Option<u64>) -> ApiError {
        ApiError::Refused {
            code,
            description: description.into(),
            retry_after,
        }
    }

    #[test]
    fn errors_are_classified_for_the_outbox() {
        assert_eq!(
            refused(429, "Too Many Requests: retry after 3", Some(3)).delivery(),
            DeliveryError::RateLimited {
                retry_after_ms: 3000,
                message: "Too Many Requests: retry after 3".into()
            }
        );
        assert!(matches!(
            refused(502, "Bad Gateway", None).delivery(),
            DeliveryError::Transient(_)
        ));
        assert!(matches!(
            refused(403, "Forbidden: bot was blocked by the user", None).delivery(),
            DeliveryError::Permanent(_)
        ));
        assert!(matches!(
            refused(400, "Bad Request: chat not found", None).delivery(),
            DeliveryError::Permanent(_)
        ));
        assert!(matches!(
            ApiError::Network("refused".into()).delivery(),
            DeliveryError::Transient(_)
        ));
        assert!(
            refused(
                400,
                "Bad Request: can't parse entities: Unsupported start tag",
                None
            )
            .is_entity_error()
        );
        assert!(!refused(400, "Bad Request: chat not found", None).is_entity_error());
    }

    #[test]
    fn debug_hides_the_token() {
        let api = Api::new(
            reqwest::Client::new(),
            "http://127.0.0.1:1/",
            "123:SECRET".into(),
        );
        assert!(!format!("{api:?}").contains("SECRET"));
    }
}
