//! The OpenAI Responses API (`POST {base_url}/responses`) as a wire format
//! of [`HttpProvider`]: stateless (`store: false`), with function tools,
//! reasoning summaries, and encrypted reasoning items carried across turns
//! back to the provider that produced them.
//!
//! The stream is a sequence of named SSE events (`event: <type>` plus JSON
//! `data` with the same `type`) that ends with `response.completed`,
//! `response.incomplete` or `response.failed`; there is no `[DONE]` sentinel.

mod wire;

use hearth_core::{ChatRequest, FinishReason, StreamEvent, Usage};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::classify::ErrorFacts;
use crate::decoder::{EventDecoder, EventFormat, Queue};
use crate::http::{self, HttpConfig, HttpProvider, KeyHeader, Route, WireFormat};
use crate::{Capabilities, LlmError};

/// Settings of one OpenAI Responses API endpoint (`wire`: organization).
pub type OpenAiConfig = HttpConfig<OpenAiWire>;

/// A `Provider` speaking OpenAI's streaming Responses API.
pub type OpenAiProvider = HttpProvider<OpenAiWire>;

/// The decoder of the Responses API's event stream.
pub type OpenAiDecoder = EventDecoder<OpenAiEvents>;

impl OpenAiConfig {
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
}

/// The Responses API wire format and its settings.
#[derive(Debug, Clone, Default)]
pub struct OpenAiWire {
    /// Sent as `OpenAI-Organization` when set.
    pub organization: Option<String>,
}

impl WireFormat for OpenAiWire {
    type Events = OpenAiEvents;
    const ROUTE: Route = Route::Fixed("/responses");
    const KEY: KeyHeader = KeyHeader::BEARER;
    const CAPABILITIES: Capabilities = Capabilities::NATIVE;
    const EMBEDDINGS: Option<crate::embeddings::EmbeddingsApi> =
        Some(crate::embeddings::EmbeddingsApi::OpenAi);
    const DEFAULT_BASE_URL: Option<&'static str> = Some(OpenAiConfig::DEFAULT_BASE_URL);

    fn headers(&self, headers: &mut HeaderMap) -> Result<(), String> {
        if let Some(org) = &self.organization {
            let value = HeaderValue::from_str(org)
                .map_err(|_| "organization holds characters not allowed in a header")?;
            headers.insert(HeaderName::from_static("openai-organization"), value);
        }
        Ok(())
    }

    fn body(&self, request: &ChatRequest, provider: &str) -> Result<Vec<u8>, String> {
        http::encode(&wire::WireRequest::from_request(request, provider))
    }
}

/// What an output item of the answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemKind {
    /// A `function_call` and its number among the answer's calls.
    Call(u32),
    Reasoning,
    /// Messages, built-in tool calls and anything newer.
    Other,
}

/// One output item seen in `response.output_item.added`.
#[derive(Debug)]
struct ItemState {
    output_index: Option<u64>,
    id: Option<String>,
    kind: ItemKind,
    /// Argument or summary text was streamed for it, so the full copy in its
    /// `.done` event must not be emitted again.
    streamed: bool,
}

/// Event types the adapter understands; a payload of one of these that does
/// not parse is malformed, while unknown types are skipped whatever their shape.
const KNOWN_EVENTS: &[&str] = &[
    "response.output_item.added",
    "response.output_item.done",
    "response.output_text.delta",
    "response.refusal.delta",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
];

/// The per-answer state of a Responses API stream.
#[derive(Debug, Default)]
pub struct OpenAiEvents {
    /// Output items started so far; an answer has few.
    items: Vec<ItemState>,
    /// The call number the next `function_call` item gets.
    next_call: u32,
    /// Finished reasoning items with encrypted content, in order.
    reasoning: Vec<wire::SignedReasoning>,
    /// Where the last reasoning text came from (item id, summary index), to
    /// separate summary parts with a blank line.
    thinking_at: Option<(String, u64)>,
    /// The model refused (a `refusal` content part).
    refused: bool,
}

