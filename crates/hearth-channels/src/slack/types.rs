//! The parts of Slack's payloads hearth reads. Fields it does not need are
//! ignored and optional ones default, so a new Slack field never breaks
//! parsing.

use serde::Deserialize;

/// A Socket Mode frame: `hello`, `disconnect`, or an envelope
/// (`events_api`, `slash_commands`, `interactive`).
#[derive(Debug, Clone, Deserialize)]
pub struct Frame {
    /// The frame's type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Acknowledged with `{"envelope_id"}`.
    #[serde(default)]
    pub envelope_id: Option<String>,
    /// The event, command or interaction.
    #[serde(default)]
    pub payload: Option<serde_json::Value>,
    /// 0 on the first delivery, more on redeliveries.
    #[serde(default)]
    pub retry_attempt: Option<u32>,
    /// Why a `disconnect` came (`warning`, `refresh_requested`, ...).
    #[serde(default)]
    pub reason: Option<String>,
}

/// An Events API `event_callback`.
#[derive(Debug, Clone, Deserialize)]
pub struct EventCallback {
    /// Unique per event, the same on redeliveries.
    pub event_id: String,
    /// The workspace.
    #[serde(default)]
    pub team_id: Option<String>,
    /// The event.
    pub event: Event,
}

/// A `message` or `app_mention` event (others are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// `message`, `app_mention`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The author.
    #[serde(default)]
    pub user: Option<String>,
    /// The text, with Slack's entities and escapes.
    #[serde(default)]
    pub text: Option<String>,
    /// The conversation.
    #[serde(default)]
    pub channel: Option<String>,
    /// `im`, `channel`, `group`, `mpim`.
    #[serde(default)]
    pub channel_type: Option<String>,
    /// The message's timestamp (its id).
    #[serde(default)]
    pub ts: Option<String>,
    /// The thread's root, for messages in a thread.
    #[serde(default)]
    pub thread_ts: Option<String>,
    /// Set on messages posted by bots (hearth's own included).
    #[serde(default)]
    pub bot_id: Option<String>,
    /// Set on edits, joins, bot messages and other non-plain messages.
    #[serde(default)]
    pub subtype: Option<String>,
}

/// Someone's id.
#[derive(Debug, Clone, Deserialize)]
pub struct Id {
    /// `U…`, `C…`, `T…`.
    pub id: String,
    /// The user's name, when given.
    #[serde(default)]
    pub username: Option<String>,
}

/// A `block_actions` interaction (a button press).
#[derive(Debug, Clone, Deserialize)]
pub struct Interaction {
    /// `block_actions` is the only kind hearth answers.
    #[serde(rename = "type")]
    pub kind: String,
    /// Who pressed.
    pub user: Id,
    /// The conversation.
    #[serde(default)]
    pub channel: Option<Id>,
    /// The message with the button.
    #[serde(default)]
    pub message: Option<MessageRef>,
    /// The pressed buttons (one).
    #[serde(default)]
    pub actions: Vec<Action>,
    /// Where to answer in place of the message (pickers).
    #[serde(default)]
    pub response_url: Option<String>,
    /// Unique per interaction: redelivered envelopes are recognised by it.
    #[serde(default)]
    pub trigger_id: Option<String>,
}

/// The message an interaction came from.
#[derive(Debug, Clone, Deserialize)]
pub struct MessageRef {
    /// Its timestamp (id).
    pub ts: String,
    /// Its fallback text.
    #[serde(default)]
    pub text: Option<String>,
    /// Its thread's root, when in a thread.
    #[serde(default)]
    pub thread_ts: Option<String>,
}

/// One pressed button.
#[derive(Debug, Clone, Deserialize)]
pub struct Action {
    /// Which button (`hearth_confirm_approve`, `hearth_model`, ...).
    pub action_id: String,
    /// The block the button is in (a picker row names its thread here).
    #[serde(default)]
    pub block_id: Option<String>,
    /// What it carries (a confirmation token, a model id, a level).
    #[serde(default)]
    pub value: Option<String>,
}

/// A slash command (`/hearth model`).
#[derive(Debug, Clone, Deserialize)]
pub struct SlashCommand {
    /// `/hearth`.
    pub command: String,
    /// What follows the command.
    #[serde(default)]
    pub text: String,
    /// Who ran it.
    pub user_id: String,
    /// Where.
    pub channel_id: String,
    /// Where to answer (ephemeral by default).
    #[serde(default)]
    pub response_url: Option<String>,
    /// Unique per invocation.
    #[serde(default)]
    pub trigger_id: Option<String>,
}

/// `auth.test`'s answer.
#[derive(Debug, Clone, Deserialize)]
pub struct AuthTest {
    /// The bot's user id (its mentions are `<@{user_id}>`).
    pub user_id: String,
    /// The bot's name.
    #[serde(default)]
    pub user: Option<String>,
    /// The workspace.
    #[serde(default)]
    pub team: Option<String>,
    /// The workspace's id.
    #[serde(default)]
    pub team_id: Option<String>,
}

/// `chat.postMessage`'s answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Posted {
    /// The new message's timestamp (its id).
    pub ts: String,
}

/// `apps.connections.open`'s answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Connection {
    /// The WebSocket URL (single use).
    pub url: String,
}
