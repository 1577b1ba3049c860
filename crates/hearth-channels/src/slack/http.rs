//! HTTP mode: Slack posts events (JSON), button presses (form field
//! `payload`) and slash commands (form) to `POST /channels/slack/events`.
//! Each request is authenticated by its signature: `X-Slack-Signature` is
//! `v0=` and the hex HMAC-SHA256, keyed by the signing secret, of
//! `v0:{X-Slack-Request-Timestamp}:{body}`, compared in constant time;
//! requests more than five minutes off are refused (replays). The answer is
//! 200 only once the event is stored, so Slack retries anything hearth did
//! not take.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hearth_runtime::Runtime;
use hearth_runtime::surfaces::Webhook;
use hmac::{Hmac, Mac};
use http::{HeaderMap, StatusCode};
use serde_json::Value;
use sha2::Sha256;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::{Sl, Slack};
use crate::backoff::Backoff;
use crate::channel::Live;
use crate::error::ChannelError;

/// The events route.
pub const PATH: &str = "/channels/slack/events";
/// Largest clock difference accepted, seconds.
const MAX_SKEW_SECS: i64 = 300;

/// Slack's push endpoint in HTTP mode.
pub(super) struct SlackEvents(pub(super) Arc<Slack>);

#[async_trait::async_trait]
impl Webhook for SlackEvents {
    fn path(&self) -> &'static str {
        PATH
    }

    async fn handle(
        &self,
        runtime: &Runtime,
        request: http::Request<Bytes>,
    ) -> http::Response<Bytes> {
        let slack = Live::new(self.0.clone(), runtime.clone());
        let (parts, body) = request.into_parts();
        let (status, body) = receive(&slack, &parts.headers, &body).await;
        let mut resp = http::Response::new(body.map(Bytes::from).unwrap_or_default());
        *resp.status_mut() = status;
        if !resp.body().is_empty() {
            resp.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
        }
        resp
    }
}

/// In HTTP mode nothing is received here: the bot's id is learnt (to
/// remove its mention and ignore its own messages), with backoff.
pub(super) async fn run(slack: Arc<Slack>, stop: CancellationToken) {
    if slack.signing_secret.is_none() {
        let why = "HTTP mode without a signing secret: every event is refused; set the variable signing_secret_env names";
        tracing::error!(channel = "slack", "{why}");
        for _ in 0..3 {
            slack.kit.health.failed(why);
        }
    }
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        match slack.identify().await {
            Ok(()) => {
                if slack.signing_secret.is_some() {
                    slack.kit.health.ok();
                }
                return;
            }
            Err(e) => {
                if matches!(e, ChannelError::NoToken { .. }) {
                    warn!(channel = "slack", error = %e, "auth.test failed");
                    slack.kit.health.failed(e.to_string());
                    return;
                }
                let delay = match slack.refused(&e.to_string(), false, &mut backoff) {
                    Some(delay) => delay,
                    None => {
                        warn!(channel = "slack", error = %e, "auth.test failed; retrying with backoff");
                        slack.kit.health.failed(e.to_string());
                        backoff.next_delay()
                    }
                };
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// Why a request's signature is refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A header is missing or unreadable.
    Missing,
    /// The timestamp is more than five minutes from now.
    Stale,
    /// The signature does not match.
    Mismatch,
}

impl Refused {
    /// The reason in words, for the log.
    fn as_str(&self) -> &'static str {
        match self {
            Self::Missing => "a signature header is missing or unreadable",
            Self::Stale => "the timestamp is more than five minutes from now",
            Self::Mismatch => "the signature does not match",
        }
    }
}

/// Checks a request's signature at `now` (Unix seconds).
pub(crate) fn verify(
    secret: &str,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<(), Refused> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(ts), Some(sig)) = (
        header("x-slack-request-timestamp"),
        header("x-slack-signature"),
    ) else {
        return Err(Refused::Missing);
    };
    let ts_num: i64 = ts.trim().parse().map_err(|_| Refused::Missing)?;
    if (now - ts_num).abs() > MAX_SKEW_SECS {
        return Err(Refused::Stale);
    }
    let expected = sign(secret, ts, body);
    if constant_time_eq(sig.as_bytes(), expected.as_bytes()) {
        Ok(())
    } else {
        Err(Refused::Mismatch)
    }
}

