//! The Bot API methods the fake serves: each checks its parameters the way
//! the reference describes them and answers with Telegram's wording.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::html::{Entity, Parsed, parse_html};
use super::updates::now;
use super::{Button, CallbackAnswer, ChatMessage, Failure, Shared, TelegramState, update_id};

/// Telegram's limit for a message's text, in UTF-16 units after entity parsing.
const TEXT_LIMIT: usize = 4096;
/// `callback_data` is 1-64 bytes.
const CALLBACK_DATA_LIMIT: usize = 64;

pub(super) const NOT_MODIFIED: &str = "message is not modified: specified new message content and reply \
     markup are exactly the same as a current content and reply markup of the message";
const TERMINATED: &str = "Conflict: terminated by other getUpdates request; make sure that only \
     one bot instance is running";
const WEBHOOK_ACTIVE: &str = "Conflict: can't use getUpdates method while webhook is active; use \
     deleteWebhook to delete the webhook first";
pub(super) const QUERY_INVALID: &str =
    "query is too old and response timeout expired or query ID is invalid";

/// The methods served, by their canonical names.
const METHODS: [&str; 15] = [
    "getMe",
    "getUpdates",
    "sendMessage",
    "editMessageText",
    "editMessageReplyMarkup",
    "deleteMessage",
    "sendChatAction",
    "answerCallbackQuery",
    "setMyCommands",
    "getMyCommands",
    "deleteMyCommands",
    "setWebhook",
    "deleteWebhook",
    "getWebhookInfo",
    "logOut",
];

/// The canonical name of `method` (Telegram ignores case), if served.
pub(super) fn canonical(method: &str) -> Option<&'static str> {
    METHODS
        .iter()
        .copied()
        .find(|m| m.eq_ignore_ascii_case(method))
}

/// An error answer: `error_code` (also the HTTP status) and `description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ApiError {
    pub(super) code: u16,
    pub(super) description: String,
    pub(super) retry_after: Option<u64>,
}

impl ApiError {
    pub(super) fn new(code: u16, description: &str) -> Self {
        Self {
            code,
            description: description.to_owned(),
            retry_after: None,
        }
    }

    pub(super) fn bad_request(what: &str) -> Self {
        Self::new(400, &format!("Bad Request: {what}"))
    }

    pub(super) fn body(&self) -> Value {
        let mut body =
            json!({"ok": false, "error_code": self.code, "description": self.description});
        if let Some(retry_after) = self.retry_after {
            body["parameters"] = json!({"retry_after": retry_after});
        }
        body
    }
}

impl From<Failure> for ApiError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Status(code) => {
                let reason = match code {
                    500 => "Internal Server Error",
                    502 => "Bad Gateway",
                    503 => "Service Unavailable",
                    504 => "Gateway Timeout",
                    _ => "Error",
                };
                Self::new(code, reason)
            }
            Failure::TooManyRequests { retry_after } => Self {
                code: 429,
                description: format!("Too Many Requests: retry after {retry_after}"),
                retry_after: Some(retry_after),
            },
            Failure::Error { code, description } => Self::new(code, &description),
        }
    }
}

type Params = Map<String, Value>;
type Answer = Result<Value, ApiError>;

/// Runs a method other than getUpdates against the state.
pub(super) fn call(st: &mut TelegramState, method: &str, p: &Params) -> Answer {
    match method {
        "getMe" => Ok(st.bot.clone()),
        "sendMessage" => send_message(st, p),
        "editMessageText" => edit_message_text(st, p),
        "editMessageReplyMarkup" => edit_reply_markup(st, p),
        "deleteMessage" => delete_message(st, p),
        "sendChatAction" => send_chat_action(st, p),
        "answerCallbackQuery" => answer_callback_query(st, p),
        "setMyCommands" => set_my_commands(st, p),
        "getMyCommands" => Ok(st
            .commands
            .iter()
            .map(|(c, d)| json!({"command": c, "description": d}))
            .collect()),
        "deleteMyCommands" => {
            st.commands.clear();
            Ok(json!(true))
        }
        "setWebhook" => set_webhook(st, p),
        "deleteWebhook" => {
            st.webhook = None;
            drop_pending(st, p)?;
            Ok(json!(true))
        }
        "getWebhookInfo" => {
            let mut info = json!({
                "url": st.webhook.clone().unwrap_or_default(),
                "has_custom_certificate": false,
                "pending_update_count": st.pending_updates(),
            });
            if let Some(kinds) = &st.allowed_updates {
                info["allowed_updates"] = json!(kinds);
            }
            Ok(info)
        }
        "logOut" => Ok(json!(true)),
        _ => Err(ApiError::new(404, "Not Found")),
    }
}

