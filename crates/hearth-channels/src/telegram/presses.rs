//! Button presses (callback queries): Approve/Deny of a confirmation and
//! the pickers' choices.
//!
//! A press acts first and is marked seen only after: a press whose act
//! failed for a failure that may pass (the store) is left unacknowledged,
//! comes again with the batch and acts then; a press seen before has acted
//! already (acting again changes nothing: the model is set to the same
//! value, the confirmation is no longer pending) and shows nothing twice.
//! The button stops spinning in every case: a failed press is answered at
//! once, and that answer is remembered so the retry does not answer again
//! (Telegram refuses a second answer).

use std::sync::PoisonError;

use hearth_core::ThinkingLevel;
use hearth_runtime::Answerer;
use serde_json::{Value, json};
use tracing::warn;

use super::commands::first_time;
use super::types::{CallbackQuery, Message};
use super::{Telegram, Tg, group_scope, thread_key, user_key};
use crate::commands::{self, Button, CONFIRM_REFUSED, Confirmed, Pick, Picked, Picker};
use crate::control::Place;
use crate::error::ChannelError;

/// Queries answered early (at a failure) that are remembered, at most.
const MAX_ANSWERED: usize = 1024;

/// What a press did, shown once.
enum Shown {
    /// A toast, or an alert the user dismisses.
    Answer { text: String, alert: bool },
    /// A toast, and the prompt settled with `outcome`.
    Settle { text: String, outcome: String },
    /// A toast, and the picker shown again as it stands now.
    Picker { text: String, picker: Picker },
}

fn toast(text: impl Into<String>) -> Shown {
    Shown::Answer {
        text: text.into(),
        alert: false,
    }
}

fn alert(text: impl Into<String>) -> Shown {
    Shown::Answer {
        text: text.into(),
        alert: true,
    }
}

pub(super) async fn callback(
    tg: &Tg,
    update_id: i64,
    q: CallbackQuery,
) -> Result<(), ChannelError> {
    let shown = match act(tg, &q).await {
        Ok(shown) => shown,
        Err(e) => return failed(tg, &q, e).await,
    };
    // Seen only now that it acted (see the module's doc).
    match first_time(tg, update_id).await {
        Ok(true) => {}
        Ok(false) => return Ok(()),
        Err(e) => return failed(tg, &q, e).await,
    }
    show(tg, &q, shown).await;
    Ok(())
}

/// Does what the press asks; what to show for it.
async fn act(tg: &Tg, q: &CallbackQuery) -> Result<Shown, ChannelError> {
    let (Some(msg), Some(data)) = (&q.message, &q.data) else {
        return Ok(toast(""));
    };
    let presser = user_key(q.from.id);
    let who = Answerer::user(&presser);
    let button = Button::parse(data);
    if let Some(Button::Confirm { approve, token }) = button {
        return Ok(
            match commands::answer_confirmation(&tg.runtime, who, token, approve).await? {
                Confirmed::Settled { approved } => {
                    let word = Confirmed::word(approved);
                    Shown::Settle {
                        text: word.into(),
                        outcome: format!("{word} by {}.", q.from.first_name),
                    }
                }
                Confirmed::Refused => alert(CONFIRM_REFUSED),
                Confirmed::Gone => Shown::Settle {
                    text: "This is no longer waiting for an answer.".into(),
                    outcome: "No longer pending.".into(),
                },
            },
        );
    }
    let allowed = tg.kit.access.is_allowed(&presser).await?
        || (msg.chat.kind == "private" && tg.config.open_dms)
        || (msg.chat.kind != "private" && tg.config.open_groups);
    if !allowed {
        return Ok(alert("You cannot change this assistant's settings."));
    }
    let choice = match button {
        Some(Button::Model { index, tag }) => {
            Pick::Model(commands::model_at(&tg.runtime, index, tag))
        }
        Some(Button::Thinking(level)) => Pick::Thinking(ThinkingLevel::parse(level)),
        Some(Button::Mode(mode)) => Pick::Mode(hearth_core::PermissionMode::parse(mode)),
        // An old or foreign button: say so rather than fail.
        Some(Button::Confirm { .. }) | None => {
            return Ok(toast("This button is no longer active."));
        }
    };
    let (thread, scope) = (thread_key(msg.chat.id), group_scope(msg.chat.id));
    let place = Place::new(&thread, scope.as_deref());
    Ok(
        match commands::pick(&tg.runtime, who, place, choice).await? {
            Picked::Refused(why) => alert(why),
            Picked::Done { toast, picker } => Shown::Picker {
                text: toast,
                picker,
            },
        },
    )
}

