//! The `/hearth` slash command: `new`, `model`, `thinking`, `usage`,
//! `cancel`, `help`, carried out by [`crate::commands`] and rendered for
//! Slack: answers are ephemeral, through the command's `response_url`;
//! pickers are Block Kit buttons answered in [`super::interactive`].
//!
//! Commands that act on a conversation (`new`, `model`, `thinking`,
//! `cancel`) change, in a direct message, that DM's conversation. In a
//! channel every hearth thread is its own conversation and Slack does not
//! say which thread a command was typed in, so the command names it: a
//! thread's link or root ts as its last word (`/hearth cancel
//! https://…/archives/C1/p1700000000000100`); without one it acts on the
//! newest thread of that channel where the user talked to hearth. A picker
//! shown for a thread carries the thread's root in its `block_id`.

use hearth_core::records::RunFilter;
use hearth_runtime::Answerer;
use serde_json::{Value, json};
use tracing::warn;

use super::mrkdwn::escape;
use super::types::SlashCommand;
use super::{Sl, THREAD_PREFIX, dm_thread_key, is_id, is_ts, thread_key, user_key};
use crate::commands::{self, Command, Ctx, Picker, PickerKind, Reply};
use crate::control::Place;
use crate::error::ChannelError;

/// `action_id` prefix of the model picker's buttons (value: the model id).
pub(super) const MODEL_ACTION: &str = "hearth_model_";
/// `action_id` prefix of the thinking picker's buttons (value: the level).
pub(super) const THINKING_ACTION: &str = "hearth_thinking_";
/// The action id prefix of a permission mode button (then the mode).
pub(super) const MODE_ACTION: &str = "hearth_mode_";
/// Buttons in one actions block (Slack allows 25).
const PER_BLOCK: usize = 25;
/// Models offered by the picker (Slack allows 50 blocks in a message).
const MAX_MODELS: usize = 25 * 40;
/// `block_id` prefix of a picker's rows shown for a channel thread:
/// `hearth_thread:<root ts>:<row>`.
const THREAD_BLOCK: &str = "hearth_thread:";
/// Newest runs searched for the user's latest thread in a channel.
const RECENT_RUNS: u32 = 200;

const PRIVATE: &str =
    "This assistant is private: send it a direct message to ask its owner for access.";
const NO_THREAD: &str = "You have no conversation with me in this channel yet: mention me to start one, or name a thread by its link (More actions → Copy link) after the command.";
const UNKNOWN_THREAD: &str =
    "I have no conversation in that thread: mention me there first, or name another thread.";

/// True when `user` may use the assistant's commands and settings.
pub(super) async fn may_use(slack: &Sl, user: &str) -> Result<bool, ChannelError> {
    Ok(slack.config.open_dms || slack.kit.access.is_allowed(&user_key(user)).await?)
}

/// The conversation a command or picker in `channel` acts on: only a DM's.
pub(super) fn dm_thread(channel: &str) -> Option<String> {
    (channel.starts_with('D') && is_id(channel)).then(|| dm_thread_key(channel))
}

/// The thread a picker row shown for a channel thread belongs to.
pub(super) fn picker_thread(channel: &str, block_id: &str) -> Option<String> {
    let rest = block_id.strip_prefix(THREAD_BLOCK)?;
    let (root, _row) = rest.split_once(':')?;
    (is_id(channel) && is_ts(root)).then(|| thread_key(channel, root))
}

/// The root ts a word names: a ts (`1700000000.000100`) or a message link
/// (`https://x.slack.com/archives/C1/p1700000000000100`, a reply's link
/// naming its thread in `thread_ts=`), with or without Slack's `<…>`.
fn named_root(word: &str) -> Option<String> {
    let word = word.trim_start_matches('<').trim_end_matches('>');
    let word = word.split('|').next().unwrap_or(word);
    if is_ts(word) && word.contains('.') {
        return Some(word.to_owned());
    }
    let (path, query) = word.split_once('?').unwrap_or((word, ""));
    if let Some(ts) = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("thread_ts="))
        .filter(|ts| is_ts(ts) && ts.contains('.'))
    {
        return Some(ts.to_owned());
    }
    let digits = path.rsplit('/').next()?.strip_prefix('p')?;
    if digits.len() <= 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (secs, micros) = digits.split_at(digits.len() - 6);
    Some(format!("{secs}.{micros}"))
}

