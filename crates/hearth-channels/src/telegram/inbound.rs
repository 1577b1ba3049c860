//! Receiving updates: long polling from the stored offset (acknowledged
//! only after every update of a batch is stored), or a webhook; then the
//! rules for who is answered and what is handed to the runtime.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hearth_core::{DeliveryMode, Inbound, ThreadKey, UserKey};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::api::ApiError;
use super::deliver::TelegramProgress;
use super::types::{Me, Message, MessageReactionUpdated, Update};
use super::{Identity, Telegram, Tg, commands, presses, thread_key, user_key};
use crate::backoff::Backoff;
use crate::error::ChannelError;
use crate::kit::settle;
use crate::reactions;

/// The stored cursor: the next `getUpdates` offset.
const OFFSET: &str = "offset";

/// The updates hearth reads. `message_reaction` is not in Telegram's
/// default set: it comes only when asked for.
const ALLOWED_UPDATES: [&str; 3] = ["message", "callback_query", "message_reaction"];

pub(super) async fn run(tg: Tg, stop: CancellationToken) {
    let api = match &tg.kit.api {
        Ok(api) => api.clone(),
        Err(why) => return tg.kit.cannot_start(why),
    };
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    // Who the bot is: needed to see mentions and replies in groups.
    loop {
        match api.call::<Me>("getMe", &json!({})).await {
            Ok(me) => {
                let username = me.username.unwrap_or_default().to_lowercase();
                info!(channel = "telegram", bot = %username, "Telegram bot connected");
                let _ = tg.kit.me.set(Identity {
                    id: me.id,
                    username,
                });
                tg.kit.health.ok();
                break;
            }
            Err(e) => {
                let delay = failed(&tg, "getMe", &e, &mut backoff);
                if !pause(&stop, delay).await {
                    return;
                }
            }
        }
    }
    if let Err(e) = api
        .call::<Value>("setMyCommands", &json!({ "commands": commands::menu() }))
        .await
    {
        warn!(channel = "telegram", error = %e, "setMyCommands failed; the command menu may be stale");
    }
    if tg.config.mode == hearth_runtime::config::TelegramMode::Webhook {
        set_webhook(&tg, &api).await;
        return;
    }
    // A webhook left set would make every getUpdates fail with 409.
    if let Err(e) = api
        .call::<Value>("deleteWebhook", &json!({ "drop_pending_updates": false }))
        .await
    {
        warn!(channel = "telegram", error = %e, "deleteWebhook failed");
    }
    backoff.reset();
    poll(&tg, &api, &stop, &mut backoff).await;
}

async fn set_webhook(tg: &Telegram, api: &super::api::Api) {
    let Some(url) = &tg.config.webhook_url else {
        // Set by hand, or by a proxy: hearth only serves the route.
        info!(
            channel = "telegram",
            "webhook mode without webhook_url: not calling setWebhook"
        );
        return;
    };
    let mut body = json!({ "url": url, "allowed_updates": ALLOWED_UPDATES });
    if let Some(secret) = &tg.webhook_secret {
        body["secret_token"] = json!(secret);
    }
    match api.call::<Value>("setWebhook", &body).await {
        Ok(_) => info!(channel = "telegram", "webhook set"),
        Err(e) => {
            // Set once: a failure is shown, and a restart sets it again.
            let mut once = Backoff::new(Duration::from_secs(1), Duration::from_secs(1));
            failed(tg, "setWebhook", &e, &mut once);
        }
    }
}

/// Notes a failed call on the channel's health and log, and gives the
/// delay before the next try: a refused token (401/403) says what to check
/// and, refused again and again, is retried only every few minutes (it
/// will not pass until someone changes it).
fn failed(tg: &Telegram, method: &str, e: &ApiError, backoff: &mut Backoff) -> Duration {
    if let ApiError::Refused {
        code: code @ (401 | 403),
        description,
        ..
    } = e
    {
        let delay = backoff.refused();
        let why = crate::advice::token_refused(
            "Telegram",
            "bot token",
            &format!("{code} {description}"),
            &tg.token_source,
            crate::advice::TELEGRAM_FIX,
        );
        let why = crate::advice::with_retry(why, backoff.slow_pace());
        error!(channel = "telegram", method, error = %why, "Telegram refused the bot token");
        tg.kit.health.failed(why);
        return delay;
    }
    warn!(channel = "telegram", method, error = %e, "Telegram call failed; retrying with backoff");
    tg.kit.health.failed(format!("{method}: {e}"));
    backoff.next_delay()
}