/// getUpdates: long polling over the queue, confirming by offset.
pub(super) async fn get_updates(shared: &Shared, p: &Params) -> Answer {
    let offset = int(p, "offset")?;
    let limit = usize::try_from(int(p, "limit")?.unwrap_or(100).clamp(1, 100)).unwrap_or(100);
    let timeout = u64::try_from(int(p, "timeout")?.unwrap_or(0)).unwrap_or(0);
    let allowed = allowed_updates(p)?;
    let generation = {
        let mut st = shared.lock();
        if st.webhook.is_some() {
            return Err(ApiError::new(409, WEBHOOK_ACTIVE));
        }
        match offset {
            Some(offset) if offset >= 0 => st.confirmed = st.confirmed.max(offset),
            Some(from_end) => {
                // A negative offset keeps only the last |offset| updates.
                let keep = usize::try_from(from_end.unsigned_abs()).unwrap_or(usize::MAX);
                let pending: Vec<i64> = st.updates.iter().map(update_id).collect();
                if let Some(&first_kept) = pending.get(pending.len().saturating_sub(keep)) {
                    st.confirmed = st.confirmed.max(first_kept);
                }
            }
            None => {}
        }
        let confirmed = st.confirmed;
        st.updates.retain(|u| update_id(u) >= confirmed);
        if let Some(kinds) = allowed {
            // An empty list means the default set again.
            st.allowed_updates = (!kinds.is_empty()).then_some(kinds);
        }
        st.poll_generation += 1;
        st.poll_generation
    };
    // An older poll still waiting is terminated, as Telegram does.
    shared.polls.notify_waiters();
    shared.changed.notify_waiters();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    loop {
        let notified = shared.polls.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        {
            let mut st = shared.lock();
            if st.poll_generation != generation {
                return Err(ApiError::new(409, TERMINATED));
            }
            if st.webhook.is_some() {
                return Err(ApiError::new(409, WEBHOOK_ACTIVE));
            }
            let allowed = st.allowed_updates.clone();
            st.updates
                .retain(|u| wanted(allowed.as_deref(), update_kind(u)));
            let confirmed = st.confirmed;
            let batch: Vec<Value> = st
                .updates
                .iter()
                .filter(|u| update_id(u) >= confirmed)
                .take(limit)
                .cloned()
                .collect();
            if !batch.is_empty() || timeout == 0 {
                return Ok(Value::Array(batch));
            }
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return Ok(json!([]));
        }
    }
}

/// The update's type: its one field besides `update_id`.
/// The `allowed_updates` parameter (of getUpdates and setWebhook).
fn allowed_updates(p: &Params) -> Result<Option<Vec<String>>, ApiError> {
    match json_field(p, "allowed_updates")? {
        None => Ok(None),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .map(|k| k.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| ApiError::bad_request("can't parse allowed updates")),
        Some(_) => Err(ApiError::bad_request("can't parse allowed updates")),
    }
}

/// Update kinds outside the default set: Telegram sends them only to bots
/// that list them in `allowed_updates`.
const OPT_IN_UPDATES: [&str; 3] = ["chat_member", "message_reaction", "message_reaction_count"];

/// Whether an update of `kind` reaches a bot that asked for `allowed`
/// (`None`: the default set, every kind but the opt-in ones).
fn wanted(allowed: Option<&[String]>, kind: Option<&str>) -> bool {
    match (allowed, kind) {
        (Some(kinds), Some(kind)) => kinds.iter().any(|a| a == kind),
        (Some(_), None) => false,
        (None, kind) => !kind.is_some_and(|k| OPT_IN_UPDATES.contains(&k)),
    }
}

