//! Interactions: slash commands and the confirmation buttons. Each is
//! answered within Discord's 3 s: quick ones at once (type 4, most of them
//! ephemeral), `/ask` deferred (type 5) and finished by editing the
//! original response once the run is queued; its answer follows in the
//! channel through the outbox, like any answer.

use std::sync::atomic::Ordering;

use hearth_runtime::Answerer;
use reqwest::Method;
use serde_json::{Value, json};
use tracing::warn;

use super::commands::ADMINISTRATOR;
use super::types::{Interaction, User, option};
use super::{
    Dc, Discord, inbound, is_snowflake, llm, permissions, plugins, presses, stats, thread_key,
    user_key,
};
use crate::commands::{self, Button, Command, Ctx, Picker, Reply};
use crate::control::Place;
use crate::error::ChannelError;

/// Interaction callback types.
const MESSAGE: u8 = 4;
pub(super) const DEFERRED: u8 = 5;
pub(super) const UPDATE_MESSAGE: u8 = 7;
/// Only the user who acted sees the message.
pub(super) const EPHEMERAL: u64 = 1 << 6;
/// Buttons in an action row, and in a message (five rows).
const PER_ROW: usize = 5;
const MAX_BUTTONS: usize = 25;
/// Characters of a button's label.
const MAX_LABEL: usize = 80;

/// Handles one interaction. A failure is logged and, when the interaction
/// was not answered yet, answered privately, so the user is not left with
/// Discord's "did not respond".
pub(super) async fn handle(dc: Dc, i: Interaction) {
    if let Err(e) = handle_inner(&dc, &i).await {
        warn!(channel = "discord", error = %e, "could not handle an interaction");
        if !i.answered.load(Ordering::SeqCst) {
            private(&dc, &i, "That did not work; try again.").await;
        }
    }
}

/// A token Discord issued can go in a URL path as it is.
fn token_ok(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= 500
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

async fn handle_inner(dc: &Dc, i: &Interaction) -> Result<(), ChannelError> {
    let (Some(actor), Some(channel)) = (i.actor(), i.channel_id.as_deref()) else {
        return Ok(());
    };
    if !is_snowflake(&i.id)
        || !is_snowflake(channel)
        || !is_snowflake(&actor.id)
        || i.guild_id.as_deref().is_some_and(|g| !is_snowflake(g))
        || !token_ok(&i.token)
    {
        warn!(
            channel = "discord",
            "skipping an interaction with malformed ids"
        );
        return Ok(());
    }
    match i.kind {
        // A replayed command must not act twice.
        2 if first_sight(dc, i).await? => command(dc, i, actor, channel).await,
        // A press is marked seen after it acted (see `presses`).
        3 => presses::button(dc, i, actor).await,
        // A modal submitted (`/llm key set`), once.
        5 if first_sight(dc, i).await? => llm::submitted(dc, i, actor).await,
        _ => Ok(()),
    }
}

/// Records interaction `i`; true the first time.
pub(super) async fn first_sight(dc: &Discord, i: &Interaction) -> Result<bool, ChannelError> {
    dc.kit.first_sight(&format!("interaction:{}", i.id)).await
}

/// Answers interaction `i` with callback `kind` and `data`.
pub(super) async fn respond(dc: &Discord, i: &Interaction, kind: u8, data: Value) {
    let Ok(api) = &dc.kit.api else { return };
    i.answered.store(true, Ordering::SeqCst);
    let path = format!("/interactions/{}/{}/callback", i.id, i.token);
    let body = json!({ "type": kind, "data": data });
    if let Err(e) = api
        .call::<Value>(
            Method::POST,
            &path,
            "POST interaction callback",
            Some(&body),
        )
        .await
    {
        warn!(channel = "discord", error = %e, "could not answer an interaction");
    }
}

/// Answers with a message only the actor sees.
pub(super) async fn private(dc: &Discord, i: &Interaction, text: &str) {
    let data =
        json!({ "content": clip(text), "flags": EPHEMERAL, "allowed_mentions": { "parse": [] } });
    respond(dc, i, MESSAGE, data).await;
}

async fn public(dc: &Discord, i: &Interaction, text: &str) {
    let data = json!({ "content": clip(text), "allowed_mentions": { "parse": [] } });
    respond(dc, i, MESSAGE, data).await;
}

fn clip(text: &str) -> String {
    text.chars().take(super::deliver::MAX_CONTENT).collect()
}

/// The guild owner and members with Administrator are admins in their guild.
pub(super) fn is_guild_admin(dc: &Discord, i: &Interaction, actor: &User) -> bool {
    let Some(guild) = i.guild_id.as_deref() else {
        return false;
    };
    let perms = i
        .member
        .as_ref()
        .and_then(|m| m.permissions.as_deref())
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(0);
    perms & ADMINISTRATOR != 0 || dc.owner_of(guild).as_deref() == Some(actor.id.as_str())
}

/// Why `user` may not use the assistant where interaction `i` happened
/// (a guild it is not enabled in, a DM of a stranger), or `None`.
pub(super) async fn refusal(
    dc: &Dc,
    i: &Interaction,
    user: &str,
) -> Result<Option<&'static str>, ChannelError> {
    Ok(match &i.guild_id {
        Some(guild) if !dc.guild_allowed(guild) => {
            Some("This assistant is not enabled in this server.")
        }
        Some(_) => None,
        None if !dc.config.open_dms && !dc.kit.access.is_allowed(user).await? => Some(
            "This assistant is private. Send it a message to get a pairing code for its owner.",
        ),
        None => None,
    })
}