/// Waits `d` unless stopped first; false when stopped.
async fn pause(stop: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(d) => true,
    }
}

async fn poll(tg: &Tg, api: &super::api::Api, stop: &CancellationToken, backoff: &mut Backoff) {
    let timeout = tg.config.poll_timeout_secs;
    let mut offset = loop {
        match tg.kit.store.cursor("telegram", OFFSET).await {
            Ok(v) => break v.and_then(|s| s.parse::<i64>().ok()).unwrap_or(0),
            Err(e) => {
                warn!(channel = "telegram", error = %e, "cannot read the update offset");
                if !pause(stop, backoff.next_delay()).await {
                    return;
                }
            }
        }
    };
    // The offset is stored beside polling, not before the next poll: the
    // updates themselves are stored before they are acknowledged, and a
    // batch received again after a crash (the stored offset one batch
    // behind) is deduplicated by its update ids, so the write need not
    // hold up the next message.
    let (stored, to_store) = tokio::sync::watch::channel(offset);
    let writer = tokio::spawn(store_offsets(tg.channel().clone(), to_store));
    loop {
        let body =
            json!({ "offset": offset, "timeout": timeout, "allowed_updates": ALLOWED_UPDATES });
        let call =
            api.call_within::<Vec<Value>>("getUpdates", &body, Duration::from_secs(timeout + 15));
        let updates = tokio::select! {
            () = stop.cancelled() => break,
            r = call => r,
        };
        let updates = match updates {
            Ok(u) => u,
            Err(e) => {
                if e.says("Conflict") {
                    error!(
                        channel = "telegram",
                        "another process is polling this bot (or a webhook is set): stop it, or use another token"
                    );
                }
                let delay = failed(tg, "getUpdates", &e, backoff);
                if !pause(stop, delay).await {
                    break;
                }
                continue;
            }
        };
        backoff.reset();
        if updates.is_empty() {
            tg.kit.health.ok();
            continue;
        }
        match handle_batch(tg, updates).await {
            Ok(next) => {
                offset = offset.max(next);
                stored.send_replace(offset);
                tg.kit.health.event();
            }
            Err(e) => {
                // Not acknowledged: Telegram delivers the batch again.
                warn!(channel = "telegram", error = %e, "could not store incoming updates; they will be received again");
                tg.kit.health.failed(format!("storing updates: {e}"));
                if !pause(stop, backoff.next_delay()).await {
                    break;
                }
            }
        }
    }
    // The writer stores the last offset, then ends with the channel.
    drop(stored);
    let _ = writer.await;
}

/// Stores the newest acknowledged offset, one write at a time; offsets
/// that arrive during a write are folded into the next one.
async fn store_offsets(tg: Arc<Telegram>, mut offsets: tokio::sync::watch::Receiver<i64>) {
    while offsets.changed().await.is_ok() {
        let offset = *offsets.borrow_and_update();
        if let Err(e) = tg
            .kit
            .store
            .set_cursor("telegram", OFFSET, &offset.to_string())
            .await
        {
            // The updates come again after a restart; they are deduplicated.
            warn!(channel = "telegram", error = %e, "cannot store the update offset");
        }
    }
}

/// Handles a batch (chats concurrently, each chat's updates in order);
/// returns the offset that acknowledges it.
pub(super) async fn handle_batch(tg: &Tg, updates: Vec<Value>) -> Result<i64, ChannelError> {
    let mut next = 0i64;
    let mut by_chat: BTreeMap<i64, Vec<Update>> = BTreeMap::new();
    for raw in updates {
        let id = raw.get("update_id").and_then(Value::as_i64);
        if let Some(id) = id {
            next = next.max(id + 1);
        }
        match serde_json::from_value::<Update>(raw) {
            Ok(u) => by_chat.entry(chat_of(&u)).or_default().push(u),
            Err(e) => {
                warn!(channel = "telegram", update_id = id.unwrap_or_default(), error = %e, "skipping a malformed update")
            }
        }
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (_, list) in by_chat {
        let tg = tg.clone();
        tasks.spawn(async move {
            for u in list {
                // Only an error that may pass holds the batch back to be
                // received again; the chat's next updates go on otherwise.
                settle("telegram", handle(&tg, u).await)?;
            }
            Ok::<(), ChannelError>(())
        });
    }
    let mut first_err = None;
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                error!(channel = "telegram", error = %e, "an update handler panicked");
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(next),
    }
}