fn update_kind(update: &Value) -> Option<&str> {
    update
        .as_object()?
        .keys()
        .map(String::as_str)
        .find(|k| *k != "update_id")
}

fn send_message(st: &mut TelegramState, p: &Params) -> Answer {
    let chat_id = chat(st, p)?;
    let parsed = formatted(p, "message is too long")?;
    let buttons = keyboard(p)?.unwrap_or_default();
    let reply = json_field(p, "reply_parameters")?;
    let reply_id =
        match &reply {
            Some(r) => Some(r.get("message_id").and_then(Value::as_i64).ok_or_else(|| {
                ApiError::bad_request("can't parse reply parameters JSON object")
            })?),
            None => int(p, "reply_to_message_id")?,
        };
    let allow_without = flag(p, "allow_sending_without_reply")?
        || reply
            .as_ref()
            .and_then(|r| r.get("allow_sending_without_reply"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    let reply_chat = match reply.as_ref().and_then(|r| r.get("chat_id")) {
        Some(id) => id
            .as_i64()
            .or_else(|| id.as_str().and_then(|s| s.parse().ok()))
            .unwrap_or(chat_id),
        None => chat_id,
    };
    let reply_to = match reply_id {
        Some(id) if st.live(reply_chat, id).is_some() => Some(id),
        Some(_) if allow_without => None,
        Some(_) => return Err(ApiError::bad_request("message to be replied not found")),
        None => None,
    };
    let message_id = st.allocate_message_id(chat_id);
    let message = ChatMessage {
        chat_id,
        message_id,
        from_bot: true,
        text: parsed.text,
        entities: parsed.entities,
        buttons,
        reply_to,
        edits: 0,
        deleted: false,
    };
    let json = message_json(st, &message);
    st.store(message);
    Ok(json)
}

fn edit_message_text(st: &mut TelegramState, p: &Params) -> Answer {
    let index = message_to_edit(st, p)?;
    let parsed = formatted(p, "message is too long")?;
    // Telegram removes the inline keyboard of an edit that sends none.
    let buttons = keyboard(p)?.unwrap_or_default();
    let message = st
        .messages
        .get_mut(index)
        .ok_or_else(|| ApiError::bad_request("message to edit not found"))?;
    if message.text == parsed.text
        && message.entities == parsed.entities
        && message.buttons == buttons
    {
        return Err(ApiError::bad_request(NOT_MODIFIED));
    }
    message.text = parsed.text;
    message.entities = parsed.entities;
    message.buttons = buttons;
    message.edits += 1;
    let message = message.clone();
    Ok(edited_json(st, &message))
}

fn edit_reply_markup(st: &mut TelegramState, p: &Params) -> Answer {
    let index = message_to_edit(st, p)?;
    let buttons = keyboard(p)?.unwrap_or_default();
    let message = st
        .messages
        .get_mut(index)
        .ok_or_else(|| ApiError::bad_request("message to edit not found"))?;
    if message.buttons == buttons {
        return Err(ApiError::bad_request(NOT_MODIFIED));
    }
    message.buttons = buttons;
    message.edits += 1;
    let message = message.clone();
    Ok(edited_json(st, &message))
}

fn edited_json(st: &TelegramState, message: &ChatMessage) -> Value {
    let mut json = message_json(st, message);
    json["edit_date"] = json!(now());
    json
}

/// The index of the bot's message that an edit names.
fn message_to_edit(st: &TelegramState, p: &Params) -> Result<usize, ApiError> {
    if p.contains_key("inline_message_id") {
        // Inline-mode messages are not simulated; hearth sends none.
        return Err(ApiError::bad_request("message to edit not found"));
    }
    let chat_id = chat(st, p)?;
    let message_id = int(p, "message_id")?
        .ok_or_else(|| ApiError::bad_request("message identifier is not specified"))?;
    let index = st
        .live(chat_id, message_id)
        .ok_or_else(|| ApiError::bad_request("message to edit not found"))?;
    if !st.messages.get(index).is_some_and(|m| m.from_bot) {
        return Err(ApiError::bad_request("message can't be edited"));
    }
    Ok(index)
}

fn delete_message(st: &mut TelegramState, p: &Params) -> Answer {
    let chat_id = chat(st, p)?;
    let message_id = int(p, "message_id")?
        .ok_or_else(|| ApiError::bad_request("message identifier is not specified"))?;
    let message = st
        .live(chat_id, message_id)
        .and_then(|i| st.messages.get_mut(i))
        .ok_or_else(|| ApiError::bad_request("message to delete not found"))?;
    message.deleted = true;
    Ok(json!(true))
}

fn send_chat_action(st: &mut TelegramState, p: &Params) -> Answer {
    const ACTIONS: [&str; 11] = [
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    ];
    let chat_id = chat(st, p)?;
    let action = text(p, "action")?.unwrap_or_default();
    if !ACTIONS.contains(&action) {
        return Err(ApiError::bad_request("wrong parameter action in request"));
    }
    st.chat_actions.push((chat_id, action.to_owned()));
    Ok(json!(true))
}

fn answer_callback_query(st: &mut TelegramState, p: &Params) -> Answer {
    let id = text(p, "callback_query_id")?.unwrap_or_default().to_owned();
    // Answering twice is refused like an unknown id.
    if st.queries.get(&id) != Some(&false) {
        return Err(ApiError::bad_request(QUERY_INVALID));
    }
    let notice = text(p, "text")?.map(str::to_owned);
    if notice
        .as_ref()
        .is_some_and(|t| t.encode_utf16().count() > 200)
    {
        return Err(ApiError::bad_request("MESSAGE_TOO_LONG"));
    }
    st.queries.insert(id.clone(), true);
    st.callback_answers.push(CallbackAnswer {
        query_id: id,
        text: notice,
        show_alert: flag(p, "show_alert")?,
    });
    Ok(json!(true))
}

fn set_my_commands(st: &mut TelegramState, p: &Params) -> Answer {
    let Some(Value::Array(list)) = json_field(p, "commands")? else {
        return Err(ApiError::bad_request("parameter \"commands\" is required"));
    };
    if list.len() > 100 {
        return Err(ApiError::bad_request("BOT_COMMANDS_TOO_MUCH"));
    }
    let mut commands = Vec::new();
    for entry in &list {
        let command = entry.get("command").and_then(Value::as_str).unwrap_or("");
        let description = entry
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let valid = (1..=32).contains(&command.len())
            && command
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(ApiError::bad_request("BOT_COMMAND_INVALID"));
        }
        if !(1..=256).contains(&description.chars().count()) {
            return Err(ApiError::bad_request("BOT_COMMAND_DESCRIPTION_INVALID"));
        }
        commands.push((command.to_owned(), description.to_owned()));
    }
    st.commands = commands;
    Ok(json!(true))
}

fn set_webhook(st: &mut TelegramState, p: &Params) -> Answer {
    let url = text(p, "url")?.unwrap_or_default();
    if let Some(secret) = text(p, "secret_token")? {
        let valid = (1..=256).contains(&secret.len())
            && secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(ApiError::bad_request(
                "bad webhook: secret token contains unallowed characters",
            ));
        }
    }
    // One setting for both ways of receiving updates, as Telegram keeps it.
    if let Some(kinds) = allowed_updates(p)? {
        st.allowed_updates = (!kinds.is_empty()).then_some(kinds);
    }
    if url.is_empty() {
        st.webhook = None;
    } else if url.starts_with("https://") {
        st.webhook = Some(url.to_owned());
    } else {
        return Err(ApiError::bad_request(
            "bad webhook: An HTTPS URL must be provided for webhook",
        ));
    }
    drop_pending(st, p)?;
    Ok(json!(true))
}

