//! The Anthropic Messages API (`POST {base_url}/v1/messages`) as a wire
//! format of [`HttpProvider`]: prompt caching, extended thinking, and signed
//! thinking blocks sent back to the provider that made them.

mod wire;

use hearth_core::{ChatRequest, FinishReason, StreamEvent, Usage};
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::classify::ErrorFacts;
use crate::decoder::{EventDecoder, EventFormat, Queue};
use crate::http::{self, HttpConfig, HttpProvider, KeyHeader, Route, WireFormat};
use crate::{Capabilities, LlmError};

/// Settings of one Anthropic endpoint (`wire`: version and `max_tokens`).
pub type AnthropicConfig = HttpConfig<AnthropicWire>;

/// A `Provider` speaking Anthropic's streaming Messages API.
pub type AnthropicProvider = HttpProvider<AnthropicWire>;

/// The decoder of Anthropic's event stream.
pub type AnthropicDecoder = EventDecoder<AnthropicEvents>;

impl AnthropicConfig {
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    /// The default `anthropic-version`.
    pub const DEFAULT_VERSION: &'static str = "2023-06-01";
    /// The default `max_tokens`.
    pub const DEFAULT_MAX_TOKENS: u32 = 8192;
}

/// The Messages API wire format and its settings.
#[derive(Debug, Clone)]
pub struct AnthropicWire {
    /// The `anthropic-version` header.
    pub version: String,
    /// `max_tokens` of every request; raised above the thinking budget when
    /// thinking is on.
    pub max_tokens: u32,
}

impl Default for AnthropicWire {
    /// Version `2023-06-01`, `max_tokens` 8192.
    fn default() -> Self {
        Self {
            version: AnthropicConfig::DEFAULT_VERSION.to_owned(),
            max_tokens: AnthropicConfig::DEFAULT_MAX_TOKENS,
        }
    }
}

impl WireFormat for AnthropicWire {
    type Events = AnthropicEvents;
    const ROUTE: Route = Route::Fixed("/v1/messages");
    const KEY: KeyHeader = KeyHeader {
        name: HeaderName::from_static("x-api-key"),
        prefix: "",
    };
    const CAPABILITIES: Capabilities = Capabilities::NATIVE;
    const DEFAULT_BASE_URL: Option<&'static str> = Some(AnthropicConfig::DEFAULT_BASE_URL);

    fn validate(&self, _url: &Url) -> Result<(), String> {
        if self.max_tokens == 0 {
            return Err("max_tokens must be at least 1".into());
        }
        Ok(())
    }

    fn headers(&self, headers: &mut HeaderMap) -> Result<(), String> {
        let version = HeaderValue::from_str(&self.version)
            .map_err(|_| format!("invalid anthropic-version {:?}", self.version))?;
        headers.insert(HeaderName::from_static("anthropic-version"), version);
        Ok(())
    }

    fn body(&self, request: &ChatRequest, provider: &str) -> Result<Vec<u8>, String> {
        http::encode(&wire::WireRequest::from_request(
            request,
            provider,
            self.max_tokens,
        ))
    }
}

/// What a content block of the answer is, by its stream index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    /// A `tool_use` block and its call number among the answer's tool calls.
    Tool(u32),
    Thinking,
    /// `redacted_thinking`, server tools and anything newer: not surfaced.
    Other,
}

/// The per-answer state of an Anthropic stream.
#[derive(Debug, Default)]
pub struct AnthropicEvents {
    /// Content blocks started so far as `(index, kind)`; an answer has few.
    blocks: Vec<(u64, BlockKind)>,
    /// The call number the next `tool_use` block gets.
    next_tool: u32,
    /// From `message_delta`, held back until `message_stop`.
    finish: Option<FinishReason>,
}

