//! Delivering outbox items as text messages: nothing to a number that
//! texted STOP; an answer stripped of Markdown and sent as at most
//! `max_segments` messages (each recorded as it goes out, so a retry
//! resumes after the last one sent); a confirmation prompt with its short
//! code. Progress messages are never made, so edits and deletes are done
//! at once.

use hearth_core::records::outbox::{OutboxItem, OutboxKind};

use super::segments::{SEGMENT_CHARS, segments, shortened_note, strip_markdown};
use super::{Sms, state};
use crate::channel::Undelivered;
use crate::error::DeliveryError;
use crate::hub::CONFIRM_HINT;
use crate::outbox::save_progress;
use crate::payload::Payload;

/// What a number that texted STOP is (not) sent.
pub(super) const OPTED_OUT: &str =
    "not sent: this number texted STOP (nothing is sent to it until it texts START)";

/// The messages `payload` is sent as to `number` (storing a prompt's code
/// first, so the answer finds it).
async fn messages(
    sms: &Sms,
    number: &str,
    payload: &Payload,
) -> Result<Vec<String>, DeliveryError> {
    if let Some(confirm) = &payload.confirm {
        let code = state::confirm_code(&confirm.token);
        state::remember_code(sms.kit.store.as_ref(), number, &code, &confirm.token)
            .await
            .map_err(|e| DeliveryError::Transient(format!("storing the confirmation code: {e}")))?;
        let question = payload
            .text
            .split_once(CONFIRM_HINT)
            .map_or(payload.text.as_str(), |(q, _)| q);
        let tail = format!("\n\nReply YES {code} to approve or NO {code} to deny.");
        // A question is one message, and never loses its code.
        let room = SEGMENT_CHARS - tail.chars().count();
        let question: String = strip_markdown(question).chars().take(room).collect();
        return Ok(vec![format!("{question}{tail}")]);
    }
    let text = if payload.rich {
        strip_markdown(&payload.text)
    } else {
        payload.text.clone()
    };
    let note = shortened_note(&sms.ui_url());
    Ok(segments(&text, sms.config.max_segments as usize, &note))
}

pub(super) async fn deliver(
    sms: &Sms,
    item: &OutboxItem,
    payload: &Payload,
) -> Result<(), Undelivered> {
    let fail = |parts_done: u32, error: DeliveryError| Undelivered { parts_done, error };
    if matches!(item.kind, OutboxKind::Edit | OutboxKind::Delete) {
        // SMS shows no progress message: nothing to edit or remove.
        return Ok(());
    }
    let number = item.target.as_str();
    let store = sms.kit.store.as_ref();
    match state::opted_out(store, number).await {
        Ok(false) => {}
        Ok(true) => {
            tracing::info!(
                channel = "sms",
                id = item.id,
                "a reply to a number that texted STOP is not sent"
            );
            return Err(fail(
                item.progress,
                DeliveryError::Permanent(OPTED_OUT.into()),
            ));
        }
        Err(e) => return Err(fail(item.progress, DeliveryError::Transient(e.to_string()))),
    }
    let api = sms.kit.api().map_err(|e| fail(item.progress, e))?;
    let parts = messages(sms, number, payload)
        .await
        .map_err(|e| fail(item.progress, e))?;
    let last = parts.len().saturating_sub(1);
    for (i, body) in parts.iter().enumerate().skip(item.progress as usize) {
        let done = u32::try_from(i).unwrap_or(u32::MAX);
        if let Err(e) = api.send(&sms.sender, number, body).await {
            if let super::ApiError::Refused {
                code: super::api::UNSUBSCRIBED,
                ..
            } = e
            {
                // Twilio knows of a STOP hearth did not see (texted before
                // this number was answered here): keep it too.
                if let Err(e) = state::set_opted_out(store, number, true).await {
                    tracing::warn!(channel = "sms", error = %e, "cannot record an opt-out Twilio reported");
                }
            }
            return Err(fail(done, e.delivery()));
        }
        if i < last {
            save_progress(store, "sms", item, done + 1).await;
        }
    }
    Ok(())
}
