//! Messages: who is answered (DMs by access rules, guild messages only
//! when they mention the bot, never bots) and what the runtime sees (the
//! bot's mention removed); reactions to answers, as ratings.

use std::sync::Arc;

use hearth_core::{DeliveryMode, Inbound, ThreadKey, UserKey};
use tracing::warn;

use super::deliver::DiscordProgress;
use super::types::{Member, Message, ReactionAdd};
use super::{Dc, guild_scope, is_snowflake, thread_key, user_key};
use crate::error::ChannelError;
use crate::reactions;

/// Handles a `MESSAGE_CREATE`. Errors are the store's or the runtime's;
/// only those that may pass count as a channel failure.
pub(super) async fn message(dc: &Dc, m: Message) -> Result<(), ChannelError> {
    let Some(me) = dc.kit.me.get() else {
        // Before READY there is no bot id to tell mentions by.
        return Ok(());
    };
    if m.author.bot && m.guild_id.is_some() && m.author.id != me.user_id {
        // Another bot's answer to an app command a run waits for (its
        // manifest says `reply: "read"`); never a conversation of its own.
        dc.runtime
            .app_bot_message(&m.channel_id, &m.author.id, &m.content);
        return Ok(());
    }
    if m.author.bot || m.webhook_id.is_some() || m.author.id == me.user_id {
        return Ok(());
    }
    if !is_snowflake(&m.channel_id) || !is_snowflake(&m.id) || !is_snowflake(&m.author.id) {
        warn!(channel = "discord", "skipping a message with malformed ids");
        return Ok(());
    }
    let user = user_key(&m.author.id);
    let text = match &m.guild_id {
        None => m.content.trim().to_owned(),
        Some(guild) => {
            let mentioned = m.mentions.iter().any(|u| u.id == me.user_id)
                || m.content.contains(&format!("<@{}>", me.user_id))
                || m.content.contains(&format!("<@!{}>", me.user_id));
            if !mentioned || !dc.guild_allowed(guild) {
                return Ok(());
            }
            strip_mention(&m.content, &me.user_id)
        }
    };
    if text.is_empty() {
        return Ok(());
    }
    // Another bot's command, by its declared prefix: no model call.
    if let Some(guild) = &m.guild_id
        && super::apps::trigger(dc, guild, &m.channel_id, &m.author.id, &m.id, &text).await
    {
        return Ok(());
    }
    if m.guild_id.is_none()
        && !dc
            .kit
            .admit_private(&user, &m.author.display_name(), &m.channel_id)
            .await?
    {
        return Ok(());
    }
    let received = hearth_core::now_ms();
    let asked = Asked {
        key: format!("discord:{}", m.id),
        channel_id: m.channel_id.clone(),
        user,
        context: PermissionContext::of(m.guild_id.as_deref(), m.member.as_ref()),
    };
    let run = ingest(dc, asked, text, true).await?;
    let footer = m.guild_id.as_deref().is_some_and(|g| {
        dc.config
            .latency_footer_guilds
            .iter()
            .any(|f| f.to_string() == g)
    });
    if let Some(run_id) = run.filter(|_| footer) {
        dc.time_reply(&run_id, received);
    }
    Ok(())
}

/// Handles a `MESSAGE_REACTION_ADD`: a 👍 or 👎 on an answer by the user
/// who asked it rates the run. The bot's own reactions, custom emoji and
/// other users' reactions change nothing; a removal is not an event here.
pub(super) async fn reaction(dc: &Dc, r: ReactionAdd) -> Result<(), ChannelError> {
    let Some(me) = dc.kit.me.get() else {
        return Ok(());
    };
    let bot = r
        .member
        .as_ref()
        .and_then(|m| m.user.as_ref())
        .is_some_and(|u| u.bot);
    if r.user_id == me.user_id || bot || r.emoji.id.is_some() {
        return Ok(());
    }
    let Some(rating) = r.emoji.name.as_deref().and_then(reactions::rating_of) else {
        return Ok(());
    };
    let Some(run_id) = reactions::rated_run(
        &dc.runtime,
        dc.kit.store.as_ref(),
        "discord",
        &r.channel_id,
        &r.message_id,
        &user_key(&r.user_id),
    )
    .await?
    else {
        return Ok(());
    };
    reactions::rate(&dc.runtime, "discord", &run_id, rating).await
}

