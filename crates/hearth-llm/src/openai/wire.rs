//! Responses API wire types: the request we send and the stream events we parse.
//!
//! Request types borrow from the `ChatRequest` so building a body copies no
//! history text; event types are lenient (every field optional, unknown fields
//! ignored) because OpenAI adds both fields and event types over time.
//!
//! Reasoning travels across turns statelessly (`store: false`): the reasoning
//! item's `id` and `encrypted_content` are kept in the `Thinking` signature as
//! compact JSON, `{"id":..,"encrypted_content":..}` for one item or an array
//! of such objects when an answer had several, and sent back as `reasoning`
//! input items.

use std::borrow::Cow;

use hearth_core::{ChatRequest, Content, Role, ThinkingLevel};
use serde::{Deserialize, Serialize};

/// The `include` entry that makes the API return `encrypted_content`.
const INCLUDE_ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

/// The body of `POST /responses`.
#[derive(Debug, Serialize)]
pub(crate) struct WireRequest<'a> {
    model: &'a str,
    stream: bool,
    store: bool,
    #[serde(skip_serializing_if = "str::is_empty")]
    instructions: &'a str,
    input: Vec<Item<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<ReasoningConfig>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    include: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
}

/// One input item.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item<'a> {
    Message {
        role: &'static str,
        content: Vec<Part<'a>>,
    },
    Reasoning {
        #[serde(skip_serializing_if = "str::is_empty")]
        id: String,
        encrypted_content: String,
        summary: [(); 0],
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: &'a str,
    },
}

/// A content part of a message item.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    InputText { text: &'a str },
    OutputText { text: &'a str },
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
    strict: bool,
}

#[derive(Debug, Serialize)]
struct ReasoningConfig {
    effort: &'static str,
    summary: &'static str,
}

/// One reasoning item as kept in a `Thinking` signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SignedReasoning {
    #[serde(default)]
    pub(crate) id: String,
    pub(crate) encrypted_content: String,
}

/// The signature text for the reasoning items of one answer: one object for
/// one item, an array for several.
pub(crate) fn encode_signature(items: &[SignedReasoning]) -> String {
    // Serialising strings into a String cannot fail.
    match items {
        [one] => serde_json::to_string(one).unwrap_or_default(),
        many => serde_json::to_string(many).unwrap_or_default(),
    }
}

/// The reasoning items of a signature; empty when it is not one of ours.
pub(crate) fn decode_signature(sig: &str) -> Vec<SignedReasoning> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(SignedReasoning),
        Many(Vec<SignedReasoning>),
    }
    match serde_json::from_str::<OneOrMany>(sig) {
        Ok(OneOrMany::One(one)) => vec![one],
        Ok(OneOrMany::Many(many)) => many,
        Err(_) => Vec::new(),
    }
    .into_iter()
    .filter(|r| !r.encrypted_content.is_empty())
    .collect()
}

/// The reasoning effort of a level; `None` for `Off`.
fn effort(level: ThinkingLevel) -> Option<&'static str> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Low => Some("low"),
        ThinkingLevel::Medium => Some("medium"),
        ThinkingLevel::High => Some("high"),
    }
}

/// Tool-call arguments as sent back: the API wants a JSON text, so a call
/// recorded with no arguments at all goes back as `{}`.
fn arguments(args: &str) -> &str {
    if args.trim().is_empty() { "{}" } else { args }
}

