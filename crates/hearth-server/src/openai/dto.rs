//! OpenAI's request and response shapes, and the mapping of a request's
//! messages onto hearth's history and message.
//!
//! Requests are read leniently: OpenAI clients send many optional fields
//! (`temperature`, `max_tokens`, `seed`, ...), which hearth ignores because
//! its own configuration, limits and budget decide them. Only fields whose
//! meaning hearth cannot honour are refused, each with `param` naming it.

use hearth_core::{Message, Role};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::OpenAiError;

/// The prefix of the task prompts (title, tags, follow-ups) that clients
/// such as Open WebUI send beside the chat itself.
const TASK_PREFIX: &str = "### Task:";

/// `POST /openai/v1/chat/completions`, the fields hearth reads.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct ChatCompletionRequest {
    /// `hearth` or `hearth/<provider>/<model>`; echoed in the answer.
    /// Another model, or a model that is not configured, is 404
    /// `model_not_found`.
    #[schema(pattern = "^hearth(/.+)?$")]
    pub model: String,
    /// The whole conversation; the last one is the user's new message (or
    /// instructions), with text that is not blank.
    #[schema(min_items = 1)]
    pub messages: Vec<ChatMessage>,
    /// Answer as `chat.completion.chunk` events.
    #[serde(default)]
    pub stream: Option<bool>,
    /// `include_usage` adds a usage chunk before `[DONE]`.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// The end user: the run's user and thread.
    #[serde(default)]
    pub user: Option<String>,
    /// Number of choices; hearth gives one.
    #[serde(default, deserialize_with = "crate::schemas::whole_u64")]
    #[schema(minimum = 1, maximum = 1)]
    pub n: Option<u64>,
    /// Client-side tools: none (refused until supported).
    #[serde(default)]
    #[schema(schema_with = no_client_tools)]
    pub tools: Option<Value>,
    /// Legacy client-side functions: none (refused until supported).
    #[serde(default)]
    #[schema(schema_with = no_client_tools)]
    pub functions: Option<Value>,
    /// How to use the client's tools: `none` or `auto` (there are none).
    #[serde(default)]
    #[schema(schema_with = no_tool_choice)]
    pub tool_choice: Option<Value>,
    /// Legacy `tool_choice`: `none` or `auto`.
    #[serde(default)]
    #[schema(schema_with = no_tool_choice)]
    pub function_call: Option<Value>,
}

/// `stream_options`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct StreamOptions {
    /// Send the usage in a last chunk with no choices.
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// One message of the conversation.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct ChatMessage {
    /// `system`, `developer`, `user` or `assistant`.
    #[schema(value_type = ChatRole)]
    pub role: String,
    /// A string, an array of text parts, or null.
    #[serde(default)]
    #[schema(schema_with = message_content)]
    pub content: Option<Value>,
    /// An assistant's calls of client-side tools (refused).
    #[serde(default)]
    pub tool_calls: Option<Value>,
}

/// A message's role, of those hearth takes (client-side tool results,
/// `tool` and `function`, are refused).
#[derive(Debug, utoipa::ToSchema)]
#[schema(rename_all = "snake_case")]
#[expect(dead_code, reason = "the document's enum only: a role is read as text")]
pub enum ChatRole {
    /// Instructions.
    System,
    /// Instructions (OpenAI's newer name).
    Developer,
    /// The user's turn.
    User,
    /// An earlier answer.
    Assistant,
}

/// `tools` and `functions`: absent, null or an empty array.
fn no_client_tools() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, Object, Schema, SchemaType, Type};
    Schema::Array(
        ArrayBuilder::new()
            .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
            .items(Object::new())
            .max_items(Some(0))
            .build(),
    )
}

/// `tool_choice` and `function_call`: `none`, `auto` or null.
fn no_tool_choice() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
    Schema::Object(
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
            .enum_values(Some([Some("none"), Some("auto"), None]))
            .build(),
    )
}

/// A message's `content`: a string, null, or an array of text parts.
fn message_content() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{
        ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
    };
    let part = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "type",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["text"])),
        )
        .property("text", ObjectBuilder::new().schema_type(Type::String))
        .required("type")
        .required("text");
    Schema::OneOf(
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Null])),
            )
            .item(ArrayBuilder::new().items(part))
            .build(),
    )
}

/// What a request asks hearth to run.
#[derive(Debug, PartialEq)]
pub struct Conversation {
    /// The messages before the last user message.
    pub history: Vec<Message>,
    /// The last user message (with any instructions sent just before it),
    /// or the instructions that end a request with no user message after
    /// them.
    pub text: String,
    /// The first user message as the client sent it (without the
    /// instructions before it), which every later request of the same
    /// conversation repeats; the text itself when there is none.
    pub opening: String,
    /// The request ends with instructions and no user message after them:
    /// nothing new from the user (a client's own prompt about the chat).
    pub no_user_turn: bool,
}