fn chat_of(u: &Update) -> i64 {
    u.message
        .as_ref()
        .map(|m| m.chat.id)
        .or_else(|| {
            u.callback_query
                .as_ref()
                .and_then(|c| c.message.as_ref())
                .map(|m| m.chat.id)
        })
        .or_else(|| u.message_reaction.as_ref().map(|r| r.chat.id))
        .unwrap_or(0)
}

/// Handles one update. An error that may pass (see
/// [`ChannelError::is_transient`]) must not be acknowledged; any other is
/// logged and the update acknowledged ([`crate::kit::settle`]).
pub(super) async fn handle(tg: &Tg, u: Update) -> Result<(), ChannelError> {
    if let Some(q) = u.callback_query {
        return presses::callback(tg, u.update_id, q).await;
    }
    if let Some(r) = u.message_reaction {
        return reaction(tg, u.update_id, r).await;
    }
    let Some(msg) = u.message else {
        debug!(
            channel = "telegram",
            update_id = u.update_id,
            "ignoring an update of another kind"
        );
        return Ok(());
    };
    let (Some(from), Some(text)) = (msg.from.clone(), msg.text.clone()) else {
        return Ok(());
    };
    if from.is_bot || text.trim().is_empty() {
        return Ok(());
    }
    let private = msg.chat.kind == "private";
    let text = if private {
        text
    } else {
        match addressed(tg, &msg, &text) {
            Some(t) => t,
            None => return Ok(()),
        }
    };
    let user = user_key(from.id);
    if private {
        let chat = msg.chat.id.to_string();
        if !tg
            .kit
            .admit_private(&user, &from.display_name(), &chat)
            .await?
        {
            return Ok(());
        }
    } else if !tg.config.open_groups && !tg.kit.access.is_allowed(&user).await? {
        // Strangers in groups are ignored, without a pairing message.
        return Ok(());
    }
    if let Some(cmd) = text.trim().strip_prefix('/') {
        return commands::command(tg, u.update_id, &msg, &user, cmd).await;
    }
    ingest(tg, u.update_id, msg.chat.id, &user, text).await
}

/// A change of someone's reactions: a 👍 or 👎 newly set on an answer by
/// the user who asked it rates the run. Removals, other emoji, anonymous
/// admins and other users' reactions change nothing.
async fn reaction(tg: &Tg, update_id: i64, r: MessageReactionUpdated) -> Result<(), ChannelError> {
    let Some(from) = r.user.as_ref().filter(|u| !u.is_bot) else {
        return Ok(());
    };
    let ratings: Vec<_> = r.added_emoji().filter_map(reactions::rating_of).collect();
    // 👍 and 👎 set at once (premium users may set several) say nothing.
    let [rating] = ratings[..] else {
        return Ok(());
    };
    let Some(run_id) = reactions::rated_run(
        &tg.runtime,
        tg.kit.store.as_ref(),
        "telegram",
        &r.chat.id.to_string(),
        &r.message_id.to_string(),
        &user_key(from.id),
    )
    .await?
    else {
        return Ok(());
    };
    // Seen only now, after the reads: a batch refused for a store error
    // comes again and is rated then.
    if !commands::first_time(tg, update_id).await? {
        return Ok(());
    }
    reactions::rate(&tg.runtime, "telegram", &run_id, rating).await
}