impl<'a> WireRequest<'a> {
    /// Converts a request for the provider configured as `provider`.
    ///
    /// Each message becomes items in order: for the assistant, its own signed
    /// reasoning items first (thinking from another provider, or unsigned, is
    /// dropped), then one message item holding its non-empty text parts, then
    /// its `function_call`s; for the user and tool roles, `function_call_output`s
    /// first, then a message item with the text. Empty messages add nothing.
    pub(crate) fn from_request(req: &'a ChatRequest, provider: &str) -> Self {
        let mut input: Vec<Item<'a>> = Vec::with_capacity(req.messages.len() + 4);
        for msg in &req.messages {
            let assistant = msg.role == Role::Assistant;
            let mut reasoning = Vec::new();
            let mut parts = Vec::new();
            let mut calls = Vec::new();
            let mut results = Vec::new();
            for c in &msg.content {
                match c {
                    Content::Text { text } if !text.is_empty() => parts.push(if assistant {
                        Part::OutputText { text }
                    } else {
                        Part::InputText { text }
                    }),
                    Content::Text { .. } => {}
                    Content::Thinking {
                        signature,
                        provider: from,
                        ..
                    } => {
                        if assistant
                            && from.as_deref() == Some(provider)
                            && let Some(sig) = signature.as_deref()
                        {
                            reasoning.extend(decode_signature(sig).into_iter().map(|r| {
                                Item::Reasoning {
                                    id: r.id,
                                    encrypted_content: r.encrypted_content,
                                    summary: [],
                                }
                            }));
                        }
                    }
                    Content::ToolCall {
                        id,
                        name,
                        arguments: args,
                    } => {
                        if assistant {
                            calls.push(Item::FunctionCall {
                                call_id: id,
                                name,
                                arguments: arguments(args),
                            });
                        }
                    }
                    Content::ToolResult { call_id, output } => {
                        results.push(Item::FunctionCallOutput { call_id, output });
                    }
                }
            }
            let message = (!parts.is_empty()).then_some(Item::Message {
                role: if assistant { "assistant" } else { "user" },
                content: parts,
            });
            if assistant {
                input.extend(reasoning);
                input.extend(message);
                input.extend(calls);
                input.extend(results);
            } else {
                input.extend(results);
                input.extend(message);
            }
        }
        let tools = req
            .tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
                strict: false,
            })
            .collect();
        let effort = effort(req.thinking);
        Self {
            model: &req.model,
            stream: true,
            store: false,
            instructions: &req.system,
            input,
            tools,
            reasoning: effort.map(|effort| ReasoningConfig {
                effort,
                summary: "auto",
            }),
            include: if effort.is_some() {
                vec![INCLUDE_ENCRYPTED_REASONING]
            } else {
                Vec::new()
            },
            max_output_tokens: req.max_output_tokens,
        }
    }
}

/// One `data:` payload of the stream, whatever its `type`.
///
/// A plain `response.output_text.delta` allocates only its `delta`: the
/// `type` and `item_id` are borrowed from the payload (unless escaped), and
/// `sequence_number`, `content_index`, `logprobs` and `obfuscation` are
/// skipped unread.
#[derive(Debug, Deserialize)]
pub(crate) struct WireEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(crate) kind: Cow<'a, str>,
    #[serde(default)]
    pub(crate) output_index: Option<u64>,
    #[serde(default, borrow)]
    pub(crate) item_id: Option<Borrowed<'a>>,
    #[serde(default)]
    pub(crate) summary_index: Option<u64>,
    #[serde(default, borrow)]
    pub(crate) item: Option<OutputItem<'a>>,
    #[serde(default)]
    pub(crate) delta: Option<String>,
    #[serde(default)]
    pub(crate) arguments: Option<String>,
    #[serde(default)]
    pub(crate) response: Option<WireResponse>,
    /// `code` of an `error` event.
    #[serde(default)]
    pub(crate) code: Option<String>,
    /// `message` of an `error` event.
    #[serde(default)]
    pub(crate) message: Option<String>,
    /// A nested error object, as some compatible servers send it.
    #[serde(default)]
    pub(crate) error: Option<WireError>,
}

/// A string borrowed from the payload when it has no escapes. serde borrows
/// a `Cow` field but never one inside an `Option`, hence this newtype: it
/// saves an allocation per delta for the delta's `item_id`.
#[derive(Debug, Deserialize)]
pub(crate) struct Borrowed<'a>(#[serde(borrow)] pub(crate) Cow<'a, str>);

impl Borrowed<'_> {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Just the `type` of a payload, for telling unknown events (ignored) from
/// known ones with an unexpected shape (malformed).
#[derive(Debug, Deserialize)]
pub(crate) struct EventType<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(crate) kind: Cow<'a, str>,
}

/// An output item of `response.output_item.added` / `.done`.
#[derive(Debug, Deserialize)]
pub(crate) struct OutputItem<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(crate) kind: Cow<'a, str>,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) call_id: Option<String>,
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) arguments: Option<String>,
    #[serde(default)]
    pub(crate) encrypted_content: Option<String>,
    #[serde(default)]
    pub(crate) summary: Option<Vec<SummaryPart>>,
}

/// One `summary_text` part of a reasoning item.
#[derive(Debug, Deserialize)]
pub(crate) struct SummaryPart {
    #[serde(default)]
    pub(crate) text: Option<String>,
}

/// The response object of the lifecycle events: only what ends a stream.
#[derive(Debug, Deserialize)]
pub(crate) struct WireResponse {
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    #[serde(default)]
    pub(crate) incomplete_details: Option<IncompleteDetails>,
    #[serde(default)]
    pub(crate) error: Option<WireError>,
}

