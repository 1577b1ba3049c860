//! A thin client of Twilio's REST API on hearth's reqwest: sending a
//! message (`POST {api_base}/2010-04-01/Accounts/{sid}/Messages.json`,
//! form `To`, `From` or `MessagingServiceSid`, `Body`) and reading the
//! account (`hearth doctor`, start-up), both with HTTP Basic
//! `account_sid:auth_token`. Errors are Twilio's JSON (`code`, `message`,
//! `status`); a 429 carries `Retry-After`. The token travels only in the
//! header, and neither `Debug` nor any error shows it.

use std::time::Duration;

use serde::Deserialize;

use crate::error::DeliveryError;

/// Longest a call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Twilio's error for a message to a number that texted STOP.
pub const UNSUBSCRIBED: u32 = 21_610;

/// A failed call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// Twilio answered an error status.
    #[error("Twilio refused (HTTP {status}, code {code}): {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Twilio's error code (0 when the body had none).
        code: u32,
        /// Twilio's words.
        message: String,
        /// `Retry-After`, seconds (429).
        retry_after: Option<u64>,
    },
    /// No answer: connection refused, reset, timed out.
    #[error("Twilio unreachable: {0}")]
    Network(String),
    /// An answer that is not the API's shape.
    #[error("unexpected answer from Twilio: {0}")]
    Malformed(String),
}

impl ApiError {
    /// How the outbox must treat it.
    pub fn delivery(&self) -> DeliveryError {
        match self {
            Self::Refused {
                status: 429,
                retry_after,
                message,
                ..
            } => DeliveryError::RateLimited {
                retry_after_ms: retry_after.unwrap_or(1).max(1).saturating_mul(1000),
                message: message.clone(),
            },
            Self::Refused { status, .. } if *status >= 500 => {
                DeliveryError::Transient(self.to_string())
            }
            // Credentials may be fixed and hearth restarted before the
            // reply is too old.
            Self::Refused {
                status: 401 | 403, ..
            } => DeliveryError::Transient(self.to_string()),
            // A bad number, an unsubscribed recipient, a body Twilio will
            // not take: sending the same again cannot help.
            Self::Refused { .. } => DeliveryError::Permanent(self.to_string()),
            Self::Network(_) | Self::Malformed(_) => DeliveryError::Transient(self.to_string()),
        }
    }
}

/// Twilio's error body.
#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: Option<u32>,
    #[serde(default)]
    message: Option<String>,
}

/// A created message (only what hearth reads).
#[derive(Debug, Deserialize)]
pub struct Sent {
    /// Its SID (`SM...`).
    pub sid: String,
}

/// The account, as `GET /Accounts/{sid}.json` shows it.
#[derive(Debug, Deserialize)]
pub struct Account {
    /// Its name.
    #[serde(default)]
    pub friendly_name: String,
    /// `active`, `suspended` or `closed`.
    #[serde(default)]
    pub status: String,
}

/// Where answers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    /// A Twilio number (E.164).
    From(String),
    /// A Messaging Service SID (`MG...`).
    Service(String),
}

/// The REST API of one account.
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    base: String,
    account_sid: String,
    auth_token: String,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .field("account_sid", &self.account_sid)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// The API of `account_sid` at `api_base` (no trailing slash needed).
    pub fn new(
        client: reqwest::Client,
        api_base: &str,
        account_sid: &str,
        auth_token: String,
    ) -> Self {
        Self {
            client,
            base: api_base.trim_end_matches('/').to_owned(),
            account_sid: account_sid.to_owned(),
            auth_token,
        }
    }

    /// The auth token, which also signs inbound posts.
    pub(super) fn auth_token(&self) -> &str {
        &self.auth_token
    }

    fn account_url(&self) -> String {
        format!("{}/2010-04-01/Accounts/{}", self.base, self.account_sid)
    }

    /// Sends `body` to `to` from `sender`.
    pub async fn send(&self, sender: &Sender, to: &str, body: &str) -> Result<Sent, ApiError> {
        let mut form = vec![("To", to), ("Body", body)];
        match sender {
            Sender::From(n) => form.push(("From", n)),
            Sender::Service(s) => form.push(("MessagingServiceSid", s)),
        }
        let req = self
            .client
            .post(format!("{}/Messages.json", self.account_url()))
            .basic_auth(&self.account_sid, Some(&self.auth_token))
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(
                serde_urlencoded::to_string(&form)
                    .map_err(|e| ApiError::Malformed(e.to_string()))?,
            );
        call(req).await
    }

    /// Reads the account: what `hearth doctor` and the start-up check call.
    pub async fn account(&self, timeout: Duration) -> Result<Account, ApiError> {
        let req = self
            .client
            .get(format!("{}.json", self.account_url()))
            .basic_auth(&self.account_sid, Some(&self.auth_token))
            .timeout(timeout);
        call(req).await
    }
}

async fn call<T: serde::de::DeserializeOwned>(req: reqwest::RequestBuilder) -> Result<T, ApiError> {
    let resp = req
        .timeout(CALL_TIMEOUT)
        .send()
        .await
        .map_err(|e| ApiError::Network(e.without_url().to_string()))?;
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| ApiError::Network(e.without_url().to_string()))?;
    if (200..300).contains(&status) {
        return serde_json::from_slice(&bytes).map_err(|e| ApiError::Malformed(e.to_string()));
    }
    let body: ErrorBody = serde_json::from_slice(&bytes).unwrap_or_default();
    Err(ApiError::Refused {
        status,
        code: body.code.unwrap_or(0),
        message: body
            .message
            .unwrap_or_else(|| format!("HTTP {status} without a message")),
        retry_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16, code: u32, retry_after: Option<u64>) -> ApiError {
        ApiError::Refused {
            status,
            code,
            message: "m".into(),
            retry_after,
        }
    }

    #[test]
    fn failures_map_to_what_the_outbox_does() {
        assert_eq!(
            refused(429, 20_429, Some(7)).delivery(),
            DeliveryError::RateLimited {
                retry_after_ms: 7000,
                message: "m".into()
            }
        );
        assert!(matches!(
            refused(429, 0, None).delivery(),
            DeliveryError::RateLimited {
                retry_after_ms: 1000,
                ..
            }
        ));
        assert!(matches!(
            refused(503, 0, None).delivery(),
            DeliveryError::Transient(_)
        ));
        assert!(matches!(
            refused(401, 20_003, None).delivery(),
            DeliveryError::Transient(_)
        ));
        assert!(matches!(
            refused(400, UNSUBSCRIBED, None).delivery(),
            DeliveryError::Permanent(_)
        ));
        assert!(
            format!(
                "{:?}",
                Api::new(
                    reqwest::Client::new(),
                    "http://x",
                    "AC1",
                    "secret-token".into()
                )
            )
            .find("secret-token")
            .is_none()
        );
    }
}
