//! Who may change a conversation or stop its answer, the same rule on every
//! platform:
//!
//! - A private conversation (a DM) is its user's: they may do both.
//! - A shared one (a Telegram group, a Discord guild channel, a Slack
//!   channel thread) is changed (model, thinking, a new session) only by
//!   someone holding [`CONFIGURE`] in its scope (through a grant to them or
//!   a role of theirs, or as an admin); a refusal is audited.
//! - A run in a shared conversation is cancelled only by the user who asked
//!   it or an admin (of hearth, or by the platform's word of the scope, such
//!   as a Discord guild's owner or Administrator).

use hearth_runtime::{Answerer, Runtime};

use crate::error::ChannelError;

/// The capability that changes a shared conversation.
pub(crate) const CONFIGURE: &str = "llm.configure";

/// What someone refused a change is told.
pub(crate) const CHANGE_REFUSED: &str = "Changing this shared conversation (its model, thinking, permission mode or a new start) needs the llm.configure capability here; ask an admin to grant it.";

/// What someone refused a cancel is told.
pub(crate) const CANCEL_REFUSED: &str =
    "Only the person who asked, or an admin, can stop this answer.";

/// Where a command acts: a conversation, one user's or shared.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place<'a> {
    /// The conversation's thread key (the audit record's target).
    pub(crate) thread: &'a str,
    /// For a conversation many can write in, the permission scope it is
    /// checked in (`telegram:chat:<id>`, `discord:guild:<id>`,
    /// `slack:team:<id>`); `None` for a private one.
    pub(crate) shared_in: Option<&'a str>,
}

impl<'a> Place<'a> {
    /// The conversation of `thread`, shared in `scope` (private without).
    pub(crate) fn new(thread: &'a str, scope: Option<&'a str>) -> Self {
        Self {
            thread,
            shared_in: scope,
        }
    }
}

/// Whether `who` may change the conversation at `place`.
pub(crate) async fn may_change(
    runtime: &Runtime,
    who: Answerer<'_>,
    place: Place<'_>,
) -> Result<bool, ChannelError> {
    match place.shared_in {
        None => Ok(true),
        Some(scope) => Ok(runtime
            .authorize(who, CONFIGURE, scope, "thread.configure", place.thread)
            .await?),
    }
}

/// Whether `who` may cancel run `run_id` at `place`, which `asker` asked.
/// A refusal is audited.
pub(crate) async fn may_cancel(
    runtime: &Runtime,
    who: Answerer<'_>,
    place: Place<'_>,
    run_id: &str,
    asker: &str,
) -> bool {
    let Some(scope) = place.shared_in else {
        return true;
    };
    if who.user_key == asker || runtime.is_admin_in(who, scope) {
        return true;
    }
    runtime
        .audit_refusal(who, "run.cancel", run_id, None, scope)
        .await;
    false
}
