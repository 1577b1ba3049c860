//! Delivering outbox items through the Bot API, and the best-effort
//! progress calls.

use hearth_core::records::outbox::{OutboxItem, OutboxKind};
use serde_json::{Value, json};

use super::Telegram;
use super::api::ApiError;
use super::format;
use crate::channel::Undelivered;
use crate::commands::Button;
use crate::error::DeliveryError;
use crate::outbox::save_progress;
use crate::payload::Payload;
use crate::progress::ProgressSink;
use crate::reactions;
use crate::text::split_markdown;

/// Telegram's limit on a message's text, in UTF-16 units after entity parsing.
pub const MAX_TEXT: usize = 4096;

/// The parts a reply is sent as: the source chunks of a rich answer (each
/// rendered to HTML when sent), or plain parts of a notice.
fn parts(payload: &Payload) -> Vec<(String, bool)> {
    if payload.rich {
        split_markdown(&payload.text, MAX_TEXT, &format::visible_len)
            .into_iter()
            // A chunk with nothing visible (an empty code block) would be an
            // empty message, which Telegram refuses.
            .filter(|c| {
                c.lines()
                    .any(|l| !l.trim().is_empty() && !crate::text::is_fence(l))
            })
            .map(|c| (c, true))
            .collect()
    } else {
        format::plain_parts(&payload.text)
            .into_iter()
            .map(|c| (c, false))
            .collect()
    }
}

pub(super) async fn deliver(
    tg: &Telegram,
    item: &OutboxItem,
    payload: &Payload,
) -> Result<(), Undelivered> {
    let fail = |parts_done: u32, error: DeliveryError| Undelivered { parts_done, error };
    let api = tg.kit.api().map_err(|e| fail(item.progress, e))?;
    let Ok(chat_id) = item.target.parse::<i64>() else {
        return Err(fail(
            item.progress,
            DeliveryError::Permanent(format!("{:?} is not a Telegram chat id", item.target)),
        ));
    };
    match item.kind {
        OutboxKind::Delete => {
            let Some(message_id) = payload.message_id.as_deref() else {
                return Ok(());
            };
            let body =
                json!({ "chat_id": chat_id, "message_id": message_id.parse::<i64>().unwrap_or(0) });
            match api.call::<Value>("deleteMessage", &body).await {
                Ok(_) => Ok(()),
                // Already gone, or too old to delete: nothing left to do.
                Err(e)
                    if e.says("message to delete not found")
                        || e.says("message can't be deleted") =>
                {
                    Ok(())
                }
                Err(e) => Err(fail(0, e.delivery())),
            }
        }
        OutboxKind::Edit => {
            let Some(message_id) = payload.message_id.as_deref() else {
                return Err(fail(
                    0,
                    DeliveryError::Permanent("an edit without a message id".into()),
                ));
            };
            let mut body = json!({
                "chat_id": chat_id,
                "message_id": message_id.parse::<i64>().unwrap_or(0),
                "text": format::plain_parts(&payload.text).into_iter().next().unwrap_or_default(),
            });
            if let Some(c) = &payload.confirm {
                body["reply_markup"] = buttons(&c.token);
            }
            match api.call::<Value>("editMessageText", &body).await {
                Ok(_) => Ok(()),
                Err(e) if e.says("message is not modified") => Ok(()),
                Err(e) => Err(fail(0, e.delivery())),
            }
        }
        OutboxKind::Message | OutboxKind::Prompt => {
            let parts = parts(payload);
            let last = parts.len().saturating_sub(1);
            let resume = Resume::from_progress(item.progress);
            let to = Sending {
                tg,
                api,
                item,
                chat_id,
            };
            for (i, (chunk, rich)) in parts.iter().enumerate().skip(resume.part as usize) {
                let markup = (i == last)
                    .then(|| payload.confirm.as_ref().map(|c| buttons(&c.token)))
                    .flatten();
                let at = Resume {
                    part: u32::try_from(i).unwrap_or(u32::MAX),
                    plain: if i == resume.part as usize {
                        resume.plain
                    } else {
                        0
                    },
                };
                let mut posted = Vec::new();
                let sent = send_part(&to, chunk, *rich, markup, at, &mut posted).await;
                // Recorded even when a later message of the part failed:
                // those posted stay in the chat and can be reacted to.
                for message_id in posted {
                    reactions::remember_answer(
                        tg.kit.store.as_ref(),
                        "telegram",
                        item,
                        payload,
                        message_id.to_string(),
                    )
                    .await;
                }
                sent.map_err(|(e, stopped)| fail(stopped.progress(), e.delivery()))?;
                if i < last {
                    let next = Resume {
                        part: at.part.saturating_add(1),
                        plain: 0,
                    };
                    save_progress(tg.kit.store.as_ref(), "telegram", item, next.progress()).await;
                }
            }
            Ok(())
        }
    }
}

/// Where the delivery of a reply stands, stored as the item's `progress`:
/// `part` parts delivered and, of the next one, `plain` messages when its
/// formatting was refused and its text goes out as plain text in several
/// messages (a retry resumes with the next of those, not with the part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Resume {
    part: u32,
    plain: u32,
}

impl Resume {
    /// Packed as `part + (plain << 16)`, so that a plain count of parts
    /// (what earlier versions stored) reads the same. A reply has far fewer
    /// than 65,536 parts and a part fewer plain messages; beyond, the count
    /// saturates and a retry resends from there.
    const SHIFT: u32 = 16;
    const MAX: u32 = (1 << Self::SHIFT) - 1;