/// Which conversation a command acts on.
enum Aim {
    /// This thread key.
    Thread(String),
    /// None can be found; the user is told why.
    Missing(&'static str),
}

/// The conversation a command in `cmd.channel_id` acts on, and the words
/// left once a named thread is taken off.
async fn aim<'a>(
    slack: &Sl,
    cmd: &SlashCommand,
    mut args: Vec<&'a str>,
) -> Result<(Aim, Vec<&'a str>), ChannelError> {
    let channel = cmd.channel_id.as_str();
    if let Some(thread) = dm_thread(channel) {
        return Ok((Aim::Thread(thread), args));
    }
    if !is_id(channel) {
        return Ok((Aim::Missing(NO_THREAD), args));
    }
    if let Some(root) = args.last().and_then(|w| named_root(w)) {
        args.pop();
        let aim = if super::inbound::answers(slack, channel, &root).await? {
            Aim::Thread(thread_key(channel, &root))
        } else {
            Aim::Missing(UNKNOWN_THREAD)
        };
        return Ok((aim, args));
    }
    let prefix = format!("{THREAD_PREFIX}{channel}:");
    let user = user_key(&cmd.user_id);
    let filter = RunFilter {
        thread_key: None,
        status: None,
        limit: RECENT_RUNS,
        ..Default::default()
    };
    let latest = slack
        .runtime
        .list_runs(&filter)
        .await?
        .into_iter()
        .find(|r| r.user_key == user && r.thread_key.starts_with(&prefix));
    Ok((
        latest.map_or(Aim::Missing(NO_THREAD), |r| Aim::Thread(r.thread_key)),
        args,
    ))
}

