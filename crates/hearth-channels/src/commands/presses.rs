//! Button presses: a picker's choice and a confirmation's Approve or Deny,
//! acted on once for every platform. Telegram's callback data and
//! Discord's custom ids carry the same [`Button`] text; Slack's buttons
//! carry the same meaning in their action id and value.

use hearth_core::{PermissionMode, ThinkingLevel, ThreadKey};
use hearth_runtime::{Answerer, Runtime, RuntimeError};

use super::{
    CHOOSE_MODE, CHOOSE_MODEL, Picker, mode_picker, model_ids, model_picker, thinking_picker,
};
use crate::control::{self, Place};
use crate::error::ChannelError;

/// What a wrong presser of Approve/Deny is told (Discord adds its server
/// admins).
#[cfg(any(feature = "telegram", feature = "slack"))]
pub(crate) const CONFIRM_REFUSED: &str =
    "Only the person who asked, or someone allowed to answer for others, can answer this.";

/// What a button says it does: `cf:<a|d>:<token>` (a confirmation),
/// `m:<index>:<tag>` (a model picker's choice: its position in the list
/// and a tag of the id, so a stale button whose position now holds another
/// model is recognised), `t:<level>` (a thinking level). Within Telegram's
/// 64 bytes of callback data for any token hearth makes.
#[cfg(any(feature = "telegram", feature = "discord"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Button<'a> {
    /// Approve (or deny) the confirmation with this token.
    Confirm {
        /// True for Approve.
        approve: bool,
        /// The confirmation's token.
        token: &'a str,
    },
    /// The model at `index` in the list, whose id has `tag`.
    Model {
        /// Its position in the list when the picker was shown.
        index: usize,
        /// [`tag`] of its id.
        tag: &'a str,
    },
    /// This thinking level.
    Thinking(&'a str),
    /// This permission mode.
    Mode(&'a str),
}

#[cfg(any(feature = "telegram", feature = "discord"))]
impl<'a> Button<'a> {
    /// Reads a button's data; `None` for one hearth did not make.
    pub(crate) fn parse(data: &'a str) -> Option<Self> {
        let mut parts = data.splitn(3, ':');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("cf"), Some(verb @ ("a" | "d")), Some(token)) => Some(Self::Confirm {
                approve: verb == "a",
                token,
            }),
            (Some("m"), Some(index), Some(tag)) => Some(Self::Model {
                index: index.parse().ok()?,
                tag,
            }),
            (Some("t"), Some(level), None) => Some(Self::Thinking(level)),
            (Some("md"), Some(mode), None) => Some(Self::Mode(mode)),
            _ => None,
        }
    }

    /// The data of a confirmation's Approve (or Deny) button.
    pub(crate) fn confirm(approve: bool, token: &str) -> String {
        format!("cf:{}:{token}", if approve { "a" } else { "d" })
    }

    /// The data of the button of `choice`, at `index` of `picker`.
    pub(crate) fn choice(picker: &Picker, index: usize, choice: &str) -> String {
        match picker.kind {
            super::PickerKind::Model => format!("m:{index}:{}", tag(choice)),
            super::PickerKind::Thinking => format!("t:{choice}"),
            super::PickerKind::Mode => format!("md:{choice}"),
        }
    }
}

/// A short, stable tag of a model id: a stale button whose list position
/// now holds another model is recognised.
#[cfg(any(feature = "telegram", feature = "discord"))]
pub(crate) fn tag(model: &str) -> String {
    // FNV-1a: not for security, only to tell two ids apart.
    let mut h: u32 = 0x811c_9dc5;
    for b in model.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// The model a model button chooses now: the one at `index` if it is still
/// the one the button was made for.
#[cfg(any(feature = "telegram", feature = "discord"))]
pub(crate) fn model_at(runtime: &Runtime, index: usize, with_tag: &str) -> Option<String> {
    model_ids(runtime)
        .into_iter()
        .nth(index)
        .filter(|m| tag(m) == with_tag)
}

/// A picker's choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pick {
    /// This model; `None` for a button whose model is no longer offered.
    Model(Option<String>),
    /// This level; `None` for one that is not a level.
    Thinking(Option<ThinkingLevel>),
    /// This permission mode; `None` for one that is not a mode.
    Mode(Option<PermissionMode>),
}

/// What a choice came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Picked {
    /// The presser may not change this conversation: what they are told.
    Refused(&'static str),
    /// Done (or the choice was stale): a word for the presser, and the
    /// picker as it stands now, to show in place of the pressed one.
    Done {
        /// "Model: …", or "The list changed; pick again."
        toast: String,
        /// The picker to show again.
        picker: Picker,
    },
}

