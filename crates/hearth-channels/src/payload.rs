//! What an outbox item carries: the channel-neutral reply, stored as JSON
//! and rendered by the platform at delivery time (formatting and splitting
//! happen then, so a retried item is rendered the same way).

use serde::{Deserialize, Serialize};

/// One reply owed to a conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// The text, as the model wrote it (Markdown-ish) or as hearth words it.
    pub text: String,
    /// True for a model's answer (rich formatting applies); false for
    /// hearth's own notices, sent as plain text.
    #[serde(default)]
    pub rich: bool,
    /// The platform message this item edits or deletes (progress messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// A confirmation prompt's buttons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<ConfirmButtons>,
    /// Platform-specific routing (a Slack thread's `ts`, a Discord
    /// interaction token, a message to reply to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// An alert: when it cannot be delivered, no `outbox.failed` alert is
    /// raised about it (that could go round in a loop).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub alert: bool,
}

/// Approve/Deny buttons of a confirmation prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmButtons {
    /// The confirmation's token (the buttons answer with it; only the
    /// asking user's press counts, which the runtime checks).
    pub token: String,
}

impl Payload {
    /// A plain notice.
    pub fn notice(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// The stored form.
    pub fn to_json(&self) -> String {
        // A struct of strings and options always serializes.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{\"text\":\"\"}"))
    }

    /// Reads a stored payload.
    pub fn from_json(s: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(s)
    }
}
