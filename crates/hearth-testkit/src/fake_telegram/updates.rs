//! Builders for the updates a test pushes: what users do in chats. Each
//! message builder records the user's message in the fake's chat (so the
//! bot can reply to it or be shown it again); every builder returns the
//! update without its `update_id`, which [`FakeTelegram::push_update`]
//! assigns.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::api::message_json;
use super::{BOT_USERNAME, ChatMessage, FakeTelegram, TelegramState};

/// A Telegram user, as updates show them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The user id (also the id of their private chat with the bot).
    pub id: i64,
    /// The first name.
    pub first_name: String,
    /// The @username, without the `@`.
    pub username: Option<String>,
    /// True for bots.
    pub is_bot: bool,
}

impl User {
    /// A person called "User <id>" with the username `user<id>`.
    pub fn new(id: i64) -> Self {
        Self {
            id,
            first_name: format!("User {id}"),
            username: Some(format!("user{id}")),
            is_bot: false,
        }
    }

    /// Another bot, whose messages hearth must ignore.
    pub fn bot(id: i64) -> Self {
        Self {
            is_bot: true,
            username: Some(format!("other{id}_bot")),
            ..Self::new(id)
        }
    }

    /// The `User` object.
    pub fn json(&self) -> Value {
        let mut user = json!({"id": self.id, "is_bot": self.is_bot, "first_name": self.first_name});
        if let Some(username) = &self.username {
            user["username"] = json!(username);
        }
        if !self.is_bot {
            user["language_code"] = json!("en");
        }
        user
    }

    /// The `Chat` object of the user's private chat with the bot.
    pub fn private_chat(&self) -> Value {
        let mut chat = json!({"id": self.id, "type": "private", "first_name": self.first_name});
        if let Some(username) = &self.username {
            chat["username"] = json!(username);
        }
        chat
    }
}

/// The `Chat` object of a supergroup.
pub(super) fn group_chat(id: i64) -> Value {
    json!({"id": id, "type": "supergroup", "title": format!("Group {id}")})
}

/// Seconds since the epoch, for `date` fields.
pub(super) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl FakeTelegram {
    /// A private text message from `from` to the bot. A leading `/command`
    /// gets its `bot_command` entity, as Telegram adds it.
    pub fn private_text(&self, from: &User, text: &str) -> Value {
        let mut st = self.shared.lock();
        st.chats.insert(from.id, from.private_chat());
        let message = user_message(&mut st, from.id, from, text, command_entities(text), None);
        json!({"message": message})
    }

    /// A group text message from `from`; with `mention`, it starts with the
    /// bot's @username (and its `mention` entity).
    pub fn group_text(&self, chat_id: i64, from: &User, text: &str, mention: bool) -> Value {
        let mut st = self.shared.lock();
        st.chats.insert(chat_id, group_chat(chat_id));
        let (text, entities) = if mention {
            let at = format!("@{BOT_USERNAME}");
            let length = at.encode_utf16().count();
            let entities = json!([{"type": "mention", "offset": 0, "length": length}]);
            (format!("{at} {text}"), entities)
        } else {
            (text.to_owned(), command_entities(text))
        };
        let message = user_message(&mut st, chat_id, from, &text, entities, None);
        json!({"message": message})
    }

    /// A group message from `from` replying to message `reply_to` (usually
    /// one of the bot's), without a mention.
    pub fn group_reply(&self, chat_id: i64, from: &User, text: &str, reply_to: i64) -> Value {
        let mut st = self.shared.lock();
        st.chats.insert(chat_id, group_chat(chat_id));
        let message = user_message(
            &mut st,
            chat_id,
            from,
            text,
            command_entities(text),
            Some(reply_to),
        );
        json!({"message": message})
    }

    /// `from` pressing the button with `data` under message `message_id`.
    /// The query must then be answered with answerCallbackQuery.
    pub fn callback_query(&self, from: &User, chat_id: i64, message_id: i64, data: &str) -> Value {
        let mut st = self.shared.lock();
        st.next_query += 1;
        let id = format!("{}{:04}", from.id, st.next_query);
        st.queries.insert(id.clone(), false);
        let message = st
            .index
            .get(&(chat_id, message_id))
            .and_then(|&i| st.messages.get(i))
            .map_or_else(
                || json!({"message_id": message_id, "date": 0, "chat": {"id": chat_id, "type": "private"}}),
                |m| message_json(&st, m),
            );
        json!({"callback_query": {
            "id": id, "from": from.json(), "message": message,
            "chat_instance": format!("ci{chat_id}"), "data": data,
        }})
    }

    /// `from` changing their reactions to message `message_id` of
    /// `chat_id` from the emoji `old` to `new` (a `message_reaction`
    /// update). Telegram sends it only to bots that list
    /// `message_reaction` in `allowed_updates`, and never for reactions
    /// set by bots.
    pub fn reaction(
        &self,
        from: &User,
        chat_id: i64,
        message_id: i64,
        old: &[&str],
        new: &[&str],
    ) -> Value {
        let st = self.shared.lock();
        let chat = st
            .chats
            .get(&chat_id)
            .cloned()
            .unwrap_or(json!({"id": chat_id}));
        let emoji = |list: &[&str]| -> Vec<Value> {
            list.iter()
                .map(|e| json!({"type": "emoji", "emoji": e}))
                .collect()
        };
        json!({"message_reaction": {
            "chat": chat, "message_id": message_id, "user": from.json(), "date": now(),
            "old_reaction": emoji(old), "new_reaction": emoji(new),
        }})
    }
}

/// `bot_command` entities for a text starting with `/command`.
fn command_entities(text: &str) -> Value {
    if !text.starts_with('/') {
        return json!([]);
    }
    let command = text.split_whitespace().next().unwrap_or(text);
    json!([{"type": "bot_command", "offset": 0, "length": command.encode_utf16().count()}])
}

/// Records a user's message in the chat and returns its `Message` object.
fn user_message(
    st: &mut TelegramState,
    chat_id: i64,
    from: &User,
    text: &str,
    entities: Value,
    reply_to: Option<i64>,
) -> Value {
    let message_id = st.allocate_message_id(chat_id);
    let stored = ChatMessage {
        chat_id,
        message_id,
        from_bot: false,
        text: text.to_owned(),
        entities: Vec::new(),
        buttons: Vec::new(),
        reply_to,
        edits: 0,
        deleted: false,
    };
    let reply = reply_to
        .and_then(|id| st.index.get(&(chat_id, id)))
        .and_then(|&i| st.messages.get(i))
        .map(|m| message_json(st, m));
    let chat = st
        .chats
        .get(&chat_id)
        .cloned()
        .unwrap_or(json!({"id": chat_id}));
    st.store(stored);
    let mut message = json!({
        "message_id": message_id, "from": from.json(), "chat": chat,
        "date": now(), "text": text,
    });
    if entities.as_array().is_some_and(|e| !e.is_empty()) {
        message["entities"] = entities;
    }
    if let Some(reply) = reply {
        message["reply_to_message"] = reply;
    }
    message
}
