//! `AnthropicProvider`: the native streaming adapter for Anthropic's Messages
//! API (`POST {base_url}/v1/messages`), with prompt caching, extended thinking
//! and signed thinking blocks sent back to the provider that made them.

mod wire;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::{ChatRequest, FinishReason, StreamEvent, Usage};
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::classify::ErrorFacts;
use crate::sse::SseDecoder;
use crate::transport::{self, CallContext, ErrorBody, impl_stream_decoder};
use crate::{Capabilities, ErrorKind, EventStream, LlmError, Provider};

/// Settings of one Anthropic endpoint.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// The provider's configured name, used in errors and to recognise its
    /// own signed thinking blocks in history.
    pub name: String,
    /// Base URL such as `https://api.anthropic.com`; requests go to
    /// `{base_url}/v1/messages` (a trailing slash is tolerated).
    pub base_url: String,
    /// Sent as `x-api-key` when set.
    pub api_key: Option<String>,
    /// Where the key came from (the environment variable named by
    /// `api_key_env`, or `secret <name>`), named in errors so a failed call
    /// says which key it used; never the key itself.
    pub api_key_env: Option<String>,
    /// The `anthropic-version` header.
    pub version: String,
    /// Extra headers sent with every request (e.g. `anthropic-beta`).
    pub headers: Vec<(String, String)>,
    /// `max_tokens` of every request; raised above the thinking budget when
    /// thinking is on.
    pub max_tokens: u32,
    /// Longest wait from sending the request to the response headers.
    pub request_timeout: Duration,
    /// Longest gap between two chunks of a streamed answer.
    pub idle_timeout: Duration,
}

impl AnthropicConfig {
    /// The default base URL.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    /// The default `anthropic-version`.
    pub const DEFAULT_VERSION: &'static str = "2023-06-01";
    /// The default `max_tokens`.
    pub const DEFAULT_MAX_TOKENS: u32 = 8192;

    /// A config without key or extra headers: version `2023-06-01`,
    /// `max_tokens` 8192, 60 s request and idle timeouts. An empty `base_url`
    /// means `https://api.anthropic.com`.
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
            version: Self::DEFAULT_VERSION.to_owned(),
            headers: Vec::new(),
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

// Hand-written so the key and header values (often secrets too) never reach logs.
impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("AnthropicConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("version", &self.version)
            .field("headers", &header_names)
            .field("max_tokens", &self.max_tokens)
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

/// A `Provider` speaking Anthropic's streaming Messages API.
#[derive(Clone)]
pub struct AnthropicProvider {
    name: Arc<str>,
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    max_tokens: u32,
    request_timeout: Duration,
    idle_timeout: Duration,
    /// Appended to the errors of a call: the URL and the key's source.
    call_context: Arc<CallContext>,
}

impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// Validates `config` (an http(s) base URL, a non-zero `max_tokens`,
    /// well-formed header names and values) and builds the provider on `client`.
    pub fn new(config: AnthropicConfig, client: reqwest::Client) -> Result<Self, LlmError> {
        let name = config.name;
        let invalid = |msg: String| LlmError::new(name.as_str(), ErrorKind::InvalidRequest, msg);
        let endpoint = format!("{}/v1/messages", config.base_url.trim_end_matches('/'));
        let url = transport::parse_endpoint(&endpoint, &config.base_url, invalid)?;
        if config.max_tokens == 0 {
            return Err(invalid("max_tokens must be at least 1".into()));
        }
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            transport::insert_key(
                &mut headers,
                HeaderName::from_static("x-api-key"),
                "",
                key,
                invalid,
            )?;
        }
        let version = HeaderValue::from_str(&config.version)
            .map_err(|_| invalid(format!("invalid anthropic-version {:?}", config.version)))?;
        headers.insert(HeaderName::from_static("anthropic-version"), version);
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
            max_tokens: config.max_tokens,
            request_timeout: config.request_timeout,
            idle_timeout: config.idle_timeout,
        })
    }

    fn error(&self, kind: ErrorKind, message: impl Into<String>) -> LlmError {
        LlmError::new(&*self.name, kind, message)
    }

    /// Turns a non-2xx response into an error, reading at most 64 KiB of body
    /// for Anthropic's own error type and message.
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
impl Provider for AnthropicProvider {
    fn capabilities(&self) -> Capabilities {
        Capabilities::NATIVE
    }

