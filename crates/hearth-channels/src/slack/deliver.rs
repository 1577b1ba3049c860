//! Delivering outbox items through the Web API (`chat.postMessage`,
//! `chat.update`, `chat.delete`), and the best-effort progress calls.

use hearth_core::records::outbox::{OutboxItem, OutboxKind};
use serde_json::{Value, json};

use super::api::Api;
use super::mrkdwn::{escape, plain_parts, rich_parts};
use super::types::Posted;
use super::{Slack, split_target};
use crate::channel::Undelivered;
use crate::error::DeliveryError;
use crate::outbox::save_progress;
use crate::payload::Payload;
use crate::progress::ProgressSink;

/// `action_id` of a confirmation's Approve button (its value is the token).
pub(super) const APPROVE: &str = "hearth_confirm_approve";
/// `action_id` of a confirmation's Deny button.
pub(super) const DENY: &str = "hearth_confirm_deny";

/// The mrkdwn parts a reply is sent as, each within a section's limit.
fn parts(payload: &Payload) -> Vec<String> {
    if payload.rich {
        rich_parts(&payload.text)
    } else {
        plain_parts(&payload.text)
    }
}

/// A message's blocks: its text as one section, and the confirmation
/// buttons when it asks for one.
pub(super) fn blocks(text: &str, confirm: Option<&str>) -> Value {
    let mut blocks = vec![json!({ "type": "section", "text": { "type": "mrkdwn", "text": text } })];
    if let Some(token) = confirm {
        blocks.push(json!({
            "type": "actions",
            "block_id": "hearth_confirm",
            "elements": [
                { "type": "button", "action_id": APPROVE, "style": "primary", "value": token,
                  "text": { "type": "plain_text", "text": "Approve" } },
                { "type": "button", "action_id": DENY, "style": "danger", "value": token,
                  "text": { "type": "plain_text", "text": "Deny" } },
            ],
        }));
    }
    Value::Array(blocks)
}

/// `chat.postMessage` to `channel` (in the thread with root `thread`) with
/// `text` as the section and the notification text.
pub(super) fn post_body(
    channel: &str,
    thread: Option<&str>,
    text: &str,
    confirm: Option<&str>,
) -> Value {
    let mut body = json!({
        "channel": channel,
        "text": text,
        "blocks": blocks(text, confirm),
        "unfurl_links": false,
    });
    if let Some(ts) = thread {
        body["thread_ts"] = json!(ts);
    }
    body
}

pub(super) async fn deliver(
    slack: &Slack,
    item: &OutboxItem,
    payload: &Payload,
) -> Result<(), Undelivered> {
    let fail = |parts_done: u32, error: DeliveryError| Undelivered { parts_done, error };
    let api = slack.kit.api().map_err(|e| fail(item.progress, e))?;
    // A legacy target (`<C…>:<root ts>`) carries the thread itself.
    let (channel, legacy_thread) = split_target(&item.target);
    let thread = payload.reply_to.as_deref().or(legacy_thread);
    match item.kind {
        OutboxKind::Delete => {
            let Some(ts) = payload.message_id.as_deref() else {
                return Ok(());
            };
            let body = json!({ "channel": channel, "ts": ts });
            match api.call::<Value>("chat.delete", &body).await {
                Ok(_) => Ok(()),
                // Already gone: nothing left to do.
                Err(e) if e.is("message_not_found") => Ok(()),
                Err(e) => Err(fail(0, e.delivery())),
            }
        }
        OutboxKind::Edit => {
            let Some(ts) = payload.message_id.as_deref() else {
                return Err(fail(
                    0,
                    DeliveryError::Permanent("an edit without a message ts".into()),
                ));
            };
            let text = parts(payload).into_iter().next().unwrap_or_default();
            let confirm = payload.confirm.as_ref().map(|c| c.token.as_str());
            let body = json!({ "channel": channel, "ts": ts, "text": text, "blocks": blocks(&text, confirm) });
            api.call::<Value>("chat.update", &body)
                .await
                .map(|_| ())
                .map_err(|e| fail(0, e.delivery()))
        }
        OutboxKind::Message | OutboxKind::Prompt => {
            let parts = parts(payload);
            let last = parts.len().saturating_sub(1);
            for (i, text) in parts.iter().enumerate().skip(item.progress as usize) {
                let confirm = (i == last)
                    .then(|| payload.confirm.as_ref().map(|c| c.token.as_str()))
                    .flatten();
                // Parts before this one are delivered: a retry resumes here.
                let done = u32::try_from(i).unwrap_or(u32::MAX);
                api.call::<Posted>(
                    "chat.postMessage",
                    &post_body(channel, thread, text, confirm),
                )
                .await
                .map_err(|e| fail(done, e.delivery()))?;
                if i < last {
                    save_progress(
                        slack.kit.store.as_ref(),
                        "slack",
                        item,
                        done.saturating_add(1),
                    )
                    .await;
                }
            }
            Ok(())
        }
    }
}

/// Progress through the Web API; Slack has no typing indicator for bots
/// outside the legacy RTM API, so the progress message is all there is.
pub(super) struct SlackProgress {
    pub(super) api: Api,
}

/// A progress text as one escaped section's worth.
fn progress_text(text: &str) -> String {
    let escaped = escape(text);
    if escaped.chars().count() <= super::mrkdwn::MAX_SECTION {
        return escaped;
    }
    plain_parts(text)
        .into_iter()
        .next()
        .unwrap_or_else(|| "…".into())
}

#[async_trait::async_trait]
impl ProgressSink for SlackProgress {
    async fn typing(&self, _target: &str) {}

    async fn post(&self, target: &str, text: &str) -> Option<String> {
        let (channel, thread) = split_target(target);
        let body = post_body(channel, thread, &progress_text(text), None);
        match self.api.call::<Posted>("chat.postMessage", &body).await {
            Ok(p) => Some(p.ts),
            Err(e) => {
                tracing::debug!(channel = "slack", error = %e, "progress message failed");
                None
            }
        }
    }

    async fn edit(&self, target: &str, message_id: &str, text: &str) {
        let (channel, _) = split_target(target);
        let text = progress_text(text);
        let body = json!({ "channel": channel, "ts": message_id, "text": text, "blocks": blocks(&text, None) });
        if let Err(e) = self.api.call::<Value>("chat.update", &body).await {
            tracing::debug!(channel = "slack", error = %e, "progress edit failed");
        }
    }

    async fn delete(&self, target: &str, message_id: &str) {
        let (channel, _) = split_target(target);
        let body = json!({ "channel": channel, "ts": message_id });
        if let Err(e) = self.api.call::<Value>("chat.delete", &body).await {
            tracing::debug!(channel = "slack", error = %e, "progress clean-up failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_has_both_buttons_and_a_thread_reply_its_thread() {
        let body = post_body("C1", Some("17.5"), "Approve?", Some("tok"));
        assert_eq!(body["channel"], "C1");
        assert_eq!(body["thread_ts"], "17.5");
        let actions = &body["blocks"][1]["elements"];
        assert_eq!(actions[0]["action_id"], APPROVE);
        assert_eq!(actions[1]["action_id"], DENY);
        assert_eq!(actions[1]["value"], "tok");
        let dm = post_body("D1", None, "hi", None);
        assert!(dm.get("thread_ts").is_none());
        assert_eq!(dm["blocks"].as_array().map(Vec::len), Some(1));
    }
}