pub(super) async fn command(slack: &Sl, cmd: SlashCommand) -> Result<(), ChannelError> {
    if let Some(trigger) = &cmd.trigger_id
        && !slack.kit.first_sight(&format!("command:{trigger}")).await?
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
pub(super) fn respond(slack: &Sl, url: String, body: Value) {
    let slack = slack.clone();
    tokio::spawn(async move {
        let Ok(api) = &slack.kit.api else { return };
        if let Err(e) = api.respond(&url, &body).await {
            warn!(channel = "slack", error = %e, "could not answer a command or button");
        }
    });
}

fn text(s: &str) -> Value {
    json!({ "response_type": "ephemeral", "text": s })
}

async fn answer(slack: &Sl, cmd: &SlashCommand) -> Result<Value, ChannelError> {
    if !may_use(slack, &cmd.user_id).await? {
        return Ok(text(PRIVATE));
    }
    let mut words = cmd.text.split_whitespace();
    let sub = words.next().unwrap_or("help").to_lowercase();
    let mut args: Vec<&str> = words.collect();
    let Some(command) = Command::parse(&sub, &[]) else {
        return Ok(text(&format!("I do not know that command.\n\n{}", help())));
    };
    let thread = match command {
        Command::On(_) => match aim(slack, cmd, args).await? {
            (Aim::Thread(thread), rest) => {
                args = rest;
                Some(thread)
            }
            (Aim::Missing(why), _) => return Ok(text(why)),
        },
        Command::Help | Command::Usage => None,
    };
    // Parsed again with the words a named thread left.
    let command = Command::parse(&sub, &args).unwrap_or(command);
    let user = user_key(&cmd.user_id);
    let scope = scope(slack);
    let ctx = Ctx {
        runtime: &slack.runtime,
        who: Answerer::user(&user),
        place: thread.as_deref().map(|t| place(t, &scope)),
    };
    Ok(match commands::run(&ctx, command).await? {
        Reply::Help => text(&help()),
        Reply::Private(words) | Reply::Public(words) => text(&escape(&words)),
        Reply::Stopped(words) => text(words),
        Reply::Picker(picker) => match &thread {
            Some(thread) => with_buttons(thread, &picker),
            None => text(&escape(&picker.text())),
        },
    })
}

/// What `/hearth help` says.
fn help() -> String {
    let lines = commands::help_lines(|s| match s.args {
        "" => format!("`/hearth {}`", s.name),
        args => format!("`/hearth {} {args}`", s.name),
    });
    format!(
        "I am your hearth assistant. Write to me in a direct message, or mention me in a channel and I answer in a thread.\n\n{lines}\n\n\
         In a channel these act on your newest thread with me there, or on the thread whose link (or ts) you add last."
    )
}

/// Where `thread` is, for the rules of [`crate::control`]: a DM is its
/// user's, a channel thread is shared and checked in the workspace's scope.
pub(super) fn place<'a>(thread: &'a str, scope: &'a str) -> Place<'a> {
    let shared = !thread.starts_with(super::DM_PREFIX);
    Place::new(thread, shared.then_some(scope))
}

/// The workspace's scope (`global` before the bot's workspace is known).
pub(super) fn scope(slack: &Sl) -> String {
    slack.scope_for(None).unwrap_or_else(|| "global".to_owned())
}

/// A picker's buttons: a model's value is its id, a level's the level.
fn buttons(picker: &Picker) -> Vec<Value> {
    let prefix = match picker.kind {
        PickerKind::Model => MODEL_ACTION,
        PickerKind::Thinking => THINKING_ACTION,
        PickerKind::Mode => MODE_ACTION,
    };
    picker
        .choices
        .iter()
        .take(MAX_MODELS)
        .enumerate()
        .map(|(i, c)| {
            // Button labels are at most 75 characters.
            let label: String = picker.label(c).chars().take(75).collect();
            let id = match picker.kind {
                PickerKind::Model => format!("{prefix}{i}"),
                PickerKind::Thinking | PickerKind::Mode => format!("{prefix}{c}"),
            };
            json!({ "type": "button", "action_id": id, "value": c,
                    "text": { "type": "plain_text", "text": label } })
        })
        .collect()
}

/// An ephemeral message for `thread`: a section and rows of buttons. Rows
/// shown for a channel thread name its root in their `block_id` (unique per
/// row, as Slack requires), since a press says only the channel.
pub(super) fn with_buttons(thread: &str, picker: &Picker) -> Value {
    let title = format!(
        "{}\nNow: {}",
        escape(&picker.heading),
        escape(&picker.current)
    );
    let buttons = buttons(picker);
    let root = thread
        .strip_prefix(THREAD_PREFIX)
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, root)| root);
    let mut blocks =
        vec![json!({ "type": "section", "text": { "type": "mrkdwn", "text": title } })];
    blocks.extend(buttons.chunks(PER_BLOCK).enumerate().map(|(i, row)| {
        let mut block = json!({ "type": "actions", "elements": row });
        if let Some(root) = root {
            block["block_id"] = json!(format!("{THREAD_BLOCK}{root}:{i}"));
        }
        block
    }));
    json!({ "response_type": "ephemeral", "replace_original": true, "text": title, "blocks": blocks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pickers_fit_slack_limits() {
        let mut picker = Picker {
            kind: PickerKind::Model,
            heading: "Choose <one>".into(),
            current: "p/1".into(),
            choices: (0..60).map(|i| format!("p/{i}")).collect(),
        };
        let msg = with_buttons("slack:thread:C1:17.5", &picker);
        assert_eq!(msg["text"], "Choose &lt;one&gt;\nNow: p/1");
        assert_eq!(
            msg["blocks"][1]["elements"][1]["action_id"],
            "hearth_model_1"
        );
        assert_eq!(msg["blocks"][1]["elements"][1]["value"], "p/1");
        let blocks = msg["blocks"].as_array().unwrap();
        assert_eq!(blocks.len(), 1 + 3);
        assert_eq!(blocks[3]["block_id"], "hearth_thread:17.5:2");
        assert_eq!(
            picker_thread("C1", "hearth_thread:17.5:2").as_deref(),
            Some("slack:thread:C1:17.5")
        );
        assert_eq!(picker_thread("C1", "hearth_confirm"), None);
        picker.kind = PickerKind::Thinking;
        picker.choices = vec!["high".into()];
        let dm = with_buttons("slack:channel:D1", &picker);
        assert_eq!(
            dm["blocks"][1]["elements"][0]["action_id"],
            "hearth_thinking_high"
        );
        assert!(dm["blocks"][0].get("block_id").is_none());
        assert!(
            blocks[1..]
                .iter()
                .all(|b| b["elements"].as_array().unwrap().len() <= PER_BLOCK)
        );
        assert_eq!(dm_thread("D123").as_deref(), Some("slack:channel:D123"));
        assert_eq!(dm_thread("C123"), None);
    }

    #[test]
    fn a_command_names_a_thread_by_link_or_ts() {
        for word in [
            "1700000000.000100",
            "https://x.slack.com/archives/C1/p1700000000000100",
            "<https://x.slack.com/archives/C1/p1700000000000100>",
            "https://x.slack.com/archives/C1/p1700000009000200?thread_ts=1700000000.000100&cid=C1",
        ] {
            assert_eq!(
                named_root(word).as_deref(),
                Some("1700000000.000100"),
                "{word}"
            );
        }
        for word in [
            "gpt-4o",
            "high",
            "p123",
            "https://x.slack.com/archives/C1/pabc",
            "",
        ] {
            assert_eq!(named_root(word), None, "{word}");
        }
    }
}