/// Who acts in interaction `i`, for the rules of [`crate::control`]: the
/// guild's scope and their roles there, and whether they administer it.
pub(super) struct Acting {
    pub(super) user: String,
    pub(super) context: inbound::PermissionContext,
    pub(super) admin: bool,
}

impl Acting {
    pub(super) fn of(dc: &Discord, i: &Interaction, actor: &User) -> Self {
        Self {
            user: user_key(&actor.id),
            context: inbound::PermissionContext::of(i.guild_id.as_deref(), i.member.as_ref()),
            admin: is_guild_admin(dc, i, actor),
        }
    }

    /// As the runtime sees them.
    pub(super) fn who(&self) -> Answerer<'_> {
        Answerer {
            user_key: &self.user,
            roles: &self.context.roles,
            // The guild owner and Administrators are admins in their guild.
            admin_of: self.context.scope.as_deref().filter(|_| self.admin),
        }
    }

    /// The conversation of `thread`: shared in a guild, private in a DM.
    pub(super) fn place<'a>(&'a self, thread: &'a str) -> Place<'a> {
        Place::new(thread, self.context.scope.as_deref())
    }
}

/// What `/help` says.
fn help() -> String {
    let lines = commands::help_lines(|s| match (s.name, s.args) {
        ("cancel", _) => "/agent cancel".to_owned(),
        (name, "") => format!("/{name}"),
        (name, args) => format!("/{name} {args}"),
    });
    format!(
        "I am your hearth assistant. Write to me, or mention me in a channel, and I answer.\n\n{lines}\n\n\
         /ask asks a question, /agent stats shows this server's run health, /permissions lets \
         server admins grant capabilities, /llm key set lets them give this server its own \
         provider key, and /plugins lets them turn on other bots' apps here."
    )
}

async fn command(
    dc: &Dc,
    i: &Interaction,
    actor: &User,
    channel: &str,
) -> Result<(), ChannelError> {
    let acting = Acting::of(dc, i, actor);
    if let Some(why) = refusal(dc, i, &acting.user).await? {
        private(dc, i, why).await;
        return Ok(());
    }
    let Some(data) = &i.data else { return Ok(()) };
    let thread = thread_key(channel);
    let sub = data.options.first();
    // The shared commands' one option: `/model name`, `/thinking level`,
    // `/mode mode`.
    let arg = option(&data.options, "name")
        .or_else(|| option(&data.options, "level"))
        .or_else(|| option(&data.options, "mode"));
    let args: Vec<&str> = arg.as_deref().into_iter().collect();
    let command = match data.name.as_str() {
        "agent" if sub.is_some_and(|s| s.name == "cancel") => Command::parse("cancel", &[]),
        name => Command::parse(name, &args),
    };
    if let Some(command) = command {
        let ctx = Ctx {
            runtime: &dc.runtime,
            who: acting.who(),
            place: Some(acting.place(&thread)),
        };
        match commands::run(&ctx, command).await? {
            Reply::Help => private(dc, i, &help()).await,
            Reply::Private(text) => private(dc, i, &text).await,
            Reply::Public(text) => public(dc, i, &text).await,
            Reply::Stopped(text) => public(dc, i, text).await,
            Reply::Picker(picker) => respond(dc, i, MESSAGE, picker_message(&picker, true)).await,
        }
        return Ok(());
    }
    match data.name.as_str() {
        "agent" if sub.is_some_and(|s| s.name == "stats") => stats::command(dc, i, actor).await,
        "ask" => ask(dc, i, &acting.user, channel).await,
        "permissions" => permissions::command(dc, i, actor, sub).await,
        "llm" => llm::command(dc, i, actor, sub).await,
        "plugins" => plugins::command(dc, i, actor, sub).await,
        other => {
            let text = match other {
                "agent" => "Use /agent cancel or /agent stats.",
                "ping" => "Pong.",
                _ => "This command is no longer supported.",
            };
            private(dc, i, text).await;
            Ok(())
        }
    }
}

