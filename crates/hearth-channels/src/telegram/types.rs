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
