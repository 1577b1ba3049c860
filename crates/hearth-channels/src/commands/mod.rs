//! The commands every platform has (`new`, `model`, `thinking`, `usage`,
//! `cancel` and `help`: Telegram's `/new`, Discord's `/new` and `/agent
//! cancel`, Slack's `/hearth new`) and the picker and confirmation buttons
//! they lead to, implemented once: parsing the arguments, the rule of
//! [`crate::control`] for shared conversations, calling the runtime, and a
//! platform-neutral [`Reply`] (words, or a [`Picker`] of choices). Each
//! platform only renders it: Telegram as chat messages with inline
//! keyboards, Discord as interaction responses with buttons, Slack as
//! ephemeral Block Kit messages.
//!
//! Where the platforms once differed in what a command did, the one kept
//! is: a command's argument is used on every platform (`model <id>` and
//! `thinking <level>` set at once, with the rule for shared conversations;
//! an unknown model or level, or none, shows the picker), and a cancelled
//! run's own "Stopped." is what the conversation reads (a platform whose
//! answer to a command is a chat message adds nothing to it).

mod presses;

use hearth_core::mode::RUN_PLAN_PREFIX;
use hearth_core::records::RunFilter;
use hearth_core::{PermissionMode, RunStatus, ThinkingLevel, ThreadKey, now_ms};
use hearth_runtime::{Answerer, ModeSetter, Runtime, RuntimeError};
use tracing::info;

use crate::control::{self, Place};
use crate::error::ChannelError;

#[cfg(any(feature = "telegram", feature = "slack"))]
pub(crate) use presses::CONFIRM_REFUSED;
#[cfg(any(feature = "telegram", feature = "discord"))]
pub(crate) use presses::{Button, model_at};
pub(crate) use presses::{Confirmed, Pick, Picked, answer_confirmation, pick};

/// A command every platform has.
#[derive(Debug)]
pub(crate) struct Spec {
    /// Its name.
    pub(crate) name: &'static str,
    /// Its arguments as help shows them (`[id]`), empty for none.
    pub(crate) args: &'static str,
    /// What it does ("Choose the model"), in menus and help.
    pub(crate) summary: &'static str,
}

/// The commands, in the order menus and help list them.
pub(crate) const SPECS: [Spec; 8] = [
    Spec {
        name: "new",
        args: "",
        summary: "Start a new conversation",
    },
    Spec {
        name: "model",
        args: "[id]",
        summary: "Choose the model",
    },
    Spec {
        name: "thinking",
        args: "[off|low|medium|high]",
        summary: "Choose how hard the model thinks",
    },
    Spec {
        name: "mode",
        args: "[deny|plan|ask|accept_edits|auto|bypass]",
        summary: "Choose what runs without asking",
    },
    Spec {
        name: "runplan",
        args: "[mode]",
        summary: "Carry out the last plan (switches to the mode, default ask)",
    },
    Spec {
        name: "usage",
        args: "",
        summary: "Today's model usage and cost",
    },
    Spec {
        name: "cancel",
        args: "",
        summary: "Stop the answer being worked on",
    },
    Spec {
        name: "help",
        args: "",
        summary: "What this bot does",
    },
];

/// The help's list of commands, one a line, each as `typed` shows how it
/// is typed on the platform (`/new`, `` `/hearth model [id]` ``).
pub(crate) fn help_lines(typed: impl Fn(&Spec) -> String) -> String {
    SPECS
        .iter()
        .filter(|s| s.name != "help")
        .map(|s| format!("{}: {}", typed(s), s.summary))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A command, with its argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// What the bot does.
    Help,
    /// Today's usage and cost.
    Usage,
    /// One that acts on the conversation it is given in.
    On(Change),
}

/// A command that acts on a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// A new session.
    New,
    /// Set the model (to this id), or show the picker.
    Model(Option<String>),
    /// Set the thinking level (to this one), or show the picker.
    Thinking(Option<String>),
    /// Set the permission mode (to this one), or show the picker.
    Mode(Option<String>),
    /// Approve the last answer as the plan: switch to this mode (`ask`
    /// without) and send the plan back as the next message.
    RunPlan(Option<String>),
    /// Stop the answer being worked on.
    Cancel,
}

impl Command {
    /// The command `name` (lower case; `start`, Telegram's first message,
    /// is help) with the words after it; `None` for another name.
    pub(crate) fn parse(name: &str, args: &[&str]) -> Option<Self> {
        let arg = args.first().map(|a| (*a).to_owned());
        Some(match name {
            "help" | "start" => Self::Help,
            "usage" => Self::Usage,
            "new" => Self::On(Change::New),
            "model" => Self::On(Change::Model(arg)),
            "thinking" => Self::On(Change::Thinking(arg)),
            "mode" => Self::On(Change::Mode(arg)),
            "runplan" => Self::On(Change::RunPlan(arg)),
            "cancel" => Self::On(Change::Cancel),
            _ => return None,
        })
    }
}

