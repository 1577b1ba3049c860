//! Interactions: slash commands and the confirmation buttons. Each is
//! answered within Discord's 3 s: quick ones at once (type 4, most of them
//! ephemeral), `/ask` deferred (type 5) and finished by editing the
//! original response once the run is queued; its answer follows in the
//! channel through the outbox, like any answer.

use std::sync::atomic::Ordering;

use hearth_core::records::RunFilter;
use hearth_core::{RunStatus, ThinkingLevel, ThreadKey, now_ms};
use reqwest::Method;
use serde_json::{Value, json};
use tracing::{info, warn};

use hearth_runtime::Answerer;

use super::commands::ADMINISTRATOR;
use super::types::{Interaction, User, option};
use super::{
    Dc, Discord, inbound, is_snowflake, permissions, presses, stats, thread_key, user_key,
};
use crate::control::{self, Place};
use crate::error::ChannelError;

/// Interaction callback types.
const MESSAGE: u8 = 4;
const DEFERRED: u8 = 5;
pub(super) const UPDATE_MESSAGE: u8 = 7;
/// Only the user who acted sees the message.
const EPHEMERAL: u64 = 1 << 6;

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
        _ => Ok(()),
    }
}

/// Records interaction `i`; true the first time.
pub(super) async fn first_sight(dc: &Discord, i: &Interaction) -> Result<bool, ChannelError> {
    Ok(dc
        .store
        .first_sight("discord", &format!("interaction:{}", i.id), now_ms())
        .await?)
}

