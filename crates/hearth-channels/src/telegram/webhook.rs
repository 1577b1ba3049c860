//! Webhook mode: Telegram posts each update to
//! `POST /channels/telegram/webhook` with the secret in
//! `X-Telegram-Bot-Api-Secret-Token`. The answer is 200 only once the
//! update is stored, so Telegram redelivers anything hearth did not take.

use std::sync::Arc;

use bytes::Bytes;
use hearth_runtime::Runtime;
use hearth_runtime::surfaces::Webhook;
use http::StatusCode;
use serde_json::Value;

use super::Telegram;
use crate::channel::Live;

/// The webhook's path.
pub const PATH: &str = "/channels/telegram/webhook";

/// Telegram's push endpoint.
pub(super) struct TelegramWebhook(pub(super) Arc<Telegram>);

#[async_trait::async_trait]
impl Webhook for TelegramWebhook {
    fn path(&self) -> &'static str {
        PATH
    }

    async fn handle(
        &self,
        runtime: &Runtime,
        request: http::Request<Bytes>,
    ) -> http::Response<Bytes> {
        let tg = Live::new(self.0.clone(), runtime.clone());
        let (parts, body) = request.into_parts();
        let mut resp = http::Response::new(Bytes::new());
        *resp.status_mut() = receive(&tg, &parts.headers, &body).await;
        resp
    }
}

/// Compares without stopping at the first difference, so the time taken
/// does not tell how much of a guess was right.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn receive(tg: &Live<Telegram>, headers: &http::HeaderMap, body: &[u8]) -> StatusCode {
    let given = headers
        .get("x-telegram-bot-api-secret-token")
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    let Some(secret) = &tg.webhook_secret else {
        tracing::warn!(
            channel = "telegram",
            "webhook call refused: no webhook secret is configured"
        );
        return StatusCode::UNAUTHORIZED;
    };
    if !constant_time_eq(given, secret.as_bytes()) {
        tracing::warn!(
            channel = "telegram",
            "webhook call with a wrong secret token refused"
        );
        return StatusCode::UNAUTHORIZED;
    }
    let update: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            // Redelivering a malformed update cannot help: take it and log.
            tracing::warn!(channel = "telegram", error = %e, "skipping a malformed webhook update");
            return StatusCode::OK;
        }
    };
    match super::inbound::handle_batch(tg, vec![update]).await {
        Ok(_) => {
            tg.kit.health.event();
            StatusCode::OK
        }
        Err(e) => {
            tracing::warn!(channel = "telegram", error = %e, "could not store a webhook update; Telegram will send it again");
            tg.kit.health.failed(format!("storing updates: {e}"));
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
