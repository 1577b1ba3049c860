//! Delivering outbox items over REST, and the best-effort progress calls.
//! Every part of a message carries a nonce derived from its outbox item and
//! part, with `enforce_nonce`: when a retry follows a request that did
//! reach Discord, Discord answers with the message already created instead
//! of posting it twice.

use hearth_core::records::outbox::{OutboxItem, OutboxKind};
use reqwest::Method;
use serde_json::{Value, json};

use super::api::{Api, ApiError};
use super::{Discord, is_snowflake};
use crate::channel::Undelivered;
use crate::commands::Button;
use crate::error::DeliveryError;
use crate::outbox::save_progress;
use crate::payload::Payload;
use crate::progress::ProgressSink;
use crate::reactions;
use crate::text::split_markdown;

/// Discord's limit on a message's content, in characters.
pub const MAX_CONTENT: usize = 2000;
/// Discord's limit on a component's `custom_id`.
pub const MAX_CUSTOM_ID: usize = 100;
/// Discord's limit on a string nonce.
const MAX_NONCE: usize = 25;

/// The messages a reply is sent as, each within [`MAX_CONTENT`], code
/// blocks closed and reopened across a split.
pub fn parts(text: &str) -> Vec<String> {
    split_markdown(text, MAX_CONTENT, &|line: &str, _| line.chars().count())
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// The nonce of part `part` of outbox item `id` created at `created_at`:
/// the same on every attempt, different for every part (Discord keeps
/// nonces per channel for a few minutes).
pub fn nonce(id: i64, created_at: i64, part: usize) -> String {
    let id = base36(u64::try_from(id).unwrap_or(0));
    let full = format!(
        "{id}.{part}.{}",
        base36(u64::try_from(created_at).unwrap_or(0))
    );
    if full.len() <= MAX_NONCE {
        full
    } else {
        format!("{id}.{part}")
    }
}

/// Approve/Deny buttons, or none when the token would not fit a custom id.
fn buttons(token: &str) -> Option<Value> {
    if Button::confirm(true, token).len() > MAX_CUSTOM_ID {
        return None;
    }
    Some(json!([{ "type": 1, "components": [
        { "type": 2, "style": 3, "label": "Approve", "custom_id": Button::confirm(true, token) },
        { "type": 2, "style": 4, "label": "Deny", "custom_id": Button::confirm(false, token) },
    ]}]))
}

/// The body of a new message: nobody is pinged by what the model writes.
fn message_body(content: &str, nonce: Option<String>, components: Option<Value>) -> Value {
    let mut body = json!({ "content": content, "allowed_mentions": { "parse": [] } });
    if let Some(n) = nonce {
        body["nonce"] = json!(n);
        body["enforce_nonce"] = json!(true);
    }
    if let Some(c) = components {
        body["components"] = c;
    }
    body
}

async fn post(api: &Api, channel: &str, body: &Value) -> Result<Value, ApiError> {
    let path = format!("/channels/{channel}/messages");
    api.call(Method::POST, &path, &format!("POST {path}"), Some(body))
        .await
}

async fn edit(api: &Api, channel: &str, message: &str, body: &Value) -> Result<Value, ApiError> {
    let path = format!("/channels/{channel}/messages/{message}");
    let bucket = format!("PATCH /channels/{channel}/messages");
    api.call(Method::PATCH, &path, &bucket, Some(body)).await
}

async fn delete(api: &Api, channel: &str, message: &str) -> Result<Value, ApiError> {
    let path = format!("/channels/{channel}/messages/{message}");
    let bucket = format!("DELETE /channels/{channel}/messages");
    api.call(Method::DELETE, &path, &bucket, None).await
}

pub(super) async fn deliver(
    dc: &Discord,
    item: &OutboxItem,
    payload: &Payload,
) -> Result<(), Undelivered> {
    let fail = |parts_done: u32, error: DeliveryError| Undelivered { parts_done, error };
    let api = dc.kit.api().map_err(|e| fail(item.progress, e))?;
    let channel = item.target.as_str();
    if !is_snowflake(channel) {
        return Err(fail(
            item.progress,
            DeliveryError::Permanent(format!("{channel:?} is not a Discord channel id")),
        ));
    }
    let message_id = payload.message_id.as_deref().filter(|m| is_snowflake(m));
    match item.kind {
        OutboxKind::Delete => {
            let Some(message_id) = message_id else {
                return Ok(());
            };
            match delete(api, channel, message_id).await {
                Ok(_) => Ok(()),
                Err(e) if e.is_unknown_message() => Ok(()),
                Err(e) => Err(fail(0, e.delivery())),
            }
        }
        OutboxKind::Edit => {
            let Some(message_id) = message_id else {
                return Err(fail(
                    0,
                    DeliveryError::Permanent("an edit without a message id".into()),
                ));
            };
            let content = parts(&payload.text).into_iter().next().unwrap_or_default();
            let mut body = json!({ "content": content });
            if let Some(c) = payload.confirm.as_ref().and_then(|c| buttons(&c.token)) {
                body["components"] = c;
            }
            edit(api, channel, message_id, &body)
                .await
                .map(|_| ())
                .map_err(|e| fail(0, e.delivery()))
        }
        OutboxKind::Message | OutboxKind::Prompt => {
            let footer = item
                .run_id
                .as_deref()
                .filter(|_| payload.rich)
                .and_then(|r| dc.footer(r, item.created_at));
            let mut parts = match &footer {
                Some(f) => parts(&format!("{}{f}", payload.text)),
                None => parts(&payload.text),
            };
            if parts.is_empty() {
                parts.push("…".into());
            }
            let last = parts.len() - 1;
            for (i, content) in parts.iter().enumerate().skip(item.progress as usize) {
                // Parts before `i` were delivered.
                let done = u32::try_from(i).unwrap_or(u32::MAX);
                let components = (i == last)
                    .then(|| payload.confirm.as_ref().and_then(|c| buttons(&c.token)))
                    .flatten();
                let n = nonce(item.id, item.created_at, i);
                let posted = post(api, channel, &message_body(content, Some(n), components))
                    .await
                    .map_err(|e| fail(done, e.delivery()))?;
                if let Some(id) = posted.get("id").and_then(Value::as_str) {
                    let id = id.to_owned();
                    reactions::remember_answer(dc.kit.store.as_ref(), "discord", item, payload, id)
                        .await;
                }
                if i < last {
                    save_progress(
                        dc.kit.store.as_ref(),
                        "discord",
                        item,
                        done.saturating_add(1),
                    )
                    .await;
                }
            }
            if let Some(run_id) = item.run_id.as_deref().filter(|_| footer.is_some()) {
                dc.footer_sent(run_id);
            }
            Ok(())
        }
    }
}

/// Progress over REST; every failure is only logged at debug.
pub(super) struct DiscordProgress {
    pub(super) api: Api,
}

#[async_trait::async_trait]
impl ProgressSink for DiscordProgress {
    async fn typing(&self, target: &str) {
        let path = format!("/channels/{target}/typing");
        if let Err(e) = self
            .api
            .call::<Value>(Method::POST, &path, &format!("POST {path}"), None)
            .await
        {
            tracing::debug!(error = %e, "typing indicator failed");
        }
    }

    async fn post(&self, target: &str, text: &str) -> Option<String> {
        let content = parts(text).into_iter().next().unwrap_or_else(|| "…".into());
        match post(&self.api, target, &message_body(&content, None, None)).await {
            Ok(m) => m.get("id").and_then(Value::as_str).map(str::to_owned),
            Err(e) => {
                tracing::debug!(error = %e, "progress message failed");
                None
            }
        }
    }

    async fn edit(&self, target: &str, message_id: &str, text: &str) {
        let content = parts(text).into_iter().next().unwrap_or_else(|| "…".into());
        if let Err(e) = edit(
            &self.api,
            target,
            message_id,
            &json!({ "content": content }),
        )
        .await
        {
            tracing::debug!(error = %e, "progress edit failed");
        }
    }

    async fn delete(&self, target: &str, message_id: &str) {
        if let Err(e) = delete(&self.api, target, message_id).await {
            tracing::debug!(error = %e, "progress clean-up failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_fit_and_differ_by_part_and_item() {
        let a = nonce(i64::MAX, 1_800_000_000_000, 99);
        assert!(a.len() <= MAX_NONCE, "{a}");
        assert_ne!(nonce(1, 5, 0), nonce(1, 5, 1));
        assert_ne!(nonce(1, 5, 0), nonce(2, 5, 0));
        assert_eq!(nonce(1, 5, 0), nonce(1, 5, 0));
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
    }

    #[test]
    fn buttons_fit_or_are_left_out() {
        assert!(buttons(&"t".repeat(95)).is_some());
        assert!(buttons(&"t".repeat(96)).is_none());
    }

    #[test]
    fn a_long_answer_splits_within_the_limit() {
        let text = format!("{}\n\n```\n{}\n```", "a ".repeat(900), "x\n".repeat(600));
        let p = parts(&text);
        assert!(p.len() >= 2);
        for part in &p {
            assert!(part.chars().count() <= MAX_CONTENT);
            assert_eq!(part.matches("```").count() % 2, 0, "{part}");
        }
    }
}
