//! What the chat channels (Telegram, Discord, Slack) keep durably: the
//! outbox of replies owed to a conversation, pairing requests, the users a
//! channel lets in, the platform cursors (Telegram's update offset), the
//! platform event ids already handled, and which platform messages carry a
//! run's answer (so a reaction to one rates the run).

use crate::Timestamp;

/// What an outbox item does on the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxKind {
    /// Posts a new message (an answer, a notice).
    Message,
    /// Edits a message already posted (the progress message becoming the answer).
    Edit,
    /// Posts a confirmation prompt with Approve/Deny buttons.
    Prompt,
    /// Deletes a message (a progress message the answer replaced).
    Delete,
}

impl OutboxKind {
    /// The stored and API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::Edit => "edit",
            Self::Prompt => "prompt",
            Self::Delete => "delete",
        }
    }

    /// The kind with this stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "message" => Self::Message,
            "edit" => Self::Edit,
            "prompt" => Self::Prompt,
            "delete" => Self::Delete,
            _ => return None,
        })
    }
}

/// Where an outbox item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxStatus {
    /// Not yet delivered; sent when `next_attempt_at` comes.
    Pending,
    /// Delivered (its payload is then erased).
    Sent,
    /// Given up: a permanent platform error, or older than the channel's maximum age.
    Failed,
}

impl OutboxStatus {
    /// The stored and API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sent => "sent",
            Self::Failed => "failed",
        }
    }

    /// The status with this stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "sent" => Self::Sent,
            "failed" => Self::Failed,
            _ => return None,
        })
    }
}

/// A reply to queue, committed together with what caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOutboxItem {
    /// `telegram`, `discord` or `slack`.
    pub channel: String,
    /// The platform conversation id (a chat, a channel, `channel:thread_ts`).
    /// Items of one target are delivered in order.
    pub target: String,
    /// What it does.
    pub kind: OutboxKind,
    /// The run it belongs to, if any.
    pub run_id: Option<String>,
    /// What to send, as the channel's own JSON (text, buttons, message ids).
    pub payload: String,
}

/// A queued reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxItem {
    /// Increasing id: the delivery order within a target.
    pub id: i64,
    pub channel: String,
    /// The platform conversation id.
    pub target: String,
    /// What it does.
    pub kind: OutboxKind,
    /// The run it belongs to, if any.
    pub run_id: Option<String>,
    /// What to send; empty once sent.
    pub payload: String,
    /// Delivery attempts that failed.
    pub attempts: u32,
    /// How far the delivery of a reply split into several platform
    /// messages got, as its channel counts it (parts delivered, recorded
    /// as each goes out); a retry resumes from there.
    pub progress: u32,
    /// Where it stands.
    pub status: OutboxStatus,
    /// When the sender tries it next (pending items only).
    pub next_attempt_at: Option<Timestamp>,
    /// The last delivery error.
    pub last_error: Option<String>,
    /// When it was queued.
    pub created_at: Timestamp,
}

/// Pending and failed outbox items of one channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxCounts {
    /// Items not yet delivered.
    pub pending: u64,
    /// Items given up.
    pub failed: u64,
}

/// A stranger's request to talk to the assistant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingRecord {
    /// The code the owner approves (8 characters).
    pub code: String,
    pub channel: String,
    /// Who asked (`telegram:user:<id>`).
    pub user_key: String,
    /// Their name on the platform, as shown to the owner.
    pub display_name: String,
    /// Where to tell them the answer (their DM conversation id).
    pub target: String,
    /// When they asked.
    pub requested_at: Timestamp,
    /// After this the code is void.
    pub expires_at: Timestamp,
}

/// The bounds a channel puts on pairing requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairingLimits {
    /// Pending, unexpired requests kept per channel. A request beyond them
    /// replaces the oldest (whose code stops working), so strangers who keep
    /// asking cannot lock a newcomer out. At least 1.
    pub max_pending: u32,
    /// How long after the owner denied a user's request that user's new
    /// requests are ignored, in milliseconds.
    pub denied_cooldown_ms: i64,
}

/// What asking for a pairing did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingOutcome {
    /// A new code: tell the user.
    Created(PairingRecord),
    /// The user already has a pending, unexpired code (it is not repeated to
    /// them, so one stranger gets one message).
    Existing(PairingRecord),
    /// The owner denied this user's request within the cool-down: nothing
    /// is stored or sent.
    CoolingDown {
        /// When the user may ask again.
        until: Timestamp,
    },
}

/// A user a channel lets in through pairing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedUser {
    /// `telegram:user:<id>`.
    pub user_key: String,
    /// When the owner approved them.
    pub added_at: Timestamp,
}

/// A platform message that carries (a part of) a run's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyMessage {
    /// `telegram`, `discord` or `slack`.
    pub channel: String,
    /// The platform conversation id, as in the outbox.
    pub target: String,
    /// The platform's id of the message, unique within `target`.
    pub message_id: String,
    /// The run whose answer it is.
    pub run_id: String,
    /// When it was posted.
    pub sent_at: Timestamp,
}

/// A run's end, as the reply router sees it.
#[derive(Debug, Clone, Copy)]
pub struct RunEnd<'a> {
    pub run: &'a crate::records::RunRecord,
    /// `succeeded`, `failed` or `cancelled`.
    pub status: crate::RunStatus,
    /// The answer.
    pub output: Option<&'a str>,
    /// Error code and message of a failed run.
    pub error: Option<(&'a str, &'a str)>,
}

/// Decides which durable replies a chat channel owes when a run ends or asks
/// for a confirmation (implemented by the channels, called by the runtime
/// and the engine so the items commit with their cause).
pub trait ReplyRouter: Send + Sync + 'static {
    /// Items owed for a run's end; empty for threads no channel owns.
    fn on_finish(&self, end: RunEnd<'_>) -> Vec<NewOutboxItem>;

    /// Items owed for a confirmation the run asks (`token` answers it).
    fn on_confirmation(
        &self,
        rec: &crate::records::ConfirmationRecord,
        token: &str,
    ) -> Vec<NewOutboxItem>;

    /// Called once items of `channel` were committed, to wake its sender.
    fn committed(&self, channel: &str);

    /// The permission scope of runs on `thread_key` (`discord:guild:<id>`,
    /// `telegram:chat:<id>` for a group), when a channel owns the thread and
    /// knows its space; `None` means `global`.
    fn scope_of(&self, _thread_key: &str) -> Option<String> {
        None
    }

    /// The item that posts `text` into `thread_key`'s conversation as a
    /// message of its own, plain (no formatting, no reply, no mentions): an
    /// app's command sent for a run (`run_id`) or a trigger, or hearth's
    /// notice about one. `None` when no channel that can do it owns the
    /// thread (only Discord does).
    fn on_app_message(
        &self,
        _thread_key: &str,
        _run_id: Option<&str>,
        _text: &str,
    ) -> Option<NewOutboxItem> {
        None
    }
}