    async fn stream(&self, request: &ChatRequest) -> Result<EventStream, LlmError> {
        let wire = wire::WireRequest::from_request(request, &self.name, self.max_tokens);
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
            AnthropicDecoder::new(Arc::clone(&self.name)),
            resp.bytes_stream(),
            self.idle_timeout,
            started,
            Arc::clone(&self.call_context),
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

/// The stream parser of this adapter, without I/O: `push` body bytes as they
/// arrive, take events with `next_event` until it returns `Ok(None)`, and call
/// `end_of_body` when the body ends. `AnthropicProvider::stream` runs on it;
/// it is public so benchmarks and tests can feed it bytes directly.
#[derive(Debug)]
pub struct AnthropicDecoder {
    provider: Arc<str>,
    decoder: SseDecoder,
    /// Events parsed from a chunk but not yet handed out.
    pending: VecDeque<StreamEvent>,
    /// Content blocks started so far as `(index, kind)`; an answer has few.
    blocks: Vec<(u64, BlockKind)>,
    /// The call number the next `tool_use` block gets.
    next_tool: u32,
    /// From `message_delta`, held back until `message_stop`.
    finish: Option<FinishReason>,
    /// The body has ended.
    eof: bool,
    /// Why the answer is over (`done`, `eof` or `error`), once it is; only
    /// pending events follow.
    outcome: Option<&'static str>,
}

impl_stream_decoder!(AnthropicDecoder);

impl AnthropicDecoder {
    /// A decoder whose errors name `provider`.
    pub fn new(provider: impl Into<Arc<str>>) -> Self {
        Self {
            provider: provider.into(),
            decoder: SseDecoder::new(),
            pending: VecDeque::new(),
            blocks: Vec::new(),
            next_tool: 0,
            finish: None,
            eof: false,
            outcome: None,
        }
    }

    /// Appends received body bytes; they may split events anywhere.
    pub fn push(&mut self, bytes: &[u8]) {
        self.decoder.push(bytes);
    }

    /// Marks the end of the body: without `message_stop` first, the answer
    /// was cut and ends with an error.
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
                    let handled = self.handle(&ev.data);
                    self.decoder.recycle(ev);
                    if let Err(e) = handled {
                        self.pending.clear();
                        self.outcome = Some("error");
                        return Err(e);
                    }
                }
                Ok(None) if self.eof => {
                    self.outcome = Some("eof");
                    return Err(self.malformed("stream ended without message_stop"));
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

    fn block(&self, index: Option<u64>) -> Option<BlockKind> {
        let index = index?;
        self.blocks
            .iter()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, k)| *k)
    }

