//! Chat Completions wire types: the request we send and the chunks we parse.
//!
//! Request types borrow from the `ChatRequest` so building a body copies no
//! history; chunk types are lenient (every field optional, unknown fields
//! ignored) because compatible servers differ in what they leave out.

use std::borrow::Cow;

use hearth_core::{ChatRequest, Content, Role, ThinkingLevel};

use crate::items::Items;
use serde::{Deserialize, Serialize};

/// The body of `POST /chat/completions`.
#[derive(Debug, Serialize)]
pub(crate) struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    /// `max_tokens`: the field every compatible server (Ollama, vLLM, LM
    /// Studio, LiteLLM, OpenRouter) reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: Cow<'a, str>,
    },
    Assistant {
        content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Debug, Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

/// Text parts of one message, borrowed when there is just one.
fn text_of(content: &[Content]) -> Cow<'_, str> {
    let mut texts = content.iter().filter_map(|c| match c {
        Content::Text { text } => Some(text.as_str()),
        _ => None,
    });
    let Some(first) = texts.next() else {
        return Cow::Borrowed("");
    };
    match texts.next() {
        None => Cow::Borrowed(first),
        Some(second) => {
            let mut s = String::from(first);
            s.push_str(second);
            texts.for_each(|t| s.push_str(t));
            Cow::Owned(s)
        }
    }
}

impl<'a> WireRequest<'a> {
    /// Converts a request. Thinking parts are dropped: this format has no way
    /// to send reasoning back. Tool results become one `tool` message each.
    pub(crate) fn from_request(req: &'a ChatRequest) -> Self {
        let mut messages = Vec::with_capacity(req.messages.len() + 1);
        if !req.system.is_empty() {
            messages.push(WireMessage::System {
                content: &req.system,
            });
        }
        for msg in &req.messages {
            let results = msg.content.iter().filter_map(|c| match c {
                Content::ToolResult { call_id, output } => Some(WireMessage::Tool {
                    tool_call_id: call_id,
                    content: output,
                }),
                _ => None,
            });
            match msg.role {
                Role::User => {
                    // Results first: they must follow the assistant's calls directly.
                    let before = messages.len();
                    messages.extend(results);
                    let text = text_of(&msg.content);
                    if !text.is_empty() || messages.len() == before {
                        messages.push(WireMessage::User { content: text });
                    }
                }
                Role::Assistant => {
                    let text = text_of(&msg.content);
                    let tool_calls: Vec<_> = msg
                        .content
                        .iter()
                        .filter_map(|c| match c {
                            Content::ToolCall {
                                id,
                                name,
                                arguments,
                            } => Some(WireToolCall {
                                id,
                                kind: "function",
                                function: WireFunctionCall { name, arguments },
                            }),
                            _ => None,
                        })
                        .collect();
                    // A thinking-only turn has nothing this format can carry.
                    if !text.is_empty() || !tool_calls.is_empty() {
                        messages.push(WireMessage::Assistant {
                            content: (!text.is_empty()).then_some(text),
                            tool_calls,
                        });
                    }
                    messages.extend(results);
                }
                Role::Tool => messages.extend(results),
            }
        }
        let tools = req
            .tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect();
        let reasoning_effort = match req.thinking {
            ThinkingLevel::Off => None,
            level => Some(level.as_str()),
        };
        Self {
            model: &req.model,
            messages,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            tools,
            reasoning_effort,
            max_tokens: req.max_output_tokens,
        }
    }
}

/// One `data:` payload of the stream.
#[derive(Debug, Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    pub(crate) choices: Items<Choice>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    #[serde(default)]
    pub(crate) error: Option<serde_json::Value>,
}

/// One choice of a chunk; only the first is used.
#[derive(Debug, Deserialize)]
pub(crate) struct Choice {
    #[serde(default)]
    pub(crate) delta: Option<Delta>,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

/// What a chunk adds to the answer.
#[derive(Debug, Deserialize)]
pub(crate) struct Delta {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) reasoning_content: Option<String>,
    /// A string on most servers; some send objects here, which are ignored.
    #[serde(default)]
    pub(crate) reasoning: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Items<ToolCallDelta>>,
}

/// A fragment of one tool call.
#[derive(Debug, Deserialize)]
pub(crate) struct ToolCallDelta {
    #[serde(default)]
    pub(crate) index: Option<u32>,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) function: Option<FunctionDelta>,
}

/// The function part of a tool-call fragment.
#[derive(Debug, Deserialize)]
pub(crate) struct FunctionDelta {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) arguments: Option<String>,
}

/// The `usage` object.
#[derive(Debug, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub(crate) prompt_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) completion_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    pub(crate) completion_tokens_details: Option<CompletionDetails>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Deserialize)]
pub(crate) struct PromptDetails {
    #[serde(default)]
    pub(crate) cached_tokens: Option<u64>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Deserialize)]
pub(crate) struct CompletionDetails {
    #[serde(default)]
    pub(crate) reasoning_tokens: Option<u64>,
}
