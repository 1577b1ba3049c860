//! Other bots of a server: whether an app's bot is a member (asked of
//! Discord, remembered a few minutes), and mentions that trigger an app's
//! command without a model call (see `hearth_runtime::apps`).

use std::time::{Duration, Instant};

use reqwest::Method;
use tracing::warn;

use super::api::ApiError;
use super::{Dc, Discord, is_snowflake, thread_key, user_key};
use crate::error::ChannelError;

/// How long a member lookup is trusted.
const MEMBER_TTL: Duration = Duration::from_secs(300);

impl Discord {
    /// Whether `user_id` is a member of `guild_id`: `GET
    /// /guilds/{guild}/members/{user}` (200, or 404 Unknown Member).
    pub(super) async fn member(&self, guild_id: &str, user_id: &str) -> Result<bool, ChannelError> {
        if !is_snowflake(guild_id) || !is_snowflake(user_id) {
            return Ok(false);
        }
        let key = (guild_id.to_owned(), user_id.to_owned());
        if let Some((present, at)) = self
            .members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            && at.elapsed() < MEMBER_TTL
        {
            return Ok(*present);
        }
        let api = self.kit.api_or_why()?;
        let path = format!("/guilds/{guild_id}/members/{user_id}");
        let present = match api
            .call::<serde_json::Value>(Method::GET, &path, "guilds/members", None)
            .await
        {
            Ok(_) => true,
            Err(ApiError::Refused { status: 404, .. }) => false,
            Err(e) => {
                return Err(ChannelError::Platform {
                    channel: "discord",
                    method: "GET /guilds/{guild}/members/{user}".into(),
                    detail: e.to_string(),
                });
            }
        };
        let mut map = self
            .members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.retain(|_, (_, at)| at.elapsed() < MEMBER_TTL);
        map.insert(key, (present, Instant::now()));
        Ok(present)
    }
}

/// A guild mention whose text starts with an enabled app's prefix: sent
/// or dry-run by the runtime without a model call. True when it was (the
/// message needs nothing more); false when the text goes to the model.
pub(super) async fn trigger(
    dc: &Dc,
    guild_id: &str,
    channel_id: &str,
    author_id: &str,
    message_id: &str,
    text: &str,
) -> bool {
    let req = hearth_runtime::apps::TriggerRequest {
        guild_id: guild_id.to_owned(),
        thread_key: thread_key(channel_id),
        user_key: user_key(author_id),
        text: text.to_owned(),
        event_id: message_id.to_owned(),
    };
    match dc.runtime.app_trigger(req).await {
        Ok(found) => found.is_some(),
        Err(e) => {
            // The mention still gets an answer from the model.
            warn!(channel = "discord", error = %e, "an app trigger could not be handled");
            false
        }
    }
}