impl EventFormat for OpenAiEvents {
    /// `event` is the SSE event name, used when the payload has no `type`.
    fn event(&mut self, out: &mut Queue, event: Option<&str>, data: &str) -> Result<(), LlmError> {
        let ev: wire::WireEvent<'_> = match serde_json::from_str(data) {
            Ok(ev) => ev,
            Err(e) => {
                let known = serde_json::from_str::<wire::EventType<'_>>(data).is_ok_and(|t| {
                    let kind = if t.kind.is_empty() {
                        event.unwrap_or("")
                    } else {
                        &*t.kind
                    };
                    KNOWN_EVENTS.contains(&kind)
                });
                if serde_json::from_str::<serde::de::IgnoredAny>(data).is_ok() && !known {
                    // Valid JSON of an event type we do not read.
                    return Ok(());
                }
                return Err(out.bad_json("stream event", &e));
            }
        };
        let kind: &str = if ev.kind.is_empty() {
            event.unwrap_or("")
        } else {
            &ev.kind
        };
        match kind {
            "response.output_item.added" => {
                let Some(item) = ev.item else {
                    return Err(out.malformed("response.output_item.added without item"));
                };
                let kind = match &*item.kind {
                    "function_call" => {
                        let call = self.next_call;
                        self.next_call = self.next_call.saturating_add(1);
                        let arguments = item.arguments.unwrap_or_default();
                        out.push(StreamEvent::ToolCallDelta {
                            index: call,
                            id: item.call_id.filter(|s| !s.is_empty()),
                            name: item.name.filter(|s| !s.is_empty()),
                            arguments,
                        });
                        ItemKind::Call(call)
                    }
                    "reasoning" => ItemKind::Reasoning,
                    _ => ItemKind::Other,
                };
                self.items.push(ItemState {
                    output_index: ev.output_index,
                    id: item.id,
                    kind,
                    streamed: false,
                });
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if kind == "response.refusal.delta" {
                    self.refused = true;
                }
                if let Some(text) = ev.delta.filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::TextDelta(text));
                }
            }
            "response.function_call_arguments.delta" => {
                let Some(delta) = ev.delta else {
                    return Err(out.malformed("function_call_arguments.delta without delta"));
                };
                let call = match self.item_mut(
                    ev.item_id.as_ref().map(wire::Borrowed::as_str),
                    ev.output_index,
                ) {
                    Some(item) => match item.kind {
                        ItemKind::Call(call) => {
                            item.streamed = true;
                            call
                        }
                        _ => return Err(out.malformed("arguments delta for a non-call item")),
                    },
                    None => return Err(out.malformed("arguments delta for an unknown item")),
                };
                if !delta.is_empty() {
                    out.push(StreamEvent::ToolCallDelta {
                        index: call,
                        id: None,
                        name: None,
                        arguments: delta,
                    });
                }
            }
            "response.function_call_arguments.done" => {
                // Servers that send only the whole arguments still get them through.
                let args = ev.arguments.filter(|a| !a.is_empty());
                if let Some(item) = self.item_mut(
                    ev.item_id.as_ref().map(wire::Borrowed::as_str),
                    ev.output_index,
                ) && let ItemKind::Call(call) = item.kind
                    && !item.streamed
                    && let Some(arguments) = args
                {
                    item.streamed = true;
                    out.push(StreamEvent::ToolCallDelta {
                        index: call,
                        id: None,
                        name: None,
                        arguments,
                    });
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let part = ev.summary_index.unwrap_or(0);
                if let Some(item) = self.item_mut(
                    ev.item_id.as_ref().map(wire::Borrowed::as_str),
                    ev.output_index,
                ) {
                    item.streamed = true;
                }
                self.thinking(
                    out,
                    ev.item_id.as_ref().map(wire::Borrowed::as_str),
                    part,
                    ev.delta.unwrap_or_default(),
                );
            }
            "response.output_item.done" => {
                let Some(item) = ev.item else {
                    return Err(out.malformed("response.output_item.done without item"));
                };
                let known = self.item_mut(item.id.as_deref(), ev.output_index);
                let streamed = known.as_ref().is_some_and(|k| k.streamed);
                let call = known.and_then(|k| match k.kind {
                    ItemKind::Call(c) => Some(c),
                    _ => None,
                });
                match &*item.kind {
                    "function_call" => {
                        let arguments = item.arguments.filter(|a| !a.is_empty() && !streamed);
                        let (call, id, name) = match call {
                            Some(call) => (call, None, None),
                            None => {
                                // Never announced: the finished item is the whole call.
                                let call = self.next_call;
                                self.next_call = self.next_call.saturating_add(1);
                                self.items.push(ItemState {
                                    output_index: ev.output_index,
                                    id: item.id,
                                    kind: ItemKind::Call(call),
                                    streamed: true,
                                });
                                (call, item.call_id, item.name)
                            }
                        };
                        if arguments.is_some() || id.is_some() || name.is_some() {
                            out.push(StreamEvent::ToolCallDelta {
                                index: call,
                                id: id.filter(|s| !s.is_empty()),
                                name: name.filter(|s| !s.is_empty()),
                                arguments: arguments.unwrap_or_default(),
                            });
                        }
                    }
                    "reasoning" => {
                        if !streamed {
                            // A summary that was not streamed part by part.
                            let parts = item.summary.unwrap_or_default();
                            for (i, part) in parts.into_iter().enumerate() {
                                self.thinking(
                                    out,
                                    item.id.as_deref(),
                                    i as u64,
                                    part.text.unwrap_or_default(),
                                );
                            }
                        }
                        if let Some(enc) = item.encrypted_content.filter(|e| !e.is_empty()) {
                            self.reasoning.push(wire::SignedReasoning {
                                id: item.id.unwrap_or_default(),
                                encrypted_content: enc,
                            });
                            // Cumulative, since only the last signature of an
                            // answer is kept.
                            out.push(StreamEvent::ThinkingDelta {
                                text: String::new(),
                                signature: Some(wire::encode_signature(&self.reasoning)),
                            });
                        }
                    }
                    _ => {}
                }
            }
            "response.completed" => {
                if let Some(u) = ev.response.as_ref().and_then(|r| r.usage.as_ref()) {
                    out.push(StreamEvent::Usage(usage(u)));
                }
                let reason = if self.next_call > 0 {
                    FinishReason::ToolCalls
                } else if self.refused {
                    FinishReason::ContentFilter
                } else {
                    FinishReason::Stop
                };
                out.push(StreamEvent::Finish(reason));
                out.finish("done");
            }
            "response.incomplete" => {
                let response = ev.response;
                if let Some(u) = response.as_ref().and_then(|r| r.usage.as_ref()) {
                    out.push(StreamEvent::Usage(usage(u)));
                }
                let reason = response
                    .and_then(|r| r.incomplete_details)
                    .and_then(|d| d.reason)
                    .unwrap_or_default();
                let reason = match reason.as_str() {
                    "max_output_tokens" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    "" => FinishReason::Other("incomplete".into()),
                    _ => FinishReason::Other(reason),
                };
                out.push(StreamEvent::Finish(reason));
                out.finish("incomplete");
            }
            "response.failed" => {
                let err = ev.response.and_then(|r| r.error);
                let (code, msg) = match &err {
                    Some(e) => (e.code.as_deref(), e.message.as_deref()),
                    None => (None, None),
                };
                return Err(stream_error(out, "response failed", code, msg));
            }
            "error" => {
                let nested = ev.error.as_ref();
                let code = ev
                    .code
                    .as_deref()
                    .or_else(|| nested.and_then(|e| e.code.as_deref()));
                let msg = ev
                    .message
                    .as_deref()
                    .or_else(|| nested.and_then(|e| e.message.as_deref()));
                return Err(stream_error(out, "provider error mid-stream", code, msg));
            }
            // response.created / in_progress / queued, content_part.*, *.done
            // echoes of streamed text, and event types added later.
            _ => {}
        }
        Ok(())
    }

    fn end_of_body(&mut self, out: &mut Queue) -> Result<(), LlmError> {
        Err(out.malformed(
            "stream ended without response.completed, response.incomplete or response.failed",
        ))
    }
}