    fn from_progress(progress: u32) -> Self {
        Self {
            part: progress & Self::MAX,
            plain: progress >> Self::SHIFT,
        }
    }

    fn progress(self) -> u32 {
        self.part.min(Self::MAX) | (self.plain.min(Self::MAX) << Self::SHIFT)
    }
}

fn buttons(token: &str) -> Value {
    json!({ "inline_keyboard": [[
        { "text": "Approve", "callback_data": Button::confirm(true, token) },
        { "text": "Deny", "callback_data": Button::confirm(false, token) },
    ]]})
}

/// Sends part `at.part`: as HTML when `rich`, and as plain text (possibly
/// in several messages) when Telegram rejects its entities or an earlier
/// attempt already began it so (`at.plain` of those messages delivered,
/// which are skipped). Each plain message but the last is recorded as
/// delivered at once. The ids of the messages posted are pushed on
/// `posted`; on failure, where the part stopped.
async fn send_part(
    to: &Sending<'_>,
    chunk: &str,
    rich: bool,
    markup: Option<Value>,
    at: Resume,
    posted: &mut Vec<i64>,
) -> Result<(), (ApiError, Resume)> {
    let (api, chat_id) = (to.api, to.chat_id);
    if rich && at.plain == 0 {
        let mut body =
            json!({ "chat_id": chat_id, "text": format::to_html(chunk), "parse_mode": "HTML" });
        if let Some(m) = &markup {
            body["reply_markup"] = m.clone();
        }
        match api.call::<Value>("sendMessage", &body).await {
            Ok(m) => {
                posted.extend(message_id(&m));
                return Ok(());
            }
            Err(e) if e.is_entity_error() => {
                tracing::warn!(error = %e, "Telegram refused the formatting; sending the text plain");
            }
            Err(e) => return Err((e, at)),
        }
    }
    let plain = format::plain_parts(chunk);
    let last = plain.len().saturating_sub(1);
    for (j, text) in plain.into_iter().enumerate().skip(at.plain as usize) {
        let mut body = json!({ "chat_id": chat_id, "text": text });
        if j == last
            && let Some(m) = &markup
        {
            body["reply_markup"] = m.clone();
        }
        let stopped = Resume {
            part: at.part,
            plain: u32::try_from(j).unwrap_or(u32::MAX),
        };
        let m = api
            .call::<Value>("sendMessage", &body)
            .await
            .map_err(|e| (e, stopped))?;
        posted.extend(message_id(&m));
        if j < last {
            let done = Resume {
                plain: stopped.plain.saturating_add(1),
                ..stopped
            };
            save_progress(
                to.tg.kit.store.as_ref(),
                "telegram",
                to.item,
                done.progress(),
            )
            .await;
        }
    }
    Ok(())
}

/// What every part of one item is sent with.
struct Sending<'a> {
    tg: &'a Telegram,
    api: &'a super::api::Api,
    item: &'a OutboxItem,
    chat_id: i64,
}

/// The id of a sent `Message`, read leniently: the message is posted
/// whatever else its object holds, and failing here would post it again.
fn message_id(message: &Value) -> Option<i64> {
    message.get("message_id").and_then(Value::as_i64)
}

/// Progress through the Bot API; every failure is only logged at debug.
pub(super) struct TelegramProgress {
    pub(super) api: super::api::Api,
}

#[async_trait::async_trait]
impl ProgressSink for TelegramProgress {
    async fn typing(&self, target: &str) {
        let body = json!({ "chat_id": target, "action": "typing" });
        if let Err(e) = self.api.call::<Value>("sendChatAction", &body).await {
            tracing::debug!(error = %e, "typing indicator failed");
        }
    }

    async fn post(&self, target: &str, text: &str) -> Option<String> {
        let body =
            json!({ "chat_id": target, "text": first_plain(text), "disable_notification": true });
        match self
            .api
            .call::<super::types::Message>("sendMessage", &body)
            .await
        {
            Ok(m) => Some(m.message_id.to_string()),
            Err(e) => {
                tracing::debug!(error = %e, "progress message failed");
                None
            }
        }
    }

    async fn edit(&self, target: &str, message_id: &str, text: &str) {
        let body = json!({ "chat_id": target, "message_id": message_id.parse::<i64>().unwrap_or(0), "text": first_plain(text) });
        if let Err(e) = self.api.call::<Value>("editMessageText", &body).await {
            tracing::debug!(error = %e, "progress edit failed");
        }
    }

    async fn delete(&self, target: &str, message_id: &str) {
        let body =
            json!({ "chat_id": target, "message_id": message_id.parse::<i64>().unwrap_or(0) });
        if let Err(e) = self.api.call::<Value>("deleteMessage", &body).await {
            tracing::debug!(error = %e, "progress clean-up failed");
        }
    }
}

fn first_plain(text: &str) -> String {
    format::plain_parts(text)
        .into_iter()
        .next()
        .unwrap_or_else(|| "…".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_point_packs_into_the_progress_count() {
        // A count of parts (stored by earlier versions) reads as parts.
        assert_eq!(Resume::from_progress(3), Resume { part: 3, plain: 0 });
        for at in [
            Resume { part: 0, plain: 0 },
            Resume { part: 2, plain: 1 },
            Resume {
                part: Resume::MAX,
                plain: Resume::MAX,
            },
        ] {
            assert_eq!(Resume::from_progress(at.progress()), at);
        }
        let huge = Resume {
            part: u32::MAX,
            plain: u32::MAX,
        };
        assert_eq!(
            Resume::from_progress(huge.progress()),
            Resume {
                part: Resume::MAX,
                plain: Resume::MAX
            }
        );
    }
}
