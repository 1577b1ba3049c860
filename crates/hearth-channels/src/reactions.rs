//! Reactions as feedback: a 👍 or 👎 that the asker puts on a run's answer
//! rates the run for the model router, as `POST /v1/runs/{id}/feedback`
//! does. The outbox senders record which platform messages carry an answer
//! ([`remember_answer`]); a platform's reaction event is traced back to its
//! run ([`rated_run`]) and rated ([`rate`]). Nobody is told: a reaction
//! that does not count is ignored without a message.

use hearth_core::records::outbox::{OutboxItem, OutboxKind, ReplyMessage};
use hearth_core::records::router::Rating;
use hearth_runtime::surfaces::OutboxStore;
use hearth_runtime::{Runtime, RuntimeError};
use tracing::{debug, info, warn};

use crate::error::ChannelError;
use crate::payload::Payload;

const THUMBS_UP: &str = "\u{1F44D}";
const THUMBS_DOWN: &str = "\u{1F44E}";

/// The rating a reaction emoji gives: 👍 up, 👎 down (in any skin tone,
/// with or without the emoji variation selector), none for the rest.
pub(crate) fn rating_of(emoji: &str) -> Option<Rating> {
    let base = emoji
        .trim_end_matches(|c: char| c == '\u{FE0F}' || ('\u{1F3FB}'..='\u{1F3FF}').contains(&c));
    match base {
        THUMBS_UP => Some(Rating::Up),
        THUMBS_DOWN => Some(Rating::Down),
        _ => None,
    }
}

/// Records that message `message_id`, just posted for `item`, carries its
/// run's answer. Only answers count: notices of failed or stopped runs are
/// kind `Message` too, but not rich, and a 👎 on "Sorry, I could not answer
/// that" would count the run's failure twice. Best effort: the message is
/// posted whatever happens here, so a failure is logged and only a later
/// reaction's rating is lost.
pub(crate) async fn remember_answer(
    store: &dyn OutboxStore,
    channel: &'static str,
    item: &OutboxItem,
    payload: &Payload,
    message_id: String,
) {
    let Some(run_id) = item
        .run_id
        .as_ref()
        .filter(|_| item.kind == OutboxKind::Message && payload.rich)
    else {
        return;
    };
    let reply = ReplyMessage {
        channel: channel.to_owned(),
        target: item.target.clone(),
        message_id,
        run_id: run_id.clone(),
        sent_at: hearth_core::now_ms(),
    };
    if let Err(e) = store.record_reply_message(reply).await {
        warn!(channel, run_id = %run_id, error = %e, "cannot record an answer's message; reactions to it will not rate the run");
    }
}

/// The run a reaction by `user_key` to message `message_id` in `target`
/// rates: the run whose answer the message carries, when that user asked
/// it. `None` for any other message, or another user's reaction.
pub(crate) async fn rated_run(
    runtime: &Runtime,
    store: &dyn OutboxStore,
    channel: &'static str,
    target: &str,
    message_id: &str,
    user_key: &str,
) -> Result<Option<String>, ChannelError> {
    let Some(run_id) = store.reply_message_run(channel, target, message_id).await? else {
        debug!(
            channel,
            "ignoring a reaction to a message that is not an answer"
        );
        return Ok(None);
    };
    let run = match runtime.get_run(&run_id).await {
        Ok(run) => run,
        // Deleted with its thread since: nothing left to rate.
        Err(RuntimeError::RunNotFound(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if run.user_key != user_key {
        debug!(channel, run_id = %run_id, "ignoring a reaction by someone other than the asker");
        return Ok(None);
    }
    Ok(Some(run_id))
}

/// Rates `run_id` as the API's feedback does (a later reaction replaces an
/// earlier one; pinned and incognito runs teach the router nothing).
pub(crate) async fn rate(
    runtime: &Runtime,
    channel: &'static str,
    run_id: &str,
    rating: Rating,
) -> Result<(), ChannelError> {
    match runtime.rate_run(run_id, rating).await {
        Ok(counted) => {
            info!(
                channel,
                run_id,
                rating = rating.as_str(),
                counted,
                "a reaction rated a run"
            );
            Ok(())
        }
        Err(RuntimeError::RunNotFound(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbs_rate_in_any_skin_tone_and_nothing_else_does() {
        assert_eq!(rating_of("👍"), Some(Rating::Up));
        assert_eq!(rating_of("👎"), Some(Rating::Down));
        assert_eq!(rating_of("👍🏽"), Some(Rating::Up));
        assert_eq!(rating_of("👎🏿"), Some(Rating::Down));
        assert_eq!(rating_of("\u{1F44D}\u{FE0F}"), Some(Rating::Up));
        assert_eq!(rating_of("❤"), None);
        assert_eq!(rating_of("🔥"), None);
        assert_eq!(rating_of(""), None);
        assert_eq!(rating_of("👍👎"), None);
        assert_eq!(rating_of("\u{1F3FB}"), None);
    }
}