/// Acts on `pick` by `who` in the conversation at `place`, under the rule
/// of [`control`] (a stale choice is refused the same: the presser may
/// not change anything there).
pub(crate) async fn pick(
    runtime: &Runtime,
    who: Answerer<'_>,
    place: Place<'_>,
    pick: Pick,
) -> Result<Picked, ChannelError> {
    if !control::may_change(runtime, who, place).await? {
        return Ok(Picked::Refused(control::CHANGE_REFUSED));
    }
    let thread = ThreadKey::new(place.thread)?;
    Ok(match pick {
        Pick::Model(Some(model)) if model_ids(runtime).contains(&model) => {
            runtime.set_model(&thread, &model).await?;
            Picked::Done {
                toast: format!("Model: {model}"),
                picker: model_picker(runtime, &thread, CHOOSE_MODEL).await?,
            }
        }
        Pick::Model(_) => Picked::Done {
            toast: "The list changed; pick again.".to_owned(),
            picker: model_picker(runtime, &thread, "The list changed; choose again:").await?,
        },
        Pick::Thinking(Some(level)) => {
            runtime.set_thinking(&thread, level).await?;
            Picked::Done {
                toast: format!("Thinking: {}", level.as_str()),
                picker: thinking_picker(runtime, &thread).await?,
            }
        }
        Pick::Thinking(None) => Picked::Done {
            toast: "That choice is gone; pick again.".to_owned(),
            picker: thinking_picker(runtime, &thread).await?,
        },
        Pick::Mode(Some(mode)) => {
            let toast = match super::set_mode(runtime, who, place, mode).await? {
                Ok(words) | Err(words) => words,
            };
            // The outcome heads the picker too: a platform that shows no
            // toast (Slack) still tells why bypass was refused.
            let picker = mode_picker(runtime, &thread, toast.clone()).await?;
            Picked::Done { toast, picker }
        }
        Pick::Mode(None) => Picked::Done {
            toast: "That choice is gone; pick again.".to_owned(),
            picker: mode_picker(runtime, &thread, CHOOSE_MODE).await?,
        },
    })
}

/// What pressing Approve or Deny came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Confirmed {
    /// Answered: approved, or denied.
    Settled {
        /// True when approved.
        approved: bool,
    },
    /// The presser may not answer it; it stays pending.
    Refused,
    /// It no longer waits for an answer (answered, expired, its run ended).
    Gone,
}

impl Confirmed {
    /// "Approved" or "Denied" for a settled one.
    pub(crate) fn word(approved: bool) -> &'static str {
        if approved { "Approved" } else { "Denied" }
    }
}

/// Answers confirmation `token` for `who`: only the asker, a holder of
/// `confirmations.resolve_any` or an admin of the run's scope may (the
/// runtime checks). An error is one that may pass (the store) or another
/// refusal of the runtime's; the press did nothing then.
pub(crate) async fn answer_confirmation(
    runtime: &Runtime,
    who: Answerer<'_>,
    token: &str,
    approve: bool,
) -> Result<Confirmed, ChannelError> {
    match runtime.resolve_confirmation_by(token, who, approve).await {
        Ok(_) => Ok(Confirmed::Settled { approved: approve }),
        Err(RuntimeError::Forbidden(_)) => Ok(Confirmed::Refused),
        Err(RuntimeError::ConfirmationNotFound) => Ok(Confirmed::Gone),
        Err(e) => Err(e.into()),
    }
}

#[cfg(all(test, any(feature = "telegram", feature = "discord")))]
mod tests {
    use super::*;
    use crate::commands::PickerKind;

    #[test]
    fn button_data_round_trips_and_fits_telegrams_64_bytes() {
        let token = "A".repeat(32);
        let data = Button::confirm(true, &token);
        assert!(data.len() <= 64);
        assert_eq!(
            Button::parse(&data),
            Some(Button::Confirm {
                approve: true,
                token: &token
            })
        );
        assert_eq!(Button::confirm(false, "T"), "cf:d:T");
        let long = "openrouter/".to_owned() + &"x".repeat(200);
        let picker = Picker {
            kind: PickerKind::Model,
            heading: String::new(),
            current: String::new(),
            choices: vec![long.clone()],
        };
        let data = Button::choice(&picker, 89, &long);
        assert!(data.len() <= 64, "{data}");
        let t = tag(&long);
        assert_eq!(
            Button::parse(&data),
            Some(Button::Model { index: 89, tag: &t })
        );
        assert_ne!(tag("openai/gpt-4o"), tag("openai/gpt-4o-mini"));
        assert_eq!(Button::parse("t:high"), Some(Button::Thinking("high")));
        assert_eq!(
            Button::parse("md:accept_edits"),
            Some(Button::Mode("accept_edits"))
        );
        for bad in ["m:x:1", "cf:x:t", "t:a:b", "", "zz"] {
            assert_eq!(Button::parse(bad), None, "{bad}");
        }
    }
}