/// Removes the bot's mention (`<@id>` and the older `<@!id>`).
pub(super) fn strip_mention(text: &str, bot_id: &str) -> String {
    text.replace(&format!("<@!{bot_id}>"), "")
        .replace(&format!("<@{bot_id}>"), "")
        .trim()
        .to_owned()
}

/// Where and by whom a message or `/ask` was sent.
pub(super) struct Asked {
    /// The idempotency key (`discord:<message or interaction id>`).
    pub(super) key: String,
    /// The channel (its thread).
    pub(super) channel_id: String,
    /// The sender's user key.
    pub(super) user: String,
    /// The guild's scope and the member's roles.
    pub(super) context: PermissionContext,
}

/// The permission context of a run asked in Discord: in a guild, its scope
/// `discord:guild:<id>` and the member's role ids (which come with every
/// event), so grants made there with `/permissions` apply; none in a DM.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct PermissionContext {
    pub(super) scope: Option<String>,
    pub(super) roles: Vec<String>,
}

impl PermissionContext {
    /// The context of an event in `guild` (none for a DM) from `member`.
    /// Ids that are not snowflakes are dropped, so a malformed role cannot
    /// refuse the whole message.
    pub(super) fn of(guild: Option<&str>, member: Option<&Member>) -> Self {
        let Some(guild) = guild.filter(|g| is_snowflake(g)) else {
            return Self::default();
        };
        let roles = member
            .map(|m| {
                m.roles
                    .iter()
                    .filter(|r| is_snowflake(r))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        Self {
            scope: Some(guild_scope(guild)),
            roles,
        }
    }
}

/// Hands a message to the runtime (idempotent on its key), showing progress
/// in the channel when `follow`; the run's id, or `None` when the runtime
/// refused the text (the user is told).
pub(super) async fn ingest(
    dc: &Dc,
    asked: Asked,
    text: String,
    follow: bool,
) -> Result<Option<String>, ChannelError> {
    let Asked {
        key,
        channel_id,
        user,
        context,
    } = asked;
    let channel_id = channel_id.as_str();
    let inbound = Inbound {
        source: "discord".into(),
        // Made from platform ids: checked here, at the channel's edge.
        thread_key: ThreadKey::new(thread_key(channel_id))?,
        user_key: UserKey::new(user)?,
        text,
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: Some(key),
        scope: context.scope,
        roles: context.roles,
    };
    let Some(run) = dc
        .kit
        .ingest(&dc.runtime, inbound, channel_id, None)
        .await?
    else {
        return Ok(None);
    };
    if follow && let Ok(api) = &dc.kit.api {
        let sink = Arc::new(DiscordProgress { api: api.clone() });
        dc.kit
            .follow(&dc.runtime, &run, channel_id.to_owned(), sink);
    }
    Ok(Some(run.run_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guild_event_carries_the_guild_scope_and_the_members_roles() {
        let member = Member {
            roles: vec!["111".into(), "not a role".into(), "222".into()],
            ..Member::default()
        };
        assert_eq!(
            PermissionContext::of(Some("9"), Some(&member)),
            PermissionContext {
                scope: Some("discord:guild:9".into()),
                roles: vec!["111".into(), "222".into()],
            }
        );
        assert_eq!(
            PermissionContext::of(Some("9"), None).scope.as_deref(),
            Some("discord:guild:9")
        );
        assert_eq!(
            PermissionContext::of(None, Some(&member)),
            PermissionContext::default()
        );
        assert_eq!(
            PermissionContext::of(Some("9/.."), Some(&member)),
            PermissionContext::default()
        );
    }

    #[test]
    fn both_mention_forms_are_removed_and_newlines_kept() {
        assert_eq!(
            strip_mention("<@42> what time is it?", "42"),
            "what time is it?"
        );
        assert_eq!(
            strip_mention("hi <@!42>\n```\ncode\n```", "42"),
            "hi \n```\ncode\n```"
        );
        assert_eq!(strip_mention("<@421> hi", "42"), "<@421> hi");
    }
}