/// Who gives a command, and where.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    /// The runtime it acts on.
    pub(crate) runtime: &'a Runtime,
    /// Who gives it (their roles and the scope they administer, where the
    /// platform says).
    pub(crate) who: Answerer<'a>,
    /// The conversation it acts on; `None` where there is none to act on
    /// (only commands that need none are then given).
    pub(crate) place: Option<Place<'a>>,
}

/// What a command comes to, for the platform to render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// The list of commands (each platform words how they are typed).
    Help,
    /// Words for the one who gave the command (a platform that can shows
    /// them to them alone).
    Private(String),
    /// Words for the whole conversation: it changed for everyone.
    Public(String),
    /// The answer being worked on was stopped. The run's own "Stopped."
    /// follows in the conversation, so a platform whose reply to a command
    /// is a chat message adds nothing; one that must answer the command
    /// (an interaction) says this.
    Stopped(&'static str),
    /// A choice to make.
    Picker(Picker),
}

/// Said when a command that acts on a conversation is given where there
/// is none (the platform finds one before; this is a last resort).
const NO_CONVERSATION: &str = "This command acts on a conversation; give it in one.";

/// What the model picker asks.
pub(crate) const CHOOSE_MODEL: &str = "Choose the model:";
/// What the thinking picker asks.
pub(crate) const CHOOSE_THINKING: &str = "How hard should the model think?";
/// What the mode picker asks.
pub(crate) const CHOOSE_MODE: &str = "What may run without asking? (deny: no tools; plan: \
reads only, answers with a plan; ask: every change asks; accept_edits: file edits run; auto: \
changes run; bypass: nothing asks, for a while)";
/// The thinking levels a picker offers.
const LEVELS: [ThinkingLevel; 4] = [
    ThinkingLevel::Off,
    ThinkingLevel::Low,
    ThinkingLevel::Medium,
    ThinkingLevel::High,
];

/// What a picker chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PickerKind {
    /// The conversation's model.
    Model,
    /// How hard the model thinks.
    Thinking,
    /// The permission mode.
    Mode,
}

/// A choice to make: the platform shows one button per choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Picker {
    /// What it chooses.
    pub(crate) kind: PickerKind,
    /// What it asks ("Choose the model:").
    pub(crate) heading: String,
    /// The value in use now.
    pub(crate) current: String,
    /// The values to choose from, in order (a button's position is its
    /// index).
    pub(crate) choices: Vec<String>,
}

impl Picker {
    /// The message: the question and the value in use.
    pub(crate) fn text(&self) -> String {
        format!("{}\nNow: {}", self.heading, self.current)
    }

    /// A button's label: the value, marked when it is the one in use.
    pub(crate) fn label(&self, choice: &str) -> String {
        let mark = if choice == self.current { "✓ " } else { "" };
        format!("{mark}{choice}")
    }
}

/// The configured models' ids, in the catalog's order.
pub(crate) fn model_ids(runtime: &Runtime) -> Vec<String> {
    runtime
        .models()
        .models
        .iter()
        .map(|m| m.model.to_string())
        .collect()
}

/// The model picker of `thread`, asking `heading`.
pub(crate) async fn model_picker(
    runtime: &Runtime,
    thread: &ThreadKey,
    heading: impl Into<String>,
) -> Result<Picker, ChannelError> {
    Ok(Picker {
        kind: PickerKind::Model,
        heading: heading.into(),
        current: runtime.thread_runtime(thread).await?.model,
        choices: model_ids(runtime),
    })
}

/// The thinking picker of `thread`.
pub(crate) async fn thinking_picker(
    runtime: &Runtime,
    thread: &ThreadKey,
) -> Result<Picker, ChannelError> {
    Ok(Picker {
        kind: PickerKind::Thinking,
        heading: CHOOSE_THINKING.to_owned(),
        current: runtime.thread_runtime(thread).await?.thinking,
        choices: LEVELS.iter().map(|l| l.as_str().to_owned()).collect(),
    })
}

/// The permission mode picker of `thread`.
pub(crate) async fn mode_picker(
    runtime: &Runtime,
    thread: &ThreadKey,
    heading: impl Into<String>,
) -> Result<Picker, ChannelError> {
    Ok(Picker {
        kind: PickerKind::Mode,
        heading: heading.into(),
        current: runtime.thread_mode(thread).await?.mode.as_str().to_owned(),
        choices: PermissionMode::ALL
            .iter()
            .map(|m| m.as_str().to_owned())
            .collect(),
    })
}