impl EventFormat for AnthropicEvents {
    fn event(&mut self, out: &mut Queue, _event: Option<&str>, data: &str) -> Result<(), LlmError> {
        let ev: wire::WireEvent<'_> =
            serde_json::from_str(data).map_err(|e| out.bad_json("stream event", &e))?;
        match &*ev.kind {
            "message_start" => {
                if let Some(u) = ev.message.and_then(|m| m.usage) {
                    out.push(StreamEvent::Usage(usage(&u)));
                }
            }
            "content_block_start" => {
                let (Some(index), Some(block)) = (ev.index, ev.content_block) else {
                    return Err(out.malformed("content_block_start without index or block"));
                };
                let kind = match &*block.kind {
                    "text" => {
                        if let Some(text) = block.text.filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::TextDelta(text));
                        }
                        BlockKind::Text
                    }
                    "tool_use" => {
                        let call = self.next_tool;
                        self.next_tool = self.next_tool.saturating_add(1);
                        out.push(StreamEvent::ToolCallDelta {
                            index: call,
                            id: block.id.filter(|s| !s.is_empty()),
                            name: block.name.filter(|s| !s.is_empty()),
                            arguments: String::new(),
                        });
                        BlockKind::Tool(call)
                    }
                    "thinking" => {
                        let text = block.thinking.unwrap_or_default();
                        let signature = block.signature.filter(|s| !s.is_empty());
                        if !text.is_empty() || signature.is_some() {
                            out.push(StreamEvent::ThinkingDelta { text, signature });
                        }
                        BlockKind::Thinking
                    }
                    _ => BlockKind::Other,
                };
                self.blocks.push((index, kind));
            }
            "content_block_delta" => {
                let Some(delta) = ev.delta else {
                    return Err(out.malformed("content_block_delta without delta"));
                };
                let block = self.block(ev.index);
                match delta.kind.as_ref().map(|k| &*k.0) {
                    Some("text_delta") => {
                        if let Some(text) = delta.text.filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::TextDelta(text));
                        }
                    }
                    Some("input_json_delta") => {
                        // Server tools (web search) stream input too: not ours to run.
                        if let Some(BlockKind::Tool(call)) = block
                            && let Some(part) = delta.partial_json.filter(|p| !p.is_empty())
                        {
                            out.push(StreamEvent::ToolCallDelta {
                                index: call,
                                id: None,
                                name: None,
                                arguments: part,
                            });
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(text) = delta.thinking.filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::ThinkingDelta {
                                text,
                                signature: None,
                            });
                        }
                    }
                    Some("signature_delta") => {
                        if let Some(sig) = delta.signature.filter(|s| !s.is_empty()) {
                            out.push(StreamEvent::ThinkingDelta {
                                text: String::new(),
                                signature: Some(sig),
                            });
                        }
                    }
                    // citations_delta and anything newer.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = ev
                    .delta
                    .and_then(|d| d.stop_reason)
                    .filter(|r| !r.is_empty())
                {
                    self.finish = Some(match reason.as_str() {
                        "end_turn" | "stop_sequence" => FinishReason::Stop,
                        "tool_use" => FinishReason::ToolCalls,
                        "max_tokens" => FinishReason::Length,
                        "refusal" => FinishReason::ContentFilter,
                        _ => FinishReason::Other(reason),
                    });
                }
                if let Some(u) = ev.usage {
                    out.push(StreamEvent::Usage(usage(&u)));
                }
            }
            "message_stop" => {
                // No stop_reason at all: tool calls mean the model wants them run.
                let reason = self.finish.take().unwrap_or(if self.next_tool > 0 {
                    FinishReason::ToolCalls
                } else {
                    FinishReason::Stop
                });
                out.push(StreamEvent::Finish(reason));
                out.finish("done");
            }
            "error" => {
                let facts = ErrorFacts {
                    err_type: ev.error.as_ref().and_then(|e| e.kind.as_deref()),
                    message: ev.error.as_ref().and_then(|e| e.message.as_deref()),
                    ..ErrorFacts::default()
                };
                return Err(out.provider_error("provider error mid-stream", &facts));
            }
            // `content_block_stop`, `ping`, and event types added later.
            _ => {}
        }
        Ok(())
    }

    fn end_of_body(&mut self, out: &mut Queue) -> Result<(), LlmError> {
        Err(out.malformed("stream ended without message_stop"))
    }
}

impl AnthropicEvents {
    fn block(&self, index: Option<u64>) -> Option<BlockKind> {
        let index = index?;
        self.blocks
            .iter()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, k)| *k)
    }
}

/// Anthropic counts cache reads and writes apart from `input_tokens`; hearth's
/// `input_tokens` is every prompt token (as OpenAI and Gemini report it), so
/// cost and usage read the same for every provider.
fn usage(u: &wire::WireUsage) -> Usage {
    Usage {
        input_tokens: u.input_tokens.map(|i| {
            i + u.cache_read_input_tokens.unwrap_or(0) + u.cache_creation_input_tokens.unwrap_or(0)
        }),
        output_tokens: u.output_tokens,
        cached_tokens: u.cache_read_input_tokens,
        reasoning_tokens: None,
        cache_write_tokens: u.cache_creation_input_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_own_settings() {
        let cfg = AnthropicConfig::new("a", "");
        assert_eq!(cfg.base_url, "https://api.anthropic.com");
        assert_eq!(cfg.wire.version, "2023-06-01");
        assert_eq!(cfg.wire.max_tokens, 8192);
        let build =
            |cfg: &AnthropicConfig| AnthropicProvider::new(cfg.clone(), reqwest::Client::new());
        assert!(build(&cfg).is_ok());
        let mut bad = cfg.clone();
        bad.wire.max_tokens = 0;
        assert!(build(&bad).is_err());
        let mut bad = cfg;
        bad.wire.version = "2023\n".into();
        assert!(build(&bad).is_err());
    }
}
