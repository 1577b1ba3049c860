//! Button presses: Approve/Deny of a confirmation (the asking user's
//! counts, and in a guild its owner's or an Administrator's: the runtime
//! checks it, in the run's scope; anyone else is told so privately) and
//! the pickers' choices (under the rule for shared conversations).
//!
//! A press acts first and is marked seen after: a replayed press has acted
//! already (its confirmation is no longer pending, the model is set to the
//! same value) and is not answered twice. Every press is answered, a
//! failed one too, so its button never spins into Discord's "interaction
//! failed".

use hearth_core::ThinkingLevel;
use serde_json::json;
use tracing::warn;

use super::interactions::{
    Acting, UPDATE_MESSAGE, first_sight, picker_message, private, refusal, respond,
};
use super::types::{Interaction, User};
use super::{Dc, thread_key};
use crate::commands::{self, Button, Confirmed, Pick, Picked};
use crate::error::ChannelError;

/// What a wrong presser of Approve/Deny is told.
const CONFIRM_REFUSED: &str = "Only the person who asked, a server admin or someone allowed to answer for others can answer this.";

/// What a press did, shown once.
enum Shown {
    /// Only the presser sees this.
    Private(String),
    /// The message pressed is replaced by this.
    Update(serde_json::Value),
}

pub(super) async fn button(dc: &Dc, i: &Interaction, actor: &User) -> Result<(), ChannelError> {
    let custom_id = i
        .data
        .as_ref()
        .and_then(|d| d.custom_id.as_deref())
        .unwrap_or("");
    let acting = Acting::of(dc, i, actor);
    // Not acted on and not marked on an error; the caller answers that it
    // failed.
    let shown = match Button::parse(custom_id) {
        Some(Button::Confirm { approve, token }) => {
            match commands::answer_confirmation(&dc.runtime, acting.who(), token, approve).await? {
                Confirmed::Settled { approved } => {
                    let word = Confirmed::word(approved);
                    settled(i, &format!("{word} by {}.", actor.display_name()))
                }
                Confirmed::Refused => Shown::Private(CONFIRM_REFUSED.to_owned()),
                Confirmed::Gone => settled(i, "No longer pending."),
            }
        }
        Some(Button::Model { index, tag }) => {
            let model = commands::model_at(&dc.runtime, index, tag);
            pick(dc, i, &acting, Pick::Model(model)).await?
        }
        Some(Button::Thinking(level)) => {
            pick(dc, i, &acting, Pick::Thinking(ThinkingLevel::parse(level))).await?
        }
        Some(Button::Mode(mode)) => {
            let mode = hearth_core::PermissionMode::parse(mode);
            pick(dc, i, &acting, Pick::Mode(mode)).await?
        }
        None => Shown::Private("This button is no longer active.".to_owned()),
    };
    // Seen only now that it acted. Discord sends no press again, so a
    // failure to record it is logged and the press still answered.
    match first_sight(dc, i).await {
        Ok(true) => {}
        Ok(false) => return Ok(()),
        Err(e) => warn!(channel = "discord", error = %e, "could not record a button press"),
    }
    match shown {
        Shown::Private(text) => private(dc, i, &text).await,
        Shown::Update(data) => respond(dc, i, UPDATE_MESSAGE, data).await,
    }
    Ok(())
}

/// A prompt without its buttons, saying how it was answered.
fn settled(i: &Interaction, outcome: &str) -> Shown {
    let original = i
        .message
        .as_ref()
        .map(|m| m.content.as_str())
        .unwrap_or_default();
    let text: String = format!("{original}\n\n{outcome}")
        .chars()
        .take(super::deliver::MAX_CONTENT)
        .collect();
    Shown::Update(json!({ "content": text, "components": [], "allowed_mentions": { "parse": [] } }))
}

/// A picker's choice: acted on as [`commands::pick`] says, the picker
/// shown again as it stands.
async fn pick(
    dc: &Dc,
    i: &Interaction,
    acting: &Acting,
    choice: Pick,
) -> Result<Shown, ChannelError> {
    if let Some(why) = refusal(dc, i, &acting.user).await? {
        return Ok(Shown::Private(why.to_owned()));
    }
    let Some(channel) = i.channel_id.as_deref() else {
        return Ok(Shown::Private(
            "This button is no longer active.".to_owned(),
        ));
    };
    let thread = thread_key(channel);
    let picked = commands::pick(&dc.runtime, acting.who(), acting.place(&thread), choice).await?;
    Ok(match picked {
        Picked::Refused(why) => Shown::Private(why.to_owned()),
        // An update keeps the message's flags: it stays the presser's.
        Picked::Done { picker, .. } => Shown::Update(picker_message(&picker, false)),
    })
}