    /// Parses one SSE `data` payload into pending events.
    fn handle(&mut self, data: &str) -> Result<(), LlmError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let ev: wire::WireEvent<'_> = serde_json::from_str(data).map_err(|e| {
            // serde_json's own message can quote the payload, i.e. model output.
            self.malformed(format!(
                "stream event is not valid JSON ({:?} error at line {} column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        match &*ev.kind {
            "message_start" => {
                if let Some(u) = ev.message.and_then(|m| m.usage) {
                    self.pending.push_back(StreamEvent::Usage(usage(&u)));
                }
            }
            "content_block_start" => {
                let (Some(index), Some(block)) = (ev.index, ev.content_block) else {
                    return Err(self.malformed("content_block_start without index or block"));
                };
                let kind = match &*block.kind {
                    "text" => {
                        if let Some(text) = block.text.filter(|t| !t.is_empty()) {
                            self.pending.push_back(StreamEvent::TextDelta(text));
                        }
                        BlockKind::Text
                    }
                    "tool_use" => {
                        let call = self.next_tool;
                        self.next_tool = self.next_tool.saturating_add(1);
                        self.pending.push_back(StreamEvent::ToolCallDelta {
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
                            self.pending
                                .push_back(StreamEvent::ThinkingDelta { text, signature });
                        }
                        BlockKind::Thinking
                    }
                    _ => BlockKind::Other,
                };
                self.blocks.push((index, kind));
            }
            "content_block_delta" => {
                let Some(delta) = ev.delta else {
                    return Err(self.malformed("content_block_delta without delta"));
                };
                let block = self.block(ev.index);
                match delta.kind.as_ref().map(|k| &*k.0) {
                    Some("text_delta") => {
                        if let Some(text) = delta.text.filter(|t| !t.is_empty()) {
                            self.pending.push_back(StreamEvent::TextDelta(text));
                        }
                    }
                    Some("input_json_delta") => {
                        // Server tools (web search) stream input too: not ours to run.
                        if let Some(BlockKind::Tool(call)) = block
                            && let Some(part) = delta.partial_json.filter(|p| !p.is_empty())
                        {
                            self.pending.push_back(StreamEvent::ToolCallDelta {
                                index: call,
                                id: None,
                                name: None,
                                arguments: part,
                            });
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(text) = delta.thinking.filter(|t| !t.is_empty()) {
                            self.pending.push_back(StreamEvent::ThinkingDelta {
                                text,
                                signature: None,
                            });
                        }
                    }
                    Some("signature_delta") => {
                        if let Some(sig) = delta.signature.filter(|s| !s.is_empty()) {
                            self.pending.push_back(StreamEvent::ThinkingDelta {
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
                    self.pending.push_back(StreamEvent::Usage(usage(&u)));
                }
            }
            "message_stop" => {
                // No stop_reason at all: tool calls mean the model wants them run.
                let reason = self.finish.take().unwrap_or(if self.next_tool > 0 {
                    FinishReason::ToolCalls
                } else {
                    FinishReason::Stop
                });
                self.pending.push_back(StreamEvent::Finish(reason));
                self.outcome = Some("done");
            }
            "error" => {
                let facts = ErrorFacts {
                    err_type: ev.error.as_ref().and_then(|e| e.kind.as_deref()),
                    message: ev.error.as_ref().and_then(|e| e.message.as_deref()),
                    ..ErrorFacts::default()
                };
                let mut message = String::from("provider error mid-stream");
                facts.describe(&mut message);
                return Err(self.error(facts.kind(), message));
            }
            // `content_block_stop`, `ping`, and event types added later.
            _ => {}
        }
        Ok(())
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
    use crate::transport::{cap, parse_retry_after};

    #[test]
    fn rejects_bad_config() {
        let client = reqwest::Client::new();
        let mut cfg = AnthropicConfig::new("p", "ftp://x");
        assert_eq!(
            AnthropicProvider::new(cfg.clone(), client.clone())
                .unwrap_err()
                .kind,
            ErrorKind::InvalidRequest
        );
        cfg.base_url = "not a url".into();
        assert!(AnthropicProvider::new(cfg.clone(), client.clone()).is_err());
        cfg.base_url = "http://127.0.0.1:1/".into();
        let p = AnthropicProvider::new(cfg.clone(), client.clone()).unwrap();
        assert_eq!(p.url.as_str(), "http://127.0.0.1:1/v1/messages");
        cfg.max_tokens = 0;
        assert!(AnthropicProvider::new(cfg.clone(), client.clone()).is_err());
        cfg.max_tokens = 10;
        cfg.headers = vec![("bad name".into(), "v".into())];
        assert!(AnthropicProvider::new(cfg.clone(), client.clone()).is_err());
        cfg.headers = vec![("x-ok".into(), "line\nbreak".into())];
        let err = AnthropicProvider::new(cfg.clone(), client.clone()).unwrap_err();
        assert!(!err.message.contains("break"));
        cfg.headers.clear();
        cfg.api_key = Some("sk-ant-secret\n".into());
        let err = AnthropicProvider::new(cfg.clone(), client).unwrap_err();
        assert!(!err.message.contains("sk-ant-secret"));
        assert!(!format!("{cfg:?}").contains("sk-ant-secret"));
    }

    #[test]
    fn defaults() {
        let cfg = AnthropicConfig::new("a", "");
        assert_eq!(cfg.base_url, "https://api.anthropic.com");
        assert_eq!(cfg.version, "2023-06-01");
        assert_eq!(cfg.max_tokens, 8192);
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
