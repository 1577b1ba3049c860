//! The parts of Bot API objects hearth reads. Every field it does not need
//! is ignored, and optional ones default, so a new Telegram field never
//! breaks parsing.

use serde::Deserialize;

/// `Update`.
#[derive(Debug, Clone, Deserialize)]
pub struct Update {
    /// Increasing id; the next poll's offset is the last one plus one.
    pub update_id: i64,
    /// A new message.
    #[serde(default)]
    pub message: Option<Message>,
    /// A press of an inline button.
    #[serde(default)]
    pub callback_query: Option<CallbackQuery>,
    /// A change of a user's reactions to a message (sent only when asked
    /// for in `allowed_updates`).
    #[serde(default)]
    pub message_reaction: Option<MessageReactionUpdated>,
}

/// `MessageReactionUpdated`.
#[derive(Debug, Clone, Deserialize)]
pub struct MessageReactionUpdated {
    /// Where the message is.
    pub chat: Chat,
    /// The message reacted to.
    pub message_id: i64,
    /// Who changed their reactions (absent for anonymous group admins).
    #[serde(default)]
    pub user: Option<User>,
    /// The user's reactions before.
    #[serde(default)]
    pub old_reaction: Vec<ReactionType>,
    /// The user's reactions now.
    #[serde(default)]
    pub new_reaction: Vec<ReactionType>,
}

impl MessageReactionUpdated {
    /// The emoji newly set by this change (in `new_reaction`, not in
    /// `old_reaction`): a removal adds none.
    pub fn added_emoji(&self) -> impl Iterator<Item = &str> {
        self.new_reaction
            .iter()
            .filter(|r| !self.old_reaction.contains(r))
            .filter_map(|r| match r {
                ReactionType::Emoji { emoji } => Some(emoji.as_str()),
                ReactionType::Other => None,
            })
    }
}

/// `ReactionType`: an emoji, or a custom emoji or paid reaction (which
/// hearth does not read).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReactionType {
    /// `ReactionTypeEmoji`.
    Emoji {
        /// The emoji.
        emoji: String,
    },
    /// Any other kind.
    #[serde(other)]
    Other,
}

/// `Message`.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    /// Id within the chat.
    pub message_id: i64,
    /// The sender (absent in channels).
    #[serde(default)]
    pub from: Option<User>,
    /// Where it was sent.
    pub chat: Chat,
    /// Its text, for text messages.
    #[serde(default)]
    pub text: Option<String>,
    /// The message it replies to.
    #[serde(default)]
    pub reply_to_message: Option<Box<Message>>,
}

/// `User`.
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    /// Id.
    pub id: i64,
    /// True for bots.
    #[serde(default)]
    pub is_bot: bool,
    /// First name.
    #[serde(default)]
    pub first_name: String,
    /// `@username` without the `@`.
    #[serde(default)]
    pub username: Option<String>,
}

impl User {
    /// How to show them to the owner.
    pub fn display_name(&self) -> String {
        match &self.username {
            Some(u) => format!("{} (@{u})", self.first_name),
            None => self.first_name.clone(),
        }
    }
}

/// `Chat`.
#[derive(Debug, Clone, Deserialize)]
pub struct Chat {
    /// Id.
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// `CallbackQuery`.
#[derive(Debug, Clone, Deserialize)]
pub struct CallbackQuery {
    /// Answered with `answerCallbackQuery`.
    pub id: String,
    /// Who pressed.
    pub from: User,
    /// The message with the button.
    #[serde(default)]
    pub message: Option<Message>,
    /// The button's data.
    #[serde(default)]
    pub data: Option<String>,
}

/// `getMe`'s answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Me {
    /// The bot's id.
    pub id: i64,
    /// Its username.
    #[serde(default)]
    pub username: Option<String>,
}