/// Sets the mode of the conversation at `place` for `who`: a refusal
/// (`bypass` without `permissions.bypass`, or in a group) is words for them.
pub(crate) async fn set_mode(
    runtime: &Runtime,
    who: Answerer<'_>,
    place: Place<'_>,
    mode: PermissionMode,
) -> Result<Result<String, String>, ChannelError> {
    let thread = ThreadKey::new(place.thread)?;
    let setter = ModeSetter::User {
        user_key: who.user_key,
        roles: who.roles,
        scope: place.shared_in,
        in_group: place.shared_in.is_some(),
    };
    match runtime.set_mode(&thread, mode.as_str(), None, setter).await {
        Ok(set) => Ok(Ok(match set.expires_at {
            Some(at) => format!("Mode: {} (until {})", set.mode, hearth_core::rfc3339(at)),
            None => format!("Mode: {}", set.mode),
        })),
        Err(RuntimeError::Forbidden(why) | RuntimeError::BypassInGroup(why)) => Ok(Err(why)),
        Err(e) => Err(e.into()),
    }
}

/// Carries out `cmd` given as `ctx` says.
pub(crate) async fn run(ctx: &Ctx<'_>, cmd: Command) -> Result<Reply, ChannelError> {
    let change = match cmd {
        Command::Help => return Ok(Reply::Help),
        Command::Usage => {
            let today = hearth_runtime::usage::today(now_ms());
            let rows = ctx.runtime.usage(&today).await?;
            return Ok(Reply::Private(usage_text(&rows)));
        }
        Command::On(change) => change,
    };
    let Some(place) = ctx.place else {
        return Ok(Reply::Private(NO_CONVERSATION.to_owned()));
    };
    let runtime = ctx.runtime;
    let thread = ThreadKey::new(place.thread)?;
    let may_change = || control::may_change(runtime, ctx.who, place);
    Ok(match change {
        Change::New if !may_change().await? => refused(),
        Change::New => {
            runtime.new_session(&thread).await?;
            info!(thread = %place.thread, "new session by command");
            Reply::Public("Started a new conversation.".to_owned())
        }
        Change::Model(Some(id)) if model_ids(runtime).contains(&id) => {
            if !may_change().await? {
                return Ok(refused());
            }
            runtime.set_model(&thread, &id).await?;
            Reply::Public(format!("Model: {id}"))
        }
        Change::Model(Some(id)) => Reply::Picker(
            model_picker(runtime, &thread, format!("No model {id}. Choose one:")).await?,
        ),
        Change::Model(None) => Reply::Picker(model_picker(runtime, &thread, CHOOSE_MODEL).await?),
        Change::Thinking(level) => match level.as_deref().and_then(ThinkingLevel::parse) {
            Some(_) if !may_change().await? => refused(),
            Some(level) => {
                runtime.set_thinking(&thread, level).await?;
                Reply::Public(format!("Thinking: {}", level.as_str()))
            }
            None => Reply::Picker(thinking_picker(runtime, &thread).await?),
        },
        Change::Mode(mode) => match mode.as_deref().and_then(PermissionMode::parse) {
            // Nobody may in a group: say that (the runtime refuses and
            // audits it), rather than who else might change the mode.
            Some(PermissionMode::Bypass) if place.shared_in.is_some() => {
                match set_mode(runtime, ctx.who, place, PermissionMode::Bypass).await? {
                    Ok(words) => Reply::Public(words),
                    Err(why) => Reply::Private(why),
                }
            }
            Some(_) if !may_change().await? => refused(),
            Some(mode) => match set_mode(runtime, ctx.who, place, mode).await? {
                Ok(words) => Reply::Public(words),
                Err(why) => Reply::Private(why),
            },
            None => Reply::Picker(mode_picker(runtime, &thread, CHOOSE_MODE).await?),
        },
        Change::RunPlan(mode) => match mode
            .as_deref()
            .map_or(Some(PermissionMode::Ask), PermissionMode::parse)
        {
            None => Reply::Picker(mode_picker(runtime, &thread, CHOOSE_MODE).await?),
            Some(_) if !may_change().await? => refused(),
            Some(mode) => run_plan(ctx, place, mode).await?,
        },
        Change::Cancel => cancel(ctx, place).await?,
    })
}

