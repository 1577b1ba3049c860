//! Events API events, from Socket Mode or HTTP: who is answered, in which
//! conversation, and what is handed to the runtime. A redelivered event
//! (same `event_id`) finds its run through the idempotency key
//! `slack:<event_id>` and never makes a second one.

use std::sync::Arc;

use hearth_core::records::RunFilter;
use hearth_core::{DeliveryMode, Inbound, ThreadKey, UserKey};
use serde_json::Value;
use tracing::{debug, warn};

use super::deliver::SlackProgress;
use super::mrkdwn::decode_incoming;
use super::types::EventCallback;
use super::{Sl, dm_thread_key, is_id, is_ts, thread_key, user_key};
use crate::error::ChannelError;

/// Handles one `event_callback` body. Errors that may pass (see
/// [`ChannelError::is_transient`]) must not be acknowledged; a malformed
/// or uninteresting event is logged and skipped.
pub(super) async fn handle(slack: &Sl, body: Value) -> Result<(), ChannelError> {
    let cb: EventCallback = match serde_json::from_value(body) {
        Ok(cb) => cb,
        Err(e) => {
            warn!(channel = "slack", error = %e, "skipping a malformed event");
            return Ok(());
        }
    };
    let ev = &cb.event;
    // Bots (hearth itself included), edits, joins and other subtypes.
    if ev.bot_id.is_some() || ev.subtype.is_some() {
        debug!(channel = "slack", event_id = %cb.event_id, "ignoring a bot or non-plain message");
        return Ok(());
    }
    let (Some(user), Some(channel), Some(ts), Some(text)) = (
        ev.user.as_deref(),
        ev.channel.as_deref(),
        ev.ts.as_deref(),
        ev.text.as_deref(),
    ) else {
        return Ok(());
    };
    if !is_id(user) || !is_id(channel) || !is_ts(ts) {
        warn!(channel = "slack", event_id = %cb.event_id, "skipping an event with malformed ids");
        return Ok(());
    }
    if slack.kit.me.get().is_none()
        && let Err(e) = slack.identify().await
    {
        // Without the bot's id its own mention cannot be removed, nor its
        // own messages told apart: the event is received again.
        slack.kit.health.failed(e.to_string());
        return Err(e);
    }
    let bot = slack.kit.me.get().map(|m| m.user_id.as_str());
    if Some(user) == bot {
        return Ok(());
    }
    let mention = bot.map(|b| format!("<@{b}"));
    let mentioned = mention.as_deref().is_some_and(|m| text.contains(m));
    let target = match (ev.kind.as_str(), ev.channel_type.as_deref()) {
        ("message", Some("im")) => Target::Dm,
        ("app_mention", _) => Target::Thread(ev.thread_ts.clone().unwrap_or_else(|| ts.to_owned())),
        // A reply in a thread hearth answers continues it without a mention;
        // one with a mention comes again as `app_mention`.
        ("message", Some(_)) if !mentioned => match ev.thread_ts.as_deref() {
            Some(root) if root != ts && is_ts(root) && answers(slack, channel, root).await? => {
                Target::Thread(root.to_owned())
            }
            _ => return Ok(()),
        },
        _ => return Ok(()),
    };
    let text = decode_incoming(text, bot);
    if text.is_empty() {
        return Ok(());
    }
    let user_key = user_key(user);
    let (thread, out) = match &target {
        Target::Dm => {
            if !slack.kit.admit_private(&user_key, user, channel).await? {
                return Ok(());
            }
            (dm_thread_key(channel), channel.to_owned())
        }
        Target::Thread(root) if is_ts(root) => {
            (thread_key(channel, root), format!("{channel}:{root}"))
        }
        Target::Thread(_) => return Ok(()),
    };
    ingest(slack, &cb, thread, out, user_key, text).await
}

/// Where an event is answered.
enum Target {
    /// The DM itself.
    Dm,
    /// The thread with this root.
    Thread(String),
}

/// True when hearth already has a conversation for this thread.
pub(super) async fn answers(slack: &Sl, channel: &str, root: &str) -> Result<bool, ChannelError> {
    let filter = RunFilter {
        thread_key: Some(thread_key(channel, root)),
        status: None,
        limit: 1,
        ..Default::default()
    };
    Ok(!slack.runtime.list_runs(&filter).await?.is_empty())
}

/// Hands a message to the runtime (idempotent on the event id) and shows
/// progress while it runs.
async fn ingest(
    slack: &Sl,
    cb: &EventCallback,
    thread: String,
    target: String,
    user: String,
    text: String,
) -> Result<(), ChannelError> {
    let inbound = Inbound {
        source: "slack".into(),
        // Made from platform ids: checked here, at the channel's edge.
        thread_key: ThreadKey::new(thread)?,
        user_key: UserKey::new(user)?,
        text,
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: Some(format!("slack:{}", cb.event_id)),
        scope: slack.scope_for(cb.team_id.as_deref()),
        roles: Vec::new(),
    };
    let (channel, thread) = super::split_target(&target);
    let reply_to = thread.map(str::to_owned);
    let Some(run) = slack
        .kit
        .ingest(&slack.runtime, inbound, channel, reply_to)
        .await?
    else {
        return Ok(());
    };
    // A redelivered event finds the same run: one progress message only.
    if slack
        .kit
        .first_sight(&format!("event:{}", cb.event_id))
        .await?
        && let Ok(api) = &slack.kit.api
    {
        let sink = Arc::new(SlackProgress { api: api.clone() });
        slack.kit.follow(&slack.runtime, &run, target, sink);
    }
    Ok(())
}
