//! Messages API wire types: the request we send and the stream events we parse.
//!
//! Request types borrow from the `ChatRequest` so building a body copies no
//! history text; event types are lenient (every field optional, unknown fields
//! and event types ignored) because Anthropic adds both over time.

use std::borrow::Cow;

use hearth_core::{ChatRequest, Content, Role, ThinkingLevel};
use serde::{Deserialize, Serialize};

/// Output tokens kept free for the answer when thinking raises `max_tokens`.
const ANSWER_HEADROOM: u32 = 4096;

/// The body of `POST /v1/messages`.
#[derive(Debug, Serialize)]
pub(crate) struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Block<'a>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<ThinkingConfig>,
}

#[derive(Debug, Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

/// `{"type": "ephemeral"}`: a prompt-cache breakpoint.
#[derive(Debug, Clone, Copy, Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    ToolUse {
        id: Cow<'a, str>,
        name: &'a str,
        input: serde_json::Value,
    },
    ToolResult {
        tool_use_id: Cow<'a, str>,
        content: &'a str,
    },
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Debug, Serialize)]
struct ThinkingConfig {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

/// The thinking budget of a level; `None` for `Off`.
pub(crate) fn budget_tokens(level: ThinkingLevel) -> Option<u32> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Low => Some(1024),
        ThinkingLevel::Medium => Some(8192),
        ThinkingLevel::High => Some(24576),
    }
}

/// A tool-use id as Anthropic accepts it (`^[a-zA-Z0-9_-]+$`): ids made by
/// other providers are rewritten the same way in calls and results, so they
/// still pair up after a model switch.
fn tool_id(id: &str) -> Cow<'_, str> {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if id.is_empty() {
        Cow::Borrowed("call")
    } else if id.chars().all(ok) {
        Cow::Borrowed(id)
    } else {
        Cow::Owned(id.chars().map(|c| if ok(c) { c } else { '_' }).collect())
    }
}

/// Tool arguments as the JSON object `input` must be; `{}` when they are not one.
fn tool_input(arguments: &str) -> serde_json::Value {
    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(arguments) {
        Ok(map) => serde_json::Value::Object(map),
        Err(_) => serde_json::Value::Object(serde_json::Map::new()),
    }
}

/// Appends blocks as a message of `role`, merging into the previous message
/// when it has the same role: the API wants strict user/assistant alternation.
fn push_message<'a>(out: &mut Vec<WireMessage<'a>>, role: &'static str, blocks: Vec<Block<'a>>) {
    if blocks.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(last) if last.role == role => last.content.extend(blocks),
        _ => out.push(WireMessage {
            role,
            content: blocks,
        }),
    }
}

/// True when the request continues a tool-use turn whose assistant message
/// has no thinking block (it came from another provider, or thinking was
/// off): with thinking enabled the API refuses such a turn, so this one
/// request goes without thinking.
fn unthought_tool_turn(messages: &[WireMessage<'_>]) -> bool {
    let [.., assistant, user] = messages else {
        return false;
    };
    assistant.role == "assistant"
        && user
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolResult { .. }))
        && assistant
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolUse { .. }))
        && !matches!(assistant.content.first(), Some(Block::Thinking { .. }))
}