/// Switches the conversation at `place` to `mode` and sends its last
/// answer (the plan a `plan`-mode run gave) back as the next message, from
/// the one who approved it.
async fn run_plan(
    ctx: &Ctx<'_>,
    place: Place<'_>,
    mode: PermissionMode,
) -> Result<Reply, ChannelError> {
    let runtime = ctx.runtime;
    let thread = ThreadKey::new(place.thread)?;
    let Some(plan) = runtime.last_answer(&thread).await? else {
        return Ok(Reply::Private(
            "There is no plan to carry out yet: choose plan mode (/mode plan) and ask for one."
                .to_owned(),
        ));
    };
    let set = match set_mode(runtime, ctx.who, place, mode).await? {
        Ok(words) => words,
        Err(why) => return Ok(Reply::Private(why)),
    };
    let source = place.thread.split(':').next().unwrap_or("chat").to_owned();
    runtime
        .ingest(hearth_core::Inbound {
            source,
            thread_key: thread,
            user_key: hearth_core::UserKey::new(ctx.who.user_key)?,
            text: format!("{RUN_PLAN_PREFIX}{plan}"),
            delivery_mode: hearth_core::DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: place.shared_in.map(str::to_owned),
            roles: ctx.who.roles.to_vec(),
        })
        .await?;
    info!(thread = %place.thread, mode = %mode, "plan approved by command");
    Ok(Reply::Public(format!("{set}. Carrying out the plan.")))
}

/// What someone refused a change is told.
fn refused() -> Reply {
    Reply::Private(control::CHANGE_REFUSED.to_owned())
}

/// Stops the active run at `place` when `ctx.who` may.
async fn cancel(ctx: &Ctx<'_>, place: Place<'_>) -> Result<Reply, ChannelError> {
    let filter = RunFilter {
        thread_key: Some(place.thread.to_owned()),
        status: None,
        limit: 20,
        ..Default::default()
    };
    let active = ctx
        .runtime
        .list_runs(&filter)
        .await?
        .into_iter()
        .find(|r| !r.status.is_terminal());
    let Some(run) = active else {
        return Ok(Reply::Private("Nothing to cancel.".to_owned()));
    };
    if !control::may_cancel(ctx.runtime, ctx.who, place, &run.run_id, &run.user_key).await {
        return Ok(Reply::Private(control::CANCEL_REFUSED.to_owned()));
    }
    let env = ctx.runtime.cancel(&run.run_id).await?;
    Ok(Reply::Stopped(if env.status == RunStatus::Cancelled {
        "Cancelled."
    } else {
        "Stopping."
    }))
}

/// Today's usage, in one sentence.
pub(crate) fn usage_text(rows: &[hearth_runtime::UsageReport]) -> String {
    let calls: u64 = rows.iter().map(|r| r.calls).sum();
    let input: u64 = rows.iter().map(|r| r.input_tokens).sum();
    let output: u64 = rows.iter().map(|r| r.output_tokens).sum();
    // Folded from +0.0: an empty `sum` of floats is -0.0, which showed as
    // "$-0.0000" on a day without calls.
    let cost: Option<f64> = rows
        .iter()
        .try_fold(0.0, |sum, r| r.cost_usd.map(|c| sum + c));
    let cost = cost.map_or_else(
        || "unknown (a model has no price)".to_owned(),
        |c| format!("${c:.4}"),
    );
    format!(
        "Today (UTC): {calls} model calls, {input} input and {output} output tokens, cost {cost}."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platforms_command_words_parse_the_same() {
        assert_eq!(Command::parse("start", &[]), Some(Command::Help));
        assert_eq!(
            Command::parse("model", &["p/m", "extra"]),
            Some(Command::On(Change::Model(Some("p/m".into()))))
        );
        assert_eq!(
            Command::parse("thinking", &[]),
            Some(Command::On(Change::Thinking(None)))
        );
        assert_eq!(Command::parse("etc", &[]), None);
        let help = help_lines(|s| format!("/{} {}", s.name, s.args));
        assert!(help.starts_with("/new : Start a new conversation\n/model [id]: Choose the model"));
        assert!(!help.contains("/help"));
    }

    #[test]
    fn a_picker_marks_the_value_in_use() {
        let p = Picker {
            kind: PickerKind::Thinking,
            heading: CHOOSE_THINKING.into(),
            current: "low".into(),
            choices: LEVELS.iter().map(|l| l.as_str().to_owned()).collect(),
        };
        assert_eq!(p.text(), "How hard should the model think?\nNow: low");
        assert_eq!(p.label("low"), "✓ low");
        assert_eq!(p.label("high"), "high");
    }

    #[test]
    fn a_day_without_calls_costs_nothing_not_minus_nothing() {
        assert_eq!(
            usage_text(&[]),
            "Today (UTC): 0 model calls, 0 input and 0 output tokens, cost $0.0000."
        );
        let row = |cost_usd| hearth_runtime::UsageReport {
            key: "p/m".into(),
            calls: 2,
            input_tokens: 10,
            output_tokens: 5,
            cached_tokens: 0,
            cost_usd,
            untracked_calls: 0,
        };
        assert_eq!(
            usage_text(&[row(Some(0.5)), row(Some(0.25))]),
            "Today (UTC): 4 model calls, 20 input and 10 output tokens, cost $0.7500."
        );
        assert!(
            usage_text(&[row(Some(0.5)), row(None)])
                .ends_with("cost unknown (a model has no price).")
        );
    }
}
