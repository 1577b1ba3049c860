//! The `/hearth` slash command: `new`, `model`, `thinking`, `usage`,
//! `cancel`, `help`, as on Telegram. Answers are ephemeral, through the
//! command's `response_url`; pickers are Block Kit buttons answered in
//! [`super::interactive`]. Commands that act on a conversation work in a
//! direct message with the bot, whose conversation they change.

use std::sync::Arc;

use hearth_core::{RunStatus, ThinkingLevel, now_ms};
use hearth_store::RunFilter;
use serde_json::{Value, json};
use tracing::warn;

use super::mrkdwn::escape;
use super::types::SlashCommand;
use super::{Slack, dm_thread_key, is_id, user_key};
use crate::error::ChannelError;

/// `action_id` prefix of the model picker's buttons (value: the model id).
pub(super) const MODEL_ACTION: &str = "hearth_model_";
/// `action_id` prefix of the thinking picker's buttons (value: the level).
pub(super) const THINKING_ACTION: &str = "hearth_thinking_";
/// Buttons in one actions block (Slack allows 25).
const PER_BLOCK: usize = 25;
/// Models offered by the picker (Slack allows 50 blocks in a message).
const MAX_MODELS: usize = 25 * 40;

const HELP: &str = "I am your hearth assistant. Write to me in a direct message, or mention me in a channel and I answer in a thread.\n\n\
`/hearth new` starts a new conversation\n`/hearth model [id]` chooses the model\n`/hearth thinking [off|low|medium|high]` sets how hard it thinks\n\
`/hearth usage` shows today's usage and cost\n`/hearth cancel` stops the answer being worked on";

const PRIVATE: &str =
    "This assistant is private: send it a direct message to ask its owner for access.";
const DM_ONLY: &str = "This works in a direct message with me: it changes that conversation.";

/// True when `user` may use the assistant's commands and settings.
pub(super) async fn may_use(slack: &Slack, user: &str) -> Result<bool, ChannelError> {
    Ok(slack.config.open_dms || slack.access.is_allowed(&user_key(user)).await?)
}

/// The conversation a command or picker in `channel` acts on: only a DM's.
pub(super) fn dm_thread(channel: &str) -> Option<String> {
    (channel.starts_with('D') && is_id(channel)).then(|| dm_thread_key(channel))
}

pub(super) async fn command(slack: &Arc<Slack>, cmd: SlashCommand) -> Result<(), ChannelError> {
    if let Some(trigger) = &cmd.trigger_id
        && !slack
            .store
            .first_sight("slack", &format!("command:{trigger}"), now_ms())
            .await?
    {
        return Ok(());
    }
    let reply = answer(slack, &cmd).await?;
    if let Some(url) = cmd.response_url.clone() {
        respond(slack, url, reply);
    }
    Ok(())
}

/// Posts `body` to a `response_url` in the background (best effort: the
/// user can run the command again).
pub(super) fn respond(slack: &Arc<Slack>, url: String, body: Value) {
    let slack = slack.clone();
    tokio::spawn(async move {
        let Ok(api) = &slack.api else { return };
        if let Err(e) = api.respond(&url, &body).await {
            warn!(channel = "slack", error = %e, "could not answer a command or button");
        }
    });
}

fn text(s: &str) -> Value {
    json!({ "response_type": "ephemeral", "text": s })
}