impl<'a> WireRequest<'a> {
    /// Converts a request for the provider configured as `provider`.
    ///
    /// Thinking goes back only when that provider produced it and signed it;
    /// tool results become `tool_result` blocks of a user message; empty text
    /// is dropped (the API refuses empty text blocks); messages of the same
    /// role are merged, results first in a user message and thinking first
    /// in an assistant message, as the API requires. Thinking is requested
    /// unless the request continues a tool-use turn that has no thinking
    /// block to send back (see `unthought_tool_turn`).
    pub(crate) fn from_request(req: &'a ChatRequest, provider: &str, max_tokens: u32) -> Self {
        // The run's own limit wins over the provider's configured default.
        let max_tokens = req.max_output_tokens.unwrap_or(max_tokens);
        let mut messages: Vec<WireMessage<'a>> = Vec::with_capacity(req.messages.len());
        for msg in &req.messages {
            let mut own = Vec::with_capacity(msg.content.len());
            let mut results = Vec::new();
            for c in &msg.content {
                match c {
                    Content::Text { text } if !text.is_empty() => own.push(Block::Text {
                        text,
                        cache_control: None,
                    }),
                    Content::Text { .. } => {}
                    Content::Thinking {
                        text,
                        signature,
                        provider: from,
                    } => {
                        // Only the assistant role can carry thinking.
                        if msg.role == Role::Assistant
                            && from.as_deref() == Some(provider)
                            && let Some(sig) = signature.as_deref().filter(|s| !s.is_empty())
                        {
                            own.push(Block::Thinking {
                                thinking: text,
                                signature: sig,
                            });
                        }
                    }
                    Content::ToolCall {
                        id,
                        name,
                        arguments,
                    } => {
                        if msg.role == Role::Assistant {
                            own.push(Block::ToolUse {
                                id: tool_id(id),
                                name,
                                input: tool_input(arguments),
                            });
                        }
                    }
                    Content::ToolResult { call_id, output } => results.push(Block::ToolResult {
                        tool_use_id: tool_id(call_id),
                        content: output,
                    }),
                }
            }
            match msg.role {
                Role::Assistant => {
                    push_message(&mut messages, "assistant", own);
                    push_message(&mut messages, "user", results);
                }
                Role::User | Role::Tool => {
                    results.append(&mut own);
                    push_message(&mut messages, "user", results);
                }
            }
        }
        for m in &mut messages {
            // Stable sorts: order within each kind stays as given.
            if m.role == "user" {
                m.content
                    .sort_by_key(|b| !matches!(b, Block::ToolResult { .. }));
            } else {
                m.content
                    .sort_by_key(|b| !matches!(b, Block::Thinking { .. }));
            }
        }
        let system = if req.system.is_empty() {
            Vec::new()
        } else {
            vec![Block::Text {
                text: &req.system,
                cache_control: Some(EPHEMERAL),
            }]
        };
        let last = req.tools.len().saturating_sub(1);
        let tools = req
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
                cache_control: (i == last).then_some(EPHEMERAL),
            })
            .collect();
        let budget = budget_tokens(req.thinking).filter(|_| !unthought_tool_turn(&messages));
        let thinking = budget.map(|budget_tokens| ThinkingConfig {
            kind: "enabled",
            budget_tokens,
        });
        let max_tokens = match budget {
            // The budget must stay below max_tokens, with room for the answer.
            Some(budget) if max_tokens <= budget => budget.saturating_add(ANSWER_HEADROOM),
            _ => max_tokens,
        };
        Self {
            model: &req.model,
            max_tokens,
            stream: true,
            system,
            messages,
            tools,
            thinking,
        }
    }
}

/// One `data:` payload of the stream, whatever its `type`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(crate) kind: Cow<'a, str>,
    #[serde(default)]
    pub(crate) index: Option<u64>,
    #[serde(default)]
    pub(crate) message: Option<MessageStart>,
    #[serde(default)]
    pub(crate) content_block: Option<BlockStart<'a>>,
    #[serde(default, borrow)]
    pub(crate) delta: Option<Delta<'a>>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    #[serde(default)]
    pub(crate) error: Option<WireError>,
}

/// `message_start.message`: only its usage matters here.
#[derive(Debug, Deserialize)]
pub(crate) struct MessageStart {
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
}

/// `content_block_start.content_block`.
#[derive(Debug, Deserialize)]
pub(crate) struct BlockStart<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(crate) kind: Cow<'a, str>,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) text: Option<String>,
    #[serde(default)]
    pub(crate) thinking: Option<String>,
    #[serde(default)]
    pub(crate) signature: Option<String>,
}

/// `content_block_delta.delta` or `message_delta.delta`.
#[derive(Debug, Deserialize)]
pub(crate) struct Delta<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(crate) kind: Option<Borrowed<'a>>,
    #[serde(default)]
    pub(crate) text: Option<String>,
    #[serde(default)]
    pub(crate) partial_json: Option<String>,
    #[serde(default)]
    pub(crate) thinking: Option<String>,
    #[serde(default)]
    pub(crate) signature: Option<String>,
    #[serde(default)]
    pub(crate) stop_reason: Option<String>,
}

/// A string borrowed from the payload when it has no escapes. serde borrows
/// a `Cow` field but never one inside an `Option`, hence this newtype: it
/// saves an allocation per delta for the delta's `type`.
#[derive(Debug, Deserialize)]
pub(crate) struct Borrowed<'a>(#[serde(borrow)] pub(crate) Cow<'a, str>);

/// The `usage` object of `message_start.message` and `message_delta`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub(crate) input_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) output_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) cache_creation_input_tokens: Option<u64>,
}

/// `{"type": "...", "message": "..."}` of an `error` event or error body.
#[derive(Debug, Deserialize)]
pub(crate) struct WireError {
    #[serde(rename = "type", default)]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::{Message, ToolSpec};
    use serde_json::json;