/// `/ask`: deferred, then finished once the run is queued; its answer
/// follows in the channel through the outbox, like any answer.
async fn ask(dc: &Dc, i: &Interaction, user: &str, channel: &str) -> Result<(), ChannelError> {
    let options = i
        .data
        .as_ref()
        .map(|d| d.options.as_slice())
        .unwrap_or_default();
    let Some(question) = option(options, "question").filter(|q| !q.trim().is_empty()) else {
        private(dc, i, "Ask a question.").await;
        return Ok(());
    };
    respond(dc, i, DEFERRED, json!({})).await;
    let asked = inbound::Asked {
        key: format!("discord:{}", i.id),
        channel_id: channel.to_owned(),
        user: user.to_owned(),
        context: inbound::PermissionContext::of(i.guild_id.as_deref(), i.member.as_ref()),
    };
    let queued = inbound::ingest(dc, asked, question.clone(), true).await?;
    let text = match queued {
        Some(_) => format!("> {}", question.replace('\n', "\n> ")),
        None => "I cannot take that question.".to_owned(),
    };
    edit_original(dc, i, &clip(&text)).await;
    Ok(())
}

/// A picker as a message: its question, and a button per choice, five to
/// an action row and at most five rows (Discord's limits); past them the
/// message says how to name the rest. Only the one who asked sees it
/// when `ephemeral`.
pub(super) fn picker_message(picker: &Picker, ephemeral: bool) -> Value {
    let shown = picker.choices.len().min(MAX_BUTTONS);
    let rows: Vec<Value> = picker.choices[..shown]
        .chunks(PER_ROW)
        .enumerate()
        .map(|(r, row)| {
            let buttons: Vec<Value> = row
                .iter()
                .enumerate()
                .map(|(c, choice)| {
                    let index = r * PER_ROW + c;
                    let label: String = picker.label(choice).chars().take(MAX_LABEL).collect();
                    let style = if *choice == picker.current { 1 } else { 2 };
                    json!({ "type": 2, "style": style, "label": label,
                            "custom_id": Button::choice(picker, index, choice) })
                })
                .collect();
            json!({ "type": 1, "components": buttons })
        })
        .collect();
    let mut text = picker.text();
    if shown < picker.choices.len() {
        text.push_str("\n(The first 25 are shown; /model <name> chooses any.)");
    }
    let mut data =
        json!({ "content": clip(&text), "components": rows, "allowed_mentions": { "parse": [] } });
    if ephemeral {
        data["flags"] = json!(EPHEMERAL);
    }
    data
}

pub(super) async fn edit_original(dc: &Discord, i: &Interaction, content: &str) {
    let (Ok(api), Some(me)) = (&dc.kit.api, dc.kit.me.get()) else {
        return;
    };
    let path = format!("/webhooks/{}/{}/messages/@original", me.app_id, i.token);
    let body = json!({ "content": content, "allowed_mentions": { "parse": [] } });
    if let Err(e) = api
        .call::<Value>(Method::PATCH, &path, "PATCH original", Some(&body))
        .await
    {
        warn!(channel = "discord", error = %e, "could not finish a deferred response");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_picker_fits_discords_rows_and_says_when_models_are_left_out() {
        use crate::commands::PickerKind;
        let picker = Picker {
            kind: PickerKind::Model,
            heading: "Choose the model:".into(),
            current: format!("p/3{}", "x".repeat(12)),
            choices: (0..30)
                .map(|i| format!("p/{i}{}", "x".repeat(i * 4)))
                .collect(),
        };
        let msg = picker_message(&picker, true);
        let rows = msg["components"].as_array().unwrap();
        assert_eq!(rows.len(), 5);
        for row in rows {
            let buttons = row["components"].as_array().unwrap();
            assert!(buttons.len() <= PER_ROW);
            for b in buttons {
                assert!(b["custom_id"].as_str().unwrap().len() <= 100);
                assert!(b["label"].as_str().unwrap().chars().count() <= MAX_LABEL);
            }
        }
        assert_eq!(rows[0]["components"][3]["label"], "✓ p/3xxxxxxxxxxxx");
        assert_eq!(rows[0]["components"][3]["style"], 1);
        assert_eq!(msg["flags"], EPHEMERAL);
        assert!(
            msg["content"]
                .as_str()
                .unwrap()
                .contains("The first 25 are shown")
        );
        assert!(picker_message(&picker, false).get("flags").is_none());
    }

    #[test]
    fn interaction_tokens_are_checked_before_going_in_a_path() {
        assert!(token_ok("aW50ZXJhY3Rpb246MTIz.abc-_"));
        assert!(!token_ok("../x"));
        assert!(!token_ok(""));
    }
}