impl Conversation {
    /// A task prompt (title, tags, follow-up suggestions) rather than a turn
    /// of the chat.
    pub fn is_task(&self) -> bool {
        self.text.trim_start().starts_with(TASK_PREFIX)
    }

    /// Not the user's turn: a client's task prompt, or a request with no new
    /// user message. It runs apart from the chat and neither answers nor
    /// denies what the chat waits for.
    pub fn is_background(&self) -> bool {
        self.no_user_turn || self.is_task()
    }
}

impl ChatCompletionRequest {
    /// Refuses what hearth cannot do yet: client-side tools and more than one choice.
    pub fn check_supported(&self) -> Result<(), OpenAiError> {
        const TOOLS: &str = "client-side tools are not supported by hearth yet: hearth runs its own \
                             tools and does not expose them; send the request without";
        for (name, value) in [("tools", &self.tools), ("functions", &self.functions)] {
            if value
                .as_ref()
                .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
            {
                return Err(OpenAiError::invalid(format!("{TOOLS} `{name}`"), name));
            }
        }
        for (name, value) in [
            ("tool_choice", &self.tool_choice),
            ("function_call", &self.function_call),
        ] {
            // `none` and `auto` without tools ask for nothing; clients send them by default.
            let harmless = value
                .as_ref()
                .is_none_or(|v| v.is_null() || v == "none" || v == "auto");
            if !harmless {
                return Err(OpenAiError::invalid(format!("{TOOLS} `{name}`"), name));
            }
        }
        if self.n.is_some_and(|n| n != 1) {
            return Err(OpenAiError::invalid(
                "hearth gives one choice: n must be 1",
                "n",
            ));
        }
        Ok(())
    }

    /// `stream_options.include_usage`.
    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// The conversation as hearth's history and new message. System and
    /// developer messages are the client's instructions: they join the next
    /// user message (hearth's own system prompt stays first and in charge).
    /// Instructions with no user message after them are the message
    /// themselves, of a request that is not the user's turn.
    pub fn conversation(&self) -> Result<Conversation, OpenAiError> {
        let mut history = Vec::with_capacity(self.messages.len());
        let mut instructions: Vec<String> = Vec::new();
        let mut opening = None;
        for (i, m) in self.messages.iter().enumerate() {
            let text = content_text(m.content.as_ref(), i)?;
            match m.role.as_str() {
                "system" | "developer" => instructions.push(text),
                "user" => {
                    if opening.is_none() {
                        opening = Some(text.clone());
                    }
                    instructions.push(text);
                    let joined = instructions
                        .drain(..)
                        .filter(|t| !t.is_empty())
                        .collect::<Vec<_>>()
                        .join("\n\n");
                    history.push(Message::text(Role::User, joined));
                }
                "assistant" => {
                    if m.tool_calls.as_ref().is_some_and(|v| !v.is_null()) {
                        return Err(OpenAiError::invalid(
                            "client-side tool calls are not supported by hearth yet",
                            format!("messages[{i}].tool_calls"),
                        ));
                    }
                    history.push(Message::text(Role::Assistant, text));
                }
                "tool" | "function" => {
                    return Err(OpenAiError::invalid(
                        "client-side tool results are not supported by hearth yet",
                        format!("messages[{i}].role"),
                    ));
                }
                other => {
                    return Err(OpenAiError::invalid(
                        format!(
                            "unknown role {other:?}; one of system, developer, user, assistant"
                        ),
                        format!("messages[{i}].role"),
                    ));
                }
            }
        }
        let last = self.messages.len().saturating_sub(1);
        let no_user_turn = !instructions.is_empty();
        let text = if no_user_turn {
            instructions
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join("\n\n")
        } else {
            match history.pop() {
                Some(m) if m.role == Role::User => m.joined_text(),
                _ => {
                    return Err(OpenAiError::invalid(
                        "the last message must be the user's (role \"user\") or instructions \
                         (role \"system\" or \"developer\")",
                        format!("messages[{last}]"),
                    ));
                }
            }
        };
        if text.trim().is_empty() {
            return Err(OpenAiError::invalid(
                "the last message has no text",
                format!("messages[{last}].content"),
            ));
        }
        let opening = opening.unwrap_or_else(|| text.clone());
        Ok(Conversation {
            history,
            text,
            opening,
            no_user_turn,
        })
    }
}

/// The text of a message's `content`: a string, text parts joined, or
/// nothing. Other parts (images, audio, files) are refused, not dropped.
fn content_text(content: Option<&Value>, i: usize) -> Result<String, OpenAiError> {
    let param = || format!("messages[{i}].content");
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for part in parts {
                match (part["type"].as_str(), part["text"].as_str()) {
                    (Some("text"), Some(t)) => out.push_str(t),
                    (kind, _) => {
                        return Err(OpenAiError::invalid(
                            format!(
                                "content part of type {} is not supported; send text",
                                kind.unwrap_or("(none)")
                            ),
                            param(),
                        ));
                    }
                }
            }
            Ok(out)
        }
        Some(_) => Err(OpenAiError::invalid(
            "content must be a string or an array of text parts",
            param(),
        )),
    }
}

