//! `OpenAiProvider`: the native streaming adapter for OpenAI's Responses API
//! (`POST {base_url}/responses`), stateless (`store: false`), with function
//! tools, reasoning summaries, and encrypted reasoning items carried across
//! turns back to the provider that produced them.
//!
//! The stream is a sequence of named SSE events (`event: <type>` plus JSON
//! `data` with the same `type`) that ends with `response.completed`,
//! `response.incomplete` or `response.failed`; there is no `[DONE]` sentinel.

mod wire;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::{ChatRequest, FinishReason, StreamEvent, Usage};
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use crate::classify::ErrorFacts;
use crate::sse::SseDecoder;
use crate::transport::{self, CallContext, ErrorBody, impl_stream_decoder};
use crate::{Capabilities, ErrorKind, EventStream, LlmError, Provider};

/// Settings of one OpenAI Responses API endpoint.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The provider's configured name, used in errors and to recognise its
    /// own reasoning items in history.
    pub name: String,
    /// Base URL such as `https://api.openai.com/v1`; requests go to
    /// `{base_url}/responses` (a trailing slash is tolerated).
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>` when set.
    pub api_key: Option<String>,
    /// Where the key came from (the environment variable named by
    /// `api_key_env`, or `secret <name>`), named in errors so a failed call
    /// says which key it used; never the key itself.
    pub api_key_env: Option<String>,
    /// Sent as `OpenAI-Organization` when set.
    pub organization: Option<String>,
    /// Extra headers sent with every request (e.g. `OpenAI-Project`).
    pub headers: Vec<(String, String)>,
    /// Longest wait from sending the request to the response headers.
    pub request_timeout: Duration,
    /// Longest gap between two chunks of a streamed answer.
    pub idle_timeout: Duration,
}

impl OpenAiConfig {
    /// The default base URL.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A config without key, organization or extra headers, with 60 s request
    /// and idle timeouts. An empty `base_url` means `https://api.openai.com/v1`.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        let mut base_url = base_url.into();
        if base_url.is_empty() {
            base_url = Self::DEFAULT_BASE_URL.to_owned();
        }
        Self {
            name: name.into(),
            base_url,
            api_key: None,
            api_key_env: None,
            organization: None,
            headers: Vec::new(),
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

// Hand-written so the key and header values (often secrets too) never reach logs.
impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OpenAiConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("organization", &self.organization)
            .field("headers", &header_names)
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

/// A `Provider` speaking OpenAI's streaming Responses API.
#[derive(Clone)]
pub struct OpenAiProvider {
    name: Arc<str>,
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    request_timeout: Duration,
    idle_timeout: Duration,
    /// Appended to the errors of a call: the URL and the key's source.
    call_context: Arc<CallContext>,
}

impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// Validates `config` (an http(s) base URL, well-formed header names and
    /// values) and builds the provider on `client`.
    pub fn new(config: OpenAiConfig, client: reqwest::Client) -> Result<Self, LlmError> {
        let name = config.name;
        let invalid = |msg: String| LlmError::new(name.as_str(), ErrorKind::InvalidRequest, msg);
        let endpoint = format!("{}/responses", config.base_url.trim_end_matches('/'));
        let url = transport::parse_endpoint(&endpoint, &config.base_url, invalid)?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            transport::insert_key(&mut headers, AUTHORIZATION, "Bearer ", key, invalid)?;
        }
        if let Some(org) = &config.organization {
            let value = HeaderValue::from_str(org).map_err(|_| {
                invalid("organization holds characters not allowed in a header".into())
            })?;
            headers.insert(HeaderName::from_static("openai-organization"), value);
        }
        transport::append_headers(&mut headers, &config.headers, invalid)?;
        let call_context = Arc::new(CallContext::new(
            &url,
            config.api_key.is_some(),
            config.api_key_env.as_deref(),
        ));
        Ok(Self {
            name: Arc::from(name),
            call_context,
            url,
            headers,
            client,
            request_timeout: config.request_timeout,
            idle_timeout: config.idle_timeout,
        })
    }

    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> LlmError {
        LlmError::new(&*self.name, kind, message)
    }

    /// Turns a non-2xx response into an error, reading at most 64 KiB of body
    /// for OpenAI's own error code and message.
    async fn status_error(&self, resp: reqwest::Response) -> LlmError {
        let body = ErrorBody::read(resp, self.idle_timeout).await;
        let parsed = body.json();
        let facts = parsed
            .as_ref()
            .map(ErrorFacts::from_json)
            .unwrap_or_default()
            .with_status(body.status.as_u16());
        let mut message = format!("HTTP {}", body.status);
        facts.describe(&mut message);
        body.error(&self.name, facts.kind(), message)
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    fn capabilities(&self) -> Capabilities {
        Capabilities::NATIVE
    }

    async fn stream(&self, request: &ChatRequest) -> Result<EventStream, LlmError> {
        let wire = wire::WireRequest::from_request(request, &self.name);
        let body = serde_json::to_vec(&wire).map_err(|e| {
            self.error(
                ErrorKind::InvalidRequest,
                format!("cannot encode request: {e}"),
            )
        })?;
        let started = Instant::now();
        let resp = transport::send(
            &self.name,
            &self.client,
            self.url.clone(),
            &self.headers,
            body,
            self.request_timeout,
            started,
        )
        .await
        .map_err(|e| e.at(&self.call_context))?;
        if !resp.status().is_success() {
            return Err(self.status_error(resp).await.at(&self.call_context));
        }
        transport::check_event_stream(&self.name, &resp).map_err(|e| e.at(&self.call_context))?;
        Ok(transport::event_stream(
            OpenAiDecoder::new(Arc::clone(&self.name)),
            resp.bytes_stream(),
            self.idle_timeout,
            started,
            Arc::clone(&self.call_context),
        ))
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

/// The stream parser of this adapter, without I/O: `push` body bytes as they
/// arrive, take events with `next_event` until it returns `Ok(None)`, and call
/// `end_of_body` when the body ends. `OpenAiProvider::stream` runs on it; it
/// is public so benchmarks and tests can feed it bytes directly.
#[derive(Debug)]
pub struct OpenAiDecoder {
    provider: Arc<str>,
    decoder: SseDecoder,
    /// Events parsed from a chunk but not yet handed out.
    pending: VecDeque<StreamEvent>,
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
    /// The body has ended.
    eof: bool,
    /// Why the answer is over (`done`, `incomplete`, `eof` or `error`), once
    /// it is; only pending events follow.
    outcome: Option<&'static str>,
}

impl_stream_decoder!(OpenAiDecoder);

impl OpenAiDecoder {
    /// A decoder whose errors name `provider`.
    pub fn new(provider: impl Into<Arc<str>>) -> Self {
        Self {
            provider: provider.into(),
            decoder: SseDecoder::new(),
            pending: VecDeque::new(),
            items: Vec::new(),
            next_call: 0,
            reasoning: Vec::new(),
            thinking_at: None,
            refused: false,
            eof: false,
            outcome: None,
        }
    }

    /// Appends received body bytes; they may split events anywhere.
    pub fn push(&mut self, bytes: &[u8]) {
        self.decoder.push(bytes);
    }

    /// Marks the end of the body: without `response.completed`,
    /// `response.incomplete` or `response.failed` first, the answer was cut
    /// and ends with an error.
    pub fn end_of_body(&mut self) {
        self.eof = true;
    }

    /// True once the answer is over, completely or by an error, and all its
    /// events have been taken.
    pub fn is_done(&self) -> bool {
        self.outcome.is_some() && self.pending.is_empty()
    }

    /// The next event; `Ok(None)` when more bytes are needed or the answer is
    /// over. An error ends the answer: nothing follows it.
    pub fn next_event(&mut self) -> Result<Option<StreamEvent>, LlmError> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Ok(Some(ev));
            }
            if self.outcome.is_some() {
                return Ok(None);
            }
            match self.decoder.next_event() {
                Ok(Some(ev)) => {
                    let handled = self.handle(ev.event.as_deref(), &ev.data);
                    self.decoder.recycle(ev);
                    if let Err(e) = handled {
                        self.pending.clear();
                        self.outcome = Some("error");
                        return Err(e);
                    }
                }
                Ok(None) if self.eof => {
                    self.outcome = Some("eof");
                    return Err(self.malformed(
                        "stream ended without response.completed, response.incomplete or response.failed",
                    ));
                }
                Ok(None) => return Ok(None),
                Err(e) => {
                    self.outcome = Some("error");
                    return Err(self.malformed(format!("bad event stream: {e}")));
                }
            }
        }
    }

    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> LlmError {
        LlmError::new(&*self.provider, kind, message)
    }

    fn malformed(&self, message: impl Into<String>) -> LlmError {
        self.error(ErrorKind::MalformedResponse, message)
    }

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
    fn thinking(&mut self, item: Option<&str>, part: u64, text: String) {
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
        self.pending.push_back(StreamEvent::ThinkingDelta {
            text,
            signature: None,
        });
    }

    /// Parses one SSE `data` payload into pending events; `event` is the
    /// SSE event name, used when the payload has no `type`.
    fn handle(&mut self, event: Option<&str>, data: &str) -> Result<(), LlmError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
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
                // serde_json's own message can quote the payload, i.e. model output.
                return Err(self.malformed(format!(
                    "stream event is not valid JSON ({:?} error at line {} column {})",
                    e.classify(),
                    e.line(),
                    e.column()
                )));
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
                    return Err(self.malformed("response.output_item.added without item"));
                };
                let kind = match &*item.kind {
                    "function_call" => {
                        let call = self.next_call;
                        self.next_call = self.next_call.saturating_add(1);
                        let arguments = item.arguments.unwrap_or_default();
                        self.pending.push_back(StreamEvent::ToolCallDelta {
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
                    self.pending.push_back(StreamEvent::TextDelta(text));
                }
            }
            "response.function_call_arguments.delta" => {
                let Some(delta) = ev.delta else {
                    return Err(self.malformed("function_call_arguments.delta without delta"));
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
                        _ => return Err(self.malformed("arguments delta for a non-call item")),
                    },
                    None => return Err(self.malformed("arguments delta for an unknown item")),
                };
                if !delta.is_empty() {
                    self.pending.push_back(StreamEvent::ToolCallDelta {
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
                    self.pending.push_back(StreamEvent::ToolCallDelta {
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
                    ev.item_id.as_ref().map(wire::Borrowed::as_str),
                    part,
                    ev.delta.unwrap_or_default(),
                );
            }
            "response.output_item.done" => {
                let Some(item) = ev.item else {
                    return Err(self.malformed("response.output_item.done without item"));
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
                            self.pending.push_back(StreamEvent::ToolCallDelta {
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
                            self.pending.push_back(StreamEvent::ThinkingDelta {
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
                    self.pending.push_back(StreamEvent::Usage(usage(u)));
                }
                let reason = if self.next_call > 0 {
                    FinishReason::ToolCalls
                } else if self.refused {
                    FinishReason::ContentFilter
                } else {
                    FinishReason::Stop
                };
                self.pending.push_back(StreamEvent::Finish(reason));
                self.outcome = Some("done");
            }
            "response.incomplete" => {
                let response = ev.response;
                if let Some(u) = response.as_ref().and_then(|r| r.usage.as_ref()) {
                    self.pending.push_back(StreamEvent::Usage(usage(u)));
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
                self.pending.push_back(StreamEvent::Finish(reason));
                self.outcome = Some("incomplete");
            }
            "response.failed" => {
                let err = ev.response.and_then(|r| r.error);
                let (code, msg) = match &err {
                    Some(e) => (e.code.as_deref(), e.message.as_deref()),
                    None => (None, None),
                };
                return Err(self.stream_error("response failed", code, msg));
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
                return Err(self.stream_error("provider error mid-stream", code, msg));
            }
            // response.created / in_progress / queued, content_part.*, *.done
            // echoes of streamed text, and event types added later.
            _ => {}
        }
        Ok(())
    }

    fn stream_error(&self, what: &str, code: Option<&str>, msg: Option<&str>) -> LlmError {
        let facts = ErrorFacts {
            code,
            message: msg,
            ..ErrorFacts::default()
        };
        let mut message = String::from(what);
        facts.describe(&mut message);
        self.error(facts.kind(), message)
    }
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
    use crate::transport::{cap, parse_retry_after};

    #[test]
    fn rejects_bad_config() {
        let client = reqwest::Client::new();
        let mut cfg = OpenAiConfig::new("p", "ftp://x");
        assert_eq!(
            OpenAiProvider::new(cfg.clone(), client.clone())
                .unwrap_err()
                .kind,
            ErrorKind::InvalidRequest
        );
        cfg.base_url = "not a url".into();
        assert!(OpenAiProvider::new(cfg.clone(), client.clone()).is_err());
        cfg.base_url = "http://127.0.0.1:1/v1/".into();
        let p = OpenAiProvider::new(cfg.clone(), client.clone()).unwrap();
        assert_eq!(p.url.as_str(), "http://127.0.0.1:1/v1/responses");
        cfg.headers = vec![("bad name".into(), "v".into())];
        assert!(OpenAiProvider::new(cfg.clone(), client.clone()).is_err());
        cfg.headers = vec![("x-ok".into(), "line\nbreak".into())];
        let err = OpenAiProvider::new(cfg.clone(), client.clone()).unwrap_err();
        assert!(!err.message.contains("break"));
        cfg.headers.clear();
        cfg.organization = Some("org\n".into());
        assert!(OpenAiProvider::new(cfg.clone(), client.clone()).is_err());
        cfg.organization = None;
        cfg.api_key = Some("sk-secret\n".into());
        let err = OpenAiProvider::new(cfg.clone(), client).unwrap_err();
        assert!(!err.message.contains("sk-secret"));
        assert!(!format!("{cfg:?}").contains("sk-secret"));
    }

    #[test]
    fn defaults() {
        let cfg = OpenAiConfig::new("o", "");
        assert_eq!(cfg.base_url, "https://api.openai.com/v1");
        let p = OpenAiProvider::new(cfg, reqwest::Client::new()).unwrap();
        assert_eq!(p.url.as_str(), "https://api.openai.com/v1/responses");
    }

    #[test]
    fn parses_retry_after_and_caps() {
        let p = |s: &str| parse_retry_after(&HeaderValue::from_str(s).unwrap());
        assert_eq!(p("7"), Some(Duration::from_secs(7)));
        assert_eq!(p("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(p("-1"), None);
        assert_eq!(cap("héllo", 2), "h…");
    }
}