impl OpenAiEvents {
    /// The item an event refers to: by `item_id`, else by `output_index`.
    fn item_mut(&mut self, id: Option<&str>, index: Option<u64>) -> Option<&mut ItemState> {
        if let Some(id) = id
            && let Some(pos) = self.items.iter().rposition(|i| i.id.as_deref() == Some(id))
        {
            return self.items.get_mut(pos);
        }
        let index = index?;
        self.items
            .iter_mut()
            .rev()
            .find(|i| i.output_index == Some(index))
    }

    /// Queues reasoning text, a blank line first when it starts a new summary
    /// part or reasoning item after earlier text.
    fn thinking(&mut self, out: &mut Queue, item: Option<&str>, part: u64, text: String) {
        if text.is_empty() {
            return;
        }
        let item = item.unwrap_or("");
        let text = match &mut self.thinking_at {
            // The same part goes on: nothing to separate, nothing to record.
            Some((id, p)) if id == item && *p == part => text,
            Some(_) => {
                self.thinking_at = Some((item.to_owned(), part));
                format!("\n\n{text}")
            }
            None => {
                self.thinking_at = Some((item.to_owned(), part));
                text
            }
        };
        out.push(StreamEvent::ThinkingDelta {
            text,
            signature: None,
        });
    }
}

/// An error the stream reported with a `code` and `message`.
fn stream_error(out: &Queue, what: &str, code: Option<&str>, msg: Option<&str>) -> LlmError {
    let facts = ErrorFacts {
        code,
        message: msg,
        ..ErrorFacts::default()
    };
    out.provider_error(what, &facts)
}

fn usage(u: &wire::WireUsage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cached_tokens: u
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens),
        reasoning_tokens: u
            .output_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens),
        cache_write_tokens: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_own_settings() {
        let mut cfg = OpenAiConfig::new("o", "");
        assert_eq!(cfg.base_url, "https://api.openai.com/v1");
        let p = OpenAiProvider::new(cfg.clone(), reqwest::Client::new()).unwrap();
        let (url, _) = p.target("any").unwrap();
        assert_eq!(url.as_str(), "https://api.openai.com/v1/responses");
        cfg.wire.organization = Some("org\n".into());
        assert!(OpenAiProvider::new(cfg, reqwest::Client::new()).is_err());
    }
}
