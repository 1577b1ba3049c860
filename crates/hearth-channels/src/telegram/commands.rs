//! Commands (`/start`, `/help`, `/new`, `/model`, `/thinking`, `/usage`,
//! `/cancel`), carried out by [`crate::commands`] and rendered for
//! Telegram: answers are chat messages, pickers inline keyboards (their
//! presses are in [`super::presses`]). Callback data stays within
//! Telegram's 64 bytes; a stale button re-renders the current picker
//! instead of failing.

use hearth_runtime::Answerer;
use serde_json::{Value, json};
use tracing::warn;

use super::types::Message;
use super::{Telegram, Tg, group_scope, thread_key};
use crate::commands::{self, Button, Command, Ctx, Picker, PickerKind, Reply, SPECS};
use crate::control::Place;
use crate::error::ChannelError;

/// Models a picker offers (one keyboard row each).
const MAX_MODELS: usize = 90;

/// The command menu (`setMyCommands`).
pub(super) fn menu() -> Value {
    SPECS
        .iter()
        .map(|s| json!({ "command": s.name, "description": s.summary }))
        .collect()
}

/// What `/help` and `/start` say.
fn help() -> String {
    let lines = commands::help_lines(|s| match s.args {
        "" => format!("/{}", s.name),
        args => format!("/{} {args}", s.name),
    });
    format!("I am your hearth assistant. Write to me and I answer.\n\n{lines}")
}

/// Seen-before check for updates that do something other than a run (a
/// redelivered batch must not repeat them).
pub(super) async fn first_time(tg: &Telegram, update_id: i64) -> Result<bool, ChannelError> {
    tg.kit.first_sight(&format!("update:{update_id}")).await
}

pub(super) async fn command(
    tg: &Tg,
    update_id: i64,
    msg: &Message,
    user: &str,
    cmd: &str,
) -> Result<(), ChannelError> {
    let mut words = cmd.split_whitespace();
    let name = words.next().unwrap_or("");
    // `/model@hearthbot` in groups.
    let name = name.split('@').next().unwrap_or(name).to_lowercase();
    let args: Vec<&str> = words.collect();
    let Some(command) = Command::parse(&name, &args) else {
        // Not ours (e.g. `/etc/hosts` or another bot's command): a message.
        let text = msg.text.clone().unwrap_or_default();
        return super::inbound::ingest(tg, update_id, msg.chat.id, user, text).await;
    };
    if !first_time(tg, update_id).await? {
        return Ok(());
    }
    let chat = msg.chat.id;
    let (thread, scope) = (thread_key(chat), group_scope(chat));
    let ctx = Ctx {
        runtime: &tg.runtime,
        who: Answerer::user(user),
        // A group is shared and checked in its scope; a private chat is
        // its user's.
        place: Some(Place::new(&thread, scope.as_deref())),
    };
    match commands::run(&ctx, command).await? {
        Reply::Help => tg.notify(chat, help()).await,
        Reply::Private(text) | Reply::Public(text) => tg.notify(chat, text).await,
        // The run's own "Stopped." tells the chat.
        Reply::Stopped(_) => Ok(()),
        Reply::Picker(picker) => {
            show(tg, chat, None, &picker).await;
            Ok(())
        }
    }
}

/// A picker's inline keyboard: a model per row, the levels in one.
fn keyboard(picker: &Picker) -> Value {
    let buttons = picker.choices.iter().enumerate().take(MAX_MODELS).map(
        |(i, c)| json!({ "text": picker.label(c), "callback_data": Button::choice(picker, i, c) }),
    );
    match picker.kind {
        PickerKind::Model => buttons.map(|b| json!([b])).collect(),
        PickerKind::Thinking => json!([buttons.collect::<Vec<_>>()]),
        // Six modes: two rows of three, least to most permissive.
        PickerKind::Mode => {
            let all: Vec<Value> = buttons.collect();
            json!(all.chunks(3).collect::<Vec<_>>())
        }
    }
}

/// Sends a picker, or edits the one at `edit`. Pickers are interactive
/// and not journaled: a failure is logged and the user asks again.
pub(super) async fn show(tg: &Telegram, chat: i64, edit: Option<i64>, picker: &Picker) {
    let Ok(api) = &tg.kit.api else { return };
    let (text, markup) = (
        picker.text(),
        json!({ "inline_keyboard": keyboard(picker) }),
    );
    let (method, body) = match edit {
        Some(id) => (
            "editMessageText",
            json!({ "chat_id": chat, "message_id": id, "text": text, "reply_markup": markup }),
        ),
        None => (
            "sendMessage",
            json!({ "chat_id": chat, "text": text, "reply_markup": markup }),
        ),
    };
    if let Err(e) = api.call::<Value>(method, &body).await
        && !e.says("message is not modified")
    {
        warn!(channel = "telegram", method, error = %e, "could not show a picker");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn menu_is_valid_for_set_my_commands() {
        let m = menu();
        let list = m.as_array().unwrap();
        assert!(list.len() <= 100);
        for c in list {
            let name = c["command"].as_str().unwrap();
            assert!(
                name.len() <= 32
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            );
        }
        assert!(help().contains("\n/new: Start a new conversation\n/model [id]: Choose"));
    }

    #[test]
    fn pickers_are_one_model_a_row_and_the_levels_in_one() {
        let mut picker = Picker {
            kind: PickerKind::Model,
            heading: "Choose the model:".into(),
            current: "p/b".into(),
            choices: (0..100).map(|i| format!("p/{i}")).collect(),
        };
        let rows = keyboard(&picker);
        assert_eq!(rows.as_array().unwrap().len(), MAX_MODELS);
        assert!(rows[0][0]["callback_data"].as_str().unwrap().len() <= 64);
        picker.kind = PickerKind::Thinking;
        picker.current = "low".into();
        picker.choices = ["off", "low"].map(String::from).to_vec();
        let rows = keyboard(&picker);
        assert_eq!(
            rows,
            json!([[
                { "text": "off", "callback_data": "t:off" },
                { "text": "✓ low", "callback_data": "t:low" },
            ]])
        );
    }
}