/// Stops the button spinning after a failure. One that may pass is
/// returned, so the update comes again and the press acts then; any other
/// is the runtime's answer, told to the presser.
async fn failed(tg: &Telegram, q: &CallbackQuery, e: ChannelError) -> Result<(), ChannelError> {
    if !e.is_transient() {
        answer(tg, &q.id, &format!("That did not work: {e}"), false).await;
        return Err(e);
    }
    answer(
        tg,
        &q.id,
        "That did not go through yet; trying again.",
        false,
    )
    .await;
    tg.answered
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remember(&q.id);
    Err(e)
}

async fn show(tg: &Tg, q: &CallbackQuery, shown: Shown) {
    let msg = q.message.as_ref();
    match shown {
        Shown::Answer { text, alert } => answer(tg, &q.id, &text, alert).await,
        Shown::Settle { text, outcome } => {
            answer(tg, &q.id, &text, false).await;
            if let Some(msg) = msg {
                settle_prompt(tg, msg, &outcome).await;
            }
        }
        Shown::Picker { text, picker } => {
            answer(tg, &q.id, &text, false).await;
            if let Some(msg) = msg {
                super::commands::show(tg, msg.chat.id, Some(msg.message_id), &picker).await;
            }
        }
    }
}

/// Answers a callback query, unless it was answered at an earlier failure.
async fn answer(tg: &Telegram, query_id: &str, text: &str, alert: bool) {
    let early = tg
        .answered
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take(query_id);
    if early {
        return;
    }
    let Ok(api) = &tg.kit.api else { return };
    // Telegram shows at most 200 characters.
    let text: String = text.chars().take(200).collect();
    let body = json!({ "callback_query_id": query_id, "text": text, "show_alert": alert });
    if let Err(e) = api.call::<Value>("answerCallbackQuery", &body).await {
        warn!(channel = "telegram", error = %e, "answerCallbackQuery failed");
    }
}

/// Removes a prompt's buttons once it is answered, saying how.
async fn settle_prompt(tg: &Telegram, msg: &Message, outcome: &str) {
    let Ok(api) = &tg.kit.api else { return };
    let text = format!("{}\n\n{outcome}", msg.text.clone().unwrap_or_default());
    let text: String = text.chars().take(4000).collect();
    let body = json!({ "chat_id": msg.chat.id, "message_id": msg.message_id, "text": text });
    if let Err(e) = api.call::<Value>("editMessageText", &body).await
        && !e.says("message is not modified")
    {
        warn!(channel = "telegram", error = %e, "could not update an answered prompt");
    }
}

/// Callback queries answered at a failure, so the press that comes again
/// does not answer twice.
#[derive(Debug, Default)]
pub(super) struct Answered(std::collections::VecDeque<String>);

impl Answered {
    fn remember(&mut self, query_id: &str) {
        if self.0.iter().any(|q| q == query_id) {
            return;
        }
        if self.0.len() >= MAX_ANSWERED {
            // The oldest press was long since answered or given up.
            self.0.pop_front();
        }
        self.0.push_back(query_id.to_owned());
    }

    /// True (and forgotten) when `query_id` was answered early.
    fn take(&mut self, query_id: &str) -> bool {
        let at = self.0.iter().position(|q| q == query_id);
        at.and_then(|i| self.0.remove(i)).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_early_answer_is_taken_once_and_the_memory_is_bounded() {
        let mut a = Answered::default();
        a.remember("q1");
        a.remember("q1");
        assert!(a.take("q1"));
        assert!(!a.take("q1"), "answered again only once");
        for i in 0..=MAX_ANSWERED {
            a.remember(&format!("q{i}"));
        }
        assert_eq!(a.0.len(), MAX_ANSWERED);
        assert!(!a.take("q0"), "the oldest was dropped");
        assert!(a.take(&format!("q{MAX_ANSWERED}")));
    }
}