/// `drop_pending_updates`: confirms every update queued.
fn drop_pending(st: &mut TelegramState, p: &Params) -> Result<(), ApiError> {
    if flag(p, "drop_pending_updates")? {
        st.confirmed = st.next_update_id;
        st.updates.clear();
    }
    Ok(())
}

/// The `chat_id` parameter, of a chat the bot can write to.
fn chat(st: &TelegramState, p: &Params) -> Result<i64, ApiError> {
    let not_found = || ApiError::bad_request("chat not found");
    let id = match p.get("chat_id") {
        None | Some(Value::Null) => return Err(ApiError::bad_request("chat_id is empty")),
        Some(Value::Number(n)) => n.as_i64().ok_or_else(not_found)?,
        Some(Value::String(s)) => match s.parse::<i64>() {
            Ok(id) => id,
            Err(_) => {
                let name = s.strip_prefix('@').unwrap_or(s);
                return st
                    .chats
                    .iter()
                    .find(|(_, c)| c.get("username").and_then(Value::as_str) == Some(name))
                    .map(|(&id, _)| id)
                    .ok_or_else(not_found);
            }
        },
        Some(_) => return Err(not_found()),
    };
    if st.chats.contains_key(&id) {
        Ok(id)
    } else {
        Err(not_found())
    }
}

