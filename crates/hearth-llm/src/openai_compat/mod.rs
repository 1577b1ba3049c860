//! Streaming Chat Completions (`POST {base_url}/chat/completions`) as a wire
//! format of [`HttpProvider`], for OpenAI and the many servers that speak
//! its format (Ollama, vLLM, llama.cpp, OpenRouter).

mod wire;

use hearth_core::{ChatRequest, FinishReason, StreamEvent, Usage};

use crate::classify::ErrorFacts;
use crate::decoder::{EventDecoder, EventFormat, Queue};
use crate::http::{self, HttpConfig, HttpProvider, KeyHeader, Route, WireFormat};
use crate::{Capabilities, LlmError};

/// Settings of one OpenAI-compatible endpoint. `base_url` is required, e.g.
/// `http://127.0.0.1:11434/v1`.
pub type OpenAiCompatConfig = HttpConfig<OpenAiCompatWire>;

/// A `Provider` speaking streaming Chat Completions.
pub type OpenAiCompatProvider = HttpProvider<OpenAiCompatWire>;

/// The decoder of a Chat Completions chunk stream.
pub type OpenAiCompatDecoder = EventDecoder<OpenAiCompatEvents>;

/// The Chat Completions wire format; it has no settings of its own.
#[derive(Debug, Clone, Default)]
pub struct OpenAiCompatWire;

impl WireFormat for OpenAiCompatWire {
    type Events = OpenAiCompatEvents;
    const ROUTE: Route = Route::Fixed("/chat/completions");
    const KEY: KeyHeader = KeyHeader::BEARER;
    const CAPABILITIES: Capabilities = Capabilities::COMPATIBLE;
    const EMBEDDINGS: Option<crate::embeddings::EmbeddingsApi> =
        Some(crate::embeddings::EmbeddingsApi::OpenAi);
    const DEFAULT_BASE_URL: Option<&'static str> = None;

    fn body(&self, request: &ChatRequest, _provider: &str) -> Result<Vec<u8>, String> {
        http::encode(&wire::WireRequest::from_request(request))
    }
}

/// The per-answer state of a Chat Completions stream.
#[derive(Debug, Default)]
pub struct OpenAiCompatEvents {
    /// Held back until `[DONE]` so `Finish` stays the last event even though
    /// the usage chunk comes after the one carrying `finish_reason`.
    finish: Option<FinishReason>,
    saw_tool_calls: bool,
}

impl EventFormat for OpenAiCompatEvents {
    fn event(&mut self, out: &mut Queue, _event: Option<&str>, data: &str) -> Result<(), LlmError> {
        if data == "[DONE]" {
            // No finish_reason at all: tool calls mean the model wants them run.
            let reason = self.finish.take().unwrap_or(if self.saw_tool_calls {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            });
            out.push(StreamEvent::Finish(reason));
            out.finish("done");
            return Ok(());
        }
        let chunk: wire::Chunk =
            serde_json::from_str(data).map_err(|e| out.bad_json("stream chunk", &e))?;
        if let Some(err) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            let facts = ErrorFacts::from_json(err);
            return Err(out.provider_error("provider error mid-stream", &facts));
        }
        if let Some(choice) = chunk.choices.into_iter().next() {
            if let Some(delta) = choice.delta {
                // Some servers send both fields with the same text; one is enough.
                let reasoning = delta.reasoning_content.or(match delta.reasoning {
                    Some(serde_json::Value::String(s)) => Some(s),
                    _ => None,
                });
                if let Some(text) = reasoning.filter(|s| !s.is_empty()) {
                    out.push(StreamEvent::ThinkingDelta {
                        text,
                        signature: None,
                    });
                }
                if let Some(text) = delta.content.filter(|s| !s.is_empty()) {
                    out.push(StreamEvent::TextDelta(text));
                }
                for (pos, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                    self.saw_tool_calls = true;
                    let (name, arguments) = match call.function {
                        Some(f) => (f.name, f.arguments),
                        None => (None, None),
                    };
                    out.push(StreamEvent::ToolCallDelta {
                        // Servers that omit the index send one call per chunk.
                        index: call.index.unwrap_or(u32::try_from(pos).unwrap_or(u32::MAX)),
                        id: call.id.filter(|s| !s.is_empty()),
                        name: name.filter(|s| !s.is_empty()),
                        arguments: arguments.unwrap_or_default(),
                    });
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(match reason.as_str() {
                    "stop" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    _ => FinishReason::Other(reason),
                });
            }
        }
        if let Some(u) = chunk.usage {
            out.push(StreamEvent::Usage(Usage {
                input_tokens: u.prompt_tokens,
                output_tokens: u.completion_tokens,
                cached_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
                reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
                cache_write_tokens: None,
            }));
        }
        Ok(())
    }

    /// A finish_reason without `[DONE]` is a complete answer from a lax
    /// server; neither means the stream was cut.
    fn end_of_body(&mut self, out: &mut Queue) -> Result<(), LlmError> {
        match self.finish.take() {
            Some(reason) => {
                out.push(StreamEvent::Finish(reason));
                Ok(())
            }
            None => Err(out.malformed("stream ended without [DONE] or a finish_reason")),
        }
    }
}