/// Answers interaction `i` with callback `kind` and `data`.
pub(super) async fn respond(dc: &Discord, i: &Interaction, kind: u8, data: Value) {
    let Ok(api) = &dc.api else { return };
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

async fn command(
    dc: &Dc,
    i: &Interaction,
    actor: &User,
    channel: &str,
) -> Result<(), ChannelError> {
    let user = user_key(&actor.id);
    match &i.guild_id {
        Some(guild) if !dc.guild_allowed(guild) => {
            private(dc, i, "This assistant is not enabled in this server.").await;
            return Ok(());
        }
        Some(_) => {}
        None => {
            if !dc.config.open_dms && !dc.access.is_allowed(&user).await? {
                private(dc, i, "This assistant is private. Send it a message to get a pairing code for its owner.").await;
                return Ok(());
            }
        }
    }
    let Some(data) = &i.data else { return Ok(()) };
    let thread = thread_key(channel);
    let sub = data.options.first();
    // Who acts and where, for the rules on changing and cancelling.
    let context = inbound::PermissionContext::of(i.guild_id.as_deref(), i.member.as_ref());
    let who = Answerer {
        user_key: &user,
        roles: &context.roles,
        admin_of: context
            .scope
            .as_deref()
            .filter(|_| is_guild_admin(dc, i, actor)),
    };
    let place = match context.scope.as_deref() {
        Some(scope) => Place::Shared {
            scope,
            thread: &thread,
        },
        None => Place::Private,
    };
    let may_change = || control::may_change(&dc.runtime, who, place);
    match data.name.as_str() {
        "ping" => private(dc, i, "Pong.").await,
        "ask" => {
            let Some(question) = option(&data.options, "question").filter(|q| !q.trim().is_empty())
            else {
                private(dc, i, "Ask a question.").await;
                return Ok(());
            };
            respond(dc, i, DEFERRED, json!({})).await;
            let asked = inbound::Asked {
                key: format!("discord:{}", i.id),
                channel_id: channel.to_owned(),
                user: user.clone(),
                context: inbound::PermissionContext::of(i.guild_id.as_deref(), i.member.as_ref()),
            };
            let queued = inbound::ingest(dc, asked, question.clone(), true).await?;
            let text = match queued {
                Some(_) => format!("> {}", question.replace('\n', "\n> ")),
                None => "I cannot take that question.".to_owned(),
            };
            edit_original(dc, i, &clip(&text)).await;
        }
        "model" => match option(&data.options, "name") {
            Some(name) => {
                let known = dc
                    .runtime
                    .models()
                    .models
                    .iter()
                    .any(|m| m.model.to_string() == name);
                if !known {
                    private(
                        dc,
                        i,
                        &format!("Unknown model {name:?}. {}", models_text(dc)),
                    )
                    .await;
                } else if may_change().await? {
                    dc.runtime
                        .set_model(&ThreadKey::new(&thread)?, &name)
                        .await?;
                    public(dc, i, &format!("Model: {name}")).await;
                } else {
                    private(dc, i, control::CHANGE_REFUSED).await;
                }
            }
            None => {
                let now = dc
                    .runtime
                    .thread_runtime(&ThreadKey::new(&thread)?)
                    .await?
                    .model;
                private(dc, i, &format!("Now: {now}. {}", models_text(dc))).await;
            }
        },
        "thinking" => match option(&data.options, "level") {
            Some(level) => match ThinkingLevel::parse(&level) {
                Some(l) if may_change().await? => {
                    dc.runtime
                        .set_thinking(&ThreadKey::new(&thread)?, l)
                        .await?;
                    public(dc, i, &format!("Thinking: {}", l.as_str())).await;
                }
                Some(_) => private(dc, i, control::CHANGE_REFUSED).await,
                None => private(dc, i, "Choose off, low, medium or high.").await,
            },
            None => {
                let now = dc
                    .runtime
                    .thread_runtime(&ThreadKey::new(&thread)?)
                    .await?
                    .thinking;
                private(dc, i, &format!("Thinking: {now}.")).await;
            }
        },
        "new" if may_change().await? => {
            dc.runtime.new_session(&ThreadKey::new(&thread)?).await?;
            info!(channel = "discord", "new session by command");
            public(dc, i, "Started a new conversation.").await;
        }
        "new" => private(dc, i, control::CHANGE_REFUSED).await,
        "usage" => {
            let rows = dc
                .runtime
                .usage(&hearth_runtime::usage::today(now_ms()))
                .await?;
            private(dc, i, &usage_text(&rows)).await;
        }
        "permissions" => permissions::command(dc, i, actor, sub).await?,
        "agent" => match sub.map(|s| s.name.as_str()) {
            Some("cancel") => match cancel(dc, &thread, who, place).await? {
                Some(text) => public(dc, i, text).await,
                None => private(dc, i, control::CANCEL_REFUSED).await,
            },
            Some("stats") => stats::command(dc, i, actor).await?,
            _ => private(dc, i, "Use /agent cancel or /agent stats.").await,
        },
        _ => private(dc, i, "This command is no longer supported.").await,
    }
    Ok(())
}

fn models_text(dc: &Dc) -> String {
    let ids: Vec<String> = dc
        .runtime
        .models()
        .models
        .iter()
        .map(|m| m.model.to_string())
        .collect();
    format!("Available: {}", ids.join(", "))
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

/// Cancels the channel's active run when `who` may; what to tell the
/// channel, or `None` when `who` may not.
async fn cancel(
    dc: &Dc,
    thread: &str,
    who: Answerer<'_>,
    place: Place<'_>,
) -> Result<Option<&'static str>, ChannelError> {
    let filter = RunFilter {
        thread_key: Some(thread.to_owned()),
        status: None,
        limit: 20,
    };
    let active = dc
        .runtime
        .list_runs(&filter)
        .await?
        .into_iter()
        .find(|r| !r.status.is_terminal());
    let Some(run) = active else {
        return Ok(Some("Nothing to cancel."));
    };
    if !control::may_cancel(&dc.runtime, who, place, &run.run_id, &run.user_key).await {
        return Ok(None);
    }
    let env = dc.runtime.cancel(&run.run_id).await?;
    Ok(Some(if env.status == RunStatus::Cancelled {
        "Cancelled."
    } else {
        "Stopping."
    }))
}

async fn edit_original(dc: &Discord, i: &Interaction, content: &str) {
    let (Ok(api), Some(me)) = (&dc.api, dc.me.get()) else {
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
    fn interaction_tokens_are_checked_before_going_in_a_path() {
        assert!(token_ok("aW50ZXJhY3Rpb246MTIz.abc-_"));
        assert!(!token_ok("../x"));
        assert!(!token_ok(""));
    }
}
