//! Approve/Deny presses: the asking user's counts, and in a guild its
//! owner's or an Administrator's (the runtime checks it, in the run's
//! scope); anyone else is told so privately.
//!
//! A press acts first and is marked seen after: a replayed press has acted
//! already (its confirmation is no longer pending) and is not answered
//! twice. Every press is answered, a failed one too, so its button never
//! spins into Discord's "interaction failed".

use hearth_runtime::{Answerer, RuntimeError};
use serde_json::json;
use tracing::warn;

use super::interactions::{UPDATE_MESSAGE, first_sight, is_guild_admin, private, respond};
use super::types::{Interaction, User};
use super::{Dc, inbound, user_key};
use crate::error::ChannelError;

pub(super) async fn button(dc: &Dc, i: &Interaction, actor: &User) -> Result<(), ChannelError> {
    let custom_id = i
        .data
        .as_ref()
        .and_then(|d| d.custom_id.as_deref())
        .unwrap_or("");
    let mut parts = custom_id.splitn(3, ':');
    let (Some("cf"), Some(verb @ ("a" | "d")), Some(token)) =
        (parts.next(), parts.next(), parts.next())
    else {
        if first_sight(dc, i).await? {
            private(dc, i, "This button is no longer active.").await;
        }
        return Ok(());
    };
    let approve = verb == "a";
    let presser = user_key(&actor.id);
    let context = inbound::PermissionContext::of(i.guild_id.as_deref(), i.member.as_ref());
    // The guild owner and Administrators answer for anyone in their guild.
    let admin_of = context
        .scope
        .as_deref()
        .filter(|_| is_guild_admin(dc, i, actor));
    let who = Answerer {
        user_key: &presser,
        roles: &context.roles,
        admin_of,
    };
    let outcome = match dc
        .runtime
        .resolve_confirmation_by(token, who, approve)
        .await
    {
        Ok(_) => Some(format!(
            "{} by {}.",
            if approve { "Approved" } else { "Denied" },
            actor.display_name()
        )),
        Err(RuntimeError::Forbidden(_)) => None,
        Err(RuntimeError::ConfirmationNotFound) => Some("No longer pending.".to_owned()),
        // Not acted on, not marked; the caller answers that it failed.
        Err(e) => return Err(e.into()),
    };
    // Seen only now that it acted. Discord sends no press again, so a
    // failure to record it is logged and the press still answered.
    match first_sight(dc, i).await {
        Ok(true) => {}
        Ok(false) => return Ok(()),
        Err(e) => warn!(channel = "discord", error = %e, "could not record a button press"),
    }
    match outcome {
        Some(outcome) => {
            let original = i
                .message
                .as_ref()
                .map(|m| m.content.as_str())
                .unwrap_or_default();
            let text: String = format!("{original}\n\n{outcome}")
                .chars()
                .take(super::deliver::MAX_CONTENT)
                .collect();
            let data =
                json!({ "content": text, "components": [], "allowed_mentions": { "parse": [] } });
            respond(dc, i, UPDATE_MESSAGE, data).await;
        }
        None => {
            private(
                dc,
                i,
                "Only the person who asked, a server admin or someone allowed to answer for others can answer this.",
            )
            .await;
        }
    }
    Ok(())
}