/// `response.incomplete_details`.
#[derive(Debug, Deserialize)]
pub(crate) struct IncompleteDetails {
    #[serde(default)]
    pub(crate) reason: Option<String>,
}

/// `response.usage`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub(crate) input_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) output_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    pub(crate) output_tokens_details: Option<OutputDetails>,
}

/// `usage.input_tokens_details`.
#[derive(Debug, Deserialize)]
pub(crate) struct InputDetails {
    #[serde(default)]
    pub(crate) cached_tokens: Option<u64>,
}

/// `usage.output_tokens_details`.
#[derive(Debug, Deserialize)]
pub(crate) struct OutputDetails {
    #[serde(default)]
    pub(crate) reasoning_tokens: Option<u64>,
}

/// `{"code": ..., "message": ...}` of `response.error` or a nested error.
#[derive(Debug, Deserialize)]
pub(crate) struct WireError {
    #[serde(default)]
    pub(crate) code: Option<String>,
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
    fn signatures_round_trip_one_or_many() {
        let one = vec![SignedReasoning {
            id: "rs_1".into(),
            encrypted_content: "gAAA==".into(),
        }];
        let sig = encode_signature(&one);
        assert_eq!(sig, r#"{"id":"rs_1","encrypted_content":"gAAA=="}"#);
        assert_eq!(decode_signature(&sig), one);
        let mut two = one.clone();
        two.push(SignedReasoning {
            id: "rs_2".into(),
            encrypted_content: "x".into(),
        });
        assert_eq!(decode_signature(&encode_signature(&two)), two);
        assert!(decode_signature("EqQBsig==").is_empty());
        assert!(decode_signature(r#"{"id":"rs","encrypted_content":""}"#).is_empty());
    }

    #[test]
    fn max_output_tokens_is_sent_when_set() {
        let mut r = req(vec![Message::text(Role::User, "hi")], ThinkingLevel::Off);
        let v = serde_json::to_value(WireRequest::from_request(&r, "p")).unwrap();
        assert!(v.get("max_output_tokens").is_none(), "{v}");
        r.max_output_tokens = Some(321);
        let v = serde_json::to_value(WireRequest::from_request(&r, "p")).unwrap();
        assert_eq!(v["max_output_tokens"], 321);
    }

    #[test]
    fn request_shape_with_and_without_reasoning() {
        let mut r = req(vec![Message::text(Role::User, "hi")], ThinkingLevel::High);
        r.system = "sys".into();
        r.tools = vec![ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
        }]
        .into();
        let v = serde_json::to_value(WireRequest::from_request(&r, "p")).unwrap();
        assert_eq!(
            v,
            json!({
                "model": "m", "stream": true, "store": false, "instructions": "sys",
                "input": [{"type": "message", "role": "user",
                           "content": [{"type": "input_text", "text": "hi"}]}],
                "tools": [{"type": "function", "name": "t", "description": "d",
                           "parameters": {"type": "object"}, "strict": false}],
                "reasoning": {"effort": "high", "summary": "auto"},
                "include": ["reasoning.encrypted_content"]
            })
        );
        let r = req(vec![Message::text(Role::User, "hi")], ThinkingLevel::Off);
        let v = serde_json::to_value(WireRequest::from_request(&r, "p")).unwrap();
        for absent in ["instructions", "tools", "reasoning", "include"] {
            assert!(v.get(absent).is_none(), "{absent}: {v}");
        }
    }

    #[test]
    fn assistant_items_order_and_empty_arguments() {
        let r = req(
            vec![Message {
                role: Role::Assistant,
                content: vec![
                    Content::ToolCall {
                        id: "c1".into(),
                        name: "t".into(),
                        arguments: String::new(),
                    },
                    Content::Text {
                        text: String::new(),
                    },
                    Content::Text { text: "a".into() },
                    Content::Thinking {
                        text: "summary".into(),
                        signature: Some(r#"{"id":"rs_1","encrypted_content":"E"}"#.into()),
                        provider: Some("p".into()),
                    },
                ],
            }],
            ThinkingLevel::Off,
        );
        let v = serde_json::to_value(WireRequest::from_request(&r, "p")).unwrap();
        assert_eq!(
            v["input"],
            json!([
                {"type": "reasoning", "id": "rs_1", "encrypted_content": "E", "summary": []},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "a"}]},
                {"type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}"}
            ])
        );
        let v = serde_json::to_value(WireRequest::from_request(&r, "other")).unwrap();
        assert_eq!(v["input"].as_array().unwrap().len(), 2);
    }
}