    fn req(messages: Vec<Message>, thinking: ThinkingLevel) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system: String::new(),
            messages,
            tools: Default::default(),
            thinking,
            max_output_tokens: None,
        }
    }

    #[test]
    fn thinking_budget_raises_max_tokens() {
        for (level, budget, max) in [
            (ThinkingLevel::Low, 1024, 8192),
            (ThinkingLevel::Medium, 8192, 8192 + 4096),
            (ThinkingLevel::High, 24576, 24576 + 4096),
        ] {
            let r = req(vec![Message::text(Role::User, "x")], level);
            let v = serde_json::to_value(WireRequest::from_request(&r, "p", 8192)).unwrap();
            assert_eq!(
                v["thinking"],
                json!({"type": "enabled", "budget_tokens": budget})
            );
            assert_eq!(v["max_tokens"], max, "{level:?}");
        }
        let r = req(vec![Message::text(Role::User, "x")], ThinkingLevel::Off);
        let v = serde_json::to_value(WireRequest::from_request(&r, "p", 100)).unwrap();
        assert!(v.get("thinking").is_none());
        assert!(v.get("system").is_none());
        assert!(v.get("tools").is_none());
        assert_eq!(v["max_tokens"], 100);
        let mut r = req(vec![Message::text(Role::User, "x")], ThinkingLevel::Off);
        r.max_output_tokens = Some(321);
        let v = serde_json::to_value(WireRequest::from_request(&r, "p", 8192)).unwrap();
        assert_eq!(v["max_tokens"], 321, "the run's limit wins");
    }

    #[test]
    fn tool_turn_without_thinking_block_turns_thinking_off() {
        let call = Content::ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments: "{}".into(),
        };
        let result = Message {
            role: Role::Tool,
            content: vec![Content::ToolResult {
                call_id: "c".into(),
                output: "{}".into(),
            }],
        };
        let signed = Content::Thinking {
            text: "hm".into(),
            signature: Some("s".into()),
            provider: Some("p".into()),
        };
        let history = |assistant: Vec<Content>| {
            req(
                vec![
                    Message::text(Role::User, "x"),
                    Message {
                        role: Role::Assistant,
                        content: assistant,
                    },
                    result.clone(),
                ],
                ThinkingLevel::Low,
            )
        };
        let on = |r: &ChatRequest, provider: &str| {
            serde_json::to_value(WireRequest::from_request(r, provider, 4096)).unwrap()["thinking"]
                .is_object()
        };
        assert!(on(&history(vec![signed.clone(), call.clone()]), "p"));
        assert!(!on(&history(vec![signed.clone(), call.clone()]), "other"));
        assert!(!on(&history(vec![call.clone()]), "p"));
        // A new user turn after the tool loop needs no thinking block.
        let mut done = history(vec![call]);
        done.messages.push(Message::text(Role::Assistant, "ok"));
        done.messages.push(Message::text(Role::User, "next"));
        assert!(on(&done, "p"));
    }

    #[test]
    fn ids_inputs_and_ordering() {
        assert_eq!(tool_id("call_1-a"), "call_1-a");
        assert_eq!(tool_id("fc/1.2"), "fc_1_2");
        assert_eq!(tool_id(""), "call");
        assert_eq!(tool_input("[1]"), json!({}));
        assert_eq!(tool_input("{\"a\":1"), json!({}));
        assert_eq!(tool_input("{\"a\":1}"), json!({"a": 1}));

        let mut r = req(
            vec![
                Message::text(Role::User, "a"),
                Message {
                    role: Role::User,
                    content: vec![
                        Content::Text { text: "b".into() },
                        Content::ToolResult {
                            call_id: "x.y".into(),
                            output: "{}".into(),
                        },
                        Content::Text {
                            text: String::new(),
                        },
                    ],
                },
                Message::text(Role::Assistant, ""),
            ],
            ThinkingLevel::Off,
        );
        r.tools = vec![
            ToolSpec {
                name: "t1".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            },
            ToolSpec {
                name: "t2".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            },
        ]
        .into();
        let v = serde_json::to_value(WireRequest::from_request(&r, "p", 10)).unwrap();
        assert_eq!(
            v["messages"],
            json!([{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "x_y", "content": "{}"},
                {"type": "text", "text": "a"},
                {"type": "text", "text": "b"}
            ]}])
        );
        assert!(v["tools"][0].get("cache_control").is_none());
        assert_eq!(v["tools"][1]["cache_control"], json!({"type": "ephemeral"}));
    }
}