/// Compares without stopping at the first difference, so the time taken
/// does not tell how much of a forged signature was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `v0=` and the hex HMAC-SHA256 of `v0:{ts}:{body}`.
pub fn sign(secret: &str, ts: &str, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        // HMAC takes keys of any length; this cannot happen.
        return String::new();
    };
    mac.update(b"v0:");
    mac.update(ts.as_bytes());
    mac.update(b":");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(3 + digest.len() * 2);
    out.push_str("v0=");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

fn unix_now() -> i64 {
    hearth_core::now_ms() / 1000
}

/// Answers one request: its status, and a JSON body when it has one.
async fn receive(slack: &Sl, headers: &HeaderMap, body: &[u8]) -> (StatusCode, Option<Vec<u8>>) {
    let Some(secret) = &slack.signing_secret else {
        warn!(
            channel = "slack",
            "event refused: no signing secret is configured"
        );
        return (StatusCode::UNAUTHORIZED, None);
    };
    if let Err(why) = verify(secret, headers, body, unix_now()) {
        warn!(
            channel = "slack",
            reason = why.as_str(),
            "event with a bad or stale signature refused"
        );
        return (StatusCode::UNAUTHORIZED, None);
    }
    let form = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let outcome = if form {
        form_request(slack, body).await
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(v) if v.get("type").and_then(Value::as_str) == Some("url_verification") => {
                let challenge = v
                    .get("challenge")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let answer = serde_json::json!({ "challenge": challenge }).to_string();
                return (StatusCode::OK, Some(answer.into_bytes()));
            }
            Ok(v) if v.get("type").and_then(Value::as_str) == Some("event_callback") => {
                super::inbound::handle(slack, v).await
            }
            Ok(_) => Ok(()),
            Err(e) => {
                // Redelivering a malformed body cannot help: take it and log.
                warn!(channel = "slack", error = %e, "skipping a malformed event body");
                Ok(())
            }
        }
    };
    match crate::kit::settle("slack", outcome) {
        Ok(()) => {
            slack.kit.health.event();
            (StatusCode::OK, None)
        }
        Err(e) => {
            warn!(channel = "slack", error = %e, "could not store an event; Slack will send it again");
            slack.kit.health.failed(format!("storing events: {e}"));
            (StatusCode::SERVICE_UNAVAILABLE, None)
        }
    }
}

/// A button press (`payload=<json>`) or a slash command (its fields).
async fn form_request(slack: &Sl, body: &[u8]) -> Result<(), ChannelError> {
    let fields: BTreeMap<String, String> = match serde_urlencoded::from_bytes(body) {
        Ok(f) => f,
        Err(e) => {
            warn!(channel = "slack", error = %e, "skipping a malformed form body");
            return Ok(());
        }
    };
    if let Some(payload) = fields.get("payload") {
        return match serde_json::from_str::<Value>(payload) {
            Ok(v) => super::interactive::handle(slack, v).await,
            Err(e) => {
                warn!(channel = "slack", error = %e, "skipping a malformed interaction");
                Ok(())
            }
        };
    }
    let fields = Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect(),
    );
    match serde_json::from_value(fields) {
        Ok(cmd) => super::commands::command(slack, cmd).await,
        Err(e) => {
            warn!(channel = "slack", error = %e, "skipping a malformed slash command");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(ts: &str, sig: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            "x-slack-request-timestamp",
            HeaderValue::from_str(ts).unwrap(),
        );
        h.insert("x-slack-signature", HeaderValue::from_str(sig).unwrap());
        h
    }

    #[test]
    fn slacks_documented_example_verifies() {
        // From Slack's "Verifying requests from Slack" guide.
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign(secret, "1531420618", body), sig);
        let h = headers("1531420618", sig);
        assert_eq!(verify(secret, &h, body, 1_531_420_618 + 299), Ok(()));
        assert_eq!(
            verify(secret, &h, body, 1_531_420_618 + 301),
            Err(Refused::Stale)
        );
        assert_eq!(
            verify(secret, &h, b"tampered", 1_531_420_618),
            Err(Refused::Mismatch)
        );
        assert_eq!(
            verify("other", &h, body, 1_531_420_618),
            Err(Refused::Mismatch)
        );
        assert_eq!(
            verify(secret, &HeaderMap::new(), body, 0),
            Err(Refused::Missing)
        );
    }
}