/// The `text` after entity parsing per `parse_mode`, checked for the limits.
fn formatted(p: &Params, too_long: &str) -> Result<Parsed, ApiError> {
    let raw = text(p, "text")?.unwrap_or_default();
    if raw.trim().is_empty() {
        return Err(ApiError::bad_request("message text is empty"));
    }
    let parsed = match text(p, "parse_mode")? {
        None | Some("") => Parsed {
            text: raw.to_owned(),
            entities: Vec::new(),
        },
        Some(mode) if mode.eq_ignore_ascii_case("html") => parse_html(raw)
            .map_err(|e| ApiError::bad_request(&format!("can't parse entities: {e}")))?,
        // Telegram also knows MarkdownV2 and Markdown; the fake parses HTML only.
        Some(_) => return Err(ApiError::bad_request("unsupported parse_mode")),
    };
    if parsed.text.trim().is_empty() {
        return Err(ApiError::bad_request("message text is empty"));
    }
    if parsed.utf16_len() > TEXT_LIMIT {
        return Err(ApiError::bad_request(too_long));
    }
    Ok(parsed)
}

/// The inline keyboard of `reply_markup`, checked button by button.
fn keyboard(p: &Params) -> Result<Option<Vec<Vec<Button>>>, ApiError> {
    let unparsable = || ApiError::bad_request("can't parse reply keyboard markup JSON object");
    let Some(markup) = json_field(p, "reply_markup")? else {
        return Ok(None);
    };
    let markup = markup.as_object().ok_or_else(unparsable)?;
    let Some(rows) = markup.get("inline_keyboard") else {
        // A reply keyboard, its removal or force_reply: nothing under the message.
        return Ok(Some(Vec::new()));
    };
    let rows = rows.as_array().ok_or_else(unparsable)?;
    let mut keyboard = Vec::new();
    for row in rows {
        let mut buttons = Vec::new();
        for button in row.as_array().ok_or_else(unparsable)? {
            buttons.push(inline_button(button)?);
        }
        keyboard.push(buttons);
    }
    Ok(Some(keyboard))
}

fn inline_button(button: &Value) -> Result<Button, ApiError> {
    const OTHER_ACTIONS: [&str; 7] = [
        "web_app",
        "login_url",
        "switch_inline_query",
        "switch_inline_query_current_chat",
        "switch_inline_query_chosen_chat",
        "copy_text",
        "pay",
    ];
    let obj = button
        .as_object()
        .ok_or_else(|| ApiError::bad_request("can't parse inline keyboard button"))?;
    let label = obj.get("text").and_then(Value::as_str).unwrap_or("");
    if label.trim().is_empty() {
        return Err(ApiError::bad_request("BUTTON_TEXT_EMPTY"));
    }
    let callback_data = match obj.get("callback_data") {
        None => None,
        Some(Value::String(d)) if (1..=CALLBACK_DATA_LIMIT).contains(&d.len()) => Some(d.clone()),
        Some(_) => return Err(ApiError::bad_request("BUTTON_DATA_INVALID")),
    };
    let url = match obj.get("url") {
        None => None,
        Some(Value::String(u))
            if ["http://", "https://", "tg://"]
                .iter()
                .any(|s| u.starts_with(s)) =>
        {
            Some(u.clone())
        }
        Some(_) => return Err(ApiError::bad_request("BUTTON_URL_INVALID")),
    };
    let other = OTHER_ACTIONS.iter().any(|a| obj.contains_key(*a));
    if callback_data.is_none() && url.is_none() && !other {
        return Err(ApiError::bad_request(
            "can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard",
        ));
    }
    Ok(Button {
        text: label.to_owned(),
        callback_data,
        url,
    })
}