/// In a group: the text addressed to the bot (mention removed), or `None`
/// when the message is neither a mention nor a reply to the bot.
fn addressed(tg: &Telegram, msg: &Message, text: &str) -> Option<String> {
    let me = tg.kit.me.get()?;
    let replied = msg
        .reply_to_message
        .as_ref()
        .and_then(|r| r.from.as_ref())
        .is_some_and(|f| f.id == me.id);
    let mention = format!("@{}", me.username);
    let lower = text.to_lowercase();
    let mentioned = !me.username.is_empty() && lower.contains(&mention);
    if !mentioned && !replied && !is_command_for_me(&lower, &me.username) {
        return None;
    }
    Some(strip_mention(text, &mention))
}

fn is_command_for_me(lower: &str, username: &str) -> bool {
    lower.starts_with('/')
        && lower
            .split_whitespace()
            .next()
            .is_some_and(|c| c.ends_with(&format!("@{username}")))
}

/// Removes every `@username` (any case) and tidies the spaces left behind.
pub(super) fn strip_mention(text: &str, mention: &str) -> String {
    let lower = text.to_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(pos) = lower[i..].find(mention) {
        let start = i + pos;
        // Lower-casing can change byte lengths of other scripts: only cut
        // where both strings agree.
        if !text.is_char_boundary(start) || !text.is_char_boundary(start + mention.len()) {
            break;
        }
        out.push_str(&text[i..start]);
        i = start + mention.len();
    }
    out.push_str(&text[i..]);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Hands a message to the runtime (idempotent on the update id) and shows
/// progress while it runs.
pub(super) async fn ingest(
    tg: &Tg,
    update_id: i64,
    chat_id: i64,
    user: &str,
    text: String,
) -> Result<(), ChannelError> {
    let inbound = Inbound {
        source: "telegram".into(),
        // Made from platform ids: checked here, at the channel's edge.
        thread_key: ThreadKey::new(thread_key(chat_id))?,
        user_key: UserKey::new(user)?,
        text,
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: Some(format!("telegram:{update_id}")),
        scope: super::group_scope(chat_id),
        roles: Vec::new(),
    };
    let target = chat_id.to_string();
    let Some(run) = tg.kit.ingest(&tg.runtime, inbound, &target, None).await? else {
        return Ok(());
    };
    if let Ok(api) = &tg.kit.api {
        let sink = Arc::new(TelegramProgress { api: api.clone() });
        tg.kit.follow(&tg.runtime, &run, target, sink);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_removed_in_any_case() {
        assert_eq!(
            strip_mention("@HearthBot what time is it?", "@hearthbot"),
            "what time is it?"
        );
        assert_eq!(
            strip_mention("hey @hearthbot, hi", "@hearthbot"),
            "hey , hi"
        );
        assert_eq!(strip_mention("no mention", "@hearthbot"), "no mention");
        assert!(is_command_for_me("/model@hearthbot", "hearthbot"));
        assert!(!is_command_for_me("/model@otherbot", "hearthbot"));
    }

    fn reaction_update(old: Value, new: Value) -> Update {
        serde_json::from_value(json!({"update_id": 9, "message_reaction": {
            "chat": {"id": -100, "type": "supergroup", "title": "G"}, "message_id": 4,
            "user": {"id": 7, "is_bot": false, "first_name": "A"}, "date": 1,
            "old_reaction": old, "new_reaction": new,
        }}))
        .unwrap()
    }

    #[test]
    fn only_reactions_newly_set_are_read() {
        let emoji = |e: &str| json!({"type": "emoji", "emoji": e});
        let custom = json!({"type": "custom_emoji", "custom_emoji_id": "5"});
        let added = |old, new| {
            let u = reaction_update(old, new);
            assert_eq!(chat_of(&u), -100);
            let r = u.message_reaction.unwrap();
            r.added_emoji().map(str::to_owned).collect::<Vec<_>>()
        };
        assert_eq!(added(json!([]), json!([emoji("👍")])), ["👍"]);
        assert_eq!(
            added(json!([emoji("👍")]), json!([emoji("👍"), emoji("👎")])),
            ["👎"]
        );
        assert!(
            added(json!([emoji("👍")]), json!([])).is_empty(),
            "a removal"
        );
        assert!(added(json!([emoji("👍")]), json!([emoji("👍")])).is_empty());
        assert!(added(json!([]), json!([custom, {"type": "paid"}])).is_empty());
    }
}