async fn answer(slack: &Slack, cmd: &SlashCommand) -> Result<Value, ChannelError> {
    if !may_use(slack, &cmd.user_id).await? {
        return Ok(text(PRIVATE));
    }
    let mut words = cmd.text.split_whitespace();
    let sub = words.next().unwrap_or("help").to_lowercase();
    let arg = words.next();
    let thread = dm_thread(&cmd.channel_id);
    Ok(match (sub.as_str(), thread) {
        ("help", _) => text(HELP),
        ("usage", _) => {
            let rows = slack
                .runtime
                .usage(&hearth_runtime::usage::today(now_ms()))
                .await?;
            text(&usage_text(&rows))
        }
        ("new" | "model" | "thinking" | "cancel", None) => text(DM_ONLY),
        ("new", Some(thread)) => {
            slack.runtime.new_session(&thread).await?;
            text("Started a new conversation.")
        }
        ("model", Some(thread)) => match arg {
            Some(m) if model_ids(slack).iter().any(|id| id == m) => {
                slack.runtime.set_model(&thread, m).await?;
                text(&format!("Model: {}", escape(m)))
            }
            Some(m) => {
                picker(
                    slack,
                    &thread,
                    &format!("No model {}. Choose one:", escape(m)),
                )
                .await?
            }
            None => picker(slack, &thread, "Choose the model:").await?,
        },
        ("thinking", Some(thread)) => match arg.and_then(ThinkingLevel::parse) {
            Some(level) => {
                slack.runtime.set_thinking(&thread, level).await?;
                text(&format!("Thinking: {}", level.as_str()))
            }
            None => thinking_picker(slack, &thread).await?,
        },
        ("cancel", Some(thread)) => text(cancel(slack, &thread).await?),
        _ => text(&format!("I do not know that command.\n\n{HELP}")),
    })
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

async fn cancel(slack: &Slack, thread: &str) -> Result<&'static str, ChannelError> {
    let filter = RunFilter {
        thread_key: Some(thread.to_owned()),
        status: None,
        limit: 20,
    };
    let active = slack
        .runtime
        .list_runs(&filter)
        .await?
        .into_iter()
        .find(|r| !r.status.is_terminal());
    let Some(run) = active else {
        return Ok("Nothing to cancel.");
    };
    let env = slack.runtime.cancel(&run.run_id).await?;
    Ok(if env.status == RunStatus::Cancelled {
        "Cancelled."
    } else {
        "Stopping."
    })
}

pub(super) fn model_ids(slack: &Slack) -> Vec<String> {
    slack
        .runtime
        .models()
        .models
        .iter()
        .map(|m| m.model.to_string())
        .collect()
}

/// The model picker: one button per configured model, the current one marked.
pub(super) async fn picker(
    slack: &Slack,
    thread: &str,
    title: &str,
) -> Result<Value, ChannelError> {
    let current = slack.runtime.thread_runtime(thread).await?.model;
    let buttons: Vec<Value> = model_ids(slack)
        .iter()
        .take(MAX_MODELS)
        .enumerate()
        .map(|(i, m)| {
            let mark = if *m == current { "✓ " } else { "" };
            // Button labels are at most 75 characters.
            let label: String = format!("{mark}{m}").chars().take(75).collect();
            json!({ "type": "button", "action_id": format!("{MODEL_ACTION}{i}"), "value": m,
                    "text": { "type": "plain_text", "text": label } })
        })
        .collect();
    Ok(with_buttons(
        &format!("{title}\nNow: {}", escape(&current)),
        buttons,
    ))
}

/// The thinking picker.
pub(super) async fn thinking_picker(slack: &Slack, thread: &str) -> Result<Value, ChannelError> {
    let current = slack.runtime.thread_runtime(thread).await?.thinking;
    let buttons: Vec<Value> = [
        ThinkingLevel::Off,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
    ]
    .iter()
    .map(|l| {
        let mark = if l.as_str() == current { "✓ " } else { "" };
        json!({ "type": "button", "action_id": format!("{THINKING_ACTION}{}", l.as_str()), "value": l.as_str(),
                "text": { "type": "plain_text", "text": format!("{mark}{}", l.as_str()) } })
    })
    .collect();
    Ok(with_buttons(
        &format!("How hard should the model think?\nNow: {current}"),
        buttons,
    ))
}

/// An ephemeral message: a section and rows of buttons.
fn with_buttons(title: &str, buttons: Vec<Value>) -> Value {
    let mut blocks =
        vec![json!({ "type": "section", "text": { "type": "mrkdwn", "text": title } })];
    blocks.extend(
        buttons
            .chunks(PER_BLOCK)
            .map(|row| json!({ "type": "actions", "elements": row })),
    );
    json!({ "response_type": "ephemeral", "replace_original": true, "text": title, "blocks": blocks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pickers_fit_slack_limits() {
        let buttons: Vec<Value> = (0..60)
            .map(|i| json!({ "action_id": format!("{MODEL_ACTION}{i}") }))
            .collect();
        let msg = with_buttons("Choose", buttons);
        let blocks = msg["blocks"].as_array().unwrap();
        assert_eq!(blocks.len(), 1 + 3);
        assert!(
            blocks[1..]
                .iter()
                .all(|b| b["elements"].as_array().unwrap().len() <= PER_BLOCK)
        );
        assert_eq!(dm_thread("D123").as_deref(), Some("slack:channel:D123"));
        assert_eq!(dm_thread("C123"), None);
    }
}
