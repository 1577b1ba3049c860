//! The parts of Discord's gateway payloads hearth reads. Ids are snowflakes
//! sent as strings; unknown fields are ignored, so new Discord fields never
//! break parsing.

use serde::Deserialize;
use serde_json::Value;

/// A gateway frame: `{op, d, s, t}`.
#[derive(Debug, Deserialize)]
pub struct Frame {
    /// Opcode (0 for a dispatch).
    pub op: u8,
    /// The event's name for dispatches.
    #[serde(default)]
    pub t: Option<String>,
    /// The event's data.
    #[serde(default)]
    pub d: Value,
}

/// A user.
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    /// Snowflake.
    pub id: String,
    /// Unique name.
    #[serde(default)]
    pub username: String,
    /// Display name.
    #[serde(default)]
    pub global_name: Option<String>,
    /// A bot account.
    #[serde(default)]
    pub bot: bool,
}

impl User {
    /// The name to show.
    pub fn display_name(&self) -> String {
        self.global_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| self.username.clone())
    }
}

/// `READY`'s data (session and resume URL are the shard's business).
#[derive(Debug, Deserialize)]
pub struct Ready {
    /// The bot's user.
    pub user: User,
    /// The bot's application.
    pub application: Application,
}

/// An application (only its id).
#[derive(Debug, Deserialize)]
pub struct Application {
    /// Snowflake.
    pub id: String,
    /// Its bot user (in `GET /applications/@me`, not in READY).
    #[serde(default)]
    pub bot: Option<User>,
}

/// `GUILD_CREATE`'s data: who owns the guild (an admin there).
#[derive(Debug, Deserialize)]
pub struct Guild {
    /// Snowflake.
    pub id: String,
    /// The owner's user id.
    #[serde(default)]
    pub owner_id: Option<String>,
}

/// A guild member as events carry it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Member {
    /// The user (interactions only).
    #[serde(default)]
    pub user: Option<User>,
    /// Role ids.
    #[serde(default)]
    pub roles: Vec<String>,
    /// The member's permissions in the channel, a decimal bit set
    /// (interactions only).
    #[serde(default)]
    pub permissions: Option<String>,
}

/// `MESSAGE_CREATE`'s data.
#[derive(Debug, Deserialize)]
pub struct Message {
    /// Snowflake.
    pub id: String,
    /// Where it was sent.
    pub channel_id: String,
    /// Absent in DMs.
    #[serde(default)]
    pub guild_id: Option<String>,
    /// Who sent it.
    pub author: User,
    /// The text (empty without the Message Content intent).
    #[serde(default)]
    pub content: String,
    /// Users mentioned.
    #[serde(default)]
    pub mentions: Vec<User>,
    /// Webhook messages have no real author.
    #[serde(default)]
    pub webhook_id: Option<String>,
    /// The author as a member of the guild (guild messages only), with
    /// their role ids.
    #[serde(default)]
    pub member: Option<Member>,
}

/// `MESSAGE_REACTION_ADD`'s data.
#[derive(Debug, Deserialize)]
pub struct ReactionAdd {
    /// Who reacted.
    pub user_id: String,
    /// Where the message is.
    pub channel_id: String,
    /// The message reacted to.
    pub message_id: String,
    /// Absent in DMs.
    #[serde(default)]
    pub guild_id: Option<String>,
    /// The emoji.
    pub emoji: Emoji,
    /// Who reacted, as a member of the guild (guild reactions only).
    #[serde(default)]
    pub member: Option<Member>,
}

/// A reaction's emoji: a Unicode emoji has only its `name` (the emoji
/// itself); a custom one has an `id` too.
#[derive(Debug, Deserialize)]
pub struct Emoji {
    /// Custom emoji only.
    #[serde(default)]
    pub id: Option<String>,
    /// The emoji, or a custom emoji's name (absent for a deleted one).
    #[serde(default)]
    pub name: Option<String>,
}

/// `INTERACTION_CREATE`'s data.
#[derive(Debug, Deserialize)]
pub struct Interaction {
    /// Snowflake.
    pub id: String,
    /// 1 ping, 2 application command, 3 message component, 4 autocomplete.
    #[serde(rename = "type")]
    pub kind: u8,
    /// Answers the interaction (valid 15 minutes).
    pub token: String,
    /// Where it happened.
    #[serde(default)]
    pub channel_id: Option<String>,
    /// Absent in DMs.
    #[serde(default)]
    pub guild_id: Option<String>,
    /// In guilds.
    #[serde(default)]
    pub member: Option<Member>,
    /// In DMs.
    #[serde(default)]
    pub user: Option<User>,
    /// The command or the component.
    #[serde(default)]
    pub data: Option<InteractionData>,
    /// The message a component is on.
    #[serde(default)]
    pub message: Option<ComponentMessage>,
    /// Set once hearth has answered it (Discord takes one answer).
    #[serde(skip)]
    pub answered: std::sync::atomic::AtomicBool,
}

impl Interaction {
    /// Who acted.
    pub fn actor(&self) -> Option<&User> {
        self.member
            .as_ref()
            .and_then(|m| m.user.as_ref())
            .or(self.user.as_ref())
    }
}

/// A command's name and options, or a component's custom id.
#[derive(Debug, Default, Deserialize)]
pub struct InteractionData {
    /// The command's name.
    #[serde(default)]
    pub name: String,
    /// The options given (subcommands nest theirs).
    #[serde(default)]
    pub options: Vec<CommandOption>,
    /// A component's custom id (a modal's too).
    #[serde(default)]
    pub custom_id: Option<String>,
    /// A submitted modal's fields (`components`).
    #[serde(default, rename = "components")]
    pub fields: ModalFields,
}

/// A submitted modal's fields, as Discord sends them (`components`: action
/// rows of text inputs). Their values may be secrets (a provider key), so
/// `Debug` shows none.
#[derive(Clone, Default, Deserialize)]
#[serde(transparent)]
pub struct ModalFields(Vec<serde_json::Value>);

impl std::fmt::Debug for ModalFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ModalFields({} rows, values hidden)", self.0.len())
    }
}

impl ModalFields {
    /// The value of the text input `custom_id`, if given.
    pub fn value(&self, custom_id: &str) -> Option<String> {
        self.0
            .iter()
            .filter_map(|row| row.get("components").and_then(|c| c.as_array()))
            .flatten()
            .find(|c| c.get("custom_id").and_then(|v| v.as_str()) == Some(custom_id))
            .and_then(|c| c.get("value").and_then(|v| v.as_str()))
            .map(str::to_owned)
    }
}

/// One option of a command.
#[derive(Debug, Clone, Deserialize)]
pub struct CommandOption {
    /// Its name.
    pub name: String,
    /// Its value (strings, numbers, ids).
    #[serde(default)]
    pub value: Option<Value>,
    /// A subcommand's options.
    #[serde(default)]
    pub options: Vec<CommandOption>,
}

impl CommandOption {
    /// The value as text (ids and strings alike).
    pub fn text(&self) -> Option<String> {
        match self.value.as_ref()? {
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    }
}

/// The named option's text value among `options`.
pub fn option(options: &[CommandOption], name: &str) -> Option<String> {
    options
        .iter()
        .find(|o| o.name == name)
        .and_then(CommandOption::text)
}

/// The message a pressed button is on.
#[derive(Debug, Deserialize)]
pub struct ComponentMessage {
    /// Snowflake.
    pub id: String,
    /// Its text.
    #[serde(default)]
    pub content: String,
}
