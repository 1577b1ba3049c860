//! Button presses (`block_actions`): Approve/Deny of a confirmation, which
//! only the asking user may answer (the runtime checks; anyone else gets an
//! ephemeral notice), and the model and thinking pickers.
//!
//! A press acts first and is marked seen after: one whose act failed for a
//! failure that may pass is left unacknowledged, so when Slack sends it
//! again it acts then; a press seen before has acted already (acting again
//! changes nothing) and shows nothing twice. A failed press is told so
//! through its `response_url`.

use hearth_core::ThinkingLevel;
use hearth_runtime::Answerer;
use serde_json::{Value, json};
use tracing::warn;

use super::commands::{
    MODE_ACTION, MODEL_ACTION, THINKING_ACTION, dm_thread, may_use, picker_thread, place, respond,
    scope, with_buttons,
};
use super::deliver::{APPROVE, DENY, blocks};
use super::types::Interaction;
use super::{Sl, user_key};
use crate::commands::{self, CONFIRM_REFUSED, Confirmed, Pick, Picked};
use crate::error::ChannelError;

/// What a press did, shown once.
enum Shown {
    /// Nothing to show.
    Nothing,
    /// A reply through the press's `response_url`.
    Respond(String, Value),
    /// A Web API call (an ephemeral notice, the prompt updated).
    Call(&'static str, Value),
}

fn ephemeral(text: &str) -> Value {
    json!({ "response_type": "ephemeral", "replace_original": false, "text": text })
}

/// Handles one interaction payload. Errors that may pass must not be
/// acknowledged; the answers to the user are sent in the background.
pub(super) async fn handle(slack: &Sl, body: Value) -> Result<(), ChannelError> {
    let ix: Interaction = match serde_json::from_value(body) {
        Ok(ix) => ix,
        Err(e) => {
            warn!(channel = "slack", error = %e, "skipping a malformed interaction");
            return Ok(());
        }
    };
    if ix.kind != "block_actions" || ix.actions.is_empty() {
        return Ok(());
    }
    let shown = match act(slack, &ix).await {
        Ok(shown) => shown,
        Err(e) => {
            if let Some(url) = ix.response_url.clone() {
                let text = "That did not go through; if nothing changes, press again.";
                respond(slack, url, ephemeral(text));
            }
            return Err(e);
        }
    };
    // Seen only now that it acted (see the module's doc).
    if let Some(trigger) = &ix.trigger_id
        && !slack.kit.first_sight(&format!("action:{trigger}")).await?
    {
        return Ok(());
    }
    match shown {
        Shown::Nothing => {}
        Shown::Respond(url, body) => respond(slack, url, body),
        Shown::Call(method, body) => call_later(slack, method, body),
    }
    Ok(())
}

/// Does what the press asks; what to show for it.
async fn act(slack: &Sl, ix: &Interaction) -> Result<Shown, ChannelError> {
    let Some(action) = ix.actions.first() else {
        return Ok(Shown::Nothing);
    };
    let value = action.value.clone().unwrap_or_default();
    let channel = ix
        .channel
        .as_ref()
        .map(|c| c.id.clone())
        .unwrap_or_default();
    let id = action.action_id.as_str();
    if id == APPROVE || id == DENY {
        return confirm(slack, ix, &channel, &value, id == APPROVE).await;
    }
    let Some(url) = ix.response_url.clone() else {
        return Ok(Shown::Nothing);
    };
    if !may_use(slack, &ix.user.id).await? {
        let text = "You cannot change this assistant's settings.";
        return Ok(Shown::Respond(url, ephemeral(text)));
    }
    let thread = match action.block_id.as_deref() {
        Some(block) if !channel.starts_with('D') => picker_thread(&channel, block),
        _ => dm_thread(&channel),
    };
    let Some(thread) = thread else {
        return Ok(Shown::Nothing);
    };
    let choice = if id.starts_with(MODEL_ACTION) {
        Pick::Model(Some(value))
    } else if id.starts_with(THINKING_ACTION) {
        Pick::Thinking(ThinkingLevel::parse(&value))
    } else if id.starts_with(MODE_ACTION) {
        Pick::Mode(hearth_core::PermissionMode::parse(&value))
    } else {
        let text = "This button is no longer active.";
        return Ok(Shown::Respond(url, ephemeral(text)));
    };
    let (user, scope) = (user_key(&ix.user.id), scope(slack));
    let who = Answerer::user(&user);
    Ok(
        match commands::pick(&slack.runtime, who, place(&thread, &scope), choice).await? {
            Picked::Refused(why) => Shown::Respond(url, ephemeral(why)),
            Picked::Done { picker, .. } => Shown::Respond(url, with_buttons(&thread, &picker)),
        },
    )
}

async fn confirm(
    slack: &Sl,
    ix: &Interaction,
    channel: &str,
    token: &str,
    approve: bool,
) -> Result<Shown, ChannelError> {
    let presser = &ix.user.id;
    let user = user_key(presser);
    let outcome =
        match commands::answer_confirmation(&slack.runtime, Answerer::user(&user), token, approve)
            .await?
        {
            Confirmed::Settled { approved } => {
                format!("*{}* by <@{presser}>.", Confirmed::word(approved))
            }
            Confirmed::Refused => {
                let mut body =
                    json!({ "channel": channel, "user": presser, "text": CONFIRM_REFUSED });
                if let Some(ts) = ix.message.as_ref().and_then(|m| m.thread_ts.clone()) {
                    body["thread_ts"] = json!(ts);
                }
                return Ok(Shown::Call("chat.postEphemeral", body));
            }
            Confirmed::Gone => "No longer pending.".to_owned(),
        };
    // The prompt loses its buttons and says how it was answered.
    let Some(msg) = &ix.message else {
        return Ok(Shown::Nothing);
    };
    let text = format!("{}\n\n{outcome}", msg.text.clone().unwrap_or_default());
    let text: String = text.chars().take(super::mrkdwn::MAX_SECTION).collect();
    let body =
        json!({ "channel": channel, "ts": msg.ts, "text": text, "blocks": blocks(&text, None) });
    Ok(Shown::Call("chat.update", body))
}

/// Calls `method` in the background (answers to a press are best effort).
fn call_later(slack: &Sl, method: &'static str, body: Value) {
    let slack = slack.clone();
    tokio::spawn(async move {
        let Ok(api) = &slack.kit.api else { return };
        if let Err(e) = api.call::<Value>(method, &body).await {
            warn!(channel = "slack", method, error = %e, "could not answer a button press");
        }
    });
}