/// An integer parameter; numeric strings count, as Telegram reads them.
fn int(p: &Params, key: &str) -> Result<Option<i64>, ApiError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64()),
        Some(Value::String(s)) if s.parse::<i64>().is_ok() => Ok(s.parse().ok()),
        Some(_) => Err(ApiError::bad_request(&format!(
            "field \"{key}\" must be of type Integer"
        ))),
    }
}

fn text<'a>(p: &'a Params, key: &str) -> Result<Option<&'a str>, ApiError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::bad_request(&format!(
            "field \"{key}\" must be of type String"
        ))),
    }
}

fn flag(p: &Params, key: &str) -> Result<bool, ApiError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(_) => Err(ApiError::bad_request(&format!(
            "field \"{key}\" must be of type Boolean"
        ))),
    }
}

/// An object or array parameter, or a string holding one (as form-encoded
/// clients send them).
fn json_field(p: &Params, key: &str) -> Result<Option<Value>, ApiError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ (Value::Object(_) | Value::Array(_))) => Ok(Some(v.clone())),
        Some(Value::String(s)) => serde_json::from_str(s)
            .map(Some)
            .map_err(|_| ApiError::bad_request(&format!("can't parse {key} JSON object"))),
        Some(_) => Err(ApiError::bad_request(&format!(
            "can't parse {key} JSON object"
        ))),
    }
}

impl TelegramState {
    /// The next message id of a chat (ids count up per chat).
    pub(super) fn allocate_message_id(&mut self, chat_id: i64) -> i64 {
        let next = self.next_message_id.entry(chat_id).or_insert(0);
        *next += 1;
        *next
    }

    pub(super) fn store(&mut self, message: ChatMessage) {
        self.index
            .insert((message.chat_id, message.message_id), self.messages.len());
        self.messages.push(message);
    }

    /// The index of a message that exists and is not deleted.
    fn live(&self, chat_id: i64, message_id: i64) -> Option<usize> {
        let &i = self.index.get(&(chat_id, message_id))?;
        self.messages.get(i).filter(|m| !m.deleted).map(|_| i)
    }
}

/// The `Message` object of a stored message.
pub(super) fn message_json(st: &TelegramState, m: &ChatMessage) -> Value {
    let from = if m.from_bot {
        st.bot.clone()
    } else {
        json!({"id": m.chat_id, "is_bot": false, "first_name": format!("User {}", m.chat_id)})
    };
    let chat = st
        .chats
        .get(&m.chat_id)
        .cloned()
        .unwrap_or_else(|| json!({"id": m.chat_id, "type": "private"}));
    let mut json = json!({
        "message_id": m.message_id, "from": from, "chat": chat, "date": now(), "text": m.text,
    });
    if !m.entities.is_empty() {
        json["entities"] = m.entities.iter().map(entity_json).collect();
    }
    if !m.buttons.is_empty() {
        let rows: Vec<Value> = m
            .buttons
            .iter()
            .map(|row| row.iter().map(button_json).collect())
            .collect();
        json["reply_markup"] = json!({"inline_keyboard": rows});
    }
    if let Some(reply_to) = m.reply_to {
        json["reply_to_message"] =
            json!({"message_id": reply_to, "chat": json["chat"].clone(), "date": 0});
    }
    json
}

fn entity_json(e: &Entity) -> Value {
    let mut json = json!({"type": e.kind, "offset": e.offset, "length": e.length});
    if let Some(url) = &e.url {
        json["url"] = json!(url);
    }
    if let Some(language) = &e.language {
        json["language"] = json!(language);
    }
    json
}

fn button_json(b: &Button) -> Value {
    let mut json = json!({"text": b.text});
    if let Some(data) = &b.callback_data {
        json["callback_data"] = json!(data);
    }
    if let Some(url) = &b.url {
        json["url"] = json!(url);
    }
    json
}
