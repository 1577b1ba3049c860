//! Commands (`/start`, `/help`, `/new`, `/model`, `/thinking`, `/usage`,
//! `/cancel`) and the inline-keyboard pickers (their presses are in
//! [`super::presses`]).
//! Callback data stays within Telegram's 64 bytes; a stale button
//! re-renders the current picker instead of failing.

use hearth_core::records::RunFilter;
use hearth_core::{RunStatus, ThinkingLevel, ThreadKey, now_ms};
use hearth_runtime::Answerer;
use serde_json::{Value, json};
use tracing::{info, warn};

use super::types::Message;
use super::{Telegram, Tg, thread_key};
use crate::control::{self, Place};
use crate::error::ChannelError;
use crate::payload::Payload;

/// The command menu (`setMyCommands`).
pub(super) fn menu() -> Value {
    json!([
        { "command": "new", "description": "Start a new conversation" },
        { "command": "model", "description": "Choose the model" },
        { "command": "thinking", "description": "Choose how hard the model thinks" },
        { "command": "usage", "description": "Today's model usage and cost" },
        { "command": "cancel", "description": "Stop the answer being worked on" },
        { "command": "help", "description": "What this bot does" },
    ])
}

const HELP: &str = "I am your hearth assistant. Write to me and I answer.\n\n\
/new starts a new conversation\n/model chooses the model\n/thinking sets how hard it thinks\n\
/usage shows today's usage and cost\n/cancel stops the answer being worked on";

/// Seen-before check for updates that do something other than a run (a
/// redelivered batch must not repeat them).
pub(super) async fn first_time(tg: &Telegram, update_id: i64) -> Result<bool, ChannelError> {
    Ok(tg
        .store
        .first_sight("telegram", &format!("update:{update_id}"), now_ms())
        .await?)
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
    let known = [
        "start", "help", "new", "model", "thinking", "usage", "cancel",
    ];
    if !known.contains(&name.as_str()) {
        // Not ours (e.g. `/etc/hosts` or another bot's command): a message.
        let text = msg.text.clone().unwrap_or_default();
        return super::inbound::ingest(tg, update_id, msg.chat.id, user, text).await;
    }
    if !first_time(tg, update_id).await? {
        return Ok(());
    }
    let chat = msg.chat.id;
    let thread = thread_key(chat);
    match name.as_str() {
        "start" | "help" => tg.notify(chat, Payload::notice(HELP)).await,
        "new" if !may_change(tg, chat, user).await? => {
            tg.notify(chat, Payload::notice(control::CHANGE_REFUSED))
                .await
        }
        "new" => {
            tg.runtime.new_session(&ThreadKey::new(&thread)?).await?;
            info!(channel = "telegram", "new session by command");
            tg.notify(chat, Payload::notice("Started a new conversation."))
                .await
        }
        "model" => picker(tg, chat, None, "Choose the model:").await,
        "thinking" => thinking_picker(tg, chat, None).await,
        "usage" => {
            let rows = tg
                .runtime
                .usage(&hearth_runtime::usage::today(now_ms()))
                .await?;
            tg.notify(chat, Payload::notice(usage_text(&rows))).await
        }
        _ => cancel(tg, chat, user).await,
    }
}

/// Where chat `chat` is, for the rules of [`control`]: a group is shared
/// and checked in its scope, a private chat is its user's.
fn place<'a>(thread: &'a str, scope: Option<&'a str>) -> Place<'a> {
    match scope {
        Some(scope) => Place::Shared { scope, thread },
        None => Place::Private,
    }
}

/// Whether `user` may change chat `chat`'s conversation.
pub(super) async fn may_change(tg: &Tg, chat: i64, user: &str) -> Result<bool, ChannelError> {
    let (thread, scope) = (thread_key(chat), super::group_scope(chat));
    let place = place(&thread, scope.as_deref());
    control::may_change(&tg.runtime, Answerer::user(user), place).await
}

fn usage_text(rows: &[hearth_runtime::UsageReport]) -> String {
    let calls: u64 = rows.iter().map(|r| r.calls).sum();
    let input: u64 = rows.iter().map(|r| r.input_tokens).sum();
    let output: u64 = rows.iter().map(|r| r.output_tokens).sum();
    let cost: Option<f64> = rows.iter().map(|r| r.cost_usd).sum();
    let cost = cost.map_or_else(
        || "unknown (a model has no price)".to_owned(),
        |c| format!("${c:.4}"),
    );
    format!(
        "Today (UTC): {calls} model calls, {input} input and {output} output tokens, cost {cost}."
    )
}

