//! Webhook mode: Telegram posts each update to
//! `POST /channels/telegram/webhook` with the secret in
//! `X-Telegram-Bot-Api-Secret-Token`. The answer is 200 only once the
//! update is stored, so Telegram redelivers anything hearth did not take.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::Value;

use super::Telegram;

/// The webhook's path.
pub const PATH: &str = "/channels/telegram/webhook";

pub(super) fn routes(tg: Arc<Telegram>) -> Router {
    Router::new().route(PATH, post(receive)).with_state(tg)
}

/// Compares without stopping at the first difference, so the time taken
/// does not tell how much of a guess was right.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn receive(State(tg): State<Arc<Telegram>>, headers: HeaderMap, body: Bytes) -> StatusCode {
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
    let update: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            // Redelivering a malformed update cannot help: take it and log.
            tracing::warn!(channel = "telegram", error = %e, "skipping a malformed webhook update");
            return StatusCode::OK;
        }
    };
    match super::inbound::handle_batch(&tg, vec![update]).await {
        Ok(_) => {
            tg.health.event();
            StatusCode::OK
        }
        Err(e) => {
            tracing::warn!(channel = "telegram", error = %e, "could not store a webhook update; Telegram will send it again");
            tg.health.failed(format!("storing updates: {e}"));
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