/// `GET /openai/v1/models`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ModelList {
    /// Always `list`.
    pub object: &'static str,
    /// The models.
    pub data: Vec<ModelObject>,
}

/// One model.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ModelObject {
    /// `hearth` or `hearth/<provider>/<model>`.
    pub id: String,
    /// Always `model`.
    pub object: &'static str,
    /// Unix seconds; hearth has no creation date for a model: 0.
    pub created: i64,
    /// `hearth`, or the provider's name.
    pub owned_by: String,
}

/// Token counts, OpenAI's names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct UsageBody {
    /// Input tokens of every model call of the run.
    pub prompt_tokens: u64,
    /// Output tokens of every model call of the run.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn req(v: Value) -> ChatCompletionRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn messages_become_history_and_the_last_user_message() {
        let r = req(json!({"model": "hearth", "messages": [
            {"role": "system", "content": "be terse"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": [{"type": "text", "text": "how "}, {"type": "text", "text": "are you"}]},
        ], "temperature": 0.2}));
        assert_eq!(
            r.conversation().unwrap(),
            Conversation {
                history: vec![
                    Message::text(Role::User, "be terse\n\nhi"),
                    Message::text(Role::Assistant, "hello"),
                ],
                text: "how are you".into(),
                opening: "hi".into(),
                no_user_turn: false,
            }
        );
    }

    #[test]
    fn instructions_after_the_last_user_message_are_not_the_users_turn() {
        let r = req(json!({"model": "hearth", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "system", "content": "Suggest a title for this chat."},
        ]}));
        let c = r.conversation().unwrap();
        assert_eq!(
            c,
            Conversation {
                history: vec![
                    Message::text(Role::User, "hi"),
                    Message::text(Role::Assistant, "hello"),
                ],
                text: "Suggest a title for this chat.".into(),
                opening: "hi".into(),
                no_user_turn: true,
            }
        );
        assert!(c.is_background() && !c.is_task());
        // Instructions alone: the same, and they name the conversation.
        let r = req(json!({"model": "hearth", "messages": [
            {"role": "developer", "content": "Summarize: ..."}]}));
        let c = r.conversation().unwrap();
        assert!(c.is_background());
        assert_eq!(c.opening, "Summarize: ...");
        // A user's message is their turn.
        let r = req(json!({"model": "hearth", "messages": [
            {"role": "system", "content": "be terse"}, {"role": "user", "content": "hi"}]}));
        assert!(!r.conversation().unwrap().is_background());
    }

    #[test]
    fn refusals_name_the_field() {
        let cases = [
            (json!({"tools": [{"type": "function"}]}), "tools"),
            (json!({"functions": [{"name": "f"}]}), "functions"),
            (json!({"tool_choice": "required"}), "tool_choice"),
            (json!({"function_call": {"name": "f"}}), "function_call"),
            (json!({"n": 2}), "n"),
        ];
        for (extra, param) in cases {
            let mut v = json!({"model": "hearth", "messages": [{"role": "user", "content": "x"}]});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let e = req(v).check_supported().unwrap_err();
            assert_eq!(e.body()["error"]["param"], param);
            assert_eq!(e.body()["error"]["type"], "invalid_request_error");
        }
        // What clients send by default asks for no tools.
        let r = req(json!({"model": "hearth", "messages": [], "tools": [], "tool_choice": "auto"}));
        assert!(r.check_supported().is_ok());
    }

    #[test]
    fn bad_conversations_are_refused_with_the_message_index() {
        let cases = [
            (json!([]), "messages[0]"),
            (
                json!([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]),
                "messages[1]",
            ),
            (
                json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
                "messages[0].content",
            ),
            (
                json!([{"role": "tool", "content": "x"}]),
                "messages[0].role",
            ),
            (
                json!([{"role": "assistant", "tool_calls": [{}]}, {"role": "user", "content": "x"}]),
                "messages[0].tool_calls",
            ),
            (
                json!([{"role": "user", "content": "  "}]),
                "messages[0].content",
            ),
            (
                json!([{"role": "user", "content": 7}]),
                "messages[0].content",
            ),
        ];
        for (messages, param) in cases {
            let e = req(json!({"model": "hearth", "messages": messages}))
                .conversation()
                .unwrap_err();
            assert_eq!(e.body()["error"]["param"], param, "{messages}");
        }
    }

    #[test]
    fn task_prompts_are_recognised() {
        let r = req(json!({"model": "hearth", "messages": [
            {"role": "user", "content": "### Task:\nGenerate a concise, 3-5 word title"}]}));
        let c = r.conversation().unwrap();
        assert!(c.is_task() && c.is_background());
        let r =
            req(json!({"model": "hearth", "messages": [{"role": "user", "content": "a task"}]}));
        let c = r.conversation().unwrap();
        assert!(!c.is_task() && !c.is_background());
    }
}