async fn cancel(tg: &Tg, chat: i64, user: &str) -> Result<(), ChannelError> {
    let filter = RunFilter {
        thread_key: Some(thread_key(chat)),
        status: None,
        limit: 20,
    };
    let active = tg
        .runtime
        .list_runs(&filter)
        .await?
        .into_iter()
        .find(|r| !r.status.is_terminal());
    let Some(run) = active else {
        return tg.notify(chat, Payload::notice("Nothing to cancel.")).await;
    };
    let (thread, scope) = (thread_key(chat), super::group_scope(chat));
    let place = place(&thread, scope.as_deref());
    let who = Answerer::user(user);
    if !control::may_cancel(&tg.runtime, who, place, &run.run_id, &run.user_key).await {
        return tg
            .notify(chat, Payload::notice(control::CANCEL_REFUSED))
            .await;
    }
    let env = tg.runtime.cancel(&run.run_id).await?;
    // A running run says "Stopped." itself when it ends; a queued one ends here.
    if env.status == RunStatus::Cancelled && run.status == RunStatus::Queued {
        tg.notify(chat, Payload::notice("Cancelled.")).await?;
    }
    Ok(())
}

/// A short, stable tag of a model id: a stale button whose list position
/// now holds another model is recognised.
pub(super) fn tag(model: &str) -> String {
    // FNV-1a: not for security, only to tell two ids apart.
    let mut h: u32 = 0x811c_9dc5;
    for b in model.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

pub(super) fn model_ids(tg: &Tg) -> Vec<String> {
    tg.runtime
        .models()
        .models
        .iter()
        .map(|m| m.model.to_string())
        .collect()
}

/// Shows (or, with `edit`, re-renders) the model picker.
pub(super) async fn picker(
    tg: &Tg,
    chat: i64,
    edit: Option<i64>,
    title: &str,
) -> Result<(), ChannelError> {
    let current = tg
        .runtime
        .thread_runtime(&ThreadKey::new(thread_key(chat))?)
        .await?
        .model;
    let rows: Vec<Value> = model_ids(tg)
        .iter()
        .enumerate()
        .take(90)
        .map(|(i, m)| {
            let mark = if *m == current { "✓ " } else { "" };
            json!([{ "text": format!("{mark}{m}"), "callback_data": format!("m:{i}:{}", tag(m)) }])
        })
        .collect();
    show(tg, chat, edit, &format!("{title}\nNow: {current}"), rows).await
}

pub(super) async fn thinking_picker(
    tg: &Tg,
    chat: i64,
    edit: Option<i64>,
) -> Result<(), ChannelError> {
    let current = tg
        .runtime
        .thread_runtime(&ThreadKey::new(thread_key(chat))?)
        .await?
        .thinking;
    let levels = [
        ThinkingLevel::Off,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
    ];
    let row: Vec<Value> = levels
        .iter()
        .map(|l| {
            let mark = if l.as_str() == current { "✓ " } else { "" };
            json!({ "text": format!("{mark}{}", l.as_str()), "callback_data": format!("t:{}", l.as_str()) })
        })
        .collect();
    show(
        tg,
        chat,
        edit,
        &format!("How hard should the model think?\nNow: {current}"),
        vec![Value::Array(row)],
    )
    .await
}

/// Sends a picker, or edits the one at `edit`. Pickers are interactive
/// and not journaled: a failure is logged and the user asks again.
async fn show(
    tg: &Telegram,
    chat: i64,
    edit: Option<i64>,
    text: &str,
    keyboard: Vec<Value>,
) -> Result<(), ChannelError> {
    let Ok(api) = &tg.api else { return Ok(()) };
    let markup = json!({ "inline_keyboard": keyboard });
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picker_data_fits_and_tags_differ() {
        let long = "openrouter/".to_owned() + &"x".repeat(200);
        let data = format!("m:{}:{}", 89, tag(&long));
        assert!(data.len() <= 64, "{data}");
        assert_ne!(tag("openai/gpt-4o"), tag("openai/gpt-4o-mini"));
        assert_eq!(tag("a").len(), 8);
        for l in ["off", "low", "medium", "high"] {
            assert!(format!("t:{l}").len() <= 64);
        }
    }

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
    }
}
